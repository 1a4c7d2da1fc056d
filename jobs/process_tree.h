// What /proc tells of a run's processes, so that everything a run started ends with
// it: the daemon's supervision (process.cc) and its lease guard (app/lease_guard.cc).
// Linux only.
#pragma once

#include <sys/types.h>

#include <optional>
#include <vector>

namespace tickd::jobs {

// The fields of /proc/PID/stat that tickd reads; nullopt once the process is gone.
struct ProcStat {
  char state = 0;  // R, S, D, T, t, Z, …
  pid_t ppid = 0;
  pid_t pgrp = 0;
};
std::optional<ProcStat> ReadProcStat(pid_t pid);

// Whether process group `pgid` has a process that is not a zombie (a scan of /proc).
// An orphan's zombie stays in its group until whoever adopted it reaps it, which a
// container's first process may do seconds later; it does nothing meanwhile.
// /proc unreadable: true.
bool GroupHasLiveProcess(pid_t pgid);

// The live processes descended from `leader` (its children, theirs, …) that left its
// process group `leader`: `setsid`, GNU `timeout` (a group of its own unless given
// --foreground), a shell's job control. Read from /proc/PID/task/TID/children, at
// most 4,096 of them. A process whose parent died went to init and is not found.
// REQUIRES: `leader` is a live or unreaped process of the caller's, so that its pid
// names it and not a reused one.
std::vector<pid_t> EscapedDescendants(pid_t leader);

// Sends `sig` to process group `leader` and to its EscapedDescendants, found first
// (the leader may die of the signal and hand its children to init). ESRCH is no
// error: nothing left to signal. REQUIRES: as EscapedDescendants.
void SignalRunTree(pid_t leader, int sig);

}  // namespace tickd::jobs
