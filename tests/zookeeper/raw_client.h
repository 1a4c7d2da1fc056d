// A plain client of ZooKeeper's C library (its synchronous calls: link
// ${ZOOKEEPER_MT_LIBRARY}, define THREADED) for the tests that look at or change the
// nodes tickd writes: the ACLs, the layout an older tickd left.
#pragma once

#include <zookeeper/zookeeper.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "tests/zookeeper/zookeeper_server.h"

namespace tickd::testing {

// A plain client of the C library, connected (≤ 5 s), with the digest `identity`
// ("user:password") added when not empty.
class RawClient {
 public:
  explicit RawClient(const std::string& identity) {
    const std::string hosts = "127.0.0.1:" + std::to_string(ZookeeperServer::Shared().port());
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
    zh_ = zookeeper_init(hosts.c_str(), nullptr, 10'000, nullptr, nullptr, 0);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (zh_ && zoo_state(zh_) != ZOO_CONNECTED_STATE &&
           std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (zh_ && !identity.empty()) {
      zoo_add_auth(zh_, "digest", identity.data(), static_cast<int>(identity.size()), &OnAuth,
                   this);
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, std::chrono::seconds(5), [this] { return auth_rc_.has_value(); });
    }
  }
  ~RawClient() {
    if (zh_) zookeeper_close(zh_);
  }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool connected() const { return zh_ && zoo_state(zh_) == ZOO_CONNECTED_STATE; }
  zhandle_t* zh() const { return zh_; }

 private:
  static void OnAuth(int rc, const void* data) {
    auto* self = const_cast<RawClient*>(static_cast<const RawClient*>(data));
    std::lock_guard lock(self->mu_);
    self->auth_rc_ = rc;
    self->cv_.notify_all();
  }

  zhandle_t* zh_ = nullptr;
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<int> auth_rc_;
};

}  // namespace tickd::testing
