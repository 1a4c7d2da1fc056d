#!/usr/bin/env bash
# The nemesis (issue #14; docs/reliability.md): builds tickd and the nemesis
# programs, then runs the fault matrix against one backend or all of them.
#
#   scripts/nemesis.sh --backend sqlite|redis|redis-sentinel|etcd|postgres|zookeeper|all
#                      [--faults a,b]
#                      [--minutes M --seed S] [--json FILE] [other nemesis flags]
#
# Without --seed: the fixed matrix, one cell per fault kind (about 25 s a cell).
# With --seed S --minutes M: a random schedule of faults drawn from S, M minutes long
# per backend; the same seed draws the same schedule (printed first).
# Prints the table backend × fault; exits non-zero when a cell shows a duplicate, a
# stale write accepted, a miss no fault explains, a late write (a run writing after its
# lease ended), an early start (a run before its tick), or could not run. Partition and
# disk-full cells need root (network namespaces, tmpfs); without it they are printed
# as skipped.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$here/build}
args=("$@")
for a in "${args[@]}"; do
  case "$a" in
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  esac
done
echo "== build (tickd, nemesis, nemesis_resource, nemesis_write)" >&2
for target in tickd nemesis_resource nemesis_write nemesis; do
  BUILD_DIR="$build" TARGET=$target bash "$here/scripts/build.sh" -DTICKD_BUILD_TESTS=ON >&2
done
exec "$build/tests/nemesis/driver/nemesis" "${args[@]}"
