"""A signed bundle's frozen plan is schema-checked once, where the bundle is read.

A signature says who sealed a bundle, not that its plan is sane. Before, each
plan reader re-checked the fields it used and guessed past a bad one: a
``timeouts.request_s`` of ``"x"`` silently dropped the request-timeout warning, a
TERM wait of -1 s made every worker exit "over budget", an ``arm_order`` string
was read letter by letter. Now ``bundler.content.read_content`` (replay's and
rerun's one entry) refuses such a bundle with a located ``BundleFormatError``
(exit 1) naming the plan member and the field's JSON path, as seal would have.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from bundler.content import read_content
from bundler.errors import BundleFormatError
from bundler.format.container import read_container
from bundler.format.trust import Trust
from bundler.verified import open_verified
from rerun.source import read_sealed
from tests.hostile_content import hostile_bundle

KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
ROOT = Path(__file__).resolve().parents[1]
PLAN = "plans/p.json"


def _set(path: tuple[str, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(plan: dict[str, Any]) -> None:
        d = plan
        for k in path[:-1]:
            d = d[k]
        d[path[-1]] = value

    return edit


# (case, edit of the sealed plan, the JSON path the refusal must name)
CASES = [
    ("request-timeout-string", _set(("timeouts", "request_s"), "x"), "timeouts.request_s"),
    (
        "negative-term-wait",
        _set(("teardown", "baseline", "term_wait_s"), -1),
        "teardown.baseline.term_wait_s",
    ),
    ("arm-order-string", _set(("arm_order",), "baseline"), "arm_order"),
    ("warmups-bool", _set(("warmups_per_server",), True), "warmups_per_server"),
]


def _bundle(tmp_path: Path, edit: Callable[[dict[str, Any]], None]) -> Path:
    """The mini campaign, sealed and signed, its plan member edited and the bundle re-signed."""
    honest = hostile_bundle(tmp_path / "honest.bundle", KEY, {})
    plan = json.loads(next(m.data for m in read_container(honest) if m.name == PLAN))
    edit(plan)
    return hostile_bundle(tmp_path / "bad.bundle", KEY, {PLAN: json.dumps(plan).encode()})


@pytest.fixture(scope="module")
def pub(tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("key") / "author.pub"
    p.write_bytes(KEY.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo))
    return p


@pytest.mark.parametrize(("case", "edit", "field"), CASES, ids=[c[0] for c in CASES])
def test_replay_refuses_a_plan_that_breaks_the_schema(
    case: str, edit: Callable[[dict[str, Any]], None], field: str, pub: Path, tmp_path: Path
) -> None:
    bundle = _bundle(tmp_path, edit)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run(
        [sys.executable, "-m", "reprobundle", "replay", str(bundle), "--key", str(pub), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert "Traceback" not in run.stderr, run.stderr[-3000:]
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    doc = json.loads(run.stdout)
    assert PLAN in doc["error"] and "plan schema" in doc["error"]
    assert [(p["where"], p["field"]) for p in doc["problems"]] == [(PLAN, field)], doc


@pytest.mark.parametrize(("case", "edit", "field"), CASES[:2], ids=[c[0] for c in CASES[:2]])
def test_rerun_reads_the_same_refusal(
    case: str, edit: Callable[[dict[str, Any]], None], field: str, tmp_path: Path
) -> None:
    verified = open_verified(_bundle(tmp_path, edit), trust=Trust.keys([KEY.public_key()]))
    for read in (read_content, read_sealed):
        with pytest.raises(BundleFormatError) as err:
            read(verified)
        assert [(p.where, p.field) for p in err.value.problems] == [(PLAN, field)]


def test_an_honest_plan_is_read_typed(tmp_path: Path) -> None:
    verified = open_verified(
        hostile_bundle(tmp_path / "honest.bundle", KEY, {}), trust=Trust.keys([KEY.public_key()])
    )
    plan = read_content(verified).plan
    assert plan is not None
    # The values tests/campaign_builder.py writes.
    assert plan.arm_order == ("baseline", "candidate", "candidate", "baseline")
    assert plan.timeouts is not None and plan.timeouts.request_s == 600
    assert plan.teardown is not None
    budget = plan.teardown.get("candidate")
    assert budget is not None and (budget.term_wait_s, budget.kill_wait_s) == (30, 60)


_SCORER = {
    "name": "lpips",
    "version": "0.1.4",
    "net": "alex",
    "weights": [{"role": "backbone", "file": "w.pth", "sha256": "ab" * 32, "bytes": 7}],
    "x-note": "kept",
}


def test_an_honest_scorer_is_read_typed_with_its_unknown_fields(tmp_path: Path) -> None:
    raw = json.dumps(_SCORER).encode()
    bundle = hostile_bundle(tmp_path / "s.bundle", KEY, {}, extra_files={"scorer.json": raw})
    scorer = read_content(open_verified(bundle, trust=Trust.keys([KEY.public_key()]))).scorer
    assert scorer is not None
    assert (scorer.name, scorer.version, scorer.net) == ("lpips", "0.1.4", "alex")
    assert [(w.role, w.sha256, w.bytes) for w in scorer.weights] == [("backbone", "ab" * 32, 7)]
    assert scorer.to_dict() == _SCORER


def test_replay_refuses_a_scorer_that_breaks_the_schema(pub: Path, tmp_path: Path) -> None:
    # A scorer.json whose weight entry has no SHA-256 was once read with .get and shown
    # as "None"; it is now refused where the bundle is read, located by member and field.
    bad = {**_SCORER, "weights": [{"role": "backbone", "file": "w.pth"}]}
    bundle = hostile_bundle(
        tmp_path / "bad.bundle",
        KEY,
        {"scorer.json": json.dumps(bad).encode()},
        extra_files={"scorer.json": json.dumps(_SCORER).encode()},
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run(
        [sys.executable, "-m", "reprobundle", "replay", str(bundle), "--key", str(pub), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert "Traceback" not in run.stderr, run.stderr[-3000:]
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    doc = json.loads(run.stdout)
    assert "scorer schema" in doc["error"]
    assert [(p["where"], p["field"]) for p in doc["problems"]] == [("scorer.json", "weights.0")]
