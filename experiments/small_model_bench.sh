#!/usr/bin/env bash
# The small-model path with a real local LLM (scripts/local_llm.sh start), single against dag with the rule planner
# on HotpotQA 40: whole passages with the LLM verifying (before), whole passages with VERIFIER=auto judging a 1.5B
# model's answers offline (today's defaults), excerpts (LLM_EVIDENCE_SENTENCES=2) with the offline judge, also on
# MuSiQue 20; and the LLM verifying the excerpt answers, on 12 of the questions. Then experiments/small_model_figure.py summarises and draws them. Budget 4, one
# question at a time; about 2 hours on 2 cores (llama-server --threads 2). Resumable: run it again to continue.
set -euo pipefail
cd "$(dirname "$0")/.."  # the repository root
PY=${PY:-.venv/bin/python}
export DAGRAG_LLM=openai-like:qwen2.5-coder-1.5b-instruct DAGRAG_LLM_BASE_URL=${DAGRAG_LLM_BASE_URL:-http://127.0.0.1:8080/v1}
export DAGRAG_LLM_TIMEOUT_S=300 DAGRAG_LLM_CONTEXT_WINDOW=4096 DAGRAG_QUERY_TIMEOUT_S=1200 DAGRAG_PLANNER=rule
INDEX=(--index-dir .dagrag/eval-llm-qdrant --budget 4 --concurrency 1)
HOTPOT=(--data ../shared/data/hotpotqa_dev.jsonl --seed 1 --per-type 20 "${INDEX[@]}")
$PY experiments/eval.py "${HOTPOT[@]}" --systems single,dag-rule --out runs/llm-hotpot40-whole
export DAGRAG_LLM_EVIDENCE_SENTENCES=2
$PY experiments/eval.py "${HOTPOT[@]}" --systems single,dag-rule --out runs/llm-hotpot40-new
DAGRAG_LLM_EVIDENCE_SENTENCES=0 DAGRAG_VERIFIER=llm \
  $PY experiments/eval.py "${HOTPOT[@]}" --systems single,dag-rule --out runs/llm-hotpot40-before
DAGRAG_VERIFIER=llm $PY experiments/eval.py "${HOTPOT[@]}" --limit 12 --systems dag-rule --out runs/llm-hotpot-verifier-llm
$PY experiments/eval.py --data ../shared/data/musique_train_sample.jsonl --seed 1 --limit 20 "${INDEX[@]}" \
  --systems single,dag-rule --out runs/llm-musique20-new
$PY experiments/small_model_figure.py --runs runs --out experiments/results/real-llm-small-model.json
