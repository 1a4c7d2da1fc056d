// Where the daemon's per-job memory goes (bench/README.md, "idle cost"): loads a job
// file of N rarely firing jobs the way `tickd run` does and prints the live heap
// (glibc mallinfo2) and the resident set after each stage, per job.
//
//   job_memory [N]      (default 10,000)
#include <malloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "app/log.h"
#include "app/runner.h"
#include "app/scheduled_job.h"
#include "app/scheduler.h"
#include "base/clock.h"
#include "config/config.h"
#include "lock/registry.h"

namespace {

std::size_t HeapBytes() {
  const struct mallinfo2 m = ::mallinfo2();
  return m.uordblks + m.hblkhd;
}

long RssKb() {
  std::ifstream in("/proc/self/status");
  std::string key;
  long value = 0;
  while (in >> key) {
    if (key == "VmRSS:") {
      in >> value;
      return value;
    }
    in.ignore(1 << 20, '\n');
  }
  return 0;
}

struct Stage {
  std::size_t heap = HeapBytes();
  long rss = RssKb();
};

void Report(const char* what, const Stage& from, int n) {
  const Stage now;
  std::printf("%-34s heap %+10.0f B/job   rss %+8.2f KB/job\n", what,
              (static_cast<double>(now.heap) - static_cast<double>(from.heap)) / n,
              static_cast<double>(now.rss - from.rss) / n);
}

std::string WriteJobs(int n) {
  char dir[] = "/tmp/tickd-job-memory-XXXXXX";
  if (::mkdtemp(dir) == nullptr) std::abort();
  const std::string path = std::string(dir) + "/jobs.yaml";
  std::ofstream out(path);
  out << "version: 1\nlock: { backend: memory }\njobs:\n";
  for (int i = 1; i <= n; ++i) {
    out << "  - { name: job-" << i << ", schedule: \"" << i % 60 << ' ' << i % 24
        << " 1 1 *\", shell: \"true\" }\n";
  }
  out.close();
  ::chmod(path.c_str(), 0644);
  return path;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tickd;
  const int n = argc > 1 ? std::atoi(argv[1]) : 10'000;
  if (n <= 0) return 2;
  const std::string path = WriteJobs(n);
  std::printf("jobs: %d   sizeof(config::Job) = %zu B   sizeof(ScheduledJob) = %zu B\n", n,
              sizeof(config::Job), sizeof(app::ScheduledJob));

  RealClock clock;
  app::Logger log(clock, app::LogFormat::kLogfmt, app::LogLevel::kWarn,
                  [](std::string_view) {});
  lock::BackendOptions backend_options;
  backend_options.backend = "memory";
  auto backend = lock::OpenBackend(backend_options, clock);
  if (!backend) return 1;
  std::unique_ptr<app::Runner> runner = app::NewProcessRunner("/bin/false");
  ::malloc_trim(0);

  const Stage start;
  auto loaded = config::LoadConfig(path);
  if (!loaded) return 1;
  ::malloc_trim(0);
  Report("LoadConfig (Config kept)", start, n);
  Stage before = Stage();
  Result<app::JobSet> jobs = app::MakeJobSet(loaded->jobs);
  if (!jobs) return 1;
  Report("MakeJobSet", before, n);

  before = Stage();
  {
    app::Scheduler scheduler(clock, **backend, *runner, log, app::SchedulerOptions{});
    scheduler.Start(std::move(*jobs));
    while (!scheduler.sleeping_until()) ::usleep(1000);
    Report("Scheduler::Start (queue, names)", before, n);
    before = Stage();
    loaded->jobs.clear();
    loaded->jobs.shrink_to_fit();
    ::malloc_trim(0);
    Report("drop Config::jobs", before, n);
    Report("total live after start", start, n);
    scheduler.Shutdown(std::chrono::milliseconds(0));
  }
  return 0;
}
