"""docs/benchmarks.md, written from the result files in experiments/results/: no number on that page is typed by hand.

    .venv/bin/python experiments/benchmarks_doc.py           # (re)write docs/benchmarks.md
    .venv/bin/python experiments/benchmarks_doc.py --check   # exit 1 when docs/benchmarks.md differs from the files

Each section renders one result file (or folder) and is left out when it is missing: every set at budgets 4 and 2
(experiments/all_sets.py's tables and pictures), HotpotQA's whole dev set (hotpotqa-k4/, hotpotqa-k2/), the
feature ablation (ablation-k2/), latency and cost (bench.json), today's dag timed against an earlier commit's
(latency-ab.json), chunking (ingest-bench.json), the rerank sweeps (rerank-sweep*.json) and the real-LLM pictures.
The words around the tables are fixed; the numbers, the commands and the settings a file records are read from it.
tests/test_benchmarks_doc.py fails when the committed page differs from what this script writes, so CI runs the
check; `experiments/all_sets.py table` rewrites the page too.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import all_sets
import scale_bench

ROOT = all_sets.ROOT
RESULTS = ROOT / "experiments" / "results"
DOC = ROOT / "docs" / "benchmarks.md"
PYTHON = ".venv/bin/python"
SCALE_FILE = "bench-scale.json"  # experiments/bench.py --only scale's own run, which stands in for bench.json's scale

# The ablation's folders under ablation-k2/, in the order each adds a feature, with what each ran.
ABLATION = (
    ("no-bridge", "comparisons split, other questions one search (dense)",
     "PLANNER_BRIDGE=false SUBQUERY_MAX_ITERS=0 HYBRID=false"),
    ("bridge", "+ bridge hops", "PLANNER_BRIDGE=true SUBQUERY_MAX_ITERS=0 HYBRID=false"),
    ("bridge-no-title-prior", "+ bridge hops, no title prior",
     "PLANNER_BRIDGE=true SUBQUERY_MAX_ITERS=0 HYBRID=false BRIDGE_TITLE_BOOST=0"),
    ("bridge-critic", "+ bridge hops + critic, one retry", "PLANNER_BRIDGE=true SUBQUERY_MAX_ITERS=1 HYBRID=false"),
    ("bridge-critic-hybrid", "+ bridge hops + critic + hybrid BM25/RRF", "PLANNER_BRIDGE=true SUBQUERY_MAX_ITERS=1 "
     "HYBRID=true"),
    ("bridge-critic-hybrid-no-title-prior", "the same without the title prior",
     "PLANNER_BRIDGE=true SUBQUERY_MAX_ITERS=1 HYBRID=true BRIDGE_TITLE_BOOST=0"),
)
# bench.json: the detail section that explains each key, and a short name for it.
BENCH_KEYS = {
    "layer_speedup_network": ("network", "a layer against network-bound models: chain ÷ layer"),
    "layer_cpu_efficiency": ("cpu", "a layer with the local models: its wall time ÷ its batched stages timed alone"),
    "layer_cpu_speedup": ("cpu", "a layer with the local models: chain ÷ layer"),
    "orchestration_overhead_ms": ("orchestration", "the workflow's own CPU per query, every model at zero cost"),
    "ingest_vs_encoder": ("ingest", "ingest throughput ÷ the raw encoder's on the same passages"),
    "reingest_unchanged_s": ("ingest", "ingesting the same passages again"),
    "e2e_p50_s": ("e2e", "one whole offline query, median"),
    "e2e_p95_s": ("e2e", "one whole offline query, 95th percentile"),
    "peak_rss_mb": ("e2e", "peak memory of that query process"),
    "qdrant_p50_ms": ("scale", "embedded Qdrant, one dense query, by collection size"),
    "scale_layer_ms": ("scale", "the fastest search backend keeping recall@10 ≥ 0.98, a layer of 4, largest size"),
    "peer_subq": ("peer", "dagrag ÷ LlamaIndex's SubQuestionQueryEngine on one many-part question"),
}


def link(path: Path) -> str:
    """A path as a link relative to docs/."""
    return os.path.relpath(path, DOC.parent).replace(os.sep, "/")


def show(value: Any) -> str:
    """A value as a result file holds it: no rounding beyond what the file recorded."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.0f}" if abs(value) >= 1e5 else f"{value:g}"
    if isinstance(value, dict):
        return ", ".join(f"{key}: {show(item)}" for key, item in value.items())
    if isinstance(value, list):
        return ", ".join(show(item) for item in value)
    return str(value)


def load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def result(name: str) -> Any | None:
    """experiments/results/`name` read, or None when the file is not there (its section is then left out)."""
    path = RESULTS / name
    return load(path) if path.exists() else None


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def picture(path: Path, alt: str) -> str:
    return f"![{alt}]({link(path)})\n\n" if path.exists() else ""


SIGNIFICANT = 0.05  # the sign test's p under which a split of questions won and lost is called beyond chance

INTRO = """\
# Benchmarks

<!-- Generated by experiments/benchmarks_doc.py from experiments/results/; do not edit by hand. -->

Every number on this page is read from a file in [experiments/results/](../experiments/results/) by
`experiments/benchmarks_doc.py`; each section names the command that makes its file again and the settings (and,
where the file records it, the commit) it ran with. Unless a section says otherwise, everything ran offline on
the reference machine (bench.json below records its cores): no LLM, so the rule planner plans, the extractive
writer answers with cited source sentences and the offline verifier checks them; embeddings all-MiniLM-L6-v2,
reranker ms-marco-MiniLM-L-12-v2, hybrid dense + BM25 search. `single` is the same workflow with one search
for the whole question (`--no-dag`), `dag` is dagrag's plan; both hand the writer the same number of passages
(the *budget*). To run the same comparison on your own questions, see [eval.md](eval.md).
"""


def beyond_chance(records: list[dict]) -> str:
    """The sentence that says on which sets and budgets dag loses to single on more questions than chance would give
    (joint recall or recall, two-sided sign test p < SIGNIFICANT); "" when no result file pairs the systems."""
    if not any("against_single" in r["systems"]["dag"] for r in records):
        return ""
    losing = []
    for r in records:
        against = r["systems"]["dag"].get("against_single", {})
        split = [f"{label} {all_sets.won_lost(against[metric])}" for metric, label in
                 (("joint_recall", "joint recall"), ("recall", "recall")) if metric in against
                 and against[metric]["lost"] > against[metric]["won"] and against[metric]["p"] < SIGNIFICANT]
        if split:
            losing.append(f"{all_sets.BY_NAME[r['set']].description} at budget {r['budget']} ({', '.join(split)})")
    if not losing:
        return (" Question by question, none of these losses is beyond chance: on no set does dag lose more questions "
                f"than it wins with a sign test's p under {SIGNIFICANT}, in joint recall or in recall.")
    return (" Question by question, dag loses more questions than it wins, with a sign test's p under "
            f"{SIGNIFICANT}, on {'; '.join(losing)}; the other differences are within chance.")


def all_sets_section() -> str:
    records = all_sets.records()
    if not records:
        return ""
    trailing = [f"{all_sets.BY_NAME[r['set']].description} at budget {r['budget']}" for r in records
                if r["systems"]["dag"]["joint_recall"] < r["systems"]["single"]["joint_recall"]]
    chance = beyond_chance(records)
    behind = ("dag trails one search on " + "; ".join(trailing) + "." + chance + " Where dag trails, its hops "
              "usually took slots from passages one search had already found: for collections of single-page lookups, "
              "`--no-bridge` (`DAGRAG_PLANNER_BRIDGE=false`: comparisons still split) or `--no-dag` can be the "
              "better setting (below)." if trailing
              else "dag finds at least what one search finds on every set and budget.")
    sets = all_sets.RESULTS
    wiki = [s.description for s in all_sets.SETS if s.corpus is None]
    docs = [s.name for s in all_sets.SETS if s.corpus is not None]
    budgets = " and ".join(str(b) for b in all_sets.BUDGETS)
    pooled_rows = all_sets.pooled_table()
    pooled = ("\n\nPooled, question by question (a question counts where dag's joint recall or recall is above or "
              "below single's on it; ties are left out):\n\n" + pooled_rows) if pooled_rows else ""
    return f"""\
## Every benchmark set, dag against single

Every set at budgets {budgets} ({len(all_sets.SETS)} sets). Question-answering benchmarks over Wikipedia paragraphs
({", ".join(wiki)}; every question's paragraphs pooled into one collection), and the documentation of other
projects ({", ".join(docs)}), copied from their sdists (`experiments/data/docs_corpus/*/SOURCE.md`), with questions
and their exact evidence quotes written before any rule was tuned on them; {all_sets.HELD_OUT}'s set was held out
from all tuning. *Recall* is the share of the gold evidence (Wikipedia sets: the supporting
paragraphs; docs sets: the quoted evidence) in the passages handed to the writer, *joint* recall the share of
questions for which all of it is there. The commit column is the commit each result ran on.

{picture(sets / "all-sets.png", "Joint recall of single and dag on every set, at budgets 4 and 2")}\
{all_sets.table()}

{behind}{pooled}

### On documentation, the bridge hop is the part to measure

On the documentation sets dag's gain comes from comparisons, each side searched for its own document; a question one
section answers gains nothing from a bridge hop, and at budget 2 the hop's passage often takes the slot of the one
that answered. `DAGRAG_PLANNER_BRIDGE=false` (`dagrag query --no-bridge`; eval.py's system `dag-no-bridge`, run
beside single and dag on every docs set) keeps the comparison split and searches every other question once. Which of
the two is better depends on the collection: measure on your own questions (docs/eval.md).

{all_sets.comparisons_only_table()}

### Comparisons as users type them

Every set's questions of type comparison, most of them about technical names written as users write them
(`--check vs --diff`, "should I use X or Y for ...", "how does X differ from Y?", `attrs.define` and
`attrs.frozen`): how often dag's plan searched each side on its own, in one layer (the rule planner reads the
sentence's form and the names ingest recorded), and how often all of the question's evidence was handed to the
writer.

{all_sets.comparisons_table()}

### What the answers say

*match* is the share of answers that hold the gold answer (docs sets: or quote every evidence passage); *where the
evidence was found* counts only the questions whose evidence was all handed to the writer, so it shows the writer's
misses apart from retrieval's (HotpotQA-style yes/no questions never match: the offline writer quotes, it does not
judge). An answer abstains when no kept passage answers the question (`ABSTAIN_BELOW`): the answerable column should be
near 0. So should the next one, at budget 4 on the docs sets: answerable questions that name the asker's own code
(`my build_all command`, which no page contains; `experiments/data/own_code_questions.jsonl` and the check set
`own_code_check.jsonl`). The last column asks each set's collection the questions of
`experiments/data/out_of_collection_check.jsonl` (other domains, other software, invented names and options),
which none of them answers: it should be near 1.

{picture(sets / "all-answers.png", "Answers: match of single and dag, and how often dag abstained, on every set")}\
{all_sets.answers_table()}

Made by `{PYTHON} experiments/all_sets.py run` (eval.py on every set and budget, one at a time; `--sets` and
`--budgets` choose), which keeps each summary with its commit in `experiments/results/all-sets/`;
`{PYTHON} experiments/all_sets.py table` redraws the pictures and rewrites this page from those files.
"""


def summary_rows(summary: dict) -> list[list[str]]:
    rows = []
    for system, stats in summary["systems"].items():
        for kind, numbers in [("all", stats), *sorted(stats.get("by_type", {}).items())]:
            rows.append([system, kind, str(numbers["n"]), f"{numbers['match']:.3f}", f"{numbers['recall']:.3f}",
                         f"{numbers['joint_recall']:.3f}", f"{numbers['passages_per_question']:g}",
                         f"{numbers['context_tokens']:.0f}", f"{numbers['coverage_ratio']:.3f}",
                         f"{numbers['latency_p50_s']:.2f} / {numbers['latency_p95_s']:.2f}"])
    return rows


def recorded(config: dict, keys: tuple[str, ...]) -> str:
    return ", ".join(f"{key} `{show(config[key])}`" for key in keys if key in config)


def hotpotqa_section() -> str:
    parts = []
    for budget in (4, 2):
        folder = RESULTS / f"hotpotqa-k{budget}"
        if not (folder / "summary.json").exists():
            continue
        summary = load(folder / "summary.json")
        if "systems" not in summary or "config" not in summary:
            continue
        config = summary["config"]
        systems = ",".join(summary["systems"])
        commit = f"commit `{config['commit']}`" if config.get("commit") else "the file records no commit"
        command = (f"{PYTHON} experiments/eval.py --data {config['data']} --budget {config['budget']} "
                   f"--concurrency {config['concurrency']} --systems {systems} --out runs/hotpotqa-k{budget}")
        against = summary["systems"].get("dag", {}).get("against_single")
        paired = ("" if not against else "\nQuestion by question, dag against single (questions won / lost, sign test "
                  "p): " + "; ".join(f"{metric.replace('_', ' ')} {all_sets.won_lost(outcome)}"
                                     for metric, outcome in against.items()) + ".\n")
        parts.append(f"""\
### Budget {config['budget']}

{table(["system", "type", "n", "match", "recall", "joint recall", "passages", "context tokens", "coverage",
        "latency p50 / p95 (s)"], summary_rows(summary))}
{paired}
Recorded with the run: {recorded(config, ("data", "questions", "budget", "concurrency", "corpus_paragraphs",
                                          "embed_model", "reranker", "llm", "question_time_s"))}; {commit}.
Made by `{command}`, then its `summary.json`, `summary.md` and `summary.png` copied to
`experiments/results/hotpotqa-k{budget}/`.

{picture(folder / "summary.png", f"HotpotQA dev at budget {budget}: single against dag by type")}""".rstrip("\n")
                     + "\n")
    if not parts:
        return ""
    return """\
## HotpotQA dev, every question

All of the shared HotpotQA dev set: every question's paragraphs pooled and deduplicated into one collection, and
every question answered from the whole pool, one question at a time. Columns as in eval.py's summary
([eval.md](eval.md)); EM and F1 are left out because the offline writer answers with whole source sentences, not a
short span, so *match* (the gold answer in the answer) is the offline answer metric. Latencies depend on what
else the machine ran; compare them within a table.

""" + "\n".join(parts)


def ablation_section() -> str:
    folder = RESULTS / "ablation-k2"
    rows, budgets, data = [], set(), set()
    for name, what, settings in ABLATION:
        path = folder / name / "summary.json"
        if not path.exists():
            continue
        summary = load(path)
        dag, config = summary["systems"]["dag"], summary["config"]
        types = dag.get("by_type", {})
        budgets.add(config["budget"])
        data.add(config["data"])
        rows.append([what, f"`{settings}`", str(dag["n"]), f"{dag['joint_recall']:.3f}",
                     *(f"{types[kind]['joint_recall']:.3f}" if kind in types else "–"
                       for kind in ("bridge", "comparison")),
                     f"{dag['recall']:.3f}", f"{dag['match']:.3f}", f"{dag['latency_p50_s']:.2f}",
                     str(config.get("concurrency", "–"))])
    if not rows:
        return ""
    budget = "/".join(str(b) for b in sorted(budgets))
    data_file = "/".join(sorted(data))
    return f"""\
## What each feature adds

dag on HotpotQA's dev set at budget {budget}, one setting changed per row (`DAGRAG_<SETTING>`). The rows were
measured as each feature arrived, before later rules (the hop rule, deeper hops) existed, and the files record no
commit: run today, the same settings give today's numbers. Latency depends on the questions run at once
(concurrency) and on what else the machine ran; compare it within the column.

{table(["configuration", "settings", "n", "joint recall", "bridge", "comparison", "recall", "match", "p50 s",
        "concurrency"], rows)}

Made by `DAGRAG_<SETTING>=... {PYTHON} experiments/eval.py --data {data_file} --systems dag --budget {budget}
--out runs/ablation-k{budget}/<row>`, each summary kept in `experiments/results/ablation-k{budget}/<row>/`.
"""


def bench_section() -> str:
    bench, scale_run = result("bench.json"), result(SCALE_FILE)
    if bench is None and scale_run is None:
        return ""
    details, config = dict((bench or {}).get("details", {})), (bench or {}).get("config", {})
    targets = dict((bench or {}).get("targets", {}))
    if scale_run is not None:  # the scale section's own run (its sizes take long) stands in for bench.json's
        details["scale"] = scale_run.get("details", {}).get("scale", {})
        targets.update(scale_run.get("targets", {}))
    rows, hows = [], {}
    for key, target in targets.items():
        section, what = BENCH_KEYS.get(key, ("", key))
        how = (bench.get(key) or {}).get("how") if key == "peer_subq" else details.get(section, {}).get("how")
        if how:
            hows[section] = how
        met = "" if target["target"].startswith("(") else ("yes" if target["met"] else "no")
        rows.append([f"`{key}`", what, show(target["value"]), target["target"], met])
    parts = [f"""\
## Latency and cost: experiments/bench.py

{table(["key", "what", "measured", "target", "met"], rows)}

How each section measures (as the file records it):

""" + "\n".join(f"- **{section}**: {how}" for section, how in hows.items()) + "\n"]
    e2e = details.get("e2e", {})
    if e2e.get("stage_mean_s"):
        parts.append(f"Mean seconds per stage of the whole offline query ({show(e2e.get('queries'))} questions over "
                     f"a pool of {show(e2e.get('pool_passages'))} passages):\n\n"
                     + table(list(e2e["stage_mean_s"]), [[show(v) for v in e2e["stage_mean_s"].values()]]) + "\n")
    peer = bench.get("peer_subq", {})
    if peer.get("dagrag") and peer.get("subq"):
        columns = [key for key in peer["subq"] if key in peer["dagrag"]]
        parts.append(f"The peer comparison, on *{peer.get('question', '')}*:\n\n"
                     + table(["system", *columns], [["dagrag", *(show(peer["dagrag"][c]) for c in columns)],
                                                    ["SubQuestionQueryEngine", *(show(peer["subq"][c])
                                                                                 for c in columns)]]) + "\n")
    scale = {size: numbers for size, numbers in details.get("scale", {}).items() if isinstance(numbers, dict)}
    if scale and "rows" not in details.get("scale", {}):  # an older file: one exact-search table
        columns = list(next(iter(scale.values())))
        parts.append("Embedded Qdrant at scale (exact search over every vector; a layer searches its subqueries in "
                     "one batch):\n\n" + table(["passages", *columns], [[size, *(show(numbers.get(c)) for c in columns)]
                                                                         for size, numbers in scale.items()]) + "\n")
    if bench is not None:
        command = config.get("command", "python experiments/bench.py --out experiments/results/bench.json")
        parts.append(f"Made by `{command}` ({ran_with(config)}); the file records no commit. `{PYTHON} "
                     "experiments/bench.py --quick` is a smoke test of every section; `--only` and `--skip` choose "
                     "sections.\n")
    if "rows" in details.get("scale", {}):
        parts.append(scale_part(details["scale"], (scale_run or {}).get("config")))
    return "\n".join(parts)


def ran_with(config: dict) -> str:
    return "; ".join(f"{key}: {show(config[key])}" for key in ("date", "cpu_count", "python", "load_average_start_end",
                                                                "total_seconds", "settings") if key in config)


def scale_part(scale: dict, config: dict | None) -> str:
    """The search backends by collection size: a table, the picture and, from the numbers, where each stops."""
    rows = []
    for r in scale["rows"]:
        backend = r["backend"] + (f" (ef {r['ef']})" if "ef" in r else "") + (
            ", in memory" if r.get("storage") == "memory" else "")
        if "skipped" in r:
            rows.append([f"{r['size']:,}", backend, f"not run (~{show(r['extrapolated']['layer_p50_ms'])} ms, "
                         "extrapolated)", *["–"] * 7])
            continue
        rows.append([f"{r['size']:,}", backend, show(r["layer_p50_ms"]), show(r["layer_p95_ms"]),
                     show(r["query_p50_ms"]), show(r["recall_at_10"]), show(r["ingest_per_s"]), show(r["build_s"]),
                     show(r["rss_mb"]), show(r.get("disk_mb"))])
    notes = [f"- {r['backend']} at {r['size']:,}: {r.get('skipped') or r['note']}" for r in scale["rows"]
             if r.get("skipped") or (r.get("note") and r["backend"] == "qdrant-local")]
    sweeps = [f"{r['size']:,}: " + ", ".join(f"ef {ef} → recall {show(v['recall_at_10'])}, layer "
                                             f"{show(v['layer_p50_ms'])} ms" for ef, v in r["ef_sweep"].items())
              for r in scale["rows"] if r.get("ef_sweep")]
    vectors = scale.get("vectors", {})
    hnsw = scale.get("hnsw", {})
    made = (f"Made by `{config['command']}` ({ran_with(config)}); the file records no commit." if config else
            "Made by the bench.json run above.")
    plot = RESULTS / scale["plot"] if scale.get("plot") else None
    return f"""### Search backends by collection size

A layer is one batch call with {scale_bench.LAYER} subqueries (limit {show(scale.get('limit'))}, with payloads);
recall@10 is against exact search (numpy); RSS is the resident memory the backend added, disk the blocks its
folder uses. Times in ms, ingest in points/s, build in s, memory in MB.

{table(["passages", "backend", "layer p50", "layer p95", "1 query p50", "recall@10", "ingest /s", "build s",
        "RSS MB", "disk MB"], rows)}

{picture(plot, "Layer p50, ingest + build time and resident memory against collection size, per search backend")
 if plot else ""}{scale_bench.verdict(scale["rows"])}

{"".join(note + chr(10) for note in notes) + chr(10) if notes else ""}\
HNSW m {show(hnsw.get('m'))}, ef_construct {show(hnsw.get('ef_construct'))}; each size keeps the smallest `hnsw_ef`
reaching recall@10 {show(scale.get('recall_target'))} on these queries: {'; '.join(sweeps) or '–'}.
Vectors: {show(vectors.get('real_passages'))} real passages, then synthetic ones ({vectors.get('synthetic', '')});
{show(vectors.get('questions'))} real questions as queries. Distribution check (cosine):
{show(vectors.get('distribution_check'))}.

{made} The full run: `{PYTHON} experiments/bench.py --only scale --scale-sizes 10000,100000,1000000 --out
experiments/results/{SCALE_FILE}`.
"""


def profile_section() -> str:
    profile = result("profile.json")
    if profile is None:
        return ""
    wall, stages = profile.get("wall_s", {}), profile.get("stages_s", {})
    total = stages.get("total") or 1.0
    stage_rows = [[stage, show(seconds), f"{seconds / total:.0%}"] for stage, seconds in stages.items()
                  if stage != "total"]
    work = [[row["component"], f"{row['share']:.1%}", show(row["thread_seconds_per_question"])]
            for row in profile.get("components", [])]
    top = [[f"`{row['function']}`", f"{row['share']:.1%}", show(row["thread_seconds_per_question"])]
           for row in profile.get("top_self_time", [])[:8]]
    pool = ("HotpotQA dev's pool" if profile.get("pool") == "hotpotqa" else "the HotpotQA sample's collection")
    return f"""\
## Where one offline query's time goes: experiments/profile_query.py

{show(profile.get('questions'))} questions over {pool} ({show(profile.get('pool_passages'))} passages), one at a
time, offline defaults, on {show(profile.get('cpus'))} CPUs (load average {show(profile.get('load_average'))}),
commit {show(profile.get('commit'))}: wall time p50 {show(wall.get('p50'))} s, mean {show(wall.get('mean'))} s,
max {show(wall.get('max'))} s. The workflow's own stage timings, mean per question:

{table(["stage", "seconds", "share of the run"], stage_rows)}

Every thread sampled (evalkit/sampler.py; the models run in worker threads): the work behind those stages, in
thread-seconds per question (work on two threads at once counts twice):

{table(["work", "share", "thread-seconds per question"], work)}

The functions with the most samples of their own (a C call, such as an ONNX Runtime session, shows as the Python
function that made it):

{table(["function", "share", "thread-seconds per question"], top)}

Made by `{PYTHON} experiments/profile_query.py` (`--pool sample` for the small collection).
"""


def serve_load_section() -> str:
    report = result("serve-load.json")
    if report is None:
        return ""
    rows = [[show(run["clients"]), show(run["seconds"]), show(run["requests"]),
             ", ".join(f"{code}: {count}" for code, count in run["statuses"].items()), show(run["cross_talk"]),
             show(run["latency_s"]["p50"]), show(run["latency_s"]["p95"]),
             ", ".join(f"{seconds} s × {count}" for seconds, count in run["retry_after_s"]) or "–",
             show(run["load_average_after"])] for run in report.get("runs", [])]
    return f"""\
## Serving a team: experiments/serve_load.py

A real server on loopback over the HotpotQA sample, with the serving defaults on this {show(report.get('cpus'))}-CPU
machine (SERVE_MAX_RUNS {show(report.get('serve_max_runs'))}, SERVE_MAX_QUEUE {show(report.get('serve_max_queue'))},
SERVE_QUEUE_WAIT_S {show(report.get('serve_queue_wait_s'))}); each client asks `/query` in a loop, the sample's 30
questions in turn (after the first round the cross-encoder's cache answers most pairs). Cross-talk counts answers
about another question, or with other sources than the question gets alone. Commit {show(report.get('commit'))}.

{table(["clients", "seconds", "requests", "statuses", "cross-talk", "p50 s", "p95 s", "429 Retry-After",
        "load average after"], rows)}

Made by `{PYTHON} experiments/serve_load.py` (`--clients 16,64 --seconds 60`, the defaults).
"""


def latency_ab_section() -> str:
    report = result("latency-ab.json")
    if report is None:
        return ""
    rows = [[run["set"], f"{run['side']} ({report['base'] if run['side'] == 'base' else report['today']})",
             show(run["questions"]), show(run["p50_s"]), show(run["p95_s"]), show(run["mean_s"]),
             f"{show(run['load_before'])} → {show(run['load_after'])}"] for run in report["runs"]]
    medians = "; ".join(f"{name} {show(p50['today'])} s today against {show(p50['base'])} s"
                        for name, p50 in report["p50_s"].items())
    skipped = "".join(f" Not timed: {name} ({why.splitlines()[0].rstrip(':')}: "
                      f"{why.splitlines()[-1].strip()})."
                      for name, why in report.get("skipped", {}).items())
    return f"""\
## Has dag got slower? experiments/latency_ab.py

Today's dag against an earlier commit's, offline, budget {show(report['budget'])}, one question at a time, dag alone (no
single run fills the cross-encoder's cache first), on the same machine in one run, in ABBA order (base, today, today,
base) so that a drift in load meets both. The load average is that of the two shared cores before and after each run;
the run itself keeps both busy. Today is {show(report['today'])}, the base {show(report['base'])}.

Median of the runs' p50: {medians}.{skipped}

{table(["set", "code", "questions", "p50 s", "p95 s", "mean s", "load average"], rows)}

Made by `{PYTHON} experiments/latency_ab.py --base {show(report['base'])} --sets {report['sets']} --rounds \
{show(report['rounds'])} --out experiments/results/latency-ab.json`.
"""


def ingest_section() -> str:
    bench = result("ingest-bench.json")
    if bench is None:
        return ""
    throughput = [key for key in ("chunks", "embedded_tokens", "read_s", "embed_s", "total_s", "cpu_s",
                                  "corpus_tokens_per_s", "corpus_tokens_per_cpu_s") if key in bench.get("new", {})]
    parts = [f"""\
## Chunking: experiments/ingest_bench.py

Structure-aware chunks (`new`: sections, paragraphs, list items, table rows and code blocks) against the
SentenceSplitter windows they replaced (`old`), both at a chunk budget of {show(bench.get('chunk_tokens'))} tokens,
on {show(bench.get('files'))} Markdown files of {show(bench.get('corpus_tokens'))} tokens found on the machine.
Throughput: reading and embedding each way, best of the repeats:

{table(["way", *throughput], [[way, *(show(bench[way].get(key)) for key in throughput)]
                              for way in ("old", "new") if way in bench])}

New ÷ old: corpus tokens per second {show(bench.get('new_vs_old_corpus_tokens_per_s'))}, per CPU second
{show(bench.get('new_vs_old_corpus_tokens_per_cpu_s'))}.
"""]
    for key, what in (("probe_docs", "the Hatch docs questions (`experiments/data/docs_questions.jsonl`)"),
                      ("probe_repo", "questions about this repository's README.md and ARCHITECTURE.md")):
        probe = bench.get(key)
        if probe:
            columns = list(next(iter(probe.values())))
            parts.append(f"Retrieval, {what}: the share of a question's evidence in the nearest chunks (`dense@k`: "
                         "the k nearest by embedding, `hybrid@k`: dagrag's hybrid search, `reranked@1`: the "
                         "cross-encoder's first of the hybrid ones):\n\n"
                         + table(["chunks", *columns], [[way, *(show(numbers.get(c)) for c in columns)]
                                                        for way, numbers in probe.items()]) + "\n")
    parts.append(f"Made by `{PYTHON} experiments/ingest_bench.py "
                 "--docs-questions experiments/data/docs_questions.jsonl "
                 "--docs-corpus experiments/data/docs_corpus/hatch/docs --out experiments/results/ingest-bench.json` "
                 "(`--max-chars` and `--repeats` set the corpus size and repeats); the file records neither its "
                 "arguments nor a commit.\n")
    return "\n".join(parts)


def embedders_section() -> str:
    bench = result("embedders.json")
    if bench is None:
        return ""
    config, models = bench.get("config", {}), bench.get("models", {})
    cost = [[f"`{spec}`", show(m.get("dim")), show(m["ingest"].get("passages_per_s")), show(m["ingest"].get("cpu_s")),
             show(m.get("query_p50_ms")), show(m.get("layer4_p50_ms")), show(m.get("load_s"))]
            for spec, m in models.items()]
    runs = sorted({run for found in bench.get("recall", {}).values() for run in found},
                  key=lambda run: (-int(run.rsplit("-k", 1)[1]), run))
    recall = [[run, *(f"{show(found.get(run, {}).get('single_joint_recall'))} / "
                      f"{show(found.get(run, {}).get('dag_joint_recall'))}"
                      for found in bench.get("recall", {}).values())] for run in runs]
    return f"""\
## Embedding models: experiments/embedder_bench.py

What each embedding model costs, measured in one process with the models alternating (best of
{show(config.get('repeats'))} rounds; {show(config.get('passages'))} HotpotQA paragraphs of
{show(config.get('mean_chars'))} characters on average, embedded as ingest does, longest first in batches of
{show(config.get('batch'))}; {show(config.get('cpus'))} CPUs, load average {show(config.get('load_average'))},
commit {show(config.get('commit'))}):

{table(["model", "dim", "passages/s", "CPU s", "1 query ms", "layer of 4 ms", "load s"], cost)}

What each finds: joint recall single / dag on every set, from an all-sets run made with that model:

{picture(RESULTS / "embedders.png", "dag joint recall per set for each embedding model, beside its ingest speed")}\
{table(["set", *(f"`{spec}`" for spec in bench.get("recall", {}))], recall)}

Made by `{PYTHON} experiments/embedder_bench.py --recall SPEC=FOLDER ...` after `experiments/all_sets.py run`
with `DAGRAG_EMBED_MODEL` set for each model.
"""


def rerank_section() -> str:
    files = sorted(RESULTS.glob("rerank-sweep*.json"), key=lambda path: (path.stem != "rerank-sweep", path.name))
    if not files:
        return ""
    parts = ["""\
## Rerank settings: experiments/rerank_sweep.py

The real workflow (rule planner with bridge hops, real embeddings and cross-encoder; zero-cost writer and
verifier, which do not change the passages chosen) on seeded HotpotQA questions over eval.py's pooled corpus,
for each number of candidates per subquery (`SUBQUERY_TOPK_BASE`), cross-encoder truncation
(`RERANK_MAX_TOKENS`) and batch size (`RERANK_BATCH_SIZE`); `dense order` leaves the cross-encoder out. Times
depend on the machine's load when the sweep ran; compare them within a table.
"""]
    for path in files:
        sweep = load(path)
        config = sweep.get("config", {})
        rows = [[show(row.get("top_k")), row.get("reranker", ""), show(row.get("max_tokens")),
                 show(row.get("batch_size")), f"{row['joint_recall']:.3f}", f"{row['recall']:.3f}",
                 f"{show(row.get('rerank_ms_mean'))}, {show(row.get('rerank_ms_p95'))}",
                 show(row.get("pairs_per_question")), show(row.get("ms_per_pair"))] for row in sweep["rows"]]
        settings = recorded(config, ("date", "questions", "seed", "pool_passages", "context_budget",
                                     "attribution_top_n", "dense_overfetch", "reranker", "seconds"))
        parts.append(f"""\
### `{path.name}`

{table(["candidates / subquery", "reranker", "max tokens", "batch", "joint recall", "recall",
        "rerank ms / question (mean, p95)", "pairs / question", "ms / pair"], rows)}

Made by `{config.get('command', '')}`; recorded: {settings}; the file records no commit.
""")
    return "\n".join(parts)


def real_llm_section() -> str:
    pictures = [(RESULTS / f"real-llm-{name}.png", title) for name, title in
                (("hotpot", "HotpotQA dev"), ("musique", "MuSiQue train sample"))]
    shown = "".join(picture(path, f"Real LLM, {title}: single, dag and SubQuestionQueryEngine")
                    for path, title in pictures)
    if not shown:
        return ""
    return f"""\
## With a real local LLM

Qwen2.5-Coder-1.5B-Instruct on llama.cpp's server (`scripts/local_llm.sh`) on the same machine: `single`,
`dag` with the rule planner (`PLANNER=rule`, what `scripts/local_llm.sh` sets up), `dag` with the LLM's own plans
and LlamaIndex's SubQuestionQueryEngine, on the questions every system answered, beside the offline dag on the
same questions. Only the pictures are kept in the repository: `experiments/real_llm_bench.sh` makes the runs
(hours on a CPU; it resumes where it stopped) and `{PYTHON} experiments/real_llm_figure.py --set hotpot`
(or `--set musique`) draws them. `experiments/planner_probe.py` compares planners with your own model at one
LLM call per question.

{shown}"""


PLANNER_PROBE = "planner-probe"
LLM_PLANNER = "real-llm-planner"
LLM_PLANNER_COLUMNS = ("n", "f1", "match", "recall", "joint_recall", "llm_calls", "llm_prompt_tokens",
                       "latency_p50_s", "failures")


def planner_section() -> str:
    """Which planner suits a small model: its recorded plans replayed offline, and the LLM planner end to end."""
    probes = {path.stem: load(path) for path in sorted((RESULTS / PLANNER_PROBE).glob("*.json"))}
    runs = {path.stem: load(path) for path in sorted((RESULTS / LLM_PLANNER).glob("*.json"))}
    if not probes and not runs:
        return ""
    probe_rows = [[name, system, show(numbers["n"]), f"{numbers['recall']:.3f}", f"{numbers['joint_recall']:.3f}",
                   f"{numbers['subqueries']:.2f}"]
                  for name, data in probes.items() for system, numbers in data["systems"].items()]
    run_rows = [[name, system, *(show(numbers.get(c)) for c in LLM_PLANNER_COLUMNS),
                 f"`{data.get('config', {}).get('commit') or 'not recorded'}`"]
                for name, data in runs.items() for system, numbers in data["systems"].items()]
    commits = sorted(({data.get("commit") for data in probes.values()}
                      | {data.get("config", {}).get("commit") for data in runs.values()}) - {None}) or ["not recorded"]
    return f"""## The LLM planner with a small model

Qwen2.5-Coder-1.5B-Instruct (`scripts/local_llm.sh start`) as the planner, budget 4. Its plans, recorded once
(one LLM call per question; kept in `experiments/results/{PLANNER_PROBE}/*-plans.jsonl`) and replayed offline beside
the rule planner's and the question alone (`single`), and as `llm-split`: the rule planner's plan for a question it
reads as a comparison, the LLM's for any other (`DAGRAG_PLANNER_SPLIT_COMPARISONS=true`), each scored by what it
hands the writer
(`experiments/planner_probe.py`; HotpotQA dev 20 bridge + 20 comparison seed 1, MuSiQue 20 seed 1, the black,
Python-Markdown and Hatch docs, the scikit-build-core docs, held out when they were recorded, and the Flask and
Click docs, recorded later, Click's while it was held out). A change to how plans run is measured on them
without the model:
`{PYTHON} experiments/planner_probe.py --data … --plans experiments/results/{PLANNER_PROBE}/black-plans.jsonl --out …`.

{table(["set", "planner", "n", "recall", "joint recall", "subqueries"], probe_rows)}

End to end with the same model writing (`DAGRAG_PLANNER=llm`, the defaults of the commit shown; `dag` makes its
plan afresh, and the model does not give the same plan twice, so its retrieval can differ from the replay's;
`dag-rule` is the rule planner with the model writing, what `scripts/local_llm.sh` sets up; `subq` is LlamaIndex's
SubQuestionQueryEngine over the same collection and model, whose reply has no short answer, so its F1 reads the
whole reply). Sets named `…-repeatable` ran against a server started with its prompt cache off
(`scripts/local_llm.sh start -- --no-cache-prompt`): every prompt is then read from its first token, so the same
prompt gets the same reply whatever came before it, and two such runs differ only where their prompts do (the
calls are slower; compare latencies within a set). `…-excerpts-…`: the model read each source's best sentences
(`DAGRAG_LLM_EVIDENCE_SENTENCES=2`) instead of whole passages, on the same server as the row without it;
`…-llm-planner-…`: the model planning as well; `…-chain-example-…`: the writer prompt with its second worked example,
an answer found through two sources (ARCHITECTURE.md, "Prompts are written for a 1.5B model"); `hotpot40-seed2-…`:
40 other HotpotQA questions (seed 2), held out while that example was chosen, without and with it; `…-at-<commit>`:
the defaults of that commit (prompt cache on, `--threads 2`), measured again as the code moves on:

{table(["set", "system", *LLM_PLANNER_COLUMNS, "commit"], run_rows)}

Commits: {", ".join(f"`{c}`" for c in commits)}. Made by `{PYTHON} experiments/planner_probe.py --data … --out
runs/planner-…` (its `summary.json` copied to `experiments/results/{PLANNER_PROBE}/`) and `DAGRAG_PLANNER=llm
{PYTHON} experiments/eval.py --data … --seed 1 --budget 4 --concurrency 1 --systems single,dag,dag-rule,subq` (its
`summary.json` copied to `experiments/results/{LLM_PLANNER}/`). Latencies are on 2 cores shared with the model's
server."""


SMALL_MODEL_FILE = "real-llm-small-model.json"
SMALL_MODEL_COLUMNS = ("n", "f1", "match", "joint_recall", "support_rate", "llm_calls", "llm_prompt_tokens",
                       "latency_p50_s", "failures")


def small_model_section() -> str:
    path = RESULTS / SMALL_MODEL_FILE
    if not path.exists():
        return ""
    data = json.loads(path.read_text(encoding="utf-8"))
    header = ["configuration", "system", *SMALL_MODEL_COLUMNS]
    same = [[f"{name}: {block['what']}", system, *(show(values.get(c)) for c in SMALL_MODEL_COLUMNS)]
            for name, block in data["configs"].items() for system, values in block["systems"].items()]
    defaults = [[name, system, *(show(values.get(c)) for c in SMALL_MODEL_COLUMNS)]
                for name, systems in data.get("defaults", {}).items() for system, values in systems.items()]
    judges = data.get("judges")
    judge_table = "" if not judges else "\n\n" + table(
        ["judge", "answers", "support when the gold answer is in it", "support when it is not", "LLM calls / question",
         "p50 s"],
        [[name, show(judges["answers"]), f"{show(j['support_when_right'])} ({j['right']})",
          f"{show(j['support_when_wrong'])} ({j['wrong']})", show(j["llm_calls"]), show(j["latency_p50_s"])]
         for name, j in judges.items() if name != "answers"])
    recorded = data.get("recorded", {})
    noise = ", ".join(f"{show(r['answer_changed'])} of {show(r['same_sources'])} questions ({system})"
                      for system, r in data.get("repeatability", {}).items()) or "–"
    return f"""\
## The small-model path, with a real local LLM

The same model and machine, on the {show(data['questions'])} HotpotQA questions (20 bridge, 20 comparison, seed 1)
every configuration answered ({show(recorded.get('llm'))}, budget {show(recorded.get('budget'))}, commit
`{show(recorded.get('commit'))}`): whole passages with the LLM judging each answer (before), whole passages with
`VERIFIER=auto` (the offline judge for a model of at most 8B parameters: today's defaults), and excerpts
(`LLM_EVIDENCE_SENTENCES=2`: each source's best sentences, each after the sentence before it) with the offline judge:

{table(header, same)}

The noise floor: asked again in another session with the same sources, the model answered differently on
{noise}. Excerpts on HotpotQA 40 and MuSiQue 20:

{table(["set", "system", *SMALL_MODEL_COLUMNS], defaults)}{judge_table}

Which judge: the same excerpt answers (12 questions asked, those answered alike) judged by the LLM and by the
offline verifier; a useful judge supports answers that hold the gold answer more than those that do not.
Made by `experiments/small_model_bench.sh` (about two hours; resumable), summarised by
`{PYTHON} experiments/small_model_figure.py`.

{picture(path.with_suffix(".png"), "Real LLM, three configurations: F1, match, prompt tokens, p50")}"""


SECTIONS = (all_sets_section, hotpotqa_section, ablation_section, bench_section, latency_ab_section, profile_section,
            serve_load_section, ingest_section, embedders_section, rerank_section, real_llm_section,
            small_model_section, planner_section)


def render() -> str:
    """The whole page, as this script writes it."""
    sections = [INTRO, *(text for text in (section() for section in SECTIONS) if text)]
    return "\n".join(section.rstrip("\n") + "\n" for section in sections)


def write() -> None:
    DOC.parent.mkdir(parents=True, exist_ok=True)
    DOC.write_text(render(), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1 when docs/benchmarks.md is out of date")
    args = parser.parse_args(argv)
    if args.check:
        if not DOC.exists() or DOC.read_text(encoding="utf-8") != render():
            print("docs/benchmarks.md differs from experiments/results/: run .venv/bin/python "
                  "experiments/benchmarks_doc.py", file=sys.stderr)
            return 1
        return 0
    write()
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
