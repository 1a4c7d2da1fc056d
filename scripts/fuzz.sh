#!/usr/bin/env bash
# Fuzzes the cron parser (fuzz/cron_parse_fuzz.cc: Parse, then Next/Prev on success)
# for N seconds (default 60) under libFuzzer + ASan + UBSan + LeakSanitizer.
# Builds with clang in its own directory (${BUILD_DIR:-build-fuzz}); runs against a
# copy of fuzz/corpus/cron_parse so the committed seeds stay small.
# Exit status: 0 when no crash, hang (>5 s on one input), leak or OOM was found;
# non-zero otherwise, with the reproducer in <build>/artifacts/.
# Reproduce one: <build>/fuzz/cron_parse_fuzz <build>/artifacts/crash-...
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-60}
build=${BUILD_DIR:-$here/build-fuzz}

CC=${FUZZ_CC:-clang} CXX=${FUZZ_CXX:-clang++} cmake -S "$here" -B "$build" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTICKD_FUZZ=ON -DTICKD_BUILD_TESTS=OFF \
  -DTICKD_BUILD_BENCH=OFF -DTICKD_SANITIZE=OFF >/dev/null
cmake --build "$build" -j "${JOBS:-2}" --target cron_parse_fuzz

corpus="$build/corpus/cron_parse"
artifacts="$build/artifacts"
rm -rf "$corpus"
mkdir -p "$corpus" "$artifacts"
cp "$here"/fuzz/corpus/cron_parse/* "$corpus/"

echo "== fuzzing cron_parse_fuzz for ${seconds} s"
status=0
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  "$build/fuzz/cron_parse_fuzz" "$corpus" \
  -max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 -detect_leaks=1 \
  -max_len=256 -print_final_stats=1 -artifact_prefix="$artifacts/" || status=$?
if [[ $status -ne 0 ]]; then
  echo "fuzz: cron_parse_fuzz failed (status $status); reproducer(s):" >&2
  ls -1 "$artifacts" >&2 || true
  exit 1
fi
echo "fuzz: no crash, hang or leak in ${seconds} s ($(ls "$corpus" | wc -l) corpus entries)"
