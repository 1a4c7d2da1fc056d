// What tickd::Scheduler::start() does in this process, for faked_clock_test.sh: on a
// SQLite store in DIR, one job, start() then stop(). Prints "started" (exit 0), or
// "refused: WHAT" for the std::runtime_error start() throws when waits on the
// monotonic clock do not end when due (exit 3).
//   start_probe DIR
#include <tickd/tickd.h>

#include <iostream>
#include <stdexcept>
#include <string>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: start_probe DIR\n";
    return 2;
  }
  tickd::Expected<tickd::Store> store =
      tickd::Store::open(std::string("sqlite://") + argv[1] + "/tickd.db");
  if (!store) {
    std::cerr << "start_probe: " << store.error().message << "\n";
    return 1;
  }
  tickd::Scheduler scheduler(*store, {.node = "probe", .log = [](std::string_view) {}});
  scheduler.add("probe", "0 0 1 1 *", [](const tickd::RunContext&) {});
  try {
    scheduler.start();
  } catch (const std::runtime_error& e) {
    std::cout << "refused: " << e.what() << "\n";
    return 3;
  }
  scheduler.stop(std::chrono::milliseconds(0));
  std::cout << "started\n";
  return 0;
}
