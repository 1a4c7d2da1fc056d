// etcd's v3 API over gRPC in the gateway's JSON, and the member's clock over GET
// /version (lock/etcd/etcd_wire.h).
//
// Members: one channel each, with its own subchannel pool (so its own HTTP/2
// connection: gRPC would otherwise share one between the channels of every backend
// handle of the process to the same address), reconnecting within a second after a
// failure (gRPC's default backoff grows to two minutes). A call goes to the member
// tried first (current_); before it, the channel must be READY: a member whose
// connection cannot be made (or, when others are left to try, is failing) passes the
// request on, like an answer of UNAVAILABLE from etcd itself ("etcdserver: no leader",
// "… request timed out": what the gateway answered 503). Everything else after the
// call was sent is the caller's to judge (DEADLINE_EXCEEDED, a connection lost: the
// claim path treats them as ambiguous). Deadlines are given to gRPC on the monotonic
// clock: a stepped wall clock (the nemesis' clock cells) does not move them.
#include "lock/etcd/etcd_wire.h"

#include <curl/curl.h>
#include <google/protobuf/util/json_util.h>
#include <grpc/support/time.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>

#include "lock/clock_check.h"
#include "rpc.grpc.pb.h"  // lock/etcd/proto/rpc.proto, generated

namespace tickd::lock {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;
using Deadline = EtcdWire::Deadline;
namespace pb = etcdserverpb;

milliseconds Left(Deadline deadline) {
  return std::chrono::duration_cast<milliseconds>(deadline - steady_clock::now());
}

// `deadline` on gRPC's monotonic clock.
gpr_timespec GrpcDeadline(Deadline deadline) {
  const milliseconds left = std::max(milliseconds(0), Left(deadline));
  return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                      gpr_time_from_millis(left.count(), GPR_TIMESPAN));
}

Result<std::string> ReadFile(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  if (!in || !(text << in.rdbuf())) return MakeError("", "cannot read " + what + " " + path);
  return text.str();
}

const char* CodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::CANCELLED: return "CANCELLED";
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
    case grpc::StatusCode::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::StatusCode::UNAUTHENTICATED: return "UNAUTHENTICATED";
    default: return "gRPC error";
  }
}

// ---- proto3 JSON (the gateway's) ----

Result<void> FromJson(const std::string& json, google::protobuf::Message* message) {
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;  // a field missing from proto/ is a bug here
  const auto status = google::protobuf::util::JsonStringToMessage(json, message, options);
  if (!status.ok()) return MakeError("", std::string(status.message()));
  return {};
}

std::string ToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;  // key, range_end, … as the gateway
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(message, &out, options);
  return out.empty() ? "{}" : out;
}

// One member: its channel and the stubs of the services on it.
struct Member {
  std::string host;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::KV::Stub> kv;
  std::unique_ptr<pb::Lease::Stub> lease;
  std::unique_ptr<pb::Auth::Stub> auth;
  std::unique_ptr<pb::Maintenance::Stub> maintenance;
  std::unique_ptr<pb::Cluster::Stub> cluster;
};

// A request bound to its RPC: sends it to a member, the answer's JSON into *answer.
using Rpc = std::function<grpc::Status(Member&, grpc::ClientContext&, std::string* answer)>;

template <class Request, class Response, class Send>
Result<Rpc> Unary(const std::string& json, Send send) {
  auto request = std::make_shared<Request>();
  if (auto ok = FromJson(json, request.get()); !ok) return tl::unexpected(ok.error());
  return Rpc([request, send](Member& m, grpc::ClientContext& context, std::string* answer) {
    Response response;
    grpc::Status status = send(m, context, *request, &response);
    if (status.ok()) *answer = ToJson(response);
    return status;
  });
}

// LeaseKeepAlive is a stream: one request, its one answer, then the stream is dropped.
Result<Rpc> KeepAlive(const std::string& json) {
  auto request = std::make_shared<pb::LeaseKeepAliveRequest>();
  if (auto ok = FromJson(json, request.get()); !ok) return tl::unexpected(ok.error());
  return Rpc([request](Member& m, grpc::ClientContext& context, std::string* answer) {
    auto stream = m.lease->LeaseKeepAlive(&context);
    pb::LeaseKeepAliveResponse response;
    if (stream->Write(*request) && stream->Read(&response)) {
      context.TryCancel();  // done with the stream: no wait for etcd to close it
      (void)stream->Finish();
      *answer = ToJson(response);
      return grpc::Status::OK;
    }
    grpc::Status status = stream->Finish();
    if (status.ok()) status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "stream ended unanswered");
    return status;
  });
}

// The RPC of a gateway path.
Result<Rpc> Bind(std::string_view path, const std::string& json) {
  if (path == "/v3/kv/txn") {
    return Unary<pb::TxnRequest, pb::TxnResponse>(
        json, [](Member& m, grpc::ClientContext& c, const auto& q, auto* r) {
          return m.kv->Txn(&c, q, r);
        });
  }
  if (path == "/v3/kv/range") {
    return Unary<pb::RangeRequest, pb::RangeResponse>(
        json, [](Member& m, grpc::ClientContext& c, const auto& q, auto* r) {
          return m.kv->Range(&c, q, r);
        });
  }
  if (path == "/v3/kv/put") {
    return Unary<pb::PutRequest, pb::PutResponse>(
        json, [](Member& m, grpc::ClientContext& c, const auto& q, auto* r) {
          return m.kv->Put(&c, q, r);
        });
  }
  if (path == "/v3/kv/deleterange") {
    return Unary<pb::DeleteRangeRequest, pb::DeleteRangeResponse>(
        json, [](Member& m, grpc::ClientContext& c, const auto& q, auto* r) {
          return m.kv->DeleteRange(&c, q, r);
        });
  }
  if (path == "/v3/lease/grant") {
    return Unary<pb::LeaseGrantRequest, pb::LeaseGrantResponse>(
        json, [](Member& m, grpc::ClientContext& c, const auto& q, auto* r) {
          return m.lease->LeaseGrant(&c, q, r);
        });
  }
  if (path == "/v3/lease/revoke") {
    return Unary<pb::LeaseRevokeRequest, pb::LeaseRevokeResponse>(
        json, [](Member& m, grpc::ClientContext& c, const auto& q, auto* r) {
          return m.lease->LeaseRevoke(&c, q, r);
        });
  }
  if (path == "/v3/lease/keepalive") return KeepAlive(json);
  if (path == "/v3/auth/authenticate") {
    return Unary<pb::AuthenticateRequest, pb::AuthenticateResponse>(
        json, [](Member& m, grpc::ClientContext& c, const auto& q, auto* r) {
          return m.auth->Authenticate(&c, q, r);
        });
  }
  if (path == "/v3/maintenance/status") {
    return Unary<pb::StatusRequest, pb::StatusResponse>(
        json, [](Member& m, grpc::ClientContext& c, const auto& q, auto* r) {
          return m.maintenance->Status(&c, q, r);
        });
  }
  if (path == "/v3/cluster/member/list") {
    return Unary<pb::MemberListRequest, pb::MemberListResponse>(
        json, [](Member& m, grpc::ClientContext& c, const auto& q, auto* r) {
          return m.cluster->MemberList(&c, q, r);
        });
  }
  return MakeError("", "no RPC for this path");
}

// ---- GET /version: the member's Date ----

using CurlPtr = std::unique_ptr<CURL, decltype(&curl_easy_cleanup)>;

size_t IgnoreBody(char*, size_t size, size_t n, void*) { return size * n; }

size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  const std::string_view line(data, size * n);
  constexpr std::string_view kDate = "date:";
  if (line.size() > kDate.size()) {
    std::string name(line.substr(0, kDate.size()));
    std::transform(name.begin(), name.end(), name.begin(), [](char c) {
      return static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    });
    if (name == kDate) {
      const std::string value(line.substr(kDate.size()));
      const time_t t = curl_getdate(value.c_str(), nullptr);
      if (t > 0) *static_cast<std::optional<std::int64_t>*>(user) = std::int64_t{t} * 1000;
    }
  }
  return size * n;
}

class GrpcWire final : public EtcdWire {
 public:
  explicit GrpcWire(WireOptions options)
      : options_(std::move(options)),
        curl_(curl_easy_init(), &curl_easy_cleanup),
        clocks_(options_.hosts.size()) {}
  ~GrpcWire() override {
    poll_cq_.Shutdown();
    void* tag = nullptr;
    bool ok = false;
    while (poll_cq_.Next(&tag, &ok)) {
    }
  }

  Result<void> Open() {
    if (!curl_) return MakeError(options_.context, "cannot create an HTTP handle");
    std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
    const TlsFiles& tls = options_.tls;
    if (tls.enabled) {
      grpc::SslCredentialsOptions ssl;  // empty roots: the system's
      if (!tls.ca_file.empty()) {
        auto ca = ReadFile(tls.ca_file, "the CA file");
        if (!ca) return MakeError(options_.context, ca.error().detail);
        ssl.pem_root_certs = std::move(*ca);
      }
      if (!tls.cert_file.empty()) {
        auto cert = ReadFile(tls.cert_file, "the certificate file");
        if (!cert) return MakeError(options_.context, cert.error().detail);
        auto key = ReadFile(tls.key_file, "the key file");
        if (!key) return MakeError(options_.context, key.error().detail);
        ssl.pem_cert_chain = std::move(*cert);
        ssl.pem_private_key = std::move(*key);
      }
      credentials = grpc::SslCredentials(ssl);
      CURL* c = curl_.get();  // kept by the handle for every GET /version
      if (!tls.ca_file.empty()) curl_easy_setopt(c, CURLOPT_CAINFO, tls.ca_file.c_str());
      if (!tls.cert_file.empty()) curl_easy_setopt(c, CURLOPT_SSLCERT, tls.cert_file.c_str());
      if (!tls.key_file.empty()) curl_easy_setopt(c, CURLOPT_SSLKEY, tls.key_file.c_str());
    }
    for (const std::string& host : options_.hosts) {
      grpc::ChannelArguments args;
      args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
      args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
      args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
      args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
      args.SetMaxReceiveMessageSize(-1);  // History and outputs: etcd sends what it has
      auto m = std::make_unique<Member>();
      m->host = host;
      m->channel = grpc::CreateCustomChannel(host, credentials, args);
      m->kv = pb::KV::NewStub(m->channel);
      m->lease = pb::Lease::NewStub(m->channel);
      m->auth = pb::Auth::NewStub(m->channel);
      m->maintenance = pb::Maintenance::NewStub(m->channel);
      m->cluster = pb::Cluster::NewStub(m->channel);
      members_.push_back(std::move(m));
    }
    return {};
  }

  Result<WireReply> Call(std::string_view path, const std::string& request_json,
                         Deadline deadline) override {
    auto rpc = Bind(path, request_json);
    if (!rpc) return MakeError(Context(path), "request not understood: " + rpc.error().detail);
    return Authenticated(path, *rpc, deadline);
  }

  Result<WireReply> Txn(const pb::TxnRequest& request, pb::TxnResponse* response,
                        Deadline deadline) override {
    const Rpc rpc = [&request, response](Member& m, grpc::ClientContext& context, std::string*) {
      response->Clear();
      return m.kv->Txn(&context, request, response);
    };
    return Authenticated("/v3/kv/txn", rpc, deadline);
  }

  std::optional<SecondClockBound::Reading> ClockAt(steady_clock::time_point at) override {
    std::lock_guard lock(clock_mu_);
    return clocks_[current_.load()].bound.Read(at);
  }

  bool SyncClock(Deadline deadline) override {
    std::lock_guard lock(curl_mu_);
    for (std::size_t attempt = 0; attempt < members_.size(); ++attempt) {
      std::size_t i = current_.load();
      bool connected = false;
      if (DateOfLocked(i, deadline, &connected)) return true;
      if (connected) return false;  // it answered without a Date, or too late
      current_.compare_exchange_strong(i, Next(i));
    }
    return false;
  }

 private:
  // Send, with the token when etcd authentication is on: a request refused for an
  // invalid token is sent once more with a new one.
  Result<WireReply> Authenticated(std::string_view path, const Rpc& rpc, Deadline deadline) {
    if (options_.username.empty()) return Send(path, rpc, deadline, "", nullptr);
    auto token = Token(deadline, "");
    if (!token) return tl::unexpected(token.error());
    bool token_refused = false;
    auto reply = Send(path, rpc, deadline, *token, &token_refused);
    if (!token_refused) return reply;
    token = Token(deadline, *token);  // etcd refused it before doing anything: no repeat
    if (!token) return tl::unexpected(token.error());
    return Send(path, rpc, deadline, *token, nullptr);
  }

  std::string Context(std::string_view path) const {
    return options_.context + ": " + std::string(path);
  }
  std::size_t Next(std::size_t i) const { return (i + 1) % members_.size(); }

  // The token to send: the current one, or a new one when there is none or `stale`
  // (refused) is still the current one. Authentications are one at a time.
  Result<std::string> Token(Deadline deadline, const std::string& stale) {
    std::lock_guard lock(token_mu_);
    if (!token_.empty() && token_ != stale) return token_;
    token_.clear();
    pb::AuthenticateRequest request;
    request.set_name(options_.username);
    request.set_password(options_.password);
    auto rpc = Unary<pb::AuthenticateRequest, pb::AuthenticateResponse>(
        ToJson(request), [](Member& m, grpc::ClientContext& c, const auto& q, auto* r) {
          return m.auth->Authenticate(&c, q, r);
        });
    if (!rpc) return tl::unexpected(rpc.error());
    auto reply = Send("/v3/auth/authenticate", *rpc, deadline, "", nullptr);
    if (!reply) return tl::unexpected(reply.error());
    pb::AuthenticateResponse response;
    google::protobuf::util::JsonParseOptions options;
    options.ignore_unknown_fields = true;
    (void)google::protobuf::util::JsonStringToMessage(reply->body, &response, options);
    if (response.token().empty()) {
      return MakeError(Context("/v3/auth/authenticate"),
                       "no token in the answer (is authentication enabled on the cluster?)");
    }
    token_ = response.token();
    return token_;
  }

  // Waits until member m's channel is READY or failing (TRANSIENT_FAILURE: a call then
  // fails at once, naming why), at most until `by`; with `wait_out_failure`, a failing
  // channel is waited on too (it reconnects within a second). Returns the state.
  grpc_connectivity_state Connect(Member& m, Deadline by, bool wait_out_failure) {
    grpc_connectivity_state state = m.channel->GetState(true);
    if (state == GRPC_CHANNEL_READY) {
      // gRPC reads an idle connection only while a thread polls (a call, a wait). One
      // poll that does not wait (Linux's poller is one epoll set for every connection
      // of the process), so that a connection the member closed meanwhile (a restart)
      // is seen as closed before a request is sent on it, not after — as libcurl
      // checks a kept connection before reusing it. No timer is involved: gRPC's
      // timers fire late under libfaketime (the tests' skewed replicas).
      void* tag = nullptr;
      bool ok = false;
      (void)poll_cq_.AsyncNext(&tag, &ok, gpr_now(GPR_CLOCK_MONOTONIC));
      state = m.channel->GetState(true);
    }
    while (state != GRPC_CHANNEL_READY && state != GRPC_CHANNEL_SHUTDOWN &&
           (state != GRPC_CHANNEL_TRANSIENT_FAILURE || wait_out_failure) &&
           Left(by) > milliseconds(0) &&
           m.channel->WaitForStateChange(state, GrpcDeadline(by))) {
      state = m.channel->GetState(true);
    }
    return state;
  }

  // One request, passed from member to member as the header says.
  Result<WireReply> Send(std::string_view path, const Rpc& rpc, Deadline deadline,
                         const std::string& token, bool* token_refused) {
    std::string last_error = "no time left";
    const std::size_t n = members_.size();
    for (std::size_t attempt = 0; attempt < n; ++attempt) {
      const milliseconds left = Left(deadline);
      if (left <= milliseconds(0)) break;
      std::size_t i = current_.load();
      Member& m = *members_[i];
      const bool last = attempt + 1 == n;
      // Members not tried yet share what is left for connecting.
      const grpc_connectivity_state state = Connect(
          m, last ? deadline : steady_clock::now() + left / static_cast<long>(n - attempt), last);
      if (state != GRPC_CHANNEL_READY && state != GRPC_CHANNEL_TRANSIENT_FAILURE) {
        last_error = m.host + ": could not connect in time";
        current_.compare_exchange_strong(i, Next(i));
        continue;
      }
      RefreshClock(i, deadline);
      grpc::ClientContext context;
      context.set_deadline(GrpcDeadline(deadline));
      if (!token.empty()) context.AddMetadata("token", token);
      std::string answer;
      const steady_clock::time_point sent = steady_clock::now();
      const grpc::Status status = rpc(m, context, &answer);
      const steady_clock::time_point received = steady_clock::now();
      if (status.ok()) return Reply(i, std::move(answer), sent, received);
      const std::string& message = status.error_message();
      last_error = m.host + ": " + CodeName(status.error_code()) + ": " + message;
      if (message.find("database space exceeded") != std::string::npos) {
        last_error +=
            " (the member's db reached --quota-backend-bytes: etcd refuses every write until "
            "its history is compacted, the members defragmented and the NOSPACE alarm "
            "disarmed; docs/stores.md)";
      }
      if (status.error_code() == grpc::StatusCode::UNAVAILABLE &&
          (message.rfind("etcdserver:", 0) == 0 || state != GRPC_CHANNEL_READY ||
           message.find("failed to connect") != std::string::npos)) {
        // etcd's own refusal (no leader, …), or never sent (no connection): another
        // member may take it.
        current_.compare_exchange_strong(i, Next(i));
        continue;
      }
      if (path == "/v3/lease/revoke" && status.error_code() == grpc::StatusCode::NOT_FOUND) {
        return Reply(i, "{}", sent, received);  // it expired already
      }
      if (token_refused != nullptr && message.find("invalid auth token") != std::string::npos) {
        *token_refused = true;
      }
      return MakeError(Context(path), last_error);
    }
    return MakeError(Context(path), last_error);
  }

  WireReply Reply(std::size_t member, std::string body, steady_clock::time_point sent,
                  steady_clock::time_point received) {
    WireReply reply;
    reply.body = std::move(body);
    std::lock_guard lock(clock_mu_);
    const auto at_sent = clocks_[member].bound.Read(sent);
    const auto at_received = clocks_[member].bound.Read(received);
    if (at_sent && at_received) {
      reply.server_ms = at_sent->lo >= 0 ? at_sent->lo / 1000 * 1000 : 0;
      reply.server_hi_ms = at_received->hi;
    }
    return reply;
  }

  // Before a call to member i: a GET /version when it was last asked more than
  // kClockRefresh ago, unless another thread is asking already (a call never waits for
  // it). At most a quarter of the call's time goes to it.
  void RefreshClock(std::size_t i, Deadline deadline) {
    {
      std::lock_guard lock(clock_mu_);
      if (clocks_[i].asked != steady_clock::time_point() &&
          steady_clock::now() - clocks_[i].asked < kClockRefresh) {
        return;
      }
    }
    std::unique_lock lock(curl_mu_, std::try_to_lock);
    if (!lock.owns_lock()) return;
    bool connected = false;
    (void)DateOfLocked(i, steady_clock::now() + Left(deadline) / 4, &connected);
  }

  // REQUIRES: curl_mu_ held. GET /version on member i; its Date goes into the member's
  // bound. *connected: a connection was made.
  bool DateOfLocked(std::size_t i, Deadline deadline, bool* connected) {
    const milliseconds left = Left(deadline);
    if (left <= milliseconds(0)) return false;
    const std::string url =
        (options_.tls.enabled ? "https://" : "http://") + members_[i]->host + "/version";
    std::optional<std::int64_t> date_ms;
    CURL* c = curl_.get();
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(std::max<long>(1, left.count())));
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &IgnoreBody);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, &OnHeader);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &date_ms);
    const steady_clock::time_point sent = steady_clock::now();
    const CURLcode rc = curl_easy_perform(c);
    const steady_clock::time_point received = steady_clock::now();
    curl_off_t connected_us = 0;
    curl_easy_getinfo(c, CURLINFO_CONNECT_TIME_T, &connected_us);
    *connected = rc == CURLE_OK || connected_us > 0;
    std::lock_guard lock(clock_mu_);
    clocks_[i].asked = sent;
    if (rc != CURLE_OK || !date_ms) return false;
    clocks_[i].bound.Add(*date_ms, sent, received);
    return true;
  }

  const WireOptions options_;
  grpc::CompletionQueue poll_cq_;  // never holds a call: polled by Connect only
  std::vector<std::unique_ptr<Member>> members_;
  std::atomic<std::size_t> current_{0};  // the member tried first
  std::mutex token_mu_;
  std::string token_;  // guarded by token_mu_: etcd's auth token ("" = none yet)
  std::mutex curl_mu_;  // guards curl_: one GET /version at a time
  CurlPtr curl_;
  struct MemberClock {
    SecondClockBound bound;  // narrows the member's Dates to under a second
    steady_clock::time_point asked;  // when GET /version was last sent to it
  };
  std::mutex clock_mu_;
  std::vector<MemberClock> clocks_;  // guarded by clock_mu_, one per member (its own clock)
};

}  // namespace

Result<std::unique_ptr<EtcdWire>> EtcdWire::Open(WireOptions options) {
  static std::once_flag curl_init;
  std::call_once(curl_init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  auto wire = std::make_unique<GrpcWire>(std::move(options));
  if (auto ok = wire->Open(); !ok) return tl::unexpected(ok.error());
  return std::unique_ptr<EtcdWire>(std::move(wire));
}

}  // namespace tickd::lock
