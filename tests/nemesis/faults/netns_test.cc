// NetnsTopology (root only; skipped with a warning otherwise): a client in a replica's
// namespace reaches a root-namespace loopback server through the store-side proxy;
// Partition cuts it (both ways, to the store only, from the store only), Heal
// restores it; nothing is added to the root namespace; teardown and CleanupStale
// leave no namespace behind.
#include "tests/nemesis/faults/netns.h"

#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <memory>

#include "tests/nemesis/faults/test_sockets.h"

using namespace std::chrono_literals;
using tickd::nemesis::FaultProxy;
using tickd::nemesis::NetnsTopology;
using tickd::nemesis::testing::ConnectWithin;
using tickd::nemesis::testing::EchoServer;
using tickd::nemesis::testing::ReceiveFor;
using tickd::nemesis::testing::SendAll;
using Direction = NetnsTopology::Direction;

namespace {

bool Skip() {
  std::string why;
  if (NetnsTopology::Available(&why)) return false;
  WARN("skipped: " << why);
  return true;
}

std::string Output(const std::string& command) {
  std::string out;
  if (FILE* pipe = ::popen(command.c_str(), "r")) {
    char buf[512];
    while (std::fgets(buf, sizeof buf, pipe)) out += buf;
    ::pclose(pipe);
  }
  return out;
}

// A connection from replica i's namespace to the exposed store, or -1.
struct Link {
  Link(const NetnsTopology& topology, int i, int port, std::chrono::milliseconds timeout = 1s)
      : fd(ConnectWithin(NetnsTopology::kStoreAddress, port, timeout,
                         topology.ReplicaNamespace(i))) {}
  ~Link() {
    if (fd >= 0) ::close(fd);
  }
  bool Echoes(const std::string& bytes, std::chrono::milliseconds timeout = 1s) const {
    return fd >= 0 && SendAll(fd, bytes) && ReceiveFor(fd, bytes.size(), timeout) == bytes;
  }
  int fd;
};

}  // namespace

TEST_CASE("NetnsTopology: replicas reach a loopback server through the store side",
          "[nemesis][netns]") {
  if (Skip()) return;
  EchoServer echo;
  auto topology = NetnsTopology::Create(2);
  REQUIRE(topology.has_value());
  auto& t = **topology;
  auto exposed = t.ExposeToReplicas(echo.port());
  REQUIRE(exposed.has_value());
  CHECK(exposed->first == "10.213.0.1");
  const int port = exposed->second;
  CHECK(t.ExposeToReplicas(echo.port())->second == port);  // one proxy per upstream

  CHECK(Link(t, 0, port).Echoes("r0"));
  CHECK(Link(t, 1, port).Echoes("r1"));
  // Only the namespaces reach it: the root namespace has no route to 10.213.0.1.
  CHECK(ConnectWithin(NetnsTopology::kStoreAddress, port, 200ms) < 0);
  // A command run with the prefix is inside the replica's namespace.
  std::string prefix;
  for (const std::string& a : t.ExecPrefix(1)) prefix += a + " ";
  CHECK(Output(prefix + "ip -o -4 addr show dev nem0").find("10.213.2.2/24") != std::string::npos);
  // No address or link of the topology in the root namespace.
  CHECK(Output("ip -o addr").find("10.213.") == std::string::npos);
  CHECK(t.ExposedProxy(echo.port())->Stats().connections_accepted >= 2);
}

TEST_CASE("NetnsTopology: Partition cuts one replica, Heal restores it", "[nemesis][netns]") {
  if (Skip()) return;
  EchoServer echo;
  auto topology = NetnsTopology::Create(2);
  REQUIRE(topology.has_value());
  auto& t = **topology;
  const int port = t.ExposeToReplicas(echo.port())->second;
  Link before(t, 0, port);
  REQUIRE(before.Echoes("up"));

  REQUIRE(t.Partition(0, Direction::kBoth).has_value());
  CHECK(t.Partitioned(0));
  CHECK(!t.Partitioned(1));
  CHECK(Link(t, 0, port, 300ms).fd < 0);            // new connections time out
  CHECK(!before.Echoes("cut", 300ms));              // established ones go silent
  CHECK(Link(t, 1, port).Echoes("other replica"));  // the other replica is untouched

  REQUIRE(t.Heal(0).has_value());
  CHECK(!t.Partitioned(0));
  CHECK(Link(t, 0, port).Echoes("healed"));
  CHECK(t.Heal(0).has_value());  // healing twice is a no-op
}

// Replica 0 with a connection that worked, then partitioned one way.
struct OneWay {
  OneWay() : topology(NetnsTopology::Create(1)) {
    REQUIRE(topology.has_value());
    port = t().ExposeToReplicas(echo.port())->second;
    established = std::make_unique<Link>(t(), 0, port);
    REQUIRE(established->Echoes("x"));
  }
  NetnsTopology& t() { return **topology; }
  FaultProxy& proxy() { return *t().ExposedProxy(echo.port()); }

  EchoServer echo;
  tickd::Result<std::unique_ptr<NetnsTopology>> topology;
  int port = 0;
  std::unique_ptr<Link> established;
};

TEST_CASE("NetnsTopology: to-store drops the replica's packets before the proxy",
          "[nemesis][netns]") {
  if (Skip()) return;
  OneWay w;
  REQUIRE(w.t().Partition(0, Direction::kToStore).has_value());
  const auto before = w.proxy().Stats();
  CHECK(Link(w.t(), 0, w.port, 300ms).fd < 0);  // its SYN never arrives
  CHECK(!w.established->Echoes("lost request", 300ms));
  CHECK(w.proxy().Stats().connections_accepted == before.connections_accepted);
  // The request never arrived.
  CHECK(w.proxy().Stats().bytes_to_upstream == before.bytes_to_upstream);
  REQUIRE(w.t().Heal(0).has_value());
  CHECK(Link(w.t(), 0, w.port).Echoes("healed"));
}

TEST_CASE("NetnsTopology: from-store lets requests arrive and loses the replies",
          "[nemesis][netns]") {
  if (Skip()) return;
  OneWay w;
  REQUIRE(w.t().Partition(0, Direction::kFromStore).has_value());
  Direction direction = Direction::kBoth;
  CHECK((w.t().Partitioned(0, &direction) && direction == Direction::kFromStore));
  const auto before = w.proxy().Stats();
  CHECK(Link(w.t(), 0, w.port, 300ms).fd < 0);  // the SYN-ACK is dropped
  CHECK(!w.established->Echoes("applied", 300ms));
  // The request reached the store (it was applied); only the answer was lost.
  CHECK(w.proxy().Stats().bytes_to_upstream - before.bytes_to_upstream == 7);
  REQUIRE(w.t().Heal(0).has_value());
  CHECK(Link(w.t(), 0, w.port).Echoes("healed"));
}

TEST_CASE("NetnsTopology: teardown and CleanupStale leave no namespace", "[nemesis][netns]") {
  if (Skip()) return;
  std::string names;
  {
    auto topology = NetnsTopology::Create(2);
    REQUIRE(topology.has_value());
    names = (*topology)->StoreNamespace();
    CHECK(Output("ip netns list").find(names) != std::string::npos);
  }
  CHECK(Output("ip netns list").find(names) == std::string::npos);

  // A leftover of a run that died: a namespace named after a pid that is gone.
  const pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  ::waitpid(gone, nullptr, 0);
  const std::string leftover = "tickd-nem-" + std::to_string(gone) + "-0-s";
  REQUIRE(std::system(("ip netns add " + leftover).c_str()) == 0);
  CHECK(NetnsTopology::CleanupStale() >= 1);
  CHECK(Output("ip netns list").find(leftover) == std::string::npos);
  // Create cleans up too; its own namespaces are not stale while the process lives.
  REQUIRE(std::system(("ip netns add " + leftover).c_str()) == 0);
  auto live = NetnsTopology::Create(1);
  REQUIRE(live.has_value());
  CHECK(Output("ip netns list").find(leftover) == std::string::npos);
  NetnsTopology::CleanupStale();
  CHECK(Output("ip netns list").find((*live)->StoreNamespace()) != std::string::npos);
}

TEST_CASE("NetnsTopology: bad replica counts are refused", "[nemesis][netns]") {
  if (Skip()) return;
  CHECK(!NetnsTopology::Create(0).has_value());
  CHECK(!NetnsTopology::Create(NetnsTopology::kMaxReplicas + 1).has_value());
}
