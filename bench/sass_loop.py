"""What one key block costs the kernel's consumer warps, read from its SASS (no GPU needed).

    python3 bench/sass_loop.py --head-dim 64 --config @bench/configs/d64-poly-probe.json:1

Compiles the config offline (tileiras, as :mod:`kernels.cutile.compile` does), disassembles the
cubin with ``nvdisasm`` (``pip install nvidia-cuda-nvdisasm==13.4.92``), finds the innermost
loop that issues tensor-core instructions (HGMMA, or HMMA for the decode form's 16-row tiles:
one key block of the unmasked loop an iteration) and counts its instructions by opcode. From
those counts, per key block and SM:

- issue: consumer warps × instructions / 4 schedulers, in cycles;
- MUFU: consumer threads × MUFU instructions / 16 a cycle (exp2 on the special-function unit);
- tensor: the block's 2·2·rows·keys·D FLOPs / 4,096 dense fp16/bf16 FLOPs a cycle (sm_90).

A loop whose issue or MUFU cycles approach its tensor cycles cannot keep the tensor cores busy
however well it overlaps; one well below them is bound by how it overlaps, which only a
profile on the GPU shows.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kernels.schedule import tile_shape  # noqa: E402

# sm_90, per SM and cycle: warp schedulers, MUFU results, dense fp16/bf16 tensor FLOPs.
SCHEDULERS = 4
MUFU_PER_CYCLE = 16
TENSOR_FLOPS_PER_CYCLE = 4096

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
        """Tensor-core instructions: warpgroup HGMMA, or warp-level HMMA (the decode form's
        16-row tiles)."""
        counts = self.counts()
        return counts["HGMMA"] + counts["HMMA"]


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
    found = set()
    for address, text in instructions:
        m = _BRANCH.search(text)
        if m and labels.get(m.group(1), address + 1) <= address:
            found.add((labels[m.group(1)], address))
    return [
        Loop(lo, hi, tuple(opcode(t) for a, t in instructions if lo <= a <= hi))
        for lo, hi in sorted(found)
    ]


def key_block_loops(sass: str) -> list[Loop]:
    """The innermost loops with tensor-core instructions (none of them nested in another),
    by address: the unmasked key loop first (the kernel runs it first), then the
    masked one; a wait loop that jumps back over the epilogue may follow."""
    mma = [lp for lp in loops(sass) if lp.tensor_instructions()]
    return [
        lp
        for lp in mma
        if not any(o is not lp and lp.start <= o.start and o.end <= lp.end for o in mma)
    ]


def key_block_loop(sass: str) -> Loop:
    """The unmasked key loop: the first of :func:`key_block_loops`. ValueError where the
    kernel has no loop with HGMMA."""
    inner = key_block_loops(sass)
    if not inner:
        raise ValueError("no loop with tensor-core instructions (not an attention kernel?)")
    return inner[0]


def block_costs(
    loop: Loop, *, consumer_warps: int, rows: int, keys: int, head_dim: int
) -> dict[str, float]:
    """Cycles an SM spends on one key block: issuing the consumers' instructions, on MUFU, and
    on the tensor cores (see the module's docstring)."""
    counts = loop.counts()
    return {
        "instructions": len(loop.opcodes),
        "issue_cycles": consumer_warps * len(loop.opcodes) / SCHEDULERS,
        "mufu_cycles": consumer_warps * 32 * counts["MUFU"] / MUFU_PER_CYCLE,
        "tensor_cycles": 2 * 2 * rows * keys * head_dim / TENSOR_FLOPS_PER_CYCLE,
    }


def nvdisasm_path() -> str:
    for root in sys.path:
        candidate = Path(root) / "nvidia" / "cu13" / "bin" / "nvdisasm"
        if candidate.is_file():
            return str(candidate)
    raise FileNotFoundError("nvdisasm not found: pip install nvidia-cuda-nvdisasm==13.4.92")


def disassemble(problem: dict[str, Any], config: dict[str, Any], arch: str) -> tuple[str, int]:
    """The SASS of the config's kernel for ``problem`` and its block size in threads."""
    from kernels.cubin_resources import read_resources
    from kernels.cutile.compile import compile_cubin

    cubin = compile_cubin(arch=arch, **problem, **config)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        out = subprocess.run(
            [nvdisasm_path(), "-c", str(path)], capture_output=True, text=True, check=True
        )
    return out.stdout, read_resources(cubin).threads


def consumer_warps(sass: str, threads: int) -> int:
    """The warps that run the key loop: all of them, but for the producer warpgroup of a
    warp-specialized kernel (its warpgroups set their register counts: USETMAXREG)."""
    return threads // 32 - (4 if "USETMAXREG" in sass else 0)


def read_config(text: str) -> dict[str, Any]:
    """A JSON object of launch knobs, or ``@FILE:INDEX`` for one entry of a config list."""
    if not text.startswith("@"):
        return json.loads(text)
    path, sep, index = text[1:].rpartition(":")
    if not sep:
        path, index = text[1:], "0"
    return json.loads(Path(path).read_text())[int(index)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--config", required=True, help="launch knobs as JSON, or @FILE:INDEX of a config list"
    )
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--dtype", default="float16")
    ap.add_argument("--mask", default="none")
    ap.add_argument("--seq-len", type=int, default=8192)
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--json", action="store_true", help="print JSON")
    args = ap.parse_args(argv)
    config = {"fast_math": True, "k_split": True, "remap": True, **read_config(args.config)}
    problem = dict(
        dtype=args.dtype, head_dim=args.head_dim, q_len=args.seq_len, heads=32, batch=4,
        mask=args.mask,
    )  # fmt: skip
    sass, threads = disassemble(problem, config, args.arch)
    loop = key_block_loop(sass)
    warps = consumer_warps(sass, threads)
    rows, keys = tile_shape(config)
    costs = block_costs(loop, consumer_warps=warps, rows=rows, keys=keys, head_dim=args.head_dim)
    counts = dict(loop.counts().most_common())
    if args.json:
        print(json.dumps({"config": config, "problem": problem, "counts": counts, **costs}))
        return 0
    print(f"key-block loop: {costs['instructions']} instructions a consumer warp, {warps} warps")
    print("  " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    tensor = costs["tensor_cycles"]
    for name in ("issue_cycles", "mufu_cycles", "tensor_cycles"):
        print(f"  {name:14s} {costs[name]:7.0f}  ({costs[name] / tensor:.2f} of tensor)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
