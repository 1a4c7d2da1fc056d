#include "tests/nemesis/driver/sentinel.h"

#include <chrono>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "tests/redis/redis_sentinel.h"

namespace tickd::nemesis {

namespace {

using testing::RedisSentinelSet;

// The set, constructed before the fixture that refers to it (base-from-member).
struct OwnedSet {
  testing::RedisSentinelSet set;
};

class Fixture final : private OwnedSet, public SentinelFixture {
 public:
  // ?wait=1: a claim waits for one of the two replicas, so the promoted master, left
  // with one while the old one hangs, still takes claims (with wait=2 none would run
  // until the old master is back in sync).
  Fixture() : SentinelFixture(OwnedSet::set, 1) {
    if (!set_.running()) throw std::runtime_error("the Redis Sentinel set did not come up");
  }

  bool FailOver(double hold_s, std::string* evidence) override {
    const auto began = std::chrono::steady_clock::now();
    const int old_port = set_.MasterPort();
    const std::size_t old = set_.ServerOn(old_port);
    if (old >= set_.servers()) {
      *evidence = "the sentinels name no master";
      return false;
    }
    set_.server(old).Pause();
    std::size_t now = set_.servers();
    const auto until = began + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < until) {
      const std::size_t i = set_.ServerOn(set_.MasterPort());
      if (i != old && i < set_.servers() && set_.Role(i) == "master") {
        now = i;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    const double promoted_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    std::this_thread::sleep_until(began +
                                  std::chrono::milliseconds(static_cast<long long>(hold_s * 1000)));
    set_.server(old).Resume();
    std::ostringstream out;
    out << "master :" << old_port << " stopped; ";
    if (now < set_.servers()) {
      out << "the sentinels promoted :" << set_.server(now).port() << " after " << promoted_s
          << " s";
    } else {
      out << "no other master in 20 s";
    }
    *evidence = out.str();
    return now < set_.servers();
  }
};

}  // namespace

bool SentinelFixture::Available() { return RedisSentinelSet::Available(); }

std::unique_ptr<SentinelFixture> SentinelFixture::Make() { return std::make_unique<Fixture>(); }

}  // namespace tickd::nemesis
