"""The developer benchmarks' report tables (CPU only: the formatting, not the GPU timing)."""

from __future__ import annotations

import itertools
import json
from collections import Counter

import pytest

from bench.tuner_consistency import to_markdown


def _key(**knobs: object) -> str:
    base = {"k_latency": 2, "v_latency": 4, "num_ctas": None, "num_worker_warps": None,
            "occupancy": 2, "pipeline": False, "poly_exp2_cols": 0, "store_tma": True}  # fmt: skip
    return json.dumps({**base, **knobs}, sort_keys=True)


def test_tuner_table_marks_each_runs_pick_beside_the_benchmark_time() -> None:
    tile = _key(tile_m=64, tile_n=128)
    cluster = _key(tile_m=128, tile_n=128, num_ctas=2, k_latency=3, v_latency=6)
    row = {
        "mask": "causal",
        "n": 2048,
        "picks": [
            {"pick": json.loads(tile), "stage2_us": {tile: 316.4, cluster: 332.5}},
            {"pick": json.loads(cluster), "stage2_us": {cluster: 318.4}},
        ],
        "bench_us": {"cudnn": 309.2, tile: 336.2, cluster: 315.2},
    }
    lines = to_markdown([row]).splitlines()
    assert lines[0] == "### causal N = 2048"
    body = [ln for ln in lines if ln.startswith("| ") and "---" not in ln][1:]
    # Fastest in the benchmark first; each run's pick is marked; a config that was not a
    # finalist in a run shows a dash; the ratio is cuDNN's time over the config's.
    picked = "| 332.5 | 318.4 **picked** | 315.2 | 0.98 |"
    assert body[0] == f"| 128×128 occ 2 cluster 2 lat 3/6 {picked}"
    assert body[1] == "| 64×128 occ 2 | 316.4 **picked** | – | 336.2 | 0.92 |"
    assert body[2].startswith("| cuDNN |") and body[2].endswith("| 309.2 | 1.00 |")


def test_timed_rounds_gives_every_backend_one_sample_per_round_in_a_balanced_order() -> None:
    from bench.explore_lib import timed_rounds

    calls: list[str] = []

    def measure(name: str):
        def once() -> float:
            calls.append(name)
            return float(len(calls))  # the call's position, so the result order is visible

        return once

    names = ["tuned", "cudnn", "flash", "naive"]
    samples = timed_rounds({name: measure(name) for name in names}, rounds=12)
    assert list(samples) == names
    assert all(len(s) == 12 for s in samples.values())
    # Results come back per name in round order, each from that name's own call.
    for name, got in samples.items():
        assert [calls[int(x) - 1] for x in got] == [name] * 12
        assert got == sorted(got)
    # Over the twelve rounds (a whole cycle for four) every backend runs right after every
    # other one equally often, counting the calls where one round meets the next.
    follows = Counter(itertools.pairwise(calls))
    assert set(follows) == {(a, b) for a in names for b in names if a != b}
    assert max(follows.values()) - min(follows.values()) <= 1


def test_compile_jobs_drop_unset_knobs_and_match_the_benchmarks_leave_out_key() -> None:
    from bench.explore_lib import _variant_key, compile_job

    config = {"tile_m": 128, "tile_n": 128, "occupancy": None, "num_worker_warps": 8,
              "persistent": True}  # fmt: skip
    job = compile_job(config, "none", 4, 32, 128)
    shape = {"mask": "none", "batch": 4, "heads": 32, "dim": 128, "dtype": "float16"}
    assert job == {"tile_m": 128, "tile_n": 128, "num_worker_warps": 8, "persistent": True,
                   **shape}  # fmt: skip
    # A job that fails to compile is left out of the run by this key: it must name the config.
    assert _variant_key(job) == _variant_key({**config, "mask": "none"})
    assert compile_job(config, "none", 1, 8, 64, "bfloat16")["dtype"] == "bfloat16"


def test_explore_table_shows_a_config_with_a_wrong_result_instead_of_dropping_it() -> None:
    from bench.explore_configs import to_markdown as explore_table

    row = {
        "mask": "none",
        "n": 2048,
        "tflops": {"cudnn": 550.0, "128x128 ww8 lat2/4": 522.5},
        "rel_err": {"cudnn": 2.9e-4, "128x128 ww8 lat2/4": 2.9e-4, "128x128 ww8 lat2/4 pers": 0.73},
    }
    lines = explore_table([row]).splitlines()
    assert lines[0] == "| config | none 2048 |"
    assert "| 128x128 ww8 lat2/4 | 522 (0.95×) |" in lines
    # The miscompiled variant was not timed, and its row says why.
    assert "| 128x128 ww8 lat2/4 pers | wrong (rel. err 0.73) |" in lines


def test_explore_table_names_the_query_and_key_lengths_when_they_differ() -> None:
    from bench.explore_configs import to_markdown as explore_table

    rows = [
        {"mask": "none", "n": n, "q_len": 2048, "tflops": {"cudnn": 500.0 + n / 100},
         "rel_err": {"cudnn": 2.9e-4}}
        for n in (1024, 2048)
    ]  # fmt: skip
    assert explore_table(rows).splitlines()[0] == "| config | none q2048 k1024 | none 2048 |"


def test_explore_refuses_a_fixed_query_length_with_a_causal_mask_before_any_gpu_work() -> None:
    from bench.explore_configs import parse_args

    assert parse_args(["--masks", "none", "--q-len", "2048"]).q_len == 2048
    for argv in (["--q-len", "2048"], ["--masks", "none", "--q-len", "0"]):
        with pytest.raises(SystemExit) as exc:
            parse_args(argv)
        assert exc.value.code == 2


def test_explore_refuses_kv_heads_that_do_not_divide_the_heads_before_any_gpu_work() -> None:
    from bench.explore_configs import parse_args

    assert parse_args(["--heads", "32", "--kv-heads", "8"]).kv_heads == 8
    for argv in (["--heads", "32", "--kv-heads", "5"], ["--kv-heads", "0"]):
        with pytest.raises(SystemExit) as exc:
            parse_args(argv)
        assert exc.value.code == 2


def test_clock_sampler_reports_the_clock_inside_each_configs_windows_only() -> None:
    import itertools
    import time

    from bench.clock_sampler import ClockSampler

    # A GPU that boosts (1980 MHz) for the first readings and then holds its power limit.
    counter = itertools.count()

    def read() -> tuple[float, float]:
        return (1980.0, 400.0) if next(counter) < 20 else (1755.0, 690.0)

    with ClockSampler(read, period_s=0.001) as sampler:
        deadline = time.perf_counter() + 10
        while len(sampler.readings()) < 40 and time.perf_counter() < deadline:
            time.sleep(0.002)
    readings = sampler.readings()
    assert len(readings) >= 40
    t1 = readings[-1][0]
    early = sampler.summary([(readings[0][0], readings[5][0])])
    late = sampler.summary([(readings[30][0], t1)])
    assert early["sm_mhz"] == 1980.0 and early["power_w"] == 400.0 and early["samples"] == 6
    assert late["sm_mhz"] == 1755.0 and late["power_w"] == 690.0
    # Two windows together: the median clock over both, the mean power over both.
    both = sampler.summary([(readings[0][0], readings[1][0]), (readings[30][0], readings[32][0])])
    assert both["samples"] == 5 and both["sm_mhz"] == 1755.0 and both["power_w"] == 574.0
    assert sampler.summary([(t1 + 10, t1 + 11)]) == {"sm_mhz": None, "power_w": None, "samples": 0}
    assert sampler.error is None


def test_clock_sampler_stops_on_a_failing_reader_and_says_why() -> None:
    import time

    from bench.clock_sampler import ClockSampler

    def read() -> tuple[float, float]:
        raise RuntimeError("NVML Shared Library Not Found")

    with ClockSampler(read, period_s=0.001) as sampler:
        deadline = time.perf_counter() + 5
        while sampler.error is None and time.perf_counter() < deadline:  # it ends by itself
            time.sleep(0.001)
    assert sampler.error == "RuntimeError: NVML Shared Library Not Found"
    assert sampler.summary([(0.0, 1e12)])["samples"] == 0
    with pytest.raises(ValueError):
        ClockSampler(read, period_s=0)


def test_explore_table_adds_the_clock_section_when_clocks_were_sampled() -> None:
    from bench.explore_configs import parse_args
    from bench.explore_configs import to_markdown as explore_table

    assert parse_args(["--clocks"]).clocks is True and parse_args([]).clocks is False
    row = {
        "mask": "none",
        "n": 2048,
        "tflops": {"cudnn": 557.0, "128x128 ww8 lat2/4 pers": 528.0},
        "rel_err": {"cudnn": 2.9e-4, "128x128 ww8 lat2/4 pers": 2.9e-4},
        "clocks": {
            "cudnn": {"sm_mhz": 1710.0, "power_w": 688.4, "samples": 90},
            "128x128 ww8 lat2/4 pers": {"sm_mhz": 1785.0, "power_w": 652.2, "samples": 88},
        },
    }
    lines = explore_table([row]).splitlines()
    assert "| cuDNN | 1710 MHz, 688 W |" in lines
    assert "| 128x128 ww8 lat2/4 pers | 1785 MHz, 652 W |" in lines
    # Without sampled clocks the section is left out.
    del row["clocks"]
    assert not any("MHz" in line for line in explore_table([row]).splitlines())


def test_explore_keeps_each_turns_time_span_for_the_clock_readings() -> None:
    from bench.explore_configs import _windowed
    from bench.explore_lib import timed_rounds

    windows: dict[str, list[tuple[float, float]]] = {"a": [], "b": []}
    got = timed_rounds(
        {
            "a": _windowed(lambda: 1.0, windows["a"]),
            "b": _windowed(lambda: (2.0, 18.0), windows["b"]),
        },
        3,
    )
    assert got == {"a": [1.0] * 3, "b": [(2.0, 18.0)] * 3}
    assert all(len(w) == 3 and all(t0 <= t1 for t0, t1 in w) for w in windows.values())
    # A turn that fails still leaves its span behind (the clock was read while it ran).
    failing = _windowed(lambda: 1 / 0, windows["a"])
    with pytest.raises(ZeroDivisionError):
        failing()
    assert len(windows["a"]) == 4


def test_every_tuning_table_entry_has_a_label_of_its_own() -> None:
    # Explore and benchmark tables key their columns by label: two configs under one label
    # would be merged, e.g. the persistent grid with and without key blocks in pairs.
    from bench.explore_lib import config_label
    from kernels.tuning_spaces import SEARCH_SPACES

    for arch, table in SEARCH_SPACES.items():
        labels = [config_label(c) for c in table]
        assert len(set(labels)) == len(labels), arch
    pairs = [c for c in SEARCH_SPACES["sm_90"] if c["k_unroll"] == 2]
    assert pairs and all(config_label(c).endswith("persistent k-unroll 2") for c in pairs)


def test_the_benchmark_preset_stores_its_groups_and_writes_the_generated_table(tmp_path, capsys):
    """bench_fmha.py is a preset over the workbench: its results are groups in a database,
    and its markdown is `report`'s; a backend this machine lacks is left out with a note."""
    from bench.bench_fmha import main
    from workbench.reports.report import build_report, markdown
    from workbench.store import Store

    db, table = tmp_path / "bench.db", tmp_path / "bench.md"
    argv = ["--db", str(db), "--ns", "32,64", "--masks", "causal,none", "--batch", "1"]
    argv += ["--heads", "1", "--dim", "32", "--rounds", "1", "--backends", "reference,fa4"]
    assert main([*argv, "--markdown", str(table)]) == 0
    assert "note: fa4 left out: " in capsys.readouterr().err
    with Store(db) as store:
        groups = store.groups()
        assert [g["label"] for g in reversed(groups)] == ["benchmark causal", "benchmark none"]
        runs = [store.group_runs(g["id"]) for g in reversed(groups)]
        assert [[r.config.mask for r in rs] for rs in runs] == [["causal"], ["none"]]
        assert all(r.config.autotune and r.config.fast_math for rs in runs for r in rs)
        assert table.read_text() == markdown(build_report(store, [1, 2]))


def test_the_benchmark_lists_its_backends_in_the_order_the_window_gives_a_group() -> None:
    # The window's picker lists backend_statuses() in order and a group takes the ticked rows
    # in that order; the same order means the same sequence of turns, so a benchmark group
    # repeats a window group like for like (the acceptance's back-to-back comparison).
    from bench.bench_fmha import BACKENDS
    from workbench.backends import backend_statuses

    listed = [name for name in backend_statuses() if name in BACKENDS]
    assert listed == list(BACKENDS)


def test_explore_gives_configs_that_share_the_tuners_words_labels_of_their_own() -> None:
    # On the H200 two configs that differed only by fast math and the K split were both
    # "128×128 8 warps poly 16 cluster 2": the table kept one row, and the wrong-result line of
    # one could not be told from the other's.
    from bench.explore_lib import config_labels

    base = {"tile_m": 128, "tile_n": 128, "num_worker_warps": 8, "poly_exp2_cols": 16}
    configs = [base, {**base, "fast_math": False}, {**base, "k_split": False}, dict(base)]
    labels = config_labels(configs)
    assert len(set(labels)) == len(labels)
    assert "fast-math" not in labels[1] and "k-split" not in labels[2]
    assert labels[0].endswith("#0") and labels[3].endswith("#3")  # the same config twice
    assert config_labels([base]) == ["128×128 8 warps poly 16"]
