// The http: job type and the notification keys (on_failure, on_success, on_miss):
// what they parse into, what `defaults` does to them, and every bad value as
// FILE:LINE:COL naming the key path.
#include <catch2/catch.hpp>

#include "config/config.h"
#include "tests/config/temp_dir.h"

namespace tickd::config {
namespace {

using testing::ErrorLines;
using testing::Joined;
using testing::TempDir;
using testing::TestOptions;

Config MustLoad(const TempDir& dir, const std::string& text) {
  auto result = LoadConfig(dir.Write("jobs.yaml", text), TestOptions());
  INFO(Joined(ErrorLines(result)));
  REQUIRE(result);
  return *result;
}

std::vector<std::string> Errors(const TempDir& dir, const std::string& text, std::string* file) {
  *file = dir.Write("jobs.yaml", text);
  return ErrorLines(LoadConfig(*file, TestOptions()));
}

bool HasError(const std::vector<std::string>& errors, const std::string& line) {
  UNSCOPED_INFO(Joined(errors));
  for (const std::string& e : errors) {
    if (e.rfind(line, 0) == 0) return true;
  }
  return false;
}

TEST_CASE("an http: job parses every key", "[config][http]") {
  TempDir dir;
  setenv("TICKD_TEST_TOKEN", "s3cret", 1);
  const Config cfg = MustLoad(dir, R"(version: 1
jobs:
  - name: ping
    schedule: "* * * * *"
    http:
      method: post
      url: https://example.invalid/hook
      headers: {Authorization: "Bearer ${TICKD_TEST_TOKEN}", X-Env: prod}
      body: '{"a":1}'
      timeout: 3s
      expect_status: [2xx, 304]
  - name: plain
    schedule: "* * * * *"
    http: {url: "http://127.0.0.1:8080/"}
)");
  unsetenv("TICKD_TEST_TOKEN");
  REQUIRE(cfg.jobs.size() == 2);
  const Job& job = cfg.jobs[0];
  REQUIRE(job.http);
  CHECK_FALSE(job.shell);
  CHECK(job.argv.empty());
  CHECK(job.http->method == "POST");
  CHECK(job.http->url == "https://example.invalid/hook");
  REQUIRE(job.http->headers.size() == 2);
  CHECK(job.http->headers[0] == std::pair<std::string, std::string>("Authorization", "Bearer s3cret"));
  CHECK(job.http->body == "{\"a\":1}");
  CHECK(job.http->timeout == milliseconds(3'000));
  CHECK(job.http->expect_status == std::vector<StatusRange>{{200, 299}, {304, 304}});
  const Job& plain = cfg.jobs[1];
  REQUIRE(plain.http);
  CHECK(plain.http->method == "GET");
  CHECK(plain.http->timeout == milliseconds(30'000));
  CHECK(plain.http->expect_status == std::vector<StatusRange>{{200, 299}});
}

TEST_CASE("a header value is not part of the config hash; the rest of http: is",
          "[config][http]") {
  TempDir dir;
  auto hash = [&dir](const std::string& token, const std::string& url) {
    return MustLoad(dir, "version: 1\njobs:\n  - name: p\n    schedule: \"* * * * *\"\n"
                         "    http: {url: \"" + url + "\", headers: {Authorization: \"" +
                             token + "\"}}\n")
        .jobs[0]
        .ConfigHash();
  };
  CHECK(hash("a", "http://h/") == hash("b", "http://h/"));
  CHECK(hash("a", "http://h/") != hash("a", "http://h/other"));
}

TEST_CASE("notifiers: shell shorthand, http, defaults and switching one off",
          "[config][notify]") {
  TempDir dir;
  const Config cfg = MustLoad(dir, R"(version: 1
defaults:
  on_failure: {http: {url: "http://127.0.0.1:9/alert", headers: {X-Key: k}, timeout: 2s}, attempts: 5}
  on_miss: ./page-someone
jobs:
  - name: a
    schedule: "* * * * *"
    shell: "true"
  - name: b
    schedule: "* * * * *"
    shell: "true"
    on_failure:
    on_success: {shell: "echo ok", timeout: 10s}
    on_miss: {http: "https://example.invalid/miss"}
)");
  const Job& a = cfg.jobs[0];
  REQUIRE(a.on_failure);
  CHECK_FALSE(a.on_failure->shell);
  CHECK(a.on_failure->url == "http://127.0.0.1:9/alert");
  CHECK(a.on_failure->timeout == milliseconds(2'000));
  CHECK(a.on_failure->attempts == 5);
  REQUIRE(a.on_failure->headers.size() == 1);
  CHECK_FALSE(a.on_success);
  REQUIRE(a.on_miss);
  CHECK(a.on_miss->shell == std::optional<std::string>("./page-someone"));
  CHECK(a.on_miss->attempts == 3);
  const Job& b = cfg.jobs[1];
  CHECK_FALSE(b.on_failure);  // switched off by the empty value
  REQUIRE(b.on_success);
  CHECK(b.on_success->shell == std::optional<std::string>("echo ok"));
  CHECK(b.on_success->timeout == milliseconds(10'000));
  REQUIRE(b.on_miss);
  CHECK(b.on_miss->url == "https://example.invalid/miss");
  // Notifications change nothing that runs or is claimed.
  CHECK(a.ConfigHash() != b.ConfigHash());  // other names
  Config again = cfg;
  again.jobs[0].on_failure.reset();
  CHECK(again.jobs[0].ConfigHash() == a.ConfigHash());
}

TEST_CASE("bad http: and notifier values name FILE:LINE:COL and the key path",
          "[config][errors][http][notify]") {
  TempDir dir;
  std::string file;
  const std::string head = "version: 1\njobs:\n  - name: a\n    schedule: \"* * * * *\"\n";
  auto errors = Errors(dir, head + "    http: {url: \"ftp://x/\"}\n", &file);
  CHECK(HasError(errors, file + ":5:17: jobs[0].http.url: 'ftp://x/' is not an http:// or https:// URL"));
  errors = Errors(dir, head + "    http: {method: BREW, url: \"http://x/\"}\n", &file);
  CHECK(HasError(errors, file + ":5:20: jobs[0].http.method: 'BREW' is not one of GET"));
  errors = Errors(dir, head + "    http: {url: \"http://x/\", expect_status: [2xx, 7xx]}\n", &file);
  CHECK(HasError(errors, file + ":5:51: jobs[0].http.expect_status[1]: '7xx' is not an HTTP status"));
  errors = Errors(dir, head + "    http: {url: \"http://x/\", expect_status: 99}\n", &file);
  CHECK(HasError(errors, file + ":5:45: jobs[0].http.expect_status: '99' is not an HTTP status"));
  errors = Errors(dir, head + "    http: {url: \"http://x/\", timeout: soon}\n", &file);
  CHECK(HasError(errors, file + ":5:39: jobs[0].http.timeout: soon"));
  errors = Errors(dir, head + "    http: {url: \"http://x/\", header: {}}\n", &file);
  CHECK(HasError(errors, file + ":5:30: jobs[0].http.header: unknown key; did you mean 'headers'?"));
  errors = Errors(dir, head + "    http: {url: \"http://x/\", headers: {\"bad name\": v}}\n", &file);
  CHECK(HasError(errors, file + ":5:40: jobs[0].http.headers.bad name: not an HTTP header name"));
  errors = Errors(dir, head + "    http: {body: x}\n", &file);
  CHECK(HasError(errors, file + ":5:11: jobs[0].http: missing 'url'"));
  errors = Errors(dir, head + "    http: {url: \"http://x/\"}\n    shell: \"true\"\n", &file);
  CHECK(HasError(errors, file + ":3:5: jobs[0]: set exactly one of shell, run, plugin, http"));

  const std::string job = head + "    shell: \"true\"\n";
  errors = Errors(dir, job + "    on_failure: {http: {url: \"mailto:x\"}}\n", &file);
  CHECK(HasError(errors, file + ":6:30: jobs[0].on_failure.http.url: 'mailto:x' is not an http"));
  errors = Errors(dir, job + "    on_failure: {shell: \"x\", http: \"http://x/\"}\n", &file);
  CHECK(HasError(errors, file + ":6:17: jobs[0].on_failure: set exactly one of shell, http"));
  errors = Errors(dir, job + "    on_success: {attempts: 3}\n", &file);
  CHECK(HasError(errors, file + ":6:17: jobs[0].on_success: missing the target: set shell or http"));
  errors = Errors(dir, job + "    on_miss: {shell: x, attempts: 11}\n", &file);
  CHECK(HasError(errors, file + ":6:35: jobs[0].on_miss.attempts: 11 is out of range 1-10"));
  errors = Errors(dir, job + "    on_miss: [a]\n", &file);
  CHECK(HasError(errors, file + ":6:14: jobs[0].on_miss: must be a shell command, {shell: ...} or"));
  errors = Errors(dir, job + "    on_failure: {shell: x, retry: 2}\n", &file);
  CHECK(HasError(errors, file + ":6:28: jobs[0].on_failure.retry: unknown key"));
  errors = Errors(dir, "version: 1\ndefaults:\n  on_failure: {http: {url: x}}\njobs: []\n", &file);
  CHECK(HasError(errors, file + ":3:28: defaults.on_failure.http.url: 'x' is not an http"));
  // A notifier's http mapping allows url, headers and timeout only.
  errors = Errors(dir, job + "    on_failure: {http: {headers: {X-A: b}}}\n", &file);
  CHECK(HasError(errors, file + ":6:24: jobs[0].on_failure.http: missing 'url'"));
  errors = Errors(dir, job + "    on_failure: {http: {url: \"http://x/\", method: PUT}}\n", &file);
  CHECK(HasError(errors, file + ":6:43: jobs[0].on_failure.http.method: unknown key (allowed: url, headers, timeout)"));
  errors = Errors(dir, job + "    on_failure: {http: {url: \"http://x/\", headers: {\"a b\": v}}}\n", &file);
  CHECK(HasError(errors, file + ":6:53: jobs[0].on_failure.http.headers.a b: not an HTTP header name"));
  errors = Errors(dir, job + "    on_failure: {http: {url: \"http://x/\", timeout: soon}}\n", &file);
  CHECK(HasError(errors, file + ":6:52: jobs[0].on_failure.http.timeout: soon"));
}

TEST_CASE("a notifier's timeout: in http or beside it, the later one counts", "[config][notify]") {
  TempDir dir;
  const Config cfg = MustLoad(dir, R"(version: 1
jobs:
  - name: a
    schedule: "* * * * *"
    shell: "true"
    on_failure: {timeout: 7s, http: {url: "http://127.0.0.1:9/"}}
    on_success: {timeout: 7s, http: {url: "http://127.0.0.1:9/", timeout: 2s}}
    on_miss: {http: {url: "http://127.0.0.1:9/", timeout: 2s}, timeout: 7s}
  - name: b
    schedule: "* * * * *"
    shell: "true"
    on_failure: {http: {url: "http://127.0.0.1:9/"}}
)");
  const Job& a = cfg.jobs[0];
  REQUIRE(a.on_failure);
  CHECK(a.on_failure->timeout == milliseconds(7'000));  // http without one keeps it
  REQUIRE(a.on_success);
  CHECK(a.on_success->timeout == milliseconds(2'000));
  REQUIRE(a.on_miss);
  CHECK(a.on_miss->timeout == milliseconds(7'000));
  REQUIRE(cfg.jobs[1].on_failure);
  CHECK(cfg.jobs[1].on_failure->timeout == milliseconds(5'000));  // the notifier default
}

TEST_CASE("a header value never appears in an error", "[config][errors][http]") {
  TempDir dir;
  std::string file;
  setenv("TICKD_TEST_SECRET", "hunter2\nX-Evil: 1", 1);
  auto errors = Errors(dir,
                       "version: 1\njobs:\n  - name: a\n    schedule: \"* * * * *\"\n"
                       "    http: {url: \"http://x/\", headers: {A: \"${TICKD_TEST_SECRET}\"}}\n",
                       &file);
  unsetenv("TICKD_TEST_SECRET");
  REQUIRE_FALSE(errors.empty());
  CHECK(HasError(errors, file + ":5:43: jobs[0].http.headers.A: a header value cannot hold a line break"));
  for (const std::string& e : errors) CHECK(e.find("hunter2") == std::string::npos);
}

}  // namespace
}  // namespace tickd::config
