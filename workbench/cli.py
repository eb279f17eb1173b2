"""``fmha-workbench``: the GUI with no subcommand, and a headless CLI over the same core.

Each command opens the store, calls one or two core functions and turns their errors into a
clean exit: 0 on success, 1 when a sweep ran but failed, 2 with one line on stderr (and nothing
written) for bad input, 130 when interrupted.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from kernels import knobs
from kernels.schedule import MASK_MODES, BlockKind
from workbench.backends.base import schedule_for
from workbench.compare import compare_runs, format_delta, format_speedup
from workbench.config import (
    DTYPES,
    HEAD_DIMS,
    ConfigError,
    KernelConfig,
    Problem,
    SweepSpec,
    parse_seq_lens,
)
from workbench.events import JobStarted, RunFinished
from workbench.progress import ProgressPrinter
from workbench.store import RunRecord, Store, StoreError, default_db_path
from workbench.tuned import tuned_labels

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


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
    if knob.kind is bool:
        group.add_argument(
            knob.flag,
            dest=knob.name,
            action=argparse.BooleanOptionalAction,
            default=knob.default,
            help=knob_help(knob),
        )
    else:
        group.add_argument(
            knob.flag, dest=knob.name, type=int, default=knob.default, help=knob_help(knob)
        )


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
        "knobs",
        help="the kernel knobs: flags, defaults, the values each backend takes on this GPU's "
        "architecture (or --arch), and the rules between them",
    )
    _add_arch(p)
    _add_json(p)
    return parser


# --- helpers ------------------------------------------------------------------------------------


def _emit_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def _table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(h).ljust(w) for h, w in zip(header, widths))]
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)) for r in rows]
    return "\n".join(lines)


def _db_of(args: argparse.Namespace) -> str | None:
    """The one database path of the command line: ``--db`` before or after the command (the
    same path twice is fine, two different ones are refused), else None (the store's default,
    which honours ``FMHA_WORKBENCH_DB``)."""
    before, after = getattr(args, "db", None), getattr(args, "command_db", None)
    if before and after and Path(before).expanduser() != Path(after).expanduser():
        raise UsageError(f"--db given twice with different paths ({before!r} and {after!r})")
    return after or before


def _open_store(db: str | None, *, create: bool = True) -> Store:
    """The store, with anything the user must know about opening it (a damaged file set aside,
    a newer schema opened read-only) said on stderr. A command that only reads passes
    ``create=False``: a mistyped path is refused rather than made into an empty database."""
    path = Path(db).expanduser() if db else default_db_path()
    if not create and not path.exists():
        raise UsageError(
            f"no run database at {path}; check the path, or start one with "
            f"`fmha-workbench sweep --db {path}`"
        )
    store = Store(path)
    if store.notice:
        print(f"note: {store.notice}", file=sys.stderr)
    return store


def _fmt(value: float | None, spec: str = ".3f") -> str:
    return "-" if value is None else format(value, spec)


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
    check_offered(config, _sweep_backends(args), args)
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


def check_offered(config: KernelConfig, backends: Sequence[str], args: argparse.Namespace) -> None:
    """Refuse a knob value a backend does not run (the cuTile kernel's tiles; on the GPU
    architecture, what the registry keeps off it), in the words the backend and the window use,
    before anything is written."""
    from workbench.backends import knob_capability

    capabilities = {knob_capability(name) for name in backends} - {None}
    if not capabilities:
        return
    arch = knob_arch(args)
    for capability in sorted(capabilities):
        values = config.knob_values()
        for problem in knobs.value_violations(values, capability=capability, arch=arch):
            raise ConfigError(problem.field, problem.value, problem.reason)


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


# --- commands -----------------------------------------------------------------------------------


def _timings(args: argparse.Namespace, plan: Any) -> dict[str, Any]:
    """Each planned backend's own timing with the command line's changes (refused here, before
    the database is opened)."""
    return {b.name: timing_from_args(args, b.default_timing()) for b in plan.backends}


def cmd_sweep(args: argparse.Namespace) -> int:
    """One backend: a sweep. Several (--backends): a group on the same inputs, timed
    interleaved. Everything is checked before the database is opened."""
    from workbench.jobs import job_for

    names = args.backends.split(",") if args.backends else [args.backend]
    job = job_for(spec_from_args(args, "reference"), names)
    plan = job.preflight()
    timing = _timings(args, plan)
    with _open_store(_db_of(args)) as store:
        code, group_id, run_ids = _follow(job.run(store, plan=plan, timing=timing))
        if args.json:
            runs = [
                {**store.run(r).to_dict(), "points": [p.to_dict() for p in store.points(r)]}
                for r in sorted(run_ids)
            ]
            _emit_json({"group_id": group_id, "runs": runs})
        else:
            for run_id in sorted(run_ids):
                print(run_id)
    return code


def _follow(events: Any) -> tuple[int, int | None, list[int]]:
    """Print a job's events on stderr as they come. Returns the exit code (1 if a run did not
    complete), the job's group id (None for a sweep) and its run ids."""
    printer = ProgressPrinter()
    code, group_id, run_ids = EXIT_OK, None, []
    for event in events:
        printer(event)
        if isinstance(event, JobStarted):
            group_id = event.group_id
        elif isinstance(event, RunFinished):
            run_ids.append(event.run_id)
            if event.status != "complete":
                code = EXIT_FAILED
    return code, group_id, run_ids


def cmd_runs(args: argparse.Namespace) -> int:
    with _open_store(_db_of(args), create=False) as store:
        runs = store.runs(search=args.search, limit=args.limit)
        if args.json:
            _emit_json([r.to_dict() for r in runs])
            return EXIT_OK
        if not runs:
            print("no runs yet: try `fmha-workbench sweep --backend reference`")
            return EXIT_OK
        rows = [
            [
                str(r.id),
                r.created_at.replace("T", " ")[:19],
                r.backend,
                r.status,
                _seq_summary(r.seq_lens),
                _problem_summary(r),
                r.config.summary_for(r.backend),
                r.label,
            ]
            for r in runs
        ]
        print(
            _table(rows, ["id", "created", "backend", "status", "N", "problem", "config", "label"])
        )
    return EXIT_OK


def _seq_summary(seq_lens: Sequence[int]) -> str:
    return str(seq_lens[0]) if len(seq_lens) == 1 else f"{seq_lens[0]}..{seq_lens[-1]}"


def _problem_summary(run: RunRecord) -> str:
    p = run.problem
    heads = f"{p.heads}/{p.kv_heads}" if p.kv_heads != p.heads else str(p.heads)
    pos = f" +{p.input_pos}" if p.input_pos else ""
    return f"B{p.batch} H{heads} D{p.head_dim} {p.dtype}{pos}"


def cmd_show(args: argparse.Namespace) -> int:
    with _open_store(_db_of(args), create=False) as store:
        run = store.run(args.run)
        points = store.points(run.id)
        if args.json:
            _emit_json({**run.to_dict(), "points": [p.to_dict() for p in points]})
            return EXIT_OK
        print(f"run {run.id}  {run.label}")
        print(f"  status   {run.status}" + (f": {run.error}" if run.error else ""))
        where = run.machine.get("gpu_name") or run.machine.get("hostname", "")
        print(f"  backend  {run.backend}   machine {where}")
        print(f"  problem  {_problem_summary(run)}")
        print(f"  config   {run.config.summary_for(run.backend)}")
        print(f"  created  {run.created_at}   finished {run.finished_at or '-'}")
        if points:
            print(f"  compile  {_compile_summary(points)}")
        rows = [
            [
                str(p.seq_len),
                f"{p.latency_ms:.4f}",
                f"{p.latency_p20_ms:.4f}-{p.latency_p80_ms:.4f}",
                str(p.samples),
                f"{p.tflops:.3f}",
                _fmt(p.rel_err, ".1e"),
                f"{p.blocks_computed}/{p.blocks_masked}/{p.blocks_skipped}",
                f"{p.compile_s:.2f}",
            ]
            for p in points
        ]
        header = [
            "N",
            "median ms",
            "p20-p80 ms",
            "n",
            "TFLOP/s",
            "rel err",
            "blocks c/m/s",
            "compile s",
        ]
        # With autotune the config line above is only nominal: say what each point launched.
        tuned = tuned_labels(run.config.autotune, points)
        if tuned:
            header.append("tuned")
            for row, p in zip(rows, points, strict=True):
                row.append(tuned.get(p.seq_len, "-"))
        if rows:
            print(_table(rows, header))
    return EXIT_OK


def _compile_summary(points: Sequence[Any]) -> str:
    """Compile time of a run in all, and what else was kept apart from it."""
    total = sum(p.compile_s for p in points)
    tune = sum((p.extra or {}).get("tune_s", 0.0) for p in points)
    maps = sum((p.extra or {}).get("block_map_s", 0.0) for p in points)
    timers = sorted({(p.extra or {}).get("timer", "?") for p in points})
    extra = f", autotune {tune:.1f} s" if tune else ""
    extra += f", block maps {maps:.1f} s" if maps else ""
    return f"{total:.1f} s in all ({len(points)} point(s){extra}); timer {', '.join(timers)}"


def cmd_compare(args: argparse.Namespace) -> int:
    with _open_store(_db_of(args), create=False) as store:
        run_ids = list(args.runs)
        if args.group is not None:
            run_ids += [r.id for r in store.group_runs(args.group)]
            if not run_ids:
                raise UsageError(f"group {args.group} has no runs")
        if len(run_ids) < 2:
            raise UsageError("compare: give two or more run ids (or --group G)")
        data = compare_runs(store, run_ids)
        if args.json:
            _emit_json(data)
            return EXIT_OK
        for r in data["runs"]:
            print(f"run {r['id']}: {r['backend']}  {r['config']}  {r['label']}")
        if data["differences"]:
            print(f"careful: the runs solve different problems ({'; '.join(data['differences'])})")
        if data["machines"]:
            print(f"careful: the runs come from different machines ({'; '.join(data['machines'])})")
        header = ["N"]
        for r in data["runs"]:
            header.append(f"#{r['id']} ms")
            if r["id"] != data["base"]:
                header += ["Δ %", f"#{r['id']} vs #{data['base']}"]
        rows = []
        for entry in data["points"]:
            row = [str(entry["seq_len"])]
            for r in data["runs"]:
                cell = entry["runs"][str(r["id"])]
                row.append(_fmt(cell["latency_ms"], ".4f"))
                if r["id"] != data["base"]:
                    # The window's Compare tab prints the same two numbers the same way.
                    row.append(format_delta(cell["delta_pct"]))
                    row.append(format_speedup(cell["speedup_vs_base"], cell["significant"]))
            rows.append(row)
        print(_table(rows, header))
        if any(cell.endswith(" ~") for row in rows for cell in row):
            print("~ within the runs' own noise (p20-p80 half-spreads added, at least 1 %)")
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    with _open_store(_db_of(args), create=False) as store:
        run_ids = list(args.runs or [])
        if args.group is not None:
            run_ids += [r.id for r in store.group_runs(args.group)]
            if not run_ids:
                raise UsageError(f"group {args.group} has no runs")
        for run_id in run_ids:
            store.run(run_id)  # a missing id is refused before the file is touched
        if args.csv == "-":
            import csv

            from workbench.store import export_columns

            rows = list(store.export_rows(run_ids or None))
            writer = csv.DictWriter(
                sys.stdout, fieldnames=list(rows[0]) if rows else export_columns()
            )
            writer.writeheader()
            writer.writerows(rows)
            return EXIT_OK
        count = store.export_csv(args.csv, run_ids or None)
        print(f"wrote {count} row(s) to {args.csv}", file=sys.stderr)
    return EXIT_OK


def cmd_blockmap(args: argparse.Namespace) -> int:
    k_len = args.k_len if args.k_len is not None else args.q_len + args.input_pos
    problem = Problem(q_len=args.q_len, k_len=k_len, input_pos=args.input_pos, heads=1)
    config = KernelConfig(
        tile_m=args.tile_m, tile_n=args.tile_n, mask=args.mask, window=args.window
    )
    schedule = schedule_for(problem, config)
    counts = schedule.counts()
    grid = schedule.block_map
    if args.json:
        _emit_json(
            {
                "q_len": problem.q_len,
                "k_len": problem.k_len,
                "tile_m": config.tile_m,
                "tile_n": config.tile_n,
                "mask": config.mask,
                "input_pos": problem.input_pos,
                "window": config.window,
                "shape": list(grid.shape),
                "counts": counts,
                "legend": {str(int(k)): k.name.lower() for k in BlockKind},
                "map": grid.tolist(),
            }
        )
        return EXIT_OK
    total = grid.size
    print(
        f"{grid.shape[0]}×{grid.shape[1]} blocks: {counts['computed']} computed, "
        f"{counts['masked']} masked, {counts['skipped']} skipped "
        f"({100 * counts['skipped'] / total:.1f} % skipped)"
    )
    if grid.shape[1] <= 120 and grid.shape[0] <= 200:
        symbols = {BlockKind.COMPUTED: "#", BlockKind.MASKED: "m", BlockKind.SKIPPED: "."}
        for row in grid:
            print("".join(symbols[BlockKind(int(c))] for c in row))
        print("# computed   m masked   . skipped")
    return EXIT_OK


def cmd_ladder(args: argparse.Namespace) -> int:
    from workbench.jobs import LadderJob, ladder_defaults
    from workbench.ladder import format_ladder_table, ladder_table, load_ladder

    defaults = ladder_defaults(args.backend)
    problem = Problem(
        batch=args.batch or defaults["batch"],
        heads=args.heads or defaults["heads"],
        kv_heads=args.kv_heads,
        head_dim=args.head_dim or defaults["head_dim"],
        dtype=args.dtype,
    )
    job = LadderJob(
        load_ladder(args.steps, mask=args.mask, window=args.window),
        problem,
        parse_seq_lens(args.seq_lens or defaults["seq_lens"]),
        args.backend,
        args.label,
        args.seed,
    )
    plan = job.preflight()
    timing = _timings(args, plan)
    with _open_store(_db_of(args)) as store:
        code, group_id, _ = _follow(job.run(store, plan=plan, timing=timing))
        table = ladder_table(store, group_id)
    if args.json:
        _emit_json({**table, "published_blackwell": job.ladder.published})
    else:
        rows = format_ladder_table(table)
        print(_table(rows[1:], rows[0]))
    return code


def cmd_report(args: argparse.Namespace) -> int:
    from pathlib import Path

    from workbench.report import build_report, markdown, replace_readme_section

    with _open_store(_db_of(args), create=False) as store:
        report = build_report(store, args.group, args.subject)
    if args.json:
        _emit_json(report)
        return EXIT_OK
    if args.readme:
        path = Path(args.readme)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"--readme: cannot read {path}: {exc.strerror or exc}") from exc
        path.write_text(replace_readme_section(text, markdown(report)), encoding="utf-8")
        print(f"updated the performance table in {path}", file=sys.stderr)
        return EXIT_OK
    if args.markdown:
        sys.stdout.write(markdown(report))
        return EXIT_OK
    subject = report["subject"]
    backends = list(dict.fromkeys(b for g in report["groups"] for b in g["backends"]))
    peers = [b for b in backends if b != subject]
    header = ["mask", "N", *[f"{b} TFLOP/s" for b in backends], *[f"× {b}" for b in peers]]
    rows = [
        [
            r["mask"],
            str(r["seq_len"]),
            *[_fmt(r["tflops"].get(b), ".1f") for b in backends],
            *[
                _fmt(r["speedup"].get(b), ".3f") + ("×" if r["speedup"].get(b) else "")
                for b in peers
            ],
        ]
        for r in report["rows"]
    ]
    print(_table(rows, header))
    print(f"× {subject}'s speed-up over the peer (peer latency / {subject} latency)")
    return EXIT_OK


def cmd_backends(args: argparse.Namespace) -> int:
    from workbench.backends import backend_statuses

    statuses = backend_statuses()
    if args.json:
        _emit_json({n: {"available": s.available, "reason": s.reason} for n, s in statuses.items()})
    else:
        for name, status in statuses.items():
            print(f"{name:12} {'yes' if status.available else 'no ':3}  {status.reason}")
    return EXIT_OK


def knobs_table(arch: str | None) -> dict[str, Any]:
    """The registry as the CLI offers it: every knob with its flag, default and values (the
    cuTile kernel's on ``arch``), the rules between knobs, and what ``arch`` does not run."""
    rows = []
    for knob in knobs.EXPOSED:
        rows.append(
            {
                "knob": knob.name,
                "flag": knob.flag,
                "label": knob.label,
                "default": knob.default,
                "values": list(knob.values),
                "cutile": list(knobs.offered(knob.name, capability=knobs.CUTILE, arch=arch)),
                "rules": knobs.rules_text(knob.name),
                "tunable": knob.tunable,
                "feeds": knob.constant or knob.hint,
                "help": knob.help,
            }
        )
    refused = [
        {
            "knob": rule.field,
            "values": sorted(rule.refuses),
            "reason": rule.message(arch),
            "source": rule.source,
        }
        for rule in knobs.ARCH_RULES
        if arch in rule.archs
    ]
    return {"arch": arch, "knobs": rows, "not_offered": refused}


def cmd_knobs(args: argparse.Namespace) -> int:
    table = knobs_table(knob_arch(args))
    if args.json:
        _emit_json(table)
        return EXIT_OK
    where = f"cutile on {table['arch']}" if table["arch"] else "cutile"

    def shown(name: str, values: list[Any]) -> str:
        return knobs.KNOBS[name].values_text(values) if values else "-"

    rows = [
        [
            r["knob"],
            r["flag"],
            knobs.KNOBS[r["knob"]].text(r["default"]),
            shown(r["knob"], r["values"]),
            shown(r["knob"], r["cutile"]),
            r["rules"],
        ]
        for r in table["knobs"]
    ]
    print(_table(rows, ["knob", "flag", "default", "values", where, "rules"]))
    for refused in table["not_offered"]:
        values = knobs.KNOBS[refused["knob"]].values_text(refused["values"])
        print(f"{refused['knob']} {values}: {refused['reason']}")
    return EXIT_OK


def cmd_gui(args: argparse.Namespace) -> int:
    try:
        from workbench.gui.app import main as gui_main
    except ImportError as exc:
        raise UsageError(
            f"the desktop workbench cannot start ({exc}); install it with "
            "`pip install fmha-workbench` or use a subcommand (see --help)"
        ) from exc
    return gui_main(_db_of(args))


COMMANDS = {
    "gui": cmd_gui,
    "sweep": cmd_sweep,
    "runs": cmd_runs,
    "show": cmd_show,
    "compare": cmd_compare,
    "export": cmd_export,
    "blockmap": cmd_blockmap,
    "ladder": cmd_ladder,
    "report": cmd_report,
    "backends": cmd_backends,
    "knobs": cmd_knobs,
}


def _cli_wording(exc: ConfigError) -> str:
    """The core's refusal in the words of this command line: a missing value names the flag
    that gives it ("window: None is not allowed" tells a user nothing)."""
    if exc.field == "window" and exc.value is None:
        return "mask 'window' needs --window W (each query sees the W most recent keys)"
    return str(exc)


def main(argv: Sequence[str] | None = None) -> int:
    from workbench.backends import UnknownBackend
    from workbench.backends.base import BackendError

    try:
        args = build_parser().parse_args(argv)
        command = args.command or "gui"
        return COMMANDS[command](args)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ConfigError as exc:
        print(f"error: {_cli_wording(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except (UnknownBackend, BackendError, StoreError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `fmha-workbench runs | head`: the reader left; not an error
        sys.stderr.close()
        return EXIT_OK


def entry_point() -> NoReturn:
    sys.exit(main())


if __name__ == "__main__":
    entry_point()
