"""torch SDPA on a ragged batch, padded to its longest sequence, on the CPU: the mask the padded
call takes equals each sequence's own bottom-right mask on its real keys and hides every padded
key; the flash backend (no mask) is refused in one line naming the flag for every batch that
would need one; `backends` says the SDPA peers pad. The padded call itself runs in
tests/gpu/test_serving_backends.py. Lengths are fresh random draws from the printed seed."""

from __future__ import annotations

import json
from collections.abc import Callable

import numpy as np
import pytest

from kernels.schedule import visible_block
from workbench.backends.padded import _visible, padded_form
from workbench.backends.torch_sdpa import TorchCudnnBackend, TorchFlashBackend
from workbench.config import ConfigError, KernelConfig, Problem

HEADS = {"heads": 4, "kv_heads": 2, "head_dim": 32, "dtype": "float16"}
HEAD_FLAGS = ["--heads", "4", "--kv-heads", "2", "--head-dim", "32"]


@pytest.mark.parametrize(
    ("fields", "mask", "window"),
    [
        ({"varlen": True}, "none", None),
        ({"varlen": True}, "window", 9),
        ({"q_len": 3}, "causal", None),
        ({"q_len": 1, "kv_cache": "paged", "page_size": 16}, "none", None),
        ({"q_len": 4, "kv_cache": "paged", "page_size": 32}, "window", 6),
    ],
    ids=["varlen-none", "varlen-window", "decode-q3-causal", "paged-decode", "paged-q4-window"],
)
def test_the_padded_mask_is_each_sequences_own_and_hides_the_padding(rng, fields, mask, window):
    lengths = [int(n) for n in rng.integers(0, 90, size=6)] + [1, 0]
    problem = Problem(**HEADS, lengths=tuple(lengths), **fields)
    config = KernelConfig(mask=mask, window=window)
    q_rows = max(problem.q_lens) + 5 if problem.varlen else problem.q_len
    k_cols = max(lengths) + 7
    seen = _visible(problem, config, q_rows, k_cols)
    assert seen.shape == (problem.batch, 1, q_rows, k_cols)
    for b, (lq, lk) in enumerate(zip(problem.q_lens, problem.k_lens)):
        want = visible_block(range(lq), range(lk), mask, lk - lq, window)
        assert np.array_equal(seen[b, 0, :lq, :lk], want), f"sequence {b} ({lq} × {lk})"
        assert not seen[b, 0, :, lk:].any(), f"sequence {b} sees a padded key"


@pytest.mark.parametrize(
    ("fields", "mask"),
    [
        ({"q_len": 1, "kv_cache": "paged", "page_size": 16}, "none"),
        ({"q_len": 2}, "causal"),
        ({"varlen": True}, "none"),
    ],
)
def test_the_flash_backend_refuses_a_padded_batch_that_needs_a_mask(fields, mask):
    said = "--backend torch-flash: pads a ragged batch to its longest sequence and must then mask"
    problem = Problem(**HEADS, lengths=(300, 20, 0), **fields)
    with pytest.raises(ConfigError) as refused:
        TorchFlashBackend().check_supported(problem, KernelConfig(mask=mask))
    message = refused.value.cli_message()
    assert message.startswith(said) and "use torch-cudnn" in message and "\n" not in message


def test_a_varlen_causal_prefill_pads_without_a_mask_and_others_with_one():
    varlen = Problem(**HEADS, lengths=(300, 20, 0), varlen=True)
    decode = Problem(**HEADS, lengths=(300, 20, 0), q_len=1, kv_cache="paged", page_size=16)
    causal = KernelConfig(mask="causal")
    assert padded_form(varlen, causal, "torch-flash", takes_mask=False) == "is_causal"
    assert padded_form(decode, causal, "torch-cudnn", takes_mask=True) == "mask"
    assert TorchCudnnBackend.runs_ragged and TorchFlashBackend.runs_ragged


def test_backends_says_the_sdpa_peers_pad_a_ragged_batch(run_cli: Callable) -> None:
    result = run_cli("backends", "--json")
    assert result.code == 0, result.err
    listed = json.loads(result.out)
    for name in ("torch-flash", "torch-cudnn"):
        assert "pads every sequence to the longest" in listed[name]["notes"], listed[name]


def test_backends_says_what_fa4_runs_of_a_ragged_batch_and_why_flashinfer_does_not(
    run_cli: Callable,
) -> None:
    text = run_cli("backends")
    assert text.code == 0, text.err
    (line,) = [row for row in text.out.splitlines() if row.startswith("flashinfer ")]
    assert " no " in line and "sm_100 only" in line and "JIT-compiles with nvcc" in line
    listed = json.loads(run_cli("backends", "--json").out)
    assert not listed["flashinfer"]["available"]
    assert "page_table, seqused_k" in listed["fa4"]["notes"]
    assert "SplitKV asserts on sm_90" in listed["fa4"]["notes"]


def test_a_sweep_on_flashinfer_is_refused_in_one_line(run_cli: Callable, tmp_path) -> None:
    db = tmp_path / "runs.db"
    result = run_cli("sweep", "--backend", "flashinfer", "--lengths", "300,20", "--q-len", "1",
                     "--db", str(db), *HEAD_FLAGS)  # fmt: skip
    assert result.code == 2 and len(result.err.strip().splitlines()) == 1, result.err
    assert "--backend flashinfer: not available: not wrapped here" in result.err
    assert not db.exists()


class HostTensor:
    """The few torch tensor methods PaddedRows reads, on a NumPy array (no torch here)."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def __getitem__(self, index: object) -> HostTensor:
        return HostTensor(self.array[index])

    def transpose(self, a: int, b: int) -> HostTensor:
        return HostTensor(np.swapaxes(self.array, a, b))

    def float(self) -> HostTensor:
        return HostTensor(self.array.astype(np.float32))

    def cpu(self) -> HostTensor:
        return self

    def numpy(self) -> np.ndarray:
        return np.array(self.array)


def padded_attention(problem: Problem, config: KernelConfig, inputs) -> tuple[np.ndarray, ...]:
    """What SDPA computes on the right-padded batch under the padded mask, in NumPy: the
    padded output (B, H, Lq, Dv), NaN on rows that see no key, as SDPA gives them."""
    from workbench.measure.serving_inputs import sequence_tensors

    lq_pad = max(problem.q_lens) + 3 if problem.varlen else problem.q_len
    lk_pad = max(problem.k_lens) + 5
    seen = _visible(problem, config, lq_pad, lk_pad)
    out = np.zeros((problem.batch, problem.heads, lq_pad, problem.value_dim), np.float32)
    group = problem.group_size
    for b in range(problem.batch):
        q, k, v = sequence_tensors(problem, inputs, b)
        qp = np.zeros((lq_pad, problem.heads, problem.head_dim), np.float32)
        kp = np.zeros((lk_pad, problem.kv_heads, problem.head_dim), np.float32)
        vp = np.zeros((lk_pad, problem.kv_heads, problem.value_dim), np.float32)
        qp[: len(q)], kp[: len(k)], vp[: len(v)] = q, k, v
        for h in range(problem.heads):
            s = qp[:, h] @ kp[:, h // group].T / np.sqrt(problem.head_dim)
            s = np.where(seen[b, 0], s, -np.inf)
            with np.errstate(invalid="ignore"):
                p = np.exp(s - s.max(axis=1, keepdims=True))
                out[b, h] = (p / p.sum(axis=1, keepdims=True)) @ vp[:, h // group]
    return out, seen


@pytest.mark.parametrize(
    ("fields", "mask"),
    [({"varlen": True}, "none"), ({"q_len": 3, "kv_cache": "paged", "page_size": 16}, "causal")],
    ids=["varlen", "paged-q3"],
)
def test_the_padded_output_read_on_the_real_rows_passes_the_check(rng, fields, mask):
    from workbench.backends.base import host_inputs
    from workbench.backends.padded import PaddedRows
    from workbench.measure.serving_inputs import check_serving_output

    lengths = (int(rng.integers(20, 60)), 0, 1, int(rng.integers(2, 40)))
    problem = Problem(**HEADS, lengths=lengths, **fields)
    config = KernelConfig(mask=mask)
    inputs = host_inputs(problem, rng)
    out, seen = padded_attention(problem, config, inputs)
    assert np.isnan(out[1]).all()  # the empty sequence: SDPA's NaN, never read as such
    rows = PaddedRows(HostTensor(out), problem, seen[:, 0].any(axis=-1))
    report = check_serving_output(inputs, rows, problem, config, rng)
    assert report.passed and report.checked_rows > 0, report
    # Read as another batch's rows (sequences swapped), the same output fails the check.
    swapped = out[[3, 1, 2, 0]]
    wrong = PaddedRows(HostTensor(swapped), problem, seen[[3, 1, 2, 0], 0].any(axis=-1))
    assert not check_serving_output(inputs, wrong, problem, config, rng).passed
