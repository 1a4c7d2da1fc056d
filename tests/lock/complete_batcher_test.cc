// CompleteBatcher: concurrent completes are written together, each caller gets its
// own answer, and a lone complete is a batch of one.
#include "lock/complete_batcher.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace tickd::lock {
namespace {

HeldClaim Held(int i) {
  return HeldClaim{"job-" + std::to_string(i), 1000 + i, "token-" + std::to_string(i),
                   static_cast<std::uint64_t>(i), std::chrono::seconds(15)};
}

TEST_CASE("a lone complete is one batch of one", "[lock][batcher]") {
  std::vector<std::size_t> sizes;
  CompleteBatcher batcher([&](std::span<const CompleteRequest> reqs) {
    sizes.push_back(reqs.size());
    return std::vector<Result<CompleteStatus>>(reqs.size(), CompleteStatus::kCompleted);
  });
  auto r = batcher.Complete(Held(1), Completion{"done", 0, std::chrono::milliseconds(5)});
  REQUIRE(r);
  CHECK(*r == CompleteStatus::kCompleted);
  CHECK(sizes == std::vector<std::size_t>{1});
}

TEST_CASE("completes that arrive during a write share the next batch, each with its answer",
          "[lock][batcher]") {
  constexpr int kThreads = 16;
  std::atomic<int> batches{0};
  std::atomic<int> written{0};
  // Odd fences are answered kNotOwner, even ones kCompleted, fence 7 with an error: the
  // answers must reach the caller they belong to.
  CompleteBatcher batcher([&](std::span<const CompleteRequest> reqs) {
    ++batches;
    written += static_cast<int>(reqs.size());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a slow fsync
    std::vector<Result<CompleteStatus>> out;
    for (const CompleteRequest& r : reqs) {
      if (r.held.fence == 7) {
        out.push_back(MakeError("test", "write failed for " + r.held.job));
      } else {
        out.push_back(r.held.fence % 2 ? CompleteStatus::kNotOwner : CompleteStatus::kCompleted);
      }
    }
    return out;
  });
  std::vector<Result<CompleteStatus>> answers(kThreads, CompleteStatus::kCompleted);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      answers[static_cast<std::size_t>(i)] =
          batcher.Complete(Held(i), Completion{"done", 0, std::chrono::milliseconds(1)});
    });
  }
  for (auto& t : threads) t.join();
  CHECK(written == kThreads);
  CHECK(batches < kThreads);  // at least two completes shared a write
  for (int i = 0; i < kThreads; ++i) {
    const auto& a = answers[static_cast<std::size_t>(i)];
    if (i == 7) {
      REQUIRE_FALSE(a);
      CHECK(a.error().ToString().find("job-7") != std::string::npos);
    } else {
      REQUIRE(a);
      CHECK(*a == (i % 2 ? CompleteStatus::kNotOwner : CompleteStatus::kCompleted));
    }
  }
}

TEST_CASE("a short or throwing batch write gives errors, never a hang", "[lock][batcher]") {
  CompleteBatcher short_answer(
      [](std::span<const CompleteRequest>) { return std::vector<Result<CompleteStatus>>{}; });
  auto a = short_answer.Complete(Held(1), Completion{"done", 0, std::chrono::milliseconds(1)});
  REQUIRE_FALSE(a);
  CHECK(a.error().ToString().find("no answer") != std::string::npos);

  CompleteBatcher throwing(
      [](std::span<const CompleteRequest>) -> std::vector<Result<CompleteStatus>> {
        throw std::runtime_error("store exploded");
      });
  auto b = throwing.Complete(Held(2), Completion{"done", 0, std::chrono::milliseconds(1)});
  REQUIRE_FALSE(b);
  CHECK(b.error().ToString().find("store exploded") != std::string::npos);
}

}  // namespace
}  // namespace tickd::lock
