// The etcd backend's transport (docs/backends.md, "etcd v3", Wire): etcd's v3 API over
// gRPC, spoken in the JSON of etcd's gateway, plus the member's clock.
//
// Call takes a gateway path (/v3/kv/txn, …) and its request in the gateway's JSON and
// answers in the same JSON (Txn, for the claim path, takes and answers the messages): the gateway's JSON is protobuf's proto3 JSON of
// etcdserverpb (original field names, int64 as strings, bytes base64, zero values
// omitted), so the request becomes the RPC's message (lock/etcd/proto) and the answer
// becomes JSON again. Thread-safe: calls run concurrently, multiplexed on one channel
// (one HTTP/2 connection) per member; only the token, the member tried first and the
// clock bounds are shared under a mutex.
//
// etcd's clock: gRPC answers carry no Date. GET /version over HTTP/1.1 (libcurl; etcd
// answers it without Raft) carries the member's Date, which feeds that member's
// SecondClockBound (lock/clock_check.h). SyncClock sends one; so does every call whose
// member has no Date newer than kClockRefresh. An answer's clock is then the bound at
// its sending and arrival (see WireReply).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "lock/clock_check.h"
#include "lock/tls_files.h"

namespace etcdserverpb {  // lock/etcd/proto/rpc.proto, generated
class TxnRequest;
class TxnResponse;
}  // namespace etcdserverpb

namespace tickd::lock {

struct WireOptions {
  std::vector<std::string> hosts;  // "host:port", tried in this order
  TlsFiles tls;                    // enabled: https and gRPC over TLS
  std::string username;            // "" = no etcd authentication
  std::string password;
  std::string context;             // "etcd <url>", the context of every error
};

struct WireReply {
  std::string body;  // the answer in the gateway's JSON
  // The member's clock, from its Dates (SecondClockBound::Read), unset when no Date of
  // the last minute bounds it. server_ms: a whole second at or below what the clock can
  // have read when the member handled the request (the floor of the bound's `lo` when
  // the request was sent) — as lenient as a Date header, so `missed` is judged only
  // when the member's clock was surely past. server_hi_ms: the latest it can have read
  // (the bound's `hi` when the answer arrived), so `early` only when even that is early.
  std::optional<std::int64_t> server_ms;
  std::optional<std::int64_t> server_hi_ms;
};

class EtcdWire {
 public:
  using Deadline = std::chrono::steady_clock::time_point;
  // How old the member's newest Date may be before a call sends GET /version first.
  static constexpr std::chrono::milliseconds kClockRefresh{250};

  static Result<std::unique_ptr<EtcdWire>> Open(WireOptions options);
  virtual ~EtcdWire() = default;

  // One request to the member tried first. A member that cannot be connected to, or
  // that answers UNAVAILABLE (no leader, …), passes the request to the next while time
  // is left. Anything else (no answer by the deadline, a connection lost after sending,
  // an error of etcd's) is returned: the caller decides what it means. With
  // authentication, a request refused for an invalid token is sent once more with a
  // new token. LeaseRevoke of a lease not found answers "{}".
  // `path`: /v3/kv/{range,put,deleterange,txn}, /v3/lease/{grant,revoke,keepalive},
  // /v3/auth/authenticate, /v3/maintenance/status, /v3/cluster/member/list.
  virtual Result<WireReply> Call(std::string_view path, const std::string& request_json,
                                 Deadline deadline) = 0;

  // Txn with the messages themselves (the claim path's requests: no JSON either way;
  // the caller includes the generated rpc.pb.h). The member, retry, token and clock
  // handling of Call; the answer goes into *response (WireReply::body stays empty).
  virtual Result<WireReply> Txn(const etcdserverpb::TxnRequest& request,
                                etcdserverpb::TxnResponse* response, Deadline deadline) = 0;

  // GET /version on the member tried first (the next one when it cannot be reached):
  // its Date narrows that member's clock bound. Returns whether a Date came back.
  virtual bool SyncClock(Deadline deadline) = 0;

  // What the clock of the member tried first reads now, from its Dates of the last
  // minute (SecondClockBound::Read); nothing without one. A request sent without an
  // answer of its own to judge by (a blind claim) judges its instant on it.
  std::optional<SecondClockBound::Reading> ClockNow() {
    return ClockAt(std::chrono::steady_clock::now());
  }
  // The same, at steady instant `at`, from the Dates of the minute before it (and any
  // after it: the member's clock ran at the same offset then).
  virtual std::optional<SecondClockBound::Reading> ClockAt(
      std::chrono::steady_clock::time_point at) = 0;
};

}  // namespace tickd::lock
