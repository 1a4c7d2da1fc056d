// The ZooKeeper fixture of the end-to-end suite: one ZooKeeper for the whole test
// binary (a JVM takes a second to start; tests/zookeeper/zookeeper_server.h) and a
// chroot of its own per fixture, so scenarios never see each other's ticks.
// Restart() is a crash: kill -9, then the same port and dataDir (sessions that
// reconnect within their timeout survive it, as in production).
#include <catch2/catch.hpp>

#include "tests/e2e/harness.h"
#include "tests/zookeeper/zookeeper_server.h"

namespace tickd::e2e {

namespace {

class ZookeeperFixture final : public BackendFixture {
 public:
  ZookeeperFixture() { REQUIRE(testing::ZookeeperServer::Shared().running()); }
  std::string name() const override { return "zookeeper"; }
  std::string LockYaml(const fs::path&) const override {
    return "  backend: zookeeper\n  url: " + testing::ZookeeperServer::Shared().url(chroot_) +
           "\n  op_timeout: 1s\n";
  }
  bool CanRestart() const override { return true; }
  void Restart() override {
    testing::ZookeeperServer::Shared().Kill();
    REQUIRE(testing::ZookeeperServer::Shared().Start());
  }

 private:
  std::string chroot_ = testing::ZookeeperServer::NextChroot();
};

}  // namespace

std::unique_ptr<BackendFixture> MakeZookeeperFixture() {
  return std::make_unique<ZookeeperFixture>();
}

}  // namespace tickd::e2e
