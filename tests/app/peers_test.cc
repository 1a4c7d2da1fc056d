// Peers: this replica's rank among the nodes the ledger shows claiming.
#include "app/peers.h"

#include <catch2/catch.hpp>
#include <map>
#include <string>

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

using Versions = std::map<std::string, std::string>;

TEST_CASE("the peers whose known tz database version differs from ours") {
  Peers peers("node-a");
  peers.Saw({"node-a", "node-b", "node-c", "node-d", "node-e"});
  peers.SawTzdata({{"node-a", "2025b"},
                   {"node-b", "2025b"},
                   {"node-c", "2024a"},
                   {"node-d", ""},  // an older tickd: not recorded
                   {"node-e", "unknown"}});
  CHECK(peers.TzdataDiffering("2025b") == Versions{{"node-c", "2024a"}});
  // Our own version unknown: nothing to compare with.
  CHECK(peers.TzdataDiffering("unknown").empty());
  CHECK(peers.TzdataDiffering("").empty());
  // Our own observations never count, even when they say otherwise.
  CHECK(peers.TzdataDiffering("2024a") == Versions{{"node-b", "2025b"}});
  // node-c was upgraded: its newest observation carries the new version.
  peers.Saw({"node-a", "node-b", "node-c"});
  peers.SawTzdata({{"node-c", "2025b"}});
  CHECK(peers.TzdataDiffering("2025b").empty());
}

TEST_CASE("a peer's tz database version is kept while it is a peer, and goes with it") {
  Peers peers("node-a");
  peers.Saw({"node-a", "node-b"});
  peers.SawTzdata({{"node-b", "2024a"}});
  // A node not among the peers is not taken in.
  peers.SawTzdata({{"node-x", "2020a"}});
  CHECK(peers.TzdataDiffering("2025b") == Versions{{"node-b", "2024a"}});
  for (std::uint64_t i = 1; i < Peers::kKeepReads; ++i) {
    peers.Saw({"node-a"});  // reads without node-b: it stays, and so does its version
    peers.SawTzdata({});
    CHECK(peers.TzdataDiffering("2025b") == Versions{{"node-b", "2024a"}});
  }
  peers.Saw({"node-a"});  // gone
  CHECK(peers.TzdataDiffering("2025b").empty());
}

}  // namespace
}  // namespace tickd::app
