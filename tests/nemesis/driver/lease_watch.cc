#include "tests/nemesis/driver/lease_watch.h"

#include <chrono>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "tests/e2e/harness.h"

namespace tickd::nemesis {

namespace {

std::int64_t RealMs() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

}  // namespace

StoreLeaseWatch::StoreLeaseWatch(std::string tickd, std::filesystem::path job_file,
                                 std::vector<std::string> env, std::filesystem::path out)
    : tickd_(std::move(tickd)),
      job_file_(std::move(job_file)),
      env_(std::move(env)),
      out_(std::move(out)),
      thread_([this] { Run(); }) {}

StoreLeaseWatch::~StoreLeaseWatch() { Stop(); }

void StoreLeaseWatch::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void StoreLeaseWatch::Run() {
  std::set<std::tuple<std::string, std::int64_t, std::uint64_t>> written;
  std::ofstream out(out_, std::ios::app);
  auto next = std::chrono::steady_clock::now();
  while (!stop_) {
    next += std::chrono::milliseconds(200);
    const auto [status, text] =
        e2e::RunCommand({tickd_, "locks", "-c", job_file_.string(), "--json"}, env_);
    const std::int64_t answered = RealMs();
    const std::size_t at = text.find('[');
    const nlohmann::json claims = status == 0 && at != std::string::npos
                                      ? nlohmann::json::parse(text.substr(at), nullptr, false)
                                      : nlohmann::json();
    if (claims.is_array()) {
      ++polls_;
      for (const nlohmann::json& c : claims) {
        if (!c.is_object() || c.value("holder_alive", true)) continue;
        const auto key = std::make_tuple(c.value("job", ""), c.value("tick_unix", std::int64_t{0}),
                                         c.value("fence", std::uint64_t{0}));
        if (!written.insert(key).second) continue;
        out << nlohmann::json{{"job", std::get<0>(key)},
                              {"tick", std::get<1>(key)},
                              {"fence", std::get<2>(key)},
                              {"holder", c.value("holder", "")},
                              {"expired_by_ms", answered}}
                   .dump()
            << std::endl;
      }
    }
    std::this_thread::sleep_until(next);
    if (std::chrono::steady_clock::now() > next) next = std::chrono::steady_clock::now();
  }
}

}  // namespace tickd::nemesis
