"""A ragged batch's stored block map read per sequence: which rows are whose, what each
sequence's own key blocks hold (the padding right of a short sequence is not work), which split
read each block, and the sentence under the map. No Qt: the window draws what this says."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kernels.schedule import BlockKind, kind_counts


@dataclass(frozen=True)
class RaggedMap:
    """The point's sequences (their stored reads) and the rows of the map each one has."""

    sequences: tuple[Mapping[str, Any], ...]
    starts: tuple[int, ...]  # each sequence's first row
    rows: tuple[int, ...]

    @classmethod
    def of(cls, extra: Mapping[str, Any] | None, grid_rows: int) -> RaggedMap | None:
        """The reading of a point's map, or None for a point that is not a ragged batch (or
        whose rows cannot be told apart: stored before the rows were kept, with a sequence of
        several query blocks)."""
        found = (extra or {}).get("sequences")
        if not isinstance(found, list) or not found or not all(isinstance(s, dict) for s in found):
            return None
        if all(isinstance(s.get("rows"), int) for s in found):
            rows = tuple(int(s["rows"]) for s in found)
        elif len(found) == grid_rows:  # one row a sequence (decode)
            rows = (1,) * len(found)
        else:
            return None
        if sum(rows) != grid_rows:
            return None
        starts = tuple(int(x) for x in np.cumsum((0, *rows[:-1])))
        return cls(tuple(found), starts, rows)

    def sequence_at(self, row: int) -> int:
        """The index (in the batch) of the sequence whose rows hold ``row``."""
        return int(np.searchsorted(np.asarray(self.starts), row, side="right") - 1)

    def _own(self, index: int) -> tuple[slice, slice]:
        start, rows = self.starts[index], self.rows[index]
        return slice(start, start + rows), slice(0, int(self.sequences[index].get("key_blocks", 0)))

    def own_counts(self, grid: np.ndarray) -> dict[str, int]:
        """Blocks of each kind within each sequence's own key blocks."""
        counts = kind_counts(grid[:0, :0])  # every kind, at zero
        for index in range(len(self.sequences)):
            for name, count in kind_counts(grid[self._own(index)]).items():
                counts[name] += count
        return counts

    def most_splits(self) -> int:
        return max((len(s.get("splits") or []) for s in self.sequences), default=0)

    def split_codes(self, grid: np.ndarray) -> np.ndarray:
        """Image codes: s + 1 for a block its sequence's split s read, 0 for one skipped (or
        past the sequence's keys)."""
        codes = np.zeros(grid.shape, dtype=np.uint16)
        for index, seq in enumerate(self.sequences):
            rows, _ = self._own(index)
            for split, (lo, hi) in enumerate(seq.get("splits") or []):
                part = grid[rows, int(lo) : int(hi)]
                codes[rows, int(lo) : int(hi)] = np.where(part != BlockKind.SKIPPED, split + 1, 0)
        return codes

    def split_of(self, row: int, col: int) -> tuple[int, int] | None:
        """(split, of how many) that read block (row, col), or None."""
        splits = self.sequences[self.sequence_at(row)].get("splits") or []
        for split, (lo, hi) in enumerate(splits):
            if int(lo) <= col < int(hi):
                return split, len(splits)
        return None

    def tick_labels(self, most: int) -> list[tuple[int, str]]:
        """``#i`` at each sequence's first row, at most ``most`` of them, evenly picked."""
        step = max(1, -(-len(self.sequences) // max(most, 1)))
        return [(self.starts[i], f"#{i}") for i in range(0, len(self.sequences), step)]

    def sequence_text(self, row: int) -> str:
        """A row's sequence as the tooltip names it: its lengths, pages and wasted tail."""
        index = self.sequence_at(row)
        seq = self.sequences[index]
        queries = int(seq.get("queries", 0))
        text = f"sequence #{index}: {queries:,} quer{'y' if queries == 1 else 'ies'}, "
        text += f"{seq.get('keys', 0):,} keys"
        if seq.get("pages") is not None:
            text += f", {seq['pages']:,} pages (last page's wasted tail {seq['wasted_tokens']:,})"
        if self.rows[index] > 1:
            text += f"; its q-block {row - self.starts[index]}"
        return text

    def summary(self, axis: str, seq_len: int, keys_a_block: int, page_size: int | None) -> str:
        """The sentence under the map."""
        keys = [int(s.get("keys", 0)) for s in self.sequences]
        wasted = sum(int(s.get("wasted_tokens", 0)) for s in self.sequences)
        paged = f", pages of {page_size}" if page_size else ""
        text = (
            f"{axis} = {seq_len:,}: a ragged batch of {len(keys)} sequences, {min(keys):,}–"
            f"{max(keys):,} keys{paged}; a row per query block of each sequence (one KV head), "
            f"key blocks of {keys_a_block}. K+V read at {sum(keys) + wasted:,} positions a KV head"
        )
        text += f", {wasted:,} of them the last pages' wasted tails." if page_size else "."
        if self.most_splits() > 1:
            text += " Colours: the split of its own sequence's key range that read each block."
        return text + " Grey right of a sequence's keys is the picture's padding, not work."
