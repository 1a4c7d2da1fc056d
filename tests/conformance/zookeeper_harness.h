// The ZooKeeper harness of the conformance suite: one real ZooKeeper for the whole
// test binary (the JVM starts in about a second; tests/zookeeper/zookeeper_server.h),
// and a chroot of its own per case, so every case starts from an empty store. Real
// time: leases expire on the server's clock (node mtimes), and every replica is its
// own session, exactly as separate tickd processes would be.
//
// The suite runs unchanged. Its "A stops renewing" step needs no session trick: a
// lease is live only while its ephemeral node exists AND it was renewed within the
// lease on the server's clock (see lock/zookeeper/zookeeper_backend.cc), so a holder
// whose session lives on but who stops renewing loses the lease like on any backend.
// Session expiry, the other way to lose it, is tested in tests/zookeeper.
#pragma once

#include <catch2/catch.hpp>
#include <thread>

#include "lock/zookeeper/zookeeper_backend.h"
#include "tests/conformance/harness.h"
#include "tests/zookeeper/zookeeper_server.h"

namespace tickd::conformance {

class ZookeeperHarness final : public Harness {
 public:
  std::string unavailable() const override {
    if (!testing::ZookeeperServer::Available()) {
      return std::string(testing::ZookeeperServer::kJar) + " or java is not installed";
    }
    return testing::ZookeeperServer::Shared().running() ? "" : "zookeeper did not start";
  }
  std::unique_ptr<lock::Backend> OpenReplica() override {
    lock::ZookeeperOptions options;
    options.url = testing::ZookeeperServer::Shared().url(chroot_);
    auto backend = lock::NewZookeeperBackend(options);
    if (!backend) FAIL(backend.error().ToString());
    return std::move(*backend);
  }
  Clock& clock() override { return clock_; }
  void Elapse(std::chrono::milliseconds d) override { std::this_thread::sleep_for(d); }
  std::chrono::milliseconds short_lease() const override { return std::chrono::milliseconds(400); }
  bool durable() const override { return true; }
  bool forkable() const override { return true; }
  bool detects_store_reset() const override { return true; }

 private:
  std::string chroot_ = testing::ZookeeperServer::NextChroot();
  RealClock clock_;
};

}  // namespace tickd::conformance
