"""dagrag: multi-hop question answering on LlamaIndex Workflows.

The workflow and the result types load on first use (PEP 562), so `import dagrag` and the CLI's `--help`,
`--version` and refused input do not pay for LlamaIndex, the models' runtimes and the HTTP clients.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .config import Settings
from .core.errors import (
    CollectionNotFoundError,
    DagragError,
    IngestError,
    InvalidQuestionError,
    QdrantUnavailableError,
)

if TYPE_CHECKING:
    from .core.plan import ExecutedPlan, Plan, PlanOrigin
    from .core.result import QueryResult
    from .work_flows.query_workflow import QueryWorkflow

_LAZY = {
    "ExecutedPlan": ".core.plan",
    "Plan": ".core.plan",
    "PlanOrigin": ".core.plan",
    "QueryResult": ".core.result",
    "QueryWorkflow": ".work_flows.query_workflow",
}

__all__ = [
    "CollectionNotFoundError",
    "DagragError",
    "ExecutedPlan",
    "IngestError",
    "InvalidQuestionError",
    "Plan",
    "PlanOrigin",
    "QdrantUnavailableError",
    "QueryResult",
    "QueryWorkflow",
    "Settings",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name], __name__), name)
        globals()[name] = value  # loaded once
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
