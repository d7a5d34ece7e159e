"""Embedding models compared: what they cost (ingest passages/s, query latency) beside what they find (every set).

    .venv/bin/python experiments/embedder_bench.py --out experiments/results/embedders.json

Cost, measured here in one process, models alternating (--repeats rounds; the best round counts, since the
machine's noise only adds time): real passages (the HotpotQA dev paragraphs as ingest embeds them, title
included) embedded as `ingest_nodes` does, longest first in batches of EMBED_BATCH_SIZE, wall and CPU seconds;
then one question, and a layer of four, embedded as the searcher does (one batch), p50 over --queries.

Recall is not measured here: it is read from the all-sets runs of each model (`experiments/all_sets.py run`
with DAGRAG_EMBED_MODEL set, each kept in its own results folder, `--recall SPEC=FOLDER`), so a model is judged on
every set, dag and single, at both budgets. The picture sets dag's joint recall per set beside the cost.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "experiments"))

import all_sets  # noqa: E402
from evalkit.provenance import code_commit  # noqa: E402
from llama_index.core.schema import MetadataMode  # noqa: E402

from dagrag.config import Settings  # noqa: E402
from dagrag.ingest import make_node  # noqa: E402
from dagrag.stack import build_embed_model  # noqa: E402

DEFAULT_MODELS = ("local:all-MiniLM-L6-v2", "onnx:bge-small-en-v1.5")
DATA = ROOT.parent / "shared" / "data" / "hotpotqa_dev.jsonl"


def passages(limit: int) -> list[str]:
    """The first `limit` distinct paragraphs of HotpotQA dev, as ingest embeds them (MetadataMode.EMBED)."""
    texts: dict[str, None] = {}
    with DATA.open(encoding="utf-8") as lines:
        for line in lines:
            for paragraph in json.loads(line)["paragraphs"]:
                node = make_node(paragraph["text"], paragraph["title"])
                texts.setdefault(node.get_content(metadata_mode=MetadataMode.EMBED), None)
                if len(texts) >= limit:
                    return sorted(texts, key=len, reverse=True)
    return sorted(texts, key=len, reverse=True)


def questions(limit: int) -> list[str]:
    with DATA.open(encoding="utf-8") as lines:
        return [json.loads(line)["question"] for line, _ in zip(lines, range(limit))]


def time_ingest(model: Any, texts: list[str], batch: int) -> dict[str, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    for start in range(0, len(texts), batch):
        model.get_text_embedding_batch(texts[start:start + batch])
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "passages_per_s": round(len(texts) / wall, 1)}


def time_queries(model: Any, asked: list[str], per_call: int) -> float:
    """p50 milliseconds to embed `per_call` questions in one batch, as the searcher embeds a layer."""
    times = []
    for start in range(0, len(asked) - per_call + 1, per_call):
        began = time.perf_counter()
        model.get_text_embedding_batch(asked[start:start + per_call])
        times.append(time.perf_counter() - began)
    return round(1000 * statistics.median(times), 2)


def recall_of(folder: Path) -> dict[str, dict[str, float]]:
    """set-kB -> single/dag joint and evidence recall, from an all-sets results folder."""
    found = {}
    for path in sorted(folder.glob("*-k[0-9].json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        systems = record["systems"]
        found[path.stem] = {f"{system}_{metric}": systems[system][metric]
                            for system in ("single", "dag") for metric in ("joint_recall", "recall")}
        found[path.stem]["commit"] = record.get("commit")
    return found


def draw(report: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(report["models"])
    order = [s.name for s in all_sets.SETS]
    runs = sorted({run for spec in models for run in report["recall"].get(spec, {})},
                  key=lambda run: (-int(run.rsplit("-k", 1)[1]), order.index(run.rsplit("-k", 1)[0])))
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.2), gridspec_kw={"width_ratios": [3, 1]})
    width = 0.8 / max(1, len(models))
    for i, spec in enumerate(models):
        values = [report["recall"].get(spec, {}).get(run, {}).get("dag_joint_recall", 0.0) for run in runs]
        left.bar([x + i * width for x in range(len(runs))], values, width, label=spec)
    left.set_xticks([x + width * (len(models) - 1) / 2 for x in range(len(runs))])
    left.set_xticklabels(runs, rotation=35, ha="right", fontsize=8)
    left.set_ylabel("dag joint recall")
    left.set_ylim(0, 1.05)
    left.legend(loc="lower left", fontsize=8)
    left.set_title("what each embedding model finds (all sets, dag)")
    speeds = [report["models"][spec]["ingest"]["passages_per_s"] for spec in models]
    right.bar(range(len(models)), speeds, color=[f"C{i}" for i in range(len(models))])
    right.set_xticks(range(len(models)))
    right.set_xticklabels([spec.split(":")[1] for spec in models], rotation=20, ha="right", fontsize=8)
    right.set_ylabel("passages embedded per second")
    right.set_title(f"ingest cost ({report['config']['cpus']} CPUs)")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS), help="comma list of DAGRAG_EMBED_MODEL specs")
    parser.add_argument("--passages", type=int, default=1024)
    parser.add_argument("--queries", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--recall", action="append", default=[], metavar="SPEC=FOLDER",
                        help="an all-sets results folder made with that model (repeatable)")
    parser.add_argument("--out", type=Path, default=ROOT / "experiments" / "results" / "embedders.json")
    args = parser.parse_args(argv)
    specs = [Settings(embed_model=spec.strip()).embed_model for spec in args.models.split(",") if spec.strip()]
    batch = Settings().embed_batch_size
    texts, asked = passages(args.passages), questions(args.queries)
    models, rounds = {}, {spec: [] for spec in specs}
    for spec in specs:
        began = time.perf_counter()
        models[spec] = build_embed_model(spec, batch)
        models[spec].get_text_embedding_batch(texts[-8:])  # warm
        rounds[spec].append({"load_s": round(time.perf_counter() - began, 2)})
    for round_number in range(args.repeats):
        for spec in specs if round_number % 2 == 0 else reversed(specs):
            ingest = time_ingest(models[spec], texts, batch)
            rounds[spec].append({"ingest": ingest, "query_p50_ms": time_queries(models[spec], asked, 1),
                                 "layer4_p50_ms": time_queries(models[spec], asked, 4)})
            print(f"{spec}: {ingest['passages_per_s']} passages/s", file=sys.stderr)
    report: dict[str, Any] = {"models": {}, "recall": {}, "config": {
        "command": "python experiments/embedder_bench.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "commit": code_commit(), "passages": len(texts), "batch": batch, "repeats": args.repeats,
        "cpus": os.cpu_count(), "load_average": [round(x, 2) for x in os.getloadavg()],
        "mean_chars": round(sum(map(len, texts)) / len(texts))}}
    for spec in specs:
        timed = rounds[spec][1:]
        best = max(timed, key=lambda r: r["ingest"]["passages_per_s"])
        report["models"][spec] = {"load_s": rounds[spec][0]["load_s"], "ingest": best["ingest"],
                                  "query_p50_ms": min(r["query_p50_ms"] for r in timed),
                                  "layer4_p50_ms": min(r["layer4_p50_ms"] for r in timed),
                                  "dim": len(models[spec].get_text_embedding("dimension"))}
    for item in args.recall:
        spec, _, folder = item.partition("=")
        report["recall"][Settings(embed_model=spec).embed_model] = recall_of(Path(folder))
    args.out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    draw(report, args.out.with_suffix(".png"))
    print(json.dumps(report["models"], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
