#!/usr/bin/env bash
# Builds the .debs with CPack (tickd, libtickd0, libtickd-dev), unpacks them into a
# scratch root (dpkg -x, no container) and runs the packaged tickd from there:
# --version and validate of the example file. Also checks the packages' metadata and
# contents (the library split: the daemon needs libtickd0; the -dev package holds the
# headers, the .so link, the CMake package and tickd.pc) and that the systemd unit is
# Type=notify. The man pages render, the completion completes, the manual is there.
set -euo pipefail
build_dir=$1
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

(cd "$scratch" && cpack -G DEB --config "$build_dir/CPackConfig.cmake" -B "$scratch/out" >cpack.log 2>&1) ||
  { cat "$scratch/cpack.log"; exit 1; }
ls "$scratch"/out/*.deb
# has PACKAGE FIELD-REGEX: the package's control file has it.
has() {
  dpkg-deb --field "$(ls "$scratch"/out/"$1"_*.deb)" | grep -Eq "$2" ||
    { echo "$1: no '$2' in:"; dpkg-deb --field "$(ls "$scratch"/out/"$1"_*.deb)"; exit 1; }
}
# holds PACKAGE PATH...: the package contains each path (a file or a link).
holds() {
  local pkg=$1; shift
  dpkg-deb --contents "$(ls "$scratch"/out/"$pkg"_*.deb)" >"$scratch/contents.$pkg"
  for f in "$@"; do
    grep -Eq " $f( -> .*)?\$" "$scratch/contents.$pkg" ||
      { echo "missing in $pkg: $f"; cat "$scratch/contents.$pkg"; exit 1; }
  done
}
has tickd '^Package: tickd$'
has tickd '^Depends:.*libtickd0 \(= '
has libtickd0 '^Package: libtickd0$'
has libtickd0 '^Depends:.*libyaml-cpp'
has libtickd-dev '^Depends:.*libtickd0 \(= '
holds tickd ./usr/bin/tickd ./usr/lib/systemd/system/tickd.service \
  ./usr/share/doc/tickd/README.md ./usr/share/doc/tickd/design.md \
  ./usr/share/doc/tickd/backends.md \
  ./usr/share/doc/tickd/examples/jobs.example.yaml \
  ./usr/share/doc/tickd/examples/prometheus/tickd-alerts.yml \
  ./usr/share/doc/tickd/examples/prometheus/tickd-alerts.test.yml \
  ./usr/share/man/man1/tickd.1.gz ./usr/share/man/man5/tickd.yaml.5.gz \
  ./usr/share/bash-completion/completions/tickd \
  ./usr/share/doc/tickd/docs/README.md ./usr/share/doc/tickd/docs/job-file.md \
  ./usr/share/doc/tickd/docs/schedules.md ./usr/share/doc/tickd/docs/semantics.md \
  ./usr/share/doc/tickd/docs/operating.md ./usr/share/doc/tickd/docs/stores.md \
  ./usr/share/doc/tickd/docs/reliability.md ./usr/share/doc/tickd/docs/libtickd.md \
  ./usr/share/doc/tickd/docs/plugins.md ./usr/share/doc/tickd/docs/design.md \
  ./usr/share/doc/tickd/docs/backends.md
holds libtickd0 './usr/lib/libtickd\.so\.0' './usr/lib/libtickd\.so\.[0-9]+\.[0-9]+\.[0-9]+'
holds libtickd-dev ./usr/include/tickd/tickd.h ./usr/include/tickd/scheduler.h \
  ./usr/include/tickd/store.h ./usr/include/tickd/plugin.h './usr/lib/libtickd\.so' \
  ./usr/lib/cmake/tickd/tickdConfig.cmake ./usr/lib/pkgconfig/tickd.pc
# The daemon's package has no library, the library's no header.
if grep -q 'libtickd\.so' "$scratch/contents.tickd"; then echo "tickd holds the library"; exit 1; fi
if grep -q '/include/' "$scratch/contents.libtickd0"; then echo "libtickd0 holds headers"; exit 1; fi

root="$scratch/root"
for deb in "$scratch"/out/*.deb; do dpkg -x "$deb" "$root"; done
grep -q '^Type=notify$' "$root/usr/lib/systemd/system/tickd.service"
"$root/usr/bin/tickd" --version | grep -E '^tickd [0-9]+\.[0-9]+\.[0-9]+$'
# The example points at /var/lib/tickd; validate a copy whose store is in the scratch root.
mkdir -p "$root/etc/tickd"
sed "s|sqlite:///var/lib/tickd/tickd.db|sqlite://$root/tickd.db|" \
  "$root/usr/share/doc/tickd/examples/jobs.example.yaml" >"$root/etc/tickd/jobs.yaml"
chmod 644 "$root/etc/tickd/jobs.yaml"
"$root/usr/bin/tickd" validate -c "$root/etc/tickd/jobs.yaml"
# The man pages render from the package (what `man tickd` and `man 5 tickd.yaml` show once
# it is installed), and name what they document.
MANWIDTH=80 man -l "$root/usr/share/man/man1/tickd.1.gz" 2>&1 | sed 's/.\x08//g' >"$scratch/tickd.1.txt"
grep -q '^NAME' "$scratch/tickd.1.txt" && grep -q 'tickd - scheduled jobs' "$scratch/tickd.1.txt" ||
  { echo "man tickd does not render:"; cat "$scratch/tickd.1.txt"; exit 1; }
MANWIDTH=80 man -l "$root/usr/share/man/man5/tickd.yaml.5.gz" 2>&1 | sed 's/.\x08//g' >"$scratch/tickd.yaml.5.txt"
grep -q 'tickd.yaml - the job file of tickd' "$scratch/tickd.yaml.5.txt" ||
  { echo "man 5 tickd.yaml does not render:"; cat "$scratch/tickd.yaml.5.txt"; exit 1; }
# The guides' links to the contracts resolve in the installed layout.
for f in design.md backends.md; do
  [ -f "$root/usr/share/doc/tickd/docs/$f" ] || { echo "docs/$f does not resolve"; exit 1; }
done
# The packaged completion completes subcommands.
(
  # shellcheck source=/dev/null
  source "$root/usr/share/bash-completion/completions/tickd"
  COMP_WORDS=(tickd tri); COMP_CWORD=1; COMPREPLY=()
  _tickd
  [ "${COMPREPLY[*]}" = trigger ] || { echo "completion of 'tickd tri': '${COMPREPLY[*]}'"; exit 1; }
)
# The packaged alert rules are the ones tested, and pass promtool where it is installed.
cmp "$root/usr/share/doc/tickd/examples/prometheus/tickd-alerts.yml" \
  "$(dirname "$0")/../../packaging/tickd-alerts.yml"
if command -v promtool >/dev/null; then
  (cd "$root/usr/share/doc/tickd/examples/prometheus" && promtool test rules tickd-alerts.test.yml)
else
  echo "promtool not found: the packaged rules are not unit-tested here (ops_promtool_test skips too)"
fi
echo "package test: ok"
