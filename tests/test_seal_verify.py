"""Seal -> verify round trips, tamper detection, determinism, countersigning, sanitization."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import tarfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import zstandard

from bundler._internal import jcs
from bundler.errors import CampaignError, IntegrityError, UsageError
from bundler.format.container import read_container, write_container
from bundler.format.manifest import ENVELOPE_NAME, MANIFEST_NAME
from bundler.format.trust import SignatureStatus, Trust
from bundler.seal import seal_campaign
from bundler.sign import countersign
from bundler.verify import check_bundle, open_bundle, verify_bundle
from tests.campaign_builder import receipts, write_campaign
from tests.conftest import Keys, make_keys


def repack(src: Path, dst: Path, change: dict[str, bytes | None]) -> Path:
    """Rewrite ``src`` with members replaced (bytes) or dropped (None), validly compressed."""
    members = [(m.name, change.get(m.name, m.data)) for m in read_container(src)]
    extra = [(n, d) for n, d in change.items() if n not in {m for m, _ in members} and d]
    with dst.open("wb") as fh:
        write_container(fh, [(n, d) for n, d in members if d is not None] + extra)
    return dst


def test_seal_then_verify(sealed: Path, keys: Keys) -> None:
    report = verify_bundle(sealed, trust=Trust.keys([keys.public]))
    assert report.signature_status == SignatureStatus.VERIFIED
    assert report.campaign["id"] == "mini"
    assert [s.verified_by for s in report.signatures] == [keys.key_id]


def test_same_campaign_and_key_seal_to_identical_bytes(
    tmp_path: Path, campaign: Path, keys: Keys
) -> None:
    a, b = tmp_path / "a.bundle", tmp_path / "b.bundle"
    seal_campaign(campaign, a, keys=[keys.private])
    # A second copy of the campaign, written later, seals to the same bytes.
    copy = write_campaign(tmp_path / "copy")
    seal_campaign(copy, b, keys=[keys.private])
    assert a.read_bytes() == b.read_bytes()


def test_members_have_fixed_order_and_manifest_lists_every_member(sealed: Path) -> None:
    names = [m.name for m in read_container(sealed)]
    assert names[0] == MANIFEST_NAME
    assert names[-1] == ENVELOPE_NAME
    assert names[1:-1] == sorted(names[1:-1])
    manifest = json.loads(read_container(sealed)[0].data)
    assert [m["path"] for m in manifest["members"]] == names[1:-1]
    assert manifest["format_version"] == "1"


def test_numbers_and_unknown_fields_survive_exactly(tmp_path: Path, keys: Keys) -> None:
    rows = receipts()
    rows[2]["e2e_s"] = 99.123456789012345  # more digits than a float keeps: kept as its double
    rows[2]["gpu_note"] = {"clock_mhz": 1800, "tag": "x"}
    camp = write_campaign(tmp_path / "c", **{"receipts.jsonl": rows})
    out = tmp_path / "x.bundle"
    seal_campaign(camp, out, keys=[keys.private])
    t = open_bundle(out, trust=Trust.keys([keys.public])).table("receipts")
    row = t.slice(2, 1).select(["e2e_s", "extra"]).to_pylist()[0]
    assert row["e2e_s"] == 99.123456789012345
    assert json.loads(row["extra"]) == {"gpu_note": {"clock_mhz": 1800, "tag": "x"}}


def test_parquet_members_carry_format_version_and_zstd(sealed: Path) -> None:
    ms = {m.name: m for m in read_container(sealed)}
    meta = pq.read_metadata(io.BytesIO(ms["tables/receipts.parquet"].data))
    assert meta.metadata is not None
    assert meta.metadata[b"format_version"] == b"1"
    assert meta.metadata[b"reprobundle.table"] == b"receipts"
    assert meta.row_group(0).column(0).compression == "ZSTD"
    assert meta.num_rows == 20


def test_wrong_key_is_untrusted(sealed: Path, tmp_path: Path) -> None:
    other = make_keys(tmp_path, "other")
    report = check_bundle(sealed, trust=Trust.keys([other.public]))
    assert report.signature_status == SignatureStatus.UNTRUSTED
    assert not report.ok
    with pytest.raises(IntegrityError, match="signature untrusted"):
        verify_bundle(sealed, trust=Trust.keys([other.public]))


def test_unsigned_bundle_needs_explicit_allowance(tmp_path: Path, campaign: Path) -> None:
    out = tmp_path / "u.bundle"
    seal_campaign(campaign, out)
    assert check_bundle(out).signature_status == SignatureStatus.UNSIGNED
    assert not check_bundle(out).ok
    assert check_bundle(out, trust=Trust.allow_unsigned()).ok


def test_every_raw_byte_flip_is_detected(sealed: Path, keys: Keys, tmp_path: Path) -> None:
    """A flipped bit of the compressed file fails verify unless it changes no decoded byte.

    Some bits of a zstd stream do not influence the output (e.g. unused bits of an
    entropy table header); such a file decodes to exactly the signed content, and
    accepting it is correct. Everything else must fail.
    """
    data = sealed.read_bytes()
    original = zstandard.ZstdDecompressor().decompress(data)
    positions = sorted({0, len(data) - 1, *range(0, len(data), max(1, len(data) // 300))})
    t = tmp_path / "flip.bundle"
    inert = 0
    for pos in positions:
        for bit in (0x01, 0x80):
            flipped = bytearray(data)
            flipped[pos] ^= bit
            t.write_bytes(bytes(flipped))
            if check_bundle(t, trust=Trust.keys([keys.public])).ok:
                decoded = zstandard.ZstdDecompressor().decompress(bytes(flipped))
                assert decoded == original, f"flip {bit:#x} at byte {pos} went unnoticed"
                inert += 1
    assert inert < len(positions) // 20  # inert bits are rare, not the rule


def test_flip_in_every_member_and_the_signature_is_detected(
    sealed: Path, keys: Keys, tmp_path: Path
) -> None:
    members = read_container(sealed)
    for m in members:
        for pos in {0, len(m.data) // 2, len(m.data) - 1}:
            changed = bytearray(m.data)
            changed[pos] ^= 0x20
            if m.name == ENVELOPE_NAME:
                # Flip inside the signature itself, keeping valid base64 and JSON.
                env = json.loads(m.data)
                sig = bytearray(base64.b64decode(env["signatures"][0]["sig"]))
                sig[pos % len(sig)] ^= 0x01
                env["signatures"][0]["sig"] = base64.b64encode(bytes(sig)).decode()
                changed = bytearray(jcs.dumps(env))
            t = repack(sealed, tmp_path / "t.bundle", {m.name: bytes(changed)})
            report = check_bundle(t, trust=Trust.keys([keys.public]))
            assert not report.ok, f"change in {m.name} at {pos} went unnoticed"


def test_missing_and_unlisted_members_are_named(sealed: Path, keys: Keys, tmp_path: Path) -> None:
    dropped = repack(sealed, tmp_path / "d.bundle", {"tables/gates.parquet": None})
    rep = check_bundle(dropped, trust=Trust.keys([keys.public]))
    assert any(p.where == "tables/gates.parquet" and "absent" in p.message for p in rep.problems)
    added = repack(sealed, tmp_path / "a.bundle", {"files/smuggled.sh": b"rm -rf /"})
    rep = check_bundle(added, trust=Trust.keys([keys.public]))
    assert any(
        p.where == "files/smuggled.sh" and "not in the manifest" in p.message for p in rep.problems
    )


def test_manifest_edit_breaks_the_signed_statement(
    sealed: Path, keys: Keys, tmp_path: Path
) -> None:
    members = {m.name: m for m in read_container(sealed)}
    manifest = json.loads(members[MANIFEST_NAME].data)
    manifest["members"] = [m for m in manifest["members"] if m["path"] != "tables/gates.parquet"]
    t = repack(
        sealed,
        tmp_path / "m.bundle",
        {MANIFEST_NAME: jcs.dumps(manifest), "tables/gates.parquet": None},
    )
    rep = check_bundle(t, trust=Trust.keys([keys.public]))
    assert not rep.ok
    assert any(p.where == ENVELOPE_NAME and p.field == "subject" for p in rep.problems)


def test_unknown_format_version_is_rejected(sealed: Path, tmp_path: Path) -> None:
    members = {m.name: m for m in read_container(sealed)}
    manifest = json.loads(members[MANIFEST_NAME].data)
    manifest["format_version"] = "99"
    t = repack(sealed, tmp_path / "v.bundle", {MANIFEST_NAME: jcs.dumps(manifest)})
    rep = check_bundle(t, trust=Trust.allow_unsigned())
    assert any("unknown format_version '99'" in p.message for p in rep.problems)


def test_unknown_table_format_version_is_rejected(sealed: Path, tmp_path: Path) -> None:
    members = {m.name: m for m in read_container(sealed)}
    table = pq.read_table(io.BytesIO(members["tables/gates.parquet"].data))
    table = table.replace_schema_metadata({"format_version": "7", "reprobundle.table": "gates"})
    buf = io.BytesIO()
    pq.write_table(table, buf)
    t = repack(sealed, tmp_path / "tv.bundle", {"tables/gates.parquet": buf.getvalue()})
    rep = check_bundle(t, trust=Trust.allow_unsigned())
    assert any(
        p.where == "tables/gates.parquet" and "table format version '7'" in p.message
        for p in rep.problems
    )


def test_countersign_keeps_other_members_identical(
    sealed: Path, keys: Keys, tmp_path: Path
) -> None:
    auditor = make_keys(tmp_path, "auditor")
    before = {m.name: m.data for m in read_container(sealed)}
    out = tmp_path / "co.bundle"
    res = countersign(sealed, auditor.private, out, trust=Trust.keys([keys.public]))
    after = {m.name: m.data for m in read_container(out)}
    assert list(before) == list(after)
    assert all(before[n] == after[n] for n in before if n != ENVELOPE_NAME)
    assert res.signers == [keys.key_id, auditor.key_id]
    rep = check_bundle(out, trust=Trust.keys([keys.public, auditor.public]))
    assert [s.verified_by for s in rep.signatures] == [keys.key_id, auditor.key_id]
    # Each key alone still verifies its own signature.
    assert check_bundle(out, trust=Trust.keys([auditor.public])).ok
    with pytest.raises(UsageError, match="already signed"):
        countersign(out, auditor.private, trust=Trust.keys([keys.public]))


def test_countersign_refuses_a_tampered_bundle(sealed: Path, tmp_path: Path) -> None:
    auditor = make_keys(tmp_path, "auditor")
    t = repack(sealed, tmp_path / "t.bundle", {"files/extra.txt": b"x"})
    with pytest.raises(IntegrityError, match="refusing to countersign"):
        countersign(t, auditor.private)


def parquet_text(data: bytes) -> bytes:
    """Every decoded value of a Parquet member as text (timestamps as integers)."""
    import pyarrow as pa

    table = pq.read_table(io.BytesIO(data))
    cols = [c.cast(pa.int64()) if pa.types.is_timestamp(c.type) else c for c in table.columns]
    return str([c.to_pylist() for c in cols]).encode()


SECRETS = {
    "bearer": "eyJhbGciOiJIUzI1NiJ9.c2VjcmV0LXRva2Vu.abc123",
    "ip": "10.20.30.40",
    "ip6": "fe80::1ff:fe23:4567:890a",
    "host": "npu-host-17.cluster.internal",
    "named": "gpu-box-xyz",
    "user": "alice_secret_user",
    "apikey": "sk-ABCDEFGHIJKLMNOPQRSTUV123",
}


def test_planted_secrets_appear_nowhere_after_decompression(tmp_path: Path, keys: Keys) -> None:
    rows = receipts()
    rows[0]["error"] = f"Authorization: Bearer {SECRETS['bearer']} from {SECRETS['ip']}"
    rows[1]["server"] = SECRETS["host"]
    rows[1]["worker_path"] = f"/home/{SECRETS['user']}/runs/out.mp4"
    rows[2]["client"] = f"[{SECRETS['ip6']}]:8000 via {SECRETS['named']}"
    rows[3]["headers"] = {"x-api-key": SECRETS["apikey"]}
    log = (
        f"2026-03-01 host {SECRETS['named']} ({SECRETS['ip']}) "
        f"started by /home/{SECRETS['user']}/bin/run\n"
        f"curl -H 'Authorization: Bearer {SECRETS['bearer']}' http://{SECRETS['host']}:8000/v1\n"
        f"cwd=/home/{SECRETS['user']}/x api_key={SECRETS['apikey']}\n"
    )
    camp = write_campaign(
        tmp_path / "c",
        **{"receipts.jsonl": rows, "logs/server-b1.log": log},
    )
    doc = json.loads((camp / "campaign.json").read_text())
    doc["sanitize"] = {"hostnames": [SECRETS["named"]]}
    (camp / "campaign.json").write_text(json.dumps(doc))
    out = tmp_path / "s.bundle"
    res = seal_campaign(camp, out, keys=[keys.private])
    raw = zstandard.ZstdDecompressor().decompress(out.read_bytes())
    blobs = [raw]
    # Parquet pages are zstd-compressed inside the tar: look inside the decoded tables too.
    for m in read_container(out):
        if m.name.endswith(".parquet"):
            blobs.append(parquet_text(m.data))
    for name, secret in SECRETS.items():
        for blob in blobs:
            assert secret.encode() not in blob, f"{name} leaked"
    rules = {(r["member"], r["rule"]) for r in res.sanitization}
    assert ("tables/receipts.parquet", "bearer_token") in rules
    assert ("logs/server-b1.log", "home_path") in rules
    # Scrubbed, with distinct pseudonyms, and the record says what and how many, never the value.
    manifest = json.loads(read_container(out)[0].data)
    assert SECRETS["ip"] not in json.dumps(manifest)
    assert all(
        set(r) == {"member", "field", "rule", "count"} for r in manifest["sanitization"]["scrubbed"]
    )


def test_raw_numbers_are_not_scrubbed(tmp_path: Path, keys: Keys) -> None:
    rows = receipts()
    rows[2]["e2e_s"] = 10.20304  # looks like part of an address as text, must stay a number
    camp = write_campaign(tmp_path / "c", **{"receipts.jsonl": rows})
    out = tmp_path / "n.bundle"
    seal_campaign(camp, out, keys=[keys.private])
    t = open_bundle(out, trust=Trust.keys([keys.public])).table("receipts")
    assert t.column("e2e_s").to_pylist()[2] == 10.20304


def test_invalid_campaign_reports_every_problem_and_writes_nothing(tmp_path: Path) -> None:
    rows = receipts()
    rows[0]["phase"] = "measurd"
    rows[3]["e2e_s"] = -1
    del rows[5]["status"]
    rows[6]["arm"] = "ghost"
    camp = write_campaign(tmp_path / "c", **{"receipts.jsonl": rows})
    out = tmp_path / "bad.bundle"
    with pytest.raises(CampaignError) as exc:
        seal_campaign(camp, out)
    found = {(p.where, p.record, p.field) for p in exc.value.problems}
    assert ("receipts.jsonl", "line 1", "phase") in found
    assert ("receipts.jsonl", "line 4", "e2e_s") in found
    assert ("receipts.jsonl", "line 6", "status") in found
    assert ("receipts.jsonl", "line 7", "arm") in found
    assert not out.exists()
    assert list(tmp_path.glob("*.partial")) == []


def test_interrupted_seal_leaves_no_output(tmp_path: Path, campaign: Path) -> None:
    media = tmp_path / "media"
    media.mkdir()
    (media / "clip.mp4").write_bytes(b"\x00" * (3 << 20))
    (campaign / "artifacts.jsonl").write_text(
        json.dumps({"path": "clip.mp4", "kind": "media", "availability": "local"}) + "\n"
    )
    out = tmp_path / "i.bundle"

    def interrupt(stage: str, done: int, total: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        seal_campaign(campaign, out, artifact_dirs=[media], progress=interrupt)
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_external_artifacts_hashed_and_checked(tmp_path: Path, campaign: Path, keys: Keys) -> None:
    media = tmp_path / "media"
    (media / "sub").mkdir(parents=True)
    blob = b"fake mp4 bytes" * 1000
    (media / "sub" / "a.mp4").write_bytes(blob)
    digest = hashlib.sha256(blob).hexdigest()
    rows = [
        {"path": "sub/a.mp4", "kind": "media", "availability": "with the author"},
        {
            "path": "w/alexnet.pth",
            "kind": "weights",
            "sha256": "7" * 64,
            "bytes": 5,
            "availability": "not redistributed",
        },
    ]
    (campaign / "artifacts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "e.bundle"
    res = seal_campaign(campaign, out, keys=[keys.private], artifact_dirs=[media])
    assert res.external[0]["sha256"] == digest
    assert res.external[0]["hashed_at_seal"] is True
    assert res.external[1]["hashed_at_seal"] is False
    rep = check_bundle(out, trust=Trust.keys([keys.public]), media_dirs=[media])
    assert rep.ok
    assert {e.path: e.status for e in rep.external} == {
        "sub/a.mp4": "ok",
        "w/alexnet.pth": "absent",
    }
    # Without --media nothing is looked for: both are plain "external".
    assert {e.status for e in check_bundle(out, trust=Trust.keys([keys.public])).external} == {
        "external"
    }
    # A changed local file is a mismatch and a failure.
    (media / "sub" / "a.mp4").write_bytes(blob + b"!")
    rep = check_bundle(out, trust=Trust.keys([keys.public]), media_dirs=[media])
    assert not rep.ok
    assert {e.path: e.status for e in rep.external}["sub/a.mp4"] == "mismatch"


def test_recorded_digest_must_match_local_file(tmp_path: Path, campaign: Path) -> None:
    (campaign / "a.mp4").write_bytes(b"abc")
    (campaign / "artifacts.jsonl").write_text(
        json.dumps({"path": "a.mp4", "kind": "media", "availability": "x", "sha256": "0" * 64})
        + "\n"
    )
    with pytest.raises(CampaignError) as exc:
        seal_campaign(campaign, tmp_path / "x.bundle")
    assert exc.value.problems[0].field == "sha256"
    assert hashlib.sha256(b"abc").hexdigest() in exc.value.problems[0].message


def test_absent_artifact_without_digest_cannot_be_sealed(tmp_path: Path, campaign: Path) -> None:
    (campaign / "artifacts.jsonl").write_text(
        json.dumps({"path": "gone.mp4", "kind": "media", "availability": "lost"}) + "\n"
    )
    with pytest.raises(CampaignError, match="problem") as exc:
        seal_campaign(campaign, tmp_path / "x.bundle")
    assert "cannot be attested" in exc.value.problems[0].message


def test_output_inside_campaign_or_existing_is_refused(tmp_path: Path, campaign: Path) -> None:
    with pytest.raises(UsageError, match="inside the campaign"):
        seal_campaign(campaign, campaign / "x.bundle")
    (tmp_path / "exists.bundle").write_bytes(b"keep me")
    with pytest.raises(UsageError, match="already exists"):
        seal_campaign(campaign, tmp_path / "exists.bundle")
    assert (tmp_path / "exists.bundle").read_bytes() == b"keep me"


def test_symlinks_in_campaign_are_refused(tmp_path: Path, campaign: Path) -> None:
    (campaign / "notes.md").symlink_to("/etc/hostname")
    with pytest.raises(CampaignError) as exc:
        seal_campaign(campaign, tmp_path / "x.bundle")
    assert exc.value.problems[0].where == "notes.md"


def test_tar_reader_sees_no_links_or_dirs_in_a_sealed_bundle(sealed: Path) -> None:
    raw = zstandard.ZstdDecompressor().decompress(sealed.read_bytes())
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        assert all(ti.isreg() for ti in tar.getmembers())


def test_corrupted_signature_of_a_trusted_key_is_invalid(
    sealed: Path, keys: Keys, tmp_path: Path
) -> None:
    members = {m.name: m for m in read_container(sealed)}
    env = json.loads(members[ENVELOPE_NAME].data)
    sig = bytearray(base64.b64decode(env["signatures"][0]["sig"]))
    sig[5] ^= 0x04
    env["signatures"][0]["sig"] = base64.b64encode(bytes(sig)).decode()
    t = repack(sealed, tmp_path / "s.bundle", {ENVELOPE_NAME: jcs.dumps(env)})
    rep = check_bundle(t, trust=Trust.keys([keys.public]))
    assert rep.signature_status == SignatureStatus.INVALID
    assert any(p.record == "signature 0" and keys.key_id in p.message for p in rep.problems)
    # Even --allow-unsigned does not accept a forged signature of a trusted key.
    assert not check_bundle(t, trust=Trust.allow_unsigned([keys.public])).ok


def test_broken_envelope_still_gets_every_member_checked(sealed: Path, tmp_path: Path) -> None:
    t = repack(
        sealed,
        tmp_path / "b.bundle",
        {ENVELOPE_NAME: b"not json", "tables/gates.parquet": b"changed"},
    )
    rep = check_bundle(t, trust=Trust.allow_unsigned())
    wheres = {p.where for p in rep.problems}
    assert {ENVELOPE_NAME, "tables/gates.parquet"} <= wheres


def test_manifest_dropping_a_table_or_miscounting_rows_fails(sealed: Path, tmp_path: Path) -> None:
    members = {m.name: m for m in read_container(sealed)}
    manifest = json.loads(members[MANIFEST_NAME].data)
    manifest["members"] = [m for m in manifest["members"] if m["path"] != "tables/gates.parquet"]
    del manifest["tables"]["gates"]
    manifest["tables"]["receipts"] = 19
    t = repack(
        sealed,
        tmp_path / "d.bundle",
        {MANIFEST_NAME: jcs.dumps(manifest), "tables/gates.parquet": None},
    )
    rep = check_bundle(t, trust=Trust.allow_unsigned())
    got = {(p.where, p.field) for p in rep.problems}
    assert ("tables/gates.parquet", None) in got
    assert ("tables/receipts.parquet", "rows") in got


@pytest.mark.parametrize("bad", ["../../etc/hostname", "/etc/hostname"])
def test_external_path_cannot_escape_media_dir(sealed: Path, tmp_path: Path, bad: str) -> None:
    members = {m.name: m for m in read_container(sealed)}
    manifest = json.loads(members[MANIFEST_NAME].data)
    manifest["external"] = [
        {
            "path": bad,
            "sha256": "0" * 64,
            "bytes": 1,
            "kind": "log",
            "availability": "x",
            "uri": None,
            "hashed_at_seal": False,
        }
    ]
    t = repack(sealed, tmp_path / "e.bundle", {MANIFEST_NAME: jcs.dumps(manifest)})
    media = tmp_path / "media"
    media.mkdir()
    rep = check_bundle(t, trust=Trust.allow_unsigned(), media_dirs=[media])
    assert not rep.ok
    assert all(e.found_at is None for e in rep.external)


def _failing_plan() -> dict[str, object]:
    # The seed's first failing pilot shape: 4 h request/wave timeouts inside a 3 h
    # reservation whose soft TERM comes at 165 min (9,900 s).
    return {
        "plan_version": "1",
        "id": "p",
        "arm_order": ["baseline", "candidate", "candidate", "baseline"],
        "warmups_per_server": 2,
        "measured_per_server": 3,
        "request": {"api": "videos-async", "timing_boundary": "post_to_delete"},
        "timeouts": {"request_s": 14400, "wave_s": 14400},
        "reservation": {"hard_limit_s": 10800, "soft_term_s": 9900, "kill_grace_s": 180},
        "teardown": {
            "baseline": {"term_wait_s": 60, "kill_wait_s": 90},
            "candidate": {"term_wait_s": 30, "kill_wait_s": 60},
        },
    }


def test_plan_check_errors_block_a_campaign_seal(tmp_path: Path) -> None:
    camp = write_campaign(tmp_path / "c", **{"plans/p.json": _failing_plan()})
    with pytest.raises(CampaignError) as exc:
        seal_campaign(camp, tmp_path / "x.bundle")
    assert all(p.where == "plans/p.json" for p in exc.value.problems)
    assert any("reservation soft TERM" in p.message for p in exc.value.problems)
    assert not (tmp_path / "x.bundle").exists()


def test_plan_check_errors_only_warn_for_a_pilot(tmp_path: Path) -> None:
    camp = write_campaign(tmp_path / "c", **{"plans/p.json": _failing_plan()})
    doc = json.loads((camp / "campaign.json").read_text())
    doc["kind"] = "pilot"
    (camp / "campaign.json").write_text(json.dumps(doc))
    res = seal_campaign(camp, tmp_path / "x.bundle")
    assert any("reservation soft TERM" in w for w in res.warnings)
