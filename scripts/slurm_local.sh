#!/usr/bin/env bash
# A single-node SLURM on this machine, for trying and testing `fedrun -m hydra/launcher=slurm`.
#
#   scripts/slurm_local.sh start    # install (Debian/Ubuntu: apt-get), configure, start; idempotent
#   scripts/slurm_local.sh status   # exit 0 when the controller answers and the node takes jobs
#   scripts/slurm_local.sh stop     # stop slurmctld, slurmd and munged (packages stay installed)
#
# Needs root (packages, daemons, /etc/slurm). The node is this machine under its real short
# hostname, with its real core count and memory (minus 1 GiB for the system); one partition
# `local` (the default) without a time limit, so jobs may ask for short limits (--time=1 is
# the shortest SLURM has). No accounting daemon: `sacct` does not work, which fedprox_cli's
# launcher handles (it asks squeue). KillWait is short (10 s between SIGTERM and SIGKILL), a
# requeued job may start again after 10 s (cred_expire; SLURM's default is 120 s), the
# scheduler looks at pending jobs every 5 s (SLURM: 30-60 s) and
# the controller checks time limits every 30 s, so time-limit tests end quickly.
set -euo pipefail

CONF_DIR=/etc/slurm
CONF=$CONF_DIR/slurm.conf
SPOOL=/var/spool/slurm-local
LOGS=/var/log/slurm-local
PACKAGES=(slurmctld slurmd slurm-client munge)

die() { echo "slurm_local.sh: $*" >&2; exit 1; }

need_root() { [ "$(id -u)" = 0 ] || die "run as root (it installs packages and starts daemons)"; }

install_packages() {
  local missing=()
  for p in "${PACKAGES[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} = 0 ] && return
  command -v apt-get >/dev/null || die "needs apt-get to install ${missing[*]} (or install SLURM yourself)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q "${missing[@]}" >/dev/null 2>&1 ||
    { apt-get update -q >/dev/null && apt-get install -y -q "${missing[@]}" >/dev/null; } ||
    die "apt-get could not install ${missing[*]}"
}

write_conf() {
  local host cpus mem
  host=$(hostname -s)
  cpus=$(nproc --all)
  mem=$(awk '/MemTotal/ {m = int($2 / 1024) - 1024; print (m < 512 ? 512 : m)}' /proc/meminfo)
  mkdir -p "$CONF_DIR" "$SPOOL/ctld" "$SPOOL/d" "$LOGS"
  cat >"$CONF.new" <<EOF
# Written by fedprox_cli's scripts/slurm_local.sh: a single-node SLURM on $host.
ClusterName=fedprox-local
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=cred_expire=10
StateSaveLocation=$SPOOL/ctld
SlurmdSpoolDir=$SPOOL/d
SlurmctldPidFile=/run/slurmctld-local.pid
SlurmdPidFile=/run/slurmd-local.pid
SlurmctldLogFile=$LOGS/slurmctld.log
SlurmdLogFile=$LOGS/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=5,sched_interval=5
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
ReturnToService=2
JobRequeue=1
KillWait=10
MinJobAge=600
InactiveLimit=0
SlurmdTimeout=60
MpiDefault=none
NodeName=$host CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=local Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
  if cmp -s "$CONF.new" "$CONF"; then rm "$CONF.new"; return 1; fi
  mv "$CONF.new" "$CONF"
  return 0
}

munge_up() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }
ctld_up() { scontrol ping 2>/dev/null | grep -q "is UP"; }
node_state() { sinfo -h -N -o %T 2>/dev/null | head -1; }
node_ready() { case "$(node_state)" in idle*|mixed*|alloc*|allocated*|completing*) return 0;; *) return 1;; esac; }
pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

wait_for() {  # wait_for SECONDS WHAT COMMAND...
  local t=$1 what=$2; shift 2
  for _ in $(seq "$t"); do "$@" && return 0; sleep 1; done
  die "$what did not come up within ${t}s (logs: $LOGS)"
}

start() {
  need_root
  install_packages
  local changed=0
  write_conf && changed=1
  if ! munge_up; then
    [ -s /etc/munge/munge.key ] || mungekey --create --force >/dev/null
    chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
    mkdir -p /run/munge /var/log/munge /var/lib/munge && chown munge:munge /run/munge /var/log/munge /var/lib/munge
    runuser -u munge -- /usr/sbin/munged --force
    wait_for 20 munged munge_up
  fi
  if [ $changed = 1 ] && { pid_alive /run/slurmctld-local.pid || pid_alive /run/slurmd-local.pid; }; then
    stop_slurm   # the configuration changed: restart with the new one
  fi
  pid_alive /run/slurmctld-local.pid || slurmctld
  wait_for 30 slurmctld ctld_up
  pid_alive /run/slurmd-local.pid || slurmd
  case "$(node_state)" in down*|drain*|fail*) scontrol update nodename="$(hostname -s)" state=resume || true;; esac
  wait_for 60 "node $(hostname -s)" node_ready
  echo "slurm_local.sh: SLURM is up: node $(hostname -s) ($(nproc --all) CPUs), partition local"
}

stop_slurm() {
  local f
  for f in /run/slurmd-local.pid /run/slurmctld-local.pid; do
    if pid_alive "$f"; then
      kill "$(cat "$f")" || true
      for _ in $(seq 20); do pid_alive "$f" || break; sleep 0.5; done
    fi
  done
}

stop() {
  need_root
  stop_slurm
  if [ -f /run/munge/munged.pid ] && kill -0 "$(cat /run/munge/munged.pid)" 2>/dev/null; then
    kill "$(cat /run/munge/munged.pid)"
  fi
  echo "slurm_local.sh: stopped"
}

status() {
  if command -v scontrol >/dev/null && ctld_up && node_ready; then
    echo "slurm_local.sh: up: node $(hostname -s) is $(node_state)"
  else
    echo "slurm_local.sh: down"; return 1
  fi
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
