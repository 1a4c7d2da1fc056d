// nemesis_write --socket PATH [--hold-ms N] [--write-every-ms M]
// The job command of the nemesis: one write to the fenced resource (resource.h) with
// the tick tickd hands the job (DESIGN §5: TICKD_JOB, TICKD_TICK_UNIX, TICKD_FENCE,
// TICKD_NODE), then with --write-every-ms a WRITE every M ms while it holds. Exit
// status: 0 accepted (held N ms, then END); 3 rejected (a stale fence), or some of its
// WRITEs refused (a later fence began meanwhile); 4 the resource cannot be reached or
// broke the exchange; 2 bad arguments or environment.
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/nemesis/resource/resource.h"

namespace {

constexpr const char* kUsage =
    "usage: nemesis_write --socket PATH [--hold-ms N] [--write-every-ms M]\n"
    "(tests/nemesis/README.md, section \"Fenced resource and checker\")\n";

int Usage(const std::string& why) {
  std::fprintf(stderr, "nemesis_write: %s\n", why.c_str());
  std::fputs(kUsage, stderr);
  return 2;
}

template <typename T>
bool ParseNumber(const std::string& s, T* out) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return !s.empty() && ec == std::errc() && end == s.data() + s.size();
}

// A protocol word: non-empty, no whitespace.
bool IsWord(const std::string& s) {
  return !s.empty() && s.find_first_of(" \t\r\n") == std::string::npos;
}

}  // namespace

int main(int argc, char** argv) {
  std::string socket;
  tickd::nemesis::WriteRequest req;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (arg == "--socket" && i + 1 < argc) {
      socket = argv[++i];
    } else if (arg == "--hold-ms" && i + 1 < argc) {
      if (!ParseNumber(std::string(argv[++i]), &req.hold_ms) || req.hold_ms < 0) {
        return Usage("--hold-ms " + std::string(argv[i]) + ": not a count of milliseconds");
      }
    } else if (arg == "--write-every-ms" && i + 1 < argc) {
      if (!ParseNumber(std::string(argv[++i]), &req.write_every_ms) || req.write_every_ms <= 0) {
        return Usage("--write-every-ms " + std::string(argv[i]) +
                     ": not a positive count of milliseconds");
      }
    } else {
      return Usage("argument " + std::to_string(i) + " (" + arg + "): unknown or missing value");
    }
  }
  if (socket.empty()) return Usage("--socket is required");
  auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return std::string(v == nullptr ? "" : v);
  };
  req.job = env("TICKD_JOB");
  req.replica = env("TICKD_NODE");
  const std::string tick = env("TICKD_TICK_UNIX");
  const std::string fence = env("TICKD_FENCE");
  if (!IsWord(req.job)) return Usage("TICKD_JOB is unset or has whitespace");
  if (!IsWord(req.replica)) return Usage("TICKD_NODE is unset or has whitespace");
  if (!ParseNumber(tick, &req.tick_unix))
    return Usage("TICKD_TICK_UNIX='" + tick + "': not a number");
  if (!ParseNumber(fence, &req.fence)) return Usage("TICKD_FENCE='" + fence + "': not a number");

  const tickd::nemesis::WriteResult r = tickd::nemesis::WriteOnce(socket, req);
  switch (r.outcome) {
    case tickd::nemesis::WriteOutcome::kAccepted:
      if (r.refused_writes == 0) return 0;
      std::fprintf(stderr,
                   "nemesis_write: %d of %d writes refused: fence %s is below %s, accepted for "
                   "%s since\n",
                   r.refused_writes, r.writes, fence.c_str(), r.detail.c_str(), req.job.c_str());
      return 3;
    case tickd::nemesis::WriteOutcome::kRejected:
      std::fprintf(stderr,
                   "nemesis_write: rejected: fence %s is not above %s, the last accepted for %s\n",
                   fence.c_str(), r.detail.c_str(), req.job.c_str());
      return 3;
    case tickd::nemesis::WriteOutcome::kSocketError:
      std::fprintf(stderr, "nemesis_write: %s: %s\n", socket.c_str(), r.detail.c_str());
      return 4;
    case tickd::nemesis::WriteOutcome::kProtocolError:
      std::fprintf(stderr, "nemesis_write: %s: unexpected answer '%s'\n", socket.c_str(),
                   r.detail.c_str());
      return 4;
  }
  return 4;
}
