"""What a compiled cubin asks of the GPU, and whether an architecture can give it.

Used by the offline Blackwell report (``bench/blackwell_report.py``) and by the CPU test that
keeps each architecture's tuning table compiling without spills
(``tests/test_arch_tables_offline.py``). Nothing here needs a GPU: the cubin comes from
:func:`kernels.cutile.compile.compile_cubin` and is read with ``cuobjdump`` (the pip package
``nvidia-cuda-cuobjdump``, installed next to tileiras under ``nvidia/cu13/bin``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kernels.knobs import KNOBS

KB = 1024


@dataclass(frozen=True)
class ArchLimits:
    """Per-architecture hardware limits that decide whether a kernel can launch as asked.

    ``shared_per_block``: the most shared memory one block may use once it opts in
    (``cudaFuncAttributeMaxDynamicSharedMemorySize``); ``shared_per_sm``: the SM's shared
    memory partition, of which 1 KB per resident block is reserved for the system;
    ``regs_per_thread``/``regs_per_sm``: the register file; ``threads_per_sm``: resident
    threads per SM (sets how many blocks can be co-resident); ``max_cluster``: the portable
    thread-block-cluster size (0: the architecture has no clusters).
    """

    arch: str
    shared_per_block: int
    shared_per_sm: int
    regs_per_thread: int = 255
    regs_per_sm: int = 64 * KB
    threads_per_sm: int = 2048
    reserved_shared_per_block: int = 1 * KB
    max_cluster: int = 8


# From the CUDA C++ Programming Guide, "Compute Capabilities" appendix, table "Technical
# Specifications per Compute Capability"
# (https://docs.nvidia.com/cuda/cuda-programming-guide/05-appendices/compute-capabilities.html):
# maximum shared memory per SM / per thread block (opt-in), 32-bit registers per SM and per
# thread, resident threads per SM. 9.0, 10.0 and 10.3: 228 KB per SM, 227 KB per block, 2048
# threads. 12.0 and 12.1 (RTX 50-series, RTX PRO 6000 Blackwell, DGX Spark): 100 KB per SM,
# 99 KB per block, 1536 threads. 64K registers per SM and 255 per thread on all of them.
ARCH_LIMITS: dict[str, ArchLimits] = {
    "sm_90": ArchLimits("sm_90", shared_per_block=227 * KB, shared_per_sm=228 * KB),
    "sm_100": ArchLimits("sm_100", shared_per_block=227 * KB, shared_per_sm=228 * KB),
    "sm_103": ArchLimits("sm_103", shared_per_block=227 * KB, shared_per_sm=228 * KB),
    "sm_120": ArchLimits(
        "sm_120", shared_per_block=99 * KB, shared_per_sm=100 * KB, threads_per_sm=1536
    ),
    "sm_121": ArchLimits(
        "sm_121", shared_per_block=99 * KB, shared_per_sm=100 * KB, threads_per_sm=1536
    ),
}


@dataclass(frozen=True)
class Resources:
    """One kernel function's resource use, as ``cuobjdump -res-usage`` and ``-elf`` print it.

    ``stack`` is the per-thread stack frame and ``local`` the per-thread local memory in
    bytes: either non-zero means registers spilled (this kernel makes no calls and has no
    local arrays). ``shared`` is the block's static shared memory; ``threads`` the block size
    the kernel was compiled for (``.reqntid``).
    """

    registers: int
    stack: int
    local: int
    shared: int
    threads: int

    @property
    def spills(self) -> bool:
        return self.stack > 0 or self.local > 0

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


def cuobjdump_path() -> str | None:
    """cuobjdump from the pip package (beside tileiras), else from PATH; None if missing."""
    for root in sys.path:
        candidate = Path(root) / "nvidia" / "cu13" / "bin" / "cuobjdump"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("cuobjdump")


_RES_LINE = re.compile(
    r"REG:(?P<reg>\d+)\s+STACK:(?P<stack>\d+)\s+SHARED:(?P<shared>\d+)\s+LOCAL:(?P<local>\d+)"
)
_REQNTID = re.compile(r"^\.reqntid\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?", re.M)
_REQNTID_ATTR = re.compile(r"EIATTR_REQNTID\s*\n\s*Format:.*\n\s*Value:\s*(\S+)\s+(\S+)\s+(\S+)")


def parse_res_usage(text: str) -> list[dict[str, int]]:
    """The REG/STACK/SHARED/LOCAL numbers of every function in ``cuobjdump -res-usage``."""
    return [{k: int(v) for k, v in m.groupdict().items()} for m in _RES_LINE.finditer(text)]


def parse_threads(elf_text: str) -> int | None:
    """The block size (product of ``.reqntid``) from ``cuobjdump -elf``, or None."""
    m = _REQNTID.search(elf_text)
    if m:
        dims = [int(d) for d in m.groups() if d]
    else:
        m = _REQNTID_ATTR.search(elf_text)
        if not m:
            return None
        dims = [int(d, 0) for d in m.groups()]
    n = 1
    for d in dims:
        n *= d
    return n


def read_resources(cubin: bytes, cuobjdump: str | None = None) -> Resources:
    """Registers, stack, local and shared memory and block size of the cubin's one kernel."""
    tool = cuobjdump or cuobjdump_path()
    if tool is None:
        raise FileNotFoundError(
            "cuobjdump not found: pip install nvidia-cuda-cuobjdump==13.4.92 (the test extra)"
        )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        res = subprocess.run(
            [tool, "-res-usage", str(path)], capture_output=True, text=True, timeout=120
        )
        elf = subprocess.run([tool, "-elf", str(path)], capture_output=True, text=True, timeout=120)
    if res.returncode != 0:
        raise RuntimeError(f"cuobjdump -res-usage failed: {res.stderr.strip()}")
    funcs = parse_res_usage(res.stdout)
    if len(funcs) != 1:
        raise RuntimeError(f"expected one kernel in the cubin, cuobjdump lists {len(funcs)}")
    threads = parse_threads(elf.stdout) if elf.returncode == 0 else None
    if threads is None:
        raise RuntimeError("cuobjdump -elf shows no .reqntid (block size) for the kernel")
    f = funcs[0]
    return Resources(
        registers=f["reg"], stack=f["stack"], local=f["local"], shared=f["shared"], threads=threads
    )


def check_fit(
    res: Resources, limits: ArchLimits, *, occupancy: int | None = None, num_ctas: int | None = None
) -> list[str]:
    """Why the kernel cannot run as configured on ``limits.arch`` (empty list: it can).

    Hard limits: registers per thread, registers per block (the block's threads times its
    registers, rounded up to the 8-register allocation unit), shared memory per block, no
    spill, cluster size. The occupancy hint is checked too: the blocks it asks to keep per SM
    must fit the SM's registers, shared memory (1 KB system reserve per block) and threads;
    a hint the SM cannot honour is recorded as a problem, since the table's entry would not
    be what it says.
    """
    problems: list[str] = []
    regs = -(-res.registers // 8) * 8
    if res.registers > limits.regs_per_thread:
        problems.append(f"registers {res.registers} > {limits.regs_per_thread} per thread")
    if regs * res.threads > limits.regs_per_sm:
        problems.append(
            f"registers per block {regs}x{res.threads} = {regs * res.threads} > "
            f"{limits.regs_per_sm}"
        )
    if res.shared > limits.shared_per_block:
        problems.append(
            f"shared memory {res.shared} B > {limits.shared_per_block} B per block "
            f"({limits.shared_per_block // KB} KB)"
        )
    if res.stack:
        problems.append(f"stack {res.stack} B per thread (register spill)")
    if res.local:
        problems.append(f"local memory {res.local} B per thread (register spill)")
    if num_ctas is not None and num_ctas > 1 and num_ctas > limits.max_cluster:
        problems.append(f"cluster of {num_ctas} CTAs > {limits.max_cluster}")
    blocks = occupancy or 1
    if blocks > 1:
        if regs * res.threads * blocks > limits.regs_per_sm:
            problems.append(
                f"occupancy {blocks}: {blocks}x{regs}x{res.threads} registers > "
                f"{limits.regs_per_sm} per SM"
            )
        smem = blocks * (res.shared + limits.reserved_shared_per_block)
        if smem > limits.shared_per_sm:
            problems.append(
                f"occupancy {blocks}: {smem} B shared > {limits.shared_per_sm} B per SM"
            )
        if res.threads * blocks > limits.threads_per_sm:
            problems.append(
                f"occupancy {blocks}: {blocks}x{res.threads} threads > {limits.threads_per_sm}"
            )
    return problems


def config_hints(values: Mapping[str, Any]) -> dict[str, Any]:
    """The compiler hints a config's knob ``values`` give, by hint name (the registry's knobs
    with a ``Knob.hint``; None where not given: the compiler's choice)."""
    return {k.hint: values.get(k.name) for k in KNOBS.values() if k.hint}


def cluster_ctas(values: Mapping[str, Any]) -> int:
    """CTAs per cluster a config's knob ``values`` ask for (1: no cluster)."""
    return config_hints(values)["num_ctas"] or 1


def check_config_fit(res: Resources, limits: ArchLimits, values: Mapping[str, Any]) -> list[str]:
    """:func:`check_fit` with the compiler hints that a config's knob ``values`` give."""
    hints = config_hints(values)
    return check_fit(res, limits, occupancy=hints["occupancy"], num_ctas=hints["num_ctas"])
