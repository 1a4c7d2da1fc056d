#include "app/lease_guard.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>
#include <vector>

#include "app/log.h"
#include "jobs/process_tree.h"

extern char** environ;

namespace tickd::app {
namespace {

// The pipe holds this much (F_SETPIPE_SZ; the default 1 MiB pipe-max-size): arms of
// thousands of runs of one instant fit while the guard reads them.
constexpr int kPipeBytes = 1 << 20;

struct Armed {
  std::int64_t valid_until_ms = 0;  // CLOCK_MONOTONIC, ms
  std::int64_t term_at_ms = 0;      // valid_until − stop_grace
  bool term_judged = false;         // term_at passed: SIGTERMed, or the daemon ran then
  std::string job;
  std::string tick;
  std::uint64_t fence = 0;  // 0: the run's processes are not looked for by environment
};

// Whether process `pid` is stopped: by a signal (SIGSTOP, SIGTSTP) or by a tracer (a
// debugger). Its state is the field after the parenthesised name in /proc/PID/stat.
bool IsStopped(pid_t pid) {
  const std::optional<jobs::ProcStat> stat = jobs::ReadProcStat(pid);
  return stat && (stat->state == 'T' || stat->state == 't');
}

std::int64_t MonotonicMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The guard process: `argv0 lease-guard --log-format F`, run from `exe`, reading the
// returned descriptor's other end. Errors: the pipe, the process.
struct Spawned {
  int fd = -1;
  pid_t pid = -1;
};
Result<Spawned> SpawnGuard(const std::string& exe, const std::string& argv0,
                           const std::string& log_format) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    return MakeError("lease guard", std::string("pipe: ") + std::strerror(errno));
  }
  (void)::fcntl(fds[1], F_SETPIPE_SZ, kPipeBytes);  // best effort: the default is 64 KiB
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[0], STDIN_FILENO);
  // Nothing else of the daemon's: a descriptor a library opened without O_CLOEXEC would
  // otherwise stay open in the guard (stdout and stderr stay: its log lines).
  posix_spawn_file_actions_addclosefrom_np(&actions, STDERR_FILENO + 1);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // A group of its own: a signal to the daemon's group (kill -STOP -PGID, a terminal's
  // ^Z) does not stop the guard with it.
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  std::vector<std::string> args = {argv0, "lease-guard", "--log-format", log_format};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, exe.c_str(), &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(fds[0]);
  if (rc != 0) {
    ::close(fds[1]);
    return MakeError("lease guard", exe + ": " + std::strerror(rc));
  }
  // A guard too slow to read is never waited for by a supervisor (its own deadlines
  // come first): a command that does not fit is dropped (Send).
  (void)::fcntl(fds[1], F_SETFL, O_NONBLOCK);
  return Spawned{fds[1], pid};
}

// Reaps a guard whose pipe failed: SIGKILL first, so that one not yet gone cannot hold
// the wait up.
void EndGuard(pid_t pid) {
  (void)::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace

Result<std::unique_ptr<LeaseGuard>> LeaseGuard::Start(const std::string& exe,
                                                      const std::string& log_format,
                                                      std::string argv0, Restarted restarted) {
  if (argv0.empty()) argv0 = exe;
  Result<Spawned> spawned = SpawnGuard(exe, argv0, log_format);
  if (!spawned) return tl::unexpected(spawned.error());
  return std::unique_ptr<LeaseGuard>(new LeaseGuard(exe, std::move(argv0), log_format,
                                                    std::move(restarted), spawned->fd,
                                                    spawned->pid));
}

LeaseGuard::~LeaseGuard() {
  std::lock_guard lock(mu_);
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  // The pipe's end: the guard kills what is still armed (nothing, after a drain), exits.
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
}

bool LeaseGuard::Arm(pid_t pgid, SteadyTime term_at, SteadyTime valid_until,
                     const std::string& job, const std::string& tick, std::uint64_t fence) {
  return Send("A " + std::to_string(pgid) + " " +
              std::to_string(valid_until.time_since_epoch().count()) + " " +
              std::to_string(term_at.time_since_epoch().count()) + " " + job + " " + tick +
              " " + std::to_string(fence) + "\n");
}

void LeaseGuard::Disarm(pid_t pgid) { (void)Send("D " + std::to_string(pgid) + "\n"); }

bool LeaseGuard::Send(const std::string& line) {
  std::lock_guard lock(mu_);
  if (fd_ >= 0 && WriteLocked(line)) return true;
  if (fd_ >= 0 && errno != EPIPE) return false;  // full: the guard is behind, or stopped
  // EPIPE: the guard is gone (SIGPIPE is ignored by the commands that start it). A new
  // one knows none of the earlier arms: the supervisors see generation() move and arm
  // theirs again (RunSupervisor::Upkeep). Restarts at least 1 s apart, and after a
  // failure twice as far as before, up to a minute: one that cannot start does not
  // fill the log.
  const std::int64_t now = MonotonicMs();
  if (restart_tried_ms_ && now - *restart_tried_ms_ < restart_backoff_ms_) return false;
  restart_tried_ms_ = now;
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
    EndGuard(pid_);
  }
  Result<Spawned> spawned = SpawnGuard(exe_, argv0_, log_format_);
  if (restarted_) {
    restarted_(spawned ? Result<pid_t>(spawned->pid) : tl::unexpected(spawned.error()));
  }
  if (!spawned) {
    restart_backoff_ms_ = std::min<std::int64_t>(restart_backoff_ms_ * 2, 60'000);
    return false;
  }
  restart_backoff_ms_ = 1'000;
  fd_ = spawned->fd;
  pid_ = spawned->pid;
  generation_.fetch_add(1);
  return WriteLocked(line);
}

bool LeaseGuard::WriteLocked(const std::string& line) {
  // Under PIPE_BUF: written whole or not at all.
  ssize_t n;
  while ((n = ::write(fd_, line.data(), line.size())) < 0 && errno == EINTR) {
  }
  return n == static_cast<ssize_t>(line.size());
}

void LeaseGuard::Check() {
  const std::int64_t now = MonotonicMs();
  std::int64_t last = last_check_ms_.load();
  if (now - last < kCheckEveryMs || !last_check_ms_.compare_exchange_strong(last, now)) return;
  (void)Send("\n");  // an empty line: the guard reads no command in it
}

pid_t LeaseGuard::pid() const {
  std::lock_guard lock(mu_);
  return pid_;
}

std::unique_ptr<LeaseGuard> StartLeaseGuard(Logger& log, const std::string& log_format,
                                            const std::string& node) {
  // Run from /proc/self/exe, this very executable even after a package upgrade replaced
  // its file (a restarted guard must speak this daemon's commands); shown by its path.
  std::error_code ec;
  std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  if (ec) self = "tickd";
  const auto restarted = [&log, node](const Result<pid_t>& pid) {
    if (pid) {
      log.Log(LogLevel::kWarn, "lease-guard",
              {{"node", node}, {"outcome", "restarted"}, {"pid", static_cast<long long>(*pid)}});
    } else {
      log.Log(LogLevel::kWarn, "lease-guard",
              {{"node", node}, {"outcome", "unavailable"}, {"error", pid.error().ToString()}});
    }
  };
  Result<std::unique_ptr<LeaseGuard>> guard =
      LeaseGuard::Start("/proc/self/exe", log_format, self, restarted);
  if (guard) return std::move(*guard);
  log.Log(LogLevel::kWarn, "lease-guard",
          {{"node", node}, {"outcome", "unavailable"}, {"error", guard.error().ToString()}});
  return nullptr;
}

int RunLeaseGuard(const std::string& log_format) {
  // A name of its own (ps -o comm, top): `killall tickd` or `pkill -x tickd`, meant for
  // the daemons, would otherwise end the guard with them, and no one would then end
  // the runs the daemons left. Its command line stays `tickd lease-guard …`.
  (void)::prctl(PR_SET_NAME, "tickd-guard");
  // SIGPIPE, SIGHUP, SIGINT, SIGTERM: only the pipe's end ends the guard (the daemon's
  // is what stops it), so that a signal reaching it first leaves no run unguarded.
  ::signal(SIGPIPE, SIG_IGN);
  ::signal(SIGHUP, SIG_IGN);
  ::signal(SIGINT, SIG_IGN);
  ::signal(SIGTERM, SIG_IGN);  // systemd's stop signals the whole cgroup: the daemon drains
  const LogFormat format = LogFormatFromName(log_format).value_or(LogFormat::kLogfmt);
  const pid_t daemon = ::getppid();
  RealClock clock;
  std::map<pid_t, Armed> armed;
  const auto say = [&](pid_t pgid, const Armed& a, int sig, std::string_view why) {
    const Field fields[] = {{"job", a.job},
                            {"tick", a.tick},
                            {"pgid", static_cast<long long>(pgid)},
                            {"outcome", sig == SIGKILL ? "killed" : "terminated"},
                            {"reason", why}};
    const std::string line = FormatLine(format, clock.Wall(), LogLevel::kWarn, "lease-guard", fields);
    (void)!::write(STDERR_FILENO, line.data(), line.size());
  };
  // A run's signal goes to its group at once, with what left the group from below its
  // first process (`setsid`, GNU `timeout`); the guard is not that process's parent, so
  // it looks below it only while it still heads its group (its pid then is not a
  // reused one). What left it and whose parent died (a daemon's double fork; what the
  // first process had below it when it died with the daemon) is found by its
  // environment afterwards, in one scan for every run signalled in the same pass
  // (signal_marked): a scan per run would delay the next runs' signals.
  struct SignalledRun {
    pid_t pgid;
    Armed run;
    int sig;
    std::string_view why;
    jobs::Signalled at_once;
  };
  std::vector<SignalledRun> pass;
  const auto signal_group = [&](pid_t pgid, const Armed& a, int sig, std::string_view why) {
    const std::optional<jobs::ProcStat> leader = jobs::ReadProcStat(pgid);
    const bool leader_heads_group = leader && leader->pgrp == pgid;
    jobs::Signalled at_once = jobs::SignalRun(pgid, leader_heads_group, {sig});
    if (at_once.any) say(pgid, a, sig, why);
    if (a.fence != 0) pass.push_back({pgid, a, sig, why, std::move(at_once)});
  };
  const auto signal_marked = [&] {
    std::vector<jobs::MarkedRun> runs;
    for (const SignalledRun& s : pass) {
      runs.push_back({jobs::RunMarks({{"TICKD_JOB", s.run.job},
                                      {"TICKD_TICK", s.run.tick},
                                      {"TICKD_FENCE", std::to_string(s.run.fence)}}),
                      s.pgid});
    }
    const std::vector<std::vector<pid_t>> found = jobs::MarkedProcesses(runs);
    for (std::size_t i = 0; i < pass.size(); ++i) {
      const SignalledRun& s = pass[i];
      if (jobs::SignalEach(found[i], s.at_once.outside, {s.sig}) && !s.at_once.any) {
        say(s.pgid, s.run, s.sig, s.why);
      }
    }
    pass.clear();
  };
  std::string pending;
  char buf[65536];
  while (true) {
    int timeout = -1;
    const std::int64_t now = MonotonicMs();
    for (const auto& [pgid, a] : armed) {
      const std::int64_t next = a.term_judged ? a.valid_until_ms : a.term_at_ms;
      const std::int64_t left = std::max<std::int64_t>(0, next - now);
      if (timeout < 0 || left < timeout) timeout = static_cast<int>(std::min<std::int64_t>(left, 60'000));
    }
    pollfd p{STDIN_FILENO, POLLIN, 0};
    int ready = ::poll(&p, 1, timeout);
    if (ready < 0 && errno != EINTR) return 1;
    // Everything queued is read before any deadline is judged: a guard that was behind
    // (stopped, starved) must see the renewals' later deadlines first.
    while (ready > 0) {
      const ssize_t n = ::read(STDIN_FILENO, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {  // the daemon is gone: nobody ends its runs now
        for (const auto& [pgid, a] : armed) signal_group(pgid, a, SIGKILL, "daemon-gone");
        signal_marked();
        return 0;
      }
      pending.append(buf, static_cast<std::size_t>(n));
      std::size_t start = 0;
      for (std::size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1) {
        std::istringstream cmd(pending.substr(start, nl - start));
        char op = 0;
        long long pgid = 0;
        cmd >> op >> pgid;
        if (!cmd || pgid <= 1) continue;
        if (op == 'D') {
          armed.erase(static_cast<pid_t>(pgid));
        } else if (op == 'A') {
          Armed a;
          cmd >> a.valid_until_ms >> a.term_at_ms >> a.job >> a.tick;
          if (!cmd) continue;
          cmd >> a.fence;  // an arm without one leaves it 0: none
          armed[static_cast<pid_t>(pgid)] = std::move(a);
        }
      }
      pending.erase(0, start);
      ready = ::poll(&p, 1, 0);
    }
    const std::int64_t after = MonotonicMs();
    for (auto it = armed.begin(); it != armed.end();) {
      Armed& a = it->second;
      if (a.valid_until_ms <= after) {
        signal_group(it->first, a, SIGKILL, "valid-until");
        it = armed.erase(it);
        continue;
      }
      // The daemon's own SIGTERM is due now; one that is stopped cannot send it.
      if (!a.term_judged && a.term_at_ms <= after) {
        a.term_judged = true;
        if (IsStopped(daemon)) signal_group(it->first, a, SIGTERM, "daemon-stopped");
      }
      ++it;
    }
    signal_marked();
  }
}

}  // namespace tickd::app
