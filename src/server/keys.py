"""Who is calling, and whose runs they may see: named API keys and the owners of WorkflowServer runs.

`DAGRAG_API_KEYS="alice=KEY1,bob=KEY2"` gives each client its own key. Every request is attributed to its key's
name (the access log, a metrics label), and a WorkflowServer run started with one key is visible and controllable
only with that key: `/handlers` lists the caller's own runs, and another client's run is "not found" at
`/handlers/{id}`, `/results/{id}` and `/events/{id}`. Names in `DAGRAG_API_ADMINS`, and the holder of the single
`DAGRAG_API_KEY` (named `admin`), see and control every run. Keys are compared in constant time and never logged.
Who owns which run is kept beside the runs (`runs_db.RunOwners`).
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass

from ..config import Settings, named_api_keys

ADMIN = "admin"  # the name the single DAGRAG_API_KEY's holder is attributed to


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
