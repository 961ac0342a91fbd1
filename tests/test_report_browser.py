"""The HTML report in a real browser: headless Chromium parses it, draws it, and logs nothing.

Skipped, with the reason, where no Chromium is installed (Debian: ``apt-get
install chromium``). The browser runs offline (no network, every host name
unresolvable) and the page's Content-Security-Policy refuses any fetch: a
blocked fetch, a script or any error would appear as a console line on stderr.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from bundler.format.trust import Trust
from replay.report.html.render import render_bundle
from tests.test_report import SECTIONS, SEED, Sealed, parse_page, seal

pytest.importorskip("matplotlib", reason="the HTML report needs matplotlib (the report extra)")
CHROMIUM = next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser")) if p), None)
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="headless Chromium not installed (Debian: apt-get install -y chromium)",
)
WIDTH, HEIGHT = 1280, 2400
GOOD_GREEN = (0x1B, 0x7A, 0x3A)  # the stylesheet's --good colour (the CONFIRMED badge text)


def chromium(page: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run headless Chromium offline on ``page`` with ``args``."""
    assert CHROMIUM is not None
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--host-resolver-rules=MAP * ~NOTFOUND",
                "--enable-logging=stderr",
                "--v=0",
                f"--user-data-dir={profile}",
                *args,
                page.resolve().as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str, Path]:
    """The seed report, rendered by Chromium once: (page, DOM, stderr, screenshot)."""
    tmp = tmp_path_factory.mktemp("browser")
    sealed: Sealed = seal(SEED, tmp / "seed")
    page = tmp / "report.html"
    page.write_text(render_bundle(sealed.path, "html", trust=Trust.keys([sealed.keys.public])).text)
    shot = tmp / "report.png"
    run = chromium(page, f"--screenshot={shot}", f"--window-size={WIDTH},{HEIGHT}", "--dump-dom")
    assert run.returncode == 0, run.stderr[-2000:]
    if not shot.exists():  # a Chromium that does not take both in one run
        again = chromium(page, f"--screenshot={shot}", f"--window-size={WIDTH},{HEIGHT}")
        assert again.returncode == 0, again.stderr[-2000:]
    return page, run.stdout, run.stderr, shot


def test_chromium_parses_every_section_and_every_mark(
    rendered: tuple[Path, str, str, Path],
) -> None:
    _, dom, _, _ = rendered
    page = parse_page(dom)
    assert set(page.section_ids) == SECTIONS
    assert "407.27 → 108.12 s" in page.text("headline")
    assert "73.45 %" in page.text("headline")
    # The browser built the SVG: 12 measured requests and 8 warmups, one mark each.
    measured = [i for i in page.svg_ids if re.fullmatch(r"latency-measured-\d{4}", i)]
    warmups = [i for i in page.svg_ids if re.fullmatch(r"latency-warmup-\d{4}", i)]
    assert (len(measured), len(warmups)) == (12, 8)


def test_chromium_logs_no_console_message(rendered: tuple[Path, str, str, Path]) -> None:
    _, _, stderr, _ = rendered
    # Blocked fetches (CSP), scripts and errors are all logged as CONSOLE lines.
    console = [line for line in stderr.splitlines() if ":CONSOLE" in line]
    assert console == []


def test_chromium_draws_the_page(rendered: tuple[Path, str, str, Path]) -> None:
    image_module = pytest.importorskip("PIL.Image", reason="Pillow (a matplotlib dependency)")
    _, _, _, shot = rendered
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with image_module.open(shot) as img:
        assert img.size == (WIDTH, HEIGHT)
        rgb = img.convert("RGB")
        colours = rgb.getcolors(maxcolors=1 << 20)
    assert colours is not None
    assert len(colours) > 50, "a blank or unstyled page"
    assert any(c == GOOD_GREEN for _, c in colours), "the stylesheet was not applied"


def test_at_phone_width_the_verdict_is_above_the_fold(
    rendered: tuple[Path, str, str, Path], tmp_path: Path
) -> None:
    """At 390 px the verdict badge (green) is drawn within the first screen (844 px)."""
    image_module = pytest.importorskip("PIL.Image", reason="Pillow (a matplotlib dependency)")
    page, _, _, _ = rendered
    shot = tmp_path / "phone.png"
    run = chromium(page, f"--screenshot={shot}", "--window-size=390,844", "--hide-scrollbars")
    assert run.returncode == 0, run.stderr[-2000:]
    with image_module.open(shot) as img:
        assert img.size == (390, 844)
        rgb = img.convert("RGB")
        colours = rgb.getcolors(maxcolors=1 << 20)
    assert colours is not None
    assert any(c == GOOD_GREEN for _, c in colours), "no verdict on the first phone screen"
