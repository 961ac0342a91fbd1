"""``bundle rerun`` of a hostile bundle stays inside its folders (issue 19, defects 1-3).

An attacker seals a bundle that verifies (signed with a key the auditor trusts)
and hands it to an auditor, who reruns it. The bundle's plan may name an input
file outside ``--inputs`` (absolute, ``..``, through a symlink), server names
that climb out of ``-o`` or are absolute paths, and its own launch command.
Each test builds such a bundle the way the other rerun tests do
(``tests/reference_server/campaign.py``, sealed with a real Ed25519 key) and
runs the real CLI against real loopback servers.

Expected outcomes come from the threat, not from the code: the secret's bytes
never leave the machine (the loopback server sees no request at all), nothing
appears outside ``-o`` (the rest of the temporary tree is compared byte for byte
before and after), and a command from the bundle runs only after the explicit
opt-in and after being printed. The plan's ``launch.<arm>.env`` and ``{args}``
reach the auditor's own ``--launch-command`` only as data: a variable that runs
code (``LD_PRELOAD``, ``PATH``, ``BASH_ENV``, ...) is refused without the opt-in,
and author text never runs as shell code (a marker file it would create never
appears).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from bundler.seal import seal_campaign
from reprobundle.cli.rerun_cmd import rerun_command
from rerun.writer import RerunWriter, SealedSource
from tests.conftest import Keys
from tests.reference_server import REPO_ROOT
from tests.reference_server.campaign import campaign_plan, write_campaign

SECRET = b"-----BEGIN OPENSSH PRIVATE KEY-----\nSECRET-MARKER-7f3a91\n"
_MAX_BODY = 1 << 20


@dataclass
class Recorder:
    """What a loopback HTTP server received: one (method, path, body) per request."""

    url: str = ""
    requests: list[tuple[str, str, bytes]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def bodies(self) -> bytes:
        with self.lock:
            return b"".join(body for _, _, body in self.requests)


@contextmanager
def recording_server() -> Iterator[Recorder]:
    """A real HTTP server on 127.0.0.1 that records every request and answers 404."""
    rec = Recorder()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _record(self) -> None:
            size = min(int(self.headers.get("Content-Length") or 0), _MAX_BODY)
            body = self.rfile.read(size) if size else b""
            with rec.lock:
                rec.requests.append((self.command, self.path, body))
            data = b'{"error": "not here"}'
            self.send_response(404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_DELETE = _record

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    rec.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield rec
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(10)


def one_position_plan(**overrides: Any) -> dict[str, Any]:
    """One baseline position, one measured request, no telemetry: quick to run."""
    plan = campaign_plan(
        arm_order=["baseline"],
        servers=["baseline-1"],
        warmups_per_server=0,
        measured_per_server=1,
        telemetry={"source": "none"},
    )
    plan.update(overrides)
    return plan


def seal(tmp_path: Path, plan: dict[str, Any], keys: Keys) -> Path:
    """The attacker's campaign, sealed and signed (it verifies)."""
    camp = write_campaign(tmp_path / "attacker-campaign", plan)
    out = tmp_path / "hostile.bundle"
    seal_campaign(camp, out, keys=[keys.private])
    return out


def snapshot(root: Path, skip: Path) -> dict[str, str]:
    """Every path under ``root`` outside ``skip``: its file's SHA-256, or ``dir`` / ``link``."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        if here == skip or skip in here.parents:
            dirnames[:] = []
            continue
        for name in dirnames + filenames:
            p = here / name
            if p == skip:
                continue
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = f"link -> {p.readlink()}"
            elif p.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


# -- defect 1: input files stay inside --inputs -------------------------------------------------


def _hostile_input(tmp_path: Path, kind: str) -> tuple[str, Path]:
    """The payload's input_reference for ``kind``, and the auditor's --inputs folder.

    The secret lies outside the folder in every case.
    """
    secret = tmp_path / "home" / ".ssh" / "id_ed25519"
    secret.parent.mkdir(parents=True)
    secret.write_bytes(SECRET)
    inputs = tmp_path / "auditor-inputs"
    inputs.mkdir()
    if kind == "absolute":
        return str(secret), inputs
    if kind == "dotdot":
        return "../home/.ssh/id_ed25519", inputs
    if kind == "symlink-file":
        (inputs / "reference.png").symlink_to(secret)
        return "reference.png", inputs
    assert kind == "symlink-dir"
    (inputs / "shared").symlink_to(tmp_path / "home", target_is_directory=True)
    return "shared/.ssh/id_ed25519", inputs


def _run_cli(args: list[str]) -> Result:
    return CliRunner().invoke(rerun_command, args)


@pytest.mark.parametrize("dry_run", [False, True], ids=["run", "dry-run"])
@pytest.mark.parametrize("kind", ["absolute", "dotdot", "symlink-file", "symlink-dir"])
def test_an_input_outside_inputs_is_refused_before_it_is_read_or_sent(
    tmp_path: Path, keys: Keys, kind: str, dry_run: bool
) -> None:
    rel, inputs = _hostile_input(tmp_path, kind)
    plan = one_position_plan()
    plan["request"]["payload"]["input_reference"] = rel
    bundle = seal(tmp_path, plan, keys)
    out = tmp_path / "rerun"
    with recording_server() as server:
        res = _run_cli(
            [
                str(bundle),
                "-o",
                str(out),
                "--key",
                str(keys.public_path),
                "--endpoint",
                f"baseline={server.url}",
                "--allow-unverified-commit",
                "--inputs",
                str(inputs),
                *(["--dry-run"] if dry_run else []),
            ]
        )
        # Nothing reached the endpoint: not the secret, not even GET /version.
        assert server.requests == []
        assert SECRET not in server.bodies()
    assert res.exit_code == 2, res.output
    assert SECRET.decode() not in res.output
    # Located: the plan member and the payload field, and why.
    assert "plans/reference-ab.json" in res.output
    assert "request.payload.input_reference" in res.output
    assert "outside --inputs" in res.output
    assert not out.exists()


def test_inputs_inside_the_folder_still_work_through_an_inner_symlink(
    tmp_path: Path, keys: Keys
) -> None:
    """Honest layouts keep working: a symlink that stays inside --inputs is followed."""
    inputs = tmp_path / "auditor-inputs"
    (inputs / "real").mkdir(parents=True)
    (inputs / "real" / "ref.png").write_bytes(b"\x89PNG honest")
    (inputs / "ref.png").symlink_to(inputs / "real" / "ref.png")
    plan = one_position_plan()
    plan["request"]["payload"]["input_reference"] = "ref.png"
    bundle = seal(tmp_path, plan, keys)
    res = _run_cli(
        [
            str(bundle),
            "-o",
            str(tmp_path / "rerun"),
            "--key",
            str(keys.public_path),
            "--endpoint",
            "baseline=http://127.0.0.1:9",
            "--inputs",
            str(inputs),
            "--dry-run",
        ]
    )
    assert res.exit_code == 0, res.output


# -- defect 2: every write stays under -o -------------------------------------------------------


def test_hostile_server_names_write_nothing_outside_the_output_folder(
    tmp_path: Path, keys: Keys
) -> None:
    # With -o at tmp/box/out, "x/../../../../../escaped" joined under media/rerun-1/ or
    # logs/rerun-1/ climbs five levels from .../rerun-1/x: to tmp/. The absolute name would
    # make the server log tmp/abs-target/escaped.log.
    dotdot = "x/../../../../../escaped"
    absolute = str(tmp_path / "abs-target" / "escaped")
    plan = campaign_plan(
        arm_order=["baseline", "candidate"],
        servers=[dotdot, absolute],
        warmups_per_server=0,
        measured_per_server=1,
        telemetry={"source": "none"},
        timeouts={"request_s": 30, "wave_s": 60},
        startup_budget_s=30,
    )
    bundle = seal(tmp_path, plan, keys)
    out = tmp_path / "box" / "out"
    out.parent.mkdir()
    before = snapshot(tmp_path, out)
    res = _run_cli(
        [
            str(bundle),
            "-o",
            str(out),
            "--key",
            str(keys.public_path),
            "--launch",
            "--launch-command",
            "{python} -m tests.reference_server --port {port} --server {server} "
            "--served-model-name {model} --workers 1 --max-lifetime 60 --latency 0.05",
            "--launch-cwd",
            str(REPO_ROOT),
            # No vllm-omni in this launch environment: its runtime commit is unverifiable.
            "--allow-unverified-commit",
        ]
    )
    assert res.exit_code == 0, res.output
    assert snapshot(tmp_path, out) == before
    # Inside -o every written path is a plain name under the expected folders.
    written = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    media = [w for w in written if w.startswith("media/")]
    logs = [w for w in written if w.startswith("logs/")]
    assert len(media) == 2 and all(w.count("/") == 2 for w in media), written
    assert len(logs) == 3 and all(w.count("/") == 2 for w in logs), written
    assert all(".." not in w.split("/") for w in written)
    # The tables keep the original names; the media column names the file really written.
    receipts = [json.loads(x) for x in (out / "receipts.jsonl").read_text().splitlines()]
    assert [r["server"] for r in receipts] == [dotdot, absolute]
    assert [r["status"] for r in receipts] == ["ok", "ok"]
    assert sorted(r["media"] for r in receipts) == media
    # The campaign is still sealable as a rerun.
    seal_campaign(out, tmp_path / "rerun.bundle", keys=[keys.private])


def _sha8(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()[:8]


def test_safe_name_keeps_honest_names_and_maps_every_other_to_one_distinct_file_name() -> None:
    # Imported here so that the rest of the file still runs (and fails) on the code before it.
    from rerun.confine import safe_name

    # The rule as documented in docs/rerun.md, applied by hand.
    for honest in ("baseline-1", "rerun-2", "rerun-1-candidate-2-03", "a.b_c"):
        assert safe_name(honest) == honest
    assert safe_name("x/../../escaped") == f"x_.._.._escaped-{_sha8('x/../../escaped')}"
    assert safe_name("/etc/passwd") == f"_etc_passwd-{_sha8('/etc/passwd')}"
    assert safe_name("..") == f"..-{_sha8('..')}"
    assert safe_name(".") == f".-{_sha8('.')}"
    assert safe_name("") == f"-{_sha8('')}"
    assert safe_name("a" * 101) == "a" * 100 + f"-{_sha8('a' * 101)}"
    # Two names that map to the same characters still get different files.
    assert safe_name("a/b") != safe_name("a\\b") and safe_name("a/b") != "a_b"


def test_the_writer_confines_a_hostile_attempt_id_and_request_id(tmp_path: Path) -> None:
    out = tmp_path / "box" / "out"
    out.parent.mkdir()
    before = snapshot(tmp_path, out)
    source = SealedSource("0" * 64, {"id": "c", "arms": []}, "plans/p.json", b"{}")
    writer = RerunWriter.open(out, source, accelerator="none")
    # Attempt ids are made by the writer (rerun-N); one that is not must stay confined too.
    # Joined under out/logs, out/rerun or out/media, "../../../x" lands in tmp/x; then the
    # request id's "../" climbs from tmp/attempt-escaped to tmp. Every escape stays in tmp.
    writer.attempt_id = "../../../attempt-escaped"
    writer.begin(0, "plans/p.json", "note")
    rel, digest = writer.write_media("../request-escaped", b"clip")
    assert digest == hashlib.sha256(b"clip").hexdigest()
    assert (out / rel).read_bytes() == b"clip"
    writer.log("a line", 0)
    writer.log_path(str(tmp_path / "absolute-server")).write_text("server output")
    writer.write_record({"attempt": "x"})
    writer.finish("interrupted", "test", 0, "note")
    assert snapshot(tmp_path, out) == before
    resolved = out.resolve()
    assert all(resolved in p.resolve().parents for p in out.rglob("*"))


# -- defect 3: the bundle's launch command runs only on an explicit opt-in ----------------------


def _launching_plan(marker: Path) -> dict[str, Any]:
    # The attacker's "server": writes a marker file and exits. The ESC sequence in its
    # comment would clear the auditor's screen if printed raw.
    code = f"import pathlib; pathlib.Path({str(marker)!r}).write_text('ran')  # \x1b[2J"
    return one_position_plan(launch={"command": [sys.executable, "-c", code]}, startup_budget_s=5)


def test_launch_without_launch_command_refuses_to_run_the_bundles_command(
    tmp_path: Path, keys: Keys
) -> None:
    marker = tmp_path / "bundle-command-ran"
    bundle = seal(tmp_path, _launching_plan(marker), keys)
    out = tmp_path / "rerun"
    base = [str(bundle), "-o", str(out), "--key", str(keys.public_path), "--launch"]
    res = _run_cli(base)
    assert res.exit_code == 2, res.output
    assert "--launch-command" in res.output and "--run-bundle-launch-command" in res.output
    assert not marker.exists() and not out.exists()
    # The opt-in and an own command together are contradictory.
    res = _run_cli([*base, "--launch-command", "true {port}", "--run-bundle-launch-command"])
    assert res.exit_code == 2, res.output
    assert not marker.exists() and not out.exists()


def test_run_bundle_launch_command_prints_the_command_escaped_then_runs_it(
    tmp_path: Path, keys: Keys
) -> None:
    marker = tmp_path / "bundle-command-ran"
    bundle = seal(tmp_path, _launching_plan(marker), keys)
    out = tmp_path / "rerun"
    res = _run_cli(
        [
            str(bundle),
            "-o",
            str(out),
            "--key",
            str(keys.public_path),
            "--launch",
            "--run-bundle-launch-command",
            "--allow-unverified-commit",
        ]
    )
    # The "server" exits before it is ready: the attempt is rejected (exit 4), but it ran.
    assert res.exit_code == 4, res.output
    assert marker.read_text() == "ran"
    assert "\x1b" not in res.output
    lines = res.output.splitlines()
    shown = [i for i, line in enumerate(lines) if "bundle-command-ran" in line]
    assert shown, res.output
    first = lines[shown[0]]
    assert "\\x1b[2J" in first and "--run-bundle-launch-command" in first
    # Printed before anything ran: ahead of every progress event.
    events = [i for i, line in enumerate(lines) if line.startswith(("slot:", "note:", "[", "done"))]
    assert events and shown[0] < min(events), res.output


# -- the plan's environment and {args} reach only the auditor's command as data -----------------

# The auditor's own "server": records its argv and environment to a file, then exits. It is
# started by --launch-command; it never becomes ready, so the attempt is rejected (exit 4).
_RECORDER = (
    "import json, os, pathlib, sys\n"
    "pathlib.Path(sys.argv[1]).write_text(json.dumps([sys.argv[2:], dict(os.environ)]))\n"
)


def _recorder(tmp_path: Path) -> tuple[Path, Path]:
    """The recorder script, and the file it writes when it runs."""
    script = tmp_path / "auditor-tools" / "record.py"
    script.parent.mkdir(exist_ok=True)
    script.write_text(_RECORDER)
    return script, tmp_path / "auditor-tools" / "ran.json"


def _env_plan(env: dict[str, str], args: list[str] | None = None) -> dict[str, Any]:
    arm: dict[str, Any] = {"env": env}
    if args is not None:
        arm["args"] = args
    return one_position_plan(launch={"baseline": arm}, startup_budget_s=5)


def _launch_own(bundle: Path, out: Path, keys: Keys, template: str, *extra: str) -> Result:
    return _run_cli(
        [
            str(bundle),
            "-o",
            str(out),
            "--key",
            str(keys.public_path),
            "--launch",
            "--launch-command",
            template,
            "--allow-unverified-commit",
            *extra,
        ]
    )


# Every name the threat names, one per kind of rule: exact names, the LD_/DYLD_/BASH_FUNC_
# prefixes, the _PRELOAD and _INJECTION64_PATH suffixes, and names no shell would accept.
DENIED = [
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "LD_BIND_NOW",
    "DYLD_INSERT_LIBRARIES",
    "BASH_ENV",
    "ENV",
    "PYTHONPATH",
    "PYTHONSTARTUP",
    "PYTHONHOME",
    "PYTHONINSPECT",
    "PYTHONUSERBASE",
    "PERL5OPT",
    "PERL5LIB",
    "RUBYOPT",
    "NODE_OPTIONS",
    "PATH",
    "IFS",
    "PS4",
    "SHELLOPTS",
    "BASHOPTS",
    "PROMPT_COMMAND",
    "GCONV_PATH",
    "HOSTALIASES",
    "BASH_FUNC_serve",
    "MY_PRELOAD",
    "CUDA_INJECTION64_PATH",
]
INVALID = ["BASH_FUNC_serve%%", "1ABC", "A-B", "X.Y", "has space"]


@pytest.mark.parametrize("name", DENIED + INVALID)
def test_a_plan_env_variable_that_runs_author_code_is_refused_for_the_auditors_command(
    tmp_path: Path, keys: Keys, name: str
) -> None:
    script, ran = _recorder(tmp_path)
    bundle = seal(tmp_path, _env_plan({"OMP_NUM_THREADS": "4", name: "/author/payload"}), keys)
    out = tmp_path / "rerun"
    template = f"{{python}} {script} {ran} {{args}}"
    res = _launch_own(bundle, out, keys, template)
    assert res.exit_code == 2, res.output
    assert not ran.exists(), "the auditor's command ran with the author's environment"
    assert not out.exists()
    # Located (plan member, launch.<arm>.env.<NAME>), with why and the way out.
    assert "plans/reference-ab.json" in res.output
    assert f"launch.baseline.env.{name}" in res.output
    assert ("not a valid environment variable name" in res.output) == (name in INVALID)
    assert "--run-bundle-launch-command" in res.output and "--env NAME=VALUE" in res.output
    # A dry run shows the same refusal: what it would run, it would refuse.
    res = _launch_own(bundle, out, keys, template, "--dry-run")
    assert res.exit_code == 2 and f"launch.baseline.env.{name}" in res.output, res.output


def test_honest_plan_env_and_args_still_reach_the_auditors_command(
    tmp_path: Path, keys: Keys
) -> None:
    script, ran = _recorder(tmp_path)
    honest = {
        "ASCEND_RT_VISIBLE_DEVICES": "0,1,2,3",
        "VLLM_WORKER_MULTIPROC_METHOD": "spawn",
        "HCCL_CONNECT_TIMEOUT": "1200",
        "OMP_NUM_THREADS": "4",
        # Listed, but the auditor sets it too: the auditor's value is the one applied.
        "PATH": "/author/bin",
    }
    args = ["--tensor-parallel-size", "4", "--compilation-config", '{"level": 3}']
    bundle = seal(tmp_path, _env_plan(honest, args), keys)
    res = _launch_own(
        bundle,
        tmp_path / "rerun",
        keys,
        f"{{python}} {script} {ran} {{args}}",
        "--env",
        f"PATH={os.environ['PATH']}",
    )
    assert res.exit_code == 4, res.output  # the recorder exits before it is ready
    argv, env = json.loads(ran.read_text())
    assert argv == args
    for k in ("ASCEND_RT_VISIBLE_DEVICES", "VLLM_WORKER_MULTIPROC_METHOD", "HCCL_CONNECT_TIMEOUT"):
        assert env[k] == honest[k]
    assert env["OMP_NUM_THREADS"] == "4"
    assert env["PATH"] == os.environ["PATH"]


def test_run_bundle_launch_command_applies_the_plans_env_and_prints_it_first(
    tmp_path: Path, keys: Keys
) -> None:
    script, ran = _recorder(tmp_path)
    plan = one_position_plan(
        launch={
            "command": [sys.executable, str(script), str(ran)],
            "baseline": {"env": {"PYTHONINSPECT": "", "PERL5OPT": "-Mauthor\x1b[2J"}},
        },
        startup_budget_s=5,
    )
    bundle = seal(tmp_path, plan, keys)
    res = _run_cli(
        [
            str(bundle),
            "-o",
            str(tmp_path / "rerun"),
            "--key",
            str(keys.public_path),
            "--launch",
            "--run-bundle-launch-command",
            "--allow-unverified-commit",
        ]
    )
    assert res.exit_code == 4, res.output
    _, env = json.loads(ran.read_text())
    assert env["PERL5OPT"] == "-Mauthor\x1b[2J" and env["PYTHONINSPECT"] == ""
    assert "\x1b" not in res.output
    lines = res.output.splitlines()
    shown = [i for i, line in enumerate(lines) if "PERL5OPT=" in line]
    assert shown and "\\x1b[2J" in lines[shown[0]], res.output
    events = [i for i, line in enumerate(lines) if line.startswith(("slot:", "note:", "[", "done"))]
    assert events and shown[0] < min(events), res.output


INJECTIONS = ["x; touch {m}", "$(touch {m})", "`touch {m}`", "x' ; touch {m} ; '", "a\nb"]


@pytest.mark.parametrize(
    ("template", "with_args"),
    [
        ("{python} {script} {ran} {model} {args}", True),
        ("sh -c '{python} {script} {ran} {model} {args}'", True),
        ("env -i /bin/sh -ec '{python} {script} {ran} {model}'", False),
    ],
    ids=["argv", "shell", "shell-model-only"],
)
def test_author_text_in_model_and_args_never_runs_as_shell_code(
    tmp_path: Path, keys: Keys, template: str, with_args: bool
) -> None:
    script, ran = _recorder(tmp_path)
    marker = tmp_path / "MARKER"
    args = [s.format(m=marker) for s in INJECTIONS]
    plan = _env_plan({}, args)
    plan["request"]["payload"]["model"] = f"m; touch {marker}"
    bundle = seal(tmp_path, plan, keys)
    cmd = template.replace("{script}", str(script)).replace("{ran}", str(ran))
    res = _launch_own(bundle, tmp_path / "rerun", keys, cmd)
    assert res.exit_code == 4, res.output
    assert not marker.exists(), "author text ran as shell code"
    argv, _ = json.loads(ran.read_text())
    # Each value arrives as one argument, byte for byte.
    assert argv == [f"m; touch {marker}", *(args if with_args else [])]


@pytest.mark.parametrize(
    "template",
    [
        "sh -c 'exec server --model \"{model}\"'",
        "sh -c \"exec server --model '{model}'\"",
        "bash -c 'exec server $(( {port} ))'",
        "bash -c 'eval server {model}'",
        "sh -c {args}",
        "{args}",
    ],
)
def test_a_placeholder_a_shell_would_read_again_is_refused(template: str) -> None:
    from rerun.launcher import LaunchError, expand_command

    with pytest.raises(LaunchError):
        expand_command(template, {"model": "m; touch x", "port": "1"}, ["touch", "x"])


@pytest.mark.parametrize(
    "arm", [{"env": {"A=B": "x"}}, {"env": {"OK": "a\x00b"}}, {"args": ["a\x00b"]}]
)
def test_a_variable_or_argument_no_process_can_take_is_refused_even_with_the_opt_in(
    tmp_path: Path, keys: Keys, arm: dict[str, Any]
) -> None:
    script, ran = _recorder(tmp_path)
    command = [sys.executable, str(script), str(ran), "{args}"]
    bundle = seal(tmp_path, one_position_plan(launch={"command": command, "baseline": arm}), keys)
    out = tmp_path / "rerun"
    base = [str(bundle), "-o", str(out), "--key", str(keys.public_path), "--launch"]
    res = _run_cli([*base, "--run-bundle-launch-command"])
    # A located refusal (exit 2), not a traceback from exec, and nothing ran or was written.
    assert res.exit_code == 2 and res.exc_info is not None and res.exc_info[0] is SystemExit
    assert "launch" in res.output and "baseline" in res.output, res.output
    assert not ran.exists() and not out.exists()
