// The PostgreSQL fixture of the end-to-end suite: its own PostgreSQL 15 on a free
// loopback port (tests/postgres/postgres_server.h), which replicas reach through
// `lock.password_env` (the password is never in the job file). Restart() is a crash:
// SIGKILL to the postmaster and every backend, then the same port and data folder
// (crash recovery).
#include <catch2/catch.hpp>

#include "tests/e2e/harness.h"
#include "tests/postgres/postgres_server.h"

namespace tickd::e2e {

namespace {

constexpr const char* kPasswordVar = "TICKD_E2E_POSTGRES_PASSWORD";

class PostgresFixture final : public BackendFixture {
 public:
  PostgresFixture() {
    INFO(server_.LogTail());
    REQUIRE(server_.running());
  }
  std::string name() const override { return "postgres"; }
  std::string LockYaml(const fs::path&) const override {
    return "  backend: postgres\n  url: " + server_.url() + "\n  password_env: " + kPasswordVar +
           "\n  op_timeout: 1s\n";
  }
  std::vector<std::string> Env() const override {
    return {std::string(kPasswordVar) + "=" + server_.password()};
  }
  bool CanRestart() const override { return true; }
  void Restart() override {
    server_.Kill();
    INFO(server_.LogTail());
    REQUIRE(server_.Start());
  }

 private:
  testing::PostgresServer server_;
};

}  // namespace

std::unique_ptr<BackendFixture> MakePostgresFixture() {
  return std::make_unique<PostgresFixture>();
}

}  // namespace tickd::e2e
