"""Media identity: files found by SHA-256 whatever their names; mismatches and absences reported."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from replay.media.identity import ArtifactRef, IdentityError, locate, read_verified

MEDIA = Path(__file__).resolve().parents[1] / "samples" / "media-mini" / "media"


def sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.fixture
def refs() -> list[ArtifactRef]:
    return [
        ArtifactRef(f"media/{p.name}", sha(p), p.stat().st_size)
        for p in sorted(MEDIA.glob("*.mp4"))
    ]


def test_found_by_digest_under_another_name(tmp_path: Path, refs: list[ArtifactRef]) -> None:
    d = tmp_path / "renamed" / "deep"
    d.mkdir(parents=True)
    shutil.copy(MEDIA / "candidate-00.mp4", d / "whatever.bin")
    want = sha(MEDIA / "candidate-00.mp4")
    loc = locate([want], refs, [tmp_path])[want]
    assert loc.status == "ok"
    assert loc.path == str(d / "whatever.bin")
    assert loc.recorded_path == "media/candidate-00.mp4"
    assert "found as whatever.bin" in loc.detail


def test_one_changed_byte_is_a_reported_mismatch(tmp_path: Path, refs: list[ArtifactRef]) -> None:
    data = bytearray((MEDIA / "baseline-00.mp4").read_bytes())
    data[len(data) // 2] ^= 0x01
    (tmp_path / "baseline-00.mp4").write_bytes(bytes(data))
    want = sha(MEDIA / "baseline-00.mp4")
    loc = locate([want], refs, [tmp_path])[want]
    assert loc.status == "mismatch"
    assert loc.path == str(tmp_path / "baseline-00.mp4")
    assert hashlib.sha256(bytes(data)).hexdigest() in loc.detail
    assert want in loc.detail


def test_absent_and_not_attested_are_reported(tmp_path: Path, refs: list[ArtifactRef]) -> None:
    want = sha(MEDIA / "baseline-00.mp4")
    stranger = "0" * 64
    out = locate([want, stranger], refs, [tmp_path])
    assert out[want].status == "absent"
    assert str(tmp_path) in out[want].detail
    assert out[stranger].status == "not-attested"
    assert locate([want], refs, [])[want].status == "absent"


def test_read_verified_rejects_bytes_that_changed(tmp_path: Path) -> None:
    p = tmp_path / "x.mp4"
    shutil.copy(MEDIA / "baseline-00.mp4", p)
    digest = sha(p)
    assert read_verified(p, digest) == (MEDIA / "baseline-00.mp4").read_bytes()
    p.write_bytes(b"changed")
    with pytest.raises(IdentityError, match=digest):
        read_verified(p, digest)
