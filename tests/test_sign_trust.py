"""Trust semantics (issue 12, defect 9): what VERIFIED means, and who may countersign.

- ``verify --key PUB --allow-unsigned`` on a bundle no trusted key signed is
  accepted (exit 0: integrity only) but never called VERIFIED.
- ``sign`` countersigns only a bundle an existing signature of which verifies
  with a key the signer trusts; anything else is an adoption, which takes
  ``--force-adopt`` and is reported as one.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bundler.errors import IntegrityError, UsageError
from bundler.format.container import read_container
from bundler.format.manifest import ENVELOPE_NAME
from bundler.format.trust import Trust
from bundler.seal import seal_campaign
from bundler.sign import countersign
from bundler.verify import check_bundle
from tests.campaign_builder import write_campaign
from tests.conftest import Keys, make_keys

BUNDLE = [sys.executable, "-m", "reprobundle.cli"]


def run(*args: str | Path, check: int | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([*BUNDLE, *map(str, args)], capture_output=True, text=True, timeout=180)
    assert "Traceback" not in proc.stderr, proc.stderr
    if check is not None:
        assert proc.returncode == check, (proc.stdout, proc.stderr)
    return proc


@pytest.fixture
def stranger_bundle(tmp_path: Path) -> tuple[Path, Keys]:
    """A bundle signed only by a key nobody in these tests trusts."""
    d = tmp_path / "stranger-keys"
    d.mkdir()
    stranger = make_keys(d, "stranger")
    out = tmp_path / "s.bundle"
    seal_campaign(write_campaign(tmp_path / "c"), out, keys=[stranger.private])
    return out, stranger


# --- verify ---------------------------------------------------------------------------------


def test_allow_unsigned_with_an_unknown_signer_is_untrusted_not_verified(
    stranger_bundle: tuple[Path, Keys], keys: Keys
) -> None:
    bundle, _ = stranger_bundle
    proc = run("verify", bundle, "--key", keys.public_path, "--allow-unsigned", check=0)
    headline = proc.stdout.splitlines()[0]
    assert headline.startswith(f"{bundle}: UNTRUSTED")
    assert "VERIFIED" not in headline
    assert "signature  untrusted (accepted by --allow-unsigned" in proc.stdout
    doc = json.loads(
        run("verify", bundle, "--key", keys.public_path, "--allow-unsigned", "--json").stdout
    )
    assert doc["ok"] is True  # integrity holds; exit 0 with --allow-unsigned
    assert doc["trusted"] is False
    assert doc["verdict"] == "untrusted"
    assert doc["signature_status"] == "untrusted"
    # Without --allow-unsigned the same bundle fails (exit 1), as before.
    assert run("verify", bundle, "--key", keys.public_path).returncode == 1


def test_unsigned_bundle_with_allow_unsigned_is_untrusted(tmp_path: Path) -> None:
    out = tmp_path / "u.bundle"
    seal_campaign(write_campaign(tmp_path / "c"), out)
    proc = run("verify", out, "--allow-unsigned", check=0)
    assert proc.stdout.splitlines()[0].startswith(f"{out}: UNTRUSTED")
    doc = json.loads(run("verify", out, "--allow-unsigned", "--json", check=0).stdout)
    assert (doc["trusted"], doc["verdict"]) == (False, "untrusted")


def test_trusted_signer_is_verified(sealed: Path, keys: Keys) -> None:
    proc = run("verify", sealed, "--key", keys.public_path, "--allow-unsigned", check=0)
    assert proc.stdout.splitlines()[0] == f"{sealed}: VERIFIED"
    doc = json.loads(run("verify", sealed, "--key", keys.public_path, "--json", check=0).stdout)
    assert (doc["trusted"], doc["verdict"]) == (True, "verified")


# --- sign: library ------------------------------------------------------------------------


def test_countersign_refuses_to_adopt_an_unknown_signers_bundle(
    stranger_bundle: tuple[Path, Keys], keys: Keys, tmp_path: Path
) -> None:
    bundle, stranger = stranger_bundle
    before = bundle.read_bytes()
    with pytest.raises(UsageError, match="no trusted key given"):
        countersign(bundle, keys.private)
    other = make_keys(tmp_path, "other")
    with pytest.raises(IntegrityError, match="no existing signature verifies with a trusted key"):
        countersign(bundle, keys.private, trust=Trust.keys([other.public]))
    assert bundle.read_bytes() == before  # nothing written
    # The bundle still does not verify with the would-be countersigner's key.
    assert not check_bundle(bundle, trust=Trust.keys([keys.public])).ok
    res = countersign(
        bundle, keys.private, tmp_path / "co.bundle", trust=Trust.keys([stranger.public])
    )
    assert (res.adopted, res.endorsed) == (False, [stranger.key_id])


def test_force_adopt_signs_and_says_so(
    stranger_bundle: tuple[Path, Keys], keys: Keys, tmp_path: Path
) -> None:
    bundle, stranger = stranger_bundle
    out = tmp_path / "adopted.bundle"
    res = countersign(bundle, keys.private, out, trust=Trust.allow_unsigned())
    assert res.adopted is True
    assert res.endorsed == []
    assert res.unverified == [stranger.key_id]
    assert res.signers == [stranger.key_id, keys.key_id]
    before = {m.name: m.data for m in read_container(bundle)}
    after = {m.name: m.data for m in read_container(out)}
    assert all(before[n] == after[n] for n in before if n != ENVELOPE_NAME)


def test_signing_an_unsigned_bundle_is_an_adoption(tmp_path: Path, keys: Keys) -> None:
    out = tmp_path / "u.bundle"
    seal_campaign(write_campaign(tmp_path / "c"), out)
    with pytest.raises(IntegrityError, match="not signed at all"):
        countersign(out, keys.private, trust=Trust.keys([keys.public]))
    res = countersign(out, keys.private, trust=Trust.allow_unsigned())
    assert (res.adopted, res.unverified) == (True, [])
    assert check_bundle(out, trust=Trust.keys([keys.public])).ok


# --- sign: CLI ----------------------------------------------------------------------------


def test_cli_sign_trust_options_and_exit_codes(
    stranger_bundle: tuple[Path, Keys], keys: Keys, tmp_path: Path
) -> None:
    bundle, stranger = stranger_bundle
    before = bundle.read_bytes()
    proc = run("sign", bundle, "--key", keys.private_path, check=2)
    assert "--key-pub" in proc.stderr and "--force-adopt" in proc.stderr
    other = make_keys(tmp_path, "other")
    proc = run("sign", bundle, "--key", keys.private_path, "--key-pub", other.public_path, check=1)
    assert "no existing signature verifies with a trusted key" in proc.stderr
    assert bundle.read_bytes() == before
    # Endorsing a signer you trust: by key, or through a trusted-keys file.
    out = tmp_path / "endorsed.bundle"
    proc = run(
        "sign", bundle, "--key", keys.private_path, "--key-pub", stranger.public_path, "-o", out,
        check=0,
    )  # fmt: skip
    assert f"countersigns a signature verified by {stranger.key_id}" in proc.stdout
    listing = tmp_path / "trusted.txt"
    listing.write_text(f"{stranger.public_path}\n")
    doc = json.loads(
        run(
            "sign", bundle, "--key", keys.private_path, "--trusted-keys", listing, "-o",
            tmp_path / "e2.bundle", "--json", check=0,
        ).stdout
    )  # fmt: skip
    assert (doc["adopted"], doc["endorsed"]) == (False, [stranger.key_id])
    # Adopting takes the explicit flag, and the output records it.
    proc = run("sign", bundle, "--key", keys.private_path, "--force-adopt", check=0)
    assert "ADOPTED (--force-adopt)" in proc.stdout
    assert f"unverified: {stranger.key_id}" in proc.stdout
    rep = json.loads(run("verify", bundle, "--key", keys.public_path, "--json", check=0).stdout)
    assert rep["verdict"] == "verified"


def test_cli_force_adopt_json_records_the_adoption(
    stranger_bundle: tuple[Path, Keys], keys: Keys, tmp_path: Path
) -> None:
    bundle, stranger = stranger_bundle
    doc = json.loads(
        run(
            "sign", bundle, "--key", keys.private_path, "--force-adopt", "-o",
            tmp_path / "a.bundle", "--json", check=0,
        ).stdout
    )  # fmt: skip
    assert doc["adopted"] is True
    assert doc["unverified"] == [stranger.key_id]
    assert doc["endorsed"] == []
