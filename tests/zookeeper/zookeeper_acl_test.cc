// ZooKeeper digest authentication: with lock.username and a password, every node
// tickd creates (the chroot included) carries ZOO_CREATOR_ALL_ACL. Checked with a raw
// C client: without credentials, or with other ones, it can neither list, change,
// add to nor delete tickd's nodes; a replica with the same credentials shares the
// claims; one with a wrong password is refused at its first call.
#include <zookeeper/zookeeper.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "lock/zookeeper/zookeeper_backend.h"
#include "tests/support/claims.h"
#include "tests/zookeeper/raw_client.h"
#include "tests/zookeeper/zookeeper_server.h"

using namespace std::chrono_literals;
using namespace tickd::lock;
using tickd::testing::NowUnix;
using tickd::testing::HeldOf;
using tickd::testing::MustClaim;
using tickd::testing::RawClient;
using tickd::testing::Req;
using tickd::testing::ZookeeperServer;

namespace {

constexpr const char* kUser = "tickd";
constexpr const char* kPassword = "zk-Digest-pw-42";

bool Available() {
  if (!ZookeeperServer::Available()) WARN("zookeeper or java not installed: skipped");
  return ZookeeperServer::Available() && ZookeeperServer::Shared().running();
}

tickd::Result<std::unique_ptr<Backend>> OpenAs(const std::string& chroot, const std::string& user,
                                               const std::string& password) {
  ZookeeperOptions options;
  options.url = ZookeeperServer::Shared().url(chroot);
  options.username = user;
  options.password = password;
  options.op_timeout = 3s;
  return NewZookeeperBackend(options);
}

// Each of list, set, create below and delete of `node`, by `client`: all refused with
// ZNOAUTH.
void CheckLockedOut(const RawClient& client, const std::string& node) {
  REQUIRE(client.connected());
  String_vector children{};
  CHECK(zoo_get_children(client.zh(), node.c_str(), 0, &children) == ZNOAUTH);
  CHECK(zoo_set(client.zh(), node.c_str(), "x", 1, -1) == ZNOAUTH);
  const std::string child = node + "/intruder";
  CHECK(zoo_create(client.zh(), child.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, nullptr, 0) ==
        ZNOAUTH);
  CHECK(zoo_delete(client.zh(), node.c_str(), -1) == ZNOAUTH);
}

}  // namespace

TEST_CASE("zookeeper ACL: tickd's nodes are closed to clients without its credentials",
          "[zookeeper][auth]") {
  if (!Available()) return;
  const std::string chroot = ZookeeperServer::NextChroot() + "/app";
  auto a = OpenAs(chroot, kUser, kPassword);
  REQUIRE(a);
  const std::int64_t tick = NowUnix();
  const ClaimRequest req = Req("guarded", tick, "a", "tok-a");
  const ClaimOutcome won = MustClaim(**a, req);
  REQUIRE(won.status == ClaimStatus::kWon);

  // The ACL is the creator's identity, every permission.
  {
    const std::string identity = std::string(kUser) + ":" + kPassword;
    RawClient owner(identity);
    REQUIRE(owner.connected());
    for (const std::string& node : {chroot, chroot + "/tickd", chroot + "/tickd-clients"}) {
      ACL_vector acl{};
      Stat stat{};
      REQUIRE(zoo_get_acl(owner.zh(), node.c_str(), &acl, &stat) == ZOK);
      REQUIRE(acl.count == 1);
      CHECK(std::string(acl.data[0].id.scheme) == "digest");
      CHECK(std::string(acl.data[0].id.id).rfind(std::string(kUser) + ":", 0) == 0);
      CHECK(std::string(acl.data[0].id.id).find(kPassword) == std::string::npos);  // a hash
      CHECK(acl.data[0].perms == ZOO_PERM_ALL);
      deallocate_ACL_vector(&acl);
    }
  }

  RawClient anonymous("");
  CheckLockedOut(anonymous, chroot + "/tickd");
  CheckLockedOut(anonymous, chroot + "/tickd-clients");
  RawClient mallory("mallory:guess");
  CheckLockedOut(mallory, chroot + "/tickd");

  // The holder is untouched by all that.
  CHECK(*(*a)->Renew(HeldOf(req, won)) == RenewStatus::kRenewed);
}

TEST_CASE("zookeeper ACL: replicas with the same credentials share claims; a wrong password "
          "is refused",
          "[zookeeper][auth]") {
  if (!Available()) return;
  const std::string chroot = ZookeeperServer::NextChroot();
  auto a = OpenAs(chroot, kUser, kPassword);
  REQUIRE(a);
  auto b = OpenAs(chroot, kUser, kPassword);
  REQUIRE(b);
  const std::int64_t tick = NowUnix();
  const ClaimRequest req = Req("shared", tick, "a", "tok-a");
  const ClaimOutcome won = MustClaim(**a, req);
  REQUIRE(won.status == ClaimStatus::kWon);
  CHECK(MustClaim(**b, Req("shared", tick, "b", "tok-b")).status == ClaimStatus::kLost);
  CHECK(*(*a)->Complete(HeldOf(req, won), Completion{}) == CompleteStatus::kCompleted);

  // A digest is never refused by itself: the first call on tickd's nodes is.
  auto wrong = OpenAs(chroot, kUser, "not-the-password");
  if (wrong) {
    auto claim = (*wrong)->Claim(Req("shared", tick + 1, "w", "tok-w"));
    REQUIRE_FALSE(claim);
    CHECK(claim.error().ToString().find("not-the-password") == std::string::npos);
  } else {
    CHECK(wrong.error().ToString().find("not-the-password") == std::string::npos);
  }
}

TEST_CASE("zookeeper ACL: credentials in the URL are refused without being printed",
          "[zookeeper][auth]") {
  ZookeeperOptions options;
  options.url = "zookeeper://tickd:Url-Secret-2231@127.0.0.1:2181/app";
  auto refused = NewZookeeperBackend(options);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().ToString().find("lock.username") != std::string::npos);
  CHECK(refused.error().ToString().find("Url-Secret-2231") == std::string::npos);
}
