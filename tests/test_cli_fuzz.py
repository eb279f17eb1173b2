"""A fuzz of bad invocations across every command (issue 38): each must be refused with exit 2
and one line on stderr, raise nothing (no traceback), finish within seconds (no hang beyond a
stated size guard) and leave every file as it was.

The invocations are built from the parser itself: every integer flag and positional of every
command gets every malformed number, every float flag every non-finite or malformed value, and
the text and path flags their own traps, each on top of otherwise valid arguments. A seeded
sample of pairs of bad values is added (the seed is printed; ``--seed`` replays it).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import time
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import numpy as np
import pytest

from tests import cpu_peers
from tests.test_files_and_databases import listing
from workbench.cli import main
from workbench.cli.parser import build_parser
from workbench.cli.values import at_least_zero, finite, run_id, whole

FAST = ["--heads", "1", "--head-dim", "32", "--warmup", "0", "--samples", "1", "--min-time", "0"]
# What each command needs to be valid apart from the fuzzed value (that comes last, so it wins).
VALID = {
    "sweep": ["--seq-lens", "16", *FAST],
    "ladder": ["--seq-lens", "16", *FAST],
    "runs": [],
    "show": ["1"],
    "compare": ["1", "2"],
    "export": ["--csv", "-"],
    "blockmap": ["--q-len", "64"],
    "report": ["--group", "1"],
    "import": ["other.db"],
    "backends": [],
    "bandwidth": ["--show"],  # measuring needs a GPU; --show reads the stored figure
    "knobs": [],
    "resources": ["--arch", "sm_90"],
    "machine": [],
    "profile": ["1", "--seq-len", "64"],
    "roofline": ["1"],
    "gui": None,  # valid arguments would open the window: only bad ones are tried
}
BAD_INTS = ["", " ", "x", "1.5", "1e3", "0x10", "２", "١", "9" * 25, "-" + "9" * 25, "1_000",
            "\x00"]  # fmt: skip
BAD_FLOATS = ["", "x", "inf", "-inf", "nan", "1e400", "２", "١.٥", "\x00"]
BAD_SEQ_LENS = ["", ",", "12 8", "１２８", "abc", "0", "-16", "1k-3k", "2k-1k", "16,,x", "9" * 30,
                "1.5k", "\x00"]  # fmt: skip
BAD_TEXT = {
    "--mask": ["", "bogus", "\x00"],
    "--dtype": ["", "float32", "\x1b[2J"],
    "--backend": ["", "nope", "\x00"],
    "--backends": ["", ",", "reference,,reference", "nope"],
    "--arch": ["", "sm_999", "sm90", "SM_90", "\x00"],
    "--label": ["x" * 201, "y" * 100_000],
    "--search": ["z" * 201, "%" * 50_000],
    "--subject": ["nope", ""],
    "--runs": ["", ",", "1,1", "1,,2", "0", "x", "9" * 25],
}
PATH_TRAPS = ["", "   ", "\x00", "folder", "notes.txt", "foreign.db", "fifo", "missing/x.db"]


def _int_like(action: argparse.Action) -> bool:
    return action.type in (whole, run_id, at_least_zero)


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def _flag(action: argparse.Action) -> str | None:
    longs = [o for o in action.option_strings if o.startswith("--")]
    return longs[0] if longs else None


def invocations(rng: np.random.Generator) -> list[list[str]]:
    cases: list[list[str]] = []
    for command, parser in _subparsers().items():
        base = VALID[command]
        for action in parser._actions:
            flag = _flag(action)
            if action.option_strings and flag is None:
                continue
            if _int_like(action):
                for bad in BAD_INTS:
                    if flag is None:  # a positional: show RUN, compare RUNS
                        cases.append([command, bad] + (["2"] if command == "compare" else []))
                    elif base is not None:
                        cases.append([command, *base, flag, bad])
            elif action.type is finite and base is not None:
                cases += [[command, *base, flag, bad] for bad in BAD_FLOATS]
            elif flag in ("--seq-lens", "--k-lens") and base is not None:
                cases += [[command, *base, flag, bad] for bad in BAD_SEQ_LENS]
            elif flag in BAD_TEXT and base is not None:
                cases += [[command, *base, f"{flag}={bad}"] for bad in BAD_TEXT[flag]]
            elif flag in ("--db", "--csv", "--readme", "--steps"):
                for trap in PATH_TRAPS:
                    if flag == "--db" and trap == "missing/x.db" and command in (
                        "sweep", "ladder", "gui"
                    ):  # fmt: skip
                        continue  # a writing command creates a new database: that is its job
                    if flag == "--csv" and trap in ("fifo", "notes.txt"):
                        continue  # fine targets: a FIFO's reader gets it, a file is replaced
                    if flag == "--db" and base is None:
                        cases.append([command, f"--db={trap}", "--no-such-flag"])
                    elif base is not None:
                        cases.append([command, *base, f"{flag}={trap}"])
        cases.append([command, "--no-such-flag"])
        cases.append([command, *(base or []), "unexpected", "extra"])
    cases += [
        ["no-such-command"], ["--db", "", "runs"], ["--db=\x00", "runs"],
        ["show", "999"], ["show", "0"], ["show", "-1"], ["compare", "1"], ["compare", "1", "999"],
        ["compare", "--group", "999"], ["export", "--csv", "-", "--runs", "999"],
        ["export", "--csv", "-", "--group", "999"], ["report", "--group", "999"],
        ["blockmap", "--q-len", "1000000", "--json"], ["blockmap", "--q-len", "0"],
        ["blockmap", "--q-len", "64", "--tile-m", "3"], ["blockmap", "--q-len", "64", "--mask",
        "window"], ["ladder", *VALID["ladder"], "--batch", "0"],
        ["sweep", *VALID["sweep"], "--backend", "reference", "--backends", "reference"],
        ["sweep", *VALID["sweep"], "--warmup", "1000000000"],
        ["--db", "a.db", "sweep", "--db", "b.db", *VALID["sweep"]],
        *(["import", trap] for trap in PATH_TRAPS),  # what to import from, every trap
    ]  # fmt: skip
    # Two bad values at once, sampled with the session's printed seed.
    singles = [c for c in cases if c and c[0] in ("sweep", "ladder") and len(c) > 2]
    for _ in range(60):
        a, b = rng.choice(len(singles), 2, replace=False)
        first, second = singles[a], singles[b]
        if first[0] == second[0]:
            cases.append([*first, *second[len(VALID[first[0]]) + 1 :]])
    return cases


@pytest.fixture
def traps(tmp_path: Path, run_cli, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:  # type: ignore[no-untyped-def]
    """The current folder: a database with runs 1, 2 and group 1 (runs 3, 4), and the traps
    the path flags are pointed at."""
    cpu_peers.register(monkeypatch)
    for label in ("first", "second"):
        assert run_cli("sweep", "--seq-lens", "16", *FAST, "--label", label).code == 0
    group = run_cli("sweep", "--seq-lens", "16", *FAST, "--backends", f"reference,{cpu_peers.NAME}")
    assert group.code == 0, group.err
    (tmp_path / "folder").mkdir()
    (tmp_path / "notes.txt").write_text("my notes\n")
    os.mkfifo(tmp_path / "fifo")
    import sqlite3

    with sqlite3.connect(tmp_path / "foreign.db") as conn:
        conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY)")
    conn.close()
    monkeypatch.chdir(tmp_path)
    yield tmp_path


@pytest.fixture
def one_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every invocation parses with one parser from :func:`build_parser` (building it, 17
    subparsers, is most of an in-process refusal's time); one the parse added to (the plugin
    flags) is built anew for the next."""
    import workbench.cli.parser

    built = [build_parser()]
    actions = len(built[0]._actions)

    def reused() -> argparse.ArgumentParser:
        if len(built[0]._actions) != actions:
            built[0] = build_parser()
        return built[0]

    monkeypatch.setattr(workbench.cli.parser, "build_parser", reused)


def test_at_least_200_bad_invocations_are_refused_cleanly(
    traps: Path, rng: np.random.Generator, one_parser: None
) -> None:
    cases = invocations(rng)
    assert len(cases) >= 200
    before = listing(traps)
    problems: list[str] = []
    slowest = 0.0
    for argv in cases:
        out, err = io.StringIO(), io.StringIO()
        started = time.monotonic()
        try:
            with redirect_stdout(out), redirect_stderr(err):
                code = main(argv)
        except BaseException as exc:  # a traceback, as the user would see it
            problems.append(f"{argv!r}: raised {type(exc).__name__}: {exc}")
            continue
        slowest = max(slowest, time.monotonic() - started)
        lines = [line for line in err.getvalue().splitlines() if line.strip()]
        if code != 2 or len(lines) != 1 or not lines[0].startswith("error: "):
            problems.append(f"{argv!r}: exit {code}, stderr {err.getvalue()!r}")
        elif out.getvalue():
            problems.append(f"{argv!r}: printed {out.getvalue()[:80]!r} on stdout")
        after = listing(traps)
        if after != before:
            changed = sorted(set(after.items()) ^ set(before.items()))
            problems.append(f"{argv!r}: changed {[name for name, _ in changed]}")
            before = after
    assert not problems, f"{len(problems)} of {len(cases)}:\n" + "\n".join(
        p[:300] for p in problems[:40]
    )
    assert slowest < 10, f"one refusal took {slowest:.1f} s"
    print(json.dumps({"invocations": len(cases), "slowest_s": round(slowest, 3)}))
