"""``blockmap`` for a ragged batch (``--lengths``/``--lengths-file``): per sequence, the pages
its CTAs read and the wasted tail of the last one, its key blocks and the split boundaries
(the reference model, :mod:`workbench.analysis.serving_blocks`), one line a sequence with a bar of
its key blocks; past :data:`MAX_SEQUENCE_ROWS` sequences every k-th is shown, and it says so."""

from __future__ import annotations

import argparse

from kernels import schedule
from kernels.schedule import cdiv
from workbench.analysis.blockmap_text import SPLIT_SYMBOLS
from workbench.analysis.serving_blocks import SequenceRead, sequence_reads
from workbench.batch import parse_lengths, read_lengths_file
from workbench.batch_lengths import CONTIGUOUS, PAGED
from workbench.cli.exit_codes import EXIT_OK
from workbench.cli.output import emit_json
from workbench.cli.serving_flags import DEFAULT_PAGE_SIZE
from workbench.cli.values import UsageError
from workbench.config import KernelConfig, Problem

MAX_SEQUENCE_ROWS = 64
BAR_COLUMNS = 60


def add_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--lengths", help="a ragged batch (as sweep --lengths takes it): per sequence")
    p.add_argument("--lengths-file", help="a ragged batch's lengths from a .csv or .json file")
    p.add_argument("--kv-cache", help="paged (default with --q-len) or contiguous")
    p.add_argument("--page-size", type=int, help=f"tokens a page (default {DEFAULT_PAGE_SIZE})")


def wanted(args: argparse.Namespace) -> bool:
    return args.lengths is not None or args.lengths_file is not None


def run(args: argparse.Namespace) -> int:
    if args.lengths is not None and args.lengths_file is not None:
        raise UsageError("give --lengths or --lengths-file, not both")
    text = args.lengths
    lengths = parse_lengths(text) if text is not None else read_lengths_file(args.lengths_file)
    decode = args.q_len is not None
    kv_cache = args.kv_cache or (PAGED if decode else CONTIGUOUS)
    page_size = args.page_size or (DEFAULT_PAGE_SIZE if kv_cache == PAGED else None)
    problem = Problem(
        heads=args.heads, kv_heads=args.kv_heads, q_len=args.q_len or 1, k_len=1,
        lengths=lengths, varlen=not decode, kv_cache=kv_cache, page_size=page_size,
    )  # fmt: skip
    config = KernelConfig(
        mask=args.mask, window=args.window,
        **{name: getattr(args, name) for name in (*schedule.TILE_KNOBS, *schedule.DECODE_KNOBS)},
    )  # fmt: skip
    reads = sequence_reads(problem, config)
    if args.json:
        emit_json({"problem": problem.summary(), "sequences": [r.to_dict() for r in reads]})
        return EXIT_OK
    for line in draw(problem, config, reads):
        print(line)
    return EXIT_OK


def draw(problem: Problem, config: KernelConfig, reads: list[SequenceRead]) -> list[str]:
    """The header, one line a sequence shown, and the legend."""
    _, block_keys = schedule.tile_shape(config.knob_values())
    widest = max(1, *(r.key_blocks for r in reads))
    group = cdiv(widest, BAR_COLUMNS)
    step = cdiv(len(reads), MAX_SEQUENCE_ROWS)
    lines = [f"{problem.summary()}: per sequence, what its CTAs read (one KV head)"]
    if step > 1:
        lines.append(f"showing one sequence in {step} of {len(reads)} (and the longest)")
    if group > 1:
        lines.append(f"each bar cell is {group} key blocks (the split that reads most of them)")
    longest = max(range(len(reads)), key=lambda b: reads[b].keys)
    for r in reads:
        if r.index % step and r.index != longest:
            continue
        pages = f"{r.pages:>5} pages (tail {r.wasted_tokens:>3})" if r.pages is not None else ""
        splits = ",".join(f"{lo}-{hi - 1}" for lo, hi in r.splits) or "-"
        lines.append(
            f"#{r.index:<4} q {r.queries:>6} k {r.keys:>7}  {pages}  {r.key_blocks:>5} blocks  "
            f"|{_bar(r, widest, group)}|  splits {splits}"
        )
    lines.append(
        f"key blocks of {block_keys} keys; 0-9 a-z: the split that reads the block, '.' past the "
        "sequence's keys; tail: slots of the last page past its keys (read, then masked)"
    )
    return lines


def _bar(read: SequenceRead, widest: int, group: int) -> str:
    owner = ["."] * widest
    for split, (lo, hi) in enumerate(read.splits):
        for block in range(lo, min(hi, read.key_blocks)):
            owner[block] = SPLIT_SYMBOLS[split % len(SPLIT_SYMBOLS)]
    cells = []
    for start in range(0, widest, group):
        chunk = [c for c in owner[start : start + group] if c != "."]
        cells.append(max(set(chunk), key=chunk.count) if chunk else ".")
    return "".join(cells)
