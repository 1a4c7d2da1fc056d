// Runs of plugin jobs (docs/design.md §8), as Executions like any other run.
//
// isolation: process (default). Each run is a child `tickd plugin-host PATH`,
// started through StartProcess: its own process group, the job environment
// (TICKD_JOB, TICKD_TICK_UNIX, TICKD_NODE, TICKD_FENCE, TICKD_ATTEMPT) plus
// TICKD_PLUGIN_CONFIG (the config JSON; the environment, unlike argv, is readable by
// the owner alone). The host dlopens the plugin, calls init + run + shutdown and exits
// with run's return value. SIGTERM makes cancelled() return non-zero. Its stdout is a
// record channel — one "LEVEL message" line per log() call, "result message" for the
// err text of a failed run — and the plugin's own stdout is redirected to stderr, so
// nothing the plugin prints can forge a record. A crash, a hang or a leak ends with
// the child: timeouts and lease loss kill its group as for any process.
//
// isolation: none. The library is opened once (PluginRegistry) and each run is a
// call on a worker thread of the daemon: no spawn cost, but a crash takes the
// replica down. Cancellation is cooperative: Terminate sets the flag cancelled()
// reads. A plugin that has not returned kill_grace after that is reported with the
// terminating outcome, and its thread is left running: a thread cannot be killed.
//
// Log lines reach the OutputSink with stream "plugin.debug", "plugin.info",
// "plugin.warn" or "plugin.error"; other output of the host as "stdout"/"stderr".
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "base/error.h"
#include "jobs/execution.h"
#include "jobs/plugin_loader.h"

namespace tickd::jobs {

struct PluginJob {
  std::string path;                // the library, absolute
  std::string config_json = "{}";  // plugin.config
};

// The environment variable that carries the config JSON to the plugin host.
inline constexpr const char* kPluginConfigEnv = "TICKD_PLUGIN_CONFIG";

// The running executable (/proc/self/exe resolved), the plugin host of the daemon.
// Resolve it at start: after the binary is replaced on disk the link names a
// deleted file. Error when it cannot be read.
Result<std::string> CurrentExecutable();

// Starts `host_binary plugin-host PATH` with spec's environment, workdir, timeout,
// kill grace and output bounds (spec.argv is ignored). Outcomes as StartProcess; a
// failed run's err text becomes RunResult::error.
Result<std::unique_ptr<Execution>> StartPluginProcess(const std::string& host_binary,
                                                      const PluginJob& plugin,
                                                      const ProcessSpec& spec, OutputSink sink);

// StartPluginProcess made ready ahead of `start_at`: the host is a PrepareProcess
// child that execs at start_at (PrepareProcess says what is done before and what
// Release returns).
Result<std::unique_ptr<PreparedStart>> PreparePluginProcess(
    const std::string& host_binary, const PluginJob& plugin, const ProcessSpec& spec,
    OutputSink sink, std::chrono::system_clock::time_point start_at);

// Runs the plugin on a new thread of this process (spec.env gives the run's
// parameters; spec.timeout and spec.kill_grace apply as above; spec.argv and
// spec.workdir are ignored — a thread shares the daemon's working directory). A
// plugin that cannot be opened is a finished kFailed run with the error. An Error
// only when no thread can be started.
Result<std::unique_ptr<Execution>> StartPluginInProcess(PluginRegistry& registry,
                                                        const PluginJob& plugin,
                                                        const ProcessSpec& spec, OutputSink sink);

// StartPluginInProcess made ready ahead of `start_at` (PrepareThreadCall): the
// library is opened now, and the call's thread waits for start_at, calling the plugin
// then unless the monotonic clock has reached `start_bound` (the lease is over).
Result<std::unique_ptr<PreparedStart>> PreparePluginInProcess(
    PluginRegistry& registry, const PluginJob& plugin, const ProcessSpec& spec, OutputSink sink,
    std::chrono::system_clock::time_point start_at,
    std::chrono::steady_clock::time_point start_bound);

// The child side: `tickd plugin-host PATH`. Reads the run's parameters from the
// environment, loads and runs the plugin, writes the record channel on stdout.
// Returns the exit status: run's return value (PluginExitStatus), 126 when the
// plugin cannot be loaded. The caller should _exit() with it: threads the plugin
// left behind must not run static destructors.
int RunPluginHost(const std::string& path);

// The validator's plugin check (OpenPlugin's) made in a child, `host_binary
// plugin-host --check PATH`, so that a library whose constructor crashes, exits or
// hangs takes down only the child: the validating process (`tickd validate`, the
// daemon at start and at a reload) reports it as the plugin's error instead. Errors
// (context = the path): OpenPlugin's; "loading it crashed the check (SIGSEGV)"; "…
// ended the check (exit status N)"; "… did not finish within 10s" (then killed). When
// no child can be started or `host_binary` executed, OpenPlugin is called here.
Result<void> CheckPluginInHost(const std::string& host_binary, const std::string& path);

// The child's side of CheckPluginInHost: OpenPlugin(path), its verdict on stdout
// (what the library prints goes to stderr). Returns the exit status: 0 it loads, 2 not.
int RunPluginCheck(const std::string& path);

}  // namespace tickd::jobs
