#!/usr/bin/env bash
# libtickd under an LD_PRELOAD clock faker (docs/libtickd.md): with libfaketime's
# defaults, which fake CLOCK_MONOTONIC without translating the deadlines of
# libstdc++'s steady_clock waits, tickd::Scheduler::start() throws instead of running
# one tick and then hanging; with FAKETIME_DONT_FAKE_MONOTONIC=1 (the wall clock alone
# faked) and without the faker it starts. Skips (77) without libfaketime.
# Usage: faked_clock_test.sh START_PROBE
set -euo pipefail
probe=$1
faker=/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1
if [ ! -e "$faker" ]; then echo "SKIP: $faker not installed (apt-get install faketime)"; exit 77; fi
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

runs=0
expect() {  # expect STATUS TEXT -- COMMAND…: COMMAND DIR, a fresh DIR each time
  local want=$1 text=$2 got=0 out
  shift 3
  runs=$((runs + 1))
  mkdir "$scratch/$runs"
  out=$(timeout 30 "$@" "$scratch/$runs") || got=$?
  echo "$* -> $got: $out"
  [ "$got" = "$want" ] || { echo "FAIL: exit $got, want $want"; exit 1; }
  case $out in *"$text"*) ;; *) echo "FAIL: output lacks \"$text\""; exit 1 ;; esac
}

expect 0 started -- "$probe"
expect 3 "refused: tickd::Scheduler::start: clock: " -- \
  env LD_PRELOAD="$faker" FAKETIME=+0 "$probe"
expect 0 started -- \
  env LD_PRELOAD="$faker" FAKETIME=+0 FAKETIME_DONT_FAKE_MONOTONIC=1 "$probe"
echo PASS
