"""Loading a plugin file while the workbench runs: the window's "Add kernel…" and its reload
when the file is saved. No Qt here.

:func:`check_file` imports the file in a child process of its own first, so a plugin whose
import crashes or hangs ends only that child; :func:`take` then adds what it declares to this
process's catalog and pins that version (its SHA-256) in the environment, which the engine
child follows (:mod:`workbench.backends.isolated`). A later save that fails to import or whose
declaration is refused is never taken: the pinned version stays loaded here and in the engine
child, and the user sees the one line of why (the file, the line in it, the error).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from workbench.backends.catalog import builtin_names, declarations, forget_plugins
from workbench.backends.declaration import DeclarationError
from workbench.backends.plugin_env import ENV_PINS, ENV_PLUGINS, pinned_digests, plugin_paths
from workbench.backends.plugins import PLUGIN_FLAG, file_declarations
from workbench.errors import BackendError
from workbench.run.engine import Engine, EngineFailure

CHECK_TIMEOUT_S = 120.0  # an import that takes longer is taken for a hang (torch loads in ~10 s)


@dataclass(frozen=True)
class PluginVersion:
    """One version of a plugin file that loaded and whose declarations were accepted."""

    path: str  # absolute
    sha256: str
    names: tuple[str, ...]  # the backends it declares


def resolved(path_text: str) -> str:
    return str(Path(path_text).expanduser().resolve())


def names_taken_by_others(path: str) -> frozenset[str]:
    """The backend names a plugin file at ``path`` may not use: the built-ins' and those of
    the other plugins loaded here (its own earlier version's are free to reuse)."""
    others = {
        name
        for name, declared in declarations().items()
        if declared.source is not None and declared.source.path != path
    }
    return frozenset(builtin_names()) | others


def child_check(path: str, taken: frozenset[str]) -> tuple[str, tuple[str, ...]] | BackendError:
    """In the checking child: import ``path`` and check its declarations; (its SHA-256, the
    names it declares), or the refusal as data."""
    try:
        found = file_declarations(path, taken)
    except BackendError as exc:
        return exc
    source = found[0].source
    return (source.sha256 if source is not None else ""), tuple(d.name for d in found)


def checking_engine(timeout_s: float = CHECK_TIMEOUT_S) -> Engine:
    """The child a plugin file is first imported in (:meth:`Engine.kill` ends a check)."""
    return Engine(timeout_s, name="fmha-plugin-check", label="the plugin's import")


def check_file(path_text: str, engine: Engine | None = None) -> PluginVersion:
    """Import the plugin file ``path_text`` in a child of its own (``engine``, else a new
    :func:`checking_engine`) and check what it declares. Raises a BackendError of one line (a
    DeclarationError naming the file and the field, the line of the file where its import
    failed, or how its import ended the child) when it cannot be used."""
    if not path_text.strip():
        raise DeclarationError(PLUGIN_FLAG, "path", "expected a plugin file's path, got none")
    path = resolved(path_text)
    taken = names_taken_by_others(path)
    engine = engine or checking_engine()
    try:
        answer = engine.call("workbench.backends.plugin_reload:child_check", path, taken)
    except EngineFailure as exc:
        if exc.died:
            how = f"exit code {exc.exitcode}" if exc.exitcode is not None else "no exit code"
            raise BackendError(f"{path}: its import ended the process ({how})") from None
        first = str(exc).splitlines()[0] if str(exc) else "it failed"
        raise BackendError(f"{path}: {first}") from None
    finally:
        engine.close()
    if isinstance(answer, BackendError):
        raise answer
    digest, names = answer
    return PluginVersion(path, digest, names)


def take(version: PluginVersion) -> None:
    """Load ``version`` into this process's catalog and pin it for the engine child. Should the
    import here fail where the child's passed, the plugins are left as they were and the
    refusal is raised."""
    before = {name: os.environ.get(name) for name in (ENV_PLUGINS, ENV_PINS)}
    paths = plugin_paths()
    if version.path not in paths:
        paths.append(version.path)
    pins = {**pinned_digests(), version.path: version.sha256}
    os.environ[ENV_PLUGINS] = os.pathsep.join(paths)
    os.environ[ENV_PINS] = json.dumps(pins)
    forget_plugins()
    try:
        declarations()
    except BackendError:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        forget_plugins()
        raise


def loaded_version(path_text: str) -> str | None:
    """The SHA-256 of the version of ``path_text`` loaded now (None: not loaded)."""
    return pinned_digests().get(resolved(path_text))


def pin_loaded_files() -> list[str]:
    """Pin the plugin files this process loaded from the command line (``--plugin``) at the
    version it loaded, so the window can watch them as it does those it adds; their paths."""
    loaded = {
        d.source.path: d.source.sha256
        for d in declarations().values()
        if d.source is not None and d.source.path in plugin_paths() and not d.source.entry_point
    }
    if loaded:
        os.environ[ENV_PINS] = json.dumps({**loaded, **pinned_digests()})
    return list(loaded)
