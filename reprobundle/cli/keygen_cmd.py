"""``bundle keygen``: create an Ed25519 key pair and print its key ID."""

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
    say,
    verbosity_options,
)

__all__ = ["KEYGEN_EXIT_HELP", "keygen_command"]


KEYGEN_EXIT_HELP = exits(
    "0  key pair written",
    "2  output exists (no --force), passphrase file missing, bad arguments",
    "3  cannot write the key files",
)


@click.command(
    name="keygen",
    epilog=examples(
        "bundle keygen -o mykey          # writes mykey and mykey.pub",
        "bundle keygen -o mykey2 --json  # prints the key id as JSON",
    )
    + KEYGEN_EXIT_HELP,
)
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    required=True,
    help="Private key file to write; the public key goes to OUTPUT.pub.",
)
@click.option(
    "--passphrase-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Encrypt the private key with the passphrase in this file (never prompted).",
)
@click.option("--force", is_flag=True, help="Overwrite existing key files.")
@verbosity_options
@json_option
def keygen_command(
    output: Path, passphrase_file: Path | None, force: bool, verbosity: int, as_json: bool
) -> None:
    """Create an Ed25519 key pair and print its key ID and its OpenSSH public line.

    Both key files are PEM. The OpenSSH line (ssh-ed25519 AAAA...) is the same
    public key for an allowed_signers file, a USER.keys list or ssh-keygen -lf;
    OUTPUT's folder is created if it does not exist.
    """
    from bundler.format.keys import generate_keypair, read_passphrase_file

    with cli_errors(as_json):
        pw = read_passphrase_file(passphrase_file) if passphrase_file else None
        kp = generate_keypair(output, pw, force=force)
        if as_json:
            emit_json(
                {
                    "ok": True,
                    "private_key": str(kp.private_path),
                    "public_key": str(kp.public_path),
                    "key_id": kp.key_id,
                    "public_key_openssh": kp.openssh,
                }
            )
        else:
            if verbosity <= QUIET:
                say(kp.key_id)
                return
            say(f"private key: {kp.private_path}")
            say(f"public key:  {kp.public_path}")
            say(f"key id:      {kp.key_id}")
            say(f"openssh:     {kp.openssh}")
