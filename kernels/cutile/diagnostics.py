"""Errors that say what to do, the environment probe, and the tileiras version.

No cuda.tile import at module level: the workbench asks this module whether the cuTile backend
can run (``assess``) on machines where cuda.tile may be missing. cuda.tile's own exception types
are looked up when an error is translated.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

INSTALL_HINT = (
    'pip install "cuda-tile[tileiras]==1.7.0" nvidia-cuda-tileiras==13.4.92 '
    "nvidia-cuda-nvcc==13.4.92 nvidia-nvvm==13.4.92 (the three compiler packages must share "
    "one version)"
)
# The oldest architecture cuTile compiles for (sm_80).
MIN_SM_MAJOR = 8


class FmhaError(RuntimeError):
    """Base class of every error this package raises on purpose (besides ValueError)."""


class NoGpuError(FmhaError):
    """No NVIDIA driver or no visible device."""


class UnsupportedArchError(FmhaError):
    """The GPU is older than cuTile supports (sm_80)."""


class CompilerNotFoundError(FmhaError, FileNotFoundError):
    """tileiras, the CUDA Tile compiler, is not installed where cuTile looks."""


class CompilerFailedError(FmhaError):
    """tileiras ran and failed (or timed out)."""


class DeviceOutOfMemoryError(FmhaError, MemoryError):
    """The GPU ran out of memory for the output, the LSE or a scratch buffer."""


def _tile_error(name: str) -> type[BaseException] | None:
    """cuda.tile's exception class ``name`` if cuda.tile is imported (its errors can only come
    from it), else None."""
    found = getattr(sys.modules.get("cuda.tile"), name, None)
    return found if isinstance(found, type) else None


def translate(exc: BaseException) -> BaseException:
    """Map a low-level failure onto one of the classes above, or return it unchanged."""
    text = str(exc)
    if isinstance(exc, FmhaError):
        return exc
    timeout, failed = (
        _tile_error("TileCompilerTimeoutError"),
        _tile_error("TileCompilerExecutionError"),
    )
    if timeout is not None and isinstance(exc, timeout):
        return CompilerFailedError(
            f"tileiras timed out: {text.splitlines()[0] if text else exc!r}. Raise the compile "
            "timeout (CUDA_TILE_COMPILER_TIMEOUT_SEC) or pick smaller tiles."
        )
    if failed is not None and isinstance(exc, failed):
        hint = "check the tileiras message above"
        if os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH"):
            hint = (
                "unset CUDA_HOME: it points tileiras at an older toolkit "
                f"(CUDA_HOME={os.environ.get('CUDA_HOME') or os.environ.get('CUDA_PATH')})"
            )
        return CompilerFailedError(f"tileiras failed to compile the FMHA kernel: {hint}.\n{text}")
    if isinstance(exc, FileNotFoundError) and "tileiras" in text:
        return CompilerNotFoundError(f"tileiras not found. Install it: {INSTALL_HINT}.\n{text}")
    if isinstance(exc, OSError) and "libcuda" in text:
        return NoGpuError(
            "no NVIDIA driver found (libcuda.so.1 cannot be loaded): install driver r580 or "
            f"newer, or use the CPU reference backend.\n{text}"
        )
    low = text.lower()
    if (
        "out of memory" in low
        or "out_of_memory" in low
        or type(exc).__name__ in ("OutOfMemoryError",)
    ):
        return DeviceOutOfMemoryError(
            f"GPU out of memory: use a smaller batch, fewer heads or shorter sequences.\n{text}"
        )
    if isinstance(exc, RuntimeError) and ("cuInit" in text or "no CUDA-capable" in low):
        return NoGpuError(
            "the NVIDIA driver found no usable GPU (cuInit failed): check nvidia-smi and "
            f"CUDA_VISIBLE_DEVICES, or use the CPU reference backend.\n{text}"
        )
    if isinstance(exc, RuntimeError) and "Minimum driver version" in text:
        return NoGpuError(f"the NVIDIA driver is too old for cuTile: install r580+.\n{text}")
    return exc


def _translatable() -> tuple[type[BaseException], ...]:
    tile_error = _tile_error("TileError")
    return (OSError, RuntimeError, MemoryError) + ((tile_error,) if tile_error else ())


@contextmanager
def friendly_errors() -> Iterator[None]:
    """Re-raise driver, compiler and allocation failures as the classes above."""
    try:
        yield
    except ValueError:
        raise
    except _translatable() as exc:
        new = translate(exc)
        if new is exc:
            raise
        raise new from exc


# --------------------------------------------------------------------------------------------
# The environment
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProbeResult:
    available: bool
    message: str
    arch: str | None = None
    device_name: str | None = None
    cuda_tile_version: str | None = None
    tileiras_version: str | None = None


def cuda_tile_version() -> str | None:
    """The installed cuda.tile's version, or None when it does not import."""
    try:
        import cuda.tile as ct
    except Exception:
        return None
    return getattr(ct, "__version__", None)


def _version_line(text: str) -> str | None:
    for line in text.splitlines():
        if "release" in line.lower() or line.strip().lower().startswith("v"):
            return line.strip()
    return text.strip().splitlines()[-1] if text.strip() else None


@functools.lru_cache(maxsize=1)
def tileiras_version() -> str | None:
    """The version line of the tileiras cuTile would use, or None (never raises).

    Asked through cuda.tile when it imports (the compiler it would really run); otherwise
    looked for as cuTile looks: its pip package's ``nvidia/cu13/bin``, then ``PATH``.
    """
    try:
        from cuda.tile._compile import _get_compiler_version_string

        line = _version_line(_get_compiler_version_string() or "")
        if line:
            return line
    except Exception:
        pass
    candidates = []
    try:
        import nvidia  # the namespace package that holds nvidia/cu13/bin

        candidates += [os.path.join(b, "cu13", "bin", "tileiras") for b in nvidia.__path__]
    except (ImportError, AttributeError):
        pass
    found = shutil.which("tileiras")
    if found:
        candidates.append(found)
    for path in candidates:
        if not os.path.exists(path):
            continue
        try:
            out = subprocess.run(
                [path, "--version"], capture_output=True, text=True, timeout=30, check=False
            ).stdout
        except (OSError, subprocess.SubprocessError):
            continue
        return _version_line(out) or path
    return None


def gpu_arch(device: int = 0) -> str:
    """``sm_XY`` of the device, through the driver; raises NoGpuError without one."""
    with friendly_errors():
        from cuda.tile._cext import get_compute_capability

        major, minor = get_compute_capability(device)
    return f"sm_{major}{minor}"


def arch_major(arch: str) -> int:
    """9 for ``sm_90``, 12 for ``sm_120``."""
    return int(arch[3:-1])


@functools.lru_cache(maxsize=16)
def check_arch(device: int) -> str:
    """The device's ``sm_XY``; raises UnsupportedArchError below sm_80 (checked once)."""
    arch = gpu_arch(device)
    if arch_major(arch) < MIN_SM_MAJOR:
        raise UnsupportedArchError(
            f"{arch} is older than cuTile supports (sm_80 or newer): use the CPU reference "
            "backend or another GPU"
        )
    return arch


def assess(arch: str | None, tileiras: str | None, device_name: str | None = None) -> ProbeResult:
    """Whether the kernel can run, from facts already gathered: the tileiras version line
    (None: not found) and the GPU's ``sm_XY``. Never raises.

    :func:`probe` gathers the facts through cuda.tile; the workbench's cuTile backend through
    CuPy, whose device its inputs live on. Both decide here.
    """
    version = cuda_tile_version()
    if tileiras is None:
        return ProbeResult(
            False, f"tileiras not found. Install it: {INSTALL_HINT}", cuda_tile_version=version
        )
    if arch is None:
        return ProbeResult(False, "no NVIDIA GPU found", None, None, version, tileiras)
    if arch_major(arch) < MIN_SM_MAJOR:
        return ProbeResult(
            False,
            f"{arch} is older than cuTile supports (sm_80+): use the CPU reference backend",
            arch,
            device_name,
            version,
            tileiras,
        )
    where = device_name or arch
    return ProbeResult(True, f"cuTile ready on {where}", arch, device_name, version, tileiras)


def device_name(device: int) -> str | None:
    try:
        from cuda.tile._cext import get_device_name

        return get_device_name(device)
    except Exception:
        pass
    try:
        import torch

        return torch.cuda.get_device_name(device)
    except Exception:
        pass
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceProperties(device)["name"].decode()
    except Exception:
        return None
