// A real redis-server for tests and benchmarks: its own temporary folder, a free
// loopback port (found by binding a socket to port 0), a password, AOF with fsync on
// every write unless told otherwise. Kill() + Start() restart it on the same port
// with the same data folder (a crash and a restart). Header-only, no client library.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tests/lock/temp_dir.h"
#include "tests/support/server_process.h"

namespace tickd::testing {

// Clients must speak TLS (redis-server's own tls-port; the plain port is off) and
// show a certificate signed by ca_file.
struct RedisServerTls {
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
};

class RedisServer {
 public:
  static constexpr const char* kBinary = "/usr/bin/redis-server";
  static constexpr const char* kDefaultPassword = "s3cret-Pa55word";

  // aof: appendonly yes + appendfsync always (durable fences); false: no persistence.
  // `extra`: more command-line options (a cluster node's).
  explicit RedisServer(bool aof = true, std::string password = kDefaultPassword,
                       std::vector<std::string> extra = {},
                       std::optional<RedisServerTls> tls = std::nullopt)
      : aof_(aof), password_(std::move(password)), extra_(std::move(extra)), tls_(std::move(tls)) {
    if (!Available()) return;
    port_ = FreeLoopbackPort();
    Start();
  }
  ~RedisServer() { Stop(); }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  static bool Available() { return ::access(kBinary, X_OK) == 0; }

  int port() const { return port_; }
  const std::string& password() const { return password_; }
  const std::string& dir() const { return dir_.path(); }
  bool running() const { return pid_ > 0; }
  // redis://127.0.0.1:PORT/0 (the password is passed apart, as the daemon does).
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_) + "/0"; }

  // Starts the server and waits until it accepts connections (≤ 5 s).
  bool Start() {
    if (pid_ > 0) return true;
    std::vector<std::string> args = {kBinary,      "--port",           std::to_string(port_),
                                     "--bind",     "127.0.0.1",        "--dir",
                                     dir_.path(),  "--save",           "",
                                     "--appendonly", aof_ ? "yes" : "no",
                                     "--appendfsync", "always",         "--daemonize",
                                     "no",         "--loglevel",       "warning",
                                     "--logfile",  dir_.path() + "/redis.log"};
    if (!password_.empty()) {
      args.push_back("--requirepass");
      args.push_back(password_);
    }
    if (tls_) {
      args.insert(args.end(), {"--port", "0", "--tls-port", std::to_string(port_),
                               "--tls-cert-file", tls_->cert_file, "--tls-key-file",
                               tls_->key_file, "--tls-ca-cert-file", tls_->ca_file,
                               "--tls-auth-clients", "yes"});
    }
    args.insert(args.end(), extra_.begin(), extra_.end());
    pid_ = SpawnServer(std::move(args));
    return pid_ > 0 && WaitUntilServing(
                           pid_, [this] { return AcceptsOnLoopback(port_); },
                           std::chrono::seconds(5), std::chrono::milliseconds(10));
  }

  pid_t pid() const { return pid_; }
  // SIGSTOP / SIGCONT: a server that stops answering without closing connections.
  void Pause() const { FreezeServer(pid_); }
  void Resume() const {
    if (pid_ > 0) ::kill(pid_, SIGCONT);
  }

  // SIGKILL: a crash; what reached the AOF survives.
  void Kill() { StopWith(SIGKILL); }
  // SIGTERM: a clean shutdown.
  void Stop() { StopWith(SIGTERM); }

 private:
  void StopWith(int sig) { StopServer(pid_, sig); }

  bool aof_;
  std::string password_;
  std::vector<std::string> extra_;
  std::optional<RedisServerTls> tls_;
  TempDir dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

// redis-cli against the server on `port` (no AUTH when `password` is empty): its output (not a tty:
// no type annotations), stderr included, trailing newlines and spaces removed.
inline std::string RedisCli(int port, const std::string& password, const std::string& args) {
  const std::string auth = password.empty() ? "" : "-a '" + password + "' --no-auth-warning ";
  // Bounded: a frozen (SIGSTOPped) server would otherwise hold the test until ctest's
  // timeout, with nothing said about where it stood.
  const std::string cmd =
      "timeout 10 redis-cli -p " + std::to_string(port) + " " + auth + args + " 2>&1";
  std::string out;
  if (FILE* pipe = ::popen(cmd.c_str(), "r")) {
    char buf[512];
    while (std::fgets(buf, sizeof buf, pipe)) out += buf;
    ::pclose(pipe);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r' || out.back() == ' '))
    out.pop_back();
  return out;
}

// A Redis Cluster of `nodes` primaries (no replicas), each a RedisServer with
// cluster-enabled, the slots shared out by `redis-cli --cluster create`. running()
// once every node says cluster_state:ok (≤ 10 s).
class RedisCluster {
 public:
  explicit RedisCluster(int nodes = 3) {
    if (!RedisServer::Available()) return;
    std::string create = "--cluster create";
    for (int i = 0; i < nodes; ++i) {
      servers_.push_back(std::make_unique<RedisServer>(
          true, RedisServer::kDefaultPassword,
          std::vector<std::string>{"--cluster-enabled", "yes", "--cluster-config-file",
                                   "nodes.conf", "--masterauth", RedisServer::kDefaultPassword,
                                   // The bus port is port + 10,000 unless given: past
                                   // 65,535 for most free ports.
                                   "--cluster-port", std::to_string(FreeLoopbackPort())}));
      if (!servers_.back()->running()) return;
      create += " 127.0.0.1:" + std::to_string(servers_.back()->port());
    }
    Cli(0, create + " --cluster-replicas 0 --cluster-yes");
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < until) {
      bool ok = true;
      for (std::size_t i = 0; i < servers_.size(); ++i)
        ok = ok && Cli(i, "CLUSTER INFO").find("cluster_state:ok") != std::string::npos;
      if (ok) {
        running_ = true;
        return;
      }
      ::usleep(50'000);
    }
  }

  bool running() const { return running_; }
  std::size_t size() const { return servers_.size(); }
  RedisServer& node(std::size_t i) { return *servers_.at(i); }
  const std::string& password() const { return servers_.front()->password(); }
  // The first node's URL: a client learns the others from it.
  std::string url() const { return servers_.front()->url(); }
  std::string Cli(std::size_t i, const std::string& args) const {
    return RedisCli(servers_.at(i)->port(), servers_.at(i)->password(), args);
  }

 private:
  std::vector<std::unique_ptr<RedisServer>> servers_;
  bool running_ = false;
};

// Moves the hash slot of `key` from the node holding its keys to the next node, in
// the steps of a resharding: Open() marks it IMPORTING / MIGRATING (the nodes then
// answer ASK), MoveKeys() MIGRATEs every key of the slot, Finish() gives the slot to
// the importing node on every node (clients then hear MOVED). Each step says whether
// every node answered OK.
class SlotMigration {
 public:
  SlotMigration(RedisCluster& cluster, const std::string& key) : cluster_(cluster) {
    slot_ = cluster.Cli(0, "CLUSTER KEYSLOT '" + key + "'");
    while (from_ < cluster.size() && cluster.Cli(from_, "CLUSTER COUNTKEYSINSLOT " + slot_) == "0")
      ++from_;
    to_ = (from_ + 1) % cluster.size();
  }
  bool found() const { return from_ < cluster_.size(); }
  std::size_t from() const { return from_; }
  std::size_t to() const { return to_; }
  // How many keys of the slot node i holds.
  std::string KeysOn(std::size_t i) const {
    return cluster_.Cli(i, "CLUSTER COUNTKEYSINSLOT " + slot_);
  }
  bool Open() {
    return cluster_.Cli(to_, "CLUSTER SETSLOT " + slot_ + " IMPORTING " + Id(from_)) == "OK" &&
           cluster_.Cli(from_, "CLUSTER SETSLOT " + slot_ + " MIGRATING " + Id(to_)) == "OK";
  }
  bool MoveKeys() {
    std::string keys = cluster_.Cli(from_, "CLUSTER GETKEYSINSLOT " + slot_ + " 1000");
    for (char& c : keys) c = c == '\n' ? ' ' : c;
    return cluster_.Cli(from_, "MIGRATE 127.0.0.1 " + std::to_string(cluster_.node(to_).port()) +
                                   " '' 0 5000 AUTH '" + cluster_.password() + "' KEYS " +
                                   keys) == "OK";
  }
  bool Finish() {
    bool ok = true;
    const std::string to_id = Id(to_);
    for (std::size_t i = 0; i < cluster_.size(); ++i)
      ok = cluster_.Cli(i, "CLUSTER SETSLOT " + slot_ + " NODE " + to_id) == "OK" && ok;
    return ok;
  }

 private:
  std::string Id(std::size_t i) const { return cluster_.Cli(i, "CLUSTER MYID"); }

  RedisCluster& cluster_;
  std::string slot_;
  std::size_t from_ = 0;
  std::size_t to_ = 0;
};

}  // namespace tickd::testing
