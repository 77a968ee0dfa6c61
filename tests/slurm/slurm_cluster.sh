#!/usr/bin/env bash
# A private two-node Slurm cluster on loopback for the Slurm launcher's tests:
# munged with its own key and socket, slurmctld, and two slurmd on this host, all
# from a slurm.conf and cgroup.conf generated in DIR (no systemd). Clients use it with
# SLURM_CONF=DIR/slurm.conf. The nodes are named mlb<port>n1 and mlb<port>n2 (listed in
# DIR/nodes): Slurm's cgroups are named after the node, so two clusters started at once
# (two test runs) do not share them.
#
# Usage: slurm_cluster.sh start DIR   starts it; when it cannot (no Slurm, slurmd
#                                     does not come up) writes the reason to DIR/skip
#                                     and exits 0, so the tests skip saying why
#        slurm_cluster.sh stop DIR    stops every daemon by its pid file (also the
#                                     guard that stops them after a while by itself)
set -uo pipefail
cmd="${1:-}"
dir="${2:-}"
[[ -n "$cmd" && -n "$dir" ]] || { echo "usage: $0 start|stop DIR" >&2; exit 2; }
# How long the daemons may outlive a test run whose cleanup never came (ctest killed).
guard_seconds=${MLBENCH_SLURM_GUARD_SECONDS:-1200}

stop() {
  local f pid
  # The guard first (and its sleep), unless this is the guard itself stopping the cluster.
  if [[ -f "$dir/guard.pid" ]]; then
    pid=$(cat "$dir/guard.pid" 2>/dev/null)
    if [[ "$pid" =~ ^[0-9]+$ && "$pid" != "$$" && "$pid" != "${GUARD_PID:-}" ]]; then
      pkill -TERM -P "$pid" 2>/dev/null
      kill -TERM "$pid" 2>/dev/null
    fi
    rm -f "$dir/guard.pid"
  fi
  for f in "$dir"/slurmd.*.pid "$dir"/slurmctld.pid "$dir"/munged.pid; do
    [[ -f "$f" ]] || continue
    pid=$(cat "$f" 2>/dev/null)
    [[ "$pid" =~ ^[0-9]+$ ]] && kill -TERM "$pid" 2>/dev/null
  done
  for _ in $(seq 50); do  # up to 5 s for a clean exit, then SIGKILL
    local alive=0
    for f in "$dir"/slurmd.*.pid "$dir"/slurmctld.pid "$dir"/munged.pid; do
      [[ -f "$f" ]] && pid=$(cat "$f" 2>/dev/null) && [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null && alive=1
    done
    ((alive)) || break
    sleep 0.1
  done
  for f in "$dir"/slurmd.*.pid "$dir"/slurmctld.pid "$dir"/munged.pid; do
    [[ -f "$f" ]] && pid=$(cat "$f" 2>/dev/null) && [[ "$pid" =~ ^[0-9]+$ ]] && kill -KILL "$pid" 2>/dev/null
    rm -f "$f"
  done
  # What the cluster started and left: step daemons (a slurmstepd starts with its slurmd's
  # command line, naming this DIR's slurm.conf), then every process in its nodes' cgroups
  # (steps' tasks and daemons), then those (by now empty) cgroups slurm_<node>/ themselves.
  local p
  for p in /proc/[0-9]*; do
    [[ "${p#/proc/}" != "$$" ]] && { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -qF -- "-f $dir/slurm.conf" &&
      kill -KILL "${p#/proc/}" 2>/dev/null
  done
  if [[ -f "$dir/nodes" ]]; then
    local node
    while read -r node; do
      [[ -n "$node" ]] || continue
      for p in $(find /sys/fs/cgroup/*/"slurm_$node" -name cgroup.procs -exec cat {} + 2>/dev/null); do
        kill -KILL "$p" 2>/dev/null
      done
      sleep 0.2
      find /sys/fs/cgroup/*/"slurm_$node" -depth -type d -exec rmdir {} + 2>/dev/null
    done <"$dir/nodes"
  fi
  return 0
}

skip() {
  echo "$*" >"$dir/skip"
  echo "slurm_cluster: cannot start a private Slurm cluster: $*" >&2
  stop
  exit 0
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# Three consecutive free ports from one derived from our pid and the attempt (parallel runs
# differ), below the kernel's ephemeral range: a port in it may be the local end of any outgoing
# connection (or one in TIME_WAIT), which a connect() does not see but slurmctld's bind() does.
# MLBENCH_SLURM_PORT: the first attempt's first port (tests).
pick_ports() {
  local attempt=$1 low span i
  low=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null) || low=32768
  span=$((${low:-32768} - 20000 - 600))
  ((span >= 600)) || span=600
  local base=$((20000 + ($$ * 7 + attempt * 997) % span))
  ((attempt == 0)) && [[ -n "${MLBENCH_SLURM_PORT:-}" ]] && base=$MLBENCH_SLURM_PORT
  for ((i = 0; i < 200; i++)); do
    local p=$((base + i * 3))
    if port_free "$p" && port_free $((p + 1)) && port_free $((p + 2)); then echo "$p"; return 0; fi
  done
  return 1
}

# Whether the process in pid file $1 is alive.
alive() { local pid; pid=$(cat "$1" 2>/dev/null) && [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null; }

start() {
  for b in munged slurmctld slurmd srun; do
    command -v "$b" >/dev/null || skip "$b not installed (apt-get install slurm-wlm munge)"
  done
  [[ $(id -u) -eq 0 ]] || skip "slurmd needs root (to create cgroups and switch users)"
  local attempt
  # A controller whose port was taken between the check and its bind dies at once: another
  # set of ports, three times at most.
  for attempt in 0 1 2; do
    start_once "$attempt" && return 0
    echo "slurm_cluster: slurmctld could not bind port $(awk -F= '/^SlurmctldPort=/ {print $2}' "$dir/slurm.conf"): trying other ports" >&2
  done
  skip "slurmctld found no free port in three tries: $(grep -m1 fatal "$dir/slurmctld.log")"
}

# One try; returns 1 when the controller died of a port in use (the caller tries other ports).
start_once() {
  stop  # leftovers of an earlier run (or try) in the same DIR
  rm -rf "$dir"
  mkdir -p "$dir/state" "$dir/spool"
  local host ports cpus mem
  host=$(hostname -s)
  ports=$(pick_ports "$1") || skip "no free ports"
  local node="mlb${ports}n"
  printf '%s\n' "${node}1" "${node}2" >"$dir/nodes"
  cpus=$(nproc)
  mem=$(($(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / 4))  # MiB per emulated node
  dd if=/dev/urandom of="$dir/munge.key" bs=1024 count=1 status=none
  chmod 400 "$dir/munge.key"
  munged -f --key-file="$dir/munge.key" --socket="$dir/munge.socket" --pid-file="$dir/munged.pid" \
    --seed-file="$dir/munge.seed" --log-file="$dir/munged.log" || skip "munged did not start (see $dir/munged.log)"
  cat >"$dir/slurm.conf" <<CONF
# Generated by tests/slurm/slurm_cluster.sh: a private test cluster.
ClusterName=mlbenchtest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ports
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.%n.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.%n.log
ProctrackType=proctrack/cgroup
TaskPlugin=task/cgroup
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
JobAcctGatherType=jobacct_gather/cgroup
JobAcctGatherFrequency=1
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
SlurmdTimeout=30
InactiveLimit=0
KillWait=2
MessageTimeout=10
NodeName=${node}[1-2] NodeHostname=$host NodeAddr=127.0.0.1 Port=[$((ports + 1))-$((ports + 2))] CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=test Nodes=${node}[1-2] Default=YES MaxTime=INFINITE State=UP
CONF
  cat >"$dir/cgroup.conf" <<CONF
CgroupMountpoint=/sys/fs/cgroup
ConstrainCores=yes
ConstrainRAMSpace=yes
ConstrainSwapSpace=yes
AllowedSwapSpace=0
CONF
  export SLURM_CONF="$dir/slurm.conf"
  slurmctld -c -i -f "$SLURM_CONF" || skip "slurmctld did not start (see $dir/slurmctld.log)"
  for n in "${node}1" "${node}2"; do
    slurmd -N "$n" -f "$SLURM_CONF" || skip "slurmd -N $n did not start (see $dir/slurmd.$n.log)"
  done
  # The guard: stops everything by pid file if no `stop` came in time.
  (trap '' HUP; sleep "$guard_seconds"; GUARD_PID=$BASHPID "$0" stop "$dir") >/dev/null 2>&1 </dev/null &
  echo $! >"$dir/guard.pid"
  # Up to 15 s for both nodes to be idle; each sinfo bounded (with no controller it retries for
  # minutes), and a controller that died ends the wait at once.
  local deadline=$((SECONDS + 15))
  while ((SECONDS < deadline)); do
    if [[ -f "$dir/slurmctld.pid" ]] && ! alive "$dir/slurmctld.pid"; then  # written once it runs
      grep -q "Address already in use" "$dir/slurmctld.log" 2>/dev/null && return 1
      skip "slurmctld died: $(grep -m1 fatal "$dir/slurmctld.log") (see $dir/slurmctld.log)"
    fi
    if [[ $(timeout 3 sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l) -eq 2 ]]; then
      echo "slurm_cluster: up in $dir (ports $ports-$((ports + 2)))"
      return 0
    fi
    sleep 0.1
  done
  skip "the nodes did not become idle: $(timeout 3 sinfo -h -N -o '%N %T %E' 2>&1 | tr '\n' ';') (see $dir/slurmd.${node}1.log)"
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop DIR" >&2; exit 2 ;;
esac
