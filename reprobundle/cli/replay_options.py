"""Options shared by ``bundle replay`` and ``bundle report``, and the one replay both run.

Both commands declare the shared options with :func:`replay_options`, turn them
into one :class:`ReplayArgs` with :func:`replay_args`, verify each bundle once
(:func:`bundler.verified.open_verified`), replay once (:func:`replay.api.replay`,
with the media re-score and the rerun comparison when asked) and render the one
result: the report is a view of the same verdict ``replay`` prints.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from bundler.errors import UntrustedError, UsageError
from reprobundle.cli.common import ProgressBar, load_trust, trust_options

if TYPE_CHECKING:
    from bundler.format.trust import Trust
    from bundler.verified import VerifiedBundle
    from replay.result import ReplayResult

__all__ = ["ReplayArgs", "replay_args", "replay_options", "run_replay"]

F = TypeVar("F", bound=Callable[..., Any])

_TRUST_HINT = (
    "give the signer's public key (--key PUB or --trusted-keys FILE), or --allow-unsigned to "
    "accept a bundle no trusted key signed (every section then says so)"
)


def replay_options(allow_unsigned_help: str) -> Callable[[F], F]:
    """The options replay and report share, in their help's order; :func:`replay_args` reads them.

    The rerun comparison (``--against``, ``--tolerance``), the media re-score,
    ``--progress``, then the trust options (``allow_unsigned_help`` says what
    ``--allow-unsigned`` means for the command).
    """

    def decorate(f: F) -> F:
        return _media_options(trust_options(allow_unsigned_help)(f))

    return decorate


def _media_options(f: F) -> F:
    for decorator in reversed(
        (
            click.option(
                "--against",
                type=click.Path(exists=True, dir_okay=False, path_type=Path),
                help="BUNDLE is a rerun: compare it side by side with this sealed bundle.",
            ),
            click.option(
                "--tolerance",
                type=click.FloatRange(min=0),
                default=None,
                help="With --against: relative tolerance on the speedup for 'reproduced' "
                "[default: 0.10].",
            ),
            click.option(
                "--media",
                "media_dirs",
                type=click.Path(exists=True, file_okay=False, path_type=Path),
                multiple=True,
                help="Folder with the raw media (found by SHA-256; repeatable): re-score "
                "every comparison.",
            ),
            click.option(
                "--scorer-weights",
                type=click.Path(exists=True, file_okay=False, path_type=Path),
                help="With --media: folder with the LPIPS weight files, verified against "
                "scorer.json.",
            ),
            click.option(
                "--jobs",
                type=click.IntRange(min=1),
                default=1,
                show_default=True,
                help="With --media: comparisons re-scored in parallel.",
            ),
            click.option(
                "--device",
                default=None,
                help="With --media: torch device for LPIPS (cpu, cuda[:N], npu[:N]) "
                "[default: cpu; with --executor ray, a GPU where the cluster has one].",
            ),
            click.option(
                "--executor",
                type=click.Choice(["local", "ray"]),
                default="local",
                show_default=True,
                help="With --media: score comparisons here (threads) or as Ray tasks "
                "(the [ray] extra).",
            ),
            click.option(
                "--ray-address",
                default=None,
                help="With --executor ray: the cluster to join (ray://HOST:10001 or HOST:6379) "
                "[default: a local cluster started and stopped here].",
            ),
            click.option(
                "--lpips-batch",
                type=click.IntRange(min=1),
                default=None,
                help="With --media: frames per LPIPS forward pass [default: by device "
                "and frame size; on a GPU from its free memory].",
            ),
            click.option("--progress/--no-progress", default=True, help="Progress on a terminal."),
        )
    ):
        f = decorator(f)
    return f


@dataclass(frozen=True)
class ReplayArgs:
    """What the shared options parsed, with the trust loaded, for :func:`run_replay`."""

    bundle: Path
    trust: Trust
    against: Path | None
    tolerance: float | None
    media_dirs: tuple[Path, ...]
    scorer_weights: Path | None
    jobs: int
    device: str | None
    executor: str
    ray_address: str | None
    lpips_batch: int | None
    progress: bool


def replay_args(
    bundle: Path,
    *,
    as_json: bool,
    key_paths: tuple[Path, ...],
    trusted_keys: Path | None,
    allow_unsigned: bool,
    against: Path | None,
    tolerance: float | None,
    media_dirs: tuple[Path, ...],
    scorer_weights: Path | None,
    jobs: int,
    device: str | None,
    executor: str,
    ray_address: str | None,
    lpips_batch: int | None,
    progress: bool,
) -> ReplayArgs:
    """The :class:`ReplayArgs` of BUNDLE from the options :func:`replay_options` declares.

    Raises:
        UsageError: an unreadable key or trusted-keys file.
    """
    return ReplayArgs(
        bundle=bundle,
        # Options that trust nobody are refused by run_replay, with replay's own hint.
        trust=load_trust(key_paths, trusted_keys, allow_unsigned),
        against=against,
        tolerance=tolerance,
        media_dirs=media_dirs,
        scorer_weights=scorer_weights,
        jobs=jobs,
        device=device,
        executor=executor,
        ray_address=ray_address,
        lpips_batch=lpips_batch,
        # No bar with --json, as for seal and verify.
        progress=progress and not as_json,
    )


def _open(path: Path, args: ReplayArgs) -> VerifiedBundle:
    from bundler.verified import open_verified

    try:
        return open_verified(path, trust=args.trust)
    except UntrustedError as exc:
        # Only here is a key (or --allow-unsigned) the remedy: a damaged bundle is refused
        # with --allow-unsigned too, and its error says what is damaged instead.
        message = exc.message.split(" (pass the signer", 1)[0]
        raise UntrustedError(f"{message}; {_TRUST_HINT}", exc.problems) from exc


def run_replay(args: ReplayArgs) -> tuple[VerifiedBundle, ReplayResult]:
    """Verify BUNDLE (and ``--against``) once, replay once; return (verified bundle, result).

    Raises:
        UsageError: no key and no ``--allow-unsigned``; ``--scorer-weights`` without
            ``--media``; an unavailable ``--device``.
        IntegrityError, CouldNotRunError, BundleFormatError, OSError: from the library.
    """
    from replay.serving.inputs import parse_standby

    if args.trust.refuses_all:
        raise UsageError(_TRUST_HINT)
    if args.scorer_weights is not None and not args.media_dirs:
        raise UsageError("--scorer-weights needs --media DIR (the raw media to re-score)")
    if not args.media_dirs and (
        args.executor != "local" or args.ray_address or args.lpips_batch or args.device
    ):
        raise UsageError("--executor, --ray-address, --lpips-batch and --device need --media DIR")
    if args.ray_address and args.executor != "ray":
        raise UsageError("--ray-address needs --executor ray")
    if args.tolerance is not None and args.against is None:
        raise UsageError("--tolerance needs --against SEALED.bundle")
    with parse_standby(args.bundle):
        return _verify_and_replay(args)


def _verify_and_replay(args: ReplayArgs) -> tuple[VerifiedBundle, ReplayResult]:
    from replay.api import MediaRequest, replay

    verified = _open(args.bundle, args)
    against = _open(args.against, args) if args.against is not None else None
    bar = ProgressBar("re-scoring media", enabled=args.progress)
    media = None
    device_errors: tuple[type[Exception], ...] = ()
    if args.media_dirs:
        from replay.media.device import DeviceError

        device_errors = (DeviceError,)
        media = MediaRequest(
            media_dirs=args.media_dirs,
            weights_dir=args.scorer_weights,
            jobs=args.jobs,
            device=args.device,
            progress=bar.media,
            executor=args.executor,
            ray_address=args.ray_address,
            lpips_batch=args.lpips_batch,
        )
    try:
        result = replay(verified, media=media, against=against, tolerance=args.tolerance)
    except device_errors as exc:
        raise UsageError(str(exc)) from exc
    finally:
        bar.close()
    return verified, result
