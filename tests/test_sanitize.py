"""Sanitizer rules one by one, their pseudonyms, and what they must never touch."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bundler.campaign.sanitize import Sanitizer


def scrub(text: str, hostnames: tuple[str, ...] = ()) -> str:
    return Sanitizer(hostnames, include_local_hostname=False).scrub(text, "m", "f")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Authorization: Bearer abc.DEF-123_x=", "Authorization: Bearer <redacted>"),
        ("api_key=sk_live_999 rest", "api_key=<redacted> rest"),
        ('{"x-api-key": "k-123"}', '{"x-api-key": "<redacted>"}'),
        ("password: hunter2", "password: <redacted>"),
        ("use sk-ABCDEFGHIJKLMNOPQRSTUV now", "use <redacted> now"),
        ("token hf_ABCDEFGHIJKLMNOPQRSTUVWX", "token <redacted>"),
        ("cd /home/alice/runs && ls", "cd /home/<user>/runs && ls"),
        ("/Users/bob/x", "/home/<user>/x"),
        ("/root/.cache/torch", "/home/<user>/.cache/torch"),
        ("from 10.0.0.7:8000", "from <ip-1>:8000"),
        ("peer fe80::1ff:fe23:4567:890a up", "peer <ip-1> up"),
        ("http://npu-7.cluster.internal:8000/v1", "http://<host-1>:8000/v1"),
    ],
)
def test_rules(text: str, expected: str) -> None:
    assert scrub(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "2026-03-01T10:00:00.123Z",  # times have colons but are not IPv6
        "12:34:56",
        "e2e 407.27 s, 73.45 % lower, 3.77x",
        "999.1.2.3",  # not a valid IPv4 address
        "7be5be791159472b1fbf3c69796f7cb30dca7ad8466c2df70058c37116cdee02",
        "alexnet-owt-7be5be79.pth",
        "results/final-5s/quality-index.json",
        "vLLM-Omni PR 9241",
        "a token of appreciation",
    ],
)
def test_harmless_text_is_untouched(text: str) -> None:
    assert scrub(text) == text


def test_listed_hostnames_are_scrubbed_as_whole_words() -> None:
    s = Sanitizer(["node7"], include_local_hostname=False)
    assert (
        s.scrub("node7 and node70 and node7.lan", "m", "f")
        == "<host-1> and node70 and <host-1>.lan"
    )


def test_pseudonyms_are_stable_across_fields_and_distinct_per_value() -> None:
    s = Sanitizer(include_local_hostname=False)
    a = s.scrub("10.0.0.1", "tables/receipts.parquet", "server")
    b = s.scrub("10.0.0.2", "tables/receipts.parquet", "server")
    c = s.scrub("from 10.0.0.1", "logs/x.log", "text")
    assert (a, b, c) == ("<ip-1>", "<ip-2>", "from <ip-1>")


def test_report_counts_without_values() -> None:
    s = Sanitizer(include_local_hostname=False)
    for _ in range(3):
        s.scrub("10.9.8.7 Bearer tok", "tables/receipts.parquet", "error")
    assert s.report() == [
        {"member": "tables/receipts.parquet", "field": "error", "rule": "bearer_token", "count": 3},
        {"member": "tables/receipts.parquet", "field": "error", "rule": "ipv4", "count": 3},
    ]


def test_scrub_value_leaves_numbers_and_booleans_alone() -> None:
    s = Sanitizer(include_local_hostname=False)
    value = {"n": 10.20304, "i": 192168001001, "b": True, "s": ["10.0.0.1", 5], "none": None}
    assert s.scrub_value(value, "m", "") == {
        "n": 10.20304,
        "i": 192168001001,
        "b": True,
        "s": ["<ip-1>", 5],
        "none": None,
    }


def test_scan_reports_lines_without_changing_anything() -> None:
    s = Sanitizer(include_local_hostname=False)
    text = "fine\nssh root@10.1.1.1\nalso fine\n"
    found = s.scan(text, "files/run.sh")
    assert [(f.line, f.rule) for f in found] == [(2, "ipv4")]


def test_keep_hosts_are_left_alone_and_not_counted() -> None:
    s = Sanitizer(include_local_hostname=False, keep_hosts=["download.pytorch.org"])
    text = "https://download.pytorch.org/models/a.pth from npu-1.lan"
    assert s.scrub(text, "m", "f") == "https://download.pytorch.org/models/a.pth from <host-1>"
    assert s.report() == [{"member": "m", "field": "f", "rule": "hostname", "count": 1}]


@given(
    st.lists(
        st.sampled_from(["10.0.0.1", "ok", "Bearer x", None, "/home/a/b", "10.0.0.1"]), max_size=30
    )
)
def test_scrub_column_equals_scrubbing_each_value(values: list[str | None]) -> None:
    a = Sanitizer(include_local_hostname=False)
    b = Sanitizer(include_local_hostname=False)
    col = a.scrub_column(values, "m", "f")
    one = [None if v is None else b.scrub(v, "m", "f") for v in values]
    assert col == one
    assert a.report() == b.report()
