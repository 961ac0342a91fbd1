"""Launch a server from the plan's command template, find its workers, tear it down as planned.

Teardown follows the plan's budgets for the arm: SIGTERM to the server's
process group (every worker in it), wait up to ``term_wait_s``, SIGKILL
whatever is left, wait up to ``kill_wait_s``. Each process (the server and
every descendant found before the TERM) gets one :class:`ProcessExit`: its
exit code or the signal that ended it, seconds from the TERM to its exit, and
whether it had to be killed.

Exit statuses of workers: the rerun makes itself a child subreaper (Linux
``PR_SET_CHILD_SUBREAPER``) while it runs, so a worker whose server exits
first is re-parented to the rerun, which then reaps it and reads its status.
A worker reaped by its own server is seen through ``/proc/<pid>/stat`` while
it is a zombie; one that vanished unseen is recorded with an unknown code.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

__all__ = [
    "PLACEHOLDERS",
    "LaunchError",
    "LaunchSpec",
    "ProcInfo",
    "ProcessExit",
    "ServerProcess",
    "child_subreaper",
    "expand_command",
    "free_port",
    "process_tree",
]

PLACEHOLDERS = ("port", "host", "arm", "server", "commit", "python", "model")
"""Placeholders a template may use as ``{name}``; a token that is exactly ``{args}``
expands to the arm's ``launch.<arm>.args`` list."""
_PLACEHOLDER = re.compile(r"\{([A-Za-z_]+)\}")
_POLL_S = 0.01
_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37
_EXIT_CODE_FIELD = 52  # /proc/<pid>/stat field holding the wait status of a zombie


class LaunchError(ValueError):
    """A launch template cannot be expanded or the server cannot be started."""


_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "posh"})
_SHELL_OPTION_WITH_ARG = frozenset({"-o", "+o", "-O", "+O"})
_SCRIPT_FLAG = re.compile(r"-[A-Za-z]*c[A-Za-z]*")
# In these a shell reads quoted text again (here-documents, arithmetic, [[ ]] operands, eval):
# a script containing one may not hold a placeholder.
_REREAD = ("<<", "((", "[[", "eval")
# In a script ${NAME} is the shell's own expansion, not a placeholder.
_SCRIPT_PLACEHOLDER = re.compile(r"(?<!\$)\{([A-Za-z_]+)\}")


def _shell_script_index(tokens: Sequence[str]) -> int | None:
    """The index of the script token of ``SHELL [options] -c SCRIPT`` anywhere in ``tokens``.

    The shell may come after a wrapper (``env X=1 bash -c ...``, ``timeout 60 sh -c ...``).
    """
    for i, tok in enumerate(tokens):
        if tok.rsplit("/", 1)[-1] not in _SHELLS:
            continue
        j = i + 1
        while j < len(tokens):
            opt = tokens[j]
            if _SCRIPT_FLAG.fullmatch(opt):
                return j + 1 if j + 1 < len(tokens) else None
            if opt in _SHELL_OPTION_WITH_ARG:
                j += 2
            elif opt.startswith(("-", "+")) and opt not in ("-", "--"):
                j += 1
            else:
                break
    return None


def _quoted_spans(script: str) -> list[tuple[int, int]]:
    """Spans of ``script`` inside single or double quotes (POSIX rules; ``$'`` as single)."""
    spans: list[tuple[int, int]] = []
    i, n = 0, len(script)
    while i < n:
        c = script[i]
        if c == "\\":
            i += 2
            continue
        if c in "'\"":
            end = i + 1
            while end < n and script[end] != c:
                end += 2 if c == '"' and script[end] == "\\" else 1
            spans.append((i, end))
            i = end + 1
            continue
        i += 1
    return spans


def _expand_script(script: str, values: Mapping[str, str], args: Sequence[str]) -> str:
    """Expand a shell script token: every value shell-quoted, ``{args}`` as quoted words.

    A placeholder must stand bare in the script: inside quotes, a here-document or
    arithmetic the shell would read the quoted value as text again.
    """
    spans = _quoted_spans(script)

    def sub(m: re.Match[str]) -> str:
        name = m.group(1)
        if any(a < m.start() < b for a, b in spans) or any(r in script for r in _REREAD):
            raise LaunchError(
                f"{{{name}}} in a shell script must stand outside quotes, here-documents, "
                "arithmetic, [[ ]] and eval: rerun quotes its value for the shell"
            )
        if name == "args":
            if not script[: m.start()].strip():
                raise LaunchError("{args} cannot be the command of a shell script")
            return shlex.join(args)
        if name not in values:
            raise LaunchError(f"unknown placeholder {{{name}}} in launch command")
        return shlex.quote(values[name])

    return _SCRIPT_PLACEHOLDER.sub(sub, script)


def expand_command(
    template: str | Sequence[str], values: Mapping[str, str], args: Sequence[str] = ()
) -> list[str]:
    """Expand a command template into an argument list (no shell is involved).

    A string template is split with :func:`shlex.split`. Each ``{name}`` is
    replaced by ``values[name]``; a token that is exactly ``{args}`` becomes
    the items of ``args``. Values and arguments (the plan's, the bundle
    author's) thus only ever become argument elements, never command text.

    When the template itself runs a shell (``sh -c SCRIPT``, also after a
    wrapper such as ``env`` or ``timeout``), the script is command text: in it
    every value is substituted with :func:`shlex.quote` and ``{args}`` as
    :func:`shlex.join` of the arguments, and a placeholder inside quotes, a
    here-document or arithmetic is refused.

    Raises:
        LaunchError: an unknown or misplaced placeholder, a NUL character, or an
            empty command.
    """
    tokens = shlex.split(template) if isinstance(template, str) else [str(t) for t in template]
    script_at = _shell_script_index(tokens)
    if tokens and tokens[0] == "{args}":
        raise LaunchError("{args} cannot be the command itself: name the program it is for")
    out: list[str] = []
    for i, tok in enumerate(tokens):
        if i == script_at:
            out.append(_expand_script(tok, values, [str(a) for a in args]))
            continue
        if tok == "{args}":
            out.extend(str(a) for a in args)
            continue

        def sub(m: re.Match[str]) -> str:
            name = m.group(1)
            if name not in values:
                raise LaunchError(f"unknown placeholder {{{name}}} in launch command")
            return values[name]

        out.append(_PLACEHOLDER.sub(sub, tok))
    if not out:
        raise LaunchError("empty launch command")
    if any("\0" in t for t in out):
        raise LaunchError("a NUL character in the launch command or its arguments")
    return out


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free right now on ``host`` (the server binds it a moment later)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


@contextlib.contextmanager
def child_subreaper() -> Iterator[bool]:
    """Make this process a child subreaper while the block runs (Linux; else a no-op).

    Yields whether it is one, so that orphaned workers come back to us to be reaped.
    """
    if not sys.platform.startswith("linux"):
        yield False
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        before = ctypes.c_int(0)
        libc.prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(before), 0, 0, 0)
        ok = libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        yield False
        return
    try:
        yield ok
    finally:
        libc.prctl(_PR_SET_CHILD_SUBREAPER, before.value, 0, 0, 0)


@dataclass(frozen=True)
class ProcInfo:
    """One process as ``/proc/<pid>/stat`` shows it."""

    pid: int
    ppid: int
    pgid: int
    comm: str
    state: str
    wait_status: int | None = None


def _read_stat(pid: int) -> ProcInfo | None:
    try:
        data = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    left, right = data.find("("), data.rfind(")")
    if left < 0 or right < 0:
        return None
    rest = data[right + 2 :].split()
    # Fields after the command start at field 3 (state); field N is rest[N - 3].
    wait_status = None
    if rest[0] == "Z" and len(rest) > _EXIT_CODE_FIELD - 3:
        wait_status = int(rest[_EXIT_CODE_FIELD - 3])
    return ProcInfo(pid, int(rest[1]), int(rest[2]), data[left + 1 : right], rest[0], wait_status)


def process_tree(root: int) -> list[ProcInfo]:
    """Every live descendant of ``root`` (not ``root`` itself), ordered by pid."""
    table: dict[int, ProcInfo] = {}
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                info = _read_stat(int(entry.name))
                if info is not None:
                    table[info.pid] = info
    children: dict[int, list[int]] = {}
    for info in table.values():
        children.setdefault(info.ppid, []).append(info.pid)
    out: list[ProcInfo] = []
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        out.append(table[pid])
        todo.extend(children.get(pid, []))
    return sorted(out, key=lambda p: p.pid)


@dataclass(frozen=True)
class LaunchSpec:
    """How to start one server."""

    argv: tuple[str, ...]
    cwd: Path
    env: Mapping[str, str]
    log_path: Path


@dataclass(frozen=True)
class ProcessExit:
    """How one process ended at teardown."""

    role: str  # server | worker
    name: str
    pid: int
    comm: str
    exit_code: int | None
    signal: str | None
    exit_s: float
    killed: bool
    exited_before_term: bool = False
    still_running: bool = False

    @property
    def clean(self) -> bool:
        """Exited by itself after TERM with code 0, without being killed."""
        return (
            self.exit_code == 0
            and self.signal is None
            and not self.killed
            and not self.still_running
            and not self.exited_before_term
        )


def _decode(status: int) -> tuple[int | None, str | None]:
    if os.WIFSIGNALED(status):
        return None, _signal_name(os.WTERMSIG(status))
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status), None
    return None, None


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"SIG{num}"


@dataclass
class _Tracked:
    role: str
    name: str
    pid: int
    comm: str
    pgid: int
    exited_at: float | None = None
    exit_code: int | None = None
    signal: str | None = None
    kill_sent: bool = False
    before_term: bool = False


@dataclass
class ServerProcess:
    """A launched server (its own session and process group) and what was seen of its workers."""

    popen: subprocess.Popen[bytes]
    log: IO[bytes]
    started: float
    workers_seen: dict[int, ProcInfo] = field(default_factory=dict)

    @classmethod
    def start(cls, spec: LaunchSpec) -> ServerProcess:
        """Start the server with its output going to ``spec.log_path``.

        Raises:
            LaunchError: the command cannot be executed.
        """
        spec.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = spec.log_path.open("ab")
        env = {**os.environ, **spec.env}
        try:
            popen = subprocess.Popen(
                list(spec.argv),
                cwd=spec.cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            log.close()
            raise LaunchError(f"cannot start {spec.argv[0]!r}: {exc}") from exc
        return cls(popen, log, time.monotonic())

    @property
    def pid(self) -> int:
        """The server's pid (also its process group id)."""
        return self.popen.pid

    def exit_status(self) -> int | None:
        """The server's return code if it has exited."""
        return self.popen.poll()

    def observe_workers(self) -> list[ProcInfo]:
        """Record the server's live descendants (called when ready and before teardown)."""
        tree = process_tree(self.pid)
        for p in tree:
            self.workers_seen.setdefault(p.pid, p)
        return tree

    def kill_now(self) -> None:
        """SIGKILL the whole process group at once (the watchdog's last resort)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)

    def _tracked(self) -> list[_Tracked]:
        live = {p.pid for p in self.observe_workers()}
        me = _read_stat(self.pid)
        out = [_Tracked("server", "server", self.pid, me.comm if me else "", self.pid)]
        for k, (pid, info) in enumerate(sorted(self.workers_seen.items())):
            t = _Tracked("worker", f"w{k}", pid, info.comm, info.pgid)
            if pid not in live:
                t.before_term, t.exited_at = True, time.monotonic()
                self._poll_worker(t)
            out.append(t)
        if self.popen.poll() is not None:
            out[0].before_term, out[0].exited_at = True, time.monotonic()
            self._poll_server(out[0])
        return out

    def _poll_server(self, t: _Tracked) -> None:
        rc = self.popen.poll()
        if rc is None:
            return
        if t.exited_at is None:
            t.exited_at = time.monotonic()
        t.exit_code, t.signal = (rc, None) if rc >= 0 else (None, _signal_name(-rc))

    def _poll_worker(self, t: _Tracked) -> None:
        try:
            pid, status = os.waitpid(t.pid, os.WNOHANG)
        except ChildProcessError:
            info = _read_stat(t.pid)
            if info is None or info.state in ("Z", "X"):
                if t.exited_at is None:
                    t.exited_at = time.monotonic()
                if info is not None and info.wait_status is not None:
                    t.exit_code, t.signal = _decode(info.wait_status)
            return
        if pid == t.pid:
            if t.exited_at is None:
                t.exited_at = time.monotonic()
            t.exit_code, t.signal = _decode(status)

    def _poll(self, tracked: Sequence[_Tracked]) -> None:
        for t in tracked:
            if t.role == "server":
                self._poll_server(t)
            elif t.exited_at is None or (t.exit_code is None and t.signal is None):
                self._poll_worker(t)

    def _wait(self, tracked: Sequence[_Tracked], until: float) -> None:
        while time.monotonic() < until:
            self._poll(tracked)
            if all(t.exited_at is not None for t in tracked):
                return
            time.sleep(_POLL_S)
        self._poll(tracked)

    def _signal_all(self, tracked: Sequence[_Tracked], sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, sig)
        for t in tracked:
            # A worker that left the server's process group gets the signal by itself.
            if t.exited_at is None and t.pgid != self.pid:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(t.pid, sig)

    def teardown(self, term_wait_s: float, kill_wait_s: float) -> list[ProcessExit]:
        """TERM, wait ``term_wait_s``, KILL, wait ``kill_wait_s``; one record per process."""
        tracked = self._tracked()
        t0 = time.monotonic()
        self._signal_all(tracked, signal.SIGTERM)
        self._wait(tracked, t0 + term_wait_s)
        alive = [t for t in tracked if t.exited_at is None]
        if alive:
            for t in alive:
                t.kill_sent = True
            self._signal_all(tracked, signal.SIGKILL)
            self._wait(tracked, time.monotonic() + kill_wait_s)
        end = time.monotonic()
        out = []
        for t in tracked:
            gone = t.exited_at is not None
            if t.kill_sent and gone and t.signal is None and t.exit_code is None:
                t.signal = "SIGKILL"  # it vanished after our KILL: nothing else can end it then
            exit_s = 0.0 if t.before_term else max(0.0, (t.exited_at or end) - t0)
            out.append(
                ProcessExit(
                    t.role,
                    t.name,
                    t.pid,
                    t.comm,
                    t.exit_code,
                    t.signal,
                    round(exit_s, 6),
                    t.kill_sent and gone,
                    t.before_term,
                    not gone,
                )
            )
        self.log.close()
        return out
