"""Every head dim a multiple of 8 from 32 to 256 (issue #52 item 2), listed once: the CLI, the
kernel's input check and the CPU reference take the registry's list, and a dim that is not a
power of two runs in the next power-of-two tile (kernels.head_dims)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from kernels import knobs
from kernels.cutile.combine_shape import combine_tile
from kernels.head_dims import pads_head_dim, tile_head_dim
from kernels.reference import flash_attention
from tests.oracles import naive_attention

EVERY_DIM = tuple(range(32, 257, 8))


def test_the_registry_lists_every_multiple_of_8_from_32_to_256_once() -> None:
    assert knobs.HEAD_DIM.values == EVERY_DIM
    assert knobs.HEAD_DIM.values_for(knobs.CUTILE) == EVERY_DIM  # the kernel takes them all


def test_the_kernels_input_check_reads_the_registrys_list() -> None:
    launch = pytest.importorskip("kernels.cutile.launch", reason="cuda-tile is not installed")
    assert knobs.HEAD_DIM.values == launch.HEAD_DIMS


@pytest.mark.parametrize("head_dim", EVERY_DIM)
def test_each_dim_runs_in_a_power_of_two_tile_that_holds_it(head_dim: int) -> None:
    tile = tile_head_dim(head_dim)
    assert tile >= head_dim and tile & (tile - 1) == 0 and tile < 2 * head_dim
    assert pads_head_dim(head_dim) == (tile != head_dim)
    # The combine's column blocks are powers of two that cover the head dim.
    _, _, columns = combine_tile(16, 4, head_dim)
    assert columns & (columns - 1) == 0 and -(-head_dim // columns) * columns >= head_dim


@pytest.mark.parametrize("head_dim", [40, 80, 96, 136, 192, 200, 248])
def test_the_cpu_reference_is_right_at_dims_that_pad(
    head_dim: int, rng: np.random.Generator
) -> None:
    q = rng.standard_normal((1, 4, 70, head_dim))
    k = rng.standard_normal((1, 2, 90, head_dim))
    v = rng.standard_normal((1, 2, 90, head_dim))
    got = flash_attention(
        q, k, v, mask="causal", input_pos=20, tile_m=32, tile_n=64, accumulate=np.float64
    )
    want = naive_attention(q, k, v, mask="causal", input_pos=20)
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < 1e-9


@pytest.mark.parametrize("head_dim", ["96", "80", "200"])
def test_a_sweep_at_a_dim_that_pads_runs_on_the_cpu_and_is_stored(run_cli, head_dim) -> None:
    done = run_cli("sweep", "--head-dim", head_dim, "--heads", "2", "--seq-lens", "64", "--json")
    assert done.code == 0, done.err
    run = json.loads(done.out)["runs"][0]
    assert run["status"] == "complete" and len(run["points"]) == 1
    listed = run_cli("runs", "--json")
    assert listed.code == 0 and f'"head_dim": {head_dim}' in listed.out


def test_the_sweep_help_offers_the_registrys_list(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from workbench.cli import main

    with pytest.raises(SystemExit):
        main(["sweep", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert ", ".join(map(str, EVERY_DIM)) in shown


@pytest.mark.parametrize("head_dim", ["36", "264", "16"])
def test_a_dim_off_the_list_is_refused_in_one_line(run_cli, head_dim: str) -> None:
    bad = run_cli("sweep", "--head-dim", head_dim, "--seq-lens", "64")
    assert (
        bad.code == 2
        and len(bad.err_lines) == 1
        and f"--head-dim {head_dim}: expected one of" in bad.err
    )
