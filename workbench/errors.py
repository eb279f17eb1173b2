"""The errors every layer shares, defined below all of them so none has to import upward."""

from __future__ import annotations


class BackendError(RuntimeError):
    """A backend cannot run this point; the message says why and what to do."""
