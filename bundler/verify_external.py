"""External artifacts (media outside the bundle): found by path in the given folders, hashed.

Absent is a normal state of an external artifact; a file found with another
digest, or unreadable, is a problem.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from bundler.errors import Problem
from bundler.format.container import member_name_problem
from bundler.format.hashing import hash_files
from bundler.format.manifest import EXTERNAL_PREFIX
from bundler.format.model import ExternalEntry, Manifest
from bundler.verify_report import ExternalCheck, VerifyReport

__all__ = ["check_external"]


def _external_check(
    e: ExternalEntry, status: str, found_at: str | None = None, detail: str | None = None
) -> ExternalCheck:
    return ExternalCheck(
        e.path, e.kind, e.sha256, e.bytes, e.availability, status, found_at, detail
    )


def check_external(
    report: VerifyReport,
    manifest: Manifest,
    media_dirs: Sequence[Path],
    jobs: int | None,
    progress: Callable[[int], None] | None,
) -> None:
    found: dict[int, Path] = {}
    for i, e in enumerate(manifest.external):
        if (why := member_name_problem(e.path)) is not None:
            # Never let a manifest steer hashing outside the --media folders.
            report.problems.append(
                Problem(EXTERNAL_PREFIX + e.path, None, "path", f"unacceptable path: {why}")
            )
            continue
        for d in media_dirs:
            for cand in (d / e.path, d / Path(e.path).name):
                if cand.is_file():
                    found[i] = cand
                    break
            if i in found:
                break
    digests = hash_files(list(found.values()), jobs=jobs, progress=progress)
    for i, e in enumerate(manifest.external):
        p = found.get(i)
        if p is None:
            # Absent is a normal state of an external artifact, never a failure.
            status = "absent" if media_dirs else "external"
            report.external.append(_external_check(e, status=status))
            continue
        dg = digests[p]
        if dg.error:
            report.external.append(
                _external_check(e, status="unreadable", found_at=str(p), detail=dg.error)
            )
            report.problems.append(
                Problem(EXTERNAL_PREFIX + e.path, None, None, f"{p}: cannot read: {dg.error}")
            )
        elif dg.sha256 != e.sha256:
            report.external.append(
                _external_check(e, status="mismatch", found_at=str(p), detail=f"sha256 {dg.sha256}")
            )
            report.problems.append(
                Problem(
                    EXTERNAL_PREFIX + e.path,
                    None,
                    "sha256",
                    f"{p} does not match the sealed digest",
                )
            )
        else:
            report.external.append(_external_check(e, status="ok", found_at=str(p)))
