#!/usr/bin/env bash
# The status page in a real browser: two replicas share a SQLite store; headless
# Chromium renders http://…/ (--dump-dom); every tick row's winner must be the replica
# whose log has that tick's run line, and both replicas must appear. node-b runs with
# another tz database (TZDIR: the system's zones, a tzdata.zi saying 1999z): the page
# shows each replica's version, the tzdata column, and flags the mismatch.
set -euo pipefail
tickd=$1
dir=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; wait || true; rm -rf "$dir"; }
trap cleanup EXIT
cat >"$dir/jobs.yaml" <<'YAML'
version: 1
lock:
  backend: sqlite
http:
  listen: 127.0.0.1:${HTTP_PORT}
jobs:
  - name: beat
    schedule: "@every 1s"
    shell: echo beat
  - name: printer
    schedule: "0 0 1 1 *"
    shell: 'echo "<img src=x onerror=alert(1)> & <b>bold</b>"; echo "oops on stderr" >&2'
YAML
chmod 644 "$dir/jobs.yaml"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port=$(free_port)
mkdir "$dir/tz"
for entry in /usr/share/zoneinfo/*; do
  case ${entry##*/} in tzdata.zi | +VERSION) ;; *) ln -s "$entry" "$dir/tz/" ;; esac
done
echo '# version 1999z' >"$dir/tz/tzdata.zi"
HTTP_PORT=$port "$tickd" run -c "$dir/jobs.yaml" --node-id node-a >"$dir/a.log" 2>&1 & pids+=($!)
# (http.listen needs a real port: each replica serves its own.)
HTTP_PORT=$(free_port) TZDIR=$dir/tz "$tickd" run -c "$dir/jobs.yaml" --node-id node-b >"$dir/b.log" 2>&1 & pids+=($!)
sleep 10
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$dir/profile" --dump-dom "http://127.0.0.1:$port/" 2>/dev/null >"$dir/dom.html"
grep -q '<section class="job" data-job="beat">' "$dir/dom.html"
rows=$(grep -o '<tr class="tick run" data-winner="[^"]*" data-outcome="done"[^>]*><td[^>]*>[^<]*' "$dir/dom.html" |
  sed 's/.*data-winner="\([^"]*\)".*<td[^>]*>\(.*\)/\2 \1/' | sort)
[[ -n "$rows" ]] || { echo "no finished ticks on the page"; exit 1; }
ran=$(cat "$dir/a.log" "$dir/b.log" | grep ' run job=beat ' |
  sed 's/.* tick=\([^ ]*\) node=\([^ ]*\) .*/\1 \2/' | sort)
checked=0
while read -r tick winner; do
  grep -qx "$tick $winner" <<<"$ran" || { echo "page says $winner won $tick; logs: $(grep "^$tick " <<<"$ran")"; exit 1; }
  checked=$((checked + 1))
done <<<"$rows"
echo "winners checked: $checked"
((checked >= 5))
grep -q 'data-winner="node-a"' "$dir/dom.html" || grep -q 'data-winner="node-b"' "$dir/dom.html"
# The tz database of each replica, and the mismatch flagged.
ours=$(head -1 /usr/share/zoneinfo/tzdata.zi | sed -n 's/^# version //p')
grep -q '<th>tzdata</th>' "$dir/dom.html" || { echo "no tzdata column"; exit 1; }
grep -q "data-node=\"node-a\" data-tzdata=\"$ours\"" "$dir/dom.html" || { echo "node-a's tzdata $ours not shown"; exit 1; }
grep -q 'data-node="node-b" data-tzdata="1999z"' "$dir/dom.html" || { echo "node-b's tzdata 1999z not shown"; exit 1; }
grep -q 'id="tzdata-mismatch"' "$dir/dom.html" || { echo "tzdata mismatch not flagged"; exit 1; }
# A paused job: the badge says who paused it and why; its ticks are skipped, not run.
HTTP_PORT=$port "$tickd" pause -c "$dir/jobs.yaml" --node-id operator --reason "incident 42" beat >"$dir/pause.out"
grep -q 'outcome=paused' "$dir/pause.out" || { echo "pause did not say paused: $(cat "$dir/pause.out")"; exit 1; }
sleep 3
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$dir/profile" --dump-dom "http://127.0.0.1:$port/" 2>/dev/null >"$dir/dom-paused.html"
grep -q '<span class="paused" data-paused-by="operator">paused by operator: incident 42</span>' "$dir/dom-paused.html" ||
  { echo "the page shows no paused badge"; exit 1; }
grep -q 'data-outcome="skipped"' "$dir/dom-paused.html" || { echo "no skipped tick row on the page"; exit 1; }
grep -q "<td class=\"tzdata\">1999z/$ours <span class=\"o-bad\">mismatch</span>" "$dir/dom.html" ||
  grep -q "<td class=\"tzdata\">$ours/1999z <span class=\"o-bad\">mismatch</span>" "$dir/dom.html" ||
  { echo "no tick row flags the tzdata mismatch"; exit 1; }
# A run's output: printer (not due by its schedule) is triggered once; the link to its
# run clicks its tick, and the output shows, both streams, its HTML as text.
HTTP_PORT=$port "$tickd" trigger -c "$dir/jobs.yaml" --node-id operator printer >"$dir/trigger.out" 2>&1 ||
  { echo "trigger failed: $(cat "$dir/trigger.out")"; exit 1; }
tick=$(sed -n 's/.* run job=printer tick=\([^ ]*\) .*/\1/p' "$dir/trigger.out" | head -1)
[[ -n "$tick" ]] || { echo "no run line from trigger: $(cat "$dir/trigger.out")"; exit 1; }
tick_unix=$(date -u -d "$tick" +%s)
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$dir/profile" --virtual-time-budget=3000 \
  --dump-dom "http://127.0.0.1:$port/#run=printer@$tick_unix" 2>/dev/null >"$dir/dom-output.html"
grep -q "<tr class=\"tick run open\" data-winner=\"operator\" data-outcome=\"done\" data-tick-unix=\"$tick_unix\">" \
  "$dir/dom-output.html" || { echo "the linked run is not open on the page"; exit 1; }
grep -q "<tr class=\"output\" data-run=\"printer@$tick_unix\">" "$dir/dom-output.html" ||
  { echo "no output row for the run"; exit 1; }
grep -q '<span class="stdout"><span class="stream">stdout  </span>&lt;img src=x onerror=alert(1)&gt; &amp; &lt;b&gt;bold&lt;/b&gt;</span>' \
  "$dir/dom-output.html" || { echo "stdout not shown as text: $(grep -o '<pre class="output">.*</pre>' "$dir/dom-output.html")"; exit 1; }
grep -q '<span class="stderr"><span class="stream">stderr  </span>oops on stderr</span>' "$dir/dom-output.html" ||
  { echo "stderr line not shown"; exit 1; }
if grep -q '<img src="x"\|<b>bold</b>' "$dir/dom-output.html"; then
  echo "the run's output was interpreted as HTML"; exit 1
fi
echo "browser test: ok"
