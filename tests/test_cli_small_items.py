"""Issue 39's small CLI items, each as a user meets it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from workbench.store import Store

ROOT = Path(__file__).resolve().parents[1]


def test_comparing_a_run_with_itself_is_refused(
    run_cli: Any, fast_args: list[str], db_path: Path
) -> None:
    run_id = run_cli("sweep", "--db", db_path, *fast_args, "--seq-lens", "16").out.strip()
    result = run_cli("compare", "--db", db_path, run_id, run_id)
    assert result.code == 2 and not result.out  # issue 51: one run twice is bad input
    assert result.err.strip() == (
        f"error: compare {run_id} {run_id}: one run twice; give two different runs"
    )


def test_runs_limit_zero_is_refused_not_called_empty(
    run_cli: Any, fast_args: list[str], db_path: Path
) -> None:
    run_cli("sweep", "--db", db_path, *fast_args, "--seq-lens", "16")
    result = run_cli("runs", "--db", db_path, "--limit", "0")
    assert result.code == 2 and "no runs yet" not in result.out
    assert result.err.strip() == "error: --limit 0: expected 1 or more runs"


def test_one_backend_under_backends_is_refused_before_anything_is_written(
    run_cli: Any, fast_args: list[str], db_path: Path
) -> None:
    result = run_cli("sweep", "--db", db_path, *fast_args, "--backends", "reference")
    assert result.code == 2 and len(result.err.splitlines()) == 1
    assert "--backends reference: a group needs two or more backends" in result.err
    assert "--backend reference" in result.err
    assert not db_path.exists()


@pytest.mark.parametrize(
    ("args", "flag", "internal"),
    [
        (["--worker-warps", "3"], "--worker-warps", "num_worker_warps"),
        (["--kv-heads", "3"], "--kv-heads", "kv_heads"),
        (["--cluster-ctas", "3"], "--cluster-ctas", "num_ctas"),
    ],
)
def test_errors_name_the_flag_the_user_typed(
    run_cli: Any, db_path: Path, args: list[str], flag: str, internal: str
) -> None:
    result = run_cli("sweep", "--db", db_path, "--seq-lens", "64", *args)
    assert result.code == 2
    assert result.err.startswith(f"error: {flag} {args[-1]}:"), result.err
    assert internal not in result.err


@pytest.mark.parametrize("form", [["--label", "-2+3"], ["--label=-2+3"]])
def test_a_label_starting_with_a_dash_is_taken(
    run_cli: Any, fast_args: list[str], db_path: Path, form: list[str]
) -> None:
    result = run_cli("sweep", "--db", db_path, *fast_args, "--seq-lens", "16", *form)
    assert result.code == 0, result.err
    with Store(db_path) as store:
        assert store.run(int(result.out.strip())).label == "-2+3"
    found = run_cli("runs", "--db", db_path, "--search", "-2+3")
    assert found.code == 0 and "-2+3" in found.out


def test_a_fresh_install_has_no_runs_yet(
    run_cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FMHA_WORKBENCH_DB", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "fresh-home"))
    result = run_cli("runs")
    assert result.code == 0, result.err
    assert result.out.startswith("no runs yet") and "check the path" not in result.err
    assert run_cli("runs", "--json").out.strip() == "[]"
    assert not (tmp_path / "fresh-home").exists()  # reading made no database
    # A path the user gave that is not there is still a mistake to point out.
    missing = run_cli("runs", "--db", tmp_path / "typo.db")
    assert missing.code == 2 and "check the path" in missing.err


def test_setup_waits_for_another_apt_instead_of_failing_on_its_lock() -> None:
    text = (ROOT / "scripts" / "setup.sh").read_text()
    calls = [line for line in text.splitlines() if re.search(r"\bapt-get\s", line)]
    calls = [line for line in calls if not line.strip().startswith("#")]
    assert calls, "setup.sh installs Qt's libraries with apt-get"
    assert "lock=(-o DPkg::Lock::Timeout=600)" in text
    for line in calls:
        if "command -v" in line:
            continue
        assert '"${lock[@]}"' in line, line


def test_a_forgotten_label_is_still_pointed_out(run_cli: Any, db_path: Path) -> None:
    result = run_cli("sweep", "--db", db_path, "--seq-lens", "16", "--label", "--heads", "1")
    assert result.code == 2 and "--label" in result.err and not db_path.exists()
