#include <dirent.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <sys/stat.h>

#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "jobs/execution.h"
#include "jobs/process_tree.h"
#include "jobs/thread_execution.h"

namespace tickd::jobs {
namespace {

using namespace std::chrono_literals;
using Line = std::pair<std::string, std::string>;  // stream, text

// Collects the lines a run prints; the sink runs on the thread in WaitFor.
class Collector {
 public:
  OutputSink Sink() {
    return [this](std::string_view stream, std::string_view line) {
      std::lock_guard<std::mutex> lock(mu_);
      lines_.emplace_back(std::string(stream), std::string(line));
    };
  }
  std::vector<Line> Lines() {
    std::lock_guard<std::mutex> lock(mu_);
    return lines_;
  }
  std::vector<std::string> Stream(const std::string& stream) {
    std::vector<std::string> out;
    for (const auto& [s, text] : Lines()) {
      if (s == stream) out.push_back(text);
    }
    return out;
  }
  // The first line `e` printed, driving it (WaitFor) up to `d` for it ("" if none came).
  std::string FirstLine(Execution& e, std::chrono::milliseconds d = 5s) {
    const auto until = std::chrono::steady_clock::now() + d;
    while (std::chrono::steady_clock::now() < until) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!lines_.empty()) return lines_.front().second;
      }
      if (e.WaitFor(10ms)) break;  // ended: its output is all in
    }
    std::lock_guard<std::mutex> lock(mu_);
    return lines_.empty() ? "" : lines_.front().second;
  }

 private:
  std::mutex mu_;
  std::vector<Line> lines_;
};

ProcessSpec Shell(const std::string& cmd) {
  ProcessSpec spec;
  spec.argv = ShellArgv(cmd);
  spec.timeout = 10s;
  spec.kill_grace = 2s;
  return spec;
}

std::unique_ptr<Execution> Start(const ProcessSpec& spec, Collector& c) {
  auto started = StartProcess(spec, c.Sink());
  REQUIRE(started.has_value());
  return std::move(*started);
}

RunResult Wait(Execution& e, std::chrono::milliseconds d = 10s) {
  std::optional<RunResult> r = e.WaitFor(d);
  REQUIRE(r.has_value());
  return *r;
}

RunResult RunShell(const std::string& cmd, Collector& c) {
  auto e = Start(Shell(cmd), c);
  return Wait(*e);
}

// Alive and not a zombie (a dead grandchild may wait for init to reap it).
bool ProcessAlive(pid_t pid) {
  if (kill(pid, 0) != 0) return errno != ESRCH;
  const std::optional<ProcStat> stat = ReadProcStat(pid);
  return !stat || stat->state != 'Z';
}

bool GoneWithin(pid_t pid, std::chrono::milliseconds d) {
  const auto until = std::chrono::steady_clock::now() + d;
  while (ProcessAlive(pid)) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

// Whether `pid` is out of process group `pgid` within 5 s: a child calls setsid or
// setpgid a moment after its parent printed its pid.
bool LeavesGroup(pid_t pid, pid_t pgid) {
  for (int tries = 0; tries < 500; ++tries) {
    const std::optional<ProcStat> stat = ReadProcStat(pid);
    if (stat && stat->pgrp != pgid) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

// The TICKD_* environment of a run, unique to this test process.
std::map<std::string, std::string> RunEnv(const std::string& fence) {
  return {{"TICKD_JOB", "j"},
          {"TICKD_TICK", "2026-11-29T06:00:00Z"},
          {"TICKD_NODE", "n-" + std::to_string(getpid())},
          {"TICKD_FENCE", fence}};
}

// The states ('R', 'S', 'Z'…) of this test process's children.
std::vector<char> ChildStates() {
  std::vector<char> states;
  DIR* proc = opendir("/proc");
  REQUIRE(proc != nullptr);
  while (dirent* d = readdir(proc)) {
    if (d->d_name[0] < '0' || d->d_name[0] > '9') continue;
    const std::optional<ProcStat> stat = ReadProcStat(std::atoi(d->d_name));
    if (stat && stat->ppid == getpid()) states.push_back(stat->state);
  }
  closedir(proc);
  return states;
}

// Children of this test process that are zombies (exited, never reaped).
int ZombieChildren() {
  const std::vector<char> states = ChildStates();
  return static_cast<int>(std::count(states.begin(), states.end(), 'Z'));
}

// Children of this test process (running or zombie).
int Children() { return static_cast<int>(ChildStates().size()); }

TEST_CASE("RunOutcomeName and ShellArgv", "[jobs]") {
  CHECK(RunOutcomeName(RunOutcome::kDone) == "done");
  CHECK(RunOutcomeName(RunOutcome::kFailed) == "failed");
  CHECK(RunOutcomeName(RunOutcome::kTimeout) == "timeout");
  CHECK(RunOutcomeName(RunOutcome::kLeaseLost) == "lease-lost");
  CHECK(RunOutcomeName(RunOutcome::kKilled) == "killed");
  CHECK(ShellArgv("echo hi") == std::vector<std::string>{"/bin/sh", "-c", "echo hi"});
}

TEST_CASE("exit status 0 is done, non-zero is failed with the code", "[jobs]") {
  Collector c;
  RunResult ok = RunShell("exit 0", c);
  CHECK(ok.outcome == RunOutcome::kDone);
  CHECK(ok.exit_code == 0);
  CHECK_FALSE(ok.signal.has_value());

  RunResult three = RunShell("exit 3", c);
  CHECK(three.outcome == RunOutcome::kFailed);
  CHECK(three.exit_code == 3);
}

TEST_CASE("a job killed by a signal of its own is failed with the signal", "[jobs]") {
  rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);  // keep the SIGSEGV from writing a core file
  Collector c;
  RunResult r = RunShell("kill -SEGV $$", c);
  CHECK(r.outcome == RunOutcome::kFailed);
  CHECK(r.signal == SIGSEGV);
  CHECK_FALSE(r.exit_code.has_value());
}

TEST_CASE("the job sees the daemon's environment with spec.env on top", "[jobs]") {
  setenv("TICKD_TEST_INHERITED", "from-daemon", 1);
  setenv("TICKD_TEST_OVERRIDDEN", "from-daemon", 1);
  ProcessSpec spec = Shell(
      "echo \"$TICKD_JOB\"; echo \"$TICKD_TEST_INHERITED\"; echo \"$TICKD_TEST_OVERRIDDEN\"");
  spec.env = {{"TICKD_JOB", "cleanup orders"}, {"TICKD_TEST_OVERRIDDEN", "from-spec"}};
  Collector c;
  auto e = Start(spec, c);
  CHECK(Wait(*e).outcome == RunOutcome::kDone);
  CHECK(c.Stream("stdout") ==
        std::vector<std::string>{"cleanup orders", "from-daemon", "from-spec"});
  unsetenv("TICKD_TEST_INHERITED");
  unsetenv("TICKD_TEST_OVERRIDDEN");
}

TEST_CASE("the job runs in its workdir; a bad workdir is a failed run", "[jobs]") {
  ProcessSpec spec = Shell("pwd");
  spec.workdir = "/tmp";
  Collector c;
  auto e = Start(spec, c);
  CHECK(Wait(*e).outcome == RunOutcome::kDone);
  CHECK(c.Stream("stdout") == std::vector<std::string>{"/tmp"});

  spec.workdir = "/nonexistent/tickd-workdir";
  Collector c2;
  auto bad = Start(spec, c2);
  RunResult r = Wait(*bad, 0ms);
  CHECK(r.outcome == RunOutcome::kFailed);
  CHECK_FALSE(r.exit_code.has_value());
  CHECK_THAT(r.error, Catch::Contains("/nonexistent/tickd-workdir"));
}

TEST_CASE("stdin is /dev/null", "[jobs]") {
  Collector c;
  RunResult r = RunShell("cat; echo end", c);
  CHECK(r.outcome == RunOutcome::kDone);
  CHECK(c.Stream("stdout") == std::vector<std::string>{"end"});
}

TEST_CASE("stdin_data is the child's stdin, whole, for a prepared start too", "[jobs]") {
  ProcessSpec spec;
  spec.argv = ShellArgv("cat; echo end");
  spec.stdin_data = std::string(100'000, 'x') + "\nlast\n";  // beyond a pipe's buffer
  Collector c;
  auto exec = Start(spec, c);
  RunResult r = Wait(*exec);
  CHECK(r.outcome == RunOutcome::kDone);
  const std::vector<std::string> lines = c.Stream("stdout");
  REQUIRE(lines.size() == 3);
  CHECK(lines[0].rfind(std::string(4'096, 'x'), 0) == 0);  // cut at max_line_bytes (and marked)
  CHECK(lines[0].size() < 4'200);
  CHECK(lines[1] == "last");
  CHECK(lines[2] == "end");

  Collector p;
  spec.stdin_data = "prepared\n";
  auto prepared = PrepareProcess(spec, p.Sink(), std::chrono::system_clock::now());
  REQUIRE(prepared);
  auto released = (*prepared)->Release();
  REQUIRE(released);
  CHECK(Wait(**released).outcome == RunOutcome::kDone);
  CHECK(p.Stream("stdout") == std::vector<std::string>{"prepared", "end"});
}

TEST_CASE("output lines arrive in order per stream", "[jobs]") {
  Collector c;
  RunResult r = RunShell(
      "for i in 1 2 3 4 5; do echo out$i; echo err$i >&2; done; printf 'no newline'", c);
  CHECK(r.outcome == RunOutcome::kDone);
  CHECK(c.Stream("stdout") ==
        std::vector<std::string>{"out1", "out2", "out3", "out4", "out5", "no newline"});
  CHECK(c.Stream("stderr") == std::vector<std::string>{"err1", "err2", "err3", "err4", "err5"});
  CHECK(r.dropped_lines == 0);
}

TEST_CASE("output beyond max_output_lines is counted, long lines are cut", "[jobs]") {
  ProcessSpec spec = Shell("seq 1 20; printf 'abcdefghijklmnop\\n' >&2");
  spec.max_output_lines = 5;
  Collector c;
  auto e = Start(spec, c);
  RunResult r = Wait(*e);
  CHECK(c.Stream("stdout") == std::vector<std::string>{"1", "2", "3", "4", "5"});
  CHECK(r.dropped_lines == 16);

  spec = Shell("printf 'abcdefghijklmnop\\nshort\\n'");
  spec.max_line_bytes = 10;
  Collector c2;
  auto e2 = Start(spec, c2);
  Wait(*e2);
  CHECK(c2.Stream("stdout") == std::vector<std::string>{"abcdefghij\u2026[truncated]", "short"});
}

TEST_CASE("a timeout terminates the whole process group", "[jobs]") {
  ProcessSpec spec = Shell("sleep 30 & echo $!; wait");
  spec.timeout = 300ms;
  Collector c;
  auto e = Start(spec, c);
  const std::string grandchild = c.FirstLine(*e);
  REQUIRE_FALSE(grandchild.empty());
  RunResult r = Wait(*e);
  CHECK(r.outcome == RunOutcome::kTimeout);
  CHECK(r.signal == SIGTERM);
  CHECK(r.duration >= 300ms);
  CHECK(GoneWithin(std::stoi(grandchild), 2s));
}

TEST_CASE("a timeout reaches what left the group below the job: setsid, GNU timeout", "[jobs]") {
  // Both make a process group of their own, which a signal to the job's group misses.
  ProcessSpec spec = Shell("setsid sleep 30 & echo $!; timeout 30 sleep 30 & echo $!; wait");
  spec.timeout = 300ms;
  Collector c;
  auto e = Start(spec, c);
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (c.Stream("stdout").size() < 2 && std::chrono::steady_clock::now() < until) {
    if (e->WaitFor(10ms)) break;
  }
  const std::vector<std::string> escaped = c.Stream("stdout");
  REQUIRE(escaped.size() == 2);
  for (const std::string& pid : escaped) {
    CHECK(LeavesGroup(std::stoi(pid), *e->process_group()));  // they did leave the group
  }
  RunResult r = Wait(*e);
  CHECK(r.outcome == RunOutcome::kTimeout);
  for (const std::string& pid : escaped) CHECK(GoneWithin(std::stoi(pid), 2s));
}

TEST_CASE("a timeout reaches a run's orphan outside its group by the run's environment",
          "[jobs]") {
  // A daemon's double fork: a sleep in a session of its own whose parent is gone.
  ProcessSpec spec = Shell("(setsid sleep 30 & echo $!); echo ready; exec sleep 30");
  spec.env = RunEnv("41");
  spec.timeout = 300ms;
  Collector c;
  auto e = Start(spec, c);
  const std::string orphan = c.FirstLine(*e);
  REQUIRE_FALSE(orphan.empty());
  REQUIRE(LeavesGroup(std::stoi(orphan), *e->process_group()));
  const MarkedRun this_run = {RunMarks(spec.env), *e->process_group()};
  spec.env["TICKD_FENCE"] = "42";  // another attempt's marks find nothing of this one
  const MarkedRun other_run = {RunMarks(spec.env), *e->process_group()};
  const std::vector<std::vector<pid_t>> found = MarkedProcesses({this_run, other_run});
  REQUIRE(found.size() == 2);
  CHECK(found[0] == std::vector<pid_t>{std::stoi(orphan)});  // not the group's own
  CHECK(found[1].empty());
  RunResult r = Wait(*e);
  CHECK(r.outcome == RunOutcome::kTimeout);
  CHECK(GoneWithin(std::stoi(orphan), 2s));
}

// Starts `argv` with a run's marks (RunEnv(fence)) outside any run's group.
pid_t SpawnMarked(const std::string& fence, std::vector<std::string> argv) {
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : RunEnv(fence)) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  pid_t pid = 0;
  REQUIRE(posix_spawnp(&pid, args[0], nullptr, nullptr, args.data(), envp.data()) == 0);
  return pid;
}

void KillAndReap(pid_t pid) {
  ::kill(pid, SIGKILL);
  int status = 0;
  (void)waitpid(pid, &status, 0);
}

TEST_CASE("runs that look for their processes at once each find their own", "[jobs]") {
  // MarkedProcessesShared: one scan answers whoever waits; each answer is its run's.
  constexpr int kRuns = 6;
  std::vector<pid_t> sleeps;
  for (int i = 0; i < kRuns; ++i) sleeps.push_back(SpawnMarked(std::to_string(500 + i), {"sleep", "30"}));
  std::vector<std::vector<pid_t>> found(kRuns);
  std::vector<std::thread> lookers;
  for (int i = 0; i < kRuns; ++i) {
    lookers.emplace_back([&found, i] {
      std::map<std::string, std::string> env = RunEnv(std::to_string(500 + i));
      found[static_cast<std::size_t>(i)] = MarkedProcessesShared({RunMarks(env), 0});
    });
  }
  for (std::thread& t : lookers) t.join();
  for (std::size_t i = 0; i < kRuns; ++i) {
    CHECK(found[i] == std::vector<pid_t>{sleeps[i]});
    CHECK(LiveAndMarked(sleeps[i], RunMarks(RunEnv(std::to_string(500 + i)))));
    CHECK_FALSE(LiveAndMarked(sleeps[i], RunMarks(RunEnv("499"))));
  }
  for (pid_t pid : sleeps) KillAndReap(pid);
}

TEST_CASE("a run's process found while it execs another program", "[jobs]") {
  // While a process execs, its environment reads empty for a moment (the kernel has
  // swapped in the new memory and not yet placed the environment there). A leftover
  // that `setsid` is turning into `sleep` is still the run's: a scan then must wait
  // the moment out, not pass it over. This one execs itself without end.
  const std::string loop = "exec sh -c \"$0\" \"$0\"";
  const pid_t pid = SpawnMarked("600", {"sh", "-c", loop, loop});
  const std::vector<std::string> marks = RunMarks(RunEnv("600"));
  int missed_by_scan = 0;
  int missed_by_check = 0;
  for (int i = 0; i < 300; ++i) {
    if (MarkedProcesses({{marks, 0}}).front() != std::vector<pid_t>{pid}) ++missed_by_scan;
    if (!LiveAndMarked(pid, marks)) ++missed_by_check;
  }
  KillAndReap(pid);
  CHECK(missed_by_scan == 0);
  CHECK(missed_by_check == 0);
}

TEST_CASE("/proc/PID/stat tells an exec under way from a process started without environment",
          "[jobs]") {
  // The scan waits while env_end is 0 and not when env_start == env_end: read from the
  // wrong fields, a process started with `env -i` would hold up every scan.
  char sleep_name[] = "sleep";
  char seconds[] = "30";
  char* argv[] = {sleep_name, seconds, nullptr};
  char* no_env[] = {nullptr};
  pid_t pid = 0;
  REQUIRE(posix_spawnp(&pid, "sleep", nullptr, nullptr, argv, no_env) == 0);
  std::optional<ProcStat> s = ReadProcStat(pid);
  for (int i = 0; i < 500 && s && s->env_end == 0; ++i) {  // posix_spawn may return mid-exec
    std::this_thread::sleep_for(10ms);
    s = ReadProcStat(pid);
  }
  REQUIRE(s);
  CHECK(s->env_end != 0);
  CHECK(s->env_start == s->env_end);
  CHECK_FALSE(s->kernel_thread);
  CHECK_FALSE(LiveAndMarked(pid, RunMarks(RunEnv("600"))));
  const std::optional<ProcStat> self = ReadProcStat(getpid());
  REQUIRE(self);
  CHECK(self->env_start < self->env_end);
  KillAndReap(pid);
}

TEST_CASE("a job that ignores SIGTERM is SIGKILLed after the kill grace", "[jobs]") {
  ProcessSpec spec = Shell("trap '' TERM; echo ready; sleep 5");
  spec.kill_grace = 200ms;
  Collector c;
  auto e = Start(spec, c);
  REQUIRE(c.FirstLine(*e) == "ready");
  const auto before = std::chrono::steady_clock::now();
  e->Terminate(RunOutcome::kKilled);
  RunResult r = Wait(*e);
  CHECK(r.outcome == RunOutcome::kKilled);
  CHECK(r.signal == SIGKILL);
  CHECK(std::chrono::steady_clock::now() - before >= 200ms);
  CHECK(r.duration < 4s);
}

TEST_CASE("Terminate gives its reason as the outcome; the first reason wins", "[jobs]") {
  Collector c;
  auto e = Start(Shell("echo ready; exec sleep 5"), c);
  REQUIRE(c.FirstLine(*e) == "ready");
  e->Terminate(RunOutcome::kLeaseLost);
  e->Terminate(RunOutcome::kKilled);
  RunResult r = Wait(*e);
  CHECK(r.outcome == RunOutcome::kLeaseLost);
  CHECK(r.signal == SIGTERM);
  e->Terminate(RunOutcome::kTimeout);  // after the end: changes nothing
  CHECK(Wait(*e).outcome == RunOutcome::kLeaseLost);
}

TEST_CASE("Kill SIGKILLs the whole group at once, after a SIGTERM it ignored", "[jobs]") {
  // A lease that ends (app/run_supervisor.h): SIGTERM first, SIGKILL well before the
  // kill grace.
  ProcessSpec spec = Shell("trap '' TERM; sleep 30 & echo $!; echo ready; wait");
  spec.kill_grace = 60s;
  Collector c;
  auto e = Start(spec, c);
  const std::string grandchild = c.FirstLine(*e);
  REQUIRE_FALSE(grandchild.empty());
  e->Terminate(RunOutcome::kLeaseLost);
  CHECK_FALSE(e->WaitFor(50ms).has_value());  // ignored
  e->Kill(RunOutcome::kKilled);               // nobody drives: signalled by Kill itself
  RunResult r = Wait(*e);
  CHECK(r.outcome == RunOutcome::kLeaseLost);  // the first reason
  CHECK(r.signal == SIGKILL);
  CHECK_FALSE(r.left_running);
  CHECK(GoneWithin(std::stoi(grandchild), 5s));
  e->Kill(RunOutcome::kKilled);  // after the end: nothing
  CHECK(Wait(*e).outcome == RunOutcome::kLeaseLost);
}

TEST_CASE("Kill while another thread drives the run is sent by the driver", "[jobs]") {
  Collector c;
  auto e = Start(Shell("trap '' TERM; echo ready; sleep 30"), c);
  REQUIRE(c.FirstLine(*e) == "ready");
  std::optional<RunResult> r;
  std::thread driver([&] { r = e->WaitFor(20s); });
  std::this_thread::sleep_for(50ms);
  const auto before = std::chrono::steady_clock::now();
  e->Kill(RunOutcome::kLeaseLost);
  driver.join();
  REQUIRE(r.has_value());
  CHECK(r->outcome == RunOutcome::kLeaseLost);
  CHECK(r->signal == SIGKILL);
  CHECK(std::chrono::steady_clock::now() - before < 15s);
}

TEST_CASE("Kill gives up on a call on a thread: WaitFor reports it left running", "[jobs]") {
  // A thread cannot be killed: its stop token fires, and the caller stops waiting.
  // Shared with the call's thread, which outlives the test's scope by a little.
  auto stop_seen = std::make_shared<std::atomic<bool>>(false);
  auto let_go = std::make_shared<std::atomic<bool>>(false);
  ProcessSpec spec;
  spec.timeout = 60s;
  spec.kill_grace = 60s;
  auto started = StartThreadCall(
      spec,
      [stop_seen, let_go](std::stop_token stop) {
        while (!*let_go) {
          if (stop.stop_requested()) *stop_seen = true;
          std::this_thread::sleep_for(1ms);
        }
        return CallEnd{true, std::nullopt, ""};
      },
      ThreadCallOptions{"ignored", nullptr});
  REQUIRE(started.has_value());
  Execution& e = **started;
  e.Terminate(RunOutcome::kLeaseLost);
  CHECK_FALSE(e.WaitFor(20ms).has_value());  // within its kill grace: still waited for
  e.Kill(RunOutcome::kKilled);
  const auto before = std::chrono::steady_clock::now();
  RunResult r = Wait(e, 1ms);
  CHECK(std::chrono::steady_clock::now() - before < 5s);
  CHECK(r.outcome == RunOutcome::kLeaseLost);
  CHECK(r.left_running);
  CHECK(r.error == "ignored");
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (!*stop_seen && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
  CHECK(*stop_seen);
  *let_go = true;
}

TEST_CASE("WaitFor returns nullopt while the run goes on", "[jobs]") {
  Collector c;
  auto e = Start(Shell("exec sleep 5"), c);
  CHECK_FALSE(e->WaitFor(50ms).has_value());
  e->Terminate(RunOutcome::kKilled);
  CHECK(Wait(*e).outcome == RunOutcome::kKilled);
}

TEST_CASE("a missing program is a failed run with exit status 127", "[jobs]") {
  for (const std::string program : {"tickd-no-such-program", "/nonexistent/tickd-program"}) {
    ProcessSpec spec;
    spec.argv = {program, "arg"};
    Collector c;
    auto e = Start(spec, c);
    RunResult r = Wait(*e, 0ms);
    CHECK(r.outcome == RunOutcome::kFailed);
    CHECK(r.exit_code == 127);
    CHECK_THAT(r.error, Catch::Contains(program));
  }
  // Found but without execute permission: 126, as a shell reports it.
  const std::string plain = "/tmp/tickd-not-executable-" + std::to_string(getpid());
  std::ofstream(plain) << "data\n";
  ::chmod(plain.c_str(), 0644);
  ProcessSpec not_executable;
  not_executable.argv = {plain};
  Collector c;
  auto e = Start(not_executable, c);
  CHECK(Wait(*e, 0ms).exit_code == 126);
  ::unlink(plain.c_str());
  // A directory is not a program either: execve says EACCES, as for the file above.
  ProcessSpec directory;
  directory.argv = {"/tmp"};
  Collector d;
  auto dir_run = Start(directory, d);
  const RunResult dir_result = Wait(*dir_run, 0ms);
  CHECK(dir_result.exit_code == 126);
  CHECK_THAT(dir_result.error, Catch::Contains("/tmp"));
}

TEST_CASE("the daemon's blocked and ignored signals do not leak into jobs", "[jobs]") {
  sigset_t term, old_mask;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  REQUIRE(pthread_sigmask(SIG_BLOCK, &term, &old_mask) == 0);
  struct sigaction ignore {}, old_action {};
  ignore.sa_handler = SIG_IGN;
  const bool ignoring = GENERATE(false, true);
  if (ignoring) REQUIRE(sigaction(SIGTERM, &ignore, &old_action) == 0);
  ProcessSpec spec = Shell("echo ready; exec sleep 5");
  spec.kill_grace = 5s;  // were SIGTERM blocked or ignored, SIGKILL would end it after this
  Collector c;
  auto e = Start(spec, c);
  if (ignoring) sigaction(SIGTERM, &old_action, nullptr);
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  REQUIRE(c.FirstLine(*e) == "ready");
  e->Terminate(RunOutcome::kKilled);
  RunResult r = Wait(*e);
  CHECK(r.signal == SIGTERM);
}

TEST_CASE("what a job leaves running in its group ends with the run", "[jobs]") {
  // The shell exits at once; its background sleep holds the pipe and the group.
  Collector c;
  auto e = Start(Shell("sleep 30 & echo $!"), c);
  RunResult r = Wait(*e, 5s);
  CHECK(r.outcome == RunOutcome::kDone);
  CHECK(r.exit_code == 0);
  CHECK(r.leftovers_ended);
  const std::vector<std::string> out = c.Stream("stdout");
  REQUIRE(out.size() == 1);
  CHECK(GoneWithin(std::stoi(out[0]), 2s));
}

// Runs `cmd` as a run with the marks of fence `fence` until it ends; `printed` gets
// the pids it printed, one a line.
RunResult RunMarked(const std::string& cmd, const std::string& fence,
                    std::vector<pid_t>& printed) {
  ProcessSpec spec = Shell(cmd);
  spec.env = RunEnv(fence);
  Collector c;
  auto e = Start(spec, c);
  RunResult r = Wait(*e, 8s);
  for (const std::string& line : c.Stream("stdout")) printed.push_back(std::stoi(line));
  return r;
}

TEST_CASE("what a job started outside its group ends with the run: setsid, a double fork",
          "[jobs]") {
  // The shell exits once both sleeps have left its group (each writes its pid after
  // its setsid): the setsid one goes to init then, the double-forked one (whose
  // parent, the subshell, is gone already) went before; the run's marks find them.
  std::vector<pid_t> printed;
  RunResult r = RunMarked(R"sh(f=$(mktemp)
    setsid sh -c 'echo $$ >> "$0"; exec sleep 30' "$f" &
    (setsid sh -c 'echo $$ >> "$0"; exec sleep 31' "$f" &)
    while [ "$(wc -l < "$f")" -lt 2 ]; do sleep 0.01; done
    cat "$f"; rm -f "$f")sh", "43", printed);
  CHECK(r.outcome == RunOutcome::kDone);
  CHECK(r.exit_code == 0);
  CHECK(r.leftovers_ended);
  REQUIRE(printed.size() == 2);
  for (pid_t pid : printed) CHECK(GoneWithin(pid, 2s));
}

TEST_CASE("what a job starts out of its group without the run's variables outlives it",
          "[jobs]") {
  // The documented way to start a service on purpose (job-file.md, design.md §5).
  std::vector<pid_t> printed;
  RunResult r = RunMarked(R"sh(f=$(mktemp)
    env -u TICKD_FENCE setsid sh -c 'echo $$ > "$0"; exec sleep 30' "$f" &
    while [ ! -s "$f" ]; do sleep 0.01; done
    cat "$f"; rm -f "$f")sh", "45", printed);
  CHECK(r.outcome == RunOutcome::kDone);
  CHECK_FALSE(r.leftovers_ended);
  REQUIRE(printed.size() == 1);
  CHECK(ProcessAlive(printed[0]));
  ::kill(printed[0], SIGKILL);
}

TEST_CASE("what a leftover outside the group starts as it is told to stop ends too", "[jobs]") {
  // A setsid shell that, on its SIGTERM, starts another setsid sleep and exits: found
  // by the look for the run's processes once those found before are gone.
  std::vector<pid_t> printed;
  RunResult r = RunMarked(
      "setsid sh -c 'trap \"setsid sleep 32 & echo \\$!; exit 0\" TERM; "
      "echo $$; while :; do sleep 0.05; done' &"
      "sleep 0.3", "44", printed);
  CHECK(r.outcome == RunOutcome::kDone);
  CHECK(r.leftovers_ended);
  REQUIRE(printed.size() == 2);  // the setsid shell, then the sleep its trap started
  for (pid_t pid : printed) CHECK(GoneWithin(pid, 2s));
}

TEST_CASE("a run that leaves nothing behind says so", "[jobs]") {
  Collector c;
  RunResult r = RunShell("sleep 0.05 & wait; echo done", c);
  CHECK(r.outcome == RunOutcome::kDone);
  CHECK_FALSE(r.leftovers_ended);
}

// A job whose shell exits at once, leaving a sleep that ignores SIGTERM in its group
// (from its start: the ignored disposition is inherited, so no SIGTERM can come before
// it); `leftover` is that sleep's pid.
std::unique_ptr<Execution> StartLeavingStubbornSleep(milliseconds kill_grace, Collector& c,
                                                     pid_t& leftover) {
  ProcessSpec spec = Shell("trap '' TERM; sleep 30 & echo $!");
  spec.kill_grace = kill_grace;
  auto e = Start(spec, c);
  const std::string line = c.FirstLine(*e);
  REQUIRE_FALSE(line.empty());
  leftover = std::stoi(line);
  return e;
}

TEST_CASE("a leftover that ignores SIGTERM is SIGKILLed after the kill grace", "[jobs]") {
  Collector c;
  pid_t leftover = 0;
  auto e = StartLeavingStubbornSleep(300ms, c, leftover);
  RunResult r = Wait(*e, 5s);  // the run is over only once the leftover is
  CHECK(r.outcome == RunOutcome::kDone);  // the job's own exit
  CHECK(r.leftovers_ended);
  CHECK_FALSE(ProcessAlive(leftover));
}

TEST_CASE("Kill ends leftovers at once, whatever their kill grace", "[jobs]") {
  // A lease that ends while the job's leftovers still run (app/run_supervisor.h).
  Collector c;
  pid_t leftover = 0;
  auto e = StartLeavingStubbornSleep(60s, c, leftover);
  CHECK_FALSE(e->WaitFor(200ms).has_value());  // the leftover ignored its SIGTERM
  CHECK(ProcessAlive(leftover));
  e->Kill(RunOutcome::kLeaseLost);
  RunResult r = Wait(*e, 5s);
  CHECK(r.outcome == RunOutcome::kDone);  // the job itself had ended on its own
  CHECK(r.leftovers_ended);
  CHECK(GoneWithin(leftover, 2s));
}

TEST_CASE("WaitFor(0) moves the run on: polled without waiting, a run still ends", "[jobs]") {
  Collector c;
  auto e = Start(Shell("echo done"), c);
  std::optional<RunResult> r;
  const auto give_up = std::chrono::steady_clock::now() + 10s;
  while (!r && std::chrono::steady_clock::now() < give_up) {
    r = e->WaitFor(0ms);
    if (!r) std::this_thread::sleep_for(1ms);
  }
  REQUIRE(r.has_value());
  CHECK(r->outcome == RunOutcome::kDone);
  CHECK(c.Stream("stdout") == std::vector<std::string>{"done"});
}

TEST_CASE("destroying a running Execution kills and reaps it", "[jobs]") {
  Collector c;
  auto e = Start(Shell("echo $$; exec sleep 30"), c);
  const std::string pid = c.FirstLine(*e);
  REQUIRE_FALSE(pid.empty());
  e.reset();
  CHECK(kill(std::stoi(pid), 0) == -1);  // reaped: not even a zombie is left
  CHECK(ZombieChildren() == 0);
}

TEST_CASE("many parallel runs are all reaped", "[jobs]") {
  std::vector<Collector> collectors(50);
  std::vector<std::unique_ptr<Execution>> runs;
  for (int i = 0; i < 50; ++i) {
    runs.push_back(Start(Shell("echo " + std::to_string(i)), collectors[i]));
  }
  for (int i = 0; i < 50; ++i) {
    RunResult r = Wait(*runs[i]);
    CHECK(r.outcome == RunOutcome::kDone);
    CHECK(collectors[i].Stream("stdout") == std::vector<std::string>{std::to_string(i)});
  }
  CHECK(ZombieChildren() == 0);
}

TEST_CASE("a job dies with the thread that started it (its daemon)", "[jobs]") {
  // The supervisor thread that spawned the job stands for the daemon: when it ends
  // without reaping (as when the daemon is SIGKILLed), the kernel kills the job.
  const std::string pid_file = "/tmp/tickd-pdeathsig-" + std::to_string(getpid());
  std::unique_ptr<Execution> leaked;
  std::thread daemon([&] {
    ProcessSpec spec;
    spec.argv = ShellArgv("echo $$ > " + pid_file + "; exec sleep 30");
    Collector c;
    leaked = Start(spec, c);
    for (int i = 0; i < 200 && ::access(pid_file.c_str(), F_OK) != 0; ++i) {
      std::this_thread::sleep_for(10ms);
    }
  });
  daemon.join();
  pid_t job = 0;
  for (int i = 0; i < 100 && job == 0; ++i) {
    std::ifstream(pid_file) >> job;
    if (job == 0) std::this_thread::sleep_for(10ms);
  }
  REQUIRE(job > 0);
  // The job is gone (a zombie until its Execution reaps it) once the thread ended.
  RunResult r = Wait(*leaked);
  CHECK(r.signal == SIGKILL);
  ::unlink(pid_file.c_str());
}

// Prepared to start `in` from now (default: long after the test).
std::unique_ptr<PreparedStart> Prepare(const ProcessSpec& spec, Collector& c,
                                       std::chrono::milliseconds in = 60s) {
  auto prepared = PrepareProcess(spec, c.Sink(), std::chrono::system_clock::now() + in);
  REQUIRE(prepared.has_value());
  return std::move(*prepared);
}

TEST_CASE("a prepared process starts at its instant, not before, with its environment", "[jobs]") {
  const std::string marker = "/tmp/tickd-prepared-" + std::to_string(getpid());
  ::unlink(marker.c_str());
  const int before = Children();
  Collector c;
  ProcessSpec spec = Shell("touch " + marker + "; echo \"fence=$TICKD_FENCE\"");
  spec.env["TICKD_FENCE"] = "42";
  const auto start_at = std::chrono::system_clock::now() + 300ms;
  auto prepared = PrepareProcess(spec, c.Sink(), start_at);
  REQUIRE(prepared.has_value());
  CHECK(Children() == before + 1);  // cloned and waiting
  std::this_thread::sleep_for(100ms);
  CHECK(::access(marker.c_str(), F_OK) != 0);  // nothing ran before its instant
  CHECK((*prepared)->settle() > 0ms);
  auto started = (*prepared)->Release();  // waits for the start
  CHECK(std::chrono::system_clock::now() >= start_at);
  REQUIRE(started.has_value());
  REQUIRE((*prepared)->started().has_value());
  CHECK(*(*prepared)->started() >= start_at);
  CHECK(*(*prepared)->started() < start_at + 100ms);
  RunResult r = Wait(**started);
  CHECK(r.outcome == RunOutcome::kDone);
  CHECK(c.Stream("stdout") == std::vector<std::string>{"fence=42"});
  CHECK(::access(marker.c_str(), F_OK) == 0);
  started->reset();
  prepared->reset();
  CHECK(Children() == before);
  ::unlink(marker.c_str());
}

TEST_CASE("an unreleased prepared process is killed and reaped: no launcher is left", "[jobs]") {
  const std::string marker = "/tmp/tickd-unreleased-" + std::to_string(getpid());
  ::unlink(marker.c_str());
  const int before = Children();
  Collector c;
  for (int i = 0; i < 20; ++i) {
    auto prepared = Prepare(Shell("touch " + marker), c);
    CHECK(Children() == before + 1);
  }
  CHECK(Children() == before);
  CHECK(ZombieChildren() == 0);
  std::this_thread::sleep_for(50ms);
  CHECK(::access(marker.c_str(), F_OK) != 0);
}

TEST_CASE("a prepared process dies with the thread that prepared it (its daemon)", "[jobs]") {
  const std::string marker = "/tmp/tickd-orphan-" + std::to_string(getpid());
  ::unlink(marker.c_str());
  const int zombies_before = ZombieChildren();
  Collector c;
  std::unique_ptr<PreparedStart> leaked;
  std::thread daemon([&] { leaked = Prepare(Shell("touch " + marker), c); });
  daemon.join();
  // Killed by its parent-death signal: a zombie until the PreparedStart reaps it.
  bool died = false;
  for (int i = 0; i < 500 && !died; ++i) {
    died = ZombieChildren() == zombies_before + 1;
    if (!died) std::this_thread::sleep_for(10ms);
  }
  CHECK(died);
  leaked.reset();
  CHECK(ZombieChildren() == zombies_before);
  CHECK(::access(marker.c_str(), F_OK) != 0);
}

TEST_CASE("a prepared process that cannot start is a failed run at its release", "[jobs]") {
  Collector c;
  ProcessSpec missing;
  missing.argv = {"tickd-no-such-program-xyz"};
  auto started = Prepare(missing, c, 0ms)->Release();
  REQUIRE(started.has_value());
  RunResult r = Wait(**started);
  CHECK(r.outcome == RunOutcome::kFailed);
  CHECK(r.exit_code == 127);

  ProcessSpec not_executable;
  not_executable.argv = {"/etc/hostname"};
  started = Prepare(not_executable, c, 0ms)->Release();
  REQUIRE(started.has_value());
  r = Wait(**started);
  CHECK(r.exit_code == 126);

  ProcessSpec bad_workdir = Shell("true");
  bad_workdir.workdir = "/nonexistent-tickd-dir";
  started = Prepare(bad_workdir, c, 0ms)->Release();
  REQUIRE(started.has_value());
  r = Wait(**started);
  CHECK(r.outcome == RunOutcome::kFailed);
  CHECK_FALSE(r.exit_code.has_value());
  CHECK(ZombieChildren() == 0);
}

}  // namespace
}  // namespace tickd::jobs
