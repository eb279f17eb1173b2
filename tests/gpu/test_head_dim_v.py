"""A value head dim of its own on the GPU (issue #52 item 2): the kernel at D 192 / Dv 128
(DeepSeek's MLA prefill) and 96 / 64, in the tile and persistent forms (and the decode form),
bf16 and fp16, against torch's float64 softmax(QKᵀ)V. Fresh random inputs from the session's
printed seed; the output poisoned with NaN first, and the caller's tensors checked unchanged.
Skips without a GPU (tests/gpu/conftest.py)."""

from __future__ import annotations

import math

import pytest

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
pytest.importorskip("cuda.tile")

from kernels.cutile import launch  # noqa: E402

REL_TOL = 1e-2
DIMS = [(192, 128), (96, 64)]
FORMS = {
    "tile": ({}, 257, 700, "causal"),
    "tile-one-loop": ({"k_split": False}, 257, 700, "causal"),
    "persistent": ({"tile_m": 128, "tile_n": 128, "num_worker_warps": 8, "persistent": True},
                   512, 700, "none"),
    "causal-persistent": ({"tile_m": 64, "tile_n": 64, "persistent": True}, 1024, 1024,
                          "causal"),
    "decode": ({"pack_gqa": True, "kv_splits": None, "tile_n": 128}, 3, 5000, "causal"),
}  # fmt: skip


def reference(q, k, v, mask: str, input_pos: int):
    group = q.shape[1] // k.shape[1]
    kd, vd = (x.double().repeat_interleave(group, dim=1) for x in (k, v))
    s = (q.double() @ kd.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if mask == "causal":
        i = torch.arange(q.shape[2], device="cuda")[:, None]
        j = torch.arange(k.shape[2], device="cuda")[None, :]
        s = s.masked_fill(j > i + input_pos, -math.inf)
    return torch.softmax(s, dim=-1) @ vd


def inputs(seed: int, dims: tuple[int, int], q_len: int, k_len: int, dtype):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    head_dim, head_dim_v = dims
    q = torch.randn((2, 8, q_len, head_dim), generator=gen, device="cuda", dtype=dtype)
    k = torch.randn((2, 2, k_len, head_dim), generator=gen, device="cuda", dtype=dtype)
    v = torch.randn((2, 2, k_len, head_dim_v), generator=gen, device="cuda", dtype=dtype)
    return q, k, v


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("dims", DIMS, ids=lambda d: f"d{d[0]}v{d[1]}")
def test_the_kernel_is_right_with_v_of_its_own_head_dim(
    seed: int, dims: tuple[int, int], form: str, dtype: str
) -> None:
    knobs, q_len, k_len, mask = FORMS[form]
    q, k, v = inputs(seed, dims, q_len, k_len, getattr(torch, dtype))
    kept = [x.clone() for x in (q, k, v)]
    out = torch.full((*q.shape[:3], dims[1]), math.nan, device="cuda", dtype=q.dtype)
    input_pos = k_len - q_len
    launch.prepare(q, k, v, mask=mask, input_pos=input_pos, out=out, **knobs)()
    torch.cuda.synchronize()
    want = reference(q, k, v, mask, input_pos)
    what = f"seed {seed} D/Dv {dims} {form} {dtype} q{q_len} k{k_len} {mask}"
    assert torch.isfinite(out).all(), f"unwritten or NaN output: {what}"
    err = (torch.linalg.vector_norm(out.double() - want) / torch.linalg.vector_norm(want)).item()
    assert err < REL_TOL, f"relative error {err:.2e}: {what}"
    assert all(torch.equal(a, b) for a, b in zip(kept, (q, k, v), strict=True)), what


@pytest.mark.parametrize("layout", ["bhnd", "bnhd"])
def test_attention_makes_a_dv_wide_output_in_the_callers_layout(seed: int, layout: str) -> None:
    q, k, v = inputs(seed, (192, 128), 300, 300, torch.bfloat16)
    if layout == "bnhd":
        q, k, v = (x.transpose(1, 2).contiguous() for x in (q, k, v))
    out = launch.attention(q, k, v, mask="causal", layout=layout)
    torch.cuda.synchronize()
    assert out.shape == (*q.shape[:3], 128)
    if layout == "bnhd":
        q, k, v, out = (x.transpose(1, 2) for x in (q, k, v, out))
    want = reference(q, k, v, "causal", 0)
    err = (torch.linalg.vector_norm(out.double() - want) / torch.linalg.vector_norm(want)).item()
    assert err < REL_TOL, f"relative error {err:.2e}: seed {seed} {layout}"


def test_the_input_check_names_a_bad_v(seed: int) -> None:
    q, k, _ = inputs(seed, (192, 128), 64, 64, torch.float16)
    off_list = torch.randn((2, 2, 64, 44), device="cuda", dtype=torch.float16)
    with pytest.raises(ValueError, match=r"v head dim must be a multiple of 8 .* got 44"):
        launch.attention(q, k, off_list)
    fewer_keys = torch.randn((2, 2, 63, 128), device="cuda", dtype=torch.float16)
    with pytest.raises(ValueError, match="k and v must agree on batch, heads and keys"):
        launch.attention(q, k, fewer_keys)
    v = torch.randn((2, 2, 64, 128), device="cuda", dtype=torch.float16)
    with pytest.raises(ValueError, match=r"out must be a torch array of shape \(2, 8, 64, 128\)"):
        launch.attention(q, k, v, out=torch.empty_like(q))
