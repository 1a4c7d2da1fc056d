// Secrets stay secret through the real binary: a password in the URL, in a
// password_file or in password_env is never printed by `tickd validate`, `tickd status`
// or the daemon's log, whether the store answers, refuses the password or cannot be
// reached; a password_file works end to end, and a missing one is exit 2 naming the key.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <fstream>

#include "tests/e2e/harness.h"
#include "tests/redis/redis_server.h"
#include "tests/support/server_process.h"

namespace tickd::e2e {
namespace {

constexpr const char* kJobs =
    "jobs:\n  - name: a\n    schedule: \"@every 1h\"\n    shell: \"true\"\n";

struct Scratch {
  Scratch() {
    dir = fs::temp_directory_path() / ("tickd-secrets-" + std::to_string(::getpid()));
    fs::create_directories(dir);
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::string Write(const std::string& name, const std::string& text, mode_t mode) const {
    const fs::path file = dir / name;
    std::ofstream(file) << text;
    ::chmod(file.c_str(), mode);
    return file.string();
  }
  fs::path dir;
};

}  // namespace

TEST_CASE("secrets: never printed by validate, status or the daemon's log", "[e2e]") {
  Scratch scratch;
  const std::string dead = std::to_string(testing::FreeLoopbackPort());
  const std::string in_url = "Url-Secret-5521";
  const std::string in_file = "File-Secret-7734";
  const std::string in_env = "Env-Secret-9031";
  scratch.Write("pw", in_file + "\n", 0600);
  ::setenv("TICKD_TEST_SECRET", in_env.c_str(), 1);
  const std::string files[] = {
      scratch.Write("url.yaml",
                    "version: 1\nlock:\n  url: redis://tickd:" + in_url + "@127.0.0.1:" + dead +
                        "/0\n  op_timeout: 200ms\n" + kJobs,
                    0644),
      scratch.Write("file.yaml",
                    "version: 1\nlock:\n  url: postgres://tickd@127.0.0.1:" + dead +
                        "/db\n  password_file: pw\n  op_timeout: 200ms\n" + kJobs,
                    0644),
      scratch.Write("env.yaml",
                    "version: 1\nlock:\n  url: etcd://127.0.0.1:" + dead +
                        "\n  username: tickd\n  password_env: TICKD_TEST_SECRET\n"
                        "  op_timeout: 200ms\n" + kJobs,
                    0644),
  };
  for (const std::string& file : files) {
    INFO(file);
    auto [validate_status, validate_out] = RunCommand({TICKD_BINARY, "validate", "-c", file});
    INFO(validate_out);
    CHECK(validate_status == 0);
    auto [status_status, status_out] = RunCommand({TICKD_BINARY, "status", "-c", file});
    INFO(status_out);
    CHECK(status_status == 1);  // the store cannot be reached
    // The daemon retries the store for a few seconds, logging each failure, then gives up.
    auto [run_status, run_out] = RunCommand({TICKD_BINARY, "run", "-c", file});
    INFO(run_out);
    CHECK(run_status == 1);
    for (const std::string& out : {validate_out, status_out, run_out}) {
      for (const std::string& secret : {in_url, in_file, in_env}) {
        CHECK(out.find(secret) == std::string::npos);
      }
    }
  }
  ::unsetenv("TICKD_TEST_SECRET");
}

TEST_CASE("secrets: a password_file opens a Redis ACL user; a wrong or missing one does not",
          "[e2e][redis]") {
  if (!testing::RedisServer::Available()) return;
  const std::string password = "Acl-Secret-4410";
  testing::RedisServer server(false, "",
                              {"--user", "default", "off", "--user", "tickd", "on",
                               ">" + password, "~tickd:*", "+@all"});
  REQUIRE(server.running());
  Scratch scratch;
  const std::string right = scratch.Write("right.pw", password + "\n", 0600);
  const std::string wrong = scratch.Write("wrong.pw", "Wrong-Secret-1\n", 0600);
  auto job_file = [&](const std::string& pw_file) {
    return scratch.Write("jobs.yaml",
                         "version: 1\nlock:\n  url: " + server.url() +
                             "\n  username: tickd\n  password_file: " + pw_file + "\n" + kJobs,
                         0644);
  };

  auto [ok_status, ok_out] = RunCommand({TICKD_BINARY, "status", "-c", job_file(right)});
  INFO(ok_out);
  CHECK(ok_status == 0);
  CHECK(ok_out.find(password) == std::string::npos);

  auto [refused_status, refused_out] =
      RunCommand({TICKD_BINARY, "status", "-c", job_file(wrong)});
  INFO(refused_out);
  CHECK(refused_status == 1);
  CHECK(refused_out.find("Wrong-Secret-1") == std::string::npos);

  const std::string missing = job_file((scratch.dir / "missing.pw").string());
  for (const char* cmd : {"validate", "status", "run"}) {
    auto [status, out] = RunCommand({TICKD_BINARY, cmd, "-c", missing});
    INFO(cmd << ": " << out);
    CHECK(status == 2);
    CHECK(out.find(":5:18: lock.password_file: ") != std::string::npos);
  }
}

}  // namespace tickd::e2e
