// The tail of one run's output, kept with its tick in the ledger (docs/design.md §4
// `lock.history`): the last bytes of the lines the run printed, stdout and stderr
// interleaved in the order the lines arrived, each line tagged with its stream.
//
// The stored text is one line per output line, "<tag> <line>\n", the tag being
//   o  stdout      e  stderr      h  an HTTP job's response (stream "http")
//   !  a note by tickd (first line only: how much earlier output was not kept)
// It is always valid UTF-8 without NUL (bytes that are not are replaced by U+FFFD), so
// every store can keep it as text (PostgreSQL's TEXT, JSON, etc.). The budget counts
// the stored bytes, tags included, so `max_bytes` bounds what a store receives (plus
// the note, under 48 bytes). Lines are dropped from the front, whole; only a single
// line longer than the whole budget is cut, at its front, never inside a UTF-8
// character.
#pragma once

#include <cstddef>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

namespace tickd::jobs {

// The most output a run may keep (lock.history.output): below every store's limit
// with a batch of completes split by size (docs/backends.md).
inline constexpr std::size_t kMaxOutputTailBytes = 64 * 1024;

// Not thread-safe: one per run, behind the caller's lock.
class OutputTail {
 public:
  // max_bytes 0: nothing is kept.
  explicit OutputTail(std::size_t max_bytes) : max_bytes_(max_bytes) {}

  // One line of `stream` ("stdout", "stderr" or "http"; anything else counts as stdout),
  // without its '\n'.
  void Add(std::string_view stream, std::string_view line);

  // The stored form (see above); "" when nothing was printed or nothing is kept.
  std::string Text() const;

  // Bytes of stored text dropped so far to stay within max_bytes.
  std::size_t cut_bytes() const { return cut_bytes_; }

 private:
  std::size_t max_bytes_;
  std::deque<std::string> lines_;  // each "<tag> <line>\n"
  std::size_t bytes_ = 0;          // of lines_
  std::size_t cut_bytes_ = 0;
};

// One line of a stored tail: stream is "stdout", "stderr", "http" or "tickd" (the note).
struct OutputLine {
  std::string stream;
  std::string text;
};

// The lines of a stored tail, in order ("" → none). Lines with an unknown tag are
// kept whole, as stdout (a newer tickd may add tags).
std::vector<OutputLine> ParseOutputTail(std::string_view stored);

// `bytes` with every byte that is not part of valid UTF-8, and every NUL, replaced
// by U+FFFD.
std::string ValidUtf8(std::string_view bytes);

}  // namespace tickd::jobs
