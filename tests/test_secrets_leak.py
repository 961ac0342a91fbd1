"""Planted secrets reach no byte of a sealed bundle (issue 12, defects 1 and 2).

A campaign carries one set of planted secrets (addresses, host names, a home path, URL
credentials, tokens, AWS keys, Basic credentials) in every author-supplied string field
the layout has: documents, every table's free-text fields, unknown fields and their
names, artifacts' ``availability`` and ``uri``, logs, and a ``.log`` outside ``logs/``.
After sealing, each planted value is searched for in every decompressed byte of the
bundle, in the decoded DSSE payload (the signed statement), and in every decoded Parquet
value and metadata entry. Names (campaign id, artifact paths, file names) cannot be
scrubbed without breaking references, so a secret there refuses the seal; a credential
in a member carried verbatim does too.
"""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from bundler.errors import CampaignError
from bundler.format.container import read_container
from bundler.seal import seal_campaign
from tests.campaign_builder import receipts, write_campaign
from tests.conftest import Keys

BASIC = base64.b64encode(b"carol_planted:Pw0rdPlanted").decode()

# name -> the planted text that must not survive (each is searched for verbatim).
SECRETS: dict[str, str] = {
    "ipv4": "10.77.66.55",
    "ipv4_zeros": "010.077.066.057",
    "ipv6": "fd12:3456:789a::77",
    "fqdn": "gpu-node-17.cluster.internal",
    "named_host": "h100box-x9",
    "home_user": "alice_planted",
    "url_user": "bob_planted",
    "url_password": "Hunter2Planted",
    "bearer": "tokPLANTEDbearer123",
    "aws_secret_a": "wJalrXUtnFEMIK7MDENGbPxRfiCYPLANTED01234",
    "aws_secret_b": "je7MtGbClwBF2Zp9Utk/h3yCo8nvbPLANTED5678",
    "asia_key_id": "ASIAPLANTED123456789",
    "akia_key_id": "AKIAPLANTED987654321",
    "basic": BASIC,
    "hf_token": "hf_PLANTEDaaaabbbbccccddddeeee",
    "secret_field": "plainPLANTEDvalue",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJwbGFudGVkIn0.c2lnUExBTlRFRA",
}


def dirty(i: int = 0) -> str:
    """One line carrying every planted secret (``i`` varies the surrounding words)."""
    s = SECRETS
    return (
        f"[{i}] from {s['ipv4']}. and {s['ipv4_zeros']} ({s['ipv6']}) on {s['fqdn']}:8000 "
        f"host {s['named_host']} cwd /home/{s['home_user']}/runs "
        f"git https://{s['url_user']}:{s['url_password']}@example.org/r.git "
        f"Authorization: Bearer {s['bearer']} "
        f"aws_secret_access_key={s['aws_secret_a']} "
        f"AWS_SECRET_ACCESS_KEY: {s['aws_secret_b']} key {s['asia_key_id']} {s['akia_key_id']} "
        f"Authorization: Basic {s['basic']} HF_TOKEN={s['hf_token']} "
        f'"password": "{s["secret_field"]}" jwt {s["jwt"]}'
    )


def planted_campaign(root: Path) -> Path:
    """A valid campaign with planted secrets in every author-supplied string field."""
    rows = receipts()
    for i, r in enumerate(rows):
        r["error"] = dirty(i)
        r["note_free"] = dirty(i)  # an unknown field: goes to the ``extra`` column
    rows[0][SECRETS["ipv4"]] = "an unknown field whose *name* is an address"
    rows[1]["HF_TOKEN"] = SECRETS["secret_field"]  # a secret-named unknown field
    rows[2]["nested"] = {SECRETS["fqdn"]: {"password": SECRETS["secret_field"]}, "n": 5}
    rows[3]["server"] = f"{SECRETS['named_host']}.{SECRETS['fqdn']}"  # an id field
    camp = write_campaign(
        root,
        **{
            "receipts.jsonl": rows,
            "attempts.jsonl": [
                {"attempt_id": "a1", "status": "interrupted", "reason": dirty(1), "note": dirty(2)},
                {"attempt_id": "a2", "status": "accepted", "plan": dirty(3)},
            ],
            "claims.json": [
                {
                    "claim_id": "lower",
                    "statistic": "percent_lower",
                    "params": {"baseline": "baseline", "candidate": "candidate"},
                    "value": "60.00",
                    "unit": "%",
                    "decimals": 2,
                    "text": dirty(4),
                }
            ],
            "worker_exits.jsonl": [
                {
                    "attempt_id": "a2",
                    "arm": "baseline",
                    "server": "b1",
                    "worker": f"{SECRETS['fqdn']}/w0",
                    "exit_s": 1.5,
                }
            ],
            "telemetry.jsonl": [
                {
                    "attempt_id": "a2",
                    "arm": "baseline",
                    "server": "b1",
                    "device": f"{SECRETS['ipv4_zeros']}-{SECRETS['named_host']}",
                    "time": "2026-03-01T10:00:00Z",
                    "hbm_used_mb": 10.20304,
                    "source": dirty(7),
                }
            ],
            "sources.jsonl": [
                {
                    "source_id": "s1",
                    "optimization": dirty(8),
                    "origin": dirty(9),
                    "adopted": True,
                    "evidence": dirty(10),
                    "evidence_limit": dirty(11),
                }
            ],
            "not_claimed.jsonl": [{"what": dirty(12), "note": dirty(13)}],
            "artifacts.jsonl": [
                {
                    "path": "media/clip-0.mp4",
                    "sha256": "ab" * 32,
                    "kind": "media",
                    "availability": dirty(14),
                    "uri": f"https://{SECRETS['url_user']}:{SECRETS['url_password']}@"
                    f"{SECRETS['fqdn']}/clips/0.mp4?token={SECRETS['bearer']}",
                }
            ],
            "scorer.json": {
                "name": dirty(15),
                "version": dirty(16),
                "net": "alex",
                "note": dirty(17),
                "weights": [{"role": "linear", "file": "alex.pth", "sha256": "cd" * 32}],
            },
            "logs/server.log": "\n".join(dirty(i) for i in range(20, 30)) + "\n",
            "notes/run.log": dirty(31) + "\n",  # a log outside logs/: scrubbed too
        },
    )
    doc = json.loads((camp / "campaign.json").read_text())
    doc.update(
        title=dirty(40),
        summary=dirty(41),
        hardware={"accelerator": dirty(42), "count": 2},
        runtime={
            "cmd": dirty(43),
            "env": {"HF_TOKEN": SECRETS["secret_field"], "DB_PASSWORD": SECRETS["secret_field"]},
            "per_host": {SECRETS["ipv4"]: 1.25, SECRETS["fqdn"]: [dirty(44)]},
        },
        sanitize={"hostnames": [SECRETS["named_host"]]},
        unknown_top_level=[dirty(45), {"deeper": dirty(46)}],
    )
    doc["arms"][0]["description"] = dirty(47)
    (camp / "campaign.json").write_text(json.dumps(doc), encoding="utf-8")
    return camp


def _leaves(value: Any) -> list[str]:
    """Every scalar inside a decoded Parquet value (lists, structs, maps) as text."""
    out: list[str] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list | tuple):
            stack.extend(v)
        else:
            out.append(str(v))
    return out


def parquet_strings(data: bytes) -> list[str]:
    """Every decoded value of every column, cast to text, plus the file's metadata."""
    table = pq.read_table(io.BytesIO(data))
    out: list[str] = []
    for column in table.columns:
        col = column.cast(pa.int64()) if pa.types.is_timestamp(column.type) else column
        for v in col.to_pylist():
            out += _leaves(v)
    meta = pq.read_metadata(io.BytesIO(data)).metadata or {}
    for k, v in meta.items():
        out.append(k.decode("utf-8", "replace"))
        out.append(v.decode("utf-8", "replace"))
        if k == b"ARROW:schema":
            out.append(base64.b64decode(v).decode("utf-8", "replace"))
    return out


def every_text(bundle: Path) -> list[bytes]:
    """The decompressed tar, the decoded signed payload and every decoded Parquet value."""
    blobs = [zstandard.ZstdDecompressor().decompress(bundle.read_bytes())]
    for m in read_container(bundle):
        blobs.append(m.data)
        if m.name.endswith(".parquet"):
            blobs.append("\n".join(parquet_strings(m.data)).encode("utf-8"))
        if m.name == "signatures.dsse.json":
            blobs.append(base64.b64decode(json.loads(m.data)["payload"]))
    return blobs


def test_no_planted_secret_survives_anywhere_in_the_bundle(tmp_path: Path, keys: Keys) -> None:
    camp = planted_campaign(tmp_path / "c")
    out = tmp_path / "s.bundle"
    res = seal_campaign(camp, out, keys=[keys.private])
    blobs = every_text(out)
    leaks = [
        (name, i)
        for name, secret in SECRETS.items()
        for i, blob in enumerate(blobs)
        if secret.encode() in blob
    ]
    assert leaks == [], f"leaked (secret, blob index): {leaks}"
    # The log outside logs/ was scrubbed, and the manifest says so.
    rows = res.sanitization
    assert any(r["member"] == "files/notes/run.log" and r["rule"] == "ipv4" for r in rows)
    manifest = json.loads(read_container(out)[0].data)
    roles = {m["path"]: m["role"] for m in manifest["members"]}
    assert roles["files/notes/run.log"] == "log"
    assert any(
        r["member"] == "manifest.json" and r["field"] == "external.availability" for r in rows
    )
    # Credentials of the new rules were found by those rules.
    found = {r["rule"] for r in rows}
    assert {
        "api_key",
        "basic_auth",
        "bearer_token",
        "url_credentials",
        "key_literal",
        "secret_field",
        "ipv4",
        "ipv6",
        "hostname",
        "home_path",
    } <= found


def test_externals_in_manifest_and_statement_match_the_scrubbed_table(
    tmp_path: Path, keys: Keys
) -> None:
    camp = planted_campaign(tmp_path / "c")
    out = tmp_path / "s.bundle"
    seal_campaign(camp, out, keys=[keys.private])
    members = {m.name: m.data for m in read_container(out)}
    table = pq.read_table(io.BytesIO(members["tables/artifacts.parquet"])).to_pylist()
    manifest = json.loads(members["manifest.json"])
    statement = json.loads(base64.b64decode(json.loads(members["signatures.dsse.json"])["payload"]))
    (ext,) = manifest["external"]
    (subject,) = [s for s in statement["subject"] if s["name"].startswith("external:")]
    assert ext["availability"] == table[0]["availability"] == subject["annotations"]["availability"]
    assert ext["uri"] == table[0]["uri"]
    assert "<redacted>@<host-" in ext["uri"]
    assert "<ip-" in ext["availability"]


def test_numbers_stay_exact_next_to_scrubbed_text(tmp_path: Path, keys: Keys) -> None:
    camp = planted_campaign(tmp_path / "c")
    out = tmp_path / "s.bundle"
    seal_campaign(camp, out, keys=[keys.private])
    members = {m.name: m.data for m in read_container(out)}
    tele = pq.read_table(io.BytesIO(members["tables/telemetry.parquet"])).to_pylist()
    assert tele[0]["hbm_used_mb"] == 10.20304
    doc = json.loads(members["campaign.json"])
    per_host = doc["runtime"]["per_host"]
    assert [v for k, v in per_host.items() if k.startswith("<ip-")] == [1.25]
    rec = pq.read_table(io.BytesIO(members["tables/receipts.parquet"])).to_pylist()
    assert [r["e2e_s"] for r in rec] == [r["e2e_s"] for r in receipts()]
    extra = json.loads(rec[2]["extra"])
    assert extra["nested"]["n"] == 5


@pytest.mark.parametrize(
    ("where", "change"),
    [
        ("campaign id", {"id": "run-10.77.66.55"}),
        ("artifact path", {"artifact": "media/gpu-node-17.cluster.internal/clip.mp4"}),
        ("file name", {"file": "notes/h100box-x9.md"}),
        ("log name", {"file": "logs/10.77.66.55/server.log"}),
    ],
)
def test_a_secret_in_a_name_refuses_the_seal(
    tmp_path: Path, keys: Keys, where: str, change: dict[str, str]
) -> None:
    extra: dict[str, Any] = {}
    if "artifact" in change:
        extra["artifacts.jsonl"] = [
            {"path": change["artifact"], "sha256": "ab" * 32, "kind": "media", "availability": "x"}
        ]
    if "file" in change:
        extra[change["file"]] = "hello\n"
    camp = write_campaign(tmp_path / "c", **extra)
    doc = json.loads((camp / "campaign.json").read_text())
    doc["sanitize"] = {"hostnames": ["h100box-x9"]}
    if "id" in change:
        doc["id"] = change["id"]
    (camp / "campaign.json").write_text(json.dumps(doc), encoding="utf-8")
    out = tmp_path / "s.bundle"
    with pytest.raises(CampaignError) as err:
        seal_campaign(camp, out, keys=[keys.private])
    assert "carried verbatim as a name" in str(err.value), where
    assert not out.exists()


@pytest.mark.parametrize(
    "line",
    [
        f"export AWS_ACCESS_KEY_ID={SECRETS['asia_key_id']}",
        f"curl https://{SECRETS['url_user']}:{SECRETS['url_password']}@example.org/x",
        f"Authorization: Basic {BASIC}",
        "-----BEGIN OPENSSH PRIVATE KEY-----",
        f"HF={SECRETS['hf_token']}",
    ],
)
def test_a_credential_in_a_verbatim_file_refuses_the_seal(
    tmp_path: Path, keys: Keys, line: str
) -> None:
    camp = write_campaign(tmp_path / "c", **{"scripts/run.sh": f"#!/bin/sh\n{line}\n"})
    out = tmp_path / "s.bundle"
    with pytest.raises(CampaignError) as err:
        seal_campaign(camp, out, keys=[keys.private])
    assert "files/scripts/run.sh, record line 2" in str(err.value)
    assert "looks like a credential" in str(err.value)
    assert not out.exists()


def test_identifying_details_in_a_verbatim_file_are_warned_and_recorded(
    tmp_path: Path, keys: Keys
) -> None:
    camp = write_campaign(
        tmp_path / "c", **{"scripts/run.sh": "#!/bin/sh\nssh root@10.1.1.1 # token: $TOKEN\n"}
    )
    res = seal_campaign(camp, tmp_path / "s.bundle", keys=[keys.private])
    assert [(f["member"], f["line"], f["rule"]) for f in res.findings] == [
        ("files/scripts/run.sh", 2, "ipv4")
    ]


def test_a_non_utf8_log_outside_logs_is_refused(tmp_path: Path, keys: Keys) -> None:
    camp = write_campaign(tmp_path / "c", **{"notes/run.log": b"\xff\xfe binary"})
    with pytest.raises(CampaignError, match="log files must be UTF-8"):
        seal_campaign(camp, tmp_path / "s.bundle", keys=[keys.private])


def test_keys_that_collide_once_scrubbed_are_a_located_problem(tmp_path: Path, keys: Keys) -> None:
    camp = write_campaign(tmp_path / "c")
    doc = json.loads((camp / "campaign.json").read_text())
    doc["runtime"] = {"per_host": {"Node7.corp": 1, "node7.corp": 2}}
    (camp / "campaign.json").write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(CampaignError, match=r"runtime\.per_host.*two keys become"):
        seal_campaign(camp, tmp_path / "s.bundle", keys=[keys.private])


def test_unknown_field_names_that_collide_once_scrubbed_are_a_located_problem(
    tmp_path: Path, keys: Keys
) -> None:
    rows = receipts()
    rows[0]["Node7.corp"] = 1
    rows[0]["node7.corp"] = 2
    camp = write_campaign(tmp_path / "c", **{"receipts.jsonl": rows})
    with pytest.raises(CampaignError, match=r"receipts\.jsonl.*two unknown field names become"):
        seal_campaign(camp, tmp_path / "s.bundle", keys=[keys.private])


def test_a_rotated_log_outside_logs_is_scrubbed(tmp_path: Path, keys: Keys) -> None:
    camp = write_campaign(tmp_path / "c", **{"run/server.log.1": f"up on {SECRETS['ipv4']}\n"})
    out = tmp_path / "s.bundle"
    seal_campaign(camp, out, keys=[keys.private])
    members = {m.name: m.data for m in read_container(out)}
    assert members["files/run/server.log.1"] == b"up on <ip-1>\n"


def test_findings_of_many_verbatim_files_come_in_member_order(tmp_path: Path, keys: Keys) -> None:
    """The carried files are scanned on several threads: the findings must still be each
    file's own, in member order (here: files sorted by name, lines in order), and a
    credential in any one of them still refuses the seal."""
    files = {
        f"scripts/s{i:02d}.sh": f"#!/bin/sh\necho {i}\nssh root@10.1.1.{i}\n" for i in range(12)
    }
    files["scripts/s05.sh"] += "ping fd12:3456:789a::5\n"
    camp = write_campaign(tmp_path / "c", **files)
    res = seal_campaign(camp, tmp_path / "s.bundle", keys=[keys.private])
    expected = [(f"files/scripts/s{i:02d}.sh", 3, "ipv4") for i in range(12)]
    expected.insert(6, ("files/scripts/s05.sh", 4, "ipv6"))
    assert [(f["member"], f["line"], f["rule"]) for f in res.findings] == expected

    files["scripts/s09.sh"] += f"HF={SECRETS['hf_token']}\n"
    camp2 = write_campaign(tmp_path / "c2", **files)
    with pytest.raises(CampaignError) as err:
        seal_campaign(camp2, tmp_path / "s2.bundle", keys=[keys.private])
    assert "files/scripts/s09.sh, record line 4" in str(err.value)
    assert not (tmp_path / "s2.bundle").exists()
