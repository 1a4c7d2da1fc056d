// The etcd protocol (docs/backends.md, "etcd v3"), over etcd's gRPC API: the claim
// path's txns (claims, their reads, observations, completes) are built as etcd's
// messages (EtcdWire::Txn); the other requests are written in the JSON of etcd's
// gateway (/v3/… paths, keys and values base64, 64-bit integers as strings) and
// lock/etcd/etcd_wire.h sends each as its RPC. With prefix P
// and T written as 20 zero-padded digits (so that key order is tick order):
//
//   P job/<job>/tick/<T>/l        lease key: the owner token, attached to the claim's
//                                 lease; it vanishes when the lease expires on etcd.
//   P job/<job>/tick/<T>/r        tick record (JSON: state running|done, node, owner,
//                                 config hash, fence, lease id, outcome, exit,
//                                 duration, and since the lean write set lease_until
//                                 = the claim's lease end in member ms, wall_ms and
//                                 won_fence = the claimer's own observation). No
//                                 lease: a finished tick is remembered until Prune
//                                 removes it (retention).
//   P job/<job>/tick/<T>/u        lease_until, written by renewals only (an older
//                                 tickd: by the claim too); recover counts the
//                                 starting deadline from it, else from the record's.
//   P job/<job>/tick/<T>/w/<node> observations of the other replicas (ledger).
//   P job/<job>/idx/<T>           an older tickd's ledger index: no longer written
//                                 (History and Prune range tick/ keys-only); pruned.
//   P job/<job>/run               forbid marker (JSON: token, T, node, hash), attached
//                                 to the holder's lease.
//   P job/<job>/head              the job's claim head (JSON: tick = the latest tick
//                                 of the job ever claimed, node = who claimed it,
//                                 epoch_ms, n = claims since the epoch). No lease.
//   P job/<job>/out/<T>           what the finished run of T printed (Completion::
//                                 output), put by complete's txn; outside tick/<T>/ so
//                                 that History never reads it. No lease: complete
//                                 keeps the job's newest keep_outputs, Prune removes
//                                 those of ticks past retention.
//   P jobs/<job>                  the job names (History of every job, Prune): put
//                                 once per job by each handle, and by the claim that
//                                 creates the job's head.
//   P pauses/<job>                `tickd pause` (JSON, lock/pause_record.h; job '*':
//                                 every job). No lease. Ranged before each instant.
//
// Write set of a job-tick (docs/backends.md "etcd v3"): claim r, l, head; complete
// r, delete l; each other replica's observation w/<node> — 7 keys with 3 replicas
// (forbid: the run key's put and delete, +2; each renewal: u).
// claim: one read transaction (ranges over tick/<T>/[l,r,u], run and head) — or none,
// a blind claim (below) — then:
//  −1. the request checks the clock (max_lead, docs/design.md §1 rule 15) and even the
//      latest the member's clock can have read at the read (below: "etcd's now") is
//      before T + due_offset − max_lead → early, nothing written: the replica's clock
//      is ahead of the member's;
//   0. the request knows a later claimed tick than the head holds (known_tick > the
//      head's tick, 0 without a head) → store-reset, naming the head's tick: etcd lost
//      its data (docs/design.md §1 rule 12). Nothing is written. The read is one
//      revision of the store, and a claim that goes on to step 5 writes only while the
//      head is the one read (its txn compares the head's mod_revision, or its absence
//      only when known_tick is 0), so the check and the claim are one decision;
//   1. the record exists: done, or running with its lease key present, or recover off
//      → lost (the winner; holder_running = state is running). Running with the lease
//      key gone and recover on → missed when etcd's now > lease_until + deadline,
//      else re-claim below, comparing the record's mod_revision;
//   2. no record and the head names a later tick → superseded (that tick and its
//      node): claims are monotonic per job. A head further than max_lead ahead of
//      Date + 999 ms judges by its `below` instead (lock/clock_check.h);
//   3. no record and etcd's now > T + starting_deadline → missed;
//   4. forbid and the run key names another tick → busy;
//   5. the batch's lease (one per TTL = the lease rounded up to whole seconds, etcd's
//      unit, granted once for every claim of the batch that gets here), then the
//      claim's txn: compare create_revision == 0 on the record (re-claim: mod_revision ==
//      the one read, and create_revision == 0 on the lease key) and, for forbid, on
//      the run key, and mod_revision == the one read on the head (create_revision
//      == 0 when there was none), so no later tick of the job can have been claimed
//      in between; success puts the record (no lease; with the lease's end and the
//      claimer's observation), the lease key and the run key (with the lease), the
//      head moved on (n + 1, tick only forward), and the job's name when this handle
//      has not written it yet or the head is new; a re-claim also puts the previous
//      claimer's observation, which its record held, as w/<node>. Failure ranges what
//      decides the claim (the record and the head; with recover the lease key and
//      lease end too, with forbid the run key): lost or busy, named by what won the
//      race, or, when only the head moved (a claim of another tick of the job), the
//      claim starts over (at most 3 times).
//   Blind claims: a handle keeps each job's head as it last saw it (value and
//   mod_revision: from a read, its own claim, a failed claim's ranges). With one,
//   and a reading of the member's clock from the last minute's replies
//   (SecondClockBound::Read), a claim whose steps −1 to 4 decide nothing on that head
//   and reading (early only when even the reading's highest is before due −
//   max_lead, missed only when its lowest is past T + deadline) sends its txn without
//   a read, comparing the head's mod_revision and value. The compare proves the head
//   the one judged; a failed compare's ranges decide the claim as a read would (lost,
//   busy, superseded, store-reset, missed on the reply's Date), or, when it could
//   still win (the head moved, a re-claim), it reads in the next wave. Anything the
//   cached head would answer without a write reads first, as does a claim without a
//   cached head or reading. A claim marked likely_decided (another replica's slice
//   of the instant, decided by the time it is sent) is probed instead: plain ops, no
//   compare, that range its record and put this replica's observation of a loss
//   (ProbeRecords), so a loser decides and observes in one request; without a record
//   its observation is deleted again and it reads in full.
//   Batches (ClaimBatch, all claims of one instant): in waves holding at most one
//   claim per job, each wave in chunks of up to 791 claims of one kind, likely
//   decided or not (lock/claim_waves.h; fewer under a long prefix or long names:
//   ClaimBytes): the probe of the likely decided ones, the read of the others not
//   blind (flat ranges, ReadTicks: read-only txns), then ONE txn whose claim txns are
//   nested two levels deep (7 of 113), each with its own compare, success and
//   failure, so every claim is decided on its own in one Raft entry. A claim that has to start over goes into the next wave.
//   A lease no claim won under is revoked at the end of the batch. A single Claim is a
//   batch of one: read (unless blind), grant, txn. Then one more txn (plain puts in
//   nested txns) writes this replica's observations of the chunk's outcomes that its
//   probe did not (ClaimRequest::observe; a won claim's is in its record), and the
//   chunk's answers are handed over. CompleteBatch sends chunks of 791 too.
//   Fence = epoch_ms << 11 + n (lock/backend.h), stored in the record. The epoch is
//   taken when the head is created: the claimer's wall clock in milliseconds, but
//   never below the member's Date (etcd has no time API with more than seconds). A
//   fresh data directory (or a deleted prefix) loses the heads; the next claim of
//   each job creates its head at a later epoch, above every fence of the old one,
//   unless the claimer's clock is behind the old head's creator by more than the
//   time between that creation and the loss. Records written by an older tickd keep
//   fence 0 (their fence was the record's mod_revision, far below any epoch fence).
// "etcd's now": etcd has no time API, and gRPC answers carry no Date. Its HTTP
// server's answers do: GET /version (answered without Raft) before each batch and
// before any request when the member was last asked more than 250 ms ago; its Date
// (the member's clock, 1 s resolution, rounded down) and when, on the replica's
// monotonic clock, it was sent and received feed the member's SecondClockBound
// (lock/clock_check.h), usually a few tens of ms wide once Dates at different phases of
// the second came in. A reply's server_ms is then the whole second at or below the
// bound's lower end when the request was sent, and server_hi_ms its upper end when
// the answer arrived (etcd_wire.h WireReply); the replica's clock is never used. So
// `missed` is judged on the member's clock, up to 1 s leniently, as on a Date; the
// clock check (step −1) takes the latest the member's clock can have read instead. No
// Date in the last minute (a proxy that strips it, /version unreachable) never yields
// missed; the scheduler's own deadline check remains.
// renew: keepalive of the lease (a reply without TTL: gone → lost), then a txn that
// compares the lease key's value with the token and refreshes lease_until. The runs
// of a batch share its lease: a keepalive sent after a renewal began answers for it
// too (one keepalive for the renewals that come together). A run whose own renewals
// stopped keeps its claim while another run of the lease renews; its watchdog, which
// counts from its own renewals, stops it as on every backend.
// refence (a retry's new fence): read, then a txn comparing the record's and the
// head's mod_revision and the lease key's value (our token), putting the record with
// the next fence and the head with n + 1 (as a claim does); a moved head reads again.
// complete: a txn comparing the record's mod_revision (owner checked on the value
// read, or written: a re-claim changes mod_revision, so the txn refuses a stale
// holder even when its lease has expired): puts the record done, deletes the lease
// key, lease_until (when a renewal wrote it) and the run key (when it holds our
// token). A claim this handle won (or refenced) completes without a read: the compare
// takes the mod_revision of its own txn (and of the run key it put); a failed compare
// reads and tries again.
// Completes that arrive together share one read txn (for those that need one) and
// one txn of nested txns per 791 (CompleteBatch, lock/complete_batcher.h). The lease
// is revoked when the last claim this handle won under it completes, not before its
// batch ends (a claim completed through another handle leaves it to expire), on a
// thread of its own: no answer waits on it (RevokeLater).
// locks: ListRunning ranges each job's tick keys (records, lease keys, lease_until);
// ForceRelease is one txn comparing the record's mod_revision and the lease key's
// absence, putting the record done ("released", no owner: the old holder's Renew and
// Complete are refused) and deleting lease_until and the holder's run key.
// Ambiguous failures (no answer to a claim txn): the chunk's ticks are read again;
// a claim is ours only when its record and its lease key hold our token. Otherwise
// Error (fail closed); a lease that may have been attached simply expires. After a
// request without an answer the rest of the batch answers that error at once.
// Several endpoints: a request that could not connect goes to the next member (any
// retried write is a compare-and-set, so a retry is never a second claim).
// Lease TTLs restart at full length after an etcd leader change or a restart of the
// cluster: a dead holder's tick may be taken over up to one lease later; safety is
// unaffected.
#include "lock/etcd/etcd_backend.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <condition_variable>
#include <cstdio>
#include <google/protobuf/arena.h>
#include <iterator>
#include <map>
#include <set>
#include <span>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "base/thread_pool.h"
#include "lock/claim_waves.h"
#include "lock/clock_check.h"
#include "lock/complete_batcher.h"
#include "lock/etcd/etcd_wire.h"
#include "lock/pause_record.h"
#include "lock/registry.h"
#include "rpc.pb.h"  // lock/etcd/proto/rpc.proto, generated

namespace tickd::lock {
namespace {

using Json = nlohmann::json;
using std::chrono::steady_clock;
using Deadline = steady_clock::time_point;

constexpr std::string_view kDefaultPrefix = "/tickd/";
constexpr int kDefaultPort = 2379;
// etcd refuses transactions with more operations than --max-txn-ops (default 128).
constexpr std::size_t kMaxTxnOps = 128;
// The limit counts per level: a txn passes when its longest list (compare, success or
// failure) is at most the limit it is checked against, and each nested txn is checked
// against that limit minus its parent's longest list (etcd server/etcdserver/api/
// v3rpc/key.go, checkTxnRequest; checked against 3.4.23: 120 nested txns of 8 puts
// pass, 121 are refused, 64 × 64 puts pass). A claim's txn has at most 7 ops in a list
// (success: record, lease key, lease_until, index, job name, head, run key); a batch
// request nests them two levels deep: its txn holds kNestedPerRequest txns and one
// permission probe (AddPermissionProbe), each of those up to kClaimsPerNested claim
// txns: 8 + 113 + 7 = 128. So one request carries up to 791 claims (a complete's txn
// and a probe's are shorter); with 1,000 jobs and 3 replicas a replica's probes of
// the others' two slices go in one request.
constexpr std::size_t kNestedPerRequest = 7;
constexpr std::size_t kClaimsPerNested = kMaxTxnOps - (kNestedPerRequest + 1) - 7;
constexpr std::size_t kClaimsPerTxn = kNestedPerRequest * kClaimsPerNested;
// etcd also refuses a request above --max-request-bytes (1.5 MiB by default): a chunk
// holds claims (completes) whose estimated bytes add up to at most 1 MiB. A claim's
// txn names its job's keys up to twelve times (compares, puts, failure ranges; with
// forbid the run key's three), its node in the record, the head (compared and put) and
// the observation, its owner token and config hash in the record and the run key; the
// values besides come to about 600 bytes. The estimate is above what a claim measures
// (tests/etcd "under a long prefix…"); under a long prefix (an operator's `?prefix=`)
// or long names fewer go to a request.
constexpr std::size_t kRequestBytes = 1024 * 1024;
std::size_t ClaimBytes(std::size_t prefix_bytes, const ClaimRequest& req) {
  return 12 * (prefix_bytes + req.job.size() + 40) + 4 * req.node.size() +
         2 * (req.owner_token.size() + req.config_hash.size()) + 600;
}
// A complete's txn names its tick's keys up to seven times (the record compared and
// put, the lease key, the lease end, the run key compared and deleted, the output),
// the value of the record done besides: about 500 bytes and the node (its name is
// not in the request: counted at 64 bytes).
std::size_t CompleteBytes(std::size_t prefix_bytes, const CompleteRequest& req) {
  return 7 * (prefix_bytes + req.held.job.size() + 40) + 2 * 64 + 500;
}
// Observations are plain puts in nested txns: K nested txns of up to 128 − K puts each
// pass the limit (above), so 64 of 64 — 4,096 puts to a request, kept under etcd's
// --max-request-bytes (1.5 MiB by default) by kObservationBytesPerTxn.
constexpr std::size_t kPutsPerNestedTxn = kMaxTxnOps / 2;
// A probe (ProbeRecords) is at most 3 plain ops per claim — the record's range, the
// observation's put, the job name's — packed kPutsPerNestedTxn to a nested txn: the
// nested txns of a chunk's probe (plus the permission probe) must stay within
// kMaxTxnOps − kPutsPerNestedTxn, the limit a nested txn's list of 64 leaves its parent.
// Its bytes stay below those of the chunk's claim txn, which ClaimBytes bounds.
constexpr std::size_t kProbeOpsPerClaim = 3;
static_assert(kClaimsPerTxn / (kPutsPerNestedTxn / kProbeOpsPerClaim) + 2 <=
              kMaxTxnOps - kPutsPerNestedTxn);
constexpr std::size_t kObservationBytesPerTxn = 1024 * 1024;
// The jobs whose head and name a handle remembers (blind claims, the name put once): a
// library's ad-hoc locks (`lock.<key>`) can be any number of jobs; past this many the
// memory starts over (the next claims read, the names are put again).
constexpr std::size_t kMaxJobsCached = std::size_t{1} << 16;

// ---- base64 (the gateway's bytes fields) ----

constexpr std::string_view kB64 =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string B64(std::string_view in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const unsigned v = static_cast<unsigned char>(in[i]) << 16 |
                       static_cast<unsigned char>(in[i + 1]) << 8 |
                       static_cast<unsigned char>(in[i + 2]);
    for (int s : {18, 12, 6, 0}) out.push_back(kB64[(v >> s) & 63]);
  }
  if (i < in.size()) {
    unsigned v = static_cast<unsigned char>(in[i]) << 16;
    if (i + 1 < in.size()) v |= static_cast<unsigned char>(in[i + 1]) << 8;
    out.push_back(kB64[(v >> 18) & 63]);
    out.push_back(kB64[(v >> 12) & 63]);
    out.push_back(i + 1 < in.size() ? kB64[(v >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

std::string UnB64(std::string_view in) {
  std::string out;
  unsigned v = 0;
  int bits = 0;
  for (char c : in) {
    const auto pos = kB64.find(c);
    if (pos == std::string_view::npos) continue;  // '=' and anything else
    v = v << 6 | static_cast<unsigned>(pos);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((v >> bits) & 0xff));
    }
  }
  return out;
}

// ---- the gateway's JSON ----

// proto3 JSON: int64 as a string, and zero values omitted.
std::int64_t Int(const Json& j, const char* field) {
  const auto it = j.find(field);
  if (it == j.end()) return 0;
  if (it->is_number_integer()) return it->get<std::int64_t>();
  if (!it->is_string()) return 0;
  const std::string& s = it->get_ref<const std::string&>();
  std::int64_t v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

std::string Str(const Json& j, const char* field) {
  const auto it = j.find(field);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

struct Kv {
  std::string key;
  std::string value;
  std::int64_t create_revision = 0;
  std::int64_t mod_revision = 0;
  std::int64_t lease = 0;
};

std::vector<Kv> KvsOf(const Json& range_response) {
  std::vector<Kv> out;
  const auto it = range_response.find("kvs");
  if (it == range_response.end() || !it->is_array()) return out;
  for (const Json& kv : *it) {
    out.push_back(Kv{UnB64(Str(kv, "key")), UnB64(Str(kv, "value")), Int(kv, "create_revision"),
                     Int(kv, "mod_revision"), Int(kv, "lease")});
  }
  return out;
}

// The smallest key after every key that starts with `prefix` (etcd's range_end).
std::string PrefixEnd(std::string prefix) {
  while (!prefix.empty()) {
    if (static_cast<unsigned char>(prefix.back()) < 0xff) {
      ++prefix.back();
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');  // every key
}

Json Compare(const std::string& key, const char* target, const char* field, Json value) {
  return Json{
      {"key", B64(key)}, {"result", "EQUAL"}, {"target", target}, {field, std::move(value)}};
}
Json CreatedAt(const std::string& key, std::int64_t rev) {  // 0: the key does not exist
  return Compare(key, "CREATE", "create_revision", std::to_string(rev));
}
Json ModifiedAt(const std::string& key, std::int64_t rev) {
  return Compare(key, "MOD", "mod_revision", std::to_string(rev));
}
Json ValueIs(const std::string& key, std::string_view value) {
  return Compare(key, "VALUE", "value", B64(value));
}
Json Put(const std::string& key, std::string_view value, std::int64_t lease = 0) {
  Json put{{"key", B64(key)}, {"value", B64(value)}};
  if (lease != 0) put["lease"] = std::to_string(lease);
  return Json{{"request_put", std::move(put)}};
}
// [key, end); end empty: the key alone.
Json Range(const std::string& key, const std::string& end = "") {
  Json range{{"key", B64(key)}};
  if (!end.empty()) range["range_end"] = B64(end);
  return Json{{"request_range", std::move(range)}};
}
Json Delete(const std::string& key, const std::string& end = "") {
  Json del{{"key", B64(key)}};
  if (!end.empty()) del["range_end"] = B64(end);
  return Json{{"request_delete_range", std::move(del)}};
}

// The same ops and compares as etcd's messages, for the claim path's txns (EtcdWire::Txn:
// the claims, their reads, the observations, the completes), which are most of a
// replica's requests: building them as JSON, which the wire then parsed into these
// messages (and each answer back), took about a fifth of the client's CPU.
namespace pb = etcdserverpb;

void PutOp(pb::RequestOp* op, const std::string& key, std::string value, std::int64_t lease = 0) {
  pb::PutRequest* put = op->mutable_request_put();
  put->set_key(key);
  put->set_value(std::move(value));
  put->set_lease(lease);
}
void RangeOp(pb::RequestOp* op, const std::string& key, const std::string& end = "") {
  pb::RangeRequest* range = op->mutable_request_range();
  range->set_key(key);
  range->set_range_end(end);
}
void DeleteOp(pb::RequestOp* op, const std::string& key) {
  op->mutable_request_delete_range()->set_key(key);
}
void CreatedAtOp(pb::Compare* c, const std::string& key, std::int64_t rev) {  // 0: no key
  c->set_key(key);
  c->set_target(pb::Compare::CREATE);
  c->set_create_revision(rev);
}
void ModifiedAtOp(pb::Compare* c, const std::string& key, std::int64_t rev) {
  c->set_key(key);
  c->set_target(pb::Compare::MOD);
  c->set_mod_revision(rev);
}
void ValueIsOp(pb::Compare* c, const std::string& key, const std::string& value) {
  c->set_key(key);
  c->set_target(pb::Compare::VALUE);
  c->set_value(value);
}

// A batch request and its answer on one arena: their nested txns, keys and values
// (thousands of each per request) are freed at once, not one by one — malloc and
// free were about a third of the client's CPU at 1,000 jobs an instant (perf of
// bench/etcd_claim_bench).
struct TxnOnArena {
  google::protobuf::Arena arena;
  pb::TxnRequest& request = *google::protobuf::Arena::CreateMessage<pb::TxnRequest>(&arena);
  pb::TxnResponse& response = *google::protobuf::Arena::CreateMessage<pb::TxnResponse>(&arena);
};

// The txn of the n-th claim (complete, probe) of a batch request, nested two levels
// deep (kClaimsPerTxn): the n-th must follow the (n − 1)-th. The permission probe goes
// after the last.
pb::TxnRequest* AddClaimTxn(pb::TxnRequest& request, std::size_t n) {
  const int group = static_cast<int>(n / kClaimsPerNested);
  while (request.success_size() <= group) request.add_success()->mutable_request_txn();
  return request.mutable_success(group)->mutable_request_txn()->add_success()->mutable_request_txn();
}
// The answer of the n-th claim txn of such a request, or nullptr when it has none.
const pb::TxnResponse* ClaimTxnAnswer(const pb::TxnResponse& response, std::size_t n) {
  const int group = static_cast<int>(n / kClaimsPerNested);
  const int at = static_cast<int>(n % kClaimsPerNested);
  if (group >= response.responses_size() || !response.responses(group).has_response_txn()) {
    return nullptr;
  }
  const pb::TxnResponse& nested = response.responses(group).response_txn();
  if (at >= nested.responses_size() || !nested.responses(at).has_response_txn()) return nullptr;
  return &nested.responses(at).response_txn();
}

// ---- values stored ----

struct TickRecord {
  std::string state;  // running | done
  std::string node;
  std::string owner;
  std::string hash;
  std::uint64_t fence = 0;  // 0 while running: the fence is the record's mod_revision
  std::int64_t lease_id = 0;
  std::string outcome;
  std::optional<int> exit_code;
  std::int64_t duration_ms = 0;
  // Since the lean write set (older records: 0, their lease end is in `u` and their
  // claimer's observation in w/<node>): the lease's end in the member's ms as the
  // claim set it (a renewal writes `u`, which then counts), and the claimer's own
  // observation of its won claim (its wall clock, the fence it won).
  std::int64_t lease_until_ms = 0;
  bool claim_observed = false;  // wall_ms and won_fence are stored
  std::int64_t wall_ms = 0;
  std::uint64_t won_fence = 0;
  std::int64_t mod_revision = 0;  // of the key, not stored in the value
};

std::string Encode(const TickRecord& r) {
  Json j{{"state", r.state}, {"node", r.node},   {"owner", r.owner},
         {"hash", r.hash},   {"fence", r.fence}, {"lease", std::to_string(r.lease_id)}};
  if (r.state == "done") {
    j["outcome"] = r.outcome;
    j["exit"] = r.exit_code ? Json(*r.exit_code) : Json(nullptr);
    j["duration_ms"] = r.duration_ms;
  }
  if (r.lease_until_ms > 0) j["lease_until"] = r.lease_until_ms;
  if (r.claim_observed) {
    j["wall_ms"] = r.wall_ms;
    j["won_fence"] = r.won_fence;
  }
  return j.dump();
}

std::optional<TickRecord> DecodeRecord(const Kv& kv) {
  const Json j = Json::parse(kv.value, nullptr, false);
  if (!j.is_object()) return std::nullopt;
  TickRecord r;
  r.state = Str(j, "state");
  r.node = Str(j, "node");
  r.owner = Str(j, "owner");
  r.hash = Str(j, "hash");
  r.fence = static_cast<std::uint64_t>(Int(j, "fence"));
  if (r.fence == 0) r.fence = static_cast<std::uint64_t>(kv.mod_revision);
  r.lease_id = Int(j, "lease");
  r.outcome = Str(j, "outcome");
  if (const auto it = j.find("exit"); it != j.end() && it->is_number_integer()) {
    r.exit_code = it->get<int>();
  }
  r.duration_ms = Int(j, "duration_ms");
  r.lease_until_ms = Int(j, "lease_until");
  r.claim_observed = j.contains("wall_ms");
  r.wall_ms = Int(j, "wall_ms");
  r.won_fence = static_cast<std::uint64_t>(Int(j, "won_fence"));
  r.mod_revision = kv.mod_revision;
  return r;
}

// The job's claim head (P job/<job>/head): its ticks (lock/clock_check.h), the epoch
// and the count of claims since it.
struct Head : HeadTicks {
  std::int64_t epoch_ms = 0;
  std::int64_t n = 0;
};

std::string Encode(const Head& h) {
  Json j = {{"tick", h.tick}, {"node", h.node}, {"epoch_ms", h.epoch_ms}, {"n", h.n}};
  if (h.below > 0) {
    j["below"] = h.below;
    j["below_node"] = h.below_node;
  }
  return j.dump();
}

Head DecodeHead(const std::string& value) {
  const Json j = Json::parse(value, nullptr, false);
  if (!j.is_object()) return {};
  Head h;
  h.tick = Int(j, "tick");
  h.node = Str(j, "node");
  h.below = Int(j, "below");
  h.below_node = Str(j, "below_node");
  h.epoch_ms = Int(j, "epoch_ms");
  h.n = Int(j, "n");
  return h;
}

struct RunMarker {
  std::string token;
  std::int64_t tick = 0;
  std::string node;
  std::string hash;
};

std::string Encode(const RunMarker& m) {
  return Json{{"token", m.token}, {"tick", m.tick}, {"node", m.node}, {"hash", m.hash}}.dump();
}

RunMarker DecodeRun(const std::string& value) {
  const Json j = Json::parse(value, nullptr, false);
  if (!j.is_object()) return {};
  return RunMarker{Str(j, "token"), Int(j, "tick"), Str(j, "node"), Str(j, "hash")};
}

std::string Encode(const Observation& o) {
  return Json{
      {"outcome", o.outcome},
      {"wall_ms", std::chrono::duration_cast<milliseconds>(o.node_wall.time_since_epoch()).count()},
      {"hash", o.config_hash},
      {"fence", o.fence}}
      .dump();
}

Observation DecodeObservation(const std::string& job, std::int64_t tick, const std::string& node,
                              const std::string& value) {
  const Json j = Json::parse(value, nullptr, false);
  Observation o;
  o.job = job;
  o.tick_unix = tick;
  o.node = node;
  if (!j.is_object()) return o;
  o.outcome = Str(j, "outcome");
  o.node_wall = WallTime(milliseconds(Int(j, "wall_ms")));
  o.config_hash = Str(j, "hash");
  o.fence = static_cast<std::uint64_t>(Int(j, "fence"));
  return o;
}

std::string Pad(std::int64_t tick) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%020lld", static_cast<long long>(tick));
  return buf;
}

std::int64_t ParseTick(std::string_view s) {
  std::int64_t v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

// ---- URL ----

struct Endpoints {
  std::vector<std::string> hosts;  // "host:port", tried in order
  std::string prefix = std::string(kDefaultPrefix);
};

// etcd://host[:port][,host[:port]…][/][?prefix=P]
Result<Endpoints> ParseUrl(const std::string& url) {
  constexpr std::string_view kScheme = "etcd://";
  if (url.compare(0, kScheme.size(), kScheme) != 0) {
    return MakeError("", "the URL must start with etcd:// (etcd://host:port[,host:port…])");
  }
  std::string_view rest(url);
  rest.remove_prefix(kScheme.size());
  Endpoints out;
  if (const auto q = rest.find('?'); q != std::string_view::npos) {
    std::string_view query = rest.substr(q + 1);
    rest = rest.substr(0, q);
    while (!query.empty()) {
      const auto amp = query.find('&');
      const std::string_view param = query.substr(0, amp);
      query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
      if (param.rfind("prefix=", 0) == 0) {
        out.prefix = std::string(param.substr(7));
        if (out.prefix.empty()) return MakeError("", "the prefix must not be empty");
      } else if (!param.empty()) {
        return MakeError("", "unknown URL parameter '" +
                                 std::string(param.substr(0, param.find('='))) +
                                 "' (known: prefix)");
      }
    }
  }
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.find('/') != std::string_view::npos) {
    return MakeError("", "unexpected path after the hosts (use ?prefix=P for a key prefix)");
  }
  if (rest.find('@') != std::string_view::npos) {
    return MakeError("", "credentials do not go in an etcd URL: set lock.username and "
                         "lock.password_file");
  }
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    std::string_view host = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    if (host.empty()) return MakeError("", "empty host in the endpoint list");
    int port = kDefaultPort;
    const auto colon = host.rfind(':');
    const bool has_port =
        colon != std::string_view::npos && host.find(']', colon) == std::string_view::npos;
    if (has_port) {
      const std::string_view p = host.substr(colon + 1);
      if (std::from_chars(p.data(), p.data() + p.size(), port).ptr != p.data() + p.size() ||
          p.empty() || port <= 0 || port > 65535) {
        return MakeError("", "bad port '" + std::string(p) + "'");
      }
      host = host.substr(0, colon);
    }
    out.hosts.push_back(std::string(host) + ":" + std::to_string(port));
  }
  if (out.hosts.empty()) return MakeError("", "no host in the URL");
  return out;
}

// ---- the wire (lock/etcd/etcd_wire.h) ----

struct Reply {
  Json body;
  std::optional<std::int64_t> server_ms;  // the member's clock (WireReply), if known
  // With server_ms: the latest the member's clock can have read when it answered,
  // narrowed below server_ms + 999 ms by the member's Dates (SecondClockBound).
  std::optional<std::int64_t> server_hi_ms;
};

class EtcdBackend final : public Backend {
 public:
  EtcdBackend(const EtcdOptions& options, Endpoints endpoints)
      : options_(options),
        endpoints_(std::move(endpoints)),
        context_("etcd " + RedactUrl(options.url)) {}

  ~EtcdBackend() override {
    {
      std::lock_guard lock(keeper_mu_);
      keeper_stop_ = true;
    }
    keeper_cv_.notify_all();
    if (keeper_.joinable()) keeper_.join();
  }

  Result<void> Open() {
    auto wire = EtcdWire::Open(WireOptions{endpoints_.hosts, options_.tls, options_.username,
                                           options_.password, context_});
    if (!wire) return tl::unexpected(wire.error());
    wire_ = std::move(*wire);
    auto status = Post("/v3/maintenance/status", Json::object(), Due());
    if (!status) return tl::unexpected(status.error());
    return {};
  }

  std::string_view name() const override { return "etcd"; }

  // The member's clock narrowed before the first checked claim: a daemon's start-up
  // warnings do it, and else the first claim that carries a max_lead (tickd trigger).
  // Its Date has whole seconds, and Dates from one phase of the second bound it only
  // to a second, so a replica ahead by up to max_lead + 1 s could pass the early check,
  // and one ahead by less would start its runs up to the bound's width before T
  // (design.md §1 rule 15). Dates kNarrowSpacing apart, for at most about 1.2 s, stop
  // once two of them fell on either side of a second's change: the bound is then at
  // most kNarrowClockMs wide (the spacing and a round trip). The keeper halves it from
  // there.
  static constexpr milliseconds kNarrowSpacing{10};
  static constexpr std::int64_t kNarrowClockMs = 25;
  void NarrowClock() {
    if (!clock_narrowed_.exchange(true)) KeepClockNarrow();
    const auto until = steady_clock::now() + milliseconds(1'200);
    while (true) {
      wire_->SyncClock(Due());
      const std::optional<SecondClockBound::Reading> now = wire_->ClockNow();
      if (!now || now->hi - now->lo <= kNarrowClockMs || steady_clock::now() >= until) return;
      std::this_thread::sleep_for(kNarrowSpacing);
    }
  }

  // Narrows the bound to about a round trip and keeps it so, in a process that lives on
  // (a daemon, a libtickd scheduler). Each Date is sent when the bound's midpoint says
  // the member's second changes (BisectingSend, at least 250 ms after the
  // last): its second tells on which side the change fell, so each halves the bound,
  // and the later ones keep both sides fresh — Dates older than a minute no longer
  // count (ClockBound), so a process whose instants are minutes apart would otherwise
  // judge its claims on a single Date, up to a second lenient again. A bound that
  // started over (the member's clock stepped) is narrowed again as at start, Dates
  // kNarrowSpacing apart (ClockKeeperSchedule). Without a reading (no Date in the last
  // minute) one every 470 ms. Each has a quarter of op_timeout, as a batch's own: a
  // claim batch waits for one in flight. The destructor stops it.
  void KeepClockNarrow() {
    keeper_ = std::thread([this] {
      std::unique_lock lock(keeper_mu_);
      std::chrono::microseconds round_trip{0};
      ClockKeeperSchedule schedule(ClockKeeperSchedule::Options{
          .spacing = kNarrowSpacing, .narrow_ms = kNarrowClockMs});
      while (true) {
        const steady_clock::time_point now = steady_clock::now();
        const steady_clock::time_point next = schedule.Next(wire_->ClockNow(), now, round_trip);
        if (keeper_cv_.wait_until(lock, next, [this] { return keeper_stop_; })) return;
        lock.unlock();
        const steady_clock::time_point sent = steady_clock::now();
        if (wire_->SyncClock(sent + options_.op_timeout / 4)) {
          round_trip =
              std::chrono::duration_cast<std::chrono::microseconds>(steady_clock::now() - sent);
        }
        lock.lock();
      }
    });
  }

  std::vector<std::string> StartupWarnings() override {
    std::vector<std::string> warnings;
    NarrowClock();  // also a Date just now for the skew below
    auto members = Post("/v3/cluster/member/list", Json::object(), Due());
    if (members && members->body.contains("members") && members->body["members"].size() == 1) {
      warnings.push_back(context_ +
                         ": a single etcd member: claims stop while it is down (run 3 or 5 "
                         "members for failover)");
    }
    if (members && members->server_ms) {
      const auto local = std::chrono::duration_cast<milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
      const auto skew = local - *members->server_ms;
      if (skew > 2'000 || skew < -1'000) {  // server_ms is rounded down to the second
        warnings.push_back(context_ + ": this replica's clock differs from the etcd member's by " +
                           std::to_string(skew) + "ms (starting deadlines are judged on etcd's)");
      }
    }
    for (std::string& w : SizeWarnings()) warnings.push_back(std::move(w));
    return warnings;
  }

  // etcd keeps every version of every key until it is compacted, and compacts nothing
  // unless told to (--auto-compaction-retention). A job-tick's 7 key changes are about
  // 1.6 KB of etcd's db (bench/README.md), and a db that reaches --quota-backend-bytes
  // (2 GiB by default) refuses every write: every claim fails, closed. Warned when the
  // db is half that default, or when it is uncompacted_warn_bytes and revision 1 can
  // still be read (a member that compacts would refuse to).
  std::vector<std::string> SizeWarnings() override {
    constexpr std::int64_t kDbWarnBytes = std::int64_t{1} << 30;
    auto status = Post("/v3/maintenance/status", Json::object(), Due());
    if (!status) return {};
    const std::int64_t db = Int(status->body, "dbSize");
    const std::int64_t revision = Int(status->body.value("header", Json::object()), "revision");
    const std::string size = std::to_string(db >> 20) + " MiB";
    bool uncompacted = false;
    if (db >= options_.uncompacted_warn_bytes && revision > 1) {
      const Json first{{"key", B64(endpoints_.prefix)},
                       {"range_end", B64(PrefixEnd(endpoints_.prefix))},
                       {"revision", "1"},
                       {"count_only", true}};
      uncompacted = Post("/v3/kv/range", first, Due()).has_value();
    }
    if (uncompacted) {
      return {context_ + ": etcd has never compacted its history (its db is " + size +
              "): each job-tick adds about 1.6 KB until --quota-backend-bytes (default 2 GiB) "
              "refuses every write and every claim fails; run the members with "
              "--auto-compaction-mode=periodic --auto-compaction-retention=1h (docs/stores.md)"};
    }
    if (db >= kDbWarnBytes) {
      return {context_ + ": etcd's db is " + size +
              ", half its default quota: at --quota-backend-bytes every claim fails; compact "
              "its history, defragment the members, lower lock.retention or raise the quota "
              "(docs/stores.md)"};
    }
    return {};
  }

  Result<ClaimOutcome> Claim(const ClaimRequest& req) override {
    return std::move(ClaimBatch(std::span<const ClaimRequest>(&req, 1)).front());
  }

  std::vector<Result<ClaimOutcome>> ClaimBatch(std::span<const ClaimRequest> reqs) override {
    return CollectAnswers(*this, reqs);
  }

  void ClaimBatchAsAnswered(std::span<const ClaimRequest> reqs,
                            const ClaimAnswer& on_answer) override {
    // The member's Date just before the batch (gRPC answers carry none): its clock
    // bound judges the batch's early and missed (etcd_wire.h, WireReply).
    // Once narrowed, the batch's requests are not looked at for it.
    const steady_clock::time_point began = steady_clock::now();
    if (!clock_narrowed_ && std::any_of(reqs.begin(), reqs.end(), [](const ClaimRequest& r) {
          return r.max_lead.has_value();
        })) {
      NarrowClock();
    } else {
      wire_->SyncClock(steady_clock::now() + options_.op_timeout / 4);
    }
    // Each answer's clock (ClaimOutcome::store_ms) is the member's as its Dates bound it
    // when the batch began, just after the requests' node_wall was read, not when each
    // was decided: this replica's clock minus it is then the offset at one instant, and
    // a replica ahead of it (design.md §1 rule 15) waits for T by all of it, not by all
    // of it but a round trip — or, at a busy instant, but the batch's time in the store.
    const std::optional<SecondClockBound::Reading> at_began = wire_->ClockAt(began);
    const auto clock_at_began = [&at_began](Result<ClaimOutcome>& r) {
      if (!r || r->store_ms == 0 || !at_began) return;
      r->store_ms = at_began->lo + (at_began->hi - at_began->lo) / 2;
      r->store_error_ms = at_began->hi - r->store_ms;
      r->store_ms_at_batch_start = true;
    };
    BatchLeases leases;
    std::set<std::size_t> read_first;  // a blind claim failed but may still win: read
    const Error gave_up(context_ + ": claim",
                        "other claims of the job kept moving its head; try again");
    const ChunkLimit limit{kClaimsPerTxn, kRequestBytes, [this](const ClaimRequest& req) {
                             return ClaimBytes(endpoints_.prefix.size(), req);
                           }};
    ClaimInWaves(
        reqs, limit, 3, on_answer, gave_up,
        [&](std::span<const std::size_t> chunk, std::optional<Error>& failed) {
          Answers decided;
          std::vector<std::size_t> retry = DecideChunk(
              reqs, chunk, leases, read_first,
              [&decided, &clock_at_began](std::size_t i, Result<ClaimOutcome> r) {
                clock_at_began(r);
                decided.emplace_back(i, std::move(r));
              },
              failed);
          // The observations the chunk's probe did not write, in one request, before
          // the answers are handed over (a failed chunk's claims answer its error).
          if (!failed) Observe(reqs, decided);
          for (auto& [i, r] : decided) on_answer(i, std::move(r));
          return retry;
        });
    for (const auto& lease : leases) {
      if (ReleaseBatchHold(lease.id)) RevokeLater(lease.id);
    }
  }

  Result<RenewStatus> Renew(const HeldClaim& held) override {
    const Deadline deadline = Due();
    const Keys k = KeysOf(held.job, held.tick_unix);
    std::int64_t lease_id = LeaseOf(held);
    if (lease_id == 0) {  // not claimed through this handle: find the lease on the key
      auto lease = Post("/v3/kv/range", Json{{"key", B64(k.lease)}}, deadline);
      if (!lease) return tl::unexpected(lease.error());
      const std::vector<Kv> kvs = KvsOf(lease->body);
      if (kvs.empty() || kvs.front().value != held.owner_token) return RenewStatus::kLost;
      lease_id = kvs.front().lease;
    }
    auto alive = KeepAlive(lease_id, deadline);
    if (!alive) return tl::unexpected(alive.error());
    if (!alive->alive) return Forget(held);
    const std::int64_t until = alive->server_ms + held.lease.count();
    MarkUntilWritten(held);  // before the send: a txn without an answer may have landed
    auto txn = Post("/v3/kv/txn",
                    Json{{"compare", {ValueIs(k.lease, held.owner_token)}},
                         {"success", {Put(k.until, std::to_string(until))}}},
                    deadline);
    if (!txn) return tl::unexpected(txn.error());
    if (!txn->body.value("succeeded", false)) return Forget(held);
    return RenewStatus::kRenewed;
  }

  // A retry's new fence: read the tick, then one txn comparing the record's and the
  // head's mod_revision and the lease key's value (our token: the lease is alive),
  // putting the record with fence = epoch_ms << 11 + n + 1 and the head with n + 1, as
  // a claim moves them. A head that moved (a claim of another tick) reads again.
  Result<RefenceOutcome> Refence(const HeldClaim& held) override {
    const Deadline deadline = Due();
    const Keys k = KeysOf(held.job, held.tick_unix);
    for (int attempt = 0; attempt < 3; ++attempt) {
      auto state = ReadTick(k, deadline);
      if (!state) return tl::unexpected(state.error());
      if (!state->record || state->record->state != "running" ||
          state->record->owner != held.owner_token || !state->lease ||
          state->lease_owner != held.owner_token) {
        return RefenceOutcome{};
      }
      ClaimRequest as_claim;  // the head as a claim of this tick would move it
      as_claim.job = held.job;
      as_claim.tick_unix = held.tick_unix;
      as_claim.node = state->record->node;
      const Head head = NextHead(as_claim, *state);
      TickRecord rec = *state->record;
      rec.fence = static_cast<std::uint64_t>((head.epoch_ms << kFenceEpochShift) + head.n);
      const Json compare = {ModifiedAt(k.record, rec.mod_revision),
                            ValueIs(k.lease, held.owner_token),
                            state->head ? ModifiedAt(k.head, state->head_mod_revision)
                                        : CreatedAt(k.head, 0)};
      const Json success = {Put(k.record, Encode(rec)), Put(k.head, Encode(head))};
      auto txn = Post("/v3/kv/txn", Json{{"compare", compare}, {"success", success}}, deadline);
      if (!txn) return tl::unexpected(txn.error());
      if (txn->body.value("succeeded", false)) {
        const std::int64_t revision = Int(txn->body.value("header", Json::object()), "revision");
        rec.mod_revision = revision;
        UpdateHeldRecord(held, rec);
        SawHead(held.job, CachedHead{head, Encode(head), revision});
        return RefenceOutcome{RefenceStatus::kRefenced, rec.fence};
      }
      // The record, the lease or the head changed between the read and the txn: re-read.
    }
    return MakeError(context_ + ": refence " + held.job + "@" + std::to_string(held.tick_unix),
                     "the job's head kept changing; try again");
  }

  // Runs that end together share one CompleteBatch (lock/complete_batcher.h).
  Result<CompleteStatus> Complete(const HeldClaim& held, const Completion& completion) override {
    return completer_.Complete(held, completion);
  }

  // Every complete of a chunk (CompleteChunkSize) in one read txn and one txn of
  // nested txns, each the single complete's: compare the record's mod_revision (owner
  // checked on the value read: a re-claim changes mod_revision, so a stale holder is
  // refused even when its lease expired), put the record done, delete the lease key,
  // lease_until (when a renewal wrote it) and the run key (when it holds our token).
  // A nested txn that failed (a renewal or our run marker expiring raced it) is read
  // and tried once more; then not-owner. A lease is revoked once no claim of this
  // handle holds it any more.
  std::vector<Result<CompleteStatus>> CompleteBatch(
      std::span<const CompleteRequest> reqs) override {
    std::vector<std::optional<Result<CompleteStatus>>> out(reqs.size());
    std::vector<std::size_t> pending(reqs.size());
    for (std::size_t i = 0; i < reqs.size(); ++i) pending[i] = i;
    std::vector<std::int64_t> unused_leases;
    // A blind complete that failed reads and tries again, and so does a read one, once.
    for (int attempt = 0; attempt < 3 && !pending.empty(); ++attempt) {
      std::vector<std::span<const std::size_t>> chunks;
      for (std::size_t first = 0; first < pending.size(); first += chunks.back().size()) {
        chunks.emplace_back(pending.data() + first, CompleteChunkSize(reqs, pending, first));
      }
      std::vector<std::size_t> again;
      for (const std::span<const std::size_t> chunk : chunks) {
        CompleteChunk(reqs, chunk, out, again, unused_leases);
      }
      pending = std::move(again);
    }
    KeepNewestOutputs(reqs, out);
    for (const std::size_t i : pending) {
      if (const std::int64_t lease = ForgetLease(reqs[i].held)) unused_leases.push_back(lease);
      out[i] = CompleteStatus::kNotOwner;
    }
    for (const std::int64_t lease : unused_leases) RevokeLater(lease);
    std::vector<Result<CompleteStatus>> answers;
    answers.reserve(reqs.size());
    for (auto& o : out) {
      answers.push_back(o ? std::move(*o)
                          : Result<CompleteStatus>(
                                MakeError(context_ + ": complete", "no answer")));
    }
    return answers;
  }

  Result<void> Record(const Observation& obs) override {
    const bool name = !Named(obs.job);
    auto txn = Post("/v3/kv/txn", Json{{"success", RecordOps(obs.job, obs.tick_unix, obs, name)}},
                    Due());
    if (!txn) return tl::unexpected(txn.error());
    if (name) MarkNamed(obs.job);
    return {};
  }

  Result<std::vector<TickHistory>> History(std::string_view job, int limit) override {
    const Deadline deadline = Due();
    std::vector<std::string> jobs;
    if (job.empty()) {
      auto names = Jobs(deadline);
      if (!names) return tl::unexpected(names.error());
      jobs = std::move(*names);
    } else {
      jobs.emplace_back(job);
    }
    // The newest `limit` ticks of each job, merged newest first (then by job name).
    std::vector<std::pair<std::int64_t, std::string>> ticks;
    for (const std::string& j : jobs) {
      auto newest = NewestTicks(j, limit, deadline);
      if (!newest) return tl::unexpected(newest.error());
      for (const std::int64_t t : *newest) ticks.emplace_back(t, j);
    }
    std::sort(ticks.begin(), ticks.end(), [](const auto& a, const auto& b) {
      return std::tie(b.first, a.second) < std::tie(a.first, b.second);
    });
    if (limit >= 0 && ticks.size() > static_cast<std::size_t>(limit)) ticks.resize(limit);

    std::vector<TickHistory> out;
    for (std::size_t first = 0; first < ticks.size(); first += kMaxTxnOps) {
      const std::size_t last = std::min(ticks.size(), first + kMaxTxnOps);
      Json ranges = Json::array();
      for (std::size_t i = first; i < last; ++i) {
        const std::string prefix = KeysOf(ticks[i].second, ticks[i].first).tick_prefix;
        ranges.push_back(Range(prefix, PrefixEnd(prefix)));
      }
      auto txn = Post("/v3/kv/txn", Json{{"success", ranges}}, deadline);
      if (!txn) return tl::unexpected(txn.error());
      for (std::size_t i = first; i < last; ++i) {
        TickHistory h;
        h.tick_unix = ticks[i].first;
        h.job = ticks[i].second;
        const std::string prefix = KeysOf(h.job, h.tick_unix).tick_prefix;
        std::optional<TickRecord> rec;
        for (const Kv& kv : RangeKvs(txn->body, i - first)) {
          const std::string_view rel = std::string_view(kv.key).substr(prefix.size());
          if (rel == "r") {
            rec = DecodeRecord(kv);
            if (rec) {
              h.winner = rec->node;
              h.state = rec->state;
              h.run_outcome = rec->outcome;
              h.exit_code = rec->exit_code;
              h.duration = milliseconds(rec->duration_ms);
              h.fence = rec->fence;
              h.config_hash = rec->hash;
            }
          } else if (rel.rfind("w/", 0) == 0) {
            h.observations.push_back(
                DecodeObservation(h.job, h.tick_unix, std::string(rel.substr(2)), kv.value));
          }
        }
        // The claimer's observation lives in the record (lean write set), unless the
        // record is an older tickd's.
        if (rec && rec->claim_observed) {
          AddClaimerObservation(h.observations, Observation{h.job, h.tick_unix, rec->node, "won",
                                                            WallTime(milliseconds(rec->wall_ms)),
                                                            rec->hash, rec->won_fence});
        }
        if (h.state.empty() && h.observations.empty()) continue;  // pruned meanwhile
        out.push_back(std::move(h));
      }
    }
    return out;
  }

  Result<std::vector<std::string>> Outputs(std::string_view job,
                                           std::span<const std::int64_t> ticks) override {
    const Deadline deadline = Due();
    std::vector<std::string> out;
    out.reserve(ticks.size());
    for (std::size_t first = 0; first < ticks.size(); first += kMaxTxnOps) {
      const std::size_t last = std::min(ticks.size(), first + kMaxTxnOps);
      Json ranges = Json::array();
      for (std::size_t i = first; i < last; ++i) {
        ranges.push_back(Range(OutputKey(std::string(job), ticks[i])));
      }
      auto txn = Post("/v3/kv/txn", Json{{"success", ranges}}, deadline);
      if (!txn) return tl::unexpected(txn.error());
      for (std::size_t i = first; i < last; ++i) {
        const std::vector<Kv> kvs = RangeKvs(txn->body, i - first);
        out.push_back(kvs.empty() ? std::string() : kvs.front().value);
      }
    }
    return out;
  }

  Result<int> Prune(WallTime older_than) override {
    const std::int64_t cutoff =
        std::chrono::duration_cast<std::chrono::seconds>(older_than.time_since_epoch()).count();
    auto jobs = Jobs(Due());
    if (!jobs) return tl::unexpected(jobs.error());
    // In txns of up to kMaxTxnOps, each with a deadline of its own, so thousands of
    // jobs prune in tens of round trips instead of one (or more) per job.
    int removed = 0;
    for (std::size_t first = 0; first < jobs->size(); first += kMaxTxnOps) {
      const std::size_t last = std::min(jobs->size(), first + kMaxTxnOps);
      // The ticks before the cutoff, keys only (no index since the lean write set; an
      // older tickd's index keys go with their ticks); and the outputs before it,
      // which belong to done ticks only: they go whatever else stays.
      Json reads = Json::array();
      Json outputs = Json::array();
      for (std::size_t j = first; j < last; ++j) {
        const std::string ticks = JobPrefix((*jobs)[j]) + "tick/";
        reads.push_back(Json{{"request_range",
                              {{"key", B64(ticks)},
                               {"range_end", B64(ticks + Pad(cutoff))},
                               {"keys_only", true}}}});
        const std::string out = JobPrefix((*jobs)[j]) + "out/";
        outputs.push_back(Delete(out, out + Pad(cutoff)));
      }
      auto listed = Post("/v3/kv/txn", Json{{"success", std::move(reads)}}, Due());
      if (!listed) return tl::unexpected(listed.error());
      std::vector<Keys> old;
      for (std::size_t j = first; j < last; ++j) {
        const std::string ticks = JobPrefix((*jobs)[j]) + "tick/";
        std::set<std::int64_t> seen;
        for (const Kv& kv : RangeKvs(listed->body, j - first)) {
          seen.insert(ParseTick(std::string_view(kv.key).substr(ticks.size(), 20)));
        }
        for (const std::int64_t tick : seen) old.push_back(KeysOf((*jobs)[j], tick));
      }
      auto pruned = PruneTicks(old);
      if (!pruned) return tl::unexpected(pruned.error());
      removed += *pruned;
      auto gone = Post("/v3/kv/txn", Json{{"success", std::move(outputs)}}, Due());
      if (!gone) return tl::unexpected(gone.error());
    }
    return removed;
  }

  Result<void> SetPause(const Pause& pause) override {
    auto reply = Post("/v3/kv/put",
                      Json{{"key", B64(PauseKey(pause.job))}, {"value", B64(EncodePause(pause))}},
                      Due());
    if (!reply) return tl::unexpected(reply.error());
    return {};
  }

  Result<bool> ClearPause(std::string_view job) override {
    auto reply = Post("/v3/kv/deleterange", Json{{"key", B64(PauseKey(std::string(job)))}}, Due());
    if (!reply) return tl::unexpected(reply.error());
    return Int(reply->body, "deleted") > 0;
  }

  Result<std::vector<Pause>> ListPauses() override {
    const std::string prefix = PauseKey("");
    auto reply = Post("/v3/kv/range",
                      Json{{"key", B64(prefix)}, {"range_end", B64(PrefixEnd(prefix))}}, Due());
    if (!reply) return tl::unexpected(reply.error());
    std::vector<Pause> out;
    for (const Kv& kv : KvsOf(reply->body)) {  // in key order: job order
      if (auto p = DecodePause(std::string_view(kv.key).substr(prefix.size()), kv.value)) {
        out.push_back(std::move(*p));
      }
    }
    return out;
  }

  Result<std::vector<RunningClaim>> ListRunning() override {
    const Deadline deadline = Due();
    auto jobs = Jobs(deadline);
    if (!jobs) return tl::unexpected(jobs.error());
    std::vector<RunningClaim> out;
    for (const std::string& job : *jobs) {
      const std::string ticks = JobPrefix(job) + "tick/";
      auto reply = Post("/v3/kv/range",
                        Json{{"key", B64(ticks)}, {"range_end", B64(PrefixEnd(ticks))}}, deadline);
      if (!reply) return tl::unexpected(reply.error());
      // Keys come in key order: per tick l, r, u, w/… (T zero-padded).
      struct Seen {
        std::optional<TickRecord> record;
        bool lease = false;
        std::optional<std::int64_t> lease_until;  // `u`: a renewal wrote it
      };
      std::map<std::int64_t, Seen> seen;
      for (const Kv& kv : KvsOf(reply->body)) {
        const std::string_view rel = std::string_view(kv.key).substr(ticks.size());
        const auto slash = rel.find('/');
        if (slash == std::string_view::npos) continue;
        Seen& tick = seen[ParseTick(rel.substr(0, slash))];
        const std::string_view kind = rel.substr(slash + 1);
        if (kind == "r") {
          tick.record = DecodeRecord(kv);
        } else if (kind == "l") {
          tick.lease = true;
        } else if (kind == "u") {
          tick.lease_until = ParseTick(kv.value);
        }
      }
      for (const auto& [tick, st] : seen) {
        if (!st.record || st.record->state != "running") continue;
        RunningClaim c;
        c.job = job;
        c.tick_unix = tick;
        c.node = st.record->node;
        c.fence = st.record->fence;
        c.config_hash = st.record->hash;
        c.holder_alive = st.lease;
        if (!st.lease) {
          c.lease_left = milliseconds(0);
        } else if (reply->server_ms) {  // Date has 1 s resolution: up to 1 s too much
          const std::int64_t until = st.lease_until.value_or(st.record->lease_until_ms);
          c.lease_left = milliseconds(std::max<std::int64_t>(0, until - *reply->server_ms));
        }
        out.push_back(std::move(c));
      }
    }
    std::stable_sort(out.begin(), out.end(), [](const RunningClaim& a, const RunningClaim& b) {
      return std::tie(a.tick_unix, a.job) < std::tie(b.tick_unix, b.job);
    });
    return out;
  }

  Result<ForceReleaseStatus> ForceRelease(std::string_view job, std::int64_t tick_unix) override {
    const Deadline deadline = Due();
    const Keys k = KeysOf(std::string(job), tick_unix);
    for (int attempt = 0; attempt < 3; ++attempt) {
      auto state = ReadTick(k, deadline);
      if (!state) return tl::unexpected(state.error());
      if (!state->record || state->record->state != "running") {
        return ForceReleaseStatus::kNotRunning;
      }
      if (state->lease) return ForceReleaseStatus::kHolderAlive;
      TickRecord rec = *state->record;
      const std::string holder = rec.owner;
      rec.state = "done";
      rec.owner.clear();
      rec.outcome = "released";
      rec.exit_code.reset();
      rec.duration_ms = 0;
      Json compare = {ModifiedAt(k.record, rec.mod_revision), CreatedAt(k.lease, 0)};
      Json success = {Put(k.record, Encode(rec)), Delete(k.until)};
      if (state->run && state->run->token == holder) {
        compare.push_back(ModifiedAt(k.run, state->run_mod_revision));
        success.push_back(Delete(k.run));
      }
      auto txn = Post("/v3/kv/txn", Json{{"compare", compare}, {"success", success}}, deadline);
      if (!txn) return tl::unexpected(txn.error());
      if (txn->body.value("succeeded", false)) return ForceReleaseStatus::kReleased;
      // Something changed between the read and the txn (a re-claim, a complete): re-read.
    }
    return MakeError(context_ + ": release", "the record kept changing; try again");
  }

 private:
  struct Keys {
    std::string tick_prefix;  // P job/<job>/tick/<T>/
    std::string lease, record, until, index, run, head;
    // The ledger's key of `node`'s observation of the tick.
    std::string Observation(const std::string& node) const { return tick_prefix + "w/" + node; }
  };

  // What the read transaction of a tick found.
  struct TickState {
    std::optional<TickRecord> record;
    bool lease = false;  // the lease key exists (the holder's lease is alive)
    std::string lease_owner;    // the lease key's value: the holder's token
    std::int64_t lease_id = 0;  // the lease the key is attached to
    std::int64_t lease_until = 0;  // `u` when a renewal wrote it, else the record's
    bool until_read = false;       // `u` was read
    bool head_unread = false;      // read by the record alone (ProbeRecords): no head
    std::optional<RunMarker> run;
    std::int64_t run_mod_revision = 0;
    std::optional<Head> head;
    std::string head_value;  // as stored (a blind claim compares it)
    std::int64_t head_mod_revision = 0;
    std::optional<std::int64_t> server_ms;
    std::optional<std::int64_t> server_hi_ms;  // Reply::server_hi_ms of the read
  };

  Deadline Due() const { return steady_clock::now() + options_.op_timeout; }

  std::string JobPrefix(const std::string& job) const {
    return endpoints_.prefix + "job/" + job + "/";
  }
  std::string JobKey(const std::string& job) const { return endpoints_.prefix + "jobs/" + job; }
  std::string PauseKey(const std::string& job) const {
    return endpoints_.prefix + "pauses/" + job;
  }

  Keys KeysOf(const std::string& job, std::int64_t tick) const {
    Keys k;
    const std::string base = JobPrefix(job);
    k.tick_prefix = base + "tick/" + Pad(tick) + "/";
    k.lease = k.tick_prefix + "l";
    k.record = k.tick_prefix + "r";
    k.until = k.tick_prefix + "u";
    k.index = base + "idx/" + Pad(tick);
    k.run = base + "run";
    k.head = base + "head";
    return k;
  }

  // Removes each tick only while its lease key is absent, so a running tick with a
  // live lease stays: a nested txn per tick, up to kMaxTxnOps of them to a txn.
  // Returns how many records went.
  Result<int> PruneTicks(const std::vector<Keys>& ticks) {
    int removed = 0;
    for (std::size_t first = 0; first < ticks.size(); first += kMaxTxnOps) {
      const std::size_t last = std::min(ticks.size(), first + kMaxTxnOps);
      Json nested = Json::array();
      for (std::size_t i = first; i < last; ++i) {
        const Keys& k = ticks[i];
        nested.push_back(Json{
            {"request_txn",
             {{"compare", {CreatedAt(k.lease, 0)}},
              {"success",
               {Delete(k.record), Delete(k.tick_prefix, PrefixEnd(k.tick_prefix)),
                Delete(k.index)}}}}});
      }
      auto txn = Post("/v3/kv/txn", Json{{"success", std::move(nested)}}, Due());
      if (!txn) return tl::unexpected(txn.error());
      const auto responses = txn->body.find("responses");
      if (responses == txn->body.end() || !responses->is_array()) continue;
      for (const Json& r : *responses) {
        if (!r.contains("response_txn")) continue;
        const Json& one = r["response_txn"];
        if (!one.value("succeeded", false) || !one.contains("responses")) continue;
        const Json& deletes = one["responses"];
        if (!deletes.empty() && Int(deletes[0]["response_delete_range"], "deleted") > 0) {
          ++removed;
        }
      }
    }
    return removed;
  }

  // The kvs of the i-th response of a txn (a range).
  static std::vector<Kv> RangeKvs(const Json& txn, std::size_t i) {
    const auto it = txn.find("responses");
    if (it == txn.end() || !it->is_array() || i >= it->size()) return {};
    const Json& r = (*it)[i];
    return r.contains("response_range") ? KvsOf(r["response_range"]) : std::vector<Kv>{};
  }

  // The ranges of one tick's read: its lease key, record and lease_until ([l, w)
  // under its prefix, observations excluded), the job's run key and its head.
  static Json TickReads(const Keys& k) {
    return Json{Range(k.tick_prefix, k.tick_prefix + "w"), Range(k.run), Range(k.head)};
  }

  // A failed claim's ranges: what decides it. The record and the head always; the
  // lease key and lease end only for a claim that may re-claim (recover), the run key
  // only for forbid (the others' answers never depend on them). Less for etcd to
  // encode for every claim lost to another replica, the common failure.
  static void FailureReads(const ClaimRequest& req, const Keys& k, pb::TxnRequest* txn) {
    if (req.recover) {
      RangeOp(txn->add_failure(), k.tick_prefix, k.tick_prefix + "w");
    } else {
      RangeOp(txn->add_failure(), k.record);
    }
    RangeOp(txn->add_failure(), k.head);
    if (req.forbid_overlap) RangeOp(txn->add_failure(), k.run);
  }

  // One key that the ranges of TickReads (or FailureReads) found, told apart by key.
  static void AddTickKv(const Keys& k, const Kv& kv, TickState& st) {
    if (kv.key == k.record) {
      st.record = DecodeRecord(kv);
    } else if (kv.key == k.lease) {
      st.lease = true;
      st.lease_owner = kv.value;
      st.lease_id = kv.lease;
    } else if (kv.key == k.until) {
      st.lease_until = ParseTick(kv.value);
      st.until_read = true;
    } else if (kv.key == k.run) {
      st.run = DecodeRun(kv.value);
      st.run_mod_revision = kv.mod_revision;
    } else if (kv.key == k.head) {
      st.head = DecodeHead(kv.value);
      st.head_value = kv.value;
      st.head_mod_revision = kv.mod_revision;
    }
  }
  static TickState Finished(TickState st) {
    if (!st.until_read && st.record) st.lease_until = st.record->lease_until_ms;
    return st;
  }

  // What the ranges of TickReads (or FailureReads) found (`txn` holds their responses
  // first; server_ms apart).
  static TickState ParseTickState(const Keys& k, const Json& txn) {
    TickState st;
    const Json* responses = Responses(txn);
    for (std::size_t i = 0; responses != nullptr && i < responses->size(); ++i) {
      for (const Kv& kv : RangeKvs(txn, i)) AddTickKv(k, kv, st);
    }
    return Finished(std::move(st));
  }
  // The same from responses [begin, end) of a txn's message.
  static TickState ParseTickState(const Keys& k,
                                  const google::protobuf::RepeatedPtrField<pb::ResponseOp>& ops,
                                  int begin, int end) {
    TickState st;
    for (int i = begin; i < end && i < ops.size(); ++i) {
      if (!ops[i].has_response_range()) continue;
      for (const mvccpb::KeyValue& kv : ops[i].response_range().kvs()) {
        AddTickKv(k, Kv{kv.key(), kv.value(), kv.create_revision(), kv.mod_revision(), kv.lease()},
                  st);
      }
    }
    return Finished(std::move(st));
  }

  // One read txn: TickReads of one tick.
  Result<TickState> ReadTick(const Keys& k, Deadline deadline) {
    auto txn = Post("/v3/kv/txn", Json{{"success", TickReads(k)}}, deadline);
    if (!txn) return tl::unexpected(txn.error());
    TickState st = ParseTickState(k, txn->body);
    st.server_ms = txn->server_ms;
    st.server_hi_ms = txn->server_hi_ms;
    return st;
  }

  // The claims' read ops are flat ranges (ReadTicks); etcd 3.4 checks the
  // permissions of a txn's own ops only, not those of its nested txns (found by the TLS
  // tests: once claims were batched, an anonymous client and a user outside its role's
  // prefix both won claims). So each batch txn of nested txns also carries, at its top
  // level after the nested ones, one op under the prefix that the role must allow: a
  // delete of a key tickd never writes (deleting nothing changes nothing). A refused
  // op fails the whole txn. A role must therefore grant the whole `P job/` range
  // (docs/stores.md, "Securing the store").
  void AddPermissionProbe(pb::TxnRequest& txn) const {
    DeleteOp(txn.add_success(), endpoints_.prefix + "job/-permission-probe");
  }

  // The reads of up to kClaimsPerTxn ticks: TickReads of each (without the run key
  // where `run` says it is not needed: a claim without forbid), as flat ranges in txns
  // of at most kMaxTxnOps. A txn of ranges only is read-only to etcd and served without
  // a Raft entry — no WAL write, no apply — while a txn of nested txns is a Raft
  // proposal whatever it holds (etcd's isTxnReadonly looks at the top-level ops only);
  // and etcd checks the permission of each of its ranges, so it needs no probe. Each
  // txn is one revision (a tick's ranges are never split between two txns): each
  // claim's decision rests on its own tick's keys and the job's head only.
  Result<std::vector<TickState>> ReadTicks(const std::vector<Keys>& keys, Deadline deadline,
                                           const std::vector<bool>& run = {}) {
    std::vector<TickState> out;
    out.reserve(keys.size());
    TxnOnArena on_arena;
    pb::TxnRequest& request = on_arena.request;
    pb::TxnResponse& response = on_arena.response;
    for (std::size_t first = 0; first < keys.size();) {
      request.Clear();
      std::vector<int> ends;  // per tick of this txn: the end of its ranges
      std::size_t last = first;
      for (; last < keys.size(); ++last) {
        const Keys& k = keys[last];
        const bool with_run = last >= run.size() || run[last];
        if (static_cast<std::size_t>(request.success_size()) + (with_run ? 3 : 2) > kMaxTxnOps) {
          break;
        }
        RangeOp(request.add_success(), k.tick_prefix, k.tick_prefix + "w");
        if (with_run) RangeOp(request.add_success(), k.run);
        RangeOp(request.add_success(), k.head);
        ends.push_back(request.success_size());
      }
      auto txn = Txn(request, &response, deadline);
      if (!txn) return tl::unexpected(txn.error());
      if (response.responses_size() < ends.back()) {
        return MakeError(context_ + ": read", "the read txn answered " +
                                                  std::to_string(response.responses_size()) +
                                                  " of " + std::to_string(ends.back()) + " ranges");
      }
      int begin = 0;
      for (std::size_t n = first; n < last; ++n) {
        const int end = ends[n - first];
        out.push_back(ParseTickState(keys[n], response.responses(), begin, end));
        out.back().server_ms = txn->server_ms;
        out.back().server_hi_ms = txn->server_hi_ms;
        begin = end;
      }
      first = last;
    }
    return out;
  }

  // The likely_decided claims among those to read (to_read, read_run and read_pos, the
  // positions in `chunk`), without recover and not knowing a tick later than their own
  // (known_tick <= T), are probed first by their record alone. A record found decides
  // the claim without the rest of the read: without recover a record means lost (or
  // won, our own), whatever the lease key, run key and head say; and store-reset cannot
  // be the answer, because the claim that wrote the record of T moved the head to T or
  // later in the same txn and a head only moves forward (they are lost together with
  // the store's data), so the head is at least T >= known_tick.
  //
  // The probe is one txn per chunk of plain ops, no compare: per claim the range of
  // its record and the put of this replica's observation of a lost claim (the ledger),
  // packed kPutsPerNestedTxn ops to a nested txn, so that a loser decides and observes
  // in one request. It is a write (a Raft entry) where a txn of ranges would not be, but
  // the observation was one anyway, and reading first measured 10 % slower: the member
  // applies Raft entries on one goroutine, and a read of its own costs the request a
  // round trip more (bench/README.md). Until 2026-11-28 (fifth session) each claim's
  // probe was a nested txn of its own that compared the record's existence before its
  // range and put: etcd applies a nested txn and a compare per claim at a cost the
  // plain ops do not have (the member's CPU per job-tick fell by a tenth without them).
  // The price: a claim found without a record had its observation written in vain,
  // and it is deleted again (ForgetProbeObservations, one request, before the chunk's
  // claims go out), as it is for a claim whose record is found but which is then not
  // answered lost — only our own record (a token is fresh per claim, so only a request
  // sent twice) or a reading that narrowed to early. With replicas that begin an
  // instant together the owners' claims are in by the time the others probe them, and
  // nothing is deleted. A claim the member's clock may still call early is probed
  // without the put, as is one that does not ask to be observed.
  //
  // Those claims get states[pos] with head_unread set and leave to_read, and
  // probe_observed[pos] says the observation was written; the others (no record: the
  // tick may be open) stay for the full read, and the requests whose observation was
  // written for them go to `unobserve`. False: the store gave no answer (every claim of
  // the chunk answered with the error, `failed` set).
  bool ProbeRecords(std::span<const ClaimRequest> reqs, std::span<const std::size_t> chunk,
                    const std::optional<SecondClockBound::Reading>& now, std::vector<Keys>& to_read,
                    std::vector<bool>& read_run, std::vector<std::size_t>& read_pos,
                    std::vector<TickState>& states, std::vector<bool>& probe_observed,
                    std::vector<std::size_t>& unobserve, Deadline deadline,
                    const ClaimAnswer& on_answer, std::optional<Error>& failed) {
    std::vector<std::size_t> probe;  // positions in to_read
    for (std::size_t r = 0; r < to_read.size(); ++r) {
      const ClaimRequest& req = reqs[chunk[read_pos[r]]];
      if (req.likely_decided && !req.recover && req.known_tick <= req.tick_unix) {
        probe.push_back(r);
      }
    }
    if (probe.empty()) return true;
    std::vector<bool> found(to_read.size(), false);
    std::vector<bool> observing(probe.size(), false);
    std::vector<std::string> naming;  // jobs whose name the txn writes
    TxnOnArena on_arena;
    pb::TxnRequest& request = on_arena.request;
    pb::TxnRequest* nested = nullptr;
    // Where each claim's range went: its nested txn's place in the request, and its own
    // in that txn's ops (a claim's ops stay in one nested txn).
    std::vector<std::pair<int, int>> range_at(probe.size());
    for (std::size_t p = 0; p < probe.size(); ++p) {
      const ClaimRequest& req = reqs[chunk[read_pos[probe[p]]]];
      const Keys& k = to_read[probe[p]];
      if (nested == nullptr ||
          static_cast<std::size_t>(nested->success_size()) + kProbeOpsPerClaim >
              kPutsPerNestedTxn) {
        nested = request.add_success()->mutable_request_txn();
      }
      range_at[p] = {request.success_size() - 1, nested->success_size()};
      RangeOp(nested->add_success(), k.record);
      observing[p] = req.observe && now && !ClaimIsEarly(req, now->hi);
      if (!observing[p]) continue;
      PutOp(nested->add_success(), k.Observation(req.node),
            Encode(ObservationOf(req, ClaimStatus::kLost)));
      if (!Named(req.job)) {
        PutOp(nested->add_success(), JobKey(req.job), "");
        naming.push_back(req.job);
      }
    }
    AddPermissionProbe(request);  // the nested puts' permissions are not checked
    pb::TxnResponse& response = on_arena.response;
    auto txn = Txn(request, &response, deadline);
    if (!txn) {
      failed = txn.error();
      for (const std::size_t i : chunk) on_answer(i, tl::unexpected(txn.error()));
      return false;
    }
    for (std::size_t p = 0; p < probe.size(); ++p) {
      const auto [outer, op] = range_at[p];
      TickState st;
      if (outer < response.responses_size()) {  // etcd answers every op
        st = ParseTickState(to_read[probe[p]], response.responses(outer).response_txn().responses(),
                            op, op + 1);
      }
      if (!st.record) {  // the tick may be open: the full read, the observation undone
        if (observing[p]) unobserve.push_back(chunk[read_pos[probe[p]]]);
        continue;
      }
      st.head_unread = true;
      st.server_ms = txn->server_ms;
      st.server_hi_ms = txn->server_hi_ms;
      states[read_pos[probe[p]]] = std::move(st);
      probe_observed[read_pos[probe[p]]] = observing[p];
      found[probe[p]] = true;
    }
    for (const std::string& job : naming) MarkNamed(job);
    std::size_t kept = 0;
    for (std::size_t r = 0; r < to_read.size(); ++r) {
      if (found[r]) continue;
      if (kept != r) {
        to_read[kept] = std::move(to_read[r]);
        read_run[kept] = read_run[r];
        read_pos[kept] = read_pos[r];
      }
      ++kept;
    }
    to_read.resize(kept);
    read_run.resize(kept);
    read_pos.resize(kept);
    return true;
  }

  // Deletes the observations ProbeRecords wrote for claims then answered otherwise than
  // lost (see there: it cannot happen but for a request sent twice or a clock reading
  // that narrowed), each only while it still holds what the probe put. Best effort: the
  // claim's answer stands either way, and History shows the observation as written.
  void ForgetProbeObservations(std::span<const ClaimRequest> reqs,
                               const std::vector<std::size_t>& indices) {
    if (indices.empty()) return;
    pb::TxnRequest request;
    for (std::size_t n = 0; n < indices.size(); ++n) {
      const ClaimRequest& req = reqs[indices[n]];
      const std::string key = KeysOf(req.job, req.tick_unix).Observation(req.node);
      pb::TxnRequest* nested = AddClaimTxn(request, n);
      ValueIsOp(nested->add_compare(), key, Encode(ObservationOf(req, ClaimStatus::kLost)));
      DeleteOp(nested->add_success(), key);
    }
    AddPermissionProbe(request);
    pb::TxnResponse response;
    (void)Txn(request, &response, Due());
  }

  // A claim of a batch that goes on to its txn.
  struct ClaimPlan {
    std::size_t index;  // in the batch's requests
    Keys keys;
    TickState state;                        // what the read found
    std::optional<std::int64_t> reclaim_rev;  // a re-claim: the record's mod_revision read
    std::int64_t lease = 0;                 // the batch's lease for the claim's TTL
    std::uint64_t fence = 0;
    bool blind = false;       // no read: state holds the head as seen and a clock reading
    TickRecord record;        // what the txn puts (ClaimTxn)
    Head head;                // the head it puts
    bool names_job = false;   // it puts jobs/<job>
  };

  // The leases of one claim batch: one per TTL (etcd's are whole seconds), granted
  // when the first claim that needs it is written, and how many claims won under it.
  class BatchLeases {
   public:
    struct Lease {
      std::int64_t ttl_s = 0;
      std::int64_t id = 0;
      int wins = 0;
    };
    // The lease for `lease` (TTL rounded up to whole seconds), granted by `grant` once.
    template <typename GrantFn>
    Result<std::int64_t> For(milliseconds lease, GrantFn grant) {
      const std::int64_t ttl_s = std::max<std::int64_t>(1, (lease.count() + 999) / 1000);
      for (const Lease& l : leases_) {
        if (l.ttl_s == ttl_s) return l.id;
      }
      auto id = grant(ttl_s);
      if (!id) return tl::unexpected(id.error());
      leases_.push_back(Lease{ttl_s, *id, 0});
      return *id;
    }
    void Won(std::int64_t id) {
      for (Lease& l : leases_) l.wins += l.id == id ? 1 : 0;
    }
    std::vector<Lease>::const_iterator begin() const { return leases_.begin(); }
    std::vector<Lease>::const_iterator end() const { return leases_.end(); }

   private:
    std::vector<Lease> leases_;
  };

  using Answers = std::vector<std::pair<std::size_t, Result<ClaimOutcome>>>;

  // Writes this replica's observation of every answered claim that asks for it (not
  // store-reset or early: nothing is written then; not an error) and marks them observed,
  // so that the scheduler needs no Record call per claim: plain puts in nested txns of
  // kPutsPerNestedTxn, up to kPutsPerNestedTxn of them to a request (the keys are
  // distinct: one claim per job), so the observations of a chunk are one request, one
  // Raft entry. A failure leaves them unobserved: the scheduler records them. A won
  // claim's observation is already in its record (the claim wrote it), a lost one
  // found by its probe was written with the probe.
  void Observe(std::span<const ClaimRequest> reqs, Answers& answers) {
    pb::TxnRequest request;
    pb::TxnRequest* nested = nullptr;
    std::vector<ClaimOutcome*> observed;
    std::vector<std::string> naming;  // jobs whose name the txn writes
    bool ok = true;
    const auto send = [&] {
      nested = nullptr;
      if (request.success_size() == 0) return;
      pb::TxnResponse response;
      ok = ok && Txn(request, &response, Due()).has_value();
      request.Clear();
    };
    const auto put = [&](const std::string& key, const std::string& value) {
      if (nested != nullptr &&
          static_cast<std::size_t>(nested->success_size()) >= kPutsPerNestedTxn) {
        nested = nullptr;
      }
      if (nested == nullptr) {
        if (static_cast<std::size_t>(request.success_size()) >= kPutsPerNestedTxn ||
            request.ByteSizeLong() > kObservationBytesPerTxn) {
          send();
        }
        nested = request.add_success()->mutable_request_txn();
      }
      PutOp(nested->add_success(), key, value);
    };
    for (auto& [i, r] : answers) {
      const ClaimRequest& req = reqs[i];
      if (!req.observe || !r || r->status == ClaimStatus::kStoreReset ||
          r->status == ClaimStatus::kEarly) {
        continue;
      }
      if (r->status == ClaimStatus::kWon) {
        r->observed = true;
        continue;
      }
      if (r->observed) continue;  // with its probe (ProbeRecords)
      const Observation obs = ObservationOf(req, r->status);
      const bool name = !Named(req.job);
      if (name) naming.push_back(req.job);
      const Keys k = KeysOf(req.job, req.tick_unix);
      put(k.Observation(obs.node), Encode(obs));
      if (name) put(JobKey(req.job), "");
      observed.push_back(&*r);
    }
    send();
    if (!ok || observed.empty()) return;
    for (ClaimOutcome* o : observed) o->observed = true;
    for (const std::string& job : naming) MarkNamed(job);
  }

  // This replica's observation of a claim answered `status` (not won: a won claim's is
  // in its record).
  static Observation ObservationOf(const ClaimRequest& req, ClaimStatus status) {
    Observation obs;
    obs.node = req.node;
    obs.outcome = std::string(ClaimStatusName(status));
    obs.node_wall = req.node_wall;
    obs.config_hash = req.config_hash;
    obs.fence = 0;
    return obs;
  }

  // The puts of one observation: the replica's key, and the job's name when this
  // handle has not written it yet (no ledger index since the lean write set: History
  // ranges the tick keys).
  Json RecordOps(const std::string& job, std::int64_t tick, const Observation& obs,
                 bool name) const {
    const Keys k = KeysOf(job, tick);
    Json ops = {Put(k.Observation(obs.node), Encode(obs))};
    if (name) ops.push_back(Put(JobKey(job), ""));
    return ops;
  }

  // One chunk of a wave (distinct jobs): probe, read, decide, write; the observations
  // its probe did not write follow (ClaimBatchAsAnswered, Observe). A claim of a job whose head this handle has
  // seen, sent while the member's clock reading (ClockNow) says neither early nor
  // missed, goes blind: no read, its txn compares the head as seen (mod_revision and
  // value) and, failing, ranges what a read would have (the record, lease key and
  // lease end, the run key, the head), which decides it as a read would — or, when
  // the claim could still be won (the head moved, a re-claim), the claim reads in the
  // next wave. Every other claim reads first, as before.
  std::vector<std::size_t> DecideChunk(std::span<const ClaimRequest> reqs,
                                       std::span<const std::size_t> chunk, BatchLeases& leases,
                                       std::set<std::size_t>& read_first,
                                       const ClaimAnswer& on_answer, std::optional<Error>& failed) {
    const Deadline deadline = Due();
    std::vector<Keys> keys;
    keys.reserve(chunk.size());
    for (const std::size_t i : chunk) keys.push_back(KeysOf(reqs[i].job, reqs[i].tick_unix));
    std::vector<TickState> states(chunk.size());
    std::vector<bool> blind(chunk.size(), false);
    std::vector<Keys> to_read;
    std::vector<bool> read_run;         // parallel to to_read: the run key too (forbid)
    std::vector<std::size_t> read_pos;  // positions in chunk
    const std::optional<SecondClockBound::Reading> now = ClockNow();
    for (std::size_t n = 0; n < chunk.size(); ++n) {
      const ClaimRequest& req = reqs[chunk[n]];
      // A claim most likely decided already (another replica's slice) is probed
      // (ProbeRecords), never blind: a blind claim that loses ranges the record and the
      // head back through its failure branch and still needs its observation written.
      const std::optional<CachedHead> seen =
          now && !req.likely_decided && read_first.count(chunk[n]) == 0 ? HeadSeen(req.job)
                                                                        : std::nullopt;
      if (seen) {
        TickState& st = states[n];
        st.head = seen->head;
        st.head_value = seen->value;
        st.head_mod_revision = seen->mod_revision;
        st.server_ms = now->lo;
        st.server_hi_ms = now->hi;
        ClaimPlan probe{chunk[n], keys[n], st};
        // Anything but "go on" (early, store-reset, superseded, missed) is decided
        // on a read, as before: only the txn's compare can prove the head.
        blind[n] = !Decide(req, probe);
      }
      if (!blind[n]) {
        to_read.push_back(keys[n]);
        read_run.push_back(req.forbid_overlap);
        read_pos.push_back(n);
      }
    }
    std::vector<bool> probe_observed(chunk.size(), false);
    // Observations a probe wrote for claims then not answered lost: deleted again, in one
    // request before the chunk's claims go out.
    std::vector<std::size_t> unobserve;
    if (!ProbeRecords(reqs, chunk, now, to_read, read_run, read_pos, states, probe_observed,
                      unobserve, deadline, on_answer, failed)) {
      return {};
    }
    if (!to_read.empty()) {
      auto read = ReadTicks(to_read, deadline, read_run);
      if (!read) {
        failed = read.error();
        for (const std::size_t i : chunk) on_answer(i, tl::unexpected(read.error()));
        return {};
      }
      for (std::size_t r = 0; r < read_pos.size(); ++r) {
        states[read_pos[r]] = std::move((*read)[r]);
        SawHead(reqs[chunk[read_pos[r]]].job, states[read_pos[r]]);
      }
    }
    // Every answer carries the member's clock it was decided on: the middle of
    // [Date (or the reading's lowest), the latest it can have read].
    std::map<std::size_t, TickState> clock_of;
    const ClaimAnswer answer = [&](std::size_t i, Result<ClaimOutcome> r) {
      if (const auto it = clock_of.find(i); r && it != clock_of.end() && it->second.server_ms) {
        const std::int64_t mid = (*it->second.server_ms + StoreHi(it->second)) / 2;
        r->store_ms = mid;
        r->store_error_ms = StoreHi(it->second) - mid;
      }
      on_answer(i, std::move(r));
    };
    const auto clock_only = [](const TickState& st) {
      TickState c;
      c.server_ms = st.server_ms;
      c.server_hi_ms = st.server_hi_ms;
      return c;
    };
    std::vector<ClaimPlan> plans;
    for (std::size_t n = 0; n < chunk.size(); ++n) {
      const ClaimRequest& req = reqs[chunk[n]];
      clock_of[chunk[n]] = clock_only(states[n]);
      ClaimPlan plan{chunk[n], std::move(keys[n]), std::move(states[n])};
      plan.blind = blind[n];
      std::optional<ClaimOutcome> decided = Decide(req, plan);
      if (probe_observed[n]) {  // a record was found: Decide answered
        if (decided && decided->status == ClaimStatus::kLost) {
          decided->observed = true;
        } else {
          unobserve.push_back(chunk[n]);
        }
      }
      if (decided) {
        answer(plan.index, std::move(*decided));
      } else {
        plans.push_back(std::move(plan));
      }
    }
    ForgetProbeObservations(reqs, unobserve);
    if (plans.empty()) return {};

    TxnOnArena on_arena;
    pb::TxnRequest& request = on_arena.request;
    for (std::size_t n = 0; n < plans.size(); ++n) {
      ClaimPlan& plan = plans[n];
      const ClaimRequest& req = reqs[plan.index];
      auto lease =
          leases.For(req.lease, [&](std::int64_t ttl_s) {
            auto id = Grant(ttl_s, deadline);
            if (id) HoldForBatch(*id);
            return id;
          });
      if (!lease) {
        failed = lease.error();
        for (const ClaimPlan& p : plans) answer(p.index, tl::unexpected(lease.error()));
        return {};
      }
      plan.lease = *lease;
      ClaimTxn(req, plan, AddClaimTxn(request, n));
    }
    AddPermissionProbe(request);
    pb::TxnResponse& response = on_arena.response;
    auto txn = Txn(request, &response, deadline);
    if (!txn) {
      failed = txn.error();
      for (const ClaimPlan& plan : plans) DropHead(reqs[plan.index].job);
      ResolveAmbiguous(reqs, plans, txn.error(), leases, answer);
      return {};
    }
    const std::int64_t revision = response.header().revision();
    std::vector<std::size_t> retry;
    for (std::size_t n = 0; n < plans.size(); ++n) {
      ClaimPlan& plan = plans[n];
      const ClaimRequest& req = reqs[plan.index];
      const pb::TxnResponse* answered = ClaimTxnAnswer(response, n);
      if (answered == nullptr) {
        DropHead(req.job);
        answer(plan.index,
                  MakeError(context_ + ": claim", "the batch txn gave no answer for this claim"));
        continue;
      }
      const pb::TxnResponse& claim_txn = *answered;
      std::optional<Result<ClaimOutcome>> out;
      if (claim_txn.succeeded()) {
        out = Succeeded(req, plan, revision);
      } else {
        // What won the race, as a read at the txn's revision would have found it.
        TickState st = ParseTickState(plan.keys, claim_txn.responses(), 0,
                                      claim_txn.responses_size());
        st.server_ms = txn->server_ms;
        st.server_hi_ms = txn->server_hi_ms;
        if (!st.server_ms && now) {  // a reply without Date: the reading sent with
          st.server_ms = now->lo;
          st.server_hi_ms = now->hi;
        }
        SawHead(req.job, st);
        if (plan.blind) {
          clock_of[plan.index] = clock_only(st);
          ClaimPlan fresh{plan.index, plan.keys, std::move(st)};
          if (std::optional<ClaimOutcome> decided = Decide(req, fresh)) {
            out = std::move(*decided);
          } else {
            read_first.insert(plan.index);  // it may still win: read, then claim
          }
        } else {
          out = Finish(req, plan, st);
        }
      }
      if (!out) {
        retry.push_back(plan.index);
        continue;
      }
      if (*out && (*out)->status == ClaimStatus::kWon) leases.Won(plan.lease);
      answer(plan.index, std::move(*out));
    }
    return retry;
  }

  // What the read decides without writing (store-reset, lost, superseded, missed,
  // busy), or nullopt: the claim goes on to its txn (plan.reclaim_rev set for a
  // re-claim).
  std::optional<ClaimOutcome> Decide(const ClaimRequest& req, ClaimPlan& plan) {
    const TickState& state = plan.state;
    // The member's clock (rule 15): Date is rounded down to its second, so it reads at
    // most 999 ms more, or less as its earlier replies tell (StoreHi); without a Date
    // nothing is judged early and no head ahead.
    const std::int64_t store_hi_ms = StoreHi(state);
    if (state.server_ms && ClaimIsEarly(req, store_hi_ms)) {
      return ClaimOutcome{ClaimStatus::kEarly};
    }
    // The replica saw a later claim than the head: etcd lost its data (rule 12). The
    // read is one revision of the store, and nothing is written; a claim that goes on
    // writes only if the head is still the one read (the txn compares its mod_revision).
    const std::int64_t head_tick = state.head ? state.head->tick : 0;
    if (!state.head_unread && req.known_tick > head_tick) {
      ClaimOutcome out;
      out.status = ClaimStatus::kStoreReset;
      out.holder_tick_unix = head_tick;
      return out;
    }
    std::int64_t base_ms = req.tick_unix * 1000;  // the deadline counts from T…
    if (state.record) {
      const TickRecord& rec = *state.record;
      if (rec.owner == req.owner_token && rec.state == "running") return Won(rec.fence);
      if (rec.state != "running" || !req.recover || state.lease) return Lost(req, rec);
      base_ms = state.lease_until;  // …or, for a re-claim, from the holder's lease end
      plan.reclaim_rev = rec.mod_revision;
    } else if (state.head) {
      auto [judging, node] = JudgingHead(*state.head, req, store_hi_ms);
      if (judging > req.tick_unix) return Superseded(judging, std::move(node));
    }
    if (req.starting_deadline && state.server_ms &&
        *state.server_ms > base_ms + req.starting_deadline->count()) {
      return ClaimOutcome{ClaimStatus::kMissed};
    }
    if (req.forbid_overlap && state.run && state.run->tick != req.tick_unix) {
      return Busy(*state.run);
    }
    return std::nullopt;
  }

  // The claim's own txn (nested in the chunk's): compares that the record, the run
  // key and the head are as read (a blind claim: the head as seen, its value too, so
  // that a head written anew after etcd lost its data never passes for it); success
  // writes the claim under plan.lease, failure ranges what decides it (FailureReads).
  // Sets plan.fence, plan.record, plan.head and plan.names_job.
  void ClaimTxn(const ClaimRequest& req, ClaimPlan& plan, pb::TxnRequest* txn) {
    const Keys& k = plan.keys;
    const TickState& state = plan.state;
    plan.head = NextHead(req, state);
    static_assert(kFenceEpochShift == 11);
    plan.fence = static_cast<std::uint64_t>((plan.head.epoch_ms << kFenceEpochShift) + plan.head.n);
    TickRecord rec{"running", req.node, req.owner_token, req.config_hash, plan.fence, plan.lease};
    // The lease's end on the member's clock (recover counts from it until a renewal
    // writes `u`), and the claimer's observation of its won claim (the ledger).
    rec.lease_until_ms = state.server_ms.value_or(0) + req.lease.count();
    rec.wall_ms = std::chrono::duration_cast<milliseconds>(req.node_wall.time_since_epoch()).count();
    rec.won_fence = plan.fence;
    rec.claim_observed = true;
    plan.record = rec;
    if (plan.reclaim_rev) {
      ModifiedAtOp(txn->add_compare(), k.record, *plan.reclaim_rev);
      CreatedAtOp(txn->add_compare(), k.lease, 0);
    } else {
      CreatedAtOp(txn->add_compare(), k.record, 0);
    }
    if (req.forbid_overlap) CreatedAtOp(txn->add_compare(), k.run, 0);
    if (state.head) {
      ModifiedAtOp(txn->add_compare(), k.head, state.head_mod_revision);
    } else {
      CreatedAtOp(txn->add_compare(), k.head, 0);
    }
    if (plan.blind) ValueIsOp(txn->add_compare(), k.head, state.head_value);
    PutOp(txn->add_success(), k.record, Encode(rec));
    PutOp(txn->add_success(), k.lease, req.owner_token, plan.lease);
    PutOp(txn->add_success(), k.head, Encode(plan.head));
    // The job's name: once per job and handle, and with every head created (a store
    // that lost its data lost the names too).
    plan.names_job = !state.head || !Named(req.job);
    if (plan.names_job) PutOp(txn->add_success(), JobKey(req.job), "");
    if (req.forbid_overlap) {
      PutOp(txn->add_success(), k.run,
            Encode(RunMarker{req.owner_token, req.tick_unix, req.node, req.config_hash}),
            plan.lease);
    }
    // A re-claim overwrites the record that held the previous claimer's observation:
    // it goes to that replica's own key, as it would have written it.
    if (plan.reclaim_rev && state.record && state.record->claim_observed &&
        state.record->node != req.node) {
      const TickRecord& old = *state.record;
      Observation obs;
      obs.node = old.node;
      obs.outcome = "won";
      obs.node_wall = WallTime(milliseconds(old.wall_ms));
      obs.config_hash = old.hash;
      obs.fence = old.won_fence;
      PutOp(txn->add_success(), k.Observation(old.node), Encode(obs));
    }
    FailureReads(req, k, txn);
  }

  // A claim's txn succeeded at `revision` (the chunk's txn is one revision): won. The
  // head, the record and the run key as written are remembered for the next claim of
  // the job and for the complete.
  Result<ClaimOutcome> Succeeded(const ClaimRequest& req, ClaimPlan& plan,
                                 std::int64_t revision) {
    plan.record.mod_revision = revision;
    RememberLease(req.job, req.tick_unix, req.owner_token, plan.lease, plan.record,
                  req.forbid_overlap ? revision : 0);
    if (revision > 0) {
      SawHead(req.job, CachedHead{plan.head, Encode(plan.head), revision});
    } else {
      DropHead(req.job);
    }
    if (plan.names_job) MarkNamed(req.job);
    return Won(plan.fence);
  }

  // The answer of a claim's failed txn (read first): lost or busy named by what won
  // the race; nullopt when only the head moved (claim again).
  std::optional<Result<ClaimOutcome>> Finish(const ClaimRequest& req, const ClaimPlan& plan,
                                             const TickState& now) {
    const TickState& state = plan.state;
    if (now.record && now.record->mod_revision != plan.reclaim_rev) {
      if (now.record->owner == req.owner_token) return Won(now.record->fence);  // our retried txn
      return Lost(req, *now.record);
    }
    if (now.run) return Busy(*now.run);
    if (now.head_mod_revision != (state.head ? state.head_mod_revision : 0)) return std::nullopt;
    // The re-claimed record did not change but its lease key came back: the holder
    // (or another re-claimer) holds it again.
    if (state.record) return Lost(req, *state.record);
    return MakeError(context_ + ": claim", "the claim transaction failed without a cause");
  }

  // The chunk's txn got no answer: it may or may not have been applied. One read of
  // the chunk's ticks decides: a claim is ours only when its record and its lease key
  // hold our token (the fence is the record's); every other claim answers `error`.
  void ResolveAmbiguous(std::span<const ClaimRequest> reqs, const std::vector<ClaimPlan>& plans,
                        const Error& error, BatchLeases& leases, const ClaimAnswer& on_answer) {
    std::vector<Keys> keys;
    for (const ClaimPlan& plan : plans) keys.push_back(plan.keys);
    auto states = ReadTicks(keys, Due());
    for (std::size_t n = 0; n < plans.size(); ++n) {
      const ClaimRequest& req = reqs[plans[n].index];
      const TickState* st = states ? &(*states)[n] : nullptr;
      if (st != nullptr && st->record && st->record->owner == req.owner_token &&
          st->lease_owner == req.owner_token) {
        RememberLease(req.job, req.tick_unix, req.owner_token, st->lease_id, st->record,
                      st->run && st->run->token == req.owner_token ? st->run_mod_revision : 0);
        leases.Won(st->lease_id);
        on_answer(plans[n].index, Won(st->record->fence));
      } else {
        on_answer(plans[n].index, tl::unexpected(error));
      }
    }
  }

  Result<std::int64_t> Grant(std::int64_t ttl_s, Deadline deadline) {
    auto grant = Post("/v3/lease/grant", Json{{"TTL", std::to_string(ttl_s)}}, deadline);
    if (!grant) return tl::unexpected(grant.error());
    const std::int64_t lease_id = Int(grant->body, "ID");
    if (lease_id == 0) return MakeError(context_ + ": lease grant", grant->body.dump());
    return lease_id;
  }

  std::string OutputKey(const std::string& job, std::int64_t tick) const {
    return JobPrefix(job) + "out/" + Pad(tick);
  }

  // How many of pending[first…] go into one complete txn: at most kClaimsPerTxn, whose
  // CompleteBytes and run outputs add up to at most kRequestBytes (but at least one
  // complete: an output alone is at most kMaxStoredOutputBytes).
  std::size_t CompleteChunkSize(std::span<const CompleteRequest> reqs,
                                const std::vector<std::size_t>& pending,
                                std::size_t first) const {
    std::size_t n = 0;
    std::size_t bytes = 0;
    while (first + n < pending.size() && n < kClaimsPerTxn) {
      const CompleteRequest& req = reqs[pending[first + n]];
      bytes += CompleteBytes(endpoints_.prefix.size(), req) +
               OutputToStore(req.completion.output).size();
      if (n > 0 && bytes > kRequestBytes) break;
      ++n;
    }
    return n;
  }

  // Retention by count, after a batch of completes: for each job of the batch that
  // stored an output, the outputs older than its newest keep_outputs are deleted (a
  // sorted keys-only range, then one delete of the older range). Best effort: a
  // failure leaves them for the next complete; Prune removes them with age anyway.
  void KeepNewestOutputs(std::span<const CompleteRequest> reqs,
                         const std::vector<std::optional<Result<CompleteStatus>>>& out) {
    std::map<std::string, int> keep;  // job → its keep_outputs
    for (std::size_t i = 0; i < reqs.size(); ++i) {
      const Completion& c = reqs[i].completion;
      if (c.keep_outputs > 0 && !c.output.empty() && out[i] && *out[i] &&
          **out[i] == CompleteStatus::kCompleted) {
        keep[reqs[i].held.job] = c.keep_outputs;
      }
    }
    const Deadline deadline = Due();
    for (const auto& [job, n] : keep) {
      const std::string prefix = JobPrefix(job) + "out/";
      auto newest = Post("/v3/kv/range",
                         Json{{"key", B64(prefix)},
                              {"range_end", B64(PrefixEnd(prefix))},
                              {"sort_order", "DESCEND"},
                              {"sort_target", "KEY"},
                              {"keys_only", true},
                              {"limit", std::to_string(n + 1)}},
                         deadline);
      if (!newest) return;
      const std::vector<Kv> kvs = KvsOf(newest->body);
      if (kvs.size() <= static_cast<std::size_t>(n)) continue;
      // Everything up to and including the first one beyond the newest n.
      if (!Post("/v3/kv/deleterange",
                Json{{"key", B64(prefix)}, {"range_end", B64(kvs.back().key + '\0')}},
                deadline)) {
        return;
      }
    }
  }

  // One chunk of CompleteBatch: answers each complete in `out`, or adds it to `retry`
  // (its txn lost a race), and adds leases no claim of this handle holds any more to
  // `unused_leases`.
  void CompleteChunk(std::span<const CompleteRequest> reqs, std::span<const std::size_t> chunk,
                     std::vector<std::optional<Result<CompleteStatus>>>& out,
                     std::vector<std::size_t>& retry, std::vector<std::int64_t>& unused_leases) {
    const Deadline deadline = Due();
    std::vector<Keys> keys;
    keys.reserve(chunk.size());
    for (const std::size_t i : chunk) {
      keys.push_back(KeysOf(reqs[i].held.job, reqs[i].held.tick_unix));
    }
    // A claim this handle won (or refenced) completes blind: its txn compares the
    // record's (and run key's) mod_revision as this handle wrote them. Others read.
    std::vector<TickState> states(chunk.size());
    std::vector<bool> until_written(chunk.size(), false);  // blind: renewed here
    std::vector<Keys> to_read;
    std::vector<std::size_t> read_pos;
    for (std::size_t n = 0; n < chunk.size(); ++n) {
      const HeldClaim& held = reqs[chunk[n]].held;
      if (auto mine = TakeHeldRecord(held)) {
        states[n].record = std::move(mine->record);
        until_written[n] = mine->until_written;
        if (mine->run_mod_revision > 0) {
          states[n].run = RunMarker{held.owner_token, held.tick_unix, "", ""};
          states[n].run_mod_revision = mine->run_mod_revision;
        }
      } else {
        to_read.push_back(keys[n]);
        read_pos.push_back(n);
      }
    }
    if (!to_read.empty()) {
      auto read = ReadTicks(to_read, deadline);
      if (!read) {  // those answer the error; the blind ones still go
        for (const std::size_t n : read_pos) out[chunk[n]] = tl::unexpected(read.error());
      } else {
        for (std::size_t r = 0; r < read_pos.size(); ++r) states[read_pos[r]] = std::move((*read)[r]);
      }
    }
    std::vector<std::size_t> writing;  // positions in chunk
    TxnOnArena on_arena;
    pb::TxnRequest& request = on_arena.request;
    for (std::size_t n = 0; n < chunk.size(); ++n) {
      const auto& [held, completion] = reqs[chunk[n]];
      if (out[chunk[n]]) continue;  // its read failed
      const TickState& state = states[n];
      const Keys& k = keys[n];
      if (!state.record || state.record->owner != held.owner_token) {
        if (const std::int64_t lease = ForgetLease(held)) unused_leases.push_back(lease);
        out[chunk[n]] = CompleteStatus::kNotOwner;
        continue;
      }
      TickRecord rec = *state.record;
      if (rec.state == "done") {
        out[chunk[n]] = CompleteStatus::kCompleted;
        continue;
      }
      pb::TxnRequest* txn = AddClaimTxn(request, writing.size());
      ModifiedAtOp(txn->add_compare(), k.record, rec.mod_revision);
      rec.state = "done";
      rec.fence = held.fence;
      rec.outcome = completion.outcome;
      rec.exit_code = completion.exit_code;
      rec.duration_ms = completion.duration.count();
      // The record is still ours (the compare), so the lease key, if any, is ours too.
      PutOp(txn->add_success(), k.record, Encode(rec));
      DeleteOp(txn->add_success(), k.lease);
      // `u` only when a renewal wrote it (read, or renewed through this handle): a
      // delete of a key that is not there still costs etcd a lookup. A `u` put by a
      // renewal through another handle stays, dead beside a done record, until the
      // tick is pruned.
      if (state.until_read || until_written[n]) DeleteOp(txn->add_success(), k.until);
      if (const std::string_view output = OutputToStore(completion.output); !output.empty()) {
        PutOp(txn->add_success(), OutputKey(held.job, held.tick_unix), std::string(output));
      }
      if (state.run && state.run->token == held.owner_token) {
        ModifiedAtOp(txn->add_compare(), k.run, state.run_mod_revision);
        DeleteOp(txn->add_success(), k.run);
      }
      writing.push_back(n);
    }
    if (writing.empty()) return;
    pb::TxnResponse& response = on_arena.response;
    auto txn = Txn(request, &response, deadline);
    if (!txn) {
      for (const std::size_t n : writing) out[chunk[n]] = tl::unexpected(txn.error());
      return;
    }
    for (std::size_t w = 0; w < writing.size(); ++w) {
      const std::size_t i = chunk[writing[w]];
      const pb::TxnResponse* answer = ClaimTxnAnswer(response, w);
      if (answer == nullptr || !answer->succeeded()) {
        retry.push_back(i);  // re-read: re-claimed?
        continue;
      }
      if (const std::int64_t lease = ForgetLease(reqs[i].held)) unused_leases.push_back(lease);
      out[i] = CompleteStatus::kCompleted;
    }
  }

  // What a keepalive of a lease answered.
  struct KeptAlive {
    steady_clock::time_point sent;
    bool alive = false;            // a positive TTL: the lease lives on
    std::int64_t server_ms = 0;    // the member's clock (Date), 0 when not sent
  };

  // One keepalive serves every run of the lease that asked while it was not yet sent:
  // the runs of a batch share one lease, and their renewals come together. A renewal
  // takes the answer of a keepalive sent after it began (that keepalive extended the
  // lease from a moment inside this call), else sends its own.
  Result<KeptAlive> KeepAlive(std::int64_t lease_id, Deadline deadline) {
    const steady_clock::time_point asked = steady_clock::now();
    std::lock_guard lock(keepalive_mu_);
    if (const auto it = kept_alive_.find(lease_id);
        it != kept_alive_.end() && it->second.sent >= asked) {
      return it->second;
    }
    KeptAlive out;
    out.sent = steady_clock::now();
    auto reply = Post("/v3/lease/keepalive", Json{{"ID", std::to_string(lease_id)}}, deadline);
    if (!reply) return tl::unexpected(reply.error());
    const Json& result = reply->body.contains("result") ? reply->body["result"] : reply->body;
    out.alive = Int(result, "TTL") > 0;
    out.server_ms = reply->server_ms.value_or(0);
    if (kept_alive_.size() > 4096) kept_alive_.clear();  // answers of ended leases
    kept_alive_[lease_id] = out;
    return out;
  }

  // A txn's list of responses, or nullptr.
  static const Json* Responses(const Json& txn) {
    const auto it = txn.find("responses");
    return it != txn.end() && it->is_array() ? &*it : nullptr;
  }

  // The newest `limit` ticks of `job` (every tick when limit < 0) that have any key
  // under tick/<T>/ (a record, an observation): keys-only ranges of the job's tick
  // keys, newest first, a page at a time, each page ending below the oldest tick the
  // previous one reached. No index key is needed (an older tickd's idx/<T> always
  // came with such keys).
  Result<std::vector<std::int64_t>> NewestTicks(const std::string& job, int limit,
                                                Deadline deadline) {
    const std::string ticks = JobPrefix(job) + "tick/";
    std::vector<std::int64_t> out;
    std::string end = PrefixEnd(ticks);
    const std::size_t want = limit < 0 ? SIZE_MAX : static_cast<std::size_t>(std::max(limit, 1));
    while (out.size() < want) {
      Json range{{"key", B64(ticks)},
                 {"range_end", B64(end)},
                 {"sort_order", "DESCEND"},
                 {"sort_target", "KEY"},
                 {"keys_only", true}};
      // About four keys a tick (record, lease key, observations); more pages if not.
      if (limit >= 0) range["limit"] = std::to_string(4 * (want - out.size()) + 4);
      auto reply = Post("/v3/kv/range", range, deadline);
      if (!reply) return tl::unexpected(reply.error());
      const std::vector<Kv> kvs = KvsOf(reply->body);
      for (const Kv& kv : kvs) {
        const std::int64_t t = ParseTick(std::string_view(kv.key).substr(ticks.size(), 20));
        if ((out.empty() || out.back() != t) && out.size() < want) out.push_back(t);
      }
      if (kvs.empty() || !reply->body.value("more", false)) break;
      end = ticks + Pad(out.back()) + "/";  // below every key of the oldest tick seen
    }
    return out;
  }

  Result<std::vector<std::string>> Jobs(Deadline deadline) {
    const std::string prefix = endpoints_.prefix + "jobs/";
    auto reply =
        Post("/v3/kv/range",
             Json{{"key", B64(prefix)}, {"range_end", B64(PrefixEnd(prefix))}, {"keys_only", true}},
             deadline);
    if (!reply) return tl::unexpected(reply.error());
    std::vector<std::string> names;
    for (const Kv& kv : KvsOf(reply->body)) names.push_back(kv.key.substr(prefix.size()));
    return names;
  }

  ClaimOutcome Won(std::uint64_t fence) {
    ClaimOutcome out;
    out.status = ClaimStatus::kWon;
    out.fence = fence;
    return out;
  }

  static ClaimOutcome Lost(const ClaimRequest& req, const TickRecord& rec) {
    ClaimOutcome out;
    out.status = ClaimStatus::kLost;
    out.holder_node = rec.node;
    out.holder_tick_unix = req.tick_unix;
    out.holder_config_hash = rec.hash;
    out.holder_running = rec.state == "running";
    return out;
  }

  static ClaimOutcome Superseded(std::int64_t tick, std::string node) {
    ClaimOutcome out;
    out.status = ClaimStatus::kSuperseded;
    out.holder_node = std::move(node);
    out.holder_tick_unix = tick;
    return out;
  }

  // The head after `req` wins: one more claim since the epoch, the tick only forward
  // (MoveHead: a head ahead of the member's clock keeps its tick and moves `below`).
  // A new head's epoch is this replica's wall clock, never below the member's Date.
  static Head NextHead(const ClaimRequest& req, const TickState& state) {
    Head head;
    if (state.head) {
      head = *state.head;
    } else {
      const std::int64_t local_ms = std::chrono::duration_cast<milliseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count();
      head.epoch_ms = std::max(local_ms, state.server_ms.value_or(0));
      head.tick = req.tick_unix;
      head.node = req.node;
    }
    ++head.n;
    MoveHead(head, req, StoreHi(state));
    return head;
  }

  // The latest the member's clock can have read at the tick's read: INT64_MAX without
  // a Date (nothing is then judged ahead).
  static std::int64_t StoreHi(const TickState& state) {
    if (!state.server_ms) return INT64_MAX;
    return state.server_hi_ms.value_or(*state.server_ms + 999);
  }

  static ClaimOutcome Busy(const RunMarker& run) {
    ClaimOutcome out;
    out.status = ClaimStatus::kBusy;
    out.holder_node = run.node;
    out.holder_tick_unix = run.tick;
    out.holder_config_hash = run.hash;
    return out;
  }

  // Revokes a lease no claim of this handle holds any more (best effort), on a thread
  // of revokers_: no answer waits on it — the complete that ended the lease's last
  // claim deleted its keys, and a batch's next claims do not wait either. When no
  // thread is to be had, here and now.
  void RevokeLater(std::int64_t lease_id) {
    if (lease_id == 0) return;
    // "requested lease not found" is fine: it expired already.
    const auto revoke = [this, lease_id] {
      (void)Post("/v3/lease/revoke", Json{{"ID", std::to_string(lease_id)}}, Due());
    };
    if (!revokers_.Post(revoke)) revoke();
  }

  // Leases this handle holds, by (job, T, token): renewals skip a lookup. A lease
  // serves every claim won in one batch; lease_claims_ counts the claims still held
  // under each, so that the lease is revoked only when its last claim completes.
  // With the lease, the claim's record as this handle last wrote it (its value and
  // mod_revision) and the run key's mod_revision (0: none), so that the complete
  // needs no read: its txn compares them, and a compare that fails reads.
  using LeaseKey = std::tuple<std::string, std::int64_t, std::string>;
  struct HeldState {
    std::int64_t lease_id = 0;
    std::optional<TickRecord> record;
    std::int64_t run_mod_revision = 0;
    bool until_written = false;  // a renewal through this handle may have put `u`
  };

  void RememberLease(const std::string& job, std::int64_t tick, const std::string& token,
                     std::int64_t lease_id, std::optional<TickRecord> record = std::nullopt,
                     std::int64_t run_mod_revision = 0) {
    std::lock_guard lock(leases_mu_);
    const auto [it, added] = leases_.emplace(LeaseKey(job, tick, token), HeldState{lease_id});
    if (added) ++lease_claims_[lease_id];
    it->second.record = std::move(record);
    it->second.run_mod_revision = run_mod_revision;
  }
  std::int64_t LeaseOf(const HeldClaim& held) {
    std::lock_guard lock(leases_mu_);
    const auto it = leases_.find(LeaseKey(held.job, held.tick_unix, held.owner_token));
    return it == leases_.end() ? 0 : it->second.lease_id;
  }
  // The record as this handle last wrote it, the run key's mod_revision and whether a
  // renewal may have put `u`, taken: a complete uses it once, a compare that fails
  // reads instead.
  struct HeldRecord {
    TickRecord record;
    std::int64_t run_mod_revision = 0;
    bool until_written = false;
  };
  std::optional<HeldRecord> TakeHeldRecord(const HeldClaim& held) {
    std::lock_guard lock(leases_mu_);
    const auto it = leases_.find(LeaseKey(held.job, held.tick_unix, held.owner_token));
    if (it == leases_.end() || !it->second.record) return std::nullopt;
    HeldRecord out{std::move(*it->second.record), it->second.run_mod_revision,
                   it->second.until_written};
    it->second.record.reset();
    return out;
  }
  void MarkUntilWritten(const HeldClaim& held) {
    std::lock_guard lock(leases_mu_);
    const auto it = leases_.find(LeaseKey(held.job, held.tick_unix, held.owner_token));
    if (it != leases_.end()) it->second.until_written = true;
  }
  // A refence moved the record: the next complete compares the new one.
  void UpdateHeldRecord(const HeldClaim& held, const TickRecord& record) {
    std::lock_guard lock(leases_mu_);
    const auto it = leases_.find(LeaseKey(held.job, held.tick_unix, held.owner_token));
    if (it != leases_.end() && it->second.record) it->second.record = record;
  }

  // jobs/<job> is written once per job by this handle (a claim that creates the head
  // writes it too: a store that lost its data gets it back).
  bool Named(const std::string& job) {
    std::lock_guard lock(cache_mu_);
    return named_jobs_.count(job) > 0;
  }
  void MarkNamed(const std::string& job) {
    std::lock_guard lock(cache_mu_);
    if (named_jobs_.size() >= kMaxJobsCached) named_jobs_.clear();  // names are put again
    named_jobs_.insert(job);
  }

  // The job's head as this handle last saw it (a read, its own claim, a failed claim's
  // ranges): a blind claim's compare proves it unchanged.
  struct CachedHead {
    Head head;
    std::string value;
    std::int64_t mod_revision = 0;
  };
  std::optional<CachedHead> HeadSeen(const std::string& job) {
    std::lock_guard lock(cache_mu_);
    const auto it = heads_.find(job);
    if (it == heads_.end()) return std::nullopt;
    return it->second;
  }
  void SawHead(const std::string& job, const TickState& state) {
    if (!state.head) {
      DropHead(job);
    } else {
      SawHead(job, CachedHead{*state.head, state.head_value, state.head_mod_revision});
    }
  }
  void SawHead(const std::string& job, CachedHead head) {
    std::lock_guard lock(cache_mu_);
    if (heads_.size() >= kMaxJobsCached && heads_.count(job) == 0) heads_.clear();  // reads again
    heads_[job] = std::move(head);
  }
  void DropHead(const std::string& job) {
    std::lock_guard lock(cache_mu_);
    heads_.erase(job);
  }

  // What the member's clock reads now, from the replies of the last minute (lock/
  // clock_check.h): a blind claim judges its instant on it.
  std::optional<SecondClockBound::Reading> ClockNow() { return wire_->ClockNow(); }
  // The batch that granted a lease holds it as a claim would until the batch ends: a
  // run won in an early chunk may complete before a later chunk puts its claims under
  // the same lease, and must not revoke it under them (a later claim would then fail,
  // "requested lease not found"). Returns whether nothing else holds it any more (the
  // caller revokes it: nothing was won under it, or every run won under it ended).
  void HoldForBatch(std::int64_t lease_id) {
    std::lock_guard lock(leases_mu_);
    ++lease_claims_[lease_id];
  }
  bool ReleaseBatchHold(std::int64_t lease_id) {
    std::lock_guard lock(leases_mu_);
    const auto count = lease_claims_.find(lease_id);
    if (count == lease_claims_.end() || --count->second > 0) return false;
    lease_claims_.erase(count);
    return true;
  }
  // Forgets the claim; returns its lease when no other claim of this handle holds it
  // (the caller may revoke it), else 0. A claim this handle did not win gives 0: its
  // lease may serve other claims of the batch it was won in.
  std::int64_t ForgetLease(const HeldClaim& held) {
    std::lock_guard lock(leases_mu_);
    const auto it = leases_.find(LeaseKey(held.job, held.tick_unix, held.owner_token));
    if (it == leases_.end()) return 0;
    const std::int64_t lease_id = it->second.lease_id;
    leases_.erase(it);
    const auto count = lease_claims_.find(lease_id);
    if (count == lease_claims_.end() || --count->second > 0) return 0;
    lease_claims_.erase(count);
    return lease_id;
  }
  RenewStatus Forget(const HeldClaim& held) {
    ForgetLease(held);
    return RenewStatus::kLost;
  }

  // Sends `request` (the gateway's JSON for `path`) over the wire: see EtcdWire::Call
  // for which member answers, what passes to the next one and what is returned.
  // Requests run concurrently (the wire multiplexes them): a renewal never waits behind
  // a batch's txn.
  // A txn as etcd's messages (EtcdWire::Txn): the answer in *response, its clock in
  // the reply.
  Result<WireReply> Txn(const pb::TxnRequest& request, pb::TxnResponse* response,
                        Deadline deadline) {
    return wire_->Txn(request, response, deadline);
  }

  Result<Reply> Post(std::string_view path, const Json& request, Deadline deadline) {
    auto answer = wire_->Call(path, request.dump(), deadline);
    if (!answer) return tl::unexpected(answer.error());
    Reply reply;
    reply.body = Json::parse(answer->body, nullptr, false);
    if (reply.body.is_discarded()) {
      return MakeError(context_ + ": " + std::string(path),
                       "not JSON: " + answer->body.substr(0, 200));
    }
    reply.server_ms = answer->server_ms;
    reply.server_hi_ms = answer->server_hi_ms;
    return reply;
  }

  const EtcdOptions options_;
  const Endpoints endpoints_;
  const std::string context_;  // "etcd <url>"
  std::unique_ptr<EtcdWire> wire_;  // thread-safe: gRPC to the members, their clocks
  std::atomic<bool> clock_narrowed_ = false;  // NarrowClock ran once
  std::mutex keeper_mu_;
  std::condition_variable keeper_cv_;
  bool keeper_stop_ = false;  // guarded by keeper_mu_
  std::thread keeper_;        // KeepClockNarrow's
  std::mutex leases_mu_;
  std::map<LeaseKey, HeldState> leases_;              // guarded by leases_mu_
  std::mutex cache_mu_;
  std::set<std::string> named_jobs_;            // guarded by cache_mu_
  std::map<std::string, CachedHead> heads_;     // guarded by cache_mu_
  std::map<std::int64_t, int> lease_claims_;           // guarded by leases_mu_
  std::mutex keepalive_mu_;  // one keepalive at a time, so that renewals can share it
  std::map<std::int64_t, KeptAlive> kept_alive_;  // guarded by keepalive_mu_
  // Runs that end together complete together (group commit, lock/complete_batcher.h).
  CompleteBatcher completer_{
      [this](std::span<const CompleteRequest> reqs) { return CompleteBatch(reqs); }};
  // RevokeLater's threads; declared last, so that its destructor waits for the revokes
  // still running before anything they use goes.
  ThreadPool revokers_{std::chrono::seconds(10), 2};
};

}  // namespace

Result<std::unique_ptr<Backend>> NewEtcdBackend(const EtcdOptions& options) {
  auto endpoints = ParseUrl(options.url);
  if (!endpoints) {
    Error e = endpoints.error();
    e.context = "etcd " + RedactUrl(options.url);
    return tl::unexpected(std::move(e));
  }
  auto backend = std::make_unique<EtcdBackend>(options, std::move(*endpoints));
  if (auto ok = backend->Open(); !ok) return tl::unexpected(ok.error());
  return backend;
}

}  // namespace tickd::lock
