"""A plan whose request counts or literals are hostile, read by ``bundle run``, ``bundle rerun``'s
scheduler and ``bundle plan check``.

The plan schema bounds ``warmups_per_server`` and ``measured_per_server`` from below
only. Before the bound on planned requests (``bundler.campaign.plan_slots``), ``bundle
run --dry-run`` on a plan of 10**8 warmups per server built one request object per
warmup (the OOM killer stopped it at 24 GB; under a 3 GB address-space limit it ended
in a MemoryError traceback), and ``bundle plan check`` on a 400-digit count ended in
an OverflowError traceback.

Two bounds since: a plan may declare at most 10**9 requests (``MAX_PLANNED_REQUESTS``,
the plan check's and the seal's; an honest campaign of 10 million receipts seals), and
``bundle run``/``bundle rerun`` schedule at most 1,000,000 (``MAX_SCHEDULED_REQUESTS``;
``plan check`` warns of a plan over it with ``rerun-bound``).
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from cryptography.hazmat.primitives import serialization

from reprobundle.cli.main import main
from tests.fuzz.hostile import HostileBase, make_rerun_base, reseal
from tests.fuzz.properties import prepare_sentinel
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


# The reference plan: 4 arm positions, 1 warmup and 2 measured per server, no quality
# prompts; so a plan schedules 4 x (warmups + measured) requests.
RUN_REFUSED = [
    # (key, count, the total as the message shows it): over MAX_SCHEDULED_REQUESTS
    ("warmups_per_server", 249_999, "1,000,004"),  # the first total past 1,000,000
    ("measured_per_server", 10**8, "400,000,004"),
]
PLAN_REFUSED = [
    # (key, count, the count as the message shows it): over MAX_PLANNED_REQUESTS
    ("measured_per_server", 250_000_000, "250,000,000 measured"),  # 1,000,000,004 in all
    # From a file, a 400-digit count is refused by the loader (below); from a bundle's
    # plan, by the bound.
    ("warmups_per_server", 10**19, "about 10^19 warmup(s)"),
]


@pytest.mark.parametrize(("key", "count", "total"), RUN_REFUSED)
def test_bundle_run_refuses_a_plan_of_more_requests_than_it_can_schedule(
    tmp_path: Path, key: str, count: int, total: str
) -> None:
    out = tmp_path / "campaign"
    res = _invoke(_run(_plan_file(tmp_path, key, str(count)), out, _inputs(tmp_path)))
    assert isinstance(res.exception, SystemExit), repr(res.exception)
    assert res.exit_code == 2, res.output
    assert "plans/reference-ab.json" in res.output
    assert f"the plan schedules {total} requests" in res.output, res.output
    assert "at most 1,000,000" in res.output
    assert not out.exists()


@pytest.mark.parametrize(("key", "count", "shown"), PLAN_REFUSED)
def test_bundle_run_refuses_a_plan_of_more_requests_than_any_plan_may_declare(
    tmp_path: Path, key: str, count: int, shown: str
) -> None:
    out = tmp_path / "campaign"
    res = _invoke(_run(_plan_file(tmp_path, key, str(count)), out, _inputs(tmp_path)))
    assert isinstance(res.exception, SystemExit), repr(res.exception)
    assert res.exit_code == 2, res.output
    assert "plans/reference-ab.json" in res.output
    assert "more than 1,000,000,000 requests" in res.output and shown in res.output
    assert not out.exists()


def _check_json(plan: Path) -> tuple[int, dict[str, Any]]:
    res = _invoke(["plan", "check", str(plan), "--json"])
    assert isinstance(res.exception, SystemExit | None), repr(res.exception)
    return res.exit_code, json.loads(res.output)


@pytest.mark.parametrize(
    ("key", "count", "total"),
    [
        *RUN_REFUSED,
        ("warmups_per_server", 10**9 // 4 - 2, "1,000,000,000"),  # MAX_PLANNED_REQUESTS itself
    ],
)
def test_plan_check_warns_of_a_plan_run_and_rerun_refuse(
    tmp_path: Path, key: str, count: int, total: str
) -> None:
    # Such a plan may be sealed (issue 22 seals 10 million receipts); its author learns
    # before running it that bundle run and bundle rerun will not schedule it.
    rc, doc = _check_json(_plan_file(tmp_path, key, str(count)))
    assert rc == 0, doc
    bound = [f for f in doc["findings"] if f["code"] == "rerun-bound"]
    assert [f["level"] for f in bound] == ["warning"], doc["findings"]
    assert "more than 1,000,000 requests" in bound[0]["message"]
    assert f"this plan schedules {total}" in bound[0]["message"]
    assert not [f for f in doc["findings"] if f["level"] == "error"], doc["findings"]


def test_plan_check_does_not_warn_at_the_scheduling_bound(tmp_path: Path) -> None:
    # 4 x (249,998 + 2) = 1,000,000: bundle run and bundle rerun schedule it.
    rc, doc = _check_json(_plan_file(tmp_path, "warmups_per_server", "249998"))
    assert rc == 0, doc
    assert "rerun-bound" not in {f["code"] for f in doc["findings"]}, doc["findings"]


@pytest.mark.parametrize(("key", "count", "shown"), PLAN_REFUSED)
def test_plan_check_reports_a_plan_of_more_requests_than_any_plan_may_declare(
    tmp_path: Path, key: str, count: int, shown: str
) -> None:
    res = _invoke(["plan", "check", str(_plan_file(tmp_path, key, str(count)))])
    assert isinstance(res.exception, SystemExit), repr(res.exception)
    assert res.exit_code == 2, res.output  # the plan has errors (docs/exit-codes.md)
    assert "more than 1,000,000,000 requests" in res.output and shown in res.output
    assert "[invalid]" in res.output


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


def test_seal_accepts_a_campaign_whose_plan_schedules_more_than_100_000_requests(
    tmp_path: Path,
) -> None:
    # Issue 22 seals campaigns of 1M and 10M receipts; their frozen plan schedules as
    # many requests. The bound on what bundle run and rerun may build (then 100,000,
    # checked by the plan check) made the seal refuse them. 150,000 honest receipts: 4
    # servers x (2 warmups + 37,498 measured), as the plan says.
    # Loaded by name: mypy would otherwise see bench/replay_scale.py under two names.
    write_campaign = importlib.import_module("bench.replay_scale").write_campaign

    camp = tmp_path / "camp"
    write_campaign(camp, 150_000)
    plan = json.loads((camp / "plans" / "scale.json").read_text("utf-8"))
    planned = len(plan["arm_order"]) * (plan["warmups_per_server"] + plan["measured_per_server"])
    assert planned == 150_000
    bundle = tmp_path / "scale.bundle"
    res = _invoke(["seal", str(camp), "-o", str(bundle), "--unsigned"])
    assert res.exit_code == 0, res.output
    assert bundle.is_file()
    assert res.output.startswith("SEALED scale-150000"), res.output
    # Under the scheduling bound too: the plan check read from the bundle finds no error.
    check = _invoke(["plan", "check", str(bundle)])
    assert check.exit_code == 0, check.output


@pytest.fixture(scope="module")
def rerun_base(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, HostileBase]:
    """The reference campaign sealed by the fuzz author, and the author's public key."""
    root = tmp_path_factory.mktemp("rerun-base")
    base = make_rerun_base(prepare_sentinel(root))
    pub = root / "author.pub"
    pub.write_bytes(
        base.author.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return pub, base


@pytest.mark.parametrize(
    ("count", "shown"),
    [
        (249_999, "the plan schedules 1,000,004 requests"),  # 4 x (249,999 + 2)
        (10**19, "more than 1,000,000,000 requests"),
    ],
)
def test_bundle_rerun_refuses_a_sealed_plan_it_cannot_schedule(
    tmp_path: Path, rerun_base: tuple[Path, HostileBase], count: int, shown: str
) -> None:
    # A signer can seal any counts: the rerun refuses before building a request, exit 2
    # (as before the bounds were split), nothing written.
    pub, base = rerun_base
    edit = base.edit()
    edit.plan["warmups_per_server"] = count
    bundle = tmp_path / "case.bundle"
    bundle.write_bytes(reseal(base, edit))
    out = tmp_path / "out"
    args = ["rerun", str(bundle), "--key", str(pub), "--launch", "--inputs", str(_inputs(tmp_path))]
    res = _invoke([*args, "--telemetry", "none", "-o", str(out), "--dry-run"])
    assert isinstance(res.exception, SystemExit), repr(res.exception)
    assert res.exit_code == 2, res.output
    assert "plans/reference-ab.json" in res.output and shown in res.output, res.output
    assert not out.exists()
