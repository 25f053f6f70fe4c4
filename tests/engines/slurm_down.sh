#!/usr/bin/env bash
# Stop the test cluster of tests/engines/slurm_up.sh: each daemon by the pid in its pid file (nothing else is
# touched). Safe to run when nothing is up. The packages, configs and the accounting database stay.
set -uo pipefail

stop() {  # stop NAME PIDFILE: TERM, wait up to 20 s, then KILL
  local name=$1 pidfile=$2 pid
  [[ -s $pidfile ]] || return 0
  pid=$(cat "$pidfile")
  kill -0 "$pid" 2>/dev/null || { rm -f "$pidfile"; return 0; }
  kill -TERM "$pid"
  for _ in $(seq 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
  rm -f "$pidfile"
  echo "slurm_down: stopped $name (pid $pid)"
}

stop slurmd /run/slurm/slurmd.pid
stop slurmctld /run/slurm/slurmctld.pid
stop slurmdbd /run/slurm/slurmdbd.pid
stop mariadb /run/mysqld/mysqld.pid
stop munged /run/munge/munged.pid
exit 0
