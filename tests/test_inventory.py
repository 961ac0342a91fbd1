"""Inventory: new, missing and changed entries reported; external weights never 'missing'."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

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
    first = check_inventory(root, trusted=[keys.public])
    assert sorted(first.unregistered) == ["mini-campaign", "mini.bundle"]
    assert not first.ok
    fixed = check_inventory(root, trusted=[keys.public], fix=True)
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
    again = check_inventory(root, trusted=[keys.public])
    assert again.ok, again.to_dict()


def test_external_weights_absent_locally_are_external_not_missing(
    tmp_path: Path, keys: Keys
) -> None:
    root = _root(tmp_path, keys)
    rep = check_inventory(root, trusted=[keys.public], fix=True)
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
    check_inventory(root, trusted=[keys.public], fix=True)
    data = bytearray((root / "mini.bundle").read_bytes())
    data[-10] ^= 0x01
    (root / "mini.bundle").write_bytes(bytes(data))
    shutil.rmtree(root / "mini-campaign")
    rep = check_inventory(root, trusted=[keys.public], fix=True)
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
