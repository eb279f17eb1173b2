"""``report`` as text: the peers' table (TFLOP/s, or K+V GB/s for decode, and one backend's
speed-up over the others) with where the time goes, a ladder as steps, and the README's table
replaced in place."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from workbench.cli.database import db_path
from workbench.cli.exit_codes import EXIT_OK
from workbench.cli.output import fmt, one_line, table
from workbench.cli.values import UsageError

# Under a ladder's table, in `ladder` and in `report` of a ladder.
LADDER_RATIOS_NOTE = (
    "prev / base: speed-up over the previous step / the baseline; ~ within the noise: {rule}"
)


def update_readme(args: argparse.Namespace, report: dict[str, Any]) -> int:
    """``report --readme FILE``: the generated table between FILE's markers replaced."""
    from workbench.reports.readme_tables import readme_markers, replace_readme_section
    from workbench.reports.report import markdown
    from workbench.safe_write import UnsafeTarget, check_target, write_bytes_safely

    try:
        path = check_target(args.readme, protected=[db_path(args)])
        if path.exists() and not path.is_file():  # a FIFO or a device: reading could hang
            raise UnsafeTarget("not a regular file")
        text = path.read_text(encoding="utf-8")
    except (UnsafeTarget, ValueError) as exc:  # UnicodeDecodeError: a binary file
        raise UsageError(f"--readme: {args.readme}: {one_line(exc)}") from exc
    except OSError as exc:
        raise UsageError(f"--readme: cannot read {path}: {exc.strerror or exc}") from exc
    updated = replace_readme_section(text, markdown(report), readme_markers(report))
    try:
        write_bytes_safely(path, updated.encode("utf-8"), protected=[db_path(args)])
    except OSError as exc:
        raise UsageError(f"--readme: cannot write {path}: {exc.strerror or exc}") from exc
    print(f"updated the performance table in {path}", file=sys.stderr)
    return EXIT_OK


def print_peer_report(report: dict[str, Any]) -> int:
    """Groups of peers: each backend's TFLOP/s (GB/s of K+V for decode) and the subject's
    speed-up over each peer, per length."""
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
            *[fmt(r[measure].get(b), ".1f") for b in backends],
            *[
                fmt(r["speedup"].get(b), ".3f") + ("×" if r["speedup"].get(b) else "")
                for b in peers
            ],
        ]
        for r in report["rows"]
    ]
    print(table(rows, header))
    print(f"× {subject}'s speed-up over the peer (peer latency / {subject} latency)")
    _print_streaming_fits(report.get("streaming") or [])
    return EXIT_OK


def _print_streaming_fits(fits: list[dict[str, Any]]) -> None:
    """Under a decode report: each backend's fixed cost and streaming rate per group."""
    from workbench.analysis.streaming import COLD_KV_BYTES

    rows = [
        [
            f["problem"], f["mask"], str(f["q_len"]), f["backend"],
            f"{f['fit']['fixed_us']:.1f}", f"{f['fit']['rate_gbs']:.0f}",
            fmt(f["fit"]["read_pct"], ".0f"),
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
        print(table(rows, [*header, "worst residual %"]))
        from workbench.analysis.bandwidth import read_line_text

        for line in dict.fromkeys(tuple(f["read_line"]) for f in fits if f.get("read_line")):
            print(f"a plain read on this machine (one launch): {read_line_text(line)}")
    from workbench.analysis.streaming import wants_a_fit

    missing = [f for f in fits if not f["fit"] and wants_a_fit(f["lengths"])]
    for group in dict.fromkeys(f["group"] for f in missing):
        reason = next(f["reason"] for f in missing if f["group"] == group)
        print(f"no fit for group {group}: {reason}")


def print_ladder_report(report: dict[str, Any]) -> int:
    """A ladder as a ladder: steps, TFLOP/s, × previous and × baseline with their noise."""
    from workbench.jobs.ladder_steps import format_ladder_table

    for ladder in report["ladders"]:
        print(
            f"ladder {ladder['group_id']} {ladder['label']}: {ladder['backend']} on "
            f"{ladder['machine']}, {ladder['problem']}; each step one change on the previous"
        )
        rows = format_ladder_table(ladder)
        print(table(rows[1:], rows[0]))
    print(LADDER_RATIOS_NOTE.format(rule=report["noise_rule"]))
    return EXIT_OK
