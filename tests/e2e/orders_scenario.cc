#include "tests/e2e/orders_scenario.h"

#include <signal.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <sstream>
#include <thread>

namespace tickd::e2e {
namespace {

const std::string kShopctl = std::string(TICKD_SOURCE_DIR) + "/plugins/orders-cleanup/shopctl";

std::string Shopctl(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {kShopctl};
  argv.insert(argv.end(), args.begin(), args.end());
  auto [status, output] = RunCommand(argv);
  INFO(output);
  REQUIRE(status == 0);
  return output;
}

std::map<std::string, long long> ParseCounts(const std::string& line) {
  std::map<std::string, long long> counts;
  std::istringstream in(line);
  for (std::string field; in >> field;) {
    const std::size_t eq = field.find('=');
    if (eq != std::string::npos) counts[field.substr(0, eq)] = std::stoll(field.substr(eq + 1));
  }
  return counts;
}

}  // namespace

std::unique_ptr<BackendFixture> MakeNoneFixture() {
  class None final : public BackendFixture {
   public:
    std::string name() const override { return "none"; }
    std::string LockYaml(const fs::path&) const override { return "  backend: none\n"; }
  };
  return std::make_unique<None>();
}

OrdersOutcome RunOrdersCleanup(BackendFixture& backend, bool check_fence) {
  Cluster cluster(backend);
  const std::string db = (cluster.dir() / "shop.db").string();
  Shopctl({"init", db, "4", "1000"});
  Shopctl({"add-orders", db, "20", "100", "4"});  // already stale at the first tick
  cluster.WriteJobFile(std::string(R"(jobs:
  - name: cleanup-unpaid-orders
    schedule: "@every 1s"
    timeout: 10s
    plugin:
      path: )") + ORDERS_PLUGIN +
                       R"(
      config: {db: ")" +
                       db + R"(", older_than: 2, work_ms: 300, check_fence: )" +
                       (check_fence ? "true" : "false") + "}\n");
  for (const char* node : {"node-a", "node-b", "node-c"}) cluster.StartReplica(node);

  // New orders keep arriving while the replicas clean up.
  const auto feed_until = std::chrono::steady_clock::now() + std::chrono::seconds(6);
  while (std::chrono::steady_clock::now() < feed_until) {
    Shopctl({"add-orders", db, "3", "0", "4"});
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  // Every order becomes stale 2 s after it arrived; the next ticks close the rest.
  const bool drained = Cluster::WaitUntil(
      [&] {
        auto [status, output] = RunCommand({kShopctl, "check", db});
        return ParseCounts(output)["unpaid"] == 0;
      },
      std::chrono::seconds(8));
  CHECK(drained);

  OrdersOutcome out;
  for (auto& r : cluster.replicas()) r->Signal(SIGTERM);
  for (auto& r : cluster.replicas())
    out.exit_statuses.push_back(r->Wait(std::chrono::seconds(15)).value_or(-1));
  auto [status, output] = RunCommand({kShopctl, "check", db});
  out.check_line = output;
  out.counts = ParseCounts(output);
  out.lines = cluster.AllLines();
  return out;
}

}  // namespace tickd::e2e
