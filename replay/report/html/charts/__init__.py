"""The report's charts as inline SVG text, drawn with matplotlib, byte-identical for the same data.

Two charts. The effect chart (:mod:`~replay.report.html.charts.latency`) puts every
arm's measured requests, server means and arm means on ONE axes whose y-axis starts at
zero, with an arrow from the baseline arm mean to the candidate's labelled with the
change the replay derived; warmups sit on a small axes of their own. The distribution
chart (:mod:`~replay.report.html.charts.distribution`) draws each arm's ECDF on one
latency axis from zero.

Marks carry stable ids: ``<chart>-measured-NNNN`` for each measured request
with status ok, ``<chart>-failed-NNNN`` for measured requests that did not
succeed, ``<chart>-warmup-NNNN`` for warmups, ``<chart>-servermean-NN`` and
``<chart>-armmean-NN`` for the means. Above ``INDIVIDUAL_MARKS_LIMIT``
requests the request marks are drawn into one embedded PNG (a ``data:`` URI,
still one dot per request; the means stay vectors): a hundred thousand SVG
groups would make a page no browser opens comfortably.

Modules: :mod:`~replay.report.html.charts.svg` (matplotlib set up for byte-identical
SVG, imported lazily, and the SVG cleaned and prefixed for inlining),
:mod:`~replay.report.html.charts.marks` (what a chart is drawn from, and the labels,
colours and ids of its marks), :mod:`~replay.report.html.charts.latency` and
:mod:`~replay.report.html.charts.distribution` (one chart each).
"""
