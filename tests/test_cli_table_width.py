"""Tables on a terminal fit its width: the ``knobs`` rules and the ``runs`` labels wrap or go
under their row instead of running 200-character lines; a pipe keeps one line a row."""

from __future__ import annotations

import itertools
import os
import pty
import subprocess
from pathlib import Path

import numpy as np

from tests.conftest import _console_script, subprocess_env
from workbench.cli.output import table


def _on_a_terminal(db: Path, columns: int, *argv: str) -> list[str]:
    """The console script's stdout lines as a terminal ``columns`` wide shows them."""
    leader, follower = pty.openpty()
    env = {**subprocess_env(db), "COLUMNS": str(columns)}
    child = subprocess.Popen(
        [_console_script(), *argv], stdout=follower, stderr=subprocess.PIPE, env=env
    )
    os.close(follower)
    got = bytearray()
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the child closed the terminal's other end
            break
        if not chunk:
            break
        got.extend(chunk)
    os.close(leader)
    assert child.wait(timeout=60) == 0, child.stderr.read() if child.stderr else ""
    return got.decode().replace("\r\n", "\n").splitlines()


def test_knobs_on_a_narrow_terminal_fit_and_keep_every_rule(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    db = tmp_path / "runs.db"
    # The columns before the rules take 106: under 130 the rules go under their knob, from 130
    # they wrap beside it.
    under, beside = int(rng.integers(110, 130)), int(rng.integers(130, 170))
    print(f"terminal widths {under} and {beside}")
    lines = _on_a_terminal(db, under, "knobs")
    assert max(len(line) for line in lines) <= under
    assert lines[0].split()[0] == "knob" and "rules" not in lines[0]
    text = " ".join(" ".join(lines).split())
    # Every rule is still said, whole, under its knob.
    assert "rules: only with the persistent grid; only with mask none" in text
    persistent = next(i for i, line in enumerate(lines) if line.startswith("persistent "))
    assert lines[persistent + 1].lstrip().startswith("rules: only with mask none or causal")

    lines = _on_a_terminal(db, beside, "knobs")
    assert max(len(line) for line in lines) <= beside and lines[0].endswith("rules")
    persistent = next(i for i, line in enumerate(lines) if line.startswith("persistent "))
    rules_at = lines[0].index("rules")
    more = list(itertools.takewhile(lambda ln: not ln[:rules_at].strip(), lines[persistent + 1 :]))
    assert more  # its rule goes on below, in place, and reads whole
    rule = " ".join(ln[rules_at:].strip() for ln in [lines[persistent], *more])
    assert rule.startswith("only with mask none or causal; not with clusters")
    assert rule.endswith("not with the software pipeline")

    piped = subprocess.run(
        [_console_script(), "knobs"], capture_output=True, text=True, env=subprocess_env(db)
    )
    # Piped, one line a knob, for grep: the rule beside it.
    [line] = [ln for ln in piped.stdout.splitlines() if ln.startswith("persistent ")]
    assert line.endswith("not with the software pipeline")


def test_a_long_last_column_wraps_under_itself_where_there_is_room(
    rng: np.random.Generator,
) -> None:
    words = [f"w{int(n)}" for n in rng.integers(0, 1000, size=40)]
    rows = [["1", "short"], ["22", " ".join(words)]]
    lines = table(rows, ["id", "label"], width=60).splitlines()
    assert max(len(line) for line in lines) <= 60
    start = len("id  ")
    assert lines[2].startswith("22  w") and all(ln.startswith(" " * start) for ln in lines[3:])
    assert " ".join(" ".join(ln.split()) for ln in lines[2:]) == "22 " + " ".join(words)
    assert all(ln == ln.rstrip() for ln in lines)  # no trailing padding
    assert table(rows, ["id", "label"]) == "id  label\n1   short\n22  " + " ".join(words)
