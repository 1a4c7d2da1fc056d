#!/usr/bin/env bash
# Idle cost of the daemon: one replica with JOBS_N (default 10,000) jobs that fire
# rarely (once a year), measured over SECONDS_RUN (default 60) s after start-up:
# CPU time as a share of one core, and resident memory above a baseline replica
# that has one such job. Targets (issue "daemon core"): CPU < 1 % of a core,
# < 2 KB per job above the baseline.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$here/build-bench}
jobs_n=${JOBS_N:-10000}
seconds=${SECONDS_RUN:-60}
cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=Release -DTICKD_BUILD_BENCH=ON \
  -DTICKD_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" -j 2 --target tickd >/dev/null
dir=$(mktemp -d /tmp/tickd-idle-XXXXXX)

write_jobs() {  # file count
  {
    echo "version: 1"
    echo "lock: { backend: sqlite, url: sqlite://./tickd-$2.db }"
    echo "jobs:"
    for i in $(seq 1 "$2"); do
      echo "  - { name: job-$i, schedule: \"$((i % 60)) $((i % 24)) 1 1 *\", shell: \"true\" }"
    done
  } > "$1"
  chmod 644 "$1"
}

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

measure() {  # jobs → "rss_kb cpu_percent"
  local file="$dir/jobs-$1.yaml" pid t0 t1
  write_jobs "$file" "$1"
  "$build/app/tickd" run -c "$file" --node-id idle --log-level warn > "$dir/idle-$1.log" 2>&1 &
  pid=$!
  sleep 5
  t0=$(cpu_ticks "$pid")
  sleep "$seconds"
  t1=$(cpu_ticks "$pid")
  local rss
  rss=$(rss_kb "$pid")
  kill -TERM "$pid"; wait "$pid" || true
  awk -v rss="$rss" -v d="$((t1 - t0))" -v hz="$(getconf CLK_TCK)" -v s="$seconds" \
    'BEGIN { printf "%d %.3f\n", rss, 100 * d / hz / s }'
}

read -r base_rss base_cpu < <(measure 1)
read -r rss cpu < <(measure "$jobs_n")
awk -v n="$jobs_n" -v br="$base_rss" -v r="$rss" -v bc="$base_cpu" -v c="$cpu" -v s="$seconds" 'BEGIN {
  printf "baseline (1 job): rss=%d KB cpu=%.3f%% of a core\n", br, bc;
  printf "%d jobs: rss=%d KB cpu=%.3f%% of a core over %d s\n", n, r, c, s;
  printf "per job above baseline: %.2f KB\n", (r - br) / n;
}'
