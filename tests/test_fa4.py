"""The FlashAttention-4 backend on a machine without it: listed with the reason, its masks
mapped to FA4's arguments with the workbench's meaning, refusals before anything runs."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

from kernels.schedule import visible
from workbench.backends import Availability, backend_statuses
from workbench.backends import fa4 as fa4_module
from workbench.backends.fa4 import FlashAttention4Backend, fa4_check, fa4_mask_options
from workbench.config import ConfigError, KernelConfig, Problem


def _fa4_visible(q_len: int, k_len: int, options: dict) -> np.ndarray:
    """Which (row, key) pairs FA4 lets through, from its documented rule: masks align the
    queries to the end of the keys (offset k_len - q_len); a window (left, right) keeps keys
    with row + offset - left <= key <= row + offset + right; causal alone is right = 0."""
    rows = np.arange(q_len)[:, None] + (k_len - q_len)
    keys = np.arange(k_len)[None, :]
    if not options["causal"]:
        return np.ones((q_len, k_len), dtype=bool)
    left, right = options.get("window_size", (None, 0))
    seen = keys <= rows + right
    if left is not None:
        seen &= keys >= rows - left
    return seen


@pytest.mark.parametrize("mask", ["none", "causal", "window"])
def test_fa4_masks_mean_what_the_workbench_means(mask: str, rng: np.random.Generator) -> None:
    for _ in range(20):
        q_len = int(rng.integers(1, 200))
        input_pos = int(rng.integers(0, 100))
        k_len = q_len + input_pos
        window = int(rng.integers(1, 150)) if mask == "window" else None
        problem = Problem(q_len=q_len, k_len=k_len, input_pos=input_pos, heads=1)
        config = KernelConfig(mask=mask, window=window)
        fa4_check(problem, config)  # every sweep's problem is one FA4 runs as we mean it
        ours = visible(q_len, k_len, mask, input_pos, window)
        theirs = _fa4_visible(q_len, k_len, fa4_mask_options(problem, config))
        assert np.array_equal(ours, theirs), (q_len, k_len, window)


def test_fa4_refuses_a_causal_offset_it_would_align_differently() -> None:
    problem = Problem(q_len=128, k_len=512, input_pos=0, heads=1)
    with pytest.raises(ConfigError) as info:
        fa4_check(problem, KernelConfig(mask="causal"))
    assert info.value.field == "input_pos"
    assert "k_len - q_len" in str(info.value)
    fa4_check(problem, KernelConfig(mask="none"))  # no mask: no alignment to disagree on


def test_backends_lists_fa4_with_the_reason_and_the_install_command(run_cli) -> None:
    result = run_cli("backends")
    line = next(ln for ln in result.out.splitlines() if ln.startswith("fa4"))
    assert " no " in line
    assert "pip install 'fmha-workbench[fa4]'" in line or "GPU" in line or "torch" in line
    status = backend_statuses()["fa4"]
    assert not status.available and status.reason


def test_fa4_wants_hopper_or_newer(monkeypatch: pytest.MonkeyPatch) -> None:
    """Importable, a CUDA torch, but an sm_80 GPU: unavailable, saying why."""
    monkeypatch.setattr(fa4_module, "_import_fa4", lambda: object())
    monkeypatch.setattr(fa4_module, "torch_device", lambda: Availability(True, "A100 (sm_80)"))
    fake_torch = types.SimpleNamespace(
        cuda=types.SimpleNamespace(get_device_capability=lambda _device=0: (8, 0))
    )
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    status = FlashAttention4Backend().availability()
    assert status == Availability(False, "FlashAttention-4 needs sm_90 or newer; this GPU is sm_80")
    fake_torch.cuda.get_device_capability = lambda _device=0: (9, 0)
    assert FlashAttention4Backend().availability().available


def test_fa4_that_fails_to_import_is_unavailable_with_the_error(monkeypatch) -> None:
    def broken():  # type: ignore[no-untyped-def]
        raise RuntimeError("libcute_dsl.so: cannot open shared object file")

    monkeypatch.setattr(fa4_module, "_import_fa4", broken)
    status = FlashAttention4Backend().availability()
    assert not status.available
    assert "libcute_dsl.so" in status.reason and "fmha-workbench[fa4]" in status.reason
