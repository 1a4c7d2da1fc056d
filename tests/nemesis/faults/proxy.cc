// The proxy's thread: one poll loop over the listening socket, a wake-up eventfd and
// both sockets of every connection. Each connection has two directions; bytes read
// from one side become chunks queued for the other, stamped with the time they may be
// written (now, or now + delay). The mode is applied twice: when bytes are read (drop
// modes discard them, kStall holds them) and when chunks are due to be written (so
// bytes held before a mode change obey the new mode). The loop wakes at least every
// kTick to write chunks that came due.
#include "tests/nemesis/faults/proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <list>
#include <mutex>
#include <thread>
#include <vector>

#include "tests/nemesis/faults/in_netns.h"

namespace tickd::nemesis {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kTick = std::chrono::milliseconds(20);
constexpr auto kSetModeWait = std::chrono::seconds(2);

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

// Closes with a TCP reset rather than a FIN: what a dropped connection looks like.
void CloseWithReset(int fd) {
  linger lg{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
  ::close(fd);
}

bool ParseIpv4(const std::string& host, int port, sockaddr_in* addr) {
  *addr = {};
  addr->sin_family = AF_INET;
  addr->sin_port = htons(static_cast<std::uint16_t>(port));
  return ::inet_pton(AF_INET, host.c_str(), &addr->sin_addr) == 1;
}

struct Chunk {
  std::vector<char> bytes;
  std::size_t offset = 0;
  Clock::time_point due;
};

// One side of a connection: its socket, what is queued to be written to it, and
// whether it has sent its end of stream.
struct Side {
  int fd = -1;
  std::deque<Chunk> out;
  std::size_t queued = 0;  // bytes in `out` not yet written
  bool read_eof = false;   // this side sent FIN
  bool shut_wr = false;    // we passed the other side's FIN on to this side
};

struct Conn {
  Side client;
  Side upstream;
  bool connecting = true;  // upstream connect() in progress
  bool counted_stall = false;
  bool dead = false;
};

}  // namespace

struct FaultProxy::Impl {
  ProxyOptions options;
  int listen_fd = -1;
  int wake_fd = -1;
  int port = 0;
  sockaddr_in upstream{};

  mutable std::mutex mu;
  std::condition_variable applied_cv;
  Mode mode;                     // guarded by mu
  std::uint64_t generation = 0;  // guarded by mu: bumped by SetMode
  std::uint64_t applied = 0;     // guarded by mu: the loop has applied this generation
  ProxyStats stats;              // guarded by mu
  std::atomic<bool> stop{false};

  std::list<Conn> conns;  // the loop's thread only
  std::thread thread;

  ~Impl() {
    stop = true;
    Wake();
    if (thread.joinable()) thread.join();
    for (Conn& c : conns) CloseConn(c, false);
    if (listen_fd >= 0) ::close(listen_fd);
    if (wake_fd >= 0) ::close(wake_fd);
  }

  void Wake() const {
    const std::uint64_t one = 1;
    if (wake_fd >= 0) (void)!::write(wake_fd, &one, sizeof one);
  }

  template <typename F>
  void Count(F f) {
    std::lock_guard<std::mutex> lock(mu);
    f(stats);
  }

  // Closing and counting happen under one lock, as sending and counting do: a client
  // that saw the effect and then reads Stats() sees it counted.
  void CloseConn(Conn& c, bool reset, bool by_kreset = false) {
    if (c.dead) return;
    c.dead = true;
    Count([&](ProxyStats& st) {
      for (Side* s : {&c.client, &c.upstream}) {
        if (s->fd < 0) continue;
        reset ? CloseWithReset(s->fd) : (void)::close(s->fd);
        s->fd = -1;
      }
      --st.connections_open;
      if (by_kreset) ++st.connections_reset;
    });
  }

  void Accept(const Mode& m) {
    for (int i = 0; i < 64; ++i) {
      const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;
      if (m.kind == kReset) {
        Count([&](ProxyStats& st) {
          ++st.connections_accepted;
          CloseWithReset(fd);
          ++st.connections_reset;
        });
        continue;
      }
      const int up = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (up < 0 ||
          (::connect(up, reinterpret_cast<const sockaddr*>(&upstream), sizeof upstream) != 0 &&
           errno != EINPROGRESS)) {
        if (up >= 0) ::close(up);
        Count([&](ProxyStats& st) {
          ++st.connections_accepted;
          CloseWithReset(fd);
          ++st.upstream_connect_failures;
        });
        continue;
      }
      Conn& c = conns.emplace_back();
      c.client.fd = fd;
      c.upstream.fd = up;
      Count([](ProxyStats& st) {
        ++st.connections_accepted;
        ++st.connections_open;
      });
    }
  }

  // Bytes read from `from`, to be written to `to` (to_upstream: client → upstream).
  void ReadSide(Conn& c, Side& from, Side& to, bool to_upstream, const Mode& m) {
    char buf[16384];
    const ssize_t n = ::read(from.fd, buf, sizeof buf);
    if (n == 0) {
      from.read_eof = true;
      return;
    }
    if (n < 0) {
      if (errno != EAGAIN && errno != EINTR) CloseConn(c, true);
      return;
    }
    const auto bytes = static_cast<std::uint64_t>(n);
    if (m.kind == kBlackhole || (m.kind == kDropReplies && !to_upstream)) {
      Count([&](ProxyStats& st) {
        (to_upstream ? st.bytes_dropped_to_upstream : st.bytes_dropped_to_client) += bytes;
      });
      return;
    }
    const bool first_stall = m.kind == kStall && !c.counted_stall;
    if (m.kind == kStall) c.counted_stall = true;
    Count([&](ProxyStats& st) {
      if (m.kind == kDelay) st.bytes_delayed += bytes;
      if (m.kind == kStall) st.bytes_stalled += bytes;
      if (first_stall) ++st.connections_stalled;
    });
    Chunk chunk;
    chunk.bytes.assign(buf, buf + n);
    chunk.due = Clock::now() + (m.kind == kDelay ? m.delay : std::chrono::milliseconds(0));
    to.queued += bytes;
    to.out.push_back(std::move(chunk));
  }

  // Writes what is due to `to` under mode `m`; passes a FIN on once all is written.
  void WriteSide(Conn& c, Side& to, const Side& from, bool to_upstream, const Mode& m,
                 Clock::time_point now) {
    if (m.kind == kStall) return;
    if (m.kind == kBlackhole || (m.kind == kDropReplies && !to_upstream)) {
      const std::uint64_t dropped = to.queued;
      to.out.clear();
      to.queued = 0;
      if (dropped > 0) {
        Count([&](ProxyStats& st) {
          (to_upstream ? st.bytes_dropped_to_upstream : st.bytes_dropped_to_client) += dropped;
        });
      }
      return;
    }
    while (!to.out.empty() && Due(to.out.front(), m, now)) {
      Chunk& chunk = to.out.front();
      ssize_t n = 0;
      int send_errno = 0;
      Count([&](ProxyStats& st) {
        n = ::send(to.fd, chunk.bytes.data() + chunk.offset, chunk.bytes.size() - chunk.offset,
                   MSG_NOSIGNAL);
        send_errno = errno;
        if (n > 0) (to_upstream ? st.bytes_to_upstream : st.bytes_to_client) += n;
      });
      if (n < 0) {
        if (send_errno != EAGAIN && send_errno != EINTR) CloseConn(c, true);
        return;
      }
      const auto bytes = static_cast<std::uint64_t>(n);
      to.queued -= bytes;
      chunk.offset += bytes;
      if (chunk.offset < chunk.bytes.size()) return;  // the socket is full
      to.out.pop_front();
    }
    if (to.out.empty() && from.read_eof && !to.shut_wr && (m.kind == kPass || m.kind == kDelay)) {
      ::shutdown(to.fd, SHUT_WR);
      to.shut_wr = true;
    }
  }

  // Only kDelay holds a chunk until its time; kPass delivers held ones at once.
  static bool Due(const Chunk& chunk, const Mode& m, Clock::time_point now) {
    return m.kind != kDelay || chunk.due <= now;
  }

  static int Polled(const Side& s) { return s.read_eof && s.shut_wr ? -1 : s.fd; }

  // Whether `to` has a chunk to write now under `m`, and when the next comes due.
  static bool WantsWrite(const Side& to, bool to_upstream, const Mode& m, Clock::time_point now,
                         Clock::time_point* next_due) {
    if (m.kind == kStall) return false;
    if (m.kind == kBlackhole || (m.kind == kDropReplies && !to_upstream)) return false;
    if (to.out.empty()) return false;
    if (Due(to.out.front(), m, now)) return true;
    *next_due = std::min(*next_due, to.out.front().due);
    return false;
  }

  void Loop() {
    std::vector<pollfd> fds;
    std::vector<Conn*> owners;  // fds[i] belongs to owners[i] (nullptr: listen/wake)
    while (!stop) {
      Mode m;
      bool changed = false;
      std::uint64_t generation_seen = 0;
      {
        std::lock_guard<std::mutex> lock(mu);
        m = mode;
        generation_seen = generation;
        changed = applied != generation;
      }
      if (changed) {
        if (m.kind == kReset) {
          for (Conn& c : conns) CloseConn(c, true, /*by_kreset=*/true);
        }
        std::lock_guard<std::mutex> lock(mu);
        applied = generation_seen;
        applied_cv.notify_all();
      }
      conns.remove_if([](const Conn& c) { return c.dead; });

      const Clock::time_point now = Clock::now();
      Clock::time_point next_due = now + kTick;
      fds.clear();
      owners.clear();
      fds.push_back({wake_fd, POLLIN, 0});
      fds.push_back({listen_fd, POLLIN, 0});
      owners.push_back(nullptr);
      owners.push_back(nullptr);
      for (Conn& c : conns) {
        short client_events = 0;
        short upstream_events = 0;
        if (!c.client.read_eof && c.upstream.queued < kMaxQueuedBytes) client_events |= POLLIN;
        if (c.connecting) {
          upstream_events |= POLLOUT;
        } else {
          if (!c.upstream.read_eof && c.client.queued < kMaxQueuedBytes) upstream_events |= POLLIN;
          if (WantsWrite(c.upstream, true, m, now, &next_due)) upstream_events |= POLLOUT;
          if (WantsWrite(c.client, false, m, now, &next_due)) client_events |= POLLOUT;
        }
        // A side that has sent and been sent its end of stream reports POLLHUP on
        // every poll: leave it out (a negative fd) until the other side finishes.
        fds.push_back({Polled(c.client), client_events, 0});
        fds.push_back({Polled(c.upstream), upstream_events, 0});
        owners.push_back(&c);
        owners.push_back(&c);
      }
      const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next_due - now);
      const int rc =
          ::poll(fds.data(), fds.size(), static_cast<int>(std::max<std::int64_t>(1, wait.count())));
      if (rc < 0 && errno != EINTR) break;
      if (fds[0].revents & POLLIN) {
        std::uint64_t drained = 0;
        (void)!::read(wake_fd, &drained, sizeof drained);
        continue;  // re-read the mode before touching any byte
      }
      if (fds[1].revents & POLLIN) Accept(m);
      const Clock::time_point after = Clock::now();
      for (std::size_t i = 2; i + 1 < fds.size(); i += 2) {
        Conn& c = *owners[i];
        const pollfd& cl = fds[i];
        const pollfd& up = fds[i + 1];
        if (c.connecting && up.revents) {
          int err = 0;
          socklen_t len = sizeof err;
          ::getsockopt(c.upstream.fd, SOL_SOCKET, SO_ERROR, &err, &len);
          if (err != 0) {
            Count([](ProxyStats& st) { ++st.upstream_connect_failures; });
            CloseConn(c, true);
            continue;
          }
          c.connecting = false;
        }
        if (!c.dead && (cl.revents & (POLLIN | POLLHUP | POLLERR)))
          ReadSide(c, c.client, c.upstream, true, m);
        if (!c.dead && !c.connecting && (up.revents & (POLLIN | POLLHUP | POLLERR)))
          ReadSide(c, c.upstream, c.client, false, m);
        if (!c.dead && !c.connecting) {
          WriteSide(c, c.upstream, c.client, true, m, after);
          if (!c.dead) WriteSide(c, c.client, c.upstream, false, m, after);
        }
        if (!c.dead && c.client.shut_wr && c.upstream.shut_wr) CloseConn(c, false);
      }
    }
  }
};

Result<std::unique_ptr<FaultProxy>> FaultProxy::Start(const ProxyOptions& options) {
  const std::string context = "proxy " + options.listen_host + ":" +
                              std::to_string(options.listen_port) + " -> " + options.upstream_host +
                              ":" + std::to_string(options.upstream_port);
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  if (!ParseIpv4(options.upstream_host, options.upstream_port, &impl->upstream))
    return MakeError(context, "upstream is not an IPv4 address");
  sockaddr_in listen_addr{};
  if (!ParseIpv4(options.listen_host, options.listen_port, &listen_addr))
    return MakeError(context, "listen host is not an IPv4 address");

  std::string error;
  auto made = RunInNetns(options.listen_netns, [&] {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      error = Errno("socket");
      return;
    }
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in bound{};
    socklen_t len = sizeof bound;
    if (::bind(fd, reinterpret_cast<const sockaddr*>(&listen_addr), sizeof listen_addr) != 0 ||
        ::listen(fd, 128) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
      error = Errno("bind/listen");
      ::close(fd);
      return;
    }
    impl->listen_fd = fd;
    impl->port = ntohs(bound.sin_port);
  });
  if (!made) return MakeError(context, made.error().ToString());
  if (!error.empty()) return MakeError(context, error);

  impl->wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (impl->wake_fd < 0) return MakeError(context, Errno("eventfd"));
  try {
    impl->thread = std::thread([raw = impl.get()] { raw->Loop(); });
  } catch (const std::system_error& e) {
    return MakeError(context, std::string("thread: ") + e.what());
  }
  return std::unique_ptr<FaultProxy>(new FaultProxy(std::move(impl)));
}

FaultProxy::FaultProxy(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
FaultProxy::~FaultProxy() = default;

const std::string& FaultProxy::host() const { return impl_->options.listen_host; }
int FaultProxy::port() const { return impl_->port; }

void FaultProxy::SetMode(Mode mode) {
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->mode = mode;
  const std::uint64_t wanted = ++impl_->generation;
  impl_->Wake();
  impl_->applied_cv.wait_for(lock, kSetModeWait, [&] { return impl_->applied >= wanted; });
}

FaultProxy::Mode FaultProxy::mode() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->mode;
}

ProxyStats FaultProxy::Stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->stats;
}

std::string ToString(const FaultProxy::Mode& mode) {
  switch (mode.kind) {
    case FaultProxy::kPass:
      return "pass";
    case FaultProxy::kDelay:
      return "delay(" + std::to_string(mode.delay.count()) + "ms)";
    case FaultProxy::kStall:
      return "stall";
    case FaultProxy::kDropReplies:
      return "drop-replies";
    case FaultProxy::kBlackhole:
      return "blackhole";
    case FaultProxy::kReset:
      return "reset";
  }
  return "?";
}

}  // namespace tickd::nemesis
