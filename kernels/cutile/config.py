"""The launch config: one field per launch knob of the registry, checked once when it is made.

Below the kernel forms (:mod:`kernels.cutile.forms` picks a form and builds its arguments from a
config) and the launcher (:mod:`kernels.cutile.launch`), so both import it and neither the other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from kernels import knobs as registry
from kernels.schedule import kernel_form_of


@registry.with_knob_fields(registry.LAUNCH)
class LaunchConfig:
    """Tiles, knobs and compiler hints of one launch, checked once when it is made.

    A field per launch knob of the registry (:data:`kernels.knobs.LAUNCH`, with its default;
    each entry's help says what the knob does), checked by the registry's rules for the kernel
    (:func:`kernels.knobs.check_launch`), which refuse in the words the workbench uses. Which
    kernel form runs it on a problem is the schedule's answer (:meth:`kernel_form`); the
    forms (:mod:`kernels.cutile.forms`) say which knobs each form reads.
    """

    if TYPE_CHECKING:  # the knob fields are made at import time (with_knob_fields)
        __dataclass_fields__: ClassVar[dict[str, Any]]

        def __init__(self, *args: Any, **knobs: Any) -> None: ...
        def __getattr__(self, name: str) -> Any: ...

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
        of key-range splits that runs, :func:`kernels.cutile.forms.resolved_splits`; auto may
        resolve to 1). A causal persistent config runs one CTA per tile where the problem is
        not aligned, so that a config tuned at N = 2048 still runs at N = 2000 (the tuner's
        cache is keyed by N bucket).
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
