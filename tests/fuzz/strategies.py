"""Hypothesis strategies that mutate sealed bundles and campaign inputs.

One module, two drivers: ``tests/fuzz/test_fuzz_*.py`` (bounded, deterministic,
in the default ``pytest`` run) and ``bench/fuzz_long.py`` (100,000 cases and
more). Both draw from :func:`bundle_mutants` and :func:`campaign_mutants`.

A mutant is built from a real sealed bundle (:func:`make_base`: the mini
campaign of ``tests/campaign_builder.py`` sealed with a fixed Ed25519 key) at
the layer where a parser sees it: the compressed bytes (bit flips,
truncations, appended or edited zstd frames), the tar stream inside a valid
zstd frame (bit flips, header field edits with or without a fixed checksum,
pax records), the member list re-packed as a valid tar (swaps, reorders,
duplicates, drops, renames, link and folder entries, an edited member), and
the signed layer (a content change with manifest and statement rebuilt to
match and signed by an attacker key, optionally claiming the author's key ID;
oddly typed JSON in the manifest, the envelope and the statement).
"""

from __future__ import annotations

import hashlib
import io
import json
import struct
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import zstandard
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from hypothesis import strategies as st

from bundler._internal import jcs
from bundler.errors import BundleFormatError
from bundler.format.container import read_container, write_container
from bundler.format.dsse import INTOTO_PAYLOAD_TYPE, Envelope, parse_envelope, sign_payload
from bundler.format.keys import key_id
from bundler.format.manifest import ENVELOPE_NAME, MANIFEST_NAME, build_statement
from bundler.format.model import Manifest
from bundler.seal import seal_campaign
from tests.campaign_builder import write_campaign

__all__ = [
    "ATTACKER_SEED",
    "AUTHOR_SEED",
    "Base",
    "CampaignFiles",
    "CampaignMutant",
    "Mutant",
    "base_campaign_files",
    "bundle_mutants",
    "campaign_mutants",
    "json_values",
    "make_base",
]

AUTHOR_SEED = bytes(range(32))
ATTACKER_SEED = bytes(range(100, 132))

# ustar header fields: (name, offset, length); see POSIX pax "ustar Interchange Format".
_HEADER_FIELDS = (
    ("name", 0, 100),
    ("mode", 100, 8),
    ("uid", 108, 8),
    ("gid", 116, 8),
    ("size", 124, 12),
    ("mtime", 136, 12),
    ("chksum", 148, 8),
    ("typeflag", 156, 1),
    ("linkname", 157, 100),
    ("magic", 257, 6),
    ("version", 263, 2),
    ("uname", 265, 32),
    ("gname", 297, 32),
    ("prefix", 345, 155),
)


@dataclass(frozen=True, repr=False)
class Base:
    """A sealed bundle and everything the properties compare a mutant against."""

    bundle: bytes
    tar: bytes
    members: tuple[tuple[str, bytes], ...]
    headers: tuple[int, ...]  # offsets of the 512-byte header blocks in ``tar``
    author: Ed25519PrivateKey
    attacker: Ed25519PrivateKey
    tables: dict[str, pa.Table]

    def __repr__(self) -> str:
        # Hypothesis prints strategy arguments in its reports: keep them readable.
        return f"Base(<{len(self.bundle):,}-byte bundle, {len(self.members)} members>)"

    @property
    def trusted(self) -> Ed25519PublicKey:
        """The author's public key: the only key the properties trust."""
        return self.author.public_key()

    @property
    def content(self) -> dict[str, bytes]:
        """Member name -> decompressed bytes of the original."""
        return dict(self.members)


@dataclass(frozen=True)
class Mutant:
    """A mutated bundle: which family made it, and its bytes."""

    kind: str
    data: bytes

    def __repr__(self) -> str:
        digest = hashlib.sha256(self.data).hexdigest()[:16]
        return f"Mutant({self.kind!r}, {len(self.data):,} bytes, sha256 {digest}…)"


@dataclass(frozen=True)
class CampaignMutant:
    """A mutated campaign: which family made it, and every file's bytes (None: removed)."""

    kind: str
    files: dict[str, bytes | None]


def _header_offsets(tar: bytes) -> tuple[int, ...]:
    offsets: set[int] = set()
    with tarfile.open(fileobj=io.BytesIO(tar), mode="r:") as tf:
        for ti in tf.getmembers():
            offsets.add(ti.offset)  # the pax extended header, when there is one
            offsets.add(ti.offset_data - 512)  # the member's own ustar header
    return tuple(sorted(offsets))


class CampaignFiles(dict[str, bytes]):
    """A campaign's files (relative path -> bytes), with a short repr for Hypothesis reports."""

    def __repr__(self) -> str:
        return f"CampaignFiles({sorted(self)})"


def base_campaign_files() -> CampaignFiles:
    """The mini campaign's files (relative path -> bytes)."""
    with tempfile.TemporaryDirectory() as d:
        root = write_campaign(Path(d) / "c")
        return CampaignFiles(
            (p.relative_to(root).as_posix(), p.read_bytes())
            for p in sorted(root.rglob("*"))
            if p.is_file()
        )


def make_base() -> Base:
    """Seal the mini campaign with the fixed author key and decode everything once."""
    author = Ed25519PrivateKey.from_private_bytes(AUTHOR_SEED)
    attacker = Ed25519PrivateKey.from_private_bytes(ATTACKER_SEED)
    with tempfile.TemporaryDirectory() as d:
        camp = write_campaign(Path(d) / "c")
        out = Path(d) / "base.bundle"
        seal_campaign(camp, out, keys=[author])
        bundle = out.read_bytes()
        members = tuple((m.name, m.data) for m in read_container(out))
    tar = zstandard.ZstdDecompressor().decompress(bundle)
    tables = {
        name: pq.read_table(io.BytesIO(data), use_threads=False)
        for name, data in members
        if name.endswith(".parquet")
    }
    return Base(bundle, tar, members, _header_offsets(tar), author, attacker, tables)


def _compress(tar: bytes, *, level: int = 10, checksum: bool = True, size: bool = True) -> bytes:
    cctx = zstandard.ZstdCompressor(level=level, write_checksum=checksum, write_content_size=size)
    return cctx.compress(tar)


def _pack(members: list[tuple[str, bytes]]) -> bytes:
    out = io.BytesIO()
    write_container(out, members)
    return out.getvalue()


def _flip(data: bytes, positions: list[tuple[int, int]]) -> bytes:
    buf = bytearray(data)
    for pos, bit in positions:
        buf[pos % len(buf)] ^= 1 << bit
    return bytes(buf)


def _fix_checksum(buf: bytearray, off: int) -> None:
    block = bytearray(buf[off : off + 512])
    block[148:156] = b" " * 8
    buf[off + 148 : off + 156] = b"%06o\x00 " % (sum(block) & 0o777777)


# --- JSON values of every odd type -----------------------------------------------------

_odd_text = st.one_of(
    st.text(max_size=12),
    st.sampled_from(
        [
            "",
            "../x",
            "/etc/passwd",
            "\x1b[2K\rVERIFIED",
            "a\nb",
            "\u202egpj.exe",
            "\ud800",
            "1.2.3.4",
            "sha256:" + "0" * 64,
            "0" * 64,
            "NaN",
            "tables/receipts.parquet",
            "manifest.json",
        ]
    ),
)

_odd_scalar: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 2**63, 2**64 + 1, 10**400]),
    st.floats(allow_nan=False, allow_infinity=False),
    _odd_text,
)


def json_values(max_leaves: int = 6) -> st.SearchStrategy[Any]:
    """Any JSON value, small: scalars of every type, nested lists and objects."""
    return st.recursive(
        _odd_scalar,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)
        ),
        max_leaves=max_leaves,
    )


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path (sequence of keys/indices) into ``doc``, the root included."""
    out: list[tuple[Any, ...]] = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, (*prefix, i))
    return out


@st.composite
def _json_edit(draw: st.DrawFn, doc: Any) -> tuple[str, Any]:
    """Replace, delete or add one value somewhere in ``doc`` (a deep copy is edited)."""
    doc = json.loads(json.dumps(doc))
    path = draw(st.sampled_from(_paths(doc)))
    op = draw(st.sampled_from(["replace", "delete", "add", "deep"]))
    if not path:
        return "replace-root", draw(json_values())
    parent = doc
    for k in path[:-1]:
        parent = parent[k]
    last = path[-1]
    if op == "delete":
        del parent[last]
    elif op == "add" and isinstance(parent, dict):
        parent[draw(st.text(max_size=8))] = draw(json_values())
    elif op == "add":
        parent.insert(last, draw(json_values()))
    elif op == "deep":
        depth = draw(st.integers(min_value=50, max_value=800))
        value: Any = 0
        for _ in range(depth):
            value = [value]
        parent[last] = value
    else:
        parent[last] = draw(json_values())
    return f"{op}:{'/'.join(map(str, path))}", doc


# --- bundle mutants ----------------------------------------------------------------------


@st.composite
def _bitflips(draw: st.DrawFn, base: Base) -> Mutant:
    n = draw(st.sampled_from([1, 1, 1, 2, 3, 8]))
    pos = draw(
        st.lists(
            st.tuples(st.integers(0, len(base.bundle) - 1), st.integers(0, 7)),
            min_size=n,
            max_size=n,
        )
    )
    return Mutant(f"bitflip-{n}", _flip(base.bundle, pos))


@st.composite
def _truncation(draw: st.DrawFn, base: Base) -> Mutant:
    layer = draw(st.sampled_from(["bundle", "tar"]))
    if layer == "bundle":
        return Mutant("truncate", base.bundle[: draw(st.integers(0, len(base.bundle) - 1))])
    cut = draw(st.integers(0, len(base.tar) - 1))
    return Mutant("truncate-tar", _compress(base.tar[:cut]))


@st.composite
def _zstd_frame(draw: st.DrawFn, base: Base) -> Mutant:  # noqa: PLR0911  # one return per frame edit
    op = draw(
        st.sampled_from(
            ["header-byte", "append", "skippable", "two-frames", "recompress", "content-size"]
        )
    )
    if op == "header-byte":
        buf = bytearray(base.bundle)
        buf[draw(st.integers(0, 17))] = draw(st.integers(0, 255))
        return Mutant("zstd-header-byte", bytes(buf))
    if op == "append":
        return Mutant("zstd-append", base.bundle + draw(st.binary(min_size=1, max_size=64)))
    if op == "skippable":
        payload = draw(st.binary(max_size=32))
        frame = struct.pack("<II", 0x184D2A50 + draw(st.integers(0, 15)), len(payload)) + payload
        where = draw(st.sampled_from(["before", "after"]))
        data = frame + base.bundle if where == "before" else base.bundle + frame
        return Mutant(f"zstd-skippable-{where}", data)
    if op == "two-frames":
        cut = draw(st.integers(1, len(base.tar) - 1))
        return Mutant("zstd-two-frames", _compress(base.tar[:cut]) + _compress(base.tar[cut:]))
    if op == "content-size":
        # A frame that does not declare its size, or declares a wrong one.
        data = _compress(base.tar, size=False)
        if draw(st.booleans()):
            return Mutant("zstd-no-content-size", data)
        buf = bytearray(_compress(base.tar))
        buf[5] ^= 1 << draw(st.integers(0, 7))
        return Mutant("zstd-content-size-bit", bytes(buf))
    level = draw(st.integers(1, 19))
    return Mutant("zstd-recompress", _compress(base.tar, level=level, checksum=draw(st.booleans())))


@st.composite
def _tar_flips(draw: st.DrawFn, base: Base) -> Mutant:
    n = draw(st.sampled_from([1, 1, 2, 4]))
    in_header = draw(st.booleans())
    if in_header:
        pos = [
            (
                draw(st.sampled_from(base.headers)) + draw(st.integers(0, 511)),
                draw(st.integers(0, 7)),
            )
            for _ in range(n)
        ]
    else:
        pos = [(draw(st.integers(0, len(base.tar) - 1)), draw(st.integers(0, 7))) for _ in range(n)]
    return Mutant(f"tar-flip-{n}{'-header' if in_header else ''}", _compress(_flip(base.tar, pos)))


@st.composite
def _tar_header_field(draw: st.DrawFn, base: Base) -> Mutant:
    off = draw(st.sampled_from(base.headers))
    name, start, length = draw(st.sampled_from(_HEADER_FIELDS))
    value = draw(
        st.one_of(
            st.binary(min_size=length, max_size=length),
            st.integers(0, 8**11 - 1).map(lambda v: b"%011o\x00" % v),
            st.sampled_from(
                [
                    b"\x80" + b"\x00" * 3 + b"\x7f" * 8,  # GNU base-256 size
                    b"\xff" * 12,  # negative base-256
                    b"77777777777\x00",
                    b"0",
                    b"../../etc/passwd\x00",
                    b"manifest.json\x00",
                    b"tables/receipts.parquet\x00",
                    b"/abs\x00",
                    b"a\nb\x00",
                    b"1",  # hard link
                    b"2",  # symlink
                    b"5",  # directory
                    b"x",  # pax header
                    b"g",  # global pax header
                    b"L",  # GNU long name
                    b"S",  # GNU sparse
                ]
            ),
        )
    )
    buf = bytearray(base.tar)
    chunk = (value + b"\x00" * length)[:length]
    buf[off + start : off + start + length] = chunk
    fix = draw(st.booleans()) or name in ("size", "typeflag", "name")
    if fix and name != "chksum":
        _fix_checksum(buf, off)
    return Mutant(f"tar-header-{name}{'-fixed' if fix else ''}", _compress(bytes(buf)))


_PAX_KEYS = ["path", "size", "linkpath", "comment", "mtime", "uid", "GNU.sparse.size", "hdrcharset"]


@st.composite
def _pax(draw: st.DrawFn, base: Base) -> Mutant:
    """Re-pack with pax records on one member (valid tar, valid frame)."""
    members = list(base.members)
    target = draw(st.integers(0, len(members) - 1))
    records = draw(
        st.dictionaries(
            st.sampled_from(_PAX_KEYS),
            st.one_of(
                st.text(max_size=20),
                st.integers(-5, 2**40).map(str),
                st.sampled_from([m[0] for m in members] + ["../x", "/abs", "a" * 9000]),
            ),
            min_size=1,
            max_size=3,
        )
    )
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for i, (name, data) in enumerate(members):
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            if i == target:
                ti.pax_headers = dict(records)
            try:
                tf.addfile(ti, io.BytesIO(data))
            except (ValueError, UnicodeError):
                return Mutant("pax-unwritable", base.bundle)
    return Mutant(f"pax-{'+'.join(sorted(records))}", _compress(raw.getvalue()))


@st.composite
def _member_list(draw: st.DrawFn, base: Base) -> Mutant:
    members = list(base.members)
    op = draw(
        st.sampled_from(["swap", "shuffle", "duplicate", "drop", "rename", "extra", "swap-data"])
    )
    i = draw(st.integers(0, len(members) - 1))
    j = draw(st.integers(0, len(members) - 1))
    if op == "swap":
        members[i], members[j] = members[j], members[i]
    elif op == "shuffle":
        members = draw(st.permutations(members))
    elif op == "duplicate":
        dup = (members[i][0], draw(st.sampled_from([members[i][1], members[j][1], b""])))
        members.insert(j, dup)
    elif op == "drop":
        del members[i]
    elif op == "rename":
        new = draw(
            st.sampled_from(["x.json", "tables/x.parquet", "TABLES/receipts.parquet", "a/b"])
        )
        members[i] = (new, members[i][1])
    elif op == "extra":
        members.insert(j, (draw(st.sampled_from(["extra.txt", "logs/x.log"])), b"x"))
    else:  # swap-data: names stay, contents trade places
        (ni, di), (nj, dj) = members[i], members[j]
        members[i], members[j] = (ni, dj), (nj, di)
    try:
        return Mutant(f"members-{op}", _pack(members))
    except ValueError:
        return Mutant(f"members-{op}-unwritable", base.bundle)


@st.composite
def _link_entry(draw: st.DrawFn, base: Base) -> Mutant:
    """A symlink, hard link, folder or FIFO entry in place of or beside a member."""
    members = list(base.members)
    i = draw(st.integers(0, len(members) - 1))
    kind = draw(
        st.sampled_from([tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.DIRTYPE, tarfile.FIFOTYPE])
    )
    replace = draw(st.booleans())
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for k, (name, data) in enumerate(members):
            if k == i:
                ti = tarfile.TarInfo(name if replace else name + ".link")
                ti.type = kind
                ti.linkname = draw(st.sampled_from(["manifest.json", "../../etc/passwd", "/etc"]))
                tf.addfile(ti)
                if replace:
                    continue
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
    return Mutant(f"link-{kind.decode()}{'-replace' if replace else ''}", _compress(raw.getvalue()))


@st.composite
def _edited_member(
    draw: st.DrawFn, base: Base, signed_only: bool = False
) -> tuple[str, list[tuple[str, bytes]]]:
    """One member's bytes changed (flip, insert, delete, replace, a table value).

    ``signed_only`` leaves the manifest and the envelope alone (they are rebuilt).
    """
    members = list(base.members)
    choices = [
        k
        for k, (n, _) in enumerate(members)
        if not signed_only or n not in (MANIFEST_NAME, ENVELOPE_NAME)
    ]
    i = draw(st.sampled_from(choices))
    name, data = members[i]
    op = draw(st.sampled_from(["flip", "insert", "delete", "replace", "table-value"]))
    if op == "table-value" and name.endswith(".parquet"):
        table = base.tables[name]
        if table.num_rows and table.num_columns:
            col = draw(st.integers(0, table.num_columns - 1))
            row = draw(st.integers(0, table.num_rows - 1))
            values = table.column(col).to_pylist()
            values[row] = None if values[row] is not None else values[(row + 1) % len(values)]
            if values == table.column(col).to_pylist():
                values[row] = None
            try:
                arr = pa.array(values, type=table.schema.field(col).type)
                table = table.set_column(col, table.schema.field(col), arr)
                sink = io.BytesIO()
                pq.write_table(table, sink, use_dictionary=False)
                data = sink.getvalue()
            except (pa.ArrowException, ValueError):
                data = data + b"\x00"
        else:
            data = data + b"\x00"
    elif op == "flip" and data:
        data = _flip(data, [(draw(st.integers(0, len(data) - 1)), draw(st.integers(0, 7)))])
    elif op == "delete" and data:
        k = draw(st.integers(0, len(data) - 1))
        data = data[:k] + data[k + 1 :]
    elif op == "replace":
        data = draw(st.binary(max_size=64))
    else:
        k = draw(st.integers(0, len(data)))
        data = data[:k] + draw(st.binary(min_size=1, max_size=8)) + data[k:]
    if data == members[i][1]:
        data = data + b"\n"
    members[i] = (name, data)
    return op, members


@st.composite
def _repacked(draw: st.DrawFn, base: Base) -> Mutant:
    """A member edited and re-packed as a valid tar in a valid frame; digests left alone."""
    op, members = draw(_edited_member(base))
    return Mutant(f"repack-{op}", _pack(members))


def _restate(
    base: Base, members: list[tuple[str, bytes]], manifest_doc: Any | None = None
) -> tuple[dict[str, bytes], bytes]:
    """Members with the manifest rebuilt over ``members`` and the statement over the manifest."""
    content = dict(members)
    doc = manifest_doc
    if doc is None:
        doc = json.loads(content[MANIFEST_NAME])
        for m in doc["members"]:
            if m["path"] in content:
                m["sha256"] = hashlib.sha256(content[m["path"]]).hexdigest()
                m["size"] = len(content[m["path"]])
    manifest = jcs.dumps(doc)
    content[MANIFEST_NAME] = manifest
    msha = hashlib.sha256(manifest).hexdigest()
    try:
        statement = build_statement(manifest, msha, Manifest.from_dict(doc))
    except (KeyError, TypeError, AttributeError, IndexError, BundleFormatError):
        statement = jcs.dumps({"_type": "https://in-toto.io/Statement/v1", "subject": []})
    return content, statement


@st.composite
def _resigned(draw: st.DrawFn, base: Base) -> Mutant:
    """A content change with manifest and statement rebuilt to match, signed by the attacker.

    Variants keep the author's old signature beside the attacker's, or label the
    attacker's signature with the author's key ID (the hint is unauthenticated).
    """
    op, members = draw(_edited_member(base, signed_only=True))
    content, statement = _restate(base, [(n, d) for n, d in members if n != ENVELOPE_NAME])
    variant = draw(st.sampled_from(["attacker", "attacker+old", "claims-author", "unsigned"]))
    keys = [] if variant == "unsigned" else [base.attacker]
    env = sign_payload(statement, keys, INTOTO_PAYLOAD_TYPE)
    if variant == "attacker+old":
        old = parse_envelope(base.content[ENVELOPE_NAME])
        env = Envelope(env.payload_type, env.payload, old.signatures + env.signatures)
    elif variant == "claims-author":
        sigs = tuple((key_id(base.trusted), sig) for _, sig in env.signatures)
        env = Envelope(env.payload_type, env.payload, sigs)
    content[ENVELOPE_NAME] = env.to_bytes()
    order = [n for n, _ in base.members]
    return Mutant(f"resign-{variant}-{op}", _pack([(n, content[n]) for n in order]))


@st.composite
def _json_layer(draw: st.DrawFn, base: Base) -> Mutant:
    """Oddly typed JSON in the manifest, statement or envelope; re-signed by the attacker."""
    target = draw(st.sampled_from(["manifest", "statement", "envelope"]))
    members = [(n, d) for n, d in base.members if n != ENVELOPE_NAME]
    order = [n for n, _ in base.members]
    if target == "manifest":
        where, doc = draw(_json_edit(json.loads(base.content[MANIFEST_NAME])))
        try:
            content, statement = _restate(base, members, doc)
        except (ValueError, TypeError, RecursionError):
            return Mutant("json-manifest-unencodable", base.bundle)
        env = sign_payload(statement, [base.attacker], INTOTO_PAYLOAD_TYPE)
        content[ENVELOPE_NAME] = env.to_bytes()
    elif target == "statement":
        stmt = json.loads(parse_envelope(base.content[ENVELOPE_NAME]).payload)
        where, doc = draw(_json_edit(stmt))
        content = dict(members)
        try:
            payload = jcs.dumps(doc)
        except (ValueError, TypeError, RecursionError):
            payload = json.dumps(doc).encode()
        content[ENVELOPE_NAME] = sign_payload(
            payload, [base.attacker], INTOTO_PAYLOAD_TYPE
        ).to_bytes()
    else:
        where, doc = draw(_json_edit(json.loads(base.content[ENVELOPE_NAME])))
        content = dict(members)
        content[ENVELOPE_NAME] = json.dumps(doc).encode()
    return Mutant(f"json-{target}-{where.split(':')[0]}", _pack([(n, content[n]) for n in order]))


def bundle_mutants(base: Base) -> st.SearchStrategy[Mutant]:
    """Every family of bundle mutation, drawn with roughly equal weight."""
    return st.one_of(
        _bitflips(base),
        _truncation(base),
        _zstd_frame(base),
        _tar_flips(base),
        _tar_header_field(base),
        _pax(base),
        _member_list(base),
        _link_entry(base),
        _repacked(base),
        _resigned(base),
        _json_layer(base),
    )


# --- campaign mutants ------------------------------------------------------------------

_JSON_FILES = ("campaign.json", "plans/p.json", "claims.json")
_JSONL_FILES = ("receipts.jsonl", "attempts.jsonl")


@st.composite
def _campaign_json(draw: st.DrawFn, files: dict[str, bytes]) -> CampaignMutant:
    rel = draw(st.sampled_from(_JSON_FILES))
    where, doc = draw(_json_edit(json.loads(files[rel])))
    out: dict[str, bytes | None] = dict(files)
    out[rel] = json.dumps(doc).encode()
    return CampaignMutant(f"json:{rel}:{where.split(':')[0]}", out)


@st.composite
def _campaign_rows(draw: st.DrawFn, files: dict[str, bytes]) -> CampaignMutant:
    rel = draw(st.sampled_from(_JSONL_FILES))
    rows: list[Any] = [json.loads(line) for line in files[rel].decode().splitlines()]
    op = draw(st.sampled_from(["field", "delete-field", "row", "duplicate", "drop", "shuffle"]))
    i = draw(st.integers(0, len(rows) - 1))
    if op == "field":
        key = draw(st.sampled_from([*rows[i].keys(), "extra", ""]))
        rows[i][key] = draw(json_values(3))
    elif op == "delete-field":
        rows[i].pop(draw(st.sampled_from(sorted(rows[i]))))
    elif op == "row":
        rows[i] = draw(json_values(3))
    elif op == "duplicate":
        rows.insert(draw(st.integers(0, len(rows))), rows[i])
    elif op == "drop":
        del rows[i]
    else:
        rows = draw(st.permutations(rows))
    out: dict[str, bytes | None] = dict(files)
    out[rel] = "".join(json.dumps(r) + "\n" for r in rows).encode()
    return CampaignMutant(f"rows:{rel}:{op}", out)


@st.composite
def _campaign_raw(draw: st.DrawFn, files: dict[str, bytes]) -> CampaignMutant:
    rel = draw(st.sampled_from(sorted(files)))
    data = files[rel]
    op = draw(st.sampled_from(["truncate", "insert", "flip", "remove", "nest", "bom", "stray"]))
    out: dict[str, bytes | None] = dict(files)
    if op == "truncate":
        out[rel] = data[: draw(st.integers(0, max(len(data) - 1, 0)))]
    elif op == "insert":
        k = draw(st.integers(0, len(data)))
        junk = draw(st.sampled_from([b"\xff\xfe", b"\x00", b"\r\n", b"NaN", b"}", b"\\ud800"]))
        out[rel] = data[:k] + junk + data[k:]
    elif op == "flip" and data:
        out[rel] = _flip(data, [(draw(st.integers(0, len(data) - 1)), draw(st.integers(0, 7)))])
    elif op == "remove":
        out[rel] = None
    elif op == "nest":
        depth = draw(st.integers(90, 5000))
        out[rel] = b"[" * depth + b"]" * depth
    elif op == "bom":
        out[rel] = b"\xef\xbb\xbf" + data
    else:
        name = draw(st.sampled_from(["notes.log", "logs/run.log", "x\x1b[2K.txt", "a\nb.json"]))
        out[name] = draw(st.sampled_from([b"ok\n", b"token=ghp_" + b"a" * 36 + b"\n", b"\xff\n"]))
    return CampaignMutant(f"raw:{rel}:{op}", out)


def campaign_mutants(files: dict[str, bytes]) -> st.SearchStrategy[CampaignMutant]:
    """Malformed or oddly typed campaign inputs: JSON documents, receipt rows, raw bytes."""
    return st.one_of(_campaign_json(files), _campaign_rows(files), _campaign_raw(files))
