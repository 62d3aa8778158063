"""Where studies live: storage URLs, the default journal file, opening them safely, the results
table beside each study, and the files written under results_dir."""

from ipu_tune.storage._batched import BatchedJournalStorage, BatchingJournalBackend
from ipu_tune.storage._claims import ClaimLock
from ipu_tune.storage._files import atomic_write, export_folder, study_dir
from ipu_tune.storage._journal_lock import FlockLock
from ipu_tune.storage._open import (
    DEFAULT_JOURNAL,
    HEARTBEAT_GRACE_S,
    HEARTBEAT_INTERVAL_S,
    MEMORY,
    StorageTarget,
    open_storage,
    redact,
    resolve_storage,
    stale_trials,
)
from ipu_tune.storage._places import check_storage_places, removing_new_files
from ipu_tune.storage._results_store import ResultsStore, csv_text, export_table
from ipu_tune.storage._results_table import (
    COLUMN_NAMES,
    PLAN_COLUMNS,
    TABLE_NAME,
    ResultsTable,
    open_table,
)
from ipu_tune.storage._running import Held, RunningFile
from ipu_tune.storage._url import damaged_database

__all__ = [
    "COLUMN_NAMES",
    "DEFAULT_JOURNAL",
    "HEARTBEAT_GRACE_S",
    "HEARTBEAT_INTERVAL_S",
    "MEMORY",
    "PLAN_COLUMNS",
    "TABLE_NAME",
    "BatchedJournalStorage",
    "BatchingJournalBackend",
    "ClaimLock",
    "FlockLock",
    "Held",
    "ResultsStore",
    "ResultsTable",
    "RunningFile",
    "StorageTarget",
    "atomic_write",
    "check_storage_places",
    "csv_text",
    "damaged_database",
    "export_folder",
    "export_table",
    "open_storage",
    "open_table",
    "redact",
    "removing_new_files",
    "resolve_storage",
    "stale_trials",
    "study_dir",
]
