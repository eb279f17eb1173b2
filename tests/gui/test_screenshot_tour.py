"""scripts/screenshot.py --tour makes docs/window.md's pictures from the committed H200
databases: it must keep working as the schema moves (it broke once on an older copy that the
window opens without upgrading)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PICTURES = (
    "plots.png", "compare.png", "roofline.png", "compare-decode.png", "compare-profiled.png",
    "plots-decode.png", "compare-prefill-profiled.png", "blockmap.png", "ladder.png",
)  # fmt: skip

pytestmark = [pytest.mark.gui, pytest.mark.slow]


def test_the_tour_saves_every_picture_the_window_page_shows(tmp_path: Path) -> None:
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "screenshot.py"), "--tour", str(tmp_path)],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    page = (ROOT / "docs" / "window.md").read_text()
    for name in PICTURES:
        picture = tmp_path / name
        assert picture.is_file() and picture.stat().st_size > 50_000, name
        assert f"screenshots/{name}" in page, f"docs/window.md does not show {name}"
