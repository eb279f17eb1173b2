"""The README's Python API example for the workbench core runs as printed (CPU backends stand in
for the GPU ones, a small shape for the H200's), so the documented calls cannot drift."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests import cpu_peers
from tests.conftest import subprocess_env
from workbench.backends.plugin_env import ENV_PLUGINS

README = Path(__file__).resolve().parents[1] / "README.md"


def _core_example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
    (example,) = [b for b in blocks if "from workbench.jobs import" in b]
    return example


def test_the_readme_group_example_runs_and_prints_its_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cpu_peers.register(monkeypatch)
    code = _core_example()
    swaps = {
        '["cutile", "torch-cudnn", "fa4"]': f'["reference", "{cpu_peers.NAME}"]',
        "batch=4, heads=32, head_dim=128": "batch=1, heads=2, head_dim=32",
        "(1024, 4096)": "(64, 128)",
        "autotune=True, ": "",
        '"runs.db"': repr(str(tmp_path / "runs.db")),
    }
    for old, new in swaps.items():
        assert old in code, f"the README example no longer has {old!r}"
        code = code.replace(old, new)
    exec(compile(code, "README.md", "exec"), {})
    table = capsys.readouterr().out
    assert "| causal | 64 |" in table and "| causal | 128 |" in table
    assert f"{cpu_peers.NAME} TFLOP/s" in table


def test_the_readme_group_example_pasted_into_a_script_runs_without_a_main_guard(
    tmp_path: Path,
) -> None:
    """Saved as ``bench.py`` and run with ``python bench.py``, with no ``if __name__ ==
    "__main__":``: a backend that computes in the engine child (the GPU peers; here the NumPy
    example plugin) must not run the script again there (its engine died, exit code 1)."""
    code = _core_example()
    swaps = {
        '["cutile", "torch-cudnn", "fa4"]': '["reference", "numpy-softcap"]',
        "batch=4, heads=32, head_dim=128": "batch=1, heads=2, head_dim=32",
        "(1024, 4096)": "(64, 128)",
        "autotune=True, ": "",
    }
    for old, new in swaps.items():
        code = code.replace(old, new)
    assert "__main__" not in code
    (tmp_path / "bench.py").write_text(code, encoding="utf-8")
    plugin = README.parent / "examples" / "numpy_softcap.py"
    env = {**subprocess_env(tmp_path / "runs.db"), ENV_PLUGINS: str(plugin)}
    ran = subprocess.run(
        [sys.executable, "bench.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert "| causal | 64 |" in ran.stdout and "numpy-softcap TFLOP/s" in ran.stdout
    assert ran.stdout.count("numpy-softcap TFLOP/s") == 1  # the script ran once, not again
