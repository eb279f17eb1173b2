"""A report of a ragged batch's group says what its figures count: the batch by its summary and
the per-sequence rule. The method line of the H100's paged decode read "bfloat16 B=64 … GB/s =
bytes of K and V (2·B·Hkv·k_len·D·itemsize)", 64 sequences at the longest one's length: about
ten times the bytes its 2,413 GB/s were counted from."""

from __future__ import annotations

from typing import Any

from tests import cpu_peers
from tests.conftest import FAST_TIMING_ARGS

HEADS = ("--heads", "4", "--kv-heads", "2", "--head-dim", "32")


def _method(run_cli: Any) -> str:
    text = run_cli("report", "--group", "1", "--markdown").out
    (line,) = [line for line in text.splitlines() if line.startswith("Method:")]
    return line


def test_a_paged_decode_groups_method_counts_each_sequences_pages(
    run_cli, monkeypatch, rng
) -> None:
    cpu_peers.register(monkeypatch)
    lengths = ",".join(str(int(n)) for n in rng.integers(20, 300, size=3))
    print(f"lengths {lengths}")
    swept = run_cli(
        "sweep", "--backends", f"reference,{cpu_peers.NAME}", "--lengths", lengths, "--q-len", "1",
        "--page-size", "16", *HEADS, "--mask", "none", *FAST_TIMING_ARGS,
    )  # fmt: skip
    assert swept.code == 0, swept.err
    method = _method(run_cli)
    assert method.startswith("Method: ragged 3× ") and " P16 H4/2 D32 " in method
    assert "GB/s = bytes of K and V each sequence reads" in method
    assert "2·B·Hkv·k_len·D" not in method and "B=3" not in method


def test_a_varlen_prefill_groups_method_counts_each_sequences_pairs(run_cli, monkeypatch) -> None:
    cpu_peers.register(monkeypatch)
    swept = run_cli(
        "sweep", "--backends", f"reference,{cpu_peers.NAME}", "--lengths", "40,100,7",
        *HEADS, "--mask", "causal", *FAST_TIMING_ARGS,
    )  # fmt: skip
    assert swept.code == 0, swept.err
    method = _method(run_cli)
    assert method.startswith("Method: varlen 3× 7–100")
    assert "per visible (query, key) pair of each sequence on its own" in method
    assert "4·B·H·Nq·Nk·D" not in method


def test_a_ragged_points_block_counts_are_its_sequences_own(run_cli, db_path, rng) -> None:
    """`show` gave the H100's paged decode "2961/36/27851" blocks: 27,851 "skipped" that were
    the padding right of the short sequences in the stacked picture. Each sequence's own key
    blocks are counted now, in `show`, the CSV and the stored point."""
    import csv
    import io

    from workbench.store import Store

    lengths = [int(rng.integers(10, 60)), int(rng.integers(400, 900))]  # padding in the picture
    print(f"lengths {lengths}")
    swept = run_cli(
        "sweep", "--lengths", ",".join(map(str, lengths)), "--q-len", "1", "--page-size", "16",
        *HEADS, "--mask", "none", *FAST_TIMING_ARGS,
    )  # fmt: skip
    assert swept.code == 0, swept.err
    shown = run_cli("show", "1").out.splitlines()
    header = next(i for i, line in enumerate(shown) if "blocks c/m/s" in line)
    cells = shown[header + 1].split()
    computed, masked, skipped = (int(n) for n in cells[-2].split("/"))
    # The sequences' own 64-key blocks (a last partial one is masked past its keys).
    assert skipped == 0 and computed + masked == sum(-(-n // 64) for n in lengths), cells
    [row] = list(csv.DictReader(io.StringIO(run_cli("export", "--csv", "-").out)))
    assert (row["blocks_computed"], row["blocks_skipped"]) == (str(computed), "0")
    with Store(db_path) as store:
        [point] = store.points(1)
        assert (point.blocks_computed, point.blocks_skipped) == (computed, 0)
