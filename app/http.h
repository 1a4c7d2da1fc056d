// The daemon's HTTP endpoints (docs/design.md §9), served with cpp-httplib on a thread pool
// of its own, only when `http.listen` is set:
//   /metrics     Prometheus text format
//   /healthz     200 "ok" while the scheduler loop turns and the backend answers,
//                503 with the reason otherwise
//   /api/status  JSON of `tickd status` (?job=NAME&last=N)
//   /api/runs    JSON of `tickd status JOB --runs` (?job=NAME&limit=N): the job's last
//                runs with what they printed (the page fetches it when a run is clicked)
//   /            the status page (app/status_page.html, compiled in; no external assets)
// Handlers run on the server's threads; every callback must be thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "base/error.h"

namespace tickd::app {

struct HttpHandlers {
  std::function<std::string()> metrics;
  // True when healthy; otherwise false with the reason in *why.
  std::function<bool(std::string* why)> healthy;
  // The status JSON; an Error becomes 500 (or 404 for an unknown job).
  std::function<Result<std::string>(const std::string& job, int last)> status_json;
  // The runs JSON of one job; an Error becomes 500 (or 404 for an unknown job).
  std::function<Result<std::string>(const std::string& job, int limit)> runs_json;
};

class HttpServer {
 public:
  // Binds `listen` ("host:port"; port 0 picks a free one) and starts serving.
  // An Error naming the address when it cannot bind.
  static Result<std::unique_ptr<HttpServer>> Start(const std::string& listen,
                                                   HttpHandlers handlers);
  virtual ~HttpServer() = default;  // stops serving and joins
  virtual int port() const = 0;
};

// The status page's HTML.
std::string_view StatusPageHtml();

}  // namespace tickd::app
