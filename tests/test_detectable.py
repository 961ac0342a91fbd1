"""The smallest difference of arm means a campaign can resolve (issue 25).

Expected values come from scipy.stats' t distribution and the Welch–Satterthwaite
formula written out here, and from one case by hand; never from
``bundler.campaign.detectable``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from scipy import stats

from bundler.campaign.detectable import ServerSpread, detectable_difference
from bundler.campaign.plan_check import check_plan
from bundler.format.plan_model import Plan
from bundler.format.trust import Trust
from bundler.seal import seal_campaign
from replay.api import replay_bundle
from replay.pilot import pilot_spread
from replay.report.json_view import result_to_dict
from replay.report.text import render_text
from reprobundle.cli.plan_cmd import plan_group

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
PLAN_5S = SAMPLES / "h3-ref2va-5s" / "plans" / "final-5s.json"

# By hand, from samples/h3-ref2va-5s (accepted attempt final-2, measured requests, status ok):
#   baseline-1 mean = (394.62 + 398.05 + 396.23) / 3 = 1188.90 / 3 = 396.30 s
#   baseline-2 mean = (417.06 + 419.51 + 418.15) / 3 = 1254.72 / 3 = 418.24 s
#   SD of the two server means (n - 1 = 1): |418.24 - 396.30| / sqrt(2) = 21.94 / sqrt(2)
#     = 15.5139 s
# The plan has 2 servers per arm, so with equal spread
#   df = (1/2 + 1/2)^2 / ((1/2)^2 / 1 + (1/2)^2 / 1) = 1 / 0.5 = 2
# For 2 degrees of freedom the t quantile has a closed form, t_p = (2p - 1) / sqrt(2 p (1 - p)):
#   p = 0.975: t = 0.95 / sqrt(2 x 0.975 x 0.025) = 0.95 / sqrt(0.04875) = 4.30265
# Half-width = t x SD x sqrt(1/2 + 1/2) = 4.30265 x 15.5139 x 1
#   = 0.95 x 21.94 / sqrt(0.04875 x 2) = 20.843 / sqrt(0.0975) = 20.843 / 0.312250 = 66.751 s
HAND_SD = 21.94 / math.sqrt(2)
HAND_HALF_WIDTH = 0.95 * 21.94 / math.sqrt(0.0975)


def scipy_half_width(sd: float, n1: int, n2: int, level: float) -> tuple[float, float]:
    """Welch interval half-width and df for variances sd^2/n1, sd^2/n2 (scipy's t quantile)."""
    v1, v2 = sd * sd / n1, sd * sd / n2
    df = (v1 + v2) ** 2 / (v1 * v1 / (n1 - 1) + v2 * v2 / (n2 - 1))
    return float(stats.t.ppf((1 + level) / 2, df)) * math.sqrt(v1 + v2), df


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    key = Ed25519PrivateKey.generate()
    d = tmp_path_factory.mktemp("detectable")
    out = {}
    for name in ("h3-ref2va-5s", "h3-ref2va-kv-pilot"):
        out[name] = d / f"{name}.bundle"
        seal_campaign(SAMPLES / name, out[name], keys=[key])
    return out


def test_hand_case_sample_baseline_as_pilot(bundles: dict[str, Path]) -> None:
    spread = pilot_spread(bundles["h3-ref2va-5s"])
    assert spread.sd_s == pytest.approx(HAND_SD, rel=1e-12)
    assert spread.servers == 2
    plan = json.loads(PLAN_5S.read_text(encoding="utf-8"))
    (d,) = check_plan(Plan.from_dict(plan, "final-5s.json"), spread=spread).detectable or ()
    assert (d.baseline, d.candidate, d.n_baseline, d.n_candidate) == ("baseline", "candidate", 2, 2)
    assert d.df == pytest.approx(2.0)
    assert d.t == pytest.approx(0.95 / math.sqrt(0.04875), rel=1e-9)
    assert d.half_width_s == pytest.approx(HAND_HALF_WIDTH, rel=1e-9)
    assert round(HAND_HALF_WIDTH, 2) == 66.75
    assert "with 2 servers per arm" in d.statement
    assert "a difference under 66.75 s cannot be distinguished from server-to-server variation" in (
        d.statement
    )
    assert "assuming the same spread in both arms" in d.statement


@pytest.mark.parametrize(
    ("sd", "n1", "n2", "level"),
    [
        (15.5, 2, 2, 0.95),
        (15.5, 2, 3, 0.95),
        (3.0, 5, 2, 0.90),
        (0.42, 8, 8, 0.99),
        (120.0, 3, 7, 0.95),
    ],
)
def test_half_width_matches_scipy(sd: float, n1: int, n2: int, level: float) -> None:
    want, df = scipy_half_width(sd, n1, n2, level)
    got = detectable_difference(ServerSpread(sd, 4, "a pilot"), n1, n2, level=level)
    assert got.df == pytest.approx(df, rel=1e-12)
    assert got.half_width_s == pytest.approx(want, rel=1e-9)


def test_one_server_per_arm_states_nothing() -> None:
    got = detectable_difference(ServerSpread(10.0, 4, "a pilot"), 1, 3)
    assert got.half_width_s is None
    assert "no detectable difference stated" in got.statement
    assert "at least two servers per arm" in got.statement


def test_kv_pilot_has_one_server_per_arm(bundles: dict[str, Path]) -> None:
    # The seed's single-pair pilot ran one server per arm: it cannot estimate the spread.
    res = CliRunner().invoke(
        plan_group, ["check", str(PLAN_5S), "--pilot", str(bundles["h3-ref2va-kv-pilot"])]
    )
    assert res.exit_code == 0, res.output
    assert "baseline arm kv2 (attempt pilot-1) has fewer than two servers" in res.output
    assert "spread cannot be estimated" in res.output
    doc = json.loads(
        CliRunner()
        .invoke(
            plan_group,
            ["check", str(PLAN_5S), "--pilot", str(bundles["h3-ref2va-kv-pilot"]), "--json"],
        )
        .output
    )
    (d,) = doc["detectable"]
    assert d["half_width_s"] is None
    assert d["sd_s"] is None


def test_cli_text_and_json_state_the_figure(bundles: dict[str, Path]) -> None:
    pilot = str(bundles["h3-ref2va-5s"])
    text = CliRunner().invoke(plan_group, ["check", str(PLAN_5S), "--pilot", pilot])
    assert text.exit_code == 0, text.output
    assert "a difference under 66.75 s cannot be distinguished" in text.output
    js = CliRunner().invoke(plan_group, ["check", str(PLAN_5S), "--pilot", pilot, "--json"])
    doc = json.loads(js.output)
    (d,) = doc["detectable"]
    assert d["half_width_s"] == pytest.approx(HAND_HALF_WIDTH, rel=1e-9)
    assert d["n_baseline"] == d["n_candidate"] == 2
    # Without a pilot nothing is claimed, and the findings stay what they were.
    plain = json.loads(CliRunner().invoke(plan_group, ["check", str(PLAN_5S), "--json"]).output)
    assert plain["detectable"] is None
    assert plain["findings"] == doc["findings"]


def test_tampered_pilot_is_refused(bundles: dict[str, Path], tmp_path: Path) -> None:
    bad = tmp_path / "bad.bundle"
    data = bytearray(bundles["h3-ref2va-5s"].read_bytes())
    data[len(data) // 2] ^= 0x01
    bad.write_bytes(bytes(data))
    res = CliRunner().invoke(plan_group, ["check", str(PLAN_5S), "--pilot", str(bad)])
    assert res.exit_code in (1, 3), res.output
    assert "Traceback" not in res.output
    assert "detectable" not in res.output


def test_replay_states_it_from_the_baseline_arm(bundles: dict[str, Path]) -> None:
    r = replay_bundle(bundles["h3-ref2va-5s"], trust=Trust.allow_unsigned())
    (pair,) = r.latency.pairs
    assert pair.detectable.half_width_s == pytest.approx(HAND_HALF_WIDTH, rel=1e-9)
    assert pair.detectable.sd_s == pytest.approx(HAND_SD, rel=1e-12)
    assert "the baseline arm baseline" in pair.detectable.spread_source
    doc = result_to_dict(r)
    (jp,) = doc["latency"]["pairs"]
    assert jp["detectable"]["half_width_s"] == pytest.approx(HAND_HALF_WIDTH, rel=1e-9)
    assert "a difference under 66.75 s cannot be distinguished" in render_text(r, verbose=True)


@pytest.mark.parametrize("fmt", ["html", "md"])
def test_report_states_it(bundles: dict[str, Path], fmt: str) -> None:
    from replay.report.html.render import render_bundle

    text = render_bundle(bundles["h3-ref2va-5s"], fmt, trust=Trust.allow_unsigned()).text
    assert "a difference under 66.75 s cannot be distinguished" in text
