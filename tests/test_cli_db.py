"""Which database a command uses: ``--db`` before or after the command, ``FMHA_WORKBENCH_DB``,
and read-only commands that never create what they read."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from workbench.store import Store

RunCli = Callable[..., Any]
FAST_SWEEP = ["--seq-lens", "16", "--heads", "1", "--head-dim", "32"]
FAST_SWEEP += ["--warmup", "0", "--samples", "1", "--min-time", "0"]
READ_COMMANDS = [
    ["runs"],
    ["show", "1"],
    ["compare", "1", "2"],
    ["export", "--csv", "-"],
]


def run_ids(path: Path) -> list[int]:
    with Store(path) as store:
        return [r.id for r in store.runs()]


@pytest.mark.parametrize("where", ["before", "after"])
def test_db_means_the_same_before_or_after_the_command(
    where: str, run_cli: RunCli, tmp_path: Path, db_path: Path
) -> None:
    chosen = tmp_path / "chosen.db"
    argv = ["--db", str(chosen), "sweep", *FAST_SWEEP]
    if where == "after":
        argv = ["sweep", "--db", str(chosen), *FAST_SWEEP]
    assert run_cli(*argv).code == 0
    assert run_ids(chosen) == [1]
    assert not db_path.exists()  # the default (FMHA_WORKBENCH_DB here) was never touched
    for command in (["runs", "--json"], ["show", "1", "--json"], ["export", "--csv", "-"]):
        before = run_cli("--db", str(chosen), *command)
        after = run_cli(*command[:1], "--db", str(chosen), *command[1:])
        assert before.code == after.code == 0, (before.err, after.err)
        assert before.out == after.out
    assert json.loads(run_cli("--db", str(chosen), "runs", "--json").out)[0]["id"] == 1
    assert not db_path.exists()


def test_ladder_and_compare_honour_a_db_before_the_command(
    run_cli: RunCli, tmp_path: Path, db_path: Path
) -> None:
    chosen = tmp_path / "chosen.db"
    ladder = run_cli(
        "--db", str(chosen), "ladder", "--seq-lens", "16", "--heads", "1", "--head-dim", "32",
        "--warmup", "0", "--samples", "1", "--min-time", "0", "--json",
    )  # fmt: skip
    assert ladder.code == 0, ladder.err
    ids = run_ids(chosen)
    assert len(ids) >= 2
    compared = run_cli("--db", str(chosen), "compare", str(ids[-1]), str(ids[-2]), "--json")
    assert compared.code == 0, compared.err
    assert not db_path.exists()


def test_two_different_db_paths_are_refused(run_cli: RunCli, tmp_path: Path) -> None:
    result = run_cli("--db", str(tmp_path / "a.db"), "sweep", "--db", str(tmp_path / "b.db"))
    assert result.code == 2
    assert len(result.err_lines) == 1 and "--db" in result.err
    assert not (tmp_path / "a.db").exists() and not (tmp_path / "b.db").exists()


def test_the_environment_variable_chooses_the_database_of_every_command(
    run_cli: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chosen = tmp_path / "from-env.db"
    monkeypatch.setenv("FMHA_WORKBENCH_DB", str(chosen))
    assert run_cli("sweep", *FAST_SWEEP).code == 0
    assert run_ids(chosen) == [1]
    assert json.loads(run_cli("runs", "--json").out)[0]["id"] == 1
    assert run_cli("show", "1").code == 0


@pytest.mark.parametrize("command", READ_COMMANDS, ids=[c[0] for c in READ_COMMANDS])
@pytest.mark.parametrize("where", ["flag", "env"])
def test_read_only_commands_refuse_a_missing_database_and_create_nothing(
    command: list[str],
    where: str,
    run_cli: RunCli,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    missing = tmp_path / "typo" / "folder" / "runz.db"
    if where == "env":
        monkeypatch.setenv("FMHA_WORKBENCH_DB", str(missing))
        result = run_cli(*command)
    else:
        result = run_cli(command[0], "--db", str(missing), *command[1:])
    assert result.code == 2, result.err
    assert len(result.err_lines) == 1, result.err
    line = result.err_lines[0]
    assert str(missing) in line and "sweep" in line  # names the path and how to start one
    assert result.out == ""
    assert not (tmp_path / "typo").exists()  # neither the file nor its folders


def test_an_existing_empty_database_still_says_no_runs_yet(run_cli: RunCli, tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    Store(empty).close()
    result = run_cli("runs", "--db", str(empty))
    assert result.code == 0 and "no runs yet" in result.out


def test_sweep_creates_the_database_in_an_existing_folder(run_cli: RunCli, tmp_path: Path) -> None:
    fresh = tmp_path / "new" / "runs.db"
    fresh.parent.mkdir()  # a missing folder is refused (issue 51: tests/test_cli_edges_51.py)
    assert run_cli("sweep", "--db", str(fresh), *FAST_SWEEP).code == 0
    assert run_ids(fresh) == [1]


def test_window_mask_without_a_size_names_the_flag(run_cli: RunCli, db_path: Path) -> None:
    result = run_cli("sweep", *FAST_SWEEP, "--mask", "window")
    assert result.code == 2
    assert result.err_lines == [
        "error: --mask window needs --window W (each query sees the W most recent keys)"
    ]
    assert "None" not in result.err
    assert not db_path.exists()
