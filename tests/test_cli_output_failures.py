"""Issue #51 items 4, 7 and 14: the command line's output on a full disk, onto a FIFO nobody
reads, and its last words after an unfinished progress line, driven as a user would (the
console script in real subprocesses, a real small file system, real FIFOs and signals)."""

from __future__ import annotations

import csv
import io
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import FAST_TIMING_ARGS, _console_script, subprocess_env
from tests.small_disk import fill, small_filesystem

SLOW_SWEEP = ["--seq-lens", "256,2048,4096,8192", "--heads", "8", "--mask", "causal"]
SWEEP_LENGTHS = ",".join(str(16 * i) for i in range(1, 13))  # a CSV of about 7 KB


@pytest.fixture(scope="module")
def swept_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real console-script sweep for the module (0.7 s of each test's second, when every
    test made its own)."""
    db = tmp_path_factory.mktemp("swept") / "runs.db"
    done = run(db, "sweep", "--seq-lens", SWEEP_LENGTHS, "--heads", "1", *FAST_TIMING_ARGS)
    assert done.returncode == 0, done.stderr
    return db


@pytest.fixture
def swept(swept_once: Path, tmp_path: Path) -> Path:
    """The test's own copy of the swept database (with its WAL files, if any were left)."""
    db = tmp_path / "runs.db"
    for suffix in ("", "-wal", "-shm"):
        made = swept_once.with_name(swept_once.name + suffix)
        if made.exists():
            shutil.copy(made, db.with_name(db.name + suffix))
    return db


def run(db: Path, *argv: str, stdout: object = subprocess.PIPE) -> subprocess.CompletedProcess:
    return subprocess.run(
        [_console_script(), "--db", str(db), *argv],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        env=subprocess_env(db),
        timeout=60,
        check=False,
    )


def one_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.mark.parametrize("command", [["export", "--csv", "-"], ["runs"], ["runs", "--json"]])
def test_output_into_dev_full_fails_in_one_line_with_exit_1(swept: Path, command: list) -> None:
    with open("/dev/full", "w") as full:
        done = run(swept, *command, stdout=full)
    assert done.returncode == 1, done.stderr
    assert one_line(done.stderr) == "error: writing to stdout failed: No space left on device"


def test_show_into_dev_full_fails_in_one_line_with_exit_1(swept: Path) -> None:
    with open("/dev/full", "w") as full:
        done = run(swept, "show", "1", stdout=full)
    assert done.returncode == 1
    assert "No space left on device" in one_line(done.stderr)


def test_export_to_stdout_redirected_onto_a_full_disk_exits_1(swept: Path, tmp_path: Path) -> None:
    whole = run(swept, "export", "--csv", "-")
    assert whole.returncode == 0 and len(whole.stdout) > 4096 + 512, whole.stderr
    with small_filesystem(tmp_path / "small", 64) as small:
        fill(small, leave_bytes=4096)  # room for half the CSV: the write fails part-way
        target = small / "export.csv"
        with open(target, "w") as out:
            done = run(swept, "export", "--csv", "-", stdout=out)
        written = target.stat().st_size
    assert 0 < written < len(whole.stdout.encode())
    assert done.returncode == 1, done.stderr
    assert one_line(done.stderr) == "error: writing to stdout failed: No space left on device"


def test_export_onto_a_fifo_with_no_reader_is_refused_at_once(swept: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "nobody-reads.csv"
    os.mkfifo(fifo)
    started = time.monotonic()
    done = run(swept, "export", "--csv", str(fifo))
    assert time.monotonic() - started < 20  # it used to wait for a reader forever
    assert done.returncode == 2
    line = one_line(done.stderr)
    assert str(fifo) in line and "no reader" in line


def test_export_onto_a_fifo_with_a_reader_feeds_it(swept: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "read.csv"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    time.sleep(0.2)  # the reader has it open before the export looks
    done = run(swept, "export", "--csv", str(fifo))
    reader.join(timeout=30)
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(io.StringIO(received[0].decode())))
    assert len(rows) == len(SWEEP_LENGTHS.split(","))


def _sweep_until(db: Path, seen: str) -> tuple[subprocess.Popen, Callable[[], str]]:
    """A slow sweep in a real process, returned once its stderr shows ``seen``."""
    child = subprocess.Popen(
        [_console_script(), "sweep", "--db", str(db), *SLOW_SWEEP, *FAST_TIMING_ARGS],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=subprocess_env(db),
    )
    got = bytearray()

    def pump() -> None:
        while chunk := os.read(child.stderr.fileno(), 4096):
            got.extend(chunk)

    pumping = threading.Thread(target=pump, daemon=True)
    pumping.start()
    deadline = time.monotonic() + 60
    while seen.encode() not in got and time.monotonic() < deadline:
        time.sleep(0.01)
    assert seen.encode() in got, got.decode()

    def rest() -> str:
        child.wait(timeout=60)
        pumping.join(timeout=10)
        return got.decode()

    return child, rest


@pytest.mark.parametrize(
    ("how", "word", "code"),
    [(signal.SIGTERM, "terminated", 143), (signal.SIGINT, "interrupted", 130)],
)
def test_the_last_word_after_an_unfinished_point_is_on_its_own_line(
    tmp_path: Path, how: signal.Signals, word: str, code: int
) -> None:
    child, rest = _sweep_until(tmp_path / "runs.db", "[2/4] N=2048 …")
    child.send_signal(how)
    err = rest()
    assert child.returncode == code, err
    lines = err.splitlines()
    assert word in lines, err  # not "[2/4] N=2048 …terminated"
    assert lines[lines.index(word) - 1].strip() == "[2/4] N=2048 …", err  # ended, then said


def test_an_export_file_on_a_full_disk_exits_1_and_leaves_the_old_file(
    swept: Path, tmp_path: Path
) -> None:
    with small_filesystem(tmp_path / "small", 64) as small:
        target = small / "export.csv"
        target.write_text("the old export\n")
        fill(small, leave_bytes=4096)
        done = run(swept, "export", "--csv", str(target))
        kept = target.read_text()
        left = sorted(p.name for p in small.iterdir())
    assert done.returncode == 1, done.stderr
    assert one_line(done.stderr) == f"error: cannot write {target}: No space left on device"
    assert kept == "the old export\n"
    assert left == ["export.csv", "filler"]  # no partial temporary file either


def test_output_onto_a_closed_stdout_is_one_line_and_exit_1(swept: Path) -> None:
    done = subprocess.run(  # as `fmha-workbench runs >&-` starts it
        [_console_script(), "--db", str(swept), "runs"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=subprocess_env(swept),
        timeout=60,
        check=False,
        preexec_fn=lambda: os.close(1),
    )
    assert done.returncode == 1, done.stderr
    assert one_line(done.stderr) == "error: writing to stdout failed: stdout is closed"
