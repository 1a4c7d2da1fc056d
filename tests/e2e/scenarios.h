// The fault scenarios of the end-to-end suite, each runnable against any backend.
// A test file per backend calls them with its fixture.
#pragma once

#include "tests/e2e/harness.h"

namespace tickd::e2e {

// Three replicas, a job every second, one replica's clock 1.5 s behind and one
// 0.7 s ahead: every tick runs exactly once, fences increase with the tick, every
// replica logs one tick line per tick naming the winner.
void ScenarioSkewedReplicas(BackendFixture& backend);

// Issue #24 point 2 (docs/design.md §1 rule 15): two replicas with right clocks and a
// job every 2 s; a third replica joins with its clock 30 s ahead, then (restarted) 1 h
// ahead, then 30 s behind, then is gone. The store refuses the ahead replica's claims
// (`early`, its offset logged), the behind one loses every tick; every tick of the
// job runs exactly once, never before its instant by the real clock, with no gap,
// and the right replicas run the ticks after the third is gone.
void ScenarioWrongClock(BackendFixture& backend);

// Two replicas, one with a right clock and one 0.2 s ahead (less than the tolerance:
// let through, so it claims first and wins nearly every tick), a job every second:
// from the first run on, no run starts before its tick by the host's clock, and every
// tick runs once. The wait counts from the earliest the store's clock can have read
// when the claim was sent (design.md §1 rule 15), on etcd too while the Dates' bound is
// still wide in the first second; 2 ms are allowed for the whole ms the clocks are
// compared in.
void ScenarioClockAheadWithinTolerance(BackendFixture& backend);

// SIGKILL of the replica running a job: runs never overlap, the survivors run the
// next ticks; with recover: true the interrupted tick runs once more elsewhere with
// a higher fence.
void ScenarioKillRunningReplica(BackendFixture& backend, bool recover);

// SIGSTOP of the holder's daemon for longer than its lease: another replica takes
// the next tick; after SIGCONT the paused one logs lease-lost and its job is ended.
void ScenarioPausedHolder(BackendFixture& backend);

// `tickd pause` of one of two jobs while three replicas run them every second: from
// the first instant after the pause no replica runs it, each logs its ticks skipped,
// `tickd status` says PAUSED; the other job runs on; after `tickd resume` it runs again,
// every tick exactly once.
void ScenarioPauseResume(BackendFixture& backend);

// Run output history (docs/design.md §4 lock.history): two replicas run a job that
// prints more than lock.history.output on both streams; `tickd status JOB --runs`,
// run as another process, shows for each of the newest `runs` finished runs the end of
// what that very run printed (its own tick in the text), marked as cut, and no output
// for older runs; the winner it names is the replica whose log has the run.
void ScenarioRunOutput(BackendFixture& backend);

// SIGTERM: every replica exits 0 within the grace; every won tick is completed.
void ScenarioGracefulShutdown(BackendFixture& backend);

// REQUIRES: backend.CanRestart(). Three replicas, a job every second; the server is
// killed (kill -9) and restarted mid-run: no tick runs twice, every fence after the
// restart is greater than every fence before it, every replica reconnects and goes
// on claiming, and `secret` (the store's password) appears in no log line.
void ScenarioServerRestart(BackendFixture& backend, const std::string& secret);

// Load spreading (docs/design.md §2): three replicas, jobs with `H` in the seconds
// field, three of them with `jitter`. Every tick that `tickd next -c FILE --job J`
// prints runs exactly once; every replica claims it at the due instant `tickd next`
// printed (its tick line is never earlier, and not much later), and the run starts
// then; no tick outside the schedule runs.
void ScenarioSpread(BackendFixture& backend);

// Retries under new fences (docs/design.md §1 rule 14): three replicas, a job every
// 3 s (room for 3 tries before the next instant on a loaded machine) that fails its first two tries
// and succeeds on the third (retries: 3). Every tick that ran was tried 3 times, all on its winner,
// with 3 strictly increasing fences (above every fence of the earlier ticks); its run line says
// attempts=3 with the last fence, its two retry lines name the new fences, and the ledger
// (`tickd status --json`) holds the last one.
void ScenarioRetries(BackendFixture& backend);

}  // namespace tickd::e2e
