// The nodes a job-tick writes on ZooKeeper (docs/backends.md "ZooKeeper 3.8": the write
// set), the layout an older tickd left read by History and Prune, and blind claims (no
// read before the multi) on a head whose nodes went away. Looked at and changed with a
// raw C client (tests/zookeeper/raw_client.h); one server for the binary, a chroot per
// case.
#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "lock/zookeeper/zookeeper_backend.h"
#include "tests/support/claims.h"
#include "tests/zookeeper/raw_client.h"
#include "tests/zookeeper/zookeeper_server.h"

using namespace std::chrono_literals;
using namespace tickd::lock;
using tickd::testing::HeldOf;
using tickd::testing::MustClaim;
using tickd::testing::NowUnix;
using tickd::testing::RawClient;
using tickd::testing::ZookeeperServer;

namespace {

bool Available() {
  if (!ZookeeperServer::Available()) WARN("zookeeper or java not installed: skipped");
  return ZookeeperServer::Available() && ZookeeperServer::Shared().running();
}

std::unique_ptr<Backend> Open(const std::string& chroot) {
  ZookeeperOptions options;
  options.url = ZookeeperServer::Shared().url(chroot);
  auto backend = NewZookeeperBackend(options);
  if (!backend) FAIL(backend.error().ToString());
  return std::move(*backend);
}

ClaimRequest Req(const std::string& job, std::int64_t tick, const std::string& node,
                 const std::string& token) {
  ClaimRequest req = tickd::testing::Req(job, tick, node, token);
  req.forbid_overlap = false;
  req.observe = true;
  req.config_hash = "hash-" + node;
  req.node_wall = tickd::WallTime(std::chrono::milliseconds(tick * 1000 + 5));
  return req;
}

std::vector<std::string> Children(const RawClient& zk, const std::string& path) {
  String_vector list{};
  std::vector<std::string> out;
  if (zoo_get_children(zk.zh(), path.c_str(), 0, &list) != ZOK) return out;
  for (int i = 0; i < list.count; ++i) out.emplace_back(list.data[i]);
  deallocate_String_vector(&list);
  std::sort(out.begin(), out.end());
  return out;
}

std::string Data(const RawClient& zk, const std::string& path) {
  std::string buf(4096, '\0');
  int len = static_cast<int>(buf.size());
  Stat stat{};
  if (zoo_get(zk.zh(), path.c_str(), 0, buf.data(), &len, &stat) != ZOK || len < 0) return "";
  buf.resize(static_cast<std::size_t>(len));
  return buf;
}

void Create(const RawClient& zk, const std::string& path, const std::string& data) {
  REQUIRE(zoo_create(zk.zh(), path.c_str(), data.data(), static_cast<int>(data.size()),
                     &ZOO_OPEN_ACL_UNSAFE, 0, nullptr, 0) == ZOK);
}

// `path` and everything below it.
void DeleteTree(const RawClient& zk, const std::string& path) {
  for (const std::string& child : Children(zk, path)) DeleteTree(zk, path + "/" + child);
  REQUIRE(zoo_delete(zk.zh(), path.c_str(), -1) == ZOK);
}

// A case's store: its own chroot, and a raw client on the server.
struct Store {
  std::string chroot = ZookeeperServer::NextChroot();
  RawClient zk{""};
  std::string Job(const std::string& job) const { return chroot + "/tickd/" + job; }
};

std::map<std::string, Observation> ByNode(const TickHistory& h) {
  std::map<std::string, Observation> out;
  for (const Observation& o : h.observations) out[o.node] = o;
  return out;
}

}  // namespace

TEST_CASE(
    "zookeeper: a job-tick observed by three replicas writes one observation node per "
    "replica that did not win it, no folder, and the winner's inside its record",
    "[zookeeper]") {
  if (!Available()) return;
  const Store store;
  const RawClient& zk = store.zk;
  REQUIRE(zk.connected());
  std::vector<std::unique_ptr<Backend>> replicas;
  for (int r = 0; r < 3; ++r) replicas.push_back(Open(store.chroot));
  const std::int64_t t0 = NowUnix();
  // Two instants: the second claims go blind (the head and the clock as last seen).
  for (std::int64_t tick : {t0, t0 + 1}) {
    std::string winner;
    ClaimOutcome won;
    ClaimRequest won_req;
    for (int r = 0; r < 3; ++r) {
      const ClaimRequest req =
          Req("lean", tick, "node-" + std::to_string(r), "tok-" + std::to_string(tick + r));
      const ClaimOutcome out = MustClaim(*replicas[r], req);
      CHECK(out.observed);
      if (out.status == ClaimStatus::kWon) {
        winner = req.node;
        won = out;
        won_req = req;
      } else {
        CHECK(out.status == ClaimStatus::kLost);
      }
    }
    REQUIRE(!winner.empty());
    const std::string job = store.Job("lean");
    std::vector<std::string> expected;
    for (int r = 0; r < 3; ++r) {
      const std::string node = "node-" + std::to_string(r);
      if (node != winner) expected.push_back(std::to_string(tick) + "-" + node);
    }
    std::vector<std::string> observed;
    for (const std::string& name : Children(zk, job + "/o")) {
      if (name.rfind(std::to_string(tick), 0) == 0) observed.push_back(name);
    }
    CHECK(observed == expected);
    CHECK(Data(zk, job + "/t/" + std::to_string(tick)).find("obs_wall_ms=") != std::string::npos);
    const int holder = winner.back() - '0';
    REQUIRE(*replicas[holder]->Complete(HeldOf(won_req, won), Completion{"done", 0, 1ms}) ==
            CompleteStatus::kCompleted);
    const auto history = replicas[1]->History("lean", 1);
    REQUIRE(history);
    REQUIRE(history->size() == 1);
    const TickHistory& h = history->front();
    CHECK(h.tick_unix == tick);
    CHECK(h.winner == winner);
    CHECK(h.state == "done");
    auto by_node = ByNode(h);
    REQUIRE(by_node.size() == 3);
    CHECK(by_node[winner].outcome == "won");
    CHECK(by_node[winner].fence == won.fence);
    CHECK(by_node[winner].config_hash == "hash-" + winner);
    CHECK(by_node[winner].node_wall == won_req.node_wall);
    for (const auto& [node, o] : by_node) {
      if (node != winner) CHECK(o.outcome == "lost");
    }
  }
}

TEST_CASE(
    "zookeeper: History and Prune read the layout of an older tickd (an observation "
    "folder per tick, the winner's observation a node in it) beside the new one",
    "[zookeeper]") {
  if (!Available()) return;
  const Store store;
  const RawClient& zk = store.zk;
  REQUIRE(zk.connected());
  auto a = Open(store.chroot);
  const std::int64_t t0 = NowUnix() - 100;
  // The new layout: t0 + 1, won by node-a, seen lost by node-b.
  ClaimRequest req = Req("mixed", t0 + 1, "node-a", "tok-a");
  req.starting_deadline = std::nullopt;
  const ClaimOutcome won = MustClaim(*a, req);
  REQUIRE(won.status == ClaimStatus::kWon);
  auto b = Open(store.chroot);
  ClaimRequest lost = Req("mixed", t0 + 1, "node-b", "tok-b");
  lost.starting_deadline = std::nullopt;
  CHECK(MustClaim(*b, lost).status == ClaimStatus::kLost);
  // The older layout: t0, done, won by node-old; its observation and node-b's in o/<t0>/.
  const std::string job = store.Job("mixed");
  const std::string tick = std::to_string(t0);
  Create(zk, job + "/t/" + tick,
         "duration_ms=3\nexit=0\nfence=77\nhash=hash-old\nlease_ms=30000\nnode=node-old\n"
         "outcome=done\nowner=tok-old\nstate=done\n");
  Create(zk, job + "/o/" + tick, "");
  Create(zk, job + "/o/" + tick + "/node-old",
         "fence=77\nhash=hash-old\noutcome=won\nwall_ms=" + std::to_string(t0 * 1000) + "\n");
  Create(zk, job + "/o/" + tick + "/node-b",
         "fence=0\nhash=hash-node-b\noutcome=lost\nwall_ms=" + std::to_string(t0 * 1000 + 9) +
             "\n");

  const auto history = b->History("mixed", 10);
  REQUIRE(history);
  REQUIRE(history->size() == 2);
  const TickHistory& newer = history->at(0);
  CHECK(newer.tick_unix == t0 + 1);
  auto by_node = ByNode(newer);
  REQUIRE(by_node.size() == 2);
  CHECK(by_node["node-a"].outcome == "won");
  CHECK(by_node["node-a"].fence == won.fence);
  CHECK(by_node["node-b"].outcome == "lost");
  const TickHistory& older = history->at(1);
  CHECK(older.tick_unix == t0);
  CHECK(older.winner == "node-old");
  CHECK(older.fence == 77);
  by_node = ByNode(older);
  REQUIRE(by_node.size() == 2);
  CHECK(by_node["node-old"].outcome == "won");
  CHECK(by_node["node-b"].node_wall == tickd::WallTime(std::chrono::milliseconds(t0 * 1000 + 9)));
  // Every replica's skew watch reads History("", n): both layouts there too.
  const auto all = a->History("", 10);
  REQUIRE(all);
  CHECK(all->size() == 2);

  // Both layouts go with retention (t0 + 1 is running: its lease lives, it stays).
  const auto removed =
      b->Prune(tickd::WallTime(std::chrono::seconds(t0 + 2)));
  REQUIRE(removed);
  CHECK(*removed == 1);
  CHECK(Children(zk, job + "/t") == std::vector<std::string>{std::to_string(t0 + 1)});
  CHECK(Children(zk, job + "/o") == std::vector<std::string>{std::to_string(t0 + 1) + "-node-b"});
  REQUIRE(*a->Complete(HeldOf(req, won), Completion{"done", 0, 1ms}) ==
          CompleteStatus::kCompleted);
  CHECK(*b->Prune(tickd::WallTime(std::chrono::seconds(t0 + 2))) == 1);
  CHECK(Children(zk, job + "/t").empty());
  CHECK(Children(zk, job + "/o").empty());
}

TEST_CASE(
    "zookeeper: a blind claim on a head whose nodes were deleted writes nothing: "
    "store-reset, or superseded by the head another replica made since",
    "[zookeeper]") {
  if (!Available()) return;
  const Store store;
  const RawClient& zk = store.zk;
  REQUIRE(zk.connected());
  auto a = Open(store.chroot);
  const std::int64_t t0 = NowUnix();
  std::uint64_t last = 0;
  tickd::testing::MustWinHigher(*a, Req("gone", t0, "node-a", "tok-1"), last);
  const std::string job = store.Job("gone");

  // The job's nodes go (the store lost them, the session lives): the head a saw is gone.
  DeleteTree(zk, job);
  auto next = Req("gone", t0 + 1, "node-a", "tok-2");
  next.known_tick = t0;
  ClaimOutcome out = MustClaim(*a, next);
  CHECK(out.status == ClaimStatus::kStoreReset);
  CHECK(out.holder_tick_unix == 0);
  CHECK(Children(zk, job + "/t").empty());
  next.known_tick = 0;
  next.owner_token = "tok-3";
  tickd::testing::MustWinHigher(*a, next, last);

  // Gone again, and another replica's first claim makes a new head at the version a
  // saw (0: a created the head it saw). a's blind claim matches the version, but the
  // record of the head's tick that it checks is not there: nothing is written, it
  // reads, and the later tick supersedes.
  DeleteTree(zk, job);
  auto b = Open(store.chroot);
  tickd::testing::MustWinHigher(*b, Req("gone", t0 + 4, "node-b", "tok-b1"), last);
  auto late = Req("gone", t0 + 2, "node-a", "tok-4");
  late.known_tick = t0 + 1;
  out = MustClaim(*a, late);
  CHECK(out.status == ClaimStatus::kSuperseded);
  CHECK(out.holder_tick_unix == t0 + 4);
  CHECK(Children(zk, job + "/t") == std::vector<std::string>{std::to_string(t0 + 4)});
  // And a later tick is won above every fence so far.
  tickd::testing::MustWinHigher(*a, Req("gone", t0 + 6, "node-a", "tok-5"), last);
}

TEST_CASE(
    "zookeeper: a job's folders made by another replica are found by their `out`, and a job "
    "whose `t` and `o` folders were deleted under a living session gets them again",
    "[zookeeper]") {
  if (!Available()) return;
  Store store;
  auto a = Open(store.chroot);
  auto b = Open(store.chroot);
  const std::int64_t t = NowUnix();
  // a makes the folders with its claim; b finds them (its lost claim's observation
  // goes under them) and writes its own node there.
  REQUIRE(MustClaim(*a, Req("made", t, "node-a", "tok-a")).status == ClaimStatus::kWon);
  const ClaimOutcome lost = MustClaim(*b, Req("made", t, "node-b", "tok-b"));
  CHECK(lost.status == ClaimStatus::kLost);
  CHECK(lost.observed);
  CHECK(Children(store.zk, store.Job("made")) ==
        std::vector<std::string>{"head", "l", "o", "out", "t"});

  // Someone deletes the tick records and observations of the job (`out` stays): a's
  // next claim finds the folder missing, makes it again and wins.
  const ClaimOutcome first = MustClaim(*a, Req("made", t + 1, "node-a", "tok-a1"));
  REQUIRE(first.status == ClaimStatus::kWon);
  REQUIRE(*a->Complete(HeldOf(Req("made", t + 1, "node-a", "tok-a1"), first),
                       Completion{"done", 0, 1ms}) == CompleteStatus::kCompleted);
  DeleteTree(store.zk, store.Job("made") + "/t");
  DeleteTree(store.zk, store.Job("made") + "/o");
  const ClaimOutcome again = MustClaim(*a, Req("made", t + 2, "node-a", "tok-a2"));
  CHECK(again.status == ClaimStatus::kWon);
  CHECK(Children(store.zk, store.Job("made") + "/t") ==
        std::vector<std::string>{std::to_string(t + 2)});
  // b's observation of that tick finds the `o` folder made again too.
  const ClaimOutcome seen = MustClaim(*b, Req("made", t + 2, "node-b", "tok-b2"));
  CHECK(seen.status == ClaimStatus::kLost);
  CHECK(seen.observed);
}
