#!/usr/bin/env bash
# The library as a user gets it: `cmake --install` into a temporary prefix, then
# examples/orders-cleanup-service configured (find_package(tickd CONFIG)) and built
# against that prefix alone, and a program built with `pkg-config tickd`. Then two
# instances of the example and one tickd daemon replica share one SQLite store for
# at least 30 ticks of `@every 1s`: every tick between the first and the last is
# written exactly once to the orders file, and fences grow with the ticks.
# Usage: example_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
scratch=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$scratch"
}
trap cleanup EXIT

prefix=$scratch/prefix
cmake --install "$build" --prefix "$prefix" >"$scratch/install.log"
# Only the library's files and the daemon's: no internal header, no static library.
if find "$prefix/include" -name '*.h' | grep -v '/include/tickd/'; then
  echo "FAIL: headers installed outside include/tickd"; exit 1
fi
if find "$prefix" -name '*.a' | grep .; then echo "FAIL: a static library is installed"; exit 1; fi
libdir=$(dirname "$(find "$prefix" -name libtickd.so.0 | head -1)")
ls -l "$libdir"/libtickd.so*

# CMake package.
cmake -S "$src/examples/orders-cleanup-service" -B "$scratch/example" \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$scratch/configure.log" ||
  { cat "$scratch/configure.log"; exit 1; }
cmake --build "$scratch/example" -j 2 >"$scratch/build.log" || { cat "$scratch/build.log"; exit 1; }
example=$scratch/example/orders-cleanup-service
# It found libtickd in the prefix, not in the build tree.
ldd "$example" | grep "libtickd.so.0 => $libdir/" || { ldd "$example"; exit 1; }

# pkg-config.
cat >"$scratch/pc.cc" <<'CC'
#include <tickd/tickd.h>
#include <iostream>
int main() { std::cout << tickd::version() << "\n"; }
CC
export PKG_CONFIG_PATH=$libdir/pkgconfig
# shellcheck disable=SC2046
g++ -std=c++20 "$scratch/pc.cc" -o "$scratch/pc" $(pkg-config --cflags --libs tickd) -Wl,-rpath,"$libdir"
[ "$("$scratch/pc")" = "$(pkg-config --modversion tickd)" ]

# Two example instances and one daemon replica on one store.
store=$scratch/store.db
orders=$scratch/orders.log
cat >"$scratch/jobs.yaml" <<YAML
version: 1
lock:
  url: sqlite://$store
jobs:
  - name: orders-cleanup
    schedule: "@every 1s"
    shell: 'echo "tick=\$TICKD_TICK_UNIX fence=\$TICKD_FENCE node=\$TICKD_NODE" >> $orders'
YAML
chmod 644 "$scratch/jobs.yaml"
"$example" "sqlite://$store" "$orders" example-a "@every 1s" >"$scratch/a.log" 2>&1 &
pids+=($!)
"$example" "sqlite://$store" "$orders" example-b "@every 1s" >"$scratch/b.log" 2>&1 &
pids+=($!)
"$prefix/bin/tickd" run -c "$scratch/jobs.yaml" --node-id daemon >"$scratch/daemon.log" 2>&1 &
pids+=($!)
sleep 36
for p in "${pids[@]}"; do kill -TERM "$p"; done
for p in "${pids[@]}"; do wait "$p" || { echo "FAIL: pid $p exited $?"; exit 1; }; done
pids=()

echo "runs per node:"; sed 's/.*node=//' "$orders" | sort | uniq -c
python3 - "$orders" <<'PY'
import sys
rows = []
for line in open(sys.argv[1]):
    f = dict(kv.split("=", 1) for kv in line.split())
    rows.append((int(f["tick"]), int(f["fence"]), f["node"]))
ticks = sorted(t for t, _, _ in rows)
dups = sorted({t for t in ticks if ticks.count(t) > 1})
missing = sorted(set(range(ticks[0], ticks[-1] + 1)) - set(ticks))
print(f"{len(ticks)} ticks from {ticks[0]} to {ticks[-1]}; duplicates {dups}; missing {missing}")
assert len(set(ticks)) >= 30, "fewer than 30 ticks"
assert not dups, "a tick ran twice"
assert not missing, "a tick did not run"
by_tick = sorted(rows)
for (t1, f1, _), (t2, f2, _) in zip(by_tick, by_tick[1:]):
    assert f2 > f1, f"fence of tick {t2} ({f2}) is not above that of tick {t1} ({f1})"
print("every tick once, fences increasing: ok")
PY
grep -q 'library=true' "$scratch/a.log" || { cat "$scratch/a.log"; exit 1; }
echo "example test: ok"
