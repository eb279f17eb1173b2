"""FlashInfer (``BatchDecodeWithPagedKVCache``, ``BatchPrefillWithPagedKVCache``), the peer a
serving engineer compares a paged, ragged decode with: declared so that ``backends`` says why it
does not run here, never available.

Why (issue #54, this project's device): ``flashinfer-python`` compiles its kernels just in time
with nvcc and its wheel is 101 MB, while a device call carries 64 MiB and has no network; the
prebuilt kernels of ``flashinfer-cubin`` found in the bundle are sm_100 only, so nothing of it
runs on the H100/H200 without a compiler. A machine with network and nvcc could install it;
this backend does not wrap it (docs/serving.md, "Limits").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from workbench.backends.base import Availability, Backend
from workbench.backends.declaration import BackendDeclaration
from workbench.config import KernelConfig, Problem
from workbench.errors import BackendError

REASON = (
    "not wrapped here: flashinfer-python JIT-compiles with nvcc (a 101 MB wheel; the device "
    "has no network and 64 MiB a call) and flashinfer-cubin's kernels are sm_100 only, so no "
    "FlashInfer figure is measured (docs/serving.md)"
)


class FlashInferBackend(Backend):
    name = "flashinfer"
    description = "FlashInfer paged decode/prefill (not runnable here)"

    def availability(self) -> Availability:
        return Availability(False, REASON)

    def prepare(
        self, problem: Problem, config: KernelConfig, inputs: tuple[Any, ...]
    ) -> Callable[[], Any]:
        raise BackendError(f"flashinfer: {REASON}")


DECLARATIONS = (
    BackendDeclaration(
        name=FlashInferBackend.name,
        label=FlashInferBackend.description,
        factory=FlashInferBackend,
        in_engine=False,
    ),
)
