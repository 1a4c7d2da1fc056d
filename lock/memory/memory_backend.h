// The in-process claim backend: the semantics of the real stores (docs/design.md §1)
// inside one process, on an injected Clock, so scheduler tests run without servers
// and in simulated time. Several simulated replicas share ONE instance (directly, or
// through NewSharedBackendHandle). Nothing survives the instance.
#pragma once

#include <memory>

#include "base/clock.h"
#include "lock/backend.h"

namespace tickd::lock {

// Leases expire on clock.Steady(); `missed` is judged on clock.Wall() against
// T + starting_deadline. REQUIRES: `clock` outlives the backend. Thread-safe.
std::unique_ptr<Backend> NewMemoryBackend(Clock& clock);

// A Backend that forwards every call to `shared` (which it keeps alive): gives each
// simulated replica its own unique_ptr<Backend> onto one shared store.
std::unique_ptr<Backend> NewSharedBackendHandle(std::shared_ptr<Backend> shared);

}  // namespace tickd::lock
