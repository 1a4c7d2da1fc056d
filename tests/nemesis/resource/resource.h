// The fenced resource of the nemesis (issue #14): a stand-in for the system a job writes
// to, which protects itself from stale writers with the fence tickd hands every run
// (DESIGN §1 rule 3). It accepts a write for a job only with a fence strictly higher
// than the highest it has accepted for that job, and journals every attempt, so the
// checker (tests/nemesis/checker) can tell afterwards what reached it and when.
//
// Protocol (Unix-domain stream socket, one connection per run, text lines):
//   client → BEGIN <job> <tick_unix> <fence> <replica>\n
//   server → ACCEPT\n                       fence > highest accepted fence of <job>
//            REJECT <last_accepted_fence>\n otherwise; the server journals and closes
//            ERROR <reason>\n               a malformed line; closes, nothing journaled
//   after ACCEPT the client may send WRITE\n lines (a run that keeps writing, e.g.
//   every 100 ms); each is answered at once:
//            OK\n                           <fence> is still the job's highest accepted
//            REFUSED <highest>\n            a higher fence was accepted since (for good:
//                                           the highest only grows); the connection stays
//   then END\n (the run finished); the server journals and
//   closes, so a client that reads EOF knows its END is in the journal. A connection
//   that closes without END (the job was killed) is journaled as a disconnect.
//
// Journal: JSONL, one object per attempt, appended with one write(2) when the attempt
// ends (so a killed resource leaves only whole lines; no fsync):
//   {"job":"j1","tick":1764000000,"fence":42,"replica":"n1","accepted":true,
//    "last_fence":41,"start_ms":1764000000012,"end_ms":1764000000318,"ended":"end",
//    "seq":7}
// start_ms: the resource's CLOCK_REALTIME when it decided (BEGIN); end_ms: when the
// attempt ended. last_fence: the highest accepted fence of the job before this attempt
// (null when none). ended: "end" | "disconnect" | "rejected" | "shutdown" (accepted and
// still open when the resource was stopped) | "error" (a line other than END after
// ACCEPT). seq: the order of the decisions (BEGINs), 1, 2, … — the journal is in the
// order attempts *ended*; sort by seq for the order they were accepted.
// An attempt that sent WRITE lines also has "writes":[ms, …] (the resource's
// CLOCK_REALTIME at each WRITE, in order) and "writes_refused":K (the last K of them
// were refused); an attempt without any has neither key.
// On start, an existing journal is replayed: the highest fences and seq carry on.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace tickd::nemesis {

struct ResourceStats {
  std::uint64_t attempts = 0;  // BEGINs decided
  std::uint64_t accepted = 0;
  std::uint64_t rejected = 0;
  std::uint64_t open = 0;  // accepted attempts not yet ended
};

// The server. Serves on its own thread between Start() and Stop(). Thread-safe.
class FencedResource {
 public:
  // Binds `socket` (a stale file at that path is removed first) and opens `journal`
  // for appending, replaying what it already holds. nullptr with *error set when the
  // socket or the journal cannot be set up, or the journal holds a line that is not
  // an attempt.
  static std::unique_ptr<FencedResource> Open(const std::filesystem::path& socket,
                                              const std::filesystem::path& journal,
                                              std::string* error);
  ~FencedResource();  // Stop()
  FencedResource(const FencedResource&) = delete;
  FencedResource& operator=(const FencedResource&) = delete;

  void Start();
  // Journals every open accepted attempt as "shutdown", closes every connection and
  // removes the socket file. Idempotent.
  void Stop();

  // The highest accepted fence of `job`, nullopt when none was accepted.
  std::optional<std::uint64_t> HighestFence(const std::string& job) const;
  ResourceStats Stats() const;

 private:
  FencedResource(int listen_fd, int wake_fd, int journal_fd, std::filesystem::path socket);
  void Serve();
  struct Conn;
  void OnLine(Conn& c, const std::string& line, bool* close);
  void Journal(const Conn& c, std::int64_t end_ms, const char* ended);

  int listen_fd_;
  int wake_fd_;
  int journal_fd_;
  std::filesystem::path socket_;
  std::thread thread_;
  mutable std::mutex mu_;  // guards highest_, stats_, next_seq_
  std::map<std::string, std::uint64_t> highest_;
  ResourceStats stats_;
  std::uint64_t next_seq_ = 1;
  bool stopped_ = false;
};

// The client side of one run, as `nemesis_write` performs it.
struct WriteRequest {
  std::string job;
  std::int64_t tick_unix = 0;
  std::uint64_t fence = 0;
  std::string replica;
  int hold_ms = 0;  // between ACCEPT and END: simulated work, so overlaps are visible
  // During the hold, a WRITE every this many ms (0: none): a run that keeps writing,
  // so a writer that outlives its lease shows in the journal.
  int write_every_ms = 0;
};

enum class WriteOutcome {
  kAccepted,       // ACCEPT, held, END sent and the server's close seen
  kRejected,       // REJECT; detail = the last accepted fence
  kSocketError,    // cannot connect, the connection broke, or no answer in time
  kProtocolError,  // the server answered something else (detail = its line)
};

struct WriteResult {
  WriteOutcome outcome = WriteOutcome::kSocketError;
  std::string detail;      // kAccepted with refused writes: the highest fence that refused them
  int writes = 0;          // WRITE lines answered
  int refused_writes = 0;  // … of them REFUSED
};

// One BEGIN … END exchange. Every wait (the answer, the close after END) is bounded by
// `io_timeout_ms`.
WriteResult WriteOnce(const std::filesystem::path& socket, const WriteRequest& req,
                      int io_timeout_ms = 10000);

}  // namespace tickd::nemesis
