#!/usr/bin/env bash
# The whole test suite: installs dependencies, builds with warnings as errors, runs
# every test under ctest; then builds the unit tests under ASan+UBSan and runs them;
# then fuzzes (ASan+UBSan, libFuzzer) the cron parser and the job-file loader,
# FUZZ_SECONDS (default 80) split evenly between the two targets (40 s each).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
bash scripts/install-deps.sh

echo "== build (warnings as errors)"
BUILD_DIR="$here/build" bash scripts/build.sh -DTICKD_WERROR=ON -DTICKD_BUILD_TESTS=ON -DTICKD_BUILD_BENCH=ON
echo "== tests"
(cd build && ctest --output-on-failure -j2 --timeout 600) | tee build/ctest.log

if [[ "${TICKD_SKIP_SANITIZERS:-0}" != 1 ]]; then
  echo "== unit tests under ASan + UBSan"
  # Only what the unit tests need (tests/CMakeLists.txt, tickd_unit_tests): the tests
  # of the real servers run in the stage above.
  BUILD_DIR="$here/build-asan" BUILD_TYPE=Debug TARGET=tickd_unit_tests bash scripts/build.sh \
    -DTICKD_SANITIZE=ON -DTICKD_WERROR=ON -DTICKD_BUILD_BENCH=OFF
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
     ctest --output-on-failure -j2 --timeout 900 -L unit)
fi

if [[ "${TICKD_SKIP_FUZZ:-0}" != 1 && -x scripts/fuzz.sh ]]; then
  # fuzz.sh gives each target its seconds in turn: half the budget each (never 0,
  # which fuzz.sh takes as "no time limit").
  per_target=$(( ${FUZZ_SECONDS:-80} / 2 ))
  (( per_target > 0 )) || per_target=1
  echo "== fuzz the cron parser and the job-file loader, ${per_target} s each"
  bash scripts/fuzz.sh "$per_target"
fi

# One closing line for the whole run (ctest's own summary scrolled past above).
total=$(sed -nE 's/.*tests passed, ([0-9]+) tests failed out of ([0-9]+).*/\2 \1/p' build/ctest.log | tail -1)
read -r all failed <<<"${total:-0 0}"
echo "tests: $((all - failed)) passed, $failed failed"
