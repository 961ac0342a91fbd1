"""``bundle init``: write a campaign skeleton an author fills in by hand.

The skeleton is complete in structure (every required file, every required
field) and annotated: ``campaign.json`` and the plan carry ``"$comment"``
members (kept as unknown members, see ``specs/campaign-layout.md``), and
``README.md`` explains each file. It deliberately does **not** seal as it is:
the values only the author knows (the runtime commits) are left as ``FILL-IN``
placeholders that fail validation, so ``bundle seal`` on an untouched skeleton
fails with exactly the "fill this in" errors and never seals invented evidence.
``receipts.jsonl`` starts empty and ``claims.json`` claims nothing: once the
commits are filled in the skeleton seals, and replay of it says NOT EVIDENCED.
The README's commands are run verbatim by ``tests/test_init_export.py``.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bundler.errors import UsageError

__all__ = ["FILL_IN", "ScaffoldResult", "scaffold_campaign"]

FILL_IN = "FILL-IN"
"""Prefix of every placeholder the author must replace."""

_ID = re.compile(r"^[a-z0-9][a-z0-9._-]{0,99}$")


@dataclass(frozen=True)
class ScaffoldResult:
    """What ``scaffold_campaign`` wrote."""

    directory: Path
    files: list[str]
    to_fill: list[str]


def _campaign(campaign_id: str) -> dict[str, Any]:
    return {
        "$comment": (
            "Describe the campaign. Replace every FILL-IN value; bundle seal rejects the "
            "skeleton until you do. Field reference: specs/campaign-layout.md."
        ),
        "layout_version": "1",
        "id": campaign_id,
        "title": f"{campaign_id}: one line saying what was compared, on what hardware",
        "kind": "campaign",
        "hardware": {"accelerator": "describe the accelerator, e.g. 'NVIDIA H200'", "count": 1},
        "arms": [
            {
                "$comment": "The reference runtime: the git commit the baseline servers ran.",
                "id": "baseline",
                "role": "baseline",
                "runtime_commit": f"{FILL_IN}: the baseline runtime's commit (7-64 hex digits)",
            },
            {
                "$comment": "The changed runtime: the git commit the candidate servers ran.",
                "id": "candidate",
                "role": "candidate",
                "runtime_commit": f"{FILL_IN}: the candidate runtime's commit (7-64 hex digits)",
            },
        ],
        "plan": "plans/plan.json",
    }


def _plan() -> dict[str, Any]:
    return {
        "$comment": (
            "The frozen plan: written before the run, never edited after. Arm order, "
            "requests per server, timing boundary, timeouts and teardown budgets. "
            "Reference: specs/plan-check.md; check it with: bundle plan check plans/plan.json"
        ),
        "plan_version": "1",
        "id": "plan",
        "arm_order": ["baseline", "candidate", "candidate", "baseline"],
        "warmups_per_server": 2,
        "measured_per_server": 3,
        "request": {"api": "videos-sync", "timing_boundary": "post_to_response"},
        "timeouts": {"request_s": 600, "wave_s": 3600},
        "startup_budget_s": 600,
        "reservation": {
            "$comment": "The device reservation the run had, in seconds from its start.",
            "hard_limit_s": 21600,
            "soft_term_s": 20700,
            "kill_grace_s": 180,
        },
        "teardown": {
            "baseline": {"term_wait_s": 60, "kill_wait_s": 90},
            "candidate": {"term_wait_s": 60, "kill_wait_s": 90},
        },
    }


_README = """\
# {cid}: campaign skeleton (`bundle init`)

Run these from the folder that holds `{cid}/` (where you ran `bundle
init`). The bundle is written next to the campaign folder: `bundle seal`
refuses to write it inside (from inside, use `bundle seal . -o
../{cid}.bundle ...`).

    $ bundle keygen -o my-key  # writes my-key and my-key.pub; or use your own key
    $ bundle plan check {cid}/plans/plan.json
    $ bundle seal {cid} -o {cid}.bundle --key my-key  # exit 2 until FILL-IN is replaced
    $ bundle replay {cid}.bundle --key my-key.pub  # NOT EVIDENCED (exit 5) until it claims

`bundle seal` refuses the skeleton as it is and names each `FILL-IN` value
(file, record, field): the two runtime commits. Once they are real, it seals,
with `receipts.jsonl` still empty and `claims.json` `[]`; `bundle replay` of
that bundle then says NOT EVIDENCED (exit 5): nothing is claimed and no
request was recorded, so there is nothing to confirm or contradict. Fill in
the receipts and the claims you state, and check the title, hardware and plan
values (plausible defaults that seal cannot tell from real ones). This README
is carried in the bundle as `files/README.md`: replace this text with what a
reader of the bundle should know.

- `campaign.json`: id, title, hardware, and each arm's `runtime_commit`
  (the git commit the arm's servers ran: 7 to 64 lower-case hex digits).
- `plans/plan.json`: the frozen plan: arm order, warmups and measured
  requests per server, request API and timing boundary, timeouts, teardown
  budgets. Each entry of `arm_order` is one server slot, in run order; replay
  assigns the servers of your receipts to the slots by first start (the
  earliest `start` of each server's warmup or measured requests), so the
  server that started first must belong to the first slot's arm.
- `attempts.jsonl`: one line per attempt, kept whether it counted or not;
  exactly one `accepted` (an `interrupted` or `rejected` one needs a `reason`).
- `receipts.jsonl`: one line per HTTP request (`request_id`, `attempt_id`,
  `arm`, `server`, `phase` warmup/measured/quality, `seq`, `start`, `end` in
  RFC 3339, `e2e_s`, `status`); starts empty. `seq` numbers one server's
  requests within one attempt from 0, across phases (warmups, measured and
  quality requests share one sequence); a duplicate is a plan deviation.
- `claims.json`: the figures you state, each re-derived by `bundle replay`
  (e.g. `percent_lower` of the arm means at 2 decimals); `[]` claims nothing.

A receipts line (one JSON object per line):

    {{"request_id": "b1-0", "attempt_id": "run-1", "arm": "baseline",
      "server": "b1", "phase": "warmup", "seq": 0,
      "start": "2026-03-01T10:00:00Z", "end": "2026-03-01T10:02:09Z",
      "e2e_s": 129.0, "status": "ok"}}

(written here on four lines; in the file, one line each.)

Optional tables (`worker_exits`, `telemetry`, `gates`, `comparisons`,
`sources`, `not_claimed`, `artifacts`), `scorer.json` and `logs/` are described
in `specs/campaign-layout.md`; an absent optional table is sealed empty.
"""


def _files(campaign_id: str) -> dict[str, str]:
    def js(doc: Any) -> str:
        return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"

    return {
        "README.md": _README.format(cid=campaign_id),
        "campaign.json": js(_campaign(campaign_id)),
        "plans/plan.json": js(_plan()),
        "attempts.jsonl": json.dumps(
            {"attempt_id": "run-1", "status": "accepted", "note": "the run your receipts come from"}
        )
        + "\n",
        "receipts.jsonl": "",
        "claims.json": "[]\n",
    }


def scaffold_campaign(directory: Path, campaign_id: str | None = None) -> ScaffoldResult:
    """Write a campaign skeleton into ``directory`` (which must not exist, or be empty).

    All files are written into a temporary sibling folder that is then renamed
    into place, so an interrupted ``init`` leaves nothing half-written.

    Raises:
        UsageError: ``directory`` exists and is not an empty folder, or the
            campaign id (default: the folder name) is not a valid id.
    """
    cid = campaign_id if campaign_id is not None else directory.name.lower()
    if not _ID.match(cid):
        raise UsageError(
            f"{directory}: campaign id {cid!r} is not a valid id (lower-case letters, digits, "
            "'.', '_', '-', starting with a letter or digit); give --id"
        )
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise UsageError(f"{directory}: exists and is not an empty folder; init writes a new one")
    parent = directory.parent
    parent.mkdir(parents=True, exist_ok=True)
    files = _files(cid)
    tmp = Path(tempfile.mkdtemp(prefix=f".{directory.name}.init-", dir=parent))
    try:
        for rel, text in files.items():
            path = tmp / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        tmp.chmod(0o755)
        if directory.exists():
            directory.rmdir()  # empty, checked above
        tmp.replace(directory)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return ScaffoldResult(
        directory=directory,
        files=sorted(files),
        to_fill=[
            "campaign.json: arms[0].runtime_commit, arms[1].runtime_commit (FILL-IN)",
            "receipts.jsonl: one line per request (starts empty: seals, replay says NOT EVIDENCED)",
            "claims.json: the figures you state (starts empty: claims nothing)",
        ],
    )
