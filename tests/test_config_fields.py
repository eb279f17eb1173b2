"""The workbench config's typed fields are the knob registry's, written out: regenerating
workbench/config_fields.py gives the committed file, a stale file is caught, and a config built
from the fields still refuses what the registry refuses."""

from __future__ import annotations

import dataclasses
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

from kernels import knobs
from workbench.config import ConfigError, KernelConfig

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gen_config_fields.py"


def test_the_fields_file_regenerates_identically_from_the_registry() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_check_names_a_stale_file_and_fails(tmp_path: Path, monkeypatch) -> None:
    script = runpy.run_path(str(SCRIPT), run_name="not_main")
    stale = tmp_path / "config_fields.py"
    stale.write_text(script["render"]().replace("tile_m: int = 64", "tile_m: int = 32"))
    monkeypatch.setitem(script["main"].__globals__, "TARGET", stale)
    monkeypatch.setattr(sys, "argv", ["gen_config_fields.py", "--check"])
    monkeypatch.setitem(script["main"].__globals__, "ROOT", tmp_path)
    assert script["main"]() == 1


def test_every_knob_is_a_field_with_the_registrys_default_in_the_registrys_order() -> None:
    fields = [f for f in dataclasses.fields(KernelConfig) if f.name not in ("mask", "window")]
    assert [f.name for f in fields] == list(knobs.KNOBS)
    for f in fields:
        assert f.default == knobs.KNOBS[f.name].default, f.name
    names = [f.name for f in dataclasses.fields(KernelConfig)]
    # The CSV's columns: the mask and window after the registry's MASK_FIELDS_AFTER.
    after = names.index(knobs.MASK_FIELDS_AFTER)
    assert names[after + 1 : after + 3] == ["mask", "window"]


def test_a_value_the_registry_refuses_is_refused_by_the_typed_config() -> None:
    with pytest.raises(ConfigError, match="tile_m"):
        KernelConfig(tile_m=48)
    with pytest.raises(dataclasses.FrozenInstanceError):
        KernelConfig().tile_m = 128  # type: ignore[misc]
