// isolation: process — both sides of it: the daemon starting `tickd plugin-host`
// and decoding its record channel, and the host itself (see plugin_execution.h).
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <csignal>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "jobs/plugin_call.h"
#include "jobs/plugin_execution.h"

extern char** environ;

namespace tickd::jobs {
namespace {

constexpr std::string_view kResultRecord = "result";
constexpr int kExitCannotLoad = 126;

// --- the daemon's side -----------------------------------------------------------

// What the decoder learned from the record channel; shared by the sink (on the
// execution's thread) and WaitFor (on the supervisor's).
struct Records {
  std::mutex mu;
  std::string error;  // the last "result" record
};

bool IsLevelName(std::string_view word) {
  return word == "debug" || word == "info" || word == "warn" || word == "error";
}

OutputSink DecodingSink(OutputSink sink, std::shared_ptr<Records> records) {
  return [sink = std::move(sink), records](std::string_view stream, std::string_view line) {
    if (stream != "stdout") {
      if (sink) sink(stream, line);
      return;
    }
    const std::size_t space = line.find(' ');
    const std::string_view word = line.substr(0, space);
    const std::string_view message =
        space == std::string_view::npos ? std::string_view() : line.substr(space + 1);
    if (word == kResultRecord) {
      std::lock_guard lock(records->mu);
      records->error.assign(message);
      return;
    }
    if (!sink) return;
    if (IsLevelName(word)) {
      sink("plugin." + std::string(word), message);
    } else {
      sink(stream, line);
    }
  };
}

class PluginProcessExecution final : public Execution {
 public:
  PluginProcessExecution(std::unique_ptr<Execution> inner, std::shared_ptr<Records> records)
      : inner_(std::move(inner)), records_(std::move(records)) {}

  void Terminate(RunOutcome reason) override { inner_->Terminate(reason); }
  void Kill(RunOutcome reason) override { inner_->Kill(reason); }

  std::optional<RunResult> WaitFor(milliseconds d) override {
    std::optional<RunResult> r = inner_->WaitFor(d);
    if (r && r->error.empty()) {
      std::lock_guard lock(records_->mu);
      r->error = records_->error;
    }
    return r;
  }
  std::optional<int> process_group() const override { return inner_->process_group(); }

 private:
  std::unique_ptr<Execution> inner_;
  std::shared_ptr<Records> records_;
};

// --- the host's side -------------------------------------------------------------

volatile std::sig_atomic_t g_cancelled = 0;

void OnTerminate(int /*sig*/) { g_cancelled = 1; }

// The host's stdout, kept as a descriptor of its own for what it tells the daemon;
// stdout itself becomes stderr, so that nothing the plugin prints passes for that.
// -1 when it cannot be done.
int TakeStdout() {
  const int fd = ::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
  if (fd < 0 || ::dup2(STDERR_FILENO, STDOUT_FILENO) < 0) return -1;
  return fd;
}

// Writes records to the saved stdout; a plugin may log from several threads.
class RecordWriter {
 public:
  explicit RecordWriter(int fd) : fd_(fd) {}

  // One line per line of `message`, so a record never spans two lines.
  void Write(std::string_view kind, std::string_view message) {
    std::lock_guard lock(mu_);
    do {
      const std::size_t nl = message.find('\n');
      std::string line(kind);
      line += ' ';
      line += message.substr(0, nl);
      line += '\n';
      WriteAll(line);
      message = nl == std::string_view::npos ? std::string_view() : message.substr(nl + 1);
    } while (!message.empty());
  }

 private:
  void WriteAll(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;  // the daemon is gone: nothing to tell
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
  }

  std::mutex mu_;
  int fd_;
};

std::map<std::string, std::string> Environment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view kv(*e);
    const std::size_t eq = kv.find('=');
    if (eq == std::string_view::npos) continue;
    env.emplace(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
  }
  return env;
}

}  // namespace

Result<std::string> CurrentExecutable() {
  char buffer[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buffer, sizeof buffer - 1);
  if (n <= 0) return MakeError("/proc/self/exe", std::strerror(errno));
  return std::string(buffer, static_cast<std::size_t>(n));
}

namespace {

ProcessSpec HostSpec(const std::string& host_binary, const PluginJob& plugin,
                     const ProcessSpec& spec) {
  ProcessSpec host = spec;
  host.argv = {host_binary, "plugin-host", plugin.path};
  host.env[kPluginConfigEnv] = plugin.config_json;
  return host;
}

// A prepared plugin host (PrepareProcess) whose run, once released, reads its records.
class PreparedPluginProcess final : public PreparedStart {
 public:
  PreparedPluginProcess(std::unique_ptr<PreparedStart> host, std::shared_ptr<Records> records)
      : host_(std::move(host)), records_(std::move(records)) {}

  Result<std::unique_ptr<Execution>> Release() override {
    auto started = host_->Release();
    if (!started) return started;
    return std::unique_ptr<Execution>(
        std::make_unique<PluginProcessExecution>(std::move(*started), records_));
  }
  milliseconds settle() const override { return host_->settle(); }
  std::optional<std::chrono::system_clock::time_point> started() const override {
    return host_->started();
  }
  std::optional<int> process_group() const override { return host_->process_group(); }

 private:
  std::unique_ptr<PreparedStart> host_;
  std::shared_ptr<Records> records_;
};

}  // namespace

Result<std::unique_ptr<Execution>> StartPluginProcess(const std::string& host_binary,
                                                      const PluginJob& plugin,
                                                      const ProcessSpec& spec, OutputSink sink) {
  auto records = std::make_shared<Records>();
  auto started =
      StartProcess(HostSpec(host_binary, plugin, spec), DecodingSink(std::move(sink), records));
  if (!started) return started;
  return std::unique_ptr<Execution>(
      std::make_unique<PluginProcessExecution>(std::move(*started), std::move(records)));
}

Result<std::unique_ptr<PreparedStart>> PreparePluginProcess(
    const std::string& host_binary, const PluginJob& plugin, const ProcessSpec& spec,
    OutputSink sink, std::chrono::system_clock::time_point start_at) {
  auto records = std::make_shared<Records>();
  auto prepared = PrepareProcess(HostSpec(host_binary, plugin, spec),
                                 DecodingSink(std::move(sink), records), start_at);
  if (!prepared) return tl::unexpected(prepared.error());
  return std::unique_ptr<PreparedStart>(
      std::make_unique<PreparedPluginProcess>(std::move(*prepared), std::move(records)));
}

int RunPluginHost(const std::string& path) {
  const int records_fd = TakeStdout();  // the record channel
  if (records_fd < 0) return kExitCannotLoad;
  RecordWriter records(records_fd);

  struct sigaction sa {};
  sa.sa_handler = &OnTerminate;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGTERM, &sa, nullptr);

  std::map<std::string, std::string> env = Environment();
  auto config = env.find(kPluginConfigEnv);
  PluginRunParams params =
      RunParamsFromEnv(env, config != env.end() ? config->second : std::string("{}"));

  auto loaded = OpenPlugin(path);
  if (!loaded) {
    records.Write(kResultRecord, loaded.error().ToString());
    return kExitCannotLoad;
  }
  // Never dlclose'd: the process ends with _exit, and threads the plugin started may
  // still be inside it.
  static std::shared_ptr<LoadedPlugin> keep;
  keep = *loaded;
  PluginCallResult result = CallPlugin((*loaded)->plugin(), params,
                                       [&records](int level, std::string_view message) {
                                         records.Write(PluginLogLevelName(level), message);
                                       },
                                       [] { return g_cancelled != 0; });
  if (result.status != 0 && !result.error.empty()) records.Write(kResultRecord, result.error);
  return PluginExitStatus(result.status);
}

// --- the validator's check in a child ----------------------------------------------

namespace {

constexpr std::string_view kCheckOk = "ok";
constexpr int kExitCheckRefused = 2;
constexpr milliseconds kCheckTimeout{10'000};

}  // namespace

int RunPluginCheck(const std::string& path) {
  const int verdict_fd = TakeStdout();  // one line: kCheckOk or the error
  if (verdict_fd < 0) return kExitCannotLoad;
  auto opened = OpenPlugin(path);
  const std::string verdict = (opened ? std::string(kCheckOk) : opened.error().ToString()) + "\n";
  const bool written = ::write(verdict_fd, verdict.data(), verdict.size()) ==
                       static_cast<ssize_t>(verdict.size());
  if (!written) return kExitCannotLoad;
  return opened ? 0 : kExitCheckRefused;
}

Result<void> CheckPluginInHost(const std::string& host_binary, const std::string& path) {
  ProcessSpec spec;
  spec.argv = {host_binary, "plugin-host", "--check", path};
  spec.timeout = kCheckTimeout;
  spec.kill_grace = milliseconds(0);
  spec.max_output_lines = 100;
  std::string verdict;  // the child's last line on stdout
  auto started = StartProcess(spec, [&verdict](std::string_view stream, std::string_view line) {
    if (stream == "stdout") verdict = line;
  });
  // No child to check in (no /proc/self/exe in a bare chroot, no process left): the
  // check is made here, as before there was a child.
  if (!started) return CheckPluginLoads(path);
  std::optional<RunResult> r;
  do {
    r = (*started)->WaitFor(milliseconds(1'000));  // the timeout is the spec's
  } while (!r);
  if (r->outcome == RunOutcome::kDone && verdict == kCheckOk) return {};
  if (r->outcome == RunOutcome::kTimeout) {
    return MakeError(path, "loading it did not finish within " +
                               std::to_string(kCheckTimeout.count() / 1000) +
                               "s: a library constructor that hangs would hang tickd");
  }
  if (r->signal) {
    const char* abbrev = sigabbrev_np(*r->signal);
    const std::string name = abbrev != nullptr ? std::string("SIG") + abbrev
                                               : "signal " + std::to_string(*r->signal);
    return MakeError(path, "loading it crashed the check (" + name +
                               "): a library constructor that crashes would take tickd down");
  }
  if (r->exit_code == kExitCheckRefused && !verdict.empty()) {
    // OpenPlugin's own error, "PATH: why": the path is the context again below.
    const std::string prefix = path + ": ";
    return MakeError(path, verdict.rfind(prefix, 0) == 0 ? verdict.substr(prefix.size()) : verdict);
  }
  if (!r->error.empty()) return CheckPluginLoads(path);  // the host could not be executed
  return MakeError(path, "loading it ended the check (exit status " +
                             std::to_string(r->exit_code.value_or(-1)) +
                             "): a library constructor that exits would end tickd");
}

}  // namespace tickd::jobs
