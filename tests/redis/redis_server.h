// A real redis-server for tests and benchmarks: its own temporary folder, a free
// loopback port (found by binding a socket to port 0), a password, AOF with fsync on
// every write unless told otherwise. Kill() + Start() restart it on the same port
// with the same data folder (a crash and a restart). Header-only, no client library.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/lock/temp_dir.h"
#include "tests/support/server_process.h"

namespace tickd::testing {

class RedisServer {
 public:
  static constexpr const char* kBinary = "/usr/bin/redis-server";
  static constexpr const char* kDefaultPassword = "s3cret-Pa55word";

  // aof: appendonly yes + appendfsync always (durable fences); false: no persistence.
  explicit RedisServer(bool aof = true, std::string password = kDefaultPassword)
      : aof_(aof), password_(std::move(password)) {
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
    pid_ = SpawnServer(std::move(args));
    return pid_ > 0 && WaitUntilServing(
                           pid_, [this] { return AcceptsOnLoopback(port_); },
                           std::chrono::seconds(5), std::chrono::milliseconds(10));
  }

  // SIGKILL: a crash; what reached the AOF survives.
  void Kill() { StopWith(SIGKILL); }
  // SIGTERM: a clean shutdown.
  void Stop() { StopWith(SIGTERM); }

 private:
  void StopWith(int sig) { StopServer(pid_, sig); }

  bool aof_;
  std::string password_;
  TempDir dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace tickd::testing
