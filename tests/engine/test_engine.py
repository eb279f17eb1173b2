"""The supervised engine keeps the caller alive through crashes, hangs and errors in the child.

These run on any machine: the child's "faults" are a real SIGSEGV, a real hang and a raised
error, which is what a GPU fault looks like from the parent. tests/gpu adds a real illegal
memory access on a GPU.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from workbench.backends.base import Availability
from workbench.backends.isolated import IsolatedBackend
from workbench.backends.reference import ReferenceBackend
from workbench.config import KernelConfig, Problem, SweepSpec
from workbench.jobs import run_sweep
from workbench.measure.timing import TimingSettings
from workbench.run import engine as engine_module
from workbench.run.engine import Engine, EngineFailure
from workbench.run.events import RunFinished
from workbench.store import Store

H = "tests.engine.helpers"
QUICK = TimingSettings(warmup=0, min_samples=2, min_time_s=0.0)


@pytest.fixture(params=["spawn", "forkserver"])
def start_method(request, monkeypatch) -> str:
    """Each test both ways children start: spawned (the command line's) and forked from the
    window's fork server."""
    if request.param == "forkserver":
        engine_module.use_fork_server()
    monkeypatch.setattr(engine_module, "_start_method", request.param)
    return str(request.param)


@pytest.fixture
def engine(start_method):
    with Engine(timeout_s=60) as eng:
        yield eng


def test_calls_run_in_another_process_and_return_values(engine):
    child = engine.call(f"{H}:pid")
    assert child != os.getpid()
    assert engine.call(f"{H}:add", 2, 3) == 5
    assert engine.call(f"{H}:pid") == child  # the child is kept between calls


def test_a_crashing_child_fails_the_call_and_the_next_call_gets_a_fresh_child(engine):
    first = engine.call(f"{H}:pid")
    with pytest.raises(EngineFailure, match="died"):
        engine.call(f"{H}:crash_hard")
    second = engine.call(f"{H}:pid")
    assert second not in (first, os.getpid())
    assert engine.restarts == 1


def test_a_hang_past_the_limit_is_stopped_and_reported(engine):
    with pytest.raises(EngineFailure, match="did not answer within 1 s"):
        engine.call(f"{H}:hang", 30, timeout_s=1)
    assert engine.call(f"{H}:add", 1, 1) == 2


def test_an_error_in_the_child_carries_its_text_and_the_child_is_replaced(engine):
    first = engine.call(f"{H}:pid")
    with pytest.raises(EngineFailure, match="RuntimeError: kernel exploded"):
        engine.call(f"{H}:fail", "kernel exploded")
    assert engine.call(f"{H}:pid") != first


def test_the_child_does_not_inherit_a_cuda_home_that_breaks_tileiras(engine, monkeypatch, tmp_path):
    old_toolkit = tmp_path / "cuda-13.0"
    old_toolkit.mkdir()
    (old_toolkit / "version.json").write_text(json.dumps({"cuda": {"version": "13.0.48"}}))
    monkeypatch.setenv("CUDA_HOME", str(old_toolkit))
    assert engine.call(f"{H}:cuda_home") is None
    assert os.environ["CUDA_HOME"] == str(old_toolkit)  # the parent's environment is untouched


class CrashingReference(ReferenceBackend):
    """A CPU backend that dies like a faulting kernel on its second point."""

    name = "reference"

    def measure_point(self, problem, config, settings, rng):
        if problem.q_len > 64:
            os.kill(os.getpid(), 11)
        return super().measure_point(problem, config, settings, rng)


def measure_with_crash(problem, config, settings, rng):
    return ("ok", CrashingReference().measure_point(problem, config, settings, rng))


class CrashingIsolated(IsolatedBackend):
    def _call(self, method, *args):
        if method == "measure_point":
            _, value = self.engine.call("tests.engine.test_engine:measure_with_crash", *args)
            return value
        return super()._call(method, *args)

    def availability(self):
        return Availability(True, "test")


def test_a_run_whose_backend_crashes_is_failed_with_its_points_and_the_next_run_works(tmp_path):
    store = Store(tmp_path / "runs.db")
    engine = Engine(timeout_s=60)
    problem = Problem(batch=1, heads=2, head_dim=32)
    spec = SweepSpec(problem, (32, 64, 128), KernelConfig(mask="causal"), "reference")
    backend = CrashingIsolated(ReferenceBackend(), engine)
    events = list(run_sweep(spec, store, backend=backend, timing=QUICK))
    finished = events[-1]
    assert isinstance(finished, RunFinished) and finished.status == "failed"
    assert "died" in finished.error
    run = store.run(finished.run_id)
    assert run.status == "failed"
    assert [p.seq_len for p in store.points(run.id)] == [32, 64]

    healthy = IsolatedBackend(ReferenceBackend(), engine)
    spec2 = SweepSpec(problem, (48,), KernelConfig(), "reference")
    events = list(run_sweep(spec2, store, backend=healthy, timing=QUICK))
    assert events[-1].status == "complete"
    point = store.points(events[-1].run_id)[0]
    assert point.rel_err is not None and point.rel_err < 1e-5
    engine.close()


def test_a_refusal_in_the_child_comes_back_as_the_same_error_and_keeps_the_child(engine):
    target = "workbench.backends.isolated:child_call"
    assert engine.call(target, "reference", "availability")[0] == "ok"
    child = engine.pid
    kind, error = engine.call(target, "nonexistent-backend", "availability")
    assert kind == "refused"
    assert "nonexistent-backend" in str(error)
    assert engine.pid == child


def test_an_isolated_backend_measures_like_the_real_one():
    engine = Engine(timeout_s=60)
    backend = IsolatedBackend(ReferenceBackend(), engine)
    problem = Problem(heads=2, q_len=40, k_len=40, head_dim=32)
    result = backend.measure_point(
        problem, KernelConfig(mask="causal"), QUICK, np.random.default_rng()
    )
    assert result.accuracy.passed
    assert result.block_counts() == {"computed": 0, "masked": 1, "skipped": 0}
    assert engine.pid is not None and engine.pid != os.getpid()
    engine.close()


def test_a_config_refusal_survives_the_trip_between_processes():
    import pickle

    from workbench.config import ConfigError

    error = ConfigError("q_len", 65536, "the scores need 200 GiB")
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.field, copy.value, copy.allowed, str(copy)) == (
        error.field,
        error.value,
        error.allowed,
        str(error),
    )


def test_a_stream_yields_as_the_child_yields_and_keeps_the_child(engine):
    child = engine.call(f"{H}:pid")
    assert list(engine.stream(f"{H}:count", 4)) == [0, 1, 2, 3]
    assert engine.call(f"{H}:pid") == child  # one protocol: calls and streams share the child


def test_a_crash_mid_stream_keeps_what_came_and_says_the_child_died(engine):
    got = []
    with pytest.raises(EngineFailure) as failure:
        for item in engine.stream(f"{H}:count_then_crash", 2):
            got.append(item)
    assert got == [0, 1]
    assert failure.value.died and failure.value.exitcode == -11
    assert engine.call(f"{H}:add", 1, 2) == 3  # a fresh child


def test_an_error_mid_stream_comes_back_as_itself(engine):
    from workbench.config import ConfigError

    stream = engine.stream(f"{H}:count_then_refuse", 1)
    assert next(stream) == 0
    with pytest.raises(EngineFailure) as failure:
        next(stream)
    original = failure.value.original
    assert isinstance(original, ConfigError) and original.field == "heads"
    assert not failure.value.died and "ConfigError" in str(failure.value)


def test_kill_ends_a_stream_from_another_thread_at_once(engine):
    import threading
    import time

    stream = engine.stream(f"{H}:count", 100, 0.5)
    assert next(stream) == 0
    started = time.perf_counter()
    threading.Timer(0.2, engine.kill).start()
    with pytest.raises(EngineFailure) as failure:
        list(stream)
    assert failure.value.died
    assert time.perf_counter() - started < 5  # not the 50 s the stream had left
    assert engine.call(f"{H}:add", 2, 2) == 4


def test_a_consumer_that_stops_early_ends_the_child_and_the_next_request_works(engine):
    first = engine.call(f"{H}:pid")
    stream = engine.stream(f"{H}:count", 1000, 0.01)
    assert next(stream) == 0
    stream.close()  # the rest has nowhere to go: the child is ended, not left streaming
    assert engine.call(f"{H}:pid") != first
    assert list(engine.stream(f"{H}:count", 2)) == [0, 1]


def test_a_stream_that_stalls_past_the_limit_is_stopped(engine):
    with pytest.raises(EngineFailure, match="did not answer within 1 s"):
        list(engine.stream(f"{H}:count", 3, 30, timeout_s=1))
    assert engine.call(f"{H}:add", 1, 1) == 2


def _running(pid: int) -> bool:
    """Alive and not a zombie (an ended orphan may wait for a PID 1 that does not reap)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_the_child_runs_with_the_environment_of_its_start_not_the_servers(
    engine, monkeypatch, start_method
):
    """A plugin named on the command line reaches the child through the environment; a child
    forked from a server started earlier must see the window's variables as they are now."""
    monkeypatch.setenv("FMHA_WORKBENCH_PLUGINS", "/tmp/named-after-the-server-started.py")
    monkeypatch.delenv("HOME", raising=False)
    assert engine.call("os:getenv", "FMHA_WORKBENCH_PLUGINS") == (
        "/tmp/named-after-the-server-started.py"
    )
    assert engine.call("os:getenv", "HOME") is None
    # The fork server's children are not this process's own: the path under test is taken.
    assert (engine.call("os:getppid") == os.getpid()) == (start_method == "spawn")


def test_the_child_follows_the_blas_threads_its_parent_asks_for(start_method, monkeypatch):
    """A forked child's NumPy was loaded in the fork server: its BLAS threads are set again
    from the window's environment, or a reference run would record (and run with) the
    server's."""
    for threads in (1, 2):
        monkeypatch.setenv("OPENBLAS_NUM_THREADS", str(threads))
        with Engine(timeout_s=60) as eng:
            assert eng.call("workbench.measure.blas:blas_threads") == threads


@pytest.mark.parametrize("fork_server", [False, True], ids=["spawned", "fork-server"])
def test_an_engine_child_ends_when_the_process_that_started_it_is_killed(tmp_path, fork_server):
    """Cancel kills a job child; the GPU engine that child started must not compute on."""
    import multiprocessing as mp
    import signal
    import time

    pid_file = tmp_path / "grandchild.pid"
    from tests.engine import helpers

    middle = mp.get_context("spawn").Process(
        target=helpers.engine_grandchild_pid, args=(str(pid_file), fork_server)
    )
    middle.start()
    deadline = time.monotonic() + 30
    while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    grandchild = int(pid_file.read_text())
    os.kill(grandchild, 0)  # alive, busy in its call
    os.kill(middle.pid, signal.SIGKILL)
    middle.join(10)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if not _running(grandchild):
            return
        time.sleep(0.05)
    os.kill(grandchild, signal.SIGKILL)
    pytest.fail("the engine child kept running after its parent was killed")
