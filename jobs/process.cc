// Child processes of tickd. This is the only file that spawns, signals or reaps
// (LevelDB's port/ idea): everything else sees Execution.
//
// How a run is supervised. StartProcess spawns the job (SpawnChild below: a vfork-style
// clone that execs at once) as the leader of a new process group (pgid == pid), with
// stdin from /dev/null (or ProcessSpec::stdin_data, in a memfd), stdout and stderr on
// two pipes, an empty signal mask, default dispositions (the daemon blocks and ignores
// signals; its jobs must not inherit that) and SIGKILL as its parent-death signal.
// The run has no thread of its own: the thread that waits for it (WaitFor, the
// destructor) drives it, poll()ing on both pipes (lines go to the OutputSink),
// a pidfd of the child (readable once it has
// exited; without pidfd support it polls waitid every 20 ms) and an eventfd that
// Terminate() writes to. (A thread per run, beside the run supervisor's own, was a
// third of the daemon's cost per run when 100 jobs start in the same second.) It
//  - sends SIGTERM (+ SIGCONT, so a stopped job sees it) to the group when the
//    timeout passes or Terminate() asks, and SIGKILL to the group kill_grace later,
//    or at once when Kill() asks (a lease that ends, app/run_supervisor.h); each
//    also to what of the run left its group (process_tree.h): the processes below
//    the child, and those whose environment carries the run's TICKD_* marks;
//  - when the child has exited but is not yet reaped, SIGKILLs what is left of a
//    terminated group (the zombie still holds the group id, so it cannot name a
//    reused pid), then reaps it with waitpid on its pid (never -1: the daemon has
//    other children);
//  - then ends what the job left running (nothing of a run may go on after the run
//    and its lease have ended): in its group (`cmd &` in a shell that then exits:
//    the run is its process group), found by a kill of the group id that finds a
//    process that is not a zombie (they hold the id now), and outside it (`setsid`, a
//    double fork), found by the run's marks in a scan of /proc that the runs ending
//    at the same time share: SIGTERM (+ SIGCONT), SIGKILL kill_grace later (at once
//    on Kill()), looking every 20 ms, giving up on any that survive SIGKILL (D state)
//    a second after it; only then is the run over;
//  - drains the pipes until EOF, but for at most kDrainAfterExit after the reap: a
//    grandchild that keeps a pipe open must not hold the run forever;
//  - publishes the RunResult under the mutex, for every later WaitFor().
// Terminate() and Kill() signal the group themselves when nobody is driving the run,
// so a caller busy elsewhere (renewing a lease) does not delay the SIGTERM; the
// SIGKILL after kill_grace and the timeout are the driver's, so whoever starts a
// process must keep calling WaitFor until it returns a result (RunSupervisor does).
// No SIGCHLD handler is installed anywhere.
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <system_error>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "base/timespec.h"
#include "jobs/execution.h"
#include "jobs/output_capture.h"
#include "jobs/process_tree.h"

extern char** environ;

namespace tickd::jobs {
namespace {

using SteadyClock = std::chrono::steady_clock;

constexpr milliseconds kDrainAfterExit{150};      // output drain bound once the child is reaped
constexpr milliseconds kExitPollInterval{20};     // waitid polling without pidfd; leftovers
constexpr milliseconds kLeftoversAfterKill{1000};  // leftovers still there after SIGKILL: left
// Longer waits are clamped to this, so that now() + d cannot overflow.
constexpr milliseconds kLongestWait = std::chrono::hours(24 * 365 * 10);
constexpr std::size_t kReadChunkBytes = 64 * 1024;
constexpr unsigned long kDefaultTimerSlackNs = 50'000;
// The stack of a clone'd child, a few libc calls deep (ChildMain needs well under 4 KiB).
constexpr std::size_t kChildStackBytes = 64 * 1024;

std::string ErrnoText(int err) { return std::generic_category().message(err); }

// An owned file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      Reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { Reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void Reset() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

struct Pipe {
  Fd read;   // the parent's end: O_CLOEXEC, O_NONBLOCK
  Fd write;  // the child's end: O_CLOEXEC (dup2 onto 1 or 2 clears it in the child)
};

Result<Pipe> MakePipe(const char* stream) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return MakeError(std::string("jobs: pipe for ") + stream, ErrnoText(errno));
  }
  Pipe p{Fd(fds[0]), Fd(fds[1])};
  if (fcntl(p.read.get(), F_SETFL, O_NONBLOCK) != 0) {
    return MakeError(std::string("jobs: pipe for ") + stream, ErrnoText(errno));
  }
  return p;
}

// What the child of SpawnChild needs, prepared by the parent: the child runs on
// borrowed memory while the parent waits, so it must not allocate (another thread of
// the daemon may hold the malloc lock) and calls only async-signal-safe functions.
struct ChildSetup {
  const char* path = nullptr;
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  int stdin_fd = -1;  // -1: /dev/null
  int stdout_fd = -1;
  int stderr_fd = -1;
  const char* workdir = nullptr;  // nullptr: the daemon's
  // A prepared child (PrepareProcess; status_fd >= 0) sleeps until the wall clock
  // reads start_at and the monotonic clock start_steady before it execs; otherwise
  // it execs at once. status_fd is the
  // write end of a pipe: the child writes one byte to it once it is set up, and it
  // closes when the child has exec'd (O_CLOEXEC) or exited.
  int status_fd = -1;
  timespec start_at{};      // CLOCK_REALTIME
  timespec start_steady{};  // CLOCK_MONOTONIC
  pid_t parent = 0;     // the daemon: a prepared child whose parent is gone exits
  // Written by a prepared child just before its exec (the parent reads them once
  // status_fd is at EOF): when the job started, on both clocks.
  timespec started_wall{};
  timespec started_steady{};
  // Written by the child when a step fails (it then exits 127); read by the parent
  // once the child has exec'd or exited (CLONE_VFORK waits for it; a prepared
  // child's parent reads status_fd to EOF).
  int error = 0;
};

[[noreturn]] void ChildFails(ChildSetup* setup) {
  setup->error = errno;
  _exit(127);
}

int ChildMain(void* arg) {
  auto* setup = static_cast<ChildSetup*>(arg);
  // Signals: the parent blocked them all around the clone, so no handler of the
  // daemon can run on this borrowed stack. Reset every disposition (the handler table
  // is the child's own copy: no CLONE_SIGHAND), then unblock everything for the job.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &dfl, nullptr);
  }
  // Jobs die with their daemon. A replica that is SIGKILLed (or crashes) must not
  // leave its job running while a survivor takes the tick over (recover: true) or
  // runs the next one: that would be two runs at once. The "parent" is the thread
  // that spawned: the run's supervisor, which outlives the run. It cannot have gone
  // before this line: CLONE_VFORK holds it until the exec.
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) ChildFails(setup);
  if (setpgid(0, 0) != 0) ChildFails(setup);
  const int in_fd = setup->stdin_fd >= 0 ? setup->stdin_fd : open("/dev/null", O_RDONLY);
  if (in_fd < 0 || dup2(in_fd, STDIN_FILENO) < 0) ChildFails(setup);
  if (dup2(setup->stdout_fd, STDOUT_FILENO) < 0) ChildFails(setup);
  if (dup2(setup->stderr_fd, STDERR_FILENO) < 0) ChildFails(setup);
  if (setup->workdir != nullptr && chdir(setup->workdir) != 0) ChildFails(setup);
  // No other descriptor goes to the job (libraries in the daemon may open fds
  // without O_CLOEXEC).
  if (setup->status_fd < 0) {
    if (close_range(STDERR_FILENO + 1, ~0U, 0) != 0) ChildFails(setup);
  } else {
    // Prepared: all but the status pipe (O_CLOEXEC: the exec closes it). The
    // parent-death signal was set above; a parent already gone before it was set is
    // seen here.
    if (getppid() != setup->parent) _exit(127);
    const unsigned status = static_cast<unsigned>(setup->status_fd);
    if (status > STDERR_FILENO + 1 && close_range(STDERR_FILENO + 1, status - 1, 0) != 0) {
      ChildFails(setup);
    }
    if (close_range(status + 1, ~0U, 0) != 0) ChildFails(setup);
    // Ready: its parent thread waits for this byte, so it cannot have gone before the
    // parent-death signal was set; only the wait and the exec are left.
    const char ready = 'r';
    if (write(setup->status_fd, &ready, 1) != 1) ChildFails(setup);
    // The start is this child's own absolute timers: at T nothing else has to run
    // first (no thread of the daemon wakes to release it). The wall clock's makes the
    // start, and follows a step of that clock back; the monotonic one then holds back
    // a start that a wall clock stepped ahead (or running fast) since the preparation
    // made early (SteadyDeadline: a right clock's start finds it passed) — by system
    // call, as a clock faker's wrapper (libfaketime's, which runs a clock fast) cannot
    // translate it. Signals are blocked; SIGKILL (a cancel) ends it.
    while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &setup->start_at, nullptr) == EINTR) {
    }
    // (Asked first: a sleep until an instant passed still waits for a timer
    // interrupt, which cost a busy instant's starts half a millisecond each.)
    timespec steady{};
    syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &steady);
    if (steady.tv_sec < setup->start_steady.tv_sec ||
        (steady.tv_sec == setup->start_steady.tv_sec &&
         steady.tv_nsec < setup->start_steady.tv_nsec)) {
      while (syscall(SYS_clock_nanosleep, CLOCK_MONOTONIC, TIMER_ABSTIME, &setup->start_steady,
                     nullptr) != 0 &&
             errno == EINTR) {
      }
    }
    clock_gettime(CLOCK_REALTIME, &setup->started_wall);
    clock_gettime(CLOCK_MONOTONIC, &setup->started_steady);
  }
  // The daemon may run with a fine timer slack (exact wake-ups at T); its jobs get
  // the kernel's default.
  prctl(PR_SET_TIMERSLACK, kDefaultTimerSlackNs);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  execve(setup->path, setup->argv, setup->envp);
  ChildFails(setup);
}

// Starts a child that runs ChildMain and execs the job; the calling thread waits
// (CLONE_VM | CLONE_VFORK, as glibc's posix_spawn does) until it has exec'd or
// failed. Not posix_spawn, because posix_spawn cannot set the parent-death signal
// (the other way, exec'ing util-linux's `setpriv --pdeathsig KILL` first, cost a
// second exec: ~1.5 ms of CPU per run). The pidfd comes with the clone
// (CLONE_PIDFD, Linux 5.2), not from a pidfd_open after it; it is -1 on kernels
// without pidfds. Returns the errno of the step that failed, the failed child reaped.
struct Spawned {
  pid_t pid = -1;
  int pidfd = -1;
  int error = 0;
};

// clone()s a child that runs ChildMain on `stack` (kChildStackBytes, which must stay
// allocated until the child has exec'd or exited), sharing the daemon's memory;
// `vfork` is CLONE_VFORK (wait for the exec) or 0 (a prepared child: the caller
// learns of the exec through setup.status_fd). With CLONE_VFORK, a failed step is
// reported (the child reaped); without it, only a failed clone.
Spawned CloneChild(ChildSetup& setup, char* stack, int vfork) {
  // The stack grows down from its 16-byte-aligned top.
  void* const top = reinterpret_cast<void*>(
      (reinterpret_cast<std::uintptr_t>(stack) + kChildStackBytes) & ~std::uintptr_t{15});
  sigset_t all;
  sigset_t old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  int pidfd = -1;
  pid_t pid = clone(ChildMain, top, CLONE_VM | vfork | CLONE_PIDFD | SIGCHLD, &setup, &pidfd);
  if (pid < 0 && errno == EINVAL) {  // a kernel that refuses the flag (older ones ignore it)
    pidfd = -1;
    pid = clone(ChildMain, top, CLONE_VM | vfork | SIGCHLD, &setup);
    if (pid > 0) pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  }
  const int clone_error = errno;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (pid < 0) return {-1, -1, clone_error};
  if (vfork != 0 && setup.error != 0) {
    if (pidfd >= 0) close(pidfd);
    while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    return {-1, -1, setup.error};
  }
  return {pid, pidfd, 0};
}

Spawned SpawnChild(ChildSetup& setup) {
  // The child's stack: the child is done with it when clone returns (exec'd or
  // exited), so each thread keeps one for all its spawns. Heap memory, not a mapping
  // per spawn: unmapping changes the daemon's address space, which interrupts every
  // other core running one of its threads to flush its TLB.
  thread_local std::unique_ptr<char[]> stack;
  if (!stack) stack.reset(new (std::nothrow) char[kChildStackBytes]);
  if (!stack) return {-1, -1, ENOMEM};
  return CloneChild(setup, stack.get(), CLONE_VFORK);
}

// Finds argv[0] in the daemon's PATH when it has no '/', as posix_spawnp would, so a
// program found nowhere is known before the spawn. Returns the path, or the errno a
// spawn would have reported.
std::pair<std::string, int> ResolveProgram(const std::string& program) {
  auto check = [](const std::string& path) -> int {
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) return errno;
    if (S_ISDIR(st.st_mode) || access(path.c_str(), X_OK) != 0) return EACCES;
    return 0;
  };
  // A path is left to execve, which reports the same errors (ENOENT, EACCES for a
  // directory or a file without x) through ChildSetup::error: two system calls fewer
  // per run.
  if (program.find('/') != std::string::npos) return {program, 0};
  const char* path_env = getenv("PATH");
  const std::string path = path_env != nullptr ? path_env : "/usr/local/bin:/usr/bin:/bin";
  int first_error = ENOENT;
  std::size_t begin = 0;
  while (begin <= path.size()) {
    std::size_t end = path.find(':', begin);
    if (end == std::string::npos) end = path.size();
    const std::string dir = end == begin ? "." : path.substr(begin, end - begin);
    const std::string candidate = dir + "/" + program;
    const int rc = check(candidate);
    if (rc == 0) return {candidate, 0};
    if (rc != ENOENT && rc != ENOTDIR) first_error = rc;
    begin = end + 1;
  }
  return {program, first_error};
}

// The daemon's environment with spec.env on top ("NAME=value" strings).
std::vector<std::string> BuildEnvironment(const std::map<std::string, std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view kv(*e);
    const std::string name(kv.substr(0, kv.find('=')));
    if (extra.count(name) == 0) env.emplace_back(kv);
  }
  for (const auto& [name, value] : extra) env.push_back(name + "=" + value);
  return env;
}

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

bool IsResourceError(int err) {
  return err == EAGAIN || err == ENOMEM || err == EMFILE || err == ENFILE;
}

RunResult CannotStart(std::string error, std::optional<int> exit_code) {
  RunResult r;
  r.outcome = RunOutcome::kFailed;
  r.exit_code = exit_code;
  r.error = std::move(error);
  return r;
}

int WaitMillis(SteadyClock::time_point now, SteadyClock::time_point until) {
  if (until == SteadyClock::time_point::max()) return -1;
  if (until <= now) return 0;
  const auto ms = std::chrono::ceil<milliseconds>(until - now).count();
  return static_cast<int>(std::min<decltype(ms)>(ms, INT_MAX));
}

class ProcessExecution final : public Execution {
 public:
  ProcessExecution(pid_t pid, Pipe out, Pipe err, Fd pidfd, Fd wake, const ProcessSpec& spec,
                   OutputSink sink, SteadyClock::time_point start)
      : pid_(pid),
        pidfd_(std::move(pidfd)),
        wake_(std::move(wake)),
        start_(start),
        timeout_(std::clamp(spec.timeout, milliseconds(0), kLongestWait)),
        kill_grace_(std::clamp(spec.kill_grace, milliseconds(0), kLongestWait)),
        marks_(RunMarks(spec.env)),
        capture_(std::move(sink), spec.max_output_lines, spec.max_line_bytes),
        buffer_(new char[kReadChunkBytes]) {  // not zeroed: read() fills what is used
    pipes_[0] = std::move(out.read);
    pipes_[1] = std::move(err.read);
  }

  ~ProcessExecution() override {
    Terminate(RunOutcome::kKilled);
    std::lock_guard<std::timed_mutex> drive(drive_mu_);
    Drive(SteadyClock::time_point::max());
  }

  void Terminate(RunOutcome reason) override {
    if (reason != RunOutcome::kTimeout && reason != RunOutcome::kLeaseLost) {
      reason = RunOutcome::kKilled;
    }
    if (!SetReason(reason)) return;
    const std::uint64_t one = 1;
    // EAGAIN (counter full) means the driver has wake-ups pending anyway.
    [[maybe_unused]] ssize_t n = write(wake_.get(), &one, sizeof one);
    // Nobody driving: signal now rather than at the next WaitFor. Holding drive_mu_
    // keeps the child unreaped meanwhile, so the group id cannot have been reused.
    std::unique_lock<std::timed_mutex> drive(drive_mu_, std::try_to_lock);
    if (drive.owns_lock()) SendTerm(SteadyClock::now());
  }

  void Kill(RunOutcome reason) override {
    if (reason != RunOutcome::kTimeout && reason != RunOutcome::kLeaseLost) {
      reason = RunOutcome::kKilled;
    }
    SetReason(reason);
    {
      std::lock_guard<std::mutex> lock(mu_);
      kill_requested_ = true;
    }
    const std::uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(wake_.get(), &one, sizeof one);
    // As Terminate: the driver, if there is one, sends it at its wake-up.
    std::unique_lock<std::timed_mutex> drive(drive_mu_, std::try_to_lock);
    if (drive.owns_lock()) SendKill();
  }

  std::optional<int> process_group() const override { return pid_; }

  std::optional<RunResult> WaitFor(milliseconds d) override {
    const SteadyClock::time_point until =
        SteadyClock::now() + std::clamp(d, milliseconds(0), kLongestWait);
    std::unique_lock<std::timed_mutex> drive(drive_mu_, until);
    if (drive.owns_lock()) Drive(until);
    std::lock_guard<std::mutex> lock(mu_);
    return result_;
  }

 private:
  // Records why the run is ended; false when a reason was recorded before (it wins).
  bool SetReason(RunOutcome reason) {
    std::lock_guard<std::mutex> lock(mu_);
    if (reason_) return false;
    reason_ = reason;
    return true;
  }

  bool TerminationRequested() {
    std::lock_guard<std::mutex> lock(mu_);
    return reason_.has_value();
  }

  bool KillRequested() {
    std::lock_guard<std::mutex> lock(mu_);
    return kill_requested_;
  }

  // The group, and what of the run left it (`setsid`, GNU `timeout`, a daemon's double
  // fork; process_tree.h): found below the child while it is unreaped (its pid is
  // surely its own then), and by the run's marks. ESRCH: nothing left to signal.
  void SignalRunProcesses(std::initializer_list<int> signals) const {
    const Signalled signalled = SignalRun(pid_, !reaped_, signals);
    if (marks_.empty()) return;
    // Shared: when a lost store ends hundreds of runs at once, they share scans.
    (void)SignalEach(MarkedProcessesShared({marks_, pid_}), signalled.outside, signals);
  }

  // REQUIRES: drive_mu_ held. SIGTERM (+ SIGCONT) once, if the child is not reaped.
  void SendTerm(SteadyClock::time_point now) {
    if (reaped_ || term_sent_) return;
    SignalRunProcesses({SIGTERM, SIGCONT});
    term_sent_ = true;
    kill_at_ = now + kill_grace_;
  }

  // REQUIRES: drive_mu_ held. SIGKILL now (Kill), if the child is not reaped; the run
  // counts as terminated by us, as after a SIGTERM. Leftovers are SIGKILLed too (the
  // outcome stays the child's own).
  void SendKill() {
    if (leftovers_) KillLeftovers(SteadyClock::now());
    if (reaped_ || kill_sent_) return;
    SignalRunProcesses({SIGKILL});
    term_sent_ = true;
    kill_sent_ = true;
  }

  // REQUIRES: drive_mu_ held; leftovers_.
  void KillLeftovers(SteadyClock::time_point now) {
    if (leftovers_killed_) return;
    SignalRunProcesses({SIGKILL});
    leftovers_killed_ = true;
    leftovers_give_up_ = now + kLeftoversAfterKill;
  }

  // REQUIRES: drive_mu_ held; the child reaped. What the job left: the group and the
  // processes outside it found by the run's marks. No scan of /proc.
  void SignalLeftovers(std::initializer_list<int> signals) const {
    for (int sig : signals) kill(-pid_, sig);
    (void)SignalEach(outside_, {}, signals);
  }

  // REQUIRES: drive_mu_ held; leftovers_. Ends the wait for them once none is left (a
  // zombie does not count), SIGKILLs them when their grace is over, gives up on them
  // after that.
  void WatchLeftovers(SteadyClock::time_point now) {
    std::erase_if(outside_, [this](pid_t pid) { return !LiveAndMarked(pid, marks_); });
    bool left = GroupHasLiveProcess(pid_) || !outside_.empty();
    if (!left && !marks_.empty()) {
      // The last of those found is gone: whatever one of them started outside the
      // group meanwhile is looked for too, and gets what they got.
      outside_ = MarkedProcessesShared({marks_, pid_});
      left = !outside_.empty();
      if (leftovers_killed_) {
        (void)SignalEach(outside_, {}, {SIGKILL});
      } else {
        (void)SignalEach(outside_, {}, {SIGTERM, SIGCONT});
      }
    }
    if (!left) {
      leftovers_ = false;  // the last of them is gone, or a zombie
    } else if (!leftovers_killed_ && (KillRequested() || now >= leftovers_kill_at_)) {
      KillLeftovers(now);
    } else if (leftovers_killed_ && now >= leftovers_give_up_) {
      leftovers_ = false;  // SIGKILLed and still there (uninterruptible sleep)
    }
    if (!leftovers_) drain_until_ = now + kDrainAfterExit;
  }

  // True once the child has exited; it stays a zombie (WNOWAIT) until Reap().
  bool ChildExited() const {
    siginfo_t info{};
    if (waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
      return errno == ECHILD;  // reaped behind our back (SIGCHLD set to SIG_IGN): Reap says so
    }
    return info.si_pid != 0;
  }

  void Reap() {
    int status = 0;
    pid_t rc;
    while ((rc = waitpid(pid_, &status, 0)) < 0 && errno == EINTR) {
    }
    if (rc == pid_) {
      status_ = status;
    } else {
      wait_error_ = "waitpid " + std::to_string(pid_) + ": " + ErrnoText(errno);
    }
  }

  // Reads what one pipe has now. False once it is at EOF (or broken).
  bool ReadPipe(OutputStream s) {
    const ssize_t n = read(pipes_[static_cast<int>(s)].get(), buffer_.get(), kReadChunkBytes);
    if (n > 0) {
      capture_.Feed(s, std::string_view(buffer_.get(), static_cast<std::size_t>(n)));
      return true;
    }
    return n < 0 && (errno == EAGAIN || errno == EINTR);
  }

  void ClosePipe(OutputStream s) {
    capture_.Finish(s);
    pipes_[static_cast<int>(s)].Reset();
  }

  // REQUIRES: drive_mu_ held. Moves the run on until it has ended (the result is
  // published) or `until` has passed.
  void Drive(SteadyClock::time_point until) {
    const SteadyClock::time_point deadline = start_ + timeout_;
    constexpr std::array<OutputStream, 2> kStreams = {OutputStream::kStdout, OutputStream::kStderr};

    // Once through the loop even when `until` has passed: WaitFor(0) looks (a poll
    // that does not block) before it answers.
    for (bool first = true; !published_; first = false) {
      SteadyClock::time_point now = SteadyClock::now();
      if (!reaped_) {
        if (now >= deadline) SetReason(RunOutcome::kTimeout);
        if (KillRequested()) SendKill();
        if (TerminationRequested()) SendTerm(now);
        if (term_sent_ && !kill_sent_ && now >= kill_at_) {
          SignalRunProcesses({SIGKILL});
          kill_sent_ = true;
        }
      }
      if (leftovers_) WatchLeftovers(now);
      const bool pipes_open = pipes_[0].valid() || pipes_[1].valid();
      if (reaped_ && !leftovers_ && (!pipes_open || now >= drain_until_)) {
        Finish();
        return;
      }
      if (now >= until && !first) return;

      std::array<pollfd, 4> fds{};
      int nfds = 0;
      std::array<int, 2> pipe_slot = {-1, -1};
      for (OutputStream s : kStreams) {
        const int i = static_cast<int>(s);
        if (!pipes_[i].valid()) continue;
        pipe_slot[i] = nfds;
        fds[nfds++] = {pipes_[i].get(), POLLIN, 0};
      }
      int pidfd_slot = -1;
      if (!reaped_ && pidfd_.valid()) {
        pidfd_slot = nfds;
        fds[nfds++] = {pidfd_.get(), POLLIN, 0};
      }
      const int wake_slot = nfds;
      fds[nfds++] = {wake_.get(), POLLIN, 0};

      SteadyClock::time_point wake_at = SteadyClock::time_point::max();
      if (leftovers_) {
        wake_at = now + kExitPollInterval;
      } else if (reaped_) {
        wake_at = drain_until_;
      } else {
        if (!term_sent_) wake_at = deadline;
        if (term_sent_ && !kill_sent_) wake_at = kill_at_;
        if (!pidfd_.valid()) wake_at = std::min(wake_at, now + kExitPollInterval);
      }
      wake_at = std::min(wake_at, until);
      if (poll(fds.data(), static_cast<nfds_t>(nfds), WaitMillis(now, wake_at)) < 0) {
        if (errno != EINTR) std::this_thread::sleep_for(kExitPollInterval);  // ENOMEM
        continue;
      }

      for (OutputStream s : kStreams) {
        const int slot = pipe_slot[static_cast<int>(s)];
        if (slot >= 0 && fds[slot].revents != 0 && !ReadPipe(s)) ClosePipe(s);
      }
      if (fds[wake_slot].revents != 0) {
        std::uint64_t count;
        [[maybe_unused]] ssize_t n = read(wake_.get(), &count, sizeof count);
      }
      const bool maybe_exited = pidfd_slot < 0 || fds[pidfd_slot].revents != 0;
      if (!reaped_ && maybe_exited && ChildExited()) {
        // Stragglers of a group we terminated go too; the zombie leader still holds
        // the group id, so this cannot hit a reused one.
        if (term_sent_) SignalRunProcesses({SIGKILL});
        Reap();
        end_ = SteadyClock::now();
        reaped_ = true;
        drain_until_ = end_ + kDrainAfterExit;
        // What the job left running ends with the run, after a SIGTERM and its grace:
        // in its group, whose id they hold now (`cmd &` in a shell that then exited),
        // and outside it (`setsid`, a double fork: gone to init with the child's exit,
        // found by the run's marks in a scan shared with the runs ending now).
        if (!marks_.empty()) outside_ = MarkedProcessesShared({marks_, pid_});
        if (GroupHasLiveProcess(pid_) || !outside_.empty()) {
          leftovers_ = true;
          leftovers_seen_ = !term_sent_;
          leftovers_killed_ = term_sent_;
          leftovers_kill_at_ = end_ + kill_grace_;
          leftovers_give_up_ = end_ + kLeftoversAfterKill;
          if (!term_sent_) SignalLeftovers({SIGTERM, SIGCONT});
          if (KillRequested()) KillLeftovers(end_);
        }
      }
    }
  }

  // REQUIRES: drive_mu_ held; the child reaped and its output drained.
  void Finish() {
    constexpr std::array<OutputStream, 2> kStreams = {OutputStream::kStdout, OutputStream::kStderr};
    for (OutputStream s : kStreams) {
      if (pipes_[static_cast<int>(s)].valid()) ClosePipe(s);
    }
    pidfd_.Reset();
    Publish(term_sent_, std::chrono::duration_cast<milliseconds>(end_ - start_));
    published_ = true;
  }

  void Publish(bool terminated_by_us, milliseconds duration) {
    RunResult r;
    r.duration = duration;
    r.dropped_lines = capture_.dropped_lines();
    r.leftovers_ended = leftovers_seen_;
    r.error = wait_error_;
    if (wait_error_.empty()) {
      if (WIFEXITED(status_)) r.exit_code = WEXITSTATUS(status_);
      if (WIFSIGNALED(status_)) r.signal = WTERMSIG(status_);
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (terminated_by_us) {
      r.outcome = *reason_;
    } else {
      r.outcome = r.exit_code == 0 ? RunOutcome::kDone : RunOutcome::kFailed;
    }
    result_ = std::move(r);
  }

  const pid_t pid_;  // also the process group id
  // The driver's: used only with drive_mu_ held.
  std::timed_mutex drive_mu_;
  bool term_sent_ = false;
  bool kill_sent_ = false;
  bool reaped_ = false;
  bool published_ = false;
  SteadyClock::time_point kill_at_{};
  SteadyClock::time_point drain_until_{};
  // Processes left in the group after the child exited (reaped_ is then true).
  bool leftovers_ = false;        // some may be left: watched
  bool leftovers_seen_ = false;   // there were some (the run line says so)
  bool leftovers_killed_ = false;
  std::vector<pid_t> outside_;    // of them, those outside the group (by marks_)
  SteadyClock::time_point leftovers_kill_at_{};
  SteadyClock::time_point leftovers_give_up_{};
  SteadyClock::time_point end_{};
  std::array<Fd, 2> pipes_;  // indexed by OutputStream
  Fd pidfd_;                 // invalid: poll waitid instead
  const Fd wake_;            // eventfd written by Terminate()
  const SteadyClock::time_point start_;
  const milliseconds timeout_;
  const milliseconds kill_grace_;
  const std::vector<std::string> marks_;  // the run's environment marks (process_tree.h)
  OutputCapture capture_;
  std::unique_ptr<char[]> buffer_;
  int status_ = 0;
  std::string wait_error_;

  std::mutex mu_;
  std::optional<RunOutcome> reason_;  // guarded by mu_; the first Terminate() wins
  bool kill_requested_ = false;       // guarded by mu_; Kill() was called
  std::optional<RunResult> result_;   // guarded by mu_; set once, at the end
};

}  // namespace

namespace {

// Everything a spawn needs, built before it; the child runs on this memory
// (CLONE_VM) until it has exec'd, so it does not move (held by unique_ptr).
struct SpawnPlan {
  std::string program;  // argv[0] as given, for messages
  std::string workdir;
  std::string resolved;
  int resolve_error = 0;
  std::vector<std::string> argv_strings;
  std::vector<std::string> env_strings;
  std::vector<char*> argv;
  std::vector<char*> envp;
  Pipe out;
  Pipe err;
  Fd input;  // ProcessSpec::stdin_data in a memfd, read from its start; unset: /dev/null
  Fd wake;
  ChildSetup setup;
};

// The plan for `spec`; a finished Execution in `cannot_start` (and nullptr) when the
// job cannot start at all (empty argv, bad workdir); an Error when the daemon lacks
// pipes or fds.
Result<std::unique_ptr<SpawnPlan>> MakePlan(const ProcessSpec& spec,
                                            std::unique_ptr<Execution>& cannot_start) {
  if (spec.argv.empty()) {
    cannot_start = FinishedExecution(CannotStart("empty argv", std::nullopt));
    return nullptr;
  }
  if (!spec.workdir.empty()) {
    // Checked here because a failed chdir in the child reports the same ENOENT
    // as a missing program.
    struct stat st {};
    if (stat(spec.workdir.c_str(), &st) != 0) {
      cannot_start = FinishedExecution(
          CannotStart("workdir " + spec.workdir + ": " + ErrnoText(errno), std::nullopt));
      return nullptr;
    }
    if (!S_ISDIR(st.st_mode)) {
      cannot_start = FinishedExecution(
          CannotStart("workdir " + spec.workdir + ": " + ErrnoText(ENOTDIR), std::nullopt));
      return nullptr;
    }
  }
  auto plan = std::make_unique<SpawnPlan>();
  auto out = MakePipe("stdout");
  if (!out) return tl::unexpected(out.error());
  auto err = MakePipe("stderr");
  if (!err) return tl::unexpected(err.error());
  plan->out = std::move(*out);
  plan->err = std::move(*err);
  plan->wake = Fd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!plan->wake.valid()) return MakeError("jobs: eventfd", ErrnoText(errno));

  if (!spec.stdin_data.empty()) {
    // A memfd rather than a pipe: the whole input is there before the child starts,
    // so the parent never waits on a child that does not read it.
    plan->input = Fd(memfd_create("tickd-stdin", MFD_CLOEXEC));
    if (!plan->input.valid()) return MakeError("jobs: stdin memfd", ErrnoText(errno));
    std::string_view left = spec.stdin_data;
    while (!left.empty()) {
      const ssize_t n = write(plan->input.get(), left.data(), left.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return MakeError("jobs: stdin memfd", ErrnoText(errno));
      left.remove_prefix(static_cast<std::size_t>(n));
    }
    if (lseek(plan->input.get(), 0, SEEK_SET) != 0) {
      return MakeError("jobs: stdin memfd", ErrnoText(errno));
    }
  }
  plan->program = spec.argv[0];
  plan->workdir = spec.workdir;
  // The daemon's PATH (not spec.env's) is searched when argv[0] has no '/'.
  std::tie(plan->resolved, plan->resolve_error) = ResolveProgram(plan->program);
  plan->argv_strings = spec.argv;
  plan->env_strings = BuildEnvironment(spec.env);
  plan->argv = CStrings(plan->argv_strings);
  plan->envp = CStrings(plan->env_strings);

  ChildSetup& setup = plan->setup;
  setup.path = plan->resolved.c_str();
  setup.argv = plan->argv.data();
  setup.envp = plan->envp.data();
  setup.stdin_fd = plan->input.get();
  setup.stdout_fd = plan->out.write.get();
  setup.stderr_fd = plan->err.write.get();
  setup.workdir = plan->workdir.empty() ? nullptr : plan->workdir.c_str();
  return plan;
}

// The Execution of a spawn that ended with `child` (its error: the job did not start).
Result<std::unique_ptr<Execution>> FromSpawn(SpawnPlan& plan, const Spawned& child,
                                           const ProcessSpec& spec, OutputSink sink,
                                           SteadyClock::time_point start) {
  const int rc = child.error;
  if (rc != 0) {
    std::string where =
        plan.program + (plan.workdir.empty() ? "" : " (workdir " + plan.workdir + ")");
    if (IsResourceError(rc)) return MakeError("jobs: start " + where, ErrnoText(rc));
    // As a shell reports it: 127 not found, 126 found but not executable.
    const int exit_code = rc == ENOENT || rc == ENOTDIR ? 127 : 126;
    RunResult r = CannotStart(where + ": " + ErrnoText(rc), exit_code);
    r.duration = std::chrono::duration_cast<milliseconds>(SteadyClock::now() - start);
    return FinishedExecution(std::move(r));
  }
  // Invalid on kernels without pidfds (< 5.2): waitid polling instead.
  return std::unique_ptr<Execution>(std::make_unique<ProcessExecution>(
      child.pid, std::move(plan.out), std::move(plan.err), Fd(child.pidfd), std::move(plan.wake),
      spec, std::move(sink), start));
}

// A child cloned ahead of T, asleep until its start_at.
class PreparedProcess final : public PreparedStart {
 public:
  PreparedProcess(std::unique_ptr<SpawnPlan> plan, std::unique_ptr<char[]> stack,
                  ::tickd::jobs::Spawned child, Fd status, ProcessSpec spec, OutputSink sink)
      : plan_(std::move(plan)),
        stack_(std::move(stack)),
        child_(child),
        status_(std::move(status)),
        spec_(std::move(spec)),
        sink_(std::move(sink)) {}

  ~PreparedProcess() override {
    if (child_.pid < 0) return;  // released
    // Never released: the child dies (SIGKILL cannot be blocked) — before its exec
    // when this comes before start_at — and is reaped; only then is the memory it
    // ran on freed.
    kill(child_.pid, SIGKILL);
    while (waitpid(child_.pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    if (child_.pidfd >= 0) close(child_.pidfd);
  }

  std::chrono::milliseconds settle() const override { return kSettleAfterStart; }

  Result<std::unique_ptr<Execution>> Release() override {
    // EOF once the child has exec'd (the exec closed the O_CLOEXEC write end) or
    // exited: from then on it no longer runs on plan_ and stack_.
    char byte;
    while (read(status_.get(), &byte, 1) < 0 && errno == EINTR) {
    }
    status_.Reset();
    ::tickd::jobs::Spawned child = std::exchange(child_, ::tickd::jobs::Spawned{});
    const ChildSetup& setup = plan_->setup;
    if (setup.error != 0) {
      if (child.pidfd >= 0) close(child.pidfd);
      while (waitpid(child.pid, nullptr, 0) < 0 && errno == EINTR) {
      }
      child = {-1, -1, setup.error};
    }
    SteadyClock::time_point start = SteadyClock::now();
    if (setup.started_steady.tv_sec != 0) {
      start = SteadyClock::time_point(std::chrono::duration_cast<SteadyClock::duration>(
          std::chrono::seconds(setup.started_steady.tv_sec) +
          std::chrono::nanoseconds(setup.started_steady.tv_nsec)));
      started_ = std::chrono::system_clock::time_point(
          std::chrono::duration_cast<std::chrono::system_clock::duration>(
              std::chrono::seconds(setup.started_wall.tv_sec) +
              std::chrono::nanoseconds(setup.started_wall.tv_nsec)));
    }
    return FromSpawn(*plan_, child, spec_, std::move(sink_), start);
  }

  std::optional<std::chrono::system_clock::time_point> started() const override {
    return started_;
  }

  std::optional<int> process_group() const override {
    return child_.pid > 0 ? std::optional<int>(child_.pid) : std::nullopt;
  }

 private:
  std::unique_ptr<SpawnPlan> plan_;
  std::unique_ptr<char[]> stack_;
  ::tickd::jobs::Spawned child_;  // pid -1 once released
  Fd status_;                     // read end: EOF when the child exec'd or exited
  const ProcessSpec spec_;
  OutputSink sink_;
  std::optional<std::chrono::system_clock::time_point> started_;
};

}  // namespace

Result<std::unique_ptr<Execution>> StartProcess(const ProcessSpec& spec, OutputSink sink) {
  std::unique_ptr<Execution> cannot_start;
  Result<std::unique_ptr<SpawnPlan>> plan = MakePlan(spec, cannot_start);
  if (!plan) return tl::unexpected(plan.error());
  if (!*plan) return cannot_start;
  const SteadyClock::time_point start = SteadyClock::now();
  ::tickd::jobs::Spawned child;
  child.error = (*plan)->resolve_error;
  if (child.error == 0) child = SpawnChild((*plan)->setup);
  (*plan)->out.write.Reset();  // the child holds its own copies; EOF comes when it (and
  (*plan)->err.write.Reset();  // its descendants) close them
  return FromSpawn(**plan, child, spec, std::move(sink), start);
}

Result<std::unique_ptr<PreparedStart>> PrepareProcess(
    const ProcessSpec& spec, OutputSink sink, std::chrono::system_clock::time_point start_at) {
  std::unique_ptr<Execution> cannot_start;
  Result<std::unique_ptr<SpawnPlan>> plan = MakePlan(spec, cannot_start);
  if (!plan) return tl::unexpected(plan.error());
  auto finished = [](std::unique_ptr<Execution> exec) {
    auto shared = std::make_shared<std::unique_ptr<Execution>>(std::move(exec));
    return StartOnRelease([shared]() -> Result<std::unique_ptr<Execution>> {
      return std::move(*shared);
    });
  };
  if (!*plan) return finished(std::move(cannot_start));
  SpawnPlan& p = **plan;
  if (p.resolve_error != 0) {
    return finished(
        *FromSpawn(p, {-1, -1, p.resolve_error}, spec, std::move(sink), SteadyClock::now()));
  }
  int status[2];
  if (pipe2(status, O_CLOEXEC) != 0) return MakeError("jobs: status pipe", ErrnoText(errno));
  Fd status_read(status[0]);
  Fd status_write(status[1]);
  std::unique_ptr<char[]> stack(new (std::nothrow) char[kChildStackBytes]);
  if (!stack) return MakeError("jobs: start " + p.program, ErrnoText(ENOMEM));
  p.setup.start_at = ToTimespec(start_at.time_since_epoch());
  p.setup.start_steady = ToTimespec(SteadyDeadline(start_at).time_since_epoch());
  p.setup.status_fd = status_write.get();
  p.setup.parent = getpid();
  const ::tickd::jobs::Spawned child = CloneChild(p.setup, stack.get(), 0);
  if (child.error != 0) {
    return MakeError("jobs: start " + p.program, ErrnoText(child.error));
  }
  // The child holds its own copies of these.
  status_write.Reset();
  p.out.write.Reset();
  p.err.write.Reset();
  // Wait until it is set up (or failed: EOF, and setup.error says why at the release).
  char ready;
  while (read(status_read.get(), &ready, 1) < 0 && errno == EINTR) {
  }
  return std::unique_ptr<PreparedStart>(std::make_unique<PreparedProcess>(
      std::move(*plan), std::move(stack), child, std::move(status_read), spec, std::move(sink)));
}

}  // namespace tickd::jobs
