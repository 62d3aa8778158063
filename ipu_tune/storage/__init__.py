"""Where studies live: storage URLs, the default journal file, and opening them safely."""

from ipu_tune.storage._batched import BatchedJournalStorage, BatchingJournalBackend
from ipu_tune.storage._claims import ClaimLock
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
)

__all__ = [
    "DEFAULT_JOURNAL",
    "HEARTBEAT_GRACE_S",
    "HEARTBEAT_INTERVAL_S",
    "MEMORY",
    "BatchedJournalStorage",
    "BatchingJournalBackend",
    "ClaimLock",
    "FlockLock",
    "StorageTarget",
    "open_storage",
    "redact",
    "resolve_storage",
]
