"""``sweep``'s problem and kernel flags, and the sweep they state (:class:`SweepSpec`).

A problem flag's choices are the core's: head dims and dtypes from :mod:`workbench.config`
(``HEAD_DIMS``, ``DTYPES``), masks from :mod:`kernels.schedule`, presets from
:mod:`workbench.problem_presets`; the kernel's knob flags from :mod:`workbench.cli.knob_flags`.
"""

from __future__ import annotations

import argparse
from typing import Any

from kernels import knobs
from kernels.schedule import MASK_MODES
from workbench.cli.knob_flags import add_arch, add_knob_flag, knob_arch
from workbench.cli.serving_flags import add_batch_flags, ragged_axis_and_problem
from workbench.cli.timing_flags import add_timing
from workbench.cli.values import UsageError, whole
from workbench.config import (
    DTYPES,
    HEAD_DIMS,
    K_LEN_AXIS,
    SEQ_LEN_AXIS,
    KernelConfig,
    Problem,
    SweepSpec,
    parse_seq_lens,
)
from workbench.problem_presets import (
    brings_decode_knobs,
    preset_knobs,
    problem_preset,
    problem_presets,
    serving_presets,
)
from workbench.sizes import size_arg

# The problem flags' defaults where neither the flag nor a preset sets them.
PROBLEM_DEFAULTS = {
    "batch": 1,
    "heads": 8,
    "kv_heads": None,
    "head_dim": 64,
    "head_dim_v": None,
    "dtype": "float16",
}
SEQ_LENS_DEFAULT = "128,256,512"


def add_problem_and_config(p: argparse.ArgumentParser, *, seq_default: str) -> None:
    g = p.add_argument_group("problem")
    g.add_argument(
        "--seq-lens",
        help=f"sequence lengths N (q_len = N, k_len = N + input-pos): a list (128,256) or a "
        f"power-of-two range (1k-16k); default {seq_default}",
    )
    g.add_argument(
        "--k-lens",
        help="decode: sweep the key length (the x axis is k_len) at a fixed --q-len, the "
        "queries being the last tokens (causal is bottom-right); a list or a range (4k-128k)",
    )
    g.add_argument(
        "--q-len",
        type=size_arg,
        help="decode: the query rows against each --k-lens length (default 1: one new token)",
    )
    presets = ", ".join(problem_presets())
    g.add_argument(
        "--preset",
        metavar="NAME",
        help=f"a decode problem ({presets}): heads, head dim, dtype, q_len, k-lens and mask, "
        "run by the decode kernel (packed GQA heads, --kv-splits auto, 32 KB key blocks: "
        "--tile-n 128 at D 128, 256 at D 64); or a serving batch "
        f"({', '.join(serving_presets())}); any of them given by hand wins",
    )
    g.add_argument("--batch", type=whole, help="batch size (default 1)")
    g.add_argument("--heads", type=whole, help="query heads (default 8)")
    g.add_argument("--kv-heads", type=whole, help="key/value heads for GQA (default: --heads)")
    g.add_argument("--head-dim", type=whole, help=f"one of {HEAD_DIMS} (default 64)")
    g.add_argument(
        "--head-dim-v",
        type=whole,
        help="V's and the output's head dim, from the "
        "same list (default: --head-dim; MLA prefill is --head-dim 192 --head-dim-v 128)",
    )
    g.add_argument("--dtype", help=f"one of {', '.join(DTYPES)} (default float16)")
    g.add_argument(
        "--input-pos",
        type=size_arg,
        help="causal offset: P cached keys before the queries (k_len = N + P); default 0",
    )
    add_batch_flags(p)
    k = p.add_argument_group("kernel")
    k.add_argument("--mask", help=f"one of {', '.join(MASK_MODES)} (default none)")
    k.add_argument("--window", type=size_arg, help="sliding-window size (with --mask window)")
    for knob in knobs.EXPOSED:
        add_knob_flag(k, knob, given_only=True)
    add_arch(k)
    add_timing(p.add_argument_group("timing"))


def axis_and_problem(args: argparse.Namespace) -> tuple[str, str, Problem, str]:
    """The sweep's axis, its lengths (as typed), the problem template and the mask, from
    ``--seq-lens`` (N) or ``--k-lens``/``--q-len``/``--preset`` (decode: k_len at a fixed
    q_len), the flags given by hand over the preset's values."""
    given = {name: getattr(args, name) for name in PROBLEM_DEFAULTS}
    ragged = ragged_axis_and_problem(args, given, PROBLEM_DEFAULTS)
    if ragged is not None:
        return ragged
    preset = problem_preset(args.preset) if args.preset is not None else None
    decode = preset is not None or args.k_lens is not None or args.q_len is not None
    if not decode:
        fields: dict[str, Any] = {
            k: (PROBLEM_DEFAULTS[k] if v is None else v) for k, v in given.items()
        }
        input_pos = _or(args.input_pos, 0)
        problem = Problem(**fields, input_pos=input_pos, q_len=1, k_len=1 + input_pos)
        lengths = SEQ_LENS_DEFAULT if args.seq_lens is None else args.seq_lens
        return SEQ_LEN_AXIS, lengths, problem, _or(args.mask, "none")
    if args.seq_lens is not None:
        raise UsageError(
            "--seq-lens sweeps N (q_len = k_len); with --k-lens, --q-len or --preset the x "
            "axis is k_len: give the lengths with --k-lens"
        )
    if args.input_pos is not None:
        raise UsageError(
            "--input-pos is k_len - q_len in a decode sweep (the queries are the last "
            "tokens); leave it out"
        )
    if preset is not None:
        problem = preset.template(**given, q_len=args.q_len)
        return K_LEN_AXIS, _or(args.k_lens, preset.k_lens), problem, _or(args.mask, preset.mask)
    if args.k_lens is None:
        raise UsageError("--q-len sets the query rows of a decode sweep: give --k-lens too")
    fields = {k: (PROBLEM_DEFAULTS[k] if v is None else v) for k, v in given.items()}
    q_len = 1 if args.q_len is None else args.q_len
    problem = Problem(**fields, q_len=q_len, k_len=q_len)
    return K_LEN_AXIS, args.k_lens, problem, _or(args.mask, "none")


def _or(given: Any, default: Any) -> Any:
    """``given`` unless it was not given (an empty value is the user's, and is refused)."""
    return default if given is None else given


def knob_values(args: argparse.Namespace, problem: Problem) -> dict[str, Any]:
    """Every knob's value for a sweep: the registry's default, under a ``--preset``'s kernel
    settings at the problem's head dim (:func:`~workbench.problem_presets.preset_knobs`),
    under a ragged batch's serving-kernel values
    (:func:`~workbench.backends.cutile_serving.kernel_defaults`), under the flags typed."""
    from workbench.backends.cutile_serving import kernel_defaults

    values = {knob.name: knob.default for knob in knobs.EXPOSED}
    if getattr(args, "preset", None) is not None and brings_decode_knobs(args.preset):
        values.update(preset_knobs(problem.head_dim))
    values.update(kernel_defaults(problem))
    values.update({k.name: getattr(args, k.name) for k in knobs.EXPOSED if hasattr(args, k.name)})
    return values


def spec_from_args(args: argparse.Namespace, backend: str) -> SweepSpec:
    axis, lengths, problem, mask = axis_and_problem(args)
    config = KernelConfig(mask=mask, window=args.window, **knob_values(args, problem))
    from workbench.backends import check_offered

    check_offered(config, sweep_backend_names(args), knob_arch(args))
    return SweepSpec(
        problem=problem,
        seq_lens=parse_seq_lens(lengths, field="k_lens" if axis == K_LEN_AXIS else "seq_lens"),
        config=config,
        backend=backend,
        label=args.label,
        seed=args.seed,
        axis=axis,
    )


def sweep_backend_names(args: argparse.Namespace) -> list[str]:
    """``--backends`` (each name once, none empty) or ``--backend`` (default reference); both
    at once are refused rather than one silently ignored."""
    backends = getattr(args, "backends", None)
    if backends is None:
        return ["reference" if args.backend is None else args.backend]
    if args.backend is not None:
        raise UsageError("give --backend or --backends, not both")
    names = [n.strip() for n in backends.split(",")]
    if not any(names):
        raise UsageError("--backends: expected comma-separated backend names, got none")
    if not all(names):
        raise UsageError(f"--backends: an empty name in {backends!r}")
    return names
