"""Test-only CPU backends for group sweeps, registered by fixtures (never in product code).

Groups need distinct backends, and the only product backend that runs without a GPU is the
reference, so tests register these through :func:`register` (in this process only: a window
that uses them runs its sweep in the worker thread, ``window.jobs.sweep_in_child = False``).
"""

from __future__ import annotations

from typing import Any

from workbench.backends.base import Availability
from workbench.backends.reference import ReferenceBackend

NAME = "reference-b"


class SecondReference(ReferenceBackend):
    """The NumPy reference under a second name: a CPU peer for a group."""

    name = NAME
    description = "NumPy reference again (test-only second CPU backend)"


class UnavailablePeer(ReferenceBackend):
    name = "missing-peer"

    def availability(self) -> Availability:
        return Availability(False, "missing-peer is not installed: pip install missing-peer")


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


class FlashLike(ReferenceBackend):
    """The NumPy reference refusing masks as SDPA's flash backend does (q_len > 1 causal below
    k_len has no kernel there), so a group's skip of it is seen on the CPU."""

    name = "flash-like"

    def check_supported(self, problem: Any, config: Any) -> None:
        from workbench.backends.torch_sdpa import sdpa_causal_form

        sdpa_causal_form(problem, config, self.name, lower_right=False)
        super().check_supported(problem, config)


class BrokenOpen(ReferenceBackend):
    """Raises a plain bug (not a refusal) while opening a point, as a tuner called with a
    keyword it does not take once did on the GPU host."""

    name = "broken-open"

    def open_point(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("autotune() got an unexpected keyword argument 'q_halves'")


def register(monkeypatch: Any) -> None:
    """Make the backends above backend names for the rest of the test."""
    import workbench.backends as backends

    for cls in (SecondReference, UnavailablePeer, Flaky, SmallOnly, FlashLike, BrokenOpen):
        declared = backends.BackendDeclaration(cls.name, cls.description, cls, in_engine=False)
        monkeypatch.setitem(backends._REGISTRY, cls.name, declared)
    monkeypatch.setattr(Flaky, "gone", None)


class CutileStandIn(ReferenceBackend):
    """The NumPy reference under the cuTile backend's name, for what the CLI says about a
    cuTile run without a GPU (registered by the test that needs it, not by :func:`register`)."""

    name = "cutile"
