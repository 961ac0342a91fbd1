"""A manifest that lists one path twice is refused by verify (issue 19, defect 13).

Checks keyed by path keep one entry per path; before this was refused, a second
entry for a member (or an external artifact) let the first one go unchecked and
the bundle verified. The bundles here are re-signed by the trusted key over a
statement that names each subject once, as an author's tool would write it, so
only the duplicate itself can fail them.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from bundler.format.container import read_container
from bundler.format.trust import SignatureStatus, Trust
from bundler.verify import check_bundle
from reprobundle.cli.main import main
from tests.conftest import Keys
from tests.resign import resign


def _last_wins(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per path, the later entry kept: what a path-keyed reader sees."""
    return list({e["path"]: e for e in entries}.values())


def _resign_with(sealed: Path, out: Path, keys: Keys, edit: Any) -> Path:
    """``sealed`` with its manifest edited by ``edit`` and re-signed by ``keys``.

    The statement is built over the manifest with duplicates collapsed, so its
    subjects name each path once and match what a last-entry-wins reading expects.
    """
    members = [(m.name, m.data) for m in read_container(sealed)]

    def collapsed(doc: dict[str, Any]) -> dict[str, Any]:
        unique = copy.deepcopy(doc)
        unique["members"] = _last_wins(unique["members"])
        unique["external"] = _last_wins(unique["external"])
        return unique

    out.write_bytes(resign(members, [keys.private], edit_manifest=edit, statement_of=collapsed))
    return out


def _bogus_first_entry(doc: dict[str, Any]) -> None:
    """List campaign.json twice: first with a wrong digest and size, then the true entry."""
    true = next(m for m in doc["members"] if m["path"] == "campaign.json")
    doc["members"].insert(0, {**true, "sha256": "0" * 64, "size": 1})


def _external_twice(doc: dict[str, Any]) -> None:
    base = {"kind": "log", "availability": "archived", "uri": None, "hashed_at_seal": False}
    doc["external"] += [
        {"path": "raw/run.log", "sha256": "1" * 64, "bytes": 10, **base},
        {"path": "raw/run.log", "sha256": "2" * 64, "bytes": 20, **base},
    ]


def test_a_member_listed_twice_is_refused(sealed: Path, keys: Keys, tmp_path: Path) -> None:
    bad = _resign_with(sealed, tmp_path / "dup.bundle", keys, _bogus_first_entry)
    rep = check_bundle(bad, trust=Trust.keys([keys.public]))
    assert rep.signature_status == SignatureStatus.VERIFIED  # the signature is not what fails it
    assert not rep.ok
    dup = [p for p in rep.problems if p.where == "campaign.json" and p.field == "path"]
    assert len(dup) == 1, rep.problems
    assert "listed 2 times" in dup[0].message


def test_an_external_artifact_listed_twice_is_refused(
    sealed: Path, keys: Keys, tmp_path: Path
) -> None:
    bad = _resign_with(sealed, tmp_path / "ext.bundle", keys, _external_twice)
    rep = check_bundle(bad, trust=Trust.keys([keys.public]))
    assert rep.signature_status == SignatureStatus.VERIFIED
    assert not rep.ok
    assert [(p.where, p.field) for p in rep.problems] == [("external:raw/run.log", "path")]


def test_cli_exits_1_naming_the_member(sealed: Path, keys: Keys, tmp_path: Path) -> None:
    bad = _resign_with(sealed, tmp_path / "dup.bundle", keys, _bogus_first_entry)
    res = CliRunner().invoke(main, ["verify", str(bad), "--key", str(keys.public_path)])
    assert res.exit_code == 1, res.output
    assert "campaign.json" in res.output and "listed 2 times" in res.output


def test_the_unedited_bundle_still_verifies(sealed: Path, keys: Keys, tmp_path: Path) -> None:
    # The same re-signing path without a duplicate: the refusal above is the duplicate's.
    same = _resign_with(sealed, tmp_path / "same.bundle", keys, lambda doc: None)
    assert check_bundle(same, trust=Trust.keys([keys.public])).ok
