// A tickd store: the shared place (SQLite file, Redis, etcd, PostgreSQL, ZooKeeper)
// where replicas race to claim ticks, as the daemon's `lock:` section names it
// (docs/design.md §4, docs/backends.md). A library program and `tickd run` daemons
// that open the same store and name the same job take turns on its ticks: each
// tick runs once across all of them.
//
// Also Redisson-style ad-hoc locks: Store::try_lock(key, lease) returns a guard that
// holds the lock, renews it in the background and releases it when destroyed.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "tickd/expected.h"
#include "tickd/export.h"

namespace tickd {

struct StoreOptions {
  // Every call to the store answers within this, or fails (the claim is then not
  // run: fail closed).
  std::chrono::milliseconds op_timeout{2'000};
  // How long finished ticks and lock acquisitions are remembered (lock.retention).
  std::chrono::milliseconds retention{std::chrono::hours(24 * 7)};
  // Network stores: a user and password (a password in the URL wins over this one).
  std::string username;
  std::string password;
  // TLS (etcd, PostgreSQL): on when `tls` is set or a file is given; the CA file
  // empty: the system's CAs. PEM files.
  bool tls = false;
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
};

class Store;

// A held lock (Store::try_lock). Movable, not copyable. While it lives, a thread
// renews the lease every lease/3 and another watches its deadline; the lock is released (its
// acquisition recorded as done in the store) when the guard is destroyed or release() is called.
// Thread-safe: fence(), key(), lost() and held() may be called from any thread.
// A moved-from guard holds nothing: held() is false, release() does nothing, and the
// other accessors must not be called.
class TICKD_API LockGuard {
 public:
  LockGuard(LockGuard&&) noexcept;
  LockGuard& operator=(LockGuard&&) noexcept;  // releases the lock held before
  ~LockGuard();                                // release()
  LockGuard(const LockGuard&) = delete;
  LockGuard& operator=(const LockGuard&) = delete;

  // The key given to try_lock.
  const std::string& key() const;
  // Strictly greater than the fence of every earlier acquisition of this key (and of
  // every claim of the job it maps to): pass it to the resource the lock protects so
  // that a holder which lost its lease is refused there.
  std::uint64_t fence() const;
  // Fires when the lease is lost: a renewal was refused (another holder took the key
  // after the lease expired), or no renewal was confirmed by lease/5 before the
  // lease's validity ends (lease − 1 % − 2 ms after the last confirmed renewal was
  // sent; a renewal that hangs never delays it). The critical section should stop at
  // once: it has lease/5 before someone else may hold the key.
  std::stop_token lost() const;
  // False once the lease is lost or the lock released.
  bool held() const;
  // Stops the renewals and records the acquisition as done in the store, so the key
  // can be acquired again at once. Idempotent. A store that does not answer leaves
  // the key held until the lease expires (it is never left held longer).
  void release();

 private:
  friend class Store;
  struct Impl;
  explicit LockGuard(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// What Store::try_lock found: exactly one of three outcomes.
class TICKD_API LockAttempt {
 public:
  enum class Status {
    kAcquired,  // guard() holds the lock
    kHeld,      // another holder has the key now (holder() names its node)
    kFailed,    // the store did not answer or failed (error()); nothing is held
  };

  Status status() const { return status_; }
  bool acquired() const { return status_ == Status::kAcquired; }
  explicit operator bool() const { return acquired(); }
  // REQUIRES: acquired(); throws std::logic_error otherwise. Move the guard out to
  // keep the lock beyond this object: `LockGuard g = std::move(attempt.guard());`.
  LockGuard& guard();
  // kHeld: the node that holds the key, when the store knows it ("" otherwise).
  const std::string& holder() const { return holder_; }
  // kFailed: what went wrong.
  const StoreError& error() const { return error_; }

 private:
  friend class Store;
  Status status_ = Status::kFailed;
  std::optional<LockGuard> guard_;
  std::string holder_;
  StoreError error_;
};

// An open store. A handle: copies share one connection. Thread-safe.
class TICKD_API Store {
 public:
  // Opens the store named by `url`, the same URLs as the job file's `lock.url`:
  //   sqlite:///var/lib/app/tickd.db   (sqlite://./x.db: relative to the working dir)
  //   redis://[user:pass@]host:6379/0, redis-sentinel://…
  //   etcd://host:2379, postgres://user@host/db, zookeeper://host:2181/chroot
  //   memory://   (tests: this process only, and each open() is a store of its own;
  //                copies of the returned Store share it)
  // A StoreError when the scheme is unknown or not built in, or the store cannot be
  // reached or initialized now (no retries: the caller decides).
  static Expected<Store> open(const std::string& url, const StoreOptions& options = {});

  // The backend's name: "sqlite", "redis", "etcd", "postgres", "zookeeper", "memory".
  std::string_view backend() const;
  // Things the operator should know (no persistence, a remote file system, …).
  std::vector<std::string> warnings() const;

  // Tries once, without waiting, to take the lock `key` for `lease` (renewed by the
  // returned guard until it is released). `node` names this holder in the store and
  // to other holders ("": <hostname>-<pid>).
  // Outcomes: kAcquired with a guard; kHeld while another guard (in any process on
  // this store) holds it with a live lease; kFailed when the store did not answer.
  // REQUIRES (else std::invalid_argument): key matches [a-z0-9._-]{1,58}; lease at
  // least 100 ms.
  // Keys live beside job names: try_lock("x") claims ticks of the job "lock.x" in the
  // store, so daemons, `tickd status` and `tickd locks` see them as that job
  // (docs/design.md §1 "Locks").
  LockAttempt try_lock(std::string_view key, std::chrono::milliseconds lease,
                       std::string_view node = {});

  struct Impl;  // the library's own (lib/store_impl.h)
  explicit Store(std::shared_ptr<Impl> impl);
  const std::shared_ptr<Impl>& impl() const { return impl_; }

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace tickd
