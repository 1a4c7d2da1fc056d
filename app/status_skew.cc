#include "app/status_skew.h"

#include <algorithm>
#include <cmath>

#include "app/backend_call.h"
#include "app/tzdata.h"

namespace tickd::app {

using std::chrono::milliseconds;

SkewWatch::SkewWatch(Clock& clock, lock::Backend& backend, Logger& log, Metrics& metrics,
                     SkewOptions options)
    : clock_(clock),
      backend_(backend),
      log_(log),
      metrics_(metrics),
      options_(std::move(options)) {}

SkewWatch::~SkewWatch() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void SkewWatch::Start() {
  thread_ = std::thread([this] {
    std::unique_lock lock(mu_);
    while (!stop_) {
      lock.unlock();
      PollOnce();
      lock.lock();
      cv_.wait_for(lock, options_.poll, [this] { return stop_; });
    }
  });
}

void SkewWatch::PollOnce() {
  const WallTime before = clock_.Wall();
  std::set<std::string> jobs_read;
  Result<std::vector<lock::TickHistory>> history = Read(jobs_read);
  if (!history) return;  // the scheduler reports backend errors; a gap only widens (P1, P2]
  if (options_.peers != nullptr) WatchPeers(*history);
  const WallTime now = clock_.Wall();
  if (seen_.size() > static_cast<std::size_t>(options_.lookback) * 64) {
    seen_.clear();  // keeps the set bounded; this poll only learns again
    primed_ = false;
  }
  // An observation is written some time after its node_wall was taken: a claim
  // batch of thousands at a busy instant writes its last ones seconds later. So a
  // peer's entry that appears late shows its clock as behind by that much. Our own
  // entries go the same way: the longest ours took to appear in this poll (at most
  // now − node_wall) widens each peer's interval on the "behind" side by as much.
  const auto fresh = [&](const lock::Observation& o) {
    return seen_.insert(ObsKey{o.job, o.tick_unix, o.node}).second && primed_ &&
           (!options_.jobs || last_jobs_.contains(o.job));
  };
  milliseconds own_now{0};
  for (const lock::TickHistory& t : *history) {
    for (const lock::Observation& o : t.observations) {
      if (o.node == options_.node && fresh(o)) own_now = std::max(own_now, now - o.node_wall);
    }
  }
  // A peer's entry of a job may appear polls before ours (it got to that job sooner):
  // the longest delay of ours in the last kOwnDelayMemory stands for it.
  own_delays_.emplace_back(now, own_now);
  while (!own_delays_.empty() && own_delays_.front().first < now - kOwnDelayMemory) {
    own_delays_.pop_front();
  }
  milliseconds own_delay{0};
  for (const auto& [when, delay] : own_delays_) own_delay = std::max(own_delay, delay);
  // "Behind" needs to know how late our own entries appear: until one of ours has
  // appeared in the last minute (the first instant after a start), only "ahead" warns.
  const bool own_known = own_delay > milliseconds(0);
  // Newest observation per peer in this poll.
  std::map<std::string, std::pair<milliseconds, milliseconds>> measured;  // peer → [lo, hi)
  std::map<std::string, std::int64_t> measured_tick;
  for (const lock::TickHistory& t : *history) {
    for (const lock::Observation& o : t.observations) {
      if (o.node == options_.node || !fresh(o)) continue;
      const milliseconds lo = o.node_wall - now;
      const milliseconds hi = o.node_wall - last_poll_ + own_delay;
      auto it = measured_tick.find(o.node);
      if (it == measured_tick.end() || o.tick_unix > it->second) {
        measured[o.node] = {lo, hi};
        measured_tick[o.node] = o.tick_unix;
      }
    }
  }
  for (const auto& [peer, range] : measured) {
    const milliseconds mid = (range.first + range.second) / 2;
    metrics_.ClockSkew(peer, mid);
    // A zero threshold switches the warning off (the gauge stays).
    const bool beyond = options_.threshold.count() > 0 &&
                        (range.first >= options_.threshold ||
                         (own_known && range.second <= -options_.threshold));
    bool& warned = warned_[peer];
    if (beyond && !warned) {
      warned = true;
      log_.Log(LogLevel::kWarn, "clock-skew",
               {{"node", options_.node},
                {"peer", peer},
                {"skew",
                 (mid.count() < 0 ? "-" : "") + FormatSeconds(milliseconds(std::abs(mid.count())))},
                {"threshold", FormatSeconds(options_.threshold)},
                {"tick", FormatTick(measured_tick[peer])}});
    } else if (!beyond && std::abs(mid.count()) < options_.threshold.count() / 2) {
      warned = false;
    }
  }
  primed_ = true;
  last_poll_ = before;
  last_jobs_ = std::move(jobs_read);
}

Result<std::vector<lock::TickHistory>> SkewWatch::Read(std::set<std::string>& jobs_read) {
  if (!options_.jobs) {
    return CallBackend("ledger", [&] { return backend_.History("", options_.lookback); });
  }
  const std::vector<std::string> jobs = options_.jobs();
  jobs_read.insert(jobs.begin(), jobs.end());
  const int each = std::max(4, options_.lookback / std::max<int>(1, static_cast<int>(jobs.size())));
  std::vector<lock::TickHistory> out;
  for (const std::string& job : jobs) {
    Result<std::vector<lock::TickHistory>> one =
        CallBackend("ledger", [&] { return backend_.History(job, each); });
    if (!one) return one;
    for (lock::TickHistory& t : *one) out.push_back(std::move(t));
  }
  return out;
}

void SkewWatch::WatchPeers(const std::vector<lock::TickHistory>& history) {
  std::set<std::string> nodes;
  std::map<std::string, std::pair<std::int64_t, std::string_view>> newest;  // node → tick, tz
  for (const lock::TickHistory& t : history) {
    for (const lock::Observation& o : t.observations) {
      nodes.insert(o.node);
      auto [it, fresh] = newest.try_emplace(o.node, o.tick_unix, std::string_view());
      if (fresh || o.tick_unix >= it->second.first) {
        it->second = {o.tick_unix, SplitClaimHash(o.config_hash).tzdata};
      }
    }
  }
  if (options_.peers->Saw(nodes)) {
    std::string names;
    for (const std::string& n : options_.peers->names()) names += (names.empty() ? "" : ",") + n;
    log_.Log(LogLevel::kInfo, "peers", {{"node", options_.node}, {"peers", names}});
  }
  std::map<std::string, std::string> versions;
  for (const auto& [node, seen] : newest) versions.emplace(node, seen.second);
  options_.peers->SawTzdata(versions);
  std::map<std::string, std::string> differing = options_.peers->TzdataDiffering(options_.tzdata);
  if (differing == tzdata_differing_) return;
  metrics_.TzdataMismatch(differing.size());
  if (!differing.empty()) {
    log_.Log(LogLevel::kWarn, "tzdata-mismatch",
             {{"node", options_.node},
              {"tzdata", options_.tzdata},
              {"peers", FormatTzdataPeers(differing)},
              {"note", "replicas with different tz databases can compute different ticks"}});
  } else {
    log_.Log(LogLevel::kInfo, "tzdata-match",
             {{"node", options_.node}, {"tzdata", options_.tzdata}});
  }
  tzdata_differing_ = std::move(differing);
}

}  // namespace tickd::app
