#!/usr/bin/env bash
# A real OpenAI-compatible judge server for the engine tests (tests/engines/, marker `judge_server`):
# `transformers serve` on loopback, serving the tiny random-weight Qwen2-VL built here by tests/engines/tiny_judge.py
# (nothing is downloaded). Writes $WORLDMEM_JUDGE_DIR/state.json (base_url, model, pid, log), which the tests read.
# Idempotent: with the server up it only checks it. Stop it with tests/engines/judge_down.sh.
#
# Settings (environment): WORLDMEM_JUDGE_PYTHON (a Python with transformers[serving], i.e. the project's `engines`
# extra; default: python on PATH), WORLDMEM_JUDGE_DIR (default /tmp/worldmem-judge), WORLDMEM_JUDGE_PORT (8765).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${WORLDMEM_JUDGE_PYTHON:-python}
DIR=${WORLDMEM_JUDGE_DIR:-/tmp/worldmem-judge}
PORT=${WORLDMEM_JUDGE_PORT:-8765}
URL="http://127.0.0.1:$PORT/v1"
STATE=$DIR/state.json
LOG=$DIR/serve.log
t0=$(date +%s)
say() { echo "judge_up: $*"; }
die() { echo "judge_up: error: $*" >&2; exit 1; }
answers() {  # the server lists its models (no curl on a bare machine: Python's urllib)
  "$PY" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=5).read()' "$URL/models" \
    >/dev/null 2>&1
}

if [[ -s $STATE ]] && answers; then
  say "judge server already up at $URL ($(( $(date +%s) - t0 ))s)"
  say "stop it with: bash tests/engines/judge_down.sh"
  exit 0
fi
"$PY" -c "import fastapi, uvicorn, transformers.cli.serve" 2>/dev/null \
  || die "$PY lacks transformers[serving] (pip install -e '.[engines]')"
mkdir -p "$DIR"
if [[ ! -s $DIR/model/config.json ]]; then
  PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} HF_HUB_OFFLINE=1 "$PY" -m tests.engines.tiny_judge "$DIR/model" >/dev/null
fi
# Offline, on loopback, pinned to the one model (it is then the only one /v1/models lists); its own session so that
# it outlives this script; judge_down.sh stops it by the pid in state.json.
HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 setsid nohup "$PY" -c \
  'import sys; from transformers.cli.transformers import main; sys.argv[0] = "transformers"; sys.exit(main())' \
  serve "$DIR/model" --host 127.0.0.1 --port "$PORT" --device cpu --log-level info > "$LOG" 2>&1 < /dev/null &
pid=$!
for _ in $(seq 240); do
  answers && break
  kill -0 "$pid" 2>/dev/null || die "transformers serve exited (log: $LOG): $(tail -3 "$LOG")"
  sleep 0.5
done
answers || die "transformers serve did not answer at $URL within 120s (log: $LOG)"
version=$("$PY" -c "import transformers; print(transformers.__version__)")
printf '{"base_url": "%s", "model": "%s", "pid": %d, "log": "%s", "transformers": "%s"}\n' \
  "$URL" "$DIR/model" "$pid" "$LOG" "$version" > "$STATE"
say "transformers $version serve up at $URL in $(( $(date +%s) - t0 ))s (model $DIR/model, pid $pid, log $LOG)"
say "stop it with: bash tests/engines/judge_down.sh"
