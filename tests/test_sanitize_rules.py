"""Rules version 2: the credential rules, the gaps of issue 12, names, keys and depth.

See ``specs/sanitizer.md``. Where a rule is vendored from detect-secrets, the last tests
check, when detect-secrets is installed (dev extra), that each sample is a positive for
the upstream plugin's own regexes and that our rules redact it.
"""

from __future__ import annotations

import base64
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bundler.campaign.sanitize import (
    RULES,
    SanitizeError,
    Sanitizer,
    is_secret_name,
)
from bundler.campaign.sanitize_rules import FIRST_PASS


def san(*hosts: str) -> Sanitizer:
    return Sanitizer(hosts, include_local_hostname=False)


def scrub(text: str, *hosts: str) -> str:
    return san(*hosts).scrub(text, "m", "f")


BASIC = base64.b64encode(b"carol:hunter2").decode()

# (text, expected) for the gaps named in issue 12 and the new rules.
POSITIVE = [
    # AWS secret access keys, in the credentials file, env and STS JSON forms.
    (
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "aws_secret_access_key = <redacted>",
    ),
    (
        "AWS_SECRET_ACCESS_KEY: wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "AWS_SECRET_ACCESS_KEY: <redacted>",
    ),
    ('{"SecretAccessKey": "abc/def+ghi"}', '{"SecretAccessKey": "<redacted>"}'),
    ("aws_session_token=FwoGZXIvYXdzEJr", "aws_session_token=<redacted>"),
    # Temporary (and other) AWS key IDs.
    ("id ASIAIOSFODNN7EXAMPLE,", "id <redacted>,"),
    ("id AKIAIOSFODNN7EXAMPLE", "id <redacted>"),
    # Authorization headers.
    (f"Authorization: Basic {BASIC}", "Authorization: Basic <redacted>"),
    (
        f"-u x --header 'Authorization: basic {BASIC}'",
        "-u x --header 'Authorization: basic <redacted>'",
    ),
    ("Authorization: Token abc123", "Authorization: Token <redacted>"),
    ("proxy-authorization=opaque-value", "proxy-authorization=<redacted>"),
    ("Authorization: Bearer abc.DEF-123_x=", "Authorization: Bearer <redacted>"),
    # Passwords in URLs (the user goes too).
    ("https://alice:s3cret@example.test/x", "https://<redacted>@example.test/x"),
    ("postgresql://admin:p%40ss@db:5432/x", "postgresql://<redacted>@db:5432/x"),
    ("redis://:pw@cache:6379", "redis://<redacted>@cache:6379"),
    # IPv4: followed by a full stop, leading zeros, a file suffix.
    ("connect to 10.0.0.7.", "connect to <ip-1>."),
    ("addr 010.000.000.001 up", "addr <ip-1> up"),
    ("dump 10.0.0.7.txt", "dump <ip-1>.txt"),
    # Names ending in a secret word, any case and separator.
    ("HF_TOKEN=abc123", "HF_TOKEN=<redacted>"),
    ("my_token=x", "my_token=<redacted>"),
    ("accessToken: 'abc def'", "accessToken: '<redacted>'"),
    ('"password": "correct horse battery"', '"password": "<redacted>"'),
    ('log \\"db_password\\": \\"p w\\"', 'log \\"db_password\\": \\"<redacted>\\"'),
    ("--api-key=abc", "--api-key=<redacted>"),
    ("client_secret := abc", "client_secret := <redacted>"),
    # Vendor formats.
    ("ghp_" + "a" * 36, "<redacted>"),
    ("github_pat_" + "A1_" * 10, "<redacted>"),
    ("glpat-" + "x" * 20, "<redacted>"),
    ("xoxb-123456789012-abcdef", "<redacted>"),
    ("sk_live_" + "a1" * 12, "<redacted>"),
    ("AIza" + "b" * 35, "<redacted>"),
    ("npm_" + "c" * 36, "<redacted>"),
    ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln", "jwt <redacted>"),
    ("k sk-ant-api03-" + "Z" * 30, "k <redacted>"),
    # Private keys, one line or many, JSON-escaped too.
    (
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1r\n-----END OPENSSH PRIVATE KEY----- ok",
        "<redacted> ok",
    ),
    ("key: -----BEGIN PRIVATE KEY-----\\nMIIEvQ\\n", "key: <redacted>"),
    # Home paths on Windows, plain and JSON-escaped.
    ("C:\\Users\\alice\\runs", "C:\\Users\\<user>\\runs"),
    ("C:\\\\Users\\\\alice\\\\x", "C:\\\\Users\\\\<user>\\\\x"),
    # Host names: in a longer dotted run, with underscores, at a sentence end.
    ("from node7.corp.json", "from <host-1>.json"),
    ("see gpu_7.cluster.internal.", "see <host-1>."),
]


@pytest.mark.parametrize(("text", "expected"), POSITIVE)
def test_new_rules(text: str, expected: str) -> None:
    assert scrub(text) == expected


NEGATIVE = [
    "max_tokens: 512, num_tokens=3",
    "eos_token: </s> pad_token=<pad>",
    "tokenizer=fast key_id=3 sort_key=e2e_s",
    "Basic configuration works",
    "Authorization: Bearer $TOKEN",
    "Authorization: ${AUTH}",
    "https://${USER}:${PASS}@localhost/x",
    "password=<your password>",
    "version 1.2.3.4.5 and v1.2.3.4",
    "ssim/ffmpeg-y lpips/alex 0.1.4",
    "2026-03-01T10:00:00.123+08:00",
    "https://example.test:8443/path",
    "AKIAIOSFODNN7EXAMPLEX",  # 17 characters after AKIA: not a key ID
    "task-abcdefghijklmnopqrstuvwxyz",
    # What benchmark tools write under names ending in a keyword (inference-perf's
    # per-request report and config.yaml): a measurement or an empty value, never a secret.
    '"time_to_first_token": 0.055095890998927644,',
    '"normalized_time_per_output_token": 1.5e-3}',
    "api_key: null",
    "token: None",
    "cert_key: ~",
    "ignore_token: false",
]


@pytest.mark.parametrize("text", NEGATIVE)
def test_harmless_text_stays(text: str) -> None:
    assert scrub(text) == text


@pytest.mark.parametrize(("text", "expected"), POSITIVE)
def test_scrubbing_twice_changes_nothing_more(text: str, expected: str) -> None:
    s = san()
    once = s.scrub(text, "m", "f")
    assert s.scrub(once, "m", "f") == once


@pytest.mark.parametrize(("text", "expected"), POSITIVE)
def test_first_pass_filter_sees_every_match(text: str, expected: str) -> None:
    assert FIRST_PASS.search(text), "the cheap first pass would skip a string a rule changes"


FRAGMENTS = [
    "10.0.0.7",
    ".",
    ":",
    "::",
    "fe80",
    "/home/",
    "bob",
    " ",
    "token",
    "=",
    '"',
    "Bearer ",
    "Basic ",
    BASIC,
    "https://",
    "u:p@",
    "node7",
    ".corp",
    "AKIA",
    "ASIA",
    "IOSFODNN7EXAMPLE",
    "sk-",
    "abcdefghijklmnopqrstu",
    "eyJ",
    "-----BEGIN PRIVATE KEY-----",
    "\\",
    "Users",
    "C:",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=12).map("".join))
def test_first_pass_filter_never_hides_a_match(text: str) -> None:
    # With the filter (scrub) and without it (_apply): the same text out.
    assert san().scrub(text, "m", "f") == san()._apply(text)[0]


def test_listed_names_end_at_hyphens_and_dots_but_not_inside_words() -> None:
    s = san("node7")
    out = s.scrub("rack-node7 node7-ib0 x.node7 node70 <host-9>", "m", "f")
    assert out == "rack-<host-1> <host-1>-ib0 x.<host-1> node70 <host-9>"


def test_listed_name_never_rewrites_our_placeholders() -> None:
    assert scrub("/home/bob and 10.0.0.1", "user", "ip") == "/home/<user> and <ip-1>"


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("password", True),
        ("HF_TOKEN", True),
        ("x-api-key", True),
        ("aws_secret_access_key", True),
        ("SecretAccessKey", True),
        ("--hf-token", True),
        ("clientSecret", True),
        ("DB_PASSWORD", True),
        ("credentials", True),
        ("max_tokens", False),
        ("tokenizer", False),
        ("eos_token", False),
        ("sort_key", False),
        ("key_id", False),
        ("AWS_ACCESS_KEY_ID", False),
        ("token_count", False),
        ("monkey", False),
    ],
)
def test_secret_names(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


def test_values_under_secret_names_are_replaced_whole_numbers_kept() -> None:
    s = san()
    value = {
        "env": {"HF_TOKEN": "plain", "DB_PASSWORD": ["a", {"x": "b"}], "PIN": 1234, "N": "5"},
        "password": "",
        "10.0.0.9": 1.5,
    }
    assert s.scrub_value(value, "campaign.json", "runtime") == {
        "env": {
            "HF_TOKEN": "<redacted>",
            "DB_PASSWORD": ["<redacted>", {"x": "<redacted>"}],
            "PIN": 1234,
            "N": "5",
        },
        "password": "",
        "<ip-1>": 1.5,
    }
    rows = {(r["field"], r["rule"]) for r in s.report()}
    assert ("runtime.env.HF_TOKEN", "secret_field") in rows
    assert ("runtime.(key)", "ipv4") in rows
    assert not any("10.0.0.9" in f for f, _ in rows)


def test_a_secret_named_column_is_replaced_whole() -> None:
    s = san()
    assert s.scrub_column(["abc", None, "abc"], "tables/receipts.parquet", "extra.api_key") == [
        "<redacted>",
        None,
        "<redacted>",
    ]
    assert s.report() == [
        {
            "member": "tables/receipts.parquet",
            "field": "extra.api_key",
            "rule": "secret_field",
            "count": 2,
        }
    ]


def test_keys_that_collide_once_scrubbed_raise_a_located_error() -> None:
    with pytest.raises(SanitizeError, match=r"runtime.*two keys become '<host-1>'"):
        san().scrub_value({"Node7.corp": 1, "node7.corp": 2}, "campaign.json", "runtime")


@pytest.mark.parametrize("depth", [1000, 100_000])
def test_deeply_nested_values_scrub_without_recursion(depth: int) -> None:
    value: object = "at 10.0.0.1"
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    out = san().scrub_value(value, "m", "")
    for i in reversed(range(depth)):
        if i % 2:
            assert isinstance(out, list) and len(out) == 1
            out = out[0]
        else:
            assert isinstance(out, dict) and list(out) == ["k"]
            out = out["k"]
    assert out == "at <ip-1>"


def test_checking_a_name_assigns_no_pseudonym() -> None:
    s = san()
    assert s.would_change("logs/10.0.0.2/x.log") == ["ipv4"]
    assert s.scan("ssh 10.0.0.3\n", "files/a.sh")[0].rule == "ipv4"
    assert s.scrub("10.0.0.4", "m", "f") == "<ip-1>"
    assert s.report() == [{"member": "m", "field": "f", "rule": "ipv4", "count": 1}]


def test_apply_rule_covers_every_rule() -> None:
    s = san("node7")
    for rule in RULES:
        s.apply_rule(rule, "x")
    with pytest.raises(KeyError):
        s.apply_rule("nope", "x")


# --- cross-check against the maintained rule set we vendored from ----------------------------

DETECT_SECRETS_SAMPLES = [
    ("aws", "AWSKeyDetector", "key ASIAIOSFODNN7EXAMPLE", "ASIAIOSFODNN7EXAMPLE"),
    (
        "aws",
        "AWSKeyDetector",
        'aws_secret_access_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"',
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    ),
    ("basic_auth", "BasicAuthDetector", "https://user:s3cr3t@host/x", "s3cr3t"),
    ("github_token", "GitHubTokenDetector", "t=ghp_" + "a1" * 18, "ghp_" + "a1" * 18),
    ("gitlab_token", "GitLabTokenDetector", "glpat-" + "b2" * 10, "glpat-" + "b2" * 10),
    (
        "jwt",
        "JwtTokenDetector",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl",
        "eyJzdWIiOiIxIn0",
    ),
    (
        "openai",
        "OpenAIDetector",
        "sk-" + "a" * 20 + "T3BlbkFJ" + "b" * 20,
        "T3BlbkFJ",
    ),
    ("private_key", "PrivateKeyDetector", "-----BEGIN RSA PRIVATE KEY-----\nMIIE", "MIIE"),
    ("slack", "SlackDetector", "xoxb-1234567890-abcdefghij", "abcdefghij"),
    ("stripe", "StripeDetector", "sk_live_" + "c3" * 12, "c3" * 12),
    ("pypi_token", "PypiTokenDetector", "pypi-AgEIcHlwaS5vcmc" + "d" * 70, "d" * 70),
    ("keyword", "KeywordDetector", 'password = "hunter2pw"', "hunter2pw"),
]


@pytest.mark.parametrize(("module", "cls", "text", "secret"), DETECT_SECRETS_SAMPLES)
def test_detect_secrets_positives_are_redacted(
    module: str, cls: str, text: str, secret: str
) -> None:
    mod = pytest.importorskip(f"detect_secrets.plugins.{module}")
    plugin = getattr(mod, cls)
    patterns: list[re.Pattern[str]] = []
    if hasattr(plugin, "denylist"):
        patterns = list(plugin.denylist)
    if module == "keyword":
        patterns = [mod.FOLLOWED_BY_EQUAL_SIGNS_QUOTES_REQUIRED_REGEX]
    assert any(p.search(text) for p in patterns), "not a positive for the upstream plugin"
    assert secret not in scrub(text)
