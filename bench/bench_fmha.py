"""The benchmark: a preset over the workbench's group sweeps, stored where the window opens it.

    python bench/bench_fmha.py --db bench/results/h200.db            # B=4 H=32 D=128, 1k-16k
    python bench/bench_fmha.py --db /tmp/smoke.db --ns 1k,2k --masks causal --rounds 2

For each mask: one group of every backend in ``--backends`` (cuTile autotuned on the registry's
defaults, fast math, the K split and program-id remapping on, the tuner's pick per length; its
peers as they come), all on the same fresh inputs at each length, each checked against float64,
timed together in balanced interleaved rounds by the workbench's one timer (CUDA-graph replay,
``kernels.measure.LaunchSampler``). The runs go to the database; the markdown table
(``--markdown FILE``, and the README's table through ``fmha-workbench report --readme``) is
generated from it. Backends that are not available on this machine are left out with a note, so
a smoke run works without FA4.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kernels import knobs  # noqa: E402
from workbench.backends import get_backend  # noqa: E402
from workbench.config import KernelConfig, Problem, SweepSpec, parse_seq_lens  # noqa: E402
from workbench.jobs import GroupStarted, group_specs, plan_group, run_group  # noqa: E402
from workbench.reports.report import build_report, markdown  # noqa: E402
from workbench.store import Store  # noqa: E402

# In the window's list order, so a benchmark group and a group run from the window time their
# backends in the same sequence of turns.
BACKENDS = ("cutile", "torch-flash", "torch-cudnn", "fa4")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", required=True, help="the database the runs go to")
    ap.add_argument("--ns", default="1k-16k", help="sequence lengths (default 1k-16k)")
    ap.add_argument("--masks", default="causal,none", help="from none, causal, window")
    ap.add_argument("--window", type=int, help="window size, with --masks window")
    ap.add_argument("--backends", default=",".join(BACKENDS), help="the group's backends")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--dtype", default="float16", choices=("float16", "bfloat16"))
    ap.add_argument("--rounds", type=int, default=4, help="interleaved rounds per length")
    ap.add_argument("--label", default="benchmark", help="label prefix of the groups")
    ap.add_argument("--markdown", metavar="FILE", help="write the generated table here too")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    import dataclasses

    args = parse_args(argv)
    names = []
    for name in (n.strip() for n in args.backends.split(",") if n.strip()):
        status = get_backend(name).availability()
        if status.available:
            names.append(name)
        else:
            print(f"note: {name} left out: {status.reason}", file=sys.stderr)
    problem = Problem(
        batch=args.batch, heads=args.heads, kv_heads=args.kv_heads, head_dim=args.dim,
        dtype=args.dtype, q_len=1, k_len=1,
    )  # fmt: skip
    groups = []
    with Store(args.db) as store:
        for mask in (m.strip() for m in args.masks.split(",") if m.strip()):
            # The registry's defaults (fast math, the K split, remapping on), the tuner on.
            config = KernelConfig(
                mask=mask, window=args.window if mask == "window" else None,
                **{knobs.TUNER.name: True},
            )  # fmt: skip
            spec = SweepSpec(problem, parse_seq_lens(args.ns), config, label=args.label)
            plan, backends = plan_group(
                group_specs(spec, names), label=f"{args.label} {mask}".strip()
            )
            for skip in plan.skipped:
                print(f"note: {skip.backend} skips N={skip.seq_len}", file=sys.stderr)
            timings = [
                dataclasses.replace(b.default_timing(), rounds=args.rounds) for b in backends
            ]
            for event in run_group(plan, store, backends=backends, timings=timings):
                if isinstance(event, GroupStarted):
                    groups.append(event.group_id)
                    print(f"group {event.group_id}: {mask}, {', '.join(event.backends)}")
                elif hasattr(event, "point"):
                    p = event.point
                    print(f"  run {p.run_id} N={p.seq_len}: {p.tflops:.1f} TFLOP/s", flush=True)
                elif hasattr(event, "status") and event.status != "complete":
                    print(f"  run {event.run_id} {event.status}: {event.error}", file=sys.stderr)
        table = markdown(build_report(store, groups))
    print(table)
    if args.markdown:
        Path(args.markdown).write_text(table, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
