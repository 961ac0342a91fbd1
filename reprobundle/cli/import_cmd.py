"""``bundle import FORMAT SOURCE... -o DIR``: a benchmark tool's files as a campaign directory."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from bundler.errors import EXIT_OK, UsageError
from reprobundle.cli.common import (
    QUIET,
    cli_errors,
    emit_json,
    examples,
    json_option,
    say,
    verbosity_options,
)

__all__ = ["import_command"]

_SLOS = ("ttft", "tpot", "e2el")

IMPORT_EXIT_HELP = """\b
Exit codes:
  0  campaign directory written
  2  a source is missing, not in FORMAT, truncated or inconsistent (file and
     field named); an option is malformed; -o exists. Nothing is written.
  3  cannot read a source that exists, or write the directory
"""


def _pairs(values: tuple[str, ...], option: str) -> list[tuple[str, str]]:
    out = []
    for v in values:
        name, sep, rest = v.partition("=")
        if not sep or not name or not rest:
            raise UsageError(f"{option} {v!r}: expected NAME=VALUE")
        out.append((name, rest))
    return out


def _goodput(values: tuple[str, ...]) -> dict[str, float] | None:
    out: dict[str, float] = {}
    for v in values:
        name, sep, ms = v.partition(":")
        try:
            x = float(ms)
        except ValueError:
            x = -1.0
        if not sep or name not in _SLOS or not x > 0:
            raise UsageError(f"--goodput {v!r}: expected ttft|tpot|e2el:MILLISECONDS (> 0)")
        out[name] = x
    return out or None


def _hardware(v: str | None) -> tuple[str, int] | None:
    if v is None:
        return None
    name, sep, count = v.rpartition(":")
    if not sep or not name or not count.isdigit():
        raise UsageError(f"--hardware {v!r}: expected ACCELERATOR:COUNT")
    return name, int(count)


@click.command(
    "import",
    epilog=examples(
        "bundle import vllm --arm baseline=base.json --arm candidate=cand.json "
        "--commit baseline=aaaaaaa --commit candidate=bbbbbbb -o imported",
        "bundle import vllm --arm baseline=base.json --arm candidate=cand.json "
        "--commit baseline=aaaaaaa --commit candidate=bbbbbbb -o imported-2 --json",
    )
    + IMPORT_EXIT_HELP,
)
@click.argument("fmt", metavar="FORMAT")
@click.argument("sources", nargs=-1, type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    required=True,
    help="The campaign directory to create (must not exist).",
)
@click.option(
    "--arm",
    "arms",
    multiple=True,
    metavar="NAME=FILE",
    help="Assign a source file to an arm (repeat; the first arm is the baseline).",
)
@click.option(
    "--commit",
    "commits",
    multiple=True,
    metavar="ARM=SHA",
    help="The runtime commit of an arm (required for every arm: the tools do not record it).",
)
@click.option(
    "--goodput",
    "goodput",
    multiple=True,
    metavar="METRIC:MS",
    help="The SLOs the run's --goodput used (ttft|tpot|e2el:ms), so that the "
    "recorded goodput becomes a checked claim.",
)
@click.option(
    "--decimals",
    type=click.IntRange(0, 12),
    default=2,
    show_default=True,
    help="Precision of the imported aggregate claims (the tool prints 2).",
)
@click.option(
    "--hardware",
    metavar="ACCELERATOR:COUNT",
    default=None,
    help="The hardware, which the tools do not record.",
)
@click.option("--id", "campaign_id", default=None, help="Campaign id (default: from -o).")
@verbosity_options
@json_option
def import_command(
    fmt: str,
    sources: tuple[Path, ...],
    output: Path,
    arms: tuple[str, ...],
    commits: tuple[str, ...],
    goodput: tuple[str, ...],
    decimals: int,
    hardware: str | None,
    campaign_id: str | None,
    verbosity: int,
    as_json: bool,
) -> None:
    """Import a serving benchmark's result files as a campaign directory.

    FORMAT: vllm, aiperf, guidellm, sglang, inference-perf or vllm-omni
    (vllm bench serve --omni, /v1/videos).

    Every SOURCE must be assigned to an arm with --arm NAME=FILE (a file named only
    by --arm is a source too). The source files are carried verbatim; the
    aggregates the tool wrote become claims that replay re-derives. Nothing is
    written unless every source is usable.
    """
    from bundler.importers.write import import_campaign
    from replay.serving.preview import missing_load_points, unverifiable_claims

    with cli_errors(as_json):
        assigned = [(a, Path(f)) for a, f in _pairs(arms, "--arm")]
        named = {p.resolve() for _, p in assigned}
        loose = [str(s) for s in sources if s.resolve() not in named]
        if loose:
            raise UsageError(f"no arm for {', '.join(loose)}: assign each with --arm NAME=FILE")
        res = import_campaign(
            fmt,
            assigned,
            output,
            dict(_pairs(commits, "--commit")),
            campaign_id=campaign_id,
            decimals=decimals,
            goodput=_goodput(goodput),
            hardware=_hardware(hardware),
        )
        lps = sorted({r.load_point for r in res.runs})
        partial = [r.source for r in res.runs if not r.detailed]
        unverifiable = unverifiable_claims(res.runs, res.claim_rows)
        missing = missing_load_points(res.runs)
        limits = sorted({str(b) for r in res.runs if (b := r.meta.get("timing_boundary"))})
        if as_json:
            emit_json(
                {
                    "ok": True,
                    "directory": str(res.directory),
                    "sources": [r.source for r in res.runs],
                    "load_points": lps,
                    "claims": res.claims,
                    "not_claimed": res.not_claimed,
                    "aggregates_only": partial,
                    "limits": limits,
                    "unverifiable": [
                        {"reason": u.reason, "claims": list(u.claim_ids)} for u in unverifiable
                    ],
                    "load_points_missing": {lp: list(a) for lp, a in missing.items()},
                }
            )
            sys.exit(EXIT_OK)
        n_files = len({r.source for r in res.runs})
        runs = f" ({len(res.runs)} runs)" if n_files != len(res.runs) else ""
        say(
            f"imported {n_files} source file(s){runs}, {len(lps)} load point(s) "
            f"({', '.join(lps)}), {res.claims} claim(s), {res.not_claimed} not claimed "
            f"-> {res.directory}"
        )
        for limit in limits:
            say(f"limit: {limit}", err=True)
        n_unv = sum(len(u.claim_ids) for u in unverifiable)
        if n_unv:
            say(
                f"warning: {n_unv} of {res.claims} claim(s) will be unverifiable at replay:",
                err=True,
            )
        for u in unverifiable:
            ids = ", ".join(u.claim_ids[:3]) + (", ..." if len(u.claim_ids) > 3 else "")
            say(f"  {len(u.claim_ids)} ({ids}): {u.reason}", err=True)
        if missing:
            say(
                f"warning: {len(missing)} load point(s) not run by every arm; replay reports "
                "each as a deviation (a GuideLLM sweep picks its rates per arm: give the "
                "arms the same rates to compare them there):",
                err=True,
            )
        for lp, lacking in missing.items():
            say(f"  {lp}: no run of {', '.join(lacking)}", err=True)
        if verbosity > QUIET:
            say(f"next: bundle seal {res.directory} -o RUN.bundle --key KEY")
    sys.exit(EXIT_OK)
