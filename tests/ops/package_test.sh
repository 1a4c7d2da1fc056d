#!/usr/bin/env bash
# Builds the .deb with CPack, unpacks it into a scratch root (dpkg -x, no container)
# and runs the packaged tickd from there: --version and validate of the example file.
# Also checks the package metadata and that the systemd unit is Type=notify.
set -euo pipefail
build_dir=$1
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

(cd "$scratch" && cpack -G DEB --config "$build_dir/CPackConfig.cmake" -B "$scratch/out" >cpack.log 2>&1) ||
  { cat "$scratch/cpack.log"; exit 1; }
deb=$(ls "$scratch"/out/*.deb)
echo "package: $deb"
dpkg-deb --info "$deb" | tee "$scratch/info"
grep -q "Package: tickd" "$scratch/info"
grep -q "Depends:.*libyaml-cpp" "$scratch/info"
dpkg-deb --contents "$deb" | tee "$scratch/contents"
for f in ./usr/bin/tickd ./usr/lib/systemd/system/tickd.service ./usr/share/doc/tickd/examples/jobs.example.yaml \
  ./usr/share/doc/tickd/examples/prometheus/tickd-alerts.yml \
  ./usr/share/doc/tickd/examples/prometheus/tickd-alerts.test.yml; do
  grep -q " $f\$" "$scratch/contents" || { echo "missing in package: $f"; exit 1; }
done

root="$scratch/root"
dpkg -x "$deb" "$root"
grep -q '^Type=notify$' "$root/usr/lib/systemd/system/tickd.service"
"$root/usr/bin/tickd" --version | grep -E '^tickd [0-9]+\.[0-9]+\.[0-9]+$'
# The example points at /var/lib/tickd; validate a copy whose store is in the scratch root.
mkdir -p "$root/etc/tickd"
sed "s|sqlite:///var/lib/tickd/tickd.db|sqlite://$root/tickd.db|" \
  "$root/usr/share/doc/tickd/examples/jobs.example.yaml" >"$root/etc/tickd/jobs.yaml"
chmod 644 "$root/etc/tickd/jobs.yaml"
"$root/usr/bin/tickd" validate -c "$root/etc/tickd/jobs.yaml"
# The packaged alert rules are the ones tested, and pass promtool where it is installed.
cmp "$root/usr/share/doc/tickd/examples/prometheus/tickd-alerts.yml" \
  "$(dirname "$0")/../../packaging/tickd-alerts.yml"
if command -v promtool >/dev/null; then
  (cd "$root/usr/share/doc/tickd/examples/prometheus" && promtool test rules tickd-alerts.test.yml)
else
  echo "promtool not found: the packaged rules are not unit-tested here (ops_promtool_test skips too)"
fi
echo "package test: ok"
