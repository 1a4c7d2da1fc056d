// The ZooKeeper protocol (docs/backends.md, "ZooKeeper"). With B = <chroot>/tickd:
//
//   B/<job>/t/<T>     tick record, persistent: state running|done, owner token, node,
//                     config hash, lease_ms, fence; the winner's observation when its
//                     claim asked for one (obs_wall_ms, obs_fence); once done also
//                     outcome, exit, duration. Kept until Prune: a finished tick is
//                     never claimed again.
//   B/<job>/l/<T>     lease, EPHEMERAL (owner token, node, lease_ms): it dies with the
//                     holder's session. Renew rewrites it, so its mtime is the last
//                     renewal on the server's clock.
//   B/<job>/run       forbid marker, EPHEMERAL (owner token, T, node, hash).
//   B/<job>/head      the job's claim head, persistent: tick = the latest tick of the
//                     job ever claimed, node = who claimed it, epoch_ms. Its version
//                     counts the job's claims since the epoch.
//   B/<job>/o/<T>-<node>  ledger observations of the replicas that did not win,
//                     persistent (an older tickd: o/<T>/<node>, in a folder per tick).
//   B/<job>/out/<T>   what the finished run of T printed (Completion::output),
//                     persistent, created by complete's multi. Complete keeps the
//                     job's newest keep_outputs; Prune removes those past retention.
//   <chroot>/tickd-clients/<session id>  this session's scratch node, ephemeral.
//   <chroot>/tickd-pauses/<job>  `tickd pause` (JSON, lock/pause_record.h; job '*':
//                     every job), persistent. Read before each instant's claims.
//
// The server's clock. ZooKeeper has no "what time is it" call, but every write stamps
// the node's mtime with the server's wall clock (the leader's, in an ensemble). So
// "now" is a setData on our scratch node: the Stat it returns carries the server's
// time. Deadlines and lease expiry are judged on that clock, never the replica's.
//
// A lease is live while its node exists (the holder's session lives) AND
// mtime + lease_ms ≥ server now (the holder renewed in time). So a crashed holder
// loses it after `lease` at the latest (or at once when its session is closed), and a
// holder that is alive but stopped renewing (a hung watchdog) loses it like on every
// other backend. Session expiry is the second, independent way to lose it.
//
// claim, in the order of the Redis script (an existing record is the stronger answer):
//  −1. the request checks the clock (max_lead, docs/design.md §1 rule 15) and the
//      server's now (below) is before T + due_offset − max_lead → early, nothing
//      written: the replica's clock is ahead of the server's;
//   0. get the record and the head. known_tick above the head's tick (0 without a
//      head) → store-reset, holder_tick_unix = the head's tick, nothing written (not
//      even the job's folders: they are created just before the multi). The store
//      lost claims this replica saw (design.md §1 rule 12). Atomic with the claim:
//      a won claim's multi sets the head by the version read here (or creates it,
//      which fails when one appeared), so a head moved in between fails the multi.
//   1. done, or running and recover off → lost (the record names the
//      winner; holder_running = state is running). Running, recover on: lost while
//      its lease is live; otherwise re-claim below, unless now is past the lease's
//      expiry + starting_deadline (missed). When the lease node is already gone (the
//      session died) the moment it went is unknown; the deadline then counts from now.
//   2. no record and the head names a later tick → superseded (that tick and its
//      node): claims are monotonic per job. A head further than max_lead ahead of the
//      server's now judges by its `below` instead (lock/clock_check.h).
//   3. no record: missed when server now > T + starting_deadline.
//   4. forbid: the run node names another tick whose lease is live → busy.
//   5. one multi: create the record (or, re-claiming: check its version and set it
//      to the new owner, delete the dead lease node by version), create the
//      ephemeral lease node, replace a stale run node (delete by version + create),
//      and set the head by its version (tick only forward), or create it. The
//      head's version check makes the superseded decision atomic: a later tick
//      claimed in between fails the multi. The FENCE = epoch_ms << 11 + the head's
//      version after the multi + 1 (lock/backend.h), known before the multi and
//      written into the record. The epoch is the server's clock (the mtime of our
//      scratch node, "now" above) when the head is created: a server that comes back
//      with a fresh data directory, or a deleted tickd subtree, starts each job's
//      head at a later epoch, above every earlier fence (unless the leader's clock
//      was set back). Versions are int32: a head about to run out is deleted and
//      created again at a new epoch in the same multi. Records of an older tickd
//      carry no fence while running (theirs was the claim's zxid, their mzxid; far
//      below any epoch fence). ZNODEEXISTS / ZBADVERSION / ZNONODE mean another
//      replica got there first: read again (step 1).
//   Blind claims (BlindOps): a claim that the head this replica last saw (this
//   session) and the server's clock between readings (ClockBound) surely decide
//   as won is sent as its multi at once, without a read: create the record, check
//   the record of the head's tick, create the lease (and run) node, set the head by
//   the version seen. A blind claim that fails wrote nothing and is read and decided
//   like any other. A likely_decided claim (another replica's slice) is never blind:
//   it reads its record alone first (LeanDecides), and in full only when that record
//   does not answer lost by itself.
//   Batches (ClaimBatch, all claims of one instant): in waves holding at most one
//   claim per job (a job's ticks in the order given), each wave in chunks of 250, each
//   chunk in at most three round trips (ClaimChunk): the blind claims' multis with
//   one clock read (the scratch node's setData); every get of the claims still open
//   pipelined with one clock read, then the lease nodes a re-claim or a forbid check
//   needs; the won claims' multis, up to 50 claims to a multi (MultiEach), pipelined
//   with this replica's observations of the chunk's other outcomes
//   (ClaimRequest::observe), several to a multi. A multi is all
//   or nothing: a race lost on one job fails its bundle whole; that claim is read
//   again in the next wave, the bundle's others are sent again one multi each. The
//   server's group commit writes the pipelined multis with few fsyncs.
//   A single Claim is a batch of one.
//   Connection lost while the multi was in flight (ambiguous): once reconnected
//   within op_timeout, the lease node is ours only if it holds our token AND its
//   ephemeralOwner is our session id; then the fence is the record's. Else an Error.
// renew: get the lease node; ours (token and ephemeralOwner == our session)? setData
//   with its version. kLost when it is gone, not ours, the version moved, or the
//   server's time of the set is already past the old mtime + lease_ms; in that last
//   case the set made the node look renewed, so it is deleted (by the new version):
//   a lease that expired on the server's clock is never revived. Renewals that
//   arrive together (GroupCommit) share three pipelined rounds (RenewBatch): the
//   gets, the sets, the deletes of leases found expired.
// Session state bounds a lease too: on EXPIRED every lease of the session is lost
// (Renew says kLost; the handle is closed and a new session opened on the next call).
// While the client is CONNECTING, the server may expire the session once
// session_timeout passes without hearing from us, so Renew answers an Error (the
// watchdog retries) until 2/3 of the session timeout after the last answer we got,
// and kLost after that; the session is then given up (a new one connects in the
// background), so that a reconnect cannot revive it, and its lease nodes, on a
// server that was frozen rather than gone. With session_timeout ≥ 1.5 × lease the
// watchdog's own validity (t_sent + lease) ends first anyway.
// A connection lost for a whole session timeout: the next call gives the session up
// and opens a new one. No serving server holds it any more (one that ran meanwhile
// expired it), and a server that came back without its data refuses it for good: the
// handle's last seen zxid is above its own, and the client library would offer it
// forever. Safe, because a session's leases are only ever ours while it is the
// current one: Renew compares the lease node's ephemeralOwner with our session, so
// runs claimed under the old session hear lost. A new session recreates the roots
// (chroot, B, clients) before its first write: they may be gone with the data.
// refence (a retry's new fence): get the record, the lease node and the head, and
//   the server's clock; record ours and running, lease node ours and live? One multi:
//   check the lease node's version, set the record with the new fence (by version),
//   move the head by its version as a claim does (the fence counts the refence).
// complete: get the record (owner must be our token), the lease and the run node;
//   one multi: set the record to done (with its version) and delete the lease and
//   run nodes that still hold our token (each by version). Retried on a version race.
//   Completes that arrive together (lock/complete_batcher.h) share one pipelined read
//   and their multis go pipelined, several to a multi. A claim this replica won in
//   this session completes without the read (CompleteBlind): the same multi by the
//   versions its claim and renewals left; a version that moved sends it the read way.
// locks: ListRunning reads every record of every job (and its lease node) and judges
//   the lease on the server's clock. ForceRelease: one multi setting the record (by
//   version) to done, outcome "released", no owner (the old holder's Complete is
//   refused) and deleting the expired lease node by version (its Renew is refused);
//   a renewal in between moves the version and the release re-reads.
//
// Every call is async under the hood (zoo_a*), awaited against a deadline of
// op_timeout: the C client's sync calls can block for 2/3 of the session timeout on
// a silent server. A reply that arrives after the deadline is dropped.
#include "lock/zookeeper/zookeeper_backend.h"

#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <initializer_list>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "lock/claim_waves.h"
#include "lock/clock_check.h"
#include "lock/complete_batcher.h"
#include "lock/registry.h"
#include "lock/pause_record.h"

namespace tickd::lock {
namespace {

using std::chrono::steady_clock;
using Fields = std::map<std::string, std::string>;

constexpr int kMaxRaces = 5;  // re-reads after losing a version race, per call
// Claims per chunk of a batch: the reads and multis of a chunk are in flight together
// (the client's queue and the server's request queue hold them).
constexpr std::size_t kClaimsPerChunk = 250;
// Claims or completes whose ops go into one multi (MultiEach), and the most data one
// multi carries: far below jute.maxbuffer's 1 MB (a claim has 3–6 ops of ~200 bytes;
// a complete can carry a run's output, up to 64 KB).
constexpr std::size_t kItemsPerMulti = 50;
constexpr std::size_t kMultiBytes = 256 * 1024;

// How often the client resolves the server list's host names again (ZooKeeper's
// default: every poll of the socket).
constexpr int kResolveEveryMs = 60'000;

// A head version about to run out (int32): the head is created again at a new epoch.
constexpr int kLastHeadVersion = 0x7fff'fff0;

// key=value lines; values never hold a newline (tokens, node ids, hashes, numbers).
std::string Encode(const Fields& fields) {
  std::string out;
  for (const auto& [k, v] : fields) out += k + "=" + v + "\n";
  return out;
}

Fields Decode(std::string_view data) {
  Fields out;
  while (!data.empty()) {
    const auto nl = data.find('\n');
    const std::string_view line = data.substr(0, nl);
    data = nl == std::string_view::npos ? std::string_view() : data.substr(nl + 1);
    const auto eq = line.find('=');
    if (eq != std::string_view::npos) out.emplace(line.substr(0, eq), line.substr(eq + 1));
  }
  return out;
}

std::string Get(const Fields& f, const std::string& key) {
  auto it = f.find(key);
  return it == f.end() ? "" : it->second;
}

std::int64_t ToInt(std::string_view s) {
  std::int64_t v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

// A node name for a node id: '/' cannot appear in a znode name, and "." / ".." are
// reserved.
std::string NodeName(const std::string& node) {
  std::string out;
  for (char c : node) {
    if (c == '/') {
      out += "%2F";
    } else if (c == '%') {
      out += "%25";
    } else {
      out += c;
    }
  }
  if (out == "." || out == "..") out = "%2E" + out.substr(1);
  return out;
}

std::string NodeFromName(std::string_view name) {
  std::string out;
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (name[i] == '%' && i + 2 < name.size()) {
      const std::string_view hex = name.substr(i + 1, 2);
      out += hex == "2F" ? '/' : hex == "25" ? '%' : hex == "2E" ? '.' : '?';
      i += 2;
    } else {
      out += name[i];
    }
  }
  return out;
}

// A job's claim head as this replica last saw it: its version and its fields.
struct HeadSeen {
  int version = 0;
  Fields fields;
};

// What one async call answered.
struct Reply {
  int rc = ZOK;
  std::string value;                  // get: the data; create: the created path
  Stat stat{};                        // get / set / exists
  std::vector<std::string> children;  // get_children
  std::vector<int> op_errors;         // multi: per op
  std::vector<Stat> op_stats;         // multi: per op (set ops only)
};

// One multi operation, described by value (the library keeps pointers into it).
struct Op {
  enum Kind { kCreate, kDelete, kSet, kCheck } kind;
  std::string path;
  std::string data;
  int version = -1;
  int mode = 0;  // create: ZOO_PERSISTENT / ZOO_EPHEMERAL
};

// Calls issued together and awaited together. The completions run on the client's
// completion thread and may arrive after the caller gave up: they only touch the
// shared State, which lives until the last of them ran.
// The ACL of the nodes that zh's session creates (defined after Session).
const ACL_vector* CreateAcl(zhandle_t* zh);

class Batch {
 public:
  explicit Batch(zhandle_t* zh)
      : zh_(zh), acl_(CreateAcl(zh)), state_(std::make_shared<State>()) {}

  std::size_t Get(const std::string& path) {
    return Issue([&](Slot* slot) { return zoo_aget(zh_, path.c_str(), 0, &OnData, slot); });
  }
  std::size_t Set(const std::string& path, const std::string& data, int version) {
    return Issue([&](Slot* slot) {
      return zoo_aset(zh_, path.c_str(), data.data(), static_cast<int>(data.size()), version,
                      &OnStat, slot);
    });
  }
  std::size_t Create(const std::string& path, const std::string& data, int mode) {
    return Issue([&](Slot* slot) {
      return zoo_acreate(zh_, path.c_str(), data.data(), static_cast<int>(data.size()),
                         acl_, mode, &OnString, slot);
    });
  }
  std::size_t Delete(const std::string& path, int version) {
    return Issue(
        [&](Slot* slot) { return zoo_adelete(zh_, path.c_str(), version, &OnVoid, slot); });
  }
  std::size_t Exists(const std::string& path) {
    return Issue([&](Slot* slot) { return zoo_aexists(zh_, path.c_str(), 0, &OnStat, slot); });
  }
  std::size_t Children(const std::string& path) {
    return Issue(
        [&](Slot* slot) { return zoo_aget_children(zh_, path.c_str(), 0, &OnStrings, slot); });
  }
  // At most one multi per Batch.
  std::size_t Multi(std::vector<Op> ops) {
    State& s = *state_;
    s.ops = std::move(ops);
    const std::size_t n = s.ops.size();
    s.zops.resize(n);
    s.results.resize(n);
    s.stats.resize(n);
    s.path_bufs.assign(n, std::vector<char>(1024));
    for (std::size_t k = 0; k < n; ++k) {
      const Op& op = s.ops[k];
      const int len = static_cast<int>(op.data.size());
      switch (op.kind) {
        case Op::kCreate:
          zoo_create_op_init(&s.zops[k], op.path.c_str(), op.data.data(), len, acl_, op.mode,
                             s.path_bufs[k].data(), static_cast<int>(s.path_bufs[k].size()));
          break;
        case Op::kDelete:
          zoo_delete_op_init(&s.zops[k], op.path.c_str(), op.version);
          break;
        case Op::kSet:
          zoo_set_op_init(&s.zops[k], op.path.c_str(), op.data.data(), len, op.version,
                          &s.stats[k]);
          break;
        case Op::kCheck:
          zoo_check_op_init(&s.zops[k], op.path.c_str(), op.version);
          break;
      }
    }
    return Issue([&](Slot* slot) {
      return zoo_amulti(zh_, static_cast<int>(n), s.zops.data(), s.results.data(), &OnMulti, slot);
    });
  }

  // True when every call answered before `deadline`.
  bool Wait(steady_clock::time_point deadline) {
    std::unique_lock lock(state_->mu);
    return state_->cv.wait_until(lock, deadline, [&] { return state_->outstanding == 0; });
  }

  // REQUIRES: Wait returned true. True when the server itself answered every call.
  // The client fails pending calls with a system error (ZCONNECTIONLOSS, ...) when it
  // drops a silent connection; those replies are no sign the session is alive.
  bool ServerAnswered() const {
    return std::all_of(state_->replies.begin(), state_->replies.end(),
                       [](const Reply& r) { return r.rc == ZOK || r.rc <= ZAPIERROR; });
  }

  // REQUIRES: Wait returned true.
  const Reply& operator[](std::size_t i) const { return state_->replies[i]; }

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    int outstanding = 0;
    std::deque<Reply> replies;  // deque: completions write while the caller adds
    // The multi's buffers: the library writes results into them on completion.
    std::vector<Op> ops;
    std::vector<zoo_op_t> zops;
    std::vector<zoo_op_result_t> results;
    std::vector<Stat> stats;
    std::vector<std::vector<char>> path_bufs;
  };
  struct Slot {
    std::shared_ptr<State> state;
    std::size_t index;
  };

  // Adds a reply slot and issues the call. A call the library refuses at once
  // (ZINVALIDSTATE, ZBADARGUMENTS…) never completes: its reply is the refusal.
  template <typename Call>
  std::size_t Issue(Call call) {
    std::size_t i = 0;
    {
      std::lock_guard lock(state_->mu);
      state_->replies.emplace_back();
      ++state_->outstanding;
      i = state_->replies.size() - 1;
    }
    auto slot = std::make_unique<Slot>(Slot{state_, i});
    const int rc = call(slot.get());
    if (rc == ZOK) {
      slot.release();  // the completion owns it now
      return i;
    }
    std::lock_guard lock(state_->mu);
    state_->replies[i].rc = rc;
    --state_->outstanding;
    return i;
  }

  // Takes ownership of the slot, lets `fill` write the reply, signals the waiter.
  template <typename Fill>
  static void Complete(const void* data, int rc, Fill fill) {
    std::unique_ptr<Slot> slot(static_cast<Slot*>(const_cast<void*>(data)));
    State& s = *slot->state;
    std::lock_guard lock(s.mu);
    Reply& r = s.replies[slot->index];
    r.rc = rc;
    if (rc == ZOK) fill(r, s);
    if (--s.outstanding == 0) s.cv.notify_all();  // the waiter waits for all
  }

  static void OnData(int rc, const char* value, int len, const Stat* stat, const void* data) {
    Complete(data, rc, [&](Reply& r, State&) {
      if (value != nullptr && len > 0) r.value.assign(value, static_cast<std::size_t>(len));
      if (stat != nullptr) r.stat = *stat;
    });
  }
  static void OnStat(int rc, const Stat* stat, const void* data) {
    Complete(data, rc, [&](Reply& r, State&) {
      if (stat != nullptr) r.stat = *stat;
    });
  }
  static void OnString(int rc, const char* value, const void* data) {
    Complete(data, rc, [&](Reply& r, State&) {
      if (value != nullptr) r.value = value;
    });
  }
  static void OnVoid(int rc, const void* data) {
    Complete(data, rc, [](Reply&, State&) {});
  }
  static void OnStrings(int rc, const String_vector* strings, const void* data) {
    Complete(data, rc, [&](Reply& r, State&) {
      for (int k = 0; strings != nullptr && k < strings->count; ++k) {
        r.children.emplace_back(strings->data[k]);
      }
    });
  }
  static void OnMulti(int rc, const void* data) {
    // The per-op errors matter on failure too (which op failed), so fill always.
    std::unique_ptr<Slot> slot(static_cast<Slot*>(const_cast<void*>(data)));
    State& s = *slot->state;
    std::lock_guard lock(s.mu);
    Reply& r = s.replies[slot->index];
    r.rc = rc;
    for (std::size_t k = 0; k < s.results.size(); ++k) {
      r.op_errors.push_back(s.results[k].err);
      r.op_stats.push_back(s.stats[k]);
    }
    if (--s.outstanding == 0) s.cv.notify_all();  // the waiter waits for all
  }

  zhandle_t* zh_;
  const ACL_vector* acl_;
  std::shared_ptr<State> state_;
};

// The watcher's view of one session (the watcher context; outlives its handle).
struct Session {
  std::mutex mu;
  std::condition_variable cv;
  int state = 0;  // the last ZOO_*_STATE seen
  // When the connection of a session that had connected was lost, while it is not
  // connected again.
  std::optional<steady_clock::time_point> lost_at;
  // Authenticated (digest): nodes are created with ZOO_CREATOR_ALL_ACL, so that only
  // sessions with the same credentials can read, change or delete them. Otherwise
  // open, and the ensemble's network is the only protection.
  bool authenticated = false;
};

const ACL_vector* CreateAcl(zhandle_t* zh) {
  const auto* session = static_cast<const Session*>(zoo_get_context(zh));
  return session != nullptr && session->authenticated ? &ZOO_CREATOR_ALL_ACL
                                                      : &ZOO_OPEN_ACL_UNSAFE;
}

void Watcher(zhandle_t*, int type, int state, const char*, void* ctx) {
  if (type != ZOO_SESSION_EVENT || ctx == nullptr) return;
  auto* session = static_cast<Session*>(ctx);
  std::lock_guard lock(session->mu);
  if (state == ZOO_CONNECTED_STATE) {
    session->lost_at.reset();
  } else if (session->state == ZOO_CONNECTED_STATE) {
    session->lost_at = steady_clock::now();
  }
  session->state = state;
  session->cv.notify_all();
}

// The C client logs connection errors to stderr; a replica's stderr is its log, where
// only tickd's own lines belong. Its failures reach the caller as Errors instead.
void DropLog(const char*) {}

struct HandleCloser {
  void operator()(zhandle_t* zh) const { zookeeper_close(zh); }
};
using HandlePtr = std::unique_ptr<zhandle_t, HandleCloser>;

class ZookeeperBackend final : public Backend {
 public:
  ZookeeperBackend(const ZookeeperOptions& options, ZookeeperEndpoint endpoint)
      : options_(options),
        endpoint_(std::move(endpoint)),
        base_(endpoint_.chroot + "/tickd"),
        clients_(endpoint_.chroot + "/tickd-clients"),
        pauses_(endpoint_.chroot + "/tickd-pauses"),
        roots_(Roots(endpoint_.chroot, base_, clients_, pauses_)),
        context_("zookeeper " + RedactUrl(options.url)) {}

  ~ZookeeperBackend() override {
    std::lock_guard lock(mu_);
    CloseLocked();
  }

  Result<void> Open() {
    std::lock_guard lock(mu_);
    const auto deadline = steady_clock::now() + options_.op_timeout;
    if (auto ok = ConnectLocked(deadline); !ok) return ok;
    return CreateAll(roots_, deadline);
  }

  std::string_view name() const override { return "zookeeper"; }

  std::vector<std::string> StartupWarnings() override {
    std::lock_guard lock(mu_);
    if (!zh_) return {};
    const int negotiated = zoo_recv_timeout(zh_.get());
    std::vector<std::string> out;
    if (negotiated > 0 && negotiated < options_.session_timeout.count()) {
      out.push_back(context_ + ": the server granted a session timeout of " +
                    std::to_string(negotiated) + "ms (asked " +
                    std::to_string(options_.session_timeout.count()) +
                    "ms): a lease longer than 2/3 of it is cut short while disconnected "
                    "(raise maxSessionTimeout on the servers)");
    }
    return out;
  }

  // Every znode lives in the servers' heap (docs/stores.md, ZooKeeper, "Sizing"): the
  // tick records, observations and outputs the last Prune left, counted as it listed
  // them. Nothing before the first prune.
  std::vector<std::string> SizeWarnings() override {
    const long znodes = znodes_after_prune_;
    if (znodes <= options_.znodes_warn) return {};
    return {context_ + ": ZooKeeper holds " + std::to_string(znodes) +
            " of tickd's znodes after the last prune, about " + std::to_string(znodes / 2'000) +
            " MB of its servers' heap (~500 bytes each, an estimate): give the servers the "
            "heap (-Xmx) or lower lock.retention (docs/stores.md)"};
  }

  Result<ClaimOutcome> Claim(const ClaimRequest& req) override {
    return std::move(ClaimBatch(std::span<const ClaimRequest>(&req, 1)).front());
  }

  std::vector<Result<ClaimOutcome>> ClaimBatch(std::span<const ClaimRequest> reqs) override {
    return CollectAnswers(*this, reqs);
  }

  void ClaimBatchAsAnswered(std::span<const ClaimRequest> reqs,
                            const ClaimAnswer& on_answer) override {
    std::lock_guard lock(mu_);
    if (auto ok = ReadyLocked(steady_clock::now() + options_.op_timeout); !ok) {
      for (std::size_t i = 0; i < reqs.size(); ++i) on_answer(i, tl::unexpected(ok.error()));
      return;
    }
    ClaimInWaves(reqs, ChunkLimit{kClaimsPerChunk}, kMaxRaces, on_answer,
                 Error{context_ + ": claim", "kept losing version races; try again"},
                 [&](std::span<const std::size_t> chunk, std::optional<Error>& failed) {
                   return ClaimChunk(reqs, chunk, on_answer, failed);
                 });
  }

  // Renewals that arrive together (GroupCommit) share their round trips.
  Result<RenewStatus> Renew(const HeldClaim& held) override { return renewer_.Submit(held); }

  // Every renewal as a single one would be, in three pipelined rounds: the lease nodes'
  // gets; the sets of those ours, each by its version; the deletes of those the set
  // found already expired. A lease renewed twice in one batch is renewed once, both
  // callers getting its answer.
  std::vector<Result<RenewStatus>> RenewBatch(std::span<const HeldClaim> helds) {
    std::lock_guard lock(mu_);
    const auto deadline = steady_clock::now() + options_.op_timeout;
    const int state = SessionState();
    if (!zh_ || state == ZOO_EXPIRED_SESSION_STATE) {
      // Every lease of the old session is gone; the next call opens a new one.
      return std::vector<Result<RenewStatus>>(helds.size(), RenewStatus::kLost);
    }
    if (state != ZOO_CONNECTED_STATE) {
      // A session not yet adopted holds no lease: this one was of a session given up.
      if (!adopted_) return std::vector<Result<RenewStatus>>(helds.size(), RenewStatus::kLost);
      const auto limit = last_contact_ + milliseconds(zoo_recv_timeout(zh_.get()) * 2 / 3);
      if (steady_clock::now() < limit) {
        return std::vector<Result<RenewStatus>>(
            helds.size(),
            MakeError(context_ + ": renew", "not connected (the session may still live)"));
      }
      AbandonSessionLocked();
      return std::vector<Result<RenewStatus>>(helds.size(), RenewStatus::kLost);
    }
    std::vector<Result<RenewStatus>> out(helds.size(), RenewStatus::kLost);
    std::map<std::tuple<std::string, std::int64_t, std::string>, std::size_t> first;
    std::vector<std::size_t> same(helds.size());  // the renewal that answers for each
    std::vector<std::size_t> renewing;
    std::vector<std::string> paths;
    Batch read(zh_.get());
    for (std::size_t i = 0; i < helds.size(); ++i) {
      const HeldClaim& held = helds[i];
      const auto [it, fresh] =
          first.emplace(std::tuple(held.job, held.tick_unix, held.owner_token), i);
      same[i] = it->second;
      if (!fresh) continue;
      renewing.push_back(i);
      paths.push_back(Path(held.job, "l", held.tick_unix));
      read.Get(paths.back());
    }
    if (auto ok = Await(read, deadline, "renew"); !ok) {
      return std::vector<Result<RenewStatus>>(helds.size(), tl::unexpected(ok.error()));
    }
    Batch write(zh_.get());
    std::vector<std::pair<std::size_t, std::size_t>> sets;  // (position in renewing, slot)
    for (std::size_t n = 0; n < renewing.size(); ++n) {
      const HeldClaim& held = helds[renewing[n]];
      if (read[n].rc == ZNONODE) continue;  // lost
      if (read[n].rc != ZOK) {
        out[renewing[n]] = Failure("renew", read[n].rc);
      } else if (Ours(read[n], held.owner_token)) {
        Fields lease = Decode(read[n].value);
        lease["lease_ms"] = std::to_string(held.lease.count());
        sets.emplace_back(n, write.Set(paths[n], Encode(lease), read[n].stat.version));
      }
    }
    if (auto ok = Await(write, deadline, "renew"); !ok) {
      for (const auto& [n, slot] : sets) out[renewing[n]] = tl::unexpected(ok.error());
    } else {
      Batch drop(zh_.get());
      for (const auto& [n, slot] : sets) {
        const HeldClaim& held = helds[renewing[n]];
        const Reply& set = write[slot];
        if (set.rc == ZNONODE || set.rc == ZBADVERSION) {
          holding_.erase({held.job, held.tick_unix});
          continue;  // lost
        }
        if (set.rc != ZOK) {
          out[renewing[n]] = Failure("renew", set.rc);
          continue;
        }
        const std::int64_t old_until =
            read[n].stat.mtime + ToInt(Get(Decode(read[n].value), "lease_ms"));
        if (set.stat.mtime <= old_until) {
          if (auto it = holding_.find({held.job, held.tick_unix});
              it != holding_.end() && it->second.owner == held.owner_token) {
            it->second.lease_version = set.stat.version;
          }
          out[renewing[n]] = RenewStatus::kRenewed;
          continue;
        }
        holding_.erase({held.job, held.tick_unix});
        // Too late: the lease had run out on the server's clock before this renewal,
        // but the set gave the node a fresh mtime, so it would look live again to a
        // replica about to re-claim the tick. An expired lease is never revived (the
        // backend contract): the node goes, by the version the set gave it. Best
        // effort: if the delete gets no answer, the node runs out again one lease later.
        drop.Delete(paths[n], set.stat.version);
      }
      (void)Await(drop, deadline, "renew");
    }
    for (std::size_t i = 0; i < helds.size(); ++i) {
      if (same[i] != i) out[i] = out[same[i]];
    }
    return out;
  }

  // A retry's new fence: read the record, the lease node and the head (pipelined) and
  // the server's clock; ours (record running with our token, lease node ours and live
  // on the server's clock)? One multi: check the lease node's version, set the record
  // with the new fence by its version, and move the head as a claim does (MoveHead: its
  // version counts this refence too). A version race reads again.
  Result<RefenceOutcome> Refence(const HeldClaim& held) override {
    std::lock_guard lock(mu_);
    const auto deadline = steady_clock::now() + options_.op_timeout;
    if (auto ok = ReadyLocked(deadline); !ok) return tl::unexpected(ok.error());
    const std::string record_path = Path(held.job, "t", held.tick_unix);
    const std::string lease_path = Path(held.job, "l", held.tick_unix);
    const std::string head_path = base_ + "/" + held.job + "/head";
    for (int race = 0; race < kMaxRaces; ++race) {
      auto nodes = ReadTickNodes(record_path, lease_path, head_path, deadline, "refence");
      if (!nodes) return tl::unexpected(nodes.error());
      const Batch& read = *nodes;
      if (read[0].rc == ZNONODE || read[1].rc == ZNONODE) return RefenceOutcome{};
      Fields record = Decode(read[0].value);
      if (Get(record, "state") != "running" || Get(record, "owner") != held.owner_token ||
          !Ours(read[1], held.owner_token)) {
        return RefenceOutcome{};
      }
      auto now = ServerNow(deadline);
      if (!now) return tl::unexpected(now.error());
      if (!Live(read[1], *now)) return RefenceOutcome{};
      ClaimRequest as_claim;  // the head as a claim of this tick would move it
      as_claim.job = held.job;
      as_claim.tick_unix = held.tick_unix;
      as_claim.node = Get(record, "node");
      std::vector<Op> ops = {{Op::kCheck, lease_path, "", read[1].stat.version},
                             {Op::kSet, record_path, "", read[0].stat.version}};
      const Fields head_fields = read[2].rc == ZOK ? Decode(read[2].value) : Fields{};
      const std::uint64_t fence = MoveHead(as_claim, read[2], head_fields, head_path, *now, ops);
      record["fence"] = std::to_string(fence);
      ops[1].data = Encode(record);
      auto applied = EndTick(std::move(ops), deadline, "refence");
      if (!applied) return tl::unexpected(applied.error());
      if (*applied) {
        head_seen_.erase(held.job);  // its version moved
        holding_.erase({held.job, held.tick_unix});  // and the record's
        return RefenceOutcome{RefenceStatus::kRefenced, fence};
      }
    }
    return MakeError(context_ + ": refence", "kept losing version races; try again");
  }

  // Runs that end together share one CompleteBatch (lock/complete_batcher.h).
  Result<CompleteStatus> Complete(const HeldClaim& held, const Completion& completion) override {
    return completer_.Complete(held, completion);
  }

  // Every complete as a single one did, in rounds: the record, lease and run nodes of
  // every complete in one pipelined read, then each complete's ops all or nothing on
  // their own, several completes to a multi (MultiEach). A complete that lost a version
  // race is read again in the next round, at most kMaxRaces.
  std::vector<Result<CompleteStatus>> CompleteBatch(
      std::span<const CompleteRequest> reqs) override {
    std::lock_guard lock(mu_);
    std::vector<Result<CompleteStatus>> out(
        reqs.size(), MakeError(context_ + ": complete", "kept losing version races; try again"));
    const auto deadline = steady_clock::now() + options_.op_timeout;
    if (auto ok = ReadyLocked(deadline); !ok) {
      for (auto& o : out) o = tl::unexpected(ok.error());
      return out;
    }
    std::vector<std::size_t> pending = CompleteBlind(reqs, out, deadline);
    for (int race = 0; race < kMaxRaces && !pending.empty(); ++race) {
      Batch read(zh_.get());
      for (const std::size_t i : pending) {
        const HeldClaim& held = reqs[i].held;
        read.Get(Path(held.job, "t", held.tick_unix));
        read.Get(Path(held.job, "l", held.tick_unix));
        read.Get(base_ + "/" + held.job + "/run");
      }
      if (auto ok = Await(read, deadline, "complete"); !ok) {
        for (const std::size_t i : pending) out[i] = tl::unexpected(ok.error());
        return out;
      }
      std::vector<std::size_t> writing;
      std::vector<std::vector<Op>> items;  // writing's multis' ops
      for (std::size_t n = 0; n < pending.size(); ++n) {
        const std::size_t i = pending[n];
        const auto& [held, completion] = reqs[i];
        const Reply& record_node = read[3 * n];
        const Reply& lease = read[3 * n + 1];
        const Reply& run = read[3 * n + 2];
        if (const int rc = FirstFailure({&record_node, &lease, &run}); rc != ZOK) {
          out[i] = Failure("complete", rc);
          continue;
        }
        if (record_node.rc == ZNONODE) {
          out[i] = CompleteStatus::kNotOwner;
          continue;
        }
        Fields record = Decode(record_node.value);
        if (Get(record, "owner") != held.owner_token) {
          out[i] = CompleteStatus::kNotOwner;
          continue;
        }
        if (Get(record, "state") == "done") {
          out[i] = CompleteStatus::kCompleted;
          continue;
        }
        record["state"] = "done";
        record["outcome"] = completion.outcome;
        record["exit"] = completion.exit_code ? std::to_string(*completion.exit_code) : "";
        record["duration_ms"] = std::to_string(completion.duration.count());
        record["fence"] = std::to_string(held.fence);
        std::vector<Op> ops = {{Op::kSet, Path(held.job, "t", held.tick_unix), Encode(record),
                                record_node.stat.version}};
        if (lease.rc == ZOK && Get(Decode(lease.value), "owner") == held.owner_token) {
          ops.push_back({Op::kDelete, Path(held.job, "l", held.tick_unix), "", lease.stat.version});
        }
        if (run.rc == ZOK && Get(Decode(run.value), "owner") == held.owner_token) {
          ops.push_back({Op::kDelete, base_ + "/" + held.job + "/run", "", run.stat.version});
        }
        if (const std::string_view output = OutputToStore(completion.output); !output.empty()) {
          ops.push_back({Op::kCreate, Path(held.job, "out", held.tick_unix), std::string(output),
                         -1, ZOO_PERSISTENT});
        }
        items.push_back(std::move(ops));
        writing.push_back(i);
      }
      const std::vector<std::optional<int>> written = MultiEach(std::move(items), deadline);
      std::vector<std::size_t> retry;
      for (std::size_t w = 0; w < writing.size(); ++w) {
        const std::size_t i = writing[w];
        if (!written[w]) {
          out[i] =
              MakeError(context_ + ": complete",
                        "no answer within " + std::to_string(options_.op_timeout.count()) + "ms");
        } else if (*written[w] == ZOK) {
          out[i] = CompleteStatus::kCompleted;
        } else if (IsRace(*written[w])) {
          retry.push_back(i);
        } else {
          out[i] = Failure("complete", *written[w]);
        }
      }
      pending = std::move(retry);
    }
    KeepNewestOutputs(reqs, out, deadline);
    return out;
  }

  Result<std::vector<std::string>> Outputs(std::string_view job,
                                           std::span<const std::int64_t> ticks) override {
    std::lock_guard lock(mu_);
    const auto deadline = steady_clock::now() + options_.op_timeout;
    if (auto ok = ReadyLocked(deadline); !ok) return tl::unexpected(ok.error());
    Batch reads(zh_.get());
    for (const std::int64_t tick : ticks) reads.Get(Path(std::string(job), "out", tick));
    if (auto ok = Await(reads, deadline, "outputs"); !ok) return tl::unexpected(ok.error());
    std::vector<std::string> out;
    for (std::size_t i = 0; i < ticks.size(); ++i) {
      if (reads[i].rc != ZOK && reads[i].rc != ZNONODE) return Failure("outputs", reads[i].rc);
      out.push_back(reads[i].rc == ZOK ? reads[i].value : std::string());
    }
    return out;
  }

  Result<void> Record(const Observation& obs) override {
    std::lock_guard lock(mu_);
    const auto deadline = steady_clock::now() + options_.op_timeout;
    if (auto ok = ReadyLocked(deadline); !ok) return ok;
    return std::move(RecordAll({obs}, deadline).front());
  }

  Result<std::vector<TickHistory>> History(std::string_view job, int limit) override {
    std::lock_guard lock(mu_);
    const auto deadline = steady_clock::now() + options_.op_timeout;
    if (auto ok = ReadyLocked(deadline); !ok) return tl::unexpected(ok.error());
    auto jobs = Jobs(job, deadline);
    if (!jobs) return tl::unexpected(jobs.error());
    // Every tick of every job that has a record or observations, newest first.
    Batch lists(zh_.get());
    for (const std::string& j : *jobs) {
      lists.Children(base_ + "/" + j + "/t");
      lists.Children(base_ + "/" + j + "/o");
    }
    if (auto ok = Await(lists, deadline, "history"); !ok) return tl::unexpected(ok.error());
    // (T, job) → its observation nodes' names, and whether an older tickd's folder
    // o/<T> holds more (docs/backends.md "ZooKeeper": both layouts).
    struct Observed {
      std::vector<std::string> names;
      bool folder = false;
    };
    std::map<std::pair<std::int64_t, std::string>, Observed> ticks;
    for (std::size_t j = 0; j < jobs->size(); ++j) {
      for (std::size_t k = 0; k < 2; ++k) {
        const Reply& r = lists[2 * j + k];
        if (r.rc != ZOK && r.rc != ZNONODE) return Failure("history", r.rc);
        for (const std::string& t : r.children) {
          if (k == 0) {
            ticks[{ToInt(t), (*jobs)[j]}];
            continue;
          }
          const ObservedName o = ParseObserved(t);
          Observed& seen = ticks[{o.tick, (*jobs)[j]}];
          if (o.folder) {
            seen.folder = true;
          } else {
            seen.names.push_back(t);
          }
        }
      }
    }
    std::vector<std::pair<std::int64_t, std::string>> keys;
    for (const auto& [key, seen] : ticks) keys.push_back(key);
    std::sort(keys.begin(), keys.end(), [](const auto& a, const auto& b) {
      return std::tie(b.first, a.second) < std::tie(a.first, b.second);
    });
    if (limit >= 0 && keys.size() > static_cast<std::size_t>(limit)) keys.resize(limit);

    // The records, the observation nodes, and the older folders' listings: one round
    // trip; a second only for the nodes inside older folders.
    Batch details(zh_.get());
    std::vector<std::size_t> records(keys.size());
    std::vector<std::size_t> folders(keys.size(), SIZE_MAX);
    std::vector<std::vector<std::pair<std::string, std::size_t>>> obs_index(keys.size());
    for (std::size_t k = 0; k < keys.size(); ++k) {
      const auto& [tick, j] = keys[k];
      const Observed& seen = ticks[keys[k]];
      records[k] = details.Get(Path(j, "t", tick));
      for (const std::string& name : seen.names) {
        const std::string node = NodeFromName(name.substr(name.find('-') + 1));
        obs_index[k].emplace_back(node, details.Get(base_ + "/" + j + "/o/" + name));
      }
      if (seen.folder) folders[k] = details.Children(Path(j, "o", tick));
    }
    if (auto ok = Await(details, deadline, "history"); !ok) return tl::unexpected(ok.error());
    Batch older(zh_.get());
    std::vector<std::vector<std::pair<std::string, std::size_t>>> older_index(keys.size());
    for (std::size_t k = 0; k < keys.size(); ++k) {
      if (folders[k] == SIZE_MAX) continue;
      for (const std::string& name : details[folders[k]].children) {
        older_index[k].emplace_back(
            NodeFromName(name), older.Get(Path(keys[k].second, "o", keys[k].first) + "/" + name));
      }
    }
    if (auto ok = Await(older, deadline, "history"); !ok) return tl::unexpected(ok.error());

    std::vector<TickHistory> out;
    for (std::size_t k = 0; k < keys.size(); ++k) {
      TickHistory h;
      h.tick_unix = keys[k].first;
      h.job = keys[k].second;
      // By node: an older folder's, then a node of its own — the later layout wins
      // when a replica wrote both — and the record's (the winner's) as
      // AddClaimerObservation keeps it.
      std::map<std::string, Observation> by_node;
      std::optional<Observation> claimer;
      const Reply& rec = details[records[k]];
      if (rec.rc == ZOK) {
        const Fields f = Decode(rec.value);
        h.winner = Get(f, "node");
        h.state = Get(f, "state");
        h.run_outcome = Get(f, "outcome");
        if (const std::string exit = Get(f, "exit"); !exit.empty()) h.exit_code = ToInt(exit);
        h.duration = milliseconds(ToInt(Get(f, "duration_ms")));
        h.fence = FenceOf(f, rec);
        h.config_hash = Get(f, "hash");
        claimer = ObservationInRecord(h.job, h.tick_unix, f);
      }
      for (const auto* index : {&older_index[k], &obs_index[k]}) {
        const Batch& from = index == &older_index[k] ? older : details;
        for (const auto& [node, slot] : *index) {
          if (from[slot].rc != ZOK) continue;
          const Fields f = Decode(from[slot].value);
          Observation o;
          o.job = h.job;
          o.tick_unix = h.tick_unix;
          o.node = node;
          o.outcome = Get(f, "outcome");
          o.node_wall = WallTime(milliseconds(ToInt(Get(f, "wall_ms"))));
          o.config_hash = Get(f, "hash");
          o.fence = static_cast<std::uint64_t>(ToInt(Get(f, "fence")));
          by_node[node] = std::move(o);
        }
      }
      for (auto& [node, o] : by_node) h.observations.push_back(std::move(o));
      if (claimer) AddClaimerObservation(h.observations, std::move(*claimer));
      if (rec.rc != ZOK && h.observations.empty()) continue;  // pruned meanwhile
      out.push_back(std::move(h));
    }
    return out;
  }

  Result<int> Prune(WallTime older_than) override {
    std::lock_guard lock(mu_);
    // Pruning walks every old tick: give it more room than one claim.
    const auto deadline = steady_clock::now() + options_.op_timeout * 5;
    if (auto ok = ReadyLocked(deadline); !ok) return tl::unexpected(ok.error());
    const std::int64_t cutoff =
        std::chrono::duration_cast<std::chrono::seconds>(older_than.time_since_epoch()).count();
    auto jobs = Jobs("", deadline);
    if (!jobs) return tl::unexpected(jobs.error());
    auto now = ServerNow(deadline);
    if (!now) return tl::unexpected(now.error());
    int removed = 0;
    long staying = 0;  // znodes at or after the cutoff (SizeWarnings)
    for (const std::string& job : *jobs) {
      Batch lists(zh_.get());
      lists.Children(base_ + "/" + job + "/t");
      lists.Children(base_ + "/" + job + "/o");
      lists.Children(base_ + "/" + job + "/out");
      if (auto ok = Await(lists, deadline, "prune"); !ok) return tl::unexpected(ok.error());
      std::set<std::int64_t> old_records, old_observed;  // old_observed: older folders
      std::vector<std::pair<std::int64_t, std::string>> old_nodes;  // observation nodes
      for (const std::string& t : lists[0].children) {
        if (ToInt(t) < cutoff) old_records.insert(ToInt(t));
      }
      staying += static_cast<long>(lists[0].children.size() - old_records.size() +
                                   lists[1].children.size() + lists[2].children.size());
      for (const std::string& t : lists[1].children) {
        const ObservedName o = ParseObserved(t);
        if (o.tick >= cutoff) continue;
        --staying;
        if (o.folder) {
          old_observed.insert(o.tick);
        } else {
          old_nodes.emplace_back(o.tick, t);
        }
      }
      Batch reads(zh_.get());
      std::vector<std::int64_t> order(old_records.begin(), old_records.end());
      for (std::int64_t t : order) {
        reads.Get(Path(job, "t", t));
        reads.Get(Path(job, "l", t));
      }
      for (std::int64_t t : old_observed) reads.Children(Path(job, "o", t));
      if (auto ok = Await(reads, deadline, "prune"); !ok) return tl::unexpected(ok.error());
      Batch deletes(zh_.get());
      std::vector<std::size_t> record_deletes;
      std::set<std::int64_t> kept;
      for (std::size_t i = 0; i < order.size(); ++i) {
        const Reply& rec = reads[2 * i];
        const Reply& lease = reads[2 * i + 1];
        if (rec.rc != ZOK) continue;
        if (Get(Decode(rec.value), "state") == "running" && lease.rc == ZOK && Live(lease, *now)) {
          kept.insert(order[i]);
          continue;
        }
        record_deletes.push_back(deletes.Delete(Path(job, "t", order[i]), rec.stat.version));
      }
      std::size_t i = 2 * order.size();
      for (std::int64_t t : old_observed) {
        const Reply& children = reads[i++];
        if (kept.contains(t)) continue;
        for (const std::string& name : children.children) {
          deletes.Delete(Path(job, "o", t) + "/" + name, -1);
        }
        deletes.Delete(Path(job, "o", t), -1);
      }
      for (const auto& [t, name] : old_nodes) {
        if (!kept.contains(t)) deletes.Delete(base_ + "/" + job + "/o/" + name, -1);
      }
      // Outputs belong to done ticks only: those before the cutoff go.
      for (const std::string& t : lists[2].children) {
        if (ToInt(t) >= cutoff) continue;
        deletes.Delete(Path(job, "out", ToInt(t)), -1);
        --staying;
      }
      if (auto ok = Await(deletes, deadline, "prune"); !ok) return tl::unexpected(ok.error());
      for (std::size_t d : record_deletes) removed += deletes[d].rc == ZOK ? 1 : 0;
    }
    znodes_after_prune_ = staying;
    return removed;
  }

  Result<std::vector<RunningClaim>> ListRunning() override {
    std::lock_guard lock(mu_);
    // Walks every record of every job: give it the room of Prune.
    const auto deadline = steady_clock::now() + options_.op_timeout * 5;
    if (auto ok = ReadyLocked(deadline); !ok) return tl::unexpected(ok.error());
    auto jobs = Jobs("", deadline);
    if (!jobs) return tl::unexpected(jobs.error());
    Batch lists(zh_.get());
    for (const std::string& job : *jobs) lists.Children(base_ + "/" + job + "/t");
    if (auto ok = Await(lists, deadline, "list running"); !ok) return tl::unexpected(ok.error());
    std::vector<std::pair<std::string, std::int64_t>> keys;  // (job, T)
    for (std::size_t j = 0; j < jobs->size(); ++j) {
      if (lists[j].rc != ZOK && lists[j].rc != ZNONODE) return Failure("list running", lists[j].rc);
      for (const std::string& t : lists[j].children) keys.emplace_back((*jobs)[j], ToInt(t));
    }
    Batch reads(zh_.get());
    for (const auto& [job, tick] : keys) {
      reads.Get(Path(job, "t", tick));
      reads.Get(Path(job, "l", tick));
    }
    if (auto ok = Await(reads, deadline, "list running"); !ok) return tl::unexpected(ok.error());
    auto now = ServerNow(deadline);
    if (!now) return tl::unexpected(now.error());
    std::vector<RunningClaim> out;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      const Reply& rec = reads[2 * i];
      const Reply& lease = reads[2 * i + 1];
      if (rec.rc != ZOK) continue;
      const Fields f = Decode(rec.value);
      if (Get(f, "state") != "running") continue;
      RunningClaim c;
      c.job = keys[i].first;
      c.tick_unix = keys[i].second;
      c.node = Get(f, "node");
      c.fence = FenceOf(f, rec);
      c.config_hash = Get(f, "hash");
      const std::int64_t until =
          lease.rc == ZOK ? lease.stat.mtime + ToInt(Get(Decode(lease.value), "lease_ms")) : 0;
      c.holder_alive = lease.rc == ZOK && Live(lease, *now);
      c.lease_left = milliseconds(c.holder_alive ? std::max<std::int64_t>(0, until - *now) : 0);
      out.push_back(std::move(c));
    }
    std::stable_sort(out.begin(), out.end(), [](const RunningClaim& a, const RunningClaim& b) {
      return std::tie(a.tick_unix, a.job) < std::tie(b.tick_unix, b.job);
    });
    return out;
  }

  Result<void> SetPause(const Pause& pause) override {
    std::lock_guard lock(mu_);
    const auto deadline = steady_clock::now() + options_.op_timeout;
    if (auto ok = ReadyLocked(deadline); !ok) return ok;
    const std::string path = pauses_ + "/" + NodeName(pause.job);
    const std::string data = EncodePause(pause);
    Batch create(zh_.get());
    create.Create(path, data, ZOO_PERSISTENT);
    if (auto ok = Await(create, deadline, "pause"); !ok) return ok;
    if (create[0].rc == ZOK) return {};
    if (create[0].rc != ZNODEEXISTS) return Failure("pause " + pause.job, create[0].rc);
    Batch set(zh_.get());
    set.Set(path, data, -1);
    if (auto ok = Await(set, deadline, "pause"); !ok) return ok;
    if (set[0].rc != ZOK) return Failure("pause " + pause.job, set[0].rc);
    return {};
  }

  Result<bool> ClearPause(std::string_view job) override {
    std::lock_guard lock(mu_);
    const auto deadline = steady_clock::now() + options_.op_timeout;
    if (auto ok = ReadyLocked(deadline); !ok) return tl::unexpected(ok.error());
    Batch del(zh_.get());
    del.Delete(pauses_ + "/" + NodeName(std::string(job)), -1);
    if (auto ok = Await(del, deadline, "resume"); !ok) return tl::unexpected(ok.error());
    if (del[0].rc == ZNONODE) return false;
    if (del[0].rc != ZOK) return Failure("resume " + std::string(job), del[0].rc);
    return true;
  }

  Result<std::vector<Pause>> ListPauses() override {
    std::lock_guard lock(mu_);
    const auto deadline = steady_clock::now() + options_.op_timeout;
    if (auto ok = ReadyLocked(deadline); !ok) return tl::unexpected(ok.error());
    Batch list(zh_.get());
    list.Children(pauses_);
    if (auto ok = Await(list, deadline, "pauses"); !ok) return tl::unexpected(ok.error());
    if (list[0].rc == ZNONODE) return std::vector<Pause>{};
    if (list[0].rc != ZOK) return Failure("pauses", list[0].rc);
    std::vector<std::string> names = list[0].children;
    std::sort(names.begin(), names.end());
    Batch reads(zh_.get());
    for (const std::string& name : names) reads.Get(pauses_ + "/" + name);
    if (auto ok = Await(reads, deadline, "pauses"); !ok) return tl::unexpected(ok.error());
    std::vector<Pause> out;
    for (std::size_t i = 0; i < names.size(); ++i) {
      if (reads[i].rc == ZNONODE) continue;  // resumed in between
      if (reads[i].rc != ZOK) return Failure("pauses", reads[i].rc);
      if (auto p = DecodePause(NodeFromName(names[i]), reads[i].value)) {
        out.push_back(std::move(*p));
      }
    }
    return out;
  }

  Result<ForceReleaseStatus> ForceRelease(std::string_view job, std::int64_t tick_unix) override {
    std::lock_guard lock(mu_);
    const auto deadline = steady_clock::now() + options_.op_timeout;
    if (auto ok = ReadyLocked(deadline); !ok) return tl::unexpected(ok.error());
    const std::string job_name(job);
    const std::string record_path = Path(job_name, "t", tick_unix);
    const std::string lease_path = Path(job_name, "l", tick_unix);
    const std::string run_path = base_ + "/" + job_name + "/run";
    for (int race = 0; race < kMaxRaces; ++race) {
      auto nodes = ReadTickNodes(record_path, lease_path, run_path, deadline, "release");
      if (!nodes) return tl::unexpected(nodes.error());
      const Batch& read = *nodes;
      if (read[0].rc == ZNONODE) return ForceReleaseStatus::kNotRunning;
      Fields record = Decode(read[0].value);
      if (Get(record, "state") != "running") return ForceReleaseStatus::kNotRunning;
      auto now = ServerNow(deadline);
      if (!now) return tl::unexpected(now.error());
      if (read[1].rc == ZOK && Live(read[1], *now)) return ForceReleaseStatus::kHolderAlive;
      const std::string holder = Get(record, "owner");
      record["state"] = "done";
      record["owner"] = "";
      record["outcome"] = "released";
      record["exit"] = "";
      record["duration_ms"] = "0";
      record["fence"] = std::to_string(FenceOf(record, read[0]));
      std::vector<Op> ops = {{Op::kSet, record_path, Encode(record), read[0].stat.version}};
      if (read[1].rc == ZOK) ops.push_back({Op::kDelete, lease_path, "", read[1].stat.version});
      if (read[2].rc == ZOK && Get(Decode(read[2].value), "owner") == holder) {
        ops.push_back({Op::kDelete, run_path, "", read[2].stat.version});
      }
      auto applied = EndTick(std::move(ops), deadline, "release");
      if (!applied) return tl::unexpected(applied.error());
      if (*applied) return ForceReleaseStatus::kReleased;
    }
    return MakeError(context_ + ": release", "kept losing version races; try again");
  }

 private:
  // Every folder of the chroot, then base and clients: what Open creates, and a new
  // session again (a server may have come back without its data).
  static std::vector<std::string> Roots(std::string_view chroot, const std::string& base,
                                        const std::string& clients, const std::string& pauses) {
    std::vector<std::string> paths;
    std::string prefix;
    for (std::string_view rest = chroot; !rest.empty();) {
      const auto next = rest.find('/', 1);
      prefix += std::string(rest.substr(0, next));
      paths.push_back(prefix);
      rest = next == std::string_view::npos ? std::string_view() : rest.substr(next);
    }
    paths.push_back(base);
    paths.push_back(clients);
    paths.push_back(pauses);
    return paths;
  }

  // A won claim's versions, for its complete (CompleteBlind).
  void Hold(const ClaimRequest& req, std::uint64_t fence, int record_version) {
    if (holding_.size() >= kMaxHolding) holding_.clear();
    holding_[{req.job, req.tick_unix}] =
        Holding{req.owner_token, RecordFields(req, fence), record_version, 0, req.forbid_overlap};
  }

  // Completes without a read: a claim this replica won in this session (holding_)
  // left the record and the lease node at versions it knows (the record created or
  // set by the claim, the lease created by it and set by each renewal); its complete
  // (not forbid: below) is that multi by those versions
  // (the record set done from the fields the claim wrote). A version that moved — a
  // release, a re-claim, a refence, a lease node gone with the session — fails the
  // multi, which wrote nothing: that complete goes the read path (the others of its
  // bundle too). Returns the completes left for the read path; answers the others.
  std::vector<std::size_t> CompleteBlind(std::span<const CompleteRequest> reqs,
                                         std::vector<Result<CompleteStatus>>& out,
                                         steady_clock::time_point deadline) {
    std::vector<std::size_t> pending, blind;
    std::vector<std::vector<Op>> items;
    for (std::size_t i = 0; i < reqs.size(); ++i) {
      const auto& [held, completion] = reqs[i];
      const auto it = holding_.find({held.job, held.tick_unix});
      // A forbid claim's run node is deleted only while it holds our token, which a
      // multi cannot check (every run node is created at version 0: another replica's
      // that replaced ours once our lease ran out has the version ours had): read.
      if (it == holding_.end() || it->second.owner != held.owner_token || it->second.run) {
        if (it != holding_.end()) holding_.erase(it);
        pending.push_back(i);
        continue;
      }
      const Holding& h = it->second;
      Fields record = h.record;
      record["state"] = "done";
      record["outcome"] = completion.outcome;
      record["exit"] = completion.exit_code ? std::to_string(*completion.exit_code) : "";
      record["duration_ms"] = std::to_string(completion.duration.count());
      record["fence"] = std::to_string(held.fence);
      std::vector<Op> ops = {
          {Op::kSet, Path(held.job, "t", held.tick_unix), Encode(record), h.record_version},
          {Op::kDelete, Path(held.job, "l", held.tick_unix), "", h.lease_version}};
      if (const std::string_view output = OutputToStore(completion.output); !output.empty()) {
        ops.push_back({Op::kCreate, Path(held.job, "out", held.tick_unix), std::string(output),
                       -1, ZOO_PERSISTENT});
      }
      items.push_back(std::move(ops));
      blind.push_back(i);
      holding_.erase(it);
    }
    if (blind.empty()) return pending;
    std::vector<Bundle> bundles = SendBundles(items);
    const std::vector<std::optional<int>> written = CollectBundles(bundles, deadline);
    for (std::size_t b = 0; b < blind.size(); ++b) {
      if (written[b] && *written[b] == ZOK) {
        out[blind[b]] = CompleteStatus::kCompleted;
      } else {
        pending.push_back(blind[b]);  // no answer, or a version moved: read
      }
    }
    std::sort(pending.begin(), pending.end());
    return pending;
  }

  // Retention by count, after a batch of completes: for each job of the batch that
  // stored an output, the outputs older than its newest keep_outputs are deleted (one
  // pipelined listing, one pipelined round of deletes). Best effort: a failure leaves
  // them for the next complete; Prune removes them with age anyway.
  void KeepNewestOutputs(std::span<const CompleteRequest> reqs,
                         const std::vector<Result<CompleteStatus>>& out,
                         steady_clock::time_point deadline) {
    std::map<std::string, int> keep;  // job → its keep_outputs
    for (std::size_t i = 0; i < reqs.size(); ++i) {
      const Completion& c = reqs[i].completion;
      if (c.keep_outputs > 0 && !c.output.empty() && out[i] &&
          *out[i] == CompleteStatus::kCompleted) {
        keep[reqs[i].held.job] = c.keep_outputs;
      }
    }
    if (keep.empty()) return;
    Batch lists(zh_.get());
    for (const auto& [job, n] : keep) lists.Children(base_ + "/" + job + "/out");
    if (!Await(lists, deadline, "outputs")) return;
    Batch deletes(zh_.get());
    std::size_t j = 0;
    for (const auto& [job, n] : keep) {
      std::vector<std::int64_t> ticks;
      for (const std::string& t : lists[j++].children) ticks.push_back(ToInt(t));
      if (ticks.size() <= static_cast<std::size_t>(n)) continue;
      std::sort(ticks.begin(), ticks.end(), std::greater<>());
      for (std::size_t k = static_cast<std::size_t>(n); k < ticks.size(); ++k) {
        deletes.Delete(Path(job, "out", ticks[k]), -1);
      }
    }
    (void)Await(deletes, deadline, "outputs");
  }

  std::string Path(const std::string& job, const char* kind, std::int64_t tick) const {
    return base_ + "/" + job + "/" + kind + "/" + std::to_string(tick);
  }

  // The first reply that is neither found nor ZNONODE (its code), else ZOK.
  static int FirstFailure(std::initializer_list<const Reply*> replies) {
    for (const Reply* r : replies) {
      if (r->rc != ZOK && r->rc != ZNONODE) return r->rc;
    }
    return ZOK;
  }

  // Writes each item's ops all or nothing, as one multi per item would, but several
  // items to a multi (up to kItemsPerMulti items and kMultiBytes of data): one server
  // transaction for many jobs instead of one each. A multi fails whole on one failed
  // op, so a bundle that failed on one item's op wrote nothing: that item gets its
  // op's error, and the bundle's other items are sent again, one multi each (their ops
  // check by version whatever they rely on, so sending them later is as safe). Each
  // item's result: the rc of the multi that decided it (ZOK: written), or nullopt when
  // no answer came before `deadline` (it may or may not be written). Items before
  // `split` and from it on never share a multi (claims and observations: an
  // observation's failed create does not make claims go again one by one).
  std::vector<std::optional<int>> MultiEach(std::vector<std::vector<Op>> items,
                                            steady_clock::time_point deadline,
                                            std::size_t split = 0) {
    std::vector<Bundle> bundles = SendBundles(items, split);
    std::vector<std::optional<int>> out = CollectBundles(bundles, deadline);
    std::vector<std::size_t> alone;  // items of a failed bundle whose own ops did not fail
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (out[i] && *out[i] == kInnocent) alone.push_back(i);
    }
    std::vector<Batch> singles;
    singles.reserve(alone.size());
    for (const std::size_t i : alone) {
      singles.emplace_back(zh_.get());
      singles.back().Multi(std::move(items[i]));
    }
    for (std::size_t k = 0; k < alone.size(); ++k) {
      out[alone[k]].reset();
      if (!singles[k].Wait(deadline)) continue;
      if (singles[k].ServerAnswered()) last_contact_ = steady_clock::now();
      out[alone[k]] = singles[k][0].rc;
    }
    return out;
  }

  // Several items' ops in one multi (MultiEach, blind claims).
  struct Bundle {
    std::vector<std::size_t> items;
    std::vector<std::size_t> first_op;  // each item's first op in the multi
    Batch batch;
  };
  // The result of an item whose bundle failed on another item's op: nothing of it was
  // written, and none of its own ops failed.
  static constexpr int kInnocent = ZRUNTIMEINCONSISTENCY;

  // Issues the items' ops, several items to a multi (up to kItemsPerMulti items and
  // kMultiBytes of data; none holding items from both sides of `split`), without
  // waiting.
  std::vector<Bundle> SendBundles(const std::vector<std::vector<Op>>& items,
                                  std::size_t split = 0) {
    std::vector<Bundle> bundles;
    bundles.reserve(items.size());
    for (std::size_t i = 0; i < items.size();) {
      Bundle& b = bundles.emplace_back(Bundle{{}, {}, Batch(zh_.get())});
      std::vector<Op> ops;
      std::size_t bytes = 0;
      const std::size_t end = i < split ? split : items.size();
      for (; i < end && b.items.size() < kItemsPerMulti; ++i) {
        std::size_t size = 0;
        for (const Op& op : items[i]) size += op.path.size() + op.data.size();
        if (!b.items.empty() && bytes + size > kMultiBytes) break;
        bytes += size;
        b.items.push_back(i);
        b.first_op.push_back(ops.size());
        ops.insert(ops.end(), items[i].begin(), items[i].end());
      }
      b.batch.Multi(std::move(ops));
    }
    return bundles;
  }

  // Each item's result in the bundles sent: the rc of its multi (ZOK: written), the
  // error of its own op that failed the bundle, kInnocent when another item's op
  // failed it, or nullopt when no answer came before `deadline` (it may or may not be
  // written).
  std::vector<std::optional<int>> CollectBundles(std::vector<Bundle>& bundles,
                                                 steady_clock::time_point deadline) {
    std::size_t count = 0;
    for (const Bundle& b : bundles) count += b.items.size();
    std::vector<std::optional<int>> out(count);
    for (Bundle& b : bundles) {
      if (!b.batch.Wait(deadline)) continue;  // nullopt: no answer
      if (b.batch.ServerAnswered()) last_contact_ = steady_clock::now();
      const int rc = b.batch[0].rc;
      // The op that failed the bundle: the first whose error is neither ZOK (the ops
      // before it) nor ZRUNTIMEINCONSISTENCY (the ops after it). None: the multi failed
      // as a whole (the connection, the session), and so did each item.
      const std::vector<int>& errors = b.batch[0].op_errors;
      std::size_t failed = errors.size();
      for (std::size_t k = 0; rc != ZOK && k < errors.size(); ++k) {
        if (errors[k] != ZOK && errors[k] != ZRUNTIMEINCONSISTENCY) {
          failed = k;
          break;
        }
      }
      if (rc == ZOK || rc == ZCONNECTIONLOSS || failed == errors.size()) {
        for (const std::size_t i : b.items) out[i] = rc;
        continue;
      }
      for (std::size_t m = 0; m < b.items.size(); ++m) {
        const std::size_t end = m + 1 < b.items.size() ? b.first_op[m + 1] : errors.size();
        out[b.items[m]] = failed >= b.first_op[m] && failed < end ? errors[failed] : kInnocent;
      }
    }
    return out;
  }

  static bool IsRace(int rc) { return rc == ZNODEEXISTS || rc == ZBADVERSION || rc == ZNONODE; }

  // A live lease: its node exists (checked by the caller) and was renewed in time.
  static bool Live(const Reply& lease, std::int64_t server_now_ms) {
    return server_now_ms <= lease.stat.mtime + ToInt(Get(Decode(lease.value), "lease_ms"));
  }

  // The node holds our token and belongs to this session.
  bool Ours(const Reply& node, const std::string& token) const {
    const clientid_t* id = zoo_client_id(zh_.get());
    return Get(Decode(node.value), "owner") == token && id != nullptr &&
           node.stat.ephemeralOwner == id->client_id;
  }

  // One claim of a chunk: the paths, what the reads found, and the multi it makes.
  struct ClaimPlan {
    std::size_t index = 0;  // in the batch's requests
    std::string record_path, lease_path, run_path, head_path;
    std::size_t record = 0, head = 0, run = 0;  // reply slots in the chunk's read
    bool lean = false;  // the read was of the record alone (LeanDecides)
    std::size_t lease = 0, holder = 0;          // reply slots in the second read
    bool read_lease = false, read_holder = false;
    std::int64_t run_tick = 0;  // the tick the run node names (forbid)
    std::vector<Op> ops;        // the multi
    std::uint64_t fence = 0;
    // A re-claim replaces the record: the observation its first winner kept in it,
    // written as that replica's observation node once the re-claim is won.
    std::optional<Observation> displaced;
    HeadSeen head_after;  // the head once the multi is written
    int record_version = 0;  // the record's once the multi is written
  };

  // Observations: the job's folders (once per session), then the observations' nodes
  // o/<T>-<node>, several to a multi (MultiEach), and an overwrite of those this
  // replica had recorded before. One answer per observation.
  // The layout (docs/backends.md "ZooKeeper"): a node per observation straight under
  // o/, no folder per tick, and the winner's own observation inside its tick record
  // (Decide), so a job-tick's ledger costs one node per replica that did not win it.
  // An older tickd writes o/<T>/<node> under a folder o/<T>: History and Prune read both.
  std::vector<Result<void>> RecordAll(const std::vector<Observation>& all,
                                      steady_clock::time_point deadline) {
    std::vector<std::string> jobs;
    for (const Observation& obs : all) jobs.push_back(obs.job);
    if (auto ok = EnsureJobs(jobs, deadline); !ok) {
      return std::vector<Result<void>>(all.size(), tl::unexpected(ok.error()));
    }
    return ObservationsWritten(all, MultiEach(ObservationCreates(all), deadline), deadline);
  }

  // Each observation's node create (RecordAll): one item of MultiEach each.
  std::vector<std::vector<Op>> ObservationCreates(const std::vector<Observation>& all) const {
    std::vector<std::vector<Op>> creates;
    for (const Observation& obs : all) {
      creates.push_back({{Op::kCreate, ObservationPath(obs.job, obs.tick_unix, obs.node),
                          ObservationData(obs), -1, ZOO_PERSISTENT}});
    }
    return creates;
  }
  static std::string ObservationData(const Observation& obs) {
    return Encode({{"outcome", obs.outcome},
                   {"wall_ms", std::to_string(obs.node_wall.time_since_epoch().count())},
                   {"hash", obs.config_hash},
                   {"fence", std::to_string(obs.fence)}});
  }

  // The answers of the observations' creates (MultiEach's results): a node there already
  // (this replica recorded the tick before) is overwritten, pipelined.
  std::vector<Result<void>> ObservationsWritten(const std::vector<Observation>& all,
                                                const std::vector<std::optional<int>>& created,
                                                steady_clock::time_point deadline) {
    std::vector<Result<void>> out(all.size());
    Batch overwrite(zh_.get());
    std::vector<std::pair<std::size_t, std::size_t>> sets;  // (observation, slot)
    for (std::size_t n = 0; n < all.size(); ++n) {
      if (!created[n]) {
        out[n] = MakeError(context_ + ": record",
                           "no answer within " + std::to_string(options_.op_timeout.count()) + "ms");
      } else if (*created[n] == ZNODEEXISTS) {
        const Observation& obs = all[n];
        sets.emplace_back(n, overwrite.Set(ObservationPath(obs.job, obs.tick_unix, obs.node),
                                           ObservationData(obs), -1));
      } else if (*created[n] != ZOK) {
        if (*created[n] == ZNONODE) FoldersGone(all[n].job);
        out[n] = Failure("record", *created[n]);
      }
    }
    if (sets.empty()) return out;
    if (auto ok = Await(overwrite, deadline, "record"); !ok) {
      for (const auto& [n, slot] : sets) out[n] = tl::unexpected(ok.error());
      return out;
    }
    for (const auto& [n, slot] : sets) {
      if (overwrite[slot].rc != ZOK) out[n] = Failure("record", overwrite[slot].rc);
    }
    return out;
  }

  // A replica's observation node: o/<T>-<node> (an older tickd: o/<T>/<node>).
  std::string ObservationPath(const std::string& job, std::int64_t tick,
                              const std::string& node) const {
    return base_ + "/" + job + "/o/" + std::to_string(tick) + "-" + NodeName(node);
  }

  // The winner's observation that a record keeps (obs_wall_ms, obs_fence), if any.
  static std::optional<Observation> ObservationInRecord(const std::string& job, std::int64_t tick,
                                                        const Fields& record) {
    const std::string wall = Get(record, "obs_wall_ms");
    if (wall.empty()) return std::nullopt;
    return Observation{job,
                       tick,
                       Get(record, "node"),
                       "won",
                       WallTime(milliseconds(ToInt(wall))),
                       Get(record, "hash"),
                       static_cast<std::uint64_t>(ToInt(Get(record, "obs_fence")))};
  }

  // A child of o/: a tick's folder "<T>" (older tickd) or an observation "<T>-<node>".
  struct ObservedName {
    std::int64_t tick = 0;
    bool folder = true;
  };
  static ObservedName ParseObserved(std::string_view name) {
    const auto dash = name.find('-');
    return {ToInt(name.substr(0, dash)), dash == std::string_view::npos};
  }

  // One chunk of a wave (distinct jobs), in at most three round trips (each awaited
  // up to op_timeout):
  //  1. the blind claims' multis (BlindOps), with the clock (the scratch node's setData);
  //  2. for every claim still open — not blind (no head seen, or likely_decided: the
  //     tick most likely has its winner, and a read is cheaper than a multi that fails),
  //     or a blind multi that failed — the clock and its record and head (and run node)
  //     pipelined, then the lease nodes a re-claim or a forbid check needs (rarely);
  //  3. the won claims' multis and, pipelined with them, this replica's observations
  //     of the outcomes decided without a write (ClaimRequest::observe), several to a
  //     multi, so that the scheduler needs no Record call per claim.
  // A won claim is answered at once (its observation is in its record); the others
  // once their observation was written. Answers every claim of the chunk but those it
  // returns, whose multi lost a version race (read again). `failed` is set when the
  // session or the connection failed.
  std::vector<std::size_t> ClaimChunk(std::span<const ClaimRequest> reqs,
                                      std::span<const std::size_t> chunk,
                                      const ClaimAnswer& on_answer, std::optional<Error>& failed) {
    std::vector<std::pair<std::size_t, Result<ClaimOutcome>>> answers;  // to observe first
    const ClaimAnswer collect = [&](std::size_t i, Result<ClaimOutcome> r) {
      if (r && r->status == ClaimStatus::kWon) {
        r->observed = reqs[i].observe;
        on_answer(i, std::move(r));
      } else {
        answers.emplace_back(i, std::move(r));
      }
    };
    ChunkDecided d = DecideChunk(reqs, chunk, collect, failed);
    // Not store-reset or early (nothing is written then) nor an error; a failed write
    // leaves the outcome unobserved, and the scheduler records it.
    std::vector<Observation> observations;
    std::vector<std::size_t> observed;  // positions in answers
    for (std::size_t a = 0; !failed && a < answers.size(); ++a) {
      const auto& [i, r] = answers[a];
      const ClaimRequest& req = reqs[i];
      if (!req.observe || !r || r->status == ClaimStatus::kStoreReset ||
          r->status == ClaimStatus::kEarly) {
        continue;
      }
      observations.push_back(Observation{req.job, req.tick_unix, req.node,
                                         std::string(ClaimStatusName(r->status)), req.node_wall,
                                         req.config_hash, 0});
      observed.push_back(a);
    }
    std::vector<Observation> displaced;  // of records that won re-claims replaced
    if (!failed && (!d.writing.empty() || !observations.empty())) {
      const auto deadline = steady_clock::now() + options_.op_timeout;
      std::vector<Result<void>> written =
          WriteChunk(reqs, d, observations, collect, failed, displaced, deadline);
      for (std::size_t n = 0; n < observed.size(); ++n) {
        answers[observed[n]].second->observed = bool(written[n]);
      }
      if (!displaced.empty() && !failed) {
        (void)RecordAll(displaced, steady_clock::now() + options_.op_timeout);
      }
    }
    for (auto& [i, r] : answers) on_answer(i, std::move(r));
    return d.retry;
  }

  // What DecideChunk leaves to write: the plans, those whose multi goes (positions in
  // plans), the claims to read again in the next wave, and the server's clock the
  // chunk was judged on.
  struct ChunkDecided {
    std::vector<ClaimPlan> plans;
    std::vector<std::size_t> writing;
    std::vector<std::size_t> retry;
    std::int64_t now = 0;
  };

  // Round trips 1 and 2 of ClaimChunk: answers every claim decided without a write of
  // its own (a blind multi written, or an outcome of the reads) and plans the others.
  ChunkDecided DecideChunk(std::span<const ClaimRequest> reqs, std::span<const std::size_t> chunk,
                           const ClaimAnswer& on_answer, std::optional<Error>& failed) {
    ChunkDecided d;
    std::vector<ClaimPlan>& plans = d.plans;
    plans.resize(chunk.size());
    std::vector<bool> answered(chunk.size(), false);
    std::vector<std::size_t>& retry = d.retry;
    const auto fail_all = [&](const Error& e) {
      failed = e;
      for (std::size_t n = 0; n < chunk.size(); ++n) {
        if (!answered[n]) on_answer(chunk[n], tl::unexpected(e));
      }
      for (const std::size_t i : retry) on_answer(i, tl::unexpected(e));
      retry.clear();
      return std::move(d);
    };
    // Every answer of the chunk carries the server's clock it was judged on.
    const ClaimAnswer answer = [&](std::size_t i, Result<ClaimOutcome> r) {
      if (r) r->store_ms = d.now;
      on_answer(i, std::move(r));
    };
    for (std::size_t n = 0; n < chunk.size(); ++n) {
      const ClaimRequest& req = reqs[chunk[n]];
      ClaimPlan& p = plans[n];
      p.index = chunk[n];
      p.record_path = Path(req.job, "t", req.tick_unix);
      p.lease_path = Path(req.job, "l", req.tick_unix);
      p.run_path = base_ + "/" + req.job + "/run";
      p.head_path = base_ + "/" + req.job + "/head";
    }

    // 1. The blind claims, and the clock behind them.
    std::vector<std::size_t> blind;  // positions in plans
    std::vector<std::vector<Op>> blind_items;
    const auto blind_sent = steady_clock::now();
    if (const auto reading = clock_bound_.Read(blind_sent)) {
      for (std::size_t n = 0; n < chunk.size(); ++n) {
        if (!reqs[chunk[n]].likely_decided && BlindOps(reqs[chunk[n]], plans[n], *reading)) {
          blind.push_back(n);
          blind_items.push_back(std::move(plans[n].ops));
          plans[n].ops.clear();
        }
      }
    }
    if (!blind.empty()) {
      const auto deadline = steady_clock::now() + options_.op_timeout;
      std::vector<Bundle> bundles = SendBundles(blind_items);
      Batch clock(zh_.get());
      clock.Set(scratch_, "", -1);  // the server's now: its mtime
      const std::vector<std::optional<int>> blind_written = CollectBundles(bundles, deadline);
      if (Await(clock, deadline, "claim") && clock[0].rc == ZOK) {
        d.now = clock[0].stat.mtime;
        clock_bound_.Add(d.now, blind_sent, steady_clock::now());
      }
      for (std::size_t b = 0; b < blind.size(); ++b) {
        const std::size_t n = blind[b];
        ClaimPlan& p = plans[n];
        const ClaimRequest& req = reqs[p.index];
        if (!blind_written[b]) {
          answered[n] = true;
          answer(p.index, Unanswered());
        } else if (*blind_written[b] == ZOK) {
          answered[n] = true;
          answer(p.index, Written(req, p));
        } else if (*blind_written[b] == ZCONNECTIONLOSS) {
          answered[n] = true;
          auto resolved = Ambiguous(req, p.lease_path, p.fence, deadline);
          if (!resolved) {
            answer(p.index, tl::unexpected(resolved.error()));
          } else if (*resolved) {
            head_seen_.erase(req.job);
            answer(p.index, **resolved);
          } else {
            retry.push_back(p.index);
          }
        } else if (*blind_written[b] == ZNONODE) {  // the folders, the head or its tick's
          FoldersGone(req.job);                     // record are gone: decided on the read
          head_seen_.erase(req.job);
        }
      }
    }

    // 2. The reads of every claim still open, with the clock. A likely_decided claim
    // reads its record alone first (LeanRead); the few such reads that decide nothing
    // go again in full, one more round trip.
    std::vector<std::size_t> reading;  // positions in plans
    for (std::size_t n = 0; n < chunk.size(); ++n) {
      if (!answered[n]) reading.push_back(n);
    }
    for (int pass = 0; pass < 2 && !reading.empty(); ++pass) {
      const auto deadline = steady_clock::now() + options_.op_timeout;
      Batch read(zh_.get());
      const auto sent = steady_clock::now();
      const std::size_t clock = read.Set(scratch_, "", -1);
      for (const std::size_t n : reading) {
        ClaimPlan& p = plans[n];
        const ClaimRequest& req = reqs[p.index];
        p.lean = pass == 0 && req.likely_decided && req.known_tick <= req.tick_unix;
        p.record = read.Get(p.record_path);
        if (p.lean) continue;
        p.head = read.Get(p.head_path);
        if (req.forbid_overlap) p.run = read.Get(p.run_path);
      }
      if (auto ok = Await(read, deadline, "claim"); !ok) return fail_all(ok.error());
      if (read[clock].rc == ZOK) {
        d.now = read[clock].stat.mtime;
        clock_bound_.Add(d.now, sent, steady_clock::now());
      } else if (read[clock].rc == ZNONODE) {  // a new session, or the server lost it
        auto server_now = ServerNow(deadline);
        if (!server_now) return fail_all(server_now.error());
        d.now = *server_now;
      } else {
        return fail_all(Failure("clock", read[clock].rc).value());
      }
      std::vector<std::size_t> deciding, again;  // positions in plans
      for (const std::size_t n : reading) {
        const ClaimPlan& p = plans[n];
        const ClaimRequest& req = reqs[p.index];
        if (p.lean) {
          (LeanDecides(req, read[p.record]) ? deciding : again).push_back(n);
          continue;
        }
        deciding.push_back(n);
        // The heads as this replica last saw them: what its next blind claims go on.
        const Reply& head = read[p.head];
        if (head.rc == ZOK) {
          head_seen_[req.job] = HeadSeen{head.stat.version, Decode(head.value)};
        } else {
          head_seen_.erase(req.job);
        }
      }
      // The lease nodes that decide a re-claim (the tick's) and busy (the run node's tick).
      Batch leases(zh_.get());
      for (const std::size_t n : deciding) {
        const ClaimRequest& req = reqs[chunk[n]];
        ClaimPlan& p = plans[n];
        if (p.lean) continue;
        if (read[p.record].rc == ZOK && req.recover &&
            Get(Decode(read[p.record].value), "state") == "running") {
          p.read_lease = true;
          p.lease = leases.Get(p.lease_path);
        }
        if (req.forbid_overlap && read[p.run].rc == ZOK) {
          p.run_tick = ToInt(Get(Decode(read[p.run].value), "tick"));
          if (p.run_tick != req.tick_unix) {
            p.read_holder = true;
            p.holder = leases.Get(Path(req.job, "l", p.run_tick));
          }
        }
      }
      if (auto ok = Await(leases, deadline, "claim"); !ok) return fail_all(ok.error());
      for (const std::size_t n : deciding) {
        answered[n] = true;  // below, or by the writes
        auto decided = Decide(reqs[chunk[n]], plans[n], read, leases, d.now);
        if (!decided) {
          answer(chunk[n], tl::unexpected(decided.error()));
        } else if (*decided) {
          answer(chunk[n], std::move(**decided));
        } else {
          d.writing.push_back(n);
        }
      }
      reading = std::move(again);
    }
    return d;
  }

  // A claim's multi that got no answer in time.
  tl::unexpected<Error> Unanswered() const {
    return MakeError(context_ + ": claim",
                     "no answer within " + std::to_string(options_.op_timeout.count()) +
                         "ms (the claim may or may not be recorded)");
  }

  // A claim's multi was written: the head and versions it left (blind claims,
  // CompleteBlind), and its answer.
  ClaimOutcome Written(const ClaimRequest& req, const ClaimPlan& p) {
    last_contact_ = steady_clock::now();
    head_seen_[req.job] = p.head_after;
    Hold(req, p.fence, p.record_version);
    ClaimOutcome won;
    won.status = ClaimStatus::kWon;
    won.fence = p.fence;
    return won;
  }

  // A lean read (a likely_decided claim's record alone, no head) decides the claim
  // when it found the tick's record and that record answers `lost` without its lease
  // (done, or running and the job does not recover), or when the read failed (an
  // Error). It needs no head: a claim that creates or re-claims a record moves the
  // job's head to its tick or later in the same multi (a refence too), a head's tick
  // never goes back, and the head goes only with the whole tree, records and all; so
  // with the record there, the head's tick is at least T, and known_tick ≤ T (a lean
  // read's condition) is not above it: never store-reset. The rest reads in full.
  static bool LeanDecides(const ClaimRequest& req, const Reply& record) {
    if (record.rc == ZNONODE) return false;
    if (record.rc != ZOK) return true;
    return !req.recover || Get(Decode(record.value), "state") != "running";
  }

  // Round trip 3 of ClaimChunk: the won claims' multis (d.writing) and the
  // observations, pipelined (MultiEach: claims and observations never share a multi).
  // Answers every claim written (or its error); one answer per observation.
  std::vector<Result<void>> WriteChunk(std::span<const ClaimRequest> reqs, ChunkDecided& d,
                                       const std::vector<Observation>& observations,
                                       const ClaimAnswer& on_answer, std::optional<Error>& failed,
                                       std::vector<Observation>& displaced,
                                       steady_clock::time_point deadline) {
    const ClaimAnswer answer = [&](std::size_t i, Result<ClaimOutcome> r) {
      if (r) r->store_ms = d.now;
      on_answer(i, std::move(r));
    };
    // Only now: no answer but won writes and observations (the folders are their parents).
    std::vector<std::string> jobs;
    for (const std::size_t n : d.writing) jobs.push_back(reqs[d.plans[n].index].job);
    for (const Observation& obs : observations) jobs.push_back(obs.job);
    if (auto ok = EnsureJobs(jobs, deadline); !ok) {
      failed = ok.error();
      for (const std::size_t n : d.writing) answer(d.plans[n].index, tl::unexpected(ok.error()));
      return std::vector<Result<void>>(observations.size(), tl::unexpected(ok.error()));
    }
    std::vector<std::vector<Op>> items;
    for (const std::size_t n : d.writing) items.push_back(std::move(d.plans[n].ops));
    const std::size_t split = items.size();
    for (auto& create : ObservationCreates(observations)) items.push_back(std::move(create));
    std::vector<std::optional<int>> written = MultiEach(std::move(items), deadline, split);
    for (std::size_t w = 0; w < split; ++w) {
      const ClaimPlan& p = d.plans[d.writing[w]];
      const ClaimRequest& req = reqs[p.index];
      if (!written[w]) {
        answer(p.index, Unanswered());
        continue;
      }
      const int rc = *written[w];
      if (rc == ZOK) {
        if (p.displaced) displaced.push_back(*p.displaced);
        answer(p.index, Written(req, p));
        continue;
      }
      if (rc == ZNONODE) FoldersGone(req.job);
      if (IsRace(rc)) {
        head_seen_.erase(req.job);
        d.retry.push_back(p.index);
        continue;
      }
      if (rc == ZCONNECTIONLOSS) {
        auto resolved = Ambiguous(req, p.lease_path, p.fence, deadline);
        if (!resolved) {
          answer(p.index, tl::unexpected(resolved.error()));
        } else if (*resolved) {
          answer(p.index, **resolved);
        } else {
          d.retry.push_back(p.index);
        }
        continue;
      }
      answer(p.index, Failure("claim", rc));
    }
    written.erase(written.begin(), written.begin() + static_cast<std::ptrdiff_t>(split));
    return ObservationsWritten(observations, written, deadline);
  }

  // The checks of the claim on what the chunk's reads found (the order at the top of
  // this file): an outcome decided without writing, nullopt when the claim goes on to
  // its multi (plan.ops and plan.fence set), or an Error for a read that failed.
  Result<std::optional<ClaimOutcome>> Decide(const ClaimRequest& req, ClaimPlan& plan,
                                             const Batch& read, const Batch& leases,
                                             std::int64_t now) {
    const Reply& record = read[plan.record];
    if (record.rc != ZOK && record.rc != ZNONODE) return Failure("claim", record.rc);
    // A lean read has no head: the record answers lost (LeanDecides).
    static const Reply kNoHead = [] {
      Reply r;
      r.rc = ZNONODE;
      return r;
    }();
    const Reply& head = plan.lean ? kNoHead : read[plan.head];
    if (head.rc != ZOK && head.rc != ZNONODE) return Failure("claim", head.rc);
    const Fields head_fields = head.rc == ZOK ? Decode(head.value) : Fields{};
    // The replica's clock is ahead of the server's (rule 15): nothing is written.
    if (ClaimIsEarly(req, now)) return ClaimOutcome{ClaimStatus::kEarly};
    // The store forgot a claim this replica saw (design.md §1 rule 12): nothing is
    // written. A claim won instead checks the head's version in its multi, so the
    // head judged here is the one the claim moves.
    const std::int64_t head_tick = head.rc == ZOK ? ToInt(Get(head_fields, "tick")) : 0;
    if (!plan.lean && req.known_tick > head_tick) {
      ClaimOutcome reset;
      reset.status = ClaimStatus::kStoreReset;
      reset.holder_tick_unix = head_tick;
      return reset;
    }
    std::vector<Op>& ops = plan.ops;
    std::size_t record_op = 0;  // the op that writes `mine`; its fence is added last
    if (record.rc == ZOK) {
      const Fields f = Decode(record.value);
      ClaimOutcome lost;
      lost.status = ClaimStatus::kLost;
      lost.holder_node = Get(f, "node");
      lost.holder_tick_unix = req.tick_unix;
      lost.holder_config_hash = Get(f, "hash");
      lost.holder_running = Get(f, "state") == "running";
      if (!lost.holder_running || !req.recover) return lost;
      plan.displaced = ObservationInRecord(req.job, req.tick_unix, f);
      const Reply& lease = leases[plan.lease];
      if (lease.rc != ZOK && lease.rc != ZNONODE) return Failure("claim", lease.rc);
      std::int64_t expired_at = now;  // the session died at an unknown moment: count from now
      if (lease.rc == ZOK) {
        if (Live(lease, now)) return lost;
        expired_at = lease.stat.mtime + ToInt(Get(Decode(lease.value), "lease_ms"));
        ops.push_back({Op::kDelete, plan.lease_path, "", lease.stat.version});
      }
      record_op = ops.size();
      ops.push_back({Op::kSet, plan.record_path, "", record.stat.version});
      plan.record_version = record.stat.version + 1;
      if (req.starting_deadline && now > expired_at + req.starting_deadline->count()) {
        return ClaimOutcome{ClaimStatus::kMissed};
      }
    } else {
      auto [judging, judging_node] = JudgingHead(TicksOf(head_fields), req, now);
      if (head.rc == ZOK && judging > req.tick_unix) {
        ClaimOutcome superseded;
        superseded.status = ClaimStatus::kSuperseded;
        superseded.holder_node = std::move(judging_node);
        superseded.holder_tick_unix = judging;
        return superseded;
      }
      if (req.starting_deadline && now > req.tick_unix * 1000 + req.starting_deadline->count()) {
        return ClaimOutcome{ClaimStatus::kMissed};
      }
      record_op = ops.size();
      ops.push_back({Op::kCreate, plan.record_path, "", -1, ZOO_PERSISTENT});
    }
    ops.push_back(LeaseCreate(req, plan.lease_path));
    if (req.forbid_overlap) {
      const Reply& run = read[plan.run];
      if (run.rc != ZOK && run.rc != ZNONODE) return Failure("claim", run.rc);
      if (run.rc == ZOK) {
        if (plan.read_holder) {
          const Fields f = Decode(run.value);
          const Reply& holder = leases[plan.holder];
          if (holder.rc == ZOK && Get(Decode(holder.value), "owner") == Get(f, "owner") &&
              Live(holder, now)) {
            ClaimOutcome busy;
            busy.status = ClaimStatus::kBusy;
            busy.holder_node = Get(f, "node");
            busy.holder_tick_unix = plan.run_tick;
            busy.holder_config_hash = Get(f, "hash");
            return busy;
          }
        }
        ops.push_back({Op::kDelete, plan.run_path, "", run.stat.version});  // stale marker
      }
      ops.push_back(RunCreate(req, plan.run_path));
    }
    plan.fence = MoveHead(req, head, head_fields, plan.head_path, now, ops, &plan.head_after);
    ops[record_op].data = Encode(RecordFields(req, plan.fence));
    return std::optional<ClaimOutcome>();
  }

  // A won claim's tick record: running, ours, its fence; with the claim's observation
  // when it asks for one (the winner's observation lives in the record: RecordAll).
  static Fields RecordFields(const ClaimRequest& req, std::uint64_t fence) {
    Fields mine = {{"state", "running"},
                   {"owner", req.owner_token},
                   {"node", req.node},
                   {"hash", req.config_hash},
                   {"lease_ms", std::to_string(req.lease.count())},
                   {"fence", std::to_string(fence)}};
    if (req.observe) {
      mine["obs_wall_ms"] = std::to_string(req.node_wall.time_since_epoch().count());
      mine["obs_fence"] = mine["fence"];
    }
    return mine;
  }
  static Op LeaseCreate(const ClaimRequest& req, const std::string& path) {
    return {Op::kCreate, path,
            Encode({{"owner", req.owner_token},
                    {"node", req.node},
                    {"lease_ms", std::to_string(req.lease.count())}}),
            -1, ZOO_EPHEMERAL};
  }
  static Op RunCreate(const ClaimRequest& req, const std::string& path) {
    return {Op::kCreate, path,
            Encode({{"owner", req.owner_token},
                    {"tick", std::to_string(req.tick_unix)},
                    {"node", req.node},
                    {"hash", req.config_hash}}),
            -1, ZOO_EPHEMERAL};
  }

  // A blind claim (no read before it): the multi of a claim decided on the job's head
  // as this replica last saw it (head_seen_, this session) and the server's clock as
  // last read plus the steady time since (clock_bound_: `reading`). Only when every
  // check comes out the same anywhere in the reading's bounds and says won: surely not
  // early, surely not missed, no store-reset and no superseded on that head; anything
  // else is decided on a read. The multi: create the record (with the fence from the
  // head), check that the record of the head's tick is there, create the lease node
  // (and for forbid the run node: a run node there, stale or not, fails the multi),
  // and set the head by the version seen. So it is written only if the head is the one
  // judged: another claim or a refence moved its version, and a store that lost its
  // data (a new session: head_seen_ is cleared; or the tickd tree deleted) lacks the
  // record of the head's tick even where a new head's version matches. False: read.
  bool BlindOps(const ClaimRequest& req, ClaimPlan& plan, const ClockBound::Reading& reading) {
    if (!known_jobs_.contains(req.job)) return false;
    const auto seen = head_seen_.find(req.job);
    if (seen == head_seen_.end() || seen->second.version >= kLastHeadVersion) return false;
    if (ClaimIsEarly(req, reading.lo)) return false;
    if (req.starting_deadline &&
        reading.hi > req.tick_unix * 1000 + req.starting_deadline->count()) {
      return false;
    }
    const HeadTicks ticks = TicksOf(seen->second.fields);
    if (ticks.tick <= 0 || req.known_tick > ticks.tick) return false;
    if (JudgingHead(ticks, req, reading.lo) != JudgingHead(ticks, req, reading.hi) ||
        JudgingHead(ticks, req, reading.lo).first >= req.tick_unix) {
      return false;
    }
    HeadTicks at_lo = ticks, at_hi = ticks;
    ::tickd::lock::MoveHead(at_lo, req, reading.lo);
    ::tickd::lock::MoveHead(at_hi, req, reading.hi);
    if (std::tie(at_lo.tick, at_lo.node, at_lo.below, at_lo.below_node) !=
        std::tie(at_hi.tick, at_hi.node, at_hi.below, at_hi.below_node)) {
      return false;
    }
    Reply head;
    head.stat.version = seen->second.version;
    std::vector<Op>& ops = plan.ops;
    ops.push_back({Op::kCreate, plan.record_path, "", -1, ZOO_PERSISTENT});
    ops.push_back({Op::kCheck, Path(req.job, "t", ticks.tick), "", -1});
    ops.push_back(LeaseCreate(req, plan.lease_path));
    if (req.forbid_overlap) ops.push_back(RunCreate(req, plan.run_path));
    plan.fence = MoveHead(req, head, seen->second.fields, plan.head_path, reading.lo, ops,
                          &plan.head_after);
    ops[0].data = Encode(RecordFields(req, plan.fence));
    return true;
  }

  // The ticks of a head node's fields (none: all 0).
  static HeadTicks TicksOf(const Fields& head_fields) {
    return HeadTicks{ToInt(Get(head_fields, "tick")), Get(head_fields, "node"),
                     ToInt(Get(head_fields, "below")), Get(head_fields, "below_node")};
  }

  // Appends the ops that move the job's head for a won claim of req (set by version,
  // or create; a head whose int32 version is about to run out is deleted and created
  // again at a new epoch) and returns the claim's fence. Its ticks move as
  // lock/clock_check.h says (a head ahead of the server's clock keeps its tick).
  static std::uint64_t MoveHead(const ClaimRequest& req, const Reply& head,
                                const Fields& head_fields, const std::string& head_path,
                                std::int64_t now_ms, std::vector<Op>& ops,
                                HeadSeen* after = nullptr) {
    HeadTicks ticks = head.rc == ZOK ? TicksOf(head_fields) : HeadTicks{};
    ::tickd::lock::MoveHead(ticks, req, now_ms);
    Fields next = {{"tick", std::to_string(ticks.tick)},
                   {"node", ticks.node},
                   {"epoch_ms", std::to_string(now_ms)}};
    if (ticks.below > 0) {
      next["below"] = std::to_string(ticks.below);
      next["below_node"] = ticks.below_node;
    }
    int version_after = 0;
    if (head.rc == ZOK && head.stat.version < kLastHeadVersion) {
      next["epoch_ms"] = Get(head_fields, "epoch_ms");
      ops.push_back({Op::kSet, head_path, Encode(next), head.stat.version});
      version_after = head.stat.version + 1;
    } else {
      if (head.rc == ZOK) ops.push_back({Op::kDelete, head_path, "", head.stat.version});
      ops.push_back({Op::kCreate, head_path, Encode(next), -1, ZOO_PERSISTENT});
    }
    if (after != nullptr) *after = HeadSeen{version_after, next};
    static_assert(kFenceEpochShift == 11);
    return static_cast<std::uint64_t>((ToInt(next["epoch_ms"]) << kFenceEpochShift) +
                                      version_after + 1);
  }

  // The record's fence; a running record of an older tickd has none: its claim's
  // multi wrote it last, and that zxid (mzxid) was its fence.
  static std::uint64_t FenceOf(const Fields& record, const Reply& node) {
    const std::string fence = Get(record, "fence");
    return fence.empty() ? static_cast<std::uint64_t>(node.stat.mzxid)
                         : static_cast<std::uint64_t>(ToInt(fence));
  }

  // The multi's answer was lost with the connection: it is ours only if the lease node
  // holds our token and belongs to our (still living) session.
  Result<std::optional<ClaimOutcome>> Ambiguous(const ClaimRequest& req,
                                                const std::string& lease_path, std::uint64_t fence,
                                                steady_clock::time_point deadline) {
    if (!WaitConnected(deadline)) {
      return MakeError(context_ + ": claim",
                       "connection lost during the claim (it may or may not be recorded)");
    }
    Batch read(zh_.get());
    read.Get(lease_path);
    if (auto ok = Await(read, deadline, "claim"); !ok) return tl::unexpected(ok.error());
    if (read[0].rc == ZOK && Ours(read[0], req.owner_token)) {
      ClaimOutcome won;
      won.status = ClaimStatus::kWon;
      won.fence = fence;  // the multi went through: its record holds this fence
      return won;
    }
    return std::optional<ClaimOutcome>();  // not ours: read the record again
  }

  // The server's wall clock in ms: the mtime our scratch node gets from a setData.
  Result<std::int64_t> ServerNow(steady_clock::time_point deadline) {
    for (int attempt = 0; attempt < 2; ++attempt) {
      Batch batch(zh_.get());
      batch.Set(scratch_, "", -1);
      if (auto ok = Await(batch, deadline, "clock"); !ok) return tl::unexpected(ok.error());
      if (batch[0].rc == ZOK) return batch[0].stat.mtime;
      if (batch[0].rc != ZNONODE) return Failure("clock", batch[0].rc);
      if (auto ok = CreateScratch(deadline); !ok) return tl::unexpected(ok.error());
    }
    return MakeError(context_ + ": clock", "the scratch node keeps disappearing");
  }

  // The scratch node, once per session: the roots first (pipelined, in order), in case
  // the server lost them with its data.
  Result<void> CreateScratch(steady_clock::time_point deadline) {
    Batch batch(zh_.get());
    for (const std::string& p : roots_) batch.Create(p, "", ZOO_PERSISTENT);
    batch.Create(scratch_, "", ZOO_EPHEMERAL);
    if (auto ok = Await(batch, deadline, "session"); !ok) return ok;
    for (std::size_t i = 0; i <= roots_.size(); ++i) {
      if (batch[i].rc != ZOK && batch[i].rc != ZNODEEXISTS) return Failure("session", batch[i].rc);
    }
    return {};
  }

  // The folders of jobs, created once per session (persistent; never pruned), all in
  // one pipeline; with the roots for the first jobs of a session. CreateAll creates a
  // job's folders in order, `out` last, so a job whose `out` is there has them all
  // (another replica made them, or an earlier session): one pipelined existence read
  // of each job's `out` first (not for a job a write found folders missing of:
  // FoldersGone), and creates only for the others — not five creates
  // that fail, each a failed write through the server's commit pipeline (at the first
  // instant of 5,000 jobs, every replica's 25,000).
  Result<void> EnsureJobs(const std::vector<std::string>& jobs, steady_clock::time_point deadline) {
    std::vector<std::string> unknown;
    for (const std::string& job : jobs) {
      if (!known_jobs_.contains(job)) unknown.push_back(job);
    }
    std::sort(unknown.begin(), unknown.end());
    unknown.erase(std::unique(unknown.begin(), unknown.end()), unknown.end());
    if (unknown.empty()) return {};
    const bool first = known_jobs_.empty();
    Batch probe(zh_.get());
    std::vector<std::size_t> probed(unknown.size(), SIZE_MAX);  // slots in probe
    for (std::size_t j = 0; j < unknown.size(); ++j) {
      if (!folders_gone_.contains(unknown[j])) {
        probed[j] = probe.Exists(base_ + "/" + unknown[j] + "/out");
      }
    }
    if (auto ok = Await(probe, deadline, "create folders"); !ok) return ok;
    std::vector<std::string> paths = first ? roots_ : std::vector<std::string>{};
    std::vector<std::string> added;
    for (std::size_t j = 0; j < unknown.size(); ++j) {
      if (probed[j] != SIZE_MAX && probe[probed[j]].rc == ZOK) {
        known_jobs_.insert(unknown[j]);
        continue;
      }
      const std::string dir = base_ + "/" + unknown[j];
      for (const std::string& p : {dir, dir + "/t", dir + "/l", dir + "/o", dir + "/out"}) {
        paths.push_back(p);
      }
      added.push_back(unknown[j]);
    }
    if (added.empty()) return {};
    if (auto ok = CreateAll(paths, deadline); !ok) return ok;
    for (const std::string& job : added) {
      known_jobs_.insert(job);
      folders_gone_.erase(job);
    }
    return {};
  }

  // A write found a job's folders (or the record its claim checks) missing: they are
  // created again before its next write, without trusting `out` (EnsureJobs).
  void FoldersGone(const std::string& job) {
    known_jobs_.erase(job);
    folders_gone_.insert(job);
  }
  Result<void> EnsureJob(const std::string& job, steady_clock::time_point deadline) {
    return EnsureJobs({job}, deadline);
  }

  // Creates every path in order (pipelined), existing ones being fine.
  Result<void> CreateAll(const std::vector<std::string>& paths, steady_clock::time_point deadline) {
    Batch batch(zh_.get());
    for (const std::string& p : paths) batch.Create(p, "", ZOO_PERSISTENT);
    if (auto ok = Await(batch, deadline, "create folders"); !ok) return ok;
    for (std::size_t i = 0; i < paths.size(); ++i) {
      if (batch[i].rc != ZOK && batch[i].rc != ZNODEEXISTS) {
        return Failure("create " + paths[i], batch[i].rc);
      }
    }
    return {};
  }

  // What complete and release both read, pipelined: the tick's record [0], its lease
  // node [1] and the job's run node [2] (refence: its head node). Each one found, or ZNONODE; else
  // an Error.
  Result<Batch> ReadTickNodes(const std::string& record_path, const std::string& lease_path,
                              const std::string& run_path, steady_clock::time_point deadline,
                              const std::string& what) {
    Batch read(zh_.get());
    read.Get(record_path);
    read.Get(lease_path);
    read.Get(run_path);
    if (auto ok = Await(read, deadline, what); !ok) return tl::unexpected(ok.error());
    for (std::size_t i = 0; i < 3; ++i) {
      if (read[i].rc != ZOK && read[i].rc != ZNONODE) return Failure(what, read[i].rc);
    }
    return read;
  }

  // The multi that ends a tick (complete or release) or refences it, versions checked: true when it
  // was applied, false when a version moved meanwhile (read again), else an Error.
  Result<bool> EndTick(std::vector<Op> ops, steady_clock::time_point deadline,
                       const std::string& what) {
    Batch write(zh_.get());
    write.Multi(std::move(ops));
    if (auto ok = Await(write, deadline, what); !ok) return tl::unexpected(ok.error());
    if (write[0].rc == ZOK) return true;
    if (!IsRace(write[0].rc)) return Failure(what, write[0].rc);
    return false;
  }

  Result<std::vector<std::string>> Jobs(std::string_view job, steady_clock::time_point deadline) {
    if (!job.empty()) return std::vector<std::string>{std::string(job)};
    Batch batch(zh_.get());
    batch.Children(base_);
    if (auto ok = Await(batch, deadline, "list jobs"); !ok) return tl::unexpected(ok.error());
    if (batch[0].rc != ZOK) return Failure("list jobs", batch[0].rc);
    return batch[0].children;
  }

  // Waits for a batch; a timeout is an Error. The reply codes are the caller's to judge
  // (a session-level code such as connection loss is an Error there). Only replies the
  // server sent move last_contact_, which bounds a lease while disconnected (Renew).
  Result<void> Await(Batch& batch, steady_clock::time_point deadline, const std::string& what) {
    if (!batch.Wait(deadline)) {
      return MakeError(context_ + ": " + what,
                       "no answer within " + std::to_string(options_.op_timeout.count()) + "ms");
    }
    if (batch.ServerAnswered()) last_contact_ = steady_clock::now();
    return {};
  }

  tl::unexpected<Error> Failure(const std::string& what, int rc) {
    return MakeError(context_ + ": " + what, zerror(rc));
  }

  int SessionState() {
    if (!session_) return 0;
    std::lock_guard lock(session_->mu);
    return session_->state;
  }

  bool WaitConnected(steady_clock::time_point deadline) {
    if (!session_) return false;
    std::unique_lock lock(session_->mu);
    return session_->cv.wait_until(lock, deadline, [&] {
      return session_->state == ZOO_CONNECTED_STATE || session_->state == ZOO_EXPIRED_SESSION_STATE;
    }) && session_->state == ZOO_CONNECTED_STATE;
  }

  // REQUIRES: mu_ held. A usable session: a new one after an expiry (or before the
  // first call); an Error at once while the client reconnects in the background.
  Result<void> ReadyLocked(steady_clock::time_point deadline) {
    const int state = SessionState();
    if (zh_ && state == ZOO_CONNECTED_STATE) {
      if (!adopted_) AdoptSessionLocked();
      return {};
    }
    if (!zh_ || state == ZOO_EXPIRED_SESSION_STATE || state == ZOO_AUTH_FAILED_STATE) {
      return ConnectLocked(deadline);
    }
    if (SessionGoneLocked()) {
      AbandonSessionLocked();
      if (!WaitConnected(deadline)) {
        return MakeError(context_,
                         "not connected for a whole session timeout: a new session is "
                         "connecting");
      }
      AdoptSessionLocked();
      return {};
    }
    return MakeError(context_, "not connected (the client is reconnecting)");
  }

  // REQUIRES: mu_ held; zh_ not connected. True once the connection has been lost for
  // a whole (negotiated) session timeout. No serving server holds the session then: a
  // server that ran meanwhile expired it (it heard nothing since the loss), and a
  // server that came back without its data never knew it. The client library would
  // offer it forever, and such a server refuses it for good: the handle's last seen
  // zxid is above all of the server's ("Refusing session request ... as it has seen
  // zxid"), so only a new handle, with no memory of that zxid, connects again.
  bool SessionGoneLocked() {
    if (!session_) return false;
    std::optional<steady_clock::time_point> lost_at;
    {
      std::lock_guard lock(session_->mu);
      lost_at = session_->lost_at;
    }
    return lost_at && steady_clock::now() - *lost_at >= milliseconds(zoo_recv_timeout(zh_.get()));
  }

  // REQUIRES: mu_ held. Opens a new session and waits for it until `deadline`.
  Result<void> ConnectLocked(steady_clock::time_point deadline) {
    if (!StartSessionLocked()) {
      return MakeError(context_, std::string("cannot create a client: ") + strerror(errno));
    }
    if (!WaitConnected(deadline)) {
      CloseLocked();
      return MakeError(
          context_, "cannot connect within " + std::to_string(options_.op_timeout.count()) + "ms");
    }
    AdoptSessionLocked();
    return {};
  }

  // REQUIRES: mu_ held. A new handle, hence a new session, connecting in the
  // background. False when the client could not even be created.
  bool StartSessionLocked() {
    CloseLocked();
    session_ = std::make_unique<Session>();
    zh_.reset(zookeeper_init2(endpoint_.hosts.c_str(), &Watcher,
                              static_cast<int>(options_.session_timeout.count()), nullptr,
                              session_.get(), 0, &DropLog));
    adopted_ = false;
    if (zh_) {
      // By default the client resolves the server list again each time its I/O thread
      // polls the socket (getaddrinfo: a netlink dump of the host's addresses, a few
      // sockets): under a burst of claims that was a fifth of the replica's CPU. Once
      // a minute is enough to see a DNS change; a lost connection resolves at once.
      (void)zoo_set_servers_resolution_delay(zh_.get(), kResolveEveryMs);
    }
    if (zh_ && !options_.username.empty()) {
      // Queued before the session connects, and sent again by the client on every
      // reconnect: no call of ours runs unauthenticated. A digest is never refused
      // (it only names who we are); the ACLs decide what that identity may do.
      const std::string identity = options_.username + ":" + options_.password;
      if (zoo_add_auth(zh_.get(), "digest", identity.data(), static_cast<int>(identity.size()),
                       nullptr, nullptr) != ZOK) {
        CloseLocked();
        return false;
      }
      session_->authenticated = true;
    }
    return zh_ != nullptr;
  }

  // REQUIRES: mu_ held; zh_ connected. What our calls need of a new session.
  void AdoptSessionLocked() {
    last_contact_ = steady_clock::now();
    char id[32];
    std::snprintf(id, sizeof(id), "%016llx",
                  static_cast<unsigned long long>(zoo_client_id(zh_.get())->client_id));
    scratch_ = clients_ + "/" + id;
    known_jobs_.clear();
    folders_gone_.clear();
    head_seen_.clear();  // a new session: the store may have lost its data
    holding_.clear();    // and the leases and run nodes of the old one are gone
    adopted_ = true;
  }

  // REQUIRES: mu_ held. Gives the session up once its leases count as lost (Renew: no
  // answer for 2/3 of its timeout) or it is gone (SessionGoneLocked): it must not come
  // back. A server that was frozen, not gone, takes the client's reconnect as a sign
  // of life and keeps the session, and with it the ephemeral lease nodes of runs
  // already ended as lease-lost: a replica taking over would wait for the whole lease.
  // A new session connects in the background, so calls until then fail at once rather
  // than wait to connect.
  void AbandonSessionLocked() {
    if (!StartSessionLocked()) CloseLocked();
  }

  void CloseLocked() {
    zh_.reset();  // joins the client's threads: no watcher call after this
    session_.reset();
  }

  const ZookeeperOptions options_;
  const ZookeeperEndpoint endpoint_;
  const std::string base_;                   // <chroot>/tickd
  const std::string clients_;                // <chroot>/tickd-clients
  const std::string pauses_;                 // <chroot>/tickd-pauses
  const std::vector<std::string> roots_;     // the chroot's folders, base_, clients_, pauses_
  const std::string context_;                // "zookeeper <url>"
  std::mutex mu_;                            // serializes every call; guards everything below
  std::unique_ptr<Session> session_;         // the watcher context of zh_
  HandlePtr zh_;                             // closed before session_ goes
  std::string scratch_;                      // <clients>/<session id>
  steady_clock::time_point last_contact_{};  // the last answer from the server
  bool adopted_ = false;                     // zh_'s session has connected and scratch_ names it
  std::set<std::string> known_jobs_;         // jobs whose folders exist (this session)
  std::set<std::string> folders_gone_;       // jobs a write found folders missing of
  std::atomic<long> znodes_after_prune_{0};  // SizeWarnings: what the last Prune left
  std::map<std::string, HeadSeen> head_seen_;  // heads last seen (this session): blind claims
  // The claims this replica won in this session and has not completed: the versions
  // its complete goes by (CompleteBlind). Bounded: past kMaxHolding it starts over.
  struct Holding {
    std::string owner;
    Fields record;  // as the claim wrote it
    int record_version = 0;
    int lease_version = 0;
    bool run = false;  // forbid: the claim created a run node (completes read)
  };
  static constexpr std::size_t kMaxHolding = 100'000;
  std::map<std::pair<std::string, std::int64_t>, Holding> holding_;
  // The server's clock between its readings (the scratch node's mtime, whole ms; the
  // last 5 minutes, each widened by 1 ms per second of its age).
  ClockBound clock_bound_{{milliseconds(1), std::chrono::minutes(5), 1'000, milliseconds(1)}};
  // Leases renewed together share their round trips (lock/complete_batcher.h).
  GroupCommit<HeldClaim, RenewStatus> renewer_{
      [this](std::span<const HeldClaim> helds) { return RenewBatch(helds); }, "renew"};
  // Runs that end together complete together (group commit, lock/complete_batcher.h).
  CompleteBatcher completer_{
      [this](std::span<const CompleteRequest> reqs) { return CompleteBatch(reqs); }};
};

}  // namespace

Result<ZookeeperEndpoint> ParseZookeeperUrl(std::string_view url) {
  constexpr std::string_view kScheme = "zookeeper://";
  if (!url.starts_with(kScheme)) {
    return MakeError("",
                     "the URL must start with zookeeper:// "
                     "(zookeeper://host:port[,host:port…]/chroot)");
  }
  std::string_view rest = url.substr(kScheme.size());
  ZookeeperEndpoint ep;
  const auto slash = rest.find('/');
  if (slash != std::string_view::npos) {
    ep.chroot = std::string(rest.substr(slash));
    rest = rest.substr(0, slash);
    while (ep.chroot.size() > 1 && ep.chroot.back() == '/') ep.chroot.pop_back();
    if (ep.chroot == "/") ep.chroot.clear();
    if (ep.chroot.find("//") != std::string::npos) {
      return MakeError("", "bad chroot '" + ep.chroot + "' (empty path component)");
    }
  }
  if (rest.find('@') != std::string_view::npos) {
    return MakeError("",
                     "credentials do not go in a zookeeper URL: set lock.username and "
                     "lock.password_file (digest authentication)");
  }
  if (rest.empty()) return MakeError("", "no host in the URL");
  for (bool more = true; more;) {
    const auto comma = rest.find(',');
    std::string_view host = rest.substr(0, comma);
    more = comma != std::string_view::npos;
    rest = more ? rest.substr(comma + 1) : std::string_view();
    std::string_view port = "2181";
    const auto colon = host.rfind(':');
    const auto bracket = host.rfind(']');  // [::1]:2181
    if (colon != std::string_view::npos && (bracket == std::string_view::npos || colon > bracket)) {
      port = host.substr(colon + 1);
      host = host.substr(0, colon);
    }
    int value = 0;
    if (host.empty()) return MakeError("", "empty host in the URL");
    if (std::from_chars(port.data(), port.data() + port.size(), value).ptr !=
            port.data() + port.size() ||
        value <= 0 || value > 65535) {
      return MakeError("", "bad port '" + std::string(port) + "'");
    }
    ep.hosts += (ep.hosts.empty() ? "" : ",") + std::string(host) + ":" + std::to_string(value);
  }
  return ep;
}

Result<std::unique_ptr<Backend>> NewZookeeperBackend(const ZookeeperOptions& options) {
  auto endpoint = ParseZookeeperUrl(options.url);
  if (!endpoint) {
    Error e = endpoint.error();
    e.context = "zookeeper " + RedactUrl(options.url);  // a refused user:password@ too
    return tl::unexpected(std::move(e));
  }
  auto backend = std::make_unique<ZookeeperBackend>(options, std::move(*endpoint));
  if (auto ok = backend->Open(); !ok) return tl::unexpected(ok.error());
  return backend;
}

}  // namespace tickd::lock
