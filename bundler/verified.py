"""``VerifiedBundle``: the only door from a bundle file to the commands that read its content.

Replay, report, rerun, media re-scoring and ``--against`` all take a
:class:`VerifiedBundle`, and :func:`open_verified` is the one function that
makes one: it checks signatures, every member's digest and size, the member
list and the format versions, and refuses (``IntegrityError``) a bundle with
any problem, or one no trusted key verified unless the caller allows that
explicitly. The refusal logic therefore exists once, in words that name no
command-line flag (the CLI adds its own hints).

A bundle that verified only because its :class:`~bundler.format.trust.Trust`
accepts unsigned bundles is still
hostile: anyone could have sealed it. Its documents are therefore parsed
defensively here (:meth:`VerifiedBundle.document` raises a located
``BundleFormatError`` for a member that is not a JSON object) so that no
reader downstream meets a list where it expects a mapping.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from bundler.errors import BundleFormatError, IntegrityError, Problem, UntrustedError
from bundler.format.container import Limits, Member
from bundler.format.model import Manifest
from bundler.format.parquet_cost import table_cost_problems
from bundler.format.trust import NO_TRUST, SignatureStatus, Trust
from bundler.verify import OpenedBundle, VerifyReport, is_trust_problem, open_bundle

__all__ = ["VerifiedBundle", "open_verified"]

_TOKEN = object()


class VerifiedBundle:
    """A bundle whose signatures, members and formats verified; made by :func:`open_verified`.

    ``trusted`` is True when a trusted key verified the signature; False means the
    caller accepted an unsigned or untrusted bundle explicitly.
    """

    __slots__ = ("_opened", "path")

    def __init__(self, opened: OpenedBundle, path: Path, token: object) -> None:
        if token is not _TOKEN:  # pragma: no cover - a programming error, not an input error
            raise TypeError("VerifiedBundle is made by bundler.verified.open_verified only")
        self._opened = opened
        self.path = path

    @property
    def report(self) -> VerifyReport:
        """The verification report (no problems, by construction)."""
        return self._opened.report

    @property
    def signature_status(self) -> SignatureStatus:
        """What the signature check established."""
        return self._opened.report.signature_status

    @property
    def trusted(self) -> bool:
        """True when a trusted key verified the signature."""
        return self._opened.report.signature_status.trusted

    @property
    def manifest(self) -> Manifest:
        """The signed manifest (present, by construction)."""
        assert self._opened.manifest is not None
        return self._opened.manifest

    @property
    def members(self) -> dict[str, Member]:
        """Members by name."""
        return self._opened.members

    def member_bytes(self, name: str) -> bytes | None:
        """The bytes of member ``name``, or None when the bundle has no such member."""
        m = self._opened.members.get(name)
        return None if m is None else m.data

    def table(self, name: str) -> pa.Table:
        """Read table ``name`` from its Parquet member.

        Raises:
            BundleFormatError: the member is absent or not Parquet (only possible in an
                unsigned bundle sealed by someone else's tool).
        """
        data = self.member_bytes(f"tables/{name}.parquet")
        if data is None:
            raise BundleFormatError(
                f"{self.path}: no table {name!r}",
                [Problem(f"tables/{name}.parquet", None, None, "missing member")],
            )
        try:
            # use_threads=False: tables are small, and pyarrow's thread pool was seen to
            # abort at interpreter exit (apache/arrow issue 34314).
            return pq.read_table(io.BytesIO(data), use_threads=False)
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise BundleFormatError(
                f"{self.path}: table {name!r} is not readable Parquet",
                [Problem(f"tables/{name}.parquet", None, None, str(exc))],
            ) from exc

    def document(self, name: str) -> dict[str, Any] | None:
        """Parse JSON member ``name`` as an object, or None if the bundle has no such member.

        Raises:
            BundleFormatError: the member is not UTF-8 JSON, or not a JSON object.
        """
        data = self.member_bytes(name)
        if data is None:
            return None
        try:
            doc = json.loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            raise BundleFormatError(
                f"{self.path}: member {name!r} is not JSON",
                [Problem(name, None, None, f"not JSON: {exc}")],
            ) from exc
        if not isinstance(doc, dict):
            raise BundleFormatError(
                f"{self.path}: member {name!r} is not a JSON object",
                [Problem(name, None, None, f"expected a JSON object, found {type(doc).__name__}")],
            )
        return doc


def open_verified(
    path: Path | str,
    *,
    trust: Trust = NO_TRUST,
    limits: Limits | None = None,
) -> VerifiedBundle:
    """Open and verify the bundle at ``path``; refuse it unless it verified.

    Args:
        path: the bundle file.
        trust: the keys whose signature makes the bundle trusted, and whether a
            bundle none of them verified (unsigned, or signed by an unknown key) is
            accepted. Integrity problems are refused regardless.
        limits: container reading bounds.

    Raises:
        IntegrityError: any integrity problem; or no trusted key verified the signature
            and ``trust`` does not accept that.
        BundleFormatError: the container itself is malformed; or decoding its tables would
            cost more than :class:`bundler.format.parquet_cost.TableCostLimits` allows.
        OSError: the file cannot be read.
    """
    path = Path(path)
    opened = open_bundle(path, trust=trust, limits=limits)
    rep = opened.report
    if any(not is_trust_problem(p) for p in rep.problems) or opened.manifest is None:
        raise IntegrityError(
            f"{path}: does not verify ({len(rep.problems)} problem(s)); refused", rep.problems
        )
    if not trust.accepts(rep.signature_status):
        raise UntrustedError(
            f"{path}: signature {rep.signature_status}: no trusted key verified it; refused "
            "(pass the signer's public key, or accept unsigned bundles explicitly)",
            rep.problems,
        )
    # A verified table can still decode to gigabytes (one long string named by every row
    # of a dictionary-coded column, a zstd page of one repeated byte): bounded here, from
    # the page headers, before any consumer decodes a table.
    cost = table_cost_problems(opened.members)
    if cost:
        raise BundleFormatError(
            f"{path}: its tables would cost more to decode than the reader allows; refused", cost
        )
    return VerifiedBundle(opened, path, _TOKEN)
