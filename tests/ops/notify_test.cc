// systemd notifications through the real binary (Type=notify, WatchdogSec=): a replica
// started with NOTIFY_SOCKET and WATCHDOG_USEC sends READY=1 once it schedules, then
// WATCHDOG=1 from its scheduler loop; the pings stop while the loop is stuck (here:
// in claims that wait for SQLite's write lock, held by the test) and come back after;
// SIGTERM sends STOPPING=1 and the replica exits 0.
#include <signal.h>
#include <sqlite3.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstring>
#include <mutex>
#include <thread>

#include "tests/e2e/harness.h"

namespace tickd::e2e {
namespace {

using Clock = std::chrono::steady_clock;

// A datagram socket standing in for systemd's notify socket; a thread keeps what
// arrives, with when it arrived.
class NotifySocket {
 public:
  explicit NotifySocket(const fs::path& path) : path_(path) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    ok_ = fd_ >= 0 && path.string().size() < sizeof(addr.sun_path) &&
          ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    timeval tv{0, 100'000};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    reader_ = std::thread([this] {
      char buf[4096];
      while (!stop_) {
        const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
        if (n <= 0) continue;
        std::lock_guard lock(mu_);
        messages_.emplace_back(Clock::now(), std::string(buf, static_cast<std::size_t>(n)));
      }
    });
  }
  ~NotifySocket() {
    stop_ = true;
    reader_.join();
    ::close(fd_);
    ::unlink(path_.c_str());
  }
  bool ok() const { return ok_; }

  // When each message containing `text` arrived, from `since` on.
  std::vector<Clock::time_point> Arrivals(const std::string& text, Clock::time_point since) {
    std::lock_guard lock(mu_);
    std::vector<Clock::time_point> out;
    for (const auto& [at, message] : messages_) {
      if (at >= since && message.find(text) != std::string::npos) out.push_back(at);
    }
    return out;
  }

 private:
  fs::path path_;
  int fd_ = -1;
  bool ok_ = false;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<std::pair<Clock::time_point, std::string>> messages_;
  std::thread reader_;
};

// The longest wait between consecutive pings in [from, to], counting the edges.
std::chrono::milliseconds LongestGap(const std::vector<Clock::time_point>& pings,
                                     Clock::time_point from, Clock::time_point to) {
  Clock::time_point last = from;
  Clock::duration longest{0};
  for (Clock::time_point p : pings) {
    if (p < from || p > to) continue;
    longest = std::max(longest, p - last);
    last = p;
  }
  longest = std::max(longest, to - last);
  return std::chrono::duration_cast<std::chrono::milliseconds>(longest);
}

TEST_CASE("systemd: READY, watchdog pings from the scheduler loop that stop while it stalls, "
          "STOPPING") {
  auto sqlite = MakeSqliteFixture();
  Cluster cluster(*sqlite);
  cluster.WriteJobFile("jobs:\n  - { name: beat, schedule: \"* * * * * *\", shell: \"true\" }\n");
  NotifySocket notify(cluster.dir() / "notify.sock");
  REQUIRE(notify.ok());
  const Clock::time_point start = Clock::now();
  // WatchdogSec=0.4s: tickd pings every 100 ms and its loop turns at least every 133 ms.
  Replica& replica = cluster.StartReplica(
      "a", {"NOTIFY_SOCKET=" + (cluster.dir() / "notify.sock").string(), "WATCHDOG_USEC=400000"});

  REQUIRE(Cluster::WaitUntil([&] { return !notify.Arrivals("READY=1", start).empty(); },
                             std::chrono::seconds(10)));
  const Clock::time_point ready = notify.Arrivals("READY=1", start).front();
  std::this_thread::sleep_for(std::chrono::milliseconds(2'000));
  const Clock::time_point healthy_end = Clock::now();
  const auto healthy = notify.Arrivals("WATCHDOG=1", ready);
  CHECK(healthy.size() >= 8);
  CHECK(LongestGap(healthy, ready, healthy_end) < std::chrono::milliseconds(1'000));

  // Hold SQLite's write lock for 3 s: each claim waits op_timeout (2 s) inside the
  // loop before it fails closed, so the loop stops turning, and so must the pings.
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open((cluster.dir() / "tickd.db").c_str(), &db) == SQLITE_OK);
  REQUIRE(sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK);
  const Clock::time_point stall_start = Clock::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(3'000));
  const Clock::time_point stall_end = Clock::now();
  sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  CHECK(LongestGap(notify.Arrivals("WATCHDOG=1", stall_start), stall_start, stall_end) >=
        std::chrono::milliseconds(1'500));

  // Once the lock is free the loop, and the pings, go on.
  std::this_thread::sleep_for(std::chrono::milliseconds(3'000));
  CHECK(notify.Arrivals("WATCHDOG=1", stall_end + std::chrono::milliseconds(2'500)).size() >= 2);

  const Clock::time_point stop = Clock::now();
  replica.Signal(SIGTERM);
  const std::optional<int> status = replica.Wait(std::chrono::seconds(30));
  REQUIRE(status);
  CHECK(*status == 0);
  CHECK(notify.Arrivals("STOPPING=1", stop).size() == 1);
  INFO(replica.LogText());
  CHECK_FALSE(replica.Lines().empty());
}

}  // namespace
}  // namespace tickd::e2e
