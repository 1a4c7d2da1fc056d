// Where the daemon's per-job memory goes (bench/README.md, "idle cost"): loads a job
// file of N rarely firing jobs and prints the live heap (glibc mallinfo2) and the
// resident set per job: first the parts (the parsed config, the job set), then the
// way `tickd run` loads it (app::LoadJobFile) and starts the scheduler.
//
//   job_memory [N]      (default 10,000)
#include <malloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "app/log.h"
#include "app/reload.h"
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

struct Usage {
  std::size_t heap = HeapBytes();
  long rss = RssKb();
};

void Report(const char* what, const Usage& from, int n) {
  const Usage now;
  std::printf("%-36s heap %+8.0f B/job   rss %+6.2f KB/job\n", what,
              (static_cast<double>(now.heap) - static_cast<double>(from.heap)) / n,
              static_cast<double>(now.rss - from.rss) / n);
}

// The job file of bench/idle_cost.sh, in a folder with a name as long as its.
std::string WriteJobs(int n) {
  char dir[] = "/tmp/tickd-idle-XXXXXX";
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
  app::FixMallocThresholds();  // as tickd run does
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

  // The daemon's way (app::LoadJobFile): what stays.
  {
    const Usage start;
    auto loaded = app::LoadJobFile(path);
    if (!loaded) return 1;
    Report("LoadJobFile (as tickd run)", start, n);
    Usage before;
    app::Scheduler scheduler(clock, **backend, *runner, log, app::SchedulerOptions{});
    scheduler.Start(std::move(loaded->jobs));
    while (!scheduler.sleeping_until()) ::usleep(1000);
    Report("Scheduler::Start (map, timer queue)", before, n);
    Report("total after start", start, n);
    scheduler.Shutdown(std::chrono::milliseconds(0));
  }
  ::malloc_trim(0);

  // What each part weighs (live heap; the resident set is no longer telling here):
  // the jobs as parsed (config::Config) and the job set built from them.
  {
    Usage before;
    auto loaded = config::LoadConfig(path);
    if (!loaded) return 1;
    Report("LoadConfig: the jobs as parsed", before, n);
    before = Usage();
    Result<app::JobSet> jobs = app::MakeJobSet(loaded->jobs);
    if (!jobs) return 1;
    Report("MakeJobSet: the job set (copies)", before, n);
  }
  std::error_code ec;
  std::filesystem::remove_all(std::filesystem::path(path).parent_path(), ec);
  return 0;
}
