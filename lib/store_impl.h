// What a tickd::Store handle shares (include/tickd/store.h): the backend and the clock
// the engine reads. Private to the library; tests build stores over a memory backend
// and a FakeClock with MakeStore.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "base/clock.h"
#include "lock/backend.h"
#include "tickd/store.h"

namespace tickd {

struct Store::Impl {
  std::unique_ptr<Clock> own_clock;  // the RealClock of Store::open; null with MakeStore
  Clock* clock = nullptr;
  std::unique_ptr<lock::Backend> backend;
  std::string url;  // password masked
  // The longest real-time wait before the clock is read again (1 ms for a FakeClock).
  std::chrono::milliseconds max_real_wait{1'000};
};

namespace lib {

// A store over `backend` whose users read `clock`. REQUIRES: `clock` outlives every
// copy of the store and everything made from it.
Store MakeStore(std::unique_ptr<lock::Backend> backend, Clock& clock,
                std::chrono::milliseconds max_real_wait);

}  // namespace lib
}  // namespace tickd
