"""The report's sections, one module each, in the order the report prints them.

Each module turns one part of a :class:`~replay.result.ReplayResult` (and of
the :class:`~replay.report.html.facts.BundleFacts`) into one
:class:`~replay.report.html.view.Section`; :func:`replay.report.html.model.build_model`
assembles them.

- :mod:`.headline`: the verdict, key figures and the derivation of the published figures
- :mod:`.trials`: every request of the accepted attempt, charted, and the arm statistics
- :mod:`.quality`: the frozen quality gates and every margin
- :mod:`.claims`: each claim, claimed and recomputed
- :mod:`.sources`: where each optimization came from, adopted or not
- :mod:`.attempts`: every attempt, and the proof they were not mixed
- :mod:`.conformance`: the receipts against the frozen plan
- :mod:`.lifecycle`: worker exits at teardown
- :mod:`.telemetry`: sampled peak HBM
- :mod:`.scorer`: the learned scorer's identity, by weight hash
- :mod:`.signatures`: signers, integrity, environment
- :mod:`.artifacts`: external artifacts, bound by hash
- :mod:`.not_claimed`: what the author does not claim
- :mod:`.media`, :mod:`.rerun`: the optional media re-score and rerun comparison

Shared: :mod:`.common` (number formats, status styles) and :mod:`.claim_notes`
(the claim that states a figure). Importing this package loads no section.
"""
