// The PostgreSQL backend against a server that takes TLS connections only: the server
// checked with sslmode=verify-full against a CA made here (tests/support/test_pki.h),
// and either a client certificate whose CN is the role (pg_hba `cert`, no password)
// or a password over TLS. Also what is refused: no client certificate, a server signed
// by another CA, a host name the certificate does not carry, a plain connection.
#include <catch2/catch.hpp>
#include <chrono>
#include <string>

#include "lock/postgres/postgres_backend.h"
#include "lock/registry.h"
#include "tests/postgres/postgres_server.h"
#include "tests/support/claims.h"
#include "tests/support/test_pki.h"

using namespace std::chrono_literals;
using namespace tickd::lock;
using tickd::testing::NowUnix;
using tickd::testing::HeldOf;
using tickd::testing::MustClaim;
using tickd::testing::PostgresServer;
using tickd::testing::PostgresServerTls;
using tickd::testing::Req;
using tickd::testing::TestPki;

namespace {

constexpr const char* kCertRole = "tickd_cert";
constexpr const char* kDb = "tls";

// Certificate logins for kCertRole, password logins (over TLS) for the superuser,
// nothing without TLS.
constexpr const char* kHba =
    "local all all scram-sha-256\n"
    "hostssl all tickd_cert 127.0.0.1/32 cert\n"
    "hostssl all tickd 127.0.0.1/32 scram-sha-256\n"
    "host all all 127.0.0.1/32 reject\n";

class SecuredPostgres {
 public:
  SecuredPostgres() {
    if (!PostgresServer::Available() || !TestPki::Available() || !pki_.ok()) return;
    client_ = pki_.Client(kCertRole);
    if (!client_) return;
    server_.emplace("", false,
                    PostgresServerTls{pki_.ca_file(), pki_.server().cert, pki_.server().key, kHba});
    std::string error;
    ready_ = server_->running() &&
             server_->Query(std::string("CREATE ROLE ") + kCertRole + " LOGIN", "postgres",
                            &error) &&
             server_->CreateDatabase(kDb, &error) &&
             server_->Query(std::string("ALTER DATABASE ") + kDb + " OWNER TO " + kCertRole,
                            "postgres", &error);
    if (!ready_) WARN(error << server_->LogTail());
  }

  bool ready() const { return ready_; }
  const PostgresServer& server() const { return *server_; }

  // A replica that logs in with its certificate (the role from lock.username).
  PostgresOptions CertOptions() const {
    PostgresOptions options;
    options.url = "postgres://127.0.0.1:" + std::to_string(server_->port()) + "/" + kDb;
    options.username = kCertRole;
    options.tls = TlsFiles{true, pki_.ca_file(), client_->cert, client_->key};
    options.op_timeout = 2s;
    return options;
  }

 private:
  TestPki pki_;
  std::optional<TestPki::KeyPair> client_;
  std::optional<PostgresServer> server_;
  bool ready_ = false;
};

bool Skip() {
  if (!PostgresServer::Available() || !TestPki::Available()) {
    WARN("postgres 15 or openssl is not installed: skipped");
    return true;
  }
  return false;
}

std::string OpenError(const PostgresOptions& options) {
  auto backend = NewPostgresBackend(options);
  return backend ? std::string() : backend.error().ToString();
}

}  // namespace

TEST_CASE("postgres TLS: verify-full and a client certificate: claims, renewals, completions",
          "[postgres][tls]") {
  if (Skip()) return;
  SecuredPostgres pg;
  REQUIRE(pg.ready());
  const PostgresOptions direct = pg.CertOptions();
  BackendOptions options;  // through the registry, as the daemon opens it
  options.backend = "postgres";
  options.url = direct.url;
  options.username = direct.username;
  options.tls = direct.tls;
  tickd::RealClock clock;
  auto b = OpenBackend(options, clock);
  if (!b) FAIL(b.error().ToString() << pg.server().LogTail());
  const ClaimRequest req = Req("secured", NowUnix(), "a", "tok-a");
  const ClaimOutcome won = MustClaim(**b, req);
  REQUIRE(won.status == ClaimStatus::kWon);
  CHECK(MustClaim(**b, Req("secured", req.tick_unix, "b", "tok-b")).status ==
        ClaimStatus::kLost);
  CHECK(*(*b)->Renew(HeldOf(req, won)) == RenewStatus::kRenewed);
  CHECK(*(*b)->Complete(HeldOf(req, won), Completion{}) == CompleteStatus::kCompleted);
  // The session really is TLS, as the certificate's role.
  CHECK(pg.server().Query("SELECT count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a "
                          "USING (pid) WHERE s.ssl AND a.usename = 'tickd_cert' AND "
                          "s.client_dn = '/CN=tickd_cert'") == "1");
}

TEST_CASE("postgres TLS: lock.tls wins over sslmode=disable in the URL", "[postgres][tls]") {
  if (Skip()) return;
  SecuredPostgres pg;
  REQUIRE(pg.ready());
  PostgresOptions options = pg.CertOptions();
  options.url += "?sslmode=disable";
  CHECK(OpenError(options).empty());
}

TEST_CASE("postgres TLS: a password over verified TLS", "[postgres][tls]") {
  if (Skip()) return;
  SecuredPostgres pg;
  REQUIRE(pg.ready());
  PostgresOptions options = pg.CertOptions();
  options.username = PostgresServer::kUser;
  options.password = pg.server().password();
  options.tls.cert_file.clear();
  options.tls.key_file.clear();
  const std::string error = OpenError(options);
  CHECK(error.empty());
  options.password = "wrong-Password-1";
  const std::string refused = OpenError(options);
  CHECK(refused.find("password authentication failed") != std::string::npos);
  CHECK(refused.find("wrong-Password-1") == std::string::npos);
}

TEST_CASE("postgres TLS: no client certificate, another CA, a wrong host name, plain: refused",
          "[postgres][tls]") {
  if (Skip()) return;
  SecuredPostgres pg;
  REQUIRE(pg.ready());

  PostgresOptions no_cert = pg.CertOptions();
  no_cert.tls.cert_file.clear();
  no_cert.tls.key_file.clear();
  CHECK(OpenError(no_cert).find("certificate") != std::string::npos);

  TestPki other("another-ca");
  REQUIRE(other.ok());
  PostgresOptions other_ca = pg.CertOptions();
  other_ca.tls.ca_file = other.ca_file();
  CHECK(OpenError(other_ca).find("certificate verify failed") != std::string::npos);

  // Connects to 127.0.0.1 but expects the server to be "tickd-db.invalid":
  // verify-full checks the name, not only the CA.
  PostgresOptions wrong_name = pg.CertOptions();
  wrong_name.url = "postgres://tickd-db.invalid:" + std::to_string(pg.server().port()) + "/" +
                   kDb + "?hostaddr=127.0.0.1";
  CHECK(OpenError(wrong_name).find("does not match host name") != std::string::npos);

  PostgresOptions plain = pg.CertOptions();
  plain.tls = TlsFiles{};
  plain.url += "?sslmode=disable";
  CHECK(OpenError(plain).find("pg_hba.conf rejects") != std::string::npos);
}
