"""Importers: benchmark-tool output (vLLM ``bench serve``, ...) to a campaign directory.

One module per source format parses a tool's file into a :class:`ServingRun`
(``bundler.format.serving_run``); ``bundler.importers.write`` turns runs into a
campaign directory that ``bundle seal`` accepts. Replay parses the carried
source files with the same parsers, so a statistic is re-derived from the
bytes the tool wrote, never from a converted copy.
"""

from __future__ import annotations
