// A real etcd for tests and benchmarks: one member, its own temporary data folder,
// free loopback client and peer ports, fast elections (--heartbeat-interval 10ms,
// --election-timeout 100ms) so that it is ready quickly and the minimum lease TTL is
// etcd's floor of 1 s (etcd raises shorter TTLs to 1.5 election timeouts, rounded up
// to whole seconds). Kill() + Start() restart it on the same ports with the same data
// (a crash and a restart). Header-only, no client library.
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "tests/lock/temp_dir.h"
#include "tests/support/server_process.h"

namespace tickd::testing {

class EtcdServer {
 public:
  static constexpr const char* kBinary = "/usr/bin/etcd";

  EtcdServer() {
    if (!Available()) return;
    client_port_ = FreeLoopbackPort();
    peer_port_ = FreeLoopbackPort();
    while (peer_port_ == client_port_) peer_port_ = FreeLoopbackPort();
    Start();
  }
  ~EtcdServer() { Stop(); }
  EtcdServer(const EtcdServer&) = delete;
  EtcdServer& operator=(const EtcdServer&) = delete;

  static bool Available() { return ::access(kBinary, X_OK) == 0; }

  int port() const { return client_port_; }
  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  const std::string& dir() const { return dir_.path(); }
  std::string url() const { return "etcd://127.0.0.1:" + std::to_string(client_port_); }

  // Starts the member and waits until it answers /health with a leader (≤ 10 s).
  bool Start() {
    if (pid_ > 0) return true;
    const std::string client = "http://127.0.0.1:" + std::to_string(client_port_);
    const std::string peer = "http://127.0.0.1:" + std::to_string(peer_port_);
    std::vector<std::string> args = {kBinary,
                                     "--name=default",
                                     "--data-dir=" + dir_.path() + "/data",
                                     "--listen-client-urls=" + client,
                                     "--advertise-client-urls=" + client,
                                     "--listen-peer-urls=" + peer,
                                     "--initial-advertise-peer-urls=" + peer,
                                     "--initial-cluster=default=" + peer,
                                     "--heartbeat-interval=10",
                                     "--election-timeout=100",
                                     "--logger=zap",
                                     "--log-level=error",
                                     "--log-outputs=" + dir_.path() + "/etcd.log"};
    pid_ = SpawnServer(std::move(args));
    return pid_ > 0 &&
           WaitUntilServing(pid_, [this] { return Healthy(); }, std::chrono::seconds(10));
  }

  // SIGKILL: a crash; what etcd fsynced to its WAL survives.
  void Kill() { StopWith(SIGKILL); }
  // SIGTERM: a clean shutdown.
  void Stop() { StopWith(SIGTERM); }
  // SIGSTOP / SIGCONT: a member that stops answering without closing connections.
  void Pause() const {
    FreezeServer(pid_);
  }
  void Resume() const {
    if (pid_ > 0) ::kill(pid_, SIGCONT);
  }

 private:
  void StopWith(int sig) { StopServer(pid_, sig); }

  // GET /health answers {"health":"true"} once the member has a leader.
  bool Healthy() const {
    const int fd = ConnectLoopback(client_port_);
    if (fd < 0) return false;
    timeval tv{1, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    std::string answer;
    const std::string request = "GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (::write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      char buf[512];
      for (ssize_t n; (n = ::read(fd, buf, sizeof(buf))) > 0;) answer.append(buf, n);
    }
    ::close(fd);
    return answer.find("\"health\":\"true\"") != std::string::npos;
  }

  TempDir dir_;
  int client_port_ = 0;
  int peer_port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace tickd::testing
