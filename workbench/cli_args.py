"""The command line's arguments: the parser (kernel flags generated from the knob registry) and
what the parsed arguments become in the core (a sweep spec, timing settings)."""

from __future__ import annotations

import argparse
import math
import re
from typing import Any, NoReturn

from kernels import knobs, schedule
from kernels.schedule import MASK_MODES
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
from workbench.problem_presets import preset_knobs, problem_preset, problem_presets
from workbench.sizes import size_arg


class UsageError(Exception):
    """Bad input: one line on stderr, exit 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see --help)")


# SQLite's integers are 64-bit: a larger id cannot name anything, and overflows on the way in.
INT64_MAX = 2**63 - 1
# Architectures the knob offering can be asked for (CUDA's compute capabilities, sm_70 on).
KNOWN_ARCHS = ("sm_70", "sm_72", "sm_75", "sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_100",
               "sm_101", "sm_103", "sm_110", "sm_120", "sm_121")  # fmt: skip
MAX_SEARCH_CHARS = 200


def whole(text: str) -> int:
    """A whole number in ASCII digits within SQLite's 64-bit range (``int`` alone takes
    fullwidth and Arabic-Indic digits, spaces and underscores)."""
    stripped = text.strip()
    if not re.fullmatch(r"[+-]?[0-9]+", stripped):
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}")
    value = int(stripped)
    if abs(value) > INT64_MAX:
        raise argparse.ArgumentTypeError(f"{text!r} is out of range (at most {INT64_MAX})")
    return value


def run_id(text: str) -> int:
    """A run or group id: a whole number from 1."""
    value = whole(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"ids start at 1, got {text!r}")
    return value


def at_least_zero(text: str) -> int:
    value = whole(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, got {text!r}")
    return value


def finite(text: str) -> float:
    """A finite number (``float`` alone takes inf and nan)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value) or not text.isascii():
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def search_text(text: str) -> str:
    if len(text) > MAX_SEARCH_CHARS:
        raise argparse.ArgumentTypeError(
            f"a search of {len(text):,} characters; at most {MAX_SEARCH_CHARS}"
        )
    return text


def _ints(text: str) -> list[int]:
    """Comma-separated run ids, each once."""
    tokens = [t.strip() for t in text.split(",")]
    if not any(tokens):
        raise argparse.ArgumentTypeError("expected comma-separated run ids, got none")
    if not all(tokens):
        raise argparse.ArgumentTypeError(f"expected comma-separated run ids, got {text!r}")
    ids = [run_id(t) for t in tokens]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise argparse.ArgumentTypeError(
            f"run {', '.join(map(str, repeated))} given more than once in {text!r}"
        )
    return ids


_SIZE_UNITS = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "ki": 2**10, "mi": 2**20, "gi": 2**30}
# A read below a megabyte times the launch, not the memory; above 32 GB it does not fit the GPU.
READ_SIZE_RANGE = (10**6, 32 * 10**9)


def byte_sizes(text: str) -> list[int]:
    """Comma-separated byte counts with an optional unit (k, M, G or Ki, Mi, Gi; e.g. 134M)."""
    sizes = []
    for token in (t.strip() for t in text.split(",")):
        number = token.rstrip("kKmMgGiI")
        unit = _SIZE_UNITS.get(token[len(number) :].lower())
        try:
            size = int(float(number) * unit) if unit and number else None
        except ValueError:
            size = None
        if size is None:
            raise argparse.ArgumentTypeError(f"expected sizes such as 32M,134M,2Gi, got {token!r}")
        low, high = READ_SIZE_RANGE
        if not low <= size <= high:
            raise argparse.ArgumentTypeError(f"{token} is {size:,} bytes: expected 1M to 32G")
        sizes.append(size)
    return sizes


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
        type=whole,
        help="groups (--backends): at least this many interleaved timing rounds per length "
        "(default 4)",
    )
    group.add_argument(
        "--flush-l2",
        action="store_true",
        help="GPU: overwrite the L2 cache before each sample (a graph sample is a replay of "
        "many calls: only its first finds the L2 cold; with --no-graph every call does)",
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


def _add_knob_flag(group: Any, knob: knobs.Knob, *, given_only: bool = False) -> None:
    """The registry's flag for ``knob``: ``--x/--no-x`` for a switch, a number otherwise.
    ``given_only``: the attribute is set only when the flag is typed (:func:`knob_values`
    tells the user's values from a preset's)."""
    shown = knob_help(knob).replace("%", "%%")  # argparse formats help with %: "5 %" is text
    default = argparse.SUPPRESS if given_only else knob.default
    if knob.kind is bool:
        group.add_argument(
            knob.flag,
            dest=knob.name,
            action=argparse.BooleanOptionalAction,
            default=default,
            help=shown,
        )
    else:
        group.add_argument(
            knob.flag, dest=knob.name, type=_knob_number(knob), default=default, help=shown
        )


def _knob_number(knob: knobs.Knob) -> Any:
    """A whole number (:func:`whole`), or the knob's word for "not set" (``auto``) where it
    has one."""
    unset = knob.names.get(None) if None in knob.values else None

    def parse(text: str) -> int | None:
        return None if unset is not None and text.strip() == unset else whole(text)

    return parse


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
    if arch not in KNOWN_ARCHS:
        raise UsageError(
            f"--arch: {arch!r} is not an architecture this workbench knows; expected one of "
            f"{', '.join(KNOWN_ARCHS)}, or any"
        )
    return arch


def _add_problem_and_config(p: argparse.ArgumentParser, *, seq_default: str) -> None:
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
        "--tile-n 128 at D 128, 256 at D 64); any of them given by hand wins",
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
    k = p.add_argument_group("kernel")
    k.add_argument("--mask", help=f"one of {', '.join(MASK_MODES)} (default none)")
    k.add_argument("--window", type=size_arg, help="sliding-window size (with --mask window)")
    for knob in knobs.EXPOSED:
        _add_knob_flag(k, knob, given_only=True)
    _add_arch(k)
    t = p.add_argument_group("timing")
    t.add_argument("--warmup", type=whole, help="untimed launches before sampling")
    t.add_argument("--samples", type=whole, help="minimum timed samples per point")
    t.add_argument("--min-time", type=finite, help="minimum seconds of samples per point")
    _add_gpu_timing(t)
    t.add_argument("--seed", type=whole, help="random seed for the inputs (default: fresh)")


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
    p.add_argument("--backend", help="backend to run (default reference)")
    p.add_argument(
        "--backends", help="several backends, comma-separated, on the same inputs as one group"
    )
    p.add_argument("--label", default="", help="a name for the run")
    _add_problem_and_config(p, seq_default="128,256,512")
    _add_db(p)
    _add_json(p)

    p = sub.add_parser("runs", help="list stored runs, newest first")
    p.add_argument(
        "--search", type=search_text, help="only runs whose label, backend, status or config match"
    )
    p.add_argument("--limit", type=at_least_zero, default=50, help="at most this many (default 50)")
    _add_db(p)
    _add_json(p)

    p = sub.add_parser("show", help="one run and its points")
    p.add_argument("run", type=run_id, help="run id")
    _add_db(p)
    _add_json(p)

    p = sub.add_parser("compare", help="latencies of runs side by side, per sequence length")
    p.add_argument(
        "runs", type=run_id, nargs="*", help="two or more run ids; the first is the base"
    )
    p.add_argument("--group", type=run_id, help="compare every run of a group (from --backends)")
    _add_db(p)
    _add_json(p)

    p = sub.add_parser("export", help="write points as CSV, one row per point")
    p.add_argument("--csv", required=True, metavar="FILE", help="output file ('-' for stdout)")
    p.add_argument("--runs", type=_ints, help="comma-separated run ids (default: all)")
    p.add_argument("--group", type=run_id, help="every run of a group")
    _add_db(p)

    p = sub.add_parser("blockmap", help="which q×k blocks a configuration computes, masks, skips")
    p.add_argument("--q-len", type=size_arg, required=True, help="query length (rows)")
    p.add_argument("--k-len", type=size_arg, help="default: q-len + input-pos")
    for name in schedule.TILE_KNOBS:
        _add_knob_flag(p, knobs.KNOBS[name])
    p.add_argument("--mask", default="none", help=f"one of {', '.join(MASK_MODES)}")
    p.add_argument("--input-pos", type=size_arg, default=0, help="causal offset of the queries")
    p.add_argument("--window", type=size_arg, help="sliding-window size (with --mask window)")
    for name in schedule.DECODE_KNOBS:
        _add_knob_flag(p, knobs.KNOBS[name])
    p.add_argument(
        "--heads", type=whole, default=1, help="query heads (with --pack-gqa: rows per KV head)"
    )
    p.add_argument("--kv-heads", type=whole, help="key/value heads (default: --heads)")
    p.add_argument("--batch", type=whole, default=1, help="batch (auto splits read the grid)")
    _add_json(p)

    p = sub.add_parser(
        "ladder",
        help="run the optimization ladder (each step one knob more) and tabulate speed-ups",
    )
    p.add_argument("--backend", default="reference", help="backend to run (default reference)")
    p.add_argument(
        "--steps", metavar="FILE", help="a ladder JSON file (default: the built-in ladder)"
    )
    p.add_argument(
        "--preset",
        metavar="NAME",
        help="a built-in ladder: hopper, blackwell (default: the local GPU's), or decode "
        "(baseline, GQA packing, KV split, autotuned; its x axis is k_len)",
    )
    p.add_argument("--seq-lens", help="default 1k-16k on a GPU backend, 128,256 on reference")
    p.add_argument(
        "--k-lens",
        help="a decode ladder's key lengths (default 4k-32k on a GPU backend, 256,512 on "
        "reference)",
    )
    p.add_argument("--q-len", type=size_arg, help="a decode ladder's query rows (default its own)")
    p.add_argument("--batch", type=whole, help="default 4 on a GPU backend, 1 on reference")
    p.add_argument("--heads", type=whole, help="default 32 on a GPU backend, 2 on reference")
    p.add_argument("--kv-heads", type=whole, help="key/value heads for GQA (default: --heads)")
    p.add_argument("--head-dim", type=whole, help="default 128 on a GPU backend, 64 on reference")
    p.add_argument("--dtype", default="float16", help=f"one of {', '.join(DTYPES)}")
    p.add_argument("--mask", help="override the ladder's mask (causal by default)")
    p.add_argument("--window", type=size_arg, help="sliding-window size (with --mask window)")
    p.add_argument("--label", default="", help="a name for the ladder group")
    p.add_argument("--warmup", type=whole, help="untimed launches before sampling")
    p.add_argument("--samples", type=whole, help="minimum timed samples per point")
    p.add_argument("--min-time", type=finite, help="minimum seconds of samples per point")
    _add_gpu_timing(p)
    p.add_argument("--seed", type=whole, help="random seed for the inputs (default: fresh)")
    _add_db(p)
    _add_json(p)

    p = sub.add_parser(
        "report",
        help="performance table of stored groups: TFLOP/s and one backend's speed-up over the "
        "others (what the README publishes)",
    )
    p.add_argument(
        "--group", type=run_id, action="append", required=True, help="a group id (repeatable)"
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

    p = sub.add_parser(
        "resources",
        help="what a cuTile config compiles to (offline, no GPU): registers, spill, shared "
        "memory and CTAs per SM, per architecture",
    )
    p.add_argument(
        "--runs",
        type=_ints,
        help="instead: store what each point of these stored runs compiled to, where it was "
        "stored without (cuTile runs; comma-separated ids)",
    )
    p.add_argument(
        "--seq-len", type=size_arg, default=4096, help="sequence length N (default 4096)"
    )
    p.add_argument(
        "--q-len",
        type=size_arg,
        help="decode: the query rows (instead of --seq-len), the last tokens of --k-len keys",
    )
    p.add_argument("--k-len", type=size_arg, help="decode: the keys the --q-len rows read")
    p.add_argument("--batch", type=whole, default=1, help="batch size (default 1)")
    p.add_argument("--heads", type=whole, default=8, help="query heads (default 8)")
    p.add_argument("--kv-heads", type=whole, help="key/value heads for GQA (default: --heads)")
    p.add_argument("--head-dim", type=whole, default=128, help=f"one of {HEAD_DIMS} (default 128)")
    p.add_argument("--dtype", default="float16", help=f"one of {', '.join(DTYPES)}")
    p.add_argument("--input-pos", type=size_arg, default=0, help="causal offset of the queries")
    p.add_argument("--mask", default="none", help=f"one of {', '.join(MASK_MODES)}")
    p.add_argument("--window", type=size_arg, help="sliding-window size (with --mask window)")
    for knob in knobs.EXPOSED:
        _add_knob_flag(p, knob)
    p.add_argument(
        "--arch",
        metavar="sm_XY[,sm_XY]",
        help="architectures to compile for (default: the local GPU's, else sm_90,sm_100,sm_120)",
    )
    _add_db(p)
    _add_json(p)

    p = sub.add_parser(
        "machine",
        help="this machine's measured ceilings for the roofline (dense matmul TFLOP/s, "
        "streaming read GB/s): list them, or --measure on the GPU",
    )
    p.add_argument(
        "--measure",
        action="store_true",
        help="measure the ceilings on this GPU now and store them (again: re-measures)",
    )
    _add_db(p)
    _add_json(p)

    p = sub.add_parser(
        "roofline",
        help="runs' points against this machine's ceilings: arithmetic intensity, TFLOP/s, "
        "%% of the bounding ceiling (the window's Roofline view)",
    )
    p.add_argument("runs", type=run_id, nargs="+", help="one or more run ids")
    _add_db(p)
    _add_json(p)

    p = sub.add_parser(
        "profile",
        help="profile one stored point's launch with Nsight Compute (ncu, clocks left as they "
        "are) and keep a dozen headline metrics with the point, and where its warps wait (the "
        "PC samples' hottest SASS instructions, and each stall reason's)",
    )
    p.add_argument("run", type=run_id, help="run id")
    p.add_argument(
        "--seq-len", type=size_arg, required=True,
        help="the point's length on its run's axis: N, or k_len for a decode sweep",
    )  # fmt: skip
    _add_db(p)
    _add_json(p)

    p = sub.add_parser("backends", help="which backends this machine can run, and why not")
    _add_json(p)

    p = sub.add_parser(
        "bandwidth",
        help="measure this GPU's streaming-read bandwidth once and keep it with the machine "
        "record, so runs show K+V GB/s as a %% of it",
    )
    what = p.add_mutually_exclusive_group()
    what.add_argument(
        "--show", action="store_true", help="print the stored measurement, measure nothing"
    )
    what.add_argument(
        "--sizes",
        type=byte_sizes,
        metavar="LIST",
        help="measure the read at these sizes instead, e.g. 16M,134M,537M (a decode call's K+V "
        "bytes): what a plain library read reaches at that many bytes, beside the stored "
        "figure; nothing is kept",
    )
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


def axis_and_problem(args: argparse.Namespace) -> tuple[str, str, Problem, str]:
    """The sweep's axis, its lengths (as typed), the problem template and the mask, from
    ``--seq-lens`` (N) or ``--k-lens``/``--q-len``/``--preset`` (decode: k_len at a fixed
    q_len), the flags given by hand over the preset's values."""
    given = {name: getattr(args, name) for name in PROBLEM_DEFAULTS}
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


def knob_values(args: argparse.Namespace, head_dim: int) -> dict[str, Any]:
    """Every knob's value for a sweep: the registry's default, under a ``--preset``'s kernel
    settings at ``head_dim`` (:func:`~workbench.problem_presets.preset_knobs`), under the
    flags the user typed."""
    values = {knob.name: knob.default for knob in knobs.EXPOSED}
    if getattr(args, "preset", None) is not None:
        values.update(preset_knobs(head_dim))
    values.update({k.name: getattr(args, k.name) for k in knobs.EXPOSED if hasattr(args, k.name)})
    return values


def spec_from_args(args: argparse.Namespace, backend: str) -> SweepSpec:
    axis, lengths, problem, mask = axis_and_problem(args)
    config = KernelConfig(mask=mask, window=args.window, **knob_values(args, problem.head_dim))
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
