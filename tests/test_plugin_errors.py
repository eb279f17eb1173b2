"""A plugin's own exception at run time (issue 55 item 3): the failed run's stored reason names
the line of the user's file it came from, then that file's frames of the traceback, whether it
was raised in ``prepare``, in the launch ``prepare`` returned, or in ``attention``."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FAST_TIMING_ARGS

pytestmark = pytest.mark.usefixtures("no_plugins_left")

PLUGIN = """
from workbench.backends import declare


def deeper(rows):
    raise ValueError(f"rows {{rows}} do not fit")


def attention(q, k, v, *, problem, config, knobs):
    return deeper(q.shape[2])


def prepare(q, k, v, *, problem, config, knobs):
    if WHERE == "prepare":
        deeper(q.shape[2])

    def launch():
        return deeper(q.shape[2])

    return launch


WHERE = {where!r}
BACKENDS = (declare("breaks", "breaks", {call}={call}),)
"""
# (the call declared, where it raises, the frames of the file the reason lists, innermost last)
CASES = {
    "attention": ("attention", "attention", ["line 10, in attention", "line 6, in deeper"]),
    "prepare": ("prepare", "prepare", ["line 15, in prepare", "line 6, in deeper"]),
    "its launch": ("prepare", "launch", ["line 18, in launch", "line 6, in deeper"]),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_a_plugins_exception_is_stored_at_the_line_of_its_file_with_its_frames(
    run_cli: Callable[..., Any], tmp_path: Path, case: str
) -> None:
    call, where, frames = CASES[case]
    path = tmp_path / "breaks.py"
    path.write_text(textwrap.dedent(PLUGIN.format(call=call, where=where)))
    db = tmp_path / "runs.db"
    result = run_cli(
        "--plugin", path, "sweep", "--db", db, "--backend", "breaks", "--heads", "1",
        "--head-dim", "32", "--seq-lens", "64", *FAST_TIMING_ARGS,
    )  # fmt: skip
    assert result.code == 1, result.err
    (run,) = json.loads(run_cli("runs", "--db", db, "--json").out)
    first, *rest = run["error"].splitlines()
    assert first == f"PluginError: {path} line 6, in deeper: ValueError: rows 64 do not fit"
    assert [line.split(":")[0].strip() for line in rest[1:]] == frames, run["error"]
    shown = run_cli("show", run["id"], "--db", db).out
    assert "  line 6, in deeper: raise ValueError" in shown  # under the status, indented
