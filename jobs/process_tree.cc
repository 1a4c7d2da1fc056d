#include "jobs/process_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_set>

namespace tickd::jobs {
namespace {

constexpr std::size_t kMaxDescendants = 4096;

// Whole file, small: /proc's files have no size to stat.
std::string ReadSmallFile(const std::string& path) {
  std::string out;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buffer[4096];
  ssize_t n;
  while ((n = read(fd, buffer, sizeof buffer)) > 0) out.append(buffer, static_cast<std::size_t>(n));
  close(fd);
  return out;
}

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

}  // namespace

std::optional<ProcStat> ReadProcStat(pid_t pid) {
  // "pid (comm) state ppid pgrp …": comm may hold spaces and parentheses, so the
  // fields are read after its last ')'.
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
  return s;
}

bool GroupHasLiveProcess(pid_t pgid) {
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return true;
  bool live = false;
  while (const dirent* entry = readdir(proc)) {
    if (!IsPidName(entry->d_name)) continue;
    const std::optional<ProcStat> s = ReadProcStat(static_cast<pid_t>(std::atoi(entry->d_name)));
    if (s && s->pgrp == pgid && s->state != 'Z' && s->state != 'X') {
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
      if (s && s->pgrp != leader && s->state != 'Z' && s->state != 'X') escaped.push_back(child);
    }
  }
  return escaped;
}

void SignalRunTree(pid_t leader, int sig) {
  const std::vector<pid_t> escaped = EscapedDescendants(leader);
  (void)kill(-leader, sig);
  for (pid_t pid : escaped) (void)kill(pid, sig);
}

}  // namespace tickd::jobs
