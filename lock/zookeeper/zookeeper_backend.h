// The ZooKeeper backend: replicas anywhere share one ZooKeeper ensemble (3.5+; the
// Debian bookworm server is 3.8). Correctness-grade: every decision is one `multi`
// transaction replicated by the ensemble's quorum, fences are the job head's epoch
// and count (lock/backend.h: never repeat, survive restarts and a wiped dataDir), and
// a holder's lease dies with its session. The protocol (node
// layout, claim/renew/complete transactions, how the server's clock is read) is at the
// top of zookeeper_backend.cc.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "lock/backend.h"

namespace tickd::lock {

struct ZookeeperOptions {
  // zookeeper://host:port[,host:port…][/chroot]; port defaults to 2181. Every node
  // lives under <chroot>/tickd (and <chroot>/tickd-clients); the chroot is created.
  std::string url;
  // Every call (the first connect included) returns within this, with an Error when
  // the ensemble did not answer: fail closed.
  std::chrono::milliseconds op_timeout{2'000};
  // The session timeout asked for; the server clamps it into its
  // [minSessionTimeout, maxSessionTimeout] (by default 2..20 × tickTime). A holder
  // whose session expires loses every lease it holds. Keep it ≥ 1.5 × lock.lease so
  // that the lease, not the session, bounds a disconnected holder (see the .cc).
  std::chrono::milliseconds session_timeout{30'000};
  // Digest authentication (lock.username, lock.password_file / password_env): when
  // set, every session authenticates and every node tickd creates (the chroot's
  // missing folders included) carries ZOO_CREATOR_ALL_ACL, so clients without these
  // credentials can neither read, change nor delete them. The password is never
  // logged. No TLS: Debian's ZooKeeper C client is built without it.
  std::string username;
  std::string password;
  // SizeWarnings: tickd's znodes that the last Prune left, past which the servers'
  // heap is worth a look (every znode lives in it, ~500 bytes each; tests lower it).
  long znodes_warn = 2'000'000;
};

// Parses the URL, connects (waits for the session, ≤ op_timeout) and creates the
// chroot and the tickd folders. Errors name the URL. The Backend is thread-safe (one
// session; calls are serialized). After a session expiry, or once the connection has
// been lost for a whole session timeout (a server back without its data refuses the
// old session for good), it opens a new session on the next call; while disconnected
// calls fail at once and the client library reconnects in the background.
Result<std::unique_ptr<Backend>> NewZookeeperBackend(const ZookeeperOptions& options);

// "zookeeper://h1:2181,h2:2182/app" → {"h1:2181,h2:2182", "/app"}. Errors on another
// scheme, an empty host list, a bad port, credentials, or a malformed chroot.
struct ZookeeperEndpoint {
  std::string hosts;   // the connect string for zookeeper_init, without the chroot
  std::string chroot;  // "" or "/a/b"
};
Result<ZookeeperEndpoint> ParseZookeeperUrl(std::string_view url);

}  // namespace tickd::lock
