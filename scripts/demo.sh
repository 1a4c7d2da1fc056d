#!/usr/bin/env bash
# The demo: builds tickd, then runs three replicas (node-a, node-b, node-c) of
# jobs.example.yaml on the embedded SQLite backend for ${DEMO_SECONDS:-30} s.
# Their log lines are interleaved as they happen; each names its node, and every
# replica logs one `tick` line per tick, so the winner of each tick is plain.
# At the end: a table of ticks and their winners, and a check that no tick ran twice.
# Then the unpaid-order cleanup as a plugin (scripts/demo-orders.sh): three replicas,
# orders arriving, stock before and after. DEMO_ORDERS=0 skips that part.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
bash scripts/install-deps.sh
BUILD_DIR="$here/build" TARGET=tickd bash scripts/build.sh >/dev/null
tickd="$here/build/app/tickd"

run_dir="$here/demo-run"
rm -rf "$run_dir" && mkdir -p "$run_dir"
cp jobs.example.yaml "$run_dir/jobs.yaml"
chmod 644 "$run_dir/jobs.yaml"
"$tickd" validate -c "$run_dir/jobs.yaml"

seconds=${DEMO_SECONDS:-30}
echo "== three replicas for ${seconds}s (Ctrl-C stops them early)"
pids=()
for node in node-a node-b node-c; do
  "$tickd" run -c "$run_dir/jobs.yaml" --node-id "$node" > >(tee "$run_dir/$node.log") 2>&1 &
  pids+=($!)
done
stop() { kill -TERM "${pids[@]}" 2>/dev/null || true; wait "${pids[@]}" 2>/dev/null || true; }
trap stop INT TERM
sleep "$seconds"
stop
trap - INT TERM

echo
echo "== winners per tick (from every replica's tick lines)"
cat "$run_dir"/node-*.log | grep ' tick ' | grep 'outcome=won' |
  sed -E 's/.* job=([^ ]+) tick=([^ ]+) node=([^ ]+) .*fence=([0-9]+).*/\2  \1  \3  fence=\4/' |
  sort | tee "$run_dir/winners.txt"
dups=$(awk '{print $1, $2}' "$run_dir/winners.txt" | sort | uniq -d | wc -l)
ticks=$(wc -l < "$run_dir/winners.txt")
echo
echo "== $ticks ticks won, $dups ticks won twice (must be 0); logs in $run_dir"
[[ "$dups" == 0 ]]

if [[ "${DEMO_ORDERS:-1}" != 0 ]]; then
  echo
  echo "== the unpaid-order cleanup as a plugin"
  DEMO_SECONDS="${DEMO_ORDERS_SECONDS:-20}" bash scripts/demo-orders.sh
fi
