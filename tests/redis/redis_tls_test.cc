// Redis secured: an ACL user with only the commands and keys tickd needs (the default
// user off), and TLS by the route docs/stores.md "Securing the store" documents, since
// Debian's hiredis has no TLS: redis-server's own tls-port (client certificates
// required) reached through a stunnel client on the replica's loopback, which checks
// the server's certificate against the CA and shows the client's. Certificates are
// made by openssl at test time (tests/support/test_pki.h).
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <string>

#include "lock/redis/redis_backend.h"
#include "lock/registry.h"
#include "tests/redis/redis_server.h"
#include "tests/support/claims.h"
#include "tests/support/server_process.h"
#include "tests/support/test_pki.h"

using namespace std::chrono_literals;
using namespace tickd::lock;
using tickd::testing::NowUnix;
using tickd::testing::HeldOf;
using tickd::testing::MustClaim;
using tickd::testing::RedisServer;
using tickd::testing::RedisServerTls;
using tickd::testing::Req;
using tickd::testing::TestPki;

namespace {

constexpr const char* kUser = "tickd";
constexpr const char* kPassword = "redis-Acl-pw-31";
constexpr const char* kStunnel = "/usr/bin/stunnel4";

// The ACL of docs/stores.md "Securing the store": keys under the prefix, the commands the
// backend sends and those its scripts call (Redis 7 checks both), CONFIG GET for the
// durability warnings at start. The default user is off.
std::vector<std::string> AclArgs() {
  return {"--user",   "default", "off",     "--user",   kUser,      "on",
          std::string(">") + kPassword,     "~tickd:*", "resetchannels", "-@all",
          "+select",  "+info",   "+script|load",        "+eval",    "+evalsha",
          "+hset",    "+hgetall", "+hmget", "+pexpire", "+pttl",    "+zadd",
          "+zrange",  "+zrevrange", "+zrangebyscore",   "+zrem",    "+sadd",
          "+smembers", "+get",   "+set",    "+del",     "+time",    "+config|get"};
}

// Sends inline commands on a plain connection to `port` and returns what came back
// within a second.
std::string Raw(int port, const std::string& commands) {
  const int fd = tickd::testing::ConnectLoopback(port);
  if (fd < 0) return "<no connection>";
  timeval tv{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::string answer;
  if (::write(fd, commands.data(), commands.size()) == static_cast<ssize_t>(commands.size())) {
    ::shutdown(fd, SHUT_WR);
    char buf[512];
    for (ssize_t n; (n = ::read(fd, buf, sizeof(buf))) > 0;) answer.append(buf, n);
  }
  ::close(fd);
  return answer;
}

RedisOptions OptionsFor(int port) {
  RedisOptions options;
  options.url = "redis://127.0.0.1:" + std::to_string(port) + "/0";
  options.username = kUser;
  options.password = kPassword;
  options.op_timeout = 2s;
  return options;
}

// Every kind of call the daemon and `tickd status/locks` make.
void ExerciseEveryCall(Backend& b) {
  const std::int64_t tick = NowUnix();
  const ClaimRequest req = Req("acl", tick, "a", "tok-a");
  const ClaimOutcome won = MustClaim(b, req);
  REQUIRE(won.status == ClaimStatus::kWon);
  CHECK(MustClaim(b, Req("acl", tick, "b", "tok-b")).status == ClaimStatus::kLost);
  auto renewed = b.Renew(HeldOf(req, won));
  REQUIRE(renewed);
  CHECK(*renewed == RenewStatus::kRenewed);
  auto running = b.ListRunning();
  REQUIRE(running);
  CHECK(running->size() == 1);
  Completion printed{"done", 0, std::chrono::milliseconds(1)};
  printed.output = "o printed\n";
  printed.keep_outputs = 1;  // trims: ZREVRANGE, DEL, ZREM
  auto completed = b.Complete(HeldOf(req, won), printed);
  REQUIRE(completed);
  CHECK(*completed == CompleteStatus::kCompleted);
  auto outputs = b.Outputs("acl", std::vector<std::int64_t>{tick});
  REQUIRE(outputs);
  CHECK(*outputs == std::vector<std::string>{"o printed\n"});
  Observation obs;
  obs.job = "acl";
  obs.tick_unix = tick;
  obs.node = "b";
  CHECK(b.Record(obs));
  auto history = b.History("acl", 5);
  REQUIRE(history);
  CHECK(history->size() == 1);
  const ClaimRequest other = Req("acl-release", tick, "a", "tok-c");
  REQUIRE(MustClaim(b, other).status == ClaimStatus::kWon);
  auto released = b.ForceRelease("acl-release", tick);
  REQUIRE(released);
  CHECK(b.Prune(tickd::WallTime(std::chrono::seconds(tick - 86'400))));
  // Past everything: the output goes too (ZRANGEBYSCORE, DEL, ZREM on its index).
  CHECK(b.Prune(tickd::WallTime(std::chrono::seconds(tick + 1))));
  auto pruned = b.Outputs("acl", std::vector<std::int64_t>{tick});
  REQUIRE(pruned);
  CHECK(*pruned == std::vector<std::string>{""});
}

// A stunnel client on a free loopback port: plain in, TLS out to `connect_port`, the
// server checked against `ca_file` (chain and host name), `client` shown to it.
class StunnelClient {
 public:
  StunnelClient(int connect_port, const std::string& ca_file, const TestPki::KeyPair& client) {
    port_ = tickd::testing::FreeLoopbackPort();
    const std::string conf = dir_.path() + "/stunnel.conf";
    std::ofstream(conf) << "foreground = yes\n"
                           "pid =\n"
                           "debug = warning\n"
                           "[redis]\n"
                           "client = yes\n"
                           "accept = 127.0.0.1:" << port_ << "\n"
                        << "connect = 127.0.0.1:" << connect_port << "\n"
                        << "verifyChain = yes\n"
                           "checkHost = localhost\n"
                           "sni = localhost\n"
                           "CAfile = " << ca_file << "\n"
                        << "cert = " << client.cert << "\n"
                        << "key = " << client.key << "\n";
    pid_ = tickd::testing::SpawnServer({kStunnel, conf}, dir_.path() + "/stunnel.log");
    tickd::testing::WaitUntilServing(
        pid_, [this] { return tickd::testing::AcceptsOnLoopback(port_); }, 5s);
  }
  ~StunnelClient() { tickd::testing::StopServer(pid_, SIGTERM); }
  StunnelClient(const StunnelClient&) = delete;
  StunnelClient& operator=(const StunnelClient&) = delete;

  bool running() const { return pid_ > 0; }
  int port() const { return port_; }
  std::string log() const {
    std::ifstream in(dir_.path() + "/stunnel.log");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

 private:
  tickd::testing::TempDir dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace

TEST_CASE("redis ACL: a user with the documented ACL can make every call; the default user "
          "is off",
          "[redis][auth]") {
  if (!RedisServer::Available()) return;
  RedisServer server(false, "", AclArgs());
  REQUIRE(server.running());

  // Through the registry, as the daemon opens it: lock.username + the password.
  BackendOptions options;
  options.backend = "redis";
  options.url = "redis://127.0.0.1:" + std::to_string(server.port()) + "/0";
  options.username = kUser;
  options.password = kPassword;
  tickd::RealClock clock;
  auto b = OpenBackend(options, clock);
  if (!b) FAIL(b.error().ToString());
  ExerciseEveryCall(**b);

  // The default user is off, and tickd's user is held to its keys and commands.
  CHECK(Raw(server.port(), "PING\r\n").find("-NOAUTH") == 0);
  const std::string auth = std::string("AUTH ") + kUser + " " + kPassword + "\r\n";
  CHECK(Raw(server.port(), auth + "GET other:key\r\n").find("-NOPERM") != std::string::npos);
  CHECK(Raw(server.port(), auth + "FLUSHALL\r\n").find("-NOPERM") != std::string::npos);

  RedisOptions wrong = OptionsFor(server.port());
  wrong.password = "not-the-password";
  auto refused = NewRedisBackend(wrong);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().ToString().find("not-the-password") == std::string::npos);
}

TEST_CASE("redis TLS: through a stunnel client to redis-server's tls-port", "[redis][tls]") {
  if (!RedisServer::Available() || !TestPki::Available() || ::access(kStunnel, X_OK) != 0) {
    WARN("redis-server, openssl or stunnel4 is not installed: skipped");
    return;
  }
  TestPki pki;
  REQUIRE(pki.ok());
  const auto client = pki.Client("tickd");
  REQUIRE(client);
  RedisServer server(false, "", AclArgs(),
                     RedisServerTls{pki.ca_file(), pki.server().cert, pki.server().key});
  REQUIRE(server.running());

  StunnelClient tunnel(server.port(), pki.ca_file(), *client);
  INFO(tunnel.log());
  REQUIRE(tunnel.running());
  auto b = NewRedisBackend(OptionsFor(tunnel.port()));
  if (!b) FAIL(b.error().ToString());
  ExerciseEveryCall(**b);

  // The TLS port refuses a plain client: no bytes of ours reach Redis unencrypted.
  CHECK(Raw(server.port(), "PING\r\n").find("+PONG") == std::string::npos);

  // A tunnel that trusts another CA does not carry the connection.
  TestPki other("another-ca");
  REQUIRE(other.ok());
  StunnelClient untrusting(server.port(), other.ca_file(), *client);
  REQUIRE(untrusting.running());
  RedisOptions through_untrusting = OptionsFor(untrusting.port());
  through_untrusting.op_timeout = 1s;
  CHECK_FALSE(NewRedisBackend(through_untrusting));
}
