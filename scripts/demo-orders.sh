#!/usr/bin/env bash
# The plugin demo: the unpaid-order cleanup as a plugin (plugins/orders-cleanup) on
# three replicas (node-a, node-b, node-c) sharing a SQLite shop, every 3 s, for
# ${DEMO_SECONDS:-20} s while new unpaid orders keep arriving. Prints the stock before
# and after and checks that no order's stock was given back twice.
# DEMO_BACKEND=none runs it without a lock (and without the fence check): every
# replica runs every tick and the check shows stock restored two or three times.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
bash scripts/install-deps.sh
build=${BUILD_DIR:-$here/build}
BUILD_DIR="$build" TARGET=tickd bash scripts/build.sh >/dev/null
BUILD_DIR="$build" TARGET=orders_cleanup bash scripts/build.sh >/dev/null
tickd="$build/app/tickd"
plugin="$build/plugins/orders-cleanup/liborders-cleanup.so"
shopctl="$here/plugins/orders-cleanup/shopctl"

backend=${DEMO_BACKEND:-sqlite}
check_fence=true
[[ $backend == none ]] && check_fence=false
run_dir="$here/demo-orders-run"
rm -rf "$run_dir" && mkdir -p "$run_dir"
"$shopctl" init "$run_dir/shop.db" 4 1000
"$shopctl" add-orders "$run_dir/shop.db" 20 600 4   # ten minutes old: stale at once
cat > "$run_dir/jobs.yaml" <<YAML
version: 1
lock:
  backend: $backend
jobs:
  - name: cleanup-unpaid-orders
    schedule: "*/3 * * * * *"       # every 3 s (6 fields: seconds first)
    timeout: 30s
    plugin:
      path: $plugin
      config: {db: $run_dir/shop.db, older_than: 5, work_ms: 200, check_fence: $check_fence}
YAML
chmod 644 "$run_dir/jobs.yaml"
"$tickd" validate -c "$run_dir/jobs.yaml"

echo "== stock before"
"$shopctl" stock "$run_dir/shop.db"
seconds=${DEMO_SECONDS:-20}
echo "== three replicas (backend $backend) for ${seconds}s; orders keep arriving"
pids=()
for node in node-a node-b node-c; do
  "$tickd" run -c "$run_dir/jobs.yaml" --node-id "$node" > >(tee "$run_dir/$node.log") 2>&1 &
  pids+=($!)
done
stop() { kill -TERM "${pids[@]}" 2>/dev/null || true; wait "${pids[@]}" 2>/dev/null || true; }
trap stop INT TERM
end=$((SECONDS + seconds))
while ((SECONDS < end)); do
  "$shopctl" add-orders "$run_dir/shop.db" 2 0 4
  sleep 1
done
sleep 6  # the last orders become stale and the next tick closes them
stop
trap - INT TERM

echo
echo "== stock after (expected = initial stock minus the items of orders not closed)"
"$shopctl" stock "$run_dir/shop.db"
echo
echo "== the shop; logs in $run_dir"
"$shopctl" check "$run_dir/shop.db"
