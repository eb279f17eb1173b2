"""The cuTile FlashAttention kernel's public names in one place (they live in
``kernels.cutile``; see that package's docstring for which module holds what).

Kept so that ``from kernels import cutile_fmha`` goes on working for bench/, scripts/ and the
workbench; new code may import the modules of ``kernels.cutile`` directly. Importing this module
needs cuda.tile.
"""

from __future__ import annotations

try:
    import cuda.tile as ct  # noqa: F401  (bench/explore_lib.py reads ct.__version__ through here)
except ModuleNotFoundError as exc:  # say what to install, not only "No module named 'cuda'"
    raise ModuleNotFoundError(
        "kernels.cutile_fmha needs cuda-tile (NVIDIA cuTile) and a GPU: on a machine with an "
        "NVIDIA GPU, bash scripts/setup.sh installs it (or pip install 'fmha-workbench[gpu]')",
        name=exc.name,
    ) from exc

from kernels.cutile.arrays import random_qkv, sm_count
from kernels.cutile.blockmap import GpuBlockMap, gpu_block_map
from kernels.cutile.compile import OFFLINE_SM_COUNT, compile_cubin
from kernels.cutile.device import (
    EXP2_C0,
    EXP2_C1,
    EXP2_C2,
    EXP2_C3,
    LN2,
    NEG_INF,
    ROUND_MAGIC,
)
from kernels.cutile.device_persistent import (
    fmha_fwd_causal_persistent_kernel,
    fmha_fwd_persistent_kernel,
)
from kernels.cutile.device_tile import fmha_fwd_kernel
from kernels.cutile.diagnostics import (
    CompilerFailedError,
    CompilerNotFoundError,
    DeviceOutOfMemoryError,
    FmhaError,
    NoGpuError,
    ProbeResult,
    UnsupportedArchError,
    gpu_arch,
    tileiras_version,
)
from kernels.cutile.diagnostics import translate as _translate
from kernels.cutile.forms import (
    KERNEL_FORMS,
    L2_GROUP_BYTES,
    LOG2E,
    MASK_CODES,
    causal_tile_table,
    grid_kernel,
    kernel_variant,
    l2_group_size,
)
from kernels.cutile.launch import (
    DTYPE_NAMES,
    HEAD_DIMS,
    LAUNCH_KNOBS,
    LAYOUTS,
    TILE_SIZES,
    WORKER_WARPS,
    LaunchConfig,
    attention,
    clear_launch_cache,
    launch_plan,
    prepare,
)
from kernels.cutile.plan import LaunchPlan, plan_launch
from kernels.cutile.selftest import probe
from kernels.cutile.tuner import (
    FIXED_KNOBS,
    KERNEL_REVISION,
    SUSTAINED_FINALISTS,
    SUSTAINED_MIN_US,
    SUSTAINED_REPLAYS,
    SUSTAINED_ROUNDS,
    SUSTAINED_TARGET_MS,
    TUNED_KEYS,
    TUNING_METHOD,
    autotune,
    default_cache_path,
    grid_form,
    n_bucket,
    problem_key,
    space_digest,
    sustained_finalists,
    tuned_kwargs,
)

__all__ = [
    "DTYPE_NAMES",
    "EXP2_C0",
    "EXP2_C1",
    "EXP2_C2",
    "EXP2_C3",
    "FIXED_KNOBS",
    "HEAD_DIMS",
    "KERNEL_FORMS",
    "KERNEL_REVISION",
    "L2_GROUP_BYTES",
    "LAUNCH_KNOBS",
    "LAYOUTS",
    "LN2",
    "LOG2E",
    "MASK_CODES",
    "NEG_INF",
    "OFFLINE_SM_COUNT",
    "ROUND_MAGIC",
    "SUSTAINED_FINALISTS",
    "SUSTAINED_MIN_US",
    "SUSTAINED_REPLAYS",
    "SUSTAINED_ROUNDS",
    "SUSTAINED_TARGET_MS",
    "TILE_SIZES",
    "TUNED_KEYS",
    "TUNING_METHOD",
    "WORKER_WARPS",
    "CompilerFailedError",
    "CompilerNotFoundError",
    "DeviceOutOfMemoryError",
    "FmhaError",
    "GpuBlockMap",
    "LaunchConfig",
    "LaunchPlan",
    "NoGpuError",
    "ProbeResult",
    "UnsupportedArchError",
    "_translate",
    "attention",
    "autotune",
    "causal_tile_table",
    "clear_launch_cache",
    "compile_cubin",
    "default_cache_path",
    "fmha_fwd_causal_persistent_kernel",
    "fmha_fwd_kernel",
    "fmha_fwd_persistent_kernel",
    "gpu_arch",
    "gpu_block_map",
    "grid_form",
    "grid_kernel",
    "kernel_variant",
    "l2_group_size",
    "launch_plan",
    "n_bucket",
    "plan_launch",
    "prepare",
    "probe",
    "problem_key",
    "random_qkv",
    "sm_count",
    "space_digest",
    "sustained_finalists",
    "tileiras_version",
    "tuned_kwargs",
]
