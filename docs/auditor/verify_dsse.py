#!/usr/bin/env python3
"""Check a reprobundle archive's signature and digests with openssl: no reprobundle needed.

Standard library only, plus ``openssl`` (3.x) on PATH for the Ed25519 check.
Steps (docs/auditor-guide.md, "Without reprobundle"):

1. read the tar (a ``.tar`` you decompressed, or the ``.bundle`` itself when
   Python >= 3.14 or the ``zstd`` command can decompress it);
2. take ``signatures.dsse.json``, rebuild the DSSE PAE bytes, and run
   ``openssl pkeyutl -verify -pubin -inkey KEY -rawin -in pae.bin -sigfile sig-N.bin``
   for every signature and key; at least one must verify, else stop;
3. only then parse the signed in-toto Statement: its ``manifest.json`` digest
   must match the member's bytes;
4. every member must be listed in the manifest with its size and SHA-256, and
   the statement's subjects must be exactly the manifest's members and externals.

Usage: ``python3 verify_dsse.py BUNDLE_OR_TAR --key author.pub [--key ...] [--workdir DIR]``.
Keys: PEM ``PUBLIC KEY`` (as ``bundle keygen`` writes) or one ``ssh-ed25519 ...`` line.
Exit status: 0 verified; 1 a check failed; 2 bad input or openssl missing.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import hashlib
import importlib
import io
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
# The documented predicate type URI, and the URN that bundles sealed before it carry.
PREDICATE_TYPES = (
    "https://reprobundle.invalid/predicate/bundle/v1",
    "urn:reprobundle:predicate:bundle:v1",
)
ENVELOPE, MANIFEST = "signatures.dsse.json", "manifest.json"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
# DER SubjectPublicKeyInfo of an Ed25519 key is this 12-byte prefix + the 32-byte key.
ED25519_SPKI = bytes.fromhex("302a300506032b6570032100")
SSH_PREFIX = b"\x00\x00\x00\x0bssh-ed25519\x00\x00\x00\x20"


class Failed(Exception):
    """A verification check failed (exit 1)."""


class BadInput(Exception):
    """The inputs cannot be read (exit 2)."""


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 Pre-Authentication Encoding."""
    t = payload_type.encode()
    return b"DSSEv1 %d %b %d %b" % (len(t), t, len(payload), payload)


def b64(text: str) -> bytes:
    """Decode standard or URL-safe base64, padded or not (DSSE allows both)."""
    padded = text + "=" * (-len(text) % 4)
    if "-" in text or "_" in text:
        return base64.urlsafe_b64decode(padded)
    return base64.b64decode(padded, validate=True)


def tar_bytes(path: Path) -> bytes:
    """The uncompressed tar stream of ``path`` (a .tar, or a .bundle we can decompress)."""
    data = path.read_bytes()
    if not data.startswith(ZSTD_MAGIC):
        return data
    try:  # Python 3.14 has zstd in the standard library
        zstd: Any = importlib.import_module("compression.zstd")
        out: bytes = zstd.decompress(data)
        return out
    except ImportError:
        pass
    if shutil.which("zstd") is None:
        raise BadInput(
            f"{path} is zstd-compressed: decompress it first (zstd -d, or the python "
            "one-liner in docs/auditor-guide.md) and pass the .tar"
        )
    done = subprocess.run(
        ["zstd", "-d", "-c", "-q", "--", str(path)], check=False, capture_output=True
    )
    if done.returncode != 0:
        raise Failed(f"zstd could not decompress {path}: {done.stderr.decode().strip()}")
    return done.stdout


def read_members(data: bytes) -> dict[str, bytes]:
    """Every member of the tar, refusing anything but uniquely named regular files."""
    members: dict[str, bytes] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            for ti in tar:
                name = ti.name
                if not ti.isreg():
                    raise Failed(f"{name}: not a regular file")
                if name.startswith("/") or ".." in name.split("/") or "\\" in name:
                    raise Failed(f"{name}: unsafe member name")
                if name in members:
                    raise Failed(f"{name}: duplicate member")
                fh = tar.extractfile(ti)
                members[name] = fh.read() if fh else b""
    except tarfile.TarError as exc:
        raise Failed(f"not a readable tar archive: {exc}") from exc
    return members


def load_key(path: Path, workdir: Path, n: int) -> tuple[Path, str]:
    """Return a PEM file openssl can read for ``path``, and the key's OpenSSH-style key ID."""
    text = path.read_text(encoding="ascii", errors="replace").strip()
    try:
        if text.startswith("ssh-ed25519"):
            blob = base64.b64decode(text.split()[1])
            if not blob.startswith(SSH_PREFIX) or len(blob) != len(SSH_PREFIX) + 32:
                raise BadInput(f"{path}: not an ssh-ed25519 key")
            der = ED25519_SPKI + blob[len(SSH_PREFIX) :]
            pem = workdir / f"key-{n}.pem"
            body = base64.encodebytes(der).decode()
            pem.write_text(f"-----BEGIN PUBLIC KEY-----\n{body}-----END PUBLIC KEY-----\n")
            path = pem
        else:
            lines = [ln for ln in text.splitlines() if ln and not ln.startswith("-----")]
            der = base64.b64decode("".join(lines))
    except (binascii.Error, IndexError) as exc:
        raise BadInput(f"{path}: not a PEM or OpenSSH public key") from exc
    if not der.startswith(ED25519_SPKI) or len(der) != len(ED25519_SPKI) + 32:
        raise BadInput(f"{path}: not an Ed25519 public key")
    blob = SSH_PREFIX + der[len(ED25519_SPKI) :]
    kid = "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
    return path, kid


def check_signatures(envelope: bytes, keys: list[tuple[Path, str]], workdir: Path) -> bytes:
    """Verify the envelope with openssl; return the payload bytes only if a signature holds."""
    try:
        env = json.loads(envelope)
        payload_type, payload = env["payloadType"], b64(env["payload"])
        sigs = [b64(s["sig"]) for s in env["signatures"]]
        hints = [str(s.get("keyid", "")) for s in env["signatures"]]
    except (ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise Failed(f"{ENVELOPE}: not a DSSE envelope ({exc})") from exc
    if payload_type != PAYLOAD_TYPE:
        raise Failed(f"{ENVELOPE}: payloadType {payload_type!r}, expected {PAYLOAD_TYPE!r}")
    (workdir / "pae.bin").write_bytes(pae(payload_type, payload))
    (workdir / "payload.json").write_bytes(payload)
    good = 0
    for i, sig in enumerate(sigs):
        (workdir / f"sig-{i}.bin").write_bytes(sig)
        by = None
        for key, kid in keys:
            cmd = ["openssl", "pkeyutl", "-verify", "-pubin", "-inkey", str(key), "-rawin"]
            cmd += ["-in", str(workdir / "pae.bin"), "-sigfile", str(workdir / f"sig-{i}.bin")]
            if subprocess.run(cmd, check=False, capture_output=True).returncode == 0:
                by = kid
                break
        good += by is not None
        verdict = f"VALID, key {by}" if by else "not verified by any given key"
        print(f"signature #{i} (hint {hints[i] or '-'}): {verdict}")
    if not sigs:
        raise Failed("the bundle is unsigned")
    if not good:
        raise Failed("no signature verifies with the given key(s)")
    return payload


def check_digests(payload: bytes, members: dict[str, bytes]) -> int:
    """Check the manifest against the signed statement and every member against the manifest."""
    stmt = json.loads(payload)
    if stmt.get("_type") != STATEMENT_TYPE or stmt.get("predicateType") not in PREDICATE_TYPES:
        raise Failed("signed payload is not a reprobundle in-toto Statement v1")
    if MANIFEST not in members:
        raise Failed(f"{MANIFEST}: missing")
    msha = hashlib.sha256(members[MANIFEST]).hexdigest()
    if stmt["predicate"]["manifest"]["sha256"] != msha:
        raise Failed(f"{MANIFEST}: sha256 {msha} is not the signed one")
    manifest = json.loads(members[MANIFEST])
    if manifest.get("format") != "reprobundle" or manifest.get("format_version") != "1":
        raise Failed(f"{MANIFEST}: not reprobundle format 1")
    problems = []
    listed = {m["path"]: m for m in manifest["members"]}
    for path, m in listed.items():
        data = members.get(path)
        if data is None:
            problems.append(f"{path}: listed in the manifest but absent")
        elif len(data) != m["size"] or hashlib.sha256(data).hexdigest() != m["sha256"]:
            problems.append(f"{path}: size or sha256 differs from the manifest")
    for path in sorted(set(members) - set(listed) - {MANIFEST, ENVELOPE}):
        problems.append(f"{path}: present but not in the manifest")
    subjects = {s["name"]: s["digest"]["sha256"] for s in stmt["subject"]}
    want = {MANIFEST: msha, **{p: m["sha256"] for p, m in listed.items()}}
    want.update({"external:" + e["path"]: e["sha256"] for e in manifest["external"]})
    if subjects != want or len(subjects) != len(stmt["subject"]):
        problems.append("signed subjects differ from the manifest's members and externals")
    if problems:
        raise Failed("; ".join(problems))
    for e in manifest["external"]:
        print(f"external {e['sha256']}  {e['path']}  [{e['availability']}] (not checked here)")
    return len(listed)


def main(argv: list[str] | None = None) -> int:
    """Run the recipe; print what was checked; return the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("archive", type=Path, help="the .bundle, or the .tar decompressed from it")
    ap.add_argument("--key", type=Path, action="append", required=True, help="trusted public key")
    ap.add_argument("--workdir", type=Path, help="keep pae.bin, sig-N.bin, payload.json here")
    args = ap.parse_args(argv)
    if shutil.which("openssl") is None:
        print("error: openssl (3.x) is not on PATH", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        work = args.workdir or Path(tmp)
        try:
            work.mkdir(parents=True, exist_ok=True)
            keys = [load_key(k, work, n) for n, k in enumerate(args.key)]
            members = read_members(tar_bytes(args.archive))
            if ENVELOPE not in members:
                raise Failed(f"{ENVELOPE}: missing")
            payload = check_signatures(members[ENVELOPE], keys, work)
            n = check_digests(payload, members)
        except (BadInput, OSError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        except (Failed, ValueError, KeyError, TypeError) as exc:
            print(f"FAILED: {exc}")
            return 1
    print(f"OK: signature verified; manifest and {n} members match the signed statement")
    return 0


if __name__ == "__main__":
    sys.exit(main())
