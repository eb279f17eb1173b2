"""A cuTile plugin's compiled resources (registers, spill, shared memory, CTAs per SM), as our
kernel has them: the plugin declares ``compile_cubin(problem, config, knobs, arch) -> bytes``,
which compiles its kernel offline (tileiras, no GPU), and the cubin is read with cuobjdump
(:mod:`kernels.cubin_resources`).

:func:`cutile_cubin` is the helper such a ``compile_cubin`` calls: the kernel and its
parameters in the kernel's order, each an :class:`Array` (the shape and dtype the launch passes),
a :class:`Scalar` (a runtime scalar, float32 or int32 by its value's type) or a constant's
value as the launch passes it.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from workbench.analysis.resources import (
    CompiledResources,
    ResourceService,
    from_cubin_resources,
    missing_tools,
)
from workbench.backends.declaration import BackendDeclaration
from workbench.config import KernelConfig, Problem


@dataclass(frozen=True)
class Array:
    """An array parameter: what the JIT would assume of a contiguous, aligned array of this
    dtype ("float16", "bfloat16", "float32", "int32") and shape."""

    dtype: str
    shape: tuple[int, ...]


@dataclass(frozen=True)
class Scalar:
    """A runtime scalar parameter (not a ``ct.Constant``): float32 for a float, int32 for an
    int."""

    value: float | int


def cutile_cubin(kernel: Any, parameters: Sequence[Any], arch: str) -> bytes:
    """``kernel`` (a ``@ct.kernel``) compiled for ``arch`` without a GPU, its signature made
    from ``parameters`` (see the module's text)."""
    import cuda.tile as ct
    from cuda.tile.compilation import (
        CallingConvention,
        KernelSignature,
        ScalarConstraint,
        export_kernel,
    )

    from kernels.cutile.compile import array_constraint
    from kernels.cutile.diagnostics import friendly_errors

    signature: list[Any] = []
    for parameter in parameters:
        if isinstance(parameter, Array):
            signature.append(array_constraint(parameter))
        elif isinstance(parameter, Scalar):
            kind = ct.float32 if isinstance(parameter.value, float) else ct.int32
            signature.append(ScalarConstraint(kind))
        else:
            signature.append(parameter)
    buffer = io.BytesIO()
    with friendly_errors():
        export_kernel(
            kernel,
            [KernelSignature(signature, CallingConvention.cutile_python_v2())],
            buffer,
            gpu_code=arch,
            output_format="cubin",
        )
    return buffer.getvalue()


def compiles_offline(declaration: BackendDeclaration) -> bool:
    """Does ``declaration`` (a plugin's) say how to compile itself offline?"""
    return getattr(declaration.factory, "compile_cubin", None) is not None


def plugin_resources(
    compile_cubin: Callable[..., bytes],
    problem: Problem,
    config: KernelConfig,
    knob_values: Mapping[str, Any],
    arch: str,
) -> CompiledResources:
    """What a plugin's ``compile_cubin`` makes on ``arch`` at ``problem`` and its knob values;
    a compile that fails is an answer with its error in one line, never an exception."""
    from kernels.cubin_resources import ARCH_LIMITS, read_resources

    if arch not in ARCH_LIMITS:
        return CompiledResources(arch, error=f"no limits known for {arch}")
    why = missing_tools()
    if why:
        return CompiledResources(arch, error=why, unavailable=True)
    try:
        cubin = compile_cubin(problem, config, dict(knob_values), arch)
        if not isinstance(cubin, bytes | bytearray) or cubin[:4] != b"\x7fELF":
            raise TypeError(f"compile_cubin returned {type(cubin).__name__}, not a cubin's bytes")
        return from_cubin_resources(arch, read_resources(bytes(cubin)))
    except Exception as exc:  # the user's compile error is the answer, shown in one line
        text = " ".join(str(exc).split()) or type(exc).__name__
        return CompiledResources(arch, error=text if len(text) <= 300 else text[:297] + "…")


def cached_plugin_resources(
    plugin: Any,
    problem: Problem,
    config: KernelConfig,
    knob_values: Mapping[str, Any],
    arch: str,
    service: ResourceService | None = None,
) -> CompiledResources:
    """:func:`plugin_resources` of ``plugin`` (a loaded plugin that declares
    ``compile_cubin``), kept in the resources cache on disk as our kernel's are: keyed by the
    plugin's name and the SHA-256 of its file, the problem, mask, knob values, arch and tool
    versions, so an edit of the file compiles afresh and a repeat is read in milliseconds."""
    service = service or ResourceService()
    digest = plugin.source.sha256 if plugin.source is not None else ""
    material = json.dumps(
        [
            plugin.name, digest, problem.to_dict(), config.mask, config.window,
            dict(knob_values), arch, service.versions(),
        ],
        sort_keys=True,
        default=str,
    )  # fmt: skip
    key = "plugin-" + hashlib.sha256(material.encode()).hexdigest()[:32]
    return service.remembered(
        key,
        lambda: plugin_resources(plugin.compile_cubin, problem, config, knob_values, arch),
    )


def point_resources(
    plugin: Any, problem: Problem, config: KernelConfig, knob_values: Mapping[str, Any], arch: str
) -> dict[str, Any] | None:
    """What a measured point of a plugin that declares ``compile_cubin`` compiled to on its
    GPU's ``arch``, as stored with the point (Compare and the window's plots show it, as for
    our kernel); None where it declares none or nothing can be compiled here."""
    if plugin.compile_cubin is None:
        return None
    found = cached_plugin_resources(plugin, problem, config, knob_values, arch)
    return None if found.unavailable else found.to_dict()
