"""Head dims in power-of-two column chunks (kernels.head_dims.column_chunks) against a float64
reference on the GPU: the prefill forms' chunked path at D 32..256 (every dim the registry
lists runs in tests/gpu/test_head_dims.py; here fp16 and bf16, causal and not, GQA, the LSE,
Dv != D, and each prefill form), the launch's plan saying it chunked. Fresh random inputs from
the session's printed seed; the output poisoned with NaN first, the caller's tensors checked
unchanged."""

from __future__ import annotations

import math

import pytest

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
pytest.importorskip("cuda.tile")

from kernels.cutile import launch  # noqa: E402
from kernels.head_dims import column_chunks  # noqa: E402

REL_TOL = 1e-2
TILE_128 = {"tile_m": 128, "tile_n": 128, "num_worker_warps": 8, "poly_exp2_cols": 16}
FORMS = {
    "tile": {},
    "tile-128-ww8-poly": TILE_128,
    "one-loop": {"k_split": False},
    "persistent": {**TILE_128, "persistent": True},
    "causal-persistent": {**TILE_128, "persistent": True},
}


def check(seed: int, dims: tuple[int, int], knobs: dict, shape: tuple, mask: str, dtype) -> None:
    """One launch against the reference: ``dims`` = (D, Dv), ``shape`` = (batch, heads, kv
    heads, q_len, k_len)."""
    head_dim, value_dim = dims
    batch, heads, kv_heads, q_len, k_len = shape
    gen = torch.Generator(device="cuda").manual_seed(seed)

    def rand(*size: int):
        return torch.randn(size, generator=gen, device="cuda", dtype=dtype)

    q = rand(batch, heads, q_len, head_dim)
    k = rand(batch, kv_heads, k_len, head_dim)
    v = rand(batch, kv_heads, k_len, value_dim)
    kept = [x.clone() for x in (q, k, v)]
    out = torch.full((batch, heads, q_len, value_dim), math.nan, device="cuda", dtype=dtype)
    input_pos = k_len - q_len if mask == "causal" else 0
    run = launch.prepare(q, k, v, mask=mask, input_pos=input_pos, out=out, return_lse=True, **knobs)
    _, lse = run()
    torch.cuda.synchronize()
    what = f"seed {seed} D {head_dim}/{value_dim} {knobs} {shape} {mask} {dtype}"
    plan = run.plan
    assert plan.form in ("tile", "persistent", "causal-persistent"), what
    assert (plan.d_chunks, plan.dv_chunks) == (column_chunks(head_dim), column_chunks(value_dim))
    group = heads // kv_heads
    kd, vd = (x.double().repeat_interleave(group, dim=1) for x in (k, v))
    s = (q.double() @ kd.transpose(-1, -2)) / math.sqrt(head_dim)
    if mask == "causal":
        i = torch.arange(q_len, device="cuda")[:, None]
        j = torch.arange(k_len, device="cuda")[None, :]
        s = s.masked_fill(j > i + input_pos, -math.inf)
    want = torch.softmax(s, dim=-1) @ vd
    assert torch.isfinite(out).all(), f"unwritten or NaN output: {what}"
    err = (torch.linalg.vector_norm(out.double() - want) / torch.linalg.vector_norm(want)).item()
    assert err < REL_TOL, f"relative error {err:.2e}: {what}"
    lse_err = (lse.double() - torch.logsumexp(s, dim=-1)).abs().max().item()
    assert lse_err < 1e-2, f"LSE off by {lse_err:.2e}: {what}"
    assert all(torch.equal(a, b) for a, b in zip(kept, (q, k, v), strict=True)), what


# Two chunks, three, four, and a last chunk padded to the MMA's 16 (40, 88, 200).
@pytest.mark.parametrize("head_dim", [40, 80, 96, 112, 160, 200, 240], ids=lambda d: f"d{d}")
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_chunked_dims_are_right_without_a_mask_with_gqa(
    seed: int, head_dim: int, dtype: str
) -> None:
    check(seed, (head_dim, head_dim), {}, (2, 8, 2, 200, 333), "none", getattr(torch, dtype))


@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("head_dim", [96, 88], ids=lambda d: f"d{d}")
def test_d96_and_a_padded_last_chunk_are_right_in_every_prefill_form(
    seed: int, head_dim: int, form: str
) -> None:
    mask = "none" if form == "persistent" else "causal"
    # The causal persistent grid takes square tiles and whole q-blocks.
    q_len, k_len = (512, 512) if form == "causal-persistent" else (257, 700)
    check(seed, (head_dim, head_dim), FORMS[form], (2, 8, 2, q_len, k_len), mask, torch.bfloat16)


@pytest.mark.parametrize("form", ["tile", "persistent", "causal-persistent"])
def test_a_value_head_dim_of_its_own_is_right_in_chunks(seed: int, form: str) -> None:
    # MLA's 192/128: Q·Kᵀ in 128 + 64 columns, P·V in one 128 accumulator.
    mask = "none" if form == "persistent" else "causal"
    check(seed, (192, 128), FORMS[form], (1, 4, 4, 512, 512), mask, torch.float16)
