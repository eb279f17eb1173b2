"""A cuTile plugin's compiled resources (issue 55): `resources --backend cutile-naive` compiles
the example's kernel offline for sm_90 (no GPU) at the flags' problem and its --plugin-knob
values, and prints registers, spill, shared memory and CTAs per SM as for our kernel; what it
cannot compile for is refused in one line, and a plugin's own compile error is its answer."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kernels.cubin_resources import ARCH_LIMITS

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
CUTILE = EXAMPLES / "cutile_naive.py"


def need_tools() -> None:
    pytest.importorskip("cuda.tile")
    from workbench.analysis.resources import missing_tools

    why = missing_tools()
    if why:
        pytest.skip(f"cannot compile here: {why}")


CASES = [
    dict(tile=64, mask="causal", head_dim=64, seq_len=1000, heads=4, kv_heads=2),
    dict(tile=32, mask="window", head_dim=128, seq_len=256, heads=2, kv_heads=2, window=100),
    dict(tile=128, mask="none", head_dim=32, seq_len=512, heads=8, kv_heads=1),
]


def resources_of(script: Callable[..., Any], tmp_path: Path, case: dict[str, Any]) -> Any:
    case = dict(case)
    window = ["--window", str(case.pop("window"))] if "window" in case else []
    flags = [w for name, value in case.items() if name != "tile"
             for w in (f"--{name.replace('_', '-')}", str(value))]  # fmt: skip
    return script(
        tmp_path / "unused.db", "--plugin", CUTILE, "resources", "--backend", "cutile-naive",
        "--plugin-knob", f"tile={case['tile']}", *flags, *window, "--arch", "sm_90", "--json",
        timeout=300,
    )  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c['mask']}-tile{c['tile']}")
def test_the_cutile_example_compiles_offline_for_sm90_and_says_what_it_uses(
    script: Callable[..., Any], tmp_path: Path, case: dict[str, Any]
) -> None:
    need_tools()
    done = resources_of(script, tmp_path, case)
    assert done.returncode == 0, done.stdout + done.stderr
    found = json.loads(done.stdout)["sm_90"]
    assert found["error"] == "" and not found["unavailable"]
    assert 0 < found["registers"] <= ARCH_LIMITS["sm_90"].regs_per_thread
    assert 0 < found["shared_bytes"] <= ARCH_LIMITS["sm_90"].shared_per_block
    assert found["threads"] > 0 and found["ctas_per_sm"] >= 1
    assert found["spill_bytes"] >= 0
    assert not (tmp_path / "unused.db").exists()


def test_the_tile_knob_reaches_the_compile_and_the_text_names_the_plugin_and_its_knob(
    script: Callable[..., Any], tmp_path: Path
) -> None:
    """Four times the tile's rows and keys ask for more shared memory: the answer is the
    compiled kernel's at the knob given, not one figure for the plugin."""
    need_tools()
    shared = {}
    for tile in (32, 128):
        case = dict(tile=tile, mask="none", head_dim=64, seq_len=1024, heads=2, kv_heads=2)
        done = resources_of(script, tmp_path, case)
        assert done.returncode == 0, done.stderr
        shared[tile] = json.loads(done.stdout)["sm_90"]["shared_bytes"]
    assert shared[128] > shared[32], shared
    text = script(
        tmp_path / "unused.db", "resources", "--plugin", CUTILE, "--backend", "cutile-naive",
        "--plugin-knob", "tile=64", "--head-dim", "64", "--arch", "sm_90", timeout=300,
    )  # fmt: skip
    assert text.returncode == 0, text.stderr
    head, line = text.stdout.splitlines()
    assert head.startswith("cutile-naive tile=64 · mask=none · ")
    assert line.startswith("sm_90: ") and " regs · " in line and " CTA/SM" in line


BROKEN_COMPILE = """
from workbench.backends import declare

def attention(q, k, v, *, problem, config, knobs):
    return q

def compile_cubin(problem, config, knobs, arch):
    raise RuntimeError(f"my kernel does not build for {arch}")

BACKENDS = (declare("broken-build", "a plugin whose compile fails", attention,
                    compile_cubin=compile_cubin),)
"""


def test_a_plugins_compile_error_is_its_answer_in_one_line_exit_1(
    script: Callable[..., Any], tmp_path: Path
) -> None:
    need_tools()
    path = tmp_path / "broken_build.py"
    path.write_text(BROKEN_COMPILE)
    done = script(
        tmp_path / "unused.db", "--plugin", path, "resources", "--backend", "broken-build",
        "--arch", "sm_90",
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == (
        "sm_90: does not compile: my kernel does not build for sm_90"
    )
    assert "Traceback" not in done.stdout + done.stderr


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["--head-dim", "48"], "error: --head-dim 48: cutile-naive takes (32, 64, 128)"),
        (["--dtype", "bfloat16"], "error: --dtype bfloat16: cutile-naive takes float16"),
        (
            ["--tile-m", "128"],
            "error: --tile-m 128: a knob of our cuTile kernel; cutile-naive takes its own "
            "(--plugin-knob NAME=VALUE)",
        ),
        (
            ["--plugin-knob", "tile=48"],
            "error: --plugin-knob tile=48: expected one of 32, 64, 128",
        ),
        (
            ["--runs", "1"],
            "error: --runs: each stored run names its own backend and plugin file; leave out "
            "--backend cutile-naive",
        ),
        (
            ["--db", "elsewhere.db"],
            "error: --db: only with --runs (a config alone is compiled, not stored)",
        ),
    ],
    ids=["head-dim", "dtype", "kernel-knob", "plugin-knob", "runs", "db"],
)
def test_what_the_plugin_cannot_compile_for_is_refused_in_one_line(
    script: Callable[..., Any], tmp_path: Path, argv: list[str], line: str
) -> None:
    db = tmp_path / "unused.db"
    done = script(db, "--plugin", CUTILE, "resources", "--backend", "cutile-naive", *argv)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines() == [line]
    assert not db.exists()


def test_a_backend_without_compile_cubin_or_not_loaded_is_refused_in_one_line(
    script: Callable[..., Any], tmp_path: Path
) -> None:
    db = tmp_path / "unused.db"
    numpy_one = script(
        db, "--plugin", EXAMPLES / "numpy_softcap.py", "resources", "--backend", "numpy-softcap"
    )
    assert numpy_one.returncode == 2
    assert numpy_one.stderr.splitlines() == [
        "error: --backend numpy-softcap: no compiled resources: only cutile and plugins that "
        "declare compile_cubin= compile offline"
    ]
    unloaded = script(db, "resources", "--backend", "cutile-naive")
    assert unloaded.returncode == 2
    assert unloaded.stderr.splitlines() == [
        "error: --backend cutile-naive: no such backend here (load its file with --plugin); "
        "expected one of cutile"
    ]
    assert not db.exists()


def test_a_measured_point_of_the_cutile_example_stores_what_it_compiled_to(
    tmp_path: Path,
) -> None:
    """What the engine child stores with each point of a ``cuda`` cuTile plugin after its timed
    region (the GPU test sees it in a group): the same answer as `resources` for the point's
    problem, knob and GPU, compiled once per point class in the process; none for a plugin
    without ``compile_cubin``; a broken compile stored as its one line."""
    need_tools()
    from workbench.backends.plugin_compile import point_resources
    from workbench.backends.plugins import file_declarations
    from workbench.config import KernelConfig, Problem

    (cutile,) = file_declarations(str(CUTILE))
    problem = Problem(batch=2, heads=4, kv_heads=2, head_dim=64, q_len=512, k_len=512)
    config = KernelConfig(mask="causal")
    found = point_resources(cutile.factory, problem, config, {"tile": 64}, "sm_90")
    assert found is not None and found["error"] == "" and found["registers"] > 0
    assert point_resources(cutile.factory, problem, config, {"tile": 64}, "sm_90") == found
    smaller = point_resources(cutile.factory, problem, config, {"tile": 32}, "sm_90")
    assert smaller is not None and smaller["shared_bytes"] < found["shared_bytes"]

    (numpy_one,) = file_declarations(str(EXAMPLES / "numpy_softcap.py"))
    assert point_resources(numpy_one.factory, problem, config, {}, "sm_90") is None
    path = tmp_path / "broken_build.py"
    path.write_text(BROKEN_COMPILE)
    (broken,) = file_declarations(str(path))
    stored = point_resources(broken.factory, problem, config, {}, "sm_90")
    assert stored is not None and stored["error"] == "my kernel does not build for sm_90"


def test_a_plugins_answer_is_kept_on_disk_until_its_file_changes(
    script: Callable[..., Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second `resources` call of the same plugin file and knobs reads the cache (here a
    planted register count proves it); an edit of the file compiles afresh."""
    need_tools()
    cache = tmp_path / "cache"
    monkeypatch.setenv("FMHA_WORKBENCH_RESOURCE_CACHE", str(cache))
    plugin = tmp_path / "my_naive.py"
    plugin.write_text(CUTILE.read_text())
    argv = (
        tmp_path / "unused.db", "--plugin", plugin, "resources", "--backend", "cutile-naive",
        "--plugin-knob", "tile=64", "--head-dim", "64", "--arch", "sm_90", "--json",
    )  # fmt: skip
    first = script(*argv, timeout=300)
    assert first.returncode == 0, first.stderr
    compiled = json.loads(first.stdout)["sm_90"]
    (kept,) = cache.glob("plugin-*.json")
    assert json.loads(kept.read_text()) == compiled
    kept.write_text(json.dumps({**compiled, "registers": 7}))
    assert json.loads(script(*argv, timeout=300).stdout)["sm_90"]["registers"] == 7
    plugin.write_text(plugin.read_text() + "\n# edited\n")
    again = json.loads(script(*argv, timeout=300).stdout)["sm_90"]
    assert again == compiled and len(list(cache.glob("plugin-*.json"))) == 2
