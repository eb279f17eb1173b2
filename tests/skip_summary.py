"""The end of every run: the suite's wall time and its skips grouped by reason, with counts.

Under CI (``CI`` set to true/1/yes) a skip whose reason names a tool the project installs
(scripts/setup.sh --test: the CUDA compilers and binary tools, cuda.tile, PySide6, Xvfb, the
console script) fails the run: such a skip there is a broken install, not a missing GPU.
GPU-marked tests still skip cleanly without a GPU. tests/conftest.py imports these hooks.
"""

from __future__ import annotations

import os
import re
import time
from collections import Counter

import pytest

IN_CI = os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")
STARTED = pytest.StashKey[float]()
TOOL_SKIPS = pytest.StashKey[list[str]]()
# What setup.sh --test installs; a skip reason naming one of these is a broken CI machine.
PROJECT_TOOLS = re.compile(
    r"nvdisasm|cuobjdump|tileiras|cuda[._-]tile|cutile_fmha|pyside6|xvfb|qt's system"
    r"|console script|import-linter|vulture|hypothesis|pytest-qt|sqlite.utils|pyqtgraph",
    re.IGNORECASE,
)


def pytest_configure(config: pytest.Config) -> None:
    config.stash[STARTED] = time.monotonic()


def skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    """The reason a skipped report gives, without pytest's "Skipped: " prefix."""
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return reason.removeprefix("Skipped: ").strip()


def _is_gpu_test(report: pytest.TestReport | pytest.CollectReport) -> bool:
    keywords = getattr(report, "keywords", {}) or {}
    return "gpu" in keywords or "/gpu/" in report.nodeid or "gpu_workbench/" in report.nodeid


def _skips(config: pytest.Config) -> list[pytest.TestReport | pytest.CollectReport]:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return []
    return [r for r in reporter.stats.get("skipped", []) if getattr(r, "skipped", False)]


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if hasattr(config, "workerinput"):  # an xdist worker: the controller sums up
        return
    tool_skips = [
        f"{r.nodeid}: {skip_reason(r)}"
        for r in _skips(config)
        if PROJECT_TOOLS.search(skip_reason(r)) and not _is_gpu_test(r)
    ]
    config.stash[TOOL_SKIPS] = tool_skips
    if (
        IN_CI
        and tool_skips
        and exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED)
    ):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    if hasattr(config, "workerinput"):
        return
    write = terminalreporter.write_line
    skips = _skips(config)
    by_reason = Counter(skip_reason(r) for r in skips)
    terminalreporter.section(f"skips by reason: {len(skips)}", sep="-")
    for reason, count in by_reason.most_common():
        write(f"{count:4d}  {reason}")
    if not skips:
        write("none")
    tool_skips = config.stash.get(TOOL_SKIPS, [])
    if IN_CI and tool_skips:
        write(
            f"FAILED under CI: {len(tool_skips)} skipped for a tool the project installs "
            "(scripts/setup.sh --test):",
            red=True,
            bold=True,
        )
        for line in tool_skips:
            write(f"  {line}", red=True)
    started = config.stash.get(STARTED, None)
    if started is not None:
        write(f"suite wall time: {time.monotonic() - started:.1f} s")
