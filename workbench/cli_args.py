"""The command line's arguments: the parser (kernel flags generated from the knob registry) and
what the parsed arguments become in the core (a sweep spec, timing settings)."""

from __future__ import annotations

import argparse
import re
from typing import Any, NoReturn

from kernels import knobs
from kernels.schedule import MASK_MODES
from workbench.config import (
    DTYPES,
    HEAD_DIMS,
    KernelConfig,
    Problem,
    SweepSpec,
    parse_seq_lens,
)


class UsageError(Exception):
    """Bad input: one line on stderr, exit 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see --help)")


def _ints(text: str) -> list[int]:
    try:
        return [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated run ids, got {text!r}"
        ) from None


DB_HELP = "database file (default: $FMHA_WORKBENCH_DB, else runs.db in your data directory)"


def _add_db(parser: argparse.ArgumentParser) -> None:
    # Its own dest, and absent unless given: a subcommand's default must not overwrite a --db
    # written before the command (argparse lets a subparser's defaults win).
    parser.add_argument(
        "--db", metavar="PATH", dest="command_db", default=argparse.SUPPRESS, help=DB_HELP
    )


def _add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _add_gpu_timing(group: Any) -> None:
    group.add_argument(
        "--no-graph",
        action="store_true",
        help="GPU: time plain launches with CUDA events instead of replaying CUDA graphs "
        "(the default where a backend's launch can be captured; host launch overhead then "
        "shows at small N)",
    )
    group.add_argument(
        "--rounds",
        type=int,
        help="groups (--backends): at least this many interleaved timing rounds per length "
        "(default 4)",
    )
    group.add_argument(
        "--flush-l2", action="store_true", help="GPU: overwrite the L2 cache before each sample"
    )


def knob_help(knob: knobs.Knob) -> str:
    """A knob's help line, all from the registry: what it does, the values (the cuTile
    kernel's where it takes fewer), the rules, the default (argparse adds it for a switch)."""
    parts = [knob.help]
    if knob.kind is not bool:
        values = knob.values_text()
        for capability, narrower in knob.narrower.items():
            who = knobs.CAPABILITY_NAMES.get(capability, capability)
            values += f" ({who}: {knob.values_text(narrower)})"
        if knob.choices_note:
            values += f" ({knob.choices_note})"
        parts.append(values)
    if knobs.rules_text(knob.name):
        parts.append(knobs.rules_text(knob.name))
    default = ("on" if knob.default else "off") if knob.kind is bool else knob.text(knob.default)
    parts.append(f"default {default}")
    return "; ".join(parts)


def _add_knob_flag(group: Any, knob: knobs.Knob) -> None:
    """The registry's flag for ``knob``: ``--x/--no-x`` for a switch, a number otherwise."""
    shown = knob_help(knob).replace("%", "%%")  # argparse formats help with %: "5 %" is text
    if knob.kind is bool:
        group.add_argument(
            knob.flag,
            dest=knob.name,
            action=argparse.BooleanOptionalAction,
            default=knob.default,
            help=shown,
        )
    else:
        group.add_argument(knob.flag, dest=knob.name, type=int, default=knob.default, help=shown)


ARCH_HELP = (
    "offer the cuTile kernel's knob values for this GPU architecture (sm_90, sm_120, ...) "
    "instead of the local GPU's; 'any': every value the kernel takes"
)


def _add_arch(group: Any) -> None:
    group.add_argument("--arch", metavar="sm_XY", help=ARCH_HELP)


def knob_arch(args: argparse.Namespace) -> str | None:
    """The GPU architecture whose knob offering applies: ``--arch``, else the local GPU's (from
    nvidia-smi, no CUDA context), else None (no GPU: every value the kernel takes)."""
    arch = getattr(args, "arch", None)
    if arch is None:
        from workbench.ladder import local_gpu_arch

        return local_gpu_arch()
    if arch == "any":
        return None
    if not re.fullmatch(r"sm_\d{2,3}", arch):
        raise UsageError(
            f"--arch: {arch!r} is not an architecture; expected sm_90, sm_120, ... or any"
        )
    return arch


def _add_problem_and_config(p: argparse.ArgumentParser, *, seq_default: str) -> None:
    g = p.add_argument_group("problem")
    g.add_argument(
        "--seq-lens",
        default=seq_default,
        help=f"sequence lengths: a list (128,256) or a power-of-two range (1k-16k); "
        f"default {seq_default}",
    )
    g.add_argument("--batch", type=int, default=1, help="batch size (default 1)")
    g.add_argument("--heads", type=int, default=8, help="query heads (default 8)")
    g.add_argument("--kv-heads", type=int, help="key/value heads for GQA (default: --heads)")
    g.add_argument("--head-dim", type=int, default=64, help=f"one of {HEAD_DIMS} (default 64)")
    g.add_argument("--dtype", default="float16", help=f"one of {', '.join(DTYPES)}")
    g.add_argument(
        "--input-pos",
        type=int,
        default=0,
        help="causal offset: P cached keys before the queries (k_len = N + P); default 0",
    )
    k = p.add_argument_group("kernel")
    k.add_argument("--mask", default="none", help=f"one of {', '.join(MASK_MODES)}")
    k.add_argument("--window", type=int, help="sliding-window size (with --mask window)")
    for knob in knobs.EXPOSED:
        _add_knob_flag(k, knob)
    _add_arch(k)
    t = p.add_argument_group("timing")
    t.add_argument("--warmup", type=int, help="untimed launches before sampling")
    t.add_argument("--samples", type=int, help="minimum timed samples per point")
    t.add_argument("--min-time", type=float, help="minimum seconds of samples per point")
    _add_gpu_timing(t)
    t.add_argument("--seed", type=int, help="random seed for the inputs (default: fresh)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="fmha-workbench",
        description="Profile and tune a cuTile FlashAttention kernel. With no command, "
        "opens the desktop workbench.",
    )
    parser.add_argument("--db", metavar="PATH", help=DB_HELP)
    sub = parser.add_subparsers(dest="command", parser_class=_Parser, metavar="COMMAND")

    p = sub.add_parser("gui", help="open the desktop workbench (the default)")
    _add_db(p)

    p = sub.add_parser("sweep", help="measure a sweep over sequence lengths and store it")
    p.add_argument("--backend", default="reference", help="backend to run (default reference)")
    p.add_argument(
        "--backends", help="several backends, comma-separated, on the same inputs as one group"
    )
    p.add_argument("--label", default="", help="a name for the run")
    _add_problem_and_config(p, seq_default="128,256,512")
    _add_db(p)
    _add_json(p)

    p = sub.add_parser("runs", help="list stored runs, newest first")
    p.add_argument("--search", help="only runs whose label, backend, status or config match")
    p.add_argument("--limit", type=int, default=50, help="at most this many (default 50)")
    _add_db(p)
    _add_json(p)

    p = sub.add_parser("show", help="one run and its points")
    p.add_argument("run", type=int, help="run id")
    _add_db(p)
    _add_json(p)

    p = sub.add_parser("compare", help="latencies of runs side by side, per sequence length")
    p.add_argument("runs", type=int, nargs="*", help="two or more run ids; the first is the base")
    p.add_argument("--group", type=int, help="compare every run of a group (from --backends)")
    _add_db(p)
    _add_json(p)

    p = sub.add_parser("export", help="write points as CSV, one row per point")
    p.add_argument("--csv", required=True, metavar="FILE", help="output file ('-' for stdout)")
    p.add_argument("--runs", type=_ints, help="comma-separated run ids (default: all)")
    p.add_argument("--group", type=int, help="every run of a group")
    _add_db(p)

    p = sub.add_parser("blockmap", help="which q×k blocks a configuration computes, masks, skips")
    p.add_argument("--q-len", type=int, required=True, help="query length (rows)")
    p.add_argument("--k-len", type=int, help="default: q-len + input-pos")
    for name in ("tile_m", "tile_n"):
        _add_knob_flag(p, knobs.KNOBS[name])
    p.add_argument("--mask", default="none", help=f"one of {', '.join(MASK_MODES)}")
    p.add_argument("--input-pos", type=int, default=0, help="causal offset of the queries")
    p.add_argument("--window", type=int, help="sliding-window size (with --mask window)")
    _add_json(p)

    p = sub.add_parser(
        "ladder",
        help="run the optimization ladder (each step one knob more) and tabulate speed-ups",
    )
    p.add_argument("--backend", default="reference", help="backend to run (default reference)")
    p.add_argument(
        "--steps", metavar="FILE", help="a ladder JSON file (default: the built-in ladder)"
    )
    p.add_argument("--seq-lens", help="default 1k-16k on a GPU backend, 128,256 on reference")
    p.add_argument("--batch", type=int, help="default 4 on a GPU backend, 1 on reference")
    p.add_argument("--heads", type=int, help="default 32 on a GPU backend, 2 on reference")
    p.add_argument("--kv-heads", type=int, help="key/value heads for GQA (default: --heads)")
    p.add_argument("--head-dim", type=int, help="default 128 on a GPU backend, 64 on reference")
    p.add_argument("--dtype", default="float16", help=f"one of {', '.join(DTYPES)}")
    p.add_argument("--mask", help="override the ladder's mask (causal by default)")
    p.add_argument("--window", type=int, help="sliding-window size (with --mask window)")
    p.add_argument("--label", default="", help="a name for the ladder group")
    p.add_argument("--warmup", type=int, help="untimed launches before sampling")
    p.add_argument("--samples", type=int, help="minimum timed samples per point")
    p.add_argument("--min-time", type=float, help="minimum seconds of samples per point")
    _add_gpu_timing(p)
    p.add_argument("--seed", type=int, help="random seed for the inputs (default: fresh)")
    _add_db(p)
    _add_json(p)

    p = sub.add_parser(
        "report",
        help="performance table of stored groups: TFLOP/s and one backend's speed-up over the "
        "others (what the README publishes)",
    )
    p.add_argument(
        "--group", type=int, action="append", required=True, help="a group id (repeatable)"
    )
    p.add_argument(
        "--subject", help="the backend whose speed-up is shown (default: cutile, if present)"
    )
    p.add_argument("--markdown", action="store_true", help="a markdown table with its method")
    p.add_argument(
        "--readme",
        metavar="FILE",
        help="replace the generated table between the markers in FILE (e.g. README.md)",
    )
    _add_db(p)
    _add_json(p)

    p = sub.add_parser("backends", help="which backends this machine can run, and why not")
    _add_json(p)

    p = sub.add_parser(
        "import",
        help="copy another run database's runs (with their groups, points and block maps) into "
        "this one; runs already here are skipped, each keeps its machine",
    )
    p.add_argument("source", metavar="OTHER.db", help="the run database to copy runs from")
    _add_db(p)
    _add_json(p)

    p = sub.add_parser(
        "knobs",
        help="the kernel knobs: flags, defaults, the values each backend takes on this GPU's "
        "architecture (or --arch), and the rules between them",
    )
    _add_arch(p)
    _add_json(p)
    return parser


# --- helpers ------------------------------------------------------------------------------------


def spec_from_args(args: argparse.Namespace, backend: str) -> SweepSpec:
    problem = Problem(
        batch=args.batch,
        heads=args.heads,
        kv_heads=args.kv_heads,
        head_dim=args.head_dim,
        dtype=args.dtype,
        input_pos=args.input_pos,
        q_len=1,
        k_len=1 + args.input_pos,
    )
    config = KernelConfig(
        mask=args.mask,
        window=args.window,
        **{knob.name: getattr(args, knob.name) for knob in knobs.EXPOSED},
    )
    from workbench.backends import check_offered

    check_offered(config, _sweep_backends(args), knob_arch(args))
    return SweepSpec(
        problem=problem,
        seq_lens=parse_seq_lens(args.seq_lens),
        config=config,
        backend=backend,
        label=args.label,
        seed=args.seed,
    )


def _sweep_backends(args: argparse.Namespace) -> list[str]:
    names = args.backends.split(",") if getattr(args, "backends", None) else [args.backend]
    return [n.strip() for n in names if n.strip()]


def timing_from_args(args: argparse.Namespace, backend_default: Any) -> Any:
    import dataclasses

    changes = {}
    if args.warmup is not None:
        changes["warmup"] = args.warmup
    if args.samples is not None:
        changes["min_samples"] = args.samples
        changes["max_samples"] = max(backend_default.max_samples, args.samples)
    if args.min_time is not None:
        changes["min_time_s"] = args.min_time
    if args.no_graph:
        changes["graph"] = False
    if args.rounds is not None:
        changes["rounds"] = args.rounds
    if args.flush_l2:
        changes["flush_l2"] = True
    return dataclasses.replace(backend_default, **changes)
