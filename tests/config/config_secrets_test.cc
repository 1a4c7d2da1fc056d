// `lock.username`, `lock.password_file`, `lock.tls`: paths resolve against the job
// file's folder, missing or unreadable files are errors naming the key, the password
// is read from its file (never kept in the Config), and no message shows a password.
#include <sys/stat.h>

#include <catch2/catch.hpp>

#include "config/config.h"
#include "tests/config/temp_dir.h"

namespace tickd::config {
namespace {

using testing::ErrorLines;
using testing::Joined;
using testing::TempDir;
using testing::TestOptions;

constexpr const char* kSecret = "s3cret-Pw-9q";

std::string JobFile(const std::string& lock) {
  return "version: 1\nlock:\n" + lock +
         "jobs:\n  - name: a\n    schedule: \"@every 1m\"\n    shell: \"true\"\n";
}

// Every error and warning of loading `text`, one per line.
std::string Problems(const tl::expected<Config, std::vector<ConfigError>>& loaded) {
  if (!loaded) return Joined(ErrorLines(loaded));
  std::string out;
  for (const ConfigError& w : loaded->warnings) out += w.ToString() + "\n";
  return out;
}

TEST_CASE("lock: username, password_file and tls load, relative to the job file", "[config]") {
  TempDir dir;
  dir.Write("secrets/pg.pw", std::string(kSecret) + "\n", 0600);
  dir.Write("tls/ca.crt", "ca", 0644);
  dir.Write("tls/client.crt", "cert", 0644);
  dir.Write("tls/client.key", "key", 0600);
  const std::string file = dir.Write("jobs.yaml", JobFile(R"(  backend: postgres
  url: postgres://127.0.0.1:5432/tickd
  username: tickd
  password_file: secrets/pg.pw
  tls:
    ca_file: tls/ca.crt
    cert_file: tls/client.crt
    key_file: ./tls/client.key
)"));
  auto loaded = LoadConfig(file, TestOptions());
  INFO(Problems(loaded));
  REQUIRE(loaded);
  CHECK(loaded->warnings.empty());
  const LockSettings& lock = loaded->lock;
  CHECK(lock.username == "tickd");
  CHECK(lock.password_file == (dir.path() / "secrets/pg.pw").string());
  CHECK(lock.tls.enabled);
  CHECK(lock.tls.ca_file == (dir.path() / "tls/ca.crt").string());
  CHECK(lock.tls.cert_file == (dir.path() / "tls/client.crt").string());
  CHECK(lock.tls.key_file == (dir.path() / "tls/client.key").string());
  auto password = ReadLockPassword(lock);
  REQUIRE(password);
  CHECK(*password == kSecret);  // the newline `echo` writes is not part of it
}

TEST_CASE("lock: `tls: {}` is TLS against the system's CAs", "[config]") {
  TempDir dir;
  const std::string file =
      dir.Write("jobs.yaml", JobFile("  url: etcd://127.0.0.1:2379\n  tls: {}\n"));
  auto loaded = LoadConfig(file, TestOptions());
  INFO(Problems(loaded));
  REQUIRE(loaded);
  CHECK(loaded->lock.tls.enabled);
  CHECK(loaded->lock.tls.ca_file.empty());
}

TEST_CASE("lock: the password from password_env", "[config]") {
  ::setenv("TICKD_TEST_SECRET_PW", kSecret, 1);
  LockSettings lock;
  lock.password_env = "TICKD_TEST_SECRET_PW";
  CHECK(ReadLockPassword(lock).value_or("") == kSecret);
  ::unsetenv("TICKD_TEST_SECRET_PW");
  CHECK(ReadLockPassword(lock).value_or("?").empty());
}

TEST_CASE("lock: bad secrets and certificate settings are errors naming the key",
          "[config]") {
  TempDir dir;
  dir.Write("empty.pw", "\n", 0600);
  dir.Write("ok.pw", kSecret, 0600);
  dir.Write("ca.crt", "ca", 0644);
  dir.Write("client.crt", "cert", 0644);
  REQUIRE(::mkfifo((dir.path() / "fifo.pw").c_str(), 0600) == 0);  // must not hang the load
  struct Case {
    std::string lock;
    std::string expected;  // a part of the one error
  };
  const Case cases[] = {
      {"  url: postgres://h/db\n  password_file: missing.pw\n",
       "lock.password_file: " + (dir.path() / "missing.pw").string() +
           ": No such file or directory"},
      {"  url: postgres://h/db\n  password_file: empty.pw\n", "is empty"},
      {"  url: postgres://h/db\n  password_file: .\n", "not a regular file"},
      {"  url: postgres://h/db\n  password_file: fifo.pw\n", "not a regular file"},
      {"  url: postgres://h/db\n  password_file: ok.pw\n  password_env: PW\n",
       "set one of password_file and password_env"},
      {"  url: postgres://h/db\n  tls:\n    ca_file: nope.crt\n", "lock.tls.ca_file: "},
      {"  url: postgres://h/db\n  tls:\n    cert_file: client.crt\n",
       "cert_file and key_file go together"},
      {"  url: postgres://h/db\n  tls:\n    ca_file: ca.crt\n    crt_file: x\n",
       "lock.tls.crt_file: unknown key; did you mean 'cert_file'?"},
      {"  url: redis://h:6379\n  tls:\n    ca_file: ca.crt\n", "stunnel"},
      {"  url: zookeeper://h:2181\n  tls: {}\n", "ZooKeeper C client has no TLS"},
      {"  url: postgres://alice@h/db\n  username: bob\n", "differs from the URL's user"},
  };
  for (const Case& c : cases) {
    const std::string file = dir.Write("jobs.yaml", JobFile(c.lock));
    auto loaded = LoadConfig(file, TestOptions());
    INFO(c.lock);
    REQUIRE_FALSE(loaded);
    const std::string errors = Joined(ErrorLines(loaded));
    INFO(errors);
    CHECK(loaded.error().size() == 1);
    CHECK(errors.find(c.expected) != std::string::npos);
    CHECK(errors.find(kSecret) == std::string::npos);
  }
}

TEST_CASE("lock: warnings for secrets in clear, loose modes and keys with no use",
          "[config]") {
  TempDir dir;
  dir.Write("loose.pw", kSecret, 0644);
  dir.Write("tight.pw", kSecret, 0600);
  struct Case {
    std::string lock;
    std::string expected;  // a part of a warning; "" = no warning at all
  };
  const Case cases[] = {
      {"  url: redis://u:" + std::string(kSecret) + "@h:6379\n", "holds a password in clear"},
      {"  url: redis://u:${TICKD_TEST_URL_PW:-x}@h:6379\n", ""},
      {"  url: postgres://h/db?password=" + std::string(kSecret) + "\n",
       "holds a password in clear"},
      {"  url: redis://u:${TICKD_TEST_URL_PW:-x}@h:6379\n  password_file: tight.pw\n",
       "lock.url: its password wins over lock.password_file"},
      {"  url: postgres://h/db\n  password_file: loose.pw\n", "chmod 600"},
      {"  backend: sqlite\n  password_file: tight.pw\n", "ignored: backend sqlite has no server"},
      {"  url: postgres://h/db\n  password_file: tight.pw\n", ""},
      {"  url: etcd://h:2379\n  username: tickd\n  password_file: tight.pw\n",
       "without lock.tls the etcd password and token cross the network in clear"},
      {"  url: etcd://h:2379\n  username: tickd\n  password_file: tight.pw\n  tls: {}\n", ""},
  };
  for (const Case& c : cases) {
    const std::string file = dir.Write("jobs.yaml", JobFile(c.lock));
    auto loaded = LoadConfig(file, TestOptions());
    INFO(c.lock);
    INFO(Problems(loaded));
    REQUIRE(loaded);
    const std::string warnings = Problems(loaded);
    if (c.expected.empty()) {
      CHECK(warnings.empty());
    } else {
      CHECK(warnings.find(c.expected) != std::string::npos);
    }
    CHECK(warnings.find(kSecret) == std::string::npos);
  }
}

}  // namespace
}  // namespace tickd::config
