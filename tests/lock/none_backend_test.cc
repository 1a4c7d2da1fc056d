#include "lock/none/none_backend.h"

#include <catch2/catch.hpp>

using namespace std::chrono_literals;
using namespace tickd;
using namespace tickd::lock;

TEST_CASE("none: every claim is won with a growing fence, and it warns at start") {
  FakeClock clock(WallTime(1'000'000s));
  auto backend = NewNoneBackend(clock);
  ClaimRequest req;
  req.job = "j";
  req.tick_unix = 1'000'000;
  auto first = backend->Claim(req);
  auto second = backend->Claim(req);  // the same tick again: still won, nothing is shared
  REQUIRE(first);
  REQUIRE(second);
  CHECK(first->status == ClaimStatus::kWon);
  CHECK(second->status == ClaimStatus::kWon);
  CHECK(second->fence > first->fence);
  const auto warnings = backend->StartupWarnings();
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find("every job runs on every replica") != std::string::npos);
  HeldClaim held{"j", 1'000'000, "t", first->fence, 15s};
  CHECK(*backend->Renew(held) == RenewStatus::kRenewed);
  CHECK(*backend->Complete(held, Completion{"done", 0, 1s}) == CompleteStatus::kCompleted);
}
