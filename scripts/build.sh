#!/usr/bin/env bash
# Configures and builds tickd into ${BUILD_DIR:-build} with ${JOBS:-2} jobs.
# ${TARGET} builds that target only (default: everything; several: space-separated).
# Extra arguments go to cmake's configure step.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$here/build}
cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" "$@" >/dev/null
# shellcheck disable=SC2086  # TARGET: a list of target names
cmake --build "$build" -j "${JOBS:-2}" ${TARGET:+--target $TARGET}
