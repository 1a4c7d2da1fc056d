#!/usr/bin/env bash
# Fuzzes under libFuzzer + ASan + UBSan + LeakSanitizer, each target for SECONDS
# (default 60) in turn:
#   cron_parse    fuzz/cron_parse_fuzz.cc: the cron parser, then Next/Prev on success
#   config_load   fuzz/config_load_fuzz.cc: the job-file loader (YAML → validated Config)
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]    (default: every target)
#   SECONDS=0 means no time limit; FUZZ_RUNS=N stops each target after N executions
#   (the 10-million run: FUZZ_RUNS=10000000 scripts/fuzz.sh 0 config_load).
#   FUZZ_ARGS adds libFuzzer flags (e.g. FUZZ_ARGS=-seed=1).
#   The targets run one after the other, so the whole run takes SECONDS per target:
#   scripts/test.sh (CI) gives each half of its budget.
# Builds with clang in its own directory (${BUILD_DIR:-build-fuzz}); each target runs
# against a copy of its committed seeds (fuzz/corpus/<target>/) so they stay small.
# config_load's seeds are the tests' job files: every distinct text tests/config's
# config_test loads (written out once while it ran), plus jobs.example.yaml and
# packaging/jobs.example.yaml.
# Exit status: 0 when no target found a crash, hang (>5 s on one input), leak or OOM;
# 1 otherwise, with the reproducer in <build>/artifacts/<target>/.
# Reproduce one: <build>/fuzz/<target>_fuzz <build>/artifacts/<target>/crash-...
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-60}
shift || true
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(cron_parse config_load)
build=${BUILD_DIR:-$here/build-fuzz}

# Per target: the longest input tried, and extra flags (its dictionary).
declare -A max_len=([cron_parse]=256 [config_load]=4096)
declare -A extra=([cron_parse]="-dict=$here/fuzz/cron_parse.dict" [config_load]="-dict=$here/fuzz/config_load.dict")
binaries=()
for t in "${targets[@]}"; do
  if [[ -z ${max_len[$t]+set} ]]; then
    echo "fuzz: unknown target '$t' (known: ${!max_len[*]})" >&2
    exit 2
  fi
  binaries+=("${t}_fuzz")
done

CC=${FUZZ_CC:-clang} CXX=${FUZZ_CXX:-clang++} cmake -S "$here" -B "$build" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTICKD_FUZZ=ON -DTICKD_BUILD_TESTS=OFF \
  -DTICKD_BUILD_BENCH=OFF -DTICKD_SANITIZE=OFF >/dev/null
cmake --build "$build" -j "${JOBS:-2}" --target "${binaries[@]}"

runs=()
[[ -n ${FUZZ_RUNS:-} ]] && runs=(-runs="$FUZZ_RUNS")
limit="${seconds} s"
[[ $seconds == 0 ]] && limit="no time limit"
[[ -n ${FUZZ_RUNS:-} ]] && limit+=", ${FUZZ_RUNS} runs"

failed=()
for t in "${targets[@]}"; do
  corpus="$build/corpus/$t"
  artifacts="$build/artifacts/$t"
  rm -rf "$corpus"
  mkdir -p "$corpus" "$artifacts"
  cp "$here"/fuzz/corpus/"$t"/* "$corpus/"

  echo "== fuzzing ${t}_fuzz ($limit)"
  status=0
  # malloc_context_size: ASan keeps every distinct allocation stack for good, and
  # Debian's yaml-cpp has no frame pointers, so the fast unwinder reads a different
  # stack past it for nearly every input: with the default 30 frames that store grew
  # ~1 KB an input and config_load slowed from 4000 to 1900 exec/s in 8 minutes.
  # 5 frames still name the allocating function in a report; detection is the same.
  # shellcheck disable=SC2086  # extra and FUZZ_ARGS are lists of flags
  ASAN_OPTIONS=detect_leaks=1:malloc_context_size=5 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$build/fuzz/${t}_fuzz" "$corpus" \
    -max_total_time="$seconds" "${runs[@]}" -timeout=5 -rss_limit_mb=2048 -detect_leaks=1 \
    -max_len="${max_len[$t]}" ${extra[$t]} ${FUZZ_ARGS:-} -print_final_stats=1 \
    -artifact_prefix="$artifacts/" || status=$?
  if [[ $status -ne 0 ]]; then
    echo "fuzz: ${t}_fuzz failed (status $status); reproducer(s):" >&2
    ls -1 "$artifacts" >&2 || true
    failed+=("$t")
  else
    echo "fuzz: ${t}_fuzz: no crash, hang or leak ($limit, $(ls "$corpus" | wc -l) corpus entries)"
  fi
done
[[ ${#failed[@]} -eq 0 ]] || { echo "fuzz: failed: ${failed[*]}" >&2; exit 1; }
