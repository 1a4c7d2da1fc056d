#include "app/metrics.h"

#include <array>
#include <cstdio>

namespace tickd::app {
namespace {

struct Family {
  const char* name;
  const char* type;  // counter gauge histogram
  const char* help;
  std::vector<std::string> labels;
};

// Every family of DESIGN §9, in the order /metrics shows them. The job's label is
// `job_name`, not `job`: Prometheus attaches its own `job` label (the scrape target's)
// and would rename ours to `exported_job`.
const std::vector<Family>& Families() {
  static const std::vector<Family> kFamilies = {
      {"tickd_ticks_total",
       "counter",
       "Ticks this replica tried, by outcome.",
       {"job_name", "outcome"}},
      {"tickd_runs_total",
       "counter",
       "Runs this replica finished, by outcome.",
       {"job_name", "outcome"}},
      {"tickd_run_duration_seconds", "histogram", "How long runs took.", {"job_name"}},
      {"tickd_claim_duration_seconds",
       "histogram",
       "Claim round trips to the lock backend.",
       {"backend"}},
      {"tickd_fire_lateness_seconds",
       "histogram",
       "Start of the claim minus the instant the tick was due (T, plus its jitter offset).",
       {"job_name"}},
      {"tickd_lease_lost_total", "counter", "Runs whose lease was lost.", {"job_name"}},
      {"tickd_run_lease_end_total",
       "counter",
       "Runs still going when their lease ended: killed, or running (an in-process call).",
       {"job_name", "state"}},
      {"tickd_run_retries_total",
       "counter",
       "Retries of failed runs within their tick: started, or why not.",
       {"job_name", "outcome"}},
      {"tickd_backend_errors_total", "counter", "Failed lock backend calls.", {"backend"}},
      {"tickd_config_mismatch_total",
       "counter",
       "Claims whose holder had another config hash for the job.",
       {"job_name"}},
      {"tickd_clock_skew_seconds",
       "gauge",
       "Peer's wall clock minus ours when both tried the same tick.",
       {"peer"}},
      {"tickd_store_clock_offset_seconds",
       "gauge",
       "This replica's wall clock minus the lock store's, measured at its last claim.",
       {"backend"}},
      {"tickd_tzdata_info",
       "gauge",
       "The tz database version this replica computes ticks with (always 1).",
       {"version"}},
      {"tickd_tzdata_mismatch",
       "gauge",
       "Peers whose tz database version differs from this replica's.",
       {}},
      {"tickd_job_paused", "gauge", "1 while the job is paused (tickd pause).", {"job_name"}},
      {"tickd_notifications_total",
       "counter",
       "Notifications (on_failure, on_success, on_miss) by how they ended.",
       {"job_name", "event", "result"}},
      {"tickd_scheduler_loop_stuck_seconds",
       "gauge",
       "How long the scheduler loop has been stuck (past its planned wake-up, or without "
       "progress in a turn); 0 while it turns.",
       {}},
      {"tickd_claim_lead_seconds",
       "gauge",
       "How long before its instant the last instant's ticks were taken up (lock.claim_lead, "
       "more for a big instant, up to lock.claim_lead_max).",
       {}},
  };
  return kFamilies;
}

// Upper bounds in seconds; lateness and claims are milliseconds, runs up to hours.
constexpr std::array<double, 14> kBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                             0.25,  0.5,    1,     2.5,  10,    60,   600};

// Label values escape \ " and newline (exposition format).
std::string Escape(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string Number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string LabelText(const std::vector<std::string>& names, const std::vector<std::string>& values,
                      const std::string& extra = "") {
  if (names.empty() && extra.empty()) return "";  // a family without labels
  std::string out = "{";
  for (std::size_t i = 0; i < names.size() && i < values.size(); ++i) {
    if (i > 0) out += ",";
    out += names[i] + "=\"" + Escape(values[i]) + "\"";
  }
  if (!extra.empty()) out += (out.size() > 1 ? "," : "") + extra;
  return out + "}";
}

std::int64_t SteadyMs(const Clock& clock) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(clock.Steady().time_since_epoch())
      .count();
}

}  // namespace

Metrics& NullMetrics() {
  static Metrics null_metrics;
  return null_metrics;
}

PrometheusMetrics::PrometheusMetrics(Clock& clock, std::function<void()> on_loop_turn)
    : clock_(clock), on_loop_turn_(std::move(on_loop_turn)), last_turn_ms_(SteadyMs(clock)) {}

void PrometheusMetrics::Count(const std::string& family, Labels labels, double by) {
  std::lock_guard lock(mu_);
  counters_[family][std::move(labels)] += by;
}

void PrometheusMetrics::Observe(const std::string& family, Labels labels, double value) {
  std::lock_guard lock(mu_);
  Histogram& h = histograms_[family][std::move(labels)];
  if (h.buckets.empty()) h.buckets.assign(kBuckets.size(), 0);
  for (std::size_t i = 0; i < kBuckets.size(); ++i) {
    if (value <= kBuckets[i]) {
      ++h.buckets[i];
      break;
    }
  }
  ++h.count;
  h.sum += value;
}

void PrometheusMetrics::TickOutcome(std::string_view job, std::string_view outcome) {
  Count("tickd_ticks_total", {std::string(job), std::string(outcome)});
}

void PrometheusMetrics::RunOutcome(std::string_view job, std::string_view outcome,
                                   Seconds duration) {
  Count("tickd_runs_total", {std::string(job), std::string(outcome)});
  Observe("tickd_run_duration_seconds", {std::string(job)}, duration.count());
}

void PrometheusMetrics::ClaimDuration(std::string_view backend, Seconds took) {
  Observe("tickd_claim_duration_seconds", {std::string(backend)}, took.count());
}

void PrometheusMetrics::FireLateness(std::string_view job, Seconds lateness) {
  Observe("tickd_fire_lateness_seconds", {std::string(job)}, lateness.count());
}

void PrometheusMetrics::Notification(std::string_view job, std::string_view event,
                                     std::string_view result) {
  Count("tickd_notifications_total", {std::string(job), std::string(event), std::string(result)});
}

void PrometheusMetrics::LeaseLost(std::string_view job) {
  Count("tickd_lease_lost_total", {std::string(job)});
}

void PrometheusMetrics::RunLeaseEnd(std::string_view job, std::string_view state) {
  Count("tickd_run_lease_end_total", {std::string(job), std::string(state)});
}

void PrometheusMetrics::RunRetry(std::string_view job, std::string_view outcome) {
  Count("tickd_run_retries_total", {std::string(job), std::string(outcome)});
}

void PrometheusMetrics::BackendError(std::string_view backend) {
  Count("tickd_backend_errors_total", {std::string(backend)});
}

void PrometheusMetrics::ConfigMismatch(std::string_view job) {
  Count("tickd_config_mismatch_total", {std::string(job)});
}

void PrometheusMetrics::ClockSkew(std::string_view peer, Seconds skew) {
  std::lock_guard lock(mu_);
  counters_["tickd_clock_skew_seconds"][{std::string(peer)}] = skew.count();
}

void PrometheusMetrics::StoreClockOffset(std::string_view backend, Seconds offset) {
  std::lock_guard lock(mu_);
  counters_["tickd_store_clock_offset_seconds"][{std::string(backend)}] = offset.count();
}

void PrometheusMetrics::TzdataVersion(std::string_view version) {
  std::lock_guard lock(mu_);
  counters_["tickd_tzdata_info"] = {{{std::string(version)}, 1}};
  counters_["tickd_tzdata_mismatch"].try_emplace({}, 0);  // 0 from the start, for alerts
}

void PrometheusMetrics::TzdataMismatch(std::size_t peers) {
  std::lock_guard lock(mu_);
  counters_["tickd_tzdata_mismatch"][{}] = static_cast<double>(peers);
}

void PrometheusMetrics::JobsPaused(const std::vector<std::string>& jobs,
                                   const std::vector<std::string>& paused) {
  std::lock_guard lock(mu_);
  auto& gauge = counters_["tickd_job_paused"];
  gauge.clear();  // a job removed from the file leaves the family
  for (const std::string& job : jobs) gauge[{job}] = 0;
  for (const std::string& job : paused) gauge[{job}] = 1;
}

void PrometheusMetrics::LoopTurn() {
  last_turn_ms_.store(SteadyMs(clock_));
  if (on_loop_turn_) on_loop_turn_();
}

void PrometheusMetrics::LoopStuck(std::chrono::milliseconds behind) {
  std::lock_guard lock(mu_);
  counters_["tickd_scheduler_loop_stuck_seconds"][{}] = Seconds(behind).count();
}

void PrometheusMetrics::ClaimLead(std::chrono::milliseconds lead) {
  std::lock_guard lock(mu_);
  counters_["tickd_claim_lead_seconds"][{}] = Seconds(lead).count();
}

std::chrono::milliseconds PrometheusMetrics::SinceLoopTurn() const {
  return std::chrono::milliseconds(SteadyMs(clock_) - last_turn_ms_.load());
}

std::string PrometheusMetrics::Render() const {
  std::lock_guard lock(mu_);
  std::string out;
  for (const Family& f : Families()) {
    out += std::string("# HELP ") + f.name + " " + f.help + "\n";
    out += std::string("# TYPE ") + f.name + " " + f.type + "\n";
    if (std::string_view(f.type) == "histogram") {
      auto it = histograms_.find(f.name);
      if (it == histograms_.end()) continue;
      for (const auto& [labels, h] : it->second) {
        std::uint64_t cumulative = 0;
        for (std::size_t i = 0; i < kBuckets.size(); ++i) {
          cumulative += h.buckets[i];
          out += std::string(f.name) + "_bucket" +
                 LabelText(f.labels, labels, "le=\"" + Number(kBuckets[i]) + "\"") + " " +
                 std::to_string(cumulative) + "\n";
        }
        out += std::string(f.name) + "_bucket" + LabelText(f.labels, labels, "le=\"+Inf\"") + " " +
               std::to_string(h.count) + "\n";
        out +=
            std::string(f.name) + "_sum" + LabelText(f.labels, labels) + " " + Number(h.sum) + "\n";
        out += std::string(f.name) + "_count" + LabelText(f.labels, labels) + " " +
               std::to_string(h.count) + "\n";
      }
      continue;
    }
    auto it = counters_.find(f.name);
    if (it == counters_.end()) continue;
    for (const auto& [labels, value] : it->second) {
      out += std::string(f.name) + LabelText(f.labels, labels) + " " + Number(value) + "\n";
    }
  }
  return out;
}

}  // namespace tickd::app
