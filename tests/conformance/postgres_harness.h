// The PostgreSQL harness of the conformance suite: ONE real PostgreSQL 15 per test
// process (initdb takes a second or two, so it is not repeated per case), stopped at
// exit; each case gets a fresh database, i.e. an empty store whose tables the backend
// creates on first use. Real time: leases expire on the database's clock.
#pragma once

#include <atomic>
#include <catch2/catch.hpp>
#include <thread>

#include "lock/postgres/postgres_backend.h"
#include "tests/conformance/harness.h"
#include "tests/postgres/postgres_server.h"

namespace tickd::conformance {

class PostgresHarness final : public Harness {
 public:
  PostgresHarness() {
    static std::atomic<int> cases{0};
    if (!testing::PostgresServer::Available() || !Server().running()) return;
    db_ = "conformance_" + std::to_string(::getpid()) + "_" + std::to_string(++cases);
    if (!Server().CreateDatabase(db_, &error_)) db_.clear();
  }
  std::string unavailable() const override {
    if (!testing::PostgresServer::Available()) {
      return std::string(testing::PostgresServer::kBinDir) + "/postgres is not installed";
    }
    if (!Server().running()) return "postgres did not start: " + Server().LogTail();
    return db_.empty() ? "CREATE DATABASE failed: " + error_ : "";
  }
  std::unique_ptr<lock::Backend> OpenReplica() override {
    lock::PostgresOptions options;
    options.url = Server().url(db_);
    options.password = Server().password();
    auto backend = lock::NewPostgresBackend(options);
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
  static testing::PostgresServer& Server() {
    static testing::PostgresServer server;
    return server;
  }

  std::string db_;
  std::string error_;
  RealClock clock_;
};

}  // namespace tickd::conformance
