// Peers: this replica's rank among the nodes the ledger shows claiming.
#include "app/peers.h"

#include <catch2/catch.hpp>

namespace tickd::app {
namespace {

TEST_CASE("the rank is this replica's place among the peers seen, in name order") {
  Peers peers("node-b");
  CHECK(peers.rank().index == 0);  // nobody seen yet: alone
  CHECK(peers.rank().count == 1);
  CHECK(peers.Saw({"node-a", "node-c"}));  // our own observations not among them yet
  CHECK(peers.rank().index == 1);
  CHECK(peers.rank().count == 3);
  CHECK_FALSE(peers.Saw({"node-a", "node-b", "node-c"}));  // ours now too: no change
  CHECK(peers.rank().index == 1);
  CHECK(peers.rank().count == 3);
  CHECK(peers.names() == std::vector<std::string>{"node-a", "node-b", "node-c"});
}

TEST_CASE("a peer stays through a few reads without it, then leaves") {
  Peers peers("node-a");
  peers.Saw({"node-a", "node-b", "node-c"});
  for (std::uint64_t i = 1; i < Peers::kKeepReads; ++i) {
    // A read in the middle of a burst: node-c not yet.
    CHECK_FALSE(peers.Saw({"node-a", "node-b"}));
    CHECK(peers.rank().count == 3);
  }
  CHECK(peers.Saw({"node-a", "node-b"}));
  CHECK(peers.rank().count == 2);
  CHECK(peers.rank().index == 0);
}

}  // namespace
}  // namespace tickd::app
