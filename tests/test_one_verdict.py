"""One verdict, computed once: every view (JSON, text, Markdown, HTML) and the process exit agree.

Each fixture is a campaign whose outcome is known by construction (see the
docstrings of ``tests/replay_factory.py``; the honest claims are derived there
with ``statistics``/``fractions``, sharing no code with ``replay/``). The
expected outcome of each fixture is stated here from that construction and the
precedence rule of ``specs/replay-report.md`` (integrity > contradicted/failed >
unverifiable > not evidenced > confirmed), never read back from the code.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bundler.lint_text import find_closing_references
from bundler.seal import seal_campaign
from reprobundle.cli.replay_cmd import replay_command
from reprobundle.cli.report_cmd import report_command
from tests.campaign_builder import mark_rerun_of
from tests.conftest import make_keys
from tests.replay_factory import Files, Server, Spec, build, latency_claims, seed_like

ROOT = Path(__file__).resolve().parents[1]
MINI = ROOT / "samples" / "media-mini"
_OUTCOME = re.compile(
    r"(CONFIRMED|CONTRADICTED|UNVERIFIED|NOT EVIDENCED|INTEGRITY FAILED) \(exit (\d)\)"
)


@dataclass(frozen=True)
class Case:
    """A sealed bundle, the extra replay arguments, and the verdict its construction implies."""

    bundle: Path
    pub: Path
    extra: tuple[str, ...]
    outcome: str
    exit_code: int


def _keys(tmp: Path) -> tuple[Ed25519PrivateKey, Path]:
    keys = make_keys(tmp)
    return keys.private, keys.public_path


def _bare_spec() -> Spec:
    """Seed-like latencies, but no gate, no comparison, no worker exit, no telemetry."""
    spec = seed_like()
    for s in spec.servers:
        s.exit_s = []
        s.hbm = []
        s.quality = []
    spec.comparisons = []
    spec.gates = []
    return spec


def _slower_candidate() -> Spec:
    """The candidate arm as slow as the baseline: a rerun of it cannot reproduce 3.77×."""
    spec = seed_like()
    spec.servers = [
        Server(
            s.name,
            s.arm,
            [396.10, 396.30, 396.50] if s.arm == "candidate" else s.measured,
            quality=s.quality,
            exit_s=s.exit_s,
            hbm=s.hbm,
        )
        for s in spec.servers
    ]
    return spec


def _contradicted() -> Files:
    files = build(seed_like())
    # Warmups (520, 450 s) counted: the arm mean becomes 438.36 (test_replay_defects.py
    # derives it by hand); the honest value is 407.27.
    files.claim("mean-baseline")["value"] = "438.36"
    return files


def _unattested() -> Files:
    spec = seed_like()
    spec.scorer = False  # LPIPS gate checks can never pass without a scorer identity
    return build(spec)


_BUILDERS: dict[str, tuple[Callable[[], Files], str, int]] = {
    "honest": (lambda: build(seed_like()), "CONFIRMED", 0),
    "contradicted": (_contradicted, "CONTRADICTED", 4),
    "unattested": (_unattested, "UNVERIFIED", 5),
    # Nothing but latency: the latency claims hold, the rest is listed as not evidenced.
    "bare": (lambda: build(_bare_spec(), latency_claims(_bare_spec())), "CONFIRMED", 0),
    "no-claims": (lambda: build(seed_like(), []), "NOT EVIDENCED", 5),
}


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Ed25519PrivateKey, Path, Path]:
    tmp = tmp_path_factory.mktemp("keys")
    priv, pub = _keys(tmp)
    return priv, pub, tmp


def _case(name: str, keyed: tuple[Ed25519PrivateKey, Path, Path]) -> Case:
    priv, pub, tmp = keyed
    if name in _BUILDERS:
        make, outcome, code = _BUILDERS[name]
        return Case(make().seal(tmp, priv, name), pub, (), outcome, code)
    if name in ("against-reproduced", "against-not-reproduced"):
        # An honest pair: a rerun campaign naming the sealed bundle's SHA-256 (issue 19).
        sealed = build(seed_like()).seal(tmp, priv, f"sealed-{name}")
        reproduced = name == "against-reproduced"
        files = build(seed_like() if reproduced else _slower_candidate())
        mark_rerun_of(files.campaign, sealed)
        rerun = files.seal(tmp, priv, f"rerun-{name}")
        outcome, code = ("CONFIRMED", 0) if reproduced else ("CONTRADICTED", 4)
        return Case(rerun, pub, ("--against", str(sealed)), outcome, code)
    if name == "media-fail":
        pytest.importorskip("av", reason="media replay needs PyAV")
        out = tmp / "mini.bundle"
        if not out.exists():
            seal_campaign(MINI, out, keys=[priv], force=True)
        # samples/media-mini/README.md: cmp-02's candidate audio is truncated by design,
        # so its coverage check fails: the media contradict the bundle.
        return Case(out, pub, ("--media", str(MINI / "media")), "CONTRADICTED", 4)
    raise AssertionError(name)


CASES = [*_BUILDERS, "against-reproduced", "against-not-reproduced", "media-fail"]


def _outcomes(text: str) -> set[tuple[str, int]]:
    return {(m.group(1), int(m.group(2))) for m in _OUTCOME.finditer(text)}


@pytest.mark.parametrize("name", CASES)
def test_every_view_and_the_exit_code_say_the_same(
    name: str, keyed: tuple[Ed25519PrivateKey, Path, Path], tmp_path: Path
) -> None:
    case = _case(name, keyed)
    run = CliRunner().invoke
    base = [str(case.bundle), "--key", str(case.pub), *case.extra, "--no-progress"]
    want = (case.outcome, case.exit_code)

    res = run(replay_command, [*base, "--json"])
    doc = json.loads(res.output)
    assert (doc["outcome"], doc["exit_code"], res.exit_code) == (*want, case.exit_code), res.output

    md = tmp_path / "r.md"
    res = run(replay_command, [*base, "--markdown", str(md)])
    assert res.exit_code == case.exit_code
    lines = res.output.splitlines()
    assert lines[1].strip().startswith(f"{case.outcome} (exit {case.exit_code})"), lines[:3]
    assert _outcomes(res.output) == {want}
    assert _outcomes(md.read_text(encoding="utf-8")) == {want}

    # The HTML page draws charts: without the ``report`` extra (matplotlib) only the
    # views above are checked.
    pytest.importorskip("matplotlib", reason="the HTML report needs the report extra")
    html = tmp_path / "r.html"
    res = run(report_command, [*base, "-o", str(html)])
    assert res.exit_code == case.exit_code, res.output
    assert _outcomes(html.read_text(encoding="utf-8")) == {want}
    assert _outcomes(res.output) == {want}
    if case.outcome != "CONFIRMED":
        # A verdict that is not a pass is never drawn in the "good" style.
        assert f'<span class="good">{case.outcome}' not in html.read_text(encoding="utf-8")


def test_missing_evidence_is_not_evidenced_never_green(
    keyed: tuple[Ed25519PrivateKey, Path, Path], tmp_path: Path
) -> None:
    case = _case("bare", keyed)
    run = CliRunner().invoke
    base = [str(case.bundle), "--key", str(case.pub), "--no-progress"]
    doc = json.loads(run(replay_command, [*base, "--json"]).output)
    assert doc["evidenced"]["quality"] is False
    assert doc["evidenced"]["lifecycle"] is False
    assert doc["evidenced"]["telemetry"] is False
    listed = " ".join(doc["not_evidenced"])
    for what in ("quality", "worker exits", "telemetry"):
        assert what in listed
    text = run(replay_command, base).output
    assert "not evidenced:" in text.split("\n\n")[0]  # in the headline
    assert "HBM change - %" not in text
    assert "0/0" not in text
    pytest.importorskip("matplotlib", reason="the HTML report needs the report extra")
    html = tmp_path / "r.html"
    run(report_command, [*base, "-o", str(html)])
    page = html.read_text(encoding="utf-8")
    assert "0 / 0" not in page
    assert "0/0 pass" not in page
    # The tiles say "not evidenced" in the neutral style (no good/bad class).
    assert page.count('<div class="card"><div class="v">not evidenced</div>') >= 2, page[:3000]


def test_markdown_from_replay_neutralises_author_text(
    keyed: tuple[Ed25519PrivateKey, Path, Path], tmp_path: Path
) -> None:
    priv, pub, tmp = keyed
    files = build(seed_like())
    files.claim("mean-baseline")["text"] = "fixes #123, thanks @someone"
    bundle = files.seal(tmp, priv, "closing")
    md = tmp_path / "r.md"
    res = CliRunner().invoke(
        replay_command, [str(bundle), "--key", str(pub), "--markdown", str(md)]
    )
    assert res.exit_code == 0, res.output
    body = md.read_text(encoding="utf-8")
    assert "123" in body  # the text is there ...
    assert find_closing_references(body) == []  # ... but cannot close an issue
    assert "@someone" not in body.replace("`@someone`", "")  # nor ping anyone
