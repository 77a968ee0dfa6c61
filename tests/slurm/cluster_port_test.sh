#!/usr/bin/env bash
# The private cluster comes up when its controller's port is taken between the check and the bind:
# a socket bound to the port without listening looks free to a connect(), and slurmctld then dies
# with "Address already in use". Before the fix the start waited on sinfo for ~25 minutes (ctest's
# fixture hung in a full run); now it tries other ports. Usage: cluster_port_test.sh DIR
set -u
dir=$1
here=$(dirname "$(realpath "$0")")
python=/usr/bin/python3
command -v slurmctld >/dev/null || { echo "SKIPPED: slurmctld not installed"; exit 0; }
[[ $(id -u) -eq 0 ]] || { echo "SKIPPED: slurmd needs root"; exit 0; }
port=$("$python" - <<'PY'
import socket
for p in range(21000, 32000, 3):
    try:
        s = socket.socket(); s.bind(("0.0.0.0", p)); s.close()
        print(p); break
    except OSError:
        pass
PY
)
# Hold the port, bound and not listening, while the cluster starts.
"$python" -c 'import socket, sys, time
s = socket.socket(); s.bind(("0.0.0.0", int(sys.argv[1]))); print("held", flush=True); time.sleep(120)' "$port" &
holder=$!
trap 'kill $holder 2>/dev/null; "$here/slurm_cluster.sh" stop "$dir"' EXIT
sleep 0.5
start=$SECONDS
out=$(MLBENCH_SLURM_PORT=$port timeout 120 "$here/slurm_cluster.sh" start "$dir" 2>&1)
rc=$?
echo "$out"
if [[ -f "$dir/skip" ]]; then
  echo "SKIPPED: $(cat "$dir/skip")"
  grep -q "Address already in use\|no free port" "$dir/skip" && { echo "FAIL: it gave up on the taken port"; exit 1; }
  exit 0
fi
((rc == 0)) || { echo "FAIL: the start ended with $rc after $((SECONDS - start)) s"; exit 1; }
grep -q "trying other ports" <<<"$out" || { echo "FAIL: the taken port $port was not tried first"; exit 1; }
grep -q "up in" <<<"$out" || { echo "FAIL: the cluster did not come up"; exit 1; }
used=$(awk -F= '/^SlurmctldPort=/ {print $2}' "$dir/slurm.conf")
[[ "$used" != "$port" ]] || { echo "FAIL: the controller is on the taken port"; exit 1; }
echo "the controller's port $port was taken; the cluster came up on $used in $((SECONDS - start)) s"
