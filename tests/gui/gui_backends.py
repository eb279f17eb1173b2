"""Test-only CPU backends for group sweeps, registered by fixtures (never in product code).

``register(monkeypatch)`` adds them to the core's registry in this process only, so a window
that uses them runs its sweep in the worker thread (``window.sweep_in_child = False``).
"""

from __future__ import annotations

from typing import Any

from workbench.backends.base import Availability
from workbench.backends.reference import ReferenceBackend


class SecondReference(ReferenceBackend):
    """The NumPy reference under a second name: a CPU peer for a group."""

    name = "reference-b"
    description = "NumPy reference again (test-only second CPU backend)"


class Flaky(ReferenceBackend):
    """Available until ``Flaky.gone`` says otherwise (a GPU lost between probe and Run)."""

    name = "flaky"
    gone: str | None = None

    def availability(self) -> Availability:
        if Flaky.gone:
            return Availability(False, Flaky.gone)
        return Availability(True, "test backend: available")


class SmallOnly(ReferenceBackend):
    """Fits N <= 64 only (like naive attention's N×N scores): the group skips longer N."""

    name = "small-only"

    def check_supported(self, problem: Any, config: Any) -> None:
        from workbench.config import ConfigError

        if problem.q_len > 64:
            raise ConfigError("q_len", problem.q_len, "this test backend fits N <= 64 only")
        super().check_supported(problem, config)


def register(monkeypatch: Any) -> None:
    import workbench.backends as backends

    monkeypatch.setitem(backends._REGISTRY, "reference-b", f"{__name__}:SecondReference")
    monkeypatch.setitem(backends._REGISTRY, "flaky", f"{__name__}:Flaky")
    monkeypatch.setitem(backends._REGISTRY, "small-only", f"{__name__}:SmallOnly")
    monkeypatch.setattr(backends, "BACKEND_NAMES", tuple(backends._REGISTRY))
    monkeypatch.setattr(Flaky, "gone", None)
