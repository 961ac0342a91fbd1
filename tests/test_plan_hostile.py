"""A plan whose request counts or literals are hostile, read by ``bundle run``, ``bundle rerun``'s
scheduler and ``bundle plan check``.

The plan schema bounds ``warmups_per_server`` and ``measured_per_server`` from below
only. Before the bound on planned requests (``bundler.campaign.plan_slots``), ``bundle
run --dry-run`` on a plan of 10**8 warmups per server built one request object per
warmup (the OOM killer stopped it at 24 GB; under a 3 GB address-space limit it ended
in a MemoryError traceback), and ``bundle plan check`` on a 400-digit count ended in
an OverflowError traceback.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from reprobundle.cli.main import main
from tests.reference_server.campaign import (
    BASELINE_COMMIT,
    CANDIDATE_COMMIT,
    campaign_plan,
    tiny_png,
)
from tests.test_memory_bound import run_capped

ROOT = Path(__file__).resolve().parents[1]
D400 = "9" * 400


def _plan_file(tmp: Path, key: str, literal: str) -> Path:
    plan: dict[str, Any] = campaign_plan()
    plan[key] = "@@raw@@"
    path = tmp / "plan.json"
    path.write_text(json.dumps(plan).replace('"@@raw@@"', literal), encoding="utf-8")
    return path


def _inputs(tmp: Path) -> Path:
    inputs = tmp / "inputs-dir"
    (inputs / "inputs").mkdir(parents=True)
    (inputs / "inputs" / "reference.png").write_bytes(tiny_png())
    return inputs


def _run(plan: Path, out: Path, inputs: Path) -> list[str]:
    return [
        "run",
        str(plan),
        "-o",
        str(out),
        "--arm",
        f"baseline={BASELINE_COMMIT}",
        "--arm",
        f"candidate={CANDIDATE_COMMIT}",
        "--campaign-id",
        "c",
        "--inputs",
        str(inputs),
        "--launch",
        "--dry-run",
        "--kind",
        "pilot",
    ]


def _invoke(args: list[str]) -> Result:
    return CliRunner().invoke(main, args, catch_exceptions=True)


COUNTS = [
    # (key, literal, the count as the message shows it)
    ("warmups_per_server", "100001", "100,001 warmup(s)"),
    ("measured_per_server", str(10**8), "100,000,000 measured"),
    # From a file, a 400-digit count is refused by the loader (below); from a bundle's
    # plan, by the bound.
    ("warmups_per_server", str(10**19), "about 10^19 warmup(s)"),
]


@pytest.mark.parametrize(("key", "literal", "shown"), COUNTS)
def test_bundle_run_refuses_a_plan_of_more_requests_than_any_campaign(
    tmp_path: Path, key: str, literal: str, shown: str
) -> None:
    out = tmp_path / "campaign"
    res = _invoke(_run(_plan_file(tmp_path, key, literal), out, _inputs(tmp_path)))
    assert isinstance(res.exception, SystemExit), repr(res.exception)
    assert res.exit_code == 2, res.output
    assert "plans/reference-ab.json" in res.output
    assert "more than 100,000 requests" in res.output and shown in res.output
    assert not out.exists()


@pytest.mark.parametrize(("key", "literal", "shown"), COUNTS)
def test_plan_check_reports_a_plan_of_more_requests_than_any_campaign(
    tmp_path: Path, key: str, literal: str, shown: str
) -> None:
    res = _invoke(["plan", "check", str(_plan_file(tmp_path, key, literal))])
    assert isinstance(res.exception, SystemExit), repr(res.exception)
    assert res.exit_code == 2, res.output  # the plan has errors (docs/exit-codes.md)
    assert "more than 100,000 requests" in res.output and shown in res.output


def test_bundle_run_memory_stays_bounded_on_10_to_the_8_warmups(tmp_path: Path) -> None:
    # The dry run in a child process, under a 3 GiB address-space cap, with its own peak
    # RSS: 10**8 warmups would need gigabytes if they were ever built. The child is
    # started through run_capped's launcher, because Linux charges a child forked
    # straight from pytest with pytest's own RSS (late in a full run, 800 MiB and more).
    args = _run(
        _plan_file(tmp_path, "warmups_per_server", str(10**8)),
        tmp_path / "campaign",
        _inputs(tmp_path),
    )
    run = run_capped(args, 3 << 30)
    assert "Traceback" not in run.text, run.text
    assert run.rc == 2, run.text
    assert run.peak_rss < 512 << 20, f"peak RSS {run.peak_rss >> 20} MiB"


def test_an_honest_plan_still_dry_runs(tmp_path: Path) -> None:
    res = _invoke(
        _run(_plan_file(tmp_path, "warmups_per_server", "2"), tmp_path / "c", _inputs(tmp_path))
    )
    assert res.exit_code == 0, res.output


DEEP = "[" * 100_000 + "]" * 100_000
LITERALS = [
    # (key, literal, field named): each ended in a traceback before the plan was read
    # with the shared bounded loader (bundler/_internal/jsonload.py).
    ("description", DEEP, "description[0][0][0][0][0][0][0]..."),  # RecursionError
    ("startup_budget_s", D400, "startup_budget_s"),  # OverflowError in the check
    ("startup_budget_s", "1e400", "startup_budget_s"),  # inf, past the schema
    ("warmups_per_server", D400, "warmups_per_server"),  # OverflowError in the check
]


@pytest.mark.parametrize(("key", "literal", "field"), LITERALS)
def test_bundle_run_refuses_hostile_plan_literals_naming_the_field(
    tmp_path: Path, key: str, literal: str, field: str
) -> None:
    out = tmp_path / "campaign"
    res = _invoke(_run(_plan_file(tmp_path, key, literal), out, _inputs(tmp_path)))
    assert isinstance(res.exception, SystemExit), repr(res.exception)
    assert res.exit_code == 2, res.output
    assert "plan.json" in res.output and f"field '{field}'" in res.output, res.output
    assert not out.exists()


@pytest.mark.parametrize(("key", "literal", "field"), LITERALS)
def test_plan_check_refuses_hostile_plan_literals_naming_the_field(
    tmp_path: Path, key: str, literal: str, field: str
) -> None:
    res = _invoke(["plan", "check", str(_plan_file(tmp_path, key, literal))])
    assert isinstance(res.exception, SystemExit), repr(res.exception)
    assert res.exit_code == 2, res.output
    assert "plan.json" in res.output and f"field '{field}'" in res.output, res.output


@pytest.mark.parametrize(("key", "literal", "field"), LITERALS)
def test_plan_check_refuses_a_bundle_whose_plan_holds_hostile_literals(
    tmp_path: Path, key: str, literal: str, field: str
) -> None:
    # A signer can write any plan member and sign it: a malformed bundle, exit 1.
    from tests.conftest import make_keys
    from tests.hostile_content import hostile_bundle

    plan: dict[str, Any] = {"id": "p", "arm_order": ["baseline", "candidate"], key: "@@raw@@"}
    raw = json.dumps(plan).replace('"@@raw@@"', literal).encode()
    keys = make_keys(tmp_path)
    bundle = hostile_bundle(tmp_path / "h.bundle", keys.private, {"plans/p.json": raw})
    res = _invoke(["plan", "check", str(bundle)])
    assert isinstance(res.exception, SystemExit), repr(res.exception)
    assert res.exit_code == 1, res.output
    assert "h.bundle:plans/p.json" in res.output and f"field '{field}'" in res.output, res.output
