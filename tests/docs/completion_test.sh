#!/usr/bin/env bash
# The bash completion (packaging/tickd.bash-completion), sourced into this shell and
# called as bash calls it: COMP_WORDS and COMP_CWORD set, COMPREPLY read back. It must
# offer every subcommand and every option that `tickd --help` / `tickd SUB --help` list
# (no more), the fixed values of options, and the job names of the -c file wherever a
# job is expected. Plain bash: the script uses none of bash-completion's helpers.
# Usage: completion_test.sh TICKD SOURCE_DIR
set -euo pipefail
tickd=$1
src=$2
# shellcheck source=/dev/null
source "$src/packaging/tickd.bash-completion"

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failures=0

# complete LINE: what the completion offers at the end of LINE (a trailing space starts
# a new, empty word; `=` is a word of its own, as COMP_WORDBREAKS makes it), sorted, one
# per line.
complete_line() {
  local line=$1
  read -r -a COMP_WORDS <<<"${line//=/ = }"
  [[ $line == *" " ]] && COMP_WORDS+=("")
  COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
  COMP_LINE=$line
  COMP_POINT=${#line}
  COMPREPLY=()
  _tickd
  printf '%s\n' "${COMPREPLY[@]}" | sed '/^$/d' | sort
}

# expect LINE WORD...: the completion of LINE is exactly these words.
expect() {
  local line=$1; shift
  local got want
  got=$(complete_line "$line")
  want=$(printf '%s\n' "$@" | sed '/^$/d' | sort)
  if [[ $got != "$want" ]]; then
    echo "FAIL '$line': expected [$(echo $want)], got [$(echo $got)]"
    failures=$((failures + 1))
  else
    echo "ok   '$line' -> $(echo $got)"
  fi
}

# What CLI11 lists: subcommands, and each one's options.
mapfile -t subs < <("$tickd" --help | sed -n '/^Subcommands:/,$p' | sed -nE 's/^  ([a-z][a-z-]*) .*/\1/p')
((${#subs[@]} >= 8)) || { echo "FAIL: tickd --help lists only ${#subs[@]} subcommands"; exit 1; }
expect "tickd " "${subs[@]}" --help --version
expect "tickd tr" trigger
expect "tickd --v" --version
for sub in "${subs[@]}"; do
  mapfile -t options < <("$tickd" "$sub" --help | sed -nE 's/^  (-[^ ]+).*/\1/p' | tr ',' '\n')
  expect "tickd $sub -" "${options[@]}"
done

# Fixed values.
expect "tickd run --log-format " logfmt json
expect "tickd run --log-level w" warn
expect "tickd next --dialect q" quartz
expect "tickd next --dst-gap " run skip
expect "tickd next --dst-overlap " auto first both
if [[ -f ${TZDIR:-/usr/share/zoneinfo}/Europe/Berlin ]]; then
  expect "tickd next --tz Europe/Berl" Europe/Berlin
fi

# Job names from the -c file, wherever a job is expected.
cat >"$scratch/jobs.yaml" <<'EOF'
version: 1
jobs:
  - name: cleanup-unpaid-orders   # the classic
    schedule: "*/5 * * * *"
    shell: "true"
  - schedule: "30 2 * * *"
    name: "nightly.report"
    run: [/bin/true]
    env: {REGION: eu}
  - name: 'heartbeat'
    schedule: "@every 10s"
    shell: "true"
EOF
jobs=(cleanup-unpaid-orders nightly.report heartbeat)
expect "tickd trigger -c $scratch/jobs.yaml " "${jobs[@]}"
expect "tickd pause -c $scratch/jobs.yaml --until 2h " "${jobs[@]}"
expect "tickd resume --config $scratch/jobs.yaml n" nightly.report
expect "tickd status --config=$scratch/jobs.yaml h" heartbeat
expect "tickd status --job=n --config=$scratch/jobs.yaml --job=n" nightly.report
expect "tickd status -c $scratch/jobs.yaml --job cl" cleanup-unpaid-orders
expect "tickd next -c $scratch/jobs.yaml --job " "${jobs[@]}"
expect "tickd locks -c $scratch/jobs.yaml --release " "${jobs[@]}"
expect "tickd trigger " # no -c yet: no job names to offer
expect "tickd trigger -c $scratch/missing.yaml "
# Flow-style entries name their jobs too.
cat >"$scratch/flow.yaml" <<'EOF'
version: 1
jobs:
  - {name: cleanup-orders, schedule: "*/5 * * * * *", shell: "true"}
  - {schedule: "0 0 2 * * *", name: 'nightly-report', shell: "true"}
EOF
expect "tickd trigger -c $scratch/flow.yaml " cleanup-orders nightly-report
# -c completes file names.
expect "tickd validate -c $scratch/jo" "$scratch/jobs.yaml"

if ((failures > 0)); then
  echo "$failures failure(s)"
  exit 1
fi
echo "completion test: ok"
