"""Scrub identifying details from receipts, logs and documents; keep numbers exact.

Rules (``specs/campaign-layout.md`` § Sanitization is the contract), applied in
this order to every string value (never to numbers, never to timestamps):

=================  =================================================  =====================
rule               matches                                            replaced by
=================  =================================================  =====================
``bearer_token``   ``Bearer <token>``                                 ``Bearer <redacted>``
``api_key``        ``api_key=…``, ``token: …``, ``password=…`` etc.   ``<name>=<redacted>``
``key_literal``    ``sk-…``, ``hf_…``, ``ghp_…``, ``AKIA…`` literals  ``<redacted>``
``home_path``      ``/home/<user>``, ``/Users/<user>``, ``/root``      ``/home/<user>``
``ipv4``           dotted quads that are valid IPv4 addresses         ``<ip-N>``
``ipv6``           tokens that parse as IPv6 addresses                ``<ip-N>``
``hostname``       names in ``campaign.json`` ``sanitize.hostnames``, ``<host-N>``
                   this machine's hostname, and FQDNs under common
                   public and private suffixes, except names listed
                   in ``sanitize.keep_hosts`` (public download hosts)
=================  =================================================  =====================

Addresses and hosts get numbered pseudonyms (first appearance = 1) that are
consistent across the whole seal, so server identities that happened to be
addresses stay distinct and joinable. The scrubbed values themselves are never
recorded: only member, field, rule and count.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["RULES_VERSION", "Finding", "Sanitizer"]

RULES_VERSION = "1"

_BEARER = re.compile(r"\b(Bearer)\s+[A-Za-z0-9\-._~+/]+=*", re.IGNORECASE)
_API_KEY = re.compile(
    r"""\b((?:x-)?api[_-]?key|access[_-]?token|auth[_-]?token|secret(?:[_-]?key)?|password|passwd|token)"""
    r"""(["']?\s*[:=]\s*["']?)(?!<redacted>)([^\s"',;&}]+)""",
    re.IGNORECASE,
)
_KEY_LITERAL = re.compile(
    r"\b(?:sk-[A-Za-z0-9_\-]{16,}|hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|AKIA[0-9A-Z]{16})\b"
)
_HOME = re.compile(r"(?:/home|/Users)/(?!<user>)[^/\s\"':]+|/root(?=/|\b)")
_IPV4 = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?![\w.])")
_IPV6_CANDIDATE = re.compile(r"(?<![\w:.])[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}(?![\w:])")
_FQDN = re.compile(
    r"\b(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+"
    r"(?:local|lan|internal|intranet|corp|home|localdomain|com|net|org|io|cn|ai|dev|cloud)\b",
    re.IGNORECASE,
)
# A cheap first pass: most strings (ids, enums) match none of the rules.
_ANY = re.compile(
    r"bearer|key|token|secret|passw|sk-|hf_|gh[pousr]_|AKIA|/home/|/Users/|/root|\d\.\d|:[0-9A-Fa-f]*:"
    r"|\.[a-z]{2,11}\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Finding:
    """A possible secret seen in a file carried verbatim (reported, not changed)."""

    member: str
    line: int
    rule: str


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
        # Longest first so that "node7.lan" wins over "node7".
        ordered = sorted(names, key=lambda h: (-len(h), h))
        self._named = (
            re.compile(r"(?<![\w.-])(?:" + "|".join(map(re.escape, ordered)) + r")(?![\w-])")
            if ordered
            else None
        )
        self._pseudo: dict[tuple[str, str], str] = {}
        self._next = Counter[str]()
        self.counts: Counter[tuple[str, str, str]] = Counter()
        self._cache: dict[str, tuple[str, tuple[str, ...]]] = {}

    def _pseudonym(self, kind: str, value: str) -> str:
        key = (kind, value.lower())
        if key not in self._pseudo:
            self._next[kind] += 1
            self._pseudo[key] = f"<{kind}-{self._next[kind]}>"
        return self._pseudo[key]

    def _apply(self, text: str) -> tuple[str, tuple[str, ...]]:
        hits: list[str] = []

        def sub(rule: str, pattern: re.Pattern[str], repl: Any, s: str) -> str:
            out, n = pattern.subn(repl, s)
            hits.extend([rule] * n)
            return out

        s = sub("bearer_token", _BEARER, r"\1 <redacted>", text)
        s = sub("api_key", _API_KEY, r"\1\2<redacted>", s)
        s = sub("key_literal", _KEY_LITERAL, "<redacted>", s)
        s = sub("home_path", _HOME, "/home/<user>", s)
        s = self._sub_checked(s, hits, "ipv4", _IPV4, ipaddress.IPv4Address)
        s = self._sub_checked(s, hits, "ipv6", _IPV6_CANDIDATE, ipaddress.IPv6Address)
        if self._named is not None:
            s = sub("hostname", self._named, lambda m: self._pseudonym("host", m.group(0)), s)
        s = self._sub_checked(s, hits, "hostname", _FQDN, self._keep_check, kind="host")
        return s, tuple(hits)

    def _keep_check(self, name: str) -> None:
        if name.lower() in self._keep:
            raise ValueError(name)  # kept: _sub_checked leaves what does not "parse"

    def _sub_checked(
        self,
        s: str,
        hits: list[str],
        rule: str,
        pattern: re.Pattern[str],
        parse: Any,
        *,
        kind: str = "ip",
    ) -> str:
        """Replace matches that ``parse`` accepts (raises ValueError to keep one) by pseudonyms."""

        def repl(m: re.Match[str]) -> str:
            try:
                parse(m.group(0))
            except ValueError:
                return m.group(0)
            hits.append(rule)
            return self._pseudonym(kind, m.group(0))

        return pattern.sub(repl, s)

    def scrub(self, text: str, member: str, field: str) -> str:
        """Return ``text`` with every rule applied; count hits under (member, field)."""
        cached = self._cache.get(text)
        if cached is None:
            if self._named is None and not _ANY.search(text):
                cached = (text, ())
            else:
                cached = self._apply(text)
            self._cache[text] = cached
        for rule in cached[1]:
            self.counts[(member, field, rule)] += 1
        return cached[0]

    def scrub_column(self, values: list[Any], member: str, field: str) -> list[Any]:
        """Scrub a whole column: each distinct string once, counts weighted by repeats."""
        if not all(v is None or type(v) is str for v in values):
            return [self.scrub_value(v, member, field) for v in values]
        mapping: dict[str, str] = {}
        for text, n in Counter(v for v in values if v is not None).items():
            out = self.scrub(text, member, field)  # counts one occurrence ...
            for rule in self._cache[text][1]:
                self.counts[(member, field, rule)] += n - 1  # ... and the other n - 1
            mapping[text] = out
        return [None if v is None else mapping[v] for v in values]

    def scrub_value(self, value: Any, member: str, field: str) -> Any:
        """Scrub strings inside ``value`` (nested dicts and lists too); other types unchanged."""
        if isinstance(value, str):
            return self.scrub(value, member, field)
        if isinstance(value, dict):
            return {
                k: self.scrub_value(v, member, f"{field}.{k}" if field else k)
                for k, v in value.items()
            }
        if isinstance(value, list):
            return [self.scrub_value(v, member, field) for v in value]
        return value

    def scan(self, text: str, member: str) -> list[Finding]:
        """Report lines of ``text`` that a rule would change, without changing them."""
        out: list[Finding] = []
        for n, line in enumerate(text.splitlines(), start=1):
            if not _ANY.search(line) and self._named is None:
                continue
            _, hits = self._apply(line)
            out.extend(Finding(member, n, rule) for rule in sorted(set(hits)))
        return out

    def report(self) -> list[dict[str, Any]]:
        """What was scrubbed: ``{"member", "field", "rule", "count"}`` rows, sorted."""
        return [
            {"member": m, "field": f, "rule": r, "count": c}
            for (m, f, r), c in sorted(self.counts.items())
        ]
