// The lease guard (app/lease_guard.h) as the daemon drives it: a real `tickd
// lease-guard` process and real process groups (`sleep` in a group of its own).
#include "app/lease_guard.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "jobs/process_tree.h"

namespace tickd::app {
namespace {

using namespace std::chrono_literals;

// A `sleep 60` (or `sh -c shell_command`) leading a process group of its own; killed
// and reaped when destroyed.
class Group {
 public:
  explicit Group(const char* shell_command = nullptr) {
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setpgid(0, 0);
      if (shell_command != nullptr) {
        ::execl("/bin/sh", "sh", "-c", shell_command, static_cast<char*>(nullptr));
      } else {
        ::execlp("sleep", "sleep", "60", static_cast<char*>(nullptr));
      }
      ::_exit(127);
    }
    ::setpgid(pid_, pid_);  // also here: no race with the child's own call
  }
  ~Group() {
    ::kill(-pid_, SIGKILL);
    Ended(0ms);
  }
  pid_t pgid() const { return pid_; }
  // Whether it ended (reaped here) within `d`.
  bool Ended(std::chrono::milliseconds d) {
    const auto until = std::chrono::steady_clock::now() + d;
    do {
      if (reaped_) return true;
      if (::waitpid(pid_, &status_, WNOHANG) == pid_) {
        reaped_ = true;
        return true;
      }
      std::this_thread::sleep_for(10ms);
    } while (std::chrono::steady_clock::now() < until);
    return false;
  }
  // The signal that ended it (once Ended), 0 if none did.
  int Signal() const { return reaped_ && WIFSIGNALED(status_) ? WTERMSIG(status_) : 0; }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  int status_ = 0;
};

SteadyTime SteadyIn(std::chrono::milliseconds d) {
  return std::chrono::time_point_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() +
                                                                 d);
}

TEST_CASE("lease guard: kills a group at its valid_until, not one disarmed or armed again later",
          "[e2e][lease]") {
  auto guard = LeaseGuard::Start(TICKD_BINARY, "logfmt");
  REQUIRE(guard);
  Group expires, disarmed, moved;
  (*guard)->Arm(expires.pgid(), SteadyIn(300ms), SteadyIn(300ms), "a", "t");
  (*guard)->Arm(disarmed.pgid(), SteadyIn(2'000ms), SteadyIn(2'000ms), "b", "t");
  (*guard)->Disarm(disarmed.pgid());
  (*guard)->Arm(moved.pgid(), SteadyIn(2'000ms), SteadyIn(2'000ms), "c", "t");
  // A renewal moved it:
  (*guard)->Arm(moved.pgid(), SteadyIn(60'000ms), SteadyIn(60'000ms), "c", "t");
  CHECK(expires.Ended(30'000ms));
  std::this_thread::sleep_for(2'500ms);  // past the others' first deadlines
  CHECK_FALSE(disarmed.Ended(0ms));
  CHECK_FALSE(moved.Ended(0ms));
}

TEST_CASE("lease guard: one stopped for a while reads the later deadlines before it judges",
          "[e2e][lease]") {
  auto guard = LeaseGuard::Start(TICKD_BINARY, "logfmt");
  REQUIRE(guard);
  Group renewed;
  (*guard)->Arm(renewed.pgid(), SteadyIn(500ms), SteadyIn(500ms), "a", "t");
  std::this_thread::sleep_for(100ms);  // the first arm read
  REQUIRE(::kill((*guard)->pid(), SIGSTOP) == 0);
  // More than one read's worth (64 KiB) of other runs' commands queues up while it is
  // stopped, then this run's renewal.
  for (int i = 0; i < 10'000; ++i) (*guard)->Disarm(4'000'000 + i % 1'000);
  REQUIRE((*guard)->Arm(renewed.pgid(), SteadyIn(60'000ms), SteadyIn(60'000ms), "a", "t"));
  std::this_thread::sleep_for(1'000ms);  // past the first deadline
  REQUIRE(::kill((*guard)->pid(), SIGCONT) == 0);
  CHECK_FALSE(renewed.Ended(1'000ms));
}

TEST_CASE("lease guard: leaves the SIGTERM at valid_until − stop_grace to a daemon that runs",
          "[e2e][lease]") {
  auto guard = LeaseGuard::Start(TICKD_BINARY, "logfmt");
  REQUIRE(guard);
  Group running;
  (*guard)->Arm(running.pgid(), SteadyIn(200ms), SteadyIn(60'000ms), "a", "t");
  CHECK_FALSE(running.Ended(1'500ms));  // this process, its daemon, runs
}

TEST_CASE("lease guard: SIGTERMs a group at valid_until − stop_grace when the daemon is stopped",
          "[e2e][lease]") {
  Group run;
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  // A stand-in daemon: a child that starts the guard, arms `run` (term_at in 1 s,
  // valid_until in a minute), says so and stops itself, long before term_at.
  const pid_t daemon = ::fork();
  REQUIRE(daemon >= 0);
  if (daemon == 0) {
    auto guard = LeaseGuard::Start(TICKD_BINARY, "logfmt");
    const bool armed =
        guard && (*guard)->Arm(run.pgid(), SteadyIn(1'000ms), SteadyIn(60'000ms), "a", "t");
    (void)!::write(ready[1], armed ? "1" : "0", 1);
    ::raise(SIGSTOP);
    while (true) ::pause();
  }
  char armed = 0;
  REQUIRE(::read(ready[0], &armed, 1) == 1);
  const bool ended = run.Ended(30'000ms);  // long before valid_until
  ::kill(daemon, SIGKILL);                 // its pipe ends: the guard exits
  ::waitpid(daemon, nullptr, 0);
  ::close(ready[0]);
  ::close(ready[1]);
  CHECK(armed == '1');
  CHECK(ended);
  CHECK(run.Signal() == SIGTERM);
}

// Whether process `pid` (not a child of this one) has exited: gone, or a zombie.
bool Exited(pid_t pid) {
  const std::optional<jobs::ProcStat> stat = jobs::ReadProcStat(pid);
  return !stat || stat->state == 'Z';
}

// The pid a run's shell wrote to `said` (of a process it left outside its group), or 0
// when none came within 5 s. Removes the file.
pid_t SaidPid(const std::filesystem::path& said) {
  pid_t pid = 0;
  for (int tries = 0; tries < 500 && pid == 0; ++tries) {
    std::ifstream in(said);
    if (!(in >> pid)) pid = 0;
    if (pid == 0) std::this_thread::sleep_for(10ms);
  }
  std::filesystem::remove(said);
  return pid;
}

// Waits up to 5 s for `pid` to exit; SIGKILLs it if it did not (no stray sleeps).
bool ExitsSoon(pid_t pid) {
  for (int tries = 0; tries < 500; ++tries) {
    if (Exited(pid)) return true;
    std::this_thread::sleep_for(10ms);
  }
  ::kill(pid, SIGKILL);
  return false;
}

// Whether `pid` is out of process group `pgid` within 5 s: it calls setsid a moment
// after its parent wrote its pid.
bool LeavesGroup(pid_t pid, pid_t pgid) {
  for (int tries = 0; tries < 500; ++tries) {
    const std::optional<jobs::ProcStat> stat = jobs::ReadProcStat(pid);
    if (stat && stat->pgrp != pgid) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

std::filesystem::path SaidFile(const std::string& name) {
  return std::filesystem::temp_directory_path() /
         ("tickd-" + name + "-" + std::to_string(::getpid()));
}

TEST_CASE("lease guard: kills what left the group below its first process, at valid_until",
          "[e2e][lease]") {
  // The run's shell starts a sleep in a session of its own (GNU `timeout` makes a group
  // of its own the same way), says its pid and waits for it.
  const std::filesystem::path said = SaidFile("escaped");
  const std::string command = "setsid sleep 60 & echo $! > " + said.string() + "; wait";
  Group run(command.c_str());
  const pid_t escaped = SaidPid(said);
  REQUIRE(escaped > 0);
  CHECK(LeavesGroup(escaped, run.pgid()));
  auto guard = LeaseGuard::Start(TICKD_BINARY, "logfmt");
  REQUIRE(guard);
  (*guard)->Arm(run.pgid(), SteadyIn(300ms), SteadyIn(300ms), "a", "t");
  CHECK(run.Ended(30'000ms));
  CHECK(ExitsSoon(escaped));
}

TEST_CASE("lease guard: the daemon's end kills a run's orphan outside its group by its "
          "environment, and no other run's",
          "[e2e][lease]") {
  // Each shell leaves a sleep in a session of its own whose parent, a subshell, is
  // gone (a daemon's double fork): nothing links it to the run but its environment.
  const auto start = [](const std::string& fence, const std::filesystem::path& said) {
    return "export TICKD_JOB=a TICKD_TICK=t TICKD_FENCE=" + fence + "; (setsid sleep 60 & echo $! > " +
           said.string() + "); exec sleep 60";
  };
  const std::filesystem::path said_run = SaidFile("orphan");
  const std::filesystem::path said_other = SaidFile("other");
  Group run(start("7", said_run).c_str());
  Group other(start("8", said_other).c_str());  // the same job and tick, another attempt
  const pid_t orphan = SaidPid(said_run);
  const pid_t other_orphan = SaidPid(said_other);
  REQUIRE(orphan > 0);
  REQUIRE(other_orphan > 0);
  CHECK(LeavesGroup(orphan, run.pgid()));
  CHECK(LeavesGroup(other_orphan, other.pgid()));
  auto guard = LeaseGuard::Start(TICKD_BINARY, "logfmt");
  REQUIRE(guard);
  (*guard)->Arm(run.pgid(), SteadyIn(60'000ms), SteadyIn(60'000ms), "a", "t", 7);
  guard->reset();  // the pipe closes, as when the daemon dies
  CHECK(run.Ended(30'000ms));
  CHECK(ExitsSoon(orphan));
  CHECK_FALSE(other.Ended(300ms));
  CHECK_FALSE(Exited(other_orphan));
  ::kill(other_orphan, SIGKILL);
}

// Kills the guard process behind `guard`'s back and waits until it is gone. A write to
// its pipe then fails with EPIPE: SIGPIPE is ignored, as tickd run and trigger do.
void KillGuardProcess(LeaseGuard& guard) {
  ::signal(SIGPIPE, SIG_IGN);
  const pid_t pid = guard.pid();
  REQUIRE(::kill(pid, SIGKILL) == 0);
  for (int tries = 0; tries < 500 && !Exited(pid); ++tries) std::this_thread::sleep_for(10ms);
  REQUIRE(Exited(pid));
}

TEST_CASE("lease guard: one that is gone is started again by the next command, which it holds",
          "[e2e][lease]") {
  std::vector<pid_t> restarts;
  auto guard = LeaseGuard::Start(TICKD_BINARY, "logfmt", {}, [&](const Result<pid_t>& pid) {
    restarts.push_back(pid ? *pid : -1);
  });
  REQUIRE(guard);
  const pid_t first = (*guard)->pid();
  KillGuardProcess(**guard);
  Group run;
  REQUIRE((*guard)->Arm(run.pgid(), SteadyIn(300ms), SteadyIn(300ms), "a", "t"));
  CHECK((*guard)->generation() == 1);
  CHECK(restarts == std::vector<pid_t>{(*guard)->pid()});
  CHECK((*guard)->pid() != first);
  CHECK(run.Ended(30'000ms));  // the new guard holds the arm
}

TEST_CASE("lease guard: one that cannot be started again is tried again 2 s later, not sooner",
          "[e2e][lease]") {
  // Started from a copy of tickd that is then removed: every restart fails.
  const std::filesystem::path exe =
      std::filesystem::temp_directory_path() / ("tickd-guard-test-" + std::to_string(::getpid()));
  std::filesystem::copy_file(TICKD_BINARY, exe, std::filesystem::copy_options::overwrite_existing);
  int failures = 0;
  auto guard = LeaseGuard::Start(exe.string(), "logfmt", {}, [&](const Result<pid_t>& pid) {
    failures += pid ? 0 : 1;
  });
  std::filesystem::remove(exe);
  REQUIRE(guard);
  KillGuardProcess(**guard);
  Group run;
  const auto arm = [&] {
    return (*guard)->Arm(run.pgid(), SteadyIn(60'000ms), SteadyIn(60'000ms), "a", "t");
  };
  CHECK_FALSE(arm());  // tried: failed
  CHECK(failures == 1);
  std::this_thread::sleep_for(1'200ms);
  CHECK_FALSE(arm());  // a failure doubles the wait to 2 s: not tried yet
  CHECK(failures == 1);
  std::this_thread::sleep_for(1'000ms);
  CHECK_FALSE(arm());  // tried again: failed
  CHECK(failures == 2);
  CHECK((*guard)->generation() == 0);
}

TEST_CASE("lease guard: Check finds a guard gone while nothing was sent, and starts another",
          "[e2e][lease]") {
  auto guard = LeaseGuard::Start(TICKD_BINARY, "logfmt");
  REQUIRE(guard);
  (*guard)->Check();  // there: nothing changes
  CHECK((*guard)->generation() == 0);
  KillGuardProcess(**guard);
  // At most one check every kCheckEveryMs, whoever calls.
  std::this_thread::sleep_for(std::chrono::milliseconds(LeaseGuard::kCheckEveryMs + 100));
  (*guard)->Check();
  CHECK((*guard)->generation() == 1);
  CHECK_FALSE(Exited((*guard)->pid()));
}

TEST_CASE("lease guard: the daemon's end kills every group still armed, at once", "[e2e][lease]") {
  auto guard = LeaseGuard::Start(TICKD_BINARY, "logfmt");
  REQUIRE(guard);
  Group armed, disarmed;
  (*guard)->Arm(armed.pgid(), SteadyIn(60'000ms), SteadyIn(60'000ms), "a", "t");
  (*guard)->Arm(disarmed.pgid(), SteadyIn(60'000ms), SteadyIn(60'000ms), "b", "t");
  (*guard)->Disarm(disarmed.pgid());
  guard->reset();  // the pipe closes, as when the daemon dies; the guard is reaped
  CHECK(armed.Ended(30'000ms));
  CHECK_FALSE(disarmed.Ended(500ms));
}

TEST_CASE("lease guard: holds none of the daemon's descriptors but its pipe, stdout and stderr",
          "[e2e][lease]") {
  int leaked[2];
  REQUIRE(::pipe(leaked) == 0);  // without O_CLOEXEC, as a library might open one
  auto guard = LeaseGuard::Start(TICKD_BINARY, "logfmt");
  ::close(leaked[0]);
  ::close(leaked[1]);
  REQUIRE(guard);
  const std::string fd_dir = "/proc/" + std::to_string((*guard)->pid()) + "/fd";
  std::vector<std::string> open;
  for (int tries = 0; tries < 100; ++tries) {  // until it runs tickd (posix_spawn returned)
    open.clear();
    for (const auto& entry : std::filesystem::directory_iterator(fd_dir)) {
      open.push_back(entry.path().filename().string());
    }
    std::sort(open.begin(), open.end());
    if (open == std::vector<std::string>{"0", "1", "2"}) break;
    std::this_thread::sleep_for(20ms);
  }
  CHECK(open == std::vector<std::string>{"0", "1", "2"});
}

TEST_CASE("lease guard: `killall tickd` (an exact process name) does not reach it",
          "[e2e][lease]") {
  auto guard = LeaseGuard::Start(TICKD_BINARY, "logfmt");
  REQUIRE(guard);
  std::string comm;
  for (int tries = 0; tries < 100 && comm != "tickd-guard\n"; ++tries) {  // until it runs
    std::ifstream in("/proc/" + std::to_string((*guard)->pid()) + "/comm");
    comm.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    std::this_thread::sleep_for(20ms);
  }
  CHECK(comm == "tickd-guard\n");
}

}  // namespace
}  // namespace tickd::app
