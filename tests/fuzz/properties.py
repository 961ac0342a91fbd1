"""The properties every mutant must satisfy, shared by the fuzz tests and ``bench/fuzz_long.py``.

Each check returns an outcome instead of raising, so the long run can count
failures and go on; the tests assert on the outcome.

* ``check_verify``: the library's ``check_bundle`` (with the author's key, and
  with ``allow_unsigned``) and ``open_verified`` raise nothing but the
  project's typed errors (:class:`~bundler.errors.BundleError`); and whenever
  the author's key verified the mutant with no problem, every member's
  decompressed bytes and every decoded table equal the original's.
* ``check_cli_verify``: ``bundle verify --json`` exits with a documented code
  (0, 1, 2, 3; ``docs/exit-codes.md``), prints one JSON document and no
  traceback; exit 0 only for content equal to the original.
* ``check_seal``: a mutated campaign either seals (and the bundle verifies with
  the key) or fails with a typed error whose problems are located (each names
  a file) — never a traceback.
* ``check_hostile`` (issue 19): on a signed-but-hostile bundle
  (``tests/fuzz/hostile.py``), ``replay`` (plain, ``-v``, ``--json``),
  ``report`` (``--format md``, HTML), ``plan check``, ``inspect`` and ``rerun
  --dry-run`` exit 0-5 without a traceback; none that judges exits 0 on
  impossible data; no raw control, bidi or separator character but ``\n`` in
  any output (run with ``NO_COLOR=1``); no live mention, bare autolink or
  closing keyword from author text in the Markdown; nothing under the root
  but the outputs read or written (sentinel snapshot; ``strace`` in the long
  run); peak RSS under 1 GiB per command (long run).
"""

from __future__ import annotations

import contextlib
import html
import io
import json
import os
import re
import shutil
import signal
import stat
import string
import subprocess
import sys
import tempfile
import threading
import traceback
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq
from cryptography.hazmat.primitives import serialization

from bundler.errors import BundleError
from bundler.format.container import read_container
from bundler.format.dsse import parse_envelope
from bundler.format.manifest import ENVELOPE_NAME
from bundler.format.tables import TABLE_NAMES
from bundler.format.trust import Trust
from bundler.seal import seal_campaign
from bundler.verified import open_verified
from bundler.verify import check_bundle
from tests.fuzz.hostile import HostileCase
from tests.fuzz.strategies import Base, CampaignMutant

__all__ = [
    "DOCUMENTED_EXIT_CODES",
    "HOSTILE_EXIT_CODES",
    "CliRun",
    "HostileOutcome",
    "Outcome",
    "check_cli_verify",
    "check_hostile",
    "check_seal",
    "check_verify",
    "live_markdown",
    "prepare_sentinel",
    "raw_unsafe",
    "run_inprocess",
    "run_subprocess",
    "write_public_key",
]

DOCUMENTED_EXIT_CODES = frozenset({0, 1, 2, 3})  # bundle verify's codes, docs/exit-codes.md


@dataclass
class Outcome:
    """What one case did: accepted with the trusted key, and any property violation."""

    kind: str
    accepted: bool = False
    traceback: str | None = None  # an exception outside the project's error tree
    content_change: str | None = None  # accepted although some content differs
    unlocated: str | None = None  # seal refused without naming where

    @property
    def failed(self) -> bool:
        """True when any property was violated."""
        return bool(self.traceback or self.content_change or self.unlocated)


def _content_difference(base: Base, path: Path) -> str | None:
    """None when every member and decoded table equals the original; else what differs."""
    got = {m.name: m.read_bytes() for m in read_container(path)}
    want = base.content
    if set(got) != set(want):
        return f"member names differ: {sorted(set(got) ^ set(want))}"
    for name, data in want.items():
        if name == ENVELOPE_NAME:
            # The envelope's signature list and JSON spelling are not signed (DSSE: anyone
            # may add a signature); what is signed is the payload and its type.
            new, old = parse_envelope(got[name]), parse_envelope(data)
            if (new.payload, new.payload_type) != (old.payload, old.payload_type):
                return "signed payload differs"
        elif got[name] != data:
            return f"member {name} differs"
    vb = open_verified(path, trust=Trust.keys([base.trusted]))
    for name, table in base.tables.items():
        short = name.removeprefix("tables/").removesuffix(".parquet")
        if not vb.table(short).equals(table):
            return f"decoded table {name} differs"
        if not pq.read_table(io.BytesIO(got[name]), use_threads=False).equals(table):
            return f"decoded table {name} differs"
    return None


def check_verify(base: Base, kind: str, data: bytes, workdir: Path) -> Outcome:
    """Verify ``data`` (written under ``workdir``) through the library; see the module doc."""
    out = Outcome(kind)
    path = workdir / "mutant.bundle"
    path.write_bytes(data)
    try:
        rep = check_bundle(path, trust=Trust.keys([base.trusted]))
        out.accepted = rep.trusted
        check_bundle(path, trust=Trust.allow_unsigned())
        try:
            vb = open_verified(path, trust=Trust.allow_unsigned())
            for name in ("campaign.json", "scorer.json"):
                vb.document(name)
            for name in TABLE_NAMES:
                vb.table(name)
        except BundleError:
            pass
        if out.accepted:
            out.content_change = _content_difference(base, path)
    except BundleError as exc:
        # check_bundle reports problems, it does not raise them: a raise is a defect too.
        out.traceback = f"check_bundle raised {type(exc).__name__}: {exc}"
    except Exception:  # the property under test: nothing else escapes
        out.traceback = traceback.format_exc()
    return out


def write_public_key(base: Base, workdir: Path) -> Path:
    """The author's public key as a PEM file under ``workdir``."""
    pub = workdir / "author.pub"
    pub.write_bytes(
        base.trusted.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return pub


def check_cli_verify(base: Base, kind: str, data: bytes, workdir: Path) -> Outcome:
    """Run ``bundle verify --json`` on ``data`` in a child process; see the module doc."""
    out = Outcome(kind)
    path = workdir / "mutant.bundle"
    path.write_bytes(data)
    pub = write_public_key(base, workdir)
    proc = subprocess.run(
        [sys.executable, "-m", "reprobundle.cli", "verify", str(path), "--key", str(pub), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
        check=False,
    )
    if proc.returncode not in DOCUMENTED_EXIT_CODES or "Traceback" in proc.stderr + proc.stdout:
        out.traceback = f"exit {proc.returncode}\n{proc.stderr[-2000:]}"
        return out
    try:
        json.loads(proc.stdout)
    except json.JSONDecodeError:
        out.traceback = f"exit {proc.returncode}: stdout is not one JSON document"
        return out
    out.accepted = proc.returncode == 0
    if out.accepted:
        try:
            out.content_change = _content_difference(base, path)
        except BundleError as exc:
            out.content_change = f"CLI accepted what the library refuses: {exc}"
    return out


def check_seal(base: Base, mutant: CampaignMutant, workdir: Path) -> Outcome:
    """Seal ``mutant`` under ``workdir``; see the module doc."""
    out = Outcome(mutant.kind)
    with tempfile.TemporaryDirectory(dir=workdir) as d:
        root = Path(d) / "c"
        for rel, data in mutant.files.items():
            if data is None:
                continue
            p = root / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
        dest = Path(d) / "out.bundle"
        try:
            seal_campaign(root, dest, keys=[base.author])
        except BundleError as exc:
            if dest.exists():
                out.traceback = "seal failed but left an output file"
            elif not exc.problems or any(not p.where for p in exc.problems):
                out.unlocated = str(exc)
            return out
        except Exception:
            out.traceback = traceback.format_exc()
            return out
        try:
            rep = check_bundle(dest, trust=Trust.keys([base.trusted]))
        except Exception:
            out.traceback = traceback.format_exc()
            return out
        out.accepted = True
        if not rep.ok:
            out.traceback = f"sealed a bundle that does not verify: {rep.problems[:3]}"
    return out


# --- signed-but-hostile bundles (issue 19; tests/fuzz/hostile.py) ------------------------

HOSTILE_EXIT_CODES = frozenset({0, 1, 2, 3, 4, 5})  # docs/exit-codes.md, replay and report
JUDGING = frozenset({"replay", "replay -v", "replay --json", "report md", "report html"})
RSS_LIMIT_MIB = 1024.0
_ALLOWED_OUTPUTS = ("out", "out-run", "x.md", "x.html", "tmp", "mpl", "trace")
_BIDI = frozenset(
    {"LRE", "RLE", "LRO", "RLO", "PDF", "LRI", "RLI", "FSI", "PDI", "LRM", "RLM", "ALM"}
)


def raw_unsafe(text: str) -> list[str]:
    """Characters that may move a cursor or reorder a line, except ``\\n`` (independent of
    ``bundler._internal.textsafe``): C0 and C1 controls and DEL, bidi controls and marks,
    line and paragraph separators."""
    bad = []
    for ch in text:
        if ch == "\n":
            continue
        cat = unicodedata.category(ch)
        if cat in ("Cc", "Zl", "Zp") or unicodedata.bidirectional(ch) in _BIDI:
            bad.append(f"U+{ord(ch):04X}")
    return sorted(set(bad))


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,}).*?^ {0,3}\1[`~]*[ \t]*$", re.M | re.S)
_INDENTED = re.compile(r"^(?: {4}|\t).*$", re.M)
_TAG = re.compile(r"<[^>\n]*>")


def _markdown_text(md: str) -> str:
    """What GitHub shows as text outside code: fences, indented blocks and code spans cut out,
    HTML tags cut, entities decoded, backslash escapes removed (none of those stops a
    mention or an autolink from working once rendered)."""
    md = _FENCE.sub(" ", md)
    md = _INDENTED.sub(" ", md)
    out, i = [], 0
    while i < len(md):
        if md[i] == "\\" and i + 1 < len(md) and md[i + 1] in string.punctuation:
            out.append(md[i + 1])
            i += 2
            continue
        if md[i] == "`":
            j = i
            while j < len(md) and md[j] == "`":
                j += 1
            run = md[i:j]
            end = re.compile(rf"(?<!`){run}(?!`)").search(md, j)
            if end:  # a code span: its text is code, never a mention or a link
                out.append(" ")
                i = end.end()
                continue
            out.append(run)
            i = j
            continue
        out.append(md[i])
        i += 1
    return html.unescape(_TAG.sub(" ", "".join(out)))


def live_markdown(md: str) -> list[str]:
    """The hostile author tokens (``tests/fuzz/hostile.py``) left live in Markdown text."""
    from tests.fuzz.hostile import CLOSING, MENTION, URL, WWW

    text = _markdown_text(md)
    found = []
    if re.search(rf"(?<![\w`]){re.escape(MENTION)}\b", text):
        found.append(f"live mention {MENTION}")
    for link in (URL, WWW):
        if link in text:
            found.append(f"bare autolink {link}")
    if re.search(rf"\b{re.escape(CLOSING)}\b", text, re.I):
        found.append(f"closing keyword {CLOSING!r}")
    return found


@dataclass
class CliRun:
    """One command of one case."""

    label: str
    code: int
    stdout: str
    stderr: str
    traceback: str | None = None
    peak_rss_mib: float | None = None
    trace: list[str] = field(default_factory=list)  # strace lines


@dataclass
class HostileOutcome:
    """What one hostile case did: the exit code of each command, and each property violation."""

    kind: str
    detail: str
    codes: dict[str, int] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        """True when any property was violated."""
        return bool(self.violations)

    def report(self) -> str:
        """The case and its violations, one per line."""
        return "\n".join([f"{self.kind}: {self.detail!r} exits {self.codes}", *self.violations])


def _env(work: Path) -> dict[str, str]:
    return {
        "NO_COLOR": "1",
        "COLUMNS": "200",
        "PYTHONDONTWRITEBYTECODE": "1",
        "TMPDIR": str(work / "tmp"),
        "MPLCONFIGDIR": str(work / "mpl"),
    }


def run_inprocess(label: str, argv: list[str], work: Path) -> CliRun:
    """Run ``bundle ARGV`` in this process (click's runner), in ``work``; a raised exception is
    what a child would print as a traceback."""
    from click.testing import CliRunner

    from reprobundle.cli.main import main

    here = Path.cwd()
    os.chdir(work)
    try:
        res = CliRunner().invoke(main, argv, env=_env(work), catch_exceptions=True)
    finally:
        os.chdir(here)
    tb = None
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        assert res.exc_info is not None
        tb = "".join(traceback.format_exception(*res.exc_info))
    return CliRun(label, res.exit_code, res.stdout, res.stderr, tb)


def run_subprocess(
    label: str, argv: list[str], work: Path, *, strace: bool = False, timeout_s: float = 300
) -> CliRun:
    """Run ``bundle ARGV`` as a child in ``work``: its peak RSS, and with ``strace`` every
    ``openat`` and ``connect`` of it and its children."""
    work.joinpath("trace").mkdir(exist_ok=True)
    trace_file = work / "trace" / f"{label.replace(' ', '_')}.strace"
    rss_file = work / "trace" / "peak_rss_kib"
    rss_file.unlink(missing_ok=True)  # written afresh by each command's wrapper
    cmd = [sys.executable, "-m", "reprobundle.cli", *argv]
    if strace:
        cmd = ["strace", "-f", "-qq", "-e", "trace=openat,connect", "-o", str(trace_file), *cmd]
    out_f, err_f = work / "trace" / "stdout", work / "trace" / "stderr"
    with out_f.open("wb") as out, err_f.open("wb") as err:
        # Through a small wrapper: Linux carries the forking process's RSS high-water mark
        # into a child's ru_maxrss, so measured straight from pytest (often over 1 GiB
        # late in a run) every command would look that big; the wrapper's own memory is
        # small, so the command's figure is its own.
        proc = subprocess.Popen(
            [sys.executable, "-c", _PEAK_RSS_WRAPPER, str(rss_file), *cmd], cwd=work,
            stdin=subprocess.DEVNULL, stdout=out, stderr=err,
            env={**os.environ, **_env(work)}, start_new_session=True,
        )  # fmt: skip
        timer = threading.Timer(timeout_s, lambda: _kill_group(proc.pid))
        timer.start()
        try:
            proc.wait()
        finally:
            timer.cancel()
    # None when the wrapper was killed (timeout): no figure, rather than a made-up one.
    peak_mib = float(rss_file.read_text()) / 1024 if rss_file.exists() else None
    stdout = out_f.read_text("utf-8", "replace")
    stderr = err_f.read_text("utf-8", "replace")
    tb = stderr if "Traceback (most recent call last)" in stderr else None
    trace = trace_file.read_text("utf-8", "replace").splitlines() if strace else []
    return CliRun(label, proc.returncode, stdout, stderr, tb, peak_mib, trace)


_PEAK_RSS_WRAPPER = """
import os, subprocess, sys
proc = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(proc.pid, 0)
with open(sys.argv[1], "w") as fh:
    fh.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""
"""Runs a command and writes its peak RSS (KiB, ``wait4``) to the file named first."""


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def _snapshot(root: Path, work: Path) -> dict[str, tuple[int, int, int]]:
    """(size, mtime_ns, atime_ns) of everything under ``root`` but the commands' own outputs.

    Nothing is read (a read of the sentinel is seen by its access time: it was set
    before its modification time, so ``relatime`` updates it on the first read).
    """
    skip = {work / name for name in _ALLOWED_OUTPUTS}
    snap: dict[str, tuple[int, int, int]] = {}
    stack = [root]
    while stack:
        d = stack.pop()
        for p in d.iterdir():
            if p in skip:
                continue
            st_ = p.lstat()
            if stat.S_ISDIR(st_.st_mode):
                # a folder's own times change with every listing and every output beside it;
                # what is created or removed inside it is what counts
                snap[str(p.relative_to(root))] = (-1, 0, 0)
                stack.append(p)
            else:
                snap[str(p.relative_to(root))] = (st_.st_size, st_.st_mtime_ns, st_.st_atime_ns)
    return snap


def _diff(
    before: dict[str, tuple[int, int, int]], after: dict[str, tuple[int, int, int]]
) -> list[str]:
    out = []
    for k in sorted(set(before) | set(after)):
        b, a = before.get(k), after.get(k)
        if b is None:
            out.append(f"created {k}")
        elif a is None:
            out.append(f"removed {k}")
        elif b[:2] != a[:2]:
            out.append(f"modified {k}")
        elif k.startswith("sentinel") and a[2] != b[2]:
            out.append(f"read {k}")
    return out


def prepare_sentinel(root: Path) -> Path:
    """``root/sentinel`` with a secret file whose access time is older than its mtime."""
    from tests.fuzz.hostile import SECRET

    sentinel = root / "sentinel"
    sentinel.mkdir(parents=True, exist_ok=True)
    secret = sentinel / SECRET
    if not secret.exists():
        from tests.reference_server.campaign import tiny_png

        secret.write_bytes(tiny_png())
    for p in (secret, sentinel):
        st_ = p.stat()
        os.utime(p, ns=(st_.st_mtime_ns - 10**12, st_.st_mtime_ns))
    return sentinel


_CONNECT = re.compile(
    r"connect\(.*sa_family=AF_INET6?.*?"
    r'(?:inet_addr\("([^"]+)"\)|inet_pton\(AF_INET6, "([^"]+)")'
)


def _trace_problems(lines: list[str], work: Path, sentinel: Path) -> list[str]:
    """strace lines touching the sentinel, writing outside the allowed folders, or connecting
    anywhere but loopback."""
    # ``.x.md.reprobundle-partial-…``: the atomic writer's temporary beside its output
    allowed = [str(work / n) for n in _ALLOWED_OUTPUTS] + ["/dev/", "/proc/"]
    allowed += [str(work / ".x.md."), str(work / ".x.html.")]
    out = []
    for line in lines:
        m = re.search(r'openat\((?:AT_FDCWD|\d+), "((?:[^"\\]|\\.)*)", ([A-Z_|]+)', line)
        if m:
            raw = m.group(1).encode().decode("unicode_escape", "replace")
            path = os.path.normpath(raw if raw.startswith("/") else str(work / raw))
            if path.startswith(str(sentinel)):
                out.append(f"strace: opened {path}")
            elif re.search(r"O_WRONLY|O_RDWR|O_CREAT", m.group(2)) and not any(
                path.startswith(a) for a in allowed
            ):
                out.append(f"strace: opened for writing {path}")
        c = _CONNECT.search(line)
        if c:
            host = c.group(1) or c.group(2)
            if host not in ("127.0.0.1", "::1"):
                out.append(f"strace: connect to {host}")
    return sorted(set(out))[:10]


def check_hostile(  # noqa: PLR0912
    case: HostileCase,
    root: Path,
    pub: Path,
    *,
    inprocess: bool = True,
    strace: bool = False,
    live_rerun: bool = False,
) -> HostileOutcome:
    """Run every reading command on ``case`` under ``root`` (one case at a time); see issue 19.

    ``root`` holds ``sentinel/`` (:func:`prepare_sentinel`) and ``work/``, the commands'
    working folder, rebuilt for each case. ``inprocess`` runs the commands that judge or
    print in this process (fast; CI); otherwise each is a child, with its peak RSS and,
    with ``strace``, its file opens and connections. ``rerun`` always runs as a child;
    ``live_rerun`` also runs the plan against the reference server (``--launch``).
    """
    from tests.reference_server import REPO_ROOT
    from tests.reference_server.campaign import tiny_png

    out = HostileOutcome(case.family, case.detail)
    sentinel = prepare_sentinel(root)
    work = root / "work"
    if work.exists():
        shutil.rmtree(work)
    for d in ("tmp", "mpl", "inputs/inputs"):
        (work / d).mkdir(parents=True)
    (work / "inputs" / "inputs" / "reference.png").write_bytes(tiny_png())
    if case.inputs_link:
        link = work / "inputs" / case.inputs_link
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(sentinel / "secret.png")
    bundle = work / "case.bundle"
    bundle.write_bytes(case.data)
    b, k = str(bundle), str(pub)
    rerun = [
        "rerun", b, "--key", k, "--launch", "--launch-cwd", str(REPO_ROOT),
        "--inputs", str(work / "inputs"), "--telemetry", "none",
    ]  # fmt: skip
    if not case.rerun:  # the data campaign's plan has no launch command
        rerun += ["--launch-command", "{python} -c pass {server} {arm} {args}"]
    commands: list[tuple[str, list[str], bool]] = [
        ("replay", ["replay", b, "--key", k], inprocess),
        ("replay -v", ["replay", b, "--key", k, "-v"], inprocess),
        ("replay --json", ["replay", b, "--key", k, "--json"], inprocess),
        ("report md", ["report", b, "--key", k, "--format", "md", "-o", "x.md"], inprocess),
        ("report html", ["report", b, "--key", k, "-o", "x.html"], inprocess),
        ("plan check", ["plan", "check", b], inprocess),
        # Against itself: both sides read as bundle diff reads them (exit 0, or 1 refused).
        ("diff", ["diff", b, b, "--key", k], inprocess),
        ("inspect", ["inspect", b], inprocess),
        ("inspect -v", ["inspect", b, "-v"], inprocess),
        ("rerun --dry-run", [*rerun, "-o", "out", "--dry-run"], False),
    ]
    if live_rerun:
        commands.append(("rerun", [*rerun, "-o", "out-run"], False))
    before = _snapshot(root, work)
    runs = []
    for label, argv, here in commands:
        if here:
            runs.append(run_inprocess(label, argv, work))
        else:
            runs.append(run_subprocess(label, argv, work, strace=strace))
    after = _snapshot(root, work)
    v = out.violations
    for r in runs:
        out.codes[r.label] = r.code
        if r.traceback:
            v.append(f"[{r.label}] traceback (exit {r.code}):\n{r.traceback[-1500:]}")
        elif r.code not in HOSTILE_EXIT_CODES:
            v.append(f"[{r.label}] undocumented exit {r.code}: {r.stderr[-300:]!r}")
        if case.impossible and r.label in JUDGING and r.code == 0:
            v.append(f"[{r.label}] exit 0 (CONFIRMED) on impossible data")
        if case.impossible and "CONFIRMED (exit 0)" in r.stdout + r.stderr:
            v.append(f"[{r.label}] prints CONFIRMED on impossible data")
        for name, text in (("stdout", r.stdout), ("stderr", r.stderr)):
            bad = raw_unsafe(text)
            if bad:
                v.append(f"[{r.label}] raw control/bidi characters on {name}: {bad}")
        if r.peak_rss_mib is not None and r.peak_rss_mib > RSS_LIMIT_MIB:
            v.append(f"[{r.label}] peak RSS {r.peak_rss_mib:.0f} MiB > {RSS_LIMIT_MIB:.0f}")
        v += [f"[{r.label}] {p}" for p in _trace_problems(r.trace, work, sentinel)]
    for name in ("x.md", "x.html"):
        p = work / name
        if p.exists():
            text = p.read_text("utf-8", "replace")
            bad = raw_unsafe(text)
            if bad:
                v.append(f"[{name}] raw control/bidi characters: {bad}")
            if name == "x.md":
                v += [f"[x.md] {f}" for f in live_markdown(text)]
    v += [f"[files] {d}" for d in _diff(before, after)]
    return out
