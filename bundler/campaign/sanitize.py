"""Scrub credentials and identifying details from every author string; keep numbers exact.

``specs/sanitizer.md`` is the contract: what is guaranteed, what is not, and
each rule with its source. Rules (``RULES``, applied in this order to every
string value and object key; never to numbers, booleans or ``null``):

===================  ===============================================  ==========================
rule                 matches                                          replaced by
===================  ===============================================  ==========================
``private_key``      PEM ``-----BEGIN … PRIVATE KEY-----`` blocks     ``<redacted>``
``bearer_token``     ``Bearer <token>``                               ``Bearer <redacted>``
``basic_auth``       ``Basic <base64 of user:password>``              ``Basic <redacted>``
``authorization``    ``Authorization: [scheme] <credentials>``        ``… [scheme] <redacted>``
``url_credentials``  ``scheme://user:password@``                      ``scheme://<redacted>@``
``api_key``          ``<secret name>=value``, ``"<secret name>": "…"``  the value: ``<redacted>``
``key_literal``      vendor token formats (``sk-``, ``hf_``, ``ghp_``,  ``<redacted>``
                     ``AKIA``/``ASIA`` key IDs, JWTs, …)
``home_path``        ``/home/<user>``, ``/Users/<user>``, ``/root``   ``/home/<user>``
``ipv4``             dotted quads, octets 0–255, leading zeros too    ``<ip-N>``
``ipv6``             tokens that parse as IPv6 addresses              ``<ip-N>``
``hostname``         listed names, this machine's name, and DNS names  ``<host-N>``
                     under common public and private suffixes, except
                     names listed in ``sanitize.keep_hosts``
===================  ===============================================  ==========================

A string under an object key or table field whose *name* marks a secret
(``password``, ``HF_TOKEN``, ``aws_secret_access_key``, …) is replaced whole
(rule ``secret_field``), whatever it looks like.

Every rule is linear in its input: each unbounded repetition either always
succeeds once started or can start only where the previous character is not
of its own class (``tests/test_sanitize_linear.py`` times each rule on
adversarial megabytes). Nested values are walked iteratively, so depth costs
memory, not stack.

Addresses and hosts get numbered pseudonyms (first appearance = 1) that are
consistent across the whole seal. The scrubbed values themselves are never
recorded: only member, field, rule and count.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
import socket
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bundler.campaign.sanitize_rules import (
    API_KEY,
    AUTHORIZATION,
    BASIC,
    BEARER,
    CREDENTIAL_RULES,
    DOTTED,
    FIRST_PASS,
    HAS_LETTER,
    HOME,
    IPV4,
    IPV6_CANDIDATE,
    KEY_LITERAL,
    LABEL,
    PRIVATE_KEY,
    REDACTED,
    RULE_RE2,
    RULES,
    RULES_VERSION,
    SECRET_FIELD,
    SUFFIXES,
    URL_CREDENTIALS,
    is_secret_name,
)

__all__ = [
    "CREDENTIAL_RULES",
    "REDACTED",
    "RULES",
    "RULES_VERSION",
    "SECRET_FIELD",
    "Finding",
    "SanitizeError",
    "Sanitizer",
    "is_secret_name",
]

# Below this length a string goes through the Python rules directly: an RE2 call per rule
# costs more than the regex passes it would save.
_GATE_MIN = 4096
# A text with more lines than this is scanned line-wise through one vectorized RE2 pass.
_SCAN_VECTOR_MIN = 64


@dataclass(frozen=True)
class Finding:
    """A possible secret seen in a file carried verbatim (reported, not changed)."""

    member: str
    line: int
    rule: str


class SanitizeError(ValueError):
    """Scrubbing would make a value ambiguous (two object keys become one)."""

    def __init__(self, member: str, field: str, message: str) -> None:
        super().__init__(f"{member}, field {field!r}: {message}")
        self.member = member
        self.field = field
        self.message = message


_Step = Callable[[str, list[str], bool], str]


class Sanitizer:
    """Applies the scrubbing rules and counts what each rule replaced, per member and field."""

    def __init__(
        self,
        hostnames: Iterable[str] = (),
        include_local_hostname: bool = True,
        keep_hosts: Iterable[str] = (),
    ) -> None:
        # Public hosts an author cites on purpose (where weights can be downloaded).
        self._keep = {h.lower() for h in keep_hosts if h}
        names = {h for h in hostnames if h}
        if include_local_hostname:
            local = socket.gethostname()
            if len(local) >= 3 and local.lower() not in {"localhost", "localhost.localdomain"}:
                names.add(local)
        # Longest first so that "node7.lan" wins over "node7". A listed name ends at anything
        # but a word character ("rack-node7", "node7-ib0" and "x.node7" are scrubbed, "node70"
        # is not) and never inside our own placeholders ("<host-1>", "/home/<user>").
        ordered = sorted(names, key=lambda h: (-len(h), h))
        self._hosts_re2 = "|".join(map(re.escape, ordered))
        self._gates = dict(RULE_RE2)
        if ordered:
            self._gates["hostname"] += "|" + self._hosts_re2
        self._any_re2 = "|".join(f"(?:{p})" for p in self._gates.values())
        self._named = (
            re.compile(r"(?<![\w<])(?:" + "|".join(map(re.escape, ordered)) + r")(?![\w>])")
            if ordered
            else None
        )
        self._pseudo: dict[tuple[str, str], str] = {}
        self._next = Counter[str]()
        self.counts: Counter[tuple[str, str, str]] = Counter()
        self._cache: dict[str, tuple[str, tuple[str, ...]]] = {}
        self._steps: dict[str, _Step] = {
            "private_key": self._simple(PRIVATE_KEY, "private_key", lambda m: REDACTED),
            "bearer_token": self._simple(
                BEARER, "bearer_token", lambda m: m.group(1) + " " + REDACTED
            ),
            "basic_auth": self._basic,
            "authorization": self._simple(
                AUTHORIZATION,
                "authorization",
                lambda m: m.group(1) + m.group(2) + (m.group(3) or "") + REDACTED,
            ),
            "url_credentials": self._simple(
                URL_CREDENTIALS, "url_credentials", lambda m: m.group(1) + REDACTED + "@"
            ),
            "api_key": self._api_key,
            "key_literal": self._simple(KEY_LITERAL, "key_literal", lambda m: REDACTED),
            "home_path": self._simple(HOME, "home_path", _home_repl),
            "ipv4": self._ipv4,
            "ipv6": self._ipv6,
            "hostname": self._hosts,
        }
        assert tuple(self._steps) == RULES

    # --- pseudonyms ------------------------------------------------------------------------

    def _pseudonym(self, kind: str, value: str, assign: bool) -> str:
        key = (kind, value.lower())
        if key in self._pseudo:
            return self._pseudo[key]
        if not assign:
            return f"<{kind}-?>"
        self._next[kind] += 1
        self._pseudo[key] = f"<{kind}-{self._next[kind]}>"
        return self._pseudo[key]

    # --- rule steps: (text, hits, assign) -> text ------------------------------------------

    @staticmethod
    def _simple(pattern: re.Pattern[str], rule: str, repl: Callable[[re.Match[str]], str]) -> _Step:
        def step(s: str, hits: list[str], assign: bool) -> str:
            out, n = pattern.subn(repl, s)
            hits.extend([rule] * n)
            return out

        return step

    @staticmethod
    def _basic(s: str, hits: list[str], assign: bool) -> str:
        def repl(m: re.Match[str]) -> str:
            value = m.group(2)
            try:
                raw = base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
                text = raw.decode("utf-8")
            except (binascii.Error, ValueError):
                return m.group(0)
            if ":" not in text or not text.isprintable():
                return m.group(0)
            hits.append("basic_auth")
            return m.group(1) + " " + REDACTED

        return BASIC.sub(repl, s)

    @staticmethod
    def _api_key(s: str, hits: list[str], assign: bool) -> str:
        def repl(m: re.Match[str]) -> str:
            if not is_secret_name(m.group(1)):
                return m.group(0)
            hits.append("api_key")
            quote = m.group(3) or m.group(4) or ""
            return m.group(1) + m.group(2) + quote + REDACTED + quote

        return API_KEY.sub(repl, s)

    def _ipv4(self, s: str, hits: list[str], assign: bool) -> str:
        def repl(m: re.Match[str]) -> str:
            if any(int(octet) > 255 for octet in m.groups()):
                return m.group(0)
            hits.append("ipv4")
            return self._pseudonym("ip", m.group(0), assign)

        return IPV4.sub(repl, s)

    def _ipv6(self, s: str, hits: list[str], assign: bool) -> str:
        def repl(m: re.Match[str]) -> str:
            try:
                ipaddress.IPv6Address(m.group(0))
            except ValueError:
                return m.group(0)
            hits.append("ipv6")
            return self._pseudonym("ip", m.group(0), assign)

        return IPV6_CANDIDATE.sub(repl, s)

    def _hosts(self, s: str, hits: list[str], assign: bool) -> str:
        if self._named is not None:

            def named(m: re.Match[str]) -> str:
                hits.append("hostname")
                return self._pseudonym("host", m.group(0), assign)

            s = self._named.sub(named, s)
        return DOTTED.sub(lambda m: self._dotted_or_number(m.group(0), hits, assign), s)

    def _dotted_or_number(self, run: str, hits: list[str], assign: bool) -> str:
        # Every known suffix is alphabetic: a run without a letter (a decimal number,
        # the bulk of a benchmark's JSON) can hold no host name.
        if HAS_LETTER.search(run) is None:
            return run
        return self._dotted(run, hits, assign)

    def _dotted(self, run: str, hits: list[str], assign: bool) -> str:
        """Replace, in one run of dotted labels, each longest name ending in a known suffix."""
        labels = run.split(".")
        valid = [bool(LABEL.fullmatch(x)) for x in labels]
        out: list[str] = []
        i, n = 0, len(labels)
        while i < n:
            if not valid[i]:
                out.append(labels[i])
                i += 1
                continue
            j, last = i, -1
            while j < n and valid[j]:
                if j > i and labels[j].lower() in SUFFIXES:
                    last = j
                j += 1
            if last < 0:
                out.extend(labels[i:j])
            else:
                name = ".".join(labels[i : last + 1])
                if name.lower() in self._keep:
                    out.append(name)
                else:
                    hits.append("hostname")
                    out.append(self._pseudonym("host", name, assign))
                out.extend(labels[last + 1 : j])
            i = j
        return ".".join(out)

    # --- applying ------------------------------------------------------------------------------

    def _apply(self, text: str, assign: bool = True) -> tuple[str, tuple[str, ...]]:
        hits: list[str] = []
        s = text
        # Every replacement is ASCII, so an ASCII text stays ASCII from step to step and
        # each gate is searched in exactly the text its rule would see.
        gated = len(text) >= _GATE_MIN and text.isascii()
        arr: pa.Array[Any] | None = None  # s as Arrow, built again only after s changed
        if gated:
            # One RE2 pass with every gate at once: a text none of them matches (a large
            # benchmark result of numbers) is left as it is by every rule, and costs one
            # pass instead of one per rule.
            arr = pa.array([s], pa.large_string())
            if not pc.match_substring_regex(arr, self._any_re2, ignore_case=True)[0].as_py():
                return s, ()
        for rule, step in self._steps.items():
            if gated:
                if arr is None:
                    arr = pa.array([s], pa.large_string())
                if not pc.match_substring_regex(arr, self._gates[rule], ignore_case=True)[
                    0
                ].as_py():
                    continue
            new = step(s, hits, assign)
            if new is not s:
                arr = None
            s = new
        return s, tuple(hits)

    def apply_rule(self, rule: str, text: str) -> str:
        """``text`` with the one rule ``rule`` applied (no counting); for tests and timing."""
        return self._steps[rule](text, [], True)

    def would_change(self, text: str) -> list[str]:
        """The rules that would change ``text``, in order; assigns no pseudonym, counts nothing."""
        if self._named is None and not FIRST_PASS.search(text):
            return []
        return sorted(set(self._apply(text, assign=False)[1]), key=RULES.index)

    def scrub(self, text: str, member: str, field: str) -> str:
        """Return ``text`` with every rule applied; count hits under (member, field)."""
        cached = self._cache.get(text)
        if cached is None:
            if self._named is None and not FIRST_PASS.search(text):
                cached = (text, ())
            else:
                cached = self._apply(text)
            self._cache[text] = cached
        for rule in cached[1]:
            self.counts[(member, field, rule)] += 1
        return cached[0]

    def _redact_field(self, text: str, member: str, field: str) -> str:
        """A string under a secret-named key or field: replaced whole (empty stays empty)."""
        if not text or text == REDACTED:
            return text
        self.counts[(member, field, SECRET_FIELD)] += 1
        return REDACTED

    def scrub_column(self, values: list[Any], member: str, field: str) -> list[Any]:
        """Scrub a whole column: each distinct string once, counts weighted by repeats."""
        if not all(v is None or type(v) is str for v in values):
            return [self.scrub_value(v, member, field) for v in values]
        if is_secret_name(field.rsplit(".", 1)[-1]):
            return [None if v is None else self._redact_field(v, member, field) for v in values]
        mapping: dict[str, str] = {}
        for text, n in Counter(v for v in values if v is not None).items():
            out = self.scrub(text, member, field)  # counts one occurrence ...
            for rule in self._cache[text][1]:
                self.counts[(member, field, rule)] += n - 1  # ... and the other n - 1
            mapping[text] = out
        return [None if v is None else mapping[v] for v in values]

    @classmethod
    def for_campaign(cls, doc: dict[str, Any]) -> Sanitizer:
        """The sanitizer of campaign ``doc`` (its ``sanitize`` host lists)."""
        rules = doc.get("sanitize", {})
        return cls(rules.get("hostnames", []), keep_hosts=rules.get("keep_hosts", []))

    def picks(self, uniques: pa.Array[Any]) -> np.ndarray[Any, Any]:
        """Indices of the distinct strings ``uniques`` that the Python rules must see.

        A superset of what any rule changes: every non-ASCII value (RE2 and Python
        differ in ``\\d`` and case folding there) and every match of the RE2 prefilter.
        """
        needs = pc.or_(
            pc.invert(pc.string_is_ascii(uniques)),
            pc.match_substring_regex(uniques, self._any_re2, ignore_case=True),
        )
        return np.flatnonzero(needs.to_numpy(zero_copy_only=False))

    def prime_column(self, picked: dict[str, int], member: str, field: str) -> None:
        """Scrub a column known only by its picked distinct values (:meth:`picks`), each
        with its number of rows, in order of first appearance: the pseudonyms and counts
        :meth:`scrub_arrow` would give the whole column. The column is then scrubbed
        piece by piece with ``scrub_arrow(..., count=False)`` (a streamed seal).
        """
        for text, n in picked.items():
            self.scrub(text, member, field)  # counts one occurrence ...
            for rule in self._cache[text][1]:
                self.counts[(member, field, rule)] += n - 1  # ... and the rest

    def scrub_arrow(
        self, arr: pa.Array[Any], member: str, field: str, *, count: bool = True
    ) -> pa.Array[Any]:
        """:meth:`scrub_column` for an Arrow string array: same output, same counts, pseudonyms
        assigned in the same order.

        Each distinct string is looked at once, in order of first appearance; an
        RE2 prefilter over the distinct values (a superset of what any rule
        matches) picks the few that go through the Python rules, the rest are
        unchanged by construction. ``count=False``: values primed by
        :meth:`prime_column` are neither counted again nor renumbered.
        """
        if is_secret_name(field.rsplit(".", 1)[-1]):
            return pa.array(self.scrub_column(arr.to_pylist(), member, field), pa.string())
        enc: Any = pc.dictionary_encode(arr)
        uniques, indices = enc.dictionary, enc.indices
        if len(uniques) == 0:
            return arr
        picked = self.picks(uniques)
        if len(picked) == 0:
            return arr
        counts = np.bincount(indices.drop_null().to_numpy(), minlength=len(uniques))
        texts = [uniques[i].as_py() for i in picked.tolist()]
        out = uniques.to_pylist()
        changed = False
        for i, text in zip(picked.tolist(), texts, strict=True):
            if not count and text in self._cache:
                new = self._cache[text][0]  # primed (prime_column): counted already
            else:
                new = self.scrub(text, member, field)  # counts one occurrence ...
                for rule in self._cache[text][1]:
                    self.counts[(member, field, rule)] += int(counts[i]) - 1  # ... and the rest
            changed = changed or new != text
            out[i] = new
        if not changed:
            return arr
        return pc.take(pa.array(out, pa.string()), indices)

    def changes_some(self, arr: pa.Array[Any]) -> bool:
        """Whether the rules would change some string of ``arr``; assigns and counts nothing.

        Looks at each distinct value once, through the same RE2 prefilter as
        :meth:`scrub_arrow`.
        """
        uniques: Any = pc.unique(arr.drop_null())
        if len(uniques) == 0:
            return False
        needs = pc.or_(
            pc.invert(pc.string_is_ascii(uniques)),
            pc.match_substring_regex(uniques, self._any_re2, ignore_case=True),
        )
        picked = uniques.filter(needs).to_pylist()
        return any(self.would_change(text) for text in picked)

    def scrub_key(self, key: str, member: str, field: str) -> str:
        """An object key scrubbed like a value (a per-host map keyed by addresses, say)."""
        return self.scrub(key, member, field)

    def scrub_value(self, value: Any, member: str, field: str) -> Any:
        """Scrub strings inside ``value``, object keys included, at any depth; others unchanged.

        Walks iteratively (no recursion limit). A string under a key whose name
        marks a secret (:func:`is_secret_name`) is replaced whole; so is every
        string below such a key. Field paths are dotted (``a.b``); list items keep
        their list's path. Raises :class:`SanitizeError` if two keys of one object
        scrub to the same text.
        """
        secret = bool(field) and is_secret_name(field.rsplit(".", 1)[-1])
        if not isinstance(value, dict | list):
            return self._leaf(value, member, field, secret)
        root: Any = {} if isinstance(value, dict) else []
        # Frames: (items iterator, output container, path, inside a secret-named key).
        stack: list[tuple[Iterator[tuple[Any, Any]], Any, str, bool]] = [
            (_items(value), root, field, secret)
        ]
        while stack:
            it, out, path, hidden = stack[-1]
            item = next(it, None)
            if item is None:
                stack.pop()
                continue
            key, child = item
            child_path, child_hidden = path, hidden
            if isinstance(out, dict):
                raw_key = str(key)
                # Counted under the object's path: the raw key must not reach the record.
                new_key = self.scrub_key(raw_key, member, f"{path}.(key)" if path else "(key)")
                if new_key in out:
                    raise SanitizeError(
                        member,
                        path or "(top level)",
                        f"two keys become {new_key!r} once scrubbed; rename one",
                    )
                child_path = f"{path}.{new_key}" if path else new_key
                child_hidden = hidden or is_secret_name(raw_key)
                key = new_key
            if isinstance(child, dict | list):
                sub: Any = {} if isinstance(child, dict) else []
                _put(out, key, sub)
                stack.append((_items(child), sub, child_path, child_hidden))
            else:
                _put(out, key, self._leaf(child, member, child_path, child_hidden))
        return root

    def _leaf(self, value: Any, member: str, field: str, secret: bool) -> Any:
        if not isinstance(value, str):
            return value  # numbers, booleans and null are never touched
        if secret:
            return self._redact_field(value, member, field)
        return self.scrub(value, member, field)

    def scan(self, text: str, member: str) -> list[Finding]:
        """Report lines of ``text`` that a rule would change, without changing them."""
        out: list[Finding] = []
        lines = text.splitlines()
        picked: Iterable[int] = range(len(lines))
        if len(lines) > _SCAN_VECTOR_MIN:
            # One RE2 pass over all lines picks those any gate matches (and every non-ASCII
            # one); no rule changes the rest, so they need no Python pass.
            arr = pa.array(lines, pa.large_string())
            needs = pc.or_(
                pc.invert(pc.string_is_ascii(arr)),
                pc.match_substring_regex(arr, self._any_re2, ignore_case=True),
            )
            picked = np.flatnonzero(needs.to_numpy(zero_copy_only=False)).tolist()
        for i in picked:
            out.extend(Finding(member, i + 1, rule) for rule in self.would_change(lines[i]))
        return out

    def report(self) -> list[dict[str, Any]]:
        """What was scrubbed: ``{"member", "field", "rule", "count"}`` rows, sorted."""
        return [
            {"member": m, "field": f, "rule": r, "count": c}
            for (m, f, r), c in sorted(self.counts.items())
        ]


def _items(value: dict[Any, Any] | list[Any]) -> Iterator[tuple[Any, Any]]:
    if isinstance(value, dict):
        return iter(value.items())
    return ((None, v) for v in value)


def _put(out: dict[str, Any] | list[Any], key: Any, value: Any) -> None:
    if isinstance(out, dict):
        out[key] = value
    else:
        out.append(value)


def _home_repl(m: re.Match[str]) -> str:
    sep = m.group(1)
    if sep is None:
        return "/home/<user>"
    return m.group(0)[:2] + sep + "Users" + sep + "<user>"
