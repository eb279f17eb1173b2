"""The form: what each control puts into the spec, presets, and the backend picker's memory."""

from __future__ import annotations

from typing import Any

import pytest
from gui_helpers import pick, type_into
from readouts import row_enabled, row_tooltip

from kernels import knobs
from kernels.knobs import applies
from workbench.backends.base import Availability
from workbench.config import ConfigError, KernelConfig, Problem, parse_seq_lens
from workbench.gui.controls import SEQ_PRESETS, ControlsPanel

pytestmark = pytest.mark.gui


@pytest.fixture
def form(qtbot: Any) -> ControlsPanel:
    panel = ControlsPanel()
    qtbot.addWidget(panel)
    panel.show()
    return panel


def test_every_knob_reaches_the_spec(qtbot: Any, form: ControlsPanel) -> None:
    type_into(qtbot, form.batch, "2")
    type_into(qtbot, form.heads, "8")
    type_into(qtbot, form.kv_heads, "2")
    pick(form.head_dim, 128)
    pick(form.dtype, "bfloat16")
    type_into(qtbot, form.seq_lens, "1k,4k")
    pick(form.tile_m, 128)
    pick(form.tile_n, 64)
    pick(form.mask, "causal-offset")
    type_into(qtbot, form.input_pos, "512")
    for box in (form.fast_math, form.remap, form.autotune, form.pipeline, form.store_tma):
        box.click()  # a full press-release click on the check box
    pick(form.occupancy, 2)
    pick(form.num_worker_warps, 4)
    pick(form.num_ctas, 2)
    pick(form.poly_exp2_cols, 8)
    pick(form.k_latency, 3)
    pick(form.v_latency, 6)
    type_into(qtbot, form.label, "  gqa causal  ")
    spec = form.spec()
    assert spec.problem == Problem(
        batch=2,
        heads=8,
        kv_heads=2,
        q_len=1024,
        k_len=1536,
        head_dim=128,
        dtype="bfloat16",
        input_pos=512,
    )
    assert spec.config == KernelConfig(
        tile_m=128,
        tile_n=64,
        fast_math=False,
        k_split=True,
        remap=False,
        mask="causal",
        autotune=True,
        occupancy=2,
        num_worker_warps=4,
        poly_exp2_cols=8,
        num_ctas=2,
        k_latency=3,
        v_latency=6,
        pipeline=True,
        store_tma=False,
    )
    assert spec.seq_lens == (1024, 4096) and spec.label == "gqa causal"
    assert spec.backend == "reference"


def test_the_kernel_rows_are_the_registry(form: ControlsPanel) -> None:
    """A row per knob, its entries the registry's values in the registry's words, its tooltip
    the registry's help; untouched, the form runs the registry's defaults."""
    from PySide6.QtWidgets import QCheckBox

    from kernels.knobs import EXPOSED

    for knob in EXPOSED:
        widget = form.field_widget(knob.name)
        assert widget is not None and knob.help in widget.toolTip(), knob.name
        if knob.kind is bool:
            assert isinstance(widget, QCheckBox) and widget.text() == knob.label
        else:
            entries = [(widget.itemText(i), widget.itemData(i)) for i in range(widget.count())]
            assert entries == [(knob.text(v), v) for v in knob.values], knob.name
    assert form.spec().config == KernelConfig()


def test_defaults_mean_not_set(form: ControlsPanel) -> None:
    spec = form.spec()
    assert spec.problem.kv_heads == spec.problem.heads  # "same as heads"
    assert spec.config.occupancy is None and spec.config.num_worker_warps is None
    assert spec.config.poly_exp2_cols == 0 and form.poly_exp2_cols.currentText() == "off"
    assert spec.config.num_ctas is None and form.num_ctas.currentText() == "auto"
    assert spec.config.persistent is False and not form.persistent.isChecked()
    assert spec.config.window is None and spec.problem.input_pos == 0
    assert form.kv_heads.text() == "same as heads" and form.occupancy.currentText() == "auto"


def test_range_presets_fill_the_field(form: ControlsPanel) -> None:
    for index, (_, value) in enumerate(SEQ_PRESETS, start=1):
        form.seq_preset.activated.emit(index)
        assert form.seq_lens.text() == value
        assert form.spec().seq_lens == parse_seq_lens(value)
        assert form.seq_preset.currentIndex() == 0  # ready to pick again


def test_offset_and_window_fields_follow_the_mask(form: ControlsPanel) -> None:
    expected = {
        "none": (False, False),
        "causal": (False, False),
        "causal-offset": (True, False),
        "window": (True, True),
    }
    for mask, (offset, window) in expected.items():
        pick(form.mask, mask)
        assert (form.input_pos.isEnabled(), form.window.isEnabled()) == (offset, window)


def test_saved_backend_is_chosen_once_the_probe_says_it_works(form: ControlsPanel) -> None:
    form.apply_state({"backend": "torch-cudnn"})  # settings saved before the list of backends
    assert form.backends.checked() == ["reference"]  # not probed yet
    statuses = {
        "reference": Availability(True, "cpu"),
        "torch-cudnn": Availability(True, "cuDNN 9 on NVIDIA H200"),
    }
    form.set_backend_statuses(statuses)
    assert form.backends.checked() == ["torch-cudnn"]
    assert form.spec().backend == "torch-cudnn"
    # A later probe in which it is gone falls back to the reference, with the reason shown.
    form.set_backend_statuses({**statuses, "torch-cudnn": Availability(False, "no GPU")})
    assert form.backends.checked() == ["reference"]
    assert not row_enabled(form.backends, "torch-cudnn")
    # The reason first; a second line notes how it runs a decode mask.
    assert row_tooltip(form.backends, "torch-cudnn").splitlines()[0] == "no GPU"


def test_persistent_box_sets_restores_and_marks_the_knob(qtbot: Any, form: ControlsPanel) -> None:
    pick(form.tile_m, 128)
    pick(form.tile_n, 128)
    form.persistent.click()
    config = form.spec().config
    assert config.persistent is True and config.mask == "none"
    assert config.summary().endswith("persistent")
    # A stored run's setting comes back, on and off.
    problem = Problem(q_len=1024, k_len=1024)
    form.load_run(problem, KernelConfig(), (1024,), "reference", "")
    assert not form.persistent.isChecked() and form.spec().config.persistent is False
    stored = KernelConfig(tile_m=128, tile_n=128, k_split=True, persistent=True)
    form.load_run(problem, stored, (1024,), "reference", "persistent")
    assert form.persistent.isChecked() and form.spec().config == stored
    # Causal keeps it (the causal persistent grid). A window greys the box out, unticked (what
    # runs), saying why in the registry's words; back to no mask, the tick is back.
    pick(form.mask, "causal")
    assert form.persistent.isEnabled() and form.spec().config.persistent is True
    assert form.spec().config.summary() == "128×128 causal fast-math k-split remap persistent"
    pick(form.mask, "window")
    assert not form.persistent.isEnabled() and not form.persistent.isChecked()
    reason = applies("persistent", {"persistent": True}, "window")
    assert reason and form.persistent.toolTip().startswith(reason)
    assert "no window kernel" in form.persistent.toolTip()
    assert form.spec().config.persistent is False
    pick(form.mask, "none")
    assert form.persistent.isEnabled() and form.spec().config.persistent is True
    # The core's refusal (a cluster size with it) lands on this box; unticking clears it.
    pick(form.num_ctas, 2)
    with pytest.raises(ConfigError) as refused:
        form.spec()
    assert refused.value.field == "persistent"
    form.mark_error(refused.value.field, str(refused.value))
    assert form.invalid_fields() == ["persistent"]
    form.persistent.click()
    assert form.invalid_fields() == [] and form.spec().config.persistent is False
    # Now a cluster is set, the box cannot be ticked, and says why.
    assert not form.persistent.isEnabled() and "does not run as clusters" in (
        form.persistent.toolTip()
    )


def test_key_pairs_follow_the_persistent_box(qtbot: Any, form: ControlsPanel) -> None:
    pick(form.tile_m, 128)
    pick(form.tile_n, 128)
    # Greyed out until the persistent grid is on, with the registry's reason; then 2 reaches
    # the config and its summary.
    assert not form.k_unroll.isEnabled() and form.spec().config.k_unroll == 1
    assert "persistent grid only" in form.k_unroll.toolTip()
    form.persistent.click()
    assert form.k_unroll.isEnabled()
    pick(form.k_unroll, 2)
    config = form.spec().config
    assert (config.persistent, config.k_unroll) == (True, 2)
    assert config.summary().endswith("persistent k-unroll 2")
    # Off again, or a mask (the causal persistent grid takes one block, a window none):
    # greyed, showing and running 1, and the 2 back when it applies again.
    form.persistent.click()
    assert not form.k_unroll.isEnabled() and form.spec().config.k_unroll == 1
    assert form.k_unroll.currentData() == 1
    form.persistent.click()
    assert form.spec().config.k_unroll == 2
    for mask in ("causal", "window"):
        pick(form.mask, mask)
        assert not form.k_unroll.isEnabled() and form.spec().config.k_unroll == 1
    assert "mask none only" in form.k_unroll.toolTip() or "persistent" in form.k_unroll.toolTip()
    pick(form.mask, "none")
    assert form.spec().config.k_unroll == 2
    # A stored run's setting comes back, and a run without it resets the box.
    problem = Problem(q_len=1024, k_len=1024)
    form.load_run(problem, KernelConfig(), (1024,), "reference", "")
    assert form.k_unroll.currentData() == 1 and not form.k_unroll.isEnabled()
    stored = KernelConfig(tile_m=128, tile_n=128, k_split=True, persistent=True, k_unroll=2)
    form.load_run(problem, stored, (1024,), "reference", "pairs")
    assert form.k_unroll.isEnabled() and form.spec().config == stored
    # ... and a run without it again does not bring back the pairs kept before.
    form.load_run(problem, KernelConfig(), (1024,), "reference", "")
    form.persistent.click()
    assert form.spec().config.k_unroll == 1


def test_the_polynomial_and_the_pipeline_need_the_split(qtbot: Any, form: ControlsPanel) -> None:
    pick(form.tile_n, 128)
    pick(form.poly_exp2_cols, 32)
    form.pipeline.click()
    form.k_split.click()  # off: both greyed out, saying why, and not in the run
    for box, name in ((form.poly_exp2_cols, "poly_exp2_cols"), (form.pipeline, "pipeline")):
        assert not box.isEnabled() and "needs the K-loop split" in box.toolTip(), name
    config = form.spec().config
    assert (config.k_split, config.poly_exp2_cols, config.pipeline) == (False, 0, False)
    form.k_split.click()
    config = form.spec().config
    assert (config.poly_exp2_cols, config.pipeline) == (32, True)
    # The polynomial's entries follow the key tile: 64 columns of a 64-key block is refused.
    pick(form.tile_n, 64)
    assert 64 not in form.offered("poly_exp2_cols") and 32 in form.offered("poly_exp2_cols")
    row = form.poly_exp2_cols.findData(64)
    assert "with tile_n 64" in form.poly_exp2_cols.model().item(row).toolTip()


def test_state_round_trips(qtbot: Any, form: ControlsPanel) -> None:
    type_into(qtbot, form.seq_lens, "64,256")
    pick(form.mask, "window")
    type_into(qtbot, form.window, "99")
    state = form.state()
    other = ControlsPanel()
    qtbot.addWidget(other)
    other.apply_state(state)
    assert other.spec() == form.spec()


def test_poly_exp2_combo_restores_every_count_the_core_accepts(form: ControlsPanel) -> None:
    # Small key tiles take small counts (tile N 16: 1, 2, 4, 8); a stored run that used one
    # must come back as it was, not keep whatever the combo showed before.
    problem = Problem(q_len=1024, k_len=1024)
    for tile_n, cols in ((16, 1), (32, 2), (128, 64), (256, 128)):
        stored = KernelConfig(tile_m=64, tile_n=tile_n, k_split=True, poly_exp2_cols=cols)
        form.load_run(problem, stored, (1024,), "reference", "poly")
        assert form.poly_exp2_cols.currentText() == str(cols)
        assert form.spec().config == stored


def test_cluster_ctas_combo_sets_restores_and_marks_the_hint(
    qtbot: Any, form: ControlsPanel
) -> None:
    assert [form.num_ctas.itemText(i) for i in range(form.num_ctas.count())] == [
        "auto",
        "1",
        "2",
        "4",
        "8",
        "16",
    ]
    pick(form.tile_m, 128)
    pick(form.occupancy, 2)
    pick(form.num_ctas, 2)
    config = form.spec().config
    assert (config.tile_m, config.occupancy, config.num_ctas) == (128, 2, 2)
    assert "cluster 2" in config.summary()

    # A stored run's cluster size comes back into the form, and so does "not set".
    problem = Problem(q_len=1024, k_len=1024)
    stored = KernelConfig(tile_m=128, tile_n=128, mask="causal", occupancy=2, num_ctas=4)
    form.load_run(problem, stored, (1024, 2048), "reference", "cluster 4")
    assert form.num_ctas.currentText() == "4" and form.spec().config == stored
    # Sizes only the CLI offered before are shown too, not silently replaced.
    wide = KernelConfig(tile_m=256, tile_n=128, mask="causal", num_ctas=16)
    form.load_run(problem, wide, (1024,), "reference", "cluster 16")
    assert form.num_ctas.currentText() == "16" and form.spec().config == wide
    form.load_run(problem, KernelConfig(), (1024,), "reference", "")
    assert form.num_ctas.currentText() == "auto" and form.spec().config.num_ctas is None

    # The core's refusal of a cluster size lands on this combo, and picking another clears it.
    with pytest.raises(ConfigError) as refused:
        KernelConfig(num_ctas=3)
    said = form.mark_error(refused.value.field, str(refused.value))
    assert form.invalid_fields() == ["num_ctas"]
    # Led by the row's label, not the core's field name.
    assert form.num_ctas.toolTip() == said == form.error_label.text()
    assert said.startswith(f"{knobs.KNOBS['num_ctas'].label}: ") and "num_ctas" not in said
    pick(form.num_ctas, 1)
    assert form.invalid_fields() == [] and "CTAs per cluster" in form.num_ctas.toolTip()


def test_every_worker_warp_count_the_form_offers_runs_on_the_cutile_kernel(
    qtbot: Any, form: ControlsPanel
) -> None:
    """Issue 25, item 3: the form offered 1, 2, 16 and 32, which the kernel refused after the
    run was written. Each entry goes through the cuTile backend's check and the kernel's own
    LaunchConfig, as the form's spec."""
    fmha = pytest.importorskip("kernels.cutile_fmha", reason="cuda-tile is not installed")
    from workbench.backends.cutile import CutileBackend

    offered = [form.num_worker_warps.itemData(i) for i in range(form.num_worker_warps.count())]
    assert offered == [None, *fmha.WORKER_WARPS]
    for index in range(len(offered)):
        form.num_worker_warps.setCurrentIndex(index)
        spec = form.spec()
        for problem in spec.problems():
            CutileBackend().check_supported(problem, spec.config)
        fmha.LaunchConfig(num_worker_warps=spec.config.num_worker_warps)


FA4_REASON = (
    "flash-attn-4 is not installed: pip install 'fmha-workbench[fa4]' (flash-attn-4 4.0.0b36)"
)


def test_backend_list_ticks_several_and_greys_out_the_unavailable(
    qtbot: Any, form: ControlsPanel
) -> None:
    from gui_helpers import tick_backends

    from workbench.jobs import GroupJob

    form.set_backend_statuses(
        {
            "reference": Availability(True, "cpu"),
            "torch-cudnn": Availability(True, "cuDNN 9 on NVIDIA H200"),
            "fa4": Availability(False, FA4_REASON),
        }
    )
    assert not row_enabled(form.backends, "fa4")
    assert row_tooltip(form.backends, "fa4").splitlines()[0] == FA4_REASON
    # A click on the disabled row's box does nothing.
    tick_backends(qtbot, form, ["reference"])
    with pytest.raises(AssertionError):
        tick_backends(qtbot, form, ["reference", "fa4"])
    assert form.backends.checked() == ["reference"]
    assert not isinstance(form.job(), GroupJob) and form.job().backend == "reference"

    tick_backends(qtbot, form, ["reference", "torch-cudnn"])
    job = form.job()
    assert isinstance(job, GroupJob) and job.backends == ("reference", "torch-cudnn")
    assert job.spec == form.spec()
    # The ticks are saved and restored as a list.
    saved = form.state()
    assert saved["backends"] == ["reference", "torch-cudnn"]
    tick_backends(qtbot, form, ["torch-cudnn"])
    form.apply_state(saved)
    assert form.backends.checked() == ["reference", "torch-cudnn"]

    # Nothing ticked: the core refuses and the form marks the list.
    tick_backends(qtbot, form, [])
    with pytest.raises(ConfigError) as refused:
        form.job()
    form.mark_error(refused.value.field, str(refused.value))
    assert form.invalid_fields() == ["backends"]
    tick_backends(qtbot, form, ["reference"])  # acting on the mark clears it
    assert form.invalid_fields() == []


def test_with_cutile_ticked_the_form_offers_only_the_tiles_and_head_dims_it_runs(
    qtbot: Any, form: ControlsPanel
) -> None:
    """Issue 25, item 3: tiles 16 and 32 and head dim 32 were offered with cuTile ticked and
    refused at Run. Now they are greyed out, saying why; every value still offered runs."""
    pytest.importorskip("kernels.cutile_fmha", reason="cuda-tile is not installed")
    from gui_helpers import tick_backends

    from workbench.backends.cutile import CutileBackend

    form.set_backend_statuses(
        {"reference": Availability(True, "cpu"), "cutile": Availability(True, "H200")}
    )
    tick_backends(qtbot, form, ["reference"])
    assert form.offered("tile_m") == [16, 32, 64, 128, 256]  # the reference runs them all
    every_dim = list(range(32, 257, 8))  # the registry's one list (kernels.knobs.HEAD_DIM)
    assert form.offered("head_dim") == every_dim
    tick_backends(qtbot, form, ["reference", "cutile"])
    assert form.offered("tile_m") == form.offered("tile_n") == [64, 128, 256]
    assert form.offered("head_dim") == every_dim
    row = form.tile_m.findData(32)
    assert form.tile_m.model().item(row).toolTip() == "the cuTile kernel takes 64, 128, 256"
    for tile in form.offered("tile_m"):
        for head_dim in form.offered("head_dim"):
            form.tile_m.setCurrentIndex(form.tile_m.findData(tile))
            form.tile_n.setCurrentIndex(form.tile_n.findData(tile))
            form.head_dim.setCurrentIndex(form.head_dim.findData(head_dim))
            spec = form.spec()
            for problem in spec.problems():
                CutileBackend().check_supported(problem, spec.config)
    tick_backends(qtbot, form, ["reference"])
    assert form.offered("tile_m") == [16, 32, 64, 128, 256]  # unticking gives them back


BLACKWELL = "cuTile on NVIDIA RTX PRO 6000 Blackwell (sm_120), tuning table vetted offline"


def test_on_sm_120_the_form_offers_only_what_the_architecture_runs(
    qtbot: Any, form: ControlsPanel
) -> None:
    """Issue 27, part 3: the values the offline sm_120 compiles refuse (256-row tiles spill,
    no kernel fits at occupancy 2) are greyed out with the reason once cuTile is ticked on an
    sm_120 GPU; every value still offered passes the backend's check and the kernel's own."""
    fmha = pytest.importorskip("kernels.cutile_fmha", reason="cuda-tile is not installed")
    from gui_helpers import tick_backends

    from kernels import knobs
    from workbench.backends.cutile import CutileBackend, launch_knobs

    form.set_backend_statuses(
        {"reference": Availability(True, "cpu"), "cutile": Availability(True, BLACKWELL)}
    )
    assert form.arch() == "sm_120"  # the probe's GPU
    tick_backends(qtbot, form, ["reference"])  # the CPU reference runs them all
    assert 256 in form.offered("tile_m") and 2 in form.offered("occupancy")
    tick_backends(qtbot, form, ["cutile"])
    assert form.offered("tile_m") == [64, 128] and form.offered("tile_n") == [64, 128, 256]
    assert form.offered("occupancy") == [None, 1]
    tip = form.tile_m.model().item(form.tile_m.findData(256)).toolTip()
    assert tip.startswith("not on sm_120: 256-row tiles spill") and "blackwell-offline" in tip
    tip = form.occupancy.model().item(form.occupancy.findData(2)).toolTip()
    assert "not on sm_120" in tip and "102,400 B" in tip
    problem = Problem(q_len=1024, k_len=1024, head_dim=64)
    for tile in form.offered("tile_m"):
        for occupancy in form.offered("occupancy"):
            pick(form.tile_m, tile)
            pick(form.occupancy, occupancy)
            config = form.spec().config
            CutileBackend().check_supported(problem, config)
            fmha.LaunchConfig.of(launch_knobs(config))
            values = config.knob_values()
            assert not knobs.violations(values, capability="cutile", arch="sm_120")
    # With autotune the tuner sets tiles and hints: the form's are nominal, all offered.
    form.autotune.click()
    assert 256 in form.offered("tile_m") and 2 in form.offered("occupancy")
    form.autotune.click()
    # The window follows the probe: on an H200 only the kernel's own tiles are narrowed.
    form.set_arch("sm_90")
    assert form.offered("tile_m") == [64, 128, 256] and 2 in form.offered("occupancy")


def test_on_sm_120_run_refuses_a_greyed_value_that_a_stored_setting_forces_in(
    qtbot: Any, form: ControlsPanel
) -> None:
    # Saved settings or Load settings can set an entry the architecture greys out; Run then
    # refuses it naming the field, in the CLI's words, before any job exists.
    from gui_helpers import tick_backends

    form.set_backend_statuses(
        {"reference": Availability(True, "cpu"), "cutile": Availability(True, BLACKWELL)}
    )
    tick_backends(qtbot, form, ["cutile"])
    form.apply_state({"tile_m": 256})
    assert form.tile_m.currentData() == 256
    with pytest.raises(ConfigError) as refused:
        form.job()
    assert refused.value.field == "tile_m"
    assert refused.value.allowed.startswith("not on sm_120: 256-row tiles spill")
    form.set_arch("sm_90")  # an H200 runs it
    assert form.job().spec.config.tile_m == 256
