"""One registration per backend (issue 53 item 7): a backend is its declaration, and what the
CLI lists, probes, narrows, isolates and runs is read from it, for our own backends as for a
new one."""

from __future__ import annotations

import ast
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import workbench.backends as backends
from workbench.backends import catalog
from workbench.backends.base import Availability
from workbench.backends.reference import ReferenceBackend
from workbench.config import ConfigError, KernelConfig

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["--heads", "1", "--head-dim", "32", "--seq-lens", "64", "--warmup", "0"]


class Quiet(ReferenceBackend):
    name = "quiet"
    description = "the reference under another name"


def test_one_declaration_makes_a_backend_listed_probed_and_runnable(
    run_cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    probed = []

    def probe() -> Availability:
        probed.append(True)
        return Availability(True, "quiet: probed from its declaration")

    declared = backends.BackendDeclaration(
        "quiet", Quiet.description, Quiet, probe=probe, in_engine=False, notes="a note"
    )
    monkeypatch.setitem(backends._REGISTRY, "quiet", declared)
    listed = json.loads(run_cli("backends", "--json").out)
    assert list(listed)[-1] == "quiet" and probed
    assert listed["quiet"] == {
        "available": True,
        "reason": "quiet: probed from its declaration",
        "notes": "a note",
    }
    swept = run_cli("sweep", "--db", tmp_path / "r.db", "--backend", "quiet", *SMALL)
    assert swept.code == 0, swept.err
    unknown = run_cli("sweep", "--db", tmp_path / "r.db", "--backend", "quieter", *SMALL)
    assert unknown.code == 2 and "quiet" in unknown.err_lines[-1]  # the choices, derived


def test_the_engine_child_runs_what_the_declaration_says_runs_there(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from workbench.backends.isolated import IsolatedBackend

    assert isinstance(backends.get_backend("naive"), IsolatedBackend)
    assert not isinstance(backends.get_backend("reference"), IsolatedBackend)
    assert {n for n, d in backends.declarations().items() if d.in_engine} == backends.GPU_BACKENDS
    moved = backends.BackendDeclaration("quiet", "q", Quiet, in_engine=True)
    monkeypatch.setitem(backends._REGISTRY, "quiet", moved)
    assert isinstance(backends.get_backend("quiet"), IsolatedBackend)
    assert "quiet" in backends.GPU_BACKENDS


def test_the_cutile_kernels_narrowing_comes_from_its_declaration(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kernels import knobs

    cutile = backends.declaration_of("cutile")
    assert backends.offered_values("cutile")["head_dim"] == cutile.capabilities.head_dims
    assert backends.offered_values("cutile")["tile_m"] == knobs.offered(
        "tile_m", capability=knobs.CUTILE
    )
    assert backends.offered_values("reference") == {}
    narrow = backends.BackendDeclaration(
        "quiet", "q", Quiet, capabilities=backends.Capabilities(head_dims=(32,)), in_engine=False
    )
    monkeypatch.setitem(backends._REGISTRY, "quiet", narrow)
    assert backends.offered_values("quiet") == {"head_dim": (32,)}
    # check_offered refuses the cuTile kernel's tiles because its declaration names the
    # registry's capability, and nothing for a backend that names none.
    config = KernelConfig(tile_m=16, tile_n=16)
    with pytest.raises(ConfigError, match="tile_m"):
        backends.check_offered(config, ["cutile"], None)
    backends.check_offered(config, ["quiet"], None)


def test_the_catalog_names_no_backend_itself() -> None:
    """No special case left: the catalog's code holds no backend name; every built-in module
    declares its own."""
    tree = ast.parse((ROOT / "workbench/backends/catalog.py").read_text())
    literals = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)}
    assert not literals & set(catalog.builtin_names())
    for module_name in catalog.BUILTIN_MODULES:
        module = __import__(module_name, fromlist=["DECLARATIONS"])
        for declared in module.DECLARATIONS:
            assert backends.declaration_of(declared.name) is declared


def test_whose_configs_compile_from_our_kernel_is_declared_not_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``kernel_resources``: the backend whose configs compile from this project's kernel
    (``resources``, each point's compiled record) and whose probe names the GPU's arch is the
    one that declares it, not a name the code holds; the analysis and the window read the
    catalog's registration."""
    from workbench.analysis import resources
    from workbench.analysis.resources import compiled_from_registry

    # A copy to register into: nothing is left behind for later tests.
    monkeypatch.setattr(resources, "_compiled_backends", set(resources._compiled_backends))
    assert compiled_from_registry("cutile") and not compiled_from_registry("torch-cudnn")
    tree = ast.parse((ROOT / "workbench/backends/__init__.py").read_text())
    assert "cutile" not in {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)}
    ours = backends.BackendDeclaration("ours", "q", Quiet, in_engine=False, kernel_resources=True)
    monkeypatch.setitem(backends._REGISTRY, "ours", ours)
    catalog._register(ours)
    assert compiled_from_registry("ours")
    seen = {"ours": Availability(True, "ours on NVIDIA H100 (sm_90)")}
    assert backends.gpu_arch(seen) == "sm_90"
    assert backends.gpu_arch({"torch-cudnn": Availability(True, "torch on sm_90")}) is None
