"""``bundle sign``: add a countersignature to a bundle; no other member changes."""

from __future__ import annotations

from pathlib import Path

import click

from reprobundle.cli.common import (
    QUIET,
    cli_errors,
    emit_json,
    examples,
    exits,
    json_option,
    load_trust,
    say,
    verbosity_options,
    verdict,
)

__all__ = ["SIGN_EXIT_HELP", "sign_command"]


SIGN_EXIT_HELP = exits(
    "0  signature added (countersigned, or ADOPTED with --force-adopt)",
    "1  the bundle has an integrity problem, or no trusted key verified a signature",
    "2  bundle missing, key unreadable or not Ed25519, that key already signed, no",
    "   trust option given",
    "3  cannot read or write",
)


@click.command(
    name="sign",
    epilog=examples(
        "bundle sign run.bundle --key auditor --key-pub author.pub -o co.bundle",
    )
    + SIGN_EXIT_HELP,
)
@click.argument("bundle", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--key",
    "key_path",
    type=click.Path(path_type=Path),
    required=True,
    help="Private key to countersign with.",
)
@click.option(
    "--passphrase-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="File holding the passphrase of an encrypted --key (never prompted).",
)
@click.option(
    "--key-pub",
    "trusted_paths",
    type=click.Path(path_type=Path),
    multiple=True,
    help="Public key of a signer you trust (repeatable); one existing signature must verify.",
)
@click.option(
    "--trusted-keys",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Trusted keys: a list of PEM paths and 'ssh-ed25519 ...' lines, or an OpenSSH "
    "allowed_signers file (principals are shown).",
)
@click.option(
    "--force-adopt",
    is_flag=True,
    help="Sign although no trusted key verified an existing signature (you vouch for it).",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    help="Write the countersigned bundle here instead of replacing BUNDLE.",
)
@verbosity_options
@json_option
def sign_command(
    bundle: Path,
    key_path: Path,
    passphrase_file: Path | None,
    trusted_paths: tuple[Path, ...],
    trusted_keys: Path | None,
    force_adopt: bool,
    output: Path | None,
    verbosity: int,
    as_json: bool,
) -> None:
    """Add a countersignature to BUNDLE; no other member changes.

    An existing signature must verify with a key given by --key-pub or
    --trusted-keys; otherwise signing would adopt a bundle nobody you trust
    signed, which takes --force-adopt (and is reported as an adoption).
    """
    from bundler.format.keys import load_private_key, read_passphrase_file
    from bundler.sign import countersign

    with cli_errors(as_json):
        pw = read_passphrase_file(passphrase_file) if passphrase_file else None
        res = countersign(
            bundle,
            load_private_key(key_path, pw),
            output,
            # --force-adopt accepts a bundle no trusted key signed: signing it adopts it.
            trust=load_trust(trusted_paths, trusted_keys, force_adopt),
        )
        if as_json:
            emit_json(
                {
                    "ok": True,
                    "output": str(res.output),
                    "added": res.added,
                    "signers": res.signers,
                    "endorsed": res.endorsed,
                    "adopted": res.adopted,
                    "unverified": res.unverified,
                }
            )
            return
        say(
            verdict("SIGNED", "good"),
            f" {res.output} as {res.added}; {len(res.signers)} signature(s)",
        )
        if verbosity <= QUIET:
            return
        if res.endorsed:
            say(f"  countersigns a signature verified by {', '.join(res.endorsed)}")
        else:
            held = ", ".join(map(str, res.unverified)) or "none: the bundle was unsigned"
            say(
                "  ADOPTED (--force-adopt): no trusted key verified an existing signature "
                f"(unverified: {held}); this signature vouches for the bundle by itself"
            )
