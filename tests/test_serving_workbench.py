"""A ragged batch at the CLI on the reference backend: stated as a list, a distribution or a
file; run as a paged decode or a varlen prefill; stored, shown and exported with its lengths;
its FLOPs and K+V bytes counted on the real lengths (pages whole); and every bad input refused
in one line naming the flag, exit 2, nothing written."""

from __future__ import annotations

import csv
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from workbench.batch import parse_lengths
from workbench.config import Problem

FAST = ["--warmup", "0", "--samples", "1", "--min-time", "0"]
SMALL = ["--heads", "4", "--kv-heads", "2", "--head-dim", "32"]


def the_runs_config(db: Path) -> dict[str, Any]:
    """The config of the one run in ``db``, as stored."""
    conn = sqlite3.connect(db)
    try:
        (config,) = [json.loads(row[0]) for row in conn.execute("SELECT config FROM runs")]
    finally:
        conn.close()
    return config


def stored_points(db: Path) -> list[dict[str, Any]]:
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute("SELECT * FROM points ORDER BY seq_len")]
    finally:
        conn.close()


def test_a_paged_decode_runs_is_stored_shown_and_exported(
    run_cli: Callable, db_path: Path, tmp_path: Path
) -> None:
    lengths = "300,1000,0,17,2k"  # an empty request and one shorter than a page among them
    result = run_cli(
        "sweep", "--lengths", lengths, "--q-len", "2", "--mask", "causal", "--page-size", "16",
        "--shared-pages", "1", *SMALL, *FAST,
    )  # fmt: skip
    assert result.code == 0, result.err
    (point,) = stored_points(db_path)
    assert json.loads(point["lengths"]) == [300, 1000, 0, 17, 2048]
    assert point["kv_cache"] == "paged" and point["page_size"] == 16
    assert point["k_len"] == 2048 and point["rel_err"] < 1e-2
    shown = run_cli("show", "1")
    assert "ragged 5× 0–2k (mean 673) P16 H4/2 D32 float16 q_len 2" in shown.out
    assert f"lengths {point['lengths_hash']}" in shown.out
    # Pages of 16: 19 + 63 + 0 + 2 + 128 pages = 3,392 key positions, 27 of them wasted.
    assert "3,392 key positions a KV head, 27 of them the last pages' wasted tails" in shown.out
    out = tmp_path / "runs.csv"
    assert run_cli("export", "--csv", str(out)).code == 0
    (row,) = csv.DictReader(out.open())
    assert row["lengths_summary"] == "ragged 5× 0–2k (mean 673) P16"
    assert json.loads(row["lengths"]) == [300, 1000, 0, 17, 2048]
    assert row["page_size"] == "16" and row["lengths_hash"] == point["lengths_hash"]
    # GB/s of K+V: every page read whole, 2 KV heads, D 32 for K and for V, 2 bytes each.
    kv_bytes = 3392 * 2 * (32 + 32) * 2
    assert float(row["kv_gbs"]) == pytest.approx(kv_bytes / (point["latency_ms"] * 1e-3) / 1e9)
    # FLOPs on the real lengths: each sequence's 2 queries see its last keys, causal among
    # themselves (2·lk - 1 pairs); the empty one none.
    pairs = sum(2 * n - 1 for n in (300, 1000, 17, 2048))
    flops = pairs * 2 * 4 * (32 + 32)
    assert point["tflops"] * point["latency_ms"] * 1e-3 * 1e12 == pytest.approx(flops)


def test_a_varlen_prefill_sweeps_its_longest_sequence(run_cli: Callable, db_path: Path) -> None:
    result = run_cli(
        "sweep", "--lengths", "100,0,1,250", "--seq-lens", "125,250", "--mask", "causal",
        *SMALL, *FAST,
    )  # fmt: skip
    assert result.code == 0, result.err
    first, second = stored_points(db_path)
    # The batch scaled so its longest is each N, every other in proportion, the empty one 0.
    assert json.loads(first["lengths"]) == [50, 0, 1, 125]
    assert json.loads(second["lengths"]) == [100, 0, 1, 250]
    assert first["kv_cache"] == "contiguous" and first["page_size"] is None
    assert max(first["rel_err"], second["rel_err"]) < 1e-2
    flops = sum(n * n // 2 for n in (100, 1, 250)) * 2 * 4 * 64  # causal halved per sequence
    assert second["tflops"] * second["latency_ms"] * 1e9 == pytest.approx(flops)
    shown = run_cli("show", "1").out
    assert "problem  varlen 4× 0–125 (mean 44) H4/2 D32 float16" in shown  # the first point's
    assert "N 250  varlen 4× 0–250 (mean 88)  lengths" in shown


def test_lengths_from_a_file_and_a_seeded_distribution(
    run_cli: Callable, db_path: Path, tmp_path: Path
) -> None:
    table = tmp_path / "lens.csv"
    table.write_text("request,length\na,40\nb,0\nc,1k\n")
    assert run_cli("sweep", "--lengths-file", str(table), "--q-len", "1", *SMALL, *FAST).code == 0
    listed = tmp_path / "lens.json"
    listed.write_text(json.dumps({"lengths": [5, 64]}))
    assert run_cli("sweep", "--lengths-file", str(listed), *SMALL, *FAST).code == 0
    first, second = (json.loads(p["lengths"]) for p in stored_points(db_path)[::-1])
    assert sorted([first, second]) == sorted([[40, 0, 1024], [5, 64]])
    spec = "lognormal:n=32,mean=2k,min=100,max=16k,seed=7"
    drawn = parse_lengths(spec)
    assert drawn == parse_lengths(spec) and drawn != parse_lengths(spec.replace("=7", "=8"))
    assert len(drawn) == 32 and min(drawn) >= 100 and max(drawn) <= 16384
    assert len(set(drawn)) > 16  # a spread, not one value repeated
    uniform = parse_lengths("uniform:n=50,min=10,max=20,seed=3")
    assert set(uniform) <= set(range(10, 21)) and len(set(uniform)) > 5


@pytest.mark.parametrize(
    ("asked", "block"),
    [
        (["--preset", "serving-decode-64", "--page-size", "16"], 64),
        (["--preset", "serving-decode-64", "--page-size", "64"], 128),
        (["--preset", "serving-decode-64", "--page-size", "16", "--tile-n", "32"], 32),
        (["--q-len", "1", "--page-size", "64"], 128),  # no preset: the registry's 64 is not typed
    ],
    ids=["preset-p16", "preset-p64", "typed", "plain-p64"],
)
def test_a_paged_sweep_reads_pages_in_the_paged_kernels_own_block(
    run_cli: Callable, db_path: Path, asked: list[str], block: int
) -> None:
    # The decode presets bring 256-key blocks at D 64 (128 at D 128): on a paged cache the
    # block is the paged kernel's own for the page (eight 16-token pages joined spill, 256 is
    # not one of its blocks); a --tile-n the user types still wins.
    result = run_cli(
        "sweep", *asked, "--lengths", "300,2k", "--heads", "4", "--kv-heads", "2",
        "--head-dim", "64", *FAST,
    )  # fmt: skip
    assert result.code == 0, result.err
    config = the_runs_config(db_path)
    assert config["tile_n"] == block
    assert config["pack_gqa"] is ("--preset" in asked)  # the preset's other knobs still come
    assert config["kv_splits"] is None  # auto: the ragged split table, preset or not


@pytest.mark.parametrize(
    ("typed", "head_dim", "tile"),
    [([], "64", (128, 128)), (["--tile-n", "64"], "64", (128, 64)), ([], "256", (64, 64))],
    ids=["d64", "typed-n", "d256"],
)
def test_a_varlen_prefill_runs_the_varlen_kernels_own_tile_unless_typed(
    run_cli: Callable, db_path: Path, typed: list[str], head_dim: str, tile: tuple[int, int]
) -> None:
    # 128x128 ran fastest on an H100 up to D 128; past it that tile spills, and 64x64 stays.
    result = run_cli(
        "sweep", "--lengths", "100,300", "--heads", "2", "--kv-heads", "1", "--head-dim",
        head_dim, "--mask", "causal", *typed, *FAST,
    )  # fmt: skip
    assert result.code == 0, result.err
    config = the_runs_config(db_path)
    assert (config["tile_m"], config["tile_n"]) == tile


def test_the_serving_presets_state_their_batch() -> None:
    from workbench.problem_presets import serving_presets

    presets = serving_presets()
    decode = presets["serving-decode-64"]
    lengths = parse_lengths(decode.batch["lengths"])
    problem = Problem(**decode.problem, lengths=lengths, kv_cache="paged", page_size=16)
    assert problem.summary().startswith("ragged 64× 1k–")
    assert max(lengths) <= 32768 and min(lengths) >= 1024
    assert "serving-long-context-mix" in presets and not presets["serving-prefill-varlen"].decode


BAD = [
    ("--lengths", ["--lengths", "abc"]),
    ("--lengths", ["--lengths", "300,-5"]),
    ("--lengths", ["--lengths", "0,0"]),
    ("--lengths", ["--lengths", "300,,4"]),
    ("--lengths", ["--lengths", "lognormal:n=4,mean=1k"]),
    ("--lengths", ["--lengths", "lognormal:n=4,mean=1k,max=2k,colour=red"]),
    ("--lengths", ["--lengths", "gauss:n=4"]),
    ("--lengths", ["--lengths", "uniform:n=3,min=9,max=2"]),
    ("--page-size", ["--lengths", "64,9", "--q-len", "1", "--page-size", "24"]),
    ("--page-size", ["--lengths", "64,9", "--q-len", "1", "--page-size", "512"]),
    ("--page-size", ["--lengths", "64,9", "--page-size", "16"]),  # a prefill's cache: contiguous
    ("--kv-cache", ["--lengths", "64,9", "--kv-cache", "paged"]),  # varlen packs K, V contiguous
    ("--kv-cache", ["--lengths", "64,9", "--q-len", "1", "--kv-cache", "ring"]),
    ("--kv-cache", ["--kv-cache", "paged", "--seq-lens", "64"]),  # no batch to page
    ("--shared-pages", ["--lengths", "64,9", "--q-len", "1", "--shared-pages", "9"]),
    ("--q-len", ["--lengths", "4,2", "--q-len", "8"]),  # more queries than the longest's keys
    ("--batch", ["--lengths", "64,9", "--batch", "4"]),
    ("--lengths", ["--lengths", "64,9", "--lengths-file", "x.csv"]),
    ("--k-lens", ["--lengths", "64,9", "--k-lens", "128"]),  # a prefill sweeps --seq-lens
]


@pytest.mark.parametrize(("flag", "args"), BAD, ids=[" ".join(a) for _, a in BAD])
def test_bad_batches_are_refused_in_one_line_naming_the_flag(
    flag: str, args: list[str], run_cli: Callable, db_path: Path
) -> None:
    result = run_cli("sweep", *args, *SMALL, *FAST)
    assert result.code == 2, (result.code, result.err)
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and flag in lines[0], result.err
    assert "Traceback" not in result.err and result.out == ""
    assert not db_path.exists()  # refused before the store was opened


@pytest.mark.parametrize(
    ("content", "suffix", "words"),
    [
        ("40\nforty\n", ".csv", "line 2: 'forty' is not a length"),
        ("id,name\n1,a\n", ".csv", "line 1: no column named length"),
        ("[1, 2,", ".json", "is not JSON"),
        ('{"lengths": [3, true]}', ".json", "item 1 is True"),
        ("[]", ".json", "holds no lengths"),
        ("40\n", ".txt", "expected a .csv or .json file"),
        ("-4\n", ".csv", "line 1: a length of -4"),
    ],
)
def test_a_lengths_file_that_does_not_parse_is_refused(
    content: str, suffix: str, words: str, run_cli: Callable, db_path: Path, tmp_path: Path
) -> None:
    path = tmp_path / f"lens{suffix}"
    path.write_text(content)
    result = run_cli("sweep", "--lengths-file", str(path), *SMALL, *FAST)
    assert result.code == 2
    (line,) = result.err.strip().splitlines()
    assert line.startswith(f"error: --lengths-file {path}: ") and words in line, line
    assert not db_path.exists()


def test_a_missing_lengths_file_is_refused(
    run_cli: Callable, db_path: Path, tmp_path: Path
) -> None:
    result = run_cli("sweep", "--lengths-file", str(tmp_path / "none.csv"), *FAST)
    assert result.code == 2 and "cannot be read" in result.err and not db_path.exists()


def test_a_backend_without_the_serving_layouts_refuses_a_ragged_batch() -> None:
    from workbench.backends.reference import ReferenceBackend
    from workbench.config import ConfigError, KernelConfig

    class DenseOnly(ReferenceBackend):
        name = "dense-only"
        runs_ragged = False

    problem = Problem(lengths=(64, 9), q_len=1, kv_cache="paged", page_size=16)
    with pytest.raises(ConfigError) as refused:
        DenseOnly().check_supported(problem, KernelConfig())
    assert refused.value.cli_message().startswith("--backend dense-only: does not run a ragged")
    ReferenceBackend().check_supported(problem, KernelConfig())  # the reference runs it


def test_a_longest_length_typed_in_digits_is_shown_as_typed(run_cli: Any, db_path: Path) -> None:
    """``--lengths 300,3000,1k``: runs says 300–3000 (what was typed), not 300–2.9k (3000/1024
    rounded); an exact multiple of 1024 keeps its short form."""
    result = run_cli("sweep", "--lengths", "300,3000,1k", "--q-len", "1", *SMALL, *FAST)
    assert result.code == 0, result.err
    listed = run_cli("runs").out
    assert "ragged 3× 300–3000 (mean 1.4k) P16" in listed, listed
