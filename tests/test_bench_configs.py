"""Every live config list in bench/configs/ still runs, and every archived one really does not.

A config list is what ``bench/explore_configs.py --configs @FILE`` times: launch knobs of the
cuTile kernel. Each is loaded the way that script loads it and each of its configs is checked
knob by knob through the product's own knob check, without a GPU; a list whose knob the kernel
has since dropped belongs in bench/configs/archive/ (see its README).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.explore_configs import CANDIDATES, default_configs, load_configs
from bench.profile_kernels import DEFAULT_CONFIGS as PROFILED

CONFIGS = Path(__file__).resolve().parents[1] / "bench" / "configs"
ARCHIVE = CONFIGS / "archive"
LIVE = sorted(CONFIGS.glob("*.json"))
ARCHIVED = sorted(ARCHIVE.glob("*.json"))
# The masks explore_configs.py takes (--masks, "from causal, none").
MASKS = ("none", "causal")


def knob_violations(values: dict[str, Any], mask: str) -> list[str]:
    """What the product's knob check says against launch knobs ``values`` on ``mask``; empty
    when they run.

    The only place the check is called. Today it is the kernel's own ``LaunchConfig`` (each
    knob's values, the rules that tie knobs together, and the mask's); once the knob registry
    in kernels/knobs.py lands, the body becomes ``return knobs.violations(values, mask)``.
    """
    from kernels.cutile_fmha import LaunchConfig

    try:
        LaunchConfig.of(values).check_mask(mask)
    except ValueError as exc:
        return [str(exc)]
    return []


def _runs_under(config: dict[str, Any]) -> list[str]:
    return [mask for mask in MASKS if not knob_violations(config, mask)]


def test_the_check_refuses_what_the_kernel_no_longer_has() -> None:
    """The helper is not a rubber stamp: dropped knobs, bad values and bad pairs are refused."""
    assert knob_violations({"tile_m": 128, "tile_n": 128, "num_worker_warps": 8}, "causal") == []
    assert knob_violations({"tile_m": 128, "tile_n": 128, "q_split": True}, "none")
    assert knob_violations({"tile_m": 48, "tile_n": 64}, "none")
    assert knob_violations({"num_worker_warps": 16}, "none")
    assert knob_violations({"persistent": True, "num_ctas": 2}, "none")
    pairs = {"tile_m": 128, "tile_n": 128, "persistent": True, "k_unroll": 2}
    assert _runs_under(pairs) == ["none"]  # key blocks in pairs: the mask-free grid only


def test_there_are_live_and_archived_config_lists() -> None:
    assert len(LIVE) >= 10 and len(ARCHIVED) >= 1


@pytest.mark.parametrize("path", LIVE, ids=lambda p: p.name)
def test_every_config_of_a_live_list_runs(path: Path) -> None:
    configs = load_configs(f"@{path}")
    assert configs and all(isinstance(c, dict) and c for c in configs)
    for index, config in enumerate(configs):
        assert _runs_under(config), (
            f"{path.name}[{index}] {config}: {knob_violations(config, 'none')}; "
            "fix it or move the list to bench/configs/archive/"
        )


def test_explore_and_profile_defaults_run() -> None:
    """What explore_configs.py and profile_kernels.py time without --configs."""
    configs = default_configs(128)
    assert len(configs) > len(CANDIDATES)
    for config in [*configs, *PROFILED]:
        assert _runs_under(config), (config, knob_violations(config, "none"))


@pytest.mark.parametrize("path", ARCHIVED, ids=lambda p: p.name)
def test_every_archived_list_is_refused(path: Path) -> None:
    """An archived list would stop explore_configs.py on every mask (else it belongs one
    folder up), and the archive's README says why it is there."""
    configs = json.loads(path.read_text())
    refused = [c for c in configs if not _runs_under(c)]
    assert refused, f"{path.name} runs again: move it back to bench/configs/"
    assert f"`{path.name}`" in (ARCHIVE / "README.md").read_text()


def test_decode_bench_takes_names_by_commas_and_refuses_unknown_ones(capsys: Any) -> None:
    """`EXPLORE_ONLY="a,b"` once matched no problem and the device call measured nothing."""
    import argparse

    from bench import decode_bench

    ap = argparse.ArgumentParser()
    names = decode_bench._names(["B1-q1-k32k,B8-q1-k4k", "B8-q1-k8k"], ["B1-q1-k32k",
                                "B8-q1-k4k", "B8-q1-k8k"], "problem", ap)  # fmt: skip
    assert names == ["B1-q1-k32k", "B8-q1-k4k", "B8-q1-k8k"]
    with pytest.raises(SystemExit) as refused:
        decode_bench.main(["--only", "B1-q1-k32k,B9"])
    assert refused.value.code == 2 and "unknown problem B9;" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        decode_bench.main(["--variants", "ours-auto,ours-fast"])
    assert "unknown variant ours-fast;" in capsys.readouterr().err
