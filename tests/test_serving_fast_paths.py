"""The shortcuts that make import, seal and replay of a large serving campaign fast
(issue 22, ``bench/serving_scale.py``) find exactly what the long way finds.

- vLLM's per-request arrays are type-checked and flattened in C: a wrong entry is
  still named by its index (a string in ``itls`` has a length, as a list has).
- The JSON depth walk stops once it has seen as many arrays and objects as the text
  has opening brackets: never earlier than a nesting too deep is found.
- The JSON parse runs with the cyclic collector paused, and leaves it as it found it.
- The sanitizer tries all its RE2 gates in one pass before trying them one by one: a
  long line no gate matches costs one pass, a line one gate matches is scrubbed as before.
"""

from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bundler._internal import jsonload
from bundler._internal.jsonload import (
    MAX_JSON_DEPTH,
    _bracket_bytes,
    _brackets,
    depth_exceeds,
    loads,
)
from bundler.campaign.sanitize import Sanitizer
from bundler.format.serving_run import SourceError
from bundler.importers import vllm

VLLM = Path(__file__).resolve().parent / "fixtures" / "real_writers" / "vllm-0.33.0"


def _doc() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((VLLM / "cand-c2.json").read_text(encoding="utf-8"))
    assert len(doc["errors"]) >= 4 and all(len(g) > 0 for g in doc["itls"][:4])
    return doc


def _problem(doc: dict[str, Any]) -> tuple[str | None, str]:
    with pytest.raises(SourceError) as info:
        vllm.parse(json.dumps(doc).encode(), "cand.json", "cand")
    (p,) = info.value.problems
    return p.field, p.message


@pytest.mark.parametrize(
    ("value", "index"),
    [(5, 3), (True, 1), ([], 2), ({"e": 1}, 0)],
)
def test_a_non_string_error_entry_is_named_by_its_index(value: Any, index: int) -> None:
    doc = _doc()
    doc["errors"][index] = value
    assert _problem(doc) == (f"errors[{index}]", "expected a string")


def test_a_null_error_entry_is_a_success() -> None:
    doc = _doc()
    doc["errors"][1] = None
    run = vllm.parse(json.dumps(doc).encode(), "cand.json", "cand")
    assert bool(run.ok[1])


@pytest.mark.parametrize(
    ("value", "index"),
    # "ab" has a length like a list: it must not be counted as two gaps.
    [("ab", 1), (0.5, 2), ({"a": 1}, 0), (None, 3)],
)
def test_a_non_array_itls_entry_is_named_by_its_index(value: Any, index: int) -> None:
    doc = _doc()
    doc["itls"][index] = value
    assert _problem(doc) == (f"itls[{index}]", "expected an array of numbers")


def test_the_first_of_two_bad_entries_is_named() -> None:
    doc = _doc()
    doc["itls"][3] = "x"
    doc["itls"][1] = 7
    doc["errors"][2] = 0
    doc["errors"][3] = 1
    assert _problem(doc) == ("errors[2]", "expected a string")
    doc["errors"][2] = doc["errors"][3] = ""
    assert _problem(doc) == ("itls[1]", "expected an array of numbers")


def _nest(depth: int) -> Any:
    v: Any = 1
    for _ in range(depth):
        v = [v]
    return v


JSON_VALUES = st.recursive(
    st.none() | st.integers(-5, 5) | st.text("[]{}ab", max_size=4),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text("[{a", max_size=2), inner),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES, st.integers(1, 6))
def test_the_bounded_depth_walk_agrees_with_the_full_walk(value: Any, limit: int) -> None:
    # Brackets inside strings make the text's count larger than the containers: the
    # bound is loose then, never wrong.
    text = json.dumps(value)
    brackets = text.count("[") + text.count("{")
    assert depth_exceeds(value, limit, at_most=brackets) == depth_exceeds(value, limit)


@settings(max_examples=300, deadline=None)
@given(st.text(st.sampled_from("[]{}{[a\u00e9\u20ac\U0001f600\ud800;{") | st.characters()))
def test_brackets_counted_in_the_bytes_are_those_of_the_text(text: str) -> None:
    # Every byte that is "[" or "{" after | 0x20 ("[" = 0x5B, "{" = 0x7B, and no other).
    expected = sum(1 for ch in text if ch in "[{")
    assert _brackets(text) == expected
    assert _bracket_bytes(text.encode("utf-8", "surrogatepass")) == expected


@settings(max_examples=200, deadline=None)
@given(st.text(st.sampled_from("[]{}{[a\u00e9;") | st.characters(), max_size=80), st.integers(1, 9))
def test_brackets_counted_step_by_step_are_those_of_the_text(text: str, step: int) -> None:
    """The count walks the bytes ``step`` at a time (256 KiB in use): no step loses or
    counts twice a bracket at its edges."""
    expected = sum(1 for ch in text if ch in "[{")
    with pytest.MonkeyPatch.context() as m:
        m.setattr(jsonload, "_BRACKET_STEP", step)
        assert _bracket_bytes(text.encode("utf-8", "surrogatepass")) == expected


def test_nesting_under_many_flat_arrays_is_still_refused() -> None:
    flat = [[0.1, 0.2]] * 5000
    ok = json.dumps({"itls": flat, "label": _nest(MAX_JSON_DEPTH - 1)})
    assert loads(ok)["itls"] == flat
    deep = json.dumps({"itls": flat, "label": _nest(MAX_JSON_DEPTH)})
    with pytest.raises(ValueError, match=f"nested deeper than {MAX_JSON_DEPTH} levels"):
        loads(deep)


@pytest.mark.parametrize("enabled", [True, False])
def test_the_parse_leaves_the_collector_as_it_found_it(enabled: bool) -> None:
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        assert loads('{"a": [[1], [2.5]]}') == {"a": [[1], [2.5]]}
        assert gc.isenabled() is enabled
        with pytest.raises(json.JSONDecodeError):
            loads('{"a": [[1], ')
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


FILLER = "0.0123456789, " * 1000  # 14,000 ASCII characters: gated (>= 4096)


def _count_re2(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    real = pc.match_substring_regex

    def counting(arr: Any, pattern: str, **kw: Any) -> Any:
        calls.append(pattern)
        return real(arr, pattern, **kw)

    monkeypatch.setattr(pc, "match_substring_regex", counting)
    return calls


def test_a_long_line_no_gate_matches_costs_one_re2_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _count_re2(monkeypatch)
    san = Sanitizer(include_local_hostname=False)
    assert san.would_change("[" + FILLER + "1.5]") == []
    assert len(calls) == 1  # one per rule (11) before


def test_a_long_line_one_gate_matches_is_scrubbed_as_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    line = FILLER + '"model": "m", "path": "/home/alice/ckpt", ' + FILLER
    san = Sanitizer(include_local_hostname=False)
    assert san.would_change(line) == ["home_path"]
    out = san.scrub(line, "m", "f")
    assert out == line.replace("/home/alice/", "/home/<user>/")
    calls = _count_re2(monkeypatch)
    assert Sanitizer(include_local_hostname=False).would_change(line) == ["home_path"]
    assert len(calls) == 1 + 11  # the joint gate, then each rule's
