"""Which vLLM-Omni commit a server runs: verified from its launch environment, never over HTTP.

vLLM-Omni 0.30.0 defines no version route: ``GET /version`` is vLLM's and
answers ``{"version": <vLLM's version>}`` only, so a development build's
``+g<hash>`` there is vLLM's hash, not vLLM-Omni's. The runtime commit is
therefore read where it can be known:

- **launch mode**: before the server starts, the interpreter the launch
  command runs (see :func:`probe_interpreter`; none found: unverified) is asked, with the launch's
  environment and working directory, for the installed ``vllm-omni``
  distribution's metadata (``importlib.metadata``). A VCS install's
  ``direct_url.json`` (PEP 610) names the commit it was built from
  (``vcs_info.commit_id``); failing that, a setuptools-scm local version
  (``0.30.1.dev3+g81b48e83e``) of *that* distribution names a commit prefix.
  A registry wheel or an editable install names none: unverified.
- **endpoint mode**: nothing on this machine shows what the endpoint runs:
  unverified, always.

What the probe does not show is recorded with it (:data:`NOT_SHOWN`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "ENDPOINT_REASON",
    "NOT_SHOWN",
    "PROBE_TIMEOUT_S",
    "endpoint_runtime",
    "launch_runtime",
    "method_of",
    "probe_interpreter",
    "read_probe",
    "refusal",
]

PROBE_TIMEOUT_S = 60.0
_HEX = re.compile(r"^[0-9a-f]{7,64}$")
_SCM_LOCAL = re.compile(r"\+g([0-9a-f]{7,40})(?:[.+]|$)")
_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")
ENDPOINT_REASON = (
    "endpoint mode: vLLM-Omni reports no runtime commit over HTTP (GET /version is "
    "vLLM's version), and the endpoint's installation is not on this machine"
)
NOT_SHOWN = (
    "that the server process imports this distribution (a PYTHONPATH entry or a source "
    "checkout in the working directory can shadow it)",
    "uncommitted changes in the build the distribution was installed from",
    "the vLLM (upstream) build beneath it, which GET /version reports only as a version",
)
# Run in the launch environment: reads metadata only, imports no vLLM-Omni code.
_PROBE = """
import importlib.metadata as m, json, sys
try:
    d = m.distribution("vllm-omni")
except m.PackageNotFoundError:
    print(json.dumps({"found": False, "python": sys.executable}))
else:
    print(json.dumps({"found": True, "python": sys.executable, "version": d.version,
                      "direct_url": d.read_text("direct_url.json"),
                      "location": str(d.locate_file(""))}))
"""


def _commit_matches(found: str, expected: str) -> bool:
    a, b = found.lower(), expected.lower()
    return bool(_HEX.match(a) and _HEX.match(b)) and (a.startswith(b) or b.startswith(a))


def probe_interpreter(argv0: str, env: Mapping[str, str]) -> str | None:
    """The Python interpreter that runs ``argv0``, or None when it cannot be told.

    ``python3 -m vllm_omni...`` (or the template's ``{python}``) runs that
    python; ``vllm serve --omni`` runs a console script whose ``#!`` line names
    its environment's python (how pip writes entry points). A shell wrapper or
    a binary names none: guessing another interpreter could verify an
    installation the server never uses.
    """
    path = shutil.which(argv0, path=env.get("PATH")) or argv0
    if _PYTHON.match(Path(argv0).name) or argv0 == sys.executable:
        return path
    # Only a regular file is read (a FIFO or device named by a template would block or stream).
    if not Path(path).is_file():
        return None
    try:
        with Path(path).open("rb") as fh:
            first = fh.readline(512)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode("utf-8", "replace").split()
    if words and Path(words[0]).name == "env":
        words = [w for w in words[1:] if not w.startswith("-")]
    if words and _PYTHON.match(Path(words[0]).name):
        return shutil.which(words[0], path=env.get("PATH")) or words[0]
    return None


def read_probe(doc: Mapping[str, Any], arm_commit: str) -> dict[str, Any]:
    """The verdict from the probe's answer ``doc`` (see :func:`launch_runtime`)."""
    out: dict[str, Any] = {
        "verdict": "unverified",
        "method": None,
        "runtime_commit": None,
        "arm_commit": arm_commit,
        "interpreter": doc.get("python"),
        "distribution": None,
        "location": doc.get("location"),
        "reason": None,
        "not_shown": list(NOT_SHOWN),
    }
    if not doc.get("found"):
        out["reason"] = "no vllm-omni distribution is installed for this interpreter"
        return out
    version = str(doc.get("version"))
    out["distribution"] = f"vllm-omni {version}"
    commit, method = None, None
    try:
        direct = json.loads(doc.get("direct_url") or "null")
    except ValueError:
        direct = None
    vcs = direct.get("vcs_info") if isinstance(direct, Mapping) else None
    if isinstance(vcs, Mapping) and isinstance(vcs.get("commit_id"), str):
        commit, method = vcs["commit_id"].lower(), "direct_url.json vcs_info.commit_id"
    else:
        m = _SCM_LOCAL.search(version.lower())
        if m:
            commit, method = m.group(1), "vllm-omni distribution version (setuptools-scm +g)"
    if commit is None or not _HEX.match(commit):
        dir_info = direct.get("dir_info") if isinstance(direct, Mapping) else None
        editable = isinstance(dir_info, Mapping) and dir_info.get("editable")
        out["reason"] = (
            "an editable install: its checkout can change after installation"
            if editable
            else f"vllm-omni {version} records no commit (a registry or local wheel)"
        )
        return out
    out.update(runtime_commit=commit, method=method)
    if _commit_matches(commit, arm_commit):
        out["verdict"] = "verified"
    else:
        out["verdict"] = "mismatch"
        out["reason"] = f"the launch environment has vllm-omni at {commit}"
    return out


def launch_runtime(
    argv0: str, env: Mapping[str, str], cwd: Path, arm_commit: str
) -> dict[str, Any]:
    """Ask the launch environment which vLLM-Omni it would run; the verdict for ``arm_commit``.

    ``env`` is the launch's environment variables on top of this process's.
    A probe that cannot run, times out or answers nonsense leaves the commit
    unverified, with the reason.
    """
    python = probe_interpreter(argv0, env)
    if python is None:
        return _failed(
            None,
            arm_commit,
            f"cannot tell which Python {Path(argv0).name!r} runs (neither a python "
            "executable nor a script with a python #! line)",
        )
    try:
        done = subprocess.run(
            [python, "-c", _PROBE],
            env={**os.environ, **env},
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=PROBE_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return _failed(python, arm_commit, f"the probe did not run: {exc}")
    try:
        doc = json.loads(done.stdout.decode("utf-8", "replace").strip().splitlines()[-1])
    except (ValueError, IndexError):
        doc = None
    if done.returncode != 0 or not isinstance(doc, Mapping):
        tail = done.stderr.decode("utf-8", "replace").strip()[-200:]
        return _failed(python, arm_commit, f"the probe failed (exit {done.returncode}): {tail}")
    return read_probe(doc, arm_commit)


def _failed(python: str | None, arm_commit: str, reason: str) -> dict[str, Any]:
    out = read_probe({"found": False, "python": python}, arm_commit)
    out["reason"] = reason
    return out


def endpoint_runtime(arm_commit: str) -> dict[str, Any]:
    """Endpoint mode's verdict: always unverified, with the reason."""
    out = read_probe({"found": False, "python": None}, arm_commit)
    out["reason"] = ENDPOINT_REASON
    out["not_shown"] = ["which vLLM-Omni commit the endpoint runs"]
    return out


def method_of(doc: Mapping[str, Any]) -> str:
    """One line saying how the verdict was reached (for progress and refusals)."""
    where = doc.get("interpreter")
    if where is None and not doc.get("method"):
        # Endpoint mode, or a launch command whose interpreter cannot be told: nothing
        # was asked, so say that rather than "no vllm-omni for no interpreter".
        return "not probed (no launch environment to ask)"
    how = doc.get("method") or "no commit found"
    return f"{how} ({doc.get('distribution') or 'no vllm-omni'} for {where or 'no interpreter'})"


def refusal(server: str, doc: Mapping[str, Any], allow_unverified: bool) -> str | None:
    """Why the slot must not run (a mismatch, or unverified without the override), or None."""
    if doc["verdict"] == "mismatch":
        return (
            f"{server}: {doc['reason']}, the arm's runtime commit is {doc['arm_commit']} "
            f"({method_of(doc)})"
        )
    if doc["verdict"] == "unverified" and not allow_unverified:
        return (
            f"{server}: runtime commit unverified: {doc['reason']}; "
            "pass --allow-unverified-commit to run anyway (recorded as unverified)"
        )
    return None
