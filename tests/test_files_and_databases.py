"""Issue 38, as a user meets it: export never writes where the user did not ask, reading
commands never change a file, a run always says what happened to it.

Every case runs without root: the links, FIFOs and device-like targets are made here (a link to
/dev/null stands for a device node), and the read-only database is read by an unprivileged user.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from workbench.store import SCHEMA_VERSION, Store

RunCli = Callable[..., Any]
FAST = ["--heads", "1", "--head-dim", "32", "--warmup", "0", "--samples", "1", "--min-time", "0"]
READ_COMMANDS = [["runs"], ["show", "1"], ["compare", "1", "2"], ["export", "--csv", "-"]]
FORMULAS = ["=cmd|' /C calc'!A0", '=HYPERLINK("http://x","y")', "+1+1", "-2+3", "@SUM(A1)",
            "\tleading tab", "\rleading return"]  # fmt: skip


def listing(folder: Path) -> dict[str, tuple[str, bytes | str]]:
    """Every entry of ``folder`` (recursively) with its kind and content or link target."""
    found: dict[str, tuple[str, bytes | str]] = {}
    for path in sorted(folder.rglob("*")):
        name = str(path.relative_to(folder))
        if path.is_symlink():
            found[name] = ("link", os.readlink(path))
        elif path.is_fifo():
            found[name] = ("fifo", "")
        elif path.is_file():
            found[name] = ("file", path.read_bytes())
        else:
            found[name] = ("dir", "")
    return found


@pytest.fixture
def filled(run_cli: RunCli, db_path: Path) -> Path:
    """A database with two complete runs (ids 1 and 2), checkpointed."""
    for label in ("first", "second"):
        result = run_cli("sweep", "--seq-lens", "16,32", *FAST, "--label", label)
        assert result.code == 0, result.err
    return db_path


def assert_one_line_refusal(result: Any) -> str:
    assert result.code == 2, (result.code, result.err)
    assert "Traceback" not in result.err
    assert len(result.err_lines) == 1, result.err
    assert result.err_lines[0].startswith("error: ")
    return result.err_lines[0]


# --- 1. no link followed at the temporary name; nothing left behind -----------------------------


def test_export_never_writes_through_a_link_planted_at_a_temporary_name(
    filled: Path, run_cli: RunCli, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    victim = out / "victim.txt"
    victim.write_text("precious\n")
    for trap in (".target.csv.partial", ".target.csv.tmp", "target.csv.partial"):
        (out / trap).symlink_to(victim)
    result = run_cli("export", "--csv", str(out / "target.csv"))
    assert result.code == 0, result.err
    assert victim.read_text() == "precious\n"
    target = out / "target.csv"
    assert not target.is_symlink() and target.is_file()
    assert len(list(csv.DictReader(target.open(encoding="utf-8")))) == 4
    # Only the export is new: no temporary file of its own is left beside it.
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["victim.txt", "target.csv", ".target.csv.partial", ".target.csv.tmp",
         "target.csv.partial"]
    )  # fmt: skip


@pytest.mark.parametrize("failure", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_an_export_that_fails_half_way_leaves_the_old_file_and_no_temporary_one(
    failure: BaseException,
    filled: Path,
    run_cli: RunCli,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.csv").write_text("the old export\n")
    before = listing(out)

    def broken_fsync(fd: int) -> None:
        raise failure

    monkeypatch.setattr(os, "fsync", broken_fsync)
    result = run_cli("export", "--csv", str(out / "report.csv"))
    if isinstance(failure, KeyboardInterrupt):
        assert result.code == 130
    else:  # a failed write, not bad input: exit 1 (issue 51), still one line
        assert result.code == 1 and len(result.err.splitlines()) == 1, result.err
        assert "No space left" in result.err and "Traceback" not in result.err
    assert listing(out) == before


def _unnamed_files_work(folder: Path) -> bool:
    try:
        os.close(os.open(folder, os.O_TMPFILE | os.O_WRONLY, 0o600))
        return True
    except (AttributeError, OSError):
        return False


def test_while_an_export_is_being_written_it_has_no_name_a_kill_could_leave_behind(
    filled: Path, run_cli: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kill -9 mid-export left a 4 MB .NAME.partial: now the content is written to a file with
    no name (O_TMPFILE), which gets one only when it is complete."""
    out = tmp_path / "out"
    out.mkdir()
    if not _unnamed_files_work(out):
        pytest.skip("this file system has no O_TMPFILE; the named fallback is cleaned up on exit")
    seen_while_writing: list[list[str]] = []
    real_fsync = os.fsync

    def fsync_and_look(fd: int) -> None:  # the content is all written when it is synced
        seen_while_writing.append(sorted(p.name for p in out.iterdir()))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync_and_look)
    assert run_cli("export", "--csv", str(out / "big.csv")).code == 0
    assert seen_while_writing == [[]]
    assert sorted(p.name for p in out.iterdir()) == ["big.csv"]


# --- 2. FIFOs and devices are written in place --------------------------------------------------


def test_export_to_a_fifo_feeds_its_reader_and_leaves_the_fifo(
    filled: Path, run_cli: RunCli, tmp_path: Path
) -> None:
    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    result = run_cli("export", "--csv", str(fifo))
    reader.join(timeout=30)
    assert result.code == 0, result.err
    assert not reader.is_alive()
    rows = list(csv.DictReader(io.StringIO(received[0].decode("utf-8"))))
    assert [r["label"] for r in rows] == ["first", "first", "second", "second"]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)  # still the pipe, not a regular file
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "runs.db") == ["pipe.csv"]


def test_export_to_a_device_writes_into_it_and_never_replaces_it(
    filled: Path, run_cli: RunCli, tmp_path: Path
) -> None:
    mynull = tmp_path / "mynull"
    mynull.symlink_to("/dev/null")
    before = os.stat("/dev/null")
    result = run_cli("export", "--csv", str(mynull))
    assert result.code == 0, result.err
    assert mynull.is_symlink() and os.readlink(mynull) == "/dev/null"
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_ino == before.st_ino
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    assert run_cli("export", "--csv", "/dev/null").code == 0
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_export_through_a_link_to_a_file_keeps_the_link(
    filled: Path, run_cli: RunCli, tmp_path: Path
) -> None:
    real = tmp_path / "real.csv"
    real.write_text("old\n")
    link = tmp_path / "latest.csv"
    link.symlink_to(real.name)
    assert run_cli("export", "--csv", str(link)).code == 0
    assert link.is_symlink() and real.read_text().startswith("run_id,label,")


# --- 3. never onto the database, nor onto any SQLite file ---------------------------------------


def test_export_onto_the_open_database_is_refused_and_every_run_survives(
    filled: Path, run_cli: RunCli, tmp_path: Path
) -> None:
    before = filled.read_bytes()
    hard = tmp_path / "hard.db"
    os.link(filled, hard)
    soft = tmp_path / "soft.csv"
    soft.symlink_to(filled)
    for target in (filled, hard, soft, filled.with_name(filled.name + "-wal")):
        result = run_cli("export", "--db", str(filled), "--csv", str(target))
        line = assert_one_line_refusal(result)
        assert "database" in line
    assert filled.read_bytes() == before
    listed = run_cli("runs", "--db", str(filled), "--json")
    assert listed.code == 0 and len(json.loads(listed.out)) == 2


def test_export_onto_another_sqlite_file_is_refused(
    filled: Path, run_cli: RunCli, tmp_path: Path
) -> None:
    other = tmp_path / "accounts.sqlite"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    conn.commit()
    conn.close()
    before = other.read_bytes()
    line = assert_one_line_refusal(run_cli("export", "--csv", str(other)))
    assert "SQLite" in line
    assert other.read_bytes() == before


# --- 5. formula injection -----------------------------------------------------------------------


@pytest.mark.parametrize("to_stdout", [False, True], ids=["file", "stdout"])
def test_exported_text_cells_cannot_run_as_formulas_and_numbers_stay_numbers(
    to_stdout: bool, run_cli: RunCli, tmp_path: Path
) -> None:
    for label in FORMULAS:
        assert run_cli("sweep", "--seq-lens", "16", *FAST, f"--label={label}").code == 0
    target = tmp_path / "out.csv"
    result = run_cli("export", "--csv", "-" if to_stdout else str(target))
    assert result.code == 0, result.err
    text = result.out if to_stdout else target.read_bytes().decode("utf-8")
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    assert [r["label"] for r in rows] == ["'" + label for label in FORMULAS]
    for row in rows:
        assert float(row["latency_ms"]) > 0 and int(row["run_id"]) >= 1  # numbers untouched
        assert row["status"] == "complete" and row["backend"] == "reference"


# --- 6, 7. what is not a run database is refused and untouched ----------------------------------


def foreign_database(path: Path, version: int = 0) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("INSERT INTO customers (name) VALUES ('Ada')")
    conn.execute(f"PRAGMA user_version = {version}")
    conn.commit()
    conn.close()


NOT_A_RUN_DATABASE: dict[str, Callable[[Path], None]] = {
    "notes": lambda p: p.write_text("my notes\n"),
    "random bytes": lambda p: p.write_bytes(os.urandom(8192)),
    "foreign sqlite": foreign_database,
    "foreign sqlite at version 7": lambda p: foreign_database(p, 7),
}


@pytest.mark.parametrize("kind", list(NOT_A_RUN_DATABASE))
@pytest.mark.parametrize(
    "command",
    [*READ_COMMANDS, ["sweep", "--seq-lens", "16", *FAST], ["report", "--group", "1"]],
    ids=lambda c: c[0],
)
def test_a_file_that_is_not_a_run_database_is_refused_by_every_command_untouched(
    kind: str, command: list[str], run_cli: RunCli, tmp_path: Path
) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    victim = folder / "notes.db"
    NOT_A_RUN_DATABASE[kind](victim)
    before = listing(folder)
    line = assert_one_line_refusal(run_cli(command[0], "--db", str(victim), *command[1:]))
    assert str(victim) in line and "nothing was changed" in line
    assert listing(folder) == before  # not renamed, not migrated, no -wal, no fresh file
    if kind.startswith("foreign"):
        conn = sqlite3.connect(f"file:{victim}?mode=ro", uri=True)
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # not WAL
        conn.close()


def test_a_folder_or_a_fifo_given_as_the_database_is_refused(
    run_cli: RunCli, tmp_path: Path
) -> None:
    fifo = tmp_path / "runs.fifo"
    os.mkfifo(fifo)
    for target in (fifo, tmp_path):
        for command in (["runs"], ["sweep", "--seq-lens", "16", *FAST]):
            line = assert_one_line_refusal(run_cli(command[0], "--db", str(target), *command[1:]))
            assert "cannot open" in line
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


# --- 8. reading commands never write ------------------------------------------------------------


def test_reading_commands_do_not_mark_or_migrate_they_only_show(
    filled: Path, run_cli: RunCli, tmp_path: Path
) -> None:
    """A run whose process is gone reads "interrupted" to a reading command, but the file is
    not changed: only a writer stores it so."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    conn = sqlite3.connect(filled)
    conn.execute(
        "UPDATE runs SET status = 'running', finished_at = NULL, machine = json_set(machine, "
        "'$.pid', ?) WHERE id = 2",
        [child.pid],
    )
    conn.commit()
    conn.close()
    before = listing(filled.parent)
    for command in READ_COMMANDS:
        assert run_cli(*command).code == 0
    shown = run_cli("show", "2")
    assert "failed: interrupted" in shown.out
    assert json.loads(run_cli("runs", "--json").out)[0]["status"] == "failed"
    assert listing(filled.parent) == before  # byte for byte, and no -wal/-shm either
    assert run_cli("sweep", "--seq-lens", "16", *FAST).code == 0  # a writer stores the mark
    with sqlite3.connect(filled) as conn:
        assert conn.execute("SELECT status FROM runs WHERE id = 2").fetchone()[0] == "failed"


def test_reading_commands_read_an_older_schema_without_migrating_it(
    run_cli: RunCli, db_path: Path
) -> None:
    from tests.test_store import build_schema_1

    build_schema_1(db_path)
    before = db_path.read_bytes()
    shown = run_cli("show", "7")
    assert shown.code == 0 and "from schema 1" in shown.out
    assert run_cli("export", "--csv", "-").out.count("\n") == 3  # header + two points
    assert db_path.read_bytes() == before
    with sqlite3.connect(f"file:{db_path}?mode=ro", uri=True) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 1


UNPRIVILEGED = 65534  # nobody


def _unprivileged_python() -> list[str] | None:
    """A command line that runs this suite's Python as a user without write permission:
    this user when it is not root; as root, the nobody user (with an interpreter nobody can
    execute, and this venv's packages), else None."""
    if os.geteuid() != 0:
        return [sys.executable]
    if shutil.which("setpriv") is None:
        return None
    drop = ["setpriv", f"--reuid={UNPRIVILEGED}", f"--regid={UNPRIVILEGED}", "--clear-groups"]
    minor = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for exe in (sys.executable, shutil.which(minor), f"/usr/bin/{minor}"):
        if exe and subprocess.run([*drop, exe, "-c", "import sqlite3, numpy, sqlite_utils"],
                                  capture_output=True, env=_unprivileged_env(),
                                  check=False).returncode == 0:  # fmt: skip
            return [*drop, exe]
    return None


def _unprivileged_env() -> dict[str, str]:
    root = str(Path(__file__).resolve().parents[1])
    site = sysconfig.get_paths()["purelib"]
    return {**os.environ, "PYTHONPATH": os.pathsep.join([root, site]), "HOME": "/tmp"}


@pytest.fixture
def shared_folder(tmp_path: Path) -> Iterator[Path]:
    """A folder an unprivileged user can reach (root's pytest folder is private)."""
    folder = Path(
        tempfile.mkdtemp(prefix="fmha-ro-", dir="/tmp" if os.geteuid() == 0 else tmp_path)
    )
    folder.chmod(0o755)
    yield folder
    for path in [folder, *folder.rglob("*")]:
        if path.is_dir() and not path.is_symlink():
            path.chmod(0o755)
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("where", ["444 file", "555 folder"])
def test_a_database_the_user_cannot_write_is_read_by_every_reading_command(
    where: str, filled: Path, shared_folder: Path
) -> None:
    python = _unprivileged_python()
    if python is None:
        pytest.skip("no interpreter an unprivileged user can run (root without setpriv)")
    folder = shared_folder / "media"
    folder.mkdir()
    db = folder / "runs.db"
    shutil.copy(filled, db)
    assert not db.with_name("runs.db-wal").exists()  # WAL files absent, as on read-only media
    db.chmod(0o444)
    if where == "555 folder":
        folder.chmod(0o555)
    before = listing(folder)
    for command in READ_COMMANDS:
        done = subprocess.run(
            [*python, "-m", "workbench", *command, "--db", str(db)],
            capture_output=True, text=True, env=_unprivileged_env(), timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, (command, done.stderr)
        assert "Traceback" not in done.stderr and "readonly" not in done.stderr
        assert "first" in done.stdout or "second" in done.stdout or "Δ" in done.stdout
    assert listing(folder) == before


# --- 9. a lock held mid-sweep ---------------------------------------------------------------------

HOLD_LOCK = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("COMMIT")
"""


def test_a_lock_taken_mid_sweep_stores_the_run_failed_with_the_reason(
    run_cli: RunCli, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import workbench.store.locking as store_module
    from workbench.backends.reference import ReferenceBackend

    monkeypatch.setattr(store_module, "LOCK_RETRIES", 1)
    monkeypatch.setattr(store_module, "BUSY_TIMEOUT_S", 0.05)
    monkeypatch.setattr(store_module, "FINAL_WRITE_PATIENCE_S", 60.0)
    holders: list[subprocess.Popen[str]] = []
    original = ReferenceBackend.measure_point

    def measured_then_locked(self, problem, *args, **kwargs):  # type: ignore[no-untyped-def]
        result = original(self, problem, *args, **kwargs)
        if problem.q_len == 32:  # another writer takes the lock while N=32 is measured
            holder = subprocess.Popen(
                [sys.executable, "-c", HOLD_LOCK, str(db_path), "1.5"],
                stdout=subprocess.PIPE, text=True,
            )  # fmt: skip
            assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
            holders.append(holder)
        return result

    monkeypatch.setattr(ReferenceBackend, "measure_point", measured_then_locked)
    try:
        result = run_cli("sweep", "--seq-lens", "16,32,64", *FAST)
    finally:
        for holder in holders:
            holder.wait(timeout=30)
    assert result.code == 1, result.err  # a failure, not a refusal
    assert "Traceback" not in result.err
    with Store(db_path) as store:
        [run] = store.runs()
        assert run.status == "failed"
        assert run.error is not None and "locked by another writer" in run.error
        assert "N=32" in run.error
        # The point measured when the lock was lost was stored once it was free.
        assert [p.seq_len for p in store.points(run.id)] == [16, 32]


# --- 10. SIGTERM --------------------------------------------------------------------------------


def test_sigterm_mid_sweep_cancels_keeps_the_points_and_checkpoints(
    tmp_path: Path, sweep_command: Callable[..., list[str]], count_rows: Callable
) -> None:
    db = tmp_path / "terminated.db"
    slow = ["--seq-lens", "256,512,1024,2048,4096", "--heads", "8", "--mask", "causal"]
    child = subprocess.Popen(
        sweep_command(db, *slow), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if count_rows(db, "points") >= 1:
                    break
            except sqlite3.OperationalError:
                pass
            time.sleep(0.02)
        child.send_signal(signal.SIGTERM)
        _, err = child.communicate(timeout=60)
    finally:
        child.kill()
        child.wait()
    assert child.returncode == 143, err
    assert "Traceback" not in err and "terminated" in err
    assert not db.with_name(db.name + "-wal").exists()  # checkpointed and closed
    assert not db.with_name(db.name + "-shm").exists()
    with Store(db, read_only=True) as store:
        [run] = store.runs()
        assert run.status == "cancelled" and "SIGTERM" in (run.error or "")
        assert len(store.points(run.id)) >= 1


# --- 11. a reused PID -----------------------------------------------------------------------------


def test_a_run_whose_pid_was_reused_by_a_live_process_is_still_interrupted(
    filled: Path, run_cli: RunCli
) -> None:
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        conn = sqlite3.connect(filled)
        # Run 2's owner died and the system gave its PID to an unrelated, live process.
        conn.execute(
            "UPDATE runs SET status = 'running', finished_at = NULL, "
            "machine = json_set(machine, '$.pid', ?) WHERE id = 2",
            [stranger.pid],
        )
        conn.commit()
        conn.close()
        shown = run_cli("show", "2")
        assert "failed: interrupted" in shown.out, shown.out
        assert run_cli("sweep", "--seq-lens", "16", *FAST).code == 0
        with Store(filled) as store:
            assert store.run(2).status == "failed"
            assert store.run(3).status == "complete"
    finally:
        stranger.kill()
        stranger.wait()


# --- 12. newer schemas this version cannot read ---------------------------------------------------


def test_a_newer_database_with_a_renamed_column_is_refused_in_one_line(
    filled: Path, run_cli: RunCli
) -> None:
    conn = sqlite3.connect(filled)
    conn.execute("ALTER TABLE runs RENAME COLUMN label TO title")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    before = listing(filled.parent)
    for command in [*READ_COMMANDS, ["sweep", "--seq-lens", "16", *FAST]]:
        line = assert_one_line_refusal(run_cli(*command))
        assert "newer fmha-workbench" in line and "label" in line
    assert listing(filled.parent) == before


def test_a_newer_database_this_version_can_read_is_read_and_never_written(
    filled: Path, run_cli: RunCli
) -> None:
    conn = sqlite3.connect(filled)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    before = listing(filled.parent)
    listed = run_cli("runs", "--json")
    assert listed.code == 0 and len(json.loads(listed.out)) == 2
    refused = run_cli("sweep", "--seq-lens", "16", *FAST)
    assert refused.code == 2 and "newer" in refused.err_lines[-1]
    assert listing(filled.parent) == before  # no byte changed, no -wal/-shm left
