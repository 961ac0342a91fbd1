"""The ``bundle`` command group: its help, and one registered command per module.

Each command lives in its own module (``keygen_cmd.py``, ``seal_cmd.py``, ...):
it parses, calls one library function, and prints text or JSON through
:mod:`reprobundle.cli.common`. Exit codes (``docs/exit-codes.md``): 0 ok; 1
integrity failure (tampered, truncated, unsigned or untrusted bundle); 2 usage
or input error (bad arguments, invalid campaign, unreadable key); 3 could not
run (I/O, missing optional dependency); 4 a claim contradicted or a gate failed
(replay); 5 a claim could not be verified (replay); 6 the two bundles'
content differs (diff).
"""

from __future__ import annotations

import contextlib
import os
import sys

import click

from reprobundle.cli.common import JsonAwareGroup, examples
from reprobundle.cli.diff_cmd import diff_command
from reprobundle.cli.export_cmd import export_command
from reprobundle.cli.import_cmd import import_command
from reprobundle.cli.init_cmd import init_command
from reprobundle.cli.inspect_cmd import inspect_command
from reprobundle.cli.inventory_cmd import inventory_command
from reprobundle.cli.keygen_cmd import keygen_command
from reprobundle.cli.lint_text_cmd import lint_text_command
from reprobundle.cli.plan_cmd import plan_group
from reprobundle.cli.replay_cmd import replay_command
from reprobundle.cli.report_cmd import report_command
from reprobundle.cli.rerun_cmd import rerun_command
from reprobundle.cli.run_cmd import run_command
from reprobundle.cli.seal_cmd import seal_command
from reprobundle.cli.sign_cmd import sign_command
from reprobundle.cli.verify_cmd import verify_command

__all__ = ["main", "run"]

EXIT_HELP = """\b
Exit codes (each command's own are listed in its --help):
  0  ok
  1  integrity failure: tampered, truncated, unsigned or untrusted bundle, wrong key
  2  usage or input error: bad arguments, a missing file, invalid campaign, unreadable key
  3  could not run: I/O error, missing optional dependency
  4  replay/report/rerun: a claim contradicted, a gate failed, an attempt rejected
  5  replay/report: a claim could not be verified
  6  diff: both bundles verified, and their content differs
"""


_MAIN_EXAMPLES = examples(
    "bundle keygen -o me                         # writes me and me.pub",
    "bundle seal campaign -o mine.bundle --key me  # validate, seal and sign",
    "bundle replay mine.bundle --key me.pub        # re-derive every claim",
)


@click.group(
    cls=JsonAwareGroup,
    epilog=_MAIN_EXAMPLES + EXIT_HELP,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.version_option(package_name="reprobundle", prog_name="reprobundle")
def main() -> None:
    """Seal, verify, sign, inspect and replay ML-serving performance campaigns."""


# The commands import their heavy parts (Arrow, the replayer, Ray) lazily, inside
# the command, so that `bundle --help` and the small commands stay quick.
for _command in (
    keygen_command,
    seal_command,
    verify_command,
    diff_command,
    sign_command,
    inspect_command,
    lint_text_command,
    inventory_command,
    replay_command,
    report_command,
    plan_group,
    rerun_command,
    run_command,
    import_command,
    init_command,
    export_command,
):
    main.add_command(_command)


def run() -> None:
    """Console entry point: run ``main`` and leave without tearing down native threads.

    Arrow's C++ thread pools can abort the interpreter's final teardown ("terminate
    called without an active exception", apache/arrow issue 34314) after all our
    work is done and written, turning a success into SIGABRT. Once the command has
    finished, we flush and end the process directly. Every output file is already
    closed (atomic writes complete inside the command); a real exception still
    propagates with its traceback.
    """
    try:
        main()
        code = 0
    except SystemExit as exc:
        if isinstance(exc.code, str):
            sys.stderr.write(exc.code + "\n")
            code = 1
        else:
            code = int(exc.code or 0)
    for stream in (sys.stdout, sys.stderr):
        # A closed pipe (``bundle inspect | head``) is not our failure.
        with contextlib.suppress(OSError):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    run()
