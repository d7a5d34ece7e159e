"""`GET /openapi.json`: one OpenAPI document for dagrag's routes and the WorkflowServer's beside them.

WorkflowServer describes its own routes (`openapi_schema()`); dagrag's are described here from the same pydantic
models that check their bodies (`SearchBody`, `QueryBody`) and build their answers (`QueryResult`), so the schema
cannot drift from what the routes accept and return. Behind the key, like every route but `/health`.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

from llama_agents.server import WorkflowServer
from pydantic import BaseModel

from ..core.result import QueryResult
from .schemas import QueryBody, SearchBody

REF = "#/components/schemas/{model}"
PROBLEM = {"type": "object", "properties": {"detail": {"type": "string"}, "field": {"type": "string"}},
           "required": ["detail"]}
# One server-sent event: its name (PlanChosen, LayerStarted, ..., result, error) and its JSON data, as text.
SSE_EVENT = {"type": "object", "required": ["event", "data"],
             "properties": {"event": {"type": "string"}, "data": {"type": "string"}, "id": {"type": "string"}}}
SEARCH_ANSWER = {
    "type": "object", "required": ["documents", "metadatas", "distances"],
    "description": "Open WebUI's external retrieval answer: per query, the passages, their metadata and distances.",
    "properties": {"documents": {"type": "array", "items": {"type": "array", "items": {"type": "string"}}},
                   "metadatas": {"type": "array", "items": {"type": "array", "items": {"type": "object"}}},
                   "distances": {"type": "array", "items": {"type": "array", "items": {"type": "number"}}}}}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": REF.format(model=name)}


def _body(name: str) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": _ref(name)}}}


def _errors(*statuses: int) -> dict[str, Any]:
    meaning = {400: "malformed JSON", 401: "missing or wrong API key", 404: "not found", 413: "body too large",
               415: "body not sent as application/json", 422: "a field is missing, unknown or wrong (named in `field`)",
               429: "every run slot is busy and the queue full; see Retry-After",
               503: "the vector store is unavailable"}
    return {str(status): _json(_ref("Problem"), meaning[status]) for status in statuses}


def _dagrag_paths() -> dict[str, Any]:
    keyed = [{"bearer": []}]
    run_errors = _errors(400, 401, 413, 415, 422, 429, 503)
    return {
        "/health": {"get": {"summary": "Liveness", "security": [], "responses": {"200": _json(
            {"type": "object", "properties": {"status": {"type": "string"}}}, "the process answers")}}},
        "/health/ready": {"get": {"summary": "Readiness: the store answers and the collection exists",
                                  "security": keyed, "responses": {
                                      "200": _json({"type": "object"}, "ready"), "503": _json({"type": "object"},
                                                                                              "not ready, and why"),
                                      **_errors(401)}}},
        "/metrics": {"get": {"summary": "Prometheus metrics", "security": keyed, "responses": {
            "200": {"description": "Prometheus text format", "content": {"text/plain": {"schema": {"type": "string"}}}},
            **_errors(401)}}},
        "/search": {"post": {"summary": "Retrieval only (Open WebUI's external retrieval)", "security": keyed,
                             "requestBody": _body("SearchBody"),
                             "responses": {"200": _json(_ref("SearchAnswer"), "passages per query"),
                                           **run_errors, **_errors(404)}}},
        "/query": {"post": {"summary": "Answer a question: plan, search, write, verify", "security": keyed,
                            "requestBody": _body("QueryBody"),
                            "responses": {"200": _json(_ref("QueryResult"), "the answer and everything behind it"),
                                          **run_errors}}},
        "/query/stream": {"post": {"summary": "Answer a question, with progress as server-sent events",
                                   "security": keyed, "requestBody": _body("QueryBody"),
                                   "responses": {"200": {"description": "progress events, then `result` (a "
                                                                        "QueryResult) or `error`",
                                                         "content": {"text/event-stream": {"schema": SSE_EVENT}}},
                                                 **run_errors}}},
        "/openapi.json": {"get": {"summary": "This document", "security": keyed, "responses": {
            "200": _json({"type": "object"}, "OpenAPI 3.1"), **_errors(401)}}},
    }


def _add_model(schemas: dict[str, Any], model: type[BaseModel]) -> None:
    schema = model.model_json_schema(ref_template=REF)
    schemas.update(schema.pop("$defs", {}))
    schemas[model.__name__] = schema


def _package_version() -> str:
    try:
        return version("dagrag")
    except PackageNotFoundError:
        return "unknown"


def openapi_document(workflow_server: WorkflowServer) -> dict[str, Any]:
    """The whole server's OpenAPI document: WorkflowServer's paths and components, dagrag's beside them."""
    document = workflow_server.openapi_schema()
    for operations in document.get("paths", {}).values():
        for operation in operations.values():
            body = operation.get("requestBody") if isinstance(operation, dict) else None
            if isinstance(body, dict) and "content" not in body:  # WorkflowServer's GETs declare a body of nothing,
                del operation["requestBody"]                      # which OpenAPI forbids: there is no body at all
    envelope = document.get("components", {}).get("schemas", {}).get("EventEnvelopeWithMetadata", {})
    types = envelope.get("properties", {}).get("types")
    if isinstance(types, dict) and types.get("type") == "array":  # WorkflowServer sends `"types": null` for a result
        envelope["properties"]["types"] = {"anyOf": [types, {"type": "null"}]}
    document["openapi"] = "3.1.0"  # pydantic's schemas are JSON Schema 2020-12, which OpenAPI 3.1 speaks
    document["info"] = {"title": "dagrag", "version": _package_version(),
                        "description": "Multi-hop question answering: dagrag's routes, and LlamaIndex's "
                                       "WorkflowServer running the QueryWorkflow as `dagrag`."}
    components = document.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    for model in (SearchBody, QueryBody, QueryResult):
        _add_model(schemas, model)
    schemas["Problem"], schemas["SearchAnswer"] = PROBLEM, SEARCH_ANSWER
    components.setdefault("securitySchemes", {})["bearer"] = {"type": "http", "scheme": "bearer"}
    document["security"] = [{"bearer": []}]
    document.setdefault("paths", {}).update(_dagrag_paths())
    return document
