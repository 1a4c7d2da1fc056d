// A real redis-server for tests and benchmarks: its own temporary folder, a free
// loopback port (found by binding a socket to port 0), a password, AOF with fsync on
// every write unless told otherwise. Kill() + Start() restart it on the same port
// with the same data folder (a crash and a restart). Header-only, no client library.
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "tests/lock/temp_dir.h"

namespace tickd::testing {

class RedisServer {
 public:
  static constexpr const char* kBinary = "/usr/bin/redis-server";
  static constexpr const char* kDefaultPassword = "s3cret-Pa55word";

  // aof: appendonly yes + appendfsync always (durable fences); false: no persistence.
  explicit RedisServer(bool aof = true, std::string password = kDefaultPassword)
      : aof_(aof), password_(std::move(password)) {
    if (!Available()) return;
    port_ = FreePort();
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
    const pid_t pid = ::fork();
    if (pid < 0) return false;
    if (pid == 0) {
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      const int null_fd = ::open("/dev/null", O_RDWR);
      ::dup2(null_fd, 1);
      ::dup2(null_fd, 2);
      ::execv(kBinary, argv.data());
      ::_exit(127);
    }
    pid_ = pid;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < until) {
      if (Accepts()) return true;
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  // SIGKILL: a crash; what reached the AOF survives.
  void Kill() { StopWith(SIGKILL); }
  // SIGTERM: a clean shutdown.
  void Stop() { StopWith(SIGTERM); }

  // A port that was free a moment ago (bound to port 0, then closed).
  static int FreePort() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof(addr);
    int port = 0;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      port = ntohs(addr.sin_port);
    }
    ::close(fd);
    return port;
  }

 private:
  void StopWith(int sig) {
    if (pid_ <= 0) return;
    ::kill(pid_, sig);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }

  bool Accepts() const {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<std::uint16_t>(port_));
    const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    ::close(fd);
    return ok;
  }

  bool aof_;
  std::string password_;
  TempDir dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace tickd::testing
