"""Every head dim the registry lists (a multiple of 8 from 32 to 256) against a float64
reference on the GPU, in each kernel form: those that are not powers of two run in power-of-two
column chunks in the prefill forms and in a wider tile in the decode form, whose extra columns
are zero-filled loads and dropped stores (kernels.head_dims). Fresh random
inputs from the session's printed seed; the output poisoned with NaN first, and the caller's
tensors checked unchanged."""

from __future__ import annotations

import math

import pytest

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
pytest.importorskip("cuda.tile")

from kernels.cutile import launch  # noqa: E402
from kernels.knobs import HEAD_DIM  # noqa: E402

REL_TOL = 1e-2
FORMS = {
    "tile": {},
    "tile-128-ww8-poly": {"tile_m": 128, "tile_n": 128, "num_worker_warps": 8,
                          "poly_exp2_cols": 16},
    "one-loop": {"k_split": False},
    "persistent": {"tile_m": 128, "tile_n": 128, "num_worker_warps": 8, "persistent": True},
    "decode": {"pack_gqa": True, "kv_splits": None, "tile_n": 128},
}  # fmt: skip


def run_and_check(seed: int, head_dim: int, knobs: dict, q_len: int, k_len: int, mask: str):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    shape = (2, 8, q_len, head_dim), (2, 2, k_len, head_dim)
    q = torch.randn(shape[0], generator=gen, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(shape[1], generator=gen, device="cuda", dtype=torch.bfloat16) for _ in "kv")
    kept = [x.clone() for x in (q, k, v)]
    out = torch.full_like(q, math.nan)
    input_pos = k_len - q_len
    launch.prepare(q, k, v, mask=mask, input_pos=input_pos, out=out, **knobs)()
    torch.cuda.synchronize()
    kd, vd = (x.double().repeat_interleave(4, dim=1) for x in (k, v))
    s = (q.double() @ kd.transpose(-1, -2)) / math.sqrt(head_dim)
    if mask == "causal":
        i = torch.arange(q_len, device="cuda")[:, None]
        j = torch.arange(k_len, device="cuda")[None, :]
        s = s.masked_fill(j > i + input_pos, -math.inf)
    want = torch.softmax(s, dim=-1) @ vd
    what = f"seed {seed} D {head_dim} {knobs} q{q_len} k{k_len} {mask}"
    assert torch.isfinite(out).all(), f"unwritten or NaN output: {what}"
    err = (torch.linalg.vector_norm(out.double() - want) / torch.linalg.vector_norm(want)).item()
    assert err < REL_TOL, f"relative error {err:.2e}: {what}"
    assert all(torch.equal(a, b) for a, b in zip(kept, (q, k, v), strict=True)), what


@pytest.mark.parametrize("head_dim", HEAD_DIM.values, ids=lambda d: f"d{d}")
def test_every_listed_head_dim_is_right_in_the_tile_form(seed: int, head_dim: int) -> None:
    run_and_check(seed, head_dim, {}, 300, 300, "causal")


@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("head_dim", [32, 40, 80, 96, 136, 192, 200, 248], ids=lambda d: f"d{d}")
def test_head_dims_that_pad_are_right_in_every_form(seed: int, head_dim: int, form: str) -> None:
    knobs = FORMS[form]
    if form == "decode":
        run_and_check(seed, head_dim, knobs, 3, 5000, "causal")
    elif form == "persistent":
        run_and_check(seed, head_dim, knobs, 512, 700, "none")
    else:
        run_and_check(seed, head_dim, knobs, 257, 700, "causal")
