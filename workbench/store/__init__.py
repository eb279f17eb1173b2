"""Every run, its points and block maps, in SQLite through sqlite-utils.

Guarantees:

* Each point is committed with its block map in one transaction the moment it is measured, so a
  crash or a ``kill -9`` keeps everything measured before it and no point without its map; a run
  left 'running' by a dead process is shown as failed ("interrupted") when the database is next
  opened (a live process that reused the PID is told apart by its start time). Every write takes
  the write lock first (BEGIN IMMEDIATE), so writers queue for it.
* WAL journal and foreign keys on every writing connection; the schema version is
  ``PRAGMA user_version`` and migrations are applied in order, each in a transaction, so
  re-opening is always safe.
* A file that is not a run database (not SQLite, another application's SQLite file, a folder, a
  device, a FIFO) is refused untouched, writing or not. A store opened ``read_only`` never
  creates, moves, migrates or changes its file.
* A damaged run database is set aside under a timestamped name by a writing store only, and a
  fresh database is used; ``Store.notice`` says where it went. A file from a newer schema opens
  read-only with a notice, or is refused when this version cannot read its tables.
* A database locked by another writer is retried with backoff before a clear error
  (:class:`StoreLocked`); a run's end is retried for much longer, so its reason is not lost.

One :class:`Store` per thread: SQLite connections must not cross threads.

The package: :mod:`~workbench.store.files` (which file, and whether it may be opened),
:mod:`~workbench.store.schema` (tables, migrations, what a run database is),
:mod:`~workbench.store.records` (runs and points), :mod:`~workbench.store.opening` and
:mod:`~workbench.store.run_store` (the :class:`Store`), :mod:`~workbench.store.export` (CSV).
"""

from workbench.store.errors import RunNotFound, StoreError, StoreLocked, StoreWriteFailed
from workbench.store.export import (
    BANDWIDTH_COLS,
    COMPILED_COLUMNS,
    FORMULA_STARTS,
    csv_text,
    export_columns,
    neutralised,
)
from workbench.store.files import APP_NAME, data_dir_db_path, default_db_path, env_db_path
from workbench.store.locking import (
    BUSY_TIMEOUT_S,
    FINAL_WRITE_PATIENCE_S,
    LOCK_RETRIES,
)
from workbench.store.records import (
    INTERRUPTED_ERROR,
    POINT_FIELDS,
    STATUSES,
    PointRecord,
    RunRecord,
    utc_now,
)
from workbench.store.run_store import MACHINE_NAME_SQL, Store
from workbench.store.schema import (
    GROUP_IDENTITY_FIELDS,
    MIGRATIONS,
    RUN_IDENTITY_FIELDS,
    SCHEMA_VERSION,
    content_uuid,
)

__all__ = [
    "APP_NAME",
    "BANDWIDTH_COLS",
    "BUSY_TIMEOUT_S",
    "COMPILED_COLUMNS",
    "FINAL_WRITE_PATIENCE_S",
    "FORMULA_STARTS",
    "GROUP_IDENTITY_FIELDS",
    "INTERRUPTED_ERROR",
    "LOCK_RETRIES",
    "MACHINE_NAME_SQL",
    "MIGRATIONS",
    "POINT_FIELDS",
    "RUN_IDENTITY_FIELDS",
    "SCHEMA_VERSION",
    "STATUSES",
    "PointRecord",
    "RunNotFound",
    "RunRecord",
    "Store",
    "StoreError",
    "StoreLocked",
    "StoreWriteFailed",
    "content_uuid",
    "csv_text",
    "data_dir_db_path",
    "default_db_path",
    "env_db_path",
    "export_columns",
    "neutralised",
    "utc_now",
]
