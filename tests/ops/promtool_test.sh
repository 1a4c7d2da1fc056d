#!/usr/bin/env bash
# Prometheus done properly (docs/design.md §9): two replicas share a SQLite store and
# serve /metrics; once every metric family has samples (runs done and failed, claims,
# lateness, skew), `promtool check metrics` must find no problem and no lint in what
# each serves. Then the shipped alert rules pass `promtool check rules` and their unit
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

cat >"$dir/jobs.yaml" <<'YAML'
version: 1
lock:
  backend: sqlite
http:
  listen: 127.0.0.1:${HTTP_PORT}
jobs:
  - name: beat
    schedule: "@every 1s"
    shell: echo beat
  - name: fails
    schedule: "@every 2s"
    jitter: 500ms
    shell: exit 3
YAML
chmod 644 "$dir/jobs.yaml"
fetch() { python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' "$1" 2>/dev/null; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
ports=($(free_port) $(free_port))
HTTP_PORT=${ports[0]} "$tickd" run -c "$dir/jobs.yaml" --node-id node-a >"$dir/a.log" 2>&1 & pids+=($!)
HTTP_PORT=${ports[1]} "$tickd" run -c "$dir/jobs.yaml" --node-id node-b >"$dir/b.log" 2>&1 & pids+=($!)

# Every family with samples on both replicas, or 30 s at most.
families=(tickd_ticks_total tickd_runs_total tickd_run_duration_seconds_bucket
  tickd_claim_duration_seconds_bucket tickd_fire_lateness_seconds_bucket tickd_tzdata_info
  tickd_tzdata_mismatch tickd_clock_skew_seconds)
ready=0
for _ in $(seq 60); do
  sleep 0.5
  ready=1
  for i in 0 1; do
    fetch "http://127.0.0.1:${ports[$i]}/metrics" >"$dir/metrics.$i" || { ready=0; continue; }
    for f in "${families[@]}"; do grep -q "^$f[{ ]" "$dir/metrics.$i" || ready=0; done
    grep -q '^tickd_runs_total{job_name="fails",outcome="failed"}' "$dir/metrics.$i" || ready=0
  done
  ((ready)) && break
done
for i in 0 1; do
  echo "--- /metrics of replica $i"
  cat "$dir/metrics.$i"
done
((ready)) || { echo "not every metric family had samples after 30 s"; cat "$dir/a.log" "$dir/b.log" | tail -40; exit 1; }

for i in 0 1; do
  # promtool exits non-zero on a problem; lints are printed with status 0 by some
  # releases, so any output at all fails the test too.
  out=$(promtool check metrics <"$dir/metrics.$i" 2>&1) || { echo "promtool check metrics: $out"; exit 1; }
  [[ -z "$out" ]] || { echo "promtool check metrics (replica $i): $out"; exit 1; }
done
echo "promtool check metrics: no problem, no lint"

promtool check rules "$packaging/tickd-alerts.yml"
(cd "$packaging" && promtool test rules tickd-alerts.test.yml)
echo "promtool test: ok"
