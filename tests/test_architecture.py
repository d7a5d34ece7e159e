"""Dependencies run one way: each part of `src/` imports only the parts below it, and nothing imports in a cycle.

    config
    chunking    documents -> chunks along their structure (pure text work, imports no other part)
    core        plans, results, errors, search types, text, the role Protocols
    llm         LLMClient: timeout, retries, JSON mode, the call ledger
    agents      planner, searcher, reranker, resolver, HyDE, writer, aggregator, verifier
    store       Qdrant: opening it, collections that record their embedding model
    stack       the default parts from Settings (what QueryWorkflow.from_settings runs)
    work_flows  QueryWorkflow, its events, the retrieval policy, the hop strategy (hopping/)
    server      `dagrag serve`: the HTTP app over the stack and the workflow (nothing below imports it)
    ingest, cli, testing, the package root: on top

Every import counts, including those inside functions. The parts are read from the source, not imported.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = "dagrag"

ALLOWED: dict[str, set[str]] = {
    "config": set(),
    "chunking": set(),
    "core": {"config"},
    "llm": {"core"},
    "agents": {"core", "llm"},
    "store": {"config", "core"},
    "stack": {"config", "core", "llm", "agents", "store"},
    "work_flows": {"config", "core", "llm", "agents", "stack"},
    "server": {"config", "core", "llm", "agents", "store", "stack", "work_flows"},
    "ingest": {"config", "core", "store", "chunking"},
    "cli": {"config", "core", "llm", "agents", "store", "stack", "work_flows", "ingest", "chunking", "server"},
    "testing": {"config", "core", "llm", "agents", "store", "stack", "work_flows", "ingest", "cli", "chunking",
                "server", "__init__"},
    "__init__": {"config", "core", "work_flows"},
}


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join((PACKAGE, *parts))


def part_of(module: str) -> str:
    """`dagrag.core.plan` -> "core"; `dagrag.stack` -> "stack"; `dagrag` -> "__init__"."""
    rest = module.split(".")[1:]
    return rest[0] if rest else "__init__"


def imported_modules(path: Path) -> set[str]:
    """The dagrag modules `path` imports (relative imports resolved), wherever the import statement is."""
    own = module_name(path)
    package = own if path.name == "__init__.py" else own.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.split(".")[0] == PACKAGE)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            if target.split(".")[0] != PACKAGE:
                continue
            found.add(target)
            # `from .core import plan` imports the module dagrag.core.plan
            found.update(f"{target}.{alias.name}" for alias in node.names
                         if (SRC.joinpath(*target.split(".")[1:], f"{alias.name}.py")).exists())
    return found


def import_graph() -> nx.DiGraph:
    graph = nx.DiGraph()
    for path in sorted(SRC.rglob("*.py")):
        source = module_name(path)
        graph.add_node(source)
        for target in imported_modules(path):
            if target != source:
                graph.add_edge(source, target)
    return graph


def test_the_reader_resolves_relative_imports():
    graph = import_graph()
    assert "dagrag.core.plan" in graph.successors("dagrag.agents.planner")
    assert "dagrag.stack" in graph.successors("dagrag.work_flows.query_workflow")  # inside from_settings
    assert set(graph.successors("dagrag.config")) == set()


def test_every_part_imports_only_the_parts_below_it():
    graph = import_graph()
    parts = {part_of(module) for module in graph}
    assert parts <= ALLOWED.keys(), f"parts with no place in the picture: {sorted(parts - ALLOWED.keys())}"
    wrong = sorted(
        f"{source} imports {target}" for source, target in graph.edges
        if part_of(source) != part_of(target) and part_of(target) not in ALLOWED[part_of(source)]
    )
    assert not wrong, "imports against the direction:\n" + "\n".join(wrong)


def test_no_two_parts_import_each_other():
    graph = import_graph()
    parts = nx.DiGraph((part_of(s), part_of(t)) for s, t in graph.edges if part_of(s) != part_of(t))
    assert nx.is_directed_acyclic_graph(parts), f"cycle between parts: {nx.find_cycle(parts)}"


def test_no_module_imports_itself_through_others():
    graph = import_graph()
    cycles = list(nx.simple_cycles(graph))
    assert not cycles, f"import cycles: {cycles[:3]}"


HOPPING = "dagrag.work_flows.hopping"


def in_hopping(module: str) -> bool:
    return module == HOPPING or module.startswith(f"{HOPPING}.")


def test_hop_logic_is_reached_through_its_package_face_only():
    """One home for how a run hops: the workflow and the report import `dagrag.work_flows.hopping` (the
    `HopStrategy` interface and what it hands back), never the modules behind it."""
    graph = import_graph()
    reaching_in = sorted(f"{source} imports {target}" for source, target in graph.edges
                         if not in_hopping(source) and in_hopping(target) and target != HOPPING)
    assert not reaching_in, "\n".join(reaching_in)
    assert HOPPING in graph.successors("dagrag.work_flows.query_workflow")


def test_the_hop_strategy_reads_the_run_and_the_policy_and_nothing_that_runs_it():
    graph = import_graph()
    # evidence: the turn order passages bid for the budget in (pure functions over domain types), which a hop may
    # reorder (hopping/skip.py, rule 3).
    below = {"dagrag.work_flows.policy", "dagrag.work_flows.run", "dagrag.work_flows.evidence"}
    upward = sorted(f"{source} imports {target}" for source, target in graph.edges
                    if in_hopping(source) and target.startswith("dagrag.work_flows.") and not in_hopping(target)
                    and target not in below)
    assert not upward, "\n".join(upward)


def _word_lists(path: Path) -> list[tuple[int, list[str]]]:
    """The string literals of a module that are lists of lower-case words (ten or more), with their lines."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            words = node.value.split()
            if len(words) >= 10 and all(w.isalpha() and w.islower() for w in words):
                found.append((node.lineno, words))
    return found


def test_the_english_word_lists_live_in_the_language_module_only():
    """Stopwords and the other words a rule reads are a `Language`'s (core/language.py), passed in: a list of mostly
    English stopwords anywhere else would be a second, fixed English."""
    from dagrag.core.language import ENGLISH

    home = SRC / "core" / "language.py"
    assert any(len(set(words) & ENGLISH.stopwords) >= 100 for _, words in _word_lists(home))
    elsewhere = [f"{path.relative_to(SRC)}:{line}" for path in sorted(SRC.rglob("*.py")) if path != home
                 for line, words in _word_lists(path)
                 if sum(w in ENGLISH.stopwords for w in words) * 4 >= len(words) * 3]
    assert not elsewhere, f"English word lists outside core/language.py: {elsewhere}"
