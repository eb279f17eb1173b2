"""The environment probe with its one sure test: a tiny real launch of the kernel.

Above the launcher (it launches) and beside :mod:`kernels.cutile.diagnostics`, which answers
whether this machine can run the kernel without launching anything (``assess``).
"""

from __future__ import annotations

from kernels.cutile.arrays import pick_lib, random_qkv
from kernels.cutile.diagnostics import (
    ProbeResult,
    assess,
    cuda_tile_version,
    device_name,
    gpu_arch,
    tileiras_version,
    translate,
)
from kernels.cutile.launch import attention


def probe(*, run_kernel: bool = True) -> ProbeResult:
    """Can this machine run the cuTile kernel? A small status; never raises.

    With ``run_kernel`` it also compiles and launches a tiny FMHA (a few seconds the first
    time, then the compile cache answers), which is the only sure test of the whole chain.
    """
    version = cuda_tile_version()
    tv = None
    try:
        tv = tileiras_version()
        if tv is None:
            return assess(None, None)
        arch = gpu_arch()
        verdict = assess(arch, tv, device_name(0))
        if not verdict.available or not run_kernel:
            return verdict
        if not _test_launch():
            return ProbeResult(
                False,
                "the test launch produced non-finite values",
                arch,
                verdict.device_name,
                version,
                tv,
            )
        return verdict
    except Exception as exc:  # a probe reports; it never raises
        err = translate(exc)
        return ProbeResult(False, f"{type(err).__name__}: {err}", None, None, version, tv)


def _test_launch() -> bool:
    """One tiny causal launch; True when every output value is finite."""
    lib = pick_lib()
    q, k, v = random_qkv(1, 1, 1, 16, 16, 64, lib=lib, seed=0)
    out = attention(q, k, v, mask="causal")
    if lib == "torch":
        import torch

        torch.cuda.synchronize()
        return bool(torch.isfinite(out).all())
    import cupy
    import numpy as np

    return bool(cupy.isfinite(out.astype(np.float32)).all())
