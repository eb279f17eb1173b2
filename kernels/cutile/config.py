"""The launch config: one field per launch knob of the registry, checked once when it is made.

Below the kernel forms (:mod:`kernels.cutile.forms` picks a form and builds its arguments from a
config) and the launcher (:mod:`kernels.cutile.launch`), so both import it and neither the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kernels import knobs as registry
from kernels.schedule import kernel_form_of


def _default(name: str) -> Any:
    """The registry's default of knob ``name`` (the one definition of each knob)."""
    return registry.KNOBS[name].default


@dataclass(frozen=True)
class LaunchConfig:
    """Tiles, knobs and compiler hints of one launch, checked once when it is made.

    A field per launch knob of the registry (:data:`kernels.knobs.LAUNCH`, with its default;
    each entry's help says what the knob does), checked by the registry's rules for the kernel
    (:func:`kernels.knobs.check_launch`), which refuse in the words the workbench uses. Which
    kernel form runs it on a problem is the schedule's answer (:meth:`kernel_form`); the
    forms (:mod:`kernels.cutile.forms`) say which knobs each form reads. The fields are the
    registry's launch knobs in its order (``tests/test_launch_plan.py`` checks names, order,
    types and defaults against :data:`kernels.knobs.LAUNCH`).
    """

    tile_m: int = _default("tile_m")
    tile_n: int = _default("tile_n")
    fast_math: bool = _default("fast_math")
    k_split: bool = _default("k_split")
    remap: bool = _default("remap")
    occupancy: int | None = _default("occupancy")
    num_worker_warps: int | None = _default("num_worker_warps")
    poly_exp2_cols: int = _default("poly_exp2_cols")
    num_ctas: int | None = _default("num_ctas")
    persistent: bool = _default("persistent")
    k_unroll: int = _default("k_unroll")
    k_latency: int = _default("k_latency")
    v_latency: int = _default("v_latency")
    pipeline: bool = _default("pipeline")
    store_tma: bool = _default("store_tma")
    q_halves: bool = _default("q_halves")
    kv_splits: int | None = _default("kv_splits")
    pack_gqa: bool = _default("pack_gqa")

    def __post_init__(self) -> None:
        registry.check_launch(self.values())

    def values(self) -> dict[str, Any]:
        """The knobs and their values, by name."""
        return {name: getattr(self, name) for name in registry.LAUNCH}

    @classmethod
    def of(cls, given: dict[str, Any]) -> LaunchConfig:
        """From keyword arguments, naming any that is not a knob."""
        registry.check_launch(given)  # an unknown knob is named, with the real ones
        return cls(**given)

    def kernel_form(
        self, mask: str, q_len: int, k_len: int, input_pos: int = 0, *, splits: int = 1
    ) -> str:
        """Which kernel runs this config on a problem (one of :data:`KERNEL_FORMS`):
        :func:`kernels.schedule.kernel_form_of` once the mask is checked (``splits``: the count
        of key-range splits that runs, as :func:`kernels.cutile.plan.plan_launch` resolves it;
        auto may resolve to 1). A causal persistent config runs one CTA per tile where the
        problem is not aligned, so that a config tuned at N = 2048 still runs at N = 2000 (the
        tuner's cache is keyed by N bucket).
        """
        self.check_mask(mask)
        return kernel_form_of(self.values(), mask, q_len, k_len, input_pos, splits)

    def hints(self) -> dict[str, Any]:
        """The compiler hints this config gives (the knobs with a ``Knob.hint``), by hint name."""
        return {
            knob.hint: getattr(self, knob.name)
            for knob in registry.KNOBS.values()
            if knob.hint and knob.launch
        }

    def check_mask(self, mask: str) -> None:
        """Raise ValueError when this config cannot run ``mask`` (the registry's rules that read
        the mask: the persistent grid has no window kernel, its causal form takes one key block
        an iteration)."""
        registry.check_launch(self.values(), mask)


LAUNCH_KNOBS: tuple[str, ...] = tuple(registry.LAUNCH)
