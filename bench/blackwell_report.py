"""Offline resource report of the cuTile FMHA kernel for Blackwell (and sm_90 for reference).

    python bench/blackwell_report.py                            # everything (hours on 2 cores)
    python bench/blackwell_report.py --archs sm_120,sm_100 --head-dims 128 --dtypes float16
    python bench/blackwell_report.py --skip-failed --jobs 2           # resume, the rest
    python bench/blackwell_report.py --render                         # only rewrite the .md

No GPU is needed. Every entry of an architecture's search space (the shipped table, the table
it replaced and the candidates below) is compiled with tileiras for that architecture, for each
head dim, dtype and mask asked for; ``cuobjdump`` reads registers, stack, local and shared
memory and the block size from the cubin, and :func:`kernels.cubin_resources.check_fit` says
whether the kernel fits the architecture's per-block shared memory, its register file and the
occupancy hint, with no spill. Nothing is timed: this says what *can* run, not what is fast.

Results go to ``--out``.json (one record per compile, rewritten after each one, so an
interrupted run keeps what it did and a rerun skips it) and ``--out``.md (a summary per
architecture). ``--skip-failed`` does not compile an entry at further combinations once it has
failed at one for that architecture and head dim (it is out of the table there either way,
and at D = 64/128 out of it altogether); the markdown says
which combinations each entry was compiled at. Run it by hand whenever a table changes; the
CPU test ``tests/test_arch_tables_offline.py`` compiles one entry per table in CI.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kernels.cubin_resources import (  # noqa: E402
    ARCH_LIMITS,
    KB,
    check_config_fit,
    cluster_ctas,
    read_resources,
)
from kernels.knobs import (  # noqa: E402
    CUTILE,
    DTYPE,
    HEAD_DIM,
    launch_violations,
    tuning_label,
)
from kernels.schedule import tile_shape  # noqa: E402
from kernels.tuning_spaces import entry, search_space  # noqa: E402

DEFAULT_OUT = ROOT / "bench" / "results" / "blackwell-offline"
ARCHS = ("sm_120", "sm_121", "sm_100", "sm_103", "sm_90")
HEAD_DIMS = tuple(sorted(HEAD_DIM.values_for(CUTILE), key=lambda d: d != 128))  # 128 first
DTYPES = DTYPE.values
MASKS = ("none", "causal", "window")
# The problem the cubins are compiled for (the benchmark's shape; registers and shared memory
# do not depend on it, the persistent grid's causal form needs whole tiles).
SHAPE = dict(batch=4, heads=32, q_len=4096)

# The entries this report compiles beyond the tables, as data: bench/configs/blackwell/
# candidates.json, each a table entry's tunable knobs (kernels.tuning_spaces.entry fills in the
# defaults and checks them).
_LISTS = json.loads((ROOT / "bench" / "configs" / "blackwell" / "candidates.json").read_text())


def _entries(configs: list[dict[str, Any]]) -> tuple[dict[str, Any], ...]:
    return tuple(entry(c) for c in configs)


# The sm_100 and sm_120 tables as they were before this report (TileGym's, never compiled for
# those targets here): kept so the report shows what the rebuild replaced.
PREVIOUS: dict[str, tuple[dict[str, Any], ...]] = {
    arch: _entries(configs) for arch, configs in _LISTS["previous"].items()
}
PREVIOUS["sm_103"] = PREVIOUS["sm_100"]
PREVIOUS["sm_121"] = PREVIOUS["sm_120"]

# Candidates beyond the tables: the Hopper-style knobs (worker warps, the persistent grid, the
# polynomial exp2, 2-CTA clusters) at tile sizes sized for each SM's shared memory. The
# consumer list in rounds: the first; around what fitted in it (128x64 with 8 worker warps and
# the polynomial, 64x64 at one CTA per SM, the persistent 64x64 grid) and the ladder's
# 256x128; the 256-key tile, which the workbench offered on sm_120 with no compile behind it
# (64 and 128 rows at one CTA per SM, one CTA per tile and the persistent grid, whose causal
# form needs square tiles); and around 64x256, which fitted at D = 64 only. The datacenter
# list: the first round, then the persistent grid without the polynomial (with it, it
# spilled at mask none) on the tiles that fitted in the first.
_CONSUMER = _entries([c for rnd in _LISTS["consumer"] for c in rnd])
_DATACENTER = _entries([c for rnd in _LISTS["datacenter"] for c in rnd])
CANDIDATES: dict[str, tuple[dict[str, Any], ...]] = {
    "sm_120": _CONSUMER,
    "sm_121": _CONSUMER,
    # The Hopper table is the datacenter starting point (same 227 KB per block).
    "sm_100": tuple(search_space("sm_90", 128)) + _DATACENTER,
    "sm_103": tuple(search_space("sm_90", 128)) + _DATACENTER,
    "sm_90": (),
}


def label(cfg: dict[str, Any]) -> str:
    """A config in the registry's label words (:func:`kernels.knobs.tuning_label`)."""
    return tuning_label(cfg)


def _applies(cfg: dict[str, Any], mask: str, head_dim: int) -> bool:
    """Whether search_space would offer ``cfg`` for this mask and head dim (the same rules:
    the kernel's refusals for the mask, the tile area capped at 128x64 from D = 256)."""
    if launch_violations(cfg, mask):
        return False
    return not (head_dim >= 256 and math.prod(tile_shape(cfg)) > 128 * 64)


def entries(arch: str, mask: str, head_dim: int) -> list[tuple[dict[str, Any], list[str]]]:
    """(config, where it comes from) for every entry to compile at this point, deduplicated."""
    seen: dict[str, tuple[dict[str, Any], list[str]]] = {}
    sources = (
        ("table", search_space(arch, head_dim, mask)),
        ("previous", PREVIOUS.get(arch, ())),
        ("candidate", CANDIDATES.get(arch, ())),
    )
    for source, configs in sources:
        for cfg in configs:
            if source != "table" and not _applies(cfg, mask, head_dim):
                continue
            key = json.dumps(cfg, sort_keys=True)
            seen.setdefault(key, (dict(cfg), []))[1].append(source)
    return list(seen.values())


def job_key(job: dict[str, Any]) -> str:
    return json.dumps([job["arch"], job["dtype"], job["head_dim"], job["mask"], job["config"]],
                      sort_keys=True)  # fmt: skip


def compile_one(job: dict[str, Any]) -> dict[str, Any]:
    """Compile one job and read its resources (runs in a worker process)."""
    from kernels.cutile.compile import compile_cubin

    cfg = job["config"]
    t0 = time.perf_counter()
    record = dict(job)
    try:
        cubin = compile_cubin(
            arch=job["arch"], dtype=job["dtype"], head_dim=job["head_dim"], mask=job["mask"],
            **SHAPE, **cfg,
        )  # fmt: skip
    except Exception as exc:  # a compile failure is a result, not a crash
        record.update(compiled=False, error=f"{type(exc).__name__}: {str(exc)[:400]}")
        record["seconds"] = round(time.perf_counter() - t0, 1)
        record["problems"] = ["does not compile"]
        return record
    record["seconds"] = round(time.perf_counter() - t0, 1)
    res = read_resources(cubin)
    record.update(compiled=True, resources=res.to_dict())
    record["problems"] = check_config_fit(res, ARCH_LIMITS[job["arch"]], cfg)
    return record


def plan(args: argparse.Namespace) -> list[dict[str, Any]]:
    jobs = []
    for arch in args.archs:
        for head_dim in args.head_dims:
            for dtype in args.dtypes:
                for mask in args.masks:
                    for cfg, sources in entries(arch, mask, head_dim):
                        if args.only and not set(sources) & set(args.only):
                            continue
                        if args.entries and label(cfg) not in args.entries:
                            continue
                        jobs.append(
                            dict(arch=arch, dtype=dtype, head_dim=head_dim, mask=mask,
                                 config=cfg, label=label(cfg), sources=sources)
                        )  # fmt: skip
    return jobs


def load(path: Path) -> dict[str, dict[str, Any]]:
    if not path.exists():
        return {}
    data = json.loads(path.read_text())
    return {job_key(r): r for r in data["results"]}


def save(path: Path, results: dict[str, dict[str, Any]]) -> None:
    from kernels.cutile.diagnostics import tileiras_version

    ordered = sorted(
        results.values(),
        key=lambda r: (r["arch"], r["head_dim"], r["dtype"], r["mask"], r["label"]),
    )
    meta = {
        "tileiras": tileiras_version(),
        "shape": SHAPE,
        "limits": {a: vars(lim) for a, lim in ARCH_LIMITS.items()},
        "note": "offline compiles only; nothing was timed on Blackwell hardware",
    }
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"meta": meta, "results": ordered}, indent=1) + "\n")
    tmp.replace(path)


def _entry_key(r: dict[str, Any]) -> tuple[str, int, str]:
    return (r["arch"], r["head_dim"], json.dumps(r["config"], sort_keys=True))


def failed_entries(results: dict[str, dict[str, Any]]) -> set[tuple[str, int, str]]:
    """(arch, head dim, config) of every entry that failed at some point there."""
    return {_entry_key(r) for r in results.values() if r["problems"]}


def run(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    json_path = args.out.with_suffix(".json")
    results = load(json_path)
    todo = [j for j in plan(args) if job_key(j) not in results]
    if args.skip_failed:
        bad = failed_entries(results)
        todo = [j for j in todo if _entry_key(j) not in bad]
    # Clusters compile slowest (minutes each on 2 cores): the rest first, so a cut-short run
    # has covered the most entries.
    todo.sort(key=lambda j: (args.archs.index(j["arch"]), cluster_ctas(j["config"]) > 1))
    print(f"{len(todo)} compiles to do ({len(results)} already in {json_path})", flush=True)
    if not todo:
        return results
    os.environ.setdefault("CUDA_TILE_COMPILER_TIMEOUT_SEC", str(args.timeout))
    t0 = time.perf_counter()
    ctx = mp.get_context("spawn")
    with ctx.Pool(args.jobs) as pool:
        for i, record in enumerate(pool.imap(compile_one, todo), 1):
            results[job_key(record)] = record
            save(json_path, results)
            res = record.get("resources") or {}
            print(
                f"[{i}/{len(todo)} {time.perf_counter() - t0:.0f}s] {record['arch']} "
                f"{record['dtype']} d{record['head_dim']} {record['mask']:6} "
                f"{record['label']:32} REG {res.get('registers', '-')} STACK "
                f"{res.get('stack', '-')} SHARED {res.get('shared', '-')} "
                f"{'; '.join(record['problems']) or 'ok'}",
                flush=True,
            )
    return results


_DT = DTYPE.short


def _kb(n: int) -> str:
    return f"{n / KB:.1f}"


def render(results: dict[str, dict[str, Any]]) -> str:
    """The markdown summary: per architecture, one row per entry over every point compiled."""
    from kernels.tuning_spaces import SEARCH_SPACES

    by_arch: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in results.values():
        by_arch[r["arch"]].append(r)
    tileiras = None
    try:
        from kernels.cutile.diagnostics import tileiras_version

        tileiras = tileiras_version()
    except Exception:
        pass
    out = [
        "# Offline resource report: the cuTile FMHA kernel on Blackwell (sm_90 for reference)",
        "",
        f"Generated by `bench/blackwell_report.py` (tileiras {tileiras}, cuda-tile 1.7.0, "
        "cuobjdump 13.4.92). **Offline compiles only: nothing here was timed, and nothing was "
        "run on Blackwell hardware.** Each row is one search-space entry; its columns are "
        "the worst case over the points (dtype × head dim × mask) it was compiled at. "
        "A point *fits* when it compiles, has no stack or local memory (no spill), its "
        "shared memory is within the per-block limit, its registers × threads within the "
        "register file, and the SM can keep the blocks its occupancy hint asks for.",
        "",
        "| arch | shared per block | shared per SM | registers per SM | threads per SM |",
        "|---|---|---|---|---|",
    ]
    for arch, lim in ARCH_LIMITS.items():
        out.append(
            f"| {arch} | {_kb(lim.shared_per_block)} KB | {_kb(lim.shared_per_sm)} KB | "
            f"{lim.regs_per_sm} | {lim.threads_per_sm} |"
        )
    for arch in ARCHS:
        rows = by_arch.get(arch)
        if not rows:
            continue
        points = sorted({(r["dtype"], r["head_dim"], r["mask"]) for r in rows})
        shipped = {json.dumps(c, sort_keys=True) for c in SEARCH_SPACES.get(arch, ())}
        out += ["", f"## {arch}", ""]
        dims = sorted({p[1] for p in points})
        dts = sorted({p[0] for p in points})
        masks = sorted({p[2] for p in points})
        out.append(
            f"Compiled at {len(points)} points: dtypes {', '.join(dts)}; head dims "
            f"{', '.join(map(str, dims))}; masks {', '.join(masks)}; {len(rows)} compiles."
        )
        groups = (
            ("Head dims up to 128", [r for r in rows if r["head_dim"] < 256], shipped),
            (
                "Head dim 256 (its own space on Blackwell)",
                [r for r in rows if r["head_dim"] >= 256],
                {json.dumps(c, sort_keys=True) for c in search_space(arch, 256)},
            ),
        )
        for title, group, shipped in groups:
            if not group:
                continue
            out += ["", f"### {title}"]
            out += [
                "",
                "| entry | in table | source | points fit / compiled | REG | STACK B | SHARED KB "
                "| threads | why not |",
                "|---|---|---|---|---|---|---|---|---|",
            ]
            by_cfg: dict[str, list[dict[str, Any]]] = defaultdict(list)
            for r in group:
                by_cfg[json.dumps(r["config"], sort_keys=True)].append(r)
            order = sorted(by_cfg, key=lambda k: (k not in shipped, by_cfg[k][0]["label"]))
            kept = dropped = 0
            for key in order:
                rs = by_cfg[key]
                ok = [r for r in rs if not r["problems"]]
                res = [r["resources"] for r in rs if r.get("resources")]
                sources = sorted({s for r in rs for s in r["sources"]} - {"table"})
                why: dict[str, list[str]] = defaultdict(list)
                for r in rs:
                    for p in r["problems"]:
                        short = p.split(" (")[0] if "spill" in p else p
                        if "stack" in short:
                            short = "stack (spill)"
                        elif "local" in short:
                            short = "local memory (spill)"
                        elif "shared memory" in short:
                            short = "shared memory > per-block limit"
                        why[short].append(f"{_DT[r['dtype']]} d{r['head_dim']} {r['mask']}")
                why_text = "; ".join(
                    f"{k} ({len(v)}: {', '.join(sorted(v)[:3])}{'…' if len(v) > 3 else ''})"
                    for k, v in why.items()
                )
                in_table = key in shipped
                if in_table:
                    kept += 1
                else:
                    dropped += 1

                def span(field: str, rs: list[dict[str, int]] = res) -> str:
                    vals = [x[field] for x in rs]
                    if not vals:
                        return "-"
                    lo, hi = min(vals), max(vals)
                    if field == "shared":
                        return _kb(lo) if lo == hi else f"{_kb(lo)}–{_kb(hi)}"
                    return str(lo) if lo == hi else f"{lo}–{hi}"

                out.append(
                    f"| {rs[0]['label']} | {'yes' if in_table else 'no'} | "
                    f"{', '.join(sources) or '-'} | {len(ok)} / {len(rs)} | {span('registers')} | "
                    f"{span('stack')} | {span('shared')} | {span('threads')} | "
                    f"{why_text or ('-' if in_table else 'fits; not chosen (docs/blackwell.md)')} |"
                )
            out += ["", f"{kept} entries in the shipped space, {dropped} compiled and left out."]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)

    def csv(kind: type) -> Any:
        return lambda s: tuple(kind(x) for x in s.split(",") if x)

    p.add_argument("--archs", type=csv(str), default=ARCHS)
    p.add_argument("--head-dims", type=csv(int), default=HEAD_DIMS)
    p.add_argument("--dtypes", type=csv(str), default=DTYPES)
    p.add_argument("--masks", type=csv(str), default=MASKS)
    p.add_argument(
        "--only", type=csv(str), default=(),
        help="compile only entries from these sources: table, previous, candidate",
    )  # fmt: skip
    p.add_argument(
        "--entries", type=csv(str), default=(),
        help="compile only these entries, by label (e.g. '128x64 ww8 poly16,64x64 occ1')",
    )  # fmt: skip
    p.add_argument("--jobs", type=int, default=1, help="compile processes (default 1)")
    p.add_argument("--timeout", type=int, default=300, help="seconds per compile")
    p.add_argument("--skip-failed", action="store_true",
                   help="skip an entry on an arch and head dim once it failed there")  # fmt: skip
    p.add_argument("--render", action="store_true", help="only rewrite the markdown")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="path without suffix")
    args = p.parse_args(argv)
    for arch in args.archs:
        if arch not in ARCH_LIMITS:
            p.error(f"no limits for {arch}: add it to kernels/cubin_resources.ARCH_LIMITS")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    results = load(args.out.with_suffix(".json")) if args.render else run(args)
    args.out.with_suffix(".md").write_text(render(results))
    print(f"wrote {args.out.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
