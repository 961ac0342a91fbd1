"""``bundle report``: a replay drawn as one self-contained HTML page or as Markdown.

- :mod:`replay.report.html.render`: open, verify and replay a bundle, then render
  (:func:`~replay.report.html.render.render_report`)
- :mod:`replay.report.html.model`: the replay (plus signatures, sources, artifacts,
  individual requests) turned into a view model (:mod:`replay.report.html.view`),
  one section per module of :mod:`replay.report.html.sections`
- :mod:`replay.report.html.facts`: the model's inputs beyond the replay (what the
  opened bundle says)
- :mod:`replay.report.html.charts`: the repeated-trial chart, inline SVG (matplotlib)
- :mod:`replay.report.html.html` / :mod:`replay.report.markdown`: the two renderers
- :mod:`replay.report.escape`: escaping, and closing syntax neutralized

See ``docs/report.md``. Importing this package loads nothing heavy; matplotlib
is imported only when a chart is drawn.
"""
