// `backend: none`: no lock at all. Every claim is won, so every job runs on every
// replica. It exists for a single replica and to demonstrate why locking matters.
#pragma once

#include <memory>

#include "base/clock.h"
#include "lock/backend.h"

namespace tickd::lock {

// Claim: always kWon, fence from an in-process counter (restarts at 1 with the
// process). Renew: always kRenewed. Complete: always kCompleted. The ledger is kept
// in this process only. StartupWarnings says that nothing is shared.
// REQUIRES: `clock` outlives the backend. Thread-safe.
std::unique_ptr<Backend> NewNoneBackend(Clock& clock);

}  // namespace tickd::lock
