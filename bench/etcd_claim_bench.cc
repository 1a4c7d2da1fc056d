// Claim throughput on one etcd member (the sibling of claim_bench.cc, which measures
// Redis): N replicas (threads, each with its own backend and HTTP connection) × M jobs
// `@every 1s` through the real backend's batched path (lock/etcd: blind claims of the
// replica's own slice, probes of the others', up to 791 to a txn of nested txns); the
// runs are bench/batch_claim_driver.h. Saturation ticks are begun by every replica
// together, as the daemon's replicas take up an instant (--sat-barrier 0: each
// replica's ticks back to back on its own, as before 2026-11-28, fourth session).
// Then, in the same run, the store's references:
//   - the job-tick write-set ceiling (bench/write_set_ceiling.h): the key changes a
//     job-tick makes, sent from N connections with nothing else to do: one txn per
//     protocol step, txns of up to 128 plain ops, and txns of 64 nested txns of up to
//     64 ops (what --max-txn-ops = 128 lets through), of the lean write set (7 keys a
//     job-tick with 3 replicas) and of the 18-key set before it; and, to place ours
//     between them, ours' own requests (nested claim txns with compares, observation
//     and complete txns): blind, as in the steady state (every replica claims every
//     job, the losers' compares fail), and with read txns first, without races. Each
//     variant twice, back to back: through the JSON gateway (as
//     lock/etcd speaks) and over etcd's gRPC API (lock/etcd/proto/), with the ratio
//     of their per-key rates;
//   - `etcdctl check perf` against the same member (60 s of plain puts from many
//     clients).
//
// Usage: etcd_claim_bench [--replicas N] [--jobs M] [--seconds S] [--sat-ticks K]
//                         [--sat-barrier 0]
//                         [--reference 0] [--load s|m|l|xl as 0..3, default 3]
//                         [--ceiling-seconds S (per variant; 0: none, default 5)]
//                         [--batched 0 (skip our batched path: references only)]
//                         [--gateway 0 | --grpc 0 (the ceiling over one wire only)]
//                         [--grpc-first 1 (each variant over gRPC before the gateway)]
//                         [--compact 1 (after ours: the db compacted and defragmented)]
// It starts its own etcd (tests/etcd/etcd_server.h: one member, WAL fsync as default).
#include <curl/curl.h>
#include <grpcpp/grpcpp.h>
#include <openssl/evp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bench/batch_claim_driver.h"
#include "bench/process_cpu.h"
#include "bench/write_set_ceiling.h"
#include "lock/etcd/etcd_backend.h"
#include "rpc.grpc.pb.h"  // lock/etcd/proto/rpc.proto, generated
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
// output; no renewal) and observed by R replicas. The lean write set (since issue #25):
//   claim        puts: record r (with the lease end and the winner's observation),
//                lease key l (under the lease), head                              3
//   complete     put: record (done); delete: l                                    2
//   observation  per other replica, put: w/<node>                                 1
// So 4 + R (7 with three replicas); the job's name is put once per job (the set-up
// writes it with the head). The write set before it (the "-18keys" variants):
//   claim        puts: r, l, lease end u, index idx/<T>, job name jobs/<job>, head 6
//   complete     put: r (done); deletes: l, u                                     3
//   observation  per replica, puts: w/<node>, index, job name                     3
// So 9 + 3R (18 with three replicas). The ceiling sends exactly these, as plain ops:
// no reads, no compares, no failure branches.
//
// Every variant goes over two wires to the same member and port (etcd serves gRPC over
// HTTP/2 and its JSON gateway over HTTP/1.1 on the client port): JsonWire, the gateway
// as lock/etcd speaks it, and GrpcWire, etcd's native API (lock/etcd/proto/). Both
// send the same ops packed the same way, one request at a time on one connection per
// replica, so their per-key rates compare like for like.

// What a txn's answer says: whether the member took it (HTTP 200 / gRPC OK, no error),
// and how many of its txns (itself and its nested ones) had every compare hold.
struct TxnAnswer {
  bool ok = false;
  std::size_t held = 0;
};

// Base64 of the gateway's bytes fields (OpenSSL's encoder).
std::string B64(const std::string& in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(in.data()),
                                static_cast<int>(in.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

std::string Joined(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& part : parts) out += (out.empty() ? "" : ",") + part;
  return out;
}

// The JSON gateway (/v3/kv/txn, /v3/lease/grant) over one reused libcurl connection,
// as each replica of lock/etcd has: keys and values base64, 64-bit integers as strings.
class JsonWire {
 public:
  using Op = std::string;       // a RequestOp as JSON
  using Compare = std::string;  // a Compare as JSON
  using LeaseId = std::string;  // the gateway writes int64s as strings
  static constexpr const char* kName = "gateway";
  static constexpr const char* kKeyTag = "j";  // same length as GrpcWire's: same key sizes

  explicit JsonWire(int port) : base_("http://127.0.0.1:" + std::to_string(port)) {
    headers_.reset(curl_slist_append(headers_.release(), "Content-Type: application/json"));
    headers_.reset(curl_slist_append(headers_.release(), "Expect:"));
  }

  static Op Put(const std::string& key, const std::string& value,
                const std::optional<LeaseId>& lease = std::nullopt) {
    std::string op =
        R"({"request_put":{"key":")" + B64(key) + R"(","value":")" + B64(value) + '"';
    if (lease) op += R"(,"lease":")" + *lease + '"';
    return op + "}}";
  }
  static Op Delete(const std::string& key) {
    return R"({"request_delete_range":{"key":")" + B64(key) + "\"}}";
  }
  static Op Range(const std::string& key, const std::string& end = "") {
    std::string op = R"({"request_range":{"key":")" + B64(key) + '"';
    if (!end.empty()) op += R"(,"range_end":")" + B64(end) + '"';
    return op + "}}";
  }
  // create_revision == 0: the key does not exist.
  static Compare Absent(const std::string& key) {
    return R"({"key":")" + B64(key) +
           R"(","result":"EQUAL","target":"CREATE","create_revision":"0"})";
  }
  // mod_revision > 0: the key exists.
  static Compare Present(const std::string& key) {
    return R"({"key":")" + B64(key) +
           R"(","result":"GREATER","target":"MOD","mod_revision":"0"})";
  }
  // A nested txn (an empty list is left out).
  static Op Nested(const std::vector<Compare>& compare, const std::vector<Op>& success,
                   const std::vector<Op>& failure = {}) {
    std::string txn = R"({"request_txn":{)";
    if (!compare.empty()) txn += R"("compare":[)" + Joined(compare) + "],";
    txn += R"("success":[)" + Joined(success) + "]";
    if (!failure.empty()) txn += R"(,"failure":[)" + Joined(failure) + "]";
    return txn + "}}";
  }
  // The op's share of a request body (with its separator).
  static std::size_t Bytes(const Op& op) { return op.size() + 1; }

  // A txn of `success` ops without compares. The gateway leaves false out of its
  // answer: count the trues.
  TxnAnswer Txn(const std::vector<Op>& success) {
    std::string answer;
    TxnAnswer a;
    a.ok = Post("/v3/kv/txn", R"({"success":[)" + Joined(success) + "]}", &answer);
    constexpr std::string_view kHeld = "\"succeeded\":true";
    for (auto at = answer.find(kHeld); a.ok && at != std::string::npos;
         at = answer.find(kHeld, at + 1)) {
      ++a.held;
    }
    return a;
  }

  // A lease of `ttl_s` for this connection's lease keys (none when refused).
  std::optional<LeaseId> GrantLease(int ttl_s) {
    std::string answer;
    if (!Post("/v3/lease/grant", R"({"TTL":")" + std::to_string(ttl_s) + "\"}", &answer)) {
      return std::nullopt;
    }
    const nlohmann::json j = nlohmann::json::parse(answer, nullptr, false);
    if (!j.is_object() || !j.contains("ID")) return std::nullopt;
    return j["ID"].get<std::string>();
  }

  // How many keys lie in [key, end) (-1: no answer).
  long Count(const std::string& key, const std::string& end) {
    std::string answer;
    if (!Post("/v3/kv/range",
              R"({"key":")" + B64(key) + R"(","range_end":")" + B64(end) + R"(","count_only":true})",
              &answer)) {
      return -1;
    }
    const nlohmann::json j = nlohmann::json::parse(answer, nullptr, false);
    if (!j.is_object()) return -1;
    // The gateway leaves a count of 0 out, and writes int64s as strings.
    return j.contains("count") ? std::stol(j["count"].get<std::string>()) : 0;
  }

 private:
  // True when the member answered HTTP 200 without an error; *answer: the body.
  bool Post(const std::string& path, const std::string& body, std::string* answer) {
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
    *answer = std::move(reply);
    return ok;
  }
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

// etcd's gRPC API (KV.Txn, Lease.LeaseGrant) over one HTTP/2 connection of its own
// (a local subchannel pool: gRPC would otherwise share one connection between the
// replicas' channels to the same address), synchronous calls, one at a time.
class GrpcWire {
 public:
  using Op = etcdserverpb::RequestOp;
  using Compare = etcdserverpb::Compare;
  using LeaseId = std::int64_t;
  static constexpr const char* kName = "grpc";
  static constexpr const char* kKeyTag = "g";

  explicit GrpcWire(int port) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetMaxReceiveMessageSize(-1);  // a txn's answer is never refused by the client
    channel_ = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port),
                                         grpc::InsecureChannelCredentials(), args);
    kv_ = etcdserverpb::KV::NewStub(channel_);
    lease_ = etcdserverpb::Lease::NewStub(channel_);
  }

  static Op Put(const std::string& key, const std::string& value,
                const std::optional<LeaseId>& lease = std::nullopt) {
    Op op;
    etcdserverpb::PutRequest* put = op.mutable_request_put();
    put->set_key(key);
    put->set_value(value);
    if (lease) put->set_lease(*lease);
    return op;
  }
  static Op Delete(const std::string& key) {
    Op op;
    op.mutable_request_delete_range()->set_key(key);
    return op;
  }
  static Op Range(const std::string& key, const std::string& end = "") {
    Op op;
    etcdserverpb::RangeRequest* range = op.mutable_request_range();
    range->set_key(key);
    if (!end.empty()) range->set_range_end(end);
    return op;
  }
  static Compare Absent(const std::string& key) {
    Compare c;
    c.set_key(key);
    c.set_result(Compare::EQUAL);
    c.set_target(Compare::CREATE);
    c.set_create_revision(0);
    return c;
  }
  static Compare Present(const std::string& key) {
    Compare c;
    c.set_key(key);
    c.set_result(Compare::GREATER);
    c.set_target(Compare::MOD);
    c.set_mod_revision(0);
    return c;
  }
  static Op Nested(std::vector<Compare> compare, std::vector<Op> success,
                   std::vector<Op> failure = {}) {
    Op op;
    etcdserverpb::TxnRequest* txn = op.mutable_request_txn();
    for (auto& c : compare) *txn->add_compare() = std::move(c);
    for (auto& o : success) *txn->add_success() = std::move(o);
    for (auto& o : failure) *txn->add_failure() = std::move(o);
    return op;
  }
  // The op's share of a request (with its field tag and length).
  static std::size_t Bytes(const Op& op) { return op.ByteSizeLong() + 4; }

  TxnAnswer Txn(std::vector<Op> success) {
    etcdserverpb::TxnRequest request;
    request.mutable_success()->Reserve(static_cast<int>(success.size()));
    for (auto& op : success) *request.add_success() = std::move(op);
    etcdserverpb::TxnResponse response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 10s);
    const grpc::Status status = kv_->Txn(&context, request, &response);
    if (!Ok(status, "KV.Txn")) return {};
    TxnAnswer a{true, response.succeeded() ? 1u : 0u};
    for (const auto& r : response.responses()) {
      if (r.has_response_txn() && r.response_txn().succeeded()) ++a.held;
    }
    return a;
  }

  std::optional<LeaseId> GrantLease(int ttl_s) {
    etcdserverpb::LeaseGrantRequest request;
    request.set_ttl(ttl_s);
    etcdserverpb::LeaseGrantResponse response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 10s);
    if (!Ok(lease_->LeaseGrant(&context, request, &response), "Lease.LeaseGrant") ||
        !response.error().empty() || response.id() == 0) {
      return std::nullopt;
    }
    return response.id();
  }

  long Count(const std::string& key, const std::string& end) {
    etcdserverpb::RangeRequest request;
    request.set_key(key);
    request.set_range_end(end);
    request.set_count_only(true);
    etcdserverpb::RangeResponse response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 10s);
    if (!Ok(kv_->Range(&context, request, &response), "KV.Range")) return -1;
    return response.count();
  }

 private:
  bool Ok(const grpc::Status& status, const char* method) {
    if (!status.ok() && errors_shown_++ < 3) {
      std::printf("  %s: gRPC %d %s\n", method, static_cast<int>(status.error_code()),
                  status.error_message().substr(0, 200).c_str());
    }
    return status.ok();
  }
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<etcdserverpb::KV::Stub> kv_;
  std::unique_ptr<etcdserverpb::Lease::Stub> lease_;
  int errors_shown_ = 0;
};

// How steps (a claim's, a complete's, an observation's ops) go into txns. A step
// never straddles two lists.
struct Packing {
  const char* label;
  std::size_t ops_per_list;   // the txn's ops, or each nested txn's
  std::size_t lists_per_txn;  // 1: a plain txn; more: a txn of that many nested txns
  bool one_step_per_txn;      // each step its own txn, as a call per step sends it
  bool ours = false;          // not a packing: ours' requests (OursRound)
  bool ours_reads = true;     // … with read txns first (false: blind claims and completes)
  bool legacy = false;        // the 18-key write set from before the lean one
};

// Key changes per job-tick with R replicas.
int ChangesPerJobTick(const Packing& p, int replicas) {
  return p.legacy ? 9 + 3 * replicas : 4 + replicas;
}
// etcd refuses a request above --max-request-bytes (1.5 MiB by default). With 3 × 1,000
// jobs no txn comes near this on either wire (the gateway's, the larger, are ≤ ~0.6 MiB),
// so both wires pack every step alike.
constexpr std::size_t kMaxBodyBytes = 1 << 20;

// Sends the steps as `p` packs them; {requests, errors}.
template <typename Wire>
std::pair<long, long> SendSteps(Wire& wire, std::vector<std::vector<typename Wire::Op>> steps,
                                const Packing& p) {
  using Op = typename Wire::Op;
  long sent = 0, errors = 0;
  std::vector<std::vector<Op>> lists;  // closed lists of the txn being filled
  std::vector<Op> list;                // the open list
  std::size_t bytes = 0;
  auto close_list = [&] {
    if (list.empty()) return;
    lists.push_back(std::move(list));
    list.clear();
  };
  auto send = [&] {
    close_list();
    if (lists.empty()) return;
    std::vector<Op> txn;
    if (p.lists_per_txn == 1) {
      txn = std::move(lists.front());
    } else {
      for (auto& l : lists) txn.push_back(Wire::Nested({}, std::move(l)));
    }
    ++sent;
    if (!wire.Txn(std::move(txn)).ok) ++errors;
    lists.clear();
    bytes = 0;
  };
  for (auto& step : steps) {
    std::size_t step_bytes = 0;
    for (const auto& op : step) step_bytes += Wire::Bytes(op);
    if (!list.empty() && (p.one_step_per_txn || list.size() + step.size() > p.ops_per_list)) {
      close_list();
    }
    if (lists.size() == p.lists_per_txn || (bytes > 0 && bytes + step_bytes > kMaxBodyBytes)) {
      send();
    }
    for (auto& op : step) list.push_back(std::move(op));
    bytes += step_bytes;
  }
  send();
  return {sent, errors};
}

// Values of about the sizes ours writes (JSON: state, node, owner, hash, fence, lease…).
const std::string kRecord(140, 'r'), kRecordDone(170, 'd'), kToken(30, 't'), kHead(60, 'h'),
    kObservation(80, 'o');
// The lean record also holds the lease's end and the winner's observation.
const std::string kRecordLean(200, 'r'), kRecordDoneLean(230, 'd');

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

template <typename Wire>
std::vector<typename Wire::Op> ClaimOps(const TickKeys& k,
                                        const std::optional<typename Wire::LeaseId>& lease,
                                        bool legacy) {
  if (!legacy) {
    return {Wire::Put(k.tick + "r", kRecordLean), Wire::Put(k.tick + "l", kToken, lease),
            Wire::Put(k.job + "head", kHead)};
  }
  return {Wire::Put(k.tick + "r", kRecord), Wire::Put(k.tick + "l", kToken, lease),
          Wire::Put(k.tick + "u", "1800000000123"), Wire::Put(k.index, ""),
          Wire::Put(k.jobs_entry, ""), Wire::Put(k.job + "head", kHead)};
}
template <typename Wire>
std::vector<typename Wire::Op> ObservationOps(const TickKeys& k, int replica, bool legacy) {
  if (!legacy) return {Wire::Put(k.tick + "w/replica-" + std::to_string(replica), kObservation)};
  return {Wire::Put(k.tick + "w/replica-" + std::to_string(replica), kObservation),
          Wire::Put(k.index, ""), Wire::Put(k.jobs_entry, "")};
}
template <typename Wire>
std::vector<typename Wire::Op> CompleteOps(const TickKeys& k, bool legacy) {
  if (!legacy) return {Wire::Put(k.tick + "r", kRecordDoneLean), Wire::Delete(k.tick + "l")};
  return {Wire::Put(k.tick + "r", kRecordDone), Wire::Delete(k.tick + "l"),
          Wire::Delete(k.tick + "u")};
}

// ours' claims per txn (lock/etcd kClaimsPerTxn: 128 − 8 − 1).
constexpr int kOursChunk = 119;

// One step of a round as lock/etcd sends it (the lean write set). Blind (the steady
// state: every replica saw each job's head at the previous instant): claims — a lease
// for the batch, then per chunk of 119 jobs from the replica's own slice on, ONE txn of
// nested claim txns for every job of the chunk (compare: no record, the head's
// mod_revision and value; success: the claim's 3 puts; failure: the record's and the
// head's ranges, as for a claim without forbid or recover; the probe's delete) — the winner's (job j: replica j % R) compares hold, the
// others' fail and range, as a lost race does — then one txn of nested observation
// puts for the jobs of the chunk it lost; completes — per chunk, one txn of nested
// complete txns (compare the record's mod_revision), no read. With `with_reads` (a
// replica without the heads, e.g. its first instant): per chunk a read txn first (per
// job a nested txn ranging the tick's keys, the run key and the head; the permission
// probe) and only the winner sends its claims (no race: the others read after it),
// and a read before the completes. Compares that always hold here (present instead of
// == the value read) cost the member the same as ours'.
template <typename Wire, typename Keys>
std::pair<long, long> OursRound(Wire& wire, const std::string& prefix, Keys keys, int r,
                                int replicas, int jobs, tickd::bench::CeilingStep step,
                                bool with_reads) {
  using Op = typename Wire::Op;
  long sent = 0, errors = 0;
  // Sends a txn; with `must_hold` nested txns, fewer of them whose compares held counts as
  // an error (their writes did not happen).
  auto post = [&](std::vector<Op> ops, std::size_t must_hold = 0) {
    ++sent;
    const TxnAnswer a = wire.Txn(std::move(ops));
    if (!a.ok || (must_hold > 0 && a.held < must_hold + 1)) ++errors;  // + 1: the outer txn
  };
  const std::string probe = prefix + "job/-permission-probe";
  auto reads = [&](const TickKeys& k) {
    return std::vector<Op>{Wire::Range(k.tick, k.tick + "w"), Wire::Range(k.job + "run"),
                           Wire::Range(k.job + "head")};
  };
  auto failure = [&](const TickKeys& k) {
    return std::vector<Op>{Wire::Range(k.tick + "r"), Wire::Range(k.job + "head")};
  };
  if (step == tickd::bench::kClaims) {
    ++sent;
    const std::optional<typename Wire::LeaseId> lease = wire.GrantLease(60);
    if (!lease) ++errors;
    auto job_at = [&](int n) { return (n + r * jobs / replicas) % jobs; };
    for (int from = 0; from < jobs; from += kOursChunk) {
      const int to = std::min(jobs, from + kOursChunk);
      if (with_reads) {
        std::vector<Op> read;
        for (int n = from; n < to; ++n) read.push_back(Wire::Nested({}, reads(keys(job_at(n)))));
        read.push_back(Wire::Range(probe));
        post(std::move(read));
      }
      std::vector<Op> claims, observations;
      std::size_t winning = 0;
      for (int n = from; n < to; ++n) {
        const int j = job_at(n);
        const TickKeys k = keys(j);
        if (j % replicas == r) {
          ++winning;
          claims.push_back(Wire::Nested({Wire::Absent(k.tick + "r"), Wire::Present(k.job + "head"),
                                         Wire::Present(k.job + "head")},
                                        ClaimOps<Wire>(k, lease, false), failure(k)));
        } else if (!with_reads) {  // a lost race: the compare fails, the failure ranges
          claims.push_back(Wire::Nested({Wire::Absent(k.job + "head")},
                                        ClaimOps<Wire>(k, lease, false), failure(k)));
        }
        if (j % replicas != r) observations.push_back(Wire::Nested({}, ObservationOps<Wire>(k, r, false)));
      }
      if (!claims.empty()) {
        claims.push_back(Wire::Delete(probe));
        post(std::move(claims), winning);
      }
      if (!observations.empty()) post(std::move(observations));
    }
  } else if (step == tickd::bench::kCompletes) {
    std::vector<int> mine;
    for (int j = r; j < jobs; j += replicas) mine.push_back(j);
    for (std::size_t from = 0; from < mine.size(); from += kOursChunk) {
      const std::size_t to = std::min(mine.size(), from + kOursChunk);
      if (with_reads) {
        std::vector<Op> read;
        for (std::size_t n = from; n < to; ++n) read.push_back(Wire::Nested({}, reads(keys(mine[n]))));
        read.push_back(Wire::Range(probe));
        post(std::move(read));
      }
      std::vector<Op> completes;
      for (std::size_t n = from; n < to; ++n) {
        const TickKeys k = keys(mine[n]);
        completes.push_back(
            Wire::Nested({Wire::Present(k.tick + "r")}, CompleteOps<Wire>(k, false)));
      }
      const std::size_t count = completes.size();
      post(std::move(completes), count);
    }
  }
  return {sent, errors};
}

// One variant of the ceiling over `Wire`; prints its line. Nothing (rounds 0) when the
// member refused the set-up.
template <typename Wire>
tickd::bench::CeilingRun Ceiling(const tickd::testing::EtcdServer& server, const Packing& p,
                                 int replicas, int jobs, int seconds) {
  const std::string label = std::string(p.label) + " via " + Wire::kName;
  std::vector<std::unique_ptr<Wire>> wires;
  std::vector<typename Wire::LeaseId> leases;
  for (int r = 0; r < replicas; ++r) {
    wires.push_back(std::make_unique<Wire>(server.port()));
    const auto lease = wires.back()->GrantLease(60);
    if (!lease) {
      std::printf("ceiling %s: no lease granted\n", label.c_str());
      return {};
    }
    leases.push_back(*lease);
  }
  const std::string prefix = std::string("/ceiling/") + Wire::kKeyTag + "/" + p.label + "/";
  {  // the heads and job names, as a job's first claim leaves them (ours compares heads)
    std::vector<std::vector<typename Wire::Op>> heads;
    for (int j = 0; j < jobs; ++j) {
      const TickKeys k(prefix, j, "");
      heads.push_back({Wire::Put(k.job + "head", kHead), Wire::Put(k.jobs_entry, "")});
    }
    if (SendSteps(*wires[0], std::move(heads), Packing{"setup", 128, 1, false}).second != 0) {
      std::printf("ceiling %s: the heads could not be written\n", label.c_str());
      return {};
    }
  }
  constexpr std::int64_t kFirstTick = 1'800'000'000;
  const double member_cpu_before = tickd::bench::ProcessCpuSeconds(server.pid());
  const double own_cpu_before = tickd::bench::OwnCpuSeconds();
  const tickd::bench::CeilingRun run = tickd::bench::RunCeilingRounds(
      replicas, seconds, 1'000'000, [&](int r, long round, tickd::bench::CeilingStep step) {
        char tick[32];
        std::snprintf(tick, sizeof(tick), "%020lld", static_cast<long long>(kFirstTick + round));
        auto keys = [&](int j) { return TickKeys(prefix, j, tick); };
        Wire& wire = *wires[static_cast<std::size_t>(r)];
        if (p.ours) {
          return OursRound(wire, prefix, keys, r, replicas, jobs, step, p.ours_reads);
        }
        std::vector<std::vector<typename Wire::Op>> steps;
        if (step == tickd::bench::kClaims) {  // the claims this replica wins (job j: j % R)
          for (int j = r; j < jobs; j += replicas) {
            steps.push_back(
                ClaimOps<Wire>(keys(j), leases[static_cast<std::size_t>(r)], p.legacy));
          }
        } else if (step == tickd::bench::kObservations) {  // lean: of the jobs it lost
          for (int j = 0; j < jobs; ++j) {
            if (p.legacy || j % replicas != r) {
              steps.push_back(ObservationOps<Wire>(keys(j), r, p.legacy));
            }
          }
        } else {  // the completes of its claims
          for (int j = r; j < jobs; j += replicas) {
            steps.push_back(CompleteOps<Wire>(keys(j), p.legacy));
          }
        }
        return SendSteps(wire, std::move(steps), p);
      });
  const double member_cpu = tickd::bench::ProcessCpuSeconds(server.pid()) - member_cpu_before;
  const double own_cpu = tickd::bench::OwnCpuSeconds() - own_cpu_before;
  const int changes = ChangesPerJobTick(p, replicas);
  tickd::bench::PrintCeiling(label.c_str(), run, jobs, changes, "key changes");
  // Where the 2 cores went: the member's CPU and the clients' (this process: its
  // threads, libcurl or gRPC's), per 1,000 key changes.
  const double kilo_changes = static_cast<double>(run.rounds) * jobs * changes / 1e3;
  std::printf("  cpu: member %.2f s (%.1f ms per 1,000 key changes), clients %.2f s (%.1f ms)\n",
              member_cpu, 1e3 * member_cpu / kilo_changes, own_cpu, 1e3 * own_cpu / kilo_changes);
  // What the rounds leave, whichever variant and wire: per job-tick the record and each
  // other replica's observation (l deleted by the complete), and with the 18-key set
  // also the index and the winner's observation (u deleted); per job its name and head.
  std::string end = prefix;
  ++end.back();
  const long found = wires[0]->Count(prefix, end);
  const long expected = run.rounds * jobs * (p.legacy ? 2 + replicas : replicas) + 2L * jobs;
  std::printf("  checked: %ld keys under %s, %s\n", found, prefix.c_str(),
              found == expected ? "as the rounds leave them"
                                : ("NOT the " + std::to_string(expected) + " expected").c_str());
  std::fflush(stdout);
  return run;
}

// Rounds per second of a variant (the same keys per round on both wires).
double RoundsPerSecond(const tickd::bench::CeilingRun& run) {
  return run.secs > 0 ? static_cast<double>(run.rounds) / run.secs : 0;
}

// --pairs K: K times ours' saturation run, then the nested ceiling (its best packing)
// over gRPC, back to back, and each pair's ratio. The member's rate per key change moves
// by ±10% from one ceiling run to the next on the shared machine (bench/README.md);
// the median of the pairs' ratios is steadier than any one ratio. The keys of every
// run stay, so each pair runs on a larger store than the one before (which slows ours
// more than the ceiling: bench/README.md). Each pair has its own ticks (after every
// earlier one: a job's head only moves forward) and its own ceiling prefix. Nonzero
// when a saturation run failed a check or a ceiling was refused.
int Pairs(const tickd::testing::EtcdServer& server,
          std::vector<std::unique_ptr<tickd::lock::Backend>>& replicas,
          const tickd::bench::BatchArgs& a, int pairs, int ceiling_seconds) {
  const std::int64_t first = std::chrono::duration_cast<std::chrono::seconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count() +
                             2'000'000;
  // A pause before each measurement, for the member to finish with the one before:
  // without it ours, measured right after a ceiling, ran at half its rate.
  constexpr std::chrono::seconds kSettle{3};
  std::vector<double> ratios;
  int failed = 0;
  for (int k = 0; k < pairs; ++k) {
    std::printf("pair %d of %d:\n", k + 1, pairs);
    std::this_thread::sleep_for(kSettle);
    const tickd::bench::SaturationRun ours = tickd::bench::RunSaturation(
        replicas, a, first + static_cast<std::int64_t>(k) * a.sat_ticks);
    const std::string label = "nested-64x64-pair" + std::to_string(k + 1);
    const Packing nested{label.c_str(), 64, 64, false};
    std::this_thread::sleep_for(kSettle);
    const tickd::bench::CeilingRun ceiling =
        Ceiling<GrpcWire>(server, nested, a.replicas, a.jobs, ceiling_seconds);
    const double ceiling_rate = RoundsPerSecond(ceiling) * a.jobs;
    failed += ours.failed + (ceiling_rate > 0 ? 0 : 1);
    if (ceiling_rate > 0) ratios.push_back(ours.job_ticks_per_s / ceiling_rate);
    std::printf("  pair %d: ours %.0f job-ticks/s, nested ceiling %.0f: %.2f\n", k + 1,
                ours.job_ticks_per_s, ceiling_rate,
                ceiling_rate > 0 ? ours.job_ticks_per_s / ceiling_rate : 0.0);
    std::fflush(stdout);
  }
  if (!ratios.empty()) {
    std::sort(ratios.begin(), ratios.end());
    const std::size_t n = ratios.size();
    const double median = n % 2 == 1 ? ratios[n / 2] : (ratios[n / 2 - 1] + ratios[n / 2]) / 2;
    std::printf("pairs: ours / nested ceiling, median %.2f of %zu (min %.2f, max %.2f)\n", median,
                n, ratios.front(), ratios.back());
    std::fflush(stdout);
  }
  return failed == 0 ? 0 : 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (tickd::bench::WantsHelp(argc, argv)) {
    std::printf(
        "usage: etcd_claim_bench [--replicas N] [--jobs M] [--seconds S] [--sat-ticks K]\n"
        "         [--sat-barrier 0] [--reference 0] [--load 0..3] [--ceiling-seconds S] [--batched "
        "0]\n"
        "         [--gateway 0] [--grpc 0] [--grpc-first 1] [--pairs K] [--compact 1]\n"
        "Starts its own etcd; runs N replicas x M jobs @every 1s through the batched claim\n"
        "path (paced S s, then K saturation ticks begun together unless --sat-barrier 0),\n"
        "then the store's references: the\n"
        "job-tick write-set ceiling for S s per variant (0: none; default 5), each variant\n"
        "through the JSON gateway and over gRPC (--gateway 0 / --grpc 0: one only;\n"
        "--grpc-first 1: gRPC first), and etcdctl check perf --load=s|m|l|xl (0..3,\n"
        "default xl; --reference 0: none). --pairs K: then K times the saturation run and\n"
        "the nested ceiling back to back, each pair's ratio and their median. --compact 1:\n"
        "after ours, the member's db compacted and defragmented (what the keys alive take).\n"
        "See bench/README.md.\n");
    return 0;
  }
  bool reference = true, batched = true, gateway = true, grpc = true, grpc_first = false;
  int load = 3, ceiling_seconds = 5, pairs = 0;
  bool compact = false;
  const tickd::bench::BatchArgs a = tickd::bench::ParseBatchArgs(
      argc, argv, tickd::bench::BatchArgs{3, 1000, 10, 5, /*sat_barrier=*/true}, [&](const std::string& key, int value) {
        if (key == "--reference") reference = value != 0;
        if (key == "--load") load = value;
        if (key == "--ceiling-seconds") ceiling_seconds = value;
        if (key == "--batched") batched = value != 0;
        if (key == "--gateway") gateway = value != 0;
        if (key == "--grpc") grpc = value != 0;
        if (key == "--grpc-first") grpc_first = value != 0;
        if (key == "--pairs") pairs = value;
        if (key == "--compact") compact = value != 0;
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
  std::vector<std::unique_ptr<tickd::lock::Backend>> replicas;
  tickd::bench::BatchArgs run = a;
  run.server_pid = server.pid();
  if (batched || pairs > 0) {
    for (int r = 0; r < a.replicas; ++r) replicas.push_back(Open(server));
  }
  if (batched) {
    status = tickd::bench::RunBatchBench(replicas, run);
    // etcd keeps every revision until it is compacted (the bench's member never is), so
    // the file grows with every key change, not with the keys alive (docs/stores.md).
    std::error_code ec;
    const auto db_bytes = std::filesystem::file_size(server.dir() + "/data/member/snap/db", ec);
    const long job_ticks = static_cast<long>(a.jobs) * (a.seconds + a.sat_ticks);
    if (!ec && job_ticks > 0) {
      std::printf(
          "member's db file after ours: %.1f MiB for ~%ld job-ticks, %.0f bytes a job-tick "
          "(not compacted)\n",
          static_cast<double>(db_bytes) / (1 << 20), job_ticks,
          static_cast<double>(db_bytes) / static_cast<double>(job_ticks));
      std::fflush(stdout);
    }
    // --compact 1: then what the keys alive take, the history compacted away and the
    // file defragmented (etcdctl), as a member with auto-compaction holds them.
    if (compact && job_ticks > 0) {
      const std::string etcdctl =
          "ETCDCTL_API=3 etcdctl --command-timeout=300s "
          "--endpoints=http://127.0.0.1:" +
          std::to_string(server.port());
      const std::string cmd =
          etcdctl + " compact --physical $(" + etcdctl +
          " endpoint status -w json | sed 's/.*\"revision\":\\([0-9]*\\).*/\\1/') >/dev/null && " +
          etcdctl + " defrag >/dev/null";
      std::uintmax_t live = 0;
      if (std::system(cmd.c_str()) == 0) {
        live = std::filesystem::file_size(server.dir() + "/data/member/snap/db", ec);
      }
      if (!ec && live > 0) {
        std::printf(
            "member's db file compacted and defragmented: %.1f MiB, %.0f bytes a job-tick kept\n",
            static_cast<double>(live) / (1 << 20),
            static_cast<double>(live) / static_cast<double>(job_ticks));
      } else {
        std::printf("member's db file compacted and defragmented: etcdctl failed\n");
      }
      std::fflush(stdout);
    }
  }
  if (ceiling_seconds > 0) {
    static const Packing kPackings[] = {
        {"per-step", 128, 1, true},   // one txn per claim, complete, observation
        {"txn-128", 128, 1, false},   // plain txns of up to 128 ops
        {"nested-64x64", 64, 64, false},  // 64 nested txns of up to 128 - 64 ops
        {"txn-128-18keys", 128, 1, false, false, true, true},  // the write set before
        {"nested-64x64-18keys", 64, 64, false, false, true, true},
        {"ours-read-first", 0, 0, false, true},  // ours' requests with reads (OursRound)
        {"ours-blind", 0, 0, false, true, false},  // … blind, as in the steady state
    };
    for (const Packing& p : kPackings) {
      tickd::bench::CeilingRun json, native;
      auto over_gateway = [&] {
        if (gateway) json = Ceiling<JsonWire>(server, p, a.replicas, a.jobs, ceiling_seconds);
      };
      auto over_grpc = [&] {
        if (grpc) native = Ceiling<GrpcWire>(server, p, a.replicas, a.jobs, ceiling_seconds);
      };
      if (grpc_first) over_grpc();
      over_gateway();
      if (!grpc_first) over_grpc();
      if (RoundsPerSecond(json) > 0 && RoundsPerSecond(native) > 0) {
        std::printf("  %s: grpc / gateway per-key rate %.2fx\n", p.label,
                    RoundsPerSecond(native) / RoundsPerSecond(json));
        std::fflush(stdout);
      }
    }
  }
  if (pairs > 0 && ceiling_seconds > 0) status |= Pairs(server, replicas, run, pairs, ceiling_seconds);
  static const char* const kLoads[] = {"s", "m", "l", "xl"};
  if (reference) Reference(server, kLoads[std::clamp(load, 0, 3)]);
  return status;
}
