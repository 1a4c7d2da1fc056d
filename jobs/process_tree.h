// What /proc tells of a run's processes, so that everything a run started ends with
// it: the daemon's supervision (process.cc) and its lease guard (app/lease_guard.cc).
// Linux only.
#pragma once

#include <sys/types.h>

#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tickd::jobs {

// The fields of /proc/PID/stat that tickd reads; nullopt once the process is gone.
struct ProcStat {
  char state = 0;  // R, S, D, T, t, Z, …
  pid_t ppid = 0;
  pid_t pgrp = 0;
  bool kernel_thread = false;  // PF_KTHREAD in its flags: no environment, ever
  // Where its environment lies in its memory (fields 50 and 51): 0 while it has none
  // there yet — between an exec's new memory and the kernel's copy of the environment
  // into it — or none any more (exiting), or when it is not ours to read.
  unsigned long env_start = 0;
  unsigned long env_end = 0;
  bool live() const { return state != 'Z' && state != 'X'; }  // not a zombie, not dead
};
std::optional<ProcStat> ReadProcStat(pid_t pid);

// Whether process group `pgid` has a process that is not a zombie: a kill(-pgid, 0),
// and a scan of /proc only when that finds someone. An orphan's zombie stays in its
// group until whoever adopted it reaps it, which a container's first process may do
// seconds later; it does nothing meanwhile. /proc unreadable: as kill() said.
bool GroupHasLiveProcess(pid_t pgid);

// The live processes descended from `leader` (its children, theirs, …) that left its
// process group `leader`: `setsid`, GNU `timeout` (a group of its own unless given
// --foreground), a shell's job control. Read from /proc/PID/task/TID/children, at
// most 4,096 of them. A process whose parent died went to init and is not found.
// REQUIRES: `leader` is a live or unreaped process of the caller's, so that its pid
// names it and not a reused one.
std::vector<pid_t> EscapedDescendants(pid_t leader);

// The environment entries that mark a run's processes ("TICKD_JOB=…", "TICKD_TICK=…",
// "TICKD_FENCE=…", and "TICKD_NODE=…" when `env` has it; design.md §5), taken from what
// the run was given: together they name one attempt of one tick. Empty when `env` lacks
// TICKD_JOB, TICKD_TICK or TICKD_FENCE.
std::vector<std::string> RunMarks(const std::map<std::string, std::string>& env);

// A run to look for by its marks: the live processes outside its group `pgid`, other
// than this one, whose environment as they were started holds every one of `marks`
// (none when `marks` is empty) — a run's processes however far they went (a daemon's
// double fork, a parent that died) unless they dropped those variables.
struct MarkedRun {
  std::vector<std::string> marks;
  pid_t pgid = 0;
};
// For each of `runs`, its processes so found, in one scan of /proc/*/environ (the
// processes this one may read): a read per process on the host, about 2 µs each. A
// process caught in an exec, whose environment reads empty for that moment, is read
// again until it is there (at most 250 ms, then passed over).
std::vector<std::vector<pid_t>> MarkedProcesses(const std::vector<MarkedRun>& runs);

// MarkedProcesses for one run, in a scan shared with whoever asks meanwhile: the caller
// waits for a scan that began after its call (so it sees what the run left by then),
// and the runs that end together, a busy instant's or a lost store's, share one. For
// every run's end and signal.
std::vector<pid_t> MarkedProcessesShared(const MarkedRun& run);

// Whether `pid` is live and its environment holds every one of `marks` (false when
// `marks` is empty): one of a run's processes found before, still there, and not a
// reused pid. An exec under way is waited out as by MarkedProcesses.
bool LiveAndMarked(pid_t pid, const std::vector<std::string>& marks);

// Sends each of `signals` to process group `leader` and, while `leader_ours` (REQUIRES
// as for EscapedDescendants), to its EscapedDescendants, found first (the leader may die
// of the first signal and hand its children to init). Cheap: no scan of /proc.
struct Signalled {
  bool any = false;           // something was there to signal
  std::vector<pid_t> outside;  // the processes signalled outside the group
};
Signalled SignalRun(pid_t leader, bool leader_ours, std::initializer_list<int> signals);

// Sends each of `signals` to every one of `pids` not in `skip`; true if any was there.
bool SignalEach(const std::vector<pid_t>& pids, const std::vector<pid_t>& skip,
                std::initializer_list<int> signals);

}  // namespace tickd::jobs
