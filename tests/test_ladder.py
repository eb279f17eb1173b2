"""The optimization ladder: steps as data, one group of runs, speed-ups per step."""

from __future__ import annotations

import json

import pytest

import workbench.jobs.ladder_steps as ladder_module
from workbench.cli import main
from workbench.config import ConfigError, Problem
from workbench.jobs import run_ladder
from workbench.jobs.ladder_steps import ladder_table, load_ladder
from workbench.measure.timing import TimingSettings
from workbench.store import Store

QUICK = TimingSettings(warmup=0, min_samples=1, min_time_s=0.0)


@pytest.fixture(autouse=True)
def _no_local_gpu(monkeypatch):
    # The default preset follows the local GPU; these tests pin it to "none found"
    # (ladder.json, the measured one) so they read the same on any machine. Tests of the
    # choice pass arch.
    monkeypatch.setattr(ladder_module, "local_gpu_arch", lambda: None)


def test_the_built_in_ladder_climbs_one_knob_per_step():
    ladder = load_ladder()
    names = [s.name for s in ladder.steps]
    assert names[0].startswith("baseline") and names[-1] == "autotuned"
    configs = [s.config for s in ladder.steps]
    assert (configs[0].tile_m, configs[0].tile_n) == (64, 64)
    assert (configs[1].tile_m, configs[1].tile_n) == (128, 128)
    assert [c.fast_math for c in configs[1:4]] == [False, True, True]
    assert [c.k_split for c in configs[2:5]] == [False, True, True]
    assert all(c.mask == "causal" for c in configs)
    assert configs[-1].autotune and configs[-1].num_worker_warps is None
    assert "total" in ladder.published


def test_a_user_ladder_file_adds_a_step_and_bad_steps_are_named(tmp_path):
    steps = {
        "steps": [
            {"name": "small", "changes": {"tile_m": 32, "tile_n": 32}},
            {"name": "wide", "changes": {"tile_n": 128}},
        ]
    }
    path = tmp_path / "ladder.json"
    path.write_text(json.dumps(steps))
    ladder = load_ladder(path, mask="window", window=64)
    assert [(s.config.tile_m, s.config.tile_n) for s in ladder.steps] == [(32, 32), (32, 128)]
    assert all(s.config.window == 64 for s in ladder.steps)

    steps["steps"].append({"name": "odd", "changes": {"tile_m": 48}})
    path.write_text(json.dumps(steps))
    with pytest.raises(ConfigError) as info:
        load_ladder(path)
    assert info.value.field == "tile_m" and "odd" in str(info.value)
    path.write_text(json.dumps({"steps": [{"name": "x", "changes": {"tiles": 2}}]}))
    with pytest.raises(ConfigError, match="tiles"):
        load_ladder(path)


def test_a_reference_ladder_is_one_group_with_speedups_against_previous_and_base(tmp_path):
    store = Store(tmp_path / "runs.db")
    ladder = load_ladder()
    problem = Problem(batch=1, heads=1, head_dim=32)
    group_id, events = run_ladder(ladder, problem, (64, 128), "reference", store, timing=QUICK)
    list(events)
    runs = store.group_runs(group_id)
    assert [r.step for r in runs] == [s.name for s in ladder.steps]
    assert all(r.status == "complete" for r in runs)
    # The group remembers every step's knobs, so a step that never runs can still be named.
    assert store.group(group_id)["spec"]["configs"] == [r.config.summary() for r in runs]
    table = ladder_table(store, group_id)
    first, second = table["steps"][0], table["steps"][1]
    assert first["cells"]["64"]["vs_previous"] is None
    base = store.points(runs[0].id)[0].latency_ms
    mine = store.points(runs[1].id)[0].latency_ms
    assert second["cells"]["64"]["vs_baseline"] == pytest.approx(base / mine)
    assert second["cells"]["64"]["vs_previous"] == pytest.approx(base / mine)


def test_ladder_cli_prints_the_table_and_exports_the_group(tmp_path, capsys, fast_args):
    db = str(tmp_path / "runs.db")
    assert main(["ladder", "--db", db, "--seq-lens", "64", *fast_args, "--json"]) == 0
    table = json.loads(capsys.readouterr().out)
    # The default ladder (no GPU: ladder.json) has six steps, each a kernel that fits.
    assert len(table["steps"]) == 6 and table["seq_lens"] == [64]
    out_csv = tmp_path / "ladder.csv"
    export = ["export", "--db", db, "--group", str(table["group_id"]), "--csv", str(out_csv)]
    assert main(export) == 0
    lines = out_csv.read_text().splitlines()
    assert len(lines) == 1 + 6
    assert main(["ladder", "--db", db, "--seq-lens", "64", *fast_args, "--samples", "0"]) == 2
    assert "samples" in capsys.readouterr().err


def test_gpu_timing_flags_reach_the_settings_and_nan_times_are_refused(tmp_path, capsys):
    from workbench.cli.parser import build_parser
    from workbench.cli.timing_flags import timing_from_args

    args = build_parser().parse_args(
        ["sweep", "--no-graph", "--flush-l2", "--min-time", "0.1", "--rounds", "6"]
    )
    settings = timing_from_args(args, TimingSettings())
    assert not settings.graph and settings.flush_l2 and settings.min_time_s == 0.1
    assert settings.rounds == 6
    db = tmp_path / "runs.db"
    assert main(["sweep", "--db", str(db), "--min-time", "nan"]) == 2
    assert "--min-time" in capsys.readouterr().err  # refused at the flag, before any setting
    assert not db.exists()


def test_the_cli_ladder_labels_each_run_by_its_step_after_the_ladder_label(tmp_path):
    """Each step's run is labelled by its step, after the ladder's --label when one is given."""
    db = tmp_path / "runs.db"
    argv = ["ladder", "--db", str(db), "--seq-lens", "64", "--heads", "1", "--head-dim", "32"]
    argv += ["--warmup", "0", "--samples", "1", "--min-time", "0"]
    steps = [s.name for s in load_ladder().steps]
    assert main([*argv, "--json"]) == 0
    assert main([*argv, "--label", "mine", "--json"]) == 0
    with Store(db) as store:
        first, second = (g["id"] for g in reversed(store.groups("ladder")))
        assert [r.label for r in store.group_runs(first)] == steps
        assert [r.label for r in store.group_runs(second)] == [f"mine · {s}" for s in steps]
        assert store.group(second)["label"] == "mine"


BLACKWELL_STEPS = [
    "baseline 64x64", "256x128 tiles", "+ fast math", "+ K-loop split", "+ remap", "autotuned",
]  # fmt: skip


def test_the_published_blackwell_ladder_is_a_preset_by_name_and_no_architectures_default():
    ladder = load_ladder("ladder-blackwell.json")
    assert ladder.preset == "ladder-blackwell.json" and "published, Blackwell" in ladder.name
    assert ladder.archs == ()
    assert [s.name for s in ladder.steps] == BLACKWELL_STEPS
    configs = [s.config for s in ladder.steps]
    assert all(c.num_worker_warps is None for c in configs)
    assert [(c.tile_m, c.tile_n) for c in configs[:2]] == [(64, 64), (256, 128)]
    assert [c.fast_math for c in configs[1:3]] == [False, True]
    assert [c.k_split for c in configs[2:4]] == [False, True]
    assert [c.remap for c in configs[3:5]] == [False, True]
    assert configs[-1].autotune and all(c.mask == "causal" for c in configs)
    for arch in ("sm_90", "sm_100", "sm_103", "sm_120", "sm_121", None):
        assert load_ladder(arch=arch).preset != "ladder-blackwell.json"


HOPPER_STEPS = [
    "baseline 64x64", "128x128 tiles, 8 worker warps", "+ fast math", "+ K-loop split",
    "+ remap", "autotuned",
]  # fmt: skip


@pytest.mark.parametrize("arch", ["sm_90", "sm_100", "sm_103"])
def test_hopper_and_datacenter_blackwell_take_128_row_tiles_with_their_worker_warps(arch):
    ladder = load_ladder(arch=arch)
    assert ladder.preset == "ladder.json" and arch in ladder.archs
    assert [s.name for s in ladder.steps] == HOPPER_STEPS
    configs = [s.config for s in ladder.steps]
    assert [(c.tile_m, c.tile_n, c.num_worker_warps) for c in configs[:2]] == [
        (64, 64, None), (128, 128, 8),
    ]  # fmt: skip
    # The published study's switches, one a step, on the tile that fits.
    assert [(c.fast_math, c.k_split, c.remap) for c in configs[1:5]] == [
        (False, False, False), (True, False, False), (True, True, False), (True, True, True),
    ]  # fmt: skip
    assert all(c.num_worker_warps == 8 for c in configs[1:5])
    assert configs[-1].autotune and configs[-1].num_worker_warps is None


@pytest.mark.parametrize("arch", ["sm_120", "sm_121"])
def test_consumer_blackwell_takes_128x64_tiles_and_no_k_split(arch):
    """The K-loop split spills on sm_120 with the JIT's signature (tests/test_offline_signature.py):
    its default ladder climbs without it."""
    ladder = load_ladder(arch=arch)
    assert ladder.preset == "ladder-sm120.json" and arch in ladder.archs
    configs = [s.config for s in ladder.steps]
    assert [(c.tile_m, c.tile_n, c.num_worker_warps) for c in configs[1:4]] == [(128, 64, 8)] * 3
    assert [s.name for s in ladder.steps] == [
        "baseline 64x64", "128x64 tiles, 8 worker warps", "+ fast math", "+ remap", "autotuned",
    ]  # fmt: skip
    assert not any(c.k_split for c in configs[:-1]) and configs[3].remap
    assert configs[-1].autotune


def test_each_arch_has_its_default_and_ladder_json_is_the_one_without_a_gpu(monkeypatch):
    # No GPU found, or one no preset names (Ampere): ladder.json, the ladder measured here.
    assert load_ladder().preset == "ladder.json"
    assert load_ladder(arch="sm_89").preset == "ladder.json"
    # A local consumer Blackwell GPU picks its own without being told.
    monkeypatch.setattr(ladder_module, "local_gpu_arch", lambda: "sm_120")
    assert load_ladder().preset == "ladder-sm120.json"
    assert load_ladder(arch="sm_90").preset == "ladder.json"  # an explicit arch wins


def _fake_nvidia_smi(tmp_path, monkeypatch, body):
    tool = tmp_path / "bin" / "nvidia-smi"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\n" + body + "\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", str(tool.parent))


@pytest.mark.parametrize(
    ("body", "arch"),
    [
        ('echo "12.0"', "sm_120"),
        ('echo " 10.0"', "sm_100"),
        ('[ "$2" = 1 ] && echo 9.0', "sm_90"),  # CUDA_VISIBLE_DEVICES=1,0: asks for GPU 1
        ("echo 'No devices were found'; exit 6", None),
        ("echo garbage", None),
    ],
)
def test_local_gpu_arch_reads_nvidia_smi(tmp_path, monkeypatch, body, arch):
    monkeypatch.undo()  # the real detector, not the autouse stand-in
    _fake_nvidia_smi(tmp_path, monkeypatch, body)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,0" if "$2" in body else "0")
    assert ladder_module.local_gpu_arch() == arch


def test_local_gpu_arch_without_nvidia_smi_is_none(tmp_path, monkeypatch):
    monkeypatch.undo()
    monkeypatch.setenv("PATH", str(tmp_path))
    assert ladder_module.local_gpu_arch() is None


def test_the_group_remembers_which_preset_ran(tmp_path):
    store = Store(tmp_path / "runs.db")
    ladder = load_ladder(arch="sm_120")
    problem = Problem(batch=1, heads=1, head_dim=32)
    group_id, events = run_ladder(ladder, problem, (64,), "reference", store, timing=QUICK)
    list(events)
    spec = store.group(group_id)["spec"]
    assert spec["preset"] == "ladder-sm120.json"
    assert spec["ladder"] == "tile-optimization ladder, 128x64 tiles (Blackwell consumer)"
    assert "sm_120" in spec["archs"] and spec["steps"] == [s.name for s in ladder.steps]


def _form_spec(mask: str, input_pos: int, window: int | None = None):
    from workbench.config import KernelConfig, SweepSpec

    problem = Problem(batch=1, heads=1, head_dim=32, q_len=64, k_len=64 + input_pos,
                      input_pos=input_pos)  # fmt: skip
    return SweepSpec(problem, (64,), KernelConfig(mask=mask, window=window), "reference")


def test_a_ladder_from_a_sweep_keeps_its_offset_only_when_the_sweep_is_causal():
    from workbench.jobs import ladder_job

    ladder = load_ladder()
    causal = ladder_job(_form_spec("causal", 32), ["reference"], "mine", ladder)
    assert causal.problem.input_pos == 32 and causal.label == "mine"
    windowed = ladder_job(_form_spec("window", 32, window=40), ["reference"], ladder=ladder)
    assert (windowed.problem.input_pos, windowed.problem.k_len) == (0, 64)
    with pytest.raises(ConfigError) as two:
        ladder_job(_form_spec("causal", 0), ["reference", "naive"], ladder=ladder)
    assert two.value.field == "backends" and "one backend" in str(two.value)


def test_a_ladder_step_knob_the_backend_refuses_is_named_as_the_steps(monkeypatch, tmp_path):
    from workbench.backends.reference import ReferenceBackend
    from workbench.jobs import LadderJob, LadderStepError

    original = ReferenceBackend.check_supported

    def refuse(self, problem, config):
        if config.tile_m == 128:
            raise ConfigError("tile_m", 128, "this backend takes tiles up to 64")
        if problem.heads == 3:
            raise ConfigError("heads", 3, "this backend takes 1 or 2 heads")
        original(self, problem, config)

    monkeypatch.setattr(ReferenceBackend, "check_supported", refuse)
    ladder = load_ladder()
    problem = Problem(batch=1, heads=1, head_dim=32)
    with pytest.raises(LadderStepError) as step:
        LadderJob(ladder, problem, (64,), "reference").preflight()
    assert step.value.field == "tile_m" and repr(ladder.steps[1].name) in str(step.value)
    three = Problem(batch=1, heads=3, head_dim=32)
    with pytest.raises(ConfigError) as given:
        LadderJob(ladder, three, (64,), "reference").preflight()
    assert given.value.field == "heads" and not isinstance(given.value, LadderStepError)
    db = tmp_path / "runs.db"
    with Store(db) as store, pytest.raises(LadderStepError):
        LadderJob(ladder, problem, (64,), "reference").run(store)
    with Store(db) as store:
        assert store.count_runs() == 0 and store.groups() == []


def test_the_published_ladder_runs_by_its_preset_name_from_the_cli(
    tmp_path, capsys, fast_args, monkeypatch
):
    db = str(tmp_path / "runs.db")
    argv = ["ladder", "--db", db, "--seq-lens", "64", *fast_args, "--json"]
    assert main([*argv, "--steps", "ladder-blackwell.json"]) == 0
    table = json.loads(capsys.readouterr().out)
    assert [s["step"] for s in table["steps"]] == BLACKWELL_STEPS
    with Store(db) as store:
        assert store.group(table["group_id"])["spec"]["preset"] == "ladder-blackwell.json"
    # A file of that name in the working folder is the user's, and wins.
    monkeypatch.chdir(tmp_path)
    mine = {"steps": [{"name": "mine", "changes": {"tile_m": 32, "tile_n": 32}}]}
    (tmp_path / "ladder-blackwell.json").write_text(json.dumps(mine))
    assert main([*argv, "--steps", "ladder-blackwell.json"]) == 0
    assert [s["step"] for s in json.loads(capsys.readouterr().out)["steps"]] == ["mine"]


def test_the_model_inputs_ladder_runs_by_its_preset_name(tmp_path, capsys, fast_args):
    # Prepared on (B, H, N, D), then (B, N, H, D) views, then one-shot calls: each step one
    # change, stored with its knobs (the reference computes the same either way).
    db = str(tmp_path / "runs.db")
    argv = ["ladder", "--db", db, "--seq-lens", "64", *fast_args, "--json"]
    assert main([*argv, "--preset", "model-inputs"]) == 0
    table = json.loads(capsys.readouterr().out)
    steps = table["steps"]
    assert [s["step"] for s in steps] == [
        "autotuned, (B, H, N, D), prepared", "(B, N, H, D) views", "one-shot attention()"
    ]  # fmt: skip
    assert "bnhd" not in steps[0]["config"] and "bnhd" in steps[1]["config"]
    assert "one-shot" in steps[2]["config"] and "bnhd" in steps[2]["config"]
    with Store(db) as store:
        runs = store.group_runs(table["group_id"])
        assert [(r.config.bnhd_inputs, r.config.one_shot) for r in runs] == [
            (False, False), (True, False), (True, True)
        ]  # fmt: skip
