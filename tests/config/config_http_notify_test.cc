// The http: job type and the notification keys (on_failure, on_success, on_miss):
// what they parse into, what `defaults` does to them, and every bad value as
// FILE:LINE:COL naming the key path.
#include <catch2/catch.hpp>

#include "config/config.h"
#include "tests/config/load.h"

namespace tickd::config {
namespace {

using testing::LoadText;
using testing::MustLoad;
using testing::TempDir;

TEST_CASE("an http: job parses every key", "[config][http]") {
  TempDir dir;
  setenv("TICKD_TEST_TOKEN", "s3cret", 1);
  const Config cfg = MustLoad(dir.Write("jobs.yaml", R"(version: 1
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
)"));
  unsetenv("TICKD_TEST_TOKEN");
  REQUIRE(cfg.jobs.size() == 2);
  const Job& job = cfg.jobs[0];
  REQUIRE(job.http);
  CHECK_FALSE(job.shell);
  CHECK(job.argv.empty());
  CHECK(job.http->method == "POST");
  CHECK(job.http->url == "https://example.invalid/hook");
  REQUIRE(job.http->headers.size() == 2);
  CHECK(job.http->headers[0] ==
        std::pair<std::string, std::string>("Authorization", "Bearer s3cret"));
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
    return MustLoad(dir.Write("jobs.yaml",
                              "version: 1\njobs:\n  - name: p\n    schedule: \"* * * * *\"\n"
                              "    http: {url: \"" + url + "\", headers: {Authorization: \"" +
                                  token + "\"}}\n"))
        .jobs[0]
        .ConfigHash();
  };
  CHECK(hash("a", "http://h/") == hash("b", "http://h/"));
  CHECK(hash("a", "http://h/") != hash("a", "http://h/other"));
}

TEST_CASE("notifiers: shell shorthand, http, defaults and switching one off",
          "[config][notify]") {
  TempDir dir;
  const Config cfg = MustLoad(dir.Write("jobs.yaml", R"(version: 1
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
)"));
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
  const std::string head = "version: 1\njobs:\n  - name: a\n    schedule: \"* * * * *\"\n";
  auto r = LoadText(dir, head + "    http: {url: \"ftp://x/\"}\n");
  CHECK_ERROR(r, "FILE:5:17: jobs[0].http.url: 'ftp://x/' is not an http:// or https:// URL");
  r = LoadText(dir, head + "    http: {method: BREW, url: \"http://x/\"}\n");
  CHECK_ERROR(r, "FILE:5:20: jobs[0].http.method: 'BREW' is not one of GET");
  r = LoadText(dir, head + "    http: {url: \"http://x/\", expect_status: [2xx, 7xx]}\n");
  CHECK_ERROR(r, "FILE:5:51: jobs[0].http.expect_status[1]: '7xx' is not an HTTP status");
  r = LoadText(dir, head + "    http: {url: \"http://x/\", expect_status: 99}\n");
  CHECK_ERROR(r, "FILE:5:45: jobs[0].http.expect_status: '99' is not an HTTP status");
  r = LoadText(dir, head + "    http: {url: \"http://x/\", timeout: soon}\n");
  CHECK_ERROR(r, "FILE:5:39: jobs[0].http.timeout: soon");
  r = LoadText(dir, head + "    http: {url: \"http://x/\", header: {}}\n");
  CHECK_ERROR(r, "FILE:5:30: jobs[0].http.header: unknown key; did you mean 'headers'?");
  r = LoadText(dir, head + "    http: {url: \"http://x/\", headers: {\"bad name\": v}}\n");
  CHECK_ERROR(r, "FILE:5:40: jobs[0].http.headers.bad name: not an HTTP header name");
  r = LoadText(dir, head + "    http: {body: x}\n");
  CHECK_ERROR(r, "FILE:5:11: jobs[0].http: missing 'url'");
  r = LoadText(dir, head + "    http: {url: \"http://x/\"}\n    shell: \"true\"\n");
  CHECK_ERROR(r, "FILE:3:5: jobs[0]: set exactly one of shell, run, plugin, http");

  const std::string job = head + "    shell: \"true\"\n";
  r = LoadText(dir, job + "    on_failure: {http: {url: \"mailto:x\"}}\n");
  CHECK_ERROR(r, "FILE:6:30: jobs[0].on_failure.http.url: 'mailto:x' is not an http");
  r = LoadText(dir, job + "    on_failure: {shell: \"x\", http: \"http://x/\"}\n");
  CHECK_ERROR(r, "FILE:6:17: jobs[0].on_failure: set exactly one of shell, http");
  r = LoadText(dir, job + "    on_success: {attempts: 3}\n");
  CHECK_ERROR(r, "FILE:6:17: jobs[0].on_success: missing the target: set shell or http");
  r = LoadText(dir, job + "    on_miss: {shell: x, attempts: 11}\n");
  CHECK_ERROR(r, "FILE:6:35: jobs[0].on_miss.attempts: 11 is out of range 1-10");
  r = LoadText(dir, job + "    on_miss: [a]\n");
  CHECK_ERROR(r, "FILE:6:14: jobs[0].on_miss: must be a shell command, {shell: ...} or");
  r = LoadText(dir, job + "    on_failure: {shell: x, retry: 2}\n");
  CHECK_ERROR(r, "FILE:6:28: jobs[0].on_failure.retry: unknown key");
  r = LoadText(dir, "version: 1\ndefaults:\n  on_failure: {http: {url: x}}\njobs: []\n");
  CHECK_ERROR(r, "FILE:3:28: defaults.on_failure.http.url: 'x' is not an http");
  // A notifier's http mapping allows url, headers and timeout only.
  r = LoadText(dir, job + "    on_failure: {http: {headers: {X-A: b}}}\n");
  CHECK_ERROR(r, "FILE:6:24: jobs[0].on_failure.http: missing 'url'");
  r = LoadText(dir, job + "    on_failure: {http: {url: \"http://x/\", method: PUT}}\n");
  CHECK_ERROR(
      r, "FILE:6:43: jobs[0].on_failure.http.method: unknown key (allowed: url, headers, timeout)");
  r = LoadText(dir, job + "    on_failure: {http: {url: \"http://x/\", headers: {\"a b\": v}}}\n");
  CHECK_ERROR(r, "FILE:6:53: jobs[0].on_failure.http.headers.a b: not an HTTP header name");
  r = LoadText(dir, job + "    on_failure: {http: {url: \"http://x/\", timeout: soon}}\n");
  CHECK_ERROR(r, "FILE:6:52: jobs[0].on_failure.http.timeout: soon");
}

TEST_CASE("a notifier's timeout: in http or beside it, the later one counts", "[config][notify]") {
  TempDir dir;
  const Config cfg = MustLoad(dir.Write("jobs.yaml", R"(version: 1
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
)"));
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
  setenv("TICKD_TEST_SECRET", "hunter2\nX-Evil: 1", 1);
  const auto r =
      LoadText(dir,
               "version: 1\njobs:\n  - name: a\n    schedule: \"* * * * *\"\n"
               "    http: {url: \"http://x/\", headers: {A: \"${TICKD_TEST_SECRET}\"}}\n");
  unsetenv("TICKD_TEST_SECRET");
  REQUIRE_FALSE(r.errors.empty());
  CHECK_ERROR(r, "FILE:5:43: jobs[0].http.headers.A: a header value cannot hold a line break");
  for (const std::string& e : r.errors) CHECK(e.find("hunter2") == std::string::npos);
}

}  // namespace
}  // namespace tickd::config
