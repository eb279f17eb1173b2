"""Plugins: a Python file (``--plugin PATH``) or an installed package (an entry point in the
group ``fmha_workbench.backends``) that declares backends.

A file sets ``BACKENDS`` (or ``BACKEND``) to declarations made with
:func:`workbench.backends.plugin_backend.declare` (or any
:class:`~workbench.backends.declaration.BackendDeclaration`). The command line's files and
``--plugin-knob`` values go into the environment (:mod:`workbench.backends.plugin_env`), so
every child the workbench starts (the engine child that runs a plugin) imports the same files
and sets the same knobs. A wrong declaration is refused at load in one line naming the file and
the field; a broken entry point is listed as unavailable and never hides the built-in backends.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import traceback
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any

from workbench.backends.declaration import BackendDeclaration, DeclarationError, PluginSource
from workbench.backends.declaration import validate as validate_declaration
from workbench.backends.plugin_backend import (
    PluginCallable,
    check_block_map,
    plugin_errors,
    with_source,
)
from workbench.backends.plugin_env import pinned_digests, plugin_paths
from workbench.backends.plugin_errors import one_line

ENTRY_POINT_GROUP = "fmha_workbench.backends"
PLUGIN_FLAG = "--plugin"

# Entry point name -> why it did not load (the `backends` listing shows it as unavailable).
broken_entry_points: dict[str, str] = {}


def _import_error(exc: BaseException, path: Path) -> DeclarationError:
    """The plugin's own failure at import, at the line of its file where it happened."""
    if isinstance(exc, SyntaxError) and exc.lineno is not None:
        return DeclarationError(str(path), f"line {exc.lineno}", f"SyntaxError: {exc.msg}")
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == path]
    where = f"line {frames[-1].lineno}" if frames else "import"
    return DeclarationError(str(path), where, one_line(exc))


def _module_name(path: Path, digest: str) -> str:
    stem = "".join(c if c.isalnum() else "_" for c in path.stem)
    return f"fmha_workbench_plugin_{stem}_{digest[:12]}"


def _import_file(path: Path, digest: str, source: bytes) -> ModuleType:
    """The module of ``source``, the bytes of ``path`` that hashed to ``digest``: compiled from
    them, never from a cached .pyc (an editor's quick re-save keeps the size and the mtime's
    second, all the bytecode cache checks, so it ran the previous version) nor from a second
    read of a file that may have changed since."""
    module_name = _module_name(path, digest)
    if module_name in sys.modules:  # the same bytes loaded already in this process
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise DeclarationError(str(path), PLUGIN_FLAG, "not a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        exec(compile(source, str(path), "exec", dont_inherit=True), module.__dict__)
    except BaseException as exc:
        del sys.modules[module_name]
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            raise
        raise _import_error(exc, path) from exc
    return module


def file_declarations(
    path_text: str, taken: frozenset[str] = frozenset()
) -> list[BackendDeclaration]:
    """The declarations of the plugin file at ``path_text``, checked; ``taken``: names in use."""
    if not path_text.strip():
        raise DeclarationError(PLUGIN_FLAG, "path", "expected a plugin file's path, got none")
    path = Path(path_text).expanduser().resolve()
    if not path.exists():
        raise DeclarationError(path_text, PLUGIN_FLAG, "no such file")
    if path.is_dir():
        init = path / "__init__.py"
        if not init.is_file():
            raise DeclarationError(path_text, PLUGIN_FLAG, "a folder without __init__.py")
        path = init
    if not path.is_file():  # a FIFO or a device would block or never end the read
        raise DeclarationError(path_text, PLUGIN_FLAG, "not a regular file")
    if path.suffix != ".py":
        raise DeclarationError(path_text, PLUGIN_FLAG, "expected a Python file (.py)")
    try:
        source = path.read_bytes()
    except OSError as exc:
        raise DeclarationError(path_text, PLUGIN_FLAG, f"cannot read it: {exc.strerror}") from exc
    digest = hashlib.sha256(source).hexdigest()
    pinned = pinned_digests().get(str(path))
    if pinned and pinned != digest and _module_name(path, pinned) in sys.modules:
        digest = pinned  # the window keeps the version it accepted while the file is refused
    module = _import_file(path, digest, source)
    return module_declarations(module, str(path), PluginSource(str(path), digest), taken)


def module_declarations(
    module: Any, where: str, source: PluginSource, taken: frozenset[str]
) -> list[BackendDeclaration]:
    """What a plugin module (or an entry point's object) declares, checked and stamped with
    its source."""
    if isinstance(module, ModuleType):
        declared: Any = getattr(module, "BACKENDS", getattr(module, "BACKEND", None))
        if declared is None:
            raise DeclarationError(
                where, "BACKENDS", "declares no backend; set BACKENDS = (declare(...),)"
            )
    else:
        declared = module
    items = [declared] if isinstance(declared, BackendDeclaration) else declared
    if not isinstance(items, list | tuple) or not items:
        raise DeclarationError(where, "BACKENDS", "expected one or more declarations")
    found: list[BackendDeclaration] = []
    for item in items:
        validate_declaration(item, where, taken | {d.name for d in found})
        if isinstance(item.factory, PluginCallable):
            for field_name, reason in plugin_errors(item.factory):
                raise DeclarationError(where, field_name, reason)
            check_block_map(item, where)
        found.append(with_source(item, source))
    return found


def _entry_point_source(entry: metadata.EntryPoint) -> PluginSource:
    module = sys.modules.get(entry.module)
    path = getattr(module, "__file__", None) or ""
    try:
        digest = hashlib.sha256(Path(path).read_bytes()).hexdigest() if path else ""
    except OSError:
        digest = ""
    return PluginSource(path, digest, entry_point=f"{entry.name} = {entry.value}")


def entry_point_declarations(taken: frozenset[str]) -> list[BackendDeclaration]:
    """The installed packages' declarations; one that fails is noted in
    :data:`broken_entry_points` and left out."""
    found: list[BackendDeclaration] = []
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            loaded = entry.load()
            names = taken | {d.name for d in found}
            where = f"entry point {entry.name} ({entry.value})"
            found += module_declarations(loaded, where, _entry_point_source(entry), names)
        except Exception as exc:  # a broken package must not take the built-ins down
            broken_entry_points[entry.name] = (
                f"plugin entry point {entry.value} failed to load: {one_line(exc)}"
            )
    return found


def environment_declarations(taken: frozenset[str]) -> list[BackendDeclaration]:
    """The declarations of the environment's plugin files, then of the entry points."""
    found: list[BackendDeclaration] = []
    for path in plugin_paths():
        found += file_declarations(path, taken | {d.name for d in found})
    return found + entry_point_declarations(taken | {d.name for d in found})
