// A TCP proxy that injects faults between tickd replicas and their lock store.
//
// FaultProxy listens on one address (optionally inside a network namespace) and
// forwards every accepted connection to one upstream host:port. What it does with the
// bytes is its Mode, which can change at any time:
//   kPass        forward both directions as they come;
//   kDelay{ms}   hold every chunk, in both directions, `ms` before forwarding it;
//   kStall       accept and keep connections, forward nothing, close nothing: bytes
//                read meanwhile (up to kMaxQueuedBytes per direction, then TCP pushes
//                back) are held and delivered once the mode forwards again;
//   kDropReplies forward client→upstream, read and discard upstream→client: the store
//                applies a request (e.g. a claim) whose answer the client never sees;
//   kBlackhole   read and discard both directions;
//   kReset       close every connection with a TCP reset (RST) now, and every new one
//                as soon as it is accepted, until the mode changes.
// Bytes already held (delayed or stalled) when the mode changes obey the new mode:
// kDropReplies/kBlackhole discard them, kPass delivers them at once, kDelay keeps
// the time each was stamped with when read.
// An end of stream (FIN) is passed on in kPass and kDelay only, after the bytes before
// it; a connection that fails on one side (error, reset) is closed on both.
//
// Thread-safety: every public method may be called from any thread. The proxy runs its
// own thread (poll); SetMode() returns once that thread has applied the mode, so no byte
// is forwarded under the old mode after SetMode() returns (bounded: 2 s).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "base/error.h"

namespace tickd::nemesis {

struct ProxyOptions {
  std::string listen_host = "127.0.0.1";  // an IPv4 address (0.0.0.0 = all)
  int listen_port = 0;                    // 0: the kernel picks one (see port())
  std::string upstream_host = "127.0.0.1";
  int upstream_port = 0;
  // "" = the caller's network namespace; else a name under /run/netns (`ip netns`):
  // the listening socket is created inside it, so only that namespace reaches it.
  // Upstream connections are always made from the caller's namespace.
  std::string listen_netns;
};

// What a caller needs to tell whether a fault took effect: counters since Start(),
// never reset.
struct ProxyStats {
  std::uint64_t connections_accepted = 0;
  std::uint64_t connections_open = 0;     // now
  std::uint64_t connections_reset = 0;    // closed by kReset
  std::uint64_t connections_stalled = 0;  // had bytes held by kStall
  std::uint64_t upstream_connect_failures = 0;
  std::uint64_t bytes_to_upstream = 0;          // written to upstream
  std::uint64_t bytes_to_client = 0;            // written to clients
  std::uint64_t bytes_dropped_to_upstream = 0;  // from clients, discarded
  std::uint64_t bytes_dropped_to_client = 0;    // from upstream, discarded
  std::uint64_t bytes_delayed = 0;              // read while kDelay (held ≥ ms)
  std::uint64_t bytes_stalled = 0;              // read while kStall (held)

  std::uint64_t bytes_dropped() const {
    return bytes_dropped_to_upstream + bytes_dropped_to_client;
  }
  std::uint64_t bytes_forwarded() const { return bytes_to_upstream + bytes_to_client; }
};

class FaultProxy {
 public:
  enum Kind { kPass, kDelay, kStall, kDropReplies, kBlackhole, kReset };
  struct Mode {
    Mode(Kind kind_in = kPass, std::chrono::milliseconds delay_in = {})  // NOLINT: implicit
        : kind(kind_in), delay(delay_in) {}
    Kind kind;
    std::chrono::milliseconds delay;  // kDelay only
  };
  static constexpr std::size_t kMaxQueuedBytes = 256 * 1024;  // per direction, per connection

  // Listens and starts forwarding in kPass. Errors: the namespace cannot be entered,
  // the address cannot be bound, no thread. Upstream need not be up yet: a connection
  // that cannot reach it is closed and counted (upstream_connect_failures).
  static Result<std::unique_ptr<FaultProxy>> Start(const ProxyOptions& options);

  // Stops the thread and closes every socket.
  ~FaultProxy();
  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;

  const std::string& host() const;  // where clients connect (the listen host)
  int port() const;                 // the bound port (the picked one for port 0)

  void SetMode(Mode mode);
  Mode mode() const;
  ProxyStats Stats() const;

 private:
  struct Impl;
  explicit FaultProxy(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// "pass", "delay(200ms)", "stall", "drop-replies", "blackhole", "reset".
std::string ToString(const FaultProxy::Mode& mode);

}  // namespace tickd::nemesis
