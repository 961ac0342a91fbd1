"""Parse several large source files at once, in worker processes, with serial semantics.

``bundle import`` and ``bundle replay`` of a serving sweep parse one JSON document per
run (vLLM: 9 MB each for 50k requests), and Python's ``json`` holds the GIL: threads
cannot share the work, processes can. :func:`prefetch` starts the parses in worker
processes and hands back, per job, a thunk that the caller's serial loop calls where
it called the parser before. A job that failed in its worker (any exception, or a
worker that died) is run again in the caller's process by its thunk, so that the
error the caller sees, its type, message and located problems, is the serial path's
own; an exception is never carried across processes.

Processes are used only where they pay: at least two jobs, at least
:data:`MIN_BYTES` of input in all, and more than one CPU available; otherwise every
thunk parses in process, exactly as before. A worker is a fresh interpreter in
isolated mode (``python -I``: no current folder, no ``PYTHON*`` variables, so a
folder of untrusted files the caller runs in cannot put a module of its own
first) given the caller's ``sys.path``; never a fork (the caller may hold
threads, Arrow's and zstd's among them) and never ``multiprocessing``'s spawn,
which imports the caller's ``__main__`` again (a script without a ``__name__``
guard would run twice). It gets (function, arguments) pickled by reference on its
standard input and answers on a private copy of its standard output (anything the
parse prints goes to standard error, which is discarded).

The caller is one of the parsers: a job no worker has taken yet when the caller
needs it is run in the caller, and while the caller waits for a worker's result it
runs later jobs no worker has taken (their outcome, a value or an error, is kept for
their own call, in order). One worker per CPU but the caller's, at most
:data:`MAX_WORKERS`, one job each at a time: memory grows by at most that many
documents being parsed, and the caller's one. Results are returned in job order
whatever finished first. Pickles are only exchanged with the workers this module
started.

A caller that knows parses will come after other work (replay verifies the whole
bundle first) can start the workers early with :func:`standby`: they start and import
the parser's modules while the caller works, and the next :func:`prefetch` in the
block takes them instead of starting its own (those it does not take are stopped
when the block ends).
"""

from __future__ import annotations

import contextlib
import contextvars
import gc
import importlib
import itertools
import json
import os
import pickle
import queue
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from pathlib import PurePath
from typing import IO, Any, Generic, TypeVar

__all__ = [
    "MAX_WORKERS",
    "MIN_BYTES",
    "WORKERS_ENV",
    "Job",
    "Prefetched",
    "prefetch",
    "standby",
    "workers_for",
]

T = TypeVar("T")

MIN_BYTES = 32 << 20
"""Total input below which the parses stay in process (a worker costs ~0.2 s to start)."""

MAX_WORKERS = 4
"""At most this many worker processes, whatever the CPU count."""

WORKERS_ENV = "REPROBUNDLE_PARSE_WORKERS"
"""A lower cap on the workers, set by the user: ``0`` starts none (every parse in process,
for a sandbox that forbids starting processes, or to compare); a value that is not a
whole number >= 0 is ignored."""

Job = tuple[Callable[..., Any], "tuple[Any, ...] | Callable[[], tuple[Any, ...]]", int]
"""(module-level function, its arguments or a function making them, the input's size in
bytes). Arguments made by a function are made when the job is started, by whoever runs
it, and let go when it is done: the inputs of jobs not started yet are not held (a
bundle's spilled members stay on disk until their turn)."""

_HEADER = 8  # a message's length, little-endian, before its pickle

_BOOT = (
    "import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
    "from bundler._internal.parallel_parse import _serve; _serve()"
)


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _interpreter() -> bool:
    """Whether ``sys.executable`` is a Python interpreter a worker can be started with (an
    application embedding Python or frozen into one file may name itself there)."""
    name = PurePath(sys.executable or "").name.lower()
    return name.startswith("python") and not getattr(sys, "frozen", False)


def _most_workers() -> int:
    """One per CPU but the caller's, at most :data:`MAX_WORKERS` and the user's cap; 0
    without an interpreter to start."""
    if not _interpreter():
        return 0
    # One CPU is the caller's, which parses too (the jobs no worker has taken when it
    # needs them). Until the workers wrote the carried files themselves, one per CPU was
    # faster; since, on 2 CPUs, one worker beats two: import 1.89 against 2.03 s and
    # replay 2.70 against 2.87 s of 1M requests (medians of 7, alternating; `bench/README.md`).
    n = min(_cpus() - 1, MAX_WORKERS)
    cap = os.environ.get(WORKERS_ENV, "").strip()
    if cap.isdigit():
        n = min(n, int(cap))
    return max(n, 0)


def workers_for(jobs: Sequence[Job]) -> int:
    """How many worker processes :func:`prefetch` starts for ``jobs``: one per CPU but the
    caller's, at most :data:`MAX_WORKERS` and one per job but the caller's; 0 (all in
    process) below two jobs, :data:`MIN_BYTES` in all, or two CPUs, or without an
    interpreter to start."""
    if len(jobs) < 2 or sum(size for _, _, size in jobs) < MIN_BYTES:
        return 0
    return min(_most_workers(), len(jobs) - 1)


def _send(pipe: IO[bytes], obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    pipe.write(len(data).to_bytes(_HEADER, "little"))
    pipe.write(data)
    pipe.flush()


def _receive(pipe: IO[bytes]) -> Any:
    """The next message, or raises EOFError when the other side has gone."""
    head = pipe.read(_HEADER)
    if len(head) != _HEADER:
        raise EOFError
    size = int.from_bytes(head, "little")
    data = pipe.read(size)
    if len(data) != size:
        raise EOFError
    return pickle.loads(data)  # noqa: S301 - from a worker this module started


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a job runs.

    A parsed document's containers (a vLLM result's 50,000 gap arrays) are walked by
    every collection that runs while it is alive; they hold no cycle, and each is freed
    by its reference count when the job ends. Pausing saved ~9 ms of a 148 ms parse
    (``run_stats`` of a 9.4 MB vLLM result). Whatever cycle a job does leave (an
    exception's traceback) is found by the next collection after it.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class _Thunk(Generic[T]):
    """One job's result when called: the worker's, or the job run here.

    A job is taken once, by a worker's feeding thread or by the caller (:meth:`take`):
    the caller runs a job no worker has taken yet itself, and while it waits for a
    worker it runs later jobs no worker has taken, keeping their outcome for their
    own call (so the caller is one of the parsers and never idles)."""

    def __init__(
        self,
        fn: Callable[..., T],
        args: tuple[Any, ...] | Callable[[], tuple[Any, ...]],
        lock: threading.Lock,
    ) -> None:
        self.fn, self._args = fn, args
        self.future: Future[tuple[bool, Any]] | None = None
        self.group: list[_Thunk[Any]] = []  # every job, in order
        self.index = 0  # this one's place in ``group``
        self._lock = lock
        self._taken = False
        self._here: tuple[bool, Any] | None = None  # (ok, value or exception) run here

    def args(self) -> tuple[Any, ...]:
        """The job's arguments (made now when a function makes them)."""
        return self._args() if callable(self._args) else self._args

    def run(self) -> T:
        """The job, run in this process."""
        with _collector_paused():
            return self.fn(*self.args())

    def take(self) -> bool:
        """Claim the job; False when a worker or the caller already has."""
        with self._lock:
            if self._taken:
                return False
            self._taken = True
            return True

    def _run_here(self) -> None:
        try:
            self._here = (True, self.run())
        except Exception as exc:  # raised again by this job's own call, in order
            self._here = (False, exc)

    def __call__(self) -> T:
        fut, self.future = self.future, None
        # Not run here while waiting for an earlier job, not free: a worker has it.
        if self._here is None and fut is not None and not self.take():
            while not fut.done():
                later = itertools.islice(self.group, self.index + 1, None)
                other = next((t for t in later if t.future is not None and t.take()), None)
                if other is None:
                    break
                other._run_here()
            ok, value = fut.result()
            if ok:
                return value  # type: ignore[no-any-return]
            return self.run()  # failed in the worker: the serial error, here
        here, self._here = self._here, None
        if here is None:
            return self.run()
        if here[0]:
            return here[1]  # type: ignore[no-any-return]
        raise here[1]


def _preload(*modules: str) -> None:
    """A worker's first message from :func:`standby`: import the parser's modules now."""
    for name in modules:
        importlib.import_module(name)


class _Worker:
    """One worker process and the thread in this process that feeds it jobs."""

    def __init__(self, preload: Sequence[str] = ()) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-c", _BOOT, json.dumps(sys.path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.thread: threading.Thread | None = None
        self._answers_due = 0  # answers to preloads, read before the first job's
        self._alive = True
        if preload:
            try:
                assert self.proc.stdin is not None
                _send(self.proc.stdin, (_preload, tuple(preload)))
                self._answers_due = 1
            except OSError:  # died at once: its jobs run in the caller
                self._alive = False

    def feed(self, todo: queue.SimpleQueue[_Thunk[Any] | None]) -> None:
        """Start the thread that hands this worker jobs from ``todo`` until a stop mark."""
        self.thread = threading.Thread(target=self._feed, args=(todo,), daemon=True)
        self.thread.start()

    def _feed(self, todo: queue.SimpleQueue[_Thunk[Any] | None]) -> None:
        stdin, stdout = self.proc.stdin, self.proc.stdout
        assert stdin is not None
        assert stdout is not None
        alive = self._alive
        while alive and self._answers_due:
            try:
                _receive(stdout)
                self._answers_due -= 1
            except Exception:  # died or failed while importing: its jobs run here
                alive = False
        while (job := todo.get()) is not None:
            fut = job.future
            if fut is None or not job.take():
                continue
            result: tuple[bool, Any] = (False, None)
            if alive:
                try:
                    _send(stdin, (job.fn, job.args()))
                    result = _receive(stdout)
                except Exception:  # died, or answered what does not unpickle: run here
                    alive, result = False, (False, None)
            fut.set_result(result)

    def stop(self) -> None:
        """Close the worker's input (it exits), wait for it, kill it if it lingers."""
        if self.thread is not None:
            self.thread.join()
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


class Prefetched(Generic[T]):
    """The thunks of :func:`prefetch`, in job order; a context manager that stops the
    workers (jobs no thunk asked for are dropped) when left."""

    def __init__(self, thunks: list[_Thunk[T]], workers: list[_Worker]) -> None:
        self.thunks = thunks
        self.workers = len(workers)
        """Worker processes started (0: every job runs in the caller's process)."""
        self._workers = workers

    def __enter__(self) -> Prefetched[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        for t in self.thunks:
            # What no one asked for: a worker thread skips it, a late call runs it here.
            if t.take() and t.future is not None:
                t.future.set_result((False, None))
        for w in self._workers:
            w.stop()
        self._workers = []


def prefetch(jobs: Sequence[Job]) -> Prefetched[Any]:
    """Start ``jobs`` in worker processes where that pays (:func:`workers_for`); the
    thunks return each job's result (or raise its error) in the caller's process.

    Use as a context manager so the workers stop whatever the caller raises.
    """
    lock = threading.Lock()
    thunks: list[_Thunk[Any]] = [_Thunk(fn, args, lock) for fn, args, _ in jobs]
    for i, t in enumerate(thunks):
        t.group, t.index = thunks, i
    n = workers_for(jobs)
    if n == 0:
        return Prefetched(thunks, [])
    todo: queue.SimpleQueue[_Thunk[Any] | None] = queue.SimpleQueue()
    for t in thunks:
        t.future = Future()
        todo.put(t)
    for _ in range(n):
        todo.put(None)  # one stop mark per worker, after every job
    spare = _STANDBY.get()
    workers: list[_Worker] = spare[:n] if spare is not None else []
    if spare is not None:
        del spare[:n]
    try:
        while len(workers) < n:
            workers.append(_Worker())
    except OSError:
        pass  # fewer workers (or none): what they do not take is run here by the thunks
    for w in workers:
        w.feed(todo)
    if not workers:
        for t in thunks:
            t.future = None
    return Prefetched(thunks, workers)


_STANDBY: contextvars.ContextVar[list[_Worker] | None] = contextvars.ContextVar(
    "reprobundle_parse_standby", default=None
)


@contextlib.contextmanager
def standby(expected_bytes: int, preload: Sequence[str] = ()) -> Iterator[int]:
    """Start the workers a :func:`prefetch` later in this block will want, now, and have
    each import ``preload`` (module names) while the caller does other work.

    Started only when ``expected_bytes`` (what the caller expects to parse, or a bound
    on it) reaches :data:`MIN_BYTES`, and as many as :func:`workers_for` would start at
    most. Yields how many were started. Workers no :func:`prefetch` took are stopped
    when the block ends, whatever it raises.
    """
    n = _most_workers() if expected_bytes >= MIN_BYTES else 0
    spare: list[_Worker] = []
    with contextlib.suppress(OSError):
        for _ in range(n):
            spare.append(_Worker(preload))
    token = _STANDBY.set(spare)
    try:
        yield len(spare)
    finally:
        _STANDBY.reset(token)
        for w in spare:
            w.stop()


def _serve() -> None:
    """The worker: run each (function, arguments) received, answer (ok, result)."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # a stray print must not corrupt the answers
    sys.stdout = sys.stderr
    inp = sys.stdin.buffer
    while True:
        try:
            fn, args = _receive(inp)
        except EOFError:
            return
        try:
            with _collector_paused():
                answer: tuple[bool, Any] = (True, fn(*args))
        except Exception:  # re-raised by the serial run in the caller
            answer = (False, None)
        try:
            _send(out, answer)
        except (pickle.PickleError, TypeError, AttributeError):
            _send(out, (False, None))
