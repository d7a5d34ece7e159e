"""Write the workflow's Mermaid flowchart (`dagrag draw --mermaid`, read from the code) into ARCHITECTURE.md.

    .venv/bin/python scripts/update_architecture_diagram.py

tests/test_diagram.py fails when the picture in ARCHITECTURE.md no longer matches the code.
"""

from __future__ import annotations

from pathlib import Path

from dagrag.work_flows.drawing import workflow_mermaid

ARCHITECTURE = Path(__file__).resolve().parent.parent / "ARCHITECTURE.md"
START, END = "<!-- workflow-mermaid:start (scripts/update_architecture_diagram.py) -->", "<!-- workflow-mermaid:end -->"


def with_diagram(document: str, mermaid: str) -> str:
    """The document with the block between the markers replaced by `mermaid` (markers must be present)."""
    before, rest = document.split(START, 1)
    _, after = rest.split(END, 1)
    return f"{before}{START}\n```mermaid\n{mermaid}\n```\n{END}{after}"


def main() -> None:
    ARCHITECTURE.write_text(with_diagram(ARCHITECTURE.read_text(encoding="utf-8"), workflow_mermaid()),
                            encoding="utf-8")


if __name__ == "__main__":
    main()
