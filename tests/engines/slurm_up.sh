#!/usr/bin/env bash
# A one-node Slurm cluster with accounting, for the engine tests (tests/engines/, marker `slurm`).
#
# Installs (apt-get, root) and starts, by hand (no systemd): munged (as user munge), MariaDB, slurmdbd, slurmctld and
# slurmd. The config is generated at run time, because NodeName must equal `hostname -s` and the node's CPUs and
# memory are this machine's. Idempotent: with the cluster up it only checks it (about a second) and says so.
# Stop it with tests/engines/slurm_down.sh.
#
# Why accounting: without slurmdbd, `sacct` fails, job states read UNKNOWN and waiting on a cancelled job hangs.
#
# Settings (environment): WORLDMEM_SLURM_CLUSTER (cluster name, default worldmem), WORLDMEM_SLURM_PARTITION
# (default debug), WORLDMEM_SLURM_NO_INSTALL=1 (never apt-get: fail if a package is missing).
set -euo pipefail

CLUSTER=${WORLDMEM_SLURM_CLUSTER:-worldmem}
PARTITION=${WORLDMEM_SLURM_PARTITION:-debug}
NODE=$(hostname -s)
ETC=/etc/slurm
RUN=/run/slurm
LOG=/var/log/slurm
DB=slurm_acct_db
t0=$(date +%s)

say() { echo "slurm_up: $*"; }
die() { echo "slurm_up: error: $*" >&2; exit 1; }

# Slurm commands retry for MessageTimeout when a daemon is down: bound every probe.
q() { timeout 15 "$@" >/dev/null 2>&1; }
node_state() { timeout 15 sinfo -h -n "$NODE" -o %t 2>/dev/null | head -1 | tr -d '*~#!%$@^-'; }
cluster_ok() {
  q scontrol ping && q sacct -n -X -S now-1minutes && [[ "$(node_state)" =~ ^(idle|mix|alloc)$ ]]
}
# wait_for SECONDS WHAT CMD...: poll CMD every 0.5 s until it succeeds
wait_for() {
  local limit=$1 what=$2; shift 2
  local end=$(( $(date +%s) + limit ))
  until "$@"; do
    (( $(date +%s) < end )) || die "$what did not come up within ${limit}s (logs: $LOG/, /var/log/munge/, $LOG/mariadb.log)"
    sleep 0.5
  done
}
# running PIDFILE: the process named in PIDFILE is alive
running() { [[ -s $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

stop_hint() { say "stop it with: bash $(cd "$(dirname "$0")" && pwd)/slurm_down.sh"; }

if command -v scontrol >/dev/null && cluster_ok; then
  say "cluster '$CLUSTER' already up: node $NODE $(node_state), partition $PARTITION ($(( $(date +%s) - t0 ))s)"
  stop_hint
  exit 0
fi

[[ $(id -u) == 0 ]] || die "needs root (installs packages, starts the daemons as their users)"

# -- packages ------------------------------------------------------------------------------------------------------
need=()
for bin in slurmctld slurmd slurmdbd sbatch sacctmgr munged mariadbd; do
  command -v "$bin" >/dev/null || PATH=$PATH:/usr/sbin command -v "$bin" >/dev/null || need+=("$bin")
done
export PATH=$PATH:/usr/sbin:/sbin
if (( ${#need[@]} )); then
  [[ ${WORLDMEM_SLURM_NO_INSTALL:-0} == 1 ]] && die "missing ${need[*]} and WORLDMEM_SLURM_NO_INSTALL=1"
  say "installing slurm + munge + mariadb (missing: ${need[*]})"
  ti=$(date +%s)
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # The packages try to start their services; with no init system that fails harmlessly (we start them below).
  apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge slurmdbd mariadb-server \
    >/dev/null
  say "installed in $(( $(date +%s) - ti ))s"
fi

# -- munge (authentication) ----------------------------------------------------------------------------------------
install -d -o munge -g munge -m 0755 /run/munge
install -d -o munge -g munge -m 0700 /var/log/munge /var/lib/munge /etc/munge
if [[ ! -s /etc/munge/munge.key ]]; then
  dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
fi
chown munge:munge /etc/munge/munge.key && chmod 0400 /etc/munge/munge.key
if ! running /run/munge/munged.pid; then
  runuser -u munge -- /usr/sbin/munged --force
fi
wait_for 20 munged bash -c 'munge -n | unmunge >/dev/null 2>&1'

# -- MariaDB (the accounting store) --------------------------------------------------------------------------------
install -d -o mysql -g mysql -m 0755 /run/mysqld
install -d -o slurm -g slurm -m 0755 "$LOG" "$RUN" /var/spool/slurmctld
install -d -m 0755 /var/spool/slurmd
if [[ ! -d /var/lib/mysql/mysql ]]; then
  mariadb-install-db --user=mysql --datadir=/var/lib/mysql >/dev/null
fi
if ! mariadb-admin --socket=/run/mysqld/mysqld.sock ping >/dev/null 2>&1; then
  # own process group, detached: it outlives this script (slurm_down.sh stops it by its pid file)
  setsid nohup mariadbd --user=mysql --datadir=/var/lib/mysql --socket=/run/mysqld/mysqld.sock \
    --pid-file=/run/mysqld/mysqld.pid --skip-networking --log-error="$LOG/mariadb.log" >/dev/null 2>&1 < /dev/null &
fi
wait_for 60 MariaDB bash -c 'mariadb-admin --socket=/run/mysqld/mysqld.sock ping >/dev/null 2>&1'

# The database password lives only in slurmdbd.conf (mode 600, owner slurm); made once per machine.
PASSFILE=$ETC/.dbpass
install -d -m 0755 "$ETC"
[[ -s $PASSFILE ]] || (umask 077 && head -c 18 /dev/urandom | base64 | tr -d '/+=' > "$PASSFILE")
PASS=$(cat "$PASSFILE")
mariadb --socket=/run/mysqld/mysqld.sock <<SQL
CREATE DATABASE IF NOT EXISTS $DB;
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$PASS';
ALTER USER 'slurm'@'localhost' IDENTIFIED BY '$PASS';
GRANT ALL ON $DB.* TO 'slurm'@'localhost';
FLUSH PRIVILEGES;
SQL

# -- configuration (generated: this host's name, CPUs and memory) ---------------------------------------------------
# `slurmd -C` prints this node's line; give Slurm 90% of the memory so the node never drains for "low RealMemory".
read -r -a hw <<<"$(slurmd -C | head -1)"
declare -A H=()
for kv in "${hw[@]}"; do H[${kv%%=*}]=${kv#*=}; done
MEM=$(( ${H[RealMemory]:-2048} * 9 / 10 ))
cat > "$ETC/slurm.conf.new" <<CONF
# generated by tests/engines/slurm_up.sh: a one-node test cluster
ClusterName=$CLUSTER
SlurmctldHost=$NODE(127.0.0.1)
AuthType=auth/munge
SlurmUser=slurm
SlurmdUser=root
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd.pid
SlurmctldLogFile=$LOG/slurmctld.log
SlurmdLogFile=$LOG/slurmd.log
# no cgroups in a container: track processes through /proc, no task binding
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
# a job no node can ever run (more CPUs or memory than the node has) is refused by sbatch, not left pending
EnforcePartLimits=ALL
# fast kills: SIGTERM, then SIGKILL 2 s later (scancel, time limits)
KillWait=2
OverTimeLimit=0
InactiveLimit=0
MinJobAge=300
SlurmctldTimeout=30
SlurmdTimeout=60
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
JobCompType=jobcomp/none
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=${H[CPUs]:-1} Boards=${H[Boards]:-1} SocketsPerBoard=${H[SocketsPerBoard]:-1} CoresPerSocket=${H[CoresPerSocket]:-1} ThreadsPerCore=${H[ThreadsPerCore]:-1} RealMemory=$MEM State=UNKNOWN
PartitionName=$PARTITION Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
CONF
mv "$ETC/slurm.conf.new" "$ETC/slurm.conf"
chmod 0644 "$ETC/slurm.conf"

(umask 077 && cat > "$ETC/slurmdbd.conf" <<CONF
# generated by tests/engines/slurm_up.sh (mode 600, owner slurm: it holds the database password)
AuthType=auth/munge
DbdHost=localhost
SlurmUser=slurm
PidFile=$RUN/slurmdbd.pid
LogFile=$LOG/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageLoc=$DB
StorageUser=slurm
StoragePass=$PASS
CONF
)
chown slurm:slurm "$ETC/slurmdbd.conf" && chmod 0600 "$ETC/slurmdbd.conf"

# -- daemons -------------------------------------------------------------------------------------------------------
running $RUN/slurmdbd.pid || slurmdbd
wait_for 60 slurmdbd q sacctmgr -n list cluster
if ! timeout 15 sacctmgr -n -P list cluster format=cluster | grep -qx "$CLUSTER"; then
  sacctmgr -i add cluster "$CLUSTER" >/dev/null
fi
running $RUN/slurmctld.pid || slurmctld
wait_for 60 slurmctld q scontrol ping
running $RUN/slurmd.pid || slurmd
wait_for 60 "slurmd (node $NODE)" bash -c "[[ \"\$(sinfo -h -n $NODE -o %t 2>/dev/null | tr -d '*~#!%\$@^-')\" =~ ^(idle|mix|alloc|down|drain)$ ]]"
if [[ "$(node_state)" =~ ^(down|drain|drng)$ ]]; then  # left down by an earlier run: bring it back
  scontrol update nodename="$NODE" state=resume
fi
wait_for 60 "node $NODE idle" cluster_ok

say "cluster '$CLUSTER' up in $(( $(date +%s) - t0 ))s: node $NODE (${H[CPUs]:-1} CPUs, ${MEM} MB), partition $PARTITION"
stop_hint
