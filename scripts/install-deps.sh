#!/usr/bin/env bash
# Installs what tickd needs to build and test, from Debian bookworm's packages.
# Idempotent: does nothing when everything is already there. Needs root (or sudo).
set -euo pipefail

packages=(
  build-essential cmake pkg-config git ca-certificates
  tzdata
  python3                    # tests/cron/tz_reference.py: zoneinfo, the tz reference
  libabsl-dev libexpected-dev libyaml-cpp-dev libspdlog-dev libfmt-dev
  libcli11-dev nlohmann-json3-dev libsqlite3-dev sqlite3 libhiredis-dev
  catch2 libbenchmark-dev
  clang libclang-rt-14-dev   # libFuzzer + sanitizers for the parser fuzz target
  faketime                   # skewed replicas in the end-to-end tests and the nemesis
  iproute2 nftables          # the nemesis: network namespaces, veths, partitions (root)
  redis-server               # the Redis backend's tests start a real server
  redis-sentinel             # … and Sentinel setups (tests/redis/redis_sentinel.h)
  zookeeper libzookeeper-mt-dev default-jre-headless  # ZooKeeper backend + its tests' server
  etcd-server libcurl4-openssl-dev  # the etcd backend (libcurl: GET /version) and the server its tests start
  libssl-dev                 # etcd_claim_bench: base64 (OpenSSL) for its write-set ceiling
  etcd-client  # etcdctl: etcd_claim_bench measures the store's reference rate (check perf)
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler  # the etcd backend:
                             #   etcd's gRPC API (lock/etcd/proto), also etcd_claim_bench's
  postgresql-15 libpq-dev    # the PostgreSQL backend (libpq) and the server its tests start
  procps psmisc util-linux   # tests: pgrep/killall; setpriv runs the PostgreSQL test server
  e2fsprogs                  # the nemesis: chattr +i makes a SQLite file read-only to root
  libcpp-httplib-dev         # /metrics, /healthz, /api/status, the status page
  libsystemd-dev             # sd_notify: Type=notify, watchdog
  dpkg-dev                   # cpack -G DEB (dpkg-shlibdeps) and the package test
  scdoc                      # the man pages: docs/man/*.scd → roff (docs/CMakeLists.txt)
  man-db groff-base          # man -l: the docs and package tests render the man pages
  chromium                   # the status page's browser test (headless)
  openssl                    # TLS tests: certificates made at test time; stunnel4: the
  stunnel4                   #   tested route to a Redis TLS port (Debian's hiredis has no TLS)
  prometheus                 # promtool: /metrics lint, the alert rules' check and unit tests
                             # (no server is started: Debian starts it only under systemd)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
