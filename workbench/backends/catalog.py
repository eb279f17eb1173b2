"""The backends by name, derived from their declarations (:mod:`workbench.backends.declaration`).

Each built-in backend module declares itself (``DECLARATION``); the plugins named on the command
line (:mod:`workbench.backends.plugins`, through ``FMHA_WORKBENCH_PLUGINS`` so the engine child
sees them too) and the ``fmha_workbench.backends`` entry points add theirs, loaded on first use.
The names, which ones compute in the engine child, and loading one all come from here. Backend
modules import CuPy and torch only inside their methods, so declaring never loads them.
"""

from __future__ import annotations

import importlib

from workbench.analysis.resources import register_compiled_backend
from workbench.backends.base import Backend
from workbench.backends.declaration import BackendDeclaration
from workbench.config import KERNEL_KNOBS, MASK_ONLY, TUNED_KNOBS, register_knob_use

# Where the built-in declarations live, in display order.
BUILTIN_MODULES = (
    "workbench.backends.reference",
    "workbench.backends.cutile",
    "workbench.backends.torch_sdpa",
    "workbench.backends.fa4",
    "workbench.backends.flashinfer",
    "workbench.backends.naive",
)


def _register(declaration: BackendDeclaration) -> None:
    """Tell the config how this backend takes its knobs (its summaries and CSV cells follow)."""
    if declaration.tunes:
        use = TUNED_KNOBS
    else:
        use = KERNEL_KNOBS if declaration.kernel_knobs else MASK_ONLY
    register_knob_use(declaration.name, use)
    if declaration.kernel_resources:
        register_compiled_backend(declaration.name)


def _builtin_declarations() -> dict[str, BackendDeclaration]:
    found: dict[str, BackendDeclaration] = {}
    for module_name in BUILTIN_MODULES:
        declared = importlib.import_module(module_name).DECLARATIONS
        found.update({d.name: d for d in declared})
    for declaration in found.values():
        _register(declaration)
    return found


# name -> declaration: the built-ins now, the plugins when first asked (_load_plugins).
_REGISTRY: dict[str, BackendDeclaration] = _builtin_declarations()
_BUILTIN = frozenset(_REGISTRY)
_plugins_loaded = False


def _load_plugins() -> None:
    """Add the plugins' declarations once per process. A broken plugin file raises (the CLI
    checked them before any child started); a broken entry point never hides the others."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    from workbench.backends.plugins import environment_declarations

    for declaration in environment_declarations(frozenset(_REGISTRY)):
        _REGISTRY.setdefault(declaration.name, declaration)
        _register(declaration)


def builtin_names() -> tuple[str, ...]:
    return tuple(n for n in _REGISTRY if n in _BUILTIN)


def forget_plugins() -> None:
    """Drop the plugins' declarations; the next lookup loads them again from the environment
    (the command line changed it, or a test did)."""
    global _plugins_loaded
    for name in [n for n in _REGISTRY if n not in _BUILTIN]:
        del _REGISTRY[name]
    _plugins_loaded = False


def declarations() -> dict[str, BackendDeclaration]:
    """Every backend's declaration, built-ins first, then plugins; in display order."""
    _load_plugins()
    return _REGISTRY


def declaration_of(name: str) -> BackendDeclaration:
    found = declarations().get(name)
    if found is None:
        raise UnknownBackend(name)
    return found


def backend_names() -> tuple[str, ...]:
    return tuple(declarations())


def runs_in_engine(name: str) -> bool:
    """Does backend ``name`` compute in the supervised engine child (GPU backends, plugins)?"""
    found = declarations().get(name)
    return found is not None and found.in_engine


class UnknownBackend(KeyError):
    def __str__(self) -> str:
        return f"no backend {self.args[0]!r}; expected one of {', '.join(backend_names())}"


def load_backend(name: str) -> Backend:
    """The backend called ``name``, computing where it is called (no engine around it)."""
    return declaration_of(name).make()


def __getattr__(attribute: str) -> object:
    # Derived on each read, so a plugin loaded later is listed: the names and the GPU set.
    if attribute == "BACKEND_NAMES":
        return backend_names()
    if attribute == "GPU_BACKENDS":
        return frozenset(n for n, d in declarations().items() if d.in_engine)
    raise AttributeError(attribute)
