"""The format's typed documents (bundler/format/model.py) give back exactly what they read.

``to_dict(from_dict(x)) == x`` for the samples' plans and scorers, the sealed
vector bundle's manifest and statement, and Hypothesis-made documents carrying
unknown fields at every level; RFC 8785 bytes and key order are the same too.
A shape problem in a typed field is a located BundleFormatError.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bundler._internal import jcs
from bundler._internal.schemas import document_errors
from bundler.errors import BundleFormatError
from bundler.format.dsse import parse_envelope
from bundler.format.manifest import ENVELOPE_NAME, MANIFEST_NAME, parse_manifest
from bundler.format.model import Manifest, Statement
from bundler.format.plan_model import Plan, ScorerDoc
from bundler.format.trust import Trust
from bundler.verify import open_bundle

ROOT = Path(__file__).resolve().parents[1]
VECTOR = ROOT / "tests" / "vectors" / "mini.bundle"
PLANS = sorted(ROOT.glob("samples/*/plans/*.json"))
SCORERS = sorted(ROOT.glob("samples/*/scorer.json"))

_SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _same(doc: dict[str, Any], back: dict[str, Any]) -> None:
    assert back == doc
    assert jcs.dumps(back) == jcs.dumps(doc)
    assert json.dumps(back) == json.dumps(doc)  # key order too, nested included


@pytest.mark.parametrize("path", PLANS, ids=lambda p: str(p.relative_to(ROOT)))
def test_sample_plans_round_trip(path: Path) -> None:
    doc = json.loads(path.read_bytes())
    assert document_errors("plan", doc) == []
    plan = Plan.from_dict(doc, str(path))
    _same(doc, plan.to_dict())
    assert plan.id == doc["id"]
    assert plan.teardown is not None
    for arm, budget in doc["teardown"].items():
        typed = plan.teardown.get(arm)
        assert typed is not None and typed.term_wait_s == budget["term_wait_s"]


@pytest.mark.parametrize("path", SCORERS, ids=lambda p: str(p.relative_to(ROOT)))
def test_sample_scorers_round_trip(path: Path) -> None:
    doc = json.loads(path.read_bytes())
    scorer = ScorerDoc.from_dict(doc, str(path))
    _same(doc, scorer.to_dict())
    assert [w.sha256 for w in scorer.weights] == [w["sha256"] for w in doc["weights"]]


def test_the_vector_bundles_manifest_and_statement_round_trip() -> None:
    opened = open_bundle(VECTOR, trust=Trust.allow_unsigned())
    raw = opened.members[MANIFEST_NAME].read_bytes()
    manifest = parse_manifest(raw)
    assert jcs.dumps(manifest.to_dict()) == raw  # the sealed bytes, exactly
    assert opened.manifest == manifest
    payload = parse_envelope(opened.members[ENVELOPE_NAME].read_bytes()).payload
    statement = Statement.from_dict(json.loads(payload))
    assert jcs.dumps(statement.to_dict()) == payload
    assert statement.bound_manifest_sha256 == opened.members[MANIFEST_NAME].sha256
    assert statement.campaign_id == manifest.campaign.id


# --------------------------------------------------------------------------- generated

_KEY = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=8)
_SCALAR = st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=8)
_JSON = st.recursive(
    _SCALAR,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEY, inner, max_size=3),
    max_leaves=6,
)
_HEX = st.text("0123456789abcdef", min_size=64, max_size=64)
_NAME = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=12)


def _with_unknown(known: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """``known`` plus the generated fields whose names the schema does not use."""
    return {**known, **{k: v for k, v in extra.items() if k not in known and k != "uri"}}


_UNKNOWN = st.dictionaries(_KEY.map(lambda k: "x-" + k), _JSON, max_size=2)


@st.composite
def manifests(draw: st.DrawFn) -> dict[str, Any]:
    members = [
        _with_unknown(
            {
                "path": draw(_NAME),
                "sha256": draw(_HEX),
                "size": draw(st.integers(0, 2**40)),
                "role": draw(st.sampled_from(["document", "plan", "table", "log", "file"])),
            },
            draw(_UNKNOWN),
        )
        for _ in range(draw(st.integers(0, 3)))
    ]
    external = []
    for _ in range(draw(st.integers(0, 3))):
        e = {
            "path": draw(_NAME),
            "sha256": draw(_HEX),
            "bytes": draw(st.none() | st.integers(0, 2**40)),
            "kind": draw(st.sampled_from(["media", "weights", "log", "other"])),
            "availability": draw(_NAME),
            "hashed_at_seal": draw(st.booleans()),
        }
        if draw(st.booleans()):  # optional and nullable: absent, null and a string all occur
            e["uri"] = draw(st.none() | _NAME)
        external.append(_with_unknown(e, draw(_UNKNOWN)))
    arms = [
        _with_unknown({"id": draw(_NAME), "role": draw(_NAME), "runtime_commit": draw(_JSON)}, x)
        for x in draw(st.lists(_UNKNOWN, max_size=3))
    ]
    doc = {
        "format": "reprobundle",
        "format_version": "1",
        "campaign": _with_unknown(
            {"id": draw(_NAME), "title": draw(_KEY), "kind": draw(_NAME), "arms": arms},
            draw(_UNKNOWN),
        ),
        "members": members,
        "tables": draw(st.dictionaries(_NAME, st.integers(0, 2**40), max_size=3)),
        "external": external,
        "sanitization": _with_unknown(
            {
                "rules_version": draw(_NAME),
                "scrubbed": [
                    _with_unknown(
                        {
                            "member": draw(_NAME),
                            "field": draw(_KEY),
                            "rule": draw(_NAME),
                            "count": draw(st.integers(0, 9)),
                        },
                        x,
                    )
                    for x in draw(st.lists(_UNKNOWN, max_size=2))
                ],
                "unscrubbed": [
                    _with_unknown(
                        {
                            "member": draw(_NAME),
                            "line": draw(st.integers(1, 9)),
                            "rule": draw(_NAME),
                        },
                        x,
                    )
                    for x in draw(st.lists(_UNKNOWN, max_size=2))
                ],
            },
            draw(_UNKNOWN),
        ),
        "environment": draw(st.dictionaries(_NAME, _KEY, max_size=3)),
    }
    # The top level, members and external forbid unknown fields in the schema; the
    # model keeps them anyway (a later format may add some).
    return _with_unknown(doc, draw(_UNKNOWN))


@_SETTINGS
@given(manifests())
def test_generated_manifests_round_trip(doc: dict[str, Any]) -> None:
    _same(doc, Manifest.from_dict(doc).to_dict())


@_SETTINGS
@given(manifests().map(lambda d: {k: v for k, v in d.items() if not k.startswith("x-")}))
def test_generated_schema_valid_manifests_parse_to_their_bytes(doc: dict[str, Any]) -> None:
    for entry in (*doc["members"], *doc["external"]):
        for k in [k for k in entry if k.startswith("x-")]:
            del entry[k]
    raw = jcs.dumps(doc)
    assert jcs.dumps(parse_manifest(raw).to_dict()) == raw


_NUM = st.floats(0.001, 1e6, allow_nan=False) | st.integers(1, 10**6)


@st.composite
def reservations(draw: st.DrawFn) -> dict[str, Any]:
    r: dict[str, Any] = {"hard_limit_s": draw(_NUM)}
    for key in ("soft_term_s", "kill_grace_s"):
        if draw(st.booleans()):
            r[key] = draw(_NUM)
    if draw(st.booleans()):
        r["watchdog_is_failure_boundary"] = draw(st.booleans())
    if draw(st.booleans()):
        r["unfinished_arm_evidence"] = draw(_KEY)
    return _with_unknown(r, draw(_UNKNOWN))


@st.composite
def plans(draw: st.DrawFn) -> dict[str, Any]:
    request: dict[str, Any] = {
        "api": draw(st.sampled_from(["videos-async", "openai-completions"])),
        "timing_boundary": draw(_KEY),
    }
    if draw(st.booleans()):
        request["poll_interval_s"] = draw(_NUM)
    if draw(st.booleans()):
        request["payload"] = draw(st.dictionaries(_KEY, _JSON, max_size=3))
    doc: dict[str, Any] = {
        "plan_version": "1",
        "id": draw(_NAME),
        "request": _with_unknown(request, draw(_UNKNOWN)),
    }
    if draw(st.booleans()):
        doc["arm_order"] = draw(st.lists(_NAME, min_size=1, max_size=4))
    for key in ("warmups_per_server", "measured_per_server"):
        if draw(st.booleans()):
            doc[key] = draw(st.integers(0, 100))
    if draw(st.booleans()):
        t = {"request_s": draw(_NUM)}
        for key in ("wave_s", "arm_s"):
            if draw(st.booleans()):
                t[key] = draw(_NUM)
        doc["timeouts"] = _with_unknown(t, draw(_UNKNOWN))
    if draw(st.booleans()):
        doc["startup_budget_s"] = draw(_NUM)
    if draw(st.booleans()):
        doc["teardown"] = {
            arm: _with_unknown(
                {"term_wait_s": draw(_NUM), "kill_wait_s": draw(_NUM)}, draw(_UNKNOWN)
            )
            for arm in draw(st.lists(_NAME, max_size=3, unique=True))
        }
    sections = (("reservation", reservations()), ("quality", _JSON), ("launch", _JSON))
    for key, section in (*sections, ("load_points", _JSON)):
        if draw(st.booleans()):
            doc[key] = draw(section)
    return _with_unknown(doc, draw(_UNKNOWN))


@_SETTINGS
@given(plans())
def test_generated_plans_round_trip(doc: dict[str, Any]) -> None:
    _same(doc, Plan.from_dict(doc, "plans/p.json").to_dict())


@_SETTINGS
@given(st.data())
def test_generated_scorers_round_trip(data: st.DataObject) -> None:
    weights = []
    for _ in range(data.draw(st.integers(1, 3))):
        w: dict[str, Any] = {"role": data.draw(_NAME), "file": data.draw(_NAME)}
        w["sha256"] = data.draw(_HEX)
        if data.draw(st.booleans()):
            w["bytes"] = data.draw(st.integers(0, 2**40))
        weights.append(_with_unknown(w, data.draw(_UNKNOWN)))
    doc = {"name": data.draw(_NAME), "version": data.draw(_NAME), "weights": weights}
    if data.draw(st.booleans()):
        doc["net"] = data.draw(_KEY)
    doc = _with_unknown(doc, data.draw(_UNKNOWN))
    _same(doc, ScorerDoc.from_dict(doc).to_dict())


# --------------------------------------------------------------------------- shape problems


def test_a_plan_with_a_malformed_teardown_is_a_located_error() -> None:
    doc = {
        "plan_version": "1",
        "id": "p",
        "request": {"api": "videos-async", "timing_boundary": "t"},
        "teardown": {"A": {"term_wait_s": "soon", "kill_wait_s": 1}},
    }
    with pytest.raises(BundleFormatError) as err:
        Plan.from_dict(doc, "plans/p.json")
    (problem,) = err.value.problems
    assert (problem.where, problem.field) == ("plans/p.json", "teardown.A.term_wait_s")


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda d: d["members"][0].update(size=True), "members.0.size"),
        (lambda d: d["members"][0].update(size=1.5), "members.0.size"),
        (lambda d: d["external"][0].update(uri=3), "external.0.uri"),
        (lambda d: d["external"][0].pop("bytes"), "external.0.bytes"),
        (lambda d: d["campaign"].update(arms=[1]), "campaign.arms.0"),
        (lambda d: d["environment"].update(python=3), "environment.python"),
    ],
)
def test_a_manifest_shape_problem_names_its_field(edit: Any, field: str) -> None:
    doc = json.loads(open_bundle(VECTOR, trust=Trust.allow_unsigned()).members[MANIFEST_NAME].data)
    doc["external"] = [
        {
            "path": "m.mp4",
            "sha256": "0" * 64,
            "bytes": 1,
            "kind": "media",
            "availability": "a",
            "hashed_at_seal": False,
        }
    ]
    edit(doc)
    with pytest.raises(BundleFormatError) as err:
        Manifest.from_dict(doc)
    assert [(p.where, p.field) for p in err.value.problems] == [("manifest.json", field)]
