"""Every step of each architecture's default ladder compiles to a kernel that fits it.

CPU only: each hand-set step of ``ladder.json`` and ``ladder-sm120.json`` is compiled offline
for every architecture the preset names (tileiras, then cuobjdump, through
:class:`workbench.analysis.resources.ResourceService`) and must neither spill registers nor fail to
fit one CTA on an SM. The autotuned step is the tuner's table, which
tests/test_arch_tables_offline.py checks. Skipped without the compilers, except under CI=true.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernels.cubin_resources import ARCH_LIMITS
from workbench.analysis.resources import ResourceService, missing_tools
from workbench.config import Problem
from workbench.jobs.ladder_steps import PRESETS, load_ladder, preset_for_arch

IN_CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")
DEFAULTS = [name for name in PRESETS if name != "ladder-blackwell.json"]
CASES = [(name, arch) for name in DEFAULTS for arch in load_ladder(name).archs]
# Architectures that compile as a sibling the default suite already covers (sm_121 as sm_120 at
# every point tried, sm_103 as sm_100 less one table entry): their ~8-10 s cold compiles run
# in the slow step (scripts/test.sh), so each preset still compiles for every architecture in CI.
SIBLING_ARCHS = {"sm_121": "sm_120", "sm_103": "sm_100"}
# The benchmark's problem class: fp16, D = 128, aligned lengths, no GQA.
PROBLEM = Problem(batch=4, heads=32, head_dim=128, q_len=4096, k_len=4096)


def test_each_default_is_the_preset_of_the_architectures_it_names() -> None:
    assert {arch for _, arch in CASES} == {"sm_90", "sm_100", "sm_103", "sm_120", "sm_121"}
    for name, arch in CASES:
        assert preset_for_arch(arch) == name
        assert arch in ARCH_LIMITS, f"{name} names {arch}, whose limits nobody checks"


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> ResourceService:
    why = missing_tools()
    if why is not None:
        if IN_CI:
            pytest.fail(f"{why}: under CI=true the offline compile must run, not skip")
        pytest.skip(why)
    return ResourceService(Path(tmp_path_factory.mktemp("resources")))


# One test per step, not per ladder: each step is a cold compile of up to ~10 s, and a whole
# ladder in one test (up to 2 minutes on a loaded machine) held one worker while the other idled.
STEPS = [
    pytest.param(p, a, i, id=f"{p}-{a}-{i}", marks=[pytest.mark.slow] if a in SIBLING_ARCHS else [])
    for p, a in CASES
    for i in range(len(load_ladder(p).steps))
]


def test_a_default_ladder_has_one_autotuned_step_and_every_other_is_hand_set() -> None:
    for preset in DEFAULTS:
        steps = load_ladder(preset).steps
        assert [s.config.autotune for s in steps].count(True) == 1, preset


@pytest.mark.parametrize(("preset", "arch", "index"), STEPS)
def test_every_hand_set_step_of_a_default_ladder_fits_without_spilling(
    service: ResourceService, preset: str, arch: str, index: int
) -> None:
    step = load_ladder(preset).steps[index]
    res = service.for_config(PROBLEM, step.config, arch)
    if step.config.autotune:  # the tuner's per length: nothing is claimed for it
        assert res is None
        return
    assert res is not None
    assert not res.error, f"{preset} {arch} {step.name!r}: {res.error}"
    assert res.spill_bytes == 0, f"{preset} {arch} {step.name!r}: {res.summary()}"
    assert res.ctas_per_sm and res.ctas_per_sm >= 1, res.summary()
