// Network partitions between tickd replicas and their lock store (root only).
//
// NetnsTopology makes one network namespace per replica, tickd-nem-<pid>-<n>-r<i>, and
// one on the store side, tickd-nem-<pid>-<n>-s (n counts the topologies this process
// made, so two never share a name), joined by a veth pair per replica:
//
//   replica i's namespace              store-side namespace
//   nem0 10.213.<i+1>.2/24  <-veth->  s<i+1> 10.213.<i+1>.1/24
//   route 10.213.0.1 via 10.213.<i+1>.1      lo 10.213.0.1/32 (kStoreAddress)
//
// Every address exists only inside these namespaces; nothing is added to the root
// namespace. The store itself runs in the root namespace on 127.0.0.1: ExposeToReplicas
// puts a FaultProxy listening on 10.213.0.1 inside the store-side namespace in front
// of it, so every replica reaches the store at the same address. Partition() drops the
// replica's packets with nftables rules in the store-side namespace (table inet
// tickd_nem_<pid>_<n>); Heal() removes them. A partition does not close connections, as a
// real one does not: packets just stop (TCP retransmits until the peer gives up).
//
// Teardown: the destructor stops the proxies and deletes the namespaces (their veths
// and nftables tables go with them). Names carry the creating process's pid, so
// parallel runs never collide, and CleanupStale() removes what a crashed run left.
//
// Thread-safety: one thread at a time per object (the driver's); static functions may
// be called from any thread.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "tests/nemesis/faults/proxy.h"

namespace tickd::nemesis {

class NetnsTopology {
 public:
  static constexpr const char* kStoreAddress = "10.213.0.1";
  static constexpr int kMaxReplicas = 200;
  enum class Direction {
    kBoth,       // nothing passes either way
    kToStore,    // the replica's packets to the store are dropped (its SYNs included)
    kFromStore,  // the store's packets to the replica are dropped: requests still
                 // arrive and are applied, replies (and SYN-ACKs) are lost
  };

  // Whether namespaces can be made here; if not, `why` says what is missing (not
  // root, no `ip` or `nft`, creating a namespace or a table failed). Probes once per
  // process with a throw-away namespace; later calls return the cached answer.
  static bool Available(std::string* why);

  // Creates the namespaces for `replicas` replicas (1..kMaxReplicas), after removing
  // what dead runs left (CleanupStale). Errors name the command that failed; whatever
  // was made is removed again.
  static Result<std::unique_ptr<NetnsTopology>> Create(int replicas);

  // Deletes every namespace whose name carries the pid of a process that no longer
  // exists (tickd-nem-<pid>-…). Returns how many were deleted.
  static int CleanupStale();

  ~NetnsTopology();
  NetnsTopology(const NetnsTopology&) = delete;
  NetnsTopology& operator=(const NetnsTopology&) = delete;

  int replicas() const { return static_cast<int>(replica_ns_.size()); }
  // REQUIRES: 0 <= i < replicas().
  const std::string& ReplicaNamespace(int i) const { return replica_ns_.at(i); }
  const std::string& StoreNamespace() const { return store_ns_; }
  // The argv prefix that runs a command inside replica i's namespace:
  // {"/usr/sbin/ip", "netns", "exec", "tickd-nem-<pid>-<n>-r<i>"}.
  std::vector<std::string> ExecPrefix(int i) const;

  // Starts (or returns the one already started) a FaultProxy in the store-side
  // namespace on kStoreAddress:<picked port> forwarding to 127.0.0.1:upstream_port of
  // the root namespace. Returns {kStoreAddress, port}: where every replica connects.
  // Errors: the proxy could not listen.
  Result<std::pair<std::string, int>> ExposeToReplicas(int upstream_port);
  // The proxy ExposeToReplicas started for `upstream_port`, or nullptr: its Mode
  // applies to every replica at once (a partition is per replica).
  FaultProxy* ExposedProxy(int upstream_port) const;

  // Replaces replica i's rules by those for `direction` (they do not add up:
  // Partition(i, kToStore) then Partition(i, kFromStore) leaves only kFromStore).
  // Takes effect atomically (one nft transaction) before returning.
  // REQUIRES: 0 <= i < replicas(). Errors: nft failed (the rules are unchanged).
  Result<void> Partition(int i, Direction direction);
  // Removes replica i's rules. Healing a replica that is not partitioned is a no-op.
  Result<void> Heal(int i);
  // Whether replica i is partitioned, and how.
  bool Partitioned(int i, Direction* direction = nullptr) const;

 private:
  NetnsTopology() = default;
  Result<void> ApplyRules();

  std::string prefix_;  // tickd-nem-<pid>
  std::string store_ns_;
  std::vector<std::string> replica_ns_;
  std::map<int, Direction> partitions_;                 // replica → direction
  std::map<int, std::unique_ptr<FaultProxy>> proxies_;  // upstream port → proxy
};

// "both", "to-store", "from-store".
std::string ToString(NetnsTopology::Direction direction);

}  // namespace tickd::nemesis
