// What ?wait=N costs a claim on Redis: one master with two replicas (AOF always, all on
// this machine, tests/redis/redis_sentinel.h), the backend connected through the three
// sentinels. For wait = 0, 1, 2: the latency of single claims one after the other
// (p50, p99, as a replica's lone job sees it) and the time of a ClaimBatch of 1,000
// claims (one instant of 1,000 jobs). Every claim is won (a new job each), so each
// writes and each WAIT has something to wait for; a claim not won (an error) is
// counted in the last column. A plain program with a report:
//   redis_wait_bench [--claims 2000] [--batches 10]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "lock/redis/redis_backend.h"
#include "tests/redis/redis_sentinel.h"

namespace {

using Clock = std::chrono::steady_clock;

double Micros(Clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const std::size_t rank = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v.at(rank);
}

tickd::lock::ClaimRequest Claim(const std::string& job, std::int64_t tick) {
  tickd::lock::ClaimRequest req;
  req.job = job;
  req.tick_unix = tick;
  req.node = "bench";
  req.owner_token = job + "-" + std::to_string(tick);
  req.config_hash = "hash";
  req.observe = true;
  return req;
}

}  // namespace

int main(int argc, char** argv) {
  int claims = 2000;
  int batches = 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--claims") == 0) claims = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--batches") == 0) batches = std::atoi(argv[i + 1]);
  }
  tickd::testing::RedisSentinelSet set;
  if (!set.running()) {
    std::fprintf(stderr, "redis_wait_bench: the sentinel set did not start\n");
    return 1;
  }
  std::printf(
      "| wait | single claim p50 µs | p99 µs | batch of 1,000 ms (median of %d) | not won |\n",
      batches);
  std::printf("|---|---|---|---|---|\n");
  const std::int64_t tick = 1'800'000'000;
  for (int wait = 0; wait <= 2; ++wait) {
    tickd::lock::RedisOptions options;
    options.url = set.url("?wait=" + std::to_string(wait));
    options.password = set.password();
    options.op_timeout = std::chrono::seconds(5);
    auto backend = tickd::lock::NewRedisBackend(options);
    if (!backend) {
      std::fprintf(stderr, "%s\n", backend.error().ToString().c_str());
      return 1;
    }
    const std::string w = "w" + std::to_string(wait) + "-";
    int not_won = 0;  // errors (a WAIT that timed out, a loaded machine): counted, not timed apart
    std::vector<double> single;
    for (int i = 0; i < claims; ++i) {
      const auto start = Clock::now();
      auto out = (*backend)->Claim(Claim(w + "single-" + std::to_string(i), tick));
      single.push_back(Micros(Clock::now() - start));
      if (!out || out->status != tickd::lock::ClaimStatus::kWon) ++not_won;
    }
    std::vector<double> batch_ms;
    for (int b = 0; b < batches; ++b) {
      std::vector<tickd::lock::ClaimRequest> reqs;
      for (int j = 0; j < 1000; ++j)
        reqs.push_back(Claim(w + "batch-" + std::to_string(b) + "-" + std::to_string(j), tick));
      const auto start = Clock::now();
      auto out = (*backend)->ClaimBatch(reqs);
      batch_ms.push_back(Micros(Clock::now() - start) / 1000);
      for (const auto& r : out) not_won += !r || r->status != tickd::lock::ClaimStatus::kWon;
    }
    std::printf("| %d | %.0f | %.0f | %.1f | %d |\n", wait, Percentile(single, 0.5),
                Percentile(single, 0.99), Percentile(batch_ms, 0.5), not_won);
  }
  return 0;
}
