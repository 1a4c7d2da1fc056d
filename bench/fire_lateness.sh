#!/usr/bin/env bash
# Fire lateness of the daemon: JOBS_N jobs (default 100) every second on three
# replicas sharing the embedded SQLite backend, for SECONDS_RUN (default 30) s.
# Each run is bench/stamp.c, which records (its own start − T), or with STAMP=bare
# bench/stamp_bare.c, the same without a C library or dynamic loader (so the figure
# leaves out the job process's own start-up). Prints p50, p99 and max lateness and
# checks that every tick ran exactly once. TICKD_WRAP prefixes each replica's command
# (e.g. "chrt -f 10" to keep other load on the machine out of the figure).
# Target (issue "daemon core"): p99 < 5 ms.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$here/build-bench}
jobs_n=${JOBS_N:-100}
seconds=${SECONDS_RUN:-30}
cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=Release -DTICKD_BUILD_BENCH=ON \
  -DTICKD_BUILD_TESTS=OFF >/dev/null
stamp_target=tickd_stamp
[[ "${STAMP:-dynamic}" == bare ]] && stamp_target=tickd_stamp_bare
cmake --build "$build" -j 2 --target tickd "$stamp_target" >/dev/null

dir=$(mktemp -d /tmp/tickd-lateness-XXXXXX)
{
  echo "version: 1"
  echo "lock: { backend: sqlite, url: sqlite://./tickd.db }"
  echo "max_concurrent_runs: $((jobs_n * 2))"
  echo "jobs:"
  for i in $(seq 1 "$jobs_n"); do
    echo "  - { name: job-$i, schedule: \"* * * * * *\", run: [\"$build/bench/$stamp_target\", \"$dir/lateness.txt\"] }"
  done
} > "$dir/jobs.yaml"
chmod 644 "$dir/jobs.yaml"

pids=()
for node in ${NODES:-node-a node-b node-c}; do
  ${TICKD_WRAP:-} "$build/app/tickd" run -c "$dir/jobs.yaml" --node-id "$node" --log-level warn > "$dir/$node.log" 2>&1 &
  pids+=($!)
done
sleep 3   # let every replica start before the measured window
: > "$dir/lateness.txt"
sleep "$seconds"
kill -TERM "${pids[@]}"
wait "${pids[@]}" || true

runs=$(wc -l < "$dir/lateness.txt")
dups=$(awk '{print $1, $3}' "$dir/lateness.txt" | sort | uniq -d | wc -l)
sort -n -k4 "$dir/lateness.txt" | awk -v replicas="${#pids[@]}" -v runs="$runs" -v dups="$dups" -v jobs="$jobs_n" '
  { v[NR] = $4 }
  END {
    p50 = v[int(NR * 0.50) + 1]; p99 = v[int(NR * 0.99) + 1]; max = v[NR];
    printf "runs=%d jobs=%d replicas=%d duplicate_ticks=%d\n", runs, jobs, replicas, dups;
    printf "fire lateness (job process started - T): p50=%.2fms p99=%.2fms max=%.2fms\n",
           p50 / 1000, p99 / 1000, max / 1000;
  }'
echo "details in $dir"
[[ "$dups" == 0 ]]
