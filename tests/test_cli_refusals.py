"""Issue 38 items 13-14: bad input that used to escape as a traceback, or be quietly accepted,
is refused in one line with exit 2, and nothing is written. Plus what the fixes let through."""

from __future__ import annotations

import io
import json
import os
import shutil
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from tests import cpu_peers
from tests.test_files_and_databases import listing

RunCli = Callable[..., Any]
FAST = ["--heads", "1", "--head-dim", "32", "--warmup", "0", "--samples", "1", "--min-time", "0"]
BEYOND_INT64 = str(2**63)
HUGE = "99999999999999999999999"
LADDER = ["ladder", "--seq-lens", "16", *FAST]


@pytest.fixture(scope="module")
def swept_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A database with two runs and a group (ids 1, 2; 3 and 4 in group 1), swept once for
    the module through the CLI (its three sweeps were most of each test's time)."""
    from workbench.cli import main

    db = tmp_path_factory.mktemp("swept") / "runs.db"
    said = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, redirect_stdout(said), redirect_stderr(said):
        cpu_peers.register(patch)
        patch.setenv("FMHA_WORKBENCH_DB", str(db))
        codes = [main(["sweep", "--seq-lens", "16", *FAST, "--label", label])
                 for label in ("first", "second")]  # fmt: skip
        codes.append(main(["sweep", "--seq-lens", "16", *FAST, "--backends",
                           f"reference,{cpu_peers.NAME}", "--mask", "causal"]))  # fmt: skip
    assert codes == [0, 0, 0], said.getvalue()
    return db


@pytest.fixture
def work(swept_once: Path, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder holding a copy of that database, a binary file and a FIFO; the current
    folder, so relative names land here."""
    cpu_peers.register(monkeypatch)
    for suffix in ("", "-wal", "-shm"):
        made = swept_once.with_name(swept_once.name + suffix)
        if made.exists():
            shutil.copy(made, db_path.with_name(db_path.name + suffix))
    (tmp_path / "binary.md").write_bytes(bytes(range(256)) * 4)
    os.mkfifo(tmp_path / "readme.fifo")
    (tmp_path / "typo-steps.json").write_text(
        json.dumps({"steps": [{"name": "base", "chnages": {"tile_m": 64}}]})
    )
    (tmp_path / "typo-top.json").write_text(
        json.dumps({"stpes": [], "steps": [{"name": "base", "changes": {}}]})
    )
    monkeypatch.chdir(tmp_path)
    return tmp_path


REFUSED: list[tuple[str, list[str]]] = [
    # 13: ids beyond SQLite's 64-bit integers
    ("range", ["show", BEYOND_INT64]),
    ("range", ["show", HUGE]),
    ("range", ["runs", "--limit", BEYOND_INT64]),
    ("range", ["compare", "1", BEYOND_INT64]),
    ("range", ["compare", "--group", BEYOND_INT64]),
    ("range", ["export", "--csv", "-", "--runs", BEYOND_INT64]),
    ("range", ["export", "--csv", "-", "--group", HUGE]),
    ("range", ["report", "--group", BEYOND_INT64]),
    ("csv", ["export", "--csv", ""]),
    ("csv", ["export", "--csv", "   "]),
    ("search", ["runs", "--search", "x" * 50_000]),
    ("readme", ["report", "--group", "1", "--readme", "binary.md"]),
    ("readme", ["report", "--group", "1", "--readme", "readme.fifo"]),
    ("readme", ["report", "--group", "1", "--readme", "."]),
    ("readme", ["report", "--group", "1", "--readme", "runs.db"]),
    # 14: accepted before
    ("db", ["--db", "", "runs"]),
    ("db", ["runs", "--db", ""]),
    ("db", ["sweep", "--db", "", "--seq-lens", "16", *FAST]),
    ("seq", ["sweep", "--seq-lens", "12 8", *FAST]),
    ("seq", ["sweep", "--seq-lens", "１２８", *FAST]),  # fullwidth
    ("seq", ["sweep", "--seq-lens", "١٢٨", *FAST]),  # Arabic-Indic
    ("batch", ["sweep", "--seq-lens", "16", "--batch", "２", *FAST]),
    ("whole", ["show", "١"]),
    ("batch", ["ladder", "--batch", "0", "--seq-lens", "16", *FAST]),
    ("heads", [*LADDER, "--heads", "0"]),
    ("seq", ["ladder", "--seq-lens", ""]),
    ("warmup", ["sweep", "--seq-lens", "16", *FAST, "--warmup", "1000000000"]),
    ("warmup", [*LADDER, "--warmup", "1000000000"]),
    ("blocks", ["blockmap", "--q-len", "1000000", "--json"]),
    ("blocks", ["blockmap", "--q-len", "131072", "--tile-m", "16", "--tile-n", "16"]),
    ("backend", ["sweep", "--backend", cpu_peers.NAME, "--backends", "reference", *FAST]),
    ("backends", ["sweep", "--backends", "", *FAST]),
    ("backends", ["sweep", "--backends", ",", *FAST]),
    ("backends", ["sweep", "--backends", "reference,,reference", *FAST]),
    ("arch", ["knobs", "--arch", "sm_999"]),
    ("arch", ["sweep", "--arch", "sm_999", "--seq-lens", "16", *FAST]),
    ("min-time", ["sweep", "--seq-lens", "16", *FAST, "--min-time", "inf"]),
    ("min-time", ["sweep", "--seq-lens", "16", *FAST, "--min-time", "-inf"]),
    ("min-time", [*LADDER, "--min-time", "inf"]),
    ("steps", [*LADDER, "--steps", "typo-steps.json"]),
    ("steps", [*LADDER, "--steps", "typo-top.json"]),
    ("runs", ["export", "--csv", "-", "--runs", "1,1,1"]),
    ("runs", ["export", "--csv", "-", "--runs", ""]),
    ("runs", ["export", "--csv", "-", "--runs", "1,,2"]),
    ("limit", ["runs", "--limit", "-1"]),
]


@pytest.mark.parametrize(("topic", "argv"), REFUSED, ids=[" ".join(a)[:60] for _, a in REFUSED])
def test_bad_input_is_refused_in_one_line_and_nothing_is_written(
    topic: str, argv: list[str], work: Path, run_cli: RunCli
) -> None:
    before = listing(work)
    result = run_cli(*argv)
    assert result.code == 2, (result.code, result.err)
    assert "Traceback" not in result.err
    assert len(result.err_lines) == 1, result.err
    assert result.err_lines[0].startswith("error: ") and result.out == ""
    assert topic.split("-")[0] in result.err.lower(), result.err
    assert listing(work) == before


def test_search_takes_percent_and_underscore_literally(run_cli: RunCli) -> None:
    for label in ("100% done", "a_b", "plain"):
        assert run_cli("sweep", "--seq-lens", "16", *FAST, "--label", label).code == 0

    def found(pattern: str) -> list[str]:
        result = run_cli("runs", "--search", pattern, "--json")
        assert result.code == 0, result.err
        return [r["label"] for r in json.loads(result.out)]

    assert found("%") == ["100% done"]
    assert found("100%") == ["100% done"]
    assert found("a_b") == ["a_b"]


def test_control_characters_in_a_label_are_printed_escaped(run_cli: RunCli) -> None:
    label = "evil\x1b]0;pwned\x07\x1b[2J\x00end"
    assert run_cli("sweep", "--seq-lens", "16", *FAST, "--label", label).code == 0
    for argv in (["runs"], ["show", "1"]):
        out = run_cli(*argv).out
        assert not any(c in out for c in "\x1b\x07\x00"), repr(out)
        assert r"evil\x1b]0;pwned\x07\x1b[2J\x00end" in out
    assert json.loads(run_cli("runs", "--json").out)[0]["label"] == label  # JSON keeps it exact


def test_ladder_takes_its_defaults_only_where_a_flag_is_absent(run_cli: RunCli) -> None:
    result = run_cli("ladder", "--seq-lens", "16", *FAST, "--batch", "2", "--json")
    assert result.code == 0, result.err
    assert run_cli("show", "1", "--json").code == 0
    assert json.loads(run_cli("show", "1", "--json").out)["problem"]["batch"] == 2


def test_a_blockmap_at_the_size_guard_still_runs(run_cli: RunCli) -> None:
    result = run_cli("blockmap", "--q-len", "131072", "--mask", "causal")
    assert result.code == 0, result.err
    assert result.out.startswith("2048×2048 blocks")
