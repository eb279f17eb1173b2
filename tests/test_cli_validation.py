"""Bad input at the CLI: exit 2, one line on stderr naming the field, and nothing stored.

The explicit table covers every field once; the hypothesis test throws random mixtures of good
and bad values at ``sweep`` and checks the same promise, and that the good mixtures do run.
"""

from __future__ import annotations

import gc
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from kernels.knobs import KNOBS
from workbench.cli import main
from workbench.config import HEAD_DIMS, MAX_SEQ_LEN

TILE_SIZES = KNOBS["tile_m"].values
WORKER_WARPS = tuple(w for w in KNOBS["num_worker_warps"].values if w is not None)
CLUSTER_CTAS = tuple(c for c in KNOBS["num_ctas"].values if c is not None)

RunCli = Callable[..., Any]
FAST = ["--warmup", "0", "--samples", "1", "--min-time", "0"]


def names_field(line: str, field: str) -> bool:
    """Does the message name the field (as --option, option or field_name, or as the flag
    that sets it: --cluster-ctas for num_ctas)?"""
    from workbench.field_words import FIELD_FLAGS

    flat = line.lower().replace("_", "-")
    flag = KNOBS[field].flag if field in KNOBS else FIELD_FLAGS.get(field)
    return field.lower().replace("_", "-") in flat or (flag is not None and flag in line)


def assert_refused(result: Any, field: str, db: Path, count_rows: Callable) -> None:
    assert result.code == 2, (result.code, result.err)
    assert "Traceback" not in result.err
    assert len(result.err_lines) == 1, result.err  # one line, no notes, no progress
    line = result.err_lines[0]
    assert line.startswith("error: ")
    assert names_field(line, field), line
    assert result.out == ""
    # Refused before the store is even opened: no database file is created.
    assert not db.exists() and count_rows(db, "runs") == 0


SWEEP_BAD = [
    ("batch", ["--batch", "0"]),
    ("batch", ["--batch=-3"]),
    ("batch", ["--batch", "two"]),
    ("batch", ["--batch", "5000"]),
    ("heads", ["--heads", "0"]),
    ("heads", ["--heads", "1.5"]),
    ("heads", ["--heads", "2000"]),
    ("kv_heads", ["--heads", "8", "--kv-heads", "3"]),
    ("kv_heads", ["--kv-heads", "0"]),
    ("kv_heads", ["--heads", "2", "--kv-heads", "4"]),
    ("kv-heads", ["--kv-heads", "x"]),
    ("head_dim", ["--head-dim", "44"]),
    ("head_dim", ["--head-dim", "0"]),
    ("head-dim", ["--head-dim", "sixty"]),
    ("dtype", ["--dtype", "float32"]),
    ("dtype", ["--dtype", "fp16"]),
    ("input_pos", ["--input-pos=-1"]),
    ("input_pos", ["--input-pos=-100"]),
    ("input_pos", ["--input-pos", str(MAX_SEQ_LEN + 1)]),
    ("input-pos", ["--input-pos", "1e3"]),
    ("seq_lens", ["--seq-lens", ""]),
    ("seq_lens", ["--seq-lens", "abc"]),
    ("seq_lens", ["--seq-lens", "0"]),
    ("seq_lens", ["--seq-lens", "16,0"]),
    ("seq_lens", ["--seq-lens=-16"]),
    ("seq_lens", ["--seq-lens", "1.5k"]),
    ("seq_lens", ["--seq-lens", "1k-3k"]),  # a range needs powers of two
    ("seq_lens", ["--seq-lens", "2k-1k"]),  # low to high
    ("seq_lens", ["--seq-lens", ","]),
    ("seq_lens", ["--seq-lens", str(MAX_SEQ_LEN * 2)]),
    ("tile_m", ["--tile-m", "48"]),
    ("tile_m", ["--tile-m", "512"]),
    ("tile-m", ["--tile-m", "big"]),
    ("tile_n", ["--tile-n", "8"]),
    ("tile_n", ["--tile-n", "0"]),
    ("mask", ["--mask", "sliding"]),
    ("mask", ["--mask", "Causal"]),
    ("window", ["--mask", "window"]),  # a window mask without a size
    ("window", ["--window", "16"]),  # a size without the window mask
    ("window", ["--mask", "causal", "--window", "16"]),
    ("window", ["--mask", "none", "--window", "16"]),
    ("window", ["--mask", "window", "--window", "0"]),
    ("window", ["--mask", "window", "--window=-4"]),
    ("occupancy", ["--occupancy", "0"]),
    ("occupancy", ["--occupancy", "33"]),
    ("worker_warps", ["--worker-warps", "3"]),
    ("worker_warps", ["--worker-warps", "0"]),
    ("worker_warps", ["--worker-warps", "64"]),
    ("worker_warps", ["--worker-warps", "16"]),  # offered once, then refused by the kernel
    ("worker_warps", ["--worker-warps", "1"]),
    ("worker_warps", ["--backend", "cutile", "--worker-warps", "32"]),
    ("num_ctas", ["--cluster-ctas", "3"]),
    ("num_ctas", ["--cluster-ctas", "0"]),
    ("num_ctas", ["--cluster-ctas", "32"]),
    ("cluster-ctas", ["--cluster-ctas", "two"]),
    ("poly_exp2_cols", ["--k-split", "--poly-exp2-cols", "24"]),
    ("poly_exp2_cols", ["--k-split", "--tile-n", "64", "--poly-exp2-cols", "64"]),
    ("poly_exp2_cols", ["--no-k-split", "--poly-exp2-cols", "16"]),
    ("poly-exp2-cols", ["--poly-exp2-cols", "lots"]),
    ("persistent", ["--persistent", "--mask", "window", "--window", "8"]),
    ("k_unroll", ["--persistent", "--mask", "causal", "--k-unroll", "2"]),
    ("persistent", ["--persistent", "--cluster-ctas", "2"]),
    ("k_unroll", ["--k-unroll", "2"]),  # without --persistent
    ("k_unroll", ["--persistent", "--k-unroll", "3"]),
    ("k-unroll", ["--persistent", "--k-unroll", "pairs"]),
    ("k_latency", ["--k-latency", "0"]),
    ("v_latency", ["--v-latency", "11"]),
    ("pipeline", ["--no-k-split", "--pipeline"]),
    ("persistent", ["--persistent", "--pipeline"]),
    ("tile_m", ["--backend", "cutile", "--tile-m", "32"]),  # the kernel's tiles, without a GPU
    ("tile_m", ["--backend", "cutile", "--arch", "sm_120", "--tile-m", "256"]),
    ("occupancy", ["--backends", "reference,cutile", "--arch", "sm_121", "--occupancy", "2"]),
    ("arch", ["--backend", "cutile", "--arch", "blackwell"]),
    ("backend", ["--backend", "nope"]),
    ("backend", ["--backend", ""]),
    ("backend", ["--backends", "reference,nope"]),
    ("backends", ["--backends", "reference,reference"]),
    ("backends", ["--backends", ","]),
    ("label", ["--label", "x" * 201]),
    ("seed", ["--seed=-1"]),
    ("seed", ["--seed", "abc"]),
    ("samples", ["--samples", "0"]),
    ("warmup", ["--warmup=-1"]),
    ("min_time", ["--min-time=-1"]),
    ("min-time", ["--min-time", "soon"]),
    ("--frobnicate", ["--frobnicate"]),
]


@pytest.mark.parametrize(("field", "args"), SWEEP_BAD, ids=[" ".join(a) for _, a in SWEEP_BAD])
def test_bad_sweep_values_are_refused(
    field: str, args: list[str], run_cli: RunCli, db_path: Path, count_rows: Callable
) -> None:
    base = ["sweep", "--seq-lens", "16", "--heads", "1", "--head-dim", "32", *FAST]
    result = run_cli(*base, *args)
    assert_refused(result, field, db_path, count_rows)


def test_a_problem_too_large_for_int32_indexing_is_refused(
    run_cli: RunCli, db_path: Path, count_rows: Callable
) -> None:
    result = run_cli("sweep", "--batch", "4096", "--heads", "1024", "--seq-lens", "1024", *FAST)
    assert_refused(result, "batch", db_path, count_rows)
    assert "2^31" in result.err


def test_bad_values_leave_an_existing_database_untouched(
    run_cli: RunCli, db_path: Path, count_rows: Callable
) -> None:
    ok = run_cli("sweep", "--seq-lens", "16", "--heads", "1", "--head-dim", "32", *FAST)
    assert ok.code == 0
    gc.collect()  # the sweep's connection closes and checkpoints: the file is all there is
    assert not db_path.with_name("runs.db-wal").exists()
    before = db_path.read_bytes()
    for field, args in SWEEP_BAD:
        result = run_cli("sweep", "--seq-lens", "16", *args)
        assert result.code == 2, (field, result.err)
    gc.collect()
    assert db_path.read_bytes() == before
    assert not db_path.with_name("runs.db-wal").exists()
    assert count_rows(db_path, "runs") == 1 and count_rows(db_path, "points") == 1


OTHER_BAD = [
    ("run", ["show", "4242"]),
    ("run", ["show", "one"]),
    ("run", ["compare", "1", "4242"]),
    ("run", ["compare", "4242", "1"]),
    ("compare", ["compare", "1"]),  # one run is not a comparison
    ("group", ["compare", "--group", "99"]),
    ("run", ["export", "--csv", "out.csv", "--runs", "4242"]),
    ("runs", ["export", "--csv", "out.csv", "--runs", "1,x"]),
    ("csv", ["export"]),
    ("limit", ["runs", "--limit", "ten"]),
    ("q_len", ["blockmap", "--q-len", "0"]),
    ("q-len", ["blockmap"]),
    ("k_len", ["blockmap", "--q-len", "64", "--k-len", "0"]),
    ("tile_m", ["blockmap", "--q-len", "64", "--tile-m", "48"]),
    ("tile_n", ["blockmap", "--q-len", "64", "--tile-n", "7"]),
    ("mask", ["blockmap", "--q-len", "64", "--mask", "diagonal"]),
    ("window", ["blockmap", "--q-len", "64", "--window", "8"]),
    ("window", ["blockmap", "--q-len", "64", "--mask", "window"]),
    ("input_pos", ["blockmap", "--q-len", "64", "--input-pos=-1"]),
    ("command", ["frobnicate"]),
]


@pytest.mark.parametrize(("field", "args"), OTHER_BAD, ids=[" ".join(a) for _, a in OTHER_BAD])
def test_bad_values_for_other_commands_are_refused(
    field: str,
    args: list[str],
    run_cli: RunCli,
    db_path: Path,
    tmp_path: Path,
    count_rows: Callable,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    ok = run_cli("sweep", "--seq-lens", "16", "--heads", "1", "--head-dim", "32", *FAST)
    assert ok.code == 0 and ok.out.strip() == "1"
    result = run_cli(*args)
    assert result.code == 2, (result.code, result.err)
    assert "Traceback" not in result.err
    assert len(result.err_lines) == 1, result.err
    assert result.err_lines[0].startswith("error: ")
    assert names_field(result.err_lines[0], field), result.err
    assert count_rows(db_path, "runs") == 1  # nothing added, nothing removed
    assert not (tmp_path / "out.csv").exists()  # a refused export touches no file


def test_export_to_an_unwritable_place_is_refused(
    run_cli: RunCli, tmp_path: Path, db_path: Path
) -> None:
    from workbench.store import Store

    Store(db_path).close()
    result = run_cli("export", "--csv", str(tmp_path / "no" / "such" / "dir" / "x.csv"))
    assert result.code == 2
    assert len(result.err_lines) == 1 and "x.csv" in result.err


# --- property-based ---------------------------------------------------------------------------

# Each field: a strategy of valid (small, quick) values and one of invalid ones.
ints = st.integers


def text_not(allowed: tuple[str, ...]) -> st.SearchStrategy[str]:
    return st.text(
        alphabet="abcdefghijklmnopqrstuvwxyz0123456789_", min_size=1, max_size=10
    ).filter(lambda s: s not in allowed)


# Options whose config field has another name: the core's message names the field.
FIELD_OF_OPTION = {"cluster-ctas": "num_ctas"}

BAD = {
    "batch": st.one_of(ints(max_value=0), ints(4097, 10**7), st.just("x")),
    "heads": st.one_of(ints(max_value=0), ints(1025, 10**6), st.just("1.0")),
    "head-dim": ints(-10, 1000).filter(lambda d: d not in HEAD_DIMS),
    "dtype": text_not(("float16", "bfloat16")),
    "input-pos": st.one_of(ints(max_value=-1), ints(MAX_SEQ_LEN + 1, 10**9)),
    "seq-lens": st.sampled_from(
        ["", "0", "abc", "16,x", "1k-3k", "512-64", "1..3", ",", "-5", "16;32", "99999999", "k"]
    ),
    "tile-m": ints(-5, 600).filter(lambda t: t not in TILE_SIZES),
    "tile-n": ints(-5, 600).filter(lambda t: t not in TILE_SIZES),
    "mask": text_not(("none", "causal", "window")),
    "occupancy": st.one_of(ints(max_value=0), ints(33, 1000)),
    "worker-warps": ints(-4, 100).filter(lambda w: w not in WORKER_WARPS),
    "cluster-ctas": ints(-4, 100).filter(lambda c: c not in CLUSTER_CTAS),
    "backend": text_not(("reference",)),
    "label": st.text(min_size=201, max_size=260)
    .map(lambda s: s.replace("\x00", ""))
    .filter(lambda s: len(s) > 200),
    "seed": ints(max_value=-1),
    "samples": ints(max_value=0),
    "warmup": ints(max_value=-1),
}


@st.composite
def sweep_args(draw: st.DrawFn) -> tuple[list[str], set[str]]:
    """A sweep command line of small valid values, with some fields replaced by bad ones."""
    kv_heads = draw(st.sampled_from([1, 2]))
    values: dict[str, Any] = {
        "batch": draw(ints(1, 2)),
        "heads": kv_heads * draw(ints(1, 2)),
        "kv-heads": kv_heads,
        "head-dim": draw(st.sampled_from([32, 64])),
        "dtype": draw(st.sampled_from(["float16", "bfloat16"])),
        "input-pos": draw(ints(0, 40)),
        "seq-lens": draw(st.sampled_from(["16", "1,7,33", "16-32", "32..32", "5, 9"])),
        "tile-m": draw(st.sampled_from(TILE_SIZES)),
        "tile-n": draw(st.sampled_from(TILE_SIZES)),
        "mask": draw(st.sampled_from(["none", "causal", "window"])),
        "occupancy": draw(st.none() | ints(1, 32)),
        "worker-warps": draw(st.none() | st.sampled_from(WORKER_WARPS)),
        "cluster-ctas": draw(st.none() | st.sampled_from(CLUSTER_CTAS)),
        "backend": "reference",
        "label": draw(st.text(max_size=30).map(lambda s: s.replace("\x00", ""))),
        "seed": draw(st.none() | ints(0, 2**32)),
        "samples": 1,
        "warmup": 0,
    }
    window = draw(ints(1, 64)) if values["mask"] == "window" else None
    # About half the cases are valid, so both halves of the promise are exercised.
    bad_count = draw(st.sampled_from([0, 0, 0, 1, 1, 2]))
    bad_fields = draw(st.sets(st.sampled_from(sorted(BAD)), min_size=bad_count, max_size=bad_count))
    for name in bad_fields:
        values[name] = draw(BAD[name])
    # The window rules: a size exactly with mask 'window'.
    window_bad = not bad_fields and draw(st.sampled_from([False, False, True]))
    if window_bad:
        if values["mask"] == "window":
            window = draw(st.sampled_from([None, 0, -3, MAX_SEQ_LEN + 1]))
        else:
            window = draw(ints(1, 100))
        bad_fields.add("window")
    argv = ["sweep", "--min-time", "0"]
    for name, value in values.items():
        if value is not None:
            argv.append(f"--{name}={value}")
    if window is not None:
        argv.append(f"--window={window}")
    return argv, bad_fields


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=sweep_args())
def test_sweep_arguments_property(
    case: tuple[list[str], set[str]], capsys: pytest.CaptureFixture[str], count_rows: Callable
) -> None:
    argv, bad_fields = case
    event("refused" if bad_fields else "accepted")
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "runs.db"
        capsys.readouterr()
        code = main([*argv, "--db", str(db)])
        out, err = capsys.readouterr()
        lines = [line for line in err.splitlines() if line.strip()]
        if bad_fields:
            assert code == 2, (argv, err)
            assert "Traceback" not in err
            assert len(lines) == 1 and lines[0].startswith("error: "), err
            named = bad_fields | {FIELD_OF_OPTION[f] for f in bad_fields if f in FIELD_OF_OPTION}
            assert any(names_field(lines[0], f) for f in named), (bad_fields, err)
            assert not db.exists(), argv
            assert out == ""
        else:
            assert code == 0, (argv, err)
            assert count_rows(db, "runs") == 1
            n_points = count_rows(db, "points")
            assert n_points >= 1 and re.fullmatch(r"\d+\n", out)
