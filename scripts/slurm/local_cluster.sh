#!/bin/bash
# A one-node SLURM cluster on this machine, for tests and for trying the SLURM scripts
# (docs/scale-out.md#cpu-partitions-and-a-local-slurm-cluster). Debian's slurm-wlm (22.05) and
# munge: a controller (slurmctld) and one compute daemon (slurmd) on localhost, CPU only, with job
# completion records in a text file so that `sacct --completion` reports finished jobs without a
# database.
#
#   scripts/slurm/local_cluster.sh install      # apt-get install slurm-wlm munge (root), if missing
#   scripts/slurm/local_cluster.sh start DIR    # write DIR/slurm.conf, start the daemons, wait
#   export SLURM_CONF=DIR/slurm.conf            # then sbatch, squeue, scancel, sacct -c use it
#   scripts/slurm/local_cluster.sh stop DIR     # cancel its jobs, stop the daemons
#
# Everything the cluster writes (configuration, munge key and socket, controller state, logs)
# stays in DIR; the ports are free ones chosen at start, so two clusters can run side by side.
# The daemons run as root, as on a real cluster (slurmd starts each job as the user who
# submitted it). CPUS (default 8) is the node's CPU count as declared to SLURM: more than the
# machine has is allowed (config_overrides), so small jobs run side by side.

set -euo pipefail

PACKAGES=(slurm-wlm munge)
PATH=$PATH:/usr/sbin:/sbin          # the daemons, off the PATH of users other than root
NODE=clew-local

die() { echo "error: $*" >&2; exit 1; }

installed() {
  command -v sbatch >/dev/null && command -v slurmctld >/dev/null &&
    command -v slurmd >/dev/null && command -v munged >/dev/null
}

install() {
  installed && return 0
  # exit 2: cannot install here (the tests skip on it), unlike a failed install (exit 1)
  if [[ "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null; then
    echo "error: slurm-wlm and munge are not installed, and installing them needs root and" \
      "apt-get (as root: apt-get install ${PACKAGES[*]})" >&2
    exit 2
  fi
  apt-get update -qq
  # policy-rc.d or not, the packaged services are not wanted: the cluster runs from DIR
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${PACKAGES[@]}" >/dev/null
  installed || die "apt-get installed ${PACKAGES[*]}, but sbatch, slurmctld, slurmd or munged" \
    "is still missing"
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

write_conf() {
  local dir=$1 host
  host=$(hostname -s)
  cat >"$dir/slurm.conf" <<EOF
# written by scripts/slurm/local_cluster.sh: one node on localhost, CPU only
ClusterName=clew-local
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
# no cgroups in containers: track a job's processes by their parent ids
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
# no database: finished jobs go to a text file, which \`sacct --completion\` reads
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/log/jobcomp.txt
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
# SIGTERM, then SIGKILL this many seconds later (a cancel, a time limit): SLURM's default
KillWait=30
MinJobAge=600
NodeName=$NODE NodeHostname=$host NodeAddr=127.0.0.1 CPUs=${CPUS:-8} RealMemory=${MEMORY_MB:-8000} State=UNKNOWN
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
}

start() {
  local dir
  mkdir -p "$1"
  dir=$(cd "$1" && pwd)
  install
  if [[ "$(id -u)" != 0 ]]; then
    echo "error: the local cluster runs munged, slurmctld and slurmd as root; run it as root" >&2
    exit 2
  fi
  # a unix socket path has at most 107 bytes
  ((${#dir} <= 80)) || die "DIR: $dir is longer than 80 characters (munge's socket goes in it)"
  if [[ -e "$dir/run/slurmctld.pid" ]] && kill -0 "$(cat "$dir/run/slurmctld.pid")" 2>/dev/null; then
    die "a cluster is already running from $dir (stop it first: $0 stop $dir)"
  fi
  mkdir -p "$dir"/{munge,state,spool,run,log}
  chmod 700 "$dir/munge"
  if [[ ! -s "$dir/munge/munge.key" ]]; then
    head -c 1024 /dev/urandom >"$dir/munge/munge.key"
    chmod 400 "$dir/munge/munge.key"
  fi
  # --force: munged refuses a socket that not every user can reach, as in a private temp
  # folder (pytest's); only this cluster's daemons and root's commands use it
  munged --force --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/run/munged.pid" --log-file="$dir/log/munged.log" \
    --seed-file="$dir/munge/munged.seed" ||
    die "munged did not start (log: $dir/log/munged.log)"
  write_conf "$dir"
  export SLURM_CONF=$dir/slurm.conf
  slurmctld -f "$SLURM_CONF" || die "slurmctld did not start (log: $dir/log/slurmctld.log)"
  slurmd -f "$SLURM_CONF" -N "$NODE" || die "slurmd did not start (log: $dir/log/slurmd-$NODE.log)"
  local state="" i
  for ((i = 0; i < 120; i++)); do
    state=$(sinfo -h -N -n "$NODE" -o %T 2>/dev/null || true)
    [[ "$state" == idle ]] && break
    sleep 0.5
  done
  if [[ "$state" != idle ]]; then
    echo "error: node $NODE is '${state:-not reported}' after 60 s, not idle" \
      "(logs: $dir/log/); stopping the cluster" >&2
    stop "$dir"
    exit 1
  fi
  echo "SLURM $(sinfo --version | awk '{print $2}') cluster up: node $NODE idle;" \
    "export SLURM_CONF=$SLURM_CONF"
}

# SIGTERM to the daemons of these pid files at once (each takes about 2 s to stop), then wait;
# SIGKILL for one still there after 10 s
stop_daemons() {
  local pidfile pids=() pid i
  for pidfile in "$@"; do
    [[ -e "$pidfile" ]] || continue
    pid=$(cat "$pidfile")
    kill "$pid" 2>/dev/null && pids+=("$pid")
    rm -f "$pidfile"
  done
  for pid in "${pids[@]}"; do
    for ((i = 0; i < 100; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
  done
  return 0
}

stop() {
  local dir
  dir=$(cd "$1" && pwd)
  export SLURM_CONF=$dir/slurm.conf
  if [[ -e "$dir/run/slurmctld.pid" ]]; then
    # jobs first: slurmd ends their processes (SIGTERM, then SIGKILL after KillWait)
    local jobs i
    jobs=$(squeue -h -o %A 2>/dev/null || true)
    if [[ -n "$jobs" ]]; then
      # shellcheck disable=SC2086
      scancel $jobs 2>/dev/null || true
      for ((i = 0; i < 150; i++)); do
        [[ -z "$(squeue -h -t RUNNING,COMPLETING -o %A 2>/dev/null || true)" ]] && break
        sleep 0.1
      done
    fi
  fi
  stop_daemons "$dir/run/slurmd-$NODE.pid" "$dir/run/slurmctld.pid"
  stop_daemons "$dir/run/munged.pid"            # last: the others authenticate with it
  echo "cluster in $dir stopped"
}

case "${1:-}" in
  install) install ;;
  start) [[ $# == 2 ]] || die "usage: $0 start DIR"; start "$2" ;;
  stop) [[ $# == 2 ]] || die "usage: $0 stop DIR"; stop "$2" ;;
  *) die "usage: $0 install | start DIR | stop DIR" ;;
esac
