"""``blockmap`` draws every map: one wider than the terminal (or 120 columns) is drawn in b×b
groups of blocks, saying so above it, with no visited block lost from the drawing."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

RunCli = Callable[..., Any]
DECODE = ["--q-len", "1", "--tile-n", "128", "--heads", "32", "--kv-heads", "8", "--pack-gqa"]


def _map_lines(out: str) -> tuple[int, list[str]]:
    """The group size b (1 when the note is absent) and the map's rows."""
    lines = out.splitlines()
    note = [line for line in lines if line.startswith("each cell is ")]
    found = re.match(r"each cell is (\d+)×(\d+) blocks", note[0]) if note else None
    b = int(found.group(2)) if found else 1  # keys a cell groups (rows too, where there are b)
    start = (
        lines.index(note[0]) + 1
        if note
        else next(i for i, line in enumerate(lines) if re.fullmatch(r"[#m.0-9a-z]+", line))
    )
    rows = []
    for line in lines[start:]:
        if not re.fullmatch(r"[#m.0-9a-z]+", line):
            break
        rows.append(line)
    return b, rows


def test_a_decode_split_map_at_32k_is_drawn_downsampled(
    run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    result = run_cli("blockmap", *DECODE, "--k-len", "32k", "--kv-splits", "16")
    assert result.code == 0, result.err
    b, rows = _map_lines(result.out)
    assert b == 3 and "each cell is 1×3 blocks (the split that reads most of them" in result.out
    (row,) = rows
    assert len(row) == 86  # 256 key blocks in groups of 3
    # Every split shows, in order, each over its share of the row.
    assert "".join(dict.fromkeys(row)) == "0123456789abcdef"
    assert result.out.rstrip().endswith("0-9 a-z: the split that reads the block   . skipped")


def test_a_map_that_fits_is_drawn_block_for_block(run_cli: RunCli) -> None:
    result = run_cli("blockmap", *DECODE, "--k-len", "2048", "--kv-splits", "16")
    assert "each cell is" not in result.out
    assert _map_lines(result.out) == (1, ["0123456789abcdef"])


@pytest.mark.parametrize("columns", [40, 120, 400])
def test_a_grouped_map_keeps_every_visited_block_and_fits_the_terminal(
    run_cli: RunCli, monkeypatch: pytest.MonkeyPatch, rng: np.random.Generator, columns: int
) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))
    q_len = int(rng.integers(8000, 20000))  # wider than 120 blocks of 64 keys
    window = int(rng.integers(200, 3000))
    print(f"q_len {q_len}, window {window}, columns {columns}")
    args = ["--q-len", str(q_len), "--mask", "window", "--window", str(window)]
    args += ["--tile-m", "32", "--tile-n", "64"]
    full = np.array(json.loads(run_cli("blockmap", *args, "--json").out)["map"])
    b, rows = _map_lines(run_cli("blockmap", *args).out)
    assert max(len(r) for r in rows) <= min(columns, 120)
    assert b > 1 and len(rows) == -(-full.shape[0] // b) and len(rows[0]) == -(-full.shape[1] // b)
    for r, line in enumerate(rows):
        for c, char in enumerate(line):
            group = full[r * b : (r + 1) * b, c * b : (c + 1) * b]
            expected = "m" if (group == 2).any() else "#" if (group == 1).any() else "."
            assert char == expected, (r, c, group)
