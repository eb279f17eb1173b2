"""The kernel's front door on decode shapes (issue #52): ``autotune()`` and a plain ``attention()``
take the decode form by themselves, the tuner answers in seconds, its pick is right against a
float64 reference and no slower than the decode preset's config. Fresh random inputs from the
session's printed seed; outputs poisoned with NaN first."""

from __future__ import annotations

import math

import pytest

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
pytest.importorskip("cuda.tile")

from kernels.cutile import forms, launch, tuner  # noqa: E402
from kernels.decode_choice import decode_defaults  # noqa: E402
from kernels.measure import balanced_order, graph_median_ms, side_stream  # noqa: E402

REL_TOL = 1e-2


def inputs(seed: int, batch: int, q_len: int, k_len: int, head_dim: int = 128):
    gen = torch.Generator(device="cuda").manual_seed(seed)

    def make(h: int, n: int):
        return torch.randn(
            (batch, h, n, head_dim), generator=gen, device="cuda", dtype=torch.bfloat16
        )

    return make(32, q_len), make(8, k_len), make(8, k_len)


def rel_err(out, q, k, v, mask: str, input_pos: int) -> float:
    """‖out − ref‖ / ‖ref‖ against float64 attention (row i sees key j iff j <= i + input_pos)."""
    kd, vd = (x.double().repeat_interleave(4, dim=1) for x in (k, v))
    s = (q.double() @ kd.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if mask == "causal":
        i = torch.arange(q.shape[2], device="cuda")[:, None]
        j = torch.arange(k.shape[2], device="cuda")[None, :]
        s = s.masked_fill(j > i + input_pos, -math.inf)
    want = torch.softmax(s, dim=-1) @ vd
    return (torch.linalg.vector_norm(out.double() - want) / torch.linalg.vector_norm(want)).item()


def form_of(q, k, v, mask: str, input_pos: int, knobs: dict) -> tuple[str, int]:
    """The kernel form and split count a launch of ``knobs`` runs on this GPU."""
    p = launch.check_inputs(q, k, v)
    plan = forms.plan(
        p, launch.LaunchConfig.of(knobs), scale=0.1, mask=mask, input_pos=input_pos,
        window=None, with_lse=False, with_map=False,
        sm_count=lambda: torch.cuda.get_device_properties(0).multi_processor_count,
    )  # fmt: skip
    return plan.form, plan.grid[2] if plan.form == "decode" else 1


@pytest.mark.parametrize(
    ("batch", "q_len", "k_len", "mask"),
    [(1, 1, 32768, "none"), (8, 1, 8192, "causal"), (32, 1, 4096, "none"), (8, 16, 8192, "causal")],
    ids=lambda x: str(x),
)
def test_autotune_takes_the_decode_form_in_seconds_and_is_right(
    seed: int, tmp_path, batch: int, q_len: int, k_len: int, mask: str
) -> None:
    q, k, v = inputs(seed, batch, q_len, k_len)
    input_pos = k_len - q_len
    chosen = tuner.autotune(q, k, v, mask=mask, input_pos=input_pos, cache_path=tmp_path / "c")
    how = chosen["_tuning"]
    knobs = tuner.tuned_kwargs(chosen)
    what = f"seed {seed} B{batch} q{q_len} k{k_len} {mask}: {knobs}"
    assert knobs["pack_gqa"] is True, what
    # The candidates compiled at once before the first launch (kernels/cutile/precompile.py).
    assert how["precompile"]["compiled"] == how["precompile"]["kernels"], how["precompile"]
    print(f"tuning took {how['seconds']} s ({how['precompile']}): {what}")  # shown under -s
    assert how["seconds"] <= 10.0, f"tuning took {how['seconds']} s ({how['precompile']}): {what}"
    form, splits = form_of(q, k, v, mask, input_pos, knobs)
    assert form == "decode", what
    if batch == 1:
        assert splits > 1, what
    out = torch.full_like(q, math.nan)
    launch.prepare(q, k, v, mask=mask, input_pos=input_pos, out=out, **knobs)()
    torch.cuda.synchronize()
    assert rel_err(out, q, k, v, mask, input_pos) < REL_TOL, what
    again = tuner.autotune(q, k, v, mask=mask, input_pos=input_pos, cache_path=tmp_path / "c")
    assert again["_tuning"]["cached"] and tuner.tuned_kwargs(again) == knobs


def test_a_plain_attention_call_on_a_decode_shape_runs_the_decode_form(seed: int) -> None:
    q, k, v = inputs(seed, 1, 1, 32768)
    launch.clear_launch_cache()
    out = torch.full_like(q, math.nan)
    launch.attention(q, k, v, mask="causal", input_pos=32767, out=out)
    torch.cuda.synchronize()
    assert rel_err(out, q, k, v, "causal", 32767) < REL_TOL, f"seed {seed}"
    kept = next(iter(launch._ONE_SHOT.values()))
    assert kept.config.pack_gqa and kept.config.kv_splits is None, kept.config


def test_the_tuners_decode_pick_is_no_slower_than_the_presets(seed: int, tmp_path) -> None:
    q, k, v = inputs(seed, 1, 1, 32768)
    chosen = tuner.tuned_kwargs(tuner.autotune(q, k, v, cache_path=tmp_path / "c"))
    preset = decode_defaults(128)
    out = torch.empty_like(q)
    runs = [launch.prepare(q, k, v, out=out, **c) for c in (chosen, preset)]
    runs[0]()
    runs[1]()
    torch.cuda.synchronize()
    stream = side_stream("torch")
    times: list[list[float]] = [[], []]
    for r in range(6):
        for i in balanced_order(2, r):
            times[i].append(graph_median_ms(runs[i], "torch", 15.0, 10, stream=stream))
    tuned_ms, preset_ms = (sorted(t)[len(t) // 2] for t in times)
    assert tuned_ms <= preset_ms * 1.03, (
        f"seed {seed}: tuned {chosen} {tuned_ms * 1e3:.1f} us, preset {preset_ms * 1e3:.1f} us"
    )
