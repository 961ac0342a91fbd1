"""``bundle diff``: what changed between two verified bundles, for a reviewer.

:func:`diff_bundles` computes one typed :class:`BundleDiff` (verdict, gates and
frozen plan, tables, members, externals, signers), at a bounded cost; the views
in :mod:`replay.diff.render` print it as text, JSON or Markdown. Spec: docs/diff.md.
"""

from replay.diff.compute import diff_bundles
from replay.diff.model import BundleDiff, DiffLimits

__all__ = ["BundleDiff", "DiffLimits", "diff_bundles"]
