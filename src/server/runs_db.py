"""Where `dagrag serve` keeps WorkflowServer's runs and who owns each: SERVE_RUNS_DB.

    a file path      SQLite: WorkflowServer's SqliteWorkflowStore, and the owners table in the same file
    `memory`         both in memory: gone at a restart
    postgresql://…   Postgres, shared by several replicas: WorkflowServer's PostgresWorkflowStore (asyncpg, its
                     tables made by its own migrations) and the owners table `dagrag_run_owners` in the same
                     database, so every replica agrees on whose run is whose

The URL's password is never logged nor shown: messages carry `redact_url`'s form. A Postgres database that cannot be
used is one `RunsDbUnusable` naming DAGRAG_SERVE_RUNS_DB (`check_runs_db`, before the server loads anything).
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from abc import ABC, abstractmethod
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING
from urllib.parse import unquote

from llama_agents.server import AbstractWorkflowStore, MemoryWorkflowStore, SqliteWorkflowStore

from ..config import Settings, is_postgres_url, redact_url
from ..core.errors import DagragError
from .keys import Caller

if TYPE_CHECKING:
    import asyncpg

SETTING = "DAGRAG_SERVE_RUNS_DB"
MAX_OWNED_RUNS = 100_000  # run owners remembered; the oldest is forgotten first (its run is then admin-only)
CONNECT_TIMEOUT_S = 10.0
OWNERS_TABLE = "dagrag_run_owners"
OWNERS_LOCK_ID = 0x6461_6772_6167  # pg_advisory_xact_lock key: replicas starting together make the table once


class RunsDbUnusable(DagragError, ValueError):
    """SERVE_RUNS_DB names a database the server cannot use (or its driver is missing): the server does not start."""


def runs_db_file(settings: Settings) -> Path | None:
    """SERVE_RUNS_DB's SQLite file, its folder made if needed; None when runs are kept in memory (or in Postgres)."""
    if settings.serve_runs_db == "memory" or is_postgres_url(settings.serve_runs_db):
        return None
    path = Path(settings.serve_runs_db).expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def runs_store(settings: Settings) -> AbstractWorkflowStore:
    """Where WorkflowServer keeps runs: Postgres, the SQLite file, or memory."""
    if is_postgres_url(settings.serve_runs_db):
        asyncpg_needed()
        # Not exported by llama_agents.server; its module path is part of the pinned llama-agents-server.
        from llama_agents.server._store.postgres_workflow_store import PostgresWorkflowStore

        return PostgresWorkflowStore(dsn=settings.serve_runs_db)
    path = runs_db_file(settings)
    return MemoryWorkflowStore() if path is None else SqliteWorkflowStore(str(path))


def run_owners(settings: Settings) -> RunOwners:
    """The owners table beside the runs: in the same Postgres database, the same SQLite file, or memory."""
    if is_postgres_url(settings.serve_runs_db):
        return PostgresRunOwners(settings.serve_runs_db)
    return SqliteRunOwners(runs_db_file(settings))


# --- the owners table ----------------------------------------------------------------------------------------

class RunOwners(ABC):
    """Which client started each WorkflowServer run (handler id → key name), for the newest `limit` runs. Kept
    beside the runs themselves, so a restart forgets neither and replicas sharing the runs share their owners."""

    @abstractmethod
    async def start(self) -> None:
        """Open the table (made if missing). The server calls it at startup; the first use calls it otherwise."""

    @abstractmethod
    async def close(self) -> None:
        """Release connections; the table stays."""

    @abstractmethod
    async def owner(self, handler_id: str) -> str | None:
        """The name of the client that started the run; None for a run nobody claimed (or one forgotten)."""

    @abstractmethod
    async def claim(self, handler_id: str, caller: Caller) -> bool:
        """Record `caller` as the run's owner; False when another client owns it already (an admin may take any)."""

    async def may_see(self, handler_id: str, caller: Caller) -> bool:
        """Whether `caller` may read or control the run: its owner, or an admin."""
        return caller.admin or await self.owner(handler_id) == caller.name


class SqliteRunOwners(RunOwners):
    """The owners in SERVE_RUNS_DB's SQLite file (in memory without one). Queries of a local file are quick: they
    run on the event loop."""

    def __init__(self, db_path: Path | None = None, limit: int = MAX_OWNED_RUNS) -> None:
        self._limit = limit
        self._db = sqlite3.connect(db_path or ":memory:", check_same_thread=False, isolation_level=None)
        self._db.execute(f"CREATE TABLE IF NOT EXISTS {OWNERS_TABLE} (handler_id TEXT PRIMARY KEY, "
                         "client TEXT NOT NULL, claimed INTEGER NOT NULL)")
        self._lock = threading.Lock()

    async def start(self) -> None:
        pass  # the table was made with the connection

    async def close(self) -> None:
        with self._lock:
            self._db.close()

    def _owner(self, handler_id: str) -> str | None:
        with self._lock:
            row = self._db.execute(f"SELECT client FROM {OWNERS_TABLE} WHERE handler_id = ?",
                                   (handler_id,)).fetchone()
        return row[0] if row else None

    async def owner(self, handler_id: str) -> str | None:
        return self._owner(handler_id)

    async def claim(self, handler_id: str, caller: Caller) -> bool:
        owner = self._owner(handler_id)
        if owner is not None and owner != caller.name and not caller.admin:
            return False
        if owner is None:
            with self._lock:
                self._db.execute(f"INSERT OR IGNORE INTO {OWNERS_TABLE} VALUES (?, ?, "
                                 f"(SELECT COALESCE(MAX(claimed), 0) + 1 FROM {OWNERS_TABLE}))",
                                 (handler_id, caller.name))
                self._db.execute(f"DELETE FROM {OWNERS_TABLE} WHERE claimed <= "
                                 f"(SELECT MAX(claimed) FROM {OWNERS_TABLE}) - ?", (self._limit,))
        return True


class PostgresRunOwners(RunOwners):
    """The owners in the Postgres database WorkflowServer keeps the runs in (asyncpg, a small pool of its own).
    A claim is one INSERT … ON CONFLICT DO NOTHING: of two replicas naming the same run at once, one wins."""

    def __init__(self, url: str, limit: int = MAX_OWNED_RUNS) -> None:
        self._url = url
        self._limit = limit
        self._pool: asyncpg.Pool | None = None
        self._starting = asyncio.Lock()

    async def start(self) -> None:
        async with self._starting:
            if self._pool is not None:
                return
            asyncpg = asyncpg_needed()
            try:
                pool = await asyncpg.create_pool(self._url, min_size=1, max_size=4, timeout=CONNECT_TIMEOUT_S)
            except Exception as error:
                raise unusable(self._url, error) from None
            try:
                async with pool.acquire() as conn, conn.transaction():
                    await conn.execute("SELECT pg_advisory_xact_lock($1)", OWNERS_LOCK_ID)
                    await conn.execute(f"CREATE TABLE IF NOT EXISTS {OWNERS_TABLE} (handler_id TEXT PRIMARY KEY, "
                                       "client TEXT NOT NULL, claimed BIGINT GENERATED ALWAYS AS IDENTITY)")
                    await conn.execute(f"CREATE INDEX IF NOT EXISTS {OWNERS_TABLE}_claimed ON {OWNERS_TABLE} "
                                       "(claimed)")
            except Exception as error:
                await pool.close()
                raise unusable(self._url, error) from None
            self._pool = pool

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    async def _ready(self) -> asyncpg.Pool:
        if self._pool is None:
            await self.start()
        assert self._pool is not None
        return self._pool

    async def owner(self, handler_id: str) -> str | None:
        pool = await self._ready()
        return await pool.fetchval(f"SELECT client FROM {OWNERS_TABLE} WHERE handler_id = $1", handler_id)

    async def claim(self, handler_id: str, caller: Caller) -> bool:
        pool = await self._ready()
        async with pool.acquire() as conn:
            claimed = await conn.fetchval(f"INSERT INTO {OWNERS_TABLE} (handler_id, client) VALUES ($1, $2) "
                                          "ON CONFLICT (handler_id) DO NOTHING RETURNING claimed",
                                          handler_id, caller.name)
            if claimed is not None:
                await conn.execute(f"DELETE FROM {OWNERS_TABLE} WHERE claimed <= $1", claimed - self._limit)
                return True
            owner = await conn.fetchval(f"SELECT client FROM {OWNERS_TABLE} WHERE handler_id = $1", handler_id)
        return owner is None or owner == caller.name or caller.admin


# --- checks --------------------------------------------------------------------------------------------------

def asyncpg_needed() -> ModuleType:
    """The asyncpg module, or RunsDbUnusable saying how to install it."""
    try:
        import asyncpg
    except ImportError:
        raise RunsDbUnusable(f"{SETTING} is a postgresql:// URL, which needs the asyncpg driver: "
                             "pip install 'dagrag[postgres]'") from None
    return asyncpg


def password_of(url: str) -> str:
    userinfo, at, _ = url.partition("://")[2].rpartition("@")
    return userinfo.partition(":")[2] if at else ""


def unusable(url: str, error: BaseException) -> RunsDbUnusable:
    """`error` (connecting to the database, or making the owners table) as one line naming the setting, never the
    password (asyncpg's messages do not quote it; scrubbed all the same)."""
    if isinstance(error, TimeoutError | asyncio.TimeoutError):
        reason = f"no answer within {CONNECT_TIMEOUT_S:g} s"
    elif isinstance(error, OSError):
        reason = f"{type(error).__name__}: {error.strerror or error}"
    else:
        reason = str(error) or type(error).__name__
    for secret in {password_of(url), unquote(password_of(url))} - {""}:
        reason = reason.replace(secret, "***")
    return RunsDbUnusable(f"{SETTING}: cannot use the Postgres database {redact_url(url)}: {reason}")


async def probe_postgres(url: str) -> None:
    """Connect and make the owners table (the rights WorkflowServer's migrations need too); RunsDbUnusable naming the
    setting when either fails."""
    owners = PostgresRunOwners(url)
    await owners.start()
    await owners.close()


def check_runs_db(settings: Settings) -> None:
    """Before the server loads anything: a Postgres SERVE_RUNS_DB answers (a SQLite file needs no check)."""
    if is_postgres_url(settings.serve_runs_db):
        asyncio.run(probe_postgres(settings.serve_runs_db))
