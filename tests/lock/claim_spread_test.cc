// The claim order of lock/claim_spread.h: every replica's batch is a permutation of
// the jobs, each starts with its own slice, and the slices do not depend on the
// order the jobs come in.
#include "lock/claim_spread.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <set>
#include <string>

namespace tickd::lock {
namespace {

std::vector<std::string> Jobs(int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back("job-" + std::to_string(i));
  return out;
}

std::vector<std::string_view> Views(const std::vector<std::string>& v) {
  return {v.begin(), v.end()};
}

TEST_CASE("one replica, or none known, sends the jobs in the order given") {
  const auto jobs = Jobs(5);
  for (const std::size_t replicas : {0U, 1U}) {
    CHECK(SpreadOrder(Views(jobs), 0, replicas) == std::vector<std::size_t>{0, 1, 2, 3, 4});
  }
}

TEST_CASE("three replicas start on disjoint thirds and each sends every job once") {
  const auto jobs = Jobs(3'000);
  const auto names = Views(jobs);
  std::vector<std::set<std::string_view>> first_slices;
  for (std::size_t rank = 0; rank < 3; ++rank) {
    const auto order = SpreadOrder(names, rank, 3);
    std::vector<std::size_t> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    std::vector<std::size_t> all(jobs.size());
    for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
    REQUIRE(sorted == all);  // a permutation: every job exactly once

    // The batch begins with this replica's whole slice.
    std::set<std::string_view> first;
    std::size_t k = 0;
    while (k < order.size() && SpreadSlice(names[order[k]], 3) == rank)
      first.insert(names[order[k++]]);
    for (; k < order.size(); ++k) CHECK(SpreadSlice(names[order[k]], 3) != rank);
    // A fair share: a third, give or take 10 %.
    CHECK(first.size() > 900);
    CHECK(first.size() < 1'100);
    first_slices.push_back(std::move(first));
  }
  for (std::size_t a = 0; a < 3; ++a) {
    for (std::size_t b = a + 1; b < 3; ++b) {
      for (const auto& job : first_slices[a]) CHECK_FALSE(first_slices[b].contains(job));
    }
  }
}

// The jobs a replica sends before any job of another slice.
std::set<std::string_view> FirstSlice(const std::vector<std::string>& jobs, std::size_t rank,
                                      std::size_t replicas) {
  const auto names = Views(jobs);
  std::set<std::string_view> out;
  for (const std::size_t i : SpreadOrder(names, rank, replicas)) {
    if (SpreadSlice(names[i], replicas) != rank) break;
    out.insert(names[i]);
  }
  return out;
}

TEST_CASE("a job's slice does not depend on where it stands in the batch") {
  const auto jobs = Jobs(200);
  auto reversed = jobs;
  std::reverse(reversed.begin(), reversed.end());
  const auto forward = FirstSlice(jobs, 1, 4);
  CHECK(forward.size() > 20);
  CHECK(forward == FirstSlice(reversed, 1, 4));
  // FNV-1a of the name: the same in every build and on every machine.
  CHECK(SpreadSlice("", 7) == 14695981039346656037ULL % 7);
  CHECK(SpreadSlice("a", 1'000'003) == 12638187200555641996ULL % 1'000'003);
}

}  // namespace
}  // namespace tickd::lock
