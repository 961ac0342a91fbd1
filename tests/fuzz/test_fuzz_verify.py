"""Fuzzed bundles: verify raises only typed errors and never accepts a content change.

Issue 12, "fuzzing as a standing check". Each case is a mutant of a real
sealed bundle (``tests/fuzz/strategies.py``); the properties are in
``tests/fuzz/properties.py``. Derandomized (profile ``fuzz-ci``): the same
cases every run. Case counts: 1,500 library + 40 CLI here, 500 seals in
``test_fuzz_seal.py``: 2,040 in all. ``bench/fuzz_long.py`` runs the same
strategies for 100,000 cases and more.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bundler._internal import jcs
from bundler.format.container import write_container
from bundler.format.dsse import INTOTO_PAYLOAD_TYPE, sign_payload
from bundler.format.manifest import ENVELOPE_NAME, MANIFEST_NAME, build_statement
from bundler.format.model import Manifest
from bundler.format.trust import Trust
from bundler.verify import check_bundle
from tests.fuzz.profiles import FUZZ_CI
from tests.fuzz.properties import check_cli_verify, check_verify
from tests.fuzz.strategies import Base, Mutant, bundle_mutants

LIBRARY_CASES = 1500
CLI_CASES = 40


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where each case writes its mutant (one file, rewritten per case)."""
    return tmp_path_factory.mktemp("fuzz")


@pytest.fixture(scope="module")
def seen() -> Counter[tuple[str, bool]]:
    """(family, accepted) counts, to check the strategies reach every family."""
    return Counter()


@settings(FUZZ_CI, max_examples=LIBRARY_CASES)
@given(data=st.data())
def test_library_verify_never_raises_untyped_nor_accepts_a_change(
    data: st.DataObject, base: Base, workdir: Path, seen: Counter[tuple[str, bool]]
) -> None:
    mutant = data.draw(bundle_mutants(base))
    out = check_verify(base, mutant.kind, mutant.data, workdir)
    seen[(mutant.kind.split("-")[0], out.accepted)] += 1
    assert out.traceback is None, out.traceback
    assert out.content_change is None, out.content_change


def test_the_cases_reach_every_family(seen: Counter[tuple[str, bool]]) -> None:
    """The run above drew every mutation family, and both verdicts occurred.

    Runs after the property test (file order); a strategy that silently
    degenerated (every case identical, or none reaching the parsers) fails here.
    """
    if not seen:
        pytest.skip("run with the property test above")
    families = {f for f, _ in seen}
    assert families >= {
        "bitflip", "truncate", "zstd", "tar", "pax", "members", "link", "repack", "resign", "json",
    }, families  # fmt: skip
    assert sum(n for (_, ok), n in seen.items() if ok) > 0  # some mutants keep the content
    assert sum(n for (_, ok), n in seen.items() if not ok) > LIBRARY_CASES // 2


@settings(FUZZ_CI, max_examples=CLI_CASES)
@given(data=st.data())
def test_cli_verify_exits_with_documented_codes_and_never_accepts_a_change(
    data: st.DataObject, base: Base, workdir: Path
) -> None:
    mutant = data.draw(bundle_mutants(base))
    out = check_cli_verify(base, mutant.kind, mutant.data, workdir)
    assert out.traceback is None, out.traceback
    assert out.content_change is None, out.content_change


def _resealed(base: Base, name: str, data: bytes) -> bytes:
    """``name`` replaced by ``data``, manifest and statement rebuilt, signed by the AUTHOR."""
    content = dict(base.members)
    content[name] = data
    doc = json.loads(content[MANIFEST_NAME])
    for m in doc["members"]:
        m["sha256"] = hashlib.sha256(content[m["path"]]).hexdigest()
        m["size"] = len(content[m["path"]])
    manifest = jcs.dumps(doc)
    content[MANIFEST_NAME] = manifest
    stmt = build_statement(manifest, hashlib.sha256(manifest).hexdigest(), Manifest.from_dict(doc))
    content[ENVELOPE_NAME] = sign_payload(stmt, [base.author], INTOTO_PAYLOAD_TYPE).to_bytes()
    out = io.BytesIO()
    write_container(out, [(n, content[n]) for n, _ in base.members])
    return out.getvalue()


def test_the_property_sees_a_change_the_trusted_key_signed(base: Base, workdir: Path) -> None:
    """Not vacuous: content re-signed with the trusted key verifies, and the check flags it.

    Only the holder of the author's private key can make this; the fuzz cases never
    use it, so any acceptance they produce with a changed content is a real defect.
    """
    camp = base.content["campaign.json"].replace(b"mini campaign", b"MINI campaign")
    assert camp != base.content["campaign.json"]
    data = _resealed(base, "campaign.json", camp)
    assert check_bundle_ok(base, data, workdir)
    out = check_verify(base, "self-test", data, workdir)
    assert out.accepted
    # manifest.json is compared first, and it changed with campaign.json's digest
    assert out.content_change == "member manifest.json differs"


def check_bundle_ok(base: Base, data: bytes, workdir: Path) -> bool:
    """True when the library verifies ``data`` with the author's key."""
    p = workdir / "selftest.bundle"
    p.write_bytes(data)
    return check_bundle(p, trust=Trust.keys([base.trusted])).ok


def test_a_statement_with_malformed_subjects_is_a_problem_not_a_traceback(
    base: Base, workdir: Path
) -> None:
    """Found by this harness: a signed statement whose subject holds a list, a number or a
    duplicate name raised TypeError in verify (``unhashable type``); now it is a located
    problem on the envelope's payload."""
    from bundler.format.dsse import parse_envelope

    stmt = json.loads(parse_envelope(base.content[ENVELOPE_NAME]).payload)
    for bad in (
        [{"name": ["x"], "digest": {"sha256": "0" * 64}}],
        [{"name": "x", "digest": {"sha256": {"a": 1}}}],
        [7],
        [stmt["subject"][0], stmt["subject"][0]],
    ):
        doc = {**stmt, "subject": bad}
        content = dict(base.members)
        content[ENVELOPE_NAME] = sign_payload(
            jcs.dumps(doc), [base.attacker], INTOTO_PAYLOAD_TYPE
        ).to_bytes()
        buf = io.BytesIO()
        write_container(buf, [(n, content[n]) for n, _ in base.members])
        out = check_verify(base, "subject", buf.getvalue(), workdir)
        assert out.traceback is None, out.traceback
        p = workdir / "subject.bundle"
        p.write_bytes(buf.getvalue())
        rep = check_bundle(p, trust=Trust.allow_unsigned())
        assert [(q.where, q.field) for q in rep.problems] == [(ENVELOPE_NAME, "payload")], bad


def test_mutant_repr_is_short() -> None:
    """Hypothesis prints drawn values in failure reports: a bundle must not fill the log."""
    assert len(repr(Mutant("k", b"x" * 100_000))) < 80


def _non_utf8_column_parquet() -> bytes:
    """A Parquet file whose column name is not UTF-8 (pyarrow writes only UTF-8 names, so
    the name's bytes are patched in the footer; the Arrow schema copy is base64, untouched)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(pa.table({"x\u00e9": [1, 2]}), buf)
    data = buf.getvalue()
    assert data.count("x\u00e9".encode()) >= 1
    return data.replace("x\u00e9".encode(), b"x\xe1A")


def test_a_table_with_a_non_utf8_column_name_is_a_problem_not_a_traceback(
    base: Base, workdir: Path
) -> None:
    """Found by bench/fuzz_long.py (seed 20261207, family resign-unsigned-flip): pyarrow
    raised UnicodeDecodeError out of ``read_metadata`` and ``bundle verify`` printed a
    traceback. Now a located problem on the table; inspect says so too (exit 1)."""
    import subprocess
    import sys

    data = _resealed(base, "tables/receipts.parquet", _non_utf8_column_parquet())
    out = check_verify(base, "non-utf8-column", data, workdir)
    assert out.traceback is None, out.traceback
    p = workdir / "non-utf8.bundle"
    p.write_bytes(data)
    rep = check_bundle(p, trust=Trust.keys([base.trusted]))
    assert not rep.ok
    assert any(
        q.where == "tables/receipts.parquet" and "UnicodeDecodeError" in q.message
        for q in rep.problems
    ), rep.problems
    proc = subprocess.run(
        [sys.executable, "-m", "reprobundle.cli", "inspect", str(p)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode in (0, 1), proc.stderr


@pytest.mark.parametrize("version", [[1], {"v": 1}, ["1"]])
def test_an_unhashable_format_version_is_refused_not_a_traceback(version: object) -> None:
    """Found by bench/fuzz_long.py on the fixed tree (seed 20261213, json-manifest-deep):
    ``format_version`` holding a list raised ``TypeError: unhashable type`` in verify."""
    from bundler.format.manifest import ManifestError, parse_manifest

    doc = {"format": "reprobundle", "format_version": version}
    with pytest.raises(ManifestError, match="unknown format_version"):
        parse_manifest(json.dumps(doc).encode())
