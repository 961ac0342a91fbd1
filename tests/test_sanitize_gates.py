"""The sanitizer's per-rule RE2 gates: they may skip a rule only where it could not match.

A gate is searched (RE2, in C) before its rule runs on a long ASCII string, and one
pass of all gates picks the lines of a many-line file that go through the rules. Both
are only an acceleration: the output, the counts and the findings must be those of
the rules run everywhere. Each check below compares against that ungated run
(``_GATE_MIN`` and ``_SCAN_VECTOR_MIN`` raised so that nothing is gated), or checks a
gate directly against its rule's effect.
"""

from __future__ import annotations

import base64

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bundler.campaign import sanitize
from bundler.campaign.sanitize import RULES, Sanitizer
from bundler.campaign.sanitize_rules import RULE_RE2

BASIC = base64.b64encode(b"carol:hunter2").decode()

# Pieces each rule matches, and pieces that come close (to find a gate narrower than
# its rule), glued at random; all ASCII, as the gates are used on ASCII text only.
FRAGMENTS = [
    *("10.0.0.7", "010.1.2.3", "1.2.3.", "0.0234", "1e-05", ", ", "[", "]", "{", "}"),
    *(".", ":", "::", "fe80", "1ff", "/home/", "/Users/", "/root", "C:\\Users\\", "bob"),
    *(" ", "\t", "\n", "token", "Token", "secret", "passwd", "password", "pwd", "key"),
    *("credentials", "passphrase", "=", ":=", '"', "'", "\\", "Bearer ", "BASIC\t"),
    *(BASIC, "Authorization", "proxy-", "https://", "u:p@", "node7", ".corp", ".COM"),
    *(".internal", ".io", "AKIA", "ASIA", "A3TX", "IOSFODNN7EXAMPLE", "sk-", "rk_live_"),
    *("hf_", "ghp_", "github_pat_", "glpat-", "xoxb-", "AIza", "npm_", "pypi-AgE", "eyJ"),
    *("abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOP", "_", "-"),
    *("-----BEGIN PRIVATE KEY-----", "MIIE", "-----END PRIVATE KEY-----"),
]
TEXT = st.lists(st.sampled_from(FRAGMENTS), max_size=16).map("".join)

# A benchmark's JSON: megabytes of numbers, which every gate lets through.
FILLER = '"ttfts": [' + ", ".join(f"0.{i:04d}" for i in range(1000)) + "], "


def new(*hosts: str) -> Sanitizer:
    return Sanitizer(hosts, include_local_hostname=False)


def gate_matches(san: Sanitizer, rule: str, text: str) -> bool:
    arr = pa.array([text])
    return bool(pc.match_substring_regex(arr, san._gates[rule], ignore_case=True)[0].as_py())


@pytest.mark.parametrize("rule", RULES)
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=TEXT)
def test_a_gate_matches_wherever_its_rule_changes_the_text(rule: str, text: str) -> None:
    san = new("gpu-node7")
    if san.apply_rule(rule, text) != text:
        assert gate_matches(san, rule, text), f"gate {RULE_RE2[rule]!r} misses {text!r}"


@pytest.mark.parametrize(
    ("rule", "text"),
    [
        ("private_key", "-----BEGIN RSA PRIVATE KEY-----MIIE"),
        ("bearer_token", "Authorization: Bearer abc.DEF"),
        ("basic_auth", f"Basic {BASIC}"),
        ("authorization", "proxy-authorization=opaque"),
        ("url_credentials", "https://u:pw@x"),
        ("api_key", 'aws_secret_access_key\\": \\"x\\"'),
        ("key_literal", "ASIAIOSFODNN7EXAMPLE"),
        ("home_path", "C:\\\\Users\\\\bob"),
        ("ipv4", "010.001.002.003"),
        ("ipv6", "fe80::1"),
        ("hostname", "npu-7.cluster.INTERNAL"),
    ],
)
def test_each_gate_on_a_sample_its_rule_changes(rule: str, text: str) -> None:
    # The sample is a positive of the rule (a second check that the sample means what
    # it says), and the gate sees it.
    san = new()
    assert san.apply_rule(rule, text) != text
    assert gate_matches(san, rule, text)


def test_a_named_host_joins_the_hostname_gate() -> None:
    san = new("gpu-node7")
    assert san.apply_rule("hostname", "on gpu-node7 now") != "on gpu-node7 now"
    assert gate_matches(san, "hostname", "on gpu-node7 now")
    assert not gate_matches(new(), "hostname", "on gpu-node7 now")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=st.lists(st.one_of(TEXT, st.just(FILLER)), min_size=1, max_size=8))
def test_gated_scrub_equals_the_ungated_rules(parts: list[str]) -> None:
    text = FILLER.join(parts) if len(parts) > 1 else parts[0] + FILLER * 5
    assert len(text) >= sanitize._GATE_MIN
    gated = new("gpu-node7")
    out = gated.scrub(text, "m", "f")
    with pytest.MonkeyPatch.context() as m:
        m.setattr(sanitize, "_GATE_MIN", 10**12)
        plain = new("gpu-node7")
        assert plain.scrub(text, "m", "f") == out
    assert gated.report() == plain.report()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(st.one_of(TEXT, st.just("0.5, 0.25"), st.just("é 10.0.0.1")), min_size=65))
def test_line_wise_scan_finds_what_the_rules_find_line_by_line(lines: list[str]) -> None:
    text = "\n".join(lines)
    found = new("gpu-node7").scan(text, "m")
    with pytest.MonkeyPatch.context() as m:
        m.setattr(sanitize, "_SCAN_VECTOR_MIN", 10**12)
        assert new("gpu-node7").scan(text, "m") == found


def test_a_credential_deep_in_a_long_json_line_is_still_found() -> None:
    line = FILLER * 400 + '"api_key": "k-123", ' + FILLER * 400 + '"url": "https://u:pw@x"'
    assert len(line) > 1_000_000
    found = new().scan(line, "sources/base.json")
    # In rule order (``RULES``): url_credentials runs before api_key.
    assert [(f.line, f.rule) for f in found] == [(1, "url_credentials"), (1, "api_key")]
    out = new().scrub(line, "m", "f")
    assert '"api_key": "<redacted>"' in out and "https://<redacted>@x" in out
    assert out.count("0.0999") == 800  # the numbers are untouched
