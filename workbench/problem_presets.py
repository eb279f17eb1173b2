"""Problem presets: shapes the way decode users state them (a model's heads, one new token or a
few draft tokens, a KV cache of 4k-128k), from ``workbench/presets/decode.json``.

A preset is a problem (its q_len fixed), the key lengths to sweep (the x axis is k_len) and a
mask (causal is bottom-right: the queries are the last tokens), and it brings the kernel
settings that read a KV cache best (:func:`preset_knobs`: packed GQA heads, an auto split of the
key range, 32 KB key blocks), so that a preset run as it comes is the decode kernel, not the
prefill tile form at 0.12x cuDNN. The CLI's ``sweep --preset NAME`` and the window's preset menu
read the same file; whatever the user sets by hand wins.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from workbench.config import K_LEN_AXIS, ConfigError, Problem

PRESETS_FILE = "decode.json"
SERVING_FILE = "serving.json"


@dataclass(frozen=True)
class ProblemPreset:
    name: str
    description: str
    problem: dict[str, Any]  # Problem fields, q_len included
    k_lens: str  # a list or a power-of-two range, as --k-lens takes it
    mask: str
    axis: str = K_LEN_AXIS

    def template(self, **given: Any) -> Problem:
        """The preset's problem at its first key length, with ``given`` fields (the user's own,
        None meaning not given) over the preset's."""
        fields = {**self.problem, **{k: v for k, v in given.items() if v is not None}}
        q_len = fields["q_len"]
        return Problem(**{**fields, "k_len": q_len, "input_pos": 0})


@dataclass(frozen=True)
class ServingPreset:
    """A batch shaped like a serving engine's (``workbench/presets/serving.json``): the
    problem's heads and dtype (``q_len`` for decode, none for a varlen prefill), the batch
    (``lengths`` as ``--lengths`` takes it, ``kv_cache``, ``page_size``, ``shared_pages``) and
    the mask; a decode preset brings :func:`preset_knobs` as the decode presets do."""

    name: str
    description: str
    problem: dict[str, Any]
    batch: dict[str, Any]
    mask: str

    @property
    def decode(self) -> bool:
        return "q_len" in self.problem


@lru_cache(maxsize=2)
def _presets_file(name: str = PRESETS_FILE) -> dict[str, Any]:
    text = resources.files("workbench.presets").joinpath(name).read_text("utf-8")
    return json.loads(text)


def serving_presets() -> dict[str, ServingPreset]:
    """Every built-in serving preset by name, in the file's order."""
    return {
        name: ServingPreset(
            name, entry["description"], dict(entry["problem"]), dict(entry["batch"]), entry["mask"]
        )
        for name, entry in _presets_file(SERVING_FILE)["presets"].items()
    }


def brings_decode_knobs(name: str) -> bool:
    """Does the preset ``name`` bring the decode kernel's settings (all but a varlen one)?"""
    serving = serving_presets().get(name)
    return serving is None or serving.decode


def problem_presets() -> dict[str, ProblemPreset]:
    """Every built-in problem preset by name, in the file's order."""
    return {
        name: ProblemPreset(
            name, entry["description"], dict(entry["problem"]), entry["k_lens"], entry["mask"]
        )
        for name, entry in _presets_file()["presets"].items()
    }


def head_dim_knobs(head_dim: int) -> dict[str, Any]:
    """The knob values a preset sets by head dim (the key block at ``head_dim``), only those."""
    return dict(_presets_file()["kernel"]["by_head_dim"].get(str(head_dim), {}))


def preset_knobs(head_dim: int) -> dict[str, Any]:
    """The knob values a preset brings at ``head_dim`` (registry names; the user's own win):
    the file's ``kernel`` section, its entry for that head dim over its common values."""
    return {**_presets_file()["kernel"]["knobs"], **head_dim_knobs(head_dim)}


def problem_preset(name: str) -> ProblemPreset:
    """The preset called ``name``, or a ConfigError naming the presets there are."""
    presets = problem_presets()
    if name not in presets:
        every = [*presets, *serving_presets()]
        raise ConfigError("preset", name, f"expected one of {', '.join(every)}")
    return presets[name]
