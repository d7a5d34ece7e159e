"""An executed plan drawn as a Mermaid flowchart: subqueries as nodes, parent links as edges, layers as ranks.

Pure text work over plain records, so it imports nothing of dagrag: `QueryResult.mermaid()` builds the records
from a result, and the Open WebUI pipe (integrations/open_webui, which cannot import dagrag) carries a copy of
these rules over the result's JSON; a test holds the two to the same text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MAX_LABEL_TEXT = 60  # characters of a subquery's text in its box; the full text is in the result
# Mermaid wraps a label at 200 px; a subquery reads better in wider boxes (GitHub and Open WebUI honour this).
WIDER_LABELS = '%%{init: {"flowchart": {"wrappingWidth": 380}}}%%'
STATUS_STYLES = {  # fill and border per subquery status: green found, amber weak, red failed, grey not run
    "covered": "fill:#dff5e1,stroke:#2e7d32,color:#1b1b1b",
    "uncovered": "fill:#fff4d6,stroke:#b7791f,color:#1b1b1b",
    "failed": "fill:#fde2e1,stroke:#c62828,color:#1b1b1b",
    "skipped": "fill:#eeeeee,stroke:#757575,color:#1b1b1b",
    "not_run": "fill:#eeeeee,stroke:#757575,color:#1b1b1b,stroke-dasharray:4 3",
}


@dataclass(frozen=True)
class DagNode:
    """One subquery as the picture shows it."""

    id: str
    text: str
    parents: list[str] = field(default_factory=list)
    status: str = "not_run"
    best_title: str | None = None
    best_score: float | None = None
    searched_as: str | None = None


def mermaid_label_text(text: str, max_chars: int = MAX_LABEL_TEXT) -> str:
    """Text safe inside a quoted Mermaid label: one line, cut at a word, and every character Mermaid would read
    as markup (quotes, angle brackets, backticks, `#` entities) written as an entity code."""
    flat = " ".join(text.split())
    if len(flat) > max_chars:
        cut = flat[: max_chars - 1]
        space = cut.rfind(" ")
        flat = (cut[:space] if space > max_chars // 2 else cut).rstrip() + "…"
    escaped = flat.replace("#", "#35;")  # first: the entities below start with '#'
    for char, code in (('"', "#quot;"), ("<", "#lt;"), (">", "#gt;"), ("`", "#96;")):
        escaped = escaped.replace(char, code)
    return escaped


def mermaid_node_ids(subquery_ids: list[str]) -> dict[str, str]:
    """A Mermaid id per subquery id: `sq_` + the id's word characters (a plan's ids are free text, and `end`
    alone would close a subgraph), numbered when two would collide."""
    taken: set[str] = set()
    ids: dict[str, str] = {}
    for sq_id in subquery_ids:
        base = "sq_" + re.sub(r"\W", "_", sq_id)
        node_id, n = base, 2
        while node_id in taken:
            node_id, n = f"{base}_{n}", n + 1
        taken.add(node_id)
        ids[sq_id] = node_id
    return ids


def node_label(node: DagNode) -> str:
    lines = [f"<b>{mermaid_label_text(node.id, 20)}</b>: {mermaid_label_text(node.text)}"]
    if node.searched_as and node.searched_as != node.text:
        lines.append(f"<i>searched as: {mermaid_label_text(node.searched_as)}</i>")
    outcome = node.status.replace("_", " ")
    if node.best_title:
        outcome += f" → {mermaid_label_text(node.best_title, 40)}"
    if node.best_score is not None:
        outcome += f" ({node.best_score:.3f})"
    lines.append(outcome)
    return "<br/>".join(lines)


def plan_mermaid(nodes: list[DagNode], layers: list[list[str]]) -> str:
    """The flowchart: one subgraph per layer, top to bottom, each subquery a box coloured by its status, an edge
    from each parent to its child."""
    ids = mermaid_node_ids([node.id for node in nodes])
    by_id = {node.id: node for node in nodes}
    lines = [WIDER_LABELS, "flowchart TB"]
    placed: set[str] = set()
    for index, layer in enumerate(layers):
        lines.append(f'    subgraph layer_{index}["layer {index}"]')
        lines.append("        direction LR")  # a layer's subqueries run side by side: draw them so
        for sq_id in layer:
            if sq_id in by_id and sq_id not in placed:
                placed.add(sq_id)
                node = by_id[sq_id]
                lines.append(f'        {ids[sq_id]}["{node_label(node)}"]:::{node.status}')
        lines.append("    end")
    for node in nodes:  # a plan without layers (no retrieval) still shows its subqueries
        if node.id not in placed:
            lines.append(f'    {ids[node.id]}["{node_label(node)}"]:::{node.status}')
    for node in nodes:
        for parent in node.parents:
            if parent in ids:
                lines.append(f"    {ids[parent]} --> {ids[node.id]}")
    used = {node.status for node in nodes}
    lines += [f"    classDef {status} {style}" for status, style in STATUS_STYLES.items() if status in used]
    return "\n".join(lines)
