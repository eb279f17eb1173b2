"""The shapes and dtype of one attention problem as the cuTile launches see it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """The shapes and dtype of one attention problem (``lib``: the inputs' array library,
    None for an offline compile)."""

    batch: int
    heads: int
    kv_heads: int
    q_len: int
    k_len: int
    head_dim: int  # Q's and K's
    dtype: str
    lib: str | None = None
    head_dim_v: int | None = None  # V's and the output's (None: head_dim)

    @property
    def value_dim(self) -> int:
        return self.head_dim if self.head_dim_v is None else self.head_dim_v

    @property
    def group(self) -> int:
        return self.heads // self.kv_heads
