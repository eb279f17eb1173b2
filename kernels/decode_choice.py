"""When the kernel's front door (the tuner, ``attention``, ``prepare``) takes the decode form by
itself, and what the tuner searches there.

A problem is *bound by reading K and V* when each KV head has few query rows (its group's
heads times ``q_len``, which packing the group makes the rows of one tile) against a long key
range: the tile form then reads every K/V byte once per query head and leaves most SMs idle,
while the decode form (packed heads with the key range split) reads it once per group across
the whole GPU. The decode presets' knobs (``workbench/presets/decode.json``) matched cuDNN on
the H100 (issue #52); the front door now starts from them, and the tuner searches a few
neighbours of the split count the kernel's model picks (:func:`kernels.schedule.
auto_kv_splits`, through :func:`kernels.decode_layout.decode_layout`) instead of the
prefill table.

Knobs are named through the schedule's tuples (the registry's rule: a knob's name stays in a
few files). Pure Python: no cuda.tile, so the CPU tests and the workbench ask the same questions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kernels.decode_layout import decode_layout
from kernels.knobs import KNOBS, KV_SPLIT_COUNTS, LAUNCH, TUNABLE, launch_violations
from kernels.schedule import DECODE_KNOBS, TILE_KNOBS

# The knobs that choose the decode form (split count, packed heads): the tuner searches them
# unless the caller gives one.
DECODE_SEARCHED = DECODE_KNOBS
_SPLITS, _PACKED = DECODE_KNOBS
_ROWS, _KEYS = TILE_KNOBS
# Most packed rows per KV head that still count as decode: one 128-row tile (Llama-3-70B's
# speculative preset packs 8 heads × 16 draft tokens).
DECODE_MAX_ROWS = 128
# Fewest keys that make reading K and V the cost: below this the prefill table is as good.
DECODE_MIN_KEYS = 512
# Bytes of K per key block of the decode form: the decode preset's by_head_dim, the shape that
# read best on the H200 (docs/experiments.md).
DECODE_BLOCK_BYTES = 32 * 1024


def decode_tile_n(head_dim: int) -> int:
    """Keys per block of the decode form at ``head_dim``: 32 KB of bf16 K, a power of two
    between 64 and 256 (D 64 → 256, 128 → 128, 256 → 64)."""
    keys = DECODE_BLOCK_BYTES // (2 * max(head_dim, 1))
    return max(64, min(256, 1 << (max(keys, 1).bit_length() - 1)))


def decode_bound(group: int, q_len: int, k_len: int, mask: str) -> bool:
    """Is the problem bound by reading K and V (few packed rows per KV head, a long key range),
    so that the decode form should run it? Never with a sliding window (the decode form has no
    window kernel)."""
    if mask == "window" or q_len < 1:
        return False
    rows = group * q_len
    return rows <= DECODE_MAX_ROWS and k_len >= max(DECODE_MIN_KEYS, 8 * q_len)


def decode_defaults(head_dim: int) -> dict[str, Any]:
    """The decode presets' knobs: packed heads, the split count auto, 32 KB key blocks."""
    return {_PACKED: True, _SPLITS: None, _KEYS: decode_tile_n(head_dim)}


def _breaks_a_rule(values: Mapping[str, Any], mask: str) -> bool:
    """Would a launch of ``values`` (the rest at their defaults) break a rule of the kernel?"""
    return bool(launch_violations({**LAUNCH, **values}, mask))


def front_door_knobs(
    given: Mapping[str, Any], group: int, q_len: int, k_len: int, head_dim: int, mask: str
) -> dict[str, Any]:
    """The knobs a plain call launches: ``given`` as the caller passed them, plus the decode
    form's (:func:`decode_defaults`) for each the caller left out on a problem that is
    :func:`decode_bound`, unless the caller chose the form (gave a split count or packing) or
    asked for something the decode form cannot run (another grid form), when ``given`` stands
    alone."""
    knobs = dict(given)
    if not decode_bound(group, q_len, k_len, mask):
        return knobs
    if any(name in given for name in DECODE_SEARCHED):
        return knobs
    merged = {**decode_defaults(head_dim), **knobs}
    return knobs if _breaks_a_rule(merged, mask) else merged


def decode_candidates(
    batch: int,
    kv_heads: int,
    group: int,
    q_len: int,
    k_len: int,
    head_dim: int,
    sm_slots: int,
) -> list[dict[str, Any]]:
    """What the tuner times on a decode-bound problem, the decode preset's config first: the
    split count the kernel's model picks (auto) and its neighbours (the explicit counts either
    side of the model's). Each entry sets every tunable knob and the decode ones; ``sm_slots``
    is the CTA slots the launch fills.

    Why no more: on an H100 (2026-12-07, bench/results/h100-front-door-cold.txt and
    h100-decode-beyond.txt) the model's count won 6 of 7 decode shapes and a neighbour the
    seventh, while half-size key blocks and deeper load latencies, timed at all 7, never won
    (a tie within 0.1 % once); each candidate is a compile of several seconds on a cold cache,
    which the host's cores did not share out."""
    tile_rows = KNOBS[_ROWS].default if group * q_len <= 64 else 128
    base = {name: KNOBS[name].default for name in TUNABLE}
    base.update({_ROWS: tile_rows, **decode_defaults(head_dim)})
    # The split count auto resolves to on this GPU (the launch plan resolves it the same way).
    model = decode_layout(
        base,
        batch=batch,
        heads=kv_heads * group,
        kv_heads=kv_heads,
        q_len=q_len,
        k_len=k_len,
        sm_slots=lambda: sm_slots,
    ).splits
    out = [base]

    def add(changes: dict[str, Any]) -> None:
        config = {**base, **changes}
        if config not in out and not _breaks_a_rule(config, "none"):
            out.append(config)

    # The model's cost is coarse where a wave only just fills or only just spills.
    below = [n for n in KV_SPLIT_COUNTS if n < model]
    above = [n for n in KV_SPLIT_COUNTS if n > model]
    for splits in below[-1:] + above[:1]:
        add({_SPLITS: splits})
    return out
