"""Docs a newcomer follows, run as written (issue 24, item 8).

Each snippet is read out of the document it appears in and run: the DuckDB SQL
of the auditor guide in ``duckdb.sql()``, the securesystemslib and in-toto
one-liners (and whether their ``pip install`` line brings everything they
import), the OpenSSH form of a ``bundle keygen`` key with the real
``ssh-keygen``, and the sample ``verify`` output. Expected figures come from the
sample's published values (samples/h3-ref2va-5s/README.md: 407.27 and 108.12 s)
and from ssh-keygen, never from the code under test. A tool that is not
installed skips its test, naming it.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from bundler.errors import KeyFileError
from bundler.format.keys import load_private_key

ROOT = Path(__file__).resolve().parents[1]
AUDITOR = (ROOT / "docs" / "auditor-guide.md").read_text(encoding="utf-8")
SAMPLE = ROOT / "samples" / "h3-ref2va-5s"
BUNDLE = [sys.executable, "-m", "reprobundle.cli"]
SSH_KEYGEN = shutil.which("ssh-keygen")
KEY_ID = re.compile(r"SHA256:[A-Za-z0-9+/]{43}")


def bundle(*args: str | Path, cwd: Path, check: int = 0) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [*BUNDLE, *map(str, args)], capture_output=True, text=True, timeout=180, cwd=cwd
    )
    assert proc.returncode == check, (proc.stdout, proc.stderr)
    return proc


def _block_after(marker: str, lang: str) -> str:
    """The first fenced ``lang`` block after ``marker`` in the auditor guide."""
    rest = AUDITOR.split(marker, 1)[1]
    m = re.search(rf"^```{lang}\n(.*?)^```", rest, re.MULTILINE | re.DOTALL)
    assert m, (marker, lang)
    return m.group(1)


def _shell(script: str, cwd: Path, env: dict[str, str] | None = None) -> str:
    # The snippets say `python3`: the one of this interpreter's environment.
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=cwd,
        env={**os.environ, "PATH": path, **(env or {})},
    )
    assert proc.returncode == 0, (script, proc.stdout, proc.stderr)
    return proc.stdout


@pytest.fixture(scope="module")
def sealed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample sealed as ``X.bundle`` with ``author.key``, in a folder of its own."""
    d = tmp_path_factory.mktemp("docs")
    bundle("keygen", "-o", "author.key", cwd=d)
    bundle("seal", SAMPLE, "-o", "X.bundle", "--key", "author.key", cwd=d)
    return d


def test_auditor_guide_verify_output_is_what_verify_prints(sealed: Path) -> None:
    shown = _block_after("bundle verify X.bundle --key author.key.pub\n```", "")
    printed = bundle("verify", "X.bundle", "--key", "author.key.pub", cwd=sealed).stdout
    # Key IDs differ per key; everything else is the tool's output as it is.
    assert KEY_ID.sub("KEY", shown) == KEY_ID.sub("KEY", printed)


def test_auditor_guide_duckdb_sql_runs_as_written(sealed: Path) -> None:
    if importlib.util.find_spec("duckdb") is None:
        pytest.skip("duckdb is not installed (pip install duckdb)")
    import duckdb

    bundle("export", "X.bundle", "exported", "--key", "author.key.pub", cwd=sealed)
    sql = _block_after("with DuckDB, the arm means replay reports:", "sql")
    cwd = Path.cwd()
    os.chdir(sealed)  # the SQL names exported/ relative to where it runs
    try:
        relation = duckdb.sql(sql)
        assert relation is not None  # a query, not a statement
        rows = relation.fetchall()
    finally:
        os.chdir(cwd)
    assert rows == [("baseline", 407.27), ("candidate", 108.12)]


def _openssh_key(path: Path, passphrase: str = "") -> None:
    assert SSH_KEYGEN is not None
    subprocess.run(
        [SSH_KEYGEN, "-q", "-t", "ed25519", "-N", passphrase, "-C", "t", "-f", str(path)],
        check=True,
        capture_output=True,
        timeout=60,
    )


def test_securesystemslib_and_in_toto_one_liners_run_as_written(tmp_path: Path) -> None:
    for module in ("securesystemslib", "in_toto_attestation", "zstandard"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed (the dev extra has it)")
    if SSH_KEYGEN is None:
        pytest.skip("ssh-keygen is not installed (the snippet verifies with ~/.ssh/id_ed25519.pub)")
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    _openssh_key(home / ".ssh" / "id_ed25519")
    bundle(
        "seal",
        SAMPLE,
        "-o",
        tmp_path / "c.bundle",
        "--key",
        home / ".ssh" / "id_ed25519",
        cwd=tmp_path,
    )
    block = _block_after("### Checking the envelope with securesystemslib", "")
    out = _shell(block, tmp_path, {"HOME": str(home)})
    assert "verified by" in out
    assert "https://reprobundle.invalid/predicate/bundle/v1" in out and "subjects" in out


def _closure(spec: str) -> set[str]:
    """A distribution (``name[extra]``) and everything it installs, by installed metadata."""
    req = Requirement(spec)
    seen: set[str] = set()
    todo = [(req.name, set(req.extras))]
    while todo:
        name, extras = todo.pop()
        key = name.lower().replace("_", "-")
        if key in seen and not extras:
            continue
        seen.add(key)
        for line in importlib.metadata.requires(name) or []:
            dep = Requirement(line)
            env_ok = dep.marker is None or any(
                dep.marker.evaluate({"extra": e}) for e in (extras or {""})
            )
            if env_ok:
                todo.append((dep.name, set(dep.extras)))
    return seen


def test_the_one_liners_install_line_brings_everything_they_import() -> None:
    section = AUDITOR.split("### Checking the envelope with securesystemslib", 1)[1]
    pip = re.search(r"`pip install ([^`]+)`", section)
    assert pip, "no pip install line"
    specs = [s.strip("'\"") for s in pip.group(1).split()]
    try:
        installed = set().union(*(_closure(s) for s in specs))
    except importlib.metadata.PackageNotFoundError as exc:
        pytest.skip(f"{exc} is not installed here")
    block = _block_after("### Checking the envelope with securesystemslib", "")
    modules: set[str] = set()
    for code in re.findall(r"python3? -c '([^']*)'", block):
        for stmt in (x.strip() for x in code.split(";")):
            if stmt.startswith("from "):
                modules.add(stmt.split()[1].split(".")[0])
            elif stmt.startswith("import "):
                names = stmt.removeprefix("import ").split(",")
                modules |= {n.split()[0].split(".")[0] for n in names}
    dists = importlib.metadata.packages_distributions()
    needed = {
        d.lower().replace("_", "-")
        for m in modules - set(sys.stdlib_module_names)
        for d in dists.get(m, [m])
    }
    assert needed <= installed, needed - installed


def test_keygen_prints_the_openssh_line_ssh_keygen_fingerprints(tmp_path: Path) -> None:
    if SSH_KEYGEN is None:
        pytest.skip("ssh-keygen is not installed")
    doc = json.loads(bundle("keygen", "-o", "author.key", "--json", cwd=tmp_path).stdout)
    (tmp_path / "author.ssh.pub").write_text(doc["public_key_openssh"] + "\n")
    out = subprocess.run(
        [SSH_KEYGEN, "-lf", str(tmp_path / "author.ssh.pub")],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    assert out.split()[1] == doc["key_id"] and "(ED25519)" in out
    text = bundle("keygen", "-o", "other/k", cwd=tmp_path).stdout  # the folder need not exist
    assert any(line.startswith("openssh:     ssh-ed25519 AAAA") for line in text.splitlines())


def test_auditor_guide_converts_an_earlier_keys_pem_to_openssh(tmp_path: Path) -> None:
    if SSH_KEYGEN is None:
        pytest.skip("ssh-keygen is not installed")
    doc = json.loads(bundle("keygen", "-o", "author.key", "--json", cwd=tmp_path).stdout)
    out = _shell(_block_after("For a key\nmade earlier", "sh"), tmp_path)
    assert out.split()[1] == doc["key_id"]


def test_passphrase_variable_is_ignored_by_unencrypted_keys_pem_and_openssh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One rule for both formats: the variable opens encrypted keys, passes over the others."""
    if SSH_KEYGEN is None:
        pytest.skip("ssh-keygen is not installed (it writes the OpenSSH keys)")
    bundle("keygen", "-o", "plain.pem", cwd=tmp_path)
    _openssh_key(tmp_path / "plain_ssh")
    _openssh_key(tmp_path / "locked_ssh", passphrase="open sesame")
    monkeypatch.setenv("REPROBUNDLE_KEY_PASSPHRASE", "open sesame")
    for name in ("plain.pem", "plain_ssh", "locked_ssh"):
        load_private_key(tmp_path / name)  # no error
    monkeypatch.delenv("REPROBUNDLE_KEY_PASSPHRASE")
    # An explicit passphrase for an unencrypted key is refused, in both formats.
    for name in ("plain.pem", "plain_ssh"):
        with pytest.raises(KeyFileError, match="not encrypted"):
            load_private_key(tmp_path / name, b"open sesame")


def test_docs_cite_no_path_outside_the_repository() -> None:
    docs = [ROOT / "README.md", ROOT / "samples" / "README.md", *(ROOT / "docs").rglob("*.md")]
    for doc in docs:
        assert "/work/" not in doc.read_text(encoding="utf-8"), doc
