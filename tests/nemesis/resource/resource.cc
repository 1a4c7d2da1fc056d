#include "tests/nemesis/resource/resource.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <list>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

namespace tickd::nemesis {

namespace fs = std::filesystem;

namespace {

constexpr std::size_t kMaxLineBytes = 1024;

std::int64_t RealtimeMs() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

// Sends all of `data`; false when the peer is gone or the socket would block for long.
bool SendAll(int fd, std::string_view data, int timeout_ms) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, timeout_ms) <= 0) return false;
      continue;
    }
    return false;
  }
  return true;
}

template <typename T>
bool ParseNumber(std::string_view s, T* out) {
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

std::vector<std::string_view> Words(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    const std::size_t start = i;
    while (i < line.size() && line[i] != ' ') ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

// Replays an existing journal: the highest accepted fence per job and the last seq.
bool Replay(const fs::path& journal, std::map<std::string, std::uint64_t>* highest,
            std::uint64_t* next_seq, std::string* error) {
  std::ifstream in(journal);
  if (!in) return true;  // no journal yet
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("job") || !j.contains("accepted") ||
        !j.contains("fence")) {
      if (in.peek() == EOF) break;  // a torn last line (a resource killed mid-write)
      *error = journal.string() + ":" + std::to_string(number) + ": not a journal line";
      return false;
    }
    if (j.value("seq", std::uint64_t{0}) >= *next_seq)
      *next_seq = j.value("seq", std::uint64_t{0}) + 1;
    if (!j["accepted"].get<bool>()) continue;
    const std::string job = j["job"].get<std::string>();
    const std::uint64_t fence = j["fence"].get<std::uint64_t>();
    auto it = highest->find(job);
    if (it == highest->end() || fence > it->second) (*highest)[job] = fence;
  }
  return true;
}

}  // namespace

struct FencedResource::Conn {
  int fd = -1;
  std::string in;
  bool begun = false;     // a BEGIN was decided
  bool accepted = false;  // … and accepted: an END or a disconnect is awaited
  std::string job;
  std::int64_t tick = 0;
  std::uint64_t fence = 0;
  std::string replica;
  std::optional<std::uint64_t> last_fence;
  std::int64_t start_ms = 0;
  std::uint64_t seq = 0;
  std::vector<std::int64_t> writes;  // WRITE times (ms)
  std::size_t writes_refused = 0;
};

std::unique_ptr<FencedResource> FencedResource::Open(const fs::path& socket,
                                                     const fs::path& journal, std::string* error) {
  std::map<std::string, std::uint64_t> highest;
  std::uint64_t next_seq = 1;
  if (!Replay(journal, &highest, &next_seq, error)) return nullptr;

  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string path = socket.string();
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    *error = path + ": a socket path must have 1 to " + std::to_string(sizeof(addr.sun_path) - 1) +
             " bytes";
    return nullptr;
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int journal_fd = ::open(journal.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (journal_fd < 0) {
    *error = Errno(journal.string());
    return nullptr;
  }
  const int listen_fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  ::unlink(path.c_str());
  if (listen_fd < 0 || ::bind(listen_fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(listen_fd, 512) != 0) {
    *error = Errno(path);
    if (listen_fd >= 0) ::close(listen_fd);
    ::close(journal_fd);
    return nullptr;
  }
  // Jobs may run as another user (or in another namespace with another uid map).
  ::chmod(path.c_str(), 0777);
  const int wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd < 0) {
    *error = Errno("eventfd");
    ::close(listen_fd);
    ::close(journal_fd);
    return nullptr;
  }
  std::unique_ptr<FencedResource> r(new FencedResource(listen_fd, wake_fd, journal_fd, socket));
  r->highest_ = std::move(highest);
  r->next_seq_ = next_seq;
  return r;
}

FencedResource::FencedResource(int listen_fd, int wake_fd, int journal_fd, fs::path socket)
    : listen_fd_(listen_fd),
      wake_fd_(wake_fd),
      journal_fd_(journal_fd),
      socket_(std::move(socket)) {}

FencedResource::~FencedResource() {
  Stop();
  ::close(listen_fd_);
  ::close(wake_fd_);
  ::close(journal_fd_);
}

void FencedResource::Start() {
  thread_ = std::thread([this] { Serve(); });
}

void FencedResource::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  ::unlink(socket_.c_str());
}

std::optional<std::uint64_t> FencedResource::HighestFence(const std::string& job) const {
  std::lock_guard lock(mu_);
  auto it = highest_.find(job);
  if (it == highest_.end()) return std::nullopt;
  return it->second;
}

ResourceStats FencedResource::Stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void FencedResource::Journal(const Conn& c, std::int64_t end_ms, const char* ended) {
  nlohmann::ordered_json j;
  j["job"] = c.job;
  j["tick"] = c.tick;
  j["fence"] = c.fence;
  j["replica"] = c.replica;
  j["accepted"] = c.accepted;
  j["last_fence"] = c.last_fence ? nlohmann::ordered_json(*c.last_fence) : nullptr;
  j["start_ms"] = c.start_ms;
  j["end_ms"] = end_ms;
  j["ended"] = ended;
  j["seq"] = c.seq;
  if (!c.writes.empty()) {
    j["writes"] = c.writes;
    j["writes_refused"] = c.writes_refused;
  }
  const std::string line = j.dump() + "\n";
  // One write per line: O_APPEND keeps it whole (a single writer, a regular file).
  std::string_view rest = line;
  while (!rest.empty()) {
    const ssize_t n = ::write(journal_fd_, rest.data(), rest.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // disk full: nothing better to do than lose the line
    rest.remove_prefix(static_cast<std::size_t>(n));
  }
  if (c.accepted) {
    std::lock_guard lock(mu_);
    --stats_.open;
  }
}

// Handles one line from a client. Sets *close when the connection is done.
void FencedResource::OnLine(Conn& c, const std::string& line, bool* close) {
  const std::vector<std::string_view> w = Words(line);
  if (!c.begun) {
    Conn parsed;
    if (w.size() != 5 || w[0] != "BEGIN" || !ParseNumber(w[2], &parsed.tick) ||
        !ParseNumber(w[3], &parsed.fence)) {
      SendAll(c.fd, "ERROR expected: BEGIN <job> <tick_unix> <fence> <replica>\n", 1000);
      *close = true;
      return;
    }
    c.begun = true;
    c.job = std::string(w[1]);
    c.tick = parsed.tick;
    c.fence = parsed.fence;
    c.replica = std::string(w[4]);
    {
      // Decide under the lock; this thread is the only writer, so the decision and
      // the update are one step for every other connection.
      std::lock_guard lock(mu_);
      c.start_ms = RealtimeMs();
      c.seq = next_seq_++;
      ++stats_.attempts;
      auto it = highest_.find(c.job);
      if (it != highest_.end()) c.last_fence = it->second;
      c.accepted = !c.last_fence || c.fence > *c.last_fence;
      if (c.accepted) {
        highest_[c.job] = c.fence;
        ++stats_.accepted;
        ++stats_.open;
      } else {
        ++stats_.rejected;
      }
    }
    if (!c.accepted) {
      SendAll(c.fd, "REJECT " + std::to_string(*c.last_fence) + "\n", 1000);
      Journal(c, c.start_ms, "rejected");
      *close = true;
      return;
    }
    // A client gone before it reads ACCEPT shows up as a disconnect on the next read.
    SendAll(c.fd, "ACCEPT\n", 1000);
    return;
  }
  if (w.size() == 1 && w[0] == "WRITE") {
    std::uint64_t highest = 0;
    {
      std::lock_guard lock(mu_);
      c.writes.push_back(RealtimeMs());
      highest = highest_[c.job];
    }
    if (highest == c.fence) {
      SendAll(c.fd, "OK\n", 1000);
    } else {
      ++c.writes_refused;
      SendAll(c.fd, "REFUSED " + std::to_string(highest) + "\n", 1000);
    }
    return;
  }
  Journal(c, RealtimeMs(), w.size() == 1 && w[0] == "END" ? "end" : "error");
  c.accepted = false;  // journaled
  *close = true;
}

void FencedResource::Serve() {
  std::list<Conn> conns;
  std::vector<pollfd> fds;
  std::vector<Conn*> order;
  for (;;) {
    fds.assign({pollfd{wake_fd_, POLLIN, 0}, pollfd{listen_fd_, POLLIN, 0}});
    order.clear();
    for (Conn& c : conns) {
      fds.push_back(pollfd{c.fd, POLLIN | POLLRDHUP, 0});
      order.push_back(&c);
    }
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[0].revents != 0) break;
    if (fds[1].revents & POLLIN) {
      for (;;) {
        const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) break;
        conns.push_back(Conn{});
        conns.back().fd = fd;
      }
    }
    for (std::size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      Conn& c = *order[i - 2];
      bool close = false;
      char buf[4096];
      // Read everything there is; lines first, then the close, so an END followed
      // by the client's exit is an "end", not a "disconnect".
      for (;;) {
        const ssize_t n = ::recv(c.fd, buf, sizeof(buf), 0);
        if (n > 0) {
          c.in.append(buf, static_cast<std::size_t>(n));
          continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        close = true;  // EOF or a reset
        break;
      }
      const bool peer_gone = close;
      close = false;
      std::size_t nl;
      while (!close && (nl = c.in.find('\n')) != std::string::npos) {
        std::string line = c.in.substr(0, nl);
        c.in.erase(0, nl + 1);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        OnLine(c, line, &close);
      }
      if (!close && c.in.size() > kMaxLineBytes) {
        SendAll(c.fd, "ERROR line too long\n", 1000);
        close = true;
      }
      if (peer_gone || close) {
        if (c.accepted) Journal(c, RealtimeMs(), "disconnect");
        c.accepted = false;
        ::close(c.fd);
        c.fd = -1;
      }
    }
    conns.remove_if([](const Conn& c) { return c.fd < 0; });
  }
  const std::int64_t now = RealtimeMs();
  for (Conn& c : conns) {
    if (c.accepted) Journal(c, now, "shutdown");
    ::close(c.fd);
  }
}

// ---- client ----

namespace {

// Reads one line (without the newline) within `timeout_ms`; nullopt on EOF, error or
// timeout (*eof tells which).
std::optional<std::string> ReadLine(int fd, int timeout_ms, bool* eof) {
  std::string line;
  *eof = false;
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, timeout_ms);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return std::nullopt;
    char ch;
    const ssize_t n = ::recv(fd, &ch, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) *eof = true;
    if (n <= 0) return std::nullopt;
    if (ch == '\n') return line;
    line += ch;
    if (line.size() > kMaxLineBytes) return std::nullopt;
  }
}

// Sleeps until `at` on the monotonic clock.
void SleepUntil(const timespec& at) {
  while (::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, nullptr) == EINTR) {
  }
}

timespec PlusMs(timespec t, std::int64_t ms) {
  const std::int64_t ns = t.tv_nsec + (ms % 1000) * 1000000;
  t.tv_sec += static_cast<time_t>(ms / 1000 + ns / 1000000000);
  t.tv_nsec = static_cast<long>(ns % 1000000000);
  return t;
}

// The hold after ACCEPT: `hold_ms` long, with a WRITE every `write_every_ms` (on a
// fixed schedule from ACCEPT). False (out->detail set) when the exchange broke.
bool Hold(int fd, const WriteRequest& req, int io_timeout_ms, WriteResult* out) {
  timespec start{};
  ::clock_gettime(CLOCK_MONOTONIC, &start);
  const timespec end = PlusMs(start, req.hold_ms);
  for (std::int64_t k = 1; req.write_every_ms > 0; ++k) {
    const timespec at = PlusMs(start, k * req.write_every_ms);
    if (at.tv_sec > end.tv_sec || (at.tv_sec == end.tv_sec && at.tv_nsec >= end.tv_nsec)) break;
    SleepUntil(at);
    bool eof = false;
    std::optional<std::string> answer;
    if (!SendAll(fd, "WRITE\n", io_timeout_ms)) {
      out->detail = Errno("send WRITE");
      return false;
    }
    if (!(answer = ReadLine(fd, io_timeout_ms, &eof))) {
      out->detail = eof ? "the resource closed after WRITE" : "no answer to WRITE";
      return false;
    }
    ++out->writes;
    if (answer->rfind("REFUSED ", 0) == 0) {
      ++out->refused_writes;
      out->detail = answer->substr(8);
    } else if (*answer != "OK") {
      out->outcome = WriteOutcome::kProtocolError;
      out->detail = *answer;
      return false;
    }
  }
  SleepUntil(end);
  return true;
}

}  // namespace

WriteResult WriteOnce(const fs::path& socket, const WriteRequest& req, int io_timeout_ms) {
  WriteResult out;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string path = socket.string();
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    out.detail = path + ": not a usable socket path";
    return out;
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    out.detail = Errno("connect " + path);
    if (fd >= 0) ::close(fd);
    return out;
  }
  std::ostringstream begin;
  begin << "BEGIN " << req.job << ' ' << req.tick_unix << ' ' << req.fence << ' ' << req.replica
        << '\n';
  bool eof = false;
  std::optional<std::string> answer;
  if (!SendAll(fd, begin.str(), io_timeout_ms)) {
    out.detail = Errno("send BEGIN");
  } else if (!(answer = ReadLine(fd, io_timeout_ms, &eof))) {
    out.detail = eof ? "the resource closed before answering" : "no answer from the resource";
  } else if (answer->rfind("REJECT ", 0) == 0) {
    out.outcome = WriteOutcome::kRejected;
    out.detail = answer->substr(7);
  } else if (*answer != "ACCEPT") {
    out.outcome = WriteOutcome::kProtocolError;
    out.detail = *answer;
  } else if (Hold(fd, req, io_timeout_ms, &out)) {
    // The server closes once END is journaled: EOF is the acknowledgement.
    if (!SendAll(fd, "END\n", io_timeout_ms)) {
      out.detail = Errno("send END");
    } else if (ReadLine(fd, io_timeout_ms, &eof); !eof) {
      out.detail = "the resource did not close after END";
    } else {
      out.outcome = WriteOutcome::kAccepted;
    }
  }
  ::close(fd);
  return out;
}

}  // namespace tickd::nemesis
