"""The problem's axes that a backend narrows (head dim, dtype): what the workbench's problems
take, the fewer a backend runs, and their short words. Re-exported by :mod:`kernels.knobs`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ProblemAxis:
    """One dimension of the problem with a fixed set of values (head dim, dtype): what the
    workbench's problems take, the fewer a backend runs (``narrower``), and the short words
    that labels and tables use (``short``)."""

    name: str
    values: tuple[Any, ...]
    narrower: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    short: Mapping[Any, str] = field(default_factory=dict)

    def values_for(self, capability: str | None = None) -> tuple[Any, ...]:
        return self.narrower.get(capability, self.values) if capability else self.values

    def word(self, value: Any) -> str:
        return self.short.get(value, str(value))


# Every multiple of 8 from 32 to 256 (a 16-byte row): the cuTile kernel pads the others to a
# power-of-two tile (kernels.head_dims), so every backend's list is this one.
HEAD_DIM = ProblemAxis("head_dim", tuple(range(32, 257, 8)))
DTYPE = ProblemAxis("dtype", ("float16", "bfloat16"), short={"float16": "fp16", "bfloat16": "bf16"})
DTYPE_ITEMSIZE = {"float16": 2, "bfloat16": 2}
