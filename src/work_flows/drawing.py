"""Pictures of the QueryWorkflow's steps and events, read from the code by llama-index-utils-workflow.

`dagrag draw` writes the interactive HTML (pyvis); `dagrag draw --mermaid` prints the Mermaid flowchart that
ARCHITECTURE.md embeds (scripts/update_architecture_diagram.py puts it there), so the picture cannot drift from
the steps.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

from .query_workflow import QueryWorkflow

# pyvis's page loads vis-network from a CDN although it copies the same file beside the page: point the page at the
# copy, so the picture opens without a network (and renders in a headless browser).
VIS_NETWORK_CDN = re.compile(r'<script src="https://cdnjs\.cloudflare\.com/[^"]*/vis-network\.min\.js"[^>]*>')
VIS_NETWORK_LOCAL = '<script src="lib/vis-9.1.2/vis-network.min.js">'
CLASS_DEFINITION = re.compile(r"^\s*classDef (\w+) ")


@contextlib.contextmanager
def working_directory(path: Path) -> Iterator[None]:
    """pyvis writes its script folder `lib/` into the current directory: make that the page's own folder."""
    previous = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(previous)


def draw_workflow_html(out: Path) -> Path:
    """The workflow's steps and events as an interactive page at `out` (plus pyvis's `lib/` beside it)."""
    from llama_index.utils.workflow import draw_all_possible_flows

    out = out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    # pyvis opens the page in a browser after writing it and prints its name: neither belongs in a command.
    with working_directory(out.parent), mock.patch("webbrowser.open"), contextlib.redirect_stdout(io.StringIO()):
        draw_all_possible_flows(QueryWorkflow, filename=out.name)
    page = out.read_text(encoding="utf-8")
    if (out.parent / "lib" / "vis-9.1.2" / "vis-network.min.js").exists():
        out.write_text(VIS_NETWORK_CDN.sub(VIS_NETWORK_LOCAL, page), encoding="utf-8")
    return out


def workflow_mermaid() -> str:
    """The workflow's steps (boxes) and events (rounded) as a Mermaid flowchart, with only the styles it uses."""
    from llama_index.utils.workflow import draw_all_possible_flows_mermaid

    lines = draw_all_possible_flows_mermaid(QueryWorkflow, filename="").splitlines()
    used = {style for line in lines if ":::" in line for style in re.findall(r":::(\w+)", line)}
    return "\n".join(line for line in lines
                     if not (match := CLASS_DEFINITION.match(line)) or match.group(1) in used)
