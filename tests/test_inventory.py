"""Inventory: new, missing and changed entries reported; external weights never 'missing'."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from bundler.format.trust import Trust
from bundler.inventory import INVENTORY_NAME, check_inventory, tree_digest
from bundler.seal import seal_campaign
from tests.campaign_builder import write_campaign
from tests.conftest import Keys

WEIGHTS = {
    "path": "weights/alexnet-owt-7be5be79.pth",
    "kind": "weights",
    "sha256": "7be5be791159472b1fbf3c69796f7cb30dca7ad8466c2df70058c37116cdee02",
    "bytes": 244408911,
    "availability": "not redistributed; torchvision's published AlexNet weights",
}


def _root(tmp_path: Path, keys: Keys) -> Path:
    root = tmp_path / "evidence"
    root.mkdir()
    camp = write_campaign(tmp_path / "c")
    (camp / "artifacts.jsonl").write_text(json.dumps(WEIGHTS) + "\n")
    seal_campaign(camp, root / "mini.bundle", keys=[keys.private])
    shutil.copytree(camp, root / "mini-campaign")
    return root


def test_fix_registers_then_everything_is_consistent(tmp_path: Path, keys: Keys) -> None:
    root = _root(tmp_path, keys)
    first = check_inventory(root, trust=Trust.keys([keys.public]))
    assert sorted(first.unregistered) == ["mini-campaign", "mini.bundle"]
    assert not first.ok
    fixed = check_inventory(root, trust=Trust.keys([keys.public]), fix=True)
    assert {e["path"] for e in fixed.added} == {"mini-campaign", "mini.bundle"}
    register = json.loads((root / INVENTORY_NAME).read_text())
    by_path = {e["path"]: e for e in register["entries"]}
    assert by_path["mini.bundle"]["id"] == "mini"
    assert by_path["mini.bundle"]["kind"] == "campaign"
    # The bundle digest is the file's SHA-256, computed here independently.
    import hashlib

    assert (
        by_path["mini.bundle"]["sha256"]
        == hashlib.sha256((root / "mini.bundle").read_bytes()).hexdigest()
    )
    again = check_inventory(root, trust=Trust.keys([keys.public]))
    assert again.ok, again.to_dict()


def test_external_weights_absent_locally_are_external_not_missing(
    tmp_path: Path, keys: Keys
) -> None:
    root = _root(tmp_path, keys)
    rep = check_inventory(root, trust=Trust.keys([keys.public]), fix=True)
    classes = {(a["entry"], a["path"]): a["class"] for a in rep.artifacts}
    assert classes == {
        ("mini.bundle", WEIGHTS["path"]): "external",
        ("mini-campaign", WEIGHTS["path"]): "external",
    }
    assert all(a["availability"] == WEIGHTS["availability"] for a in rep.artifacts)
    assert rep.missing == []
    assert rep.ok


def test_changed_bundle_and_missing_entry_are_reported(tmp_path: Path, keys: Keys) -> None:
    root = _root(tmp_path, keys)
    check_inventory(root, trust=Trust.keys([keys.public]), fix=True)
    data = bytearray((root / "mini.bundle").read_bytes())
    data[-10] ^= 0x01
    (root / "mini.bundle").write_bytes(bytes(data))
    shutil.rmtree(root / "mini-campaign")
    rep = check_inventory(root, trust=Trust.keys([keys.public]), fix=True)
    assert [m["path"] for m in rep.mismatched] == ["mini.bundle"]
    assert rep.missing == ["mini-campaign"]
    assert [v["ok"] for v in rep.verify] == [False]
    # --fix never deletes: the missing entry stays registered.
    register = json.loads((root / INVENTORY_NAME).read_text())
    assert "mini-campaign" in {e["path"] for e in register["entries"]}


def test_tree_digest_matches_sha256sum_recipe(tmp_path: Path) -> None:
    d = write_campaign(tmp_path / "c")
    recipe = "find . -type f -printf '%P\\n' | LC_ALL=C sort | xargs -d '\\n' sha256sum | sha256sum"
    out = subprocess.run(["bash", "-c", recipe], cwd=d, capture_output=True, text=True, check=True)
    assert out.stdout.split()[0] == tree_digest(d)


def test_cli_inventory_exit_codes(tmp_path: Path, keys: Keys) -> None:
    root = _root(tmp_path, keys)
    cmd = [
        sys.executable,
        "-m",
        "reprobundle.cli",
        "inventory",
        str(root),
        "--key",
        str(keys.public_path),
    ]
    first = subprocess.run(cmd, capture_output=True, text=True)
    assert first.returncode == 1
    assert "unregistered mini.bundle" in first.stdout
    subprocess.run([*cmd, "--fix"], capture_output=True, text=True, check=True)
    done = subprocess.run([*cmd, "--json"], capture_output=True, text=True)
    assert done.returncode == 0
    assert json.loads(done.stdout)["ok"] is True


# --- issue 12, defects 5 and 7: hostile folders --------------------------------------------


def test_fix_registers_good_entries_and_reports_each_bad_one(tmp_path: Path, keys: Keys) -> None:
    root = _root(tmp_path, keys)
    data = (root / "mini.bundle").read_bytes()
    (root / "truncated.bundle").write_bytes(data[: len(data) // 2])
    (root / "junk.bundle").write_bytes(b"this is not a bundle")
    (root / "broken-campaign").mkdir()
    (root / "broken-campaign" / "campaign.json").write_text("{not json")
    (root / "list-campaign").mkdir()
    (root / "list-campaign" / "campaign.json").write_text("[1, 2]")
    rep = check_inventory(root, trust=Trust.keys([keys.public]), fix=True)
    assert {e["path"] for e in rep.added} == {"mini-campaign", "mini.bundle"}
    bad = {b["path"]: b["problem"] for b in rep.invalid}
    assert set(bad) == {"broken-campaign", "junk.bundle", "list-campaign", "truncated.bundle"}
    assert bad["junk.bundle"] == "not a reprobundle archive (no zstd frame)"
    assert "truncated" in bad["truncated.bundle"]
    assert bad["broken-campaign"].startswith("campaign.json: not valid JSON")
    assert bad["list-campaign"] == "campaign.json: not a JSON object"
    assert not rep.ok
    register = json.loads((root / INVENTORY_NAME).read_text())
    assert [e["path"] for e in register["entries"]] == ["mini-campaign", "mini.bundle"]
    verdicts = {v["path"]: v["ok"] for v in rep.verify}
    assert verdicts == {"junk.bundle": False, "mini.bundle": True, "truncated.bundle": False}


def test_cli_fix_on_a_hostile_folder_exits_1_without_traceback(tmp_path: Path) -> None:
    root = tmp_path / "evidence"
    (root / "new-campaign").mkdir(parents=True)
    (root / "new-campaign" / "campaign.json").write_text('{"id": ')
    (root / "x.bundle").write_bytes(b"\x28\xb5\x2f\xfd garbage")
    cmd = [sys.executable, "-m", "reprobundle.cli", "inventory", str(root), "--allow-unsigned"]
    proc = subprocess.run([*cmd, "--fix"], capture_output=True, text=True)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 1
    assert "invalid     new-campaign: campaign.json: not valid JSON" in proc.stdout
    assert "invalid     x.bundle:" in proc.stdout
    doc = json.loads(subprocess.run([*cmd, "--fix", "--json"], capture_output=True).stdout)
    assert {b["path"] for b in doc["invalid"]} == {"new-campaign", "x.bundle"}


def _campaign_with_artifacts(root: Path, rows: list[dict[str, object]]) -> Path:
    camp = write_campaign(root / "camp")
    (camp / "artifacts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return camp


def test_artifact_paths_outside_root_are_refused_never_read(tmp_path: Path) -> None:
    import hashlib

    secret = tmp_path / "outside.bin"
    secret.write_bytes(b"private data outside ROOT")
    digest = hashlib.sha256(secret.read_bytes()).hexdigest()
    root = tmp_path / "evidence"
    root.mkdir()
    camp = root / "camp"
    rows: list[dict[str, object]] = [
        {"path": str(secret), "kind": "other", "sha256": digest, "availability": "x"},
        {"path": "../../outside.bin", "kind": "other", "sha256": digest, "availability": "x"},
        {"path": "linked.bin", "kind": "other", "sha256": digest, "availability": "x"},
        {"path": "here.bin", "kind": "other", "availability": "x"},
    ]
    _campaign_with_artifacts(root, rows)
    (camp / "linked.bin").symlink_to(secret)
    (camp / "here.bin").write_bytes(b"inside")
    rep = check_inventory(root, trust=Trust.allow_unsigned())
    got = {a["path"]: (a["class"], a.get("detail")) for a in rep.artifacts}
    assert got[str(secret)] == ("refused", "unacceptable path: absolute path")
    assert got["../../outside.bin"] == ("refused", "unacceptable path: path climbs out with '..'")
    assert got["linked.bin"] == ("refused", "resolves outside its folder (symbolic link)")
    assert got["here.bin"] == ("local, verified", None)
    assert not rep.ok
    assert all(c != "local, verified" for p, (c, _) in got.items() if p != "here.bin")


def test_top_level_symlinks_are_not_followed(tmp_path: Path, keys: Keys) -> None:
    root = _root(tmp_path, keys)
    elsewhere = write_campaign(tmp_path / "elsewhere")
    (root / "linked-campaign").symlink_to(elsewhere, target_is_directory=True)
    (root / "linked.bundle").symlink_to(root / "mini.bundle")
    rep = check_inventory(root, trust=Trust.keys([keys.public]), fix=True)
    assert {"linked-campaign", "linked.bundle"} <= set(rep.unclassified)
    assert {e["path"] for e in rep.added} == {"mini-campaign", "mini.bundle"}


def test_allow_unsigned_entries_say_untrusted(tmp_path: Path, keys: Keys) -> None:
    root = _root(tmp_path, keys)
    check_inventory(root, trust=Trust.allow_unsigned(), fix=True)
    rep = check_inventory(root, trust=Trust.allow_unsigned())
    assert rep.ok
    assert [(v["ok"], v["trusted"]) for v in rep.verify] == [(True, False)]
    cmd = [sys.executable, "-m", "reprobundle.cli", "inventory", str(root), "--allow-unsigned"]
    out = subprocess.run(cmd, capture_output=True, text=True).stdout
    assert "verify      mini.bundle: intact, UNTRUSTED (signature unchecked)" in out
    trusted = check_inventory(root, trust=Trust.keys([keys.public]))
    assert [(v["ok"], v["trusted"]) for v in trusted.verify] == [(True, True)]
