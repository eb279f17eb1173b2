"""``sweep``'s ragged-batch flags: ``--lengths``/``--lengths-file`` (the batch as users state
it, :mod:`workbench.batch`), ``--kv-cache``, ``--page-size``, ``--shared-pages``, and the
serving presets (:func:`workbench.problem_presets.serving_presets`).

A ragged batch with ``--q-len`` (or a decode preset) is decode against the cache, swept along
``--k-lens``; without, a varlen prefill, swept along ``--seq-lens``. Either sweep's lengths
are the batch's longest sequence at each point, every other scaled in proportion; given none,
the sweep is the one batch as stated (docs/serving.md).
"""

from __future__ import annotations

import argparse
from typing import Any

from workbench.batch import parse_lengths, read_lengths_file
from workbench.batch_lengths import CONTIGUOUS, KV_CACHES, PAGE_SIZES, PAGED
from workbench.cli.values import UsageError, whole
from workbench.config import K_LEN_AXIS, SEQ_LEN_AXIS, Problem
from workbench.problem_presets import ServingPreset, serving_presets

DEFAULT_PAGE_SIZE = 16
BATCH_FLAGS = ("kv_cache", "page_size", "shared_pages")


def add_batch_flags(p: argparse.ArgumentParser) -> None:
    """The ragged batch's flags, in their own group of ``p``'s help."""
    g = p.add_argument_group("ragged batch (serving)")
    g.add_argument(
        "--lengths",
        metavar="SPEC",
        help="one sequence per length: a list (300,30000,1k; 0 is an empty request), or "
        "lognormal:n=64,mean=4k,max=32k[,min=1,seed=0,sigma=S] or "
        "uniform:n=8,min=1k,max=8k[,seed=0]; with --q-len decode against the cache, without "
        "a varlen prefill (each sequence's queries are its own tokens)",
    )
    g.add_argument(
        "--lengths-file",
        metavar="PATH",
        help="the lengths from a .csv (one a row, or a header naming a column such as "
        "'length') or a .json file (a list, or {\"lengths\": [...]})",
    )
    g.add_argument(
        "--kv-cache",
        help=f"one of {', '.join(KV_CACHES)}: how K and V are held (default {PAGED} for "
        f"decode, {CONTIGUOUS} for a varlen prefill)",
    )
    g.add_argument(
        "--page-size",
        type=whole,
        help=f"tokens a page of the paged cache: one of {', '.join(map(str, PAGE_SIZES))} "
        f"(default {DEFAULT_PAGE_SIZE})",
    )
    g.add_argument(
        "--shared-pages",
        type=whole,
        help="the first N pages of every sequence are one shared prefix (a common system "
        "prompt); default 0, 1 with a serving decode preset",
    )


def serving_preset(args: argparse.Namespace) -> ServingPreset | None:
    return serving_presets().get(args.preset) if args.preset is not None else None


def ragged_axis_and_problem(
    args: argparse.Namespace, given: dict[str, Any], defaults: dict[str, Any]
) -> tuple[str, str, Problem, str] | None:
    """The sweep a ragged batch states (axis, longest lengths as typed, template, mask), or
    None where no flag or preset states one; ``given`` the problem flags typed by hand."""
    preset = serving_preset(args)
    lengths = _lengths(args, preset)
    if lengths is None:
        for name in BATCH_FLAGS:
            if getattr(args, name) is not None:
                flag = "--" + name.replace("_", "-")
                raise UsageError(f"{flag} sets a ragged batch's cache: give --lengths too")
        return None
    if args.batch is not None:
        raise UsageError(
            f"--batch {args.batch}: a ragged batch has one sequence per length "
            f"({len(lengths)} here); leave --batch out"
        )
    if args.input_pos is not None:
        raise UsageError(
            "--input-pos: each sequence of a ragged batch has its own; decode's queries are "
            "its last tokens (--q-len), a varlen prefill's all of them"
        )
    batch = dict(preset.batch) if preset is not None else {}
    q_len = (
        args.q_len if args.q_len is not None else (preset.problem.get("q_len") if preset else None)
    )
    decode = q_len is not None
    kv_cache = _first(args.kv_cache, batch.get("kv_cache"), PAGED if decode else CONTIGUOUS)
    page_size = _first(args.page_size, batch.get("page_size"))
    if page_size is None and kv_cache == PAGED:
        page_size = DEFAULT_PAGE_SIZE
    shared = _first(args.shared_pages, batch.get("shared_pages"), 0)
    fields = {**defaults, **(preset.problem if preset else {}), **{
        k: v for k, v in given.items() if v is not None
    }}  # fmt: skip
    fields.pop("batch", None)
    fields["q_len"] = q_len if decode else 1
    problem = Problem(
        **fields, k_len=1, lengths=lengths, varlen=not decode, kv_cache=kv_cache,
        page_size=page_size, shared_pages=shared,
    )  # fmt: skip
    axis = K_LEN_AXIS if decode else SEQ_LEN_AXIS
    swept, other = (args.k_lens, args.seq_lens) if decode else (args.seq_lens, args.k_lens)
    if other is not None:
        mine, theirs = ("--k-lens", "--seq-lens") if decode else ("--seq-lens", "--k-lens")
        kind = "a decode against the cache" if decode else "a varlen prefill"
        raise UsageError(
            f"{theirs}: {kind} sweeps its longest sequence with {mine}; give that instead"
        )
    mask = _first(args.mask, preset.mask if preset else None, "none")
    return axis, swept if swept is not None else str(problem.k_len), problem, mask


def _lengths(args: argparse.Namespace, preset: ServingPreset | None) -> tuple[int, ...] | None:
    if args.lengths is not None and args.lengths_file is not None:
        raise UsageError("give --lengths or --lengths-file, not both")
    if args.lengths is not None:
        return parse_lengths(args.lengths)
    if args.lengths_file is not None:
        return read_lengths_file(args.lengths_file)
    if preset is not None:
        return parse_lengths(preset.batch["lengths"])
    return None


def _first(*values: Any) -> Any:
    """The first value that was given (not None)."""
    return next((v for v in values if v is not None), None)
