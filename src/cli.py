"""`dagrag ingest PATH`, `dagrag query "question" [--json | --mermaid]`, `dagrag serve [--host] [--port]` and
`dagrag draw [--out FILE] [--mermaid]`."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import textwrap
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from .config import Settings, settings_problems
from .core.errors import DagragError
from .core.inputs import check_question
from .core.store_location import check_store_exists

if TYPE_CHECKING:
    from .core.result import QueryResult

# The workflow, the models and the store load inside the commands that need them: `--help`, `--version` and
# refused input answer at once.

SKIPPED_SHOWN = 20  # files named one by one when a folder's ingest skips some
INGESTED_WITH_SKIPS = 3  # exit status of an ingest that wrote what it could read but skipped some files
console = Console(stderr=True)
out = Console()


def _settings(args: argparse.Namespace) -> Settings:
    overrides = {}
    if getattr(args, "collection", None):
        overrides["collection"] = args.collection
    if getattr(args, "no_dag", False):
        overrides["planner_enable_dag"] = False
    if getattr(args, "no_bridge", False):
        overrides["planner_bridge"] = False
    return Settings(**overrides)


def cmd_ingest(args: argparse.Namespace) -> int:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from .core.errors import IngestError
    from .ingest import SizeLimits, ingest_nodes, read_documents
    from .stack import build_embed_model

    settings = _settings(args)
    read = read_documents(Path(args.path), limits=SizeLimits.from_settings(settings))
    nodes = read.nodes
    console.print(f"[bold]{len(nodes)}[/] passages read from {read.files_read} file(s) in {escape(args.path)}",
                  soft_wrap=True)
    if read.skipped:
        console.print(f"[yellow]skipped {len(read.skipped)} file(s):[/]")
        for skipped in read.skipped[:SKIPPED_SHOWN]:
            console.print(f"  {escape(str(skipped.path))}: {escape(skipped.reason)}", highlight=False, soft_wrap=True)
        if len(read.skipped) > SKIPPED_SHOWN:
            console.print(f"  … and {len(read.skipped) - SKIPPED_SHOWN} more")
        if args.strict:
            raise IngestError(f"{args.path}: {len(read.skipped)} file(s) would be skipped, and --strict refuses the "
                              "folder; nothing was written")
    embed_model = build_embed_model(settings.embed_model, settings.embed_batch_size)
    # The rate and the time left: at a few dozen passages a second on a laptop, a big folder takes a while.
    with Progress(TextColumn("embedding + writing"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(),
                  console=console) as progress:
        task = progress.add_task("ingest", total=len(nodes), rate="")

        def advance(count: int) -> None:
            progress.advance(task, count)
            speed = progress.tasks[task].speed
            progress.update(task, rate=f"{speed:.0f} passages/s" if speed else "")

        report = ingest_nodes(settings, nodes, embed_model, progress=advance, replace=args.replace)
        progress.update(task, completed=len(nodes))
    console.print(
        f"collection [bold]{report.collection}[/] at {settings.qdrant_location()}: "
        f"{report.added} added, {report.already_present} already present"
        f"{f', {report.removed} replaced chunks removed' if args.replace else ''} ({report.seconds:.1f} s)",
        soft_wrap=True)
    return INGESTED_WITH_SKIPS if read.skipped else 0


async def _run_query(settings: Settings, question: str, show_progress: bool) -> QueryResult:
    from .work_flows.events import LayerStarted, SubqueryDone
    from .work_flows.progress import HopAdded, LLMProgress, PlanChosen
    from .work_flows.query_workflow import QueryWorkflow

    workflow = QueryWorkflow.from_settings(settings)
    handler = workflow.run(query=question)
    async for event in handler.stream_events():
        if not show_progress:
            continue
        if isinstance(event, PlanChosen):
            console.print(f"[dim]plan ready: {len(event.subqueries)} subqueries "
                          f"in {len(event.layers)} layer(s) ({event.origin})[/]")
        elif isinstance(event, HopAdded):
            console.print(f"[dim]hop added: {event.subquery.id} = {escape(event.subquery.text)}[/]")
        elif isinstance(event, LayerStarted):
            console.print(f"[dim]layer {event.layer_index}: searching {', '.join(event.subquery_ids)}[/]")
        elif isinstance(event, SubqueryDone):
            found = f" → {event.best_title}" if event.best_title else ""  # a skipped or failed one found nothing
            console.print(f"[dim]  {event.subquery_id} {event.status}{found}[/]")
        elif isinstance(event, LLMProgress) and event.done:  # one line a call, not one a progress tick
            outcome = f"{event.tokens} tokens in" if event.ok else f"attempt {event.attempt} failed after"
            console.print(f"[dim]LLM {event.agent}: {outcome} {event.seconds:.1f} s[/]")
    return await handler


def render(result: QueryResult) -> None:
    from .core.sources import source_location, source_title

    # What documents say is text, never console markup: "[report]" in a config example is not a style tag.
    out.print(Panel(Text(result.answer), title="Answer", title_align="left", border_style="green"))
    plan = Tree(f"[bold]Plan[/] ({result.plan.origin.value}, {result.path} path)")
    reports = {r.id: r for r in result.subqueries}
    by_id = {sq.id: sq for sq in result.plan.subqueries}
    for index, layer in enumerate(result.plan.layers):
        branch = plan.add(f"layer {index}")
        for sq_id in layer:
            report = reports.get(sq_id)
            status = report.status if report else "not run"
            parents = f" ← {', '.join(by_id[sq_id].parents)}" if by_id[sq_id].parents else ""
            score = f" best={report.best_score:.3f}" if report and report.best_score is not None else ""
            tries = f" tries={report.attempts}" if report and report.attempts > 1 else ""
            line = branch.add(f"{sq_id}: {escape(by_id[sq_id].text)}{parents}  {escape(f'[{status}{score}{tries}]')}")
            if report and report.searched_as and report.searched_as != by_id[sq_id].text:
                line.add(f"[dim]searched as: {escape(report.searched_as)}[/]")
    if result.backtracked_subqueries:
        plan.add(f"[yellow]re-searched after verification:[/] {', '.join(result.backtracked_subqueries)}")
    if result.partial:
        plan.add(f"[red]partial result:[/] {escape(result.partial_reason or '')}")
    if result.abstained:
        plan.add(f"[yellow]abstained:[/] {escape(result.abstain_reason or '')}")
    for note in result.plan.notes:
        plan.add(f"[yellow]note:[/] {escape(note)}")
    out.print(plan)

    sources = Table(title="Sources", title_justify="left")
    located = any(source_location(source) for source in result.sources)
    for column in ("#", "subquery", "rank", "score", "title > section", *(["where"] if located else []), "passage"):
        sources.add_column(column, overflow="fold")
    for n, source in enumerate(result.sources, start=1):
        where = [escape(source_location(source))] if located else []
        sources.add_row(str(n), ",".join(source.subquery_ids), str(source.rank_in_subquery), f"{source.score:.3f}",
                        escape(source_title(source)), *where, Text(textwrap.shorten(source.text, 160, placeholder="…")))
    out.print(sources)

    features = result.retrieval_confidence_features
    out.print(f"[bold]Coverage[/] {int(features.get('covered_count', 0))}/{int(features.get('subquery_count', 0))} "
              f"subqueries (ratio {features.get('coverage_ratio', 0):.2f}) · confidence "
              f"[bold]{result.retrieval_confidence}[/]")
    verification = Table(title=f"Verification ({result.verification.method})", title_justify="left")
    for column in ("sentence", "supported", "by"):
        verification.add_column(column, overflow="fold")
    for check in result.verification.sentences:
        mark = "[green]yes[/]" if check.supported else f"[red]no[/] {escape(check.reason or '')}"
        by = f"[{check.supporting_source}]" if check.supporting_source else ""
        verification.add_row(Text(check.sentence), mark, Text(by))
    out.print(verification)
    timings = ", ".join(f"{k} {v:.2f}" for k, v in result.timings.items() if not k.startswith("layer_"))
    out.print(f"[dim]timings (s): {timings} · LLM calls: {result.llm_calls.count}[/]")
    for degradation in result.degradations:
        out.print(f"[yellow]degraded:[/] {degradation.agent}: {escape(degradation.reason)} → "
                  f"{escape(degradation.fallback)}")


def cmd_query(args: argparse.Namespace) -> int:
    settings = _settings(args)
    check_question(args.question, settings.max_question_chars)  # before the store and the models
    check_store_exists(settings)
    result = asyncio.run(_run_query(settings, args.question, show_progress=not (args.json or args.mermaid)))
    if args.json:
        print(json.dumps(result.model_dump(mode="json"), indent=2, ensure_ascii=False))
    elif args.mermaid:
        print(result.mermaid())
    else:
        render(result)
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from .server import serve

    serve(_settings(args), host=args.host, port=args.port)
    return 0


def cmd_draw(args: argparse.Namespace) -> int:
    from .work_flows.drawing import draw_workflow_html, workflow_mermaid

    if args.mermaid:
        print(workflow_mermaid())
        return 0
    path = draw_workflow_html(Path(args.out))
    console.print(f"the workflow's steps and events: {path}")
    return 0


def _version() -> str:
    try:
        return version("dagrag")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dagrag", description="Multi-hop question answering over a Qdrant collection.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", required=True)
    ingest = commands.add_parser(
        "ingest", help="add documents to the collection: a JSONL file, a document, or a folder of them "
        "(.md, .markdown, .rst, .rest, .txt, .html, .htm, .pdf, .jsonl); files of other types, unreadable ones and "
        "ones over DAGRAG_INGEST_MAX_FILE_MB are skipped and named, and the exit status is then 3 (--strict: refused)")
    ingest.add_argument("path")
    ingest.add_argument("--collection", help="collection name (default: DAGRAG_COLLECTION or 'dagrag')")
    ingest.add_argument("--strict", action="store_true",
                        help="refuse the folder, writing nothing, if any file in it would be skipped")
    ingest.add_argument("--replace", action="store_true",
                        help="the documents read are now the whole text of their files: delete the chunks of those "
                        "files (by their path inside PATH) that they no longer hold, so edited text is not cited")
    ingest.set_defaults(func=cmd_ingest)
    query = commands.add_parser("query", help="answer a question")
    query.add_argument("question")
    printed = query.add_mutually_exclusive_group()
    printed.add_argument("--json", action="store_true", help="print the QueryResult as JSON")
    printed.add_argument("--mermaid", action="store_true", help="print the executed plan as a Mermaid flowchart")
    query.add_argument("--collection", help="collection name")
    query.add_argument("--no-dag", action="store_true", help="the single-query baseline path")
    query.add_argument("--no-bridge", action="store_true",
                       help="split comparisons only; search every other question once (DAGRAG_PLANNER_BRIDGE=false)")
    query.set_defaults(func=cmd_query)
    serve = commands.add_parser("serve", help="serve the HTTP API (WorkflowServer, /search, /query, /health, /metrics)")
    serve.add_argument("--host", help="address to bind (default: DAGRAG_SERVE_HOST or 127.0.0.1; "
                       "any other than loopback needs DAGRAG_API_KEY)")
    serve.add_argument("--port", type=int, help="port (default: DAGRAG_SERVE_PORT or 8000)")
    serve.add_argument("--collection", help="collection name")
    serve.set_defaults(func=cmd_serve)
    draw = commands.add_parser("draw", help="draw the workflow's steps and events (HTML, or Mermaid for docs)")
    draw.add_argument("--out", default="dagrag_workflow.html", help="the HTML file to write (default: %(default)s)")
    draw.add_argument("--mermaid", action="store_true", help="print the workflow as a Mermaid flowchart instead")
    draw.set_defaults(func=cmd_draw)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ValidationError as error:  # the settings, from DAGRAG_* variables or .env
        text = settings_problems(error) if error.title == "Settings" else str(error)
        console.print(f"[red]error:[/] {escape(text)}", soft_wrap=True, highlight=False)
        return 2
    except DagragError as error:
        console.print(f"[red]error:[/] {escape(str(error))}", soft_wrap=True, highlight=False)
        return 2


if __name__ == "__main__":
    sys.exit(main())
