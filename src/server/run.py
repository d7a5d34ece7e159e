"""Starting the server: the bind check (no key, no network), JSON logs, uvicorn."""

from __future__ import annotations

import ipaddress
import logging
import sys

from ..config import Settings
from ..core.errors import DagragError


class ServerConfigError(DagragError, ValueError):
    """The server would start unsafely (a non-loopback address without DAGRAG_API_KEY)."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name other than localhost may resolve to anything


def check_bind(host: str, settings: Settings) -> None:
    """Refuse to serve beyond this machine without a key: every route would be open to the network."""
    keyless = settings.api_key is None and settings.api_keys is None
    if keyless and not is_loopback(host):
        raise ServerConfigError(
            f"refusing to listen on {host} without an API key: set DAGRAG_API_KEY or DAGRAG_API_KEYS (clients then "
            "send 'Authorization: Bearer <key>'), or bind 127.0.0.1")
    if keyless and "*" in settings.serve_cors_origins:
        # Without a key, any web page the user opens could query this server and read the answers.
        raise ServerConfigError("refusing DAGRAG_SERVE_CORS_ORIGINS=* without DAGRAG_API_KEY: name the origins "
                                "that may call the server, or set a key")


def configure_logging() -> None:
    """One JSON line per request on stderr (the access log); uvicorn's own access log is off."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    access = logging.getLogger("dagrag.server.access")
    access.handlers[:] = [handler]
    access.setLevel(logging.INFO)
    access.propagate = False
    logging.getLogger("dagrag.server").setLevel(logging.INFO)


def serve(settings: Settings, host: str | None = None, port: int | None = None) -> None:
    """Build the stack (models, Qdrant) and serve until interrupted."""
    import uvicorn

    from .app import create_app
    from .runs_db import check_runs_db
    from .service import DagragService

    host = host or settings.serve_host
    port = settings.serve_port if port is None else port
    check_bind(host, settings)  # before loading anything: a refusal should be instant
    check_runs_db(settings)  # a Postgres SERVE_RUNS_DB that cannot be used: one line naming it
    service = DagragService.from_settings(settings)
    configure_logging()  # only once the server will start: a refused start leaves the caller's logging as it was
    uvicorn.run(create_app(service), host=host, port=port, access_log=False, log_level="info",
                timeout_graceful_shutdown=10)
