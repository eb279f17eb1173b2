"""Issue #51 item 5: a database in a read-only place (folder, file or media) opens read-only
in the window, which says so and turns off what writes; nothing is left beside it. Root
ignores file modes, so the places are made read-only as root sees them: ``chattr +i`` (the
immutable flag, which stops root) and a read-only bind mount (what read-only media is)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from gui_helpers import seed_run

from workbench.store import Store

pytestmark = pytest.mark.gui


@contextmanager
def immutable(path: Path) -> Iterator[None]:
    """``path`` immutable (chattr +i) for the block: no one, root included, may change it."""
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not installed: no read-only place root cannot write")
    made = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"this file system has no immutable flag: {made.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


@contextmanager
def read_only_mount(source: Path, target: Path) -> Iterator[None]:
    """``source`` seen read-only at ``target`` (a read-only bind mount: read-only media)."""
    target.mkdir()
    bound = subprocess.run(["mount", "--bind", str(source), str(target)], capture_output=True)
    if bound.returncode != 0:
        pytest.skip("no bind mounts here (not root, or no CAP_SYS_ADMIN): no read-only media")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(target)], check=True)
        yield
    finally:
        subprocess.run(["umount", str(target)], check=True)


def _two_runs(db: Path) -> list[int]:
    with Store(db) as store:
        ids = [seed_run(store, label="first"), seed_run(store, label="second")]
    assert not Path(f"{db}-wal").exists()  # as a closed database lies on read-only media
    return ids


def _assert_open_read_only(window: Any, db: Path, dialogs: Any, why: str) -> None:
    assert window.store is not None and window.store.read_only
    assert window.history.model.total() == 2
    assert window.windowTitle().startswith(f"{db} (read-only)")
    [notice] = dialogs.texts("warning")
    assert "read-only" in notice and why in notice, notice
    assert not window.controls.run_button.isEnabled()
    assert "read-only" in window.controls.run_button.toolTip()
    window.history.select_runs([window.history.model.run_at(0).id])
    assert not window.history.relabel_button.isEnabled()


@pytest.mark.parametrize("place", ["folder", "file"])
def test_a_database_in_a_read_only_folder_or_file_opens_read_only(
    qtbot: Any, make_window: Any, dialogs: Any, tmp_path: Path, place: str
) -> None:
    folder = tmp_path / "shared"
    folder.mkdir()
    db = folder / "runs.db"
    _two_runs(db)
    with immutable(folder if place == "folder" else db):
        window = make_window(db, probe_backends=False)
        qtbot.waitUntil(lambda: bool(dialogs.texts("warning")))
        _assert_open_read_only(window, db, dialogs, "read-only")
        window.close()
        assert sorted(p.name for p in folder.iterdir()) == ["runs.db"]


def test_a_database_on_read_only_media_opens_read_only(
    qtbot: Any, make_window: Any, dialogs: Any, tmp_path: Path
) -> None:
    source = tmp_path / "disk"
    source.mkdir()
    _two_runs(source / "runs.db")
    media = tmp_path / "media"
    with read_only_mount(source, media):
        db = media / "runs.db"
        window = make_window(db, probe_backends=False)
        qtbot.waitUntil(lambda: bool(dialogs.texts("warning")))
        _assert_open_read_only(window, db, dialogs, "read-only media")
        window.close()
    assert sorted(p.name for p in source.iterdir()) == ["runs.db"]
