"""The ``bundle`` command: every click command, shared options and exit-code mapping.

This package is the only place that imports both ``bundler`` and ``replay``;
it parses arguments, calls the library, and renders the library's results.
"""

from reprobundle.cli.main import main, run

__all__ = ["main", "run"]
