// A real etcd for tests and benchmarks: one member, its own temporary data folder,
// free loopback client and peer ports, fast elections (--heartbeat-interval 10ms,
// --election-timeout 100ms) so that it is ready quickly and the minimum lease TTL is
// etcd's floor of 1 s (etcd raises shorter TTLs to 1.5 election timeouts, rounded up
// to whole seconds). Kill() + Start() restart it on the same ports with the same data
// (a crash and a restart). Header-only, no client library.
// With EtcdServerTls: clients speak https and must show a certificate signed by the
// CA (--client-cert-auth); ready then means only that the port accepts connections
// (no https client here), so a test retries its first request.
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/lock/temp_dir.h"
#include "tests/support/server_process.h"

namespace tickd::testing {

struct EtcdServerTls {
  std::string ca_file;    // signs the clients' certificates
  std::string cert_file;  // the server's (also shown by its JSON gateway to itself)
  std::string key_file;
  std::vector<std::string> extra_args;  // e.g. --auth-token-ttl=1
};

class EtcdServer {
 public:
  static constexpr const char* kBinary = "/usr/bin/etcd";

  // `extra_args`: more of etcd's flags, e.g. --quota-backend-bytes=….
  explicit EtcdServer(std::optional<EtcdServerTls> tls = std::nullopt,
                      std::vector<std::string> extra_args = {})
      : tls_(std::move(tls)), extra_args_(std::move(extra_args)) {
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
    const std::string client =
        (tls_ ? "https" : "http") + std::string("://127.0.0.1:") + std::to_string(client_port_);
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
    if (tls_) {
      args.insert(args.end(), {"--cert-file=" + tls_->cert_file, "--key-file=" + tls_->key_file,
                               "--trusted-ca-file=" + tls_->ca_file, "--client-cert-auth"});
      args.insert(args.end(), tls_->extra_args.begin(), tls_->extra_args.end());
    }
    args.insert(args.end(), extra_args_.begin(), extra_args_.end());
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
  // The answer (headers and body) to a plain-HTTP GET of `path` ("": no answer within
  // `timeout_s` seconds of silence).
  std::string Get(const std::string& path, int timeout_s = 5) const {
    const int fd = ConnectLoopback(client_port_);
    if (fd < 0) return "";
    timeval tv{timeout_s, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    std::string answer;
    const std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (::write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      char buf[4096];
      for (ssize_t n; (n = ::read(fd, buf, sizeof(buf))) > 0;) answer.append(buf, n);
    }
    ::close(fd);
    return answer;
  }

 private:
  void StopWith(int sig) { StopServer(pid_, sig); }

  // GET /health answers {"health":"true"} once the member has a leader.
  bool Healthy() const {
    if (tls_) return AcceptsOnLoopback(client_port_);
    return Get("/health", 1).find("\"health\":\"true\"") != std::string::npos;
  }

  const std::optional<EtcdServerTls> tls_;
  const std::vector<std::string> extra_args_;
  TempDir dir_;
  int client_port_ = 0;
  int peer_port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace tickd::testing
