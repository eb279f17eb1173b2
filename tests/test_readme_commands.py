"""Every ``fmha-workbench …`` command in the README and the user docs runs as written (issue 52,
item 3): each page's commands, in page order, as real processes of the installed console
script on the reference backend, in a fresh home and database, so a later example finds the
runs the earlier ones made. A command passes with exit 0, or, where it needs a GPU (or the GPU
toolchain) this machine lacks, with the one-line refusal: exit 2, one line saying so, no
traceback. Commands that open the window are checked with ``--help``.

What the test changes, all printed: a length list (``--seq-lens 4k-16k``) runs its smallest
length alone; a database file a page names that the repository does not hold (``import
other-machine.db``) stands in as a copy of the committed H200 database; files the commands
name are copies in a scratch directory; the compile cache of ``resources`` is the user's own.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import _console_script
from tests.doc_commands import ROOT, DocCommand, commands_in, smallest_lengths, user_doc_pages

STAND_IN_DB = ROOT / "bench" / "results" / "h200.db"
# What a refusal for a missing GPU (or its toolchain) names; any other refusal is a failure.
NEEDS_GPU = re.compile(r"\bGPU\b|\[gpu\]|\bCUDA\b|\bCuPy\b|cuda\.tile|tileiras|cuobjdump|\bncu\b")
# A command that reads what an earlier, GPU-refused, command would have stored.
MISSING_DATA = re.compile(r"\b(run|group) \d+ (does not exist|has no point)")
OPENS_WINDOW = {"gui", None}
TIMEOUT_S = 300


def _pages() -> list[Path]:
    pages = [p for p in user_doc_pages() if commands_in(p)]
    assert pages, "no README or docs page shows an fmha-workbench command"
    return pages


def _scratch(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A working directory and an environment whose home, data, cache and database are new."""
    work = tmp_path / "work"
    work.mkdir()
    env = dict(os.environ)
    cache = os.environ.get("FMHA_WORKBENCH_RESOURCE_CACHE") or str(
        Path.home() / ".cache" / "fmha-workbench" / "resources"
    )
    for name in ("HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME"):
        env[name] = str(tmp_path / name.lower())
    env.update(
        FMHA_WORKBENCH_DB=str(tmp_path / "runs.db"),
        FMHA_WORKBENCH_MACHINE=str(tmp_path / "machine.json"),
        FMHA_WORKBENCH_RESOURCE_CACHE=cache,  # a compile takes a minute; its answer is the same
        PYTHONPATH=os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
    )
    env.pop("DISPLAY", None)
    env.pop("WAYLAND_DISPLAY", None)
    return work, env


def _files_for(argv: tuple[str, ...], work: Path) -> list[str]:
    """Copy into ``work`` each repository file the command names (``README.md``,
    ``bench/results/h200.db``); a ``.db`` the repository does not hold becomes the stand-in
    database. Returns what was stood in, to print."""
    notes = []
    for word in argv:
        target = work / word
        if word.startswith("-") or not re.fullmatch(r"[\w./-]+\.\w+", word) or target.exists():
            continue
        source = ROOT / word
        if source.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, target)
        elif word.endswith(".db"):
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(STAND_IN_DB, target)
            notes.append(f"{word}: a copy of {STAND_IN_DB.relative_to(ROOT)} stands in")
    return notes


def _as_run(command: DocCommand) -> tuple[tuple[str, ...], str]:
    argv = smallest_lengths(command.argv)
    subcommand = next((w for w in argv if not w.startswith("-")), None)
    if subcommand in OPENS_WINDOW or (subcommand is None and "--help" not in argv):
        return (*argv, "--help"), "opens the window: checked with --help"
    return argv, "" if argv == command.argv else "the smallest length of its list"


@pytest.mark.parametrize("page", _pages(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_command_of_the_page_runs_or_says_it_needs_a_gpu(page: Path, tmp_path: Path) -> None:
    exe = _console_script()
    work, env = _scratch(tmp_path)
    gpu_refused: list[str] = []
    failures = []
    for command in commands_in(page):
        argv, change = _as_run(command)
        notes = [change] if change else []
        notes += _files_for(argv, work)
        result = subprocess.run(
            [exe, *argv], cwd=work, env=env, capture_output=True, text=True, timeout=TIMEOUT_S
        )
        err = [line for line in result.stderr.splitlines() if line.strip()]
        said = (
            f"{command.where}: {command.text}\n    exit {result.returncode}: {result.stderr[-600:]}"
        )
        print(f"{command.where}: exit {result.returncode} {'; '.join(notes)}")
        if result.returncode == 0:
            continue
        one_line = result.returncode == 2 and len(err) == 1 and "Traceback" not in result.stderr
        if one_line and NEEDS_GPU.search(err[0]):
            gpu_refused.append(command.where)
            print(f"    needs a GPU here: {err[0]}")
        elif one_line and gpu_refused and MISSING_DATA.search(err[0]):
            # Not rot: it reads what a GPU command above it would have stored.
            print(f"    skipped: reads what {', '.join(gpu_refused)} would store ({err[0]})")
        else:
            failures.append(said)
    assert not failures, "these documented commands fail as written:\n" + "\n".join(failures)


def test_the_extraction_reads_continuations_prompts_and_comments(tmp_path: Path) -> None:
    page = tmp_path / "README.md"
    page.write_text(
        "Prose that names fmha-workbench runs is not a command.\n"
        "```sh\n"
        "$ fmha-workbench sweep --seq-lens 1k-4k \\\n"
        "    --heads 2   # two heads\n"
        "fmha-workbench runs                # newest first\n"
        "pip install fmha-workbench\n"
        "```\n"
        "```\nfmha-workbench compare 1 2\n```\n",
        encoding="utf-8",
    )
    found = commands_in(page, root=tmp_path)
    assert [(c.line, c.argv) for c in found] == [
        (3, ("sweep", "--seq-lens", "1k-4k", "--heads", "2")),
        (5, ("runs",)),
        (9, ("compare", "1", "2")),
    ]
    assert smallest_lengths(found[0].argv) == ("sweep", "--seq-lens", "1024", "--heads", "2")
