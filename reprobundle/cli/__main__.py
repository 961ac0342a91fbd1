"""``python -m reprobundle.cli``: the ``bundle`` command."""

from reprobundle.cli.main import run

run()
