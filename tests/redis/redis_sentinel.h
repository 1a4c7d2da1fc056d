// A real Redis Sentinel setup for tests: one master and `replicas` replicas
// (RedisServer, AOF always, one password for all), watched by `sentinels` redis-sentinel
// processes under the name "m" (quorum 2, down-after 1 s, failover-timeout 5 s), each
// on a free loopback port with its own config file (a sentinel rewrites it). running()
// once every sentinel knows every replica and the other sentinels (≤ 20 s), so a
// failover can be authorised at once. Header-only, no client library.
#pragma once

#include <unistd.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "tests/lock/temp_dir.h"
#include "tests/redis/redis_server.h"
#include "tests/support/server_process.h"

namespace tickd::testing {

class RedisSentinelSet {
 public:
  static constexpr const char* kBinary = "/usr/bin/redis-sentinel";
  static constexpr const char* kMaster = "m";

  explicit RedisSentinelSet(int replicas = 2, int sentinels = 3) {
    if (!Available()) return;
    const std::string pw = RedisServer::kDefaultPassword;
    // No diskless-sync delay: Redis 7 waits 5 s for more replicas before a full sync,
    // which each set (and each resync after a failover) would otherwise sit through.
    const std::vector<std::string> common = {"--masterauth", pw, "--repl-diskless-sync-delay",
                                             "0"};
    servers_.push_back(std::make_unique<RedisServer>(true, pw, common));
    if (!servers_.back()->running()) return;
    const int master_port = servers_.front()->port();
    for (int i = 0; i < replicas; ++i) {
      std::vector<std::string> args = common;
      args.insert(args.end(), {"--replicaof", "127.0.0.1", std::to_string(master_port)});
      servers_.push_back(std::make_unique<RedisServer>(true, pw, std::move(args)));
      if (!servers_.back()->running()) return;
    }
    for (int i = 0; i < sentinels; ++i) {
      SentinelProcess s;
      s.port = FreeLoopbackPort();
      const std::string conf = dir_.path() + "/sentinel-" + std::to_string(i) + ".conf";
      std::ofstream(conf) << "port " << s.port << "\nbind 127.0.0.1\ndaemonize no\n"
                          << "dir " << dir_.path() << "\nlogfile " << dir_.path() << "/sentinel-"
                          << i << ".log\n"
                          << "sentinel monitor " << kMaster << " 127.0.0.1 " << master_port
                          << " 2\nsentinel auth-pass " << kMaster << " " << pw
                          << "\nsentinel down-after-milliseconds " << kMaster << " 1000\n"
                          << "sentinel failover-timeout " << kMaster << " 5000\n"
                          << "sentinel parallel-syncs " << kMaster << " 2\n";
      s.pid = SpawnServer({kBinary, conf});
      if (s.pid <= 0 || !WaitUntilServing(
                            s.pid, [port = s.port] { return AcceptsOnLoopback(port); },
                            std::chrono::seconds(5), std::chrono::milliseconds(10))) {
        return;
      }
      sentinels_.push_back(s);
    }
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < until) {
      // Every replica in sync (online at the master), so WAIT can count it, and no
      // data server busy with the AOF rewrite a replica starts after its first sync
      // (its fsyncs then delayed WAIT's acknowledgements past 500 ms on CI).
      bool ok = Occurrences(Cli(0, "INFO replication"), "state=online") == replicas;
      for (std::size_t i = 0; i < servers_.size() && ok; ++i) {
        const std::string persistence = Cli(i, "INFO persistence");
        ok = persistence.find("aof_rewrite_in_progress:0") != std::string::npos &&
             persistence.find("aof_rewrite_scheduled:0") != std::string::npos;
      }
      for (std::size_t i = 0; i < sentinels_.size() && ok; ++i) {
        ok = Count(Sentinel(i, std::string("SENTINEL replicas ") + kMaster), "name") == replicas &&
             Count(Sentinel(i, std::string("SENTINEL sentinels ") + kMaster), "name") ==
                 sentinels - 1;
      }
      if (ok) {
        running_ = true;
        return;
      }
      ::usleep(100'000);
    }
  }
  ~RedisSentinelSet() {
    for (auto& s : sentinels_) StopServer(s.pid, SIGTERM);
  }
  RedisSentinelSet(const RedisSentinelSet&) = delete;
  RedisSentinelSet& operator=(const RedisSentinelSet&) = delete;

  static bool Available() {
    return RedisServer::Available() && ::access(kBinary, X_OK) == 0;
  }
  bool running() const { return running_; }
  const std::string& password() const { return servers_.front()->password(); }
  // Every data server: index 0 was the master at the start.
  std::size_t servers() const { return servers_.size(); }
  RedisServer& server(std::size_t i) { return *servers_.at(i); }
  int sentinel_port(std::size_t i) const { return sentinels_.at(i).port; }

  // redis-sentinel://127.0.0.1:P1,127.0.0.1:P2,…/m/0 (`first`: a sentinel address to
  // name before the real ones) plus `query` ("?wait=1").
  std::string url(const std::string& query = "", const std::string& first = "") const {
    std::string out = "redis-sentinel://" + first;
    for (std::size_t i = 0; i < sentinels_.size(); ++i)
      out += (i == 0 && first.empty() ? "" : ",") + std::string("127.0.0.1:") +
             std::to_string(sentinels_[i].port);
    return out + "/" + kMaster + "/0" + query;
  }

  // redis-cli against sentinel i (which has no password).
  std::string Sentinel(std::size_t i, const std::string& args) const {
    return RedisCli(sentinels_.at(i).port, "", args);
  }
  // The port the sentinels name as the master's (sentinel 0 asked), 0 when none.
  int MasterPort() const {
    const std::string out = Sentinel(0, std::string("SENTINEL get-master-addr-by-name ") + kMaster);
    const auto nl = out.find('\n');
    return nl == std::string::npos ? 0 : std::atoi(out.c_str() + nl + 1);
  }
  // The server (index) listening on `port`, or servers().
  std::size_t ServerOn(int port) const {
    for (std::size_t i = 0; i < servers_.size(); ++i)
      if (servers_[i]->port() == port) return i;
    return servers_.size();
  }

  // SENTINEL FAILOVER, then waits (≤ 20 s) until the sentinels name another master that
  // says ROLE master and every other data server replicates from it. The new master's
  // index, or servers() when that did not happen in time.
  std::size_t Failover() {
    const int old = MasterPort();
    Sentinel(0, std::string("SENTINEL failover ") + kMaster);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < until) {
      const int now = MasterPort();
      const std::size_t i = ServerOn(now);
      if (now != old && i < servers_.size() && Role(i) == "master") {
        bool followed = true;
        for (std::size_t k = 0; k < servers_.size(); ++k) {
          if (k == i) continue;
          const std::string info = Cli(k, "INFO replication");
          followed = followed &&
                     info.find("master_port:" + std::to_string(now)) != std::string::npos &&
                     info.find("master_link_status:up") != std::string::npos;
        }
        if (followed) return i;
      }
      ::usleep(100'000);
    }
    return servers_.size();
  }

  std::string Cli(std::size_t i, const std::string& args) const {
    return RedisCli(servers_.at(i)->port(), servers_.at(i)->password(), args);
  }
  // "master" or "slave" (the first line of ROLE).
  std::string Role(std::size_t i) const {
    const std::string out = Cli(i, "ROLE");
    return out.substr(0, out.find('\n'));
  }

 private:
  struct SentinelProcess {
    int port = 0;
    pid_t pid = -1;
  };
  static int Occurrences(const std::string& text, const std::string& needle) {
    int n = 0;
    for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
    return n;
  }
  // How many lines of `out` equal `word` (redis-cli prints a map's keys one a line).
  static int Count(const std::string& out, const std::string& word) {
    int n = 0;
    std::size_t start = 0;
    while (start <= out.size()) {
      const auto nl = out.find('\n', start);
      if (out.substr(start, nl == std::string::npos ? std::string::npos : nl - start) == word) ++n;
      if (nl == std::string::npos) break;
      start = nl + 1;
    }
    return n;
  }

  TempDir dir_;
  std::vector<std::unique_ptr<RedisServer>> servers_;
  std::vector<SentinelProcess> sentinels_;
  bool running_ = false;
};

}  // namespace tickd::testing
