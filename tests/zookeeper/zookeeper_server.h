// A real standalone ZooKeeper (Debian's zookeeper 3.8, on the JVM) for tests and
// benchmarks: its own temporary dataDir, a free loopback client port, the admin
// server off, tickTime 200 ms so sessions expire within seconds (session timeouts
// are clamped to 400 ms .. 4 s). Kill() + Start() restart it on the same port with
// the same dataDir (a crash: what was fsync'd to the txn log survives, and so do the
// sessions that reconnect within their timeout). Pause()/Resume() freeze it.
//
// The JVM takes about a second to start: a test binary starts ONE server
// (Shared()) and gives each case its own chroot (NextChroot()).
// Header-only, no client library.
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/lock/temp_dir.h"
#include "tests/support/server_process.h"

namespace tickd::testing {

class ZookeeperServer {
 public:
  static constexpr const char* kJava = "/usr/bin/java";
  static constexpr const char* kJar = "/usr/share/java/zookeeper.jar";
  static constexpr std::chrono::milliseconds kTick{200};
  static constexpr std::chrono::milliseconds kMaxSessionTimeout{4'000};  // 20 ticks

  ZookeeperServer() {
    if (!Available()) return;
    port_ = FreeLoopbackPort();
    std::filesystem::create_directories(dir_.path() + "/data");
    std::ofstream cfg(dir_.path() + "/zoo.cfg");
    cfg << "tickTime=" << kTick.count() << "\n"
        << "dataDir=" << dir_.path() << "/data\n"
        << "clientPort=" << port_ << "\n"
        << "clientPortAddress=127.0.0.1\n"
        << "admin.enableServer=false\n"
        << "minSessionTimeout=" << 2 * kTick.count() << "\n"
        << "maxSessionTimeout=" << kMaxSessionTimeout.count() << "\n"
        << "preAllocSize=1024\n"
        << "4lw.commands.whitelist=srvr\n";
    cfg.close();
    Start();
  }
  ~ZookeeperServer() { Stop(); }
  ZookeeperServer(const ZookeeperServer&) = delete;
  ZookeeperServer& operator=(const ZookeeperServer&) = delete;

  static bool Available() { return ::access(kJava, X_OK) == 0 && ::access(kJar, R_OK) == 0; }

  // One server for the whole test binary, started on first use, stopped at exit.
  static ZookeeperServer& Shared() {
    static ZookeeperServer server;
    return server;
  }
  // A chroot no other case of this binary uses ("/t<pid>-<n>").
  static std::string NextChroot() {
    static std::atomic<int> n{0};
    return "/t" + std::to_string(::getpid()) + "-" + std::to_string(++n);
  }

  int port() const { return port_; }
  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  const std::string& dir() const { return dir_.path(); }
  // zookeeper://127.0.0.1:PORT<chroot>
  std::string url(const std::string& chroot = "") const {
    return "zookeeper://127.0.0.1:" + std::to_string(port_) + chroot;
  }

  // Starts the JVM and waits until the server serves requests (≤ 30 s).
  bool Start() {
    if (pid_ > 0) return true;
    std::vector<std::string> args = {kJava,
                                     "-Xms32m",
                                     "-Xmx256m",
                                     "-XX:+UseSerialGC",
                                     "-XX:TieredStopAtLevel=1",
                                     "-Dzookeeper.admin.enableServer=false",
                                     "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                                     "-cp",
                                     std::string(kJar) + ":/usr/share/java/slf4j-simple.jar",
                                     "org.apache.zookeeper.server.ZooKeeperServerMain",
                                     dir_.path() + "/zoo.cfg"};
    const std::string log = dir_.path() + "/zookeeper.log";
    pid_ = SpawnServer(std::move(args), log);
    return pid_ > 0 && WaitUntilServing(pid_, [this] { return Serving(); },
                                        std::chrono::seconds(30), std::chrono::milliseconds(50));
  }

  // SIGKILL: a crash.
  void Kill() { StopWith(SIGKILL); }
  // SIGTERM: a clean shutdown.
  void Stop() { StopWith(SIGTERM); }
  // SIGSTOP / SIGCONT: a frozen server (no answers, no session expiry meanwhile;
  // sessions silent for longer than their timeout expire once it resumes).
  void Pause() const {
    FreezeServer(pid_);
  }
  void Resume() const {
    if (pid_ > 0) ::kill(pid_, SIGCONT);
  }

 private:
  void StopWith(int sig) { StopServer(pid_, sig); }

  // The "srvr" four-letter word answers "Mode: standalone" once the server serves
  // (before, it says "not currently serving requests").
  bool Serving() const {
    const int fd = ConnectLoopback(port_);
    if (fd < 0) return false;
    std::string answer;
    if (::write(fd, "srvr", 4) == 4) {
      timeval tv{1, 0};
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      char buf[512];
      ssize_t n = 0;
      while ((n = ::read(fd, buf, sizeof(buf))) > 0)
        answer.append(buf, static_cast<std::size_t>(n));
    }
    ::close(fd);
    return answer.find("Mode:") != std::string::npos;
  }

  TempDir dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace tickd::testing
