// What the daemon counts (docs/design.md §9): the scheduler and the run supervisors report
// events through the small Metrics interface; PrometheusMetrics keeps them and
// renders the Prometheus text exposition format for /metrics.
//
// Metric names are a contract (docs/design.md §9):
//   tickd_ticks_total{job_name,outcome}      every tick line (won lost busy missed
//                                            superseded store-reset early skipped error)
//   tickd_runs_total{job_name,outcome}       every run line (done failed timeout …)
//   tickd_run_duration_seconds{job_name}     histogram of run durations
//   tickd_claim_duration_seconds{backend}    histogram of claim round trips
//   tickd_fire_lateness_seconds{job_name}    histogram of (start of claim − due instant)
//   tickd_lease_lost_total{job_name}
//   tickd_run_lease_end_total{job_name,state}  runs still going when their lease
//                                            ended: killed (a process group, SIGKILL)
//                                            or running (an in-process call left on
//                                            its thread)
//   tickd_backend_errors_total{backend}
//   tickd_config_mismatch_total{job_name}
//   tickd_clock_skew_seconds{peer}           gauge: peer's wall clock − ours, at the
//                                            last tick both tried
//   tickd_store_clock_offset_seconds{backend} gauge: our wall clock − the store's, at
//                                            the last claim that read it
//   tickd_tzdata_info{version}               gauge, 1: this replica's tz database
//   tickd_tzdata_mismatch                    gauge: peers whose tz database differs
//   tickd_job_paused{job_name}               gauge, 1 per job paused by `tickd pause`
//                                            when the replica last looked (before
//                                            an instant's claims); 0 once resumed
//   tickd_scheduler_loop_stuck_seconds       gauge: how long the loop has been stuck
//                                            (Scheduler::CheckLoop), 0 while it turns
// The job's label is `job_name`: Prometheus's own `job` label names the scrape target.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/clock.h"

namespace tickd::app {

using Seconds = std::chrono::duration<double>;

// Thread-safe; every method is cheap and never fails. The defaults do nothing, so a
// caller with nothing to count passes NullMetrics().
class Metrics {
 public:
  virtual ~Metrics() = default;
  virtual void TickOutcome(std::string_view /*job*/, std::string_view /*outcome*/) {}
  virtual void RunOutcome(std::string_view /*job*/, std::string_view /*outcome*/,
                          Seconds /*duration*/) {}
  virtual void ClaimDuration(std::string_view /*backend*/, Seconds /*took*/) {}
  virtual void FireLateness(std::string_view /*job*/, Seconds /*lateness*/) {}
  virtual void LeaseLost(std::string_view /*job*/) {}
  // A run still going at the end of its lease: "killed" or "running" (see above).
  virtual void RunLeaseEnd(std::string_view /*job*/, std::string_view /*state*/) {}
  // A retry of a run (docs/design.md §1 rule 14): "started", or why it did not start:
  // "next-instant", "error" (the new fence), "lease-lost".
  virtual void RunRetry(std::string_view /*job*/, std::string_view /*outcome*/) {}
  virtual void BackendError(std::string_view /*backend*/) {}
  virtual void ConfigMismatch(std::string_view /*job*/) {}
  virtual void ClockSkew(std::string_view /*peer*/, Seconds /*skew*/) {}
  // This replica's wall clock minus the store's, measured at a claim.
  virtual void StoreClockOffset(std::string_view /*backend*/, Seconds /*offset*/) {}
  // This replica's tz database version (once, at start).
  virtual void TzdataVersion(std::string_view /*version*/) {}
  // How many peers run a known tz database version other than ours.
  virtual void TzdataMismatch(std::size_t /*peers*/) {}
  // Of `jobs` (every job the replica schedules), those paused by `tickd pause`.
  virtual void JobsPaused(const std::vector<std::string>& /*jobs*/,
                          const std::vector<std::string>& /*paused*/) {}
  // A notification ended: result sent, failed (every try), dropped (queue full or
  // shutdown) or error (the store could not say who sends a miss).
  virtual void Notification(std::string_view /*job*/, std::string_view /*event*/,
                            std::string_view /*result*/) {}
  // The scheduler loop finished a turn (the systemd watchdog's ping).
  virtual void LoopTurn() {}
  // How long the scheduler loop has been stuck (0: it is not; Scheduler::CheckLoop).
  virtual void LoopStuck(std::chrono::milliseconds /*behind*/) {}
  // The lead the last instant's ticks were taken up with (docs/design.md §1 "Adaptive
  // lead").
  virtual void ClaimLead(std::chrono::milliseconds /*lead*/) {}
};

Metrics& NullMetrics();

class PrometheusMetrics final : public Metrics {
 public:
  // `clock` times the loop heartbeat; `on_loop_turn` (optional) runs on every turn
  // (the systemd watchdog ping).
  explicit PrometheusMetrics(Clock& clock, std::function<void()> on_loop_turn = {});

  void TickOutcome(std::string_view job, std::string_view outcome) override;
  void RunOutcome(std::string_view job, std::string_view outcome, Seconds duration) override;
  void ClaimDuration(std::string_view backend, Seconds took) override;
  void FireLateness(std::string_view job, Seconds lateness) override;
  void LeaseLost(std::string_view job) override;
  void RunLeaseEnd(std::string_view job, std::string_view state) override;
  void RunRetry(std::string_view job, std::string_view outcome) override;
  void BackendError(std::string_view backend) override;
  void ConfigMismatch(std::string_view job) override;
  void ClockSkew(std::string_view peer, Seconds skew) override;
  void StoreClockOffset(std::string_view backend, Seconds offset) override;
  void TzdataVersion(std::string_view version) override;
  void TzdataMismatch(std::size_t peers) override;
  void JobsPaused(const std::vector<std::string>& jobs,
                  const std::vector<std::string>& paused) override;
  void Notification(std::string_view job, std::string_view event,
                    std::string_view result) override;
  void LoopTurn() override;
  void LoopStuck(std::chrono::milliseconds behind) override;
  void ClaimLead(std::chrono::milliseconds lead) override;

  // Time since the last LoopTurn (or since construction).
  std::chrono::milliseconds SinceLoopTurn() const;
  // The Prometheus text format (version 0.0.4).
  std::string Render() const;

 private:
  // label values (in the order of the family's label names) → value
  using Labels = std::vector<std::string>;
  struct Histogram {
    std::vector<std::uint64_t> buckets;  // cumulative counts are computed when rendering
    std::uint64_t count = 0;
    double sum = 0;
  };
  void Count(const std::string& family, Labels labels, double by = 1);
  void Observe(const std::string& family, Labels labels, double value);

  Clock& clock_;
  std::function<void()> on_loop_turn_;
  std::atomic<std::int64_t> last_turn_ms_;
  mutable std::mutex mu_;
  std::map<std::string, std::map<Labels, double>> counters_;  // also gauges
  std::map<std::string, std::map<Labels, Histogram>> histograms_;
};

}  // namespace tickd::app
