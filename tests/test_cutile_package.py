"""The kernel package's own promises, checked on the CPU.

- Every ``@kernel`` in ``kernels/cutile/device*.py`` reads each parameter it declares, and
  unpacks each grouped constant in the order it declares its items.
- A launch's argument tuple and the offline compile's signature are built from one
  declaration, the kernel's signature: same length, same order, same kind per position.
- The parts the CPU workbench uses (``arrays``, ``diagnostics``) import without cuda.tile,
  torch or CuPy, and the workbench uses them instead of copies of its own.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "kernels" / "cutile"
DEVICE_FILES = sorted(PACKAGE.glob("device*.py"))


# --------------------------------------------------------------------------------------------
# No parameter a kernel does not read (source only: no cuda.tile needed)
# --------------------------------------------------------------------------------------------


def _is_kernel_decorator(node: ast.expr) -> bool:
    """``@kernel`` (the package's, which keeps the signature readable) or ``@ct.kernel``."""
    target = node.func if isinstance(node, ast.Call) else node
    if isinstance(target, ast.Name):
        return target.id == "kernel"
    return isinstance(target, ast.Attribute) and target.attr == "kernel"


def kernel_functions(source: str) -> list[ast.FunctionDef]:
    tree = ast.parse(source)
    return [
        node
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and any(map(_is_kernel_decorator, node.decorator_list))
    ]


def _read_names(function: ast.FunctionDef) -> set[str]:
    return {
        node.id
        for statement in function.body
        for node in ast.walk(statement)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
    }


def unpacked(function: ast.FunctionDef) -> dict[str, list[str]]:
    """The parameters the body unpacks (``A, B, _ = PARAM``), with the names bound, in order."""
    declared = {a.arg for a in function.args.args}
    return {
        statement.value.id: [ast.unparse(t) for t in statement.targets[0].elts]
        for statement in function.body
        if isinstance(statement, ast.Assign)
        and isinstance(statement.value, ast.Name)
        and statement.value.id in declared
        and isinstance(statement.targets[0], ast.Tuple)
    }


def unread_parameters(function: ast.FunctionDef) -> list[str]:
    """The parameters, and the items unpacked from them, that no expression in the body reads
    (docstrings and comments do not count; ``_`` is an item left unread on purpose)."""
    declared = [a.arg for a in function.args.args + function.args.kwonlyargs]
    items = [name for names in unpacked(function).values() for name in names if name != "_"]
    read = _read_names(function)
    return [name for name in declared + items if name not in read]


def test_the_unread_parameter_check_finds_one() -> None:
    source = textwrap.dedent(
        '''
        @kernel
        def k(Q, Out, window: int, TILE_M: ConstInt):
            """Mentions window and TILE_M, which is not reading them."""
            # window
            ct.store(Out, (0,), ct.load(Q, (0,), (TILE_M,)))
        '''
    )
    [function] = kernel_functions(source)
    assert unread_parameters(function) == ["window"]
    # An item unpacked from a grouped constant and never read counts too.
    source = textwrap.dedent(
        """
        @kernel
        def k(Q, Out, TILE: TileShape):
            TILE_M, TILE_N, _ = TILE
            ct.store(Out, (0,), ct.load(Q, (0,), (TILE_M,)))
        """
    )
    [function] = kernel_functions(source)
    assert unpacked(function) == {"TILE": ["TILE_M", "TILE_N", "_"]}
    assert unread_parameters(function) == ["TILE_N"]


def test_the_device_files_hold_the_dense_and_the_serving_kernels() -> None:
    names = {f.name for path in DEVICE_FILES for f in kernel_functions(path.read_text())}
    assert names == {
        "fmha_fwd_kernel",
        "fmha_fwd_persistent_kernel",
        "fmha_fwd_causal_persistent_kernel",
        "fmha_decode_kernel",
        "fmha_decode_combine_kernel",
        "fmha_varlen_kernel",
        "fmha_paged_kernel",
        "paged_combine_kernel",
    }


@pytest.mark.parametrize("path", DEVICE_FILES, ids=lambda p: p.name)
def test_every_kernel_reads_every_parameter_it_declares(path: Path) -> None:
    for function in kernel_functions(path.read_text()):
        assert unread_parameters(function) == [], f"{path.name}: {function.name}"
        # The package's decorator, not ct.kernel: forms reads the signature via __wrapped__.
        assert [ast.unparse(d) for d in function.decorator_list] == ["kernel"], function.name


# --------------------------------------------------------------------------------------------
# One declaration for the launch and the offline compile
# --------------------------------------------------------------------------------------------

# A problem and config that reach each kernel form.
FORM_CASES = {
    "tile": dict(mask="window", tile_m=128, tile_n=64, with_lse=True, with_map=True, q_len=1000),
    "persistent": dict(mask="none", tile_m=128, tile_n=128, persistent=True, k_unroll=2),
    "causal-persistent": dict(
        mask="causal", tile_m=128, tile_n=128, persistent=True, with_map=True, q_len=2048
    ),
    # Packed GQA heads, speculative decode (bottom-right causal), the key range in 4 splits.
    "decode": dict(
        mask="causal",
        q_len=16,
        k_len=1000,
        input_pos=984,
        tile_n=64,
        kv_splits=4,
        pack_gqa=True,
        with_lse=True,
    ),
}


@pytest.fixture
def package() -> types.SimpleNamespace:
    pytest.importorskip("cuda.tile")
    from kernels.cutile import compile, forms

    return types.SimpleNamespace(compile=compile, forms=forms)


@pytest.mark.parametrize("form", list(FORM_CASES))
def test_launch_arguments_and_compile_signature_follow_the_kernels_signature(
    package: types.SimpleNamespace, form: str
) -> None:
    from cuda.tile.compilation import ArrayConstraint, ScalarConstraint

    forms = package.forms
    plan, _ = package.compile.offline_plan(batch=1, heads=4, kv_heads=2, **FORM_CASES[form])
    assert plan.form == form
    declared = list(inspect.signature(forms.python_function(form)).parameters)
    assert list(plan.values) == declared

    args = plan.arguments({}, lambda name, spec: ("made", name, spec))
    signature = package.compile.signature_parameters(plan)
    assert len(args) == len(signature) == len(declared)
    for param, arg, entry in zip(forms.declaration(form), args, signature, strict=True):
        if param.kind == "array":
            assert arg[:2] == ("made", param.name)
            assert isinstance(entry, ArrayConstraint)
        elif param.kind == "scalar":
            assert type(arg) is param.type and isinstance(entry, ScalarConstraint)
        else:
            assert arg == entry and type(arg) is param.type, param.name
    # A launch passes its own arrays by name, and only ones the kernel declares.
    given = {"Q": "q", "K": "k", "V": "v", "Out": "out"}
    args = plan.arguments(given, lambda name, spec: None)
    assert [args[declared.index(name)] for name in given] == list(given.values())
    with pytest.raises(ValueError, match="takes no array"):
        plan.arguments({"Unknown": object()}, lambda name, spec: None)


def taken(forms: Any, form: str) -> set[str]:
    """Every name the form's kernel takes a value for: its parameters and the grouped
    constants' items (the names kernels.cutile.forms._sources answers)."""
    return {item.name for p in forms.declaration(form) for item in (p, *p.members)}


def test_the_persistent_kernels_no_longer_take_the_tile_kernels_extras(
    package: types.SimpleNamespace,
) -> None:
    forms = package.forms
    tile = taken(forms, "tile")
    persistent = taken(forms, "persistent")
    causal = taken(forms, "causal-persistent")
    # MASK comes in OPTS, the block step's options, which every attention kernel takes; the
    # persistent ones do not read it (test_grouped_constants_are_unpacked_in_declared_order).
    assert tile - persistent == {"input_pos", "window", "remap_group", "PIPELINE"}
    assert tile - causal == {"window", "remap_group", "K_SPLIT", "PIPELINE"}
    assert persistent - tile == {"EVEN_K", "Q_PREFETCH", "PAIRED_K", "Q_HALVES"}
    assert causal - tile == {"Tiles", "Q_HALVES"}


# What each kernel declares: arrays, runtime scalars and the grouped constants.
PARAMETER_COUNTS = {
    "tile": 16,
    "persistent": 13,
    "causal-persistent": 15,
    "decode": 18,  # with BlockMap and Order, as the tile form
    "combine": 6,
}
# The items of a grouped constant the kernel unpacks as "_", not reading them.
UNREAD_ITEMS = {
    "tile": {"OPTS": ["POLY_COLS"]},  # passed on whole to the unmasked blocks
    "persistent": {"OPTS": ["MASK", "POLY_COLS"]},  # no mask; OPTS passed on whole
    "causal-persistent": {"OPTS": ["MASK", "V_LATENCY", "POLY_COLS"]},  # passed on whole
    "decode": {"OPTS": ["POLY_COLS"]},  # passed on whole to the unmasked blocks
    "combine": {},
}


@pytest.mark.parametrize("form", list(PARAMETER_COUNTS))
def test_grouped_constants_are_unpacked_in_declared_order(
    package: types.SimpleNamespace, form: str
) -> None:
    forms = package.forms
    declared = forms.declaration(form)
    assert len(declared) == PARAMETER_COUNTS[form]
    function = next(
        f
        for path in DEVICE_FILES
        for f in kernel_functions(path.read_text())
        if f.name == forms.python_function(form).__name__
    )
    groups = {p.name: [item.name for item in p.members] for p in declared if p.members}
    assert groups, "every kernel groups its constants"
    # Each group is unpacked once, item by item in its declared order ("_": not read).
    bound = unpacked(function)
    assert set(bound) == set(groups)
    unread = {}
    for name, items in groups.items():
        assert len(bound[name]) == len(items), name
        assert all(b in (item, "_") for b, item in zip(bound[name], items, strict=True)), name
        skipped = [item for b, item in zip(bound[name], items, strict=True) if b == "_"]
        if skipped:
            unread[name] = skipped
    assert unread == UNREAD_ITEMS[form]
    assert all(p.kind != "constant" or p.members for p in declared), "every constant is grouped"


def test_a_tuple_constant_without_its_items_names_is_refused(
    package: types.SimpleNamespace,
) -> None:
    import cuda.tile as ct

    with pytest.raises(TypeError, match="names its items: use constant_group"):
        package.forms._parameter("TILE", ct.Constant[tuple[int, int]])


def test_a_declared_parameter_without_a_source_is_named(
    package: types.SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    forms = package.forms
    tile = forms.declaration("tile")
    extra = (*tile, forms.Parameter("NEW_KNOB", "constant", int))
    monkeypatch.setattr(forms, "declaration", lambda form: extra)
    with pytest.raises(KeyError, match="fmha_fwd_kernel declares 'NEW_KNOB'"):
        package.compile.offline_plan(mask="none")
    # An item of a grouped constant is named by its own name.
    switch = forms.Parameter("NEW_SWITCH", "constant", bool)
    grouped = (*tile, forms.Parameter("MORE", "constant", tuple, (switch,)))
    monkeypatch.setattr(forms, "declaration", lambda form: grouped)
    with pytest.raises(KeyError, match="fmha_fwd_kernel declares 'NEW_SWITCH'"):
        package.compile.offline_plan(mask="none")


def test_only_the_persistent_forms_ask_for_the_sm_count(package: types.SimpleNamespace) -> None:
    forms = package.forms
    from kernels.cutile.launch import LaunchConfig

    p = forms.Problem(1, 4, 2, 2048, 2048, 128, "float16")

    def never() -> int:
        raise AssertionError("the tile form's grid is one CTA per tile")

    options = dict(scale=0.1, input_pos=0, window=None, with_lse=False, with_map=False)
    tile = forms.plan(p, LaunchConfig(), mask="causal", sm_count=never, **options)
    assert tile.grid == (32 * 4, 1, 1)
    grid = forms.plan(
        p, LaunchConfig(tile_m=128, tile_n=128, persistent=True, occupancy=2), mask="causal",
        sm_count=lambda: 10, **options,
    )  # fmt: skip
    assert grid.form == "causal-persistent" and grid.grid == (20, 1, 1)
    tiles = grid.values["Tiles"]
    assert tiles.shape == tiles.data.shape and tiles.shape[0] % forms.SHAPE_CLASS == 0


def test_the_decode_form_plans_its_split_kernel_and_then_the_combine(
    package: types.SimpleNamespace,
) -> None:
    forms = package.forms
    # B=2, 8 query heads on 2 KV heads, q_len 3: packed, 12 rows a KV head in a 16-row tile;
    # 1000 keys in 64-key blocks (16 blocks) in 4 splits of 4 blocks.
    plan, _ = package.compile.offline_plan(
        batch=2, heads=8, kv_heads=2, q_len=3, k_len=1000, input_pos=997, mask="causal",
        tile_n=64, kv_splits=4, pack_gqa=True, with_lse=True,
    )  # fmt: skip
    assert (plan.form, plan.grid) == ("decode", (1, 4, 4))
    values = plan.values
    assert values["Q"].shape == values["Out"].shape == (2, 2, 12, 128)
    assert values["Lse"].shape == (2, 2, 12)
    assert values["OutParts"].shape == (4, 4, 12, 128) and values["LseParts"].shape == (4, 4, 12)
    assert values["TILE"] == (16, 64, 128)  # (TILE_M, TILE_N, TILE_D)
    assert (plan.value("TILE_M"), values["split_blocks"], values["q_len"]) == (16, 4, 3)
    assert values["kv_group"] == 1 and plan.value("SPLIT") is True
    assert plan.value("WITH_LSE") is False
    combine = plan.then
    assert combine is not None and combine.then is None
    # Every split's rows in one load: 4 splits × 16 rows × 32 of the 128 columns a CTA.
    assert (combine.form, combine.grid) == ("combine", (1, 4, 4))
    assert list(combine.values) == list(forms.parameters("combine"))
    # The same partial outputs pass from the one launch to the other; the combine writes Lse.
    assert combine.values["OutParts"] == values["OutParts"]
    assert combine.values["LseParts"] == values["LseParts"]
    assert combine.value("WITH_LSE") is True
    assert combine.values["TILE"] == (4, 16, 32)  # (TILE_S, TILE_R, TILE_DC)
    assert forms.combine_tile(splits=29, rows=4, head_dim=128) == (32, 4, 32)
    # 2 splits × 16 rows would take 128 columns by the element budget: at most 32 run right.
    assert forms.combine_tile(splits=2, rows=64, head_dim=128) == (2, 16, 32)
    assert forms.combine_tile(splits=128, rows=64, head_dim=64) == (128, 16, 8)
    # Unpacked, one split: the decode kernel writes Out and Lse itself, with no combine.
    plan, _ = package.compile.offline_plan(
        batch=2, heads=8, kv_heads=2, q_len=1, k_len=1000, mask="none", tile_n=64,
        kv_splits=1, pack_gqa=True, with_lse=True,
    )  # fmt: skip
    assert plan.form == "decode" and plan.then is None and plan.value("SPLIT") is False
    assert plan.value("WITH_LSE") is True and plan.grid == (1, 4, 1)
    plan, _ = package.compile.offline_plan(
        batch=2, heads=8, kv_heads=2, q_len=1, k_len=1000, mask="none", tile_n=64, kv_splits=8
    )  # fmt: skip
    assert plan.grid == (1, 16, 8) and plan.values["kv_group"] == 4
    assert plan.values["Q"].shape == (2, 8, 1, 128)
    # 128 splits of 16 key blocks run as 16 splits of one block.
    plan, _ = package.compile.offline_plan(
        batch=1, heads=8, kv_heads=2, q_len=1, k_len=1000, mask="none", tile_n=64,
        kv_splits=128, pack_gqa=True,
    )  # fmt: skip
    assert plan.grid == (1, 2, 16) and plan.values["split_blocks"] == 1


def test_auto_splits_ask_the_sm_count_and_a_full_grid_runs_the_tile_form(
    package: types.SimpleNamespace,
) -> None:
    forms = package.forms
    from kernels.cutile.launch import LaunchConfig

    options = dict(scale=0.1, input_pos=0, window=None, with_lse=False, with_map=False)
    decode = forms.Problem(1, 32, 8, 1, 32768, 128, "bfloat16")
    auto = LaunchConfig(tile_n=128, kv_splits=None, pack_gqa=True)
    plan = forms.plan(decode, auto, mask="none", sm_count=lambda: 132, **options)
    assert plan.grid == (1, 8, 16) and plan.then is not None  # one CTA an SM: 128 of 132
    plan = forms.plan(decode, auto, mask="none", sm_count=lambda: 8, **options)
    assert plan.grid == (1, 8, 1) and plan.then is None  # 8 tiles fill 8 SMs: no split
    # An occupancy hint of 2 gives auto two slots an SM.
    occ2 = LaunchConfig(tile_n=128, kv_splits=None, pack_gqa=True, occupancy=2)
    assert forms.plan(decode, occ2, mask="none", sm_count=lambda: 132, **options).grid[2] == 32
    # Prefill fills the GPU: auto resolves to one split and the tile form runs.
    prefill = forms.Problem(4, 32, 8, 4096, 4096, 128, "bfloat16")
    plan = forms.plan(prefill, LaunchConfig(kv_splits=None), mask="causal",
                      sm_count=lambda: 132, **options)  # fmt: skip
    assert plan.form == "tile" and plan.then is None


# --------------------------------------------------------------------------------------------
# The CPU parts, and the workbench using them
# --------------------------------------------------------------------------------------------

WITHOUT_CUDA_TILE = """
import json, sys
for name in ("cuda.tile", "torch", "cupy"):
    sys.modules[name] = None  # any import of them raises ImportError
import kernels.cutile.arrays, kernels.cutile.diagnostics as d
import workbench.backends.gpu, workbench.backends.cutile as cutile
try:
    import kernels.cutile.launch
    launch = "imported"
except ImportError:
    launch = "needs cuda.tile"
verdict = d.assess("sm_75", "release 13.4", None)
print(json.dumps({
    "availability": cutile.CutileBackend().availability().reason,
    "assess": [verdict.available, verdict.message],
    "launch": launch,
    "lib": kernels.cutile.arrays.pick_lib(),
}))
"""


def test_the_cpu_parts_import_without_cuda_tile_torch_or_cupy(
    python_facts: Callable[..., dict[str, Any]],
) -> None:
    facts = python_facts(WITHOUT_CUDA_TILE, cwd=ROOT)
    assert facts["availability"].startswith("cuda-tile is not installed")
    assert facts["assess"] == [False, "sm_75 is older than cuTile supports (sm_80+): use the "
                               "CPU reference backend"]  # fmt: skip
    assert facts["launch"] == "needs cuda.tile"
    assert facts["lib"] == "cupy"  # no torch: CuPy is the one left to try


def test_the_workbench_uses_the_kernel_packages_shim_and_version() -> None:
    import kernels.cutile.arrays as arrays
    import kernels.cutile.diagnostics as diagnostics
    import workbench.backends.gpu as gpu

    assert gpu.HostView is arrays.HostView
    assert gpu.as_torch is arrays.as_torch
    assert gpu.tileiras_version is diagnostics.tileiras_version


@pytest.mark.parametrize(
    ("major", "tileiras", "expected"),
    [
        (7, "tileiras 13.4.92", "sm_75 is older than cuTile supports"),
        (9, None, "tileiras not found. Install it: pip install"),
    ],
)
def test_the_cutile_backend_refuses_for_the_kernel_packages_reasons(
    monkeypatch: pytest.MonkeyPatch, major: int, tileiras: str | None, expected: str
) -> None:
    # CuPy and the GPU are stood in for, as in test_arch_tables_offline: the reason the
    # backend gives is the kernel package's assess() message, not a second wording of it.
    import sys

    import workbench.backends.cutile as cutile
    import workbench.backends.gpu as gpu
    from kernels.cutile.diagnostics import assess
    from workbench.backends.base import Availability

    props = {"major": major, "minor": 5 if major == 7 else 0}
    runtime = types.SimpleNamespace(getDeviceProperties=lambda i: props)
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(cuda=types.SimpleNamespace(
        runtime=runtime)))  # fmt: skip
    if "cuda.tile" not in sys.modules:
        try:
            import cuda.tile  # noqa: F401
        except ImportError:
            monkeypatch.setitem(sys.modules, "cuda", types.ModuleType("cuda"))
            monkeypatch.setitem(sys.modules, "cuda.tile", types.ModuleType("cuda.tile"))
    monkeypatch.setattr(cutile, "cupy_device", lambda: Availability(True, "a GPU"))
    monkeypatch.setattr(cutile, "cuda_home_problem", lambda: None)
    monkeypatch.setattr(gpu, "tileiras_version", lambda: tileiras)
    available = cutile.CutileBackend().availability()
    assert not available.available
    assert available.reason.startswith(expected)
    arch = f"sm_{props['major']}{props['minor']}"
    assert available.reason == assess(arch, tileiras, "a GPU").message


def imported_modules(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
    return found


@pytest.mark.parametrize("path", sorted(PACKAGE.glob("*.py")), ids=lambda p: p.name)
def test_the_package_imports_nothing_from_the_workbench_or_qt(path: Path) -> None:
    # tests/test_architecture.py checks kernels/*.py; this covers the package below it.
    bad = [
        m
        for m in imported_modules(path)
        if m.split(".")[0] in ("workbench", "PySide6", "pyqtgraph")
    ]
    assert bad == [], path.name


def test_the_api_module_without_cuda_tile_says_what_to_install(python_facts) -> None:
    """A new user who runs the README's Python API on a machine set up without the GPU extra
    reads what to install, not a bare "No module named 'cuda'"."""
    facts = python_facts(
        "import json, sys\n"
        "sys.modules['cuda.tile'] = None  # as if cuda-tile were not installed\n"
        "try:\n"
        "    from kernels import cutile_fmha\n"
        "except ModuleNotFoundError as exc:\n"
        "    print(json.dumps({'message': str(exc)}))\n",
        cwd=ROOT,
    )
    assert facts["message"] == (
        "kernels.cutile_fmha needs cuda-tile (NVIDIA cuTile) and a GPU: on a machine with an "
        "NVIDIA GPU, bash scripts/setup.sh installs it (or pip install 'fmha-workbench[gpu]')"
    )
