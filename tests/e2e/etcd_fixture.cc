// The etcd fixture of the end-to-end suite: its own one-member etcd on free loopback
// ports (tests/etcd/etcd_server.h). Restart() is a crash: kill -9, then the same
// ports and the same data folder (etcd fsyncs its WAL before answering, so every
// answered claim and revision survives). RestartWithoutData(): a fresh data folder.
#include "tests/e2e/fixture_util.h"
#include "tests/e2e/harness.h"
#include "tests/etcd/etcd_server.h"

namespace tickd::e2e {

namespace {

class EtcdFixture final : public ServerFixture<testing::EtcdServer> {
 public:
  EtcdFixture() { FixtureCheck(server_.running(), "etcd did not start"); }
  std::string name() const override { return "etcd"; }
  std::string LockYaml(const fs::path&) const override {
    return "  backend: etcd\n  url: " + server_.url() + "\n  op_timeout: 1s\n";
  }
  bool CanRestartWithoutData() const override { return true; }
  void RestartWithoutData() override {
    Kill();
    EmptyDir(server_.dir() + "/data");
    Start();
  }

 private:
  testing::EtcdServer& server() const override { return server_; }

  mutable testing::EtcdServer server_;
};

}  // namespace

std::unique_ptr<BackendFixture> MakeEtcdFixture() { return std::make_unique<EtcdFixture>(); }

}  // namespace tickd::e2e
