// An HTTP endpoint on a free 127.0.0.1 port (cpp-httplib, served on a thread of its
// own) that answers each path as told (GET and POST alike) and keeps every request it
// gets, for tests that check what tickd sent: notifications, http: jobs.
#pragma once

#include <httplib.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace tickd::testing {

class LoopbackHttp {
 public:
  // One request as it arrived.
  struct Request {
    std::string method;
    std::string body;
    httplib::Headers headers;
    std::chrono::system_clock::time_point at;  // when it arrived
    // The header's value; "" when it was not sent.
    std::string Header(const std::string& name) const {
      auto it = headers.find(name);
      return it == headers.end() ? "" : it->second;
    }
  };

  // Every path answers 404 until Answer() says otherwise.
  LoopbackHttp() {
    auto handler = [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard lock(mu_);
      requests_[req.path].push_back(
          {req.method, req.body, req.headers, std::chrono::system_clock::now()});
      auto it = answers_.find(req.path);
      if (it == answers_.end()) {
        res.status = 404;
        return;
      }
      res.status = it->second.status;
      if (!it->second.body.empty()) res.set_content(it->second.body, "text/plain");
    };
    server_.Get(".*", handler);
    server_.Post(".*", handler);
    port_ = server_.bind_to_any_port("127.0.0.1");
    REQUIRE(port_ > 0);
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~LoopbackHttp() {
    server_.stop();
    thread_.join();
  }
  LoopbackHttp(const LoopbackHttp&) = delete;
  LoopbackHttp& operator=(const LoopbackHttp&) = delete;

  // From now on `path` answers `status`, with `body` (text/plain) when it is not empty.
  void Answer(const std::string& path, int status, std::string body = "") {
    std::lock_guard lock(mu_);
    answers_[path] = {status, std::move(body)};
  }
  std::string Url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }
  // The requests to `path` so far, oldest first.
  std::vector<Request> Requests(const std::string& path) {
    std::lock_guard lock(mu_);
    return requests_[path];
  }

 private:
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  std::mutex mu_;
  struct Reply {
    int status;
    std::string body;
  };
  std::map<std::string, Reply> answers_;                  // guarded by mu_
  std::map<std::string, std::vector<Request>> requests_;  // guarded by mu_
};

}  // namespace tickd::testing
