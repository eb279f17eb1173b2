"""The offline compile's signature is the one cuTile's JIT derives from a launch's arrays, so
a cubin compiled without a GPU (kernels.cutile.precompile, the resources report) is the one
the launch finds in cuTile's disk cache: the tuner's cold search leans on it (issue #52).

Without a GPU the JIT's side is read through cuTile's own
``get_parameter_constraints_from_pyargs`` over stand-in arrays, in a child process that loads
a stand-in ``libcuda.so.1`` (built here with the C compiler: every driver call succeeds and
does nothing). fp16 arrays: ``__cuda_array_interface__`` has no bfloat16, and the dtype is the
one field copied as is.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("cuda.tile")

from kernels import cutile_fmha as F

ROOT = Path(__file__).resolve().parents[1]
IN_CI = os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")

STUB_C = r"""
static int ok(void) { return 0; }
static int version(int *v) { *v = 13020; return 0; }
static int same(const char *a, const char *b) {
  while (*a && *a == *b) { a++; b++; }
  return *a == *b;
}
int cuGetProcAddress_v2(const char *symbol, void **pfn, int ver, unsigned long long flags,
                        int *status) {
  *pfn = same(symbol, "cuDriverGetVersion") ? (void *)version : (void *)ok;
  if (status) *status = 1;
  return 0;
}
"""

# Launches of each form the tuner searches: the decode form unsplit and split (with its
# combine), the tile form causal, the persistent form, a head dim run in two chunks.
PLANS = [
    dict(q_len=1, k_len=8192, batch=8, mask="none", pack_gqa=True, tile_n=128),
    dict(q_len=1, k_len=32768, batch=1, mask="none", pack_gqa=True, tile_n=128, kv_splits=16),
    dict(q_len=4096, k_len=4096, batch=2, mask="causal", tile_m=128, tile_n=128, occupancy=2),
    dict(q_len=2048, k_len=2048, batch=2, mask="none", tile_m=128, tile_n=128, persistent=True),
    dict(q_len=1024, k_len=1024, batch=2, mask="causal", head_dim=96, tile_m=64, tile_n=64),
]

# Runs in the child: for each plan (and its combine), the JIT's constraints from stand-in
# arrays beside the offline ones, and whether the two give one bytecode; with "cached", the
# JIT's signature compiled with tileiras taken away (only cuTile's disk cache can answer).
CHILD = r"""
import json, sys
from cuda.tile import _cext, _compile
from cuda.tile.compilation import CallingConvention, KernelSignature
from kernels.cutile import compile as C, forms

plans, cached = json.loads(sys.argv[1]), sys.argv[2] == "cached"
typestr = {"float16": ("<f2", 2), "float32": ("<f4", 4), "int32": ("<i4", 4)}

class StandIn:
    def __init__(self, shape, dtype, ptr):
        ts, item = typestr[dtype]
        strides = [1] * len(shape)
        for i in range(len(shape) - 2, -1, -1):
            strides[i] = strides[i + 1] * shape[i + 1]
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": ts, "version": 3,
            "data": (ptr, False), "strides": tuple(s * item for s in strides)}

def bytecode(kern, params):
    sig = KernelSignature(list(params), CallingConvention.cutile_python_v2())
    return _compile.compile_tile(kern._annotated_function, [sig], sm_arch="sm_90",
        compiler_options=kern._compiler_options, return_bytecode=True,
        return_cubin=False).bytecode

if cached:
    def no_tileiras(*args, **kwargs):
        raise RuntimeError("tileiras was called: the cubin was not in the disk cache")
    _compile.compile_cubin = no_tileiras

out = []
for kw in plans:
    call, _ = C.offline_plan(dtype="float16", heads=32, kv_heads=8, **{"head_dim": 128, **kw})
    while call is not None:
        kern = forms.kernel_for(call)
        args, ptr = [], 1 << 32
        for p in forms.declaration(call.form):
            v = call.values[p.name]
            if p.kind == "array":
                args.append(StandIn(v.shape, v.dtype, ptr)); ptr += 1 << 30
            else:
                args.append(v)
        jit = _cext.get_parameter_constraints_from_pyargs(
            kern, tuple(args), CallingConvention.cutile_python_v2())
        ours = C.signature_parameters(call)
        params = forms.declaration(call.form)
        row = {"form": call.form, "differ": [f"{p.name}: jit {a} | ours {b}"
            for p, a, b in zip(params, jit, ours) if p.kind == "array" and a != b]}
        if cached:
            try:
                sig = KernelSignature(list(jit), CallingConvention.cutile_python_v2())
                _compile.compile_tile(kern._annotated_function, [sig], sm_arch="sm_90",
                    compiler_options=kern._compiler_options)
                row["from_cache"] = True
            except RuntimeError as exc:
                row["from_cache"] = str(exc)
        else:
            row["same_bytecode"] = bytecode(kern, jit) == bytecode(kern, ours)
        out.append(row)
        call = call.then
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def stub_libcuda(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        message = (
            "no C compiler (cc, gcc) for the stand-in libcuda: scripts/setup.sh --test installs gcc"
        )
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    folder = tmp_path_factory.mktemp("libcuda")
    (folder / "stub.c").write_text(STUB_C)
    subprocess.run(
        [
            cc,
            "-shared",
            "-fPIC",
            "-nostdlib",
            "-o",
            str(folder / "libcuda.so.1"),
            str(folder / "stub.c"),
        ],
        check=True,
    )
    return folder


def _child(stub: Path, plans: list[dict], mode: str, cache: Path) -> list[dict]:
    env = {
        **os.environ,
        "LD_LIBRARY_PATH": os.pathsep.join(
            filter(None, (str(stub), os.environ.get("LD_LIBRARY_PATH")))
        ),
        "CUDA_TILE_CACHE_DIR": str(cache),
        "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH")))),
    }
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(plans), mode],
        env=env, capture_output=True, text=True, timeout=600, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_offline_signature_is_the_jits_and_gives_its_bytecode(
    stub_libcuda: Path, tmp_path: Path
) -> None:
    rows = _child(stub_libcuda, PLANS, "bytecode", tmp_path / "cache")
    assert {r["form"] for r in rows} >= {"decode", "tile", "persistent"}
    assert len(rows) > len(PLANS)  # the split decode's combine is checked too
    for row in rows:
        assert row["differ"] == [], row
        assert row["same_bytecode"], row


def test_a_precompiled_space_is_in_the_cache_the_launch_reads(
    stub_libcuda: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the tuner does before its first launch: after ``precompile`` the JIT's own
    signature of each config compiles with tileiras taken away; with an empty cache it cannot."""
    if F.tileiras_version() is None:
        message = "tileiras is not installed (scripts/setup.sh --test installs cuda-tile[tileiras])"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    from kernels.cutile.config import LaunchConfig
    from kernels.cutile.precompile import job, precompile
    from kernels.cutile.problem import Problem

    plans = PLANS[:2]  # a decode class's candidates: unsplit, and split with a combine
    cache = tmp_path / "cache"
    empty = _child(stub_libcuda, plans[:1], "cached", tmp_path / "empty")
    assert "tileiras was called" in str(empty[0]["from_cache"])

    monkeypatch.setenv("CUDA_TILE_CACHE_DIR", str(cache))  # the children's cache
    jobs = []
    for kw in plans:
        kw = dict(kw)
        p = Problem(kw.pop("batch"), 32, 8, kw.pop("q_len"), kw.pop("k_len"), 128, "float16")
        mask = kw.pop("mask")
        config = LaunchConfig.of(kw)
        jobs.append(job(p, config, mask=mask, input_pos=0, window=None, sm_count=132, arch="sm_90"))
    report = precompile([*jobs, jobs[0]], timeout_s=300)  # a repeated config compiles once
    assert report["jobs"] == 3 and report["kernels"] == 3, report  # two splits, one combine
    assert report["compiled"] == 3 and report["failed"] == 0 and report["workers"] >= 1, report
    rows = _child(stub_libcuda, plans, "cached", cache)
    assert len(rows) == 3  # two split kernels and the combine
    assert all(r["from_cache"] is True for r in rows), rows
