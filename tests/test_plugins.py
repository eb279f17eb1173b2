"""Plugins as a user meets them: ``--plugin FILE`` (and an installed package's entry point)
adds backends that ``backends``, ``knobs``, ``sweep``, ``runs``, ``show`` and ``export`` all
see; a wrong declaration is one line naming the file and the field; a plugin that raises or
aborts ends its run with a stored reason in the engine child, never the CLI."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import FAST_TIMING_ARGS, subprocess_env
from workbench.backends import catalog
from workbench.backends.plugin_env import ENV_PLUGINS

ROOT = Path(__file__).resolve().parents[1]
NUMPY_EXAMPLE = ROOT / "examples" / "numpy_softcap.py"
TORCH_EXAMPLE = ROOT / "examples" / "torch_softcap.py"
SMALL = ["--heads", "2", "--head-dim", "32", "--seq-lens", "64,128", *FAST_TIMING_ARGS]


pytestmark = pytest.mark.usefixtures("no_plugins_left")


def plugin_file(tmp_path: Path, body: str, name: str = "my_attn.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


def test_the_numpy_example_runs_through_every_command_and_each_run_names_its_file(
    script: Callable[..., Any], tmp_path: Path
) -> None:
    db = tmp_path / "runs.db"
    listed = script(db, "--plugin", NUMPY_EXAMPLE, "backends", "--json")
    assert listed.returncode == 0, listed.stderr
    statuses = json.loads(listed.stdout)
    assert statuses["numpy-softcap"]["available"] and statuses["reference"]["available"]

    table = script(db, "knobs", "--json", "--plugin", str(NUMPY_EXAMPLE))  # after the command
    assert table.returncode == 0, table.stderr
    plugin_knobs = {r["knob"]: r for r in json.loads(table.stdout)["plugin_knobs"]}
    assert plugin_knobs["softcap"]["values"] == [0.0, 20.0, 30.0, 50.0]
    assert plugin_knobs["chunk_rows"]["default"] == 128

    runs = {}
    for cap in ("0", "20"):
        swept = script(
            db, "--plugin", NUMPY_EXAMPLE, "sweep", "--backend", "numpy-softcap", *SMALL,
            "--mask", "causal", "--plugin-knob", f"softcap={cap}", "--json",
        )  # fmt: skip
        assert swept.returncode == 0, swept.stderr
        (run,) = json.loads(swept.stdout)["runs"]
        runs[cap] = run
    digest = hashlib.sha256(NUMPY_EXAMPLE.read_bytes()).hexdigest()
    for cap, run in runs.items():
        assert run["status"] == "complete" and run["backend"] == "numpy-softcap"
        assert run["machine"]["plugin_path"] == str(NUMPY_EXAMPLE)
        assert run["machine"]["plugin_sha256"] == digest
        assert run["machine"]["plugin_knobs"]["softcap"] == float(cap)
        for point in run["points"]:  # checked against float64 (soft-capped where on)
            assert point["rel_err"] < 1e-2, point

    # Reading the runs back needs no plugin: the store says what ran.
    listed_runs = script(db, "runs", "--json")
    assert {r["backend"] for r in json.loads(listed_runs.stdout)} == {"numpy-softcap"}
    exported = script(db, "export", "--csv", "-")
    assert exported.returncode == 0, exported.stderr
    rows = list(csv.DictReader(io.StringIO(exported.stdout)))
    assert len(rows) == 4 and {r["backend"] for r in rows} == {"numpy-softcap"}


def test_the_numpy_example_matches_float64_attention_with_and_without_its_soft_cap(
    rng: np.random.Generator,
) -> None:
    from kernels.reference import masked_softmax_product
    from kernels.schedule import visible_block
    from workbench.backends.plugins import file_declarations
    from workbench.config import KernelConfig, Problem

    (declared,) = file_declarations(str(NUMPY_EXAMPLE))
    plugin = declared.factory
    problem = Problem(batch=1, heads=4, kv_heads=2, head_dim=32, q_len=96, k_len=160, input_pos=64)
    config = KernelConfig(mask="window", window=50)
    # Scaled up so the scores reach the cap: an uncapped output would be far off.
    q, k, v = (
        4 * rng.standard_normal(s, dtype=np.float32)
        for s in [(1, 4, 96, 32)] + [(1, 2, 160, 32)] * 2
    )
    seen = visible_block(np.arange(96), range(160), "window", 64, 50)
    for cap in (0.0, 20.0):
        knobs = {"softcap": cap, "chunk_rows": 32}
        out, lse = plugin.prepare(q, k, v, problem=problem, config=config, knobs=knobs)()
        for head in range(4):
            scores = (
                q[0, head].astype(np.float64) @ k[0, head // 2].T.astype(np.float64)
            ) / np.sqrt(32)
            if cap:
                scores = cap * np.tanh(scores / cap)
            expected = masked_softmax_product(scores, seen, v[0, head // 2].astype(np.float64))
            np.testing.assert_allclose(out[0, head], expected, atol=2e-4, rtol=1e-3)
        assert np.isfinite(lse).all()


BAD_DECLARATIONS = {
    "unknown knob type": (
        'Knob("tiles", list, [1], ([1],), "--plugin-knob tiles", "Tiles", "h")',
        "",
        "knobs[0].kind",
    ),
    "default outside its values": (
        'Knob("cap", float, 7.0, (0.0, 30.0), "--plugin-knob cap", "Cap", "h")',
        "",
        "knobs[0].default",
    ),
    "rule naming an unknown knob": (
        'Knob("cap", float, 0.0, (0.0, 30.0), "--plugin-knob cap", "Cap", "h")',
        'Rule("cap", ("chunk",), lambda v, m: False, lambda v, m: "", "chunks")',
        "rules[0]",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_DECLARATIONS))
def test_a_wrong_declaration_is_refused_in_one_line_naming_the_file_and_the_field(
    case: str, run_cli: Callable[..., Any], tmp_path: Path
) -> None:
    knob, rule, field = BAD_DECLARATIONS[case]
    rules = f"({rule},)" if rule else "()"
    path = plugin_file(
        tmp_path,
        f"""
        from workbench.backends import Knob, Rule, declare

        def attention(q, k, v, *, problem, config, knobs):
            return q

        BACKENDS = (declare("mine", "mine", attention, knobs=({knob},), rules={rules}),)
        """,
    )
    db = tmp_path / "runs.db"
    result = run_cli("--plugin", path, "sweep", "--db", db, "--backend", "mine", *SMALL)
    assert result.code == 2
    (line,) = result.err_lines
    assert line.startswith(f"error: {path}: {field}: "), line
    assert not db.exists()  # nothing written


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ("x = (\n", "line 1: SyntaxError"),
        ("import no_such_module_here\n", "line 1: ModuleNotFoundError"),
        ("VALUE = 1\n", "BACKENDS: declares no backend"),
        (
            "from workbench.backends import declare\n"
            "BACKENDS = (declare('reference', 'x', lambda q, k, v, **_: q),)\n",
            "name: 'reference' is already a backend",
        ),
    ],
)
def test_a_plugin_file_that_cannot_load_is_one_line_and_the_built_ins_still_run(
    body: str, field: str, run_cli: Callable[..., Any], tmp_path: Path
) -> None:
    path = plugin_file(tmp_path, body)
    result = run_cli("--plugin", path, "backends")
    assert result.code == 2
    assert result.err_lines == [result.err_lines[0]]
    assert result.err_lines[0].startswith(f"error: {path}: {field}"), result.err_lines
    catalog.forget_plugins()
    os.environ[ENV_PLUGINS] = ""
    assert run_cli("backends", "--json").code == 0  # the same process, without the plugin


def test_a_missing_plugin_file_and_a_bad_knob_value_name_what_was_typed(
    run_cli: Callable[..., Any], tmp_path: Path
) -> None:
    fifo = tmp_path / "fifo.py"
    os.mkfifo(fifo)
    blocked = run_cli("--plugin", fifo, "backends")
    assert blocked.code == 2
    assert blocked.err_lines == [f"error: {fifo}: --plugin: not a regular file"]
    missing = run_cli("--plugin", tmp_path / "nope.py", "backends")
    assert missing.code == 2 and missing.err_lines == [
        f"error: {tmp_path / 'nope.py'}: --plugin: no such file"
    ]
    db = tmp_path / "runs.db"
    bad = run_cli(
        "--plugin", NUMPY_EXAMPLE, "sweep", "--db", db, "--backend", "numpy-softcap", *SMALL,
        "--plugin-knob", "softcap=7",
    )  # fmt: skip
    assert bad.code == 2
    assert bad.err_lines == [
        "error: --plugin-knob softcap=7: expected one of 0.0, 20.0, 30.0, 50.0"
    ]
    unknown = run_cli("--plugin", NUMPY_EXAMPLE, "backends", "--plugin-knob", "tile=3")
    assert unknown.code == 2 and "no plugin knob 'tile'" in unknown.err
    assert not db.exists()


FAILING = """
import os
from workbench.backends import declare

def attention(q, k, v, *, problem, config, knobs):
    with open(PID_FILE, "a") as f:
        f.write(f"{os.getpid()}\\n")
    if HOW == "abort":
        os.abort()
    raise RuntimeError("my kernel broke at row 7")

BACKENDS = (declare("fails", "a plugin that fails", attention),)
"""


@pytest.mark.parametrize(
    ("how", "reason"),
    [("raise", "RuntimeError: my kernel broke at row 7"), ("abort", "process died (exit code -6)")],
)
def test_a_plugin_that_raises_or_aborts_ends_its_run_with_a_stored_reason_in_the_engine_child(
    how: str,
    reason: str,
    run_cli: Callable[..., Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pids = tmp_path / "pids"
    # Written into the file, not the environment: an engine child started by an earlier test
    # in this worker keeps the environment it was started with.
    path = plugin_file(tmp_path, f"PID_FILE = {str(pids)!r}\nHOW = {how!r}\n" + FAILING)
    db = tmp_path / "runs.db"
    result = run_cli("--plugin", path, "sweep", "--db", db, "--backend", "fails", *SMALL)
    assert result.code == 1, result.err
    (run,) = json.loads(run_cli("runs", "--db", db, "--json").out)
    assert run["status"] == "failed" and reason in run["error"], run
    ran_in = {int(p) for p in pids.read_text().split()}
    assert ran_in and os.getpid() not in ran_in  # it ran in the child, and this process lives
    after = run_cli("sweep", "--db", db, "--backend", "reference", *SMALL)
    assert after.code == 0, after.err


def test_an_installed_packages_entry_point_is_listed_and_a_broken_one_hides_nothing(
    script: Callable[..., Any], tmp_path: Path
) -> None:
    site = tmp_path / "site"
    dist = site / "my_attn_pkg-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: my-attn-pkg\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[fmha_workbench.backends]\nmine = my_attn_pkg:BACKENDS\nbroken = my_attn_gone:BACKENDS\n"
    )
    (site / "my_attn_pkg.py").write_text(
        NUMPY_EXAMPLE.read_text().replace('"numpy-softcap"', '"pkg-softcap"')
    )
    env = subprocess_env(tmp_path / "runs.db")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(site)])
    import subprocess

    exe = str(Path(sys.executable).parent / "fmha-workbench")
    listed = subprocess.run(
        [exe, "backends", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    statuses = json.loads(listed.stdout)
    assert statuses["pkg-softcap"]["available"]
    assert not statuses["broken"]["available"]
    assert "my_attn_gone" in statuses["broken"]["reason"]
    assert statuses["reference"]["available"]
    swept = subprocess.run(
        [exe, "sweep", "--backend", "pkg-softcap", *SMALL, "--json"],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert swept.returncode == 0, swept.stderr
    (run,) = json.loads(swept.stdout)["runs"]
    assert run["machine"]["plugin_entry_point"] == "mine = my_attn_pkg:BACKENDS"


def test_the_torch_cpu_example_is_listed_unavailable_without_torch_and_runs_with_it(
    script: Callable[..., Any], tmp_path: Path
) -> None:
    db = tmp_path / "runs.db"
    listed = script(db, "--plugin", TORCH_EXAMPLE, "backends", "--json")
    assert listed.returncode == 0, listed.stderr
    status = json.loads(listed.stdout)["torch-softcap-cpu"]
    try:
        import torch  # noqa: F401
    except ImportError:
        assert not status["available"] and "torch is not installed" in status["reason"]
        pytest.skip("torch is not installed: the example's launch is not run here")
    assert status["available"], status
    for cap in ("0", "30"):
        swept = script(
            db, "--plugin", TORCH_EXAMPLE, "sweep", "--backend", "torch-softcap-cpu", *SMALL,
            "--mask", "causal", "--plugin-knob", f"softcap={cap}", "--json",
        )  # fmt: skip
        assert swept.returncode == 0, swept.stderr
        (run,) = json.loads(swept.stdout)["runs"]
        assert all(p["rel_err"] < 1e-2 for p in run["points"])


RULED = """
from workbench.backends import Capabilities, Knob, Rule, declare

def attention(q, k, v, *, problem, config, knobs):
    return q

BACKENDS = (
    declare(
        "ruled",
        "a plugin with a rule",
        attention,
        capabilities=Capabilities(masks=("none", "window")),
        knobs=(Knob("chunk", int, 32, (32, 64, 128), "--plugin-knob chunk", "Chunk", "rows"),),
        rules=(
            Rule(
                "chunk", ("mask",), lambda v, m: m == "window" and v["chunk"] > 64,
                lambda v, m: "a window takes chunks of 64 rows or fewer", "a window",
            ),
        ),
    ),
)
"""


def test_a_plugins_rules_and_capabilities_refuse_in_the_words_typed_before_anything_is_written(
    run_cli: Callable[..., Any], tmp_path: Path
) -> None:
    path = plugin_file(tmp_path, RULED)
    db = tmp_path / "runs.db"
    sweep = ["--plugin", path, "--plugin", path, "sweep", "--db", db, "--backend", "ruled", *SMALL]
    ruled = run_cli(*sweep, "--mask", "window", "--window", "16", "--plugin-knob", "chunk=128")
    assert ruled.code == 2
    assert ruled.err_lines == [
        "error: --plugin-knob chunk=128: a window takes chunks of 64 rows or fewer"
    ]
    causal = run_cli(*sweep, "--mask", "causal")
    assert causal.code == 2
    assert causal.err_lines == ["error: --mask causal: ruled takes none, window"]
    assert not db.exists()


def test_an_edited_plugin_file_is_imported_afresh_in_the_same_engine_child(
    run_cli: Callable[..., Any], tmp_path: Path
) -> None:
    """Copy the example, run it, change one line, run again from the same process: the engine
    child (the same one) runs the new code, and each run stores the hash of what it ran."""
    from workbench.backends.isolated import shared_engine

    mine = tmp_path / "my_softcap.py"
    mine.write_text(NUMPY_EXAMPLE.read_text())
    db = tmp_path / "runs.db"
    sweep = ["--plugin", mine, "sweep", "--db", db, "--backend", "numpy-softcap", *SMALL, "--json"]
    first = run_cli(*sweep)
    assert first.code == 0, first.err
    child = shared_engine().pid
    line = "scores = capped((q[:, :, rows] @ keys_t) * scale, knobs)"
    assert line in mine.read_text()
    mine.write_text(mine.read_text().replace(line, line.replace("* scale", "* scale * 3")))
    second = run_cli(*sweep)
    assert second.code in (0, 1), second.err
    assert shared_engine().pid == child
    (before,) = json.loads(first.out)["runs"]
    (after,) = json.loads(second.out)["runs"]
    assert before["machine"]["plugin_sha256"] != after["machine"]["plugin_sha256"]
    assert after["machine"]["plugin_sha256"] == hashlib.sha256(mine.read_bytes()).hexdigest()
    assert all(p["rel_err"] < 1e-2 for p in before["points"])
    assert all(p["rel_err"] > 1e-2 for p in after["points"])  # the edit's wrong scale shows


def test_a_float_knob_with_many_values_refuses_a_bad_plugin_knob_in_one_line(tmp_path) -> None:
    """A plugin's float knob of five or more values: a value off its list is one line naming
    the flag and listing the values (it raised TypeError: range() on floats)."""
    import subprocess
    import sys

    plugin = tmp_path / "many_caps.py"
    plugin.write_text(
        "from workbench.backends import Knob, declare\n"
        "BACKENDS = (declare('many-caps', 'many caps', lambda q, k, v, **kw: q, knobs=(\n"
        "    Knob('cap', float, 0.0, (0.0, 10.0, 20.0, 30.0, 40.0, 50.0), '--plugin-knob cap',\n"
        "         'Cap', 'a soft cap'),)),)\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "workbench", "--plugin", str(plugin), "--plugin-knob", "cap=7",
         "sweep", "--db", str(tmp_path / "runs.db"), "--backend", "many-caps", "--seq-lens", "16"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "cap" in lines[0] and "0.0, 10.0, 20.0, 30.0, 40.0, 50.0" in lines[0], lines[0]
    assert not (tmp_path / "runs.db").exists()


STAMPED = """
from workbench.backends import declare

def attention(q, k, v, *, problem, config, knobs):
    raise RuntimeError("not run here")

BACKENDS = (declare({name!r}, "a plugin saved twice in one second", attention),)
"""


def test_a_save_of_the_same_size_within_the_same_second_loads_the_new_code(
    tmp_path: Path,
) -> None:
    """An editor's quick re-save keeps a file's size and (to the second) its mtime, which is
    all Python's bytecode cache checks: the second process must run the bytes on disk, not the
    first version's cached bytecode."""
    import subprocess

    path = plugin_file(tmp_path, STAMPED.format(name="first"))
    stat = path.stat()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

    def listed() -> list[str]:
        done = subprocess.run(
            [sys.executable, "-m", "workbench", "--plugin", str(path), "backends", "--json"],
            capture_output=True, text=True, env=env, timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return list(json.loads(done.stdout))

    assert "first" in listed()
    path.write_text(STAMPED.format(name="other"))  # same length as "first"
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_size == stat.st_size
    names = listed()
    assert "other" in names and "first" not in names, names
