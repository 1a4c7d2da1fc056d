#include "jobs/process_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_set>

namespace tickd::jobs {
namespace {

constexpr std::size_t kMaxDescendants = 4096;

// Whole file, small: /proc's files have no size to stat. nullopt when it cannot be
// opened (gone, or not ours to read).
std::optional<std::string> ReadFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string out;
  char buffer[4096];
  ssize_t n;
  while ((n = read(fd, buffer, sizeof buffer)) > 0) out.append(buffer, static_cast<std::size_t>(n));
  close(fd);
  return out;
}

std::string ReadSmallFile(const std::string& path) { return ReadFile(path).value_or(""); }

bool IsPidName(const char* name) { return name[0] >= '1' && name[0] <= '9'; }

// The children of every thread of `pid` (a child belongs to the thread that made it).
void AppendChildren(pid_t pid, std::vector<pid_t>& out) {
  const std::string task = "/proc/" + std::to_string(pid) + "/task";
  DIR* dir = opendir(task.c_str());
  if (dir == nullptr) return;
  while (const dirent* entry = readdir(dir)) {
    if (!IsPidName(entry->d_name)) continue;
    const std::string children = ReadSmallFile(task + "/" + entry->d_name + "/children");
    const char* p = children.c_str();
    char* end = nullptr;
    for (long child = std::strtol(p, &end, 10); end != p; child = std::strtol(p, &end, 10)) {
      out.push_back(static_cast<pid_t>(child));
      p = end;
    }
  }
  closedir(dir);
}

// Whether `environ` (NUL-separated entries) holds each of `marks` as a whole entry.
// The environment `pid` was started with (NUL-separated entries): nullopt when it may not
// be read or is gone, empty for a kernel thread, a zombie, or a process started without
// one. While `pid` execs, it reads empty until the kernel has copied the new one into
// its memory: ProcStat::env_end is 0 until then, and env_start == env_end while the
// kernel lays out the pointers to it — which is also how a process started without one
// reads for good. That moment, tens of microseconds on an idle host, is waited out: up
// to kExecWait while env_end is 0; while env_start == env_end, up to kLayoutWait if the
// process is running (R, D: it may be in that exec), not at all if it sleeps. The stat
// is read after the empty read, so an environment placed in between is read again.
std::optional<std::string> ReadEnviron(pid_t pid) {
  constexpr auto kExecWait = std::chrono::milliseconds(250);
  constexpr auto kLayoutWait = std::chrono::milliseconds(20);
  constexpr auto kPoll = std::chrono::microseconds(100);
  const std::string path = "/proc/" + std::to_string(pid) + "/environ";
  const auto began = std::chrono::steady_clock::now();
  for (;;) {
    std::optional<std::string> environ = ReadFile(path);
    if (!environ || !environ->empty()) return environ;
    const std::optional<ProcStat> s = ReadProcStat(pid);
    if (!s) return std::nullopt;  // gone meanwhile
    if (s->kernel_thread || !s->live()) return environ;
    const bool placed = s->env_end != 0;
    const bool laying_out = placed && s->env_start == s->env_end;
    const auto waited = std::chrono::steady_clock::now() - began;
    if (laying_out && ((s->state != 'R' && s->state != 'D') || waited >= kLayoutWait)) {
      return environ;  // started with none
    }
    if (waited >= kExecWait) return environ;
    if (!placed || laying_out) std::this_thread::sleep_for(kPoll);  // the exec is under way
  }
}

bool HoldsAll(const std::string& environ, const std::vector<std::string>& marks) {
  for (const std::string& mark : marks) {
    bool found = false;
    for (std::size_t at = environ.find(mark); at != std::string::npos && !found;
         at = environ.find(mark, at + 1)) {
      const std::size_t end = at + mark.size();
      found = (at == 0 || environ[at - 1] == '\0') &&
              (end == environ.size() || environ[end] == '\0');
    }
    if (!found) return false;
  }
  return true;
}

}  // namespace

std::optional<ProcStat> ReadProcStat(pid_t pid) {
  // "pid (comm) state ppid pgrp …": comm may hold spaces and parentheses, so the
  // fields are read after its last ')'. proc(5) numbers them from 1 (the pid).
  const std::string stat = ReadSmallFile("/proc/" + std::to_string(pid) + "/stat");
  const std::size_t name_end = stat.rfind(')');
  if (name_end == std::string::npos) return std::nullopt;
  ProcStat s;
  int ppid = 0;
  int pgrp = 0;
  if (std::sscanf(stat.c_str() + name_end + 1, " %c %d %d", &s.state, &ppid, &pgrp) != 3) {
    return std::nullopt;
  }
  s.ppid = ppid;
  s.pgrp = pgrp;
  constexpr unsigned long kPfKthread = 0x00200000;
  const char* p = stat.c_str() + name_end + 1;
  for (int field = 3; field <= 51 && *p != '\0'; ++field) {
    char* end = nullptr;
    while (*p == ' ') ++p;
    const unsigned long value = std::strtoul(p, &end, 10);
    if (field == 9) s.kernel_thread = (value & kPfKthread) != 0;
    if (field == 50) s.env_start = value;
    if (field == 51) s.env_end = value;
    p = end != p ? end : p + 1;  // the state letter is no number
  }
  return s;
}

bool GroupHasLiveProcess(pid_t pgid) {
  if (kill(-pgid, 0) != 0) return false;  // ESRCH: nobody (EPERM: none we may signal)
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return true;
  bool live = false;
  while (const dirent* entry = readdir(proc)) {
    if (!IsPidName(entry->d_name)) continue;
    const std::optional<ProcStat> s = ReadProcStat(static_cast<pid_t>(std::atoi(entry->d_name)));
    if (s && s->pgrp == pgid && s->live()) {
      live = true;
      break;
    }
  }
  closedir(proc);
  return live;
}

std::vector<pid_t> EscapedDescendants(pid_t leader) {
  std::vector<pid_t> escaped;
  std::vector<pid_t> frontier = {leader};
  std::unordered_set<pid_t> seen = {leader};
  while (!frontier.empty() && seen.size() < kMaxDescendants) {
    const pid_t pid = frontier.back();
    frontier.pop_back();
    std::vector<pid_t> children;
    AppendChildren(pid, children);
    for (pid_t child : children) {
      if (!seen.insert(child).second) continue;
      frontier.push_back(child);
      const std::optional<ProcStat> s = ReadProcStat(child);
      if (s && s->pgrp != leader && s->live()) escaped.push_back(child);
    }
  }
  return escaped;
}

std::vector<std::string> RunMarks(const std::map<std::string, std::string>& env) {
  std::vector<std::string> marks;
  for (const char* key : {"TICKD_JOB", "TICKD_TICK", "TICKD_FENCE", "TICKD_NODE"}) {
    const auto it = env.find(key);
    if (it != env.end()) {
      marks.push_back(std::string(key) + "=" + it->second);
    } else if (std::string_view(key) != "TICKD_NODE") {
      return {};  // not a run's environment
    }
  }
  return marks;
}

std::vector<std::vector<pid_t>> MarkedProcesses(const std::vector<MarkedRun>& runs) {
  std::vector<std::vector<pid_t>> found(runs.size());
  const bool any_marks =
      std::any_of(runs.begin(), runs.end(), [](const MarkedRun& r) { return !r.marks.empty(); });
  if (!any_marks) return found;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return found;
  const pid_t self = getpid();
  while (const dirent* entry = readdir(proc)) {
    if (!IsPidName(entry->d_name)) continue;
    const pid_t pid = static_cast<pid_t>(std::atoi(entry->d_name));
    if (pid == self) continue;
    const std::optional<std::string> environ = ReadEnviron(pid);
    if (!environ || environ->empty()) continue;  // not ours to read, gone, or none
    std::optional<ProcStat> stat;  // read once, when some run's marks match
    for (std::size_t i = 0; i < runs.size(); ++i) {
      if (runs[i].marks.empty() || !HoldsAll(*environ, runs[i].marks)) continue;
      if (!stat) stat = ReadProcStat(pid);
      if (stat && stat->pgrp != runs[i].pgid && stat->live()) {
        found[i].push_back(pid);
      }
    }
  }
  closedir(proc);
  return found;
}

std::vector<pid_t> MarkedProcessesShared(const MarkedRun& run) {
  // Whoever finds no scan under way scans for every request waiting then; the others
  // wait for their answer, or, once that scan is over unanswered, scan next.
  struct Request {
    const MarkedRun* run;
    std::vector<pid_t> found;
    bool answered = false;
  };
  struct Shared {
    std::mutex mu;
    std::condition_variable scanned;
    bool scanning = false;
    std::vector<Request*> waiting;
  };
  static Shared* const shared = new Shared;  // never destroyed: runs may end at exit

  Request request{&run};
  std::unique_lock<std::mutex> lock(shared->mu);
  shared->waiting.push_back(&request);
  while (!request.answered) {
    if (shared->scanning) {
      shared->scanned.wait(lock);
      continue;
    }
    shared->scanning = true;
    std::vector<Request*> batch;
    batch.swap(shared->waiting);
    lock.unlock();
    std::vector<std::vector<pid_t>> found;
    try {
      std::vector<MarkedRun> runs;
      runs.reserve(batch.size());
      for (const Request* r : batch) runs.push_back(*r->run);
      found = MarkedProcesses(runs);
    } catch (...) {  // bad_alloc: the others' requests go back, for one of them to scan
      lock.lock();
      std::erase(batch, &request);
      shared->waiting.insert(shared->waiting.end(), batch.begin(), batch.end());
      shared->scanning = false;
      shared->scanned.notify_all();
      throw;
    }
    lock.lock();
    for (std::size_t i = 0; i < batch.size(); ++i) {
      batch[i]->found = std::move(found[i]);
      batch[i]->answered = true;
    }
    shared->scanning = false;
    shared->scanned.notify_all();
  }
  return std::move(request.found);
}

bool LiveAndMarked(pid_t pid, const std::vector<std::string>& marks) {
  if (marks.empty()) return false;
  const std::optional<ProcStat> s = ReadProcStat(pid);
  if (!s || !s->live()) return false;
  const std::optional<std::string> environ = ReadEnviron(pid);
  return environ && HoldsAll(*environ, marks);
}

Signalled SignalRun(pid_t leader, bool leader_ours, std::initializer_list<int> signals) {
  Signalled out;
  if (leader_ours) out.outside = EscapedDescendants(leader);
  for (int sig : signals) {
    out.any = kill(-leader, sig) == 0 || out.any;
    for (pid_t pid : out.outside) out.any = kill(pid, sig) == 0 || out.any;
  }
  return out;
}

bool SignalEach(const std::vector<pid_t>& pids, const std::vector<pid_t>& skip,
                std::initializer_list<int> signals) {
  bool any = false;
  for (pid_t pid : pids) {
    if (std::find(skip.begin(), skip.end(), pid) != skip.end()) continue;
    for (int sig : signals) any = kill(pid, sig) == 0 || any;
  }
  return any;
}

}  // namespace tickd::jobs
