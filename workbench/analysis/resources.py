"""What the compiler made of a cuTile config: registers, spill, shared memory, CTAs per SM.

A config is compiled offline (tileiras, no GPU) for an architecture and its cubin read with
cuobjdump (:mod:`kernels.cubin_resources`), so the form can say a config spills before it runs
and a stored run says why a step was slow. Compiles take seconds, so :class:`ResourceService`
keeps each answer on disk, keyed by the launch knobs, the problem class, the architecture, the
tool versions and the kernel's source; a cached answer is read in milliseconds. A compile
that fails is an answer too (its text in :attr:`CompiledResources.error`), never an exception.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from kernels import knobs
from kernels.cubin_resources import ARCH_LIMITS, ArchLimits, Resources
from kernels.sass_costs import (
    TENSOR_FLOPS_PER_CYCLE,
    KeyLoopCosts,
    disassemble,
    key_loop_costs,
    nvdisasm_path,
)
from workbench.config import KernelConfig, Problem

# The backends whose configs compile from this project's kernel through the knob registry (the
# others are peers whose kernels we do not build, or plugins that compile themselves): each
# declaration says so (``kernel_resources``) and the catalog registers it here.
_compiled_backends: set[str] = set()


def register_compiled_backend(name: str) -> None:
    _compiled_backends.add(name)


def compiled_from_registry(backend: str) -> bool:
    """Whether ``backend``'s configs compile from this project's kernel (``resources``)."""
    return backend in _compiled_backends


# The architectures an offline compile is checked for (their limits are in ARCH_LIMITS).
OFFLINE_ARCHS = ("sm_90", "sm_100", "sm_120")
# Resident blocks per SM on sm_90/sm_100/sm_120 (CUDA programming guide, compute capabilities).
MAX_BLOCKS_PER_SM = 32
KB = 1024


@dataclass(frozen=True)
class CompiledResources:
    """One config's compiled kernel on one architecture, or why it did not compile."""

    arch: str
    registers: int | None = None
    spill_bytes: int | None = None  # stack + local memory per thread: > 0 means it spilled
    shared_bytes: int | None = None  # per CTA
    threads: int | None = None  # per CTA
    ctas_per_sm: int | None = None  # how many fit an SM at once (registers, shared, threads)
    # One key block of the unmasked key loop, from the SASS (kernels.sass_costs; sm_90 only,
    # and only where nvdisasm is installed): a consumer warp's instructions, and the SM's
    # issue and MUFU cycles as shares of its tensor cycles.
    loop_instructions: int | None = None
    issue_share: float | None = None
    mufu_share: float | None = None
    # The decode form's: its key block's bytes of K and V, read from device memory at an SM's
    # share of the H200's measured read rate, likewise as a share of the tensor cycles.
    kv_share: float | None = None
    error: str = ""  # the compile's error in one line, when it failed
    unavailable: bool = False  # nothing could be compiled here (tools missing): not the config's

    @property
    def spills(self) -> bool:
        return bool(self.spill_bytes)

    def summary(self) -> str:
        """``168 regs · no spill · 161 KB smem · 1 CTA/SM``, or the error."""
        if self.unavailable:
            return f"{self.arch}: cannot compile here: {self.error}"
        if self.error:
            return f"{self.arch}: does not compile: {self.error}"
        spill = f"SPILLS {self.spill_bytes} B/thread" if self.spills else "no spill"
        shared = f"{(self.shared_bytes or 0) / KB:.0f} KB smem"
        return (
            f"{self.arch}: {self.registers} regs · {spill} · {shared} · {self.ctas_per_sm} CTA/SM"
        )

    def key_block(self) -> str:
        """``key block: 493 instructions a warp, issue 48 % · MUFU 45 % of the tensor cores'
        cycles``, with what binds the loop where a share reaches 100 %; "" where the SASS was
        not read."""
        if self.issue_share is None or self.mufu_share is None:
            return ""
        shares = [("issue", self.issue_share), ("MUFU", self.mufu_share)]
        if self.kv_share is not None:
            shares.append(("K+V read", self.kv_share))
        # What binds the loop: the largest share at or past the tensor cores' own cycles.
        name, top = max(shares, key=lambda item: item[1])
        why = f" ({name}-bound)" if top >= 1.0 else ""
        parts = " · ".join(f"{label} {share * 100:.0f} %" for label, share in shares)
        return (
            f"key block: {self.loop_instructions} instructions a warp, {parts} of the tensor "
            f"cores' cycles{why}"
        )

    def short(self) -> str:
        """``168r`` or ``255r spill 5.5KB`` (a ladder cell, a table column)."""
        if self.error:
            return "no compile"
        if not self.spills:
            return f"{self.registers}r"
        assert self.spill_bytes is not None
        amount = (
            f"{self.spill_bytes / KB:.1f}KB" if self.spill_bytes >= KB else f"{self.spill_bytes}B"
        )
        return f"{self.registers}r spill {amount}"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CompiledResources:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def ctas_per_sm(res: Resources, limits: ArchLimits) -> int:
    """How many CTAs of this kernel an SM holds at once: the least of what its registers
    (allocated in units of 8 per thread), its shared memory (1 KB reserved per CTA) and its
    thread slots allow."""
    regs = -(-res.registers // 8) * 8
    by_regs = limits.regs_per_sm // max(regs * res.threads, 1)
    by_shared = limits.shared_per_sm // (res.shared + limits.reserved_shared_per_block)
    by_threads = limits.threads_per_sm // max(res.threads, 1)
    return max(0, min(by_regs, by_shared, by_threads, MAX_BLOCKS_PER_SM))


@dataclass(frozen=True)
class AnalysedResources(Resources):
    """What cuobjdump reads of a cubin, and its key loop's costs from the SASS (None where
    nvdisasm is missing, the architecture's rates are not modelled or no key loop was found)."""

    key_loop: KeyLoopCosts | None = None


def from_cubin_resources(arch: str, res: Resources) -> CompiledResources:
    limits = ARCH_LIMITS[arch]
    loop = res.key_loop if isinstance(res, AnalysedResources) else None
    return CompiledResources(
        arch=arch,
        registers=res.registers,
        spill_bytes=res.stack + res.local,
        shared_bytes=res.shared,
        threads=res.threads,
        ctas_per_sm=ctas_per_sm(res, limits),
        loop_instructions=loop.instructions if loop else None,
        issue_share=loop.issue_share if loop else None,
        mufu_share=loop.mufu_share if loop else None,
        kv_share=loop.kv_share if loop else None,
    )


def problem_class(problem: Problem, mask: str) -> dict[str, Any]:
    """What of a problem the compiled kernel depends on: dtype, head dim, mask, the GQA
    group, and whether each length and the offset are whole multiples of 16 (the JIT sees a
    shape only through its divisibility by 16)."""
    return {
        "dtype": problem.dtype,
        "head_dim": problem.head_dim,
        "mask": mask,
        "group": problem.group_size,
        "q16": problem.q_len % 16 == 0,
        "k16": problem.k_len % 16 == 0,
        "pos16": problem.input_pos % 16 == 0,
    }


def launch_knobs_of(config: KernelConfig) -> dict[str, Any] | None:
    """The launch knobs a hand-set config compiles with; None for an autotuned one (its tuner
    picks them per length, so there is no one kernel to compile)."""
    if config.tuned:
        return None
    return {name: getattr(config, name) for name in knobs.LAUNCH}


@lru_cache(maxsize=1)
def tool_versions() -> dict[str, str]:
    """cuda-tile's and tileiras' versions, a digest of the kernel's source and whether the
    SASS can be read: a new compiler or a changed kernel compiles anew instead of reading an
    old answer."""
    from kernels.cutile.diagnostics import tileiras_version
    from workbench.measure.machine import package_version

    source = hashlib.sha256()
    kernel_dir = Path(__file__).resolve().parent.parent / "kernels" / "cutile"
    for path in sorted(kernel_dir.glob("*.py")):
        source.update(path.read_bytes())
    return {
        "cuda_tile": package_version("cuda-tile") or "",
        "tileiras": tileiras_version() or "",
        "kernel": source.hexdigest()[:16],
        # An answer made without the SASS is made again once nvdisasm is installed, and
        # one made before the decode form's K+V read was costed is made again.
        "sass": "nvdisasm+kv" if nvdisasm_path() else "",
    }


def default_cache_dir() -> Path:
    """``$FMHA_WORKBENCH_RESOURCE_CACHE``, else ``~/.cache/fmha-workbench/resources``."""
    env = os.environ.get("FMHA_WORKBENCH_RESOURCE_CACHE")
    if env:
        return Path(env)
    return Path.home() / ".cache" / "fmha-workbench" / "resources"


def missing_tools() -> str | None:
    """Why nothing can be compiled here (cuda.tile, tileiras or cuobjdump missing), or None."""
    try:
        import cuda.tile  # noqa: F401
    except Exception:
        # The compile readout needs no GPU: the test extra brings cuda-tile with cuobjdump.
        return (
            "cuda-tile is not installed (it compiles here without a GPU: "
            "pip install 'fmha-workbench[test]')"
        )
    from kernels.cubin_resources import cuobjdump_path
    from kernels.cutile.diagnostics import tileiras_version

    if tileiras_version() is None:
        return "tileiras is not installed"
    if cuobjdump_path() is None:
        return "cuobjdump is not installed (nvidia-cuda-cuobjdump)"
    return None


def _compile_and_read(arch: str, compile_args: dict[str, Any]) -> Resources:
    from kernels.cubin_resources import read_resources
    from kernels.cutile.compile import compile_cubin, offline_plan

    cubin = compile_cubin(arch=arch, **compile_args)
    res = read_resources(cubin)
    if arch not in TENSOR_FLOPS_PER_CYCLE or nvdisasm_path() is None:
        return res
    rows, keys, head_dim = offline_plan(**compile_args)[0].values["TILE"]
    try:
        sass = disassemble(cubin)
    except (OSError, RuntimeError, subprocess.SubprocessError):
        return res  # the SASS is an extra: registers and shared memory stand without it
    loop = key_loop_costs(
        sass,
        arch=arch,
        threads=res.threads,
        rows=rows,
        keys=keys,
        head_dim=head_dim,
        kv_bytes=decode_block_bytes(compile_args, keys, head_dim),
    )
    return AnalysedResources(**dataclasses.asdict(res), key_loop=loop)


def decode_block_bytes(compile_args: Mapping[str, Any], keys: int, head_dim: int) -> int | None:
    """Bytes of K and V one key block reads from device memory in the decode form (split key
    range or packed GQA heads: each CTA reads its keys once); None for the prefill forms,
    whose CTAs share each block through L2."""
    from kernels.schedule import decode_form

    if not decode_form(compile_args):
        return None
    return 2 * keys * head_dim * knobs.DTYPE_ITEMSIZE[compile_args["dtype"]]


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "…"


class ResourceService:
    """Compiled resources of configs, cached on disk (one small JSON file per key).

    ``compiler``: ``(arch, compile_args) -> Resources``; the default compiles with tileiras
    and reads with cuobjdump. Safe to call from a worker thread: it holds no connection and
    writes each cache file whole under a temporary name first.
    """

    def __init__(
        self,
        cache_dir: str | os.PathLike[str] | None = None,
        *,
        compiler: Callable[[str, dict[str, Any]], Resources] | None = None,
        versions: Mapping[str, str] | None = None,
    ) -> None:
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self._compiler = compiler or _compile_and_read
        self._versions = dict(versions) if versions is not None else None

    def versions(self) -> dict[str, str]:
        return self._versions if self._versions is not None else tool_versions()

    @staticmethod
    def compile_args(problem: Problem, mask: str, launch: Mapping[str, Any]) -> dict[str, Any]:
        """The keyword arguments of :func:`kernels.cutile.compile.compile_cubin` for one
        launch of ``problem`` (one batch and one KV head: the kernel does not depend on them)."""
        own = {name: launch[name] for name in knobs.LAUNCH if name in launch}
        return {
            "dtype": problem.dtype,
            "head_dim": problem.head_dim,
            "q_len": problem.q_len,
            "k_len": problem.k_len,
            "batch": 1,
            "heads": problem.group_size,
            "kv_heads": 1,
            "mask": mask,
            "input_pos": problem.input_pos,
            **own,
        }

    def key(self, problem: Problem, mask: str, launch: Mapping[str, Any], arch: str) -> str:
        own = {name: launch[name] for name in knobs.LAUNCH if name in launch}
        material = json.dumps(
            {
                "launch": own,
                "class": problem_class(problem, mask),
                "arch": arch,
                "tools": self.versions(),
            },
            sort_keys=True,
            default=str,
        )
        return hashlib.sha256(material.encode()).hexdigest()[:32]

    def _path(self, key: str) -> Path:
        return self.cache_dir / f"{key}.json"

    def cached(
        self, problem: Problem, mask: str, launch: Mapping[str, Any], arch: str
    ) -> CompiledResources | None:
        """The stored answer, or None (never compiles)."""
        try:
            data = json.loads(self._path(self.key(problem, mask, launch, arch)).read_text())
            return CompiledResources.from_dict(data)
        except (OSError, ValueError, TypeError):
            return None

    def for_launch(
        self, problem: Problem, mask: str, launch: Mapping[str, Any], arch: str
    ) -> CompiledResources:
        """The answer for one launch: from the cache, else compiled (seconds) and stored."""
        if arch not in ARCH_LIMITS:
            return CompiledResources(arch, error=f"no limits known for {arch}")
        hit = self.cached(problem, mask, launch, arch)
        if hit is not None:
            return hit
        if self._compiler is _compile_and_read:
            why = missing_tools()
            if why:
                # not cached: installing the tools fixes it
                return CompiledResources(arch, error=why, unavailable=True)
        try:
            res = self._compiler(arch, self.compile_args(problem, mask, launch))
            answer = from_cubin_resources(arch, res)
        except Exception as exc:  # a compile error is shown as text, never raised at a caller
            answer = CompiledResources(arch, error=_one_line(exc))
        self._store(self.key(problem, mask, launch, arch), answer)
        return answer

    def remembered(self, key: str, compute: Callable[[], CompiledResources]) -> CompiledResources:
        """The answer stored under ``key`` (a caller's own digest of what its compile depends
        on, such as a plugin's), else ``compute()``, stored unless the tools were missing."""
        try:
            return CompiledResources.from_dict(json.loads(self._path(key).read_text()))
        except (OSError, ValueError, TypeError):
            pass
        answer = compute()
        if not answer.unavailable:
            self._store(key, answer)
        return answer

    def for_config(
        self, problem: Problem, config: KernelConfig, arch: str
    ) -> CompiledResources | None:
        """:meth:`for_launch` of a hand-set config; None for an autotuned one."""
        launch = launch_knobs_of(config)
        if launch is None:
            return None
        return self.for_launch(problem, config.mask, launch, arch)

    def start_child(
        self, problem: Problem, mask: str, launch: Mapping[str, Any], arch: str
    ) -> subprocess.Popen[str]:
        """:meth:`for_launch` in a child process that prints the answer as JSON (read it with
        :func:`read_child`), into this service's cache: a window can end a compile it no
        longer needs, and a compiler that crashes takes only the child with it."""
        own = {name: launch[name] for name in knobs.LAUNCH if name in launch}
        payload = {
            "problem": problem.to_dict(),
            "mask": mask,
            "launch": own,
            "arch": arch,
            "cache_dir": str(self.cache_dir),
        }
        root = str(Path(__file__).resolve().parent.parent)  # this checkout's code, not another
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [root, *filter(None, [os.environ.get("PYTHONPATH")])]
        )}  # fmt: skip
        return subprocess.Popen(
            [sys.executable, "-m", "workbench.analysis.resources", json.dumps(payload)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip

    def _store(self, key: str, answer: CompiledResources) -> None:
        try:
            self.cache_dir.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(
                "w", dir=self.cache_dir, suffix=".tmp", delete=False
            ) as handle:
                json.dump(answer.to_dict(), handle)
            os.replace(handle.name, self._path(key))
        except OSError:
            pass  # a read-only cache only costs the next compile


def read_child(child: subprocess.Popen[str], arch: str) -> CompiledResources | None:
    """The answer of a :meth:`ResourceService.start_child` child once it ends; None when it
    was ended (killed) before answering; its error as text when it failed."""
    out, err = child.communicate()
    if child.returncode and child.returncode < 0:
        return None
    try:
        return CompiledResources.from_dict(json.loads(out.strip().splitlines()[-1]))
    except (ValueError, IndexError, TypeError):
        last = (err.strip().splitlines() or [f"exit {child.returncode}"])[-1]
        return CompiledResources(arch, error=_one_line(RuntimeError(last)))


def arch_of_machine(machine: Mapping[str, Any]) -> str | None:
    """``sm_90`` from a run's machine record (its ``compute_capability``), or None."""
    cap = str(machine.get("compute_capability") or "")
    major, _, minor = cap.partition(".")
    if major.isdigit() and minor.isdigit():
        return f"sm_{major}{minor}"
    return None


def point_resources(
    service: ResourceService,
    backend: str,
    problem: Problem,
    config: KernelConfig,
    extra: Mapping[str, Any],
    machine: Mapping[str, Any],
) -> dict[str, Any] | None:
    """What a measured point of ``backend`` compiled to on the run's GPU (the launch it
    recorded, so an autotuned point's own tiles), as stored with the point; None for peers."""
    if not compiled_from_registry(backend):
        return None
    if problem.lengths is not None:  # a ragged batch ran the serving kernels, not this cubin
        return None
    arch = arch_of_machine(machine)
    if arch is None:
        return None
    launch = extra.get("launch")
    if not isinstance(launch, Mapping):
        launch = launch_knobs_of(config)
    if launch is None:
        return None
    return service.for_launch(problem, config.mask, launch, arch).to_dict()


def _answer_in_child(payload: Mapping[str, Any]) -> None:
    """:meth:`ResourceService.child_command`'s child: one answer, as JSON on stdout."""
    service = ResourceService(payload["cache_dir"])
    problem = Problem.from_dict(payload["problem"])
    found = service.for_launch(problem, payload["mask"], payload["launch"], payload["arch"])
    print(json.dumps(found.to_dict()))


if __name__ == "__main__":
    _answer_in_child(json.loads(sys.argv[1]))
