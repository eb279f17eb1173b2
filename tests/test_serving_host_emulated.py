"""The serving kernels' host wrappers (prepare_varlen, prepare_paged) end to end on CPU torch
tensors, their launches run by the NumPy stand-in for cuda.tile (tests/tile_emulator.py): the
views they hand the kernels (permuted, packed GQA rows), the tables, the scratch, the combine's
grid, against a float64 reference. Needs torch (any build) and cuda.tile (imported, never
launched)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("cuda.tile")

from kernels.cutile import device, device_paged, device_varlen, serving_launch  # noqa: E402
from kernels.cutile.paged import paged_attention, plan_paged  # noqa: E402
from kernels.cutile.varlen import varlen_attention  # noqa: E402
from tests.serving_cases import compare, paged_batch, reference  # noqa: E402
from tests.tile_emulator import emulated, launch_torch_on_cpu  # noqa: E402


@pytest.fixture
def on_cpu(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(serving_launch, "launch", launch_torch_on_cpu)
    monkeypatch.setattr(serving_launch, "variant", lambda kernel, *hints: kernel)
    with emulated(device, device_varlen, device_paged):
        yield


@pytest.mark.parametrize("mask", ["causal", "window"])
def test_varlen_attention_end_to_end(rng, on_cpu, mask):
    lq, lk = [3, 0, 70, 1], [10, 4, 70, 0]
    heads, kv_heads, d = 4, 2, 64
    q = torch.from_numpy(rng.standard_normal((sum(lq), heads, d)).astype(np.float16))
    k = torch.from_numpy(rng.standard_normal((sum(lk), kv_heads, d)).astype(np.float16))
    v = torch.from_numpy(rng.standard_normal((sum(lk), kv_heads, d)).astype(np.float16))
    cu_q = torch.tensor(np.cumsum([0, *lq]), dtype=torch.int32)
    cu_k = torch.tensor(np.cumsum([0, *lk]), dtype=torch.int32)
    window = 20 if mask == "window" else None
    out, lse = varlen_attention(q, k, v, cu_q, cu_k, causal=True, window=window)
    assert out.shape == (sum(lq), heads, d) and lse.shape == (heads, sum(lq))
    qo, ko = np.cumsum([0, *lq]), np.cumsum([0, *lk])
    for b in range(len(lq)):
        qs, ks = slice(qo[b], qo[b + 1]), slice(ko[b], ko[b + 1])
        if lq[b]:
            want = reference(q[qs].numpy(), k[ks].numpy(), v[ks].numpy(), causal=True,
                             window=window)  # fmt: skip
            compare(out[qs].numpy(), lse[:, qs].numpy(), *want, f"sequence {b} {mask}")


@pytest.mark.parametrize(("page", "q_len", "split"), [(16, 1, True), (64, 3, True), (32, 2, False)])
def test_paged_attention_end_to_end(rng, on_cpu, page, q_len, split):
    seq_lens = [int(rng.integers(400, 700)), 130, 0, 1]
    heads, kv_heads, d = 8, 2, 32
    k_cache, v_cache, table, keys = paged_batch(rng, seq_lens, page, kv_heads, d)
    q = torch.from_numpy(rng.standard_normal((len(seq_lens), q_len, heads, d)).astype(np.float16))
    lens = torch.tensor(seq_lens, dtype=torch.int32)
    plan = plan_paged(lens, q_len=q_len, heads=heads, kv_heads=kv_heads, page_size=page,
                      sm_count=2, split=split)  # fmt: skip
    assert plan.schedule.needs_combine == split
    out, lse = paged_attention(q, torch.from_numpy(k_cache), torch.from_numpy(v_cache),
                               torch.from_numpy(table), lens, plan=plan)  # fmt: skip
    assert out.shape == (len(seq_lens), q_len, heads, d) and lse.shape == (4, heads, q_len)
    for b, (kb, vb) in enumerate(keys):
        want = reference(q[b].numpy(), kb, vb, causal=True)
        compare(out[b].numpy(), lse[b].numpy(), *want, f"sequence {b}, P{page}")


def test_a_plan_for_another_batch_is_refused(on_cpu):
    k_cache = torch.zeros((4, 16, 1, 32), dtype=torch.float16)
    q = torch.zeros((1, 1, 2, 32), dtype=torch.float16)
    table = torch.zeros((1, 4), dtype=torch.int32)
    plan = plan_paged([40], q_len=1, heads=2, kv_heads=1, page_size=16)
    with pytest.raises(ValueError, match=r"^plan was made for other seq_lens_k"):
        paged_attention(q, k_cache, k_cache.clone(), table, torch.tensor([41], dtype=torch.int32),
                        plan=plan)  # fmt: skip
