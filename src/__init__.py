"""dagrag: multi-hop question answering on LlamaIndex Workflows."""

from .config import Settings
from .core.errors import (
    CollectionNotFoundError,
    DagragError,
    IngestError,
    InvalidQuestionError,
    QdrantUnavailableError,
)
from .core.plan import ExecutedPlan, Plan, PlanOrigin
from .core.result import QueryResult
from .work_flows.query_workflow import QueryWorkflow

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
