# studies/lib/nginx.sh: sourced by the bench scripts that read a dataset over HTTP: nginx over a
# folder on 127.0.0.1 at a free port, and mlbench-delay-proxy in front of it for added latency
# per request (this kernel has no netem qdisc; docs/reliability.md, "Servers in the HTTP tests").
# The same server as the tests' (tests/support/http_fixtures.h, NOTE [nginx in the tests]): one
# nginx process (master_process off) in a private prefix, as nobody when root, keep-alive for
# 100000 requests, sendfile, no access log; it dies with the script (setpriv --pdeathsig), so
# call the *_start functions from the script itself, never inside $(...) or a pipeline.
# Needs nginx (nginx-light), setpriv (util-linux), python3.
# shellcheck shell=bash disable=SC2034  # nginx_* and proxy_* are set for the caller

# nginx_start SCRIPT ROOT [LIMIT_RATE]: serves ROOT as / (LIMIT_RATE: nginx's limit_rate per
# connection, e.g. 10m; none by default). Waits until the port accepts (10 s at most). Sets
# nginx_pid, nginx_port, nginx_url (http://127.0.0.1:PORT) and nginx_prefix (config, logs).
# Exits 2 with a one-line error naming SCRIPT when nginx is missing, ROOT is not readable by
# nobody, or nginx does not start (its error log's last line). Stop it with nginx_stop (e.g. in
# the caller's EXIT trap).
nginx_start() {
  local script=$1 served=$2 rate=${3:-} exe=${MLBENCH_NGINX:-/usr/sbin/nginx} as=() port i
  [[ -x "$exe" ]] || { echo "$script: error: nginx not found at $exe (apt-get install nginx-light, or set MLBENCH_NGINX)" >&2; exit 2; }
  [[ -d "$served" ]] || { echo "$script: error: $served is not a folder to serve" >&2; exit 2; }
  served=$(cd "$served" && pwd)
  if ((EUID == 0)); then
    as=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
    "${as[@]}" test -r "$served" -a -x "$served" ||
      { echo "$script: error: nginx runs as nobody, who cannot read $served: make it and every folder above it readable by others (chmod o+rx)" >&2; exit 2; }
  fi
  nginx_prefix=$(mktemp -d "${TMPDIR:-/tmp}/mlbench_nginx_XXXXXX")
  ((EUID != 0)) || chown nobody:nogroup "$nginx_prefix"
  for _ in 1 2 3; do
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    cat >"$nginx_prefix/nginx.conf" <<EOF
# Written by studies/lib/nginx.sh for $script.
daemon off;
master_process off;
pid $nginx_prefix/nginx.pid;
error_log $nginx_prefix/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  log_not_found off;
  sendfile on;
  tcp_nopush on;
  tcp_nodelay on;
  keepalive_requests 100000;
  keepalive_timeout 75s;
  server_tokens off;
  default_type application/octet-stream;
  client_body_temp_path $nginx_prefix/client_body;
  proxy_temp_path $nginx_prefix/proxy;
  fastcgi_temp_path $nginx_prefix/fastcgi;
  uwsgi_temp_path $nginx_prefix/uwsgi;
  scgi_temp_path $nginx_prefix/scgi;
  server {
    listen 127.0.0.1:$port;
    server_name localhost;
    root "$served";
    ${rate:+limit_rate $rate;}
  }
}
EOF
    rm -f "$nginx_prefix/nginx.pid" "$nginx_prefix/error.log"
    "${as[@]}" setpriv --pdeathsig KILL "$exe" -p "$nginx_prefix" -c "$nginx_prefix/nginx.conf" \
      -e "$nginx_prefix/error.log" </dev/null >"$nginx_prefix/stderr.log" 2>&1 &
    nginx_pid=$!
    for ((i = 0; i < 1000; i++)); do
      _mlbench_alive "$nginx_pid" || break
      if [[ "$(cat "$nginx_prefix/nginx.pid" 2>/dev/null)" == "$nginx_pid" ]] &&
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        nginx_port=$port
        nginx_url="http://127.0.0.1:$port"
        return 0
      fi
      sleep 0.01
    done
    local said
    said=$(cat "$nginx_prefix/stderr.log" "$nginx_prefix/error.log" 2>/dev/null | grep -v '^$' | tail -1 || true)
    kill -KILL "$nginx_pid" 2>/dev/null || true
    wait "$nginx_pid" 2>/dev/null || true
    [[ "$said" == *"Address already in use"* ]] && continue
    echo "$script: error: nginx did not start on 127.0.0.1:$port${said:+: $said} (config and logs: $nginx_prefix)" >&2
    exit 2
  done
  echo "$script: error: nginx found no free port on 127.0.0.1 in 3 attempts (logs: $nginx_prefix)" >&2
  exit 2
}

# nginx_stop: stops the nginx of nginx_start (SIGQUIT, SIGKILL after 5 s) and removes its prefix.
nginx_stop() {
  [[ -n "${nginx_pid:-}" ]] || return 0
  _mlbench_stop_pid "$nginx_pid" QUIT
  rm -rf "$nginx_prefix"
  nginx_pid=
}

# delay_proxy_start SCRIPT PROXY_BIN UPSTREAM_PORT DELAY_MS: mlbench-delay-proxy (PROXY_BIN, e.g.
# $build/bin/mlbench-delay-proxy) on a free port of 127.0.0.1 in front of 127.0.0.1:UPSTREAM_PORT,
# every request DELAY_MS later. Sets proxy_pid, proxy_port and proxy_url. Exits 2 with a one-line
# error naming SCRIPT when it does not start (10 s at most). Stop it with delay_proxy_stop.
delay_proxy_start() {
  local script=$1 bin=$2 upstream=$3 delay=$4 file i
  [[ -x "$bin" ]] || { echo "$script: error: $bin not found (build it: ninja -C build mlbench-delay-proxy)" >&2; exit 2; }
  file=$(mktemp -u "${TMPDIR:-/tmp}/mlbench_proxy_port_XXXXXX")
  setpriv --pdeathsig KILL "$bin" --upstream "127.0.0.1:$upstream" --delay-ms "$delay" --port-file "$file" \
    </dev/null >"$file.log" 2>&1 &
  proxy_pid=$!
  for ((i = 0; i < 1000; i++)); do
    if [[ -s "$file" ]]; then
      proxy_port=$(<"$file")
      proxy_url="http://127.0.0.1:$proxy_port"
      rm -f "$file" "$file.log"
      return 0
    fi
    _mlbench_alive "$proxy_pid" || break
    sleep 0.01
  done
  echo "$script: error: mlbench-delay-proxy did not start: $(tail -1 "$file.log" 2>/dev/null)" >&2
  rm -f "$file" "$file.log"
  exit 2
}

# delay_proxy_stop: stops the proxy of delay_proxy_start (SIGTERM, SIGKILL after 5 s).
delay_proxy_stop() {
  [[ -n "${proxy_pid:-}" ]] || return 0
  _mlbench_stop_pid "$proxy_pid" TERM
  proxy_pid=
}

# _mlbench_stop_pid PID SIGNAL: sends SIGNAL to PID (a child of this shell), SIGKILL after 5 s; reaps it.
_mlbench_stop_pid() {
  local pid=$1 i
  kill "-$2" "$pid" 2>/dev/null || true
  for ((i = 0; i < 500; i++)); do
    _mlbench_alive "$pid" || break
    sleep 0.01
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

# _mlbench_alive PID: whether PID exists and has not exited (a child that exited stays a zombie,
# which kill -0 still finds, until it is reaped).
_mlbench_alive() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [[ "${stat%% *}" != Z ]]
}
