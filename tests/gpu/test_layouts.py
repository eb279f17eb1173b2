"""A model's tensors as they come, and the one-shot call a model makes.

(B, N, H, D) projections are read in place (``layout="bnhd"``, or the caller's own transposed
view) by every kernel form, against a float64 reference; the output keeps the caller's layout;
no copy of q, k or v is made (peak memory); refusals name the stride at fault. ``attention()``
keeps its launch between calls and never binds a previous call's arrays. Inputs are fresh
random normals from the session's printed seed.
"""

from __future__ import annotations

import math

import pytest

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
pytest.importorskip("cuda.tile")

from kernels.cutile import launch  # noqa: E402
from tests.gpu.test_decode import reference  # noqa: E402

REL_TOL = 1e-2

# (name, problem, knobs): one per kernel form the layout must pass through.
FORMS = [
    ("tile-causal", dict(batch=2, heads=4, kv_heads=2, q_len=300, k_len=300, mask="causal"),
     dict(persistent=False)),
    ("persistent-none", dict(batch=2, heads=8, kv_heads=8, q_len=512, k_len=512, mask="none"),
     dict(persistent=True)),
    ("causal-persistent", dict(batch=1, heads=8, kv_heads=2, q_len=1024, k_len=1024,
     mask="causal"), dict(persistent=True)),
    ("decode-q1-split", dict(batch=2, heads=32, kv_heads=8, q_len=1, k_len=3000, mask="none"),
     dict(pack_gqa=True, kv_splits=4, tile_n=128)),
    ("decode-q5-causal", dict(batch=2, heads=8, kv_heads=2, q_len=5, k_len=700, mask="causal",
     input_pos=695), dict(pack_gqa=True, kv_splits=None, tile_n=64)),
]  # fmt: skip


def bnhd_inputs(seed: int, batch, heads, kv_heads, q_len, k_len, head_dim=128, dtype="bfloat16"):
    """q, k, v as (B, N, H, D) tensors, each its own buffer (as from separate projections)."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    dt = getattr(torch, dtype)

    def make(n: int, h: int):
        return torch.randn((batch, n, h, head_dim), generator=gen, device="cuda", dtype=dt)

    return make(q_len, heads), make(k_len, kv_heads), make(k_len, kv_heads)


def rel_err(out, want) -> float:
    return (torch.linalg.vector_norm(out.double() - want) / torch.linalg.vector_norm(want)).item()


@pytest.mark.parametrize(("name", "problem", "knobs"), FORMS, ids=[f[0] for f in FORMS])
def test_bnhd_layout_matches_reference_in_every_form(seed: int, name, problem, knobs) -> None:
    problem = dict(problem)
    mask, input_pos = problem.pop("mask"), problem.pop("input_pos", 0)
    q, k, v = bnhd_inputs(seed, **problem)
    out, lse = launch.attention(
        q, k, v, layout="bnhd", mask=mask, input_pos=input_pos, return_lse=True, **knobs
    )
    torch.cuda.synchronize()
    assert out.shape == q.shape and out.stride() == q.stride(), "out keeps the caller's layout"
    want, want_lse, _ = reference(*(x.transpose(1, 2) for x in (q, k, v)), mask, input_pos)
    what = f"seed {seed} {name}"
    assert torch.isfinite(out).all(), what
    assert rel_err(out.transpose(1, 2), want) < REL_TOL, what
    finite = torch.isfinite(want_lse)
    assert (lse[finite].double() - want_lse[finite]).abs().max().item() < 2e-2, what


def test_transposed_views_and_a_given_out_are_used_in_place(seed: int) -> None:
    q, k, v = bnhd_inputs(seed, 2, 8, 2, 256, 640)
    out = torch.full_like(q, math.nan)  # (B, N, H, D), poisoned
    views = [x.transpose(1, 2) for x in (q, k, v)]
    res = launch.attention(*views, mask="causal", input_pos=384, out=out.transpose(1, 2))
    torch.cuda.synchronize()
    assert res.data_ptr() == out.data_ptr()
    want, _, _ = reference(*views, "causal", 384)
    assert rel_err(out.transpose(1, 2), want) < REL_TOL, f"seed {seed}"


def test_strided_inputs_are_not_copied(seed: int) -> None:
    q, k, v = bnhd_inputs(seed, 4, 16, 16, 2048, 2048)
    launch.attention(q, k, v, layout="bnhd", mask="causal")  # compile and keep the launch
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    out = launch.attention(q, k, v, layout="bnhd", mask="causal")
    torch.cuda.synchronize()
    grew = torch.cuda.max_memory_allocated() - before
    # The new output and nothing like another q, k or v (each as out).
    assert grew < out.numel() * out.element_size() * 1.5, f"peak grew by {grew} bytes"


def test_refusals_name_the_stride(seed: int) -> None:
    q, k, v = bnhd_inputs(seed, 1, 4, 4, 64, 64, head_dim=64)
    with pytest.raises(ValueError, match=r"q cannot be read in place: its last \(head-dim\)"):
        launch.attention(q.transpose(1, 3), k.transpose(1, 3), v.transpose(1, 3))
    wide = torch.randn((1, 64, 4, 68), device="cuda", dtype=q.dtype)[..., :64]  # 136-byte rows
    with pytest.raises(ValueError, match="not all multiples of 16 bytes"):
        launch.attention(wide, k, v, layout="bnhd")
    shared = k[:, :, :1].expand(-1, -1, 4, -1)  # every head the same memory
    with pytest.raises(ValueError, match="share elements"):
        launch.attention(q, shared, v, layout="bnhd")
    with pytest.raises(ValueError, match="layout must be one of"):
        launch.attention(q, k, v, layout="nbhd")
    with pytest.raises(ValueError, match=r"rank 4 \(B, N, H, D\)"):
        launch.attention(q[0], k, v, layout="bnhd")
    with pytest.raises(ValueError, match=r"out must be a torch array of shape \(1, 64, 4, 64\)"):
        launch.attention(q, k, v, layout="bnhd", out=torch.empty_like(q[:, :1]))


def test_one_shot_calls_keep_their_launch_but_not_their_arrays(seed: int) -> None:
    launch.clear_launch_cache()
    gen = torch.Generator(device="cuda").manual_seed(seed)

    def fresh(n: int, heads: int):
        return torch.randn((1, heads, n, 128), generator=gen, device="cuda", dtype=torch.float16)

    for call in range(3):  # fresh inputs each call: a kept launch must bind the new ones
        q, k, v = fresh(700, 8), fresh(700, 8), fresh(700, 8)
        out = launch.attention(q, k, v, mask="causal", persistent=True)
        want, _, _ = reference(q, k, v, "causal", 0)
        assert rel_err(out, want) < REL_TOL, f"seed {seed} call {call}"
        assert len(launch._ONE_SHOT) == 1, "one kept call for one problem and config"
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        out = launch.attention(q, k, v, mask="causal", persistent=True)
    side.synchronize()
    assert len(launch._ONE_SHOT) == 1 and rel_err(out, want) < REL_TOL, f"seed {seed} side"
    # The decode form's split writes partial outputs: two streams at once get their own.
    q1, k1, v1 = fresh(1, 32), fresh(5000, 8), fresh(5000, 8)
    knobs = dict(pack_gqa=True, kv_splits=16, tile_n=128)
    other = torch.cuda.Stream()
    other.wait_stream(torch.cuda.current_stream())
    main_out = launch.attention(q1, k1, v1, **knobs)
    with torch.cuda.stream(other):
        other_out = launch.attention(q1, k1, v1, **knobs)
    torch.cuda.synchronize()
    want, _, _ = reference(q1, k1, v1, "none", 0)
    assert rel_err(main_out, want) < REL_TOL and rel_err(other_out, want) < REL_TOL
    # A different shape is another kept call; a bad call is refused every time, never kept.
    assert len(launch._ONE_SHOT) == 2
    for _ in range(2):
        with pytest.raises(ValueError, match="mask must be one of"):
            launch.attention(q, k, v, mask="diagonal")
    assert len(launch._ONE_SHOT) == 2
    launch.clear_launch_cache()
    assert not launch._ONE_SHOT


def test_a_kept_call_is_captured_in_a_cuda_graph(seed: int) -> None:
    # What a model captured in a CUDA graph does: attention() called eagerly once, then in the
    # capture (its kept launch is reused there, nothing is made), replayed on new inputs.
    gen = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v = (torch.randn((2, 8, 1024, 128), generator=gen, device="cuda",
                           dtype=torch.bfloat16) for _ in range(3))  # fmt: skip
    out = torch.empty_like(q)
    launch.attention(q, k, v, mask="causal", out=out)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        launch.attention(q, k, v, mask="causal", out=out)
    for x in (q, k, v):
        x.copy_(torch.randn(x.shape, generator=gen, device="cuda", dtype=x.dtype))
    graph.replay()
    torch.cuda.synchronize()
    want, _, _ = reference(q, k, v, "causal", 0)
    assert rel_err(out, want) < REL_TOL, f"seed {seed}"
