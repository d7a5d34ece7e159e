#!/usr/bin/env bash
# The real-LLM benchmark (HotpotQA 10 bridge + 10 comparison, MuSiQue 5; budget 4, one question at a time;
# then the planners compared on HotpotQA 40 and MuSiQue 20 at one LLM call per question; then the four systems
# on those 40 and 20 questions with today's defaults)
# against a local llama-server (scripts/local_llm.sh start; `start -- --no-cache-prompt` for replies that do not
# depend on the prompt before them, so that two runs can be compared). Resumable: run it again to continue.
set -euo pipefail
cd "$(dirname "$0")/.."  # the repository root
export DAGRAG_LLM=openai-like:qwen2.5-coder-1.5b-instruct DAGRAG_LLM_BASE_URL=http://127.0.0.1:8080/v1
export DAGRAG_LLM_TIMEOUT_S=300 DAGRAG_LLM_CONTEXT_WINDOW=4096
# `dag` is the LLM planner here, whatever the shell has from scripts/local_llm.sh (PLANNER=rule); `dag-rule` the rule one.
export DAGRAG_PLANNER=llm
# A query on a shared 2-core machine can take minutes: a deadline that cuts it short would score the
# machine's load, not the system.
export DAGRAG_QUERY_TIMEOUT_S=1200
HOTPOT=(--data ../shared/data/hotpotqa_dev.jsonl --seed 1 --per-type 10 --budget 4 --concurrency 1
        --index-dir .dagrag/eval-llm-qdrant)
# 1. All four systems with the LLM resolver on, the default when this run began (README, "With a real LLM":
#    the measurement that turned it off).
DAGRAG_RESOLVE_WITH_LLM=true .venv/bin/python experiments/eval.py "${HOTPOT[@]}" \
  --systems single,dag,dag-rule,subq --out runs/llm-hotpot20
# 2. dag again with today's defaults (resolver off), on the same questions.
.venv/bin/python experiments/eval.py "${HOTPOT[@]}" --systems dag --out runs/llm-hotpot20-defaults
# 3. MuSiQue, today's defaults.
.venv/bin/python experiments/eval.py --data ../shared/data/musique_train_sample.jsonl --seed 1 --limit 5 \
  --systems single,dag,dag-rule,subq --budget 4 --concurrency 1 --index-dir .dagrag/eval-llm-qdrant --out runs/llm-musique5
# 4. The rule planner with the LLM writing and verifying (PLANNER=rule, what scripts/local_llm.sh exports),
#    resolver off (today's default), on the same 20 HotpotQA questions.
.venv/bin/python experiments/eval.py "${HOTPOT[@]}" --systems dag-rule --out runs/llm-hotpot20-rule
# 5. Which planner suits the model: its plans (one call per question) replayed offline beside the rule planner's.
(cd experiments && ../.venv/bin/python planner_probe.py --data ../../shared/data/hotpotqa_dev.jsonl --seed 1 \
  --per-type 20 --budget 4 --index-dir ../.dagrag/eval-llm-qdrant --out ../runs/planner-hotpot40)
(cd experiments && ../.venv/bin/python planner_probe.py --data ../../shared/data/musique_train_sample.jsonl --seed 1 \
  --limit 20 --budget 4 --index-dir ../.dagrag/eval-llm-qdrant --out ../runs/planner-musique20)
# 6. The four systems with today's defaults on HotpotQA 40 (20 bridge + 20 comparison) and MuSiQue 20: the issue's
#    full measurement. At 2-5 minutes per question and system on a 2-core machine it spans sessions. With a second
#    server on the other core, `--shard 1/2` and `--shard 2/2` (own --out and --index-dir copy each) halve the wait
#    (README, "Split across servers"); the MuSiQue rows were finished that way.
.venv/bin/python experiments/eval.py --data ../shared/data/hotpotqa_dev.jsonl --seed 1 --per-type 20 --budget 4 \
  --concurrency 1 --index-dir .dagrag/eval-llm-qdrant --systems single,dag-rule,subq,dag --out runs/llm-hotpot40-defaults
.venv/bin/python experiments/eval.py --data ../shared/data/musique_train_sample.jsonl --seed 1 --limit 20 --budget 4 \
  --concurrency 1 --index-dir .dagrag/eval-llm-qdrant --systems single,dag,dag-rule,subq --out runs/llm-musique20
