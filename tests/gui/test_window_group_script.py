"""scripts/window_group.py drives the real window through groups and saves Compare shots."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtGui import QImage

from tests.cpu_peers import register
from workbench.store import Store

pytestmark = pytest.mark.gui

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "window_group.py"


def load_script() -> Any:
    spec = importlib.util.spec_from_file_location("window_group", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_script_runs_a_group_per_mask_and_saves_compare(
    qapp: Any, tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    register(monkeypatch)  # a second CPU backend, in this process: the sweep runs here
    db, out = tmp_path / "runs.db", tmp_path / "shots"
    argv = [
        "--db", str(db), "--backends", "reference,reference-b", "--batch", "1", "--heads", "1",
        "--head-dim", "32", "--dtype", "float16", "--seq-lens", "64,128", "--tile", "32",
        "--autotune", "--masks", "causal,none", "--out", str(out), "--timeout", "120",
    ]  # fmt: skip
    assert load_script().main(argv, sweep_in_child=False) == 0
    printed = capsys.readouterr().out.strip().splitlines()
    assert len(printed) == 1
    groups = json.loads(printed[0])["groups"]
    assert list(groups) == ["causal", "none"]
    with Store(db) as store:
        for mask, gid in groups.items():
            runs = store.group_runs(gid)
            assert [r.backend for r in runs] == ["reference", "reference-b"]
            assert all(r.status == "complete" and r.config.mask == mask for r in runs)
            assert all(r.config.autotune and r.seq_lens == (64, 128) for r in runs)
            assert all(r.problem.head_dim == 32 and r.problem.heads == 1 for r in runs)
    for mask in groups:
        for name in (f"compare-{mask}.png", f"window-{mask}.png"):
            image = QImage(str(out / name))
            assert not image.isNull() and image.width() > 300, name


def test_the_script_refuses_an_unavailable_backend_and_runs_nothing(
    qapp: Any, tmp_path: Path, capsys: Any
) -> None:
    db = tmp_path / "runs.db"
    argv = ["--db", str(db), "--backends", "reference,nope", "--out", str(tmp_path / "shots")]
    assert load_script().main(argv) == 2
    assert "nope: unknown backend" in capsys.readouterr().err
    with Store(db) as store:
        assert store.count_runs() == 0
