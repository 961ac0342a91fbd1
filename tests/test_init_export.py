"""``bundle init`` (a skeleton that seals once filled in) and ``bundle export`` (issue 10).

Expected figures come from the published sample (samples/h3-ref2va-5s/README.md:
baseline 407.27 s, candidate 108.12 s) and from a second reader, DuckDB, never
from the exporter itself.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.campaign_builder import BASELINE_COMMIT, CANDIDATE_COMMIT, receipts, write_jsonl

BUNDLE = [sys.executable, "-m", "reprobundle.cli"]
SAMPLE = Path(__file__).resolve().parent.parent / "samples" / "h3-ref2va-5s"


def run(*args: str | Path, check: int | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([*BUNDLE, *map(str, args)], capture_output=True, text=True, timeout=180)
    assert "Traceback" not in proc.stderr, proc.stderr
    if check is not None:
        assert proc.returncode == check, (proc.stdout, proc.stderr)
    return proc


# ---------------------------------------------------------------- init


def test_init_skeleton_fails_seal_only_on_what_the_author_must_fill_in(tmp_path: Path) -> None:
    camp = tmp_path / "my-camp"
    doc = json.loads(run("init", camp, "--json", check=0).stdout)
    assert doc["files"] == [
        "README.md",
        "attempts.jsonl",
        "campaign.json",
        "claims.json",
        "plans/plan.json",
        "receipts.jsonl",
    ]
    assert json.loads((camp / "campaign.json").read_text())["id"] == "my-camp"
    # The skeleton's plan is complete: plan check finds neither error nor warning.
    check = json.loads(run("plan", "check", camp / "plans" / "plan.json", "--json").stdout)
    assert check["ok"] is True and check["findings"] == []
    sealed = run("seal", camp, "-o", tmp_path / "x.bundle", "--unsigned", "--json", check=2)
    problems = json.loads(sealed.stdout)["problems"]
    assert sorted((p["where"], p["field"]) for p in problems) == [
        ("campaign.json", "arms.0.runtime_commit"),
        ("campaign.json", "arms.1.runtime_commit"),
    ]
    assert all("FILL-IN" in p["message"] for p in problems)
    assert not (tmp_path / "x.bundle").exists()


def test_init_filled_in_seals_and_replays(tmp_path: Path) -> None:
    camp = tmp_path / "c"
    run("init", camp, "--id", "filled", check=0)
    doc = json.loads((camp / "campaign.json").read_text())
    doc["arms"][0]["runtime_commit"] = BASELINE_COMMIT
    doc["arms"][1]["runtime_commit"] = CANDIDATE_COMMIT
    (camp / "campaign.json").write_text(json.dumps(doc))
    # campaign_builder's receipts: baseline servers 100 and 110 s, candidate 40 and 44 s,
    # so the arm means are 105 and 42 and the candidate is 1 - 42/105 = 60.00 % lower.
    write_jsonl(camp / "receipts.jsonl", [{**r, "attempt_id": "run-1"} for r in receipts()])
    claim = {
        "claim_id": "lower",
        "statistic": "percent_lower",
        "params": {"baseline": "baseline", "candidate": "candidate"},
        "value": "60.00",
        "unit": "%",
        "decimals": 2,
    }
    (camp / "claims.json").write_text(json.dumps([claim]))
    run("seal", camp, "-o", tmp_path / "f.bundle", "--unsigned", check=0)
    rep = json.loads(
        run("replay", tmp_path / "f.bundle", "--allow-unsigned", "--json", check=0).stdout
    )
    assert rep["outcome"] == "CONFIRMED" and rep["exit_code"] == 0


_README_COMMAND = re.compile(r"^\s+\$ bundle (?P<cmd>[^#\n]*?)\s*(?:#(?P<note>.*))?$", re.MULTILINE)


def _readme_commands(camp: Path) -> list[tuple[list[str], int]]:
    """The skeleton README's ``$ bundle ...`` lines, with the ``exit N`` each one's note states."""
    found = []
    for m in _README_COMMAND.finditer((camp / "README.md").read_text(encoding="utf-8")):
        code = re.search(r"\bexit (\d+)\b", m.group("note") or "")
        found.append((shlex.split(m.group("cmd")), int(code.group(1)) if code else 0))
    return found


def _run_in(cwd: Path, args: list[str]) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([*BUNDLE, *args], capture_output=True, text=True, timeout=180, cwd=cwd)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def test_init_readme_commands_work_as_written(tmp_path: Path) -> None:
    """Issue 24: the skeleton README's commands, run verbatim from where it says to run them.

    Untouched, seal refuses exactly the FILL-IN values (the note on its line says
    exit 2); with the commits filled in (7 to 64 hex digits, as the README says)
    every line succeeds and replay of the empty campaign is NOT EVIDENCED (exit 5),
    never CONTRADICTED by a deviation computed from zero receipts.
    """
    untouched, filled = tmp_path / "untouched", tmp_path / "filled"
    for where in (untouched, filled):
        where.mkdir()
        run("init", where / "my-campaign", check=0)
    commands = _readme_commands(untouched / "my-campaign")
    verbs = [args[0] for args, _ in commands]
    assert verbs == ["keygen", "plan", "seal", "replay"], verbs
    for args, code in commands:
        proc = _run_in(untouched, args)
        assert proc.returncode == code, (args, proc.stdout, proc.stderr)
        assert "arm None" not in proc.stdout and "None s" not in proc.stdout
        if args[0] == "seal":
            assert proc.stderr.count("FILL-IN") == 2, proc.stderr
            break
    camp = filled / "my-campaign"
    doc = json.loads((camp / "campaign.json").read_text())
    doc["arms"][0]["runtime_commit"] = "a" * 7  # the shortest the README allows
    doc["arms"][1]["runtime_commit"] = "b" * 64  # the longest
    (camp / "campaign.json").write_text(json.dumps(doc))
    for args, code in commands:
        proc = _run_in(filled, args)
        expected = 0 if args[0] == "seal" else code
        assert proc.returncode == expected, (args, proc.stdout, proc.stderr)
    assert (filled / "my-campaign.bundle").is_file()
    replayed = _run_in(filled, [*commands[-1][0], "--json"])
    rep = json.loads(replayed.stdout)
    assert (rep["outcome"], rep["exit_code"]) == ("NOT EVIDENCED", 5)
    assert rep["conformance"]["deviations"] == []
    assert "by first start" not in replayed.stdout


def test_init_refuses_a_non_empty_folder_and_a_bad_id(tmp_path: Path) -> None:
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "keep.txt").write_text("mine")
    err = run("init", tmp_path / "busy", check=2).stderr
    assert "not an empty folder" in err
    assert sorted(p.name for p in (tmp_path / "busy").iterdir()) == ["keep.txt"]
    run("init", tmp_path / "Bad Name", check=2)
    assert not (tmp_path / "Bad Name").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["busy"]  # no partial folder left


# ---------------------------------------------------------------- export


@pytest.fixture(scope="module")
def sample_bundle(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("exp")
    run("keygen", "-o", d / "k", check=0)
    run("seal", SAMPLE, "-o", d / "h3.bundle", "--key", d / "k", check=0)
    return d / "h3.bundle", d / "k.pub"


def _arm_means(duck: object, receipts_sql: str) -> dict[str, float]:
    # Arm mean = mean of its server means over the accepted attempt's measured requests
    # (docs/replay.md); the accepted attempt read from the attempts table.
    rows = duck.execute(  # type: ignore[attr-defined]
        f"""
        WITH r AS (SELECT * FROM {receipts_sql}),
             acc AS (SELECT attempt_id FROM attempts WHERE status = 'accepted'),
             s AS (SELECT arm, server, avg(e2e_s) AS m FROM r
                   WHERE phase = 'measured' AND status = 'ok'
                     AND attempt_id IN (SELECT attempt_id FROM acc)
                   GROUP BY arm, server)
        SELECT arm, avg(m) FROM s GROUP BY arm ORDER BY arm
        """
    ).fetchall()
    return {arm: round(v, 2) for arm, v in rows}


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_duckdb_reads_the_export_and_gets_replays_numbers(
    fmt: str, sample_bundle: tuple[Path, Path], tmp_path: Path
) -> None:
    duckdb = pytest.importorskip("duckdb")
    bundle, pub = sample_bundle
    out = tmp_path / "exported"
    doc = json.loads(
        run("export", bundle, out, "--key", pub, "--format", fmt, "--json", check=0).stdout
    )
    assert doc["trusted"] is True and doc["tables"]["receipts"] == 41
    replayed = json.loads(run("replay", bundle, "--key", pub, "--json", check=0).stdout)
    from_replay = {a["arm"]: a["mean_s"] for a in replayed["latency"]["arms"]}
    con = duckdb.connect()
    if fmt == "parquet":
        con.execute(f"CREATE VIEW attempts AS SELECT * FROM '{out}/tables/attempts.parquet'")
        source = f"'{out}/tables/receipts.parquet'"
    else:
        con.execute(f"CREATE VIEW attempts AS SELECT * FROM read_csv('{out}/tables/attempts.csv')")
        source = f"read_csv('{out}/tables/receipts.csv')"
    means = _arm_means(con, source)
    # Published: 407.27 s and 108.12 s (samples/h3-ref2va-5s/README.md).
    assert means == {"baseline": 407.27, "candidate": 108.12}
    assert means == from_replay
    assert json.loads((out / "EXPORT.json").read_text())["signature_status"] == "verified"
    assert (out / "campaign.json").is_file() and (out / "files" / "README.md").is_file()
    assert not (out / "manifest.json").exists()


def test_parquet_export_is_the_sealed_bytes(
    sample_bundle: tuple[Path, Path], tmp_path: Path
) -> None:
    from bundler.format.container import read_container

    bundle, pub = sample_bundle
    run("export", bundle, tmp_path / "e", "--key", pub, check=0)
    members = {m.name: m.data for m in read_container(bundle)}
    for path in (tmp_path / "e").rglob("*"):
        rel = path.relative_to(tmp_path / "e").as_posix()
        if path.is_file() and rel != "EXPORT.json":
            assert path.read_bytes() == members[rel], rel


def test_export_refuses_what_does_not_verify(
    sample_bundle: tuple[Path, Path], tmp_path: Path
) -> None:
    bundle, pub = sample_bundle
    # No trust option at all: a usage error.
    run("export", bundle, tmp_path / "a", check=2)
    # A key that did not sign it: refused as untrusted, nothing written.
    run("keygen", "-o", tmp_path / "other", check=0)
    run("export", bundle, tmp_path / "b", "--key", tmp_path / "other.pub", check=1)
    # One flipped byte inside the bundle: refused, nothing written.
    data = bytearray(bundle.read_bytes())
    data[len(data) // 2] ^= 0xFF
    bad = tmp_path / "bad.bundle"
    bad.write_bytes(bytes(data))
    proc = run("export", bad, tmp_path / "c", "--key", pub, "--json", check=1)
    assert json.loads(proc.stdout)["ok"] is False
    for name in ("a", "b", "c"):
        assert not (tmp_path / name).exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no partial folder
    # A folder that is not empty is not overwritten.
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "x").write_text("keep")
    run("export", bundle, tmp_path / "d", "--key", pub, check=2)
    assert [p.name for p in (tmp_path / "d").iterdir()] == ["x"]
    # --allow-unsigned exports an untrusted bundle and says so.
    doc = json.loads(
        run("export", bundle, tmp_path / "e", "--allow-unsigned", "--json", check=0).stdout
    )
    assert doc["trusted"] is False and doc["signature_status"] != "verified"
