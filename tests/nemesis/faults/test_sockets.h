// Test helpers for the fault injectors: a loopback echo server and blocking-with-a-
// deadline socket calls (connect, send, receive), optionally from inside a network
// namespace. Header-only, test code only.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "tests/nemesis/faults/in_netns.h"

namespace tickd::nemesis::testing {

using std::chrono::milliseconds;

// A socket connected to host:port from namespace `netns` ("" = this one) within
// `timeout`, or -1. Blocking afterwards. The caller closes it.
inline int ConnectWithin(const std::string& host, int port, milliseconds timeout,
                         const std::string& netns = "") {
  int result = -1;
  auto made = RunInNetns(netns, [&] {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    ::inet_pton(AF_INET, host.c_str(), &addr.sin_addr);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 &&
        errno != EINPROGRESS) {
      ::close(fd);
      return;
    }
    pollfd p{fd, POLLOUT, 0};
    int err = -1;
    socklen_t len = sizeof err;
    if (::poll(&p, 1, static_cast<int>(timeout.count())) == 1 &&
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0) {
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
      result = fd;
      return;
    }
    ::close(fd);
  });
  return made ? result : -1;
}

inline bool SendAll(int fd, const std::string& bytes) {
  return ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
}

// What arrives on `fd` until `want` bytes came, the peer closed, or `timeout` passed.
inline std::string ReceiveFor(int fd, std::size_t want, milliseconds timeout) {
  std::string got;
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (got.size() < want) {
    const auto left =
        std::chrono::duration_cast<milliseconds>(until - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) != 1) break;
    char buf[4096];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    got.append(buf, static_cast<std::size_t>(n));
  }
  return got;
}

// Echoes every byte back, on 127.0.0.1:port() of the namespace it was made in.
class EchoServer {
 public:
  EchoServer() {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
        ::listen(listen_fd_, 16) == 0 &&
        ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      port_ = ntohs(addr.sin_port);
    }
    thread_ = std::thread([this] { Loop(); });
  }
  ~EchoServer() {
    stop_ = true;
    thread_.join();
    for (const pollfd& p : fds_) ::close(p.fd);
  }
  int port() const { return port_; }
  int accepted() const { return accepted_; }

 private:
  void Loop() {
    fds_.push_back({listen_fd_, POLLIN, 0});
    while (!stop_) {
      if (::poll(fds_.data(), fds_.size(), 20) <= 0) continue;
      for (std::size_t i = fds_.size(); i-- > 0;) {
        if (!fds_[i].revents) continue;
        if (i == 0) {
          const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
          if (fd >= 0) {
            fds_.push_back({fd, POLLIN, 0});
            ++accepted_;
          }
          continue;
        }
        char buf[4096];
        const ssize_t n = ::recv(fds_[i].fd, buf, sizeof buf, 0);
        if (n <= 0 || ::send(fds_[i].fd, buf, static_cast<std::size_t>(n), MSG_NOSIGNAL) != n) {
          ::close(fds_[i].fd);
          fds_.erase(fds_.begin() + static_cast<std::ptrdiff_t>(i));
        }
      }
    }
  }

  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::vector<pollfd> fds_;  // the loop's thread only
  std::thread thread_;
};

}  // namespace tickd::nemesis::testing
