"""The launch config: one field per launch knob of the registry, checked once when it is made.

Below the kernel forms (:mod:`kernels.cutile.forms` picks a form and builds its arguments from a
config) and the launcher (:mod:`kernels.cutile.launch`), so both import it and neither the other.
"""

from __future__ import annotations

from typing import Any

from kernels import knobs as registry
from kernels.schedule import causal_grid_aligned


@registry.with_knob_fields(registry.LAUNCH)
class LaunchConfig:
    """Tiles, knobs and compiler hints of one launch, checked once when it is made.

    A field per launch knob of the registry (:data:`kernels.knobs.LAUNCH`, with its default;
    each entry's help says what the knob does), checked by the registry's rules for the kernel
    (:func:`kernels.knobs.check_launch`), which refuse in the words the workbench uses. The
    persistent grid's causal form runs where the problem is aligned and one CTA per tile
    otherwise (:meth:`kernel_form`); it runs one key loop and deals its tiles out by work on
    the host, so ``k_split`` and ``remap`` do not change it, and it takes the polynomial even
    without ``k_split``.
    """

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
        """Which kernel runs this config on a problem (one of :data:`KERNEL_FORMS`).

        ``decode`` (packed GQA heads, the key range in ``splits`` splits and their combine)
        runs with ``pack_gqa`` or where the key range is split (``splits``: the count that
        runs, :func:`kernels.cutile.forms.resolved_splits`; auto may resolve to 1).

        ``persistent`` with ``mask="causal"`` runs the causal persistent grid only where the
        problem is aligned (:func:`kernels.schedule.causal_grid_aligned`); elsewhere the same
        tiles and hints run one CTA per tile, so that a config tuned at N = 2048 still runs at
        N = 2000 (the tuner's cache is keyed by N bucket).
        """
        self.check_mask(mask)
        if self.pack_gqa or splits > 1:
            return "decode"
        if not self.persistent:
            return "tile"
        if mask == "none":
            return "persistent"
        if causal_grid_aligned(q_len, k_len, self.tile_m, self.tile_n, input_pos):
            return "causal-persistent"
        return "tile"

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
