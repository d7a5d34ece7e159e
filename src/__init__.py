"""dagrag: multi-hop question answering on LlamaIndex Workflows."""

from .config import Settings
from .errors import (
    CollectionNotFoundError,
    DagragError,
    IngestError,
    InvalidQuestionError,
    QdrantUnavailableError,
)
from .work_flows.plan import ExecutedPlan, Plan, PlanOrigin
from .work_flows.query_workflow import QueryWorkflow
from .work_flows.result import QueryResult

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
