"""docs/cli.md is the parser's own reference: regenerating it from `build_parser` gives the
committed page byte for byte, and it names every command and flag a user can type."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from workbench.cli.parser import build_parser

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gen_cli_reference.py"
PAGE = ROOT / "docs" / "cli.md"


def test_docs_cli_md_regenerates_identically_from_the_parser() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_docs_cli_md_names_every_command_and_every_flag() -> None:
    import argparse

    page = PAGE.read_text(encoding="utf-8")
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for name, command in sub.choices.items():
        assert f"## `fmha-workbench {name}`" in page, name
        for action in command._actions:
            for flag in action.option_strings:
                if flag not in ("-h", "--help"):
                    assert f"`{flag}`" in page, f"{name} {flag}"


def test_the_check_fails_on_a_stale_page(tmp_path: Path) -> None:
    """A page edited by hand (or left behind by a new flag) is reported stale with exit 1."""
    copy = tmp_path / "scripts"
    copy.mkdir()
    (copy / SCRIPT.name).write_text(SCRIPT.read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "cli.md").write_text(PAGE.read_text(encoding="utf-8") + "edited\n")
    (tmp_path / "workbench").symlink_to(ROOT / "workbench")
    (tmp_path / "kernels").symlink_to(ROOT / "kernels")
    done = subprocess.run(
        [sys.executable, str(copy / SCRIPT.name), "--check"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 1 and "docs/cli.md is stale" in done.stdout, done.stdout
