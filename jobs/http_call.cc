// HttpCall: one easy handle driven by a multi handle, so the thread that runs the
// transfer sleeps in curl_multi_poll and Cancel() wakes it (curl_multi_wakeup) at
// once: a lease loss, a job timeout or a shutdown ends the transfer within
// milliseconds, not at libcurl's next progress callback.
#include "jobs/http_call.h"

#include <curl/curl.h>

#include <algorithm>
#include <memory>

namespace tickd::jobs {
namespace {

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct Sink {
  std::string* body;
  bool* truncated;
  std::size_t max;
};

std::size_t OnData(char* data, std::size_t size, std::size_t count, void* user) {
  auto* sink = static_cast<Sink*>(user);
  const std::size_t n = size * count;
  const std::size_t room = sink->max - std::min(sink->max, sink->body->size());
  sink->body->append(data, std::min(n, room));
  if (n > room) *sink->truncated = true;
  return n;  // read everything: the server sees a normal reader
}

}  // namespace

void HttpCall::Cancel() {
  cancelled_.store(true);
  std::lock_guard lock(mu_);
  if (multi_ != nullptr) curl_multi_wakeup(static_cast<CURLM*>(multi_));
}

HttpResult HttpCall::Run(const HttpRequest& req) {
  HttpResult out;
  if (!IsHttpUrl(req.url)) {
    out.error = "not an http:// or https:// URL";
    return out;
  }
  GlobalInit();
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> easy(curl_easy_init(), &curl_easy_cleanup);
  std::unique_ptr<CURLM, decltype(&curl_multi_cleanup)> multi(curl_multi_init(),
                                                             &curl_multi_cleanup);
  if (!easy || !multi) {
    out.error = "libcurl could not start a transfer";
    return out;
  }
  curl_slist* list = nullptr;
  for (const auto& [name, value] : req.headers) {
    list = curl_slist_append(list, (name + ": " + value).c_str());
  }
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> headers(list, &curl_slist_free_all);

  Sink sink{&out.body, &out.body_truncated, req.max_response_bytes};
  CURL* e = easy.get();
  curl_easy_setopt(e, CURLOPT_URL, req.url.c_str());
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS,
                   static_cast<long>(std::max<long long>(1, req.timeout.count())));
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &OnData);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(e, CURLOPT_USERAGENT, "tickd");
  if (headers) curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers.get());
  const bool sends_body = !req.body.empty() || req.method == "POST" || req.method == "PUT" ||
                          req.method == "PATCH";
  if (req.method == "HEAD") {
    curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
  } else if (sends_body) {
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, req.body.data());
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
    if (req.method != "POST") curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, req.method.c_str());
  } else if (req.method != "GET") {
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, req.method.c_str());
  }

  if (curl_multi_add_handle(multi.get(), e) != CURLM_OK) {
    out.error = "libcurl could not start a transfer";
    return out;
  }
  {
    std::lock_guard lock(mu_);
    multi_ = multi.get();
  }
  CURLcode code = CURLE_OK;
  bool finished = false;
  while (!finished && !cancelled_.load()) {
    int running = 0;
    if (curl_multi_perform(multi.get(), &running) != CURLM_OK) {
      code = CURLE_FAILED_INIT;
      break;
    }
    int left = 0;
    while (CURLMsg* msg = curl_multi_info_read(multi.get(), &left)) {
      if (msg->msg == CURLMSG_DONE) {
        code = msg->data.result;
        finished = true;
      }
    }
    if (finished || running == 0) {
      finished = true;
      break;
    }
    // Wakes for the socket, libcurl's own timers (the transfer timeout), or Cancel().
    curl_multi_poll(multi.get(), nullptr, 0, 1'000, nullptr);
  }
  {
    std::lock_guard lock(mu_);
    multi_ = nullptr;
  }
  curl_multi_remove_handle(multi.get(), e);
  if (!finished) {
    out.end = HttpEnd::kCancelled;
    out.error = "cancelled";
    return out;
  }
  if (code == CURLE_OPERATION_TIMEDOUT) {
    out.end = HttpEnd::kTimeout;
    out.error = "no complete answer within " + std::to_string(req.timeout.count()) + " ms";
    return out;
  }
  if (code != CURLE_OK) {
    out.end = HttpEnd::kFailed;
    out.error = curl_easy_strerror(code);
    return out;
  }
  long status = 0;
  curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
  if (status == 0) {  // the transfer ended without a status line
    out.end = HttpEnd::kFailed;
    out.error = "no HTTP response";
    return out;
  }
  out.end = HttpEnd::kAnswered;
  out.status = static_cast<int>(status);
  return out;
}

}  // namespace tickd::jobs
