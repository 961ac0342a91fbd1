"""Signed-but-hostile bundles: every reading command ends cleanly and confirms nothing impossible.

Issue 19. Each case is a bundle that VERIFIES under the trusted author key but
holds hostile content (``tests/fuzz/hostile.py``): impossible numbers,
duplicated or dangling ids, units that do not fit, hostile names in every
author string, rerun plans whose inputs point out of ``--inputs``. The
properties (``tests/fuzz/properties.py`` ``check_hostile``): ``replay`` (plain,
``-v``, ``--json``), ``report`` (Markdown and HTML), ``plan check``,
``inspect`` and ``rerun --dry-run`` exit with a documented code and never a
traceback; no replay confirms impossible data; no raw control or bidi
character reaches the output; the Markdown holds no live mention, autolink or
closing keyword from author text; nothing outside the outputs is read or
written (a sentinel folder beside the working folder, compared before and
after). Two cases also run their plan against the loopback reference server.

Bounded for CI (profile ``fuzz-ci``, derandomized, no shrinking: the first
failing case of a family is reported as drawn): a few cases per family, the
judging commands in this process. ``bench/fuzz_long.py --hostile-every`` runs the
same families with every command as a child under ``strace``, with its peak RSS.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from hypothesis import Phase, given, settings

from tests.fuzz.hostile import (
    CLOSING,
    FAMILIES,
    MENTION,
    URL,
    HostileBase,
    HostileCase,
    input_case,
    make_data_base,
    make_rerun_base,
    name_case,
    reseal,
)
from tests.fuzz.profiles import FUZZ_CI
from tests.fuzz.properties import check_hostile, live_markdown, prepare_sentinel, raw_unsafe

CASES = {"names": 5, "rerun-names": 3, "rerun-input": 3, "plan-counts": 3, "plan-positions": 3}
DEFAULT_CASES = 2


@dataclass(frozen=True)
class Env:
    """Where the cases run, the two honest bases, and the author's public key."""

    root: Path
    data: HostileBase
    rerun: HostileBase
    pub: Path


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Env:
    """One root with ``sentinel/`` beside the per-case ``work/`` folder."""
    root = tmp_path_factory.mktemp("hostile")
    sentinel = prepare_sentinel(root)
    data, rerun = make_data_base(sentinel), make_rerun_base(sentinel)
    pub = root / "author.pub"
    pub.write_bytes(
        data.author.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return Env(root, data, rerun, pub)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_signed_but_hostile_bundles_satisfy_every_property(family: str, env: Env) -> None:
    kind, strategy = FAMILIES[family]
    base = env.data if kind == "data" else env.rerun

    @settings(
        FUZZ_CI,
        max_examples=CASES.get(family, DEFAULT_CASES),
        phases=[Phase.explicit, Phase.generate],
    )
    @given(case=strategy(base))
    def run(case: HostileCase) -> None:
        out = check_hostile(case, env.root, env.pub)
        assert not out.failed, out.report()

    run()


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda b: name_case(b, "server", "../../../../sentinel/pwn", rerun=True),
                     id="server-climbs-out-of-logs"),
        pytest.param(lambda b: input_case(b, "symlink"), id="input-symlink-out-of-inputs"),
    ],
)  # fmt: skip
def test_hostile_plans_run_against_the_reference_server(make: object, env: Env) -> None:
    """The rerun itself (``--launch``, four servers, at most 60 requests each), not a dry run."""
    assert callable(make)
    out = check_hostile(make(env.rerun), env.root, env.pub, live_rerun=True)
    assert not out.failed, out.report()


# --- the properties are not vacuous ------------------------------------------------------


def test_honest_bundles_pass_and_would_be_caught_if_called_impossible(env: Env) -> None:
    """The untouched bases replay to exit 0 and break no property; the same bytes marked
    impossible are flagged, so an impossible case that exits 0 cannot pass unseen."""
    for base in (env.data, env.rerun):
        data = reseal(base, base.edit())
        honest = HostileCase("honest", "", False, data, rerun=base is env.rerun)
        out = check_hostile(honest, env.root, env.pub)
        assert not out.failed, out.report()
        assert out.codes["replay"] == 0
        flagged = check_hostile(
            HostileCase("honest", "", True, data, rerun=honest.rerun), env.root, env.pub
        )
        assert "[replay] exit 0 (CONFIRMED) on impossible data" in flagged.violations


def test_the_detectors_see_what_they_look_for() -> None:
    """Raw characters and live Markdown tokens are found; escaped or code-spanned ones are not."""
    assert raw_unsafe("a\nb\tc") == ["U+0009"]
    assert raw_unsafe("\x1b[2K\u202e\u2028\x85") == ["U+001B", "U+0085", "U+2028", "U+202E"]
    assert raw_unsafe("\\x1b \\u202e é 中") == []
    assert live_markdown(f"by {MENTION} and {URL}, {CLOSING}") == [
        f"live mention {MENTION}",
        f"bare autolink {URL}",
        f"closing keyword {CLOSING!r}",
    ]
    # backslash escapes and entities do not stop GitHub from linking once rendered
    assert live_markdown("by \\@fuzz-octocat") == [f"live mention {MENTION}"]
    assert live_markdown("by &#64;fuzz-octocat") == [f"live mention {MENTION}"]
    # an author backtick closes the renderer's code span: the mention after it is live
    assert live_markdown(f"`x` {MENTION} `y`") == [f"live mention {MENTION}"]
    assert live_markdown(f"``x` {MENTION} `y``") == []
    assert live_markdown(f"`{URL}` and @\u200bfuzz-octocat") == []
