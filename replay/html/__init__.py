"""``bundle report``: a replay drawn as one self-contained HTML page or as Markdown.

- :mod:`replay.html.render`: open, verify and replay a bundle, then render
  (:func:`~replay.html.render.render_report`)
- :mod:`replay.html.model`: the replay (plus signatures, sources, artifacts,
  individual requests) turned into a view model (:mod:`replay.html.view`),
  one section per module of :mod:`replay.html.sections`
- :mod:`replay.html.facts` / :mod:`replay.html.jsonform`: the model's inputs
  beyond the replay (what the opened bundle says; the media and rerun JSON forms)
- :mod:`replay.html.charts`: the repeated-trial chart, inline SVG (matplotlib)
- :mod:`replay.html.html` / :mod:`replay.html.markdown`: the two renderers
- :mod:`replay.html.text`: escaping, and closing syntax neutralized
- :mod:`replay.html.extras`: the optional media replay and rerun sections, under
  their former import path

See ``docs/report.md``. Importing this package loads nothing heavy; matplotlib
is imported only when a chart is drawn.
"""
