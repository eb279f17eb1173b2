"""Offline compilation (no GPU needed): catch compile errors, read registers and spills.

The signature handed to ``export_kernel`` comes from the same launch plan and kernel calls
(:func:`kernels.cutile.forms.plan`) as a real launch's arguments, parameter by parameter in the
kernel's declared order: arrays become the constraints the JIT would derive from contiguous,
aligned arrays of the planned shapes, runtime scalars their int32/float32 type, constants their
values.
"""

from __future__ import annotations

import io
from typing import Any, Protocol, cast

import cuda.tile as ct

from kernels.cutile import forms
from kernels.cutile.config import LaunchConfig
from kernels.cutile.diagnostics import friendly_errors
from kernels.cutile.forms import KernelCall, Problem
from kernels.cutile.launch import check_mask

# The SM count the offline compile assumes for the persistent forms' grid: the H200's. Only
# the causal tile table's shape depends on it, and the JIT sees that shape only through its
# divisibility by 16, which padding keeps the same for any SM count.
OFFLINE_SM_COUNT = 132

_DTYPES = {"float16": ct.float16, "bfloat16": ct.bfloat16, "float32": ct.float32, "int32": ct.int32}
_SCALARS = {float: ct.float32, int: ct.int32}


class ShapedArray(Protocol):
    """What an offline compile needs of an array parameter (ArraySpec, the serving ArrayArg)."""

    @property
    def dtype(self) -> str: ...

    @property
    def shape(self) -> tuple[int, ...]: ...


def array_constraint(spec: ShapedArray) -> Any:
    """What the JIT derives from a contiguous, 16-byte aligned array of this shape, constraint
    for constraint (checked against ``get_parameter_constraints_from_pyargs`` in
    tests/test_offline_signature.py): a dim of 1 is a constant shape, a stride of 1 a constant
    stride with no lower bound. Equal constraints give the JIT's bytecode, so a cubin compiled
    here is the one cuTile's disk cache hands the launch."""
    from cuda.tile.compilation import ArrayConstraint

    dtype = _DTYPES[spec.dtype]
    shape = spec.shape
    itemsize = {ct.float16: 2, ct.bfloat16: 2, ct.float32: 4, ct.int32: 4}[dtype]
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * shape[i + 1]
    per16 = 16 // itemsize
    stride_constant = tuple(1 if s == 1 else None for s in strides)
    return ArrayConstraint(
        dtype,
        len(shape),
        index_dtype=ct.int32,
        stride_lower_bound_incl=tuple(None if c else 0 for c in stride_constant),
        alias_groups=(),
        may_alias_internally=False,
        stride_constant=stride_constant,
        shape_constant=tuple(1 if d == 1 else None for d in shape),
        stride_divisible_by=tuple(per16 if s % per16 == 0 else 1 for s in strides),
        shape_divisible_by=tuple(16 if d % 16 == 0 else 1 for d in shape),
        base_addr_divisible_by=16,
    )


def signature_parameters(launch: KernelCall) -> list[Any]:
    """The kernel signature's parameters for ``launch``, one per declared kernel parameter."""
    from cuda.tile.compilation import ScalarConstraint

    out: list[Any] = []
    for param in forms.declaration(launch.form):
        value = launch.values[param.name]
        if param.kind == "array":
            out.append(array_constraint(value))
        elif param.kind == "scalar":
            out.append(ScalarConstraint(_SCALARS[cast(type, param.type)]))  # scalars name one
        else:
            out.append(value)
    return out


def offline_plan(
    *,
    dtype: str = "float16",
    head_dim: int = 128,
    head_dim_v: int | None = None,
    q_len: int = 4096,
    k_len: int | None = None,
    heads: int = 32,
    kv_heads: int | None = None,
    batch: int = 4,
    mask: str = "causal",
    input_pos: int = 0,
    with_lse: bool = False,
    with_map: bool = False,
    sm_count: int = OFFLINE_SM_COUNT,
    **knobs: Any,
) -> tuple[KernelCall, LaunchConfig]:
    """The kernel call of the launch :func:`compile_cubin` compiles (its plan's, by
    :func:`kernels.cutile.forms.plan`), and its config."""
    k_len = q_len if k_len is None else k_len
    kv_heads = kv_heads or heads
    check_mask(mask, input_pos, 1 if mask == "window" else None)
    config = LaunchConfig.of(knobs)
    p = Problem(batch, heads, kv_heads, q_len, k_len, head_dim, dtype, head_dim_v=head_dim_v)
    launch = forms.plan(
        p,
        config,
        scale=None,
        mask=mask,
        input_pos=input_pos,
        window=1 if mask == "window" else None,
        with_lse=with_lse,
        with_map=with_map,
        sm_count=lambda: sm_count,
    )
    return launch, config


def compile_cubin(*, arch: str = "sm_90", combine: bool = False, **problem_and_knobs: Any) -> bytes:
    """Compile the kernel for ``arch`` without a GPU (tileiras only) and return the cubin.

    Takes the keyword arguments of :func:`offline_plan`: the problem (``dtype``, ``head_dim``,
    ``head_dim_v`` (V's and the output's; None: head_dim),
    ``q_len``, ``k_len``, ``heads``, ``kv_heads``, ``batch``, ``mask``, ``input_pos``,
    ``with_lse``, ``with_map``, ``sm_count``) and the fields of :class:`LaunchConfig`. The
    signature mirrors what the JIT derives from the real launch's arrays, so registers and
    spills read from this cubin are those of the real launch. ``combine``: the launch's second
    kernel instead (the decode form's combine of a split key range; ValueError without one).
    """
    launch, _ = offline_plan(**problem_and_knobs)
    if combine:
        if launch.then is None:
            raise ValueError(f"a {launch.form} launch of this problem has no combine kernel")
        launch = launch.then
    return compile_call(launch, arch)


def compile_call(launch: KernelCall, arch: str = "sm_90") -> bytes:
    """The cubin of one planned kernel call for ``arch``, without a GPU (tileiras only)."""
    from cuda.tile.compilation import CallingConvention, KernelSignature, export_kernel

    sig = KernelSignature(signature_parameters(launch), CallingConvention.cutile_python_v2())
    buf = io.BytesIO()
    with friendly_errors():
        export_kernel(
            forms.kernel_for(launch),
            [sig],
            buf,
            gpu_code=arch,
            output_format="cubin",
        )
    return buf.getvalue()
