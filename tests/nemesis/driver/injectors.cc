#include "tests/nemesis/driver/injectors.h"

#include <filesystem>
#include <stdexcept>

// Each injector of part F is used once its header is in the tree; until then the
// driver says so (the cells that need it end as errors, never as passed).
#if defined(TICKD_NEMESIS_HAVE_FAULTS) && __has_include("tests/nemesis/faults/proxy.h")
#define NEMESIS_PROXY 1
#include "tests/nemesis/faults/proxy.h"
#endif
#if defined(TICKD_NEMESIS_HAVE_FAULTS) && __has_include("tests/nemesis/faults/netns.h")
#define NEMESIS_NETNS 1
#include "tests/nemesis/faults/netns.h"
#endif
#if defined(TICKD_NEMESIS_HAVE_FAULTS) && __has_include("tests/nemesis/faults/fake_clock.h")
#define NEMESIS_CLOCK 1
#include "tests/nemesis/faults/fake_clock.h"
#endif

namespace tickd::nemesis {

namespace {

[[maybe_unused]] [[noreturn]] void Missing(const std::string& what) {
  throw std::runtime_error(what + " (tests/nemesis/faults) is not built");
}

// "HOST:PORT" → its parts; throws on anything else.
[[maybe_unused]] std::pair<std::string, int> HostPort(const std::string& address) {
  const std::size_t colon = address.rfind(':');
  if (colon == std::string::npos) throw std::runtime_error("not host:port: " + address);
  return {address.substr(0, colon), std::stoi(address.substr(colon + 1))};
}

#ifdef NEMESIS_PROXY
class Proxy final : public StoreProxy {
 public:
  Proxy(const std::string& upstream, const std::string& netns) {
    ProxyOptions options;
    std::tie(options.upstream_host, options.upstream_port) = HostPort(upstream);
    options.listen_netns = netns;
    if (!netns.empty()) options.listen_host = "0.0.0.0";
    auto made = FaultProxy::Start(options);
    if (!made) throw std::runtime_error("fault proxy: " + made.error().ToString());
    proxy_ = std::move(*made);
  }
  std::string address() const override {
    return proxy_->host() + ":" + std::to_string(proxy_->port());
  }
  int port() const { return proxy_->port(); }
  void Pass() override { proxy_->SetMode(FaultProxy::kPass); }
  void Delay(int ms) override {
    proxy_->SetMode(FaultProxy::Mode(FaultProxy::kDelay, std::chrono::milliseconds(ms)));
  }
  void Stall() override { proxy_->SetMode(FaultProxy::kStall); }
  void DropReplies() override { proxy_->SetMode(FaultProxy::kDropReplies); }
  void Reset() override {
    proxy_->SetMode(FaultProxy::kReset);
    proxy_->SetMode(FaultProxy::kPass);
  }
  std::uint64_t bytes_dropped() const override { return proxy_->Stats().bytes_dropped(); }
  std::uint64_t bytes_forwarded() const override { return proxy_->Stats().bytes_forwarded(); }
  std::uint64_t bytes_held() const override {
    const ProxyStats s = proxy_->Stats();
    return s.bytes_delayed + s.bytes_stalled;
  }

 private:
  std::unique_ptr<FaultProxy> proxy_;
};
#endif

#ifdef NEMESIS_NETNS
// Every replica in a namespace of its own, the store reached through one FaultProxy in
// the store-side namespace; a partition is nftables rules there.
class Netns final : public Partitions {
 public:
  Netns(int replicas, const std::string& upstream) {
    auto made = NetnsTopology::Create(replicas);
    if (!made) throw std::runtime_error("network namespaces: " + made.error().ToString());
    topology_ = std::move(*made);
    auto exposed = topology_->ExposeToReplicas(HostPort(upstream).second);
    if (!exposed) throw std::runtime_error("store-side proxy: " + exposed.error().ToString());
    store_ = exposed->first + ":" + std::to_string(exposed->second);
    upstream_port_ = HostPort(upstream).second;
  }
  std::vector<std::string> ExecPrefix(int replica) const override {
    return topology_->ExecPrefix(replica);
  }
  std::string store_address() const override { return store_; }
  void Partition(int replica, Direction direction) override {
    const auto d = direction == Direction::kBoth      ? NetnsTopology::Direction::kBoth
                   : direction == Direction::kToStore ? NetnsTopology::Direction::kToStore
                                                      : NetnsTopology::Direction::kFromStore;
    auto done = topology_->Partition(replica, d);
    if (!done) throw std::runtime_error("partition: " + done.error().ToString());
  }
  void Heal(int replica) override {
    auto done = topology_->Heal(replica);
    if (!done) throw std::runtime_error("heal: " + done.error().ToString());
  }
  std::uint64_t bytes_forwarded() const override {
    const FaultProxy* proxy = topology_->ExposedProxy(upstream_port_);
    return proxy ? proxy->Stats().bytes_forwarded() : 0;
  }

 private:
  std::unique_ptr<NetnsTopology> topology_;
  std::string store_;
  int upstream_port_ = 0;
};
#endif

#ifdef NEMESIS_CLOCK
class Clock final : public ReplicaClock {
 public:
  explicit Clock(const std::string& dir) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    auto made = FakeClock::Create(dir);
    if (!made) throw std::runtime_error("fake clock: " + made.error().ToString());
    clock_ = std::move(*made);
  }
  std::vector<std::string> Env() const override { return clock_->Env(); }
  void Step(double seconds) override { Check(clock_->Step(FakeClock::Seconds(seconds))); }
  void Drift(double rate) override { Check(clock_->Drift(rate)); }
  double offset() const override { return clock_->offset().count(); }

 private:
  static void Check(const Result<void>& done) {
    if (!done) throw std::runtime_error("fake clock: " + done.error().ToString());
  }
  std::unique_ptr<FakeClock> clock_;
};
#endif

}  // namespace

#ifdef NEMESIS_CLOCK
std::unique_ptr<ReplicaClock> MakeClock(const std::string& dir) {
  return std::make_unique<Clock>(dir);
}
#endif

#ifdef NEMESIS_NETNS
std::string PartitionsUnavailable() {
  NetnsTopology::CleanupStale();
  std::string why;
  return NetnsTopology::Available(&why) ? "" : (why.empty() ? "no network namespaces" : why);
}
std::unique_ptr<Partitions> MakePartitions(int replicas, const std::string& upstream) {
  return std::make_unique<Netns>(replicas, upstream);
}
#endif

std::unique_ptr<StoreProxy> MakeProxy(const std::string& upstream) {
#ifdef NEMESIS_PROXY
  return std::make_unique<Proxy>(upstream, "");
#else
  (void)upstream;
  Missing("the fault proxy");
#endif
}

#if !defined(NEMESIS_NETNS)
std::string PartitionsUnavailable() {
  return "network namespaces (tests/nemesis/faults) not built";
}
std::unique_ptr<Partitions> MakePartitions(int, const std::string&) { Missing("NetnsTopology"); }
#endif

#if !defined(NEMESIS_CLOCK)
std::unique_ptr<ReplicaClock> MakeClock(const std::string&) { Missing("FakeClock"); }
#endif

}  // namespace tickd::nemesis
