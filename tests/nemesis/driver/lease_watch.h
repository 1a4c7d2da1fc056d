// The store's own view of each run's lease during a cell: `tickd locks --json` (the
// store's ListRunning, judged on the store's clock) every 200 ms. Each running claim
// the store no longer holds for its holder (holder_alive false: the lease ran out on
// the store's clock) is appended to a JSONL file, once per (job, tick, fence):
//   {"job":"w-long","tick":1764000000,"fence":42,"holder":"n2","expired_by_ms":…}
// expired_by_ms: the driver's real clock when the answer came (the store had judged the
// lease over by then). The checker counts a write of that run after it as late.
#pragma once

#include <atomic>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

namespace tickd::nemesis {

class StoreLeaseWatch {
 public:
  // `env`: added to `tickd locks`' environment (the store's address, its password).
  StoreLeaseWatch(std::string tickd, std::filesystem::path job_file, std::vector<std::string> env,
                  std::filesystem::path out);
  ~StoreLeaseWatch();  // Stop()
  StoreLeaseWatch(const StoreLeaseWatch&) = delete;
  StoreLeaseWatch& operator=(const StoreLeaseWatch&) = delete;
  void Stop();
  int polls() const { return polls_; }  // answers read (evidence that it watched)

 private:
  void Run();
  std::string tickd_;
  std::filesystem::path job_file_;
  std::vector<std::string> env_;
  std::filesystem::path out_;
  std::atomic<bool> stop_{false};
  std::atomic<int> polls_{0};
  std::thread thread_;
};

}  // namespace tickd::nemesis
