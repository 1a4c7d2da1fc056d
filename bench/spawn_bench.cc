// Cost of one run through jobs::StartProcess, from spawn to the published result:
// posix_spawn, the supervisor thread, the reap and the output drain.
#include <benchmark/benchmark.h>

#include <cstdlib>

#include "jobs/execution.h"

namespace {

using tickd::jobs::ProcessSpec;

void RunOnce(benchmark::State& state, const ProcessSpec& spec) {
  std::size_t lines = 0;
  auto started = tickd::jobs::StartProcess(
      spec, [&lines](std::string_view, std::string_view) { ++lines; });
  if (!started) {
    state.SkipWithError(started.error().ToString().c_str());
    return;
  }
  auto result = (*started)->WaitFor(std::chrono::seconds(10));
  if (!result || result->outcome != tickd::jobs::RunOutcome::kDone) {
    state.SkipWithError("run did not end as done");
  }
  benchmark::DoNotOptimize(lines);
}

// The smallest run: an argv job, no shell.
void BM_SpawnTrue(benchmark::State& state) {
  ProcessSpec spec;
  spec.argv = {"true"};
  for (auto _ : state) RunOnce(state, spec);
}
BENCHMARK(BM_SpawnTrue)->UseRealTime()->Unit(benchmark::kMicrosecond);

// A `shell:` job.
void BM_SpawnShell(benchmark::State& state) {
  ProcessSpec spec;
  spec.argv = tickd::jobs::ShellArgv("exit 0");
  for (auto _ : state) RunOnce(state, spec);
}
BENCHMARK(BM_SpawnShell)->UseRealTime()->Unit(benchmark::kMicrosecond);

// A run that prints state.range(0) lines, all captured.
void BM_SpawnWithOutput(benchmark::State& state) {
  ProcessSpec spec;
  spec.argv = {"seq", "1", std::to_string(state.range(0))};
  spec.max_output_lines = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) RunOnce(state, spec);
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_SpawnWithOutput)->Arg(1'000)->Arg(100'000)->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
