#!/usr/bin/env bash
# Stop the judge server of tests/engines/judge_up.sh by the pid in its state file (nothing else is touched).
set -uo pipefail
DIR=${WORLDMEM_JUDGE_DIR:-/tmp/worldmem-judge}
STATE=$DIR/state.json
[[ -s $STATE ]] || exit 0
pid=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['pid'])" "$STATE")
if kill -0 "$pid" 2>/dev/null; then
  kill -TERM "$pid"
  for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
  echo "judge_down: stopped transformers serve (pid $pid)"
fi
rm -f "$STATE"
