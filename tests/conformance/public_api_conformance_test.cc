// The claim contract seen through the public API (include/tickd/): Store::try_lock and
// tickd::Scheduler over every backend of harnesses.h, each replica a tickd::Store on
// its own connection (lib::MakeStore over Harness::OpenReplica: the harness owns the
// server and the clock; everything after that is the public API).
#include <atomic>
#include <catch2/catch.hpp>
#include <map>
#include <mutex>
#include <thread>

#include "lib/store_impl.h"
#include "tests/conformance/harnesses.h"
#include "tickd/tickd.h"

using namespace std::chrono_literals;
using tickd::LockAttempt;
using tickd::Store;
using tickd::conformance::AllHarnesses;
using tickd::conformance::Harness;

namespace {

bool Skipped(const Harness& h) {
  const std::string why = h.unavailable();
  if (!why.empty()) WARN("backend not available, public API cases skipped: " << why);
  return !why.empty();
}

Store OpenStore(Harness& h) { return tickd::lib::MakeStore(h.OpenReplica(), h.clock(), 5ms); }

}  // namespace

TEMPLATE_LIST_TEST_CASE("public API: try_lock has one holder among many threads and stores",
                        "[conformance]", AllHarnesses) {
  TestType h;
  if (Skipped(h)) return;
  constexpr int kReplicas = 4;
  std::vector<Store> stores;
  for (int i = 0; i < kReplicas; ++i) stores.push_back(OpenStore(h));
  std::atomic<int> acquired{0};
  std::atomic<int> held{0};
  std::atomic<int> failed{0};
  std::vector<std::optional<tickd::LockGuard>> guards(kReplicas);
  std::vector<std::thread> threads;
  for (int i = 0; i < kReplicas; ++i) {
    threads.emplace_back([&, i] {
      LockAttempt a = stores[i].try_lock("conformance", 30s, "node-" + std::to_string(i));
      switch (a.status()) {
        case LockAttempt::Status::kAcquired:
          ++acquired;
          guards[i].emplace(std::move(a.guard()));
          break;
        case LockAttempt::Status::kHeld:
          ++held;
          break;
        case LockAttempt::Status::kFailed:
          ++failed;
          break;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  CHECK(failed == 0);
  CHECK(acquired == 1);
  CHECK(held == kReplicas - 1);
}

TEMPLATE_LIST_TEST_CASE("public API: a released lock is taken again at once with a higher fence",
                        "[conformance]", AllHarnesses) {
  TestType h;
  if (Skipped(h)) return;
  Store a = OpenStore(h);
  Store b = OpenStore(h);
  std::uint64_t last_fence = 0;
  for (int i = 0; i < 6; ++i) {  // several acquisitions within one second of the clock
    Store& mine = i % 2 == 0 ? a : b;
    Store& other = i % 2 == 0 ? b : a;
    LockAttempt got = mine.try_lock("again", 30s, i % 2 == 0 ? "a" : "b");
    INFO("acquisition " << i << ": "
                        << (got.status() == LockAttempt::Status::kFailed ? got.error().message
                                                                         : got.holder()));
    REQUIRE(got.acquired());
    CHECK(got.guard().fence() > last_fence);
    last_fence = got.guard().fence();
    LockAttempt blocked = other.try_lock("again", 30s, "other");
    CHECK(blocked.status() == LockAttempt::Status::kHeld);
    CHECK(blocked.holder() == (i % 2 == 0 ? "a" : "b"));
    got.guard().release();
  }
}

TEMPLATE_LIST_TEST_CASE("public API: a lock whose holder stopped renewing is free after the lease",
                        "[conformance]", AllHarnesses) {
  TestType h;
  if (Skipped(h)) return;
  Store a = OpenStore(h);
  Store b = OpenStore(h);
  // The holder's lease, taken with a raw claim so that nobody renews it (a process
  // that died holding the key).
  std::unique_ptr<tickd::lock::Backend> raw = h.OpenReplica();
  tickd::lock::ClaimRequest req;
  req.job = "lock.orphan";
  req.tick_unix =
      std::chrono::duration_cast<std::chrono::seconds>(h.clock().Wall().time_since_epoch()).count();
  req.node = "dead";
  req.owner_token = "0123456789abcdef0123456789abcdef";
  req.lease = h.short_lease();
  req.starting_deadline = std::nullopt;
  req.config_hash = "lock";
  req.node_wall = h.clock().Wall();
  auto claimed = raw->Claim(req);
  REQUIRE(claimed);
  REQUIRE(claimed->status == tickd::lock::ClaimStatus::kWon);
  LockAttempt early = a.try_lock("orphan", 30s, "a");
  CHECK(early.status() == LockAttempt::Status::kHeld);
  CHECK(early.holder() == "dead");
  h.Elapse(h.short_lease() + 1500ms);
  LockAttempt late = b.try_lock("orphan", 30s, "b");
  INFO((late.status() == LockAttempt::Status::kFailed ? late.error().message : late.holder()));
  REQUIRE(late.acquired());
  CHECK(late.guard().fence() > claimed->fence);
}

TEMPLATE_LIST_TEST_CASE("public API: two schedulers on one store run each tick once",
                        "[conformance]", AllHarnesses) {
  TestType h;
  if (Skipped(h)) return;
  std::mutex mu;
  std::map<std::int64_t, std::vector<std::uint64_t>> runs;
  auto record = [&](const tickd::RunContext& run) {
    std::lock_guard lock(mu);
    runs[run.tick.time_since_epoch().count()].push_back(run.fence);
  };
  tickd::SchedulerOptions quiet;
  quiet.log = [](std::string_view) {};
  {
    tickd::SchedulerOptions oa = quiet, ob = quiet;
    oa.node = "a";
    ob.node = "b";
    tickd::Scheduler a(OpenStore(h), oa);
    tickd::Scheduler b(OpenStore(h), ob);
    a.add("every-second", "@every 1s", record);
    b.add("every-second", "@every 1s", record);
    a.start();
    b.start();
    // 5 s of the store's clock: real time, or FakeClock steps with real pauses.
    for (int i = 0; i < 100; ++i) {
      h.Elapse(50ms);
      std::this_thread::sleep_for(2ms);
    }
    a.stop();
    b.stop();
  }
  std::lock_guard lock(mu);
  CHECK(runs.size() >= 3);
  std::uint64_t last = 0;
  for (const auto& [tick, fences] : runs) {
    INFO("tick " << tick);
    REQUIRE(fences.size() == 1);
    CHECK(fences[0] > last);
    last = fences[0];
  }
}
