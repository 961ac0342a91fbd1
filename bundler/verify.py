"""``bundle verify``: signatures, every member's bytes, and external artifacts, offline.

:func:`check_bundle` returns a :class:`VerifyReport` listing every problem;
:func:`verify_bundle` raises :class:`~bundler.errors.IntegrityError` if there
is any. Order of trust: the envelope's signatures are checked over the exact
payload bytes before the payload is parsed; the manifest is trusted only
because the signed statement names its digest.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from bundler.errors import BundleFormatError, IntegrityError, Problem
from bundler.format.container import Limits, read_container
from bundler.format.manifest import ENVELOPE_NAME, MANIFEST_NAME
from bundler.format.tables import TABLE_NAMES
from bundler.format.trust import NO_TRUST, Trust
from bundler.verify_external import check_external
from bundler.verify_members import check_duplicates, check_members, check_statement, check_tables
from bundler.verify_report import (
    UNTRUSTED_FIELD,
    ExternalCheck,
    OpenedBundle,
    VerifyReport,
    is_trust_problem,
)
from bundler.verify_signed import check_signatures, json_cost, read_manifest

# The report types and the checks live in their own modules (verify_report,
# verify_signed, verify_members, verify_external); their public names stay
# importable from here, the module ``bundle verify`` is named after.
__all__ = [
    "UNTRUSTED_FIELD",
    "ExternalCheck",
    "OpenedBundle",
    "VerifyReport",
    "check_bundle",
    "is_trust_problem",
    "json_cost",
    "needed_for_verify",
    "open_bundle",
    "verify_bundle",
]

_TABLE_MEMBERS = frozenset(f"tables/{name}.parquet" for name in TABLE_NAMES)


def needed_for_verify(name: str) -> bool:
    """True for the members whose bytes verification reads (envelope, manifest, tables).

    Every other member is only hashed: ``check_bundle`` reads with this as
    ``keep``, so their bytes are never stored.
    """
    return name in (MANIFEST_NAME, ENVELOPE_NAME) or name in _TABLE_MEMBERS


def open_bundle(
    path: Path,
    *,
    trust: Trust = NO_TRUST,
    limits: Limits | None = None,
    keep: Callable[[str], bool] | None = None,
) -> OpenedBundle:
    """Read ``path`` and check signatures, manifest, members and table formats.

    Never raises for integrity problems: they are in ``.report.problems``.
    ``keep`` (default: all) selects the members whose bytes stay readable
    through ``.members``; pass :func:`needed_for_verify` when only the report
    matters (every member is hashed and checked either way).

    Raises:
        BundleFormatError: the container itself is malformed (see ``read_container``).
        UsageError: ``path`` is not a regular file.
        OSError: the file cannot be read.
    """
    lim = limits or Limits()
    report = VerifyReport(str(path), trust=trust)
    if keep is not None:
        # Verification itself reads the envelope, manifest and tables whatever the caller keeps.
        wanted = keep

        def keep_also_needed(name: str) -> bool:
            return needed_for_verify(name) or wanted(name)

        keep = keep_also_needed
    members = {m.name: m for m in read_container(Path(path), lim, keep=keep)}
    statement = check_signatures(report, members, trust, lim)
    manifest = read_manifest(report, members, lim)
    if manifest is not None:
        report.format_version = manifest.format_version
        report.campaign = manifest.campaign.to_dict()
        check_duplicates(report, manifest)
        check_members(report, members, manifest)
        if statement is not None:
            check_statement(report, members, manifest, statement)
        check_tables(report, members, manifest, lim)
    return OpenedBundle(members, manifest, report)


def check_bundle(
    path: Path,
    *,
    trust: Trust = NO_TRUST,
    media_dirs: Sequence[Path] = (),
    jobs: int | None = None,
    progress: Callable[[int], None] | None = None,
    limits: Limits | None = None,
) -> VerifyReport:
    """Verify the bundle at ``path`` and return a report of every problem found.

    A malformed container is reported as a problem too, never raised.
    """
    try:
        opened = open_bundle(
            path,
            trust=trust,
            limits=limits,
            keep=needed_for_verify,  # the other members are hashed, never stored
        )
    except BundleFormatError as exc:
        report = VerifyReport(str(path), trust=trust)
        message = exc.message.removeprefix(f"{path}: ")
        report.problems.append(Problem(str(path), None, None, message))
        report.problems.extend(exc.problems)
        return report
    report = opened.report
    if opened.manifest is not None:
        check_external(report, opened.manifest, media_dirs, jobs, progress)
    return report


def verify_bundle(
    path: Path,
    *,
    trust: Trust = NO_TRUST,
    media_dirs: Sequence[Path] = (),
    jobs: int | None = None,
) -> VerifyReport:
    """Like :func:`check_bundle` but raise :class:`IntegrityError` unless it verified."""
    report = check_bundle(path, trust=trust, media_dirs=media_dirs, jobs=jobs)
    if not report.ok:
        damaged = [p for p in report.problems if not is_trust_problem(p)]
        reason = f"{len(damaged)} problem(s)" if damaged else f"signature {report.signature_status}"
        raise IntegrityError(f"{path}: does not verify ({reason})", report.problems)
    return report
