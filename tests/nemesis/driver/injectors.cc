#include "tests/nemesis/driver/injectors.h"

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

 private:
  std::unique_ptr<FaultProxy> proxy_;
};
#endif

}  // namespace

std::unique_ptr<StoreProxy> MakeProxy(const std::string& upstream) {
#ifdef NEMESIS_PROXY
  return std::make_unique<Proxy>(upstream, "");
#else
  (void)upstream;
  Missing("the fault proxy");
#endif
}

#if !defined(NEMESIS_NETNS)
std::string PartitionsUnavailable() { return "network namespaces (tests/nemesis/faults) not built"; }
std::unique_ptr<Partitions> MakePartitions(int, const std::string&) {
  Missing("NetnsTopology");
}
#endif

#if !defined(NEMESIS_CLOCK)
std::unique_ptr<ReplicaClock> MakeClock(const std::string&) { Missing("FakeClock"); }
#endif

}  // namespace tickd::nemesis
