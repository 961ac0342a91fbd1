"""A small working folder for CLI tests: a campaign, two key pairs, a signed bundle.

The help examples (``bundle X --help``) are written against these names:
``campaign/``, ``author``/``author.pub``, ``auditor``/``auditor.pub``,
``run.bundle`` (signed by author), ``trusted.txt``, ``summary.md`` and
``evidence/`` (a folder holding a copy of ``run.bundle``).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from bundler.format.keys import generate_keypair, load_private_key
from bundler.seal import seal_campaign
from tests.reference_server.campaign import write_campaign


def make_workspace(root: Path) -> Path:
    """Write the example workspace under ``root`` and return ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    write_campaign(root / "campaign")
    generate_keypair(root / "author")
    generate_keypair(root / "auditor")
    seal_campaign(root / "campaign", root / "run.bundle", keys=[load_private_key(root / "author")])
    (root / "trusted.txt").write_text("# keys I trust\nauthor.pub\n", encoding="utf-8")
    (root / "summary.md").write_text("Faster start-up, see vLLM-Omni PR 9241.\n", encoding="utf-8")
    (root / "evidence").mkdir()
    shutil.copy(root / "run.bundle", root / "evidence" / "run.bundle")
    # A vLLM `bench serve --save-detailed` pair for `bundle import`'s examples.
    results = Path(__file__).resolve().parents[1] / "samples" / "vllm-serve-sweep" / "results"
    for arm, name in (("baseline", "base.json"), ("candidate", "cand.json")):
        src = results / f"openai-chat-infqps-concurrency8-synthetic-{arm}.json"
        shutil.copy(src, root / name)
    return root
