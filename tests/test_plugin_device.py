"""A plugin's declared input kind picks how it is timed (issue 55): ``inputs="cuda"`` gets torch
CUDA tensors and the torch peers' GPU sampler; ``numpy`` and ``torch`` (CPU) are timed by the
wall clock as before. Where there is no GPU a ``cuda`` plugin is listed unavailable in one line
and a sweep on it is refused in that line; a wrong kind is refused at load naming the file and
the field. The GPU side is tests/gpu/test_example_plugins_on_gpu.py."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FAST_TIMING_ARGS

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SMALL = ["--batch", "1", "--heads", "2", "--head-dim", "32", "--seq-lens", "96", *FAST_TIMING_ARGS]

DEVICE_PLUGIN = """
from workbench.backends import declare

def attention(q, k, v, *, problem, config, knobs):
    return q * 1

BACKENDS = (declare("dev-attn", "a device plugin", attention, inputs={kind!r}),)
"""


def gpu_here() -> bool:
    from workbench.backends.gpu import cupy_device, torch_device

    return torch_device().available and cupy_device().available


def write_plugin(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / f"dev_{kind}.py"
    path.write_text(DEVICE_PLUGIN.format(kind=kind))
    return path


def test_an_unknown_input_kind_is_refused_at_load_naming_the_file_and_the_field(
    script: Callable[..., Any], tmp_path: Path
) -> None:
    path = write_plugin(tmp_path, "gpu")
    db = tmp_path / "runs.db"
    listed = script(db, "--plugin", path, "backends")
    assert listed.returncode == 2, listed.stdout + listed.stderr
    assert listed.stderr.splitlines() == [
        f"error: {path}: inputs: 'gpu': expected one of numpy, torch, cuda"
    ]
    assert not db.exists()


def test_a_cuda_plugin_is_listed_unavailable_in_one_line_and_its_sweep_refused_without_a_gpu(
    script: Callable[..., Any], tmp_path: Path
) -> None:
    if gpu_here():
        pytest.skip("a GPU is here: tests/gpu/test_example_plugins_on_gpu.py runs cuda plugins")
    path = write_plugin(tmp_path, "cuda")
    db = tmp_path / "runs.db"
    listed = script(db, "--plugin", path, "backends", "--json")
    assert listed.returncode == 0, listed.stderr
    status = json.loads(listed.stdout)["dev-attn"]
    assert not status["available"]
    assert status["reason"].startswith('inputs="cuda" needs a GPU: ')
    assert "\n" not in status["reason"] and "Traceback" not in status["reason"]
    assert "SDPA" not in status["reason"]  # the plugin's needs, not the torch peers' words
    table = script(db, "--plugin", path, "backends")
    (row,) = [line for line in table.stdout.splitlines() if line.startswith("dev-attn")]
    assert row.split()[1] == "no" and 'inputs="cuda" needs a GPU' in row

    for chosen in (["--backend", "dev-attn"], ["--backends", "reference,dev-attn"]):
        swept = script(db, "--plugin", path, "sweep", *chosen, *SMALL)
        assert swept.returncode == 2, swept.stdout + swept.stderr
        assert swept.stderr.splitlines() == [
            f"error: {chosen[0]} dev-attn: not available: {status['reason']}"
        ], chosen
        assert "Traceback" not in swept.stderr and not db.exists()


@pytest.mark.parametrize(
    ("file", "backend"),
    [
        ("cutile_naive.py", "cutile-naive"),
        ("triton_attention.py", "triton-attention"),
        ("torch_softcap.py", "torch-softcap"),
    ],
)
def test_each_gpu_example_declares_device_inputs_and_the_cpu_examples_keep_theirs(
    file: str, backend: str
) -> None:
    from workbench.backends.plugins import file_declarations

    declared = {d.name: d for d in file_declarations(str(EXAMPLES / file))}
    assert declared[backend].factory.inputs == "cuda"
    if file == "torch_softcap.py":
        assert declared["torch-softcap-cpu"].factory.inputs == "torch"
    (numpy_one,) = file_declarations(str(EXAMPLES / "numpy_softcap.py"))
    assert numpy_one.factory.inputs == "numpy"


def test_a_cuda_plugin_is_timed_as_the_torch_peers_are_and_a_cpu_one_by_the_wall_clock(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The sampler each kind's backend builds, with the GPU procedure recorded instead of run
    (no GPU here): a ``cuda`` plugin's call is the torch-cudnn peer's, argument for argument;
    ``numpy`` and ``torch`` plugins get the wall clock."""
    from workbench.backends import load_backend, torch_base
    from workbench.backends.plugins import file_declarations
    from workbench.measure.timing import CpuSampler, TimingSettings

    calls: list[tuple[Any, ...]] = []
    monkeypatch.setattr(
        torch_base,
        "launch_sampler",
        lambda *args: calls.append(args) or f"gpu sampler {len(calls)}",
    )

    def launch() -> None:
        return None

    settings = TimingSettings(flush_l2=True, graph=True)
    peer = load_backend("torch-cudnn")
    kinds = {}
    for kind in ("cuda", "numpy", "torch"):
        (declared,) = file_declarations(str(write_plugin(tmp_path, kind)))
        kinds[kind] = declared.make()
    assert kinds["cuda"].sampler(launch, settings) == "gpu sampler 1"
    assert peer.sampler(launch, settings) == "gpu sampler 2"
    assert calls[0] == calls[1] == (launch, "torch", settings, torch_base.torch_l2_flusher)
    assert kinds["cuda"].default_timing() == peer.default_timing()
    for kind in ("numpy", "torch"):
        assert isinstance(kinds[kind].sampler(launch, settings), CpuSampler)
        assert kinds[kind].default_timing() != peer.default_timing()
    assert len(calls) == 2


def test_a_numpy_plugins_points_are_still_stored_with_the_wall_clock_timer(
    script: Callable[..., Any], tmp_path: Path, rng: Any
) -> None:
    seed = int(rng.integers(2**31))
    print(f"seed {seed}")
    db = tmp_path / "runs.db"
    swept = script(
        db, "--plugin", EXAMPLES / "numpy_softcap.py", "sweep", "--backend", "numpy-softcap",
        *SMALL, "--seed", str(seed), "--json",
    )  # fmt: skip
    assert swept.returncode == 0, swept.stderr
    (run,) = json.loads(swept.stdout)["runs"]
    assert [p["extra"]["timer"] for p in run["points"]] == ["cpu"]
    assert run["points"][0]["rel_err"] < 1e-2
