"""Re-sign a bundle's members after a test edited them: one way, for every hostile test.

A hostile bundle is one a trusted key signed over content that is not sane: the
attacker is (or has stolen the key of) the author. Tests build such bundles by
editing the members of an honest one, then rebuilding the manifest and the
in-toto statement over the edited bytes and signing them again, exactly as seal
would, so that `verify` passes and the readers behind it are what is tested.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pyarrow.parquet as pq
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bundler._internal import jcs
from bundler.format.container import write_container
from bundler.format.dsse import INTOTO_PAYLOAD_TYPE, sign_payload
from bundler.format.manifest import ENVELOPE_NAME, MANIFEST_NAME, build_statement
from bundler.format.model import Manifest

__all__ = ["resign"]


def resign(
    members: Sequence[tuple[str, bytes]] | Mapping[str, bytes],
    keys: Sequence[Ed25519PrivateKey],
    *,
    edit_manifest: Callable[[dict[str, Any]], None] | None = None,
    statement_of: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> bytes:
    """The container of ``members`` (in their order) with manifest and envelope rebuilt.

    Each manifest entry's digest and size are those of the member's new bytes (an
    entry whose member was dropped is dropped); each table's row count is read from
    its Parquet footer. ``edit_manifest`` then changes the manifest document as a test
    needs (e.g. an entry listed twice); ``statement_of`` gives the document the
    in-toto subjects are built from when it must differ from the manifest (default:
    the manifest itself). The statement is signed by every key in ``keys``.
    """
    content = dict(members.items() if isinstance(members, Mapping) else members)
    order = list(content)
    doc = json.loads(content[MANIFEST_NAME])
    doc["members"] = [m for m in doc["members"] if m["path"] in content]
    for m in doc["members"]:
        data = content[m["path"]]
        m["sha256"] = hashlib.sha256(data).hexdigest()
        m["size"] = len(data)
        table = m["path"].removeprefix("tables/").removesuffix(".parquet")
        if m["path"].startswith("tables/") and table in doc.get("tables", {}):
            doc["tables"][table] = pq.read_metadata(io.BytesIO(data)).num_rows
    if edit_manifest is not None:
        edit_manifest(doc)
    manifest = jcs.dumps(doc)
    content[MANIFEST_NAME] = manifest
    subjects = Manifest.from_dict(statement_of(doc) if statement_of is not None else doc)
    statement = build_statement(manifest, hashlib.sha256(manifest).hexdigest(), subjects)
    content[ENVELOPE_NAME] = sign_payload(statement, list(keys), INTOTO_PAYLOAD_TYPE).to_bytes()
    out = io.BytesIO()
    write_container(out, [(n, content[n]) for n in order])
    return out.getvalue()
