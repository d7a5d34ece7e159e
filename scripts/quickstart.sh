#!/usr/bin/env bash
# Sets everything up, ingests the HotpotQA sample shipped in the repo, and answers two multi-hop questions.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/dagrag ingest examples/data/hotpotqa_sample.jsonl
.venv/bin/dagrag query "Were Scott Derrickson and Ed Wood of the same nationality?"
.venv/bin/dagrag query "What government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?"
