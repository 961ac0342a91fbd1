"""``bundle run``: an author's first run of a frozen plan, with the runner ``bundle rerun`` uses.

Authors timing their campaigns with their own scripts and third parties rerunning
with ours would measure at different boundaries (vLLM-Omni's ``vllm bench serve
--omni`` stops its clock at the poll that reads "completed", never downloads and
never deletes). ``bundle run PLAN -o DIR`` executes the plan with the same runner
as ``bundle rerun`` (launch or endpoints, A/B order, warmups, deadlines and the
level that fired, runtime commit check, worker exits, telemetry, media hashes)
and writes a campaign directory (kind ``campaign`` or ``pilot``) for
``bundle seal``. It publishes no claims: those are the author's to write.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bundler._internal.jsonload import JsonLoadError, loads
from bundler._internal.schemas import document_errors
from bundler._internal.userfile import DOCUMENT_MAX_BYTES, read_user_file
from bundler.errors import Problem, UsageError
from bundler.format.plan_model import Plan
from rerun.options import RerunOptions
from rerun.prepare import PreparedRerun, prepare_plan
from rerun.writer import SealedSource

__all__ = ["RunSpec", "prepare_first_run"]

_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
_PLAN_ID = re.compile(r"^[A-Za-z0-9._-]{1,100}$")
_COMMIT = re.compile(r"^[0-9a-f]{7,64}$")
KINDS = ("campaign", "pilot")


@dataclass(frozen=True)
class RunSpec:
    """The campaign a first run writes: its id, title, kind and each arm's runtime commit.

    ``commits`` maps every arm of the plan's ``arm_order`` to its commit; the
    first arm in ``arm_order`` is the baseline unless ``baseline`` names another.
    """

    campaign_id: str
    commits: Mapping[str, str]
    title: str | None = None
    kind: str = "campaign"
    baseline: str | None = None


def _read_plan(path: Path) -> tuple[dict[str, Any], bytes]:
    data = read_user_file(path, what="plan", max_bytes=DOCUMENT_MAX_BYTES)
    try:
        # The bounded loader: Python's json turns a 400-digit count into an OverflowError
        # where the schedule converts it, and nesting 100,000 deep into a RecursionError.
        doc = loads(data.decode("utf-8"), source=data)
    except JsonLoadError as exc:
        problem = Problem(str(path), None, exc.field, str(exc))
        raise UsageError(f"{path}: not a usable plan", [problem]) from None
    except ValueError as exc:
        raise UsageError(f"{path}: not valid JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise UsageError(f"{path}: a plan must be a JSON object")
    problems = [Problem(str(path), None, f, m) for f, m in document_errors("plan", doc)]
    if problems:
        raise UsageError(f"{path}: breaks the plan schema; refused", problems)
    return doc, data


def _arms(spec: RunSpec, arm_order: Sequence[str]) -> list[dict[str, str]]:
    arms = list(dict.fromkeys(arm_order))
    problems = []
    if not _ID.match(spec.campaign_id):
        problems.append(f"campaign id {spec.campaign_id!r} must match {_ID.pattern}")
    if spec.kind not in KINDS:
        problems.append(f"kind {spec.kind!r} must be one of {', '.join(KINDS)}")
    missing = [a for a in arms if a not in spec.commits]
    extra = [a for a in spec.commits if a not in arms]
    if missing:
        problems.append("no --arm ARM=COMMIT for " + ", ".join(missing))
    if extra:
        problems.append("--arm names no arm of the plan's arm_order: " + ", ".join(extra))
    bad = [f"{a}={c}" for a, c in spec.commits.items() if not _COMMIT.match(c)]
    if bad:
        problems.append("a runtime commit is 7 to 64 lowercase hex digits: " + ", ".join(bad))
    baseline = spec.baseline or (arms[0] if arms else None)
    if baseline not in arms:
        problems.append(f"--baseline {baseline!r} is not an arm of the plan")
    if len(arms) < 2:
        problems.append("a campaign compares at least two arms")
    if problems:
        raise UsageError("bundle run: " + "; ".join(problems))
    return [
        {
            "id": a,
            "role": "baseline" if a == baseline else "candidate",
            "runtime_commit": spec.commits[a],
        }
        for a in arms
    ]


def prepare_first_run(plan_path: Path, spec: RunSpec, options: RerunOptions) -> PreparedRerun:
    """Read the plan file and resolve its first run for ``spec``, starting nothing.

    Input files come from ``options.inputs`` only (there is no bundle yet).

    Raises:
        UsageError: the plan is unreadable or breaks the plan schema, ``spec`` does
            not fit its arms, the plan cannot be scheduled, a target or an input is
            missing, or (kind ``campaign``) ``bundle plan check`` finds errors that
            would block ``bundle seal``.
    """
    doc, data = _read_plan(plan_path)
    plan_id = str(doc.get("id", ""))
    if not _PLAN_ID.match(plan_id):
        raise UsageError(f"{plan_path}: plan id {plan_id!r} must match {_PLAN_ID.pattern}")
    name = f"plans/{plan_id}.json"
    plan = Plan.from_dict(doc, name)
    arms = _arms(spec, [str(a) for a in doc.get("arm_order", [])])
    first = {
        "id": spec.campaign_id,
        "title": spec.title or f"{spec.campaign_id}: first run of {plan_id}",
        "kind": spec.kind,
        "arms": arms,
    }
    source = SealedSource("", {"id": spec.campaign_id, "arms": arms}, name, data, first_run=first)
    prep = prepare_plan(source, plan, options)
    errors = [f for f in prep.check.findings if f.level == "error"]
    if errors and spec.kind == "campaign":
        raise UsageError(
            f"{plan_path}: bundle plan check finds errors that block sealing a campaign "
            "(run it as --kind pilot to keep them as warnings)",
            [Problem(name, None, f.path, f"[{f.code}] {f.message}") for f in errors],
        )
    return prep
