"""What ``ladder``'s flags state: the steps (a file or a preset), the problem with the
backend's defaults under what was typed, and the lengths on the ladder's axis."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, cast

from workbench.cli.values import UsageError
from workbench.config import K_LEN_AXIS, Problem, parse_seq_lens

if TYPE_CHECKING:
    from workbench.jobs import LadderJob


def ladder_job(args: argparse.Namespace) -> LadderJob:
    """The ladder job of the command line, every flag checked (nothing is run or opened)."""
    from workbench.jobs import LadderJob, ladder_defaults
    from workbench.jobs.ladder_steps import load_ladder

    ladder = load_ladder(args.steps, mask=args.mask, window=args.window, preset=args.preset)
    decode = ladder.axis == K_LEN_AXIS
    defaults = ladder_defaults(args.backend, decode=decode)

    def given(name: str) -> Any:  # 0 is a value (refused by Problem), not "use the default"
        value = getattr(args, name)
        return defaults.get(name) if value is None else value

    if decode and args.seq_lens is not None:
        raise UsageError("the decode ladder sweeps k_len: give its lengths with --k-lens")
    if not decode and (args.k_lens is not None or args.q_len is not None):
        raise UsageError("--k-lens and --q-len are for a decode ladder (--preset decode)")
    q_len = cast(int, (args.q_len if args.q_len is not None else ladder.q_len) if decode else 1024)
    problem = Problem(
        batch=given("batch"),
        heads=given("heads"),
        kv_heads=given("kv_heads"),
        head_dim=given("head_dim"),
        dtype=args.dtype,
        q_len=q_len,
        k_len=q_len,
    )
    lengths = args.k_lens if decode else args.seq_lens
    return LadderJob(
        ladder,
        problem,
        parse_seq_lens(
            defaults["seq_lens"] if lengths is None else lengths,
            field="k_lens" if decode else "seq_lens",
        ),
        args.backend,
        args.label,
        args.seed,
        axis=ladder.axis,
    )
