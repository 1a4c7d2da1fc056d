#include "base/thread_pool.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <mutex>
#include <set>
#include <thread>

namespace tickd {
namespace {

using namespace std::chrono_literals;

template <typename Pred>
bool WaitUntil(Pred pred, std::chrono::milliseconds limit = 5s) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

TEST_CASE("a task posted while every thread is busy gets a thread of its own", "[base]") {
  ThreadPool pool;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> started{0};
  for (int i = 0; i < 3; ++i) {
    REQUIRE(pool.Post([&, released] {
      ++started;
      released.wait();
    }));
  }
  // None waits for another: all three run at once.
  CHECK(WaitUntil([&] { return started == 3; }));
  CHECK(pool.threads() == 3);
  release.set_value();
}

TEST_CASE("with max_threads busy, a task is refused and not run; an idle one still takes it",
          "[base]") {
  ThreadPool pool(60s, 1);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> ran{0};
  REQUIRE(pool.Post([&, released] {
    released.wait();
    ++ran;
  }));
  const Result<void> refused = pool.Post([&] { ran += 10; });
  REQUIRE_FALSE(refused);
  CHECK(refused.error().ToString().find("all 1 threads are busy") != std::string::npos);
  release.set_value();
  REQUIRE(WaitUntil([&] { return pool.idle_threads() == 1; }));
  CHECK(ran == 1);  // the refused task never ran
  REQUIRE(pool.Post([&] { ran += 100; }));
  CHECK(WaitUntil([&] { return ran == 101; }));
  CHECK(pool.threads() == 1);
}

TEST_CASE("an idle thread takes the next task instead of a new thread", "[base]") {
  ThreadPool pool;
  std::mutex mu;
  std::set<std::thread::id> ids;
  std::atomic<int> done{0};
  auto task = [&] {
    std::lock_guard lock(mu);
    ids.insert(std::this_thread::get_id());
    ++done;
  };
  for (int i = 0; i < 20; ++i) {
    REQUIRE(pool.Post(task));
    // One at a time: each task ends, and its thread waits for the next, before it.
    REQUIRE(WaitUntil([&] { return done == i + 1 && pool.idle_threads() == 1; }));
  }
  CHECK(ids.size() == 1);
  CHECK(pool.threads() == 1);
}

TEST_CASE("a burst's threads, idle together, take the next burst without new threads", "[base]") {
  // The calls of a busy instant end together and their threads wait for the next one
  // (jobs/thread_execution.cc): each must be handed a task of the next burst.
  constexpr int kBurst = 200;
  ThreadPool pool;
  std::mutex mu;
  std::set<std::thread::id> ids;
  std::atomic<int> done{0};
  for (int round = 1; round <= 2; ++round) {
    std::promise<void> release;
    std::shared_future<void> released = release.get_future().share();
    std::atomic<int> started{0};
    for (int i = 0; i < kBurst; ++i) {
      REQUIRE(pool.Post([&, released] {
        ++started;
        released.wait();  // every task of the burst holds its thread at once
        {
          std::lock_guard lock(mu);
          ids.insert(std::this_thread::get_id());
        }
        ++done;
      }));
    }
    REQUIRE(WaitUntil([&] { return started == kBurst; }, 30s));
    release.set_value();
    REQUIRE(
        WaitUntil([&] { return done == round * kBurst && pool.idle_threads() == kBurst; }, 30s));
  }
  CHECK(pool.threads() == kBurst);
  CHECK(ids.size() == static_cast<std::size_t>(kBurst));
}

TEST_CASE("threads idle longer than keep_idle end", "[base]") {
  ThreadPool pool(50ms);
  std::atomic<int> done{0};
  for (int i = 0; i < 4; ++i) REQUIRE(pool.Post([&] { ++done; }));
  REQUIRE(WaitUntil([&] { return done == 4; }));
  CHECK(WaitUntil([&] { return pool.threads() == 0; }));
  // And the pool still works afterwards.
  REQUIRE(pool.Post([&] { ++done; }));
  CHECK(WaitUntil([&] { return done == 5; }));
}

TEST_CASE("the pool's destructor waits for the tasks that run", "[base]") {
  std::atomic<bool> finished{false};
  {
    ThreadPool pool;
    REQUIRE(pool.Post([&] {
      std::this_thread::sleep_for(100ms);
      finished = true;
    }));
  }
  CHECK(finished);
}

}  // namespace
}  // namespace tickd
