// orders-cleanup-service: the unpaid-order cleanup that Spring services run as an
// @Scheduled method under ShedLock, as a C++ function under libtickd. Run it on as
// many machines as you like (and beside `tickd run` daemons with the same job on the
// same store): each tick runs on exactly one of them.
//
//   orders-cleanup-service STORE_URL ORDERS_FILE [NODE] [SCHEDULE]
//   orders-cleanup-service sqlite:///var/lib/shop/tickd.db /var/lib/shop/orders.log
//
// The "database" here is ORDERS_FILE, a fenced resource: a cleanup appends
// "tick=T fence=F node=N" under flock(2) and is refused when a later fence already
// wrote (a run whose lease was lost can no longer write). Stops on SIGTERM / SIGINT.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <tickd/tickd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <string>

namespace {

// Writes one cleanup as tick + fence, unless a cleanup with a later fence already
// wrote: the fence check a real database does in the cleanup's transaction.
bool CancelUnpaidOrders(const std::string& path, const tickd::RunContext& run) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0 || ::flock(fd, LOCK_EX) != 0) throw std::runtime_error("cannot open " + path);
  std::uint64_t last_fence = 0;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (auto at = line.find("fence="); at != std::string::npos) {
      last_fence = std::max<std::uint64_t>(last_fence, std::stoull(line.substr(at + 6)));
    }
  }
  bool fresh = run.fence > last_fence;
  if (fresh) {
    const std::string line = "tick=" + std::to_string(run.tick.time_since_epoch().count()) +
                             " fence=" + std::to_string(run.fence) + " node=" + run.node + "\n";
    if (::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) fresh = false;
  }
  ::close(fd);  // drops the flock
  return fresh;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: orders-cleanup-service STORE_URL ORDERS_FILE [NODE] [SCHEDULE]\n";
    return 2;
  }
  const std::string orders = argv[2];
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);  // before any thread: all inherit it

  // The core: a store, a scheduler, the function on its schedule.
  tickd::Expected<tickd::Store> store = tickd::Store::open(argv[1]);
  if (!store) {
    std::cerr << "orders-cleanup-service: " << store.error().message << "\n";
    return 1;
  }
  tickd::Scheduler scheduler(*store, {.node = argc > 3 ? argv[3] : ""});
  scheduler.add("orders-cleanup", argc > 4 ? argv[4] : "*/5 * * * *",
                [&](const tickd::RunContext& run) {
                  if (!CancelUnpaidOrders(orders, run)) throw std::runtime_error("stale fence");
                });
  scheduler.start();

  int sig = 0;
  sigwait(&stop_signals, &sig);
  scheduler.stop(std::chrono::seconds(10));  // lets a running cleanup finish
  return 0;
}
