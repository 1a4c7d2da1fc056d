// The etcd backend against a secured member: https with the server checked against a
// CA made here (tests/support/test_pki.h), a client certificate (--client-cert-auth)
// and etcd authentication, as `tickd` with a role that may only touch /tickd/. Also:
// what is refused (a wrong password, no client certificate, a server signed by another
// CA), that an expired token is replaced without the caller seeing it, and that a
// client certificate with a CN works (the backend speaks gRPC, not the JSON gateway).
#include <curl/curl.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>

#include "lock/etcd/etcd_backend.h"
#include "lock/registry.h"
#include "tests/etcd/etcd_server.h"
#include "tests/support/claims.h"
#include "tests/support/test_pki.h"

using namespace std::chrono_literals;
using namespace tickd::lock;
using tickd::testing::NowUnix;
using tickd::testing::EtcdServer;
using tickd::testing::EtcdServerTls;
using tickd::testing::HeldOf;
using tickd::testing::MustClaim;
using tickd::testing::Req;
using tickd::testing::TestPki;

namespace {

constexpr const char* kPassword = "tickd-Etcd-pw-7f3a";

std::string B64(const std::string& in) {
  static constexpr char kDigits[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  unsigned value = 0;
  int bits = -6;
  for (unsigned char c : in) {
    value = (value << 8) + c;
    for (bits += 8; bits >= 0; bits -= 6) out.push_back(kDigits[(value >> bits) & 0x3f]);
  }
  if (bits > -6) out.push_back(kDigits[((value << 8) >> (bits + 8)) & 0x3f]);
  while (out.size() % 4 != 0) out.push_back('=');
  return out;
}

size_t Append(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

// A member with TLS, a CA, and the users and role tickd needs; authentication enabled.
class SecuredEtcd {
 public:
  explicit SecuredEtcd(std::vector<std::string> extra_args = {}) {
    if (!EtcdServer::Available() || !TestPki::Available() || !pki_.ok()) return;
    client_ = pki_.AnonymousClient();
    if (!client_) return;
    server_.emplace(EtcdServerTls{pki_.ca_file(), pki_.server().cert, pki_.server().key,
                                  std::move(extra_args)});
    if (!server_->running()) return;
    // The first answer may take a moment (the port accepts before the member leads).
    const auto until = std::chrono::steady_clock::now() + 10s;
    while (!Admin("/v3/maintenance/status", "{}") && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(50ms);
    }
    ready_ = Admin("/v3/auth/user/add", R"({"name":"root","password":"root-pw-1"})") &&
             Admin("/v3/auth/role/add", R"({"name":"root"})") &&
             Admin("/v3/auth/user/grant", R"({"user":"root","role":"root"})") &&
             Admin("/v3/auth/role/add", R"({"name":"tickd"})") &&
             Admin("/v3/auth/role/grant",
                   R"({"name":"tickd","perm":{"permType":"READWRITE","key":")" + B64("/tickd/") +
                       R"(","range_end":")" + B64("/tickd0") + R"("}})") &&
             Admin("/v3/auth/user/add",
                   std::string(R"({"name":"tickd","password":")") + kPassword + R"("})") &&
             Admin("/v3/auth/user/grant", R"({"user":"tickd","role":"tickd"})") &&
             Admin("/v3/auth/enable", "{}");
  }

  bool ready() const { return ready_; }
  TestPki& pki() { return pki_; }
  std::string url() const { return server_->url(); }

  // The options of a replica that has everything right.
  EtcdOptions Options() const {
    EtcdOptions options;
    options.url = url();
    options.op_timeout = 2s;
    options.username = "tickd";
    options.password = kPassword;
    options.tls = TlsFiles{true, pki_.ca_file(), client_->cert, client_->key};
    return options;
  }

 // POSTs with the client certificate (and `token` when not ""); the answer's body,
  // or nullopt when the answer is not HTTP 200.
  std::optional<std::string> Post(const std::string& path, const std::string& body,
                                  const std::string& token = "") {
    CURL* c = curl_easy_init();
    std::string answer;
    const std::string target = "https://127.0.0.1:" + std::to_string(server_->port()) + path;
    curl_slist* headers =
        token.empty() ? nullptr : curl_slist_append(nullptr, ("Authorization: " + token).c_str());
    curl_easy_setopt(c, CURLOPT_URL, target.c_str());
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.c_str());
    curl_easy_setopt(c, CURLOPT_CAINFO, pki_.ca_file().c_str());
    curl_easy_setopt(c, CURLOPT_SSLCERT, client_->cert.c_str());
    curl_easy_setopt(c, CURLOPT_SSLKEY, client_->key.c_str());
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 2000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &Append);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &answer);
    long status = 0;
    const bool sent = curl_easy_perform(c) == CURLE_OK;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(c);
    curl_slist_free_all(headers);
    if (!sent || status != 200) return std::nullopt;
    return answer;
  }

 private:
  // POSTs as an administrator before authentication is on (true: HTTP 200).
  bool Admin(const std::string& path, const std::string& body) {
    return Post(path, body).has_value();
  }

  TestPki pki_;
  std::optional<TestPki::KeyPair> client_;
  std::optional<EtcdServer> server_;
  bool ready_ = false;
};

bool Skip() {
  if (!EtcdServer::Available() || !TestPki::Available()) {
    WARN("etcd or openssl is not installed: skipped");
    return true;
  }
  return false;
}

}  // namespace

TEST_CASE("etcd TLS: https, a client certificate and a user: claims, renewals, completions",
          "[etcd][tls]") {
  if (Skip()) return;
  SecuredEtcd etcd;
  REQUIRE(etcd.ready());
  BackendOptions options;  // through the registry, as the daemon opens it
  const EtcdOptions direct = etcd.Options();
  options.backend = "etcd";
  options.url = direct.url;
  options.username = direct.username;
  options.password = direct.password;
  options.tls = direct.tls;
  tickd::RealClock clock;
  auto b = OpenBackend(options, clock);
  REQUIRE(b);
  const std::int64_t tick = NowUnix();
  const ClaimRequest req = Req("secured", tick, "a", "tok-a");
  const ClaimOutcome won = MustClaim(**b, req);
  REQUIRE(won.status == ClaimStatus::kWon);
  CHECK(MustClaim(**b, Req("secured", tick, "b", "tok-b")).status == ClaimStatus::kLost);
  CHECK(*(*b)->Renew(HeldOf(req, won)) == RenewStatus::kRenewed);
  CHECK(*(*b)->Complete(HeldOf(req, won), Completion{}) == CompleteStatus::kCompleted);
}

TEST_CASE("etcd TLS: a wrong password, a missing client certificate, another CA are refused",
          "[etcd][tls]") {
  if (Skip()) return;
  SecuredEtcd etcd;
  REQUIRE(etcd.ready());

  EtcdOptions wrong_password = etcd.Options();
  wrong_password.password = "not-the-password";
  auto refused = NewEtcdBackend(wrong_password);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().ToString().find("authentication failed") != std::string::npos);
  CHECK(refused.error().ToString().find("not-the-password") == std::string::npos);

  EtcdOptions no_user = etcd.Options();
  no_user.username.clear();
  auto anonymous = NewEtcdBackend(no_user);
  if (anonymous) {  // the status call may be open to anyone: a key is not
    CHECK_FALSE((*anonymous)->Claim(Req("secured", NowUnix(), "a", "tok-a")));
  }

  EtcdOptions no_cert = etcd.Options();
  no_cert.tls.cert_file.clear();
  no_cert.tls.key_file.clear();
  CHECK_FALSE(NewEtcdBackend(no_cert));

  TestPki other("another-ca");
  REQUIRE(other.ok());
  EtcdOptions other_ca = etcd.Options();
  other_ca.tls.ca_file = other.ca_file();
  auto untrusted = NewEtcdBackend(other_ca);
  REQUIRE_FALSE(untrusted);
  CHECK(untrusted.error().ToString().find("etcd") == 0);

  EtcdOptions plain = etcd.Options();
  plain.tls = TlsFiles{};
  CHECK_FALSE(NewEtcdBackend(plain));
}

TEST_CASE("etcd TLS: a user may only touch what its role grants (the prefix)", "[etcd][tls]") {
  if (Skip()) return;
  SecuredEtcd etcd;
  REQUIRE(etcd.ready());
  EtcdOptions elsewhere = etcd.Options();
  elsewhere.url += "?prefix=/elsewhere/";
  auto b = NewEtcdBackend(elsewhere);
  REQUIRE(b);  // connecting needs no key
  auto claim = (*b)->Claim(Req("j", NowUnix(), "a", "tok-a"));
  REQUIRE_FALSE(claim);
  CHECK(claim.error().ToString().find("permission denied") != std::string::npos);
}

TEST_CASE("etcd TLS: an expired token is replaced and the call goes through", "[etcd][tls]") {
  if (Skip()) return;
  SecuredEtcd etcd({"--auth-token=simple", "--auth-token-ttl=1"});
  REQUIRE(etcd.ready());
  auto b = NewEtcdBackend(etcd.Options());
  REQUIRE(b);
  const std::int64_t tick = NowUnix();
  const ClaimRequest req = Req("ttl", tick, "a", "tok-a");
  const ClaimOutcome won = MustClaim(**b, req);
  REQUIRE(won.status == ClaimStatus::kWon);
  // Simple tokens unused for their TTL are dropped by the member (checked every
  // second or so): the next call meets "invalid auth token" and authenticates again.
  // A token taken now shows that the member did drop tokens over the same wait.
  const auto token_answer = etcd.Post("/v3/auth/authenticate", std::string(R"({"name":"tickd",)") +
                                                                  R"("password":")" + kPassword +
                                                                  R"("})");
  REQUIRE(token_answer);
  const auto at = token_answer->find("\"token\":\"");
  REQUIRE(at != std::string::npos);
  const std::string token =
      token_answer->substr(at + 9, token_answer->find('"', at + 9) - (at + 9));
  const std::string range = R"({"key":")" + B64("/tickd/x") + R"("})";
  CHECK(etcd.Post("/v3/kv/range", range, token));
  std::this_thread::sleep_for(3500ms);
  CHECK_FALSE(etcd.Post("/v3/kv/range", range, token));
  auto renewed = (*b)->Renew(HeldOf(req, won));
  REQUIRE(renewed);
  CHECK(*renewed == RenewStatus::kRenewed);
  CHECK(MustClaim(**b, Req("ttl-other", tick, "a", "tok-a2")).status == ClaimStatus::kWon);
}

// etcd's JSON gateway refused a client certificate with a CN when authentication was on
// (CVE-2018-16886); over gRPC the token names the user and such a certificate works.
TEST_CASE("etcd TLS: a client certificate with a CN works with a user (gRPC, no gateway)",
          "[etcd][tls]") {
  if (Skip()) return;
  SecuredEtcd etcd;
  REQUIRE(etcd.ready());
  const auto named = etcd.pki().Client("tickd");
  REQUIRE(named);
  EtcdOptions options = etcd.Options();
  options.tls.cert_file = named->cert;
  options.tls.key_file = named->key;
  auto b = NewEtcdBackend(options);
  REQUIRE(b);
  const std::int64_t tick = NowUnix();
  const ClaimRequest req = Req("named", tick, "a", "tok-a");
  const ClaimOutcome won = MustClaim(**b, req);
  REQUIRE(won.status == ClaimStatus::kWon);
  CHECK(*(*b)->Complete(HeldOf(req, won), Completion{}) == CompleteStatus::kCompleted);
}
