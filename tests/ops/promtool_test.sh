#!/usr/bin/env bash
# Prometheus done properly (docs/design.md §9): two replicas share a store (SQLite,
# then a Redis server of the test's own) and serve /metrics; once every metric family
# has samples (runs done and failed, claims, lateness, skew), `promtool check metrics`
# must find no problem and no lint in what each serves. Then the shipped alert rules pass `promtool check rules` and their unit
# tests (`promtool test rules`). Without promtool (Debian: prometheus) it skips with
# status 77, saying so.
set -euo pipefail
tickd=$1
packaging=$2
if ! command -v promtool >/dev/null; then
  echo "SKIP: promtool not found (Debian package prometheus; scripts/install-deps.sh installs it)"
  exit 77
fi
dir=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; wait || true; rm -rf "$dir"; }
trap cleanup EXIT

fetch() { python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' "$1" 2>/dev/null; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# check_metrics NAME LOCK_YAML: two replicas on that store; once every metric family
# has samples on both (30 s at most), promtool checks what each serves.
check_metrics() {
  local name=$1 lock=$2 d="$dir/$1"
  mkdir -p "$d"
  cat >"$d/jobs.yaml" <<YAML
version: 1
lock:
$lock
http:
  listen: 127.0.0.1:\${HTTP_PORT}
jobs:
  - name: beat
    schedule: "@every 1s"
    shell: echo beat
  - name: fails
    schedule: "@every 2s"
    jitter: 500ms
    shell: exit 3
YAML
  chmod 644 "$d/jobs.yaml"
  local ports=($(free_port) $(free_port))
  HTTP_PORT=${ports[0]} "$tickd" run -c "$d/jobs.yaml" --node-id node-a >"$d/a.log" 2>&1 & pids+=($!)
  HTTP_PORT=${ports[1]} "$tickd" run -c "$d/jobs.yaml" --node-id node-b >"$d/b.log" 2>&1 & pids+=($!)

  local families=(tickd_ticks_total tickd_runs_total tickd_run_duration_seconds_bucket
    tickd_claim_duration_seconds_bucket tickd_fire_lateness_seconds_bucket tickd_tzdata_info
    tickd_tzdata_mismatch tickd_clock_skew_seconds)
  local ready=0 i f out
  for _ in $(seq 60); do
    sleep 0.5
    ready=1
    for i in 0 1; do
      fetch "http://127.0.0.1:${ports[$i]}/metrics" >"$d/metrics.$i" || { ready=0; continue; }
      for f in "${families[@]}"; do grep -q "^$f[{ ]" "$d/metrics.$i" || ready=0; done
      grep -q '^tickd_runs_total{job_name="fails",outcome="failed"}' "$d/metrics.$i" || ready=0
    done
    ((ready)) && break
  done
  for i in 0 1; do
    echo "--- $name: /metrics of replica $i"
    cat "$d/metrics.$i"
  done
  ((ready)) || {
    echo "$name: not every metric family had samples after 30 s"
    cat "$d/a.log" "$d/b.log" | tail -40
    exit 1
  }
  for i in 0 1; do
    # promtool exits non-zero on a problem; lints are printed with status 0 by some
    # releases, so any output at all fails the test too.
    out=$(promtool check metrics <"$d/metrics.$i" 2>&1) || { echo "$name: $out"; exit 1; }
    [[ -z "$out" ]] || { echo "$name, replica $i: promtool check metrics: $out"; exit 1; }
  done
  echo "$name: promtool check metrics: no problem, no lint"
}

check_metrics sqlite "  backend: sqlite"

# The same on a network store: a Redis server of the test's own on a free loopback port
# (scripts/install-deps.sh installs redis-server).
redis_port=$(free_port)
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
  >"$dir/redis.log" 2>&1 & pids+=($!)
for _ in $(seq 50); do
  redis-cli -p "$redis_port" ping 2>/dev/null | grep -q PONG && break
  sleep 0.1
done
check_metrics redis "  backend: redis
  url: redis://127.0.0.1:$redis_port"

promtool check rules "$packaging/tickd-alerts.yml"
(cd "$packaging" && promtool test rules tickd-alerts.test.yml)
echo "promtool test: ok"
