"""``bundle diff OLD NEW`` on pairs made from the seed sample, one change of each kind.

Each NEW bundle is the sample ``h3-ref2va-5s`` sealed after one edit to its campaign
files; every expected value below is derived by hand from that edit (in a comment),
or from the sample's published figures (``/work/shared/docs/product.md``: server
means 396.30, 418.24, 106.66 and 109.58 s), never read back from the code under test.
"""

from __future__ import annotations

import json
import shutil
import statistics
from collections.abc import Callable
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from bundler.errors import EXIT_DIFFERS
from bundler.format.trust import Trust
from bundler.seal import seal_campaign
from bundler.sign import countersign
from bundler.verified import open_verified
from replay.diff import DiffLimits, diff_bundles
from reprobundle.cli.main import main
from tests.conftest import Keys, make_keys

FIVE = Path(__file__).resolve().parents[1] / "samples" / "h3-ref2va-5s"
NOTE = "notes/five-second-delivery.md"


@pytest.fixture(scope="module")
def author(tmp_path_factory: pytest.TempPathFactory) -> Keys:
    return make_keys(tmp_path_factory.mktemp("keys"))


@pytest.fixture(scope="module")
def old(tmp_path_factory: pytest.TempPathFactory, author: Keys) -> Path:
    out = tmp_path_factory.mktemp("old") / "old.bundle"
    seal_campaign(FIVE, out, keys=[author.private])
    return out


def sealed_after(tmp_path: Path, author: Keys, edit: Callable[[Path], None]) -> Path:
    """The sample copied, edited by ``edit``, sealed by ``author``."""
    camp = tmp_path / "campaign"
    shutil.copytree(FIVE, camp)
    edit(camp)
    out = tmp_path / "new.bundle"
    seal_campaign(camp, out, keys=[author.private])
    return out


def edit_jsonl(path: Path, change: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]) -> None:
    rows = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
    path.write_text("".join(json.dumps(r) + "\n" for r in change(rows)), encoding="utf-8")


def edit_json(path: Path, change: Callable[[Any], None]) -> None:
    doc = json.loads(path.read_text(encoding="utf-8"))
    change(doc)
    path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")


def run(*args: str | Path) -> Result:
    return CliRunner().invoke(main, ["diff", *map(str, args)])


def diff_json(old: Path, new: Path, author: Keys) -> tuple[int, dict[str, Any]]:
    res = run(old, new, "--key", author.public_path, "--json")
    return res.exit_code, json.loads(res.stdout)


def r2(x: Decimal) -> str:
    return str(x.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))


# ---------------------------------------------------------------- identical, and the seed's case


def test_identical_bundles_exit_0_in_every_format(old: Path, author: Keys) -> None:
    res = run(old, old, "--key", author.public_path)
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[0].endswith(": IDENTICAL")
    assert "nothing changed" in lines[1]
    code, doc = diff_json(old, old, author)
    assert code == 0 and doc["identical"] is True and doc["result"] == "identical"
    md = run(old, old, "--key", author.public_path, "--format", "md")
    assert md.exit_code == 0 and md.stdout.startswith("### bundle diff: IDENTICAL")


def test_only_a_note_changed_says_nothing_else_changed(
    tmp_path: Path, old: Path, author: Keys
) -> None:
    def edit(camp: Path) -> None:
        with (camp / NOTE).open("a", encoding="utf-8") as fh:
            fh.write("Reviewed again at head 8bb7e797.\n")

    new = sealed_after(tmp_path, author, edit)
    res = run(old, new, "--key", author.public_path)
    assert res.exit_code == EXIT_DIFFERS, res.output
    text = res.stdout.splitlines()
    assert text[0].endswith(": DIFFERS")  # no alert line: nothing loosened
    assert text[1] == ("  verdict unchanged (CONFIRMED); members: 0 added, 0 removed, 1 changed")
    # Every other section says it is unchanged.
    for heading, body in (
        ("verdict", "  no claim changed"),
        ("gates and frozen plan", "  unchanged"),
        ("tables", "  no row changed"),
        ("externals", "  unchanged"),
        ("signers", "  unchanged"),
    ):
        assert text[text.index(heading) + 1 + (heading == "verdict")] == body
    members = text[text.index("members") + 1 :]
    assert members[0].startswith(f"  changed files/{NOTE} (file): ")
    assert "    +Reviewed again at head 8bb7e797." in members
    code, doc = diff_json(old, new, author)
    assert code == EXIT_DIFFERS
    assert doc["claims"] == [] and doc["gates"] == [] and doc["tables"] == []
    assert doc["plan"] is None and doc["externals"] == [] and doc["signers"] == []
    assert doc["members_counts"] == [0, 0, 1]
    (m,) = doc["members_changed"]
    assert m["path"] == f"files/{NOTE}"
    # The appended line is 33 characters plus its newline.
    assert m["new_size"] - m["old_size"] == len("Reviewed again at head 8bb7e797.\n")
    assert "+Reviewed again at head 8bb7e797." in m["text"]["lines"]
    md = run(old, new, "--key", author.public_path, "--format", "md").stdout
    assert "Since the last reviewed head: verdict unchanged (CONFIRMED); members: 0 added" in md
    assert "- `+Reviewed again at head 8bb7e797.`" in md


# ---------------------------------------------------------------- a receipt value


def test_a_receipt_value_changes_the_row_and_the_claims_it_feeds(
    tmp_path: Path, old: Path, author: Keys
) -> None:
    # final-2-baseline-1-02 (measured, ok): 394.62 s -> 396.12 s, its end 1.5 s later.
    def change(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for r in rows:
            if r["request_id"] == "final-2-baseline-1-02":
                r["e2e_s"], r["end"] = 396.12, "2026-02-10T01:43:08.830Z"
        return rows

    new = sealed_after(tmp_path, author, lambda c: edit_jsonl(c / "receipts.jsonl", change))
    code, doc = diff_json(old, new, author)
    assert code == EXIT_DIFFERS
    (table,) = doc["tables"]
    assert table["table"] == "receipts" and table["changed_count"] == 1
    assert (table["added_count"], table["removed_count"]) == (0, 0)
    (row,) = table["changed"]
    assert row["key"] == "final-2-baseline-1-02"
    got = {f["field"]: (f["old"], f["new"]) for f in row["fields"]}
    assert got["e2e_s"] == ("394.62", "396.12")
    assert set(got) == {"e2e_s", "end"}
    # baseline-1's measured requests: 394.62 + 398.05 + 396.23 = 1188.90 s (mean 396.30),
    # now 1190.40 s: mean 396.80. Baseline arm: (396.80 + 418.24) / 2 = 407.52.
    b1, b2 = Decimal("1190.40") / 3, Decimal("418.24")
    arm_b, arm_c = (b1 + b2) / 2, (Decimal("106.66") + Decimal("109.58")) / 2
    want = {
        "server-mean-baseline-1": ("396.30", r2(b1)),
        "arm-mean-baseline": ("407.27", r2(arm_b)),
        "percent-lower": ("73.45", r2((1 - arm_c / arm_b) * 100)),
        "sd-server-means-baseline": ("15.51", r2(Decimal(statistics.stdev([b1, b2])))),
    }
    assert r2(b1) == "396.80" and r2(arm_b) == "407.52"
    # speedup 407.52 / 108.12 = 3.769... still 3.77: not a change.
    assert r2(arm_b / arm_c) == "3.77"
    claims = {c["claim_id"]: c for c in doc["claims"]}
    assert set(claims) == set(want)
    for cid, (before, after) in want.items():
        fields = {f["field"]: (f["old"], f["new"]) for f in claims[cid]["fields"]}
        assert fields == {
            "status": ("confirmed", "contradicted"),
            "recomputed": (before, after),
        }, cid
    assert (doc["old"]["outcome"], doc["new"]["outcome"]) == ("CONFIRMED", "CONTRADICTED")
    assert doc["members_counts"] == [0, 0, 1]  # tables/receipts.parquet
    # Capped at one claim: the other three are counted, and the summary counts all four.
    trust = Trust.keys([author.public])
    capped = diff_bundles(
        open_verified(old, trust=trust),
        open_verified(new, trust=trust),
        DiffLimits(max_claims_listed=1),
    )
    assert (len(capped.claims), capped.claims_more) == (1, 3)
    from replay.diff.render import render_text

    capped_text = render_text(capped)
    assert "  3 more claim change(s)" in capped_text
    assert "4 claim(s) changed" in capped_text[1]
    text = run(old, new, "--key", author.public_path).stdout
    assert "  verdict CONFIRMED -> CONTRADICTED; 4 claim(s) changed; receipts:" in text
    assert (
        # Fields in the table's column order (end comes before e2e_s).
        "    changed final-2-baseline-1-02: "
        "end 2026-02-10T01:43:07.330000+00:00 -> 2026-02-10T01:43:08.830000+00:00; "
        "e2e_s 394.62 -> 396.12"
    ) in text.splitlines()


# ---------------------------------------------------------------- a receipt added and removed


def test_a_receipt_removed_and_one_added(tmp_path: Path, old: Path, author: Keys) -> None:
    # The failed attempt final-1 (rejected): its timed-out receipt removed, and a new one
    # added with another id. No comparison names either (they are final-2's).
    def change(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = [r for r in rows if r["request_id"] != "final-1-baseline-1-04"]
        gone = next(r for r in rows if r["request_id"] == "final-1-baseline-1-04")
        out.append({**gone, "request_id": "final-1-baseline-1-04b"})
        return out

    new = sealed_after(tmp_path, author, lambda c: edit_jsonl(c / "receipts.jsonl", change))
    code, doc = diff_json(old, new, author)
    assert code == EXIT_DIFFERS
    (table,) = doc["tables"]
    assert table["added"] == ["final-1-baseline-1-04b"]
    assert table["removed"] == ["final-1-baseline-1-04"]
    assert table["changed_count"] == 0
    text = run(old, new, "--key", author.public_path).stdout.splitlines()
    assert "    added final-1-baseline-1-04b" in text
    assert "    removed final-1-baseline-1-04" in text


# ---------------------------------------------------------------- gates: loosened first


def test_a_loosened_gate_is_the_first_thing_shown(tmp_path: Path, old: Path, author: Keys) -> None:
    # lpips-max (<=) 0.2 -> 0.3 lets more through: loosened. ssim-min (>=) 0.97 -> 0.975
    # lets less through: changed, not loosened (the sample's minimum SSIM, 0.976, still
    # passes, so the verdict stays CONFIRMED).
    def change(gates: list[dict[str, Any]]) -> None:
        for g in gates:
            if g["gate_id"] == "lpips-max":
                g["threshold"] = 0.3
            if g["gate_id"] == "ssim-min":
                g["threshold"] = 0.975

    new = sealed_after(tmp_path, author, lambda c: edit_json(c / "gates.json", change))
    res = run(old, new, "--key", author.public_path)
    assert res.exit_code == EXIT_DIFFERS
    lines = res.stdout.splitlines()
    assert lines[0] == "! GATE LOOSENED lpips-max: threshold 0.2 -> 0.3"
    assert lines[1].endswith(": DIFFERS")
    assert "1 loosened" in lines[2]
    gates = lines[lines.index("gates and frozen plan") + 1 :][:2]
    assert gates == [
        "  gate lpips-max LOOSENED: threshold 0.2 -> 0.3",
        "  gate ssim-min changed: threshold 0.97 -> 0.975",
    ]
    _, doc = diff_json(old, new, author)
    assert doc["alerts"] == ["GATE LOOSENED lpips-max: threshold 0.2 -> 0.3"]
    assert [(g["gate_id"], g["loosened"]) for g in doc["gates"]] == [
        ("lpips-max", True),
        ("ssim-min", False),
    ]
    assert doc["old"]["outcome"] == doc["new"]["outcome"] == "CONFIRMED"
    md = run(old, new, "--key", author.public_path, "--format", "md").stdout.splitlines()
    assert md[0] == "### bundle diff: DIFFERS"
    assert md[2] == "> **GATE LOOSENED** `lpips-max`: `threshold` `0.2` → `0.3`  "


def test_a_removed_gate_is_loosened(tmp_path: Path, old: Path, author: Keys) -> None:
    new = sealed_after(
        tmp_path,
        author,
        lambda c: edit_json(
            c / "gates.json",
            lambda g: g.remove(next(x for x in g if x["gate_id"] == "frame-count")),
        ),
    )
    res = run(old, new, "--key", author.public_path)
    assert res.stdout.splitlines()[0] == "! GATE REMOVED frame-count: it no longer applies"


# ---------------------------------------------------------------- the frozen plan


def test_a_changed_frozen_plan_is_shown_loudly_field_by_field(
    tmp_path: Path, old: Path, author: Keys
) -> None:
    # The plan's poll interval 5 s -> 10 s, and one quality prompt's seed 1234 -> 4321.
    def change(plan: dict[str, Any]) -> None:
        plan["request"]["poll_interval_s"] = 10
        plan["quality"]["prompts"][0]["seed"] = 4321

    new = sealed_after(tmp_path, author, lambda c: edit_json(c / "plans/final-5s.json", change))
    res = run(old, new, "--key", author.public_path)
    lines = res.stdout.splitlines()
    assert lines[0] == (
        "! FROZEN PLAN CHANGED (plans/final-5s.json -> plans/final-5s.json): 2 field(s)"
    )
    at = lines.index("  FROZEN PLAN CHANGED plans/final-5s.json -> plans/final-5s.json:")
    assert lines[at + 1 : at + 3] == [
        "    quality.prompts[0].seed: 1234 -> 4321",
        "    request.poll_interval_s: 5 -> 10",
    ]
    md = run(old, new, "--key", author.public_path, "--format", "md").stdout
    assert "> **FROZEN PLAN CHANGED** `plans/final-5s.json`" in md
    assert "- plan `request.poll_interval_s`: `5` → `10`" in md


# ---------------------------------------------------------------- a claim value


def test_a_claim_value_changed(tmp_path: Path, old: Path, author: Keys) -> None:
    # speedup claimed 3.77 -> 3.80; recomputed 407.27 / 108.12 = 3.77: now contradicted.
    def change(claims: list[dict[str, Any]]) -> None:
        next(c for c in claims if c["claim_id"] == "speedup")["value"] = "3.80"

    new = sealed_after(tmp_path, author, lambda c: edit_json(c / "claims.json", change))
    code, doc = diff_json(old, new, author)
    assert code == EXIT_DIFFERS
    (claim,) = doc["claims"]
    assert claim["claim_id"] == "speedup"
    assert {f["field"]: (f["old"], f["new"]) for f in claim["fields"]} == {
        "status": ("confirmed", "contradicted"),
        "claimed": ("3.77", "3.80"),
    }
    (table,) = doc["tables"]
    assert table["table"] == "claims"
    (row,) = table["changed"]
    assert row["key"] == "speedup"
    assert [(f["field"], f["old"], f["new"]) for f in row["fields"]] == [("value", "3.77", "3.80")]
    md = run(old, new, "--key", author.public_path, "--format", "md").stdout
    assert (
        "- claim `speedup`: `status` `confirmed` → `contradicted`; `claimed` `3.77` → `3.80`"
    ) in md
    assert "verdict CONFIRMED -\\> CONTRADICTED" in md


# ---------------------------------------------------------------- an external artifact


def test_an_external_artifact_digest_changed(tmp_path: Path, old: Path, author: Keys) -> None:
    path = "media/final-2/final-2-baseline-1-00.mp4"
    before = "4ac2737db8f79bf206df2bee538a5138989809591d78e8e71b256120e1f9c87b"
    after = "0" * 64

    def change(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for r in rows:
            if r["path"] == path:
                assert r["sha256"] == before
                r["sha256"] = after
        return rows

    def edit(camp: Path) -> None:
        edit_jsonl(camp / "artifacts.jsonl", change)
        # The comparison that names that output records its digest too.
        edit_jsonl(
            camp / "comparisons.jsonl",
            lambda rows: [
                {**r, "baseline_sha256": after} if r["baseline_sha256"] == before else r
                for r in rows
            ],
        )

    new = sealed_after(tmp_path, author, edit)
    code, doc = diff_json(old, new, author)
    assert code == EXIT_DIFFERS
    (ext,) = doc["externals"]
    assert ext["path"] == path and ext["change"] == "changed"
    assert ext["fields"] == [{"field": "sha256", "old": before, "new": after}]
    text = run(old, new, "--key", author.public_path).stdout.splitlines()
    assert f"  changed {path}: sha256 {before} -> {after}" in text
    md = run(old, new, "--key", author.public_path, "--format", "md").stdout
    assert f"- external changed `{path}`: `sha256` `{before}` → `{after}`" in md


# ---------------------------------------------------------------- signers


def test_a_second_signer_alone_is_reported_and_exits_0(
    tmp_path: Path, old: Path, author: Keys
) -> None:
    auditor = make_keys(tmp_path, "auditor")
    new = tmp_path / "countersigned.bundle"
    countersign(old, auditor.private, new, trust=Trust.keys([author.public]))
    res = run(old, new, "--key", author.public_path, "--key", auditor.public_path)
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[0].endswith(": IDENTICAL CONTENT (signers differ)")
    assert lines[-1] == f"  added {auditor.key_id} (verified by {auditor.key_id})"
    code, doc = diff_json(old, new, author)
    assert code == 0 and doc["result"] == "identical_content"
    # Only the author's key given: the auditor's signature is there, unverified.
    assert doc["signers"] == [{"keyid": auditor.key_id, "change": "added", "verified_by": None}]


# ---------------------------------------------------------------- refusals


def test_either_bundle_failing_to_verify_exits_1(tmp_path: Path, old: Path, author: Keys) -> None:
    bad = tmp_path / "bad.bundle"
    data = bytearray(old.read_bytes())
    data[len(data) // 2] ^= 0xFF
    bad.write_bytes(bytes(data))
    assert run(old, bad, "--key", author.public_path).exit_code == 1
    assert run(bad, old, "--key", author.public_path, "--json").exit_code == 1
    stranger = make_keys(tmp_path, "stranger")
    res = run(old, old, "--key", stranger.public_path)
    assert res.exit_code == 1 and "no trusted key verified it" in res.stderr
    assert run(old, old, "--key", stranger.public_path, "--allow-unsigned").exit_code == 0
    assert run(old, old).exit_code == 2  # no key, no --allow-unsigned


# ---------------------------------------------------------------- hostile text, bounds


def test_author_text_is_inert_in_markdown(tmp_path: Path, old: Path, author: Keys) -> None:
    hostile = "fixes #12 for @bob, see https://evil.example/x ```\n" + "x" * 999 + "\n"

    def edit(camp: Path) -> None:
        with (camp / NOTE).open("a", encoding="utf-8") as fh:
            fh.write(hostile)

    new = sealed_after(tmp_path, author, edit)
    md = run(old, new, "--key", author.public_path, "--format", "md").stdout
    (line,) = [x for x in md.splitlines() if "@bob" in x]
    # The whole diff line is one code span: a fence one backtick longer than its longest
    # run, padded by a space on each side because the text ends in a backtick (CommonMark
    # strips one space each side).
    assert line == "  - ```` +fixes #12 for @bob, see https://evil.example/x ``` ````"
    # A 1,000-character diff line ("+" and 999 x) is cut at 400 characters, its length said.
    assert f"  - `+{'x' * 399}… (1,000 characters)`" in md.splitlines()


def test_listings_are_capped_and_say_how_many_more(tmp_path: Path, old: Path, author: Keys) -> None:
    # Every measured final-2 receipt of baseline-1 (02, 03, 04) gets a new e2e_s and end.
    def change(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for r in rows:
            if r["request_id"] in {f"final-2-baseline-1-0{i}" for i in (2, 3, 4)}:
                r["e2e_s"] = round(r["e2e_s"] - 0.01, 2)
                r["end"] = r["end"].replace(".", ".9")[:-1] + "Z"  # keep it a valid instant
        return rows

    new = sealed_after(tmp_path, author, lambda c: edit_jsonl(c / "receipts.jsonl", change))
    d = diff_bundles(
        open_verified(old, trust=Trust.keys([author.public])),
        open_verified(new, trust=Trust.keys([author.public])),
        DiffLimits(max_rows_listed=1, max_rows_compared=10_000),
    )
    (table,) = d.tables
    assert table.changed_count == 3 and len(table.changed) == 1
    from replay.diff.render import render_text

    assert "    2 more" in render_text(d)


# ---------------------------------------------------------------- a vLLM sweep pair


def test_a_vllm_sweep_pair_candidate_load_point_swapped(tmp_path: Path, author: Keys) -> None:
    """OLD: the concurrency-8 baseline and candidate; NEW: the candidate's concurrency-32 run.

    By hand from ``samples/vllm-serve-sweep/results``: the carried candidate source
    ``rinf-c8.json`` is replaced by ``rinf-c32.json``; the candidate's load point's
    ``max_concurrency`` goes 8 -> 32; every candidate claim of the c8 point is removed
    and one for each of the same metrics at c32 added; no baseline claim changes.
    """
    results = FIVE.parent / "vllm-serve-sweep" / "results"

    def src(concurrency: int, arm: str) -> Path:
        return results / f"openai-chat-infqps-concurrency{concurrency}-synthetic-{arm}.json"

    def imported(candidate: int, name: str) -> Path:
        out = tmp_path / name
        res = CliRunner().invoke(
            main,
            [
                "import",
                "vllm",
                "--arm",
                f"baseline={src(8, 'baseline')}",
                "--arm",
                f"candidate={src(candidate, 'candidate')}",
                "--commit",
                "baseline=aaaaaaa",
                "--commit",
                "candidate=bbbbbbb",
                "-o",
                str(out),
            ],
        )
        assert res.exit_code == 0, res.output
        bundle = tmp_path / f"{name}.bundle"
        seal_campaign(out, bundle, keys=[author.private])
        return bundle

    old, new = imported(8, "c8"), imported(32, "c32")
    code, doc = diff_json(old, new, author)
    assert code == EXIT_DIFFERS
    assert [m["path"] for m in doc["members_added"]] == ["files/sources/candidate/rinf-c32.json"]
    assert [m["path"] for m in doc["members_removed"]] == ["files/sources/candidate/rinf-c8.json"]
    plan = {f["field"]: (f["old"], f["new"]) for f in doc["plan"]["fields"]}
    assert plan["load_points[0].max_concurrency"] == ("8", "32")
    listed = doc["claims"]
    assert not any(c["claim_id"].startswith("baseline.") for c in listed)
    removed = {
        c["claim_id"].removeprefix("candidate.rinf-c8.") for c in listed if c["change"] == "removed"
    }
    added = {
        c["claim_id"].removeprefix("candidate.rinf-c32.") for c in listed if c["change"] == "added"
    }
    assert removed and added and "mean_e2el_ms" in removed | added

    # Every candidate claim of either campaign changed: counted from the imported
    # campaigns' claims.jsonl; 50 listed (the default cap), the rest counted.
    def candidate_claims(name: str, point: str) -> int:
        lines = (tmp_path / name / "claims.jsonl").read_text(encoding="utf-8").splitlines()
        return sum(json.loads(x)["claim_id"].startswith(f"candidate.{point}.") for x in lines)

    total = candidate_claims("c8", "rinf-c8") + candidate_claims("c32", "rinf-c32")
    assert len(listed) == 50 and doc["claims_more"] == total - 50
    text = run(old, new, "--key", author.public_path).stdout.splitlines()
    assert text[0].startswith("! FROZEN PLAN CHANGED (plans/serving.json -> plans/serving.json)")
    assert f"  {doc['claims_more']} more claim change(s)" in text
