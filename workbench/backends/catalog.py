"""The backends by name: which module holds each, which touch the GPU, and loading one.

The package's face (:mod:`workbench.backends`) wraps the GPU ones in the crash-isolating engine;
the engine child loads them from here unwrapped. Each entry is imported only when loaded.
"""

from __future__ import annotations

import importlib

from workbench.backends.base import Backend

# name -> "module:Class", in display order.
_REGISTRY = {
    "reference": "workbench.backends.reference:ReferenceBackend",
    "cutile": "workbench.backends.cutile:CutileBackend",
    "torch-flash": "workbench.backends.torch_sdpa:TorchFlashBackend",
    "torch-cudnn": "workbench.backends.torch_sdpa:TorchCudnnBackend",
    "fa4": "workbench.backends.fa4:FlashAttention4Backend",
    "naive": "workbench.backends.naive:NaiveCupyBackend",
}
# These touch the GPU: by default they run in the supervised engine process.
GPU_BACKENDS = frozenset({"cutile", "torch-flash", "torch-cudnn", "fa4", "naive"})
BACKEND_NAMES = tuple(_REGISTRY)


class UnknownBackend(KeyError):
    def __str__(self) -> str:
        return f"no backend {self.args[0]!r}; expected one of {', '.join(BACKEND_NAMES)}"


def load_backend(name: str) -> Backend:
    """The backend called ``name``, computing where it is called (no engine around it)."""
    if name not in _REGISTRY:
        raise UnknownBackend(name)
    module_name, class_name = _REGISTRY[name].split(":")
    return getattr(importlib.import_module(module_name), class_name)()
