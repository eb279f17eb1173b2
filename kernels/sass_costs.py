"""What one key block costs an SM, read from a cubin's SASS (``nvdisasm``; no GPU needed).

The key loop is the first innermost loop that issues tensor-core instructions (HGMMA, or HMMA
for the decode form's 16-row tiles): one key block of the unmasked loop an iteration, which
the kernel runs before the masked one. From its instructions, per key block and SM:

- issue: consumer warps × instructions / 4 warp schedulers, in cycles;
- MUFU: consumer threads × MUFU instructions / 16 results a cycle (exp2 on the special-function
  unit);
- tensor: the block's 2·2·rows·keys·D FLOPs / the tensor cores' dense fp16/bf16 FLOPs a cycle;
- K+V (the decode form only, where each CTA reads its keys from device memory once): the block's
  bytes of K and V / an SM's share of the read bandwidth a cycle.

Issue or MUFU cycles near the tensor cycles mean the loop cannot keep the tensor cores busy
however well it overlaps; well below them, the loop is bound by how it overlaps (or, for
decode, by memory), which only a profile on the GPU shows. The rates are sm_90's: other
architectures get no answer (their tensor instructions and rates differ).
"""

from __future__ import annotations

import collections
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

# Per SM and cycle on sm_90: warp schedulers, MUFU results, dense fp16/bf16 tensor FLOPs.
SCHEDULERS = 4
MUFU_PER_CYCLE = 16
TENSOR_FLOPS_PER_CYCLE = {"sm_90": 4096}
# An SM's share of device-memory reads a cycle: the H200's measured streaming read (4,540 GB/s,
# `fmha-workbench bandwidth`) over its 132 SMs at the 1,980 MHz boost clock.
READ_BYTES_PER_SM_CYCLE = {"sm_90": 4540e9 / (132 * 1980e6)}
# The producer warpgroup of a warp-specialized kernel: it issues the loads, not the key loop.
PRODUCER_WARPS = 4

_INSTRUCTION = re.compile(r"^\s*/\*([0-9a-f]+)\*/\s+(.*?)\s*;")
_LABEL = re.compile(r"^\s*\.(L_x_\d+):")
_BRANCH = re.compile(r"\bBRA\b.*?\.?(L_x_\d+)")
_PREDICATE = re.compile(r"^@!?U?P[T\d]+\s+")


@dataclass(frozen=True)
class Loop:
    """A backward branch's range of instructions: ``[start, end]`` by address."""

    start: int
    end: int
    opcodes: tuple[str, ...]

    def counts(self) -> collections.Counter[str]:
        """Instructions by opcode family (``MUFU.EX2`` counts as ``MUFU``)."""
        return collections.Counter(op.split(".")[0] for op in self.opcodes)

    def tensor_instructions(self) -> int:
        """Tensor-core instructions: warpgroup HGMMA, or warp-level HMMA."""
        counts = self.counts()
        return counts["HGMMA"] + counts["HMMA"]


@dataclass(frozen=True)
class KeyLoopCosts:
    """One key block of the key loop: a consumer warp's instructions and opcode counts, and
    the issue and MUFU cycles of the SM as shares of its tensor cycles."""

    instructions: int
    consumer_warps: int
    issue_share: float
    mufu_share: float
    counts: dict[str, int]
    kv_share: float | None = None  # the block's K+V read (decode form), likewise

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def parse(sass: str) -> tuple[list[tuple[int, str]], dict[str, int]]:
    """(address, instruction text) of every instruction, and each label's address."""
    instructions: list[tuple[int, str]] = []
    labels: dict[str, int] = {}
    pending: list[str] = []
    for line in sass.splitlines():
        label = _LABEL.match(line)
        if label:
            pending.append(label.group(1))
            continue
        m = _INSTRUCTION.match(line)
        if m:
            address = int(m.group(1), 16)
            for name in pending:
                labels[name] = address
            pending = []
            instructions.append((address, m.group(2)))
    return instructions, labels


def opcode(text: str) -> str:
    """The opcode of one instruction, without its predicate."""
    return _PREDICATE.sub("", text).split()[0]


def loops(sass: str) -> list[Loop]:
    """Every loop: a branch back to a label at a lower address, its body by address."""
    instructions, labels = parse(sass)

    def label_target(text: str) -> int | None:
        m = _BRANCH.search(text)
        return labels.get(m.group(1)) if m else None

    return loops_of(instructions, label_target)


def loops_of(
    instructions: Sequence[tuple[int, str]], target: Callable[[str], int | None]
) -> list[Loop]:
    """Every loop of (address, text) instructions whose branches ``target`` reads (the address
    a branch jumps to, None for any other instruction): a branch back to a lower address."""
    found = {
        (to, address)
        for address, text in instructions
        if (to := target(text)) is not None and to <= address
    }
    return [
        Loop(lo, hi, tuple(opcode(t) for a, t in instructions if lo <= a <= hi))
        for lo, hi in sorted(found)
    ]


def innermost_tensor_loops(found: Sequence[Loop]) -> list[Loop]:
    """The innermost loops with tensor-core instructions (none of them nested in another), by
    address: the unmasked key loop first, then the masked one; a wait loop that jumps back
    over the epilogue may follow."""
    mma = [lp for lp in found if lp.tensor_instructions()]
    return [
        lp
        for lp in mma
        if not any(o is not lp and lp.start <= o.start and o.end <= lp.end for o in mma)
    ]


def key_block_loops(sass: str) -> list[Loop]:
    """:func:`innermost_tensor_loops` of the SASS."""
    return innermost_tensor_loops(loops(sass))


def key_block_loop(sass: str) -> Loop:
    """The unmasked key loop: the first of :func:`key_block_loops`. ValueError where the
    kernel has no loop with tensor-core instructions."""
    inner = key_block_loops(sass)
    if not inner:
        raise ValueError("no loop with tensor-core instructions (not an attention kernel?)")
    return inner[0]


def sync_sites(sass: str) -> dict[str, dict[str, Any]]:
    """Where the kernel's warps can wait, by kind: on each other through barriers of the whole
    CTA (``BAR.SYNC 0x0``), named barriers (another id or a thread count: a subset of the
    warps, as FA4's warpgroups take turns) and mbarrier waits (``SYNCS.PHASECHK``: a TMA load
    or a buffer handed over); and on their own tensor-core products (``WARPGROUP.DEPBAR.LE
    gsb0, N``: until at most N are in flight). Each with its sites in the kernel and in the
    unmasked key loop; the named barriers' ids, and how many tensor-core waits in the key loop
    leave a product in flight (N > 0: FA4's softmax runs beside its P·V so)."""
    instructions, _labels = parse(sass)
    try:
        key = key_block_loop(sass)
        in_key = range(key.start, key.end + 1)
    except ValueError:
        in_key = range(0)
    kinds = ("cta_barriers", "named_barriers", "mbarrier_waits", "tensor_waits")
    sites: dict[str, dict[str, Any]] = {kind: {"sites": 0, "in_key_loop": 0} for kind in kinds}
    ids: set[str] = set()
    partial = 0
    for address, text in instructions:
        op = opcode(text)
        operands = [o.strip() for o in _PREDICATE.sub("", text)[len(op) :].split(",")]
        if op.startswith("BAR."):
            whole_cta = operands == ["0x0"]
            kind = "cta_barriers" if whole_cta else "named_barriers"
            if not whole_cta:
                ids.add(operands[0])
        elif op.startswith("SYNCS.PHASECHK"):
            kind = "mbarrier_waits"
        elif op.startswith("WARPGROUP.DEPBAR"):
            kind = "tensor_waits"
            partial += address in in_key and operands[-1] not in ("0x0", "0")
        else:
            continue
        sites[kind]["sites"] += 1
        sites[kind]["in_key_loop"] += address in in_key
    sites["named_barriers"]["ids"] = sorted(ids)
    sites["tensor_waits"]["partial_in_key_loop"] = partial
    return sites


def consumer_warps(sass: str, threads: int) -> int:
    """The warps that run the key loop: all of them, but for the producer warpgroup of a
    warp-specialized kernel (its warpgroups set their register counts: USETMAXREG)."""
    return threads // 32 - (PRODUCER_WARPS if "USETMAXREG" in sass else 0)


def block_costs(
    loop: Loop,
    *,
    consumer_warps: int,
    rows: int,
    keys: int,
    head_dim: int,
    arch: str = "sm_90",
    kv_bytes: int | None = None,
) -> dict[str, float]:
    """Cycles an SM spends on one key block: issuing the consumers' instructions, on MUFU, on
    the tensor cores and, given the block's ``kv_bytes``, reading K and V (see the module's
    docstring)."""
    costs = {
        "instructions": len(loop.opcodes),
        "issue_cycles": consumer_warps * len(loop.opcodes) / SCHEDULERS,
        "mufu_cycles": consumer_warps * 32 * loop.counts()["MUFU"] / MUFU_PER_CYCLE,
        "tensor_cycles": 2 * 2 * rows * keys * head_dim / TENSOR_FLOPS_PER_CYCLE[arch],
    }
    if kv_bytes is not None:
        costs["kv_cycles"] = kv_bytes / READ_BYTES_PER_SM_CYCLE[arch]
    return costs


def nvdisasm_path() -> str | None:
    """nvdisasm from the pip package (``nvidia-cuda-nvdisasm``), else from PATH; None."""
    for root in sys.path:
        candidate = Path(root) / "nvidia" / "cu13" / "bin" / "nvdisasm"
        if candidate.is_file():
            return str(candidate)
    import shutil

    return shutil.which("nvdisasm")


def disassemble(cubin: bytes) -> str:
    """The cubin's SASS. FileNotFoundError without nvdisasm, RuntimeError where it fails."""
    tool = nvdisasm_path()
    if tool is None:
        raise FileNotFoundError("nvdisasm not found: pip install nvidia-cuda-nvdisasm==13.4.92")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        out = subprocess.run([tool, "-c", str(path)], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise RuntimeError(f"nvdisasm failed: {out.stderr.strip()}")
    return out.stdout


def key_loop_costs(
    sass: str,
    *,
    arch: str,
    threads: int,
    rows: int,
    keys: int,
    head_dim: int,
    kv_bytes: int | None = None,
) -> KeyLoopCosts | None:
    """The key loop's costs for a kernel of ``threads`` threads whose tile is ``rows`` ×
    ``keys`` at ``head_dim`` (``kv_bytes``: what a block reads from device memory, for the
    decode form); None where ``arch`` has no rates here or the SASS has no key loop."""
    if arch not in TENSOR_FLOPS_PER_CYCLE:
        return None
    try:
        loop = key_block_loop(sass)
    except ValueError:
        return None
    warps = consumer_warps(sass, threads)
    cycles = block_costs(
        loop,
        consumer_warps=warps,
        rows=rows,
        keys=keys,
        head_dim=head_dim,
        arch=arch,
        kv_bytes=kv_bytes,
    )
    tensor = cycles["tensor_cycles"]
    kv = cycles.get("kv_cycles")
    return KeyLoopCosts(
        instructions=len(loop.opcodes),
        consumer_warps=warps,
        issue_share=round(cycles["issue_cycles"] / tensor, 3),
        mufu_share=round(cycles["mufu_cycles"] / tensor, 3),
        counts=dict(loop.counts().most_common()),
        kv_share=None if kv is None else round(kv / tensor, 3),
    )
