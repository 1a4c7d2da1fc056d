#!/usr/bin/env bash
# libtickd.so exports the public API of include/tickd/ and nothing else: every
# defined dynamic symbol (nm -D --defined-only, demangled) is a member of a public
# class or a public function, and the library's SONAME is libtickd.so.0. The public
# headers include only the standard library and each other.
# Usage: exported_symbols_test.sh LIBTICKD_SO SOURCE_DIR
set -euo pipefail
lib=$1
src=$2

soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = libtickd.so.0 ] || { echo "SONAME is '$soname', not libtickd.so.0"; exit 1; }

public='tickd::(Store|LockGuard|LockAttempt|Scheduler|run_command_line|version)\b'
allowed="^(${public}|(typeinfo|typeinfo name|vtable) for ${public}|TICKD_0)"
nm -D --defined-only -C "$lib" | cut -d' ' -f3- | sort -u >symbols.txt
echo "$(wc -l <symbols.txt) exported symbols"
if grep -Ev "$allowed" symbols.txt; then
  echo "FAIL: the symbols above are exported but are not the public API"
  exit 1
fi
for must in 'tickd::Store::open' 'tickd::Store::try_lock' 'tickd::Scheduler::add' \
            'tickd::Scheduler::start' 'tickd::Scheduler::stop' 'tickd::LockGuard::release'; do
  grep -q "^$must(" symbols.txt || { echo "FAIL: $must is not exported"; exit 1; }
done
# Every symbol carries the version node.
if nm -D --defined-only "$lib" --with-symbol-versions | grep -v '@@TICKD_0' | grep -v ' A TICKD_0'; then
  echo "FAIL: symbols above lack the TICKD_0 version"
  exit 1
fi

# The headers: only <standard> headers and "tickd/…" ones.
bad=$(grep -h '^#include' "$src"/include/tickd/*.h | grep -Ev '^#include (<[a-z_]+>|"tickd/[a-z_]+\.h")$' || true)
[ -z "$bad" ] || { echo "FAIL: a public header includes: $bad"; exit 1; }
echo "exported symbols: ok"
