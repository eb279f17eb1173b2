"""``fmha-workbench``: the GUI with no subcommand, and a headless CLI over the same core.

Each command opens the store, calls one or two core functions and turns their errors into a
clean exit: 0 on success, 1 when a sweep failed or a write did (a lock, a full disk, stdout), 2
with one line on stderr (and nothing written) for bad input, 130 when interrupted (Ctrl-C), 143
when terminated (SIGTERM, handled like Ctrl-C: the run is stored cancelled with its points).
Reading commands open the database read-only and never change it.
"""

from __future__ import annotations

# isort: split
# First: a Ctrl-C while the rest below imports is a quiet exit 130, not a traceback.
from workbench.cli_signals import Terminated, ignore_stop_signals, stop_signals

# isort: split
import argparse
import dataclasses
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, cast

from kernels import knobs, schedule
from kernels.schedule import BlockKind, cdiv
from workbench import blockmap_text, field_words
from workbench.backends.base import BackendError, decode_form, schedule_for
from workbench.backends.plugin_cli import knob_table, parse_with_plugins, print_plugin_knobs
from workbench.cli_args import (
    UsageError,
    build_parser,
    knob_arch,
    spec_from_args,
    sweep_backend_names,
    timing_from_args,
)
from workbench.cli_checks import check_db_folder, check_report_subject, open_store
from workbench.cli_output import OutputFailed, ReaderLeft, failed, guarded_stdout
from workbench.compare import (
    compare_runs,
    compiled_of,
    format_delta,
    format_speedup,
    machine_name,
    noise_rule,
    point_pct,
    run_ceilings,
)
from workbench.config import (
    AXIS_LABELS,
    K_LEN_AXIS,
    ConfigError,
    KernelConfig,
    Problem,
    parse_seq_lens,
    refuse_first,
)
from workbench.events import JobStarted, RunFinished
from workbench.progress import ProgressPrinter
from workbench.resources import CompiledResources
from workbench.roofline import no_ceiling_reason
from workbench.store import (
    Store,
    StoreError,
    StoreLocked,
    StoreWriteFailed,
    csv_text,
    data_dir_db_path,
    default_db_path,
    env_db_path,
)
from workbench.tuned import tuned_labels

if TYPE_CHECKING:
    from workbench.bandwidth import ReadBandwidth

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED, EXIT_TERMINATED = 0, 1, 2, 130, 143
# A block map of more cells than this (2048 x 2048: 128k x 128k at 64 x 64 tiles) is refused:
# its grid and JSON would take gigabytes and minutes.
MAX_BLOCKMAP_CELLS = 2048 * 2048
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def printable(text: object, *, keep_newlines: bool = False) -> str:
    """``text`` with control characters escaped (ESC, BEL, NUL in a label must not drive the
    terminal); newlines kept where asked (a stored error's trace)."""

    def escape(match: re.Match[str]) -> str:
        char = match.group()
        return char if keep_newlines and char == "\n" else repr(char)[1:-1]

    return _CONTROL.sub(escape, str(text))


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
    for given in (before, after):
        if given is not None and not given.strip():
            raise UsageError("--db: expected a database path, got an empty one")
        if given is not None and "\x00" in given:
            raise UsageError("--db: the path contains a NUL character")
    if before and after and Path(before).expanduser() != Path(after).expanduser():
        raise UsageError(f"--db given twice with different paths ({before!r} and {after!r})")
    return after or before


def _open_store(db: str | None, *, create: bool = True) -> Store:
    """The store, with anything the user must know about opening it (a damaged file set aside,
    a newer schema opened read-only) said on stderr. A command that only reads passes
    ``create=False``: a mistyped path is refused rather than made into an empty database."""
    path = Path(db).expanduser() if db else default_db_path()
    if not create and not path.exists() and not path.is_symlink():
        raise UsageError(
            f"no run database at {path}; check the path, or start one with "
            f"`fmha-workbench sweep --db {path}`"
        )
    if create:
        check_db_folder(db)
    store = open_store(path, read_only=not create)
    if store.notice:
        print(f"note: {store.notice}", file=sys.stderr)
    return store


def _db_path(args: argparse.Namespace) -> Path:
    db = _db_of(args)
    return Path(db).expanduser() if db else default_db_path()


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def _fmt(value: float | None, spec: str = ".3f") -> str:
    return "-" if value is None else format(value, spec)


def _timings(args: argparse.Namespace, plan: Any) -> dict[str, Any]:
    """Each planned backend's own timing with the command line's changes (refused here, before
    the database is opened)."""
    return {b.name: timing_from_args(args, b.default_timing()) for b in plan.backends}


# A decode sweep stated by hand keeps the knobs' defaults, which are the prefill tile form's.
TILE_FORM_DECODE_NOTE = (
    "note: cuTile runs this decode sweep on its prefill tile form (one CTA a query head, the "
    "key range unsplit: 0.12x cuDNN at B=1 k_len 32k on the H200); --pack-gqa --kv-splits "
    "auto --tile-n 128 (256 at D 64), or a --preset, runs its decode kernel"
)


def cmd_sweep(args: argparse.Namespace) -> int:
    """One backend: a sweep. Several (--backends): a group on the same inputs, timed
    interleaved. Everything is checked before the database is opened."""
    from workbench.jobs import job_for
    from workbench.jobs.base import job_names

    names = sweep_backend_names(args)
    if args.backends and len(job_names(names)) < 2:
        raise UsageError(
            f"--backends {args.backends}: a group needs two or more backends (it is what "
            f"`compare --group` reads); for one, use --backend {names[0]}"
        )
    spec = spec_from_args(args, "reference")
    job = job_for(spec, names)
    plan = job.preflight()
    if spec.axis == K_LEN_AXIS and "cutile" in names and not decode_form(spec.config):
        print(TILE_FORM_DECODE_NOTE, file=sys.stderr)
    timing = _timings(args, plan)
    with _open_store(_db_of(args)) as store:
        code, group_id, run_ids = _follow(job, job.run(store, plan=plan, timing=timing))
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


def _follow(job: Any, events: Any) -> tuple[int, int | None, list[int]]:
    """Print a job's events on stderr as they come. Returns the exit code (1 if a run did not
    complete), the job's group id (None for a sweep) and its run ids."""
    printer = ProgressPrinter(job.story)
    code, group_id, run_ids = EXIT_OK, None, []
    try:
        for event in events:
            printer(event)
            if isinstance(event, JobStarted):
                group_id = event.group_id
            elif isinstance(event, RunFinished):
                run_ids.append(event.run_id)
                if event.status != "complete":
                    code = EXIT_FAILED
    finally:
        # Ctrl-C between two events lands here, not in the job: close it while the store is
        # open, so its runs are stored cancelled (left to the garbage collector, they were
        # closed after the store and stayed "running", with a traceback).
        events.close()
    return code, group_id, run_ids


NO_RUNS_YET = "no runs yet: try `fmha-workbench sweep --backend reference`"


def cmd_runs(args: argparse.Namespace) -> int:
    if args.limit < 1:
        raise UsageError(f"--limit {args.limit}: expected 1 or more runs")
    db = _db_of(args)
    if db is None and env_db_path() is None and not data_dir_db_path().exists():
        # A fresh install: no sweep has made the default database yet.
        if args.json:
            _emit_json([])
        else:
            print(NO_RUNS_YET)
        return EXIT_OK
    with _open_store(db, create=False) as store:
        runs = store.runs(search=args.search, limit=args.limit)
        if args.json:
            _emit_json([r.to_dict() for r in runs])
            return EXIT_OK
        if not runs:
            print(NO_RUNS_YET)
            return EXIT_OK
        rows = [
            [
                str(r.id),
                r.created_at.replace("T", " ")[:19],
                r.backend,
                r.status,
                _seq_summary(r.seq_lens, r.axis),
                r.problem.summary(r.axis),
                r.config.summary_for(r.backend),
                r.label,
            ]
            for r in runs
        ]
        header = ["id", "created", "backend", "status", "lengths", "problem", "config", "label"]
        machines = [machine_name(r.machine) for r in runs]
        if len(set(machines)) > 1:  # timings from two machines do not compare: say whose
            header.insert(2, "machine")
            rows = [[*row[:2], name, *row[2:]] for row, name in zip(rows, machines, strict=True)]
        rows = [[printable(cell) for cell in row] for row in rows]
        print(_table(rows, header))
    return EXIT_OK


def _seq_summary(seq_lens: Sequence[int], axis: str = "seq_len") -> str:
    """``N 128..512``, or ``k_len 4096..131072`` for a decode sweep."""
    shown = str(seq_lens[0]) if len(seq_lens) == 1 else f"{seq_lens[0]}..{seq_lens[-1]}"
    return f"{AXIS_LABELS[axis]} {shown}"


def cmd_show(args: argparse.Namespace) -> int:
    with _open_store(_db_of(args), create=False) as store:
        run = store.run(args.run)
        points = store.points(run.id)
        if args.json:
            _emit_json({**run.to_dict(), "points": [p.to_dict() for p in points]})
            return EXIT_OK
        print(f"run {run.id}  {printable(run.label)}")
        error = f": {printable(run.error, keep_newlines=True)}" if run.error else ""
        print(f"  status   {run.status}{error}")
        where = run.machine.get("gpu_name") or run.machine.get("hostname", "")
        print(f"  backend  {printable(run.backend)}   machine {printable(where)}")
        print(f"  problem  {run.problem.summary(run.axis)}")
        print(f"  config   {run.config.summary_for(run.backend)}")
        print(f"  created  {run.created_at}   finished {run.finished_at or '-'}")
        if points:
            print(f"  compile  {_compile_summary(points)}")
        bandwidths = [run.bandwidth(p) for p in points]
        rows = [
            [
                str(p.seq_len),
                f"{p.latency_ms:.4f}",
                f"{p.latency_p20_ms:.4f}-{p.latency_p80_ms:.4f}",
                str(p.samples),
                f"{p.tflops:.3f}",
                _fmt(bw["kv_gbs"], ".1f"),
                _fmt(bw["qo_gbs"], ".2f"),
                _fmt(p.rel_err, ".1e"),
                f"{p.blocks_computed}/{p.blocks_masked}/{p.blocks_skipped}",
                f"{p.compile_s:.2f}",
            ]
            for p, bw in zip(points, bandwidths, strict=True)
        ]
        header = [
            AXIS_LABELS[run.axis],
            "median ms",
            "p20-p80 ms",
            "n",
            "TFLOP/s",
            "K+V GB/s",
            "Q+O GB/s",
            "rel err",
            "blocks c/m/s",
            "compile s",
        ]
        if any(bw["kv_read_pct"] is not None for bw in bandwidths):
            # Where this machine's read bandwidth was measured: how close K+V runs to it.
            header.insert(7, "% of read")
            for row, bw in zip(rows, bandwidths, strict=True):
                row.insert(7, _fmt(bw["kv_read_pct"], ".0f"))
        # The decode form: how many splits of the key range each point ran (auto resolves per
        # point), so the block map's colours can be read against it.
        splits = [schedule.recorded_splits(p.extra or {}) for p in points]
        if any(s is not None for s in splits):
            header.append("splits")
            for row, count in zip(rows, splits, strict=True):
                row.append("-" if count is None else str(count))
        # Where the tuner chose, the config line above is only nominal: say what each point
        # launched.
        tuned = tuned_labels(run.config.tuned, points)
        if tuned:
            header.append("tuned")
            for row, p in zip(rows, points, strict=True):
                row.append(tuned.get(p.seq_len, "-"))
        compiled = [compiled_of(p) for p in points]
        if any(compiled):
            header.append("compiled")
            for row, found in zip(rows, compiled, strict=True):
                row.append(CompiledResources.from_dict(found).short() if found else "-")
        ceilings = run_ceilings(store, [run])[run.id]
        if ceilings is not None:
            header.append("% roof")
            for row, p in zip(rows, points, strict=True):
                row.append(_fmt(point_pct(run, p, ceilings), ".0f"))
        if rows:
            print(_table(rows, header))
            if ceilings is None:
                where = str(run.machine.get("gpu_name") or "")
                print(no_ceiling_reason(where, run.backend))
    return EXIT_OK


def _compile_summary(points: Sequence[Any]) -> str:
    """Compile time of a run in all, and what else was kept apart from it."""
    total = sum(p.compile_s for p in points)
    tune = sum((p.extra or {}).get("tune_s", 0.0) for p in points)
    maps = sum((p.extra or {}).get("block_map_s", 0.0) for p in points)
    timers = sorted({(p.extra or {}).get("timer", "?") for p in points})
    extra = f", {knobs.TUNER.word} {tune:.1f} s" if tune else ""
    extra += f", block maps {maps:.1f} s" if maps else ""
    return f"{total:.1f} s in all ({len(points)} point(s){extra}); timer {', '.join(timers)}"


def cmd_compare(args: argparse.Namespace) -> int:
    with _open_store(_db_of(args), create=False) as store:
        run_ids = list(args.runs)
        if args.group is not None:
            run_ids += [r.id for r in store.group_runs(args.group)]
            if not run_ids:
                raise UsageError(f"group {args.group} has no runs")
        unique = list(dict.fromkeys(run_ids))  # `compare 1 1`: one run, once
        if len(unique) == 1 and len(run_ids) >= 2:
            run = store.run(unique[0])  # a missing id is refused as missing
            raise UsageError(f"compare {run.id} {run.id}: one run twice; give two different runs")
        run_ids = unique
        if len(run_ids) < 2:
            raise UsageError("compare: give two or more run ids (or --group G)")
        data = compare_runs(store, run_ids)
        if args.json:
            _emit_json(data)
            return EXIT_OK
        for r in data["runs"]:
            where = f"  ({r['machine']})" if data["machines"] else ""
            print(f"run {r['id']}: {r['backend']}  {r['config']}  {printable(r['label'])}{where}")
        if data["differences"]:
            print(f"careful: the runs solve different problems ({'; '.join(data['differences'])})")
        if data["machines"]:
            print(f"careful: the runs come from different machines ({'; '.join(data['machines'])})")
        # A decode comparison is about memory: each run's GB/s of K+V beside its latency.
        decode = data["axis"] == K_LEN_AXIS
        header = [AXIS_LABELS.get(data["axis"], "length")]

        def has(key: str, run_id: int) -> bool:
            return any(e["runs"][str(run_id)][key] is not None for e in data["points"])

        for r in data["runs"]:
            header.append(f"#{r['id']} ms")
            if decode:
                header.append(f"#{r['id']} GB/s")
            if r["id"] != data["base"]:
                header += ["Δ %", f"#{r['id']} vs #{data['base']}"]
            if has("pct_of_roofline", r["id"]):
                header.append(f"#{r['id']} % roof")
            if has("compiled", r["id"]):
                header.append(f"#{r['id']} compiled")
        rows = []
        for entry in data["points"]:
            row = [str(entry["seq_len"])]
            for r in data["runs"]:
                cell = entry["runs"][str(r["id"])]
                row.append(_fmt(cell["latency_ms"], ".4f"))
                if decode:
                    row.append(_fmt(cell["kv_gbs"], ".1f"))
                if r["id"] != data["base"]:
                    # The window's Compare tab prints the same two numbers the same way.
                    row.append(format_delta(cell["delta_pct"]))
                    row.append(format_speedup(cell["speedup_vs_base"], cell["significant"]))
                if has("pct_of_roofline", r["id"]):
                    row.append(_fmt(cell["pct_of_roofline"], ".0f"))
                if has("compiled", r["id"]):
                    compiled = cell["compiled"]
                    row.append(CompiledResources.from_dict(compiled).short() if compiled else "-")
            rows.append(row)
        print(_table(rows, header))
        if any(cell.endswith(" ~") for row in rows for cell in row):
            print(f"~ within the noise: {noise_rule()}")
        for reason in dict.fromkeys(r["roofline"] for r in data["runs"] if r["roofline"]):
            print(reason)
        _print_profiles(store, [r["id"] for r in data["runs"]])
    return EXIT_OK


def _print_profiles(store: Store, run_ids: list[int]) -> None:
    """The Nsight Compute metrics of every length that two or more of the runs profiled,
    side by side (`fmha-workbench profile`)."""
    from workbench.ncu import compare_rows

    by_run = {
        run_id: {p.seq_len: (p.extra or {}).get("ncu") for p in store.points(run_id)}
        for run_id in run_ids
    }
    lengths = sorted({n for points in by_run.values() for n, prof in points.items() if prof})
    for n in lengths:
        profiles = [by_run[run_id].get(n) for run_id in run_ids]
        if sum(1 for p in profiles if p) < 2:
            continue
        axes = {store.run(run_id).axis for run_id in run_ids}
        length = AXIS_LABELS.get(axes.pop(), "N") if len(axes) == 1 else "length"
        print(f"\nNsight Compute at {length}={n}:")
        header = ["metric", *[f"#{run_id}" for run_id in run_ids]]
        print(_table(compare_rows(profiles), header))


def cmd_export(args: argparse.Namespace) -> int:
    if not args.csv.strip():
        raise UsageError("--csv: expected a file name (or - for stdout), got an empty one")
    with _open_store(_db_of(args), create=False) as store:
        run_ids = list(args.runs or [])
        if args.group is not None:
            run_ids += [r.id for r in store.group_runs(args.group)]
            if not run_ids:
                raise UsageError(f"group {args.group} has no runs")
        for run_id in run_ids:
            store.run(run_id)  # a missing id is refused before the file is touched
        if args.csv == "-":
            sys.stdout.write(csv_text(list(store.export_rows(run_ids or None))))
            return EXIT_OK
        count = store.export_csv(args.csv, run_ids or None)
        print(f"wrote {count} row(s) to {args.csv}", file=sys.stderr)
    return EXIT_OK


def _resource_archs(text: str | None) -> list[str]:
    from kernels.cubin_resources import ARCH_LIMITS
    from workbench.ladder import local_gpu_arch
    from workbench.resources import OFFLINE_ARCHS

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


def _fill_resources(args: argparse.Namespace) -> int:
    """``resources --runs``: what stored points compiled to, where they were stored without."""
    from workbench.jobs.resources import fill_resources
    from workbench.resources import ResourceService, missing_tools

    path = _db_path(args)
    if not path.exists():
        raise UsageError(f"no run database at {path}; check the path")
    with _open_store(_db_of(args), create=False) as store:
        for run_id in args.runs:
            store.run(run_id)  # a missing id is refused before anything compiles
    why = missing_tools()
    if why:
        raise UsageError(f"cannot compile here: {why}")
    with _open_store(_db_of(args)) as store:
        filled = fill_resources(
            store, args.runs, ResourceService(), lambda line: print(line, file=sys.stderr)
        )
    print(f"stored the compiled resources of {filled} point(s)")
    return EXIT_OK


def _resources_problem(args: argparse.Namespace) -> Problem:
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


def cmd_resources(args: argparse.Namespace) -> int:
    from workbench.resources import ResourceService, missing_tools

    if args.runs:
        return _fill_resources(args)
    if _db_of(args) is not None:
        raise UsageError("--db: only with --runs (a config alone is compiled, not stored)")

    problem = _resources_problem(args)
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
    archs = _resource_archs(args.arch)
    why = missing_tools()
    if why:
        raise UsageError(f"cannot compile here: {why}")
    service = ResourceService()
    found = {arch: service.for_config(problem, config, arch) for arch in archs}
    if args.json:
        _emit_json({arch: res.to_dict() for arch, res in found.items() if res is not None})
    else:
        lengths = (
            f"N={problem.q_len}"
            if args.q_len is None
            else f"q_len={problem.q_len} k_len={problem.k_len}"
        )
        print(f"{config.summary()} · {problem.summary()} {lengths}")
        for res in found.values():
            if res is not None:
                print(res.summary())
                if res.key_block():
                    print(f"  {res.key_block()}")
    failed = any(res is not None and res.error for res in found.values())
    return EXIT_FAILED if failed else EXIT_OK


def _ceilings_line(record: dict[str, Any]) -> str:
    matmul = ", ".join(f"{dtype} {tflops:g}" for dtype, tflops in record["matmul_tflops"].items())
    host = record.get("machine", {}).get("hostname", "?")
    return (
        f"#{record.get('id', '-')} {record['gpu_name']} ({host}, {record['measured_at']}): "
        f"matmul TFLOP/s {matmul}; read {record['read_gbs']:g} GB/s"
    )


def cmd_machine(args: argparse.Namespace) -> int:
    from workbench.roofline import MEASURE_COMMAND, device_lib, measure_ceilings

    if not args.measure:
        with _open_store(_db_of(args), create=False) as store:
            records = store.ceilings()
        if args.json:
            _emit_json(records)
        elif not records:
            print(f"no measured ceilings in this database; `{MEASURE_COMMAND}` on a GPU")
        for record in [] if args.json else records:
            print(printable(_ceilings_line(record)))
        return EXIT_OK
    lib, which = device_lib()
    if lib is None:
        raise UsageError(f"cannot measure the ceilings: {which}")
    from workbench.backends.gpu import gpu_machine_info

    gpu = gpu_machine_info()
    if not gpu.get("gpu_name") and which == "torch":
        import torch

        gpu["gpu_name"] = torch.cuda.get_device_name()
    dtypes = ("float16", "bfloat16") if which == "torch" else ("float16",)
    print(f"measuring {gpu.get('gpu_name', 'the GPU')} with {which} …", file=sys.stderr)
    # One read measurement: the roofline's read ceiling is the figure decode points are a %
    # of, and `bandwidth` measures the same way.
    from workbench import bandwidth

    read = _measured_read(str(gpu.get("gpu_name") or _local_gpu_name()))
    record = measure_ceilings(lib, gpu, read.gbs, read.method, dtypes=dtypes).to_dict()
    with _open_store(_db_of(args)) as store:
        record["id"] = store.add_ceilings(record)
    bandwidth.save_bandwidth(read)
    if args.json:
        _emit_json(record)
    else:
        print(printable(_ceilings_line(record)))
        for name, how in record["method"].items():
            print(f"  {name}: {how}")
    return EXIT_OK


def cmd_roofline(args: argparse.Namespace) -> int:
    from workbench.compare import roofline_points

    with _open_store(_db_of(args), create=False) as store:
        for run_id in args.runs:
            store.run(run_id)  # a missing id is refused in one line
        chart = roofline_points(store, list(dict.fromkeys(args.runs)))
    if args.json:
        _emit_json(chart)
        return EXIT_OK
    ceilings = chart["ceilings"]
    if ceilings:
        print(printable(_ceilings_line(ceilings)))
    else:
        print(chart["reason"])
    rows = [
        [
            f"#{run['run_id']}",
            str(p["seq_len"]),
            f"{p['intensity']:.1f}",
            f"{p['tflops']:.3g}",
            _fmt(p["pct_of_roofline"], ".0f"),
            printable(run["config"]),
        ]
        for run in chart["runs"]
        for p in run["points"]
    ]
    print(_table(rows, ["run", "N", "FLOP/byte", "TFLOP/s", "% roof", "config"]))
    return EXIT_OK


def cmd_profile(args: argparse.Namespace) -> int:
    from workbench.ncu import ProfileRefused, compare_rows, profile_point
    from workbench.ncu_source import summary_rows

    db = _db_path(args)
    with _open_store(_db_of(args), create=False) as store:
        run = store.run(args.run)
        point = next((p for p in store.points(run.id) if p.seq_len == args.seq_len), None)
    if point is None:
        lengths = ", ".join(str(n) for n in run.seq_lens)
        raise UsageError(
            f"--seq-len: run {run.id} has no point at {AXIS_LABELS[run.axis]}={args.seq_len} "
            f"({lengths})"
        )
    try:
        profile = profile_point(run, point, db)
    except ProfileRefused as exc:
        raise UsageError(f"cannot profile: {exc}") from exc
    with _open_store(_db_of(args)) as store:
        store.set_point_extra(run.id, point.seq_len, "ncu", profile.to_dict())
    if args.json:
        _emit_json(profile.to_dict())
        return EXIT_OK
    print(f"run {run.id} at {AXIS_LABELS[run.axis]}={point.seq_len}: {printable(profile.kernel)}")
    print(_table(compare_rows([profile.to_dict()]), ["metric", f"#{run.id}"]))
    if profile.waits is not None:
        loop = profile.waits.key_loop_share
        in_loop = "" if loop is None else f", {loop:.0%} of them in the key loop"
        print(f"where the warps wait ({profile.waits.samples:,} PC samples{in_loop}):")
        print(_table(summary_rows(profile.waits), ["samples", "instruction", "reasons / next"]))
    print(f"report: {profile.report}")
    return EXIT_OK


def cmd_blockmap(args: argparse.Namespace) -> int:
    k_len = args.k_len if args.k_len is not None else args.q_len + args.input_pos
    problem = Problem(
        q_len=args.q_len,
        k_len=k_len,
        input_pos=args.input_pos,
        batch=args.batch,
        heads=args.heads,
        kv_heads=args.kv_heads,
    )
    config = KernelConfig(
        mask=args.mask,
        window=args.window,
        **{name: getattr(args, name) for name in (*schedule.TILE_KNOBS, *schedule.DECODE_KNOBS)},
    )
    layout = schedule_for(problem, config)
    tile_rows, tile_keys = schedule.tile_shape(config.knob_values())
    cells = cdiv(layout.rows, tile_rows) * cdiv(problem.k_len, tile_keys)
    if cells > MAX_BLOCKMAP_CELLS:
        raise UsageError(
            f"blockmap: {problem.q_len}x{problem.k_len} at {tile_rows}x{tile_keys} tiles "
            f"is {cells:,} blocks; at most {MAX_BLOCKMAP_CELLS:,} (use larger tiles or lengths "
            "up to 128k)"
        )
    counts = layout.counts()
    grid = layout.block_map
    split = decode_form(config)
    if args.json:
        data = {
            "q_len": problem.q_len,
            "k_len": problem.k_len,
            **schedule.tile_facts(layout),
            "mask": config.mask,
            "input_pos": problem.input_pos,
            "window": config.window,
            "shape": list(grid.shape),
            "counts": counts,
            "legend": {str(int(k)): k.name.lower() for k in BlockKind},
            "map": grid.tolist(),
        }
        if split:
            # Which split (CTA) reads each block (-1: skipped), and each split's key blocks.
            data.update(schedule.split_layout(layout), splits=layout.split_map.tolist())
        _emit_json(data)
        return EXIT_OK
    total = grid.size
    print(
        f"{grid.shape[0]}×{grid.shape[1]} blocks: {counts['computed']} computed, "
        f"{counts['masked']} masked, {counts['skipped']} skipped "
        f"({100 * counts['skipped'] / total:.1f} % skipped)"
    )
    if split:
        ranges = ", ".join(f"{lo}-{hi - 1}" for lo, hi in layout.split_ranges)
        print(f"{layout.n_splits} split(s) of the key range, key blocks {ranges}")
    for line in blockmap_text.draw(layout, split):
        print(line)
    return EXIT_OK


def cmd_ladder(args: argparse.Namespace) -> int:
    from workbench.compare import noise_rule
    from workbench.jobs import LadderJob, ladder_defaults
    from workbench.ladder import format_ladder_table, ladder_table, load_ladder

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
    job = LadderJob(
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
    plan = job.preflight()
    timing = _timings(args, plan)
    with _open_store(_db_of(args)) as store:
        code, group_id, _ = _follow(job, job.run(store, plan=plan, timing=timing))
        table = ladder_table(store, cast(int, group_id))  # None: refused as no stored ladder
    if args.json:
        _emit_json({**table, "published_blackwell": job.ladder.published})
    else:
        rows = format_ladder_table(table)
        print(_table(rows[1:], rows[0]))
        print(LADDER_RATIOS_NOTE.format(rule=noise_rule()))
    return code


# Under a ladder's table, in `ladder` and in `report` of a ladder.
LADDER_RATIOS_NOTE = (
    "prev / base: speed-up over the previous step / the baseline; ~ within the noise: {rule}"
)


def cmd_report(args: argparse.Namespace) -> int:
    from workbench.report import build_report, markdown, readme_markers, replace_readme_section

    with _open_store(_db_of(args), create=False) as store:
        check_report_subject(store, args.group, args.subject)
        report = build_report(store, args.group, args.subject)
    if args.json:
        _emit_json(report)
        return EXIT_OK
    if args.readme is not None:
        from workbench.safe_write import UnsafeTarget, check_target, write_bytes_safely

        try:
            path = check_target(args.readme, protected=[_db_path(args)])
            if path.exists() and not path.is_file():  # a FIFO or a device: reading could hang
                raise UnsafeTarget("not a regular file")
            text = path.read_text(encoding="utf-8")
        except (UnsafeTarget, ValueError) as exc:  # UnicodeDecodeError: a binary file
            raise UsageError(f"--readme: {args.readme}: {_one_line(exc)}") from exc
        except OSError as exc:
            raise UsageError(f"--readme: cannot read {path}: {exc.strerror or exc}") from exc
        updated = replace_readme_section(text, markdown(report), readme_markers(report))
        try:
            write_bytes_safely(path, updated.encode("utf-8"), protected=[_db_path(args)])
        except OSError as exc:
            raise UsageError(f"--readme: cannot write {path}: {exc.strerror or exc}") from exc
        print(f"updated the performance table in {path}", file=sys.stderr)
        return EXIT_OK
    if args.markdown:
        sys.stdout.write(markdown(report))
        return EXIT_OK
    if report.get("kind") == "ladder":
        return _print_ladder_report(report)
    subject = report["subject"]
    backends = list(dict.fromkeys(b for g in report["groups"] for b in g["backends"]))
    peers = [b for b in backends if b != subject]
    # A decode report reads memory: GB/s of K+V per backend where TFLOP/s are for prefill.
    decode = report["decode"]
    measure, unit = ("kv_gbs", "GB/s") if decode else ("tflops", "TFLOP/s")
    # Groups of different problems: each row says its own (as the markdown table does).
    several = len({r["problem"] for r in report["rows"]}) > 1
    header = [
        *(["problem"] if several else []),
        "mask",
        "k_len" if decode else "N",
        *[f"{b} {unit}" for b in backends],
        *[f"× {b}" for b in peers],
    ]
    rows = [
        [
            *([r["problem"]] if several else []),
            r["mask"],
            str(r["seq_len"]),
            *[_fmt(r[measure].get(b), ".1f") for b in backends],
            *[
                _fmt(r["speedup"].get(b), ".3f") + ("×" if r["speedup"].get(b) else "")
                for b in peers
            ],
        ]
        for r in report["rows"]
    ]
    print(_table(rows, header))
    print(f"× {subject}'s speed-up over the peer (peer latency / {subject} latency)")
    _print_streaming_fits(report.get("streaming") or [])
    return EXIT_OK


def _print_streaming_fits(fits: list[dict[str, Any]]) -> None:
    """Under a decode report: each backend's fixed cost and streaming rate per group."""
    from workbench.streaming import COLD_KV_BYTES

    rows = [
        [
            f["problem"], f["mask"], str(f["q_len"]), f["backend"],
            f"{f['fit']['fixed_us']:.1f}", f"{f['fit']['rate_gbs']:.0f}",
            _fmt(f["fit"]["read_pct"], ".0f"),
            f"{f['fit']['worst_residual_pct']:.1f}" + (" not a line" if f["fit"]["poor"] else ""),
        ]
        for f in fits
        if f["fit"]
    ]  # fmt: skip
    if rows:
        print(
            f"\nwhere the time goes: latency = fixed + K+V bytes / rate, fitted over the lengths "
            f"past {COLD_KV_BYTES // 10**6} MB of K+V"
        )
        header = ["problem", "mask", "q_len", "backend", "fixed µs", "rate GB/s", "% of read"]
        print(_table(rows, [*header, "worst residual %"]))
        from workbench.bandwidth import read_line_text

        for line in dict.fromkeys(tuple(f["read_line"]) for f in fits if f.get("read_line")):
            print(f"a plain read on this machine (one launch): {read_line_text(line)}")
    for group in dict.fromkeys(f["group"] for f in fits if not f["fit"]):
        reason = next(f["reason"] for f in fits if f["group"] == group and not f["fit"])
        print(f"no fit for group {group}: {reason}")


def _print_ladder_report(report: dict[str, Any]) -> int:
    """A ladder as a ladder: steps, TFLOP/s, × previous and × baseline with their noise."""
    from workbench.ladder import format_ladder_table

    for ladder in report["ladders"]:
        print(
            f"ladder {ladder['group_id']} {ladder['label']}: {ladder['backend']} on "
            f"{ladder['machine']}, {ladder['problem']}; each step one change on the previous"
        )
        rows = format_ladder_table(ladder)
        print(_table(rows[1:], rows[0]))
    print(LADDER_RATIOS_NOTE.format(rule=report["noise_rule"]))
    return EXIT_OK


def cmd_import(args: argparse.Namespace) -> int:
    """Runs from another machine's database into this one, each once."""
    from workbench.importer import check_source, import_runs

    source = Path(args.source).expanduser()
    check_source(source)  # refused before this database is made or opened
    with _open_store(_db_of(args)) as store:
        result = import_runs(store, source)
    if args.json:
        _emit_json({"source": str(source), "added": list(result.added), "skipped": result.skipped})
    else:
        print(result.line())
    return EXIT_OK


def cmd_backends(args: argparse.Namespace) -> int:
    from workbench.backends import backend_notes, backend_statuses

    statuses = backend_statuses()
    notes = backend_notes()
    if args.json:
        _emit_json(
            {
                n: {"available": s.available, "reason": s.reason, "notes": notes.get(n, "")}
                for n, s in statuses.items()
            }
        )
    else:
        for name, status in statuses.items():
            print(f"{name:12} {'yes' if status.available else 'no ':3}  {status.reason}")
            if notes.get(name):
                print(f"{'':12}      note: {notes[name]}")
    return EXIT_OK


def cmd_bandwidth(args: argparse.Namespace) -> int:
    """Measure (or with --show, print) this GPU's read bandwidth, kept per GPU in
    ``bandwidth_path()``; every later run on it carries the figure in its machine record."""
    from workbench import bandwidth

    if args.show:
        stored = bandwidth.stored_measurements()
        if args.json:
            _emit_json({"path": str(bandwidth.bandwidth_path()), "gpus": stored})
        elif not stored:
            print(f"no read bandwidth measured yet ({bandwidth.bandwidth_path()})")
        for gpu, entry in stored.items() if not args.json else ():
            line = bandwidth.read_line(bandwidth.machine_bandwidth(gpu))
            said = f"; a read: {bandwidth.read_line_text(line)}" if line else ""
            print(f"{printable(gpu)}: {entry['gbs']:.0f} GB/s{said}, {printable(entry['method'])}")
        return EXIT_OK
    gpu = _local_gpu_name()
    if args.sizes:
        return _bandwidth_by_size(gpu, args.sizes, args.json)
    measured = _measured_read(gpu)
    path = bandwidth.save_bandwidth(measured)
    if args.json:
        _emit_json({**dataclasses.asdict(measured), "path": str(path)})
    else:
        print(f"{gpu}: {measured.gbs:.0f} GB/s streaming read ({measured.method})")
        if measured.fixed_us is not None and measured.line_rate_gbs is not None:
            text = bandwidth.read_line_text((measured.fixed_us, measured.line_rate_gbs))
            print(f"a read of 134–537 MB: {text} (the least a kernel reading its bytes pays)")
        print(f"kept in {path}; runs on this GPU now show K+V GB/s as a % of it", file=sys.stderr)
    return EXIT_OK


def _measured_read(gpu: str) -> ReadBandwidth:
    """This GPU's read: the 2 GiB figure, then the same read at ``READ_LINE_SIZES`` fitted as
    fixed + bytes / rate (kept without the line where the sizes give none)."""
    from workbench import bandwidth
    from workbench.streaming import fit_streaming

    measured = bandwidth.measure_gpu_read_bandwidth(gpu)
    sizes = [bandwidth.measure_gpu_read_bandwidth(gpu, n) for n in bandwidth.READ_LINE_SIZES]
    try:
        fit = fit_streaming([(m.bytes_read, m.bytes_read / m.gbs / 1e6) for m in sizes])
    except ValueError as exc:
        print(f"no fixed cost for the read: {exc}", file=sys.stderr)
        return measured
    return dataclasses.replace(
        measured, fixed_us=round(fit.fixed_us, 2), line_rate_gbs=round(fit.rate_gbs, 1)
    )


def _bandwidth_by_size(gpu: str, sizes: list[int], as_json: bool) -> int:
    """The streaming read at each size, beside the stored (2 GiB) figure: below some size the
    launch and the first bytes' latency, not the memory, set what a kernel can read."""
    from workbench import bandwidth
    from workbench.streaming import COLD_KV_BYTES, fit_streaming
    from workbench.streaming import summary as streaming_summary

    stored = bandwidth.stored_measurements().get(gpu, {}).get("gbs")
    rows = []
    for size in sizes:
        measured = bandwidth.measure_gpu_read_bandwidth(gpu, size)
        us = measured.bytes_read / measured.gbs / 1e3
        share = 100.0 * measured.gbs / stored if stored else None
        rows.append({**dataclasses.asdict(measured), "us": us, "pct_of_stored": share})
        if not as_json:
            of = f"  {share:5.1f} % of {stored:.0f}" if share is not None else ""
            print(
                f"{measured.bytes_read / 1e6:10,.1f} MB  {us:9.1f} µs  {measured.gbs:7.0f} GB/s{of}"
            )
    # The plain read's own fixed cost and rate: the least any kernel reading these bytes pays.
    fit, no_fit = None, ""
    try:
        points = [(r["bytes_read"], r["us"] / 1e3) for r in rows]
        machine = {bandwidth.READ_BANDWIDTH_KEY: stored} if stored else {}
        fit = fit_streaming(points, machine, unit="size", of="")
    except ValueError as exc:
        no_fit = str(exc)
    if as_json:
        _emit_json(
            {
                "gpu": gpu,
                "stored_gbs": stored,
                "sizes": rows,
                "fit": fit.to_dict() if fit else None,
                **({"no_fit": no_fit} if no_fit else {}),
            }
        )
        return EXIT_OK
    said = f"{streaming_summary(fit)} a call" if fit else f"no fit ({no_fit})"
    print(f"fixed + bytes / rate over the sizes past {COLD_KV_BYTES // 10**6} MB: {said}")
    print(f"{printable(gpu)}: {printable(rows[-1]['method'])}", file=sys.stderr)
    return EXIT_OK


def _local_gpu_name() -> str:
    """The GPU's name as its runs' machine records give it, or a refusal without one."""
    from workbench.backends.gpu import cupy_device, gpu_machine_info, torch_device

    if not (cupy_device().available or torch_device().available):
        raise UsageError(
            "bandwidth: no GPU here (the read bandwidth is measured on a GPU with CuPy or "
            f"torch: {cupy_device().reason})"
        )
    name = gpu_machine_info().get("gpu_name")
    if not name:
        raise UsageError("bandwidth: the GPU did not give its name; check nvidia-smi")
    return str(name)


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
    return {"arch": arch, "knobs": rows, "not_offered": refused, "plugin_knobs": knob_table()}


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
    print_plugin_knobs(table["plugin_knobs"])
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
    "resources": cmd_resources,
    "machine": cmd_machine,
    "profile": cmd_profile,
    "roofline": cmd_roofline,
    "backends": cmd_backends,
    "bandwidth": cmd_bandwidth,
    "import": cmd_import,
    "knobs": cmd_knobs,
}


# The problem's fields the core may name, as the flags that set them (tests read it here).
_FIELD_FLAGS = field_words.FIELD_FLAGS


# Options whose value is free text, which may start with '-' ('--label -2+3').
_TEXT_OPTIONS = ("--label", "--search")


def _join_text_values(argv: Sequence[str]) -> list[str]:
    """``--label -2+3`` as ``--label=-2+3``: argparse takes a value starting with '-' for an
    option of its own and refused the label."""
    out: list[str] = []
    items = list(argv)
    i = 0
    while i < len(items):
        following = items[i + 1] if i + 1 < len(items) else ""
        # "--x" after --label is more likely a flag than a label: argparse says what is missing.
        dashed = following.startswith("-") and not following.startswith("--")
        if items[i] in _TEXT_OPTIONS and dashed:
            out.append(f"{items[i]}={items[i + 1]}")
            i += 2
            continue
        out.append(items[i])
        i += 1
    return out


def main(argv: Sequence[str] | None = None) -> int:
    from workbench.backends import UnknownBackend
    from workbench.blas import limit_blas_threads

    limit_blas_threads()  # the window's policy for the reference backend (workbench.blas)
    typed = list(sys.argv[1:] if argv is None else argv)
    try:
        with guarded_stdout():  # a failed write to stdout is one line and exit 1
            args = parse_with_plugins(build_parser(), _join_text_values(typed))
            command = args.command or "gui"
            # SIGTERM stops a command like Ctrl-C; the window's Qt loop has its own way to end.
            with stop_signals(sigterm=command != "gui"):
                return COMMANDS[command](args)
    except (StoreLocked, StoreWriteFailed, OutputFailed) as exc:  # not bad input: failed
        return failed(f"error: {exc}", EXIT_FAILED)
    except (UsageError, UnknownBackend, BackendError, StoreError) as exc:
        return failed(f"error: {exc}", EXIT_USAGE)
    except ConfigError as exc:
        return failed(f"error: {exc.cli_message(typed)}", EXIT_USAGE)
    except Terminated:
        return failed("terminated", EXIT_TERMINATED)
    except KeyboardInterrupt:
        return failed("interrupted", EXIT_INTERRUPTED)
    except (BrokenPipeError, ReaderLeft):  # `fmha-workbench runs | head`: not an error
        sys.stderr.close()
        return EXIT_OK


def entry_point() -> NoReturn:
    code = main()
    ignore_stop_signals()  # Python's shutdown restores SIGINT's default: a late Ctrl-C killed it
    sys.exit(code)


if __name__ == "__main__":
    entry_point()
