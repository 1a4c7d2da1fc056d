// The ZooKeeper fixture of the end-to-end suite: one ZooKeeper for the whole test
// binary (a JVM takes a second to start; tests/zookeeper/zookeeper_server.h) and a
// chroot of its own per fixture, so scenarios never see each other's ticks.
// Restart() is a crash: kill -9, then the same port and dataDir (sessions that
// reconnect within their timeout survive it, as in production). RestartWithoutData():
// the dataDir wiped (every chroot of the binary is gone with it).
#include "tests/e2e/fixture_util.h"
#include "tests/e2e/harness.h"
#include "tests/zookeeper/zookeeper_server.h"

namespace tickd::e2e {

namespace {

testing::ZookeeperServer& Server() { return testing::ZookeeperServer::Shared(); }

class ZookeeperFixture final : public ServerFixture<testing::ZookeeperServer> {
 public:
  ZookeeperFixture() { FixtureCheck(Server().running(), "ZooKeeper did not start"); }
  std::string name() const override { return "zookeeper"; }
  std::string LockYaml(const fs::path&) const override {
    return "  backend: zookeeper\n  url: " + Server().url(chroot_) + "\n  op_timeout: 1s\n";
  }
  bool CanRestartWithoutData() const override { return true; }
  void RestartWithoutData() override {
    Kill();
    EmptyDir(Server().dir() + "/data");
    Start();
  }

 private:
  testing::ZookeeperServer& server() const override { return Server(); }

  std::string chroot_ = testing::ZookeeperServer::NextChroot();
};

}  // namespace

std::unique_ptr<BackendFixture> MakeZookeeperFixture() {
  return std::make_unique<ZookeeperFixture>();
}

}  // namespace tickd::e2e
