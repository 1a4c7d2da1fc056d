// The driver's side of the fault injectors (tests/nemesis/faults, part F): a proxy in
// front of the store, network namespaces, a fake clock. A thin adapter over part F's
// classes, so the cell code reads the same whatever their exact signatures.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tickd::nemesis {

// A TCP proxy on 127.0.0.1 (or inside the store-side namespace) to the store.
class StoreProxy {
 public:
  virtual ~StoreProxy() = default;
  virtual std::string address() const = 0;  // "HOST:PORT" replicas connect to
  virtual void Pass() = 0;
  virtual void Delay(int ms) = 0;
  virtual void Stall() = 0;
  virtual void DropReplies() = 0;
  virtual void Reset() = 0;
  // Evidence: bytes dropped and bytes forwarded each way so far.
  virtual std::uint64_t bytes_dropped() const = 0;
  virtual std::uint64_t bytes_forwarded() const = 0;
  // Bytes read while delaying or stalling so far: traffic the fault held up.
  virtual std::uint64_t bytes_held() const = 0;
};
// upstream: "127.0.0.1:PORT". Throws when it cannot listen.
std::unique_ptr<StoreProxy> MakeProxy(const std::string& upstream);

// One namespace per replica and one on the store side (root only).
class Partitions {
 public:
  virtual ~Partitions() = default;
  virtual std::vector<std::string> ExecPrefix(int replica) const = 0;
  virtual std::string store_address() const = 0;  // what replicas connect to
  enum class Direction { kBoth, kToStore, kFromStore };
  virtual void Partition(int replica, Direction direction) = 0;
  virtual void Heal(int replica) = 0;
  virtual std::uint64_t bytes_forwarded() const = 0;
};
// "" when namespaces can be made here; else why not.
std::string PartitionsUnavailable();
std::unique_ptr<Partitions> MakePartitions(int replicas, const std::string& upstream);

// A wall clock of its own for one replica (libfaketime through a control file).
class ReplicaClock {
 public:
  virtual ~ReplicaClock() = default;
  virtual std::vector<std::string> Env() const = 0;
  virtual void Step(double seconds) = 0;  // cumulative
  virtual void Drift(double rate) = 0;    // 1.0 = real speed
  virtual double offset() const = 0;      // fake − real, seconds
};
std::unique_ptr<ReplicaClock> MakeClock(const std::string& dir);

}  // namespace tickd::nemesis
