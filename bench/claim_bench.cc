// Claim throughput on one Redis: N replicas (threads, each with its own backend and
// connection) × M jobs `@every 1s`. A plain program with a report (not Google
// Benchmark: what matters is a fleet-shaped run, not a per-call loop).
//
//   1. paced: for S seconds, at every whole second T each replica sends the M claims
//      due at T in one ClaimBatchAsAnswered; winners complete their runs from another
//      thread.
//      Each replica sends its batch in the daemon's order (its own slice of the jobs
//      first, lock/claim_spread.h; --spread 0: job order on every replica).
//      Checked: every (job, T) has exactly one winner, no error, no missed. Measured:
//      tick lateness = the winning claim answered − T, over every tick (when the
//      winner may start the job); lateness = claim answered − T, over every claim,
//      losers included; and, apart, when each replica's whole batch was answered. A
//      claim is answered when ClaimBatchAsAnswered hands its answer over.
//   2. saturation: the replicas claim ticks back to back (no pacing) for K ticks:
//      claims per second, and ticks per second claimed exactly once.
//   3. reference: redis-benchmark against the same server, same run: SET as
//      redis-benchmark runs it by default (50 connections, no pipelining), SET with
//      -P 16 (the raw ceiling), and a minimal Lua lock called by sha with -P 16 (SET
//      NX PX + INCR, the pattern of backends.md): a script call like a claim.
// Every claim asks for its ledger observation (ClaimRequest::observe), as the daemon
// does; completes go through Backend::CompleteBatch (what ended since the last batch),
// or with --completers N through Complete from N threads per replica (the daemon's way).
// Printed too: the server's time in scripts per claim/complete, its CPU seconds and read events per
// paced second, the load average before, after the paced run and at the end.
//
// Usage: claim_bench [--replicas N] [--jobs M] [--seconds S] [--sat-ticks K] [--forbid 1]
//                    [--aof 0] [--aof-rewrite 0] [--completers N] [--observe 0] [--spread 0]
// The paced jobs use concurrency allow unless --forbid 1: with forbid, tick T+1 is
// busy wherever T's complete has not landed yet, which on a loaded machine happens.
// It starts its own redis-server (AOF always, a password) on a free loopback port.
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "lock/claim_spread.h"
#include "lock/redis/redis_backend.h"
#include "tests/redis/redis_server.h"
#include "bench/claim_stats.h"

using namespace std::chrono_literals;
using tickd::lock::Backend;
using tickd::lock::ClaimRequest;
using tickd::lock::ClaimOutcome;
using tickd::lock::ClaimStatus;
using tickd::lock::CompleteRequest;
using tickd::lock::Completion;
using tickd::lock::HeldClaim;

using tickd::bench::ExactlyOnceViolations;
using tickd::bench::Percentile;

namespace {

struct Args {
  int replicas = 3;
  int jobs = 10'000;
  int seconds = 10;
  int sat_ticks = 5;
  bool forbid = false;  // --forbid 1: concurrency forbid (a late complete makes T+1 busy)
  bool aof = true;      // --aof 0: no persistence (to see what fsync on every write costs)
  bool rewrite = true;  // --aof-rewrite 0: no automatic AOF rewrite (its fork) during the run
  // --completers N: each replica completes its wins from N threads, one Complete call
  // each (as the daemon's run supervisors do; the backend coalesces them). 0: one
  // thread that sends what ended since its last batch in one CompleteBatch.
  int completers = 0;
  bool observe = true;  // --observe 0: claims without the ledger observation
  // --spread 0: every replica sends its claims in job order, instead of the daemon's
  // order (lock/claim_spread.h: replica r of N sends its own slice of the jobs first).
  bool spread = true;
};

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    const int value = std::atoi(argv[i + 1]);
    if (key == "--replicas") a.replicas = value;
    if (key == "--jobs") a.jobs = value;
    if (key == "--seconds") a.seconds = value;
    if (key == "--sat-ticks") a.sat_ticks = value;
    if (key == "--forbid") a.forbid = value != 0;
    if (key == "--aof") a.aof = value != 0;
    if (key == "--aof-rewrite") a.rewrite = value != 0;
    if (key == "--completers") a.completers = value;
    if (key == "--observe") a.observe = value != 0;
    if (key == "--spread") a.spread = value != 0;
  }
  return a;
}

std::unique_ptr<Backend> Open(const tickd::testing::RedisServer& server) {
  tickd::lock::RedisOptions options;
  options.url = server.url();
  options.password = server.password();
  options.op_timeout = 10s;  // a 10,000-claim pipeline under load: answer, do not give up
  auto backend = tickd::lock::NewRedisBackend(options);
  if (!backend) {
    std::fprintf(stderr, "%s\n", backend.error().ToString().c_str());
    std::exit(1);
  }
  return std::move(*backend);
}

bool g_observe = true;

std::vector<ClaimRequest> Batch(int replica, int jobs, std::int64_t tick, bool forbid) {
  std::vector<ClaimRequest> reqs(jobs);
  for (int j = 0; j < jobs; ++j) {
    ClaimRequest& r = reqs[j];
    r.job = "job-" + std::to_string(j);
    r.tick_unix = tick;
    r.node = "replica-" + std::to_string(replica);
    // As long as the daemon's: 32 hex digits of token, 16 of config hash.
    char token[33];
    std::snprintf(token, sizeof token, "%08x%08x%08llx%08x", replica, j,
                  static_cast<unsigned long long>(tick) & 0xffffffffULL, 0x5eed);
    r.owner_token = token;
    r.forbid_overlap = forbid;
    r.config_hash = "9f86d081884c7d65";
    r.observe = g_observe;  // the replica's ledger observation, written by the claim script
  }
  return reqs;
}

// `reqs` in the order the daemon sends them as replica `rank` of `replicas`: its
// slice of the jobs first (lock/claim_spread.h).
std::vector<ClaimRequest> SpreadBatch(std::vector<ClaimRequest> reqs, int rank, int replicas) {
  std::vector<std::string_view> names;
  names.reserve(reqs.size());
  for (const ClaimRequest& r : reqs) names.push_back(r.job);
  std::vector<ClaimRequest> out;
  out.reserve(reqs.size());
  for (const std::size_t i : tickd::lock::SpreadOrder(names, rank, replicas))
    out.push_back(std::move(reqs[i]));
  return out;
}

// Completes won claims off the claiming thread, as the daemon's runners do: with
// `threads` = 0 one thread sends everything that ended since its last batch in one
// CompleteBatch; with N > 0, N threads call Complete one claim at a time (the
// daemon's way: each run's supervisor completes its own claim).
class Completer {
 public:
  Completer(Backend& backend, std::atomic<int>& errors, int threads)
      : backend_(backend), errors_(errors), batch_(threads == 0) {
    for (int i = 0; i < std::max(threads, 1); ++i) threads_.emplace_back([this] { Loop(); });
  }
  ~Completer() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  void Add(std::vector<HeldClaim> held) {
    {
      std::lock_guard lock(mu_);
      for (auto& h : held) queue_.push_back(std::move(h));
    }
    cv_.notify_all();
  }

 private:
  void Loop() {
    std::unique_lock lock(mu_);
    while (true) {
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      std::vector<CompleteRequest> batch;
      if (batch_) {
        // Everything that ended meanwhile goes in one CompleteBatch (one round trip).
        batch.reserve(queue_.size());
        for (HeldClaim& h : queue_) {
          batch.push_back(CompleteRequest{std::move(h), {"done", 0, 1ms}});
        }
        queue_.clear();
      } else {
        batch.push_back(CompleteRequest{std::move(queue_.front()), {"done", 0, 1ms}});
        queue_.pop_front();
      }
      lock.unlock();
      if (batch_) {
        for (const auto& done : backend_.CompleteBatch(batch)) {
          if (!done || *done != tickd::lock::CompleteStatus::kCompleted) ++errors_;
        }
      } else {
        const auto done = backend_.Complete(batch[0].held, batch[0].completion);
        if (!done || *done != tickd::lock::CompleteStatus::kCompleted) ++errors_;
      }
      lock.lock();
    }
  }
  Backend& backend_;
  std::atomic<int>& errors_;
  const bool batch_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<HeldClaim> queue_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

// Runs redis-benchmark; returns requests per second (0 when it could not run).
double RedisBenchmark(const tickd::testing::RedisServer& server, const std::string& args) {
  const std::string cmd = "redis-benchmark -p " + std::to_string(server.port()) + " -a '" +
                          server.password() + "' -q " + args + " 2>/dev/null";
  double rps = 0;
  if (FILE* pipe = ::popen(cmd.c_str(), "r")) {
    char buf[4096];
    std::string out;
    while (std::fgets(buf, sizeof buf, pipe)) out += buf;
    ::pclose(pipe);
    // -q prints "NAME: 123456.79 requests per second, p50=…", with \r progress lines.
    const auto at = out.rfind(" requests per second");
    if (at != std::string::npos) {
      const auto start = out.rfind(' ', at - 1);
      rps = std::atof(out.c_str() + start + 1);
    }
  }
  return rps;
}

// redis-cli against the server.
std::string Cli(const tickd::testing::RedisServer& server, const std::string& args) {
  return tickd::testing::RedisCli(server.port(), server.password(), args);
}

// The server's time in EVALSHA since the last CONFIG RESETSTAT, per claim or complete
// (`items` of them: a script call may carry several), and the number of calls.
std::string EvalshaStats(const tickd::testing::RedisServer& server, double items) {
  const std::string all = Cli(server, "INFO commandstats");
  const auto at = all.find("cmdstat_evalsha:");
  if (at == std::string::npos) return "(no commandstats)";
  const std::string line = all.substr(at, all.find('\n', at) - at);
  const auto field = [&](const std::string& name) {
    const auto from = line.find(name + "=");
    return from == std::string::npos ? 0.0 : std::atof(line.c_str() + from + name.size() + 1);
  };
  char out[128];
  std::snprintf(out, sizeof out, "%.2f us per item (%.0f items in %.0f calls)",
                field("usec") / std::max(items, 1.0), items, field("calls"));
  return out;
}

// A numeric field ("name:value") of an INFO section's text; 0 when absent.
double InfoNumber(const std::string& info, const std::string& name) {
  const auto at = info.find(name + ":");
  return at == std::string::npos ? 0 : std::atof(info.c_str() + at + name.size() + 1);
}

// The server's CPU seconds (main thread, user + sys) and read events so far: per
// paced second they show what the load costs the server whatever else runs on the
// machine, and how many claims share one event-loop turn (one fsync).
std::pair<double, double> ServerCpuAndReads(const tickd::testing::RedisServer& server) {
  const std::string cpu = Cli(server, "INFO cpu");
  const std::string stats = Cli(server, "INFO stats");
  return {
      InfoNumber(cpu, "used_cpu_user_main_thread") + InfoNumber(cpu, "used_cpu_sys_main_thread"),
      InfoNumber(stats, "total_reads_processed")};
}

// This process's CPU seconds (every thread: replicas, completers; user + sys).
double ClientCpu() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

std::string LoadAverage() {
  std::string out;
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    char buf[128] = {};
    if (std::fgets(buf, sizeof buf, f)) out = buf;
    std::fclose(f);
  }
  out = out.substr(0, out.find(' ', out.find(' ', out.find(' ') + 1) + 1));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (tickd::bench::WantsHelp(argc, argv)) {
    std::printf(
        "usage: claim_bench [--replicas N] [--jobs M] [--seconds S] [--sat-ticks K] [--forbid 1]\n"
        "         [--aof 0] [--aof-rewrite 0] [--completers N] [--observe 0] [--spread 0]\n"
        "Starts its own redis-server; runs N replicas x M jobs @every 1s (paced S s, then K\n"
        "saturation ticks), then redis-benchmark against it. See bench/README.md.\n");
    return 0;
  }
  const Args args = Parse(argc, argv);
  g_observe = args.observe;
  if (!tickd::testing::RedisServer::Available()) {
    std::fprintf(stderr, "redis-server not installed\n");
    return 1;
  }
  tickd::testing::RedisServer server(args.aof);  // AOF always (unless --aof 0), password
  if (!server.running()) {
    std::fprintf(stderr, "redis-server did not start\n");
    return 1;
  }
  if (!args.rewrite) Cli(server, "CONFIG SET auto-aof-rewrite-percentage 0");
  const std::string load_before = LoadAverage();
  std::vector<std::unique_ptr<Backend>> backends;
  for (int r = 0; r < args.replicas; ++r) backends.push_back(Open(server));

  // 1. Paced: every replica claims the M jobs due at each whole second.
  const auto now_s = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
  const std::int64_t first_tick = now_s + 2;
  std::mutex mu;
  std::vector<double> lateness_ms;        // per claim: its answer handed over − T
  std::vector<double> tick_lateness_ms;   // per tick: its winning claim's answer − T
  std::vector<double> batch_lateness_ms;  // per replica and tick: the whole batch's answer − T
  tickd::bench::Winners winners;  // (job, T) → wins
  int errors = 0;
  int missed_or_busy = 0;
  std::atomic<int> complete_errors{0};
  std::vector<std::thread> threads;
  const auto [cpu_before, reads_before] = ServerCpuAndReads(server);
  const double client_cpu_before = ClientCpu();
  for (int r = 0; r < args.replicas; ++r) {
    threads.emplace_back([&, r] {
      Backend& backend = *backends[r];
      // The runners' completes go on a connection of their own, as a daemon's run
      // threads would not wait behind the next tick's claims.
      auto completer_backend = Open(server);
      Completer completer(*completer_backend, complete_errors, args.completers);
      for (int s = 0; s < args.seconds; ++s) {
        const std::int64_t tick = first_tick + s;
        const auto at = std::chrono::system_clock::time_point(std::chrono::seconds(tick));
        std::this_thread::sleep_until(at);
        auto reqs = Batch(r, args.jobs, tick, args.forbid);
        if (args.spread) reqs = SpreadBatch(std::move(reqs), r, args.replicas);
        for (auto& req : reqs)
          req.node_wall = tickd::WallTime(
              std::chrono::duration_cast<std::chrono::milliseconds>(at.time_since_epoch()));
        // Each claim's lateness is when its own answer is handed over (the daemon
        // starts a won job then); the batch's end is kept apart.
        std::vector<tickd::Result<ClaimOutcome>> outs(reqs.size(), ClaimOutcome{});
        std::vector<double> late(reqs.size(), 0);
        backend.ClaimBatchAsAnswered(reqs, [&](std::size_t i, tickd::Result<ClaimOutcome> out) {
          late[i] = std::chrono::duration<double, std::milli>(std::chrono::system_clock::now() - at)
                        .count();
          outs[i] = std::move(out);
        });
        const double batch_late =
            std::chrono::duration<double, std::milli>(std::chrono::system_clock::now() - at)
                .count();
        std::vector<HeldClaim> held;
        std::lock_guard lock(mu);
        batch_lateness_ms.push_back(batch_late);
        for (int k = 0; k < args.jobs; ++k) {
          const int j = std::atoi(reqs[k].job.c_str() + 4);  // "job-<j>"
          lateness_ms.push_back(late[k]);
          if (!outs[k]) {
            ++errors;
            continue;
          }
          if (outs[k]->status == ClaimStatus::kWon) {
            ++winners[{j, tick}];
            tick_lateness_ms.push_back(late[k]);
            held.push_back(
                HeldClaim{reqs[k].job, tick, reqs[k].owner_token, outs[k]->fence, reqs[k].lease});
          } else if (outs[k]->status != ClaimStatus::kLost) {
            ++missed_or_busy;
          }
        }
        completer.Add(std::move(held));
      }
    });
  }
  for (auto& t : threads) t.join();
  threads.clear();
  const int expected = args.jobs * args.seconds;
  const std::int64_t last_tick = first_tick + args.seconds - 1;
  const int exactly_once =
      expected - ExactlyOnceViolations(winners, args.jobs, first_tick, last_tick);

  const auto [cpu_after, reads_after] = ServerCpuAndReads(server);
  const double client_cpu = ClientCpu() - client_cpu_before;
  const std::string load_paced = LoadAverage();
  const std::string paced_stats =
      EvalshaStats(server, (args.replicas + 1.0) * expected);  // claims + completes
  Cli(server, "CONFIG RESETSTAT");

  // 2. Saturation: back-to-back ticks, no pacing (allow: no completes needed).
  const std::int64_t sat_first = first_tick + args.seconds + 1'000;
  std::atomic<int> sat_errors{0};
  std::atomic<int> sat_wins{0};
  const auto sat_start = std::chrono::steady_clock::now();
  for (int r = 0; r < args.replicas; ++r) {
    threads.emplace_back([&, r] {
      for (int k = 0; k < args.sat_ticks; ++k) {
        auto reqs = Batch(r, args.jobs, sat_first + k, /*forbid=*/false);
        for (auto& req : reqs) req.starting_deadline = std::nullopt;  // ticks in the future
        for (auto& out : backends[r]->ClaimBatch(reqs)) {
          if (!out)
            ++sat_errors;
          else if (out->status == ClaimStatus::kWon)
            ++sat_wins;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  const double sat_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - sat_start).count();
  const double claims_per_s = args.replicas * args.jobs * args.sat_ticks / sat_s;
  const double ticks_per_s = args.jobs * args.sat_ticks / sat_s;

  const std::string sat_stats =
      EvalshaStats(server, 1.0 * args.replicas * args.jobs * args.sat_ticks);
  const std::string persistence = Cli(server, "INFO persistence");
  const auto info_field = [&](const std::string& name) {
    const auto at = persistence.find(name + ":");
    if (at == std::string::npos) return std::string("?");
    const auto start = at + name.size() + 1;
    return persistence.substr(start, persistence.find_first_of("\r\n", start) - start);
  };
  const std::string aof_size = info_field("aof_current_size");
  const std::string aof_rewrites = info_field("aof_rewrites");

  // 3. The reference, on the same server: the raw ceiling (pipelined SET) and the
  // like-for-like one: a script call that takes a lock and a fence, called by sha
  // as the claims are (SET NX PX + INCR, the minimal lock of backends.md).
  const double plain_set_rps = RedisBenchmark(server, "-n 200000 -t set");  // as it runs by default
  const double set_rps = RedisBenchmark(server, "-n 200000 -P 16 -t set");
  const std::string lock_sha =
      Cli(server,
          "SCRIPT LOAD \"if redis.call('SET',KEYS[1],ARGV[1],'NX','PX',15000) then "
          "return redis.call('INCR',KEYS[2]) end return 0\"");
  const double lua_rps = RedisBenchmark(
      server, "-n 200000 -P 16 -r 1000000 EVALSHA " + lock_sha + " 2 lock:__rand_int__ fence tok");
  const std::string load_after = LoadAverage();

  std::printf(
      "claim_bench: %d replicas x %d jobs @every 1s (concurrency %s), redis-server 127.0.0.1:%d "
      "(%s)\n",
      args.replicas, args.jobs, args.forbid ? "forbid" : "allow", server.port(),
      !args.aof      ? "no persistence"
      : args.rewrite ? "appendonly yes, appendfsync always"
                     : "appendonly yes, appendfsync always, no automatic rewrite");
  std::printf(
      "paced %ds: ticks %d, exactly once %d, claim errors %d, missed/busy %d, "
      "complete errors %d\n",
      args.seconds, expected, exactly_once, errors, missed_or_busy, complete_errors.load());
  std::printf("lateness (claim answered - T): p50 %.1f ms, p99 %.1f ms, max %.1f ms\n",
              Percentile(lateness_ms, 0.50), Percentile(lateness_ms, 0.99),
              Percentile(lateness_ms, 1.0));
  std::printf("tick lateness (winning claim answered - T): p50 %.1f ms, p99 %.1f ms, max %.1f ms\n",
              Percentile(tick_lateness_ms, 0.50), Percentile(tick_lateness_ms, 0.99),
              Percentile(tick_lateness_ms, 1.0));
  std::printf("whole batch answered - T: p50 %.1f ms, p99 %.1f ms, max %.1f ms\n",
              Percentile(batch_lateness_ms, 0.50), Percentile(batch_lateness_ms, 0.99),
              Percentile(batch_lateness_ms, 1.0));
  std::printf(
      "saturation %d ticks: %.0f claims/s (%.0f ticks/s claimed, wins %d of %d, "
      "errors %d)\n",
      args.sat_ticks, claims_per_s, ticks_per_s, sat_wins.load(), args.jobs * args.sat_ticks,
      sat_errors.load());
  std::printf(
      "reference redis-benchmark: SET %.0f req/s; -P 16: SET %.0f req/s, Lua SET NX PX + INCR "
      "%.0f req/s\n",
      plain_set_rps, set_rps, lua_rps);
  std::printf(
      "server time in scripts: paced (claims + completes) %s; saturation (claims) %s\n",
      paced_stats.c_str(), sat_stats.c_str());
  if (args.aof) {
    std::printf("aof: %s bytes written, %s rewrites during the run\n", aof_size.c_str(),
                aof_rewrites.c_str());
  }
  std::printf(
      "paced run, per second: server %.2f CPU s, %.0f read events (%.0f claims and "
      "completes each); client (replicas + completers) %.2f CPU s\n",
      (cpu_after - cpu_before) / args.seconds, (reads_after - reads_before) / args.seconds,
      (args.replicas + 1.0) * expected / std::max(1.0, reads_after - reads_before),
      client_cpu / args.seconds);
  std::printf("load average (1 5 15 min): before %s, after the paced run %s, at the end %s\n",
              load_before.c_str(), load_paced.c_str(), load_after.c_str());
  if (plain_set_rps > 0 && set_rps > 0 && lua_rps > 0) {
    std::printf(
        "ratio claims/s: %.0f %% of SET, %.0f %% of pipelined SET, %.0f %% of the minimal Lua "
        "lock (ticks/s: %.0f %%, %.0f %%, %.0f %%)\n",
        100 * claims_per_s / plain_set_rps, 100 * claims_per_s / set_rps,
        100 * claims_per_s / lua_rps, 100 * ticks_per_s / plain_set_rps,
        100 * ticks_per_s / set_rps, 100 * ticks_per_s / lua_rps);
  }
  const bool ok = exactly_once == expected && errors == 0 && missed_or_busy == 0 &&
                  complete_errors == 0 && sat_errors == 0 && sat_wins == args.jobs * args.sat_ticks;
  std::printf("%s\n", ok ? "every tick claimed exactly once" : "FAILED: see the counts above");
  return ok ? 0 : 1;
}
