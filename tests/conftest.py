"""Shared fixtures for the headless suite (tests/gui and tests/gpu have their own).

Every test gets its own database: ``FMHA_WORKBENCH_DB`` points into the test's tmp directory, so
no test ever reads or writes the user's real runs.db.
"""

from __future__ import annotations

import compileall
import faulthandler
import json
import os
import secrets
import shutil
import sqlite3
import subprocess
import sys
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from tests import skip_summary

if TYPE_CHECKING:
    from workbench.backends.base import PointResult
    from workbench.config import KernelConfig, Problem
    from workbench.measure.timing import TimingSettings

VENV_BIN = Path(sys.executable).parent
REAL_STDERR_FD = pytest.StashKey[int]()
SEED_ENV = "FMHA_WORKBENCH_TEST_SEED"
SESSION_SEED = pytest.StashKey[int]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--seed",
        type=int,
        default=None,
        help=f"the random seed of the test inputs, to replay a failure (also ${SEED_ENV}); "
        "default: a fresh one, printed in the header",
    )


def _compile_the_project(config: pytest.Config) -> None:
    """Compile the project's modules once per run (into their ``__pycache__``, which
    .gitignore lists) where ``PYTHONDONTWRITEBYTECODE`` is set, as on the team's machines:
    there each of the suite's hundreds of processes (the workers, the CLI runs, the engine
    and job children) compiled them from source again, a third of a CLI run's start-up.
    Nothing else is written (a plugin file a test writes gets no bytecode to go stale), and
    Python checks each compiled file against its source before using it."""
    if not sys.dont_write_bytecode or hasattr(config, "workerinput"):
        return  # bytecode is written as modules import; a worker's controller did this
    root = Path(__file__).resolve().parents[1]
    for folder in (root / "kernels", root / "workbench", root / "tests"):
        if folder.is_dir():  # a copy of this file elsewhere (a test's own suite) has none
            compileall.compile_dir(folder, quiet=2)


def pytest_configure(config: pytest.Config) -> None:
    _compile_the_project(config)
    # A copy of the real stderr, taken here, where pytest's capture is suspended: while a test
    # runs, fd 2 is pytest's capture file, and what the hang guard writes there would be lost
    # when it ends the process.
    config.stash[REAL_STDERR_FD] = os.dup(2)
    seed = config.getoption("--seed")
    if seed is None and os.environ.get(SEED_ENV, "").strip():
        seed = int(os.environ[SEED_ENV])
    config.stash[SESSION_SEED] = seed if seed is not None else secrets.randbits(32)
    # Skips by reason and the wall time at the end; under CI a missing project tool fails.
    if not config.pluginmanager.is_registered(skip_summary):
        config.pluginmanager.register(skip_summary, "fmha-skip-summary")


@pytest.hookimpl(wrapper=True)
def pytest_collection(session: pytest.Session) -> Any:
    # pytest keeps its assertion rewrite of each test module (in __pycache__, gitignored) only
    # where bytecode may be written: with PYTHONDONTWRITEBYTECODE set, every worker rewrote
    # every test module on every run (half of a 10 s collection). Collection runs no test.
    keep = sys.dont_write_bytecode
    sys.dont_write_bytecode = False
    try:
        return (yield)
    finally:
        sys.dont_write_bytecode = keep


# The real compiler over every kernel form, 2-25 s a test from an empty cuTile cache (a new
# checkout's, CI's): the slow tier, which scripts/test.sh runs second and CI runs too.
# tests/test_cutile_offline.py keeps the compiler in the default suite.
COMPILER_TIER = frozenset(
    {
        "test_arch_tables_offline.py",
        "test_cutile_head_dim_v_offline.py",
        "test_head_dim_chunks_offline.py",
        "test_ladder_presets_offline.py",
        "test_offline_signature.py",
        "test_serving_kernels_offline.py",
    }
)


@pytest.hookimpl(tryfirst=True)  # before -m "not slow" deselects
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.name in COMPILER_TIER and item.path.parent.name == "tests":
            item.add_marker(pytest.mark.slow)


def _replay_hint(config: pytest.Config) -> str:
    seed = config.stash[SESSION_SEED]
    return f"random seed {seed}: replay with --seed {seed} (or {SEED_ENV}={seed})"


def pytest_report_header(config: pytest.Config) -> str:
    return _replay_hint(config)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.failed:
        # In the failure's own output, so a CI log excerpt carries what replays it.
        report.sections.append(("random seed", _replay_hint(item.config)))
    return report


def seed_of_test(request: pytest.FixtureRequest) -> int:
    """This test's seed: the session's, mixed with the test's id, so one test replays alone
    (``--seed S path::test``) with the inputs it had in the whole run."""
    session_seed = request.config.stash[SESSION_SEED]
    return int(
        np.random.SeedSequence(
            [session_seed, zlib.crc32(request.node.nodeid.encode())]
        ).generate_state(1)[0]
    )


@pytest.fixture(autouse=True)
def hang_guard(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that hangs (a real modal dialog, a deadlock) would stall CI until its deadline:
    after three minutes (``FMHA_WORKBENCH_TEST_HANG_S``), print every thread's stack (the main
    thread's names the test) to the real stderr and exit with status 1."""
    seconds = float(os.environ.get("FMHA_WORKBENCH_TEST_HANG_S", "180"))
    # faulthandler writes from its own watchdog thread, GIL or not, so a deadlocked main
    # thread still gets its stack printed.
    faulthandler.dump_traceback_later(seconds, exit=True, file=request.config.stash[REAL_STDERR_FD])
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


@pytest.fixture
def no_plugins_left(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """In-process CLI calls put their plugins in os.environ: restore it and the catalog
    (``pytestmark = pytest.mark.usefixtures("no_plugins_left")`` in a module that loads them)."""
    from workbench.backends import catalog
    from workbench.backends.plugin_env import ENV_KNOBS, ENV_PLUGINS

    monkeypatch.setenv(ENV_PLUGINS, "")
    monkeypatch.setenv(ENV_KNOBS, "")
    catalog.forget_plugins()
    yield
    monkeypatch.undo()
    catalog.forget_plugins()


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> np.random.Generator:
    """Fresh random inputs every run (never zeros), from the printed session seed: a failure
    replays with ``--seed``."""
    return np.random.default_rng(seed_of_test(request))


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "runs.db"


@pytest.fixture(autouse=True)
def _private_database(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FMHA_WORKBENCH_DB", str(db_path))


@pytest.fixture(autouse=True)
def _private_plugin_tuning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A plugin tuner's choices go to the test's own file, never the user's cache."""
    from workbench.backends.plugin_tuning import CACHE_ENV

    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "plugin-tuning.json"))


@dataclass(frozen=True)
class CliResult:
    code: int
    out: str
    err: str

    @property
    def err_lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.strip()]


@pytest.fixture
def run_cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., CliResult]:
    """``run_cli("runs", "--json")``: workbench.cli.main in this process, output captured."""
    from workbench.cli import main

    def run(*argv: str) -> CliResult:
        capsys.readouterr()
        code = main([str(a) for a in argv])
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


def _console_script() -> str:
    """The installed ``fmha-workbench`` entry point of this venv."""
    found = VENV_BIN / "fmha-workbench"
    if found.exists():
        return str(found)
    which = shutil.which("fmha-workbench")
    if which is None:
        pytest.skip("the fmha-workbench console script is not installed")
    return which


@pytest.fixture
def script() -> Callable[..., subprocess.CompletedProcess[str]]:
    """``script(db, "runs", "--json")``: the installed console script in a real subprocess."""
    exe = _console_script()

    def run(db: Path, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [exe, *map(str, argv)],
            capture_output=True,
            text=True,
            env=subprocess_env(db),
            timeout=timeout,
            check=False,
        )

    return run


@pytest.fixture
def python_facts() -> Callable[..., dict[str, Any]]:
    """``python_facts(code, *argv, timeout=..., cwd=...)``: ``code`` in a fresh interpreter
    (nothing this test process imported leaks in); it must exit 0, and the JSON object on its
    last line of output is returned."""

    def run(
        code: str, *argv: object, timeout: float = 300, cwd: Path | None = None
    ) -> dict[str, Any]:
        done = subprocess.run(
            [sys.executable, "-c", code, *map(str, argv)],
            capture_output=True,
            text=True,
            cwd=cwd,
            timeout=timeout,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.strip().splitlines()[-1])

    return run


@pytest.fixture
def sweep_command() -> Callable[..., list[str]]:
    """``sweep_command(db, "--seq-lens", "16")``: argv of a console-script sweep, for Popen."""
    exe = _console_script()
    return lambda db, *argv: [exe, "sweep", "--db", str(db), *map(str, argv)]


def subprocess_env(db: Path | None = None) -> dict[str, str]:
    env = dict(os.environ)
    if db is not None:
        env["FMHA_WORKBENCH_DB"] = str(db)
    return env


def _count_rows(path: Path, table: str) -> int:
    """Rows of ``table`` read with plain sqlite3; 0 when there is no file or no such table."""
    if not path.exists():
        return 0
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        if table not in tables:
            return 0
        return conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
    finally:
        conn.close()


@pytest.fixture
def count_rows() -> Callable[[Path, str], int]:
    """``count_rows(db, "runs")``: how many rows a table of a database file holds."""
    return _count_rows


def fast_timing() -> TimingSettings:
    from workbench.measure.timing import TimingSettings

    return TimingSettings(warmup=0, min_samples=1, max_samples=1, min_time_s=0.0)


def _measure_point(
    problem: Problem, config: KernelConfig, rng: np.random.Generator | None = None
) -> PointResult:
    """A real PointResult from the reference backend, as it can be measured."""
    from workbench.backends.reference import ReferenceBackend

    return ReferenceBackend().measure_point(
        problem, config, fast_timing(), rng or np.random.default_rng()
    )


@pytest.fixture
def measure(rng: np.random.Generator) -> Callable[..., PointResult]:
    """``measure(problem, config[, rng])``: a real reference-backend point, measured quickly,
    on inputs from the test's seeded generator unless given one."""

    def run(
        problem: Problem, config: KernelConfig, own: np.random.Generator | None = None
    ) -> PointResult:
        return _measure_point(problem, config, own or rng)

    return run


@pytest.fixture
def fast_args() -> list[str]:
    """Sweep arguments for the quickest reference points: tiny heads, one timed sample."""
    return ["--batch", "1", "--heads", "1", "--head-dim", "32", *FAST_TIMING_ARGS]


FAST_TIMING_ARGS = ["--warmup", "0", "--samples", "1", "--min-time", "0"]
