"""Performance tables generated from stored groups (`fmha-workbench report`), and the README's."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests import cpu_peers
from workbench.reports.readme_tables import README_BEGIN, README_END, readme_markers
from workbench.reports.report import build_report, markdown
from workbench.store import Store

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _second_cpu_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    cpu_peers.register(monkeypatch)


@pytest.fixture
def group_db(run_cli, fast_args, db_path: Path) -> Path:
    seed = int(np.random.SeedSequence().entropy % 2**31)
    print(f"group seed {seed}")
    result = run_cli(
        "sweep", *fast_args, "--seq-lens", "16,32", "--backends", f"reference,{cpu_peers.NAME}",
        "--mask", "causal", "--seed", str(seed),
    )  # fmt: skip
    assert result.code == 0, result.err
    return db_path


def test_report_gives_the_subjects_speedup_as_peer_over_subject_latency(group_db: Path) -> None:
    with Store(group_db) as store:
        report = build_report(store, [1], subject=cpu_peers.NAME)
        runs = {r.backend: {p.seq_len: p for p in store.points(r.id)} for r in store.group_runs(1)}
    assert [r["seq_len"] for r in report["rows"]] == [16, 32]
    for row in report["rows"]:
        n = row["seq_len"]
        expected = runs["reference"][n].latency_ms / runs[cpu_peers.NAME][n].latency_ms
        assert row["speedup"]["reference"] == pytest.approx(expected)
        assert row["tflops"]["reference"] == pytest.approx(runs["reference"][n].tflops)
        assert row["mask"] == "causal"
    text = markdown(report)
    assert "| mask | N | reference-b TFLOP/s | reference TFLOP/s | × reference |" in text
    assert "timer: wall clock around synchronous calls" in text
    assert "; group 1: every backend on the same inputs" in text


def test_report_cli_refuses_a_subject_the_group_does_not_have(run_cli, group_db: Path) -> None:
    result = run_cli("report", "--group", "1", "--subject", "cutile")
    assert result.code == 2
    assert result.err_lines == [
        "error: group 1 has no 'cutile' run (it has reference, reference-b)"
    ]
    missing = run_cli("report", "--group", "9")
    assert missing.code == 2 and "group 9" in missing.err


def test_report_rewrites_only_the_marked_table_of_a_readme(run_cli, group_db, tmp_path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(f"# Title\n\nBefore.\n\n{README_BEGIN}\nold table\n{README_END}\n\nAfter.\n")
    result = run_cli("report", "--group", "1", "--readme", str(readme))
    assert result.code == 0, result.err
    text = readme.read_text()
    assert text.startswith("# Title\n\nBefore.\n\n") and text.endswith(f"{README_END}\n\nAfter.\n")
    assert "old table" not in text and "| causal | 16 |" in text
    plain = tmp_path / "plain.md"
    plain.write_text("no markers here\n")
    refused = run_cli("report", "--group", "1", "--readme", str(plain))
    assert refused.code == 2 and "markers" in refused.err
    assert plain.read_text() == "no markers here\n"


@pytest.mark.parametrize(
    ("page", "tables"), [("README.md", 1), ("docs/performance.md", 2)], ids=["readme", "docs"]
)
def test_the_published_performance_tables_are_generated_from_the_committed_databases(
    tmp_path: Path, page: str, tables: int
) -> None:
    """What the README and docs/performance.md publish is exactly what `report` makes of the
    committed databases, by the command each page names for its table (`--readme` itself)."""
    text = (ROOT / page).read_text(encoding="utf-8")
    commands = re.findall(
        r"fmha-workbench report --db\s+(\S+)((?:\s+--group \d+)+)\s+--readme\s+([^`;)\s]+)",
        text,
    )
    assert len(commands) == tables, f"{page} names the report command of each generated table"
    for db_name, group_args, target in commands:
        assert target == page, f"{page}'s table command writes {target}"
        db = tmp_path / Path(db_name).name  # a copy: opening may migrate; the committed stays
        shutil.copy(ROOT / db_name, db)
        groups = [int(g) for g in re.findall(r"--group (\d+)", group_args)]
        with Store(db) as store:
            report = build_report(store, groups)
        begin, end_marker = readme_markers(report)
        start = text.index(begin) + len(begin)
        end = text.index(end_marker)
        assert text[start:end].strip() == markdown(report).strip(), (page, db_name)


def test_groups_of_different_problems_say_each_rows_head_dim_and_dtype(
    run_cli, fast_args, db_path: Path
) -> None:
    # Two groups, fp16 D 32 and bf16 D 64: a row must say which it is, and the method line
    # must not claim one dtype and head dim for both.
    seed = int(np.random.SeedSequence().entropy % 2**31)
    print(f"group seed {seed}")
    backends = [
        "--backends",
        f"reference,{cpu_peers.NAME}",
        "--seq-lens",
        "16",
        "--seed",
        str(seed),
    ]
    shapes = [
        ["--head-dim", "32", "--dtype", "float16"],
        ["--head-dim", "64", "--dtype", "bfloat16"],
    ]
    for shape in shapes:
        result = run_cli("sweep", *fast_args, *backends, *shape)
        assert result.code == 0, result.err
    result = run_cli("report", "--group", "1", "--group", "2")
    assert result.code == 0 and "D=64 bf16" in result.out, result.err
    with Store(db_path) as store:
        text = markdown(build_report(store, [1, 2]))
    assert "| problem | mask | N |" in text
    assert (
        "| B=1 H=1 D=32 fp16 | none | 16 |" in text and "| B=1 H=1 D=64 bf16 | none | 16 |" in text
    )
    assert "Method: B, H, D and dtype as each row says;" in text
    # One problem: no problem column, the method line names it.
    with Store(db_path) as store:
        single = markdown(build_report(store, [2]))
    assert "| problem |" not in single and "Method: bfloat16 B=1 H=1 D=64;" in single


def test_a_group_at_a_value_head_dim_of_its_own_reports_both_dims(
    run_cli, fast_args, db_path: Path
) -> None:
    seed = int(np.random.SeedSequence().entropy % 2**31)
    print(f"group seed {seed}")
    done = run_cli(
        "sweep", *fast_args, "--seq-lens", "16,32", "--backends", f"reference,{cpu_peers.NAME}",
        "--head-dim", "192", "--head-dim-v", "128", "--seed", str(seed),
    )  # fmt: skip
    assert done.code == 0, done.err
    result = run_cli("report", "--group", "1", "--markdown")
    assert result.code == 0, result.err
    method = next(line for line in result.out.splitlines() if "TFLOP/s =" in line)
    # The shape says both dims, and the FLOP count the one that counts D and Dv apart.
    assert "D=192/128" in method
    assert "TFLOP/s = 2·B·H·Nq·Nk·(D+Dv)" in method
