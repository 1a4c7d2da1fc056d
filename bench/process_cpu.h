// CPU seconds a process has used, for the benches that set a server's CPU beside the
// clients' (etcd_claim_bench's ceilings, the batched runs' saturation).
#ifndef TICKD_BENCH_PROCESS_CPU_H_
#define TICKD_BENCH_PROCESS_CPU_H_

#include <sys/resource.h>
#include <sys/types.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

namespace tickd::bench {

// CPU seconds (user + system) process `pid` has used so far (-1: unknown).
inline double ProcessCpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  const auto fields_at = stat.rfind(')');  // after "pid (comm)": state, ppid, …
  if (fields_at == std::string::npos) return -1;
  std::istringstream fields(stat.substr(fields_at + 2));
  std::string skip;
  for (int i = 3; i < 14; ++i) fields >> skip;  // fields 3..13 (man 5 proc)
  long utime = 0, stime = 0;
  if (!(fields >> utime >> stime)) return -1;
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// CPU seconds this process (the bench's clients) has used so far.
inline double OwnCpuSeconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  auto secs = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return secs(u.ru_utime) + secs(u.ru_stime);
}

}  // namespace tickd::bench

#endif  // TICKD_BENCH_PROCESS_CPU_H_
