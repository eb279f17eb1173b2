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
