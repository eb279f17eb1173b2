"""A second CPU backend, for tests of groups: the reference kernel under another name.

Groups need distinct backends, and the only product backend that runs without a GPU is the
reference, so tests register this one (never the product) through :func:`register`."""

from __future__ import annotations

import pytest

from workbench.backends.reference import ReferenceBackend

NAME = "reference-b"


class SecondReference(ReferenceBackend):
    name = NAME
    description = "the NumPy reference again, as a stand-in peer in tests"


class UnavailablePeer(ReferenceBackend):
    name = "missing-peer"

    def availability(self):  # type: ignore[no-untyped-def]
        from workbench.backends import Availability

        return Availability(False, "missing-peer is not installed: pip install missing-peer")


def register(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``reference-b`` and ``missing-peer`` backend names for the rest of the test."""
    import workbench.backends as backends

    registry = {
        **backends._REGISTRY,
        NAME: "tests.cpu_peers:SecondReference",
        "missing-peer": "tests.cpu_peers:UnavailablePeer",
    }
    monkeypatch.setattr(backends, "_REGISTRY", registry)
    monkeypatch.setattr(backends, "BACKEND_NAMES", tuple(registry))
