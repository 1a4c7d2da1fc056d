#!/usr/bin/env bash
# Builds cron_bench in Release (its own build dir) and runs it over the standard set
# (bench/data/cron_set.txt), 5 repetitions of each benchmark with 0.2 s minimum time,
# reporting the aggregates.
# Results: bench/results/cron_bench-<date>.json (full) and .txt (console table).
# Usage: bench/run_cron_bench.sh [extra Google Benchmark flags, e.g. --benchmark_filter=Next]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$here/build-bench}
out_dir=${OUT_DIR:-$here/bench/results}
mkdir -p "$out_dir"

cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=Release -DTICKD_BUILD_BENCH=ON \
  -DTICKD_BUILD_TESTS=OFF -DTICKD_SANITIZE=OFF >/dev/null
cmake --build "$build" -j "${JOBS:-2}" --target cron_bench

stamp=$(date -u +%Y%m%dT%H%M%SZ)
"$build/bench/cron_bench" \
  --benchmark_repetitions="${REPETITIONS:-5}" \
  --benchmark_min_time="${MIN_TIME:-0.2}" \
  --benchmark_report_aggregates_only=true \
  --benchmark_out="$out_dir/cron_bench-$stamp.json" --benchmark_out_format=json \
  "$@" | tee "$out_dir/cron_bench-$stamp.txt"
echo "results: $out_dir/cron_bench-$stamp.{json,txt}"
python3 "$here/bench/cron_bench_table.py" "$out_dir/cron_bench-$stamp.json" || \
  echo "cron_bench: a target was missed (see above)" >&2
