// Claim helpers for the backend tests: the tick of now, a request, a claim that must
// be answered, and the HeldClaim of a won one. Each test sets what else it needs
// (lease, recover…).
#pragma once

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

#include "lock/backend.h"

namespace tickd::testing {

// The wall clock in whole seconds: a tick instant for claims made now.
inline std::int64_t NowUnix() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// `job`@`tick` for `node` with owner token `token`, config hash "hash", the default
// lease, no observation.
inline lock::ClaimRequest Req(std::string job, std::int64_t tick, std::string node,
                              std::string token) {
  lock::ClaimRequest req;
  req.job = std::move(job);
  req.tick_unix = tick;
  req.node = std::move(node);
  req.owner_token = std::move(token);
  req.config_hash = "hash";
  return req;
}

// The backend's answer; the test fails when it is an Error.
inline lock::ClaimOutcome MustClaim(lock::Backend& b, const lock::ClaimRequest& req) {
  auto out = b.Claim(req);
  if (!out) FAIL("claim " << req.job << "@" << req.tick_unix << ": " << out.error().ToString());
  return *out;
}

// A claim that must be won with a fence above `last` (then moved up to it), and below
// 2^53 (exact in a double: Lua, JSON).
inline lock::ClaimOutcome MustWinHigher(lock::Backend& b, const lock::ClaimRequest& req,
                                        std::uint64_t& last) {
  const lock::ClaimOutcome won = MustClaim(b, req);
  REQUIRE(won.status == lock::ClaimStatus::kWon);
  CHECK(won.fence > last);
  CHECK(won.fence < (std::uint64_t{1} << 53));
  last = won.fence;
  return won;
}

inline lock::HeldClaim HeldOf(const lock::ClaimRequest& req, const lock::ClaimOutcome& won) {
  return lock::HeldClaim{req.job, req.tick_unix, req.owner_token, won.fence, req.lease};
}

}  // namespace tickd::testing
