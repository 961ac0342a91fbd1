"""Options shared by ``bundle replay`` and ``bundle report``, and the one replay both run.

Both commands verify each bundle once (:func:`bundler.verified.open_verified`),
replay once (:func:`replay.api.replay`, with the media re-score and the rerun
comparison when asked) and render the one result: the report is a view of the
same verdict ``replay`` prints.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from bundler.errors import IntegrityError, UsageError

if TYPE_CHECKING:
    from bundler.format.trust import Trust

__all__ = ["ReplayArgs", "media_options", "run_replay"]

F = TypeVar("F", bound=Callable[..., Any])

_TRUST_HINT = (
    "give the signer's public key (--key PUB or --trusted-keys FILE), or --allow-unsigned to "
    "accept a bundle no trusted key signed (every section then says so)"
)


def media_options(f: F) -> F:
    """The rerun (``--against``, ``--tolerance``) and media re-score options."""
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


class ReplayArgs:
    """What the shared options parsed, for :func:`run_replay`."""

    def __init__(self, **kw: Any) -> None:
        self.bundle: Path = kw["bundle"]
        self.trust: Trust = kw["trust"]
        self.against: Path | None = kw.get("against")
        self.tolerance: float | None = kw.get("tolerance")
        self.media_dirs: tuple[Path, ...] = tuple(kw.get("media_dirs") or ())
        self.scorer_weights: Path | None = kw.get("scorer_weights")
        self.jobs: int = kw.get("jobs", 1)
        self.device: str | None = kw.get("device")
        self.executor: str = kw.get("executor") or "local"
        self.ray_address: str | None = kw.get("ray_address")
        self.lpips_batch: int | None = kw.get("lpips_batch")
        self.progress: bool = kw.get("progress", True) and not kw.get("as_json", False)


def _open(path: Path, args: ReplayArgs) -> Any:
    from bundler.verified import open_verified

    try:
        return open_verified(path, trust=args.trust)
    except IntegrityError as exc:
        if exc.problems:
            raise
        raise IntegrityError(f"{exc.message}; {_TRUST_HINT}") from exc


def run_replay(args: ReplayArgs) -> tuple[Any, Any]:
    """Verify BUNDLE (and ``--against``) once, replay once; return (verified bundle, result).

    Raises:
        UsageError: no key and no ``--allow-unsigned``; ``--scorer-weights`` without
            ``--media``; an unavailable ``--device``.
        IntegrityError, CouldNotRunError, BundleFormatError, OSError: from the library.
    """
    from replay.api import MediaRequest, replay

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
    verified = _open(args.bundle, args)
    against = _open(args.against, args) if args.against is not None else None
    bar = _MediaBar(enabled=args.progress)
    media = None
    device_errors: tuple[type[Exception], ...] = ()
    if args.media_dirs:
        from replay.media.lpips_attested import DeviceError

        device_errors = (DeviceError,)
        media = MediaRequest(
            media_dirs=args.media_dirs,
            weights_dir=args.scorer_weights,
            jobs=args.jobs,
            device=args.device,
            progress=bar.update,
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


class _MediaBar:
    """Progress per comparison on stderr, only on a terminal."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled and sys.stderr.isatty()
        self._bar: Any = None
        self._done = 0

    def update(self, ev: Any) -> None:
        if not self.enabled or not ev.comparisons_total:
            return
        if self._bar is None:
            self._bar = click.progressbar(
                length=ev.comparisons_total, label="re-scoring media", file=sys.stderr
            )
            self._bar.__enter__()
        if ev.comparisons_done > self._done:
            self._bar.update(ev.comparisons_done - self._done)
            self._done = ev.comparisons_done

    def close(self) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)
