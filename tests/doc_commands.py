"""The ``fmha-workbench …`` commands the user documents show, read from whatever README and
docs pages exist (tests/test_readme_commands.py runs them), so no example can rot unseen."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from workbench.config import parse_seq_lens

ROOT = Path(__file__).resolve().parents[1]
# Lab notes and design, not user docs: their commands record what was run on a GPU once.
NOT_USER_DOCS = ("docs/design.md", "docs/experiments.md")
PROGRAM = "fmha-workbench"
_FENCE = re.compile(r"^\s*(```|~~~)")
_PROMPT = re.compile(r"^\s*(?:\$|sh\$|%)\s+")
# Flags whose value is a list of lengths: the test runs the smallest alone (the reference
# backend at 128k keys takes minutes, and the parse of the whole list is still exercised).
LENGTH_LISTS = ("--seq-lens", "--k-lens")


@dataclass(frozen=True)
class DocCommand:
    """One documented command: where it is, as written, and its arguments after the program."""

    page: str
    line: int
    text: str
    argv: tuple[str, ...]

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def user_doc_pages(root: Path = ROOT) -> list[Path]:
    """README.md and every docs/**.md page but the lab notes (docs/lab/**) and the design."""
    pages = [root / "README.md"] if (root / "README.md").exists() else []
    for page in sorted((root / "docs").rglob("*.md")):
        relative = page.relative_to(root).as_posix()
        if relative.startswith("docs/lab/") or relative in NOT_USER_DOCS:
            continue
        pages.append(page)
    return pages


def _logical_lines(lines: list[str]) -> list[tuple[int, str]]:
    """Lines joined across trailing-backslash continuations, each with its first line number."""
    out: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for number, raw in enumerate(lines, start=1):
        # A continuation's comment ends at the backslash: `--x \  # note` is not shell.
        text = raw.rstrip()
        start, so_far = pending if pending else (number, "")
        if text.endswith("\\"):
            pending = (start, so_far + text[:-1] + " ")
            continue
        pending = None
        out.append((start, so_far + text))
    if pending:
        out.append(pending)
    return out


def commands_in(page: Path, root: Path = ROOT) -> list[DocCommand]:
    """Every line of a fenced code block that runs ``fmha-workbench`` (bare, or after a ``$ ``
    prompt), in page order, with its shell comment removed."""
    found = []
    in_block = False
    block: list[tuple[int, str]] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, start=1):
        if _FENCE.match(line):
            if in_block:
                found += _commands_of_block(block)
            in_block, block = not in_block, []
            continue
        if in_block:
            block.append((number, line))
    relative = page.relative_to(root).as_posix()
    return [DocCommand(relative, n, text, argv) for n, text, argv in found]


def _commands_of_block(block: list[tuple[int, str]]) -> list[tuple[int, str, tuple[str, ...]]]:
    numbers = [n for n, _ in block]
    out = []
    for offset, text in _logical_lines([line for _, line in block]):
        command = _PROMPT.sub("", text).strip()
        if not command.startswith(PROGRAM + " ") and command != PROGRAM:
            continue
        words = shlex.split(command, comments=True)
        out.append((numbers[offset - 1], command, tuple(words[1:])))
    return out


def smallest_lengths(argv: tuple[str, ...]) -> tuple[str, ...]:
    """``argv`` with each length list cut to its smallest length (see LENGTH_LISTS)."""
    out = list(argv)
    for i, word in enumerate(out):
        flag, equals, value = word.partition("=")
        if flag in LENGTH_LISTS and equals:
            out[i] = f"{flag}={min(parse_seq_lens(value))}"
        elif word in LENGTH_LISTS and i + 1 < len(out):
            out[i + 1] = str(min(parse_seq_lens(out[i + 1])))
    return tuple(out)
