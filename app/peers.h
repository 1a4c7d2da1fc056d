// The replicas that share this job file, as the ledger shows them, and this
// replica's rank among them: the scheduler sends its claims of one instant in the
// order of that rank (lock/claim_spread.h), so that replicas start on different
// jobs. Only an order: a wrong or stale rank costs time, never a claim.
//
// The skew watch reads the ledger's newest ticks every 500 ms (app/status_skew.h)
// and hands over every node it saw observing them. A node stays a peer while one of
// the last kKeepReads reads showed it, so one read taken in the middle of a burst,
// before a replica got to its observations, does not drop it; a replica that stops
// claiming leaves once its observations are no longer among the newest ticks.
//
// The same reads tell each peer's tz database version (app/tzdata.h): the one its
// newest observation carried. It is kept as long as the peer is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace tickd::app {

// Thread-safe.
class Peers {
 public:
  static constexpr std::uint64_t kKeepReads = 4;

  explicit Peers(std::string self) : self_(std::move(self)) {}

  // One read of the ledger: the nodes whose observations it showed (ours may be
  // among them). True when the peers changed (one came or left).
  bool Saw(const std::set<std::string>& nodes);

  struct Rank {
    std::size_t index = 0;  // this replica's place among the peers, in name order
    std::size_t count = 1;  // the peers, this replica included
  };
  Rank rank() const;

  // The same read's tz database versions: node → the version its newest observation
  // there carried ("" when none: an older tickd). Call after Saw with the same read.
  void SawTzdata(const std::map<std::string, std::string>& versions);
  // The peers (this replica excluded) whose version is known (KnownTzdata) and is
  // not `ours`, node → version; empty when `ours` is not known itself.
  std::map<std::string, std::string> TzdataDiffering(std::string_view ours) const;

  // The peers, this replica included, in name order.
  std::vector<std::string> names() const;

 private:
  std::vector<std::string> NamesLocked() const;  // REQUIRES: mu_ held

  const std::string self_;
  mutable std::mutex mu_;
  std::uint64_t reads_ = 0;
  std::map<std::string, std::uint64_t> last_read_;  // node → the read that last showed it
  std::map<std::string, std::string> tzdata_;       // node → its last version seen
};

}  // namespace tickd::app
