"""What ``resources`` compiles for, from its flags: the problem (a prefill N or a decode
shape), the one kernel config, the architectures; and ``resources --runs``, which stores what
stored points compiled to."""

from __future__ import annotations

import argparse
import sys

from kernels import knobs
from workbench.cli.database import db_of, db_path, open_db
from workbench.cli.exit_codes import EXIT_OK
from workbench.cli.values import UsageError
from workbench.config import ConfigError, KernelConfig, Problem, refuse_first


def resource_archs(text: str | None) -> list[str]:
    from kernels.cubin_resources import ARCH_LIMITS
    from workbench.analysis.resources import OFFLINE_ARCHS
    from workbench.jobs.ladder_steps import local_gpu_arch

    if text is None:
        local = local_gpu_arch()
        return [local] if local in ARCH_LIMITS else list(OFFLINE_ARCHS)
    archs = [a.strip() for a in text.split(",")]
    for arch in archs:
        if arch not in ARCH_LIMITS:
            raise UsageError(
                f"--arch: {arch!r} has no known limits; expected one of {', '.join(ARCH_LIMITS)}"
            )
    return list(dict.fromkeys(archs))


def fill_stored_resources(args: argparse.Namespace) -> int:
    """``resources --runs``: what stored points compiled to, where they were stored without."""
    from workbench.analysis.resources import ResourceService, missing_tools
    from workbench.jobs.resources import fill_resources

    path = db_path(args)
    if not path.exists():
        raise UsageError(f"no run database at {path}; check the path")
    with open_db(db_of(args), create=False) as store:
        for run_id in args.runs:
            store.run(run_id)  # a missing id is refused before anything compiles
    why = missing_tools()
    if why:
        raise UsageError(f"cannot compile here: {why}")
    with open_db(db_of(args)) as store:
        filled = fill_resources(
            store, args.runs, ResourceService(), lambda line: print(line, file=sys.stderr)
        )
    print(f"stored the compiled resources of {filled} point(s)")
    return EXIT_OK


def resources_problem(args: argparse.Namespace) -> Problem:
    """The problem ``resources`` compiles for: N = q_len = k_len - input_pos, or a decode shape
    (``--q-len`` rows, the last tokens of ``--k-len`` keys, as a decode sweep states it)."""
    if args.q_len is None and args.k_len is None:
        q_len, k_len, input_pos = args.seq_len, args.seq_len + args.input_pos, args.input_pos
    elif args.q_len is None or args.k_len is None:
        raise UsageError("resources: --q-len and --k-len go together (a decode shape)")
    elif args.input_pos:
        raise UsageError(
            "resources: --input-pos is k_len - q_len for a decode shape (the queries are the "
            "last tokens); leave it out"
        )
    elif args.k_len < args.q_len:
        raise UsageError(f"resources: --k-len {args.k_len} is below --q-len {args.q_len}")
    else:
        q_len, k_len, input_pos = args.q_len, args.k_len, args.k_len - args.q_len
    return Problem(
        batch=args.batch,
        heads=args.heads,
        kv_heads=args.kv_heads,
        head_dim=args.head_dim,
        dtype=args.dtype,
        input_pos=input_pos,
        q_len=q_len,
        k_len=k_len,
    )


def resources_config(args: argparse.Namespace, problem: Problem) -> KernelConfig:
    """The one cuTile kernel ``resources`` compiles: its knobs as typed, each a value the kernel
    takes at ``problem``'s head dim (the tuner's choice is refused: it has no one kernel)."""
    config = KernelConfig(
        mask=args.mask,
        window=args.window,
        **{knob.name: getattr(args, knob.name) for knob in knobs.EXPOSED},
    )
    kernel_dims = knobs.HEAD_DIM.values_for(knobs.CUTILE)
    if problem.head_dim not in kernel_dims:
        raise ConfigError("head_dim", problem.head_dim, f"the cuTile kernel takes {kernel_dims}")
    refuse_first(knobs.value_violations(config.knob_values(), capability=knobs.CUTILE))
    if config.tuned:
        raise UsageError(
            f"{knobs.TUNER.flag}: the tuner picks the tiles per length, so there is no one "
            "kernel to "
            "compile; give the tiles instead"
        )
    return config
