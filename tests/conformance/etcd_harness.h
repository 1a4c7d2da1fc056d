// The etcd harness of the conformance suite: one real etcd member for the whole test
// binary (tests/etcd/etcd_server.h: free loopback ports, stopped at exit), and a key
// prefix of its own per case, so every case starts from an empty store. Real time:
// leases expire on etcd's clock, whose TTLs are whole seconds (1 s at least).
#pragma once

#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <thread>

#include "lock/etcd/etcd_backend.h"
#include "tests/conformance/harness.h"
#include "tests/etcd/etcd_server.h"

namespace tickd::conformance {

class EtcdHarness final : public Harness {
 public:
  EtcdHarness()
      : prefix_("/conformance-" + std::to_string(::getpid()) + "-" + std::to_string(++cases_) +
                "/") {}

  std::string unavailable() const override {
    if (!testing::EtcdServer::Available()) {
      return std::string(testing::EtcdServer::kBinary) + " is not installed";
    }
    return Server().running() ? "" : "etcd did not start";
  }
  std::unique_ptr<lock::Backend> OpenReplica() override {
    lock::EtcdOptions options;
    options.url = Server().url() + "?prefix=" + prefix_;
    auto backend = lock::NewEtcdBackend(options);
    if (!backend) FAIL(backend.error().ToString());
    return std::move(*backend);
  }
  Clock& clock() override { return clock_; }
  void Elapse(std::chrono::milliseconds d) override { std::this_thread::sleep_for(d); }
  // etcd's lease TTL is whole seconds and its floor is 1 s (with the server's fast
  // election settings): the shortest lease a test can let expire.
  std::chrono::milliseconds short_lease() const override { return std::chrono::seconds(1); }
  bool durable() const override { return true; }
  bool forkable() const override { return true; }
  bool detects_store_reset() const override { return true; }

 private:
  static testing::EtcdServer& Server() {
    static testing::EtcdServer server;
    return server;
  }
  static inline std::atomic<int> cases_{0};
  std::string prefix_;
  RealClock clock_;
};

}  // namespace tickd::conformance
