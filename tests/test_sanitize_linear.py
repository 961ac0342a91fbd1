"""Every scrubbing rule is linear in its input (issue 12, defect 3: ReDoS).

Each rule of ``bundler.campaign.sanitize.RULES`` is timed alone on adversarial inputs of 1 MiB
and 2 MiB: shapes that make a backtracking regex retry from every position (``1.2.3.``
repeated, ``a.a.a.``, a rule's own prefix repeated, long runs of a rule's class with no
terminator). The median over a few interleaved runs of t(2 MiB) / t(1 MiB) must stay
below 3 (a linear rule gives ~2, a quadratic one ~4). The previous host-name rule took
2.3 / 8.9 / 37 s on 12 / 24 / 48 KB of ``1.2.3.`` and would take hours on 1 MiB, so the
timing runs in a child process that is killed after a budget: a regression fails
quickly, naming the rule and the shape, instead of hanging the suite.
"""

from __future__ import annotations

import gc
import multiprocessing as mp
import queue
import statistics
import time
from collections.abc import Callable

import pytest

from bundler.campaign.sanitize import RULES, Sanitizer

MIB = 1 << 20
RUNS = 3
MAX_RATIO = 3.0
# Below this, t(2 MiB) is dominated by noise; a quadratic rule is seconds at 1 MiB.
NOISE_FLOOR_S = 0.03
# Per shape, t(1 MiB) above this already means super-linear work (ours take < 0.3 s).
SHAPE_BUDGET_S = 3.0
# Generous: a busy CI machine must not fail a linear rule; a quadratic one needs hours.
RULE_BUDGET_S = 90.0
RETRIES = 3


def _rep(unit: str, n: int) -> str:
    return (unit * (n // len(unit) + 1))[:n]


# Each shape: (name, text of n characters). Common shapes first, then each rule's own.
Shape = tuple[str, Callable[[int], str]]
COMMON: list[Shape] = [
    ("1.2.3. repeated", lambda n: _rep("1.2.3.", n)),
    ("a.a.a. repeated", lambda n: _rep("a.a.a.", n)),
]
SHAPES: dict[str, list[Shape]] = {
    "private_key": [
        ("BEGIN header repeated, no END", lambda n: _rep("-----BEGIN PRIVATE KEY-----", n)),
        ("one BEGIN, endless body", lambda n: "-----BEGIN RSA PRIVATE KEY-----" + "A" * n),
    ],
    "bearer_token": [
        ("'Bearer ' repeated", lambda n: _rep("Bearer ", n)),
        ("Bearer then only blanks", lambda n: "Bearer" + " " * n),
    ],
    "basic_auth": [
        ("Basic, endless base64, bad padding", lambda n: "Basic " + "A" * n + "==="),
        ("'Basic AAAAAAA===' repeated", lambda n: _rep("Basic AAAAAAA===", n)),
    ],
    "authorization": [
        ("'Authorization: ' repeated", lambda n: _rep("Authorization: ", n)),
        ("header then only blanks", lambda n: "Authorization:" + " " * n),
        ("'authorization=\"' repeated", lambda n: _rep('authorization="', n)),
    ],
    "url_credentials": [
        ("'a://' repeated", lambda n: _rep("a://", n)),
        ("user then endless password, no @", lambda n: "a://b:" + "c" * n),
        ("endless scheme letters", lambda n: "a" * n + "://"),
    ],
    "api_key": [
        ("'token' repeated, no separator", lambda n: _rep("token", n)),
        ("open quote, never closed", lambda n: 'password:"' + "a" * n),
        ("'token:\"' repeated", lambda n: _rep('token:"', n)),
        ("endless identifier ending in token", lambda n: _rep("x_", n) + "token"),
        ("escaped JSON, never closed", lambda n: _rep('\\"password\\": \\"a', n)),
    ],
    "key_literal": [
        ("'sk-' repeated", lambda n: _rep("sk-", n)),
        ("JWT head, endless, no dot", lambda n: "eyJ" + "a" * n),
        ("'eyJaaaa=' repeated", lambda n: _rep("eyJaaaa=", n)),
        ("'AKIA' repeated", lambda n: _rep("AKIA", n)),
    ],
    "home_path": [
        ("'/home/' repeated", lambda n: _rep("/home/", n)),
        ("'C:\\Users\\' repeated", lambda n: _rep("C:\\Users\\", n)),
        ("'/root' repeated", lambda n: _rep("/root", n)),
    ],
    "ipv4": [
        ("'255.255.255.255.' repeated", lambda n: _rep("255.255.255.255.", n)),
        ("digits only", lambda n: "9" * n),
    ],
    "ipv6": [
        ("colons only", lambda n: ":" * n),
        ("'ffff:' repeated", lambda n: _rep("ffff:", n)),
        ("'1::' repeated", lambda n: _rep("1::", n)),
    ],
    "hostname": [
        ("labels then a suffix at the very end", lambda n: _rep("a.", n) + "com"),
        ("'a.com.' repeated", lambda n: _rep("a.com.", n)),
        ("dots only", lambda n: "." * n),
        ("listed name repeated", lambda n: _rep("node7", n)),
        ("'a-' repeated", lambda n: _rep("a-", n)),
    ],
}


def _time(step: Callable[[str], object], text: str) -> float:
    t = time.perf_counter()
    step(text)
    return time.perf_counter() - t


def measure(step: Callable[[str], object], make: Callable[[int], str]) -> tuple[float, float]:
    """Median seconds of ``step`` on 1 MiB and 2 MiB of ``make``, runs interleaved."""
    small, large = make(MIB), make(2 * MIB)
    t1: list[float] = []
    t2: list[float] = []
    gc.collect()
    gc.disable()
    try:
        for _ in range(RUNS):
            t1.append(_time(step, small))
            if t1[-1] > SHAPE_BUDGET_S:
                return t1[-1], float("inf")
            t2.append(_time(step, large))
    finally:
        gc.enable()
    return statistics.median(t1), statistics.median(t2)


def _child(rule: str, out: mp.Queue[tuple[str, float, float]]) -> None:
    san = Sanitizer(["node7", "gpu-box"], include_local_hostname=False)

    def step(text: str) -> str:
        return san.apply_rule(rule, text)

    for name, make in [*COMMON, *SHAPES[rule]]:
        t1, t2 = measure(step, make)
        # A loaded machine skews single measurements; a super-linear rule fails every retry
        # (its ratio is ~4 each time, and its 1 MiB time is seconds, not milliseconds).
        for _ in range(RETRIES):
            if t1 > SHAPE_BUDGET_S or t2 <= NOISE_FLOOR_S or t2 / t1 < MAX_RATIO:
                break
            t1, t2 = measure(step, make)
        out.put((name, t1, t2))


def _context() -> mp.context.DefaultContext:
    # fork: the child starts in milliseconds and needs no re-import; spawn elsewhere.
    method = "fork" if "fork" in mp.get_all_start_methods() else "spawn"
    ctx: mp.context.DefaultContext = mp.get_context(method)  # type: ignore[assignment]
    return ctx


def test_every_rule_has_adversarial_shapes() -> None:
    assert set(SHAPES) == set(RULES)


@pytest.mark.parametrize("rule", RULES)
def test_rule_is_linear_on_adversarial_megabytes(rule: str) -> None:
    ctx = _context()
    results: mp.Queue[tuple[str, float, float]] = ctx.Queue()
    proc = ctx.Process(target=_child, args=(rule, results), daemon=True)
    shapes = [name for name, _ in [*COMMON, *SHAPES[rule]]]
    deadline = time.monotonic() + RULE_BUDGET_S
    proc.start()
    got: dict[str, tuple[float, float]] = {}
    try:
        for name in shapes:
            try:
                shape, t1, t2 = results.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"{rule}: no result for shape {name!r} within {RULE_BUDGET_S} s")
            got[shape] = (t1, t2)
    finally:
        proc.kill()
        proc.join()
    slow = {
        name: f"{t1 * 1000:.1f} ms -> {t2 * 1000:.1f} ms (x{t2 / t1:.2f})"
        for name, (t1, t2) in got.items()
        if t1 > SHAPE_BUDGET_S or (t2 > NOISE_FLOOR_S and t2 / t1 >= MAX_RATIO)
    }
    assert not slow, f"{rule} is not linear on: {slow}"
