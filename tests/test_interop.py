"""Interop with clients nobody here wrote (issue 12), and the predicate's published contract.

* The envelope verifies with ``securesystemslib``'s DSSE implementation
  (``securesystemslib.dsse.Envelope`` + ``SSlibKey`` from the public key): its
  own PAE and Ed25519 verification, not ours.
* The statement parses with the in-toto attestation framework's Python package
  (``in_toto_attestation``: protobuf ``Statement``, then its ``validate()``).
* The predicate validates against ``specs/schemas/predicate.bundle.v1.schema.json``;
  the predicate type is the documented URI; bundles carrying the old URN still verify.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from google.protobuf import json_format
from in_toto_attestation.v1 import statement_pb2
from in_toto_attestation.v1.statement import Statement
from securesystemslib.dsse import Envelope as SslibEnvelope
from securesystemslib.exceptions import VerificationError
from securesystemslib.signer import SSlibKey  # type: ignore[attr-defined]  # re-exported, no __all__

from bundler._internal import jcs
from bundler.format.container import read_container, write_container
from bundler.format.dsse import INTOTO_PAYLOAD_TYPE, parse_envelope, sign_payload
from bundler.format.keys import key_id
from bundler.format.manifest import ENVELOPE_NAME, MANIFEST_NAME
from bundler.format.trust import Trust
from bundler.verify import check_bundle
from tests.conftest import Keys, make_keys

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "specs" / "schemas" / "predicate.bundle.v1.schema.json"
PREDICATE_URI = "https://reprobundle.invalid/predicate/bundle/v1"


def _members(bundle: Path) -> dict[str, bytes]:
    return {m.name: m.read_bytes() for m in read_container(bundle)}


def _sslib_verify(envelope: bytes, keys: Keys) -> dict[str, Any]:
    env = SslibEnvelope.from_dict(json.loads(envelope))
    key = SSlibKey.from_crypto(keys.public, keyid=keys.key_id)
    return env.verify([key], 1)


def test_envelope_verifies_with_securesystemslib(sealed: Path, keys: Keys) -> None:
    accepted = _sslib_verify(_members(sealed)[ENVELOPE_NAME], keys)
    assert list(accepted) == [keys.key_id]


def test_securesystemslib_rejects_a_changed_payload_and_a_stranger(
    sealed: Path, keys: Keys, tmp_path: Path
) -> None:
    """The check above can fail: same library, one changed payload byte; and another key."""
    doc = json.loads(_members(sealed)[ENVELOPE_NAME])
    payload = bytearray(base64.b64decode(doc["payload"]))
    payload[-2] ^= 1
    doc["payload"] = base64.b64encode(bytes(payload)).decode()
    with pytest.raises(VerificationError):
        _sslib_verify(json.dumps(doc).encode(), keys)
    stranger = make_keys(tmp_path, "stranger")
    # the stranger's key under the author's keyid: the signature itself must not verify
    env = SslibEnvelope.from_dict(json.loads(_members(sealed)[ENVELOPE_NAME]))
    with pytest.raises(VerificationError):
        env.verify([SSlibKey.from_crypto(stranger.public, keyid=keys.key_id)], 1)


def test_statement_parses_and_validates_with_in_toto_attestation(sealed: Path) -> None:
    payload = parse_envelope(_members(sealed)[ENVELOPE_NAME]).payload
    pb = json_format.Parse(payload.decode("utf-8"), statement_pb2.Statement())
    stmt = Statement.copy_from_pb(pb)
    stmt.validate()  # raises ValueError on a malformed statement
    assert stmt.pb.type == "https://in-toto.io/Statement/v1"
    assert stmt.pb.predicate_type == PREDICATE_URI
    names = [s.name for s in stmt.pb.subject]
    members = _members(sealed)
    assert names[0] == MANIFEST_NAME
    assert stmt.pb.subject[0].digest["sha256"] == hashlib.sha256(members[MANIFEST_NAME]).hexdigest()
    assert set(names) == set(members) - {ENVELOPE_NAME}


def test_predicate_validates_against_the_published_schema(sealed: Path) -> None:
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    members = _members(sealed)
    stmt = json.loads(parse_envelope(members[ENVELOPE_NAME]).payload)
    assert stmt["predicateType"] == PREDICATE_URI
    jsonschema.validate(stmt["predicate"], schema, cls=jsonschema.Draft202012Validator)
    # and the schema is not vacuous: a predicate that does not bind a manifest fails it
    bad = {**stmt["predicate"], "manifest": {"name": MANIFEST_NAME, "sha256": "xyz", "size": 1}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema, cls=jsonschema.Draft202012Validator)


def test_the_shipped_schema_is_the_one_in_specs() -> None:
    assert (ROOT / "bundler" / "schemas" / SCHEMA.name).read_bytes() == SCHEMA.read_bytes()


def _with_predicate_type(sealed: Path, keys: Keys, ptype: str, out: Path) -> Path:
    members = _members(sealed)
    stmt = json.loads(parse_envelope(members[ENVELOPE_NAME]).payload)
    stmt["predicateType"] = ptype
    env = sign_payload(jcs.dumps(stmt), [keys.private], INTOTO_PAYLOAD_TYPE)
    members[ENVELOPE_NAME] = env.to_bytes()
    buf = io.BytesIO()
    write_container(buf, list(members.items()))
    out.write_bytes(buf.getvalue())
    return out


def test_bundles_with_the_old_urn_predicate_type_still_verify(
    sealed: Path, keys: Keys, tmp_path: Path
) -> None:
    old = _with_predicate_type(
        sealed, keys, "urn:reprobundle:predicate:bundle:v1", tmp_path / "old.bundle"
    )
    rep = check_bundle(old, trust=Trust.keys([keys.public]))
    assert rep.ok, rep.problems
    other = _with_predicate_type(
        sealed, keys, "https://reprobundle.invalid/predicate/bundle/v2", tmp_path / "v2.bundle"
    )
    rep = check_bundle(other, trust=Trust.keys([keys.public]))
    assert not rep.ok
    assert any("unknown predicateType" in p.message for p in rep.problems)
    assert key_id(keys.public) == keys.key_id
