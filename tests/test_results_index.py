"""bench/results/ keeps only what a page cites: every committed results file is named by the
README or a page under docs/ (or is the raw data beside a named report, or is kept as evidence
for a page that exists), every results file a page names exists, and INDEX.md is current."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "results_index.py"


def _index_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("results_index", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up by name
    spec.loader.exec_module(module)
    return module


def test_every_results_file_is_cited_by_a_page() -> None:
    index = _index_module()
    orphans = [e.path for e in index.entries() if not e.cited_by]
    assert not orphans, f"cited by no page (cite them, or git rm them): {orphans}"


def test_every_kept_as_evidence_entry_points_at_a_page_that_exists() -> None:
    index = _index_module()
    for path, page in index.EVIDENCE.items():
        assert (ROOT / path).exists(), path
        assert (ROOT / page.split("#")[0]).is_file(), f"{path} is kept for {page}, which is gone"


def test_every_results_file_a_page_names_exists() -> None:
    dangling = _index_module().dangling_citations()
    assert not dangling, f"pages name results files the tree does not have: {dangling}"


def test_a_page_naming_a_missing_results_file_is_caught(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dangling check reads the pages it is given: a page naming a file that is not there
    is reported with the page's path."""
    index = _index_module()
    page = tmp_path / "docs" / "lab" / "x.md"
    page.parent.mkdir(parents=True)
    page.write_text("| a run | 1.0× | `h200-explore-not-there.md` |\n", encoding="utf-8")
    monkeypatch.setattr(index, "ROOT", tmp_path)
    monkeypatch.setattr(index, "tracked_results", lambda: [])
    monkeypatch.setattr(index, "doc_pages", lambda: [page])
    assert index.dangling_citations() == ["docs/lab/x.md: h200-explore-not-there.md"]


def test_the_index_regenerates_identically() -> None:
    shallow = subprocess.run(
        ["git", "rev-parse", "--is-shallow-repository"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if shallow == "true":
        pytest.skip("a shallow clone does not have the commits that added each file")
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_committed_databases_are_tracked_and_not_ignored() -> None:
    """.gitignore ignores *.db but lets the committed results databases be tracked, so the
    rule says what the tree does."""
    tracked = subprocess.run(
        ["git", "ls-files", "--", "bench/results"], cwd=ROOT, capture_output=True, text=True
    ).stdout.split()
    databases = [p for p in tracked if p.endswith(".db")]
    assert databases, "no committed results database"
    ignored = subprocess.run(
        ["git", "check-ignore", "--no-index", *databases], cwd=ROOT, capture_output=True, text=True
    ).stdout.split()
    assert not ignored, f".gitignore still ignores {ignored}"
    stray = subprocess.run(
        ["git", "check-ignore", "--no-index", "runs.db", "bench/x.db"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stdout.split()
    assert stray == ["runs.db", "bench/x.db"], "a stray database is no longer ignored"
