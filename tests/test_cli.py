"""Every CLI command end to end, through ``workbench.cli.main`` and the installed script."""

from __future__ import annotations

import argparse
import csv
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kernels.schedule import Schedule
from workbench.cli import main
from workbench.cli.parser import build_parser
from workbench.store import Store, export_columns

RunCli = Callable[..., Any]


def sweep(run_cli: RunCli, fast_args: list[str], *extra: str) -> Any:
    result = run_cli("sweep", *fast_args, *extra)
    assert result.code == 0, result.err
    return result


def test_sweep_stores_a_run_and_reports_progress_on_stderr(
    run_cli: RunCli, fast_args: list[str], db_path: Path
) -> None:
    result = sweep(run_cli, fast_args, "--seq-lens", "16,48,32", "--mask", "causal")
    run_id = int(result.out.strip())  # stdout is only the run id: easy to script
    assert "run 1: 3 point(s)" in result.err
    assert "[1/3] N=16" in result.err and "[3/3] N=48" in result.err
    assert f"run {run_id} complete" in result.err
    with Store(db_path) as store:
        run = store.run(run_id)
        assert run.status == "complete"
        assert run.config.mask == "causal"
        assert [p.seq_len for p in store.points(run_id)] == [16, 32, 48]
        for p in store.points(run_id):
            assert p.latency_ms > 0 and p.rel_err is not None and p.rel_err < 1e-2
            assert store.block_map(run_id, p.seq_len) is not None


def test_sweep_json_and_label(run_cli: RunCli, fast_args: list[str]) -> None:
    result = sweep(
        run_cli,
        fast_args,
        "--seq-lens",
        "32,64",
        "--label",
        "my label",
        "--heads",
        "4",
        "--kv-heads",
        "2",
        "--input-pos",
        "16",
        "--mask",
        "window",
        "--window",
        "24",
        "--tile-m",
        "16",
        "--tile-n",
        "32",
        "--dtype",
        "bfloat16",
        "--json",
    )
    data = json.loads(result.out)
    assert data["group_id"] is None
    [run] = data["runs"]
    assert run["label"] == "my label"
    assert run["status"] == "complete"
    assert run["seq_lens"] == [32, 64]
    assert run["problem"]["heads"] == 4 and run["problem"]["kv_heads"] == 2
    assert run["problem"]["input_pos"] == 16 and run["problem"]["dtype"] == "bfloat16"
    assert run["config"]["window"] == 24 and run["config"]["tile_n"] == 32
    assert [(p["seq_len"], p["k_len"]) for p in run["points"]] == [(32, 48), (64, 80)]
    for p in run["points"]:
        s = Schedule(p["q_len"], p["k_len"], 16, 32, "window", 16, 24)
        assert p["blocks_skipped"] == s.counts()["skipped"]
        assert p["samples"] == 1
    assert "complete" in result.err  # progress still goes to stderr with --json


def test_sweep_records_the_polynomial_exp2_knob(run_cli: RunCli, fast_args: list[str]) -> None:
    result = sweep(
        run_cli, fast_args, "--seq-lens", "32", "--tile-n", "32", "--k-split",
        "--poly-exp2-cols", "8", "--mask", "causal", "--json",
    )  # fmt: skip
    [run] = json.loads(result.out)["runs"]
    assert run["config"]["poly_exp2_cols"] == 8 and run["config"]["k_split"] is True
    assert run["status"] == "complete"


def test_sweep_records_the_cluster_size(run_cli: RunCli, fast_args: list[str]) -> None:
    result = sweep(
        run_cli, fast_args, "--seq-lens", "32", "--tile-m", "128", "--cluster-ctas", "2",
        "--occupancy", "2", "--mask", "causal", "--json",
    )  # fmt: skip
    [run] = json.loads(result.out)["runs"]
    assert run["config"]["num_ctas"] == 2 and run["config"]["occupancy"] == 2
    assert run["status"] == "complete"
    # Read back from the store: the listing shows it in the config's label too.
    listed = json.loads(run_cli("runs", "--json").out)
    assert [r["config"]["num_ctas"] for r in listed] == [2]
    assert "128×64 causal fast-math k-split remap occ 2 cluster 2" in run_cli("runs").out


def test_sweep_records_the_persistent_grid(run_cli: RunCli, fast_args: list[str]) -> None:
    result = sweep(run_cli, fast_args, "--seq-lens", "32", "--persistent", "--json")
    [run] = json.loads(result.out)["runs"]
    assert run["config"]["persistent"] is True and run["status"] == "complete"
    assert "64×64 none fast-math k-split remap persistent" in run_cli("runs").out


def test_sweep_records_key_blocks_in_pairs(run_cli: RunCli, fast_args: list[str]) -> None:
    args = ("--seq-lens", "32", "--persistent", "--no-remap", "--k-unroll", "2", "--json")
    [run] = json.loads(sweep(run_cli, fast_args, *args).out)["runs"]
    assert run["config"]["k_unroll"] == 2 and run["status"] == "complete"
    assert "64×64 none fast-math k-split persistent k-unroll 2" in run_cli("runs").out


def test_sweep_records_the_causal_persistent_grid(run_cli: RunCli, fast_args: list[str]) -> None:
    args = ("--seq-lens", "64", "--mask", "causal", "--persistent", "--json")
    args += ("--no-fast-math", "--no-k-split", "--no-remap")
    [run] = json.loads(sweep(run_cli, fast_args, *args).out)["runs"]
    assert run["config"]["persistent"] is True and run["config"]["mask"] == "causal"
    assert run["status"] == "complete"
    assert "64×64 causal persistent" in run_cli("runs").out


def test_every_knob_has_its_flag_and_the_kernels_default(
    run_cli: RunCli, fast_args: list[str]
) -> None:
    """Every registry knob is a sweep flag; without flags a run takes the kernel's defaults
    (fast math, K-loop split and remap on), and each flag, --no-x included, is recorded."""
    from kernels.knobs import EXPOSED, LAUNCH

    [plain] = json.loads(sweep(run_cli, fast_args, "--seq-lens", "16", "--json").out)["runs"]
    assert {k: plain["config"][k] for k in LAUNCH} == LAUNCH
    args = ("--seq-lens", "16", "--no-fast-math", "--no-store-tma", "--pipeline", "--json")
    args += ("--k-latency", "3", "--v-latency", "6", "--tile-n", "128", "--poly-exp2-cols", "32")
    [run] = json.loads(sweep(run_cli, fast_args, *args).out)["runs"]
    assert run["status"] == "complete"
    set_here = {"fast_math": False, "store_tma": False, "pipeline": True, "k_latency": 3}
    set_here |= {"v_latency": 6, "tile_n": 128, "poly_exp2_cols": 32}
    assert {k: run["config"][k] for k in set_here} == set_here
    assert "64×128 none k-split remap poly 32 lat 3/6 pipe stg" in run_cli("runs").out
    shown = subcommands()["sweep"].format_help()
    assert all(knob.flag in shown for knob in EXPOSED)


def test_sweep_with_one_name_in_backends_is_refused(
    run_cli: RunCli, fast_args: list[str], db_path: Path
) -> None:
    # It made a sweep and no group, so `compare --group` found nothing (issue 39).
    result = run_cli("sweep", *fast_args, "--seq-lens", "16", "--backends", "reference")
    assert result.code == 2 and "a group needs two or more backends" in result.err
    assert not db_path.exists()


def test_runs_lists_newest_first(run_cli: RunCli, fast_args: list[str], db_path: Path) -> None:
    Store(db_path).close()  # an empty database (a missing one is refused)
    empty = run_cli("runs")
    assert empty.code == 0 and "no runs yet" in empty.out
    assert json.loads(run_cli("runs", "--json").out) == []
    first = int(sweep(run_cli, fast_args, "--seq-lens", "16", "--label", "alpha").out)
    second = int(
        sweep(run_cli, fast_args, "--seq-lens", "16,32", "--label", "beta", "--mask", "causal").out
    )
    table = run_cli("runs")
    assert table.code == 0
    lines = table.out.splitlines()
    assert lines[0].split()[:4] == ["id", "created", "backend", "status"]
    assert lines[1].startswith(str(second)) and "beta" in lines[1] and "16..32" in lines[1]
    assert lines[2].startswith(str(first)) and "alpha" in lines[2]
    listed = json.loads(run_cli("runs", "--json").out)
    assert [r["id"] for r in listed] == [second, first]
    assert [r["id"] for r in json.loads(run_cli("runs", "--json", "--limit", "1").out)] == [second]
    found = json.loads(run_cli("runs", "--json", "--search", "alpha").out)
    assert [r["id"] for r in found] == [first]


def test_show_prints_the_run_and_its_points(
    run_cli: RunCli, fast_args: list[str], db_path: Path
) -> None:
    run_id = int(sweep(run_cli, fast_args, "--seq-lens", "16,64", "--label", "shown").out)
    text = run_cli("show", str(run_id))
    assert text.code == 0
    assert f"run {run_id}  shown" in text.out
    assert "status   complete" in text.out
    rows = [line.split() for line in text.out.splitlines() if line[:2] in ("16", "64")]
    assert [r[0] for r in rows] == ["16", "64"]
    data = json.loads(run_cli("show", str(run_id), "--json").out)
    with Store(db_path) as store:
        assert data["points"] == [p.to_dict() for p in store.points(run_id)]
        assert data["config"] == store.run(run_id).config.to_dict()
    unlabelled = int(sweep(run_cli, fast_args, "--seq-lens", "16").out)
    first = run_cli("show", str(unlabelled)).out.splitlines()[0]
    assert first == f"run {unlabelled}"  # no label: no trailing blanks after the id


def _store_launches(db_path: Path, run_id: int, launches: dict[int, dict[str, Any]]) -> None:
    """Give a run's points the ``extra["launch"]`` records the cuTile backend writes (no GPU
    here: the reference backend measured them)."""
    with Store(db_path) as store:
        for n, launch in launches.items():
            store.db.execute(
                "UPDATE points SET extra = ? WHERE run_id = ? AND seq_len = ?",
                [json.dumps({"launch": launch, "autotune": {"tried": 8}}), run_id, n],
            )
        store.db.conn.commit()


def test_show_names_the_launch_the_autotuner_chose_per_length(
    run_cli: RunCli, fast_args: list[str], db_path: Path
) -> None:
    tuned = int(sweep(run_cli, fast_args, "--seq-lens", "16,32,64", "--autotune").out)
    plain = int(sweep(run_cli, fast_args, "--seq-lens", "16,32").out)
    cluster = {
        "tile_m": 128,
        "tile_n": 128,
        "occupancy": 2,
        "num_ctas": 2,
        "k_latency": 3,
        "v_latency": 6,
        "poly_exp2_cols": 16,
        "store_tma": True,
    }
    small = {"tile_m": 64, "tile_n": 128, "occupancy": 2, "k_latency": 2, "v_latency": 4}
    _store_launches(db_path, tuned, {16: small, 32: cluster})  # 64: no record (older point)
    _store_launches(db_path, plain, {16: small, 32: cluster})

    lines = run_cli("show", str(tuned)).out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("N "))
    assert lines[header].split()[-1] == "tuned"
    rows = {line.split()[0]: line.rstrip() for line in lines[header + 1 :]}
    assert rows["16"].endswith("64×128 occ 2")
    assert rows["32"].endswith("128×128 occ 2 poly 16 cluster 2 lat 3/6")
    assert rows["64"].endswith(" -")
    # Not autotuned: the stored launch is the form's config, already on the config line.
    out = run_cli("show", str(plain)).out
    assert "tuned" not in out and "occ 2" not in out


def test_compare_two_runs(run_cli: RunCli, fast_args: list[str], db_path: Path) -> None:
    base = int(sweep(run_cli, fast_args, "--seq-lens", "16,32").out)
    other = int(sweep(run_cli, fast_args, "--seq-lens", "32,64", "--mask", "causal").out)
    data = json.loads(run_cli("compare", str(base), str(other), "--json").out)
    assert data["base"] == base
    assert [r["id"] for r in data["runs"]] == [base, other]
    by_n = {entry["seq_len"]: entry["runs"] for entry in data["points"]}
    assert sorted(by_n) == [16, 32, 64]
    with Store(db_path) as store:
        latency = {(r, p.seq_len): p.latency_ms for r in (base, other) for p in store.points(r)}
    shared = by_n[32]
    assert shared[str(base)]["latency_ms"] == pytest.approx(latency[base, 32])
    assert shared[str(other)]["latency_ms"] == pytest.approx(latency[other, 32])
    # >1 means faster than the base run.
    assert shared[str(other)]["speedup_vs_base"] == pytest.approx(
        latency[base, 32] / latency[other, 32]
    )
    assert shared[str(base)]["speedup_vs_base"] == pytest.approx(1.0)
    assert by_n[16][str(other)]["latency_ms"] is None  # the other run has no N=16
    assert by_n[64][str(other)]["speedup_vs_base"] is None  # nothing to compare with
    text = run_cli("compare", str(base), str(other))
    assert text.code == 0
    ratio = f"{latency[base, 32] / latency[other, 32]:.3f}×"
    assert ratio in text.out
    assert f"#{other} vs #{base}" in text.out


def test_compare_a_group(
    run_cli: RunCli, db_path: Path, measure: Callable, fast_args: list[str]
) -> None:
    from workbench.config import KernelConfig, Problem, SweepSpec
    from workbench.jobs import run_sweep
    from workbench.measure.timing import TimingSettings

    quick = TimingSettings(warmup=0, min_samples=1, min_time_s=0.0)
    with Store(db_path) as store:
        group = store.create_group("backends", "two configs")
        ids = []
        for mask in ("none", "causal"):
            spec = SweepSpec(Problem(heads=1, head_dim=32), (16, 32), KernelConfig(mask=mask))
            events = list(run_sweep(spec, store, timing=quick, group_id=group, step=mask))
            ids.append(events[-1].run_id)
    data = json.loads(run_cli("compare", "--group", str(group), "--json").out)
    assert [r["id"] for r in data["runs"]] == ids
    assert run_cli("compare", "--group", "999").code == 2


def read_csv(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def test_export_csv(run_cli: RunCli, fast_args: list[str], tmp_path: Path) -> None:
    first = int(sweep(run_cli, fast_args, "--seq-lens", "16,32", "--label", "one, two").out)
    second = int(sweep(run_cli, fast_args, "--seq-lens", "64", "--mask", "causal").out)
    target = tmp_path / "out" / "points.csv"
    target.parent.mkdir()
    result = run_cli("export", "--csv", str(target))
    assert result.code == 0
    assert "wrote 3 row(s)" in result.err
    rows = read_csv(target.read_text(encoding="utf-8"))
    assert list(rows[0]) == export_columns()  # every column, in the documented order
    assert [(int(r["run_id"]), int(r["seq_len"])) for r in rows] == [
        (first, 16),
        (first, 32),
        (second, 64),
    ]
    assert rows[0]["label"] == "one, two"  # a comma in a label survives quoting
    assert rows[2]["config_mask"] == "causal"
    for row in rows:
        assert float(row["latency_ms"]) > 0 and float(row["tflops"]) > 0
        assert int(row["blocks_computed"]) + int(row["blocks_masked"]) >= 1
    assert not list(tmp_path.joinpath("out").glob(".*partial"))  # no temp file left behind

    subset = tmp_path / "subset.csv"
    assert run_cli("export", "--csv", str(subset), "--runs", str(second)).code == 0
    assert [int(r["run_id"]) for r in read_csv(subset.read_text())] == [second]

    to_stdout = run_cli("export", "--csv", "-", "--runs", f"{first},{second}")
    assert to_stdout.code == 0
    assert len(read_csv(to_stdout.out)) == 3


def test_export_of_an_empty_database_writes_the_header(
    run_cli: RunCli, tmp_path: Path, db_path: Path
) -> None:
    Store(db_path).close()
    target = tmp_path / "empty.csv"
    assert run_cli("export", "--csv", str(target)).code == 0
    header = next(csv.reader(io.StringIO(target.read_text())))
    assert header == export_columns()


@pytest.mark.parametrize(
    "args",
    [
        ("--q-len", "1000", "--mask", "causal"),
        ("--q-len", "300", "--k-len", "1000", "--mask", "causal", "--input-pos", "700"),
        (
            "--q-len",
            "777",
            "--tile-m",
            "128",
            "--tile-n",
            "32",
            "--mask",
            "window",
            "--window",
            "90",
        ),
        ("--q-len", "100", "--k-len", "50"),
    ],
)
def test_blockmap_json_counts_equal_the_schedule(run_cli: RunCli, args: tuple[str, ...]) -> None:
    result = run_cli("blockmap", *args, "--json")
    assert result.code == 0
    data = json.loads(result.out)
    s = Schedule(
        data["q_len"],
        data["k_len"],
        data["tile_m"],
        data["tile_n"],
        data["mask"],
        data["input_pos"],
        data["window"],
    )
    options = dict(zip(args[::2], args[1::2]))
    assert data["q_len"] == int(options["--q-len"])
    assert data["k_len"] == int(options.get("--k-len", data["q_len"]))
    assert data["counts"] == s.counts()
    assert data["map"] == s.block_map.tolist()
    assert data["shape"] == list(s.block_map.shape)
    assert data["legend"] == {"0": "skipped", "1": "computed", "2": "masked"}


def test_blockmap_text_draws_the_grid(run_cli: RunCli) -> None:
    result = run_cli("blockmap", "--q-len", "256", "--mask", "causal")
    assert result.code == 0
    lines = result.out.splitlines()
    assert lines[0].startswith("4×4 blocks: 6 computed, 4 masked, 6 skipped")
    assert lines[1:5] == ["m...", "#m..", "##m.", "###m"]


def test_backends_lists_the_reference(run_cli: RunCli) -> None:
    text = run_cli("backends")
    assert text.code == 0
    assert any(line.split()[:2] == ["reference", "yes"] for line in text.out.splitlines())
    data = json.loads(run_cli("backends", "--json").out)
    assert data["reference"]["available"] is True
    for status in data.values():
        assert status["reason"]  # unavailable ones say why


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


@pytest.mark.parametrize("command", sorted(subcommands()))
def test_every_option_of_every_command_is_documented(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = subcommands()[command]
    undocumented = [
        action.option_strings or [action.dest]
        for action in parser._actions
        if not isinstance(action, argparse._HelpAction)
        and (not action.help or action.help == argparse.SUPPRESS)
    ]
    assert undocumented == [], f"{command}: options without help text: {undocumented}"
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    shown = capsys.readouterr().out
    for action in parser._actions:
        for option in action.option_strings:
            assert option in shown


def test_every_command_has_a_summary_in_the_main_help(capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    helped = {choice.dest: choice.help for choice in sub._choices_actions}
    assert set(helped) == set(subcommands())
    assert all(helped.values())


def test_the_main_help_prints_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    # A bare % in one command's summary once made `fmha-workbench --help` a traceback.
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    shown = capsys.readouterr().out
    for name in subcommands():
        assert f"    {name}" in shown


def test_the_installed_console_script_end_to_end(
    tmp_path: Path, fast_args: list[str], script: Callable[..., Any], count_rows: Callable
) -> None:
    db = tmp_path / "script.db"
    done = script(
        db, "sweep", *fast_args, "--seq-lens", "16,32", "--label", "from a shell", "--json"
    )
    assert done.returncode == 0, done.stderr
    run = json.loads(done.stdout)["runs"][0]
    assert run["status"] == "complete" and len(run["points"]) == 2
    assert "[2/2] N=32" in done.stderr
    listed = script(db, "runs", "--json")
    assert [r["label"] for r in json.loads(listed.stdout)] == ["from a shell"]
    shown = script(db, "show", str(run["id"]))
    assert shown.returncode == 0 and "from a shell" in shown.stdout
    bad = script(db, "sweep", "--seq-lens", "16", "--tile-m", "48")
    assert bad.returncode == 2
    assert len(bad.stderr.strip().splitlines()) == 1
    assert "--tile-m" in bad.stderr and "Traceback" not in bad.stderr
    assert count_rows(db, "runs") == 1 and count_rows(db, "points") == 2


def test_knobs_lists_what_each_architecture_is_offered(run_cli: RunCli) -> None:
    """`knobs --arch sm_120` shows a user without that GPU what the window and `sweep` would
    offer there, and why the rest is not."""
    from kernels.knobs import EXPOSED

    data = json.loads(run_cli("knobs", "--arch", "sm_120", "--json").out)
    rows = {r["knob"]: r for r in data["knobs"]}
    assert data["arch"] == "sm_120" and set(rows) == {k.name for k in EXPOSED}
    assert rows["tile_m"]["values"] == [16, 32, 64, 128, 256]  # the CPU reference's
    assert rows["tile_m"]["cutile"] == [64, 128] and rows["occupancy"]["cutile"] == [None, 1]
    assert rows["k_unroll"]["rules"] == "only with the persistent grid; only with mask none"
    assert {r["knob"] for r in data["not_offered"]} == {"tile_m", "occupancy"}
    assert all("blackwell-offline" in r["source"] for r in data["not_offered"])
    on_h200 = json.loads(run_cli("knobs", "--arch", "sm_90", "--json").out)
    assert on_h200["not_offered"] == []
    assert {r["knob"]: r["cutile"] for r in on_h200["knobs"]}["tile_m"] == [64, 128, 256]
    text = run_cli("knobs", "--arch", "sm_121")
    assert text.code == 0 and "cutile on sm_121" in text.out
    assert "tile_m 256: not on sm_121: 256-row tiles spill registers" in text.out
    refused = run_cli("knobs", "--arch", "blackwell")
    assert refused.code == 2 and refused.err_lines[0].startswith("error: --arch: 'blackwell'")


def test_a_knob_whose_help_mentions_a_percentage_still_prints_help(monkeypatch, capsys) -> None:
    """Help texts come from the registry; "1-5 % faster" must not break argparse's formatting."""
    import dataclasses

    from kernels import knobs
    from workbench.cli.parser import build_parser

    knob = knobs.KNOBS["store_tma"]
    monkeypatch.setitem(
        knobs.KNOBS, "store_tma", dataclasses.replace(knob, help=knob.help + " (3 % faster)")
    )
    monkeypatch.setattr(knobs, "EXPOSED", tuple(knobs.KNOBS[k.name] for k in knobs.EXPOSED))
    sweep = build_parser()._subparsers._group_actions[0].choices["sweep"]
    assert "(3 % faster)" in " ".join(sweep.format_help().split())


def test_the_polynomial_in_clusters_over_8_worker_warps_is_refused(
    run_cli: Any, db_path: Path
) -> None:
    """That launch computed wrong results on the H200 (relative error up to 1.2): a sweep that
    asks for it stops with one line before anything is written, on every backend."""
    result = run_cli(
        "sweep", "--backend", "reference", "--seq-lens", "256", "--tile-m", "128",
        "--tile-n", "128", "--worker-warps", "8", "--cluster-ctas", "2",
        "--poly-exp2-cols", "16", "--db", db_path,
    )  # fmt: skip
    assert result.code == 2 and len(result.err_lines) == 1
    assert result.err.startswith(
        "error: --poly-exp2-cols 16: the polynomial exp2 over 8 worker warps with 64 rows a CTA"
    )
    assert not db_path.exists()
    # Without the polynomial, at occupancy 2 (the tuning table's clusters) or with 128 rows a
    # CTA, it runs.
    for knob in (
        ["--worker-warps", "8"],
        ["--occupancy", "2", "--poly-exp2-cols", "16"],
        ["--worker-warps", "8", "--poly-exp2-cols", "16", "--tile-m", "256"],
    ):
        ok = run_cli("sweep", "--backend", "reference", "--seq-lens", "256", "--tile-m", "128",
                     "--tile-n", "128", "--cluster-ctas", "2", *knob, "--rounds", "1",
                     "--db", db_path)  # fmt: skip
        assert ok.code == 0, ok.err
