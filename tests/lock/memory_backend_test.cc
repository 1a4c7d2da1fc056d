// Memory-backend specifics: the simulated clock drives leases, several replicas share
// one instance through handles. The claim rules themselves are in tests/conformance.
#include "lock/memory/memory_backend.h"

#include <catch2/catch.hpp>

using namespace std::chrono_literals;
using namespace tickd;
using namespace tickd::lock;

namespace {

ClaimRequest Req(std::string node, std::int64_t tick, std::string token) {
  ClaimRequest req;
  req.job = "job";
  req.tick_unix = tick;
  req.node = std::move(node);
  req.owner_token = std::move(token);
  req.lease = 15s;
  return req;
}

}  // namespace

TEST_CASE("memory: replicas sharing one instance see one winner and the fence grows") {
  FakeClock clock(WallTime(1'000'000s));
  std::shared_ptr<Backend> shared = NewMemoryBackend(clock);
  auto a = NewSharedBackendHandle(shared);
  auto b = NewSharedBackendHandle(shared);
  auto won = a->Claim(Req("a", 1'000'000, "ta"));
  REQUIRE(won);
  CHECK(won->status == ClaimStatus::kWon);
  auto lost = b->Claim(Req("b", 1'000'000, "tb"));
  REQUIRE(lost);
  CHECK(lost->status == ClaimStatus::kLost);
  CHECK(lost->holder_node == "a");
  CHECK(ClaimStatusName(lost->status) == "lost");
}

TEST_CASE("memory: a wall-clock step does not expire a lease, steady time does") {
  FakeClock clock(WallTime(1'000'000s));
  auto backend = NewMemoryBackend(clock);
  auto req = Req("a", 1'000'000, "ta");
  req.recover = true;
  auto won = backend->Claim(req);
  REQUIRE(won);
  REQUIRE(won->status == ClaimStatus::kWon);
  auto again = Req("b", 1'000'000, "tb");
  again.recover = true;
  again.starting_deadline = std::nullopt;
  clock.StepWall(1h);
  auto still = backend->Claim(again);
  REQUIRE(still);
  CHECK(still->status == ClaimStatus::kLost);
  clock.Advance(16s);
  auto taken = backend->Claim(again);
  REQUIRE(taken);
  CHECK(taken->status == ClaimStatus::kWon);
  CHECK(taken->fence > won->fence);
}

TEST_CASE("memory: recovery is refused once the deadline counted from the expiry passed") {
  FakeClock clock(WallTime(1'000'000s));
  auto backend = NewMemoryBackend(clock);
  auto req = Req("a", 1'000'000, "ta");
  REQUIRE(backend->Claim(req)->status == ClaimStatus::kWon);
  clock.Advance(15s + 60s + 1s);  // lease 15 s, deadline 60 s from the expiry
  auto late = Req("b", 1'000'000, "tb");
  late.recover = true;
  auto out = backend->Claim(late);
  REQUIRE(out);
  CHECK(out->status == ClaimStatus::kMissed);
}
