// Cost of one plugin run, start to published result, in each isolation mode: a
// child `tickd plugin-host` (spawn, exec of tickd, dlopen, the record channel, the
// reap) against a call on a worker thread of the daemon (library already open).
// BM_ShellEcho (`sh -c "echo noop"`, one output line) is a shell job on the same path.
#include <benchmark/benchmark.h>

#include "jobs/plugin_execution.h"

namespace {

using tickd::jobs::Execution;
using tickd::jobs::ProcessSpec;

ProcessSpec Spec() {
  ProcessSpec spec;
  spec.env = {{"TICKD_JOB", "bench"}, {"TICKD_NODE", "n"}, {"TICKD_FENCE", "1"}};
  return spec;
}

template <typename StartFn>
void RunOnce(benchmark::State& state, StartFn start) {
  std::size_t lines = 0;
  auto started = start([&lines](std::string_view, std::string_view) { ++lines; });
  if (!started) {
    state.SkipWithError(started.error().ToString().c_str());
    return;
  }
  auto result = (*started)->WaitFor(std::chrono::seconds(10));
  if (!result || result->outcome != tickd::jobs::RunOutcome::kDone || lines != 1) {
    state.SkipWithError("run did not end as done with its one log line");
  }
}

void BM_PluginProcess(benchmark::State& state) {
  const ProcessSpec spec = Spec();
  for (auto _ : state) {
    RunOnce(state, [&](tickd::jobs::OutputSink sink) {
      return tickd::jobs::StartPluginProcess(TICKD_BINARY, {NOOP_PLUGIN, "{}"}, spec,
                                             std::move(sink));
    });
  }
}
BENCHMARK(BM_PluginProcess)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_PluginInProcess(benchmark::State& state) {
  const ProcessSpec spec = Spec();
  tickd::jobs::PluginRegistry registry;
  for (auto _ : state) {
    RunOnce(state, [&](tickd::jobs::OutputSink sink) {
      return tickd::jobs::StartPluginInProcess(registry, {NOOP_PLUGIN, "{}"}, spec,
                                               std::move(sink));
    });
  }
}
BENCHMARK(BM_PluginInProcess)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_ShellEcho(benchmark::State& state) {
  ProcessSpec spec = Spec();
  spec.argv = {"/bin/sh", "-c", "echo noop"};
  for (auto _ : state) {
    RunOnce(state, [&](tickd::jobs::OutputSink sink) {
      return tickd::jobs::StartProcess(spec, std::move(sink));
    });
  }
}
BENCHMARK(BM_ShellEcho)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
