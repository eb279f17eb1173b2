"""``blockmap --lengths``: one line a sequence with its pages, the wasted tail of its last page,
its key blocks and its split boundaries; a batch of 100 shown one in two, saying so."""

from __future__ import annotations

import json
from collections.abc import Callable

DECODE = ["--q-len", "1", "--heads", "32", "--kv-heads", "8", "--pack-gqa", "--kv-splits",
          "auto", "--tile-n", "64"]  # fmt: skip


def test_each_sequence_says_its_pages_tail_blocks_and_splits(run_cli: Callable) -> None:
    result = run_cli("blockmap", "--lengths", "300,0,17,2k", *DECODE)
    assert result.code == 0, result.err
    rows = {line.split()[0]: line for line in result.out.splitlines() if line.startswith("#")}
    assert len(rows) == 4
    # 300 keys: 19 pages of 16 (4 slots wasted), 5 blocks of 64 keys.
    assert "19 pages (tail   4)" in rows["#0"] and "5 blocks" in rows["#0"]
    assert "0 pages" in rows["#1"] and "splits -" in rows["#1"]  # the empty request
    assert "2 pages (tail  15)" in rows["#2"]
    assert "128 pages (tail   0)" in rows["#3"] and "32 blocks" in rows["#3"]
    data = json.loads(run_cli("blockmap", "--lengths", "300,0,17,2k", *DECODE, "--json").out)
    longest = data["sequences"][3]
    assert longest["splits"][0][0] == 0 and longest["splits"][-1][1] == 32
    # The splits cover every key block once, in order.
    assert all(a[1] == b[0] for a, b in zip(longest["splits"], longest["splits"][1:]))


def test_a_large_batch_is_downsampled_and_says_so(run_cli: Callable) -> None:
    spec = "lognormal:n=100,mean=4k,min=1k,max=32k,seed=1"
    result = run_cli("blockmap", "--lengths", spec, *DECODE)
    assert result.code == 0, result.err
    assert "showing one sequence in 2 of 100 (and the longest)" in result.out
    rows = [line for line in result.out.splitlines() if line.startswith("#")]
    assert 50 <= len(rows) <= 51 and all(len(r) < 200 for r in rows)


def test_bad_batches_are_refused_at_blockmap(run_cli: Callable) -> None:
    bad = run_cli("blockmap", "--lengths", "12,x", "--q-len", "1")
    assert bad.code == 2 and bad.err.startswith("error: --lengths 12,x: 'x' is not a length")
    page = run_cli("blockmap", "--lengths", "12", "--q-len", "1", "--page-size", "48")
    assert page.code == 2 and page.err.startswith("error: --page-size 48: expected one of 16")
