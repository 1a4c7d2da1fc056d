// Claim throughput on one ZooKeeper: N replicas (threads, each with its own backend
// and session) × M jobs `@every 1s` through the real backend's batched path
// (lock/zookeeper: per 250 claims one pipelined read with one clock read, then one
// pipelined multi per claim; since the lean write set, blind claims with the read
// behind them); the runs are bench/batch_claim_driver.h, each saturation tick begun by
// all replicas together, as the daemon's replicas take up an instant at the same moment
// (--sat-barrier 0: each replica runs its ticks back to back on its own, as before).
// Then, in the same run, two store references:
//   - a plain create loop (N threads, each with its own session, creating persistent
//     nodes with up to 256 creates in flight);
//   - the job-tick write-set ceiling (bench/write_set_ceiling.h): the node changes a
//     job-tick needs at minimum, written from N sessions with nothing else to do,
//     (a) one request per protocol step and (b) many job-ticks bundled per multi,
//     also of the write set before the lean one (9 node changes, "-9"); and with
//     --before-bundling 1, (c) the requests lock/zookeeper sent before 43efc92 (one
//     multi per claim; reads, clock writes, round trips) for rounds in which no two
//     replicas race, with and without its reads and clock writes.
//
// Usage: zookeeper_claim_bench [--replicas N] [--jobs M] [--seconds S] [--sat-ticks K]
//                              [--sat-barrier 0 (saturation ticks not begun together)]
//                              [--reference-creates C (per thread; 0: none)]
//                              [--ceiling-seconds S (per variant; 0: none, default 5)]
//                              [--ceiling-bundle J (job-ticks per multi in (b), 50)]
//                              [--batched 0 (skip our batched path: references only)]
//                              [--before-bundling 1 (also (c) below)]
//                              [--renewals N (N leases renewed one by one, then at once)]
// It starts its own standalone ZooKeeper (tests/zookeeper/zookeeper_server.h: loopback,
// default forceSync=yes, i.e. every write fsync'd to the txn log before the answer).
#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bench/batch_claim_driver.h"
#include "bench/write_set_ceiling.h"
#include "lock/zookeeper/zookeeper_backend.h"
#include "tests/zookeeper/zookeeper_server.h"

using namespace std::chrono_literals;

namespace {

// Up to kWindow requests in flight on one session; counts the answers.
struct Window {
  static constexpr int kWindow = 256;
  std::mutex mu;
  std::condition_variable cv;
  int in_flight = 0;
  int errors = 0;
  long sent = 0;

  // Blocks until a request may go out, and counts it in flight.
  void Acquire() {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return in_flight < kWindow; });
    ++in_flight;
    ++sent;
  }
  // An answer (or a request the client refused to send).
  void Done(int rc) {
    std::lock_guard lock(mu);
    --in_flight;
    if (rc != ZOK) ++errors;
    cv.notify_all();
  }
  // Waits for every answer; returns {requests, errors} since the last Drain.
  std::pair<long, long> Drain() {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return in_flight == 0; });
    const std::pair<long, long> out{sent, errors};
    sent = 0;
    errors = 0;
    return out;
  }
};

void OnCreated(int rc, const char*, const void* data) {
  static_cast<Window*>(const_cast<void*>(data))->Done(rc);
}

// The answers of ours' reads and creates that are no failure: a record not there yet
// (ZNONODE), an observation folder another replica created first (ZNODEEXISTS).
int Expected(int rc) { return rc == ZNONODE || rc == ZNODEEXISTS ? ZOK : rc; }
void OnReadAnswer(int rc, const char*, int, const Stat*, const void* data) {
  static_cast<Window*>(const_cast<void*>(data))->Done(Expected(rc));
}
void OnSetAnswer(int rc, const Stat*, const void* data) {
  static_cast<Window*>(const_cast<void*>(data))->Done(rc);
}
void OnCreateAnswer(int rc, const char*, const void* data) {
  static_cast<Window*>(const_cast<void*>(data))->Done(Expected(rc));
}

// A session to the server, connected (waits up to 5 s), or nullptr.
zhandle_t* Connect(const tickd::testing::ZookeeperServer& server) {
  zoo_set_debug_level(static_cast<ZooLogLevel>(0));
  const std::string hosts = "127.0.0.1:" + std::to_string(server.port());
  zhandle_t* zh = zookeeper_init(hosts.c_str(), nullptr, 30000, nullptr, nullptr, 0);
  // As lock/zookeeper does: without it the client resolves "127.0.0.1" again at every
  // poll of its socket (getaddrinfo), and the ceiling measured that, not the server.
  if (zh != nullptr) (void)zoo_set_servers_resolution_delay(zh, 60'000);
  for (int i = 0; i < 100 && zh != nullptr && zoo_state(zh) != ZOO_CONNECTED_STATE; ++i) {
    std::this_thread::sleep_for(50ms);
  }
  return zh;
}

// A create through the window (the async API only: the sync one needs THREADED).
void Create(zhandle_t* zh, Window& w, const std::string& path, const std::string& data,
            int mode = 0) {
  w.Acquire();
  if (zoo_acreate(zh, path.c_str(), data.data(), static_cast<int>(data.size()),
                  &ZOO_OPEN_ACL_UNSAFE, mode, &OnCreated, &w) != ZOK) {
    w.Done(ZSYSTEMERROR);
  }
}

// The plain create loop: `threads` sessions × `creates` persistent nodes of 100 bytes
// (about a tick record's size) under /bench-ref; creates per second over all.
void Reference(const tickd::testing::ZookeeperServer& server, int threads, int creates) {
  std::atomic<long> errors{0};
  const std::string data(100, 'x');
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      zhandle_t* zh = Connect(server);
      const std::string dir = "/bench-ref-" + std::to_string(t);
      Window w;
      Create(zh, w, dir, "");  // the folder first
      w.Drain();
      for (int i = 0; i < creates; ++i) Create(zh, w, dir + "/n" + std::to_string(i), data);
      errors += w.Drain().second;
      zookeeper_close(zh);
    });
  }
  for (auto& th : workers) th.join();
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "reference: plain create loop, %d sessions x %d creates (<= %d in flight): "
      "%.2f s = %.0f creates/s, errors %ld\n",
      threads, creates, Window::kWindow, secs, threads * creates / secs, errors.load());
}

// ---- the job-tick write-set ceiling ----
//
// The node changes of one job-tick, at minimum (docs/backends.md, "ZooKeeper 3.8": the
// write set), for a claim that wins at once (no re-claim, no forbid) and R replicas
// that observe it:
//   claim multi     create the record t/<T> (the winner's observation inside it),
//                   create the ephemeral lease l/<T>, setData the head by its version;
//   complete multi  setData the record (done) by its version, delete the lease by its
//                   version;
//   observations    one create o/<T>-<node> per replica that did not win.
// So 3 + 2 + (R − 1) node changes (7 with three replicas). Left out: the reads (record
// and head per claim, three per complete), the clock setData per chunk, the blind
// claim's check op, and the failed multis of a lost race: what the protocol adds, not
// what a job-tick must write. The write set before the lean one (Lean::kNo, "-9"):
// the claim also created the tick's folder o/<T>, and every replica, the winner too,
// created o/<T>/<node>: 4 + 2 + R (9).

// One multi in flight: the client library writes the results, stats and created paths
// when the answer arrives, so they live here until then; the completion frees it.
struct MultiCall {
  Window* window = nullptr;
  std::vector<std::string> paths;
  std::vector<zoo_op_t> ops;
  std::vector<zoo_op_result_t> results;
  std::vector<Stat> stats;
  std::vector<std::array<char, 128>> created;
};

void OnMulti(int rc, const void* data) {
  std::unique_ptr<MultiCall> call(static_cast<MultiCall*>(const_cast<void*>(data)));
  call->window->Done(rc);
}

// The ops of one or more job-tick steps, sent as one multi.
class MultiBuilder {
 public:
  void Create(std::string path, const std::string& data, int mode = 0) {
    Add(std::move(path), [&, mode](zoo_op_t& op, const std::string& p, std::size_t k) {
      zoo_create_op_init(&op, p.c_str(), data.data(), static_cast<int>(data.size()),
                         &ZOO_OPEN_ACL_UNSAFE, mode, call_->created[k].data(),
                         static_cast<int>(call_->created[k].size()));
    });
  }
  void Set(std::string path, const std::string& data, int version) {
    Add(std::move(path), [&, version](zoo_op_t& op, const std::string& p, std::size_t k) {
      zoo_set_op_init(&op, p.c_str(), data.data(), static_cast<int>(data.size()), version,
                      &call_->stats[k]);
    });
  }
  void Delete(std::string path, int version) {
    Add(std::move(path), [version](zoo_op_t& op, const std::string& p, std::size_t) {
      zoo_delete_op_init(&op, p.c_str(), version);
    });
  }
  std::size_t size() const { return inits_.size(); }

  // Sends the multi through the window (the ops' data must outlive the call: the
  // payloads are the ceiling's constants) and starts a new one.
  void Send(zhandle_t* zh, Window& w) {
    if (inits_.empty()) return;
    const std::size_t n = inits_.size();
    call_->window = &w;
    call_->ops.resize(n);
    call_->results.resize(n);
    call_->stats.resize(n);
    call_->created.resize(n);
    for (std::size_t k = 0; k < n; ++k) inits_[k](call_->ops[k], call_->paths[k], k);
    inits_.clear();
    w.Acquire();
    MultiCall* call = call_.release();
    call_ = std::make_unique<MultiCall>();
    if (zoo_amulti(zh, static_cast<int>(n), call->ops.data(), call->results.data(), &OnMulti,
                   call) != ZOK) {
      delete call;
      w.Done(ZSYSTEMERROR);
    }
  }

 private:
  using Init = std::function<void(zoo_op_t&, const std::string&, std::size_t)>;
  void Add(std::string path, Init init) {
    call_->paths.push_back(std::move(path));
    inits_.push_back(std::move(init));
  }
  std::unique_ptr<MultiCall> call_ = std::make_unique<MultiCall>();
  std::vector<Init> inits_;
};

// Payloads of about the sizes ours writes (JSON-ish fields: owner token, node, hash,
// lease, fence, outcome).
const std::string kRecord(140, 'r'), kRecordObserved(180, 'r'), kRecordDone(210, 'd'), kLease(60, 'l'), kHead(60, 'h'),
    kObservation(80, 'o');

// One variant: `bundle` job-ticks' steps per multi (1: one multi per step, as ours
// sends them, and the observations as single creates, as ours sends them).
// How a variant sends a round's steps.
enum class Shape {
  kPerStep,   // one multi per claim and per complete, one create per observation
  kBundled,   // `bundle` job-ticks' steps per multi
  kBundledOld,  // the same, of the write set before the lean one (9 node changes)
  kOursRaceFree,  // ours' requests before 43efc92 (below), without races
  kOursNoReads,   // the same without its reads and clock writes: what they cost
};

// A read (get) or the clock write (setData) through the window; answers only counted.
void Get(zhandle_t* zh, Window& w, const std::string& path) {
  w.Acquire();
  if (zoo_aget(zh, path.c_str(), 0, &OnReadAnswer, &w) != ZOK) w.Done(ZSYSTEMERROR);
}
void SetClock(zhandle_t* zh, Window& w, const std::string& path) {
  w.Acquire();
  if (zoo_aset(zh, path.c_str(), "", 0, -1, &OnSetAnswer, &w) != ZOK) w.Done(ZSYSTEMERROR);
}

// ours' chunk of claims (lock/zookeeper: kChunk).
constexpr int kOursChunk = 250;

// One variant. kOursRaceFree sends what lock/zookeeper sent before 43efc92 bundled its
// claims and completes (kept as the measurement of that design: bench/README.md) for a
// round in which no two replicas race (each replica reads every job, only the job's
// winner writes):
// per chunk of 250 jobs, from the replica's own slice on, one pipelined read (record
// and head of each job, one clock setData), the winner's claim multis (record, lease,
// head), then each replica's observations (the tick's folder, ZNODEEXISTS but for
// the first, and its node); per complete, the record, lease and run node read, then
// the multi (record, lease). Each a round trip after the other, as ours waits for
// each. The difference between it and the per-step ceiling is what ours' reads and
// round trips cost; between it and ours, what races, waves and decisions cost.
// kOursNoReads leaves the reads and the clock write out (the same writes, blind).
void Ceiling(const tickd::testing::ZookeeperServer& server, const char* label, int replicas,
             int jobs, int seconds, Shape shape, int bundle = 1) {
  std::vector<zhandle_t*> sessions;
  for (int r = 0; r < replicas; ++r) sessions.push_back(Connect(server));
  const std::string root = std::string("/ceiling-") + label;
  auto job_dir = [&](int j) { return root + "/j" + std::to_string(j); };
  {  // the job folders and heads, as a job's first claim leaves them
    Window w;
    Create(sessions[0], w, root, "");
    for (int j = 0; j < jobs; ++j) {
      Create(sessions[0], w, job_dir(j), "");
      for (const char* sub : {"/t", "/l", "/o"}) Create(sessions[0], w, job_dir(j) + sub, "");
      Create(sessions[0], w, job_dir(j) + "/head", kHead);
    }
    for (int r = 0; r < replicas; ++r) {  // each session's scratch node (the clock)
      Create(sessions[static_cast<std::size_t>(r)], w, root + "-clock-" + std::to_string(r), "",
             ZOO_EPHEMERAL);
    }
    if (const auto [sent, errors] = w.Drain(); errors != 0) {
      std::printf("ceiling %s: setup failed (%ld of %ld creates)\n", label, errors, sent);
      return;
    }
  }
  std::vector<int> head_version(static_cast<std::size_t>(jobs), 0);  // job j: replica j % R
  std::vector<Window> windows(static_cast<std::size_t>(replicas));
  constexpr std::int64_t kFirstTick = 1'800'000'000;
  const tickd::bench::CeilingRun run = tickd::bench::RunCeilingRounds(
      replicas, seconds, 1'000'000, [&](int r, long round, tickd::bench::CeilingStep step) {
        zhandle_t* zh = sessions[static_cast<std::size_t>(r)];
        Window& w = windows[static_cast<std::size_t>(r)];
        const std::string tick = std::to_string(kFirstTick + round);
        MultiBuilder multi;
        auto flush_if_full = [&](std::size_t ops_per_job_tick) {
          if (multi.size() >= ops_per_job_tick * static_cast<std::size_t>(bundle)) {
            multi.Send(zh, w);
          }
        };
        if (shape == Shape::kOursRaceFree || shape == Shape::kOursNoReads) {
          const bool with_reads = shape == Shape::kOursRaceFree;
          long sent = 0, errors = 0;
          auto round_trip = [&] {
            multi.Send(zh, w);
            const auto [n, failed] = w.Drain();
            sent += n;
            errors += failed;
          };
          if (step == tickd::bench::kClaims) {  // observations in, as ours writes them
            const std::string node = "/replica-" + std::to_string(r);
            for (int from = 0; from < jobs; from += kOursChunk) {
              const int to = std::min(jobs, from + kOursChunk);
              auto job_at = [&](int n) { return (n + r * jobs / replicas) % jobs; };
              if (with_reads) {
                for (int n = from; n < to; ++n) {
                  Get(zh, w, job_dir(job_at(n)) + "/t/" + tick);
                  Get(zh, w, job_dir(job_at(n)) + "/head");
                }
                SetClock(zh, w, root + "-clock-" + std::to_string(r));
                round_trip();
              }
              for (int n = from; n < to; ++n) {
                const int j = job_at(n);
                if (j % replicas != r) continue;
                multi.Create(job_dir(j) + "/t/" + tick, kRecord);
                multi.Create(job_dir(j) + "/l/" + tick, kLease, ZOO_EPHEMERAL);
                multi.Set(job_dir(j) + "/head", kHead, head_version[static_cast<std::size_t>(j)]++);
                multi.Send(zh, w);
              }
              round_trip();
              for (int n = from; n < to; ++n) {
                w.Acquire();
                const std::string dir = job_dir(job_at(n)) + "/o/" + tick;
                if (zoo_acreate(zh, dir.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, &OnCreateAnswer,
                                &w) != ZOK) {
                  w.Done(ZSYSTEMERROR);
                }
                Create(zh, w, dir + node, kObservation);
              }
              round_trip();
            }
          } else if (step == tickd::bench::kCompletes) {
            if (with_reads) {
              for (int j = r; j < jobs; j += replicas) {
                Get(zh, w, job_dir(j) + "/t/" + tick);
                Get(zh, w, job_dir(j) + "/l/" + tick);
                Get(zh, w, job_dir(j) + "/run");
              }
              round_trip();
            }
            for (int j = r; j < jobs; j += replicas) {
              multi.Set(job_dir(j) + "/t/" + tick, kRecordDone, 0);
              multi.Delete(job_dir(j) + "/l/" + tick, 0);
              multi.Send(zh, w);
            }
            round_trip();
          }
          return std::pair<long, long>{sent, errors};
        }
        const bool old = shape == Shape::kBundledOld;
        if (step == tickd::bench::kClaims) {  // the claims this replica wins
          for (int j = r; j < jobs; j += replicas) {
            const std::string dir = job_dir(j);
            multi.Create(dir + "/t/" + tick, old ? kRecord : kRecordObserved);
            multi.Create(dir + "/l/" + tick, kLease, ZOO_EPHEMERAL);
            multi.Set(dir + "/head", kHead, head_version[static_cast<std::size_t>(j)]++);
            if (old) multi.Create(dir + "/o/" + tick, "");
            flush_if_full(old ? 4 : 3);
          }
        } else if (step == tickd::bench::kObservations) {  // of every job (lean: not won)
          for (int j = 0; j < jobs; ++j) {
            if (!old && j % replicas == r) continue;
            const std::string path = job_dir(j) + "/o/" + tick + (old ? "/" : "-") + "replica-" +
                                     std::to_string(r);
            if (shape == Shape::kPerStep) {
              Create(zh, w, path, kObservation);
            } else {
              multi.Create(path, kObservation);
              flush_if_full(1);
            }
          }
        } else {  // the completes of its claims
          for (int j = r; j < jobs; j += replicas) {
            multi.Set(job_dir(j) + "/t/" + tick, kRecordDone, 0);
            multi.Delete(job_dir(j) + "/l/" + tick, 0);
            flush_if_full(2);
          }
        }
        multi.Send(zh, w);
        return w.Drain();
      });
  for (zhandle_t* zh : sessions) zookeeper_close(zh);
  const bool lean = shape != Shape::kBundledOld && shape != Shape::kOursRaceFree &&
                    shape != Shape::kOursNoReads;
  tickd::bench::PrintCeiling(label, run, jobs, lean ? 4 + replicas : 6 + replicas,
                             "node changes");
}

// Renewals (--renewals N): one replica holds N claims and renews each lease, first one
// after another from one thread (each renewal alone: two round trips behind the
// backend's mutex, as every renewal was before renewals were grouped), then from N
// threads at once (as N runs' watchdogs renewing after one instant); three rounds of
// each. Prints renewals per second; 0 when a renewal was not kRenewed.
int Renewals(tickd::lock::Backend& backend, int n) {
  using tickd::lock::ClaimRequest;
  using tickd::lock::HeldClaim;
  using tickd::lock::RenewStatus;
  const std::int64_t tick = std::chrono::duration_cast<std::chrono::seconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count() +
                            2'000'000;  // after every tick of the claim runs
  std::vector<ClaimRequest> reqs(static_cast<std::size_t>(n));
  for (int j = 0; j < n; ++j) {
    ClaimRequest& r = reqs[static_cast<std::size_t>(j)];
    r.job = "renew-" + std::to_string(j);
    r.tick_unix = tick;
    r.node = "replica-0";
    r.owner_token = "renew-token-" + std::to_string(j);
    r.forbid_overlap = false;
    r.starting_deadline = std::nullopt;
    r.lease = 30s;
  }
  std::vector<HeldClaim> helds;
  for (std::size_t j = 0; j < reqs.size(); ++j) {
    const auto won = backend.Claim(reqs[j]);
    if (!won || won->status != tickd::lock::ClaimStatus::kWon) {
      std::fprintf(stderr, "renewals: claim %zu not won\n", j);
      return 2;
    }
    helds.push_back(HeldClaim{reqs[j].job, tick, reqs[j].owner_token, won->fence, 30s});
  }
  std::atomic<int> bad{0};
  const auto rate = [&](const char* how, const std::function<void()>& round) {
    for (int k = 0; k < 3; ++k) {
      const auto start = std::chrono::steady_clock::now();
      round();
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("renewals %s: %d leases in %.0f ms = %.0f renewals/s\n", how, n, secs * 1000,
                  n / secs);
    }
  };
  rate("one after another", [&] {
    for (const HeldClaim& h : helds) {
      const auto r = backend.Renew(h);
      if (!r || *r != RenewStatus::kRenewed) ++bad;
    }
  });
  rate("all at once", [&] {
    std::vector<std::thread> threads;
    std::atomic<bool> go{false};
    for (const HeldClaim& h : helds) {
      threads.emplace_back([&, h] {
        while (!go.load()) std::this_thread::yield();
        const auto r = backend.Renew(h);
        if (!r || *r != RenewStatus::kRenewed) ++bad;
      });
    }
    go = true;
    for (auto& th : threads) th.join();
  });
  for (const HeldClaim& h : helds) {
    (void)backend.Complete(h, tickd::lock::Completion{"done", 0, 1ms});
  }
  std::printf("renewals not renewed: %d\n", bad.load());
  std::fflush(stdout);
  return bad == 0 ? 0 : 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (tickd::bench::WantsHelp(argc, argv)) {
    std::printf(
        "usage: zookeeper_claim_bench [--replicas N] [--jobs M] [--seconds S] [--sat-ticks K]\n"
        "         [--sat-barrier 0] [--reference-creates C] [--ceiling-seconds S]\n"
        "         [--ceiling-bundle J] [--batched 0] [--before-bundling 1] [--renewals N]\n"
        "Starts its own ZooKeeper; runs N replicas x M jobs @every 1s through the batched\n"
        "claim path (paced S s, then K saturation ticks, each begun by all replicas\n"
        "together unless --sat-barrier 0), then the store's references: a\n"
        "plain create loop (C creates per session; 0: none) and the job-tick write-set\n"
        "ceiling for S s per variant (0: none; default 5), one multi per step and J\n"
        "job-ticks per multi (default 50), the latter also of the write set before the\n"
        "lean one (-9); --before-bundling 1 adds the requests of before 43efc92 with and\n"
        "without reads; --renewals N: N leases renewed one after another, then all at\n"
        "once. See bench/README.md.\n");
    return 0;
  }
  int reference_creates = 20000, ceiling_seconds = 5, ceiling_bundle = 50, renewals = 0;
  bool batched = true, before_bundling = false;
  const tickd::bench::BatchArgs a = tickd::bench::ParseBatchArgs(
      argc, argv, tickd::bench::BatchArgs{3, 1000, 10, 5, /*sat_barrier=*/true},
      [&](const std::string& key, int value) {
        if (key == "--reference-creates") reference_creates = value;
        if (key == "--ceiling-seconds") ceiling_seconds = value;
        if (key == "--ceiling-bundle") ceiling_bundle = std::max(1, value);
        if (key == "--batched") batched = value != 0;
        if (key == "--before-bundling") before_bundling = value != 0;
        if (key == "--renewals") renewals = value;
      });
  tickd::testing::ZookeeperServer server;
  if (!server.running()) {
    std::fprintf(stderr, "zookeeper did not start\n");
    return 1;
  }
  std::printf("zookeeper_claim_bench: %d replicas x %d jobs @every 1s, ZooKeeper 127.0.0.1:%d\n",
              a.replicas, a.jobs, server.port());
  int status = 0;
  if (batched) {
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
    tickd::bench::BatchArgs run = a;
    run.server_pid = server.pid();
    status = tickd::bench::RunBatchBench(replicas, run);
    if (renewals > 0) status = std::max(status, Renewals(*replicas.front(), renewals));
  }
  if (reference_creates > 0) Reference(server, a.replicas, reference_creates);
  if (ceiling_seconds > 0) {
    Ceiling(server, "per-step", a.replicas, a.jobs, ceiling_seconds, Shape::kPerStep);
    const std::string bundled = "bundled-" + std::to_string(ceiling_bundle);
    Ceiling(server, bundled.c_str(), a.replicas, a.jobs, ceiling_seconds, Shape::kBundled,
            ceiling_bundle);
    Ceiling(server, (bundled + "-9").c_str(), a.replicas, a.jobs, ceiling_seconds,
            Shape::kBundledOld, ceiling_bundle);
    if (before_bundling) {
      Ceiling(server, "ours-race-free", a.replicas, a.jobs, ceiling_seconds,
              Shape::kOursRaceFree);
      Ceiling(server, "ours-no-reads", a.replicas, a.jobs, ceiling_seconds, Shape::kOursNoReads);
    }
  }
  return status;
}
