// The PostgreSQL fixture of the end-to-end suite: its own PostgreSQL 15 on a free
// loopback port (tests/postgres/postgres_server.h), which replicas reach through
// `lock.password_env` (the password is never in the job file). Restart() is a crash:
// SIGKILL to the postmaster and every backend, then the same port and data folder
// (crash recovery). The lock database is one of its own, so RestartWithoutData() can
// drop it (connections forced out) and create it empty again.
#include "tests/e2e/fixture_util.h"
#include "tests/e2e/harness.h"
#include "tests/postgres/postgres_server.h"

namespace tickd::e2e {

namespace {

constexpr const char* kPasswordVar = "TICKD_E2E_POSTGRES_PASSWORD";
constexpr const char* kDatabase = "tickd_e2e";

class PostgresFixture final : public ServerFixture<testing::PostgresServer> {
 public:
  PostgresFixture() {
    FixtureCheck(server_.running(), "PostgreSQL did not start: " + server_.LogTail());
    CreateDatabase();
  }
  std::string name() const override { return "postgres"; }
  std::string LockYaml(const fs::path&) const override {
    return "  backend: postgres\n  url: " + server_.url(kDatabase) +
           "\n  password_env: " + kPasswordVar + "\n  op_timeout: 1s\n";
  }
  std::vector<std::string> Env() const override {
    return {std::string(kPasswordVar) + "=" + server_.password()};
  }
  bool CanRestartWithoutData() const override { return true; }
  void RestartWithoutData() override {
    std::string error;
    FixtureCheck(server_
                     .Query(std::string("DROP DATABASE \"") + kDatabase + "\" WITH (FORCE)",
                            "postgres", &error)
                     .has_value(),
                 "PostgreSQL: drop database: " + error);
    CreateDatabase();
  }

 private:
  void CreateDatabase() {
    std::string error;
    FixtureCheck(server_.CreateDatabase(kDatabase, &error),
                 "PostgreSQL: create database: " + error);
  }

  testing::PostgresServer& server() const override { return server_; }

  mutable testing::PostgresServer server_;
};

}  // namespace

std::unique_ptr<BackendFixture> MakePostgresFixture() {
  return std::make_unique<PostgresFixture>();
}

}  // namespace tickd::e2e
