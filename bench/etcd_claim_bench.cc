// Claim throughput on one etcd member (the sibling of claim_bench.cc, which measures
// Redis): N replicas (threads, each with its own backend and HTTP connection) × M jobs
// `@every 1s` through the real backend's batched path (lock/etcd: per 120 claims one
// read txn and one txn of nested claim txns); the runs are bench/batch_claim_driver.h.
// Then, in the same run, the store's references:
//   - the job-tick write-set ceiling (bench/write_set_ceiling.h): the key changes a
//     job-tick makes, sent from N connections through the same JSON gateway with
//     nothing else to do: one txn per protocol step, txns of up to 128 plain ops, and
//     txns of 64 nested txns of up to 64 ops (what --max-txn-ops = 128 lets through);
//     and, to place ours between them, ours' own requests (reads, nested claim txns
//     with compares, observation and complete txns) for rounds in which no two
//     replicas race, with and without its read txns;
//   - `etcdctl check perf` against the same member (60 s of plain puts from many
//     clients).
//
// Usage: etcd_claim_bench [--replicas N] [--jobs M] [--seconds S] [--sat-ticks K]
//                         [--reference 0] [--load s|m|l|xl as 0..3, default 3]
//                         [--ceiling-seconds S (per variant; 0: none, default 5)]
//                         [--batched 0 (skip our batched path: references only)]
// It starts its own etcd (tests/etcd/etcd_server.h: one member, WAL fsync as default).
#include <curl/curl.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "bench/batch_claim_driver.h"
#include "bench/write_set_ceiling.h"
#include "lock/etcd/etcd_backend.h"
#include "tests/etcd/etcd_server.h"

using namespace std::chrono_literals;

namespace {

std::unique_ptr<tickd::lock::Backend> Open(const tickd::testing::EtcdServer& server) {
  tickd::lock::EtcdOptions options;
  options.url = server.url();
  options.op_timeout = 10s;  // under saturation: answer, do not give up
  auto backend = tickd::lock::NewEtcdBackend(options);
  if (!backend) {
    std::fprintf(stderr, "%s\n", backend.error().ToString().c_str());
    std::exit(1);
  }
  return std::move(*backend);
}

// `etcdctl check perf` against the member: prints its verdict lines.
void Reference(const tickd::testing::EtcdServer& server, const char* load) {
  const std::string cmd =
      "ETCDCTL_API=3 etcdctl --endpoints=http://127.0.0.1:" + std::to_string(server.port()) +
      " check perf --load=" + load + " 2>&1";
  std::printf("reference: etcdctl check perf --load=%s\n", load);
  std::fflush(stdout);
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) {
    std::printf("  etcdctl could not be started\n");
    return;
  }
  char line[512];
  while (std::fgets(line, sizeof(line), p) != nullptr) {
    const std::string l(line);
    // Skip the progress bar; keep the verdicts (PASS/FAIL: Throughput, Slowest, Stddev).
    if (l.find("PASS") != std::string::npos || l.find("FAIL") != std::string::npos ||
        l.find("rror") != std::string::npos) {
      std::printf("  %s", line);
    }
  }
  ::pclose(p);
}

// ---- the job-tick write-set ceiling ----
//
// The key changes of one job-tick as ours makes them (docs/backends.md "etcd v3",
// lock/etcd/etcd_backend.cc), for a claim won at once (no forbid: no run key; no run
// output) and observed by R replicas:
//   claim        puts: record r, lease key l (under the lease), lease end u,
//                index idx/<T>, job name jobs/<job>, head                         6
//   complete     put: record (done); deletes: l, u                                3
//   observation  per replica, puts: w/<node>, index, job name                     3
// So 9 + 3R (18 with three replicas). The ceiling sends exactly these, as plain ops:
// no reads, no compares, no failure branches. (A ledger without the observations'
// repeated index and job-name puts would need 9 + R.)

// Base64 of the gateway's bytes fields (OpenSSL's encoder).
std::string B64(const std::string& in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(in.data()),
                                static_cast<int>(in.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

std::string PutOp(const std::string& key, const std::string& value,
                  const std::string& lease = "") {
  std::string op = R"({"request_put":{"key":")" + B64(key) + R"(","value":")" + B64(value) + '"';
  if (!lease.empty()) op += R"(,"lease":")" + lease + '"';
  return op + "}}";
}

std::string DeleteOp(const std::string& key) {
  return R"({"request_delete_range":{"key":")" + B64(key) + "\"}}";
}

// One reused HTTP connection to the member's gateway, as each replica has.
class Gateway {
 public:
  explicit Gateway(int port) : base_("http://127.0.0.1:" + std::to_string(port)) {
    headers_.reset(curl_slist_append(headers_.release(), "Content-Type: application/json"));
    headers_.reset(curl_slist_append(headers_.release(), "Expect:"));
  }

  // True when the member answered HTTP 200 without an error; *answer: the body.
  bool Post(const std::string& path, const std::string& body, std::string* answer = nullptr) {
    std::string reply;
    CURL* c = curl_.get();
    const std::string url = base_ + path;
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers_.get());
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10'000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &OnBody);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &reply);
    long status = 0;
    const bool ok = curl_easy_perform(c) == CURLE_OK &&
                    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status) == CURLE_OK &&
                    status == 200 && reply.find("\"error\"") == std::string::npos;
    if (!ok && errors_shown_++ < 3) {
      std::printf("  %s: HTTP %ld %s\n", path.c_str(), status, reply.substr(0, 200).c_str());
    }
    if (answer != nullptr) *answer = std::move(reply);
    return ok;
  }

  // A lease of `ttl_s` for this connection's lease keys ("" when refused).
  std::string GrantLease(int ttl_s) {
    std::string answer;
    if (!Post("/v3/lease/grant", R"({"TTL":")" + std::to_string(ttl_s) + "\"}", &answer)) {
      return "";
    }
    const nlohmann::json j = nlohmann::json::parse(answer, nullptr, false);
    return j.is_object() && j.contains("ID") ? j["ID"].get<std::string>() : "";
  }

 private:
  static size_t OnBody(char* data, size_t size, size_t n, void* user) {
    static_cast<std::string*>(user)->append(data, size * n);
    return size * n;
  }
  std::string base_;
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl_{curl_easy_init(), &curl_easy_cleanup};
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> headers_{nullptr,
                                                                      &curl_slist_free_all};
  int errors_shown_ = 0;
};

// How steps (a claim's, a complete's, an observation's ops) go into txns. A step
// never straddles two lists.
struct Packing {
  const char* label;
  std::size_t ops_per_list;   // the txn's ops, or each nested txn's
  std::size_t lists_per_txn;  // 1: a plain txn; more: a txn of that many nested txns
  bool one_step_per_txn;      // each step its own txn, as a call per step sends it
  bool ours = false;          // not a packing: ours' requests, without races (OursRound)
  bool ours_reads = true;     // … with ours' read txns (false: the writes alone, blind)
};
// etcd refuses a request above --max-request-bytes (1.5 MiB by default).
constexpr std::size_t kMaxBodyBytes = 1 << 20;

// Sends the steps as `p` packs them; {requests, errors}.
std::pair<long, long> SendSteps(Gateway& g, const std::vector<std::vector<std::string>>& steps,
                                const Packing& p) {
  long sent = 0, errors = 0;
  std::vector<std::string> lists;  // closed lists of the txn being filled
  std::string list;                // the open list: ops joined by ','
  std::size_t list_ops = 0, bytes = 0;
  auto close_list = [&] {
    if (list_ops == 0) return;
    lists.push_back(std::move(list));
    list.clear();
    list_ops = 0;
  };
  auto send = [&] {
    close_list();
    if (lists.empty()) return;
    std::string body = R"({"success":[)";
    for (std::size_t i = 0; i < lists.size(); ++i) {
      if (i > 0) body += ',';
      body += p.lists_per_txn == 1 ? lists[i] : R"({"request_txn":{"success":[)" + lists[i] + "]}}";
    }
    body += "]}";
    ++sent;
    if (!g.Post("/v3/kv/txn", body)) ++errors;
    lists.clear();
    bytes = 0;
  };
  for (const auto& step : steps) {
    std::size_t step_bytes = 0;
    for (const auto& op : step) step_bytes += op.size() + 1;
    if (list_ops > 0 && (p.one_step_per_txn || list_ops + step.size() > p.ops_per_list)) {
      close_list();
    }
    if (lists.size() == p.lists_per_txn || (bytes > 0 && bytes + step_bytes > kMaxBodyBytes)) {
      send();
    }
    for (const auto& op : step) {
      if (list_ops++ > 0) list += ',';
      list += op;
    }
    bytes += step_bytes;
  }
  send();
  return {sent, errors};
}

// Values of about the sizes ours writes (JSON: state, node, owner, hash, fence, lease…).
const std::string kRecord(140, 'r'), kRecordDone(170, 'd'), kToken(30, 't'), kHead(60, 'h'),
    kObservation(80, 'o');

// The keys of job j's tick T under `prefix`, named as lock/etcd names them.
struct TickKeys {
  std::string job, tick, jobs_entry;  // P job/<job>/, P job/<job>/tick/<T>/, P jobs/<job>
  std::string index;                   // P job/<job>/idx/<T>
  TickKeys(const std::string& prefix, int j, const char* padded_tick)
      : job(prefix + "job/job-" + std::to_string(j) + "/"),
        tick(job + "tick/" + padded_tick + "/"),
        jobs_entry(prefix + "jobs/job-" + std::to_string(j)),
        index(job + "idx/" + padded_tick) {}
};

std::vector<std::string> ClaimOps(const TickKeys& k, const std::string& lease) {
  return {PutOp(k.tick + "r", kRecord), PutOp(k.tick + "l", kToken, lease),
          PutOp(k.tick + "u", "1800000000123"), PutOp(k.index, ""), PutOp(k.jobs_entry, ""),
          PutOp(k.job + "head", kHead)};
}
std::vector<std::string> ObservationOps(const TickKeys& k, int replica) {
  return {PutOp(k.tick + "w/replica-" + std::to_string(replica), kObservation),
          PutOp(k.index, ""), PutOp(k.jobs_entry, "")};
}
std::vector<std::string> CompleteOps(const TickKeys& k) {
  return {PutOp(k.tick + "r", kRecordDone), DeleteOp(k.tick + "l"), DeleteOp(k.tick + "u")};
}

std::string RangeOp(const std::string& key, const std::string& end = "") {
  std::string op = R"({"request_range":{"key":")" + B64(key) + '"';
  if (!end.empty()) op += R"(,"range_end":")" + B64(end) + '"';
  return op + "}}";
}
// A compare of `target` (CREATE, MOD) with `result` (EQUAL, GREATER) against `revision`.
std::string CompareOp(const std::string& key, const char* result, const char* target,
                      const char* field, const char* revision) {
  return R"({"key":")" + B64(key) + R"(","result":")" + result + R"(","target":")" + target +
         R"(",")" + field + R"(":")" + revision + "\"}";
}
std::string Joined(const std::vector<std::string>& ops) {
  std::string out;
  for (const auto& op : ops) out += (out.empty() ? "" : ",") + op;
  return out;
}
// A nested txn (lists of ops joined by ','; an empty list is left out).
std::string NestedTxn(const std::string& compare, const std::string& success,
                      const std::string& failure = "") {
  std::string txn = R"({"request_txn":{)";
  if (!compare.empty()) txn += R"("compare":[)" + compare + "],";
  txn += R"("success":[)" + success + "]";
  if (!failure.empty()) txn += R"(,"failure":[)" + failure + "]";
  return txn + "}}";
}

// ours' claims per txn (lock/etcd kClaimsPerTxn: 128 − 8 − 1).
constexpr int kOursChunk = 119;

// One step of a round as lock/etcd sends it when no two replicas race (each replica
// reads every job, only the job's winner writes): claims — a lease for the batch,
// then per chunk of 119 jobs from the replica's own slice on, one read txn (per job a
// nested txn ranging the tick's keys, the run key and the head; the permission
// probe), the winner's txn of nested claim txns (compare: no record, the head's
// mod_revision; success: the claim's 6 puts; failure: 3 ranges; the probe's delete),
// and one txn of nested observation puts for every job of the chunk; completes — per
// chunk, a read txn, then a txn of nested complete txns (compare the record's
// mod_revision). Compares that always hold here (the head's and record's mod_revision
// > 0 instead of == the value read) cost the member the same as ours'.
// Without `with_reads`, the same writes sent blind: what the reads cost, by difference.
template <typename Keys>
std::pair<long, long> OursRound(Gateway& g, const std::string& prefix, Keys keys, int r,
                                int replicas, int jobs, tickd::bench::CeilingStep step,
                                bool with_reads) {
  long sent = 0, errors = 0;
  // Posts a txn; with `must_hold` nested txns, a compare that failed counts as an error
  // (its writes did not happen). The gateway leaves false out: count the trues.
  auto post = [&](const std::vector<std::string>& ops, std::size_t must_hold = 0) {
    ++sent;
    std::string answer;
    if (!g.Post("/v3/kv/txn", R"({"success":[)" + Joined(ops) + "]}", &answer)) {
      ++errors;
      return;
    }
    std::size_t held = 0;
    constexpr std::string_view kHeld = "\"succeeded\":true";
    for (auto at = answer.find(kHeld); at != std::string::npos; at = answer.find(kHeld, at + 1)) {
      ++held;
    }
    if (must_hold > 0 && held < must_hold + 1) ++errors;  // + 1: the outer txn
  };
  const std::string probe = prefix + "job/-permission-probe";
  auto reads = [&](const TickKeys& k) {
    return NestedTxn("", RangeOp(k.tick, k.tick + "w") + "," + RangeOp(k.job + "run") + "," +
                             RangeOp(k.job + "head"));
  };
  if (step == tickd::bench::kClaims) {
    ++sent;
    const std::string lease = g.GrantLease(60);
    if (lease.empty()) ++errors;
    auto job_at = [&](int n) { return (n + r * jobs / replicas) % jobs; };
    for (int from = 0; from < jobs; from += kOursChunk) {
      const int to = std::min(jobs, from + kOursChunk);
      std::vector<std::string> read, claims, observations;
      for (int n = from; n < to; ++n) read.push_back(reads(keys(job_at(n))));
      read.push_back(RangeOp(probe));
      if (with_reads) post(read);
      for (int n = from; n < to; ++n) {
        const int j = job_at(n);
        if (j % replicas != r) continue;
        const TickKeys k = keys(j);
        claims.push_back(NestedTxn(
            CompareOp(k.tick + "r", "EQUAL", "CREATE", "create_revision", "0") + "," +
                CompareOp(k.job + "head", "GREATER", "MOD", "mod_revision", "0"),
            Joined(ClaimOps(k, lease)),
            RangeOp(k.tick + "r") + "," + RangeOp(k.job + "run") + "," + RangeOp(k.job + "head")));
      }
      if (!claims.empty()) {
        const std::size_t count = claims.size();
        claims.push_back(DeleteOp(probe));
        post(claims, count);
      }
      for (int n = from; n < to; ++n) {
        observations.push_back(NestedTxn("", Joined(ObservationOps(keys(job_at(n)), r))));
      }
      post(observations);
    }
  } else if (step == tickd::bench::kCompletes) {
    std::vector<int> mine;
    for (int j = r; j < jobs; j += replicas) mine.push_back(j);
    for (std::size_t from = 0; from < mine.size(); from += kOursChunk) {
      const std::size_t to = std::min(mine.size(), from + kOursChunk);
      std::vector<std::string> read, completes;
      for (std::size_t n = from; n < to; ++n) read.push_back(reads(keys(mine[n])));
      read.push_back(RangeOp(probe));
      if (with_reads) post(read);
      for (std::size_t n = from; n < to; ++n) {
        const TickKeys k = keys(mine[n]);
        completes.push_back(
            NestedTxn(CompareOp(k.tick + "r", "GREATER", "MOD", "mod_revision", "0"),
                      Joined(CompleteOps(k))));
      }
      post(completes, completes.size());
    }
  }
  return {sent, errors};
}

void Ceiling(const tickd::testing::EtcdServer& server, const Packing& p, int replicas, int jobs,
             int seconds) {
  std::vector<std::unique_ptr<Gateway>> gateways;
  std::vector<std::string> leases;
  for (int r = 0; r < replicas; ++r) {
    gateways.push_back(std::make_unique<Gateway>(server.port()));
    leases.push_back(gateways.back()->GrantLease(60));
    if (leases.back().empty()) {
      std::printf("ceiling %s: no lease granted\n", p.label);
      return;
    }
  }
  const std::string prefix = std::string("/ceiling/") + p.label + "/";
  {  // the heads, as a job's first claim leaves them (ours compares them)
    std::vector<std::vector<std::string>> heads;
    for (int j = 0; j < jobs; ++j) {
      heads.push_back({PutOp(TickKeys(prefix, j, "").job + "head", kHead)});
    }
    if (SendSteps(*gateways[0], heads, Packing{"setup", 128, 1, false}).second != 0) {
      std::printf("ceiling %s: the heads could not be written\n", p.label);
      return;
    }
  }
  constexpr std::int64_t kFirstTick = 1'800'000'000;
  const tickd::bench::CeilingRun run = tickd::bench::RunCeilingRounds(
      replicas, seconds, 1'000'000, [&](int r, long round, tickd::bench::CeilingStep step) {
        char tick[32];
        std::snprintf(tick, sizeof(tick), "%020lld", static_cast<long long>(kFirstTick + round));
        auto keys = [&](int j) { return TickKeys(prefix, j, tick); };
        if (p.ours) {
          return OursRound(*gateways[static_cast<std::size_t>(r)], prefix, keys, r, replicas,
                           jobs, step, p.ours_reads);
        }
        std::vector<std::vector<std::string>> steps;
        if (step == tickd::bench::kClaims) {  // the claims this replica wins (job j: j % R)
          for (int j = r; j < jobs; j += replicas) {
            steps.push_back(ClaimOps(keys(j), leases[static_cast<std::size_t>(r)]));
          }
        } else if (step == tickd::bench::kObservations) {  // of every job
          for (int j = 0; j < jobs; ++j) steps.push_back(ObservationOps(keys(j), r));
        } else {  // the completes of its claims
          for (int j = r; j < jobs; j += replicas) steps.push_back(CompleteOps(keys(j)));
        }
        return SendSteps(*gateways[static_cast<std::size_t>(r)], steps, p);
      });
  tickd::bench::PrintCeiling(p.label, run, jobs, 9 + 3 * replicas, "key changes");
}

}  // namespace

int main(int argc, char** argv) {
  if (tickd::bench::WantsHelp(argc, argv)) {
    std::printf(
        "usage: etcd_claim_bench [--replicas N] [--jobs M] [--seconds S] [--sat-ticks K]\n"
        "         [--reference 0] [--load 0..3] [--ceiling-seconds S] [--batched 0]\n"
        "Starts its own etcd; runs N replicas x M jobs @every 1s through the batched claim\n"
        "path (paced S s, then K saturation ticks), then the store's references: the\n"
        "job-tick write-set ceiling for S s per variant (0: none; default 5) and etcdctl\n"
        "check perf --load=s|m|l|xl (0..3, default xl; --reference 0: none).\n"
        "See bench/README.md.\n");
    return 0;
  }
  bool reference = true, batched = true;
  int load = 3, ceiling_seconds = 5;
  const tickd::bench::BatchArgs a = tickd::bench::ParseBatchArgs(
      argc, argv, tickd::bench::BatchArgs{3, 1000, 10, 5}, [&](const std::string& key, int value) {
        if (key == "--reference") reference = value != 0;
        if (key == "--load") load = value;
        if (key == "--ceiling-seconds") ceiling_seconds = value;
        if (key == "--batched") batched = value != 0;
      });
  if (!tickd::testing::EtcdServer::Available()) {
    std::fprintf(stderr, "etcd not installed\n");
    return 1;
  }
  tickd::testing::EtcdServer server;
  if (!server.running()) {
    std::fprintf(stderr, "etcd did not start\n");
    return 1;
  }
  std::printf("etcd_claim_bench: %d replicas x %d jobs @every 1s, etcd 127.0.0.1:%d (one member)\n",
              a.replicas, a.jobs, server.port());
  int status = 0;
  if (batched) {
    std::vector<std::unique_ptr<tickd::lock::Backend>> replicas;
    for (int r = 0; r < a.replicas; ++r) replicas.push_back(Open(server));
    status = tickd::bench::RunBatchBench(replicas, a);
  }
  if (ceiling_seconds > 0) {
    static const Packing kPackings[] = {
        {"per-step", 128, 1, true},   // one txn per claim, complete, observation
        {"txn-128", 128, 1, false},   // plain txns of up to 128 ops
        {"nested-64x64", 64, 64, false},  // 64 nested txns of up to 128 - 64 ops
        {"ours-race-free", 0, 0, false, true},  // ours' requests (OursRound)
        {"ours-no-reads", 0, 0, false, true, false},  // … without its read txns
    };
    for (const Packing& p : kPackings) Ceiling(server, p, a.replicas, a.jobs, ceiling_seconds);
  }
  static const char* const kLoads[] = {"s", "m", "l", "xl"};
  if (reference) Reference(server, kLoads[std::clamp(load, 0, 3)]);
  return status;
}
