"""The CLI is a package of one module per command (issue #53 item 3): every command a user can
type is registered and run by its own module under workbench/cli/commands/, and no source file
of kernels/ or workbench/ grows past 500 lines (today's offenders are listed, and may only
shrink)."""

from __future__ import annotations

import argparse
import ast
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from workbench.cli import commands
from workbench.cli.parser import build_parser

ROOT = Path(__file__).resolve().parents[1]
COMMANDS_DIR = ROOT / "workbench" / "cli" / "commands"
MAX_LINES = 500
# Files over MAX_LINES today, outside the CLI, with their line counts when this list was made:
# each may shrink (and leaves the list once at MAX_LINES or below), none may grow.
ALLOWED_OVER: dict[str, int] = {}


def parser_commands() -> dict[str, argparse.ArgumentParser]:
    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def test_every_command_has_its_own_module_and_every_module_is_a_command() -> None:
    typed = list(parser_commands())
    assert "sweep" in typed and "import" in typed and "gui" in typed  # the parser is the real one
    modules = commands.by_name()
    assert sorted(modules) == sorted(typed)
    for name in typed:
        path = Path(modules[name].__file__ or "")
        assert path.parent == COMMANDS_DIR, f"{name}: {path}"
    on_disk = {p.stem for p in COMMANDS_DIR.glob("*.py") if p.stem != "__init__"}
    assert on_disk == {Path(m.__file__ or "").stem for m in commands.ALL}, "a module not listed"


@pytest.mark.parametrize("name", sorted(commands.by_name()))
def test_each_command_module_registers_its_own_parser_with_its_help(name: str) -> None:
    """The module's register() alone makes the command's whole parser: the same help a user
    reads from ``fmha-workbench NAME --help``."""
    alone = argparse.ArgumentParser(prog="fmha-workbench")
    sub = alone.add_subparsers(dest="command")
    commands.by_name()[name].register(sub)
    assert list(sub.choices) == [name]
    assert sub.choices[name].format_help() == parser_commands()[name].format_help()


def test_no_module_but_a_command_adds_a_subcommand() -> None:
    """The command table is derived from the modules: nothing outside commands/ adds one."""
    adders = []
    for path in sorted((ROOT / "workbench" / "cli").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        calls = [
            n
            for n in ast.walk(tree)
            if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr == "add_parser"
        ]
        if calls and path.parent != COMMANDS_DIR:
            adders.append(path.relative_to(ROOT).as_posix())
    assert adders == []


def test_the_help_a_user_reads_comes_from_the_commands_module(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``fmha-workbench export --help`` in a second process prints what export.py registers."""
    monkeypatch.setenv("COLUMNS", "100")
    done = subprocess.run(
        [sys.executable, "-m", "workbench", "export", "--help"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    alone = argparse.ArgumentParser(prog="fmha-workbench")
    sub = alone.add_subparsers()
    commands.by_name()["export"].register(sub)
    assert done.stdout == sub.choices["export"].format_help()
    assert "--csv FILE" in done.stdout


def source_line_counts() -> dict[str, int]:
    return {
        path.relative_to(ROOT).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for folder in ("kernels", "workbench")
        for path in sorted((ROOT / folder).rglob("*.py"))
    }


def test_no_source_file_grows_past_500_lines() -> None:
    counts = source_line_counts()
    assert counts["workbench/cli/commands/sweep.py"] > 10  # the count reads the real files
    new = {p: n for p, n in counts.items() if n > MAX_LINES and p not in ALLOWED_OVER}
    assert new == {}, f"over {MAX_LINES} lines: split them"
    grown = {p: (n, ALLOWED_OVER[p]) for p, n in counts.items() if n > ALLOWED_OVER.get(p, n)}
    assert grown == {}, "an allowed file grew (now, allowed): put new code in a new module"
    stale = sorted(p for p in ALLOWED_OVER if counts.get(p, 0) <= MAX_LINES)
    assert stale == [], "now at 500 lines or below (or gone): remove them from ALLOWED_OVER"
    assert not any(p.startswith("workbench/cli/") for p in ALLOWED_OVER)


START_UP = """
import contextlib, io, json, sys
from workbench.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    code = main(sys.argv[1:])
blas = __import__("workbench.measure.blas", fromlist=["blas_threads"]).blas_threads()
print(json.dumps({"code": code, "modules": sorted(sys.modules), "blas_threads": blas}))
"""
# What start-up (the parsers) must not pay for: the store (sqlite-utils), the jobs and the
# backends' catalog (every backend module), which the commands that need them import as they run.
NOT_AT_START_UP = ("sqlite_utils", "workbench.store", "workbench.jobs", "workbench.backends")


def _imported(modules: list[str], packages: tuple[str, ...]) -> set[str]:
    return {m for m in modules if m in packages or m.startswith(tuple(p + "." for p in packages))}


def test_a_command_imports_what_it_runs_and_not_the_other_commands_needs(
    python_facts: Callable[..., dict[str, Any]], tmp_path: Path
) -> None:
    # Refused by the parser: nothing beyond the parsers was imported.
    refused = python_facts(START_UP, "sweep", "--heads", "x", cwd=ROOT)
    assert refused["code"] == 2
    assert "workbench.cli.commands.sweep" in refused["modules"]
    assert _imported(refused["modules"], NOT_AT_START_UP) == set()
    # A map of blocks opens no database.
    blockmap = python_facts(
        START_UP, "blockmap", "--q-len", "256", "--tile-m", "64", "--tile-n", "64", cwd=ROOT
    )
    assert blockmap["code"] == 0 and "numpy" in blockmap["modules"]  # it really ran
    assert (
        _imported(blockmap["modules"], ("sqlite_utils", "workbench.store", "workbench.jobs"))
        == set()
    )
    assert blockmap["blas_threads"] == 1  # the policy was set before NumPy loaded
    # A reading command imports the store, and the catalog its config summaries read.
    db = shutil.copy(ROOT / "bench" / "results" / "h200.db", tmp_path / "h200.db")
    runs = python_facts(START_UP, "runs", "--db", str(db), cwd=ROOT)
    assert runs["code"] == 0
    assert {"sqlite_utils", "workbench.backends.catalog"} <= set(runs["modules"])
    assert _imported(runs["modules"], ("workbench.jobs",)) == set()
