// How lock/claim_waves.h cuts a batch into chunks: within the limit of claims and
// bytes, never mixing likely decided claims with open ones, a job once per wave.
#include "lock/claim_waves.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace tickd::lock {
namespace {

// The chunks ClaimInWaves hands over (as indices into reqs), every claim answered won.
std::vector<std::vector<std::size_t>> Chunks(const std::vector<ClaimRequest>& reqs,
                                             const ChunkLimit& limit) {
  std::vector<std::vector<std::size_t>> chunks;
  std::vector<bool> answered(reqs.size(), false);
  ClaimInWaves(
      reqs, limit, 3, [&](std::size_t i, Result<ClaimOutcome>) { answered[i] = true; },
      Error("test", "gave up"),
      [&](std::span<const std::size_t> chunk, std::optional<Error>&) {
        chunks.emplace_back(chunk.begin(), chunk.end());
        for (const std::size_t i : chunk) answered[i] = true;
        return std::vector<std::size_t>{};
      });
  for (std::size_t i = 0; i < reqs.size(); ++i) CHECK(answered[i]);
  return chunks;
}

std::vector<ClaimRequest> Batch(int own, int others) {
  std::vector<ClaimRequest> reqs;
  for (int j = 0; j < own + others; ++j) {
    ClaimRequest req;
    req.job = "job-" + std::to_string(j);
    req.tick_unix = 60;
    req.likely_decided = j >= own;
    reqs.push_back(req);
  }
  return reqs;
}

TEST_CASE("a chunk holds either the replica's own claims or the likely decided ones") {
  // 334 own and 666 others' with room for 351: the own slice alone, then the others'.
  const auto chunks = Chunks(Batch(334, 666), ChunkLimit{351});
  REQUIRE(chunks.size() == 3);
  CHECK(chunks[0].size() == 334);
  CHECK(chunks[1].size() == 351);
  CHECK(chunks[2].size() == 315);
  for (const auto& chunk : chunks) {
    for (const std::size_t i : chunk) CHECK((i >= 334) == (chunks[0] != chunk));
  }
}

TEST_CASE("a chunk's claims add up to no more than its bytes, one claim at least") {
  auto reqs = Batch(10, 0);
  reqs[4].job = std::string(500, 'j');  // a claim above the whole budget goes alone
  const ChunkLimit limit{100, 300, [](const ClaimRequest& req) { return req.job.size() + 95; }};
  const auto chunks = Chunks(reqs, limit);
  // 100 bytes each: three to a chunk, the long one alone.
  REQUIRE(chunks.size() == 5);
  CHECK(chunks[0] == std::vector<std::size_t>{0, 1, 2});
  CHECK(chunks[1] == std::vector<std::size_t>{3});
  CHECK(chunks[2] == std::vector<std::size_t>{4});
  CHECK(chunks[3] == std::vector<std::size_t>{5, 6, 7});
  CHECK(chunks[4] == std::vector<std::size_t>{8, 9});
}

TEST_CASE("a job's second tick goes in the next wave, after its first") {
  auto reqs = Batch(3, 0);
  ClaimRequest later = reqs[1];
  later.tick_unix = 61;
  reqs.push_back(later);
  const auto chunks = Chunks(reqs, ChunkLimit{100});
  REQUIRE(chunks.size() == 2);
  CHECK(chunks[0] == std::vector<std::size_t>{0, 1, 2});
  CHECK(chunks[1] == std::vector<std::size_t>{3});
}

}  // namespace
}  // namespace tickd::lock
