"""The tuner's cache across a new fixed knob (CPU only: the cache is read before any GPU work).

The shipped H200 cache (bench/results/h200-autotune.json) was written before q_halves existed;
a user who keeps the default must get its winners back, not minutes of re-tuning, and one who
turns the knob off must get a fresh search.
"""

from __future__ import annotations

import shutil
import types
from pathlib import Path

import pytest

from kernels.cutile import tuner

SHIPPED = Path(__file__).resolve().parents[1] / "bench/results/h200-autotune.json"


class Searched(Exception):
    """The tuner went past its cache to search."""


@pytest.fixture
def h200(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    problem = types.SimpleNamespace(
        lib="torch",
        dtype="float16",
        head_dim=128,
        value_dim=128,
        group=1,
        q_len=4096,
        k_len=4096,
    )
    monkeypatch.setattr(tuner, "check_inputs", lambda q, k, v: problem)
    monkeypatch.setattr(tuner, "gpu_arch", lambda device=0: "sm_90")
    monkeypatch.setattr(tuner, "device_id", lambda arr, lib: 0)

    def search_instead(lib: str) -> None:
        raise Searched

    monkeypatch.setattr(tuner, "default_stream", search_instead)
    cache = tmp_path / "autotune.json"
    shutil.copy(SHIPPED, cache)
    return cache


def test_a_winner_stored_before_a_fixed_knob_existed_still_answers_its_default(h200) -> None:
    chosen = tuner.autotune(None, None, None, mask="causal", cache_path=h200, q_halves=True)
    assert chosen["_tuning"]["cached"] is True
    assert (chosen["tile_m"], chosen["tile_n"], chosen["persistent"]) == (128, 128, True)
    # the defaults of every fixed knob, given or not
    assert tuner.autotune(None, None, None, mask="causal", cache_path=h200)["_tuning"]["cached"]


def test_a_fixed_knob_away_from_the_stored_winner_searches_again(h200) -> None:
    with pytest.raises(Searched):
        tuner.autotune(None, None, None, mask="causal", cache_path=h200, q_halves=False)
    with pytest.raises(Searched):
        tuner.autotune(None, None, None, mask="causal", cache_path=h200, fast_math=False)


def test_a_knob_the_tuner_does_not_keep_fixed_is_named(h200) -> None:
    with pytest.raises(TypeError, match=r"\['tile_k'\].*fixed are \['fast_math'"):
        tuner.autotune(None, None, None, mask="causal", cache_path=h200, tile_k=64)
