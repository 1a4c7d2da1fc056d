#include "lock/registry.h"

#include <unistd.h>

#include <algorithm>

#include <catch2/catch.hpp>

using namespace std::chrono_literals;
using namespace tickd;
using namespace tickd::lock;

TEST_CASE("RedactUrl masks the password of the userinfo and of query parameters") {
  CHECK(RedactUrl("redis://u:secret@h:6379/0") == "redis://u:***@h:6379/0");
  CHECK(RedactUrl("redis://:secret@h:6379") == "redis://:***@h:6379");
  CHECK(RedactUrl("postgres://app:p%40ss@db:5432/tickd?sslmode=require") ==
        "postgres://app:***@db:5432/tickd?sslmode=require");
  CHECK(RedactUrl("postgres://db/tickd?user=a&password=secret&x=1") ==
        "postgres://db/tickd?user=a&password=***&x=1");
  CHECK(RedactUrl("etcd://h1:2379,h2:2379") == "etcd://h1:2379,h2:2379");
  CHECK(RedactUrl("redis://user@h:6379") == "redis://user@h:6379");
  CHECK(RedactUrl("redis-sentinel://u:secret@h1:26379,h2/m/0") ==
        "redis-sentinel://u:***@h1:26379,h2/m/0");
  CHECK(RedactUrl("sqlite:///var/lib/tickd/a@b.db") == "sqlite:///var/lib/tickd/a@b.db");
}

TEST_CASE("BackendNames lists the built-in backends") {
  const auto names = BackendNames();
  CHECK(std::count(names.begin(), names.end(), "memory") == 1);
  CHECK(std::count(names.begin(), names.end(), "none") == 1);
#ifdef TICKD_TEST_WITH_SQLITE
  CHECK(std::count(names.begin(), names.end(), "sqlite") == 1);
#endif
}

TEST_CASE("OpenBackend chooses by name or URL scheme and names the backend in errors") {
  FakeClock clock(WallTime(1'000'000s));
  BackendOptions options;
  options.backend = "none";
  auto none = OpenBackend(options, clock);
  REQUIRE(none);
  CHECK((*none)->name() == "none");

  options.backend = "";
  options.url = "memory://x";
  auto memory = OpenBackend(options, clock);
  REQUIRE(memory);
  CHECK((*memory)->name() == "memory");

  options.backend = "nosuch";
  options.url = "nosuch://u:secret@h";
  auto bad = OpenBackend(options, clock);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().ToString().find("nosuch") != std::string::npos);
  CHECK(bad.error().ToString().find("secret") == std::string::npos);

  options.backend = "sqlite";
  options.url = "redis://h:6379";
  auto mismatch = OpenBackend(options, clock);
  REQUIRE_FALSE(mismatch);
  CHECK(mismatch.error().ToString().find("does not match") != std::string::npos);

  // redis-sentinel:// is the redis backend's (it fails here for want of a sentinel).
  options.backend = "redis";
  options.url = "redis-sentinel://127.0.0.1:1/m";
  options.op_timeout = std::chrono::milliseconds(200);
  auto sentinel = OpenBackend(options, clock);
  REQUIRE_FALSE(sentinel);
  CHECK(sentinel.error().ToString().find("does not match") == std::string::npos);
}

TEST_CASE("memory://NAME stores are shared by every opener of the name") {
  FakeClock clock(WallTime(1'000'000s));
  BackendOptions options;
  options.backend = "memory";
  options.url = "memory://shared-test";
  auto a = OpenBackend(options, clock);
  auto b = OpenBackend(options, clock);
  REQUIRE(a);
  REQUIRE(b);
  ClaimRequest req;
  req.job = "j";
  req.tick_unix = 1'000'000;
  req.node = "a";
  req.owner_token = "ta";
  REQUIRE((*a)->Claim(req)->status == ClaimStatus::kWon);
  req.node = "b";
  req.owner_token = "tb";
  auto lost = (*b)->Claim(req);
  REQUIRE(lost);
  CHECK(lost->status == ClaimStatus::kLost);
  CHECK(lost->holder_node == "a");
}

#ifdef TICKD_TEST_WITH_SQLITE
TEST_CASE("OpenBackend opens sqlite from its URL and names the path when it cannot") {
  FakeClock clock(WallTime(1'000'000s));
  const std::string dir = "/tmp/tickd-registry-test-" + std::to_string(::getpid());
  BackendOptions options;
  options.backend = "sqlite";
  options.url = "sqlite://" + dir + "-missing/sub/t.db";
  auto bad = OpenBackend(options, clock);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().ToString().find(dir + "-missing/sub/t.db") != std::string::npos);

  options.url = "sqlite://" + dir + ".db";
  auto good = OpenBackend(options, clock);
  REQUIRE(good);
  CHECK((*good)->name() == "sqlite");
  good->reset();
  for (const char* suffix : {".db", ".db-wal", ".db-shm"}) ::unlink((dir + suffix).c_str());
  ::rmdir((dir + ".db.locks").c_str());
}
#endif
