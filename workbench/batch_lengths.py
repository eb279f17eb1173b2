"""A ragged batch's per-sequence lengths as plain numbers: the page sizes there are, how a batch
is named in one line, its hash, its pages and its scaling along a sweep.

Nothing here parses what a user typed (:mod:`workbench.batch` does, raising the boundary's
``ConfigError``), so :mod:`workbench.config` can use it to validate and describe a problem.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

# The page sizes (tokens a page of the paged KV cache) the kernel takes: powers of two 16-256.
PAGE_SIZES = (16, 32, 64, 128, 256)
PAGED = "paged"
CONTIGUOUS = "contiguous"
KV_CACHES = (CONTIGUOUS, PAGED)
# The most sequences a batch may hold (the problem's batch limit).
MAX_SEQUENCES = 4096


def short_size(n: float) -> str:
    """``300``, ``1k``, ``4.1k``, ``32k``, ``1M``: a token count as the summary shows it."""
    for unit, size in (("M", 1 << 20), ("k", 1 << 10)):
        if n >= size:
            text = f"{n / size:.1f}".removesuffix(".0")
            return f"{text}{unit}"
    return f"{round(n)}"


def exact_size(n: int) -> str:
    """``300``, ``3000``, ``1k``, ``32k``, ``1M``: a length as typed, shortened only where the
    short form is exact (3000 is not 2.9k)."""
    for unit, size in (("M", 1 << 20), ("k", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size}{unit}"
    return str(n)


def lengths_summary(lengths: Sequence[int], page_size: int | None, varlen: bool) -> str:
    """``ragged 64× 1k–32k (mean 4.1k) P16``: the kind, the count, the range, the mean and the
    page size (none for a contiguous cache); ``varlen`` for a packed prefill."""
    kind = "varlen" if varlen else "ragged"
    mean = sum(lengths) / len(lengths)
    span = f"{exact_size(min(lengths))}–{exact_size(max(lengths))}"
    page = f" P{page_size}" if page_size else ""
    return f"{kind} {len(lengths)}× {span} (mean {short_size(mean)}){page}"


def lengths_hash(lengths: Sequence[int]) -> str:
    """12 hex digits of the lengths' SHA-256: two runs with the same hash ran the same batch."""
    return hashlib.sha256(",".join(str(n) for n in lengths).encode()).hexdigest()[:12]


def pages_of(length: int, page_size: int) -> int:
    """Pages a sequence of ``length`` tokens takes (the last one possibly part full)."""
    return -(-length // page_size)


def tokens_read(lengths: Sequence[int], page_size: int | None) -> int:
    """Key positions of K (and of V) a batch reads once: its real lengths, or in a paged cache
    whole pages, the last page's wasted tail included (a shared page counts for each sequence
    that reads it)."""
    if page_size is None:
        return sum(lengths)
    return sum(pages_of(n, page_size) * page_size for n in lengths)


def scaled_to(lengths: Sequence[int], longest: int) -> tuple[int, ...]:
    """The batch with its longest sequence at ``longest`` tokens, every other in proportion
    (a non-empty one keeps at least one token, an empty one stays empty): a sweep's point."""
    top = max(lengths)
    if top == longest:
        return tuple(lengths)
    return tuple(0 if n == 0 else max(1, round(n * longest / top)) for n in lengths)


def batch_violation(
    lengths: Sequence[int] | None,
    varlen: bool,
    kv_cache: str,
    page_size: int | None,
    shared_pages: int,
    *,
    q_len: int,
    max_len: int,
) -> tuple[str, Any, str] | None:
    """What is wrong with a problem's batch fields, as (field, value, why), or None: lengths
    of 0 to ``max_len`` (not all 0), a page size of :data:`PAGE_SIZES` for a paged cache only,
    a paged cache for decode only, decode's ``q_len`` queries within the longest sequence."""
    if kv_cache not in KV_CACHES:
        return "kv_cache", kv_cache, f"expected one of {', '.join(KV_CACHES)}"
    if isinstance(shared_pages, bool) or not isinstance(shared_pages, int) or shared_pages < 0:
        return "shared_pages", shared_pages, "expected a whole number of pages, 0 or more"
    if lengths is None:
        for name, value in (("varlen", varlen), ("page_size", page_size)):
            if value:
                return name, value, "needs a ragged batch (lengths per sequence)"
        if kv_cache == PAGED or shared_pages:
            return "kv_cache", kv_cache, "a paged KV cache needs a ragged batch (lengths)"
        return None
    shown = list(lengths)
    if not 1 <= len(shown) <= MAX_SEQUENCES:
        return "lengths", shown, f"expected 1 to {MAX_SEQUENCES} lengths"
    for n in shown:
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= max_len:
            return "lengths", shown, f"a length of {n!r}; expected 0 to {max_len:,} tokens"
    if not any(shown):
        return "lengths", shown, "every sequence is empty (0 tokens): nothing to attend"
    longest = max(shown)
    if kv_cache == PAGED:
        if page_size not in PAGE_SIZES:
            sizes = ", ".join(str(p) for p in PAGE_SIZES)
            return "page_size", page_size, f"expected one of {sizes} (tokens a page)"
        if varlen:
            return (
                "kv_cache",
                kv_cache,
                (
                    "varlen prefill packs K and V end to end (contiguous); a paged cache is read "
                    "by decode against the cache (give the queries a sequence)"
                ),
            )
        if shared_pages > pages_of(longest, page_size):
            return (
                "shared_pages",
                shared_pages,
                (f"the longest sequence has {pages_of(longest, page_size)} pages"),
            )
    elif page_size is not None:
        return "page_size", page_size, "a page size needs kv_cache paged"
    elif shared_pages:
        return "shared_pages", shared_pages, "shared pages need kv_cache paged"
    if not varlen and q_len > longest:
        return (
            "q_len",
            q_len,
            (
                f"a decode's {q_len} queries are each sequence's last tokens; the longest "
                f"sequence has {longest}"
            ),
        )
    return None
