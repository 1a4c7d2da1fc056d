// One HTTP request through libcurl, cancellable from another thread. The one place
// tickd speaks HTTP as a client for jobs and notifications: the `http:` job type
// (jobs/http_execution.h) and the HTTP notifier (app/notifier.h) both call it. (The
// etcd backend keeps its own connection handling: it is a store client, not this.)
//
// Only http:// and https:// URLs are accepted, redirects are not followed (a 3xx is
// the answer), and libcurl never installs signal handlers (CURLOPT_NOSIGNAL).
#pragma once

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstddef>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tickd::jobs {

using std::chrono::milliseconds;

struct HttpRequest {
  std::string method = "GET";  // GET POST PUT PATCH DELETE HEAD
  std::string url;             // http:// or https:// only
  // Sent as written. Values may hold secrets: nothing here ever logs them.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;            // sent when not empty (and with POST/PUT/PATCH even when empty)
  milliseconds timeout{30'000};               // the whole transfer, connection included
  std::size_t max_response_bytes = 64 * 1024;  // kept of the response body; the rest is read
                                               // and dropped
};

// Every way a request can end.
enum class HttpEnd {
  kAnswered,   // a response came: `status` and `body` are set (any status, 5xx too)
  kTimeout,    // HttpRequest::timeout passed first
  kCancelled,  // HttpCall::Cancel() was called
  kFailed,     // no response: refused connection, DNS, TLS, bad URL… (`error` says)
};

struct HttpResult {
  HttpEnd end = HttpEnd::kFailed;
  int status = 0;            // kAnswered: the HTTP status
  std::string body;          // kAnswered: the first max_response_bytes of the body
  bool body_truncated = false;
  std::string error;         // kFailed/kTimeout: libcurl's reason (never a header value)
};

// True when `url` starts with http:// or https:// (any case) and names a host: the
// check of the config loader and of HttpCall::Run (inline: config/ links no libcurl).
inline bool IsHttpUrl(std::string_view url) {
  auto starts = [url](std::string_view prefix) {
    return url.size() > prefix.size() &&
           std::equal(prefix.begin(), prefix.end(), url.begin(), [](char p, char c) {
             return p == std::tolower(static_cast<unsigned char>(c));
           });
  };
  std::string_view rest;
  if (starts("http://")) {
    rest = url.substr(7);
  } else if (starts("https://")) {
    rest = url.substr(8);
  } else {
    return false;
  }
  return rest.front() != '/' && rest.find_first_of(" \t\r\n") == std::string_view::npos;
}

// Thread-safe: Cancel() may be called from any thread, before, during or after Run().
class HttpCall {
 public:
  HttpCall() = default;
  HttpCall(const HttpCall&) = delete;
  HttpCall& operator=(const HttpCall&) = delete;

  // Performs `req` on the calling thread. Returns within req.timeout (plus a few ms),
  // or within a few ms of Cancel(). REQUIRES: called once.
  HttpResult Run(const HttpRequest& req);
  // Ends a Run under way (it returns kCancelled) or makes the next one return at once.
  void Cancel();

 private:
  std::atomic<bool> cancelled_{false};
  std::mutex mu_;
  void* multi_ = nullptr;  // CURLM* while Run() is under way; guarded by mu_
};

}  // namespace tickd::jobs
