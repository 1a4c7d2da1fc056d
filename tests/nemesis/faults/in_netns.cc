#include "tests/nemesis/faults/in_netns.h"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>
#include <thread>

namespace tickd::nemesis {

Result<void> RunInNetns(const std::string& name, const std::function<void()>& fn) {
  const std::string context = "netns " + (name.empty() ? std::string("(own)") : name);
  std::string error;
  auto body = [&] {
    if (!name.empty()) {
      const std::string path = "/run/netns/" + name;
      const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) {
        error = "open " + path + ": " + std::strerror(errno);
        return;
      }
      // This thread only: it ends right after fn, so nothing else runs in there.
      const int rc = ::setns(fd, CLONE_NEWNET);
      const int setns_errno = errno;
      ::close(fd);
      if (rc != 0) {
        error = std::string("setns: ") + std::strerror(setns_errno);
        return;
      }
    }
    fn();
  };
  try {
    std::thread thread(body);
    thread.join();
  } catch (const std::system_error& e) {
    return MakeError(context, std::string("thread: ") + e.what());
  }
  if (!error.empty()) return MakeError(context, error);
  return {};
}

}  // namespace tickd::nemesis
