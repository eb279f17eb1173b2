"""The store's errors: each message says what the user can do."""

from __future__ import annotations


class StoreError(RuntimeError):
    """A database problem the user can act on; the message says what to do."""


class StoreLocked(StoreError):
    """Another writer held the database's lock for longer than the retries wait."""


class StoreWriteFailed(StoreError):
    """A write the disk refused (full, an I/O error): not bad input, the CLI's exit 1."""


class RunNotFound(StoreError):
    def __init__(self, run_id: int) -> None:
        self.run_id = run_id
        super().__init__(f"run {run_id} does not exist (see `fmha-workbench runs`)")
