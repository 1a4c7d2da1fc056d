// A run for the checker's end-to-end tests: three tickd replicas (n1 n2 n3) whose two
// jobs write to a fenced resource through nemesis_write — j1 (@every 1s, forbid,
// holds 200 ms) and j2 (@every 1s, allow, holds 1.5 s), lease 3 s — then the
// resource's journal and the replicas' logs read back for nemesis::Check. Header-only.
#pragma once

#include <signal.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tests/e2e/harness.h"
#include "tests/nemesis/checker/checker.h"
#include "tests/nemesis/resource/resource.h"

namespace tickd::nemesis {

class FencedRun {
 public:
  static constexpr const char* kNodes[] = {"n1", "n2", "n3"};

  // Starts the resource (in the cluster's folder) and the replicas with the job file;
  // ok() once every replica logged its `start` line (≤ 10 s).
  FencedRun(e2e::Cluster& cluster, const std::string& write_binary) : cluster_(cluster) {
    journal_ = cluster.dir() / "journal.jsonl";
    const auto socket = cluster.dir() / "r.sock";
    resource_ = FencedResource::Open(socket, journal_, &error_);
    if (!resource_) return;
    resource_->Start();
    const std::string write = write_binary + " --socket " + socket.string();
    cluster.WriteJobFile("jobs:\n"
                         "  - name: j1\n"
                         "    schedule: \"@every 1s\"\n"
                         "    shell: " + write + " --hold-ms 200\n"
                         "  - name: j2\n"
                         "    schedule: \"@every 1s\"\n"
                         "    concurrency: allow\n"
                         "    shell: " + write + " --hold-ms 1500\n",
                         "lease: 3s");
    for (const char* node : kNodes) cluster.StartReplica(node);
    started_ = e2e::Cluster::WaitUntil(
        [&] {
          int started = 0;
          for (auto& r : cluster.replicas()) {
            for (const e2e::LogLine& l : r->Lines()) started += l.event == "start" ? 1 : 0;
          }
          return started == 3;
        },
        std::chrono::milliseconds(10000));
    if (!started_) error_ = "the replicas did not all log start within 10 s";
  }

  bool ok() const { return resource_ && started_; }
  const std::string& error() const { return error_; }

  // SIGTERM to every replica, then the resource stopped: each replica's exit status
  // (nullopt: still running after 15 s).
  std::vector<std::optional<int>> Stop() {
    for (auto& r : cluster_.replicas()) r->Signal(SIGTERM);
    std::vector<std::optional<int>> statuses;
    for (auto& r : cluster_.replicas()) {
      statuses.push_back(r->Wait(std::chrono::milliseconds(15000)));
    }
    if (resource_) resource_->Stop();
    return statuses;
  }

  // The spec's jobs, its replicas set; the window is the caller's.
  static void Describe(CheckSpec& spec) {
    spec.replicas = {kNodes[0], kNodes[1], kNodes[2]};
    spec.jobs = {JobSpec{"j1", 1, {}, 3000, true}, JobSpec{"j2", 1, {}, 3000, false}};
  }

  // The journal and every replica's log; false (error() says why) when one is unreadable.
  bool Load(std::vector<Attempt>* attempts, std::vector<LogEvent>* events) {
    if (!LoadJournal(journal_, attempts, &error_)) return false;
    for (const char* node : kNodes) {
      if (!LoadLog(cluster_.dir() / (std::string(node) + ".log"), events, &error_)) return false;
    }
    return true;
  }

 private:
  e2e::Cluster& cluster_;
  std::filesystem::path journal_;
  std::unique_ptr<FencedResource> resource_;
  bool started_ = false;
  std::string error_;
};

}  // namespace tickd::nemesis
