#!/usr/bin/env bash
# The busy-instant trial (issue #25; bench/README.md "The busy instant"): builds tickd,
# the trial driver and its in-process plugin, then runs
#
#   bench/burst_trial.sh --backend etcd|zookeeper|redis|postgres|sqlite [--jobs N]
#                        [--replicas R] [--seconds S] [--schedule EXPR] [--out DIR]
#                        [--warmup S] [--settle S] [--lock 'key: value'] [--max-p99-ms MS]
#                        [--ahead-ms MS]
#
# (defaults: 5,000 jobs, 3 replicas, a 60 s window, '*/10 * * * * *'). The store is
# started on a free loopback port from Debian's package (as tests/etcd, tests/zookeeper,
# … start it); the job file gives every job the plugin tests/e2e/burst_stamp_plugin.c
# (isolation: none), which notes its start, and max_concurrent_runs 2 × N. The window
# begins --warmup s after every replica logged its `start` line; the job-ticks judged
# are those whose instant lies in it. Prints the uptime before and after, then
# tests/e2e/burst_trial.cc's report: job-ticks due, ran once / twice / never, run
# start − T, when the winning claims were answered, each replica's claim outcomes and
# warnings, the load average. Exit status 0 when every judged job-tick ran exactly
# once and none started before T (and within --max-p99-ms when given). The folder
# keeps the job file, the replicas' logs, runs.txt and report.txt.
# The build: ${BUILD_DIR:-build} (RelWithDebInfo, as scripts/build.sh makes it).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$here/build}
for a in "$@"; do
  case "$a" in
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  esac
done
echo "== build (tickd, burst_trial, burst_stamp_plugin)" >&2
BUILD_DIR="$build" JOBS=${JOBS:-1} TARGET="tickd burst_stamp_plugin burst_trial" \
  bash "$here/scripts/build.sh" -DTICKD_BUILD_TESTS=ON >&2
out=()
[[ " $* " == *" --out "* ]] || out=(--out "$(mktemp -d /tmp/tickd-burst-XXXXXX)")
echo "uptime at start: $(uptime)"
status=0
"$build/tests/e2e/burst_trial" "$@" "${out[@]}" || status=$?
echo "uptime at end: $(uptime)"
exit "$status"
