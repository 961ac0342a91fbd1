"""``python -m reprobundle``: the ``bundle`` command."""

from reprobundle.cli.main import run

run()
