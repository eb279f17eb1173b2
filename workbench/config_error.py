"""The boundary's one error, :class:`ConfigError`, and the checks that raise it: a refused value
named by its field, so the CLI says the flag and the window marks the row."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from workbench import field_words


class ConfigError(ValueError):
    """A bad value at the boundary: ``field`` names it so a UI can mark it."""

    def __init__(self, field_name: str, value: Any, allowed: str) -> None:
        self.field = field_name
        self.value = value
        self.allowed = allowed
        super().__init__(field_words.api_words(field_name, value, allowed))

    @property
    def flag(self) -> str | None:
        """The CLI flag that sets the refused field (``--worker-warps``), or None."""
        return field_words.flag_of(self.field)

    @property
    def label(self) -> str | None:
        """The window's label of the refused field (``Worker warps``), or None."""
        return field_words.label_of(self.field)

    def cli_message(self, typed: Sequence[str] = ()) -> str:
        """The refusal as the CLI says it, ``--window 64: a window size needs --mask window…``,
        naming the flag of the ``typed`` words where several set the field."""
        return field_words.cli_words(self.field, self.value, self.allowed, typed)

    def form_message(self) -> str:
        """The refusal as the window says it: ``Window 64: a window size needs Mask window…``."""
        return field_words.form_words(self.field, self.value, self.allowed)

    def __reduce__(self) -> tuple[type, tuple[str, Any, str]]:
        # Picklable, so a refusal in the GPU engine's child process arrives as itself.
        return (type(self), (self.field, self.value, self.allowed))


def check_int(name: str, value: Any, lo: int, hi: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(name, value, "expected a whole number")
    if value < lo or (hi is not None and value > hi):
        upper = f" and at most {hi}" if hi is not None else ""
        raise ConfigError(name, value, f"expected at least {lo}{upper}")


def check_choice(name: str, value: Any, choices: Iterable[Any]) -> None:
    choices = tuple(choices)
    if value not in choices or (
        isinstance(value, bool) and not any(isinstance(c, bool) for c in choices)
    ):
        shown = ", ".join(str(c) for c in choices)
        raise ConfigError(name, value, f"expected one of {shown}")
