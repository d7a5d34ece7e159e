"""Who is calling, and whose runs they may see: named API keys and the owners of WorkflowServer runs.

`DAGRAG_API_KEYS="alice=KEY1,bob=KEY2"` gives each client its own key. Every request is attributed to its key's
name (the access log, a metrics label), and a WorkflowServer run started with one key is visible and controllable
only with that key: `/handlers` lists the caller's own runs, and another client's run is "not found" at
`/handlers/{id}`, `/results/{id}` and `/events/{id}`. Names in `DAGRAG_API_ADMINS`, and the holder of the single
`DAGRAG_API_KEY` (named `admin`), see and control every run. Keys are compared in constant time and never logged.
"""

from __future__ import annotations

import hmac
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path

from ..config import Settings, named_api_keys

ADMIN = "admin"  # the name the single DAGRAG_API_KEY's holder is attributed to
MAX_OWNED_RUNS = 100_000  # run owners remembered; the oldest is forgotten first (its run is then admin-only)


@dataclass(frozen=True)
class Caller:
    """The client a request came from: its key's name, and whether it sees every client's runs."""

    name: str
    admin: bool


class ApiKeys:
    """The keys a server accepts, each with its client's name."""

    def __init__(self, keys: dict[str, str], admins: frozenset[str]) -> None:
        self._keys = [(key.encode(), name) for name, key in keys.items()]
        self._admins = admins

    @classmethod
    def from_settings(cls, settings: Settings) -> ApiKeys:
        keys = named_api_keys(settings)
        admins = frozenset(name.strip() for name in settings.api_admins.split(",") if name.strip())
        if settings.api_key is not None:
            keys = {**keys, ADMIN: settings.api_key.get_secret_value()}
            admins |= {ADMIN}
        return cls(keys, admins)

    @property
    def required(self) -> bool:
        """Whether requests need a key at all (none configured: loopback only, and every caller is the admin)."""
        return bool(self._keys)

    def caller(self, authorization: str) -> Caller | None:
        """The caller an `Authorization: Bearer <key>` header names, or None for a missing or wrong key. Every key is
        compared, in constant time, whichever matches: the time says nothing about which key was close."""
        scheme, _, token = authorization.partition(" ")
        given = token.strip().encode()
        found: str | None = None
        for key, name in self._keys:
            if hmac.compare_digest(given, key) and found is None:
                found = name
        if scheme.lower() != "bearer" or found is None:
            return None
        return Caller(name=found, admin=found in self._admins)


def runs_db_file(settings: Settings) -> Path | None:
    """SERVE_RUNS_DB's SQLite file, its folder made if needed; None when runs are kept in memory. The runs
    (WorkflowServer's store) and their owners (`RunOwners`) share it."""
    if settings.serve_runs_db == "memory":
        return None
    path = Path(settings.serve_runs_db).expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


class RunOwners:
    """Which client started each WorkflowServer run (handler id → key name), for the newest `limit` runs. Kept in
    SERVE_RUNS_DB beside the runs themselves, so a restart forgets neither; in memory when the runs are."""

    def __init__(self, db_path: Path | None = None, limit: int = MAX_OWNED_RUNS) -> None:
        self._limit = limit
        self._db = sqlite3.connect(db_path or ":memory:", check_same_thread=False, isolation_level=None)
        self._db.execute("CREATE TABLE IF NOT EXISTS dagrag_run_owners (handler_id TEXT PRIMARY KEY, "
                         "client TEXT NOT NULL, claimed INTEGER NOT NULL)")
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> RunOwners:
        return cls(runs_db_file(settings))

    def owner(self, handler_id: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT client FROM dagrag_run_owners WHERE handler_id = ?",
                                   (handler_id,)).fetchone()
        return row[0] if row else None

    def claim(self, handler_id: str, caller: Caller) -> bool:
        """Record `caller` as the run's owner; False when another client owns it already (an admin may take any)."""
        owner = self.owner(handler_id)
        if owner is not None and owner != caller.name and not caller.admin:
            return False
        if owner is None:
            with self._lock:
                self._db.execute("INSERT OR IGNORE INTO dagrag_run_owners VALUES (?, ?, "
                                 "(SELECT COALESCE(MAX(claimed), 0) + 1 FROM dagrag_run_owners))",
                                 (handler_id, caller.name))
                self._db.execute("DELETE FROM dagrag_run_owners WHERE claimed <= "
                                 "(SELECT MAX(claimed) FROM dagrag_run_owners) - ?", (self._limit,))
        return True

    def may_see(self, handler_id: str, caller: Caller) -> bool:
        """Whether `caller` may read or control the run: its owner, or an admin."""
        return caller.admin or self.owner(handler_id) == caller.name
