"""`dagrag serve`: one process, many clients (WorkflowServer, Open WebUI retrieval, query API, health, metrics)."""

from .app import create_app
from .run import ServerConfigError, check_bind, serve
from .service import DagragService

__all__ = ["DagragService", "ServerConfigError", "check_bind", "create_app", "serve"]
