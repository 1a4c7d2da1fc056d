// What a backend supplies to the conformance suite (ShedLock's
// AbstractLockProviderIntegrationTest model): a Harness makes replicas of ONE store
// and moves the store's clock; the suite (claim_conformance_test.cc) supplies the
// cases and runs every one of them identically against every harness.
//
// Adding a backend: write a Harness (a server backend starts its server on a free
// loopback port in the constructor and stops it in the destructor; when the server
// binary is missing, unavailable() says why and the cases are skipped with a warning),
// then add the type to AllHarnesses in harnesses.h.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "base/clock.h"
#include "lock/backend.h"

namespace tickd::conformance {

class Harness {
 public:
  virtual ~Harness() = default;

  // Non-empty: the store cannot run here (no server binary…); the cases are skipped.
  virtual std::string unavailable() const { return ""; }

  // A new replica on the shared store, with its own connection and handles, exactly
  // as another tickd process would have. Fails the test when it cannot.
  virtual std::unique_ptr<lock::Backend> OpenReplica() = 0;

  // The clock replicas use for T and node_wall (the store's own clock for memory).
  virtual Clock& clock() = 0;

  // Lets `d` pass on the store's lease clock: a FakeClock advance or a real sleep.
  virtual void Elapse(std::chrono::milliseconds d) = 0;

  // A lease short enough to let expire in a test (real stores: a few hundred ms).
  virtual std::chrono::milliseconds short_lease() const = 0;

  // Fences and records survive dropping every replica and opening new ones.
  virtual bool durable() const = 0;

  // Children made with fork() may call OpenReplica(), provided the parent has not
  // opened a replica yet (a client connection must not cross fork()).
  virtual bool forkable() const = 0;

  // The backend answers store-reset to a claim whose known_tick is above what the
  // store knows of the job (docs/design.md §1 rule 12); SQLite ignores known_tick.
  virtual bool detects_store_reset() const { return false; }
};

}  // namespace tickd::conformance
