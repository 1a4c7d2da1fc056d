// SQLite-specific behaviour: takeover after a SIGKILLed holder, replicas opening a new
// file together, boot id,
// wall-clock steps, URLs, the network-file-system warning. The shared claim rules
// run in tests/conformance.
#include "lock/sqlite/sqlite_backend.h"

#include <linux/magic.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <vector>

#include "tests/lock/temp_dir.h"

using namespace std::chrono_literals;
using namespace tickd;
using namespace tickd::lock;

namespace {

std::unique_ptr<Backend> Open(const std::string& path, Clock& clock, std::string boot_id = "") {
  SqliteOptions options;
  options.path = path;
  options.boot_id = std::move(boot_id);
  auto backend = NewSqliteBackend(options, clock);
  if (!backend) FAIL(backend.error().ToString());
  return std::move(*backend);
}

ClaimRequest Req(std::string job, std::int64_t tick, std::string node, std::string token) {
  ClaimRequest req;
  req.job = std::move(job);
  req.tick_unix = tick;
  req.node = std::move(node);
  req.owner_token = std::move(token);
  req.lease = 60s;  // long: only the holder lock or the boot id can end it within the test
  return req;
}

std::int64_t NowUnix(Clock& clock) {
  return std::chrono::duration_cast<std::chrono::seconds>(clock.Wall().time_since_epoch()).count();
}

ClaimStatus StatusOf(const Result<ClaimOutcome>& out) {
  if (!out) FAIL(out.error().ToString());
  return out->status;
}

}  // namespace

TEST_CASE("sqlite: a SIGKILLed holder's lock frees its tick at once, without a lease wait") {
  testing::TempDir dir;
  REQUIRE_FALSE(dir.path().empty());
  const std::string db = dir.path() + "/tickd.db";
  RealClock clock;
  const std::int64_t tick = NowUnix(clock);

  // The child opens the database first (a SQLite connection must not cross fork()),
  // claims two jobs' ticks, reports, and then hangs until killed.
  int report[2];
  REQUIRE(::pipe(report) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(report[0]);
    SqliteOptions options;
    options.path = db;
    auto backend = NewSqliteBackend(options, clock);
    char ok = 0;
    if (backend) {
      auto a = (*backend)->Claim(Req("a", tick, "child", "child-a"));
      auto b = (*backend)->Claim(Req("b", tick, "child", "child-b"));
      ok = a && b && a->status == ClaimStatus::kWon && b->status == ClaimStatus::kWon ? 1 : 2;
    }
    if (::write(report[1], &ok, 1) != 1) ::_exit(3);
    for (;;) ::pause();
  }
  ::close(report[1]);
  char ok = 0;
  REQUIRE(::read(report[0], &ok, 1) == 1);
  ::close(report[0]);
  REQUIRE(ok == 1);

  auto parent = Open(db, clock);
  auto recover = Req("a", tick, "parent", "parent-a");
  recover.recover = true;
  recover.forbid_overlap = false;
  auto alive = parent->Claim(recover);
  CHECK(StatusOf(alive) == ClaimStatus::kLost);
  CHECK(alive->holder_node == "child");
  auto busy = parent->Claim(Req("b", tick + 1, "parent", "parent-b2"));
  CHECK(StatusOf(busy) == ClaimStatus::kBusy);
  CHECK(busy->holder_node == "child");

  REQUIRE(::kill(child, SIGKILL) == 0);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);

  // At most once without recover: the dead holder's tick is not run again...
  auto no_recover = Req("a", tick, "parent", "parent-a0");
  CHECK(StatusOf(parent->Claim(no_recover)) == ClaimStatus::kLost);
  // ...with recover it is re-claimed at once (the lease had 60 s left), fence higher.
  auto taken = parent->Claim(recover);
  REQUIRE(StatusOf(taken) == ClaimStatus::kWon);
  // forbid: the dead holder's tick no longer makes the job busy.
  auto next = parent->Claim(Req("b", tick + 1, "parent", "parent-b2"));
  REQUIRE(StatusOf(next) == ClaimStatus::kWon);
  CHECK(next->fence > taken->fence);
  auto history = parent->History("a", 1);
  REQUIRE(history);
  REQUIRE(history->size() == 1);
  CHECK(history->front().winner == "parent");
  CHECK(history->front().fence == taken->fence);
}

TEST_CASE("sqlite: leases written under another boot id are void") {
  testing::TempDir dir;
  const std::string db = dir.path() + "/tickd.db";
  RealClock clock;
  const std::int64_t tick = NowUnix(clock);
  auto before_reboot = Open(db, clock, "boot-1");
  auto after_reboot = Open(db, clock, "boot-2");
  auto won = before_reboot->Claim(Req("j", tick, "old", "old-token"));
  REQUIRE(StatusOf(won) == ClaimStatus::kWon);

  // The old boot's running tick no longer makes the job busy (its flock is even still
  // held, by this process: the boot id alone decides).
  auto next = after_reboot->Claim(Req("j", tick + 1, "new", "new-1"));
  CHECK(StatusOf(next) == ClaimStatus::kWon);
  auto again = Req("j", tick, "new", "new-0");
  again.forbid_overlap = false;
  CHECK(StatusOf(after_reboot->Claim(again)) == ClaimStatus::kLost);  // no recover: at most once
  again.recover = true;
  auto recovered = after_reboot->Claim(again);
  REQUIRE(StatusOf(recovered) == ClaimStatus::kWon);
  CHECK(recovered->fence > won->fence);
  HeldClaim stale{"j", tick, "old-token", won->fence, 60s};
  CHECK(*before_reboot->Renew(stale) == RenewStatus::kLost);
  CHECK(*before_reboot->Complete(stale, Completion{"done", 0, 1s}) == CompleteStatus::kNotOwner);
}

TEST_CASE("sqlite: a wall-clock step does not expire a lease") {
  testing::TempDir dir;
  const std::string db = dir.path() + "/tickd.db";
  FakeClock clock(std::chrono::time_point_cast<std::chrono::milliseconds>(
      std::chrono::system_clock::now()));
  const std::int64_t tick = NowUnix(clock);
  auto a = Open(db, clock);
  auto b = Open(db, clock);
  auto req = Req("j", tick, "a", "ta");
  req.lease = 2s;
  REQUIRE(StatusOf(a->Claim(req)) == ClaimStatus::kWon);
  clock.StepWall(1h);
  auto late = Req("j", tick, "b", "tb");
  late.recover = true;
  late.starting_deadline = std::nullopt;
  CHECK(StatusOf(b->Claim(late)) == ClaimStatus::kLost);
}

TEST_CASE("sqlite: URLs, open errors and the network file system warning") {
  CHECK(*SqlitePathFromUrl("sqlite:///var/lib/tickd/t.db") == "/var/lib/tickd/t.db");
  CHECK(*SqlitePathFromUrl("sqlite://./t.db") == "./t.db");
  CHECK(*SqlitePathFromUrl("/abs/t.db") == "/abs/t.db");
  CHECK_FALSE(SqlitePathFromUrl("sqlite://"));
  CHECK_FALSE(SqlitePathFromUrl("redis://h:6379"));

  RealClock clock;
  SqliteOptions options;
  options.path = "/nonexistent-dir-for-tickd/sub/t.db";
  auto bad = NewSqliteBackend(options, clock);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().ToString().find(options.path) != std::string::npos);

  CHECK(RemoteFileSystemName(NFS_SUPER_MAGIC) == std::optional<std::string_view>("nfs"));
  CHECK(RemoteFileSystemName(static_cast<long>(0xFF534D42L)) ==
        std::optional<std::string_view>("cifs"));
  CHECK_FALSE(RemoteFileSystemName(EXT4_SUPER_MAGIC));
  CHECK_FALSE(RemoteFileSystemName(TMPFS_MAGIC));

  testing::TempDir dir;
  auto local = Open(dir.path() + "/t.db", clock);
  for (const std::string& w : local->StartupWarnings()) {
    CHECK(w.find("network file system") == std::string::npos);
  }
}

TEST_CASE("sqlite: replicas that open a new database file at the same instant all start") {
  // The first open switches the file to WAL and creates the tables; SQLite may answer
  // a racing opener SQLITE_BUSY without waiting. 8 processes, released together by
  // one pipe, 10 rounds on a fresh file each.
  constexpr int kProcesses = 8;
  for (int round = 0; round < 10; ++round) {
    testing::TempDir dir;
    REQUIRE_FALSE(dir.path().empty());
    const std::string db = dir.path() + "/tickd.db";
    int go[2];
    REQUIRE(::pipe(go) == 0);
    std::vector<pid_t> children;
    for (int i = 0; i < kProcesses; ++i) {
      const pid_t child = ::fork();
      REQUIRE(child >= 0);
      if (child == 0) {
        ::close(go[1]);
        char c;
        if (::read(go[0], &c, 1) != 0) ::_exit(3);  // EOF: everyone starts now
        RealClock clock;
        SqliteOptions options;
        options.path = db;
        auto backend = NewSqliteBackend(options, clock);
        if (!backend) {
          std::fprintf(stderr, "%s\n", backend.error().ToString().c_str());
          ::_exit(1);
        }
        ::_exit(0);
      }
      children.push_back(child);
    }
    ::close(go[0]);
    ::close(go[1]);
    int failed = 0;
    for (pid_t child : children) {
      int status = 0;
      REQUIRE(::waitpid(child, &status, 0) == child);
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
    }
    INFO("round " << round);
    CHECK(failed == 0);
  }
}

TEST_CASE("sqlite: fences only grow, across a wall-clock step back and a deleted database") {
  testing::TempDir dir;
  const std::string db = dir.path() + "/tickd.db";
  FakeClock clock(
      std::chrono::time_point_cast<std::chrono::milliseconds>(std::chrono::system_clock::now()));
  const std::int64_t tick = NowUnix(clock);
  std::uint64_t last = 0;
  auto claim = [&](Backend& b, std::int64_t t, const std::string& token) {
    auto req = Req("j", t, "a", token);
    req.forbid_overlap = false;
    req.starting_deadline = std::nullopt;
    auto won = b.Claim(req);
    REQUIRE(StatusOf(won) == ClaimStatus::kWon);
    CHECK(won->fence > last);
    last = won->fence;
  };
  {
    auto a = Open(db, clock);
    claim(*a, tick, "t0");
    // At least the wall clock in ms, shifted: a fresh database starts above it.
    CHECK(last >= static_cast<std::uint64_t>(clock.Wall().time_since_epoch().count())
                      << kFenceEpochShift);
    claim(*a, tick + 1, "t1");
    clock.StepWall(-1h);  // the clock steps back: the counter still moves on
    claim(*a, tick + 2, "t2");
  }
  clock.StepWall(2h);
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((db + suffix).c_str());
  auto b = Open(db, clock);
  claim(*b, tick, "t0-again");  // a new database: the tick is free, the fence still higher
}

// Regression (nemesis, sqlite-dir-removed): replicas still on a deleted database file
// and a replica restarted onto a new one decided the same ticks twice.
TEST_CASE("sqlite: a database file removed or replaced under a replica fails its claims closed") {
  testing::TempDir dir;
  REQUIRE_FALSE(dir.path().empty());
  const std::string db = dir.path() + "/tickd.db";
  RealClock clock;
  const std::int64_t tick = NowUnix(clock);
  auto old_replica = Open(db, clock);
  REQUIRE(StatusOf(old_replica->Claim(Req("job", tick, "a", "t1"))) == ClaimStatus::kWon);

  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((db + suffix).c_str());
  auto gone = old_replica->Claim(Req("job", tick + 1, "a", "t2"));
  REQUIRE_FALSE(gone);
  CHECK_THAT(gone.error().ToString(), Catch::Contains("is gone"));

  // A replica started now gets a new, empty file: the old one must not claim beside it.
  auto new_replica = Open(db, clock);
  REQUIRE(StatusOf(new_replica->Claim(Req("job", tick + 2, "b", "t3"))) == ClaimStatus::kWon);
  auto replaced = old_replica->Claim(Req("job", tick + 2, "a", "t4"));
  REQUIRE_FALSE(replaced);
  CHECK_THAT(replaced.error().ToString(), Catch::Contains("was replaced"));
  // The new file's replica goes on as usual.
  CHECK(StatusOf(new_replica->Claim(Req("other", tick + 3, "b", "t5"))) == ClaimStatus::kWon);
}
