// Real servers for tests (Redis, etcd, ZooKeeper, PostgreSQL): a child process on a
// free loopback port that a test can kill, restart, pause and resume. The fixtures in
// tests/<backend>/ say how each server is configured; this says how any is run.
#pragma once

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace tickd::testing {

// A loopback port that was free a moment ago (bound to port 0, then closed).
inline int FreeLoopbackPort() {
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

// A socket connected to 127.0.0.1:port, or -1. The caller closes it.
inline int ConnectLoopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Whether something accepts connections on 127.0.0.1:port.
inline bool AcceptsOnLoopback(int port) {
  const int fd = ConnectLoopback(port);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

// Forks and execs `args` (args[0] is a path) with stdin from /dev/null and stdout and
// stderr appended to `log` ("" = /dev/null). The server dies with the test binary,
// even when the test crashes (PR_SET_PDEATHSIG). Returns its pid, or -1.
inline pid_t SpawnServer(std::vector<std::string> args, const std::string& log = "") {
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int null_fd = ::open("/dev/null", O_RDWR);
  const int out_fd =
      log.empty() ? null_fd : ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  ::dup2(null_fd, 0);
  ::dup2(out_fd, 1);
  ::dup2(out_fd, 2);
  ::execv(argv[0], argv.data());
  ::_exit(127);
}

// Polls `ready` every `interval` until it holds (true), the server exits (false;
// `pid` becomes -1) or `timeout` passes (false).
inline bool WaitUntilServing(pid_t& pid, const std::function<bool()>& ready,
                             std::chrono::milliseconds timeout,
                             std::chrono::milliseconds interval = std::chrono::milliseconds(20)) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    if (ready()) return true;
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      pid = -1;
      return false;
    }
    std::this_thread::sleep_for(interval);
  }
  return false;
}

// Reaps child `pid` once it has exited, polling until `until`. False when it is
// still running then (the caller escalates, then waits without a limit).
inline bool ReapBy(pid_t pid, std::chrono::steady_clock::time_point until) {
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

// Sends `sig` (after SIGCONT, so a paused server sees it) and reaps the server; one
// still running 20 s later gets SIGKILL. Bounded because a server may outlive the
// signal: Redis 7 keeps serving when its SIGTERM shutdown fails, and waits up to its
// shutdown-timeout for lagging replicas before it exits.
inline void StopServer(pid_t& pid, int sig) {
  if (pid <= 0) return;
  ::kill(pid, SIGCONT);
  ::kill(pid, sig);
  if (!ReapBy(pid, std::chrono::steady_clock::now() + std::chrono::seconds(20))) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  pid = -1;
}

// SIGSTOP, then waits (up to 2 s) until every thread of `pid` is stopped. kill()
// returns before a busy multi-threaded server has stopped, and a request sent in that
// window would still be answered: a test of a frozen server would then see a reply.
inline void FreezeServer(pid_t pid) {
  if (pid <= 0) return;
  ::kill(pid, SIGSTOP);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (std::chrono::steady_clock::now() < give_up) {
    bool all_stopped = true;
    const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
    if (DIR* dir = ::opendir(tasks.c_str())) {
      while (dirent* e = ::readdir(dir)) {
        if (e->d_name[0] == '.') continue;
        std::ifstream stat(tasks + "/" + e->d_name + "/stat");
        std::string line;
        std::getline(stat, line);
        // "pid (comm) S ...": the state follows the last ')'.
        const auto close = line.rfind(')');
        if (close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'T' &&
            line[close + 2] != 't') {
          all_stopped = false;
        }
      }
      ::closedir(dir);
    }
    if (all_stopped) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace tickd::testing
