// nemesis_resource --socket PATH --journal FILE
// The fenced resource (resource.h) as a process: serves until SIGTERM or SIGINT, then
// journals the attempts still open as "shutdown", removes the socket and exits 0.
// Bad arguments: a message and exit status 2; a socket or journal that cannot be set
// up: exit status 1.
#include <signal.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "tests/nemesis/resource/resource.h"

namespace {

constexpr const char* kUsage =
    "usage: nemesis_resource --socket PATH --journal FILE\n"
    "(tests/nemesis/README.md, section \"Fenced resource and checker\")\n";

int Usage(const std::string& why) {
  std::fprintf(stderr, "nemesis_resource: %s\n", why.c_str());
  std::fputs(kUsage, stderr);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string socket;
  std::string journal;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if ((arg == "--socket" || arg == "--journal") && i + 1 < argc) {
      (arg == "--socket" ? socket : journal) = argv[++i];
    } else if (arg == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else {
      return Usage("argument " + std::to_string(i) + " (" + arg + "): unknown or missing value");
    }
  }
  if (socket.empty() || journal.empty()) return Usage("--socket and --journal are required");

  // Blocked before the server thread starts, so only sigwait below sees them.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);

  std::string error;
  auto resource = tickd::nemesis::FencedResource::Open(socket, journal, &error);
  if (!resource) {
    std::fprintf(stderr, "nemesis_resource: %s\n", error.c_str());
    return 1;
  }
  resource->Start();
  std::fprintf(stderr, "nemesis_resource: serving on %s, journal %s\n", socket.c_str(),
               journal.c_str());
  int sig = 0;
  sigwait(&set, &sig);
  resource->Stop();
  const auto stats = resource->Stats();
  std::fprintf(stderr, "nemesis_resource: %s; %llu attempts, %llu accepted, %llu rejected\n",
               strsignal(sig), static_cast<unsigned long long>(stats.attempts),
               static_cast<unsigned long long>(stats.accepted),
               static_cast<unsigned long long>(stats.rejected));
  return 0;
}
