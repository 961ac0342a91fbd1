"""One error tree, mapped to exit codes in one place.

Integrity failures (the bundle or a claim does not hold) and operational
failures (we could not run) sit in separate subtrees so that a caller can tell
"tampered" from "could not check". The CLI maps ``exit_code`` to the process
exit status; see ``docs/exit-codes.md``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "EXIT_CLAIM_CONTRADICTED",
    "EXIT_COULD_NOT_RUN",
    "EXIT_DIFFERS",
    "EXIT_INTEGRITY",
    "EXIT_OK",
    "EXIT_UNVERIFIABLE",
    "EXIT_USAGE",
    "BundleError",
    "BundleFormatError",
    "CampaignError",
    "CouldNotRunError",
    "IntegrityError",
    "KeyFileError",
    "Problem",
    "UntrustedError",
    "UsageError",
]

EXIT_OK = 0
EXIT_INTEGRITY = 1
EXIT_USAGE = 2
EXIT_COULD_NOT_RUN = 3
EXIT_CLAIM_CONTRADICTED = 4
EXIT_UNVERIFIABLE = 5
EXIT_DIFFERS = 6
"""``bundle diff``: both bundles verified, and their content differs."""


@dataclass(frozen=True, order=True)
class Problem:
    """One thing wrong with an input, located as precisely as we can.

    ``where`` is a file (campaign-relative path or bundle member), ``record`` a
    line number or record id (``None`` for whole-file problems) and ``field``
    the offending field (``None`` when the problem is the record itself).
    """

    where: str
    record: str | None
    field: str | None
    message: str

    def __str__(self) -> str:
        loc = self.where
        if self.record is not None:
            loc += f", record {self.record}"
        if self.field is not None:
            loc += f", field {self.field!r}"
        return f"{loc}: {self.message}"


class BundleError(Exception):
    """Base of every error reprobundle raises on purpose."""

    exit_code = EXIT_COULD_NOT_RUN

    def __init__(self, message: str, problems: list[Problem] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.problems: list[Problem] = list(problems or [])

    def __str__(self) -> str:
        if not self.problems:
            return self.message
        lines = [self.message, *(f"  - {p}" for p in self.problems)]
        return "\n".join(lines)


class UsageError(BundleError):
    """The user's input (arguments, campaign files) is wrong: exit 2."""

    exit_code = EXIT_USAGE


class CampaignError(UsageError):
    """A campaign directory failed validation; ``problems`` lists every one."""


class KeyFileError(UsageError):
    """A key file is missing, unreadable, encrypted without a passphrase, or not Ed25519."""


class IntegrityError(BundleError):
    """The bundle does not hold: tampered, truncated, unsigned or badly signed: exit 1."""

    exit_code = EXIT_INTEGRITY


class UntrustedError(IntegrityError):
    """Intact, but no trusted key verified a signature and the reader does not accept that.

    Kept apart from the other integrity errors so that advice about keys and
    ``--allow-unsigned`` is given only where a key is what is missing: no key
    repairs a corrupt bundle.
    """


class BundleFormatError(IntegrityError):
    """The archive is malformed or crafted (bad member path, bomb, unknown version)."""


class CouldNotRunError(BundleError):
    """An operational failure (I/O, missing optional dependency): exit 3."""

    exit_code = EXIT_COULD_NOT_RUN
