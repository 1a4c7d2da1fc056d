// The Redis fixture of the end-to-end suite: its own redis-server on a free loopback
// port (AOF always, a password), which replicas reach through `lock.password_env`
// (the password is never in the job file). Restart() is a crash: kill -9, then the
// same port and the same AOF folder. RestartWithoutData(): kill -9, the folder
// emptied, the same port: a server that ran without persistence.
#include "tests/e2e/fixture_util.h"
#include "tests/e2e/harness.h"
#include "tests/redis/redis_server.h"

namespace tickd::e2e {

namespace {

constexpr const char* kPasswordVar = "TICKD_E2E_REDIS_PASSWORD";

class RedisFixture final : public ServerFixture<testing::RedisServer> {
 public:
  RedisFixture() { FixtureCheck(server_.running(), "redis-server did not start"); }
  std::string name() const override { return "redis"; }
  std::string LockYaml(const fs::path&) const override {
    return "  backend: redis\n  url: " + server_.url() + "\n  password_env: " + kPasswordVar +
           "\n  op_timeout: 1s\n";
  }
  std::vector<std::string> Env() const override {
    return {std::string(kPasswordVar) + "=" + server_.password()};
  }
  bool CanRestartWithoutData() const override { return true; }
  void RestartWithoutData() override {
    Kill();
    EmptyDir(server_.dir());
    Start();
  }

 private:
  testing::RedisServer& server() const override { return server_; }

  mutable testing::RedisServer server_;
};

}  // namespace

std::unique_ptr<BackendFixture> MakeRedisFixture() { return std::make_unique<RedisFixture>(); }

}  // namespace tickd::e2e
