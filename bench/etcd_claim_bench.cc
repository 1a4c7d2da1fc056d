// Claim throughput on one etcd member (the sibling of claim_bench.cc, which measures
// Redis): N replicas (threads, each with its own backend and HTTP connection) × M jobs
// `@every 1s` through the real backend's batched path (lock/etcd: per 120 claims one
// read txn and one txn of nested claim txns); the runs are bench/batch_claim_driver.h.
// Then, in the same run, the store's own reference rate: `etcdctl check perf` against
// the same member (60 s of plain puts from many clients).
//
// Usage: etcd_claim_bench [--replicas N] [--jobs M] [--seconds S] [--sat-ticks K]
//                         [--reference 0] [--load s|m|l|xl as 0..3, default 3]
// It starts its own etcd (tests/etcd/etcd_server.h: one member, WAL fsync as default).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench/batch_claim_driver.h"
#include "lock/etcd/etcd_backend.h"
#include "tests/etcd/etcd_server.h"

using namespace std::chrono_literals;

namespace {

std::unique_ptr<tickd::lock::Backend> Open(const tickd::testing::EtcdServer& server) {
  tickd::lock::EtcdOptions options;
  options.url = server.url();
  options.op_timeout = 10s;  // under saturation: answer, do not give up
  auto backend = tickd::lock::NewEtcdBackend(options);
  if (!backend) {
    std::fprintf(stderr, "%s\n", backend.error().ToString().c_str());
    std::exit(1);
  }
  return std::move(*backend);
}

// `etcdctl check perf` against the member: prints its verdict lines.
void Reference(const tickd::testing::EtcdServer& server, const char* load) {
  const std::string cmd =
      "ETCDCTL_API=3 etcdctl --endpoints=http://127.0.0.1:" + std::to_string(server.port()) +
      " check perf --load=" + load + " 2>&1";
  std::printf("reference: etcdctl check perf --load=%s\n", load);
  std::fflush(stdout);
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) {
    std::printf("  etcdctl could not be started\n");
    return;
  }
  char line[512];
  while (std::fgets(line, sizeof(line), p) != nullptr) {
    const std::string l(line);
    // Skip the progress bar; keep the verdicts (PASS/FAIL: Throughput, Slowest, Stddev).
    if (l.find("PASS") != std::string::npos || l.find("FAIL") != std::string::npos ||
        l.find("rror") != std::string::npos) {
      std::printf("  %s", line);
    }
  }
  ::pclose(p);
}

}  // namespace

int main(int argc, char** argv) {
  bool reference = true;
  int load = 3;
  const tickd::bench::BatchArgs a = tickd::bench::ParseBatchArgs(
      argc, argv, tickd::bench::BatchArgs{3, 1000, 10, 5}, [&](const std::string& key, int value) {
        if (key == "--reference") reference = value != 0;
        if (key == "--load") load = value;
      });
  if (!tickd::testing::EtcdServer::Available()) {
    std::fprintf(stderr, "etcd not installed\n");
    return 1;
  }
  tickd::testing::EtcdServer server;
  if (!server.running()) {
    std::fprintf(stderr, "etcd did not start\n");
    return 1;
  }
  std::vector<std::unique_ptr<tickd::lock::Backend>> replicas;
  for (int r = 0; r < a.replicas; ++r) replicas.push_back(Open(server));
  std::printf("etcd_claim_bench: %d replicas x %d jobs @every 1s, etcd 127.0.0.1:%d (one member)\n",
              a.replicas, a.jobs, server.port());
  const int status = tickd::bench::RunBatchBench(replicas, a);
  static const char* const kLoads[] = {"s", "m", "l", "xl"};
  if (reference) Reference(server, kLoads[std::clamp(load, 0, 3)]);
  return status;
}
