// The http: job type against a cpp-httplib server on 127.0.0.1 (a free port): the
// outcome follows the status, the tick travels as X-Tickd-* headers, the body becomes
// output lines, and Terminate / timeouts end a transfer that hangs at once.
#include "jobs/http_execution.h"

#include <httplib.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <mutex>
#include <thread>

#include "jobs/output_capture.h"
#include "tests/support/refused_port.h"

namespace tickd::jobs {
namespace {

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

// A loopback server: /ok answers 200 with two lines, /status/N answers N, /slow
// holds the request until the test ends. It records the last request's headers.
class TestServer {
 public:
  TestServer() {
    server_.Get("/ok", [this](const httplib::Request& req, httplib::Response& res) {
      Remember(req);
      res.set_content("first line\nsecond line\n", "text/plain");
    });
    server_.Post("/echo", [this](const httplib::Request& req, httplib::Response& res) {
      Remember(req);
      res.set_content(req.body, "text/plain");
    });
    server_.Get(R"(/status/(\d+))", [this](const httplib::Request& req, httplib::Response& res) {
      Remember(req);
      res.status = std::stoi(req.matches[1]);
      res.set_content("status body", "text/plain");
    });
    server_.Get("/long", [this](const httplib::Request& req, httplib::Response& res) {
      Remember(req);
      // Byte 4,096 (where tickd stops keeping the body) falls inside the €.
      res.set_content("head\n" + std::string(4'089, 'y') + "\xE2\x82\xAC and more\n",
                      "text/plain");
    });
    server_.Get("/slow", [this](const httplib::Request& req, httplib::Response& res) {
      Remember(req);
      for (int i = 0; i < 1'000 && !stop_.load(); ++i) std::this_thread::sleep_for(10ms);
      res.set_content("late", "text/plain");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    REQUIRE(port_ > 0);
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~TestServer() {
    stop_ = true;
    server_.stop();
    thread_.join();
  }
  std::string Url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }
  std::string Header(const std::string& name) {
    std::lock_guard lock(mu_);
    auto it = headers_.find(name);
    return it == headers_.end() ? "" : it->second;
  }

 private:
  void Remember(const httplib::Request& req) {
    std::lock_guard lock(mu_);
    headers_ = req.headers;
  }
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  httplib::Headers headers_;
};

struct Lines {
  std::mutex mu;
  std::vector<std::pair<std::string, std::string>> lines;
  OutputSink Sink() {
    return [this](std::string_view stream, std::string_view line) {
      std::lock_guard lock(mu);
      lines.emplace_back(std::string(stream), std::string(line));
    };
  }
};

ProcessSpec Spec() {
  ProcessSpec spec;
  spec.env = {{"TICKD_JOB", "ping"},          {"TICKD_TICK", "2026-11-21T14:00:00Z"},
              {"TICKD_TICK_UNIX", "1795269600"}, {"TICKD_FENCE", "42"},
              {"TICKD_NODE", "node-a"},       {"TICKD_ATTEMPT", "1"}};
  spec.timeout = 10s;
  return spec;
}

RunResult Wait(Execution& exec) {
  for (int i = 0; i < 200; ++i) {
    if (auto r = exec.WaitFor(100ms)) return *r;
  }
  FAIL("the http execution did not end within 20 s");
  return {};
}

// The attempt started at once, or prepared ahead (PrepareHttp) and released.
Result<std::unique_ptr<Execution>> StartOrPrepare(bool prepare, const HttpJob& job,
                                                  OutputSink sink) {
  if (!prepare) return StartHttp(job, Spec(), std::move(sink));
  const auto start_at = std::chrono::system_clock::now() + 100ms;
  auto prepared = PrepareHttp(job, Spec(), std::move(sink), start_at, Steady::now() + 1h);
  REQUIRE(prepared);
  CHECK((*prepared)->checks_start_bound());
  auto exec = (*prepared)->Release();
  REQUIRE((*prepared)->started().has_value());
  CHECK(*(*prepared)->started() >= start_at);  // sent at its instant, not before
  return exec;
}

TEST_CASE("an http job that gets an expected status is done; its body is its output "
          "(prepared ahead: the same, sent at its instant)",
          "[jobs][http]") {
  for (const bool prepare : {false, true}) {
    TestServer server;
    HttpJob job;
    job.request.url = server.Url("/ok");
    job.request.headers = {{"Authorization", "Bearer t0ken"}};
    Lines out;
    auto exec = StartOrPrepare(prepare, job, out.Sink());
    REQUIRE(exec);
    const RunResult r = Wait(**exec);
    CHECK(r.outcome == RunOutcome::kDone);
    CHECK(r.error.empty());
    CHECK_FALSE(r.exit_code);
    CHECK(out.lines == std::vector<std::pair<std::string, std::string>>{{"http", "first line"},
                                                                        {"http", "second line"}});
    CHECK(server.Header("Authorization") == "Bearer t0ken");
    CHECK(server.Header("X-Tickd-Job") == "ping");
    CHECK(server.Header("X-Tickd-Tick") == "2026-11-21T14:00:00Z");
    CHECK(server.Header("X-Tickd-Tick-Unix") == "1795269600");
    CHECK(server.Header("X-Tickd-Fence") == "42");
    CHECK(server.Header("X-Tickd-Node") == "node-a");
    CHECK(server.Header("X-Tickd-Attempt") == "1");
  }
}

TEST_CASE("an http job's body past 4,096 bytes: the last line kept is marked, never cut "
          "inside a character",
          "[jobs][http]") {
  TestServer server;
  HttpJob job;
  job.request.url = server.Url("/long");
  Lines out;
  auto exec = StartHttp(job, Spec(), out.Sink());
  REQUIRE(exec);
  const RunResult r = Wait(**exec);
  CHECK(r.outcome == RunOutcome::kDone);
  CHECK(out.lines ==
        std::vector<std::pair<std::string, std::string>>{
            {"http", "head"}, {"http", std::string(4'089, 'y') + std::string(kTruncatedMark)}});
}

TEST_CASE("an http job's status decides done or failed by expect_status", "[jobs][http]") {
  TestServer server;
  HttpJob job;
  job.request.url = server.Url("/status/503");
  auto failed = StartHttp(job, Spec(), {});
  REQUIRE(failed);
  RunResult r = Wait(**failed);
  CHECK(r.outcome == RunOutcome::kFailed);
  CHECK(r.error == "HTTP status 503 (expected 2xx)");

  job.expect_status = {{500, 599}, {204, 204}};
  auto done = StartHttp(job, Spec(), {});
  REQUIRE(done);
  CHECK(Wait(**done).outcome == RunOutcome::kDone);

  job.request.url = server.Url("/status/200");
  auto unexpected = StartHttp(job, Spec(), {});
  REQUIRE(unexpected);
  r = Wait(**unexpected);
  CHECK(r.outcome == RunOutcome::kFailed);
  CHECK(r.error == "HTTP status 200 (expected 5xx, 204)");
}

TEST_CASE("a POST sends its body; a refused connection fails the run", "[jobs][http]") {
  TestServer server;
  HttpJob job;
  job.request.method = "POST";
  job.request.url = server.Url("/echo");
  job.request.body = "{\"n\":1}";
  Lines out;
  auto exec = StartHttp(job, Spec(), out.Sink());
  REQUIRE(exec);
  CHECK(Wait(**exec).outcome == RunOutcome::kDone);
  REQUIRE(out.lines.size() == 1);
  CHECK(out.lines[0].second == "{\"n\":1}");

  const testing::RefusedPort closed;
  job.request.method = "GET";
  job.request.url = "http://127.0.0.1:" + std::to_string(closed.port()) + "/";
  auto refused = StartHttp(job, Spec(), {});
  REQUIRE(refused);
  const RunResult r = Wait(**refused);
  CHECK(r.outcome == RunOutcome::kFailed);
  CHECK_FALSE(r.error.empty());
}

TEST_CASE("Terminate and timeouts end a hanging http job at once", "[jobs][http]") {
  TestServer server;
  HttpJob job;
  job.request.url = server.Url("/slow");

  SECTION("lease lost") {
    auto exec = StartHttp(job, Spec(), {});
    REQUIRE(exec);
    std::this_thread::sleep_for(200ms);  // the request is under way
    CHECK_FALSE((*exec)->WaitFor(1ms));
    const auto t0 = Steady::now();
    (*exec)->Terminate(RunOutcome::kLeaseLost);
    const RunResult r = Wait(**exec);
    CHECK(r.outcome == RunOutcome::kLeaseLost);
    CHECK(Steady::now() - t0 < 500ms);
  }
  SECTION("the job's timeout (spec.timeout)") {
    ProcessSpec spec = Spec();
    spec.timeout = 300ms;
    const auto t0 = Steady::now();
    auto exec = StartHttp(job, spec, {});
    REQUIRE(exec);
    CHECK(Wait(**exec).outcome == RunOutcome::kTimeout);
    CHECK(Steady::now() - t0 < 1'500ms);
  }
  SECTION("the request's own timeout") {
    job.request.timeout = 300ms;
    const auto t0 = Steady::now();
    auto exec = StartHttp(job, Spec(), {});
    REQUIRE(exec);
    const RunResult r = Wait(**exec);
    CHECK(r.outcome == RunOutcome::kTimeout);
    CHECK(Steady::now() - t0 < 1'500ms);
  }
  SECTION("destroyed while running (shutdown)") {
    auto exec = StartHttp(job, Spec(), {});
    REQUIRE(exec);
    std::this_thread::sleep_for(100ms);
    const auto t0 = Steady::now();
    exec->reset();
    CHECK(Steady::now() - t0 < 500ms);
  }
}

TEST_CASE("only http and https URLs are fetched", "[jobs][http]") {
  CHECK(IsHttpUrl("http://127.0.0.1:80/x"));
  CHECK(IsHttpUrl("HTTPS://example.invalid"));
  CHECK_FALSE(IsHttpUrl("file:///etc/passwd"));
  CHECK_FALSE(IsHttpUrl("http://"));
  CHECK_FALSE(IsHttpUrl("http:///x"));
  CHECK_FALSE(IsHttpUrl("gopher://x/"));
  HttpCall call;
  HttpRequest req;
  req.url = "file:///etc/passwd";
  const HttpResult r = call.Run(req);
  CHECK(r.end == HttpEnd::kFailed);
}

}  // namespace
}  // namespace tickd::jobs
