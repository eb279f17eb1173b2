"""docs/layout.md matches the tree: every file and folder it names exists under the top-level
folder whose line names it, and every top-level folder of the repository has a line; and each
test docs/guarantees.md names exists."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYOUT = ROOT / "docs" / "layout.md"
NAMED = re.compile(r"(?<![\w/.-])([\w-]+(?:\.(?:py|sh|json|md)|/))(?![\w])")


def _entries() -> dict[str, str]:
    """Each top-level folder of the layout's block and the text of its lines."""
    (block,) = re.findall(r"```\n(.*?)```", LAYOUT.read_text(encoding="utf-8"), flags=re.S)
    entries: dict[str, str] = {}
    top = ""
    for line in block.splitlines():
        head = re.match(r"^([\w-]+/)\s", line)
        if head:
            top = head.group(1).rstrip("/")
            line = line[head.end() :]
        entries[top] = entries.get(top, "") + " " + line
    return entries


def test_every_file_and_folder_the_layout_names_exists_where_it_says() -> None:
    missing = []
    for top, text in _entries().items():
        for name in NAMED.findall(text):
            bare = name.rstrip("/")
            found = [p for p in (ROOT / top).rglob(bare) if p.is_dir() == name.endswith("/")]
            if not found and not (ROOT / bare).exists():
                missing.append(f"{top}/ … {name}")
    assert not missing, f"docs/layout.md names what the tree does not have: {missing}"


def test_every_top_level_folder_has_a_line_in_the_layout() -> None:
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    folders = {p.split("/")[0] for p in tracked if "/" in p and not p.startswith(".")}
    assert folders, "git ls-files listed nothing"
    unnamed = sorted(folders - set(_entries()))
    assert not unnamed, f"docs/layout.md has no line for {unnamed}"


def test_every_test_a_guarantee_names_exists() -> None:
    """docs/guarantees.md names the test behind each promise: each must be a test in that file."""
    page = (ROOT / "docs" / "guarantees.md").read_text(encoding="utf-8")
    named = re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", page)
    assert len(named) >= 20, "the guarantees page names fewer tests than it did"
    missing = [
        f"{path}::{name}"
        for path, name in named
        if not re.search(rf"^def {name}\(", (ROOT / path).read_text(encoding="utf-8"), re.M)
    ]
    assert not missing, f"docs/guarantees.md names tests that do not exist: {missing}"


def test_the_readme_is_a_front_door_and_its_links_lead_somewhere() -> None:
    """At most 12,000 bytes for a user, and every page it sends them to (and picture) exists."""
    readme = ROOT / "README.md"
    assert readme.stat().st_size <= 12_000, f"README.md is {readme.stat().st_size:,} bytes"
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme.read_text(encoding="utf-8"))
    assert "docs/cli.md" in links and "assets/screenshot.png" in links
    missing = [link for link in links if not (ROOT / link).exists()]
    assert not missing, f"README.md links to what is not there: {missing}"
