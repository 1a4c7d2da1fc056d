// Claim throughput on one ZooKeeper: N replicas (threads, each with its own backend
// and session) × M jobs `@every 1s` through the real backend's batched path
// (lock/zookeeper: per 250 claims one pipelined read with one clock read, then one
// pipelined multi per claim); the runs are bench/batch_claim_driver.h. Then, in the
// same run, the store's own reference rate: a plain create loop (N threads, each with
// its own session, creating persistent nodes with up to 256 creates in flight).
//
// Usage: zookeeper_claim_bench [--replicas N] [--jobs M] [--seconds S] [--sat-ticks K]
//                              [--reference-creates C (per thread; 0: none)]
// It starts its own standalone ZooKeeper (tests/zookeeper/zookeeper_server.h: loopback,
// default forceSync=yes, i.e. every write fsync'd to the txn log before the answer).
#include <zookeeper/zookeeper.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench/batch_claim_driver.h"
#include "lock/zookeeper/zookeeper_backend.h"
#include "tests/zookeeper/zookeeper_server.h"

using namespace std::chrono_literals;

namespace {

// Up to kWindow creates in flight on one session; counts the answers.
struct Window {
  static constexpr int kWindow = 256;
  std::mutex mu;
  std::condition_variable cv;
  int in_flight = 0;
  int errors = 0;
};

void OnCreated(int rc, const char*, const void* data) {
  auto* w = static_cast<Window*>(const_cast<void*>(data));
  std::lock_guard lock(w->mu);
  --w->in_flight;
  if (rc != ZOK) ++w->errors;
  w->cv.notify_all();
}

// The plain create loop: `threads` sessions × `creates` persistent nodes of 100 bytes
// (about a tick record's size) under /bench-ref; creates per second over all.
void Reference(const tickd::testing::ZookeeperServer& server, int threads, int creates) {
  zoo_set_debug_level(static_cast<ZooLogLevel>(0));
  const std::string hosts = "127.0.0.1:" + std::to_string(server.port());
  std::atomic<int> errors{0};
  const std::string data(100, 'x');
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      zhandle_t* zh = zookeeper_init(hosts.c_str(), nullptr, 30000, nullptr, nullptr, 0);
      for (int i = 0; i < 100 && zoo_state(zh) != ZOO_CONNECTED_STATE; ++i) {
        std::this_thread::sleep_for(50ms);
      }
      const std::string dir = "/bench-ref-" + std::to_string(t);
      Window w;
      {  // the folder first (the async API only: the sync one needs THREADED)
        std::unique_lock lock(w.mu);
        ++w.in_flight;
        if (zoo_acreate(zh, dir.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, &OnCreated, &w) != ZOK) {
          --w.in_flight;
        }
        w.cv.wait(lock, [&] { return w.in_flight == 0; });
        w.errors = 0;
      }
      for (int i = 0; i < creates; ++i) {
        std::unique_lock lock(w.mu);
        w.cv.wait(lock, [&] { return w.in_flight < Window::kWindow; });
        ++w.in_flight;
        lock.unlock();
        const std::string path = dir + "/n" + std::to_string(i);
        if (zoo_acreate(zh, path.c_str(), data.data(), static_cast<int>(data.size()),
                        &ZOO_OPEN_ACL_UNSAFE, 0, &OnCreated, &w) != ZOK) {
          std::lock_guard relock(w.mu);
          --w.in_flight;
          ++w.errors;
        }
      }
      std::unique_lock lock(w.mu);
      w.cv.wait(lock, [&] { return w.in_flight == 0; });
      errors += w.errors;
      lock.unlock();
      zookeeper_close(zh);
    });
  }
  for (auto& th : workers) th.join();
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "reference: plain create loop, %d sessions x %d creates (<= %d in flight): "
      "%.2f s = %.0f creates/s, errors %d\n",
      threads, creates, Window::kWindow, secs, threads * creates / secs, errors.load());
}

}  // namespace

int main(int argc, char** argv) {
  int reference_creates = 20000;
  const tickd::bench::BatchArgs a = tickd::bench::ParseBatchArgs(
      argc, argv, tickd::bench::BatchArgs{3, 1000, 10, 5}, [&](const std::string& key, int value) {
        if (key == "--reference-creates") reference_creates = value;
      });
  tickd::testing::ZookeeperServer server;
  if (!server.running()) {
    std::fprintf(stderr, "zookeeper did not start\n");
    return 1;
  }
  std::vector<std::unique_ptr<tickd::lock::Backend>> replicas;
  for (int r = 0; r < a.replicas; ++r) {
    tickd::lock::ZookeeperOptions options;
    options.url = server.url("/bench");
    options.op_timeout = 10s;  // under saturation: answer, do not give up
    auto backend = tickd::lock::NewZookeeperBackend(options);
    if (!backend) {
      std::fprintf(stderr, "%s\n", backend.error().ToString().c_str());
      return 1;
    }
    replicas.push_back(std::move(*backend));
  }
  std::printf("zookeeper_claim_bench: %d replicas x %d jobs @every 1s, ZooKeeper 127.0.0.1:%d\n",
              a.replicas, a.jobs, server.port());
  const int status = tickd::bench::RunBatchBench(replicas, a);
  if (reference_creates > 0) Reference(server, a.replicas, reference_creates);
  return status;
}
