"""A value head dim of its own (issue #52 item 2): V and the output Dv wide, Q and K D wide
(DeepSeek's MLA prefill: D 192, Dv 128). The CPU reference computes it, the CLI takes
``--head-dim-v`` from the registry's list and stores it, FLOPs count 2·B·H·Nq·Nk·(D + Dv), and
the peers that run one head dim refuse it naming the flag."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from kernels.reference import flash_attention
from tests.oracles import naive_attention
from workbench.backends.base import problem_flops
from workbench.config import ConfigError, KernelConfig, Problem

SPLIT_DIMS = [(192, 128), (96, 64), (64, 128), (80, 40)]


@pytest.mark.parametrize(("head_dim", "head_dim_v"), SPLIT_DIMS)
@pytest.mark.parametrize("mask", ["none", "causal", "window"])
def test_the_cpu_reference_gives_a_dv_wide_output_that_matches_float64(
    head_dim: int, head_dim_v: int, mask: str, rng: np.random.Generator
) -> None:
    q = rng.standard_normal((2, 4, 70, head_dim))
    k = rng.standard_normal((2, 2, 90, head_dim))
    v = rng.standard_normal((2, 2, 90, head_dim_v))
    window = 33 if mask == "window" else None
    got = flash_attention(
        q, k, v, mask=mask, input_pos=20, window=window, tile_m=32, tile_n=64,
        accumulate=np.float64,
    )  # fmt: skip
    want = naive_attention(q, k, v, mask=mask, input_pos=20, window=window)
    assert got.shape == (2, 4, 70, head_dim_v)
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < 1e-9


@pytest.mark.parametrize("kv_splits", [1, 3])
def test_the_decode_form_packs_and_splits_at_dv(kv_splits: int, rng: np.random.Generator) -> None:
    q = rng.standard_normal((1, 8, 1, 192))
    k = rng.standard_normal((1, 2, 300, 192))
    v = rng.standard_normal((1, 2, 300, 128))
    got = flash_attention(
        q, k, v, mask="causal", input_pos=299, tile_m=4, tile_n=64, accumulate=np.float64,
        pack_gqa=True, kv_splits=kv_splits,
    )  # fmt: skip
    want = naive_attention(q, k, v, mask="causal", input_pos=299)
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < 1e-9


def test_the_float32_reference_at_mla_dims_is_within_float32_error(
    rng: np.random.Generator,
) -> None:
    q, k = (rng.standard_normal((1, 2, 130, 192)).astype(np.float32) for _ in range(2))
    v = rng.standard_normal((1, 2, 130, 128)).astype(np.float32)
    got = flash_attention(q, k, v, mask="causal", tile_m=64, tile_n=64)
    want = naive_attention(q, k, v, mask="causal")
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < 1e-5


def test_a_sweep_at_192_over_128_runs_on_the_cpu_and_stores_both_dims(run_cli) -> None:
    done = run_cli(
        "sweep", "--head-dim", "192", "--head-dim-v", "128", "--heads", "2", "--mask", "causal",
        "--seq-lens", "64,96", "--json",
    )  # fmt: skip
    assert done.code == 0, done.err
    run = json.loads(done.out)["runs"][0]
    assert run["status"] == "complete"
    assert (run["problem"]["head_dim"], run["problem"]["head_dim_v"]) == (192, 128)
    for point in run["points"]:
        # The run's own accuracy check: float64 softmax(QKᵀ)V on a sample of its fresh inputs.
        assert point["rel_err"] < 1e-3
        n = point["q_len"]
        flops = 2 * 1 * 2 * n * n * (192 + 128) // 2  # causal: half
        assert point["tflops"] * 1e12 * point["latency_ms"] * 1e-3 == pytest.approx(flops)
    shown = run_cli("show", str(run["id"]))
    assert shown.code == 0 and "D192/128" in shown.out


def test_the_flop_count_is_2bhnn_d_plus_dv_and_4bhnnd_when_they_agree() -> None:
    dense = KernelConfig()
    mla = Problem(batch=2, heads=3, q_len=50, k_len=70, head_dim=192, head_dim_v=128)
    assert problem_flops(mla, dense) == 2 * 2 * 3 * 50 * 70 * (192 + 128)
    same = Problem(batch=2, heads=3, q_len=50, k_len=70, head_dim=96, head_dim_v=96)
    assert problem_flops(same, dense) == 4 * 2 * 3 * 50 * 70 * 96
    # A window counts the pairs it sees, each at 2·(D + Dv).
    windowed = problem_flops(mla, KernelConfig(mask="window", window=10))
    seen = sum(min(r + 1, 10) for r in range(50))
    assert windowed == 2 * 3 * seen * 2 * (192 + 128)


def test_bytes_count_k_at_d_and_v_and_o_at_dv() -> None:
    mla = Problem(batch=1, heads=4, kv_heads=2, q_len=10, k_len=30, head_dim=192, head_dim_v=128)
    assert mla.kv_bytes() == 2 * 30 * (192 + 128) * 2
    assert mla.qo_bytes() == 4 * 10 * (192 + 128) * 2


def test_dv_equal_to_d_is_the_same_problem_and_old_stored_problems_read_as_dv_d() -> None:
    assert Problem(head_dim=128, head_dim_v=128) == Problem(head_dim=128)
    stored = {"batch": 1, "heads": 2, "q_len": 8, "k_len": 8, "head_dim": 96, "dtype": "float16"}
    old = Problem.from_dict(stored)
    assert old.value_dim == 96 and not old.split_head_dims


@pytest.mark.parametrize("typed", ["44", "264", "0"])
def test_a_head_dim_v_off_the_list_is_refused_naming_the_flag(run_cli, db_path, typed) -> None:
    bad = run_cli("sweep", "--head-dim", "192", "--head-dim-v", typed, "--seq-lens", "64")
    assert bad.code == 2 and len(bad.err_lines) == 1, bad.err
    assert f"error: --head-dim-v {typed}: expected one of 32, 40," in bad.err
    assert not db_path.exists()


@pytest.mark.parametrize("name", ["torch-flash", "torch-cudnn", "fa4"])
def test_peers_with_one_head_dim_refuse_dv_naming_the_flag(name: str) -> None:
    from workbench.backends import get_backend

    backend = get_backend(name)
    problem = Problem(heads=2, q_len=64, k_len=64, head_dim=192, head_dim_v=128)
    with pytest.raises(ConfigError) as refused:
        backend.check_supported(problem, KernelConfig())
    line = refused.value.cli_message()
    assert line.startswith("--head-dim-v 128") and "\n" not in line and name in line


def test_compare_warns_that_runs_at_different_dv_solve_different_problems(run_cli) -> None:
    for dv in ("128", "192"):
        done = run_cli("sweep", "--head-dim", "192", "--head-dim-v", dv, "--seq-lens", "32")
        assert done.code == 0, done.err
    compared = run_cli("compare", "1", "2")
    assert compared.code == 0, compared.err
    assert "different problems (head_dim_v: #1 128, #2 192)" in compared.out + compared.err


def test_a_plugin_refuses_dv_through_the_cli_and_writes_nothing(
    run_cli, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pathlib import Path

    from workbench.backends import catalog
    from workbench.backends.plugin_env import ENV_KNOBS, ENV_PLUGINS

    monkeypatch.setenv(ENV_PLUGINS, "")
    monkeypatch.setenv(ENV_KNOBS, "")
    catalog.forget_plugins()
    example = Path(__file__).resolve().parents[1] / "examples" / "numpy_softcap.py"
    db = tmp_path / "plugin.db"
    try:
        bad = run_cli(
            "--plugin", example, "sweep", "--db", db, "--backend", "numpy-softcap",
            "--head-dim", "192", "--head-dim-v", "128", "--seq-lens", "64",
        )  # fmt: skip
    finally:
        catalog.forget_plugins()
    assert bad.code == 2 and len(bad.err_lines) == 1, bad.err
    assert bad.err.startswith("error: --head-dim-v 128: numpy-softcap runs V at the query/key")
    assert not db.exists()


def test_a_decode_sweep_packs_and_splits_at_192_over_128_on_the_cpu(run_cli, tmp_path) -> None:
    done = run_cli(
        "sweep", "--q-len", "1", "--k-lens", "256,512", "--head-dim", "192", "--head-dim-v",
        "128", "--heads", "8", "--kv-heads", "2", "--pack-gqa", "--kv-splits", "2",
        "--mask", "causal", "--json",
    )  # fmt: skip
    assert done.code == 0, done.err
    run = json.loads(done.out)["runs"][0]
    assert run["status"] == "complete" and run["axis"] == "k_len"
    assert all(point["rel_err"] < 1e-3 for point in run["points"])
    # K+V bytes per point: B·Hkv·k_len·(D + Dv)·2 over the latency.
    csv_path = tmp_path / "points.csv"
    assert run_cli("export", "--csv", csv_path).code == 0
    rows = list(csv.DictReader(csv_path.open()))
    assert [int(row["k_len"]) for row in rows] == [256, 512]
    assert {(row["head_dim"], row["head_dim_v"]) for row in rows} == {("192", "128")}
    for row in rows:
        kv_bytes = 1 * 2 * int(row["k_len"]) * (192 + 128) * 2
        seconds = float(row["latency_ms"]) * 1e-3
        assert float(row["kv_gbs"]) == pytest.approx(kv_bytes / seconds / 1e9)
