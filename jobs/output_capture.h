// Turns the byte streams of a run's stdout and stderr into bounded lines for its
// OutputSink: lines are cut at max_line_bytes (and marked), at most max_lines lines
// reach the sink per run (both streams together), the rest are only counted.
// Pure (no I/O), so it is tested without processes. Not thread-safe: one per run,
// used by whichever thread drives the run.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

#include "jobs/execution.h"

namespace tickd::jobs {

enum class OutputStream { kStdout = 0, kStderr = 1 };

std::string_view OutputStreamName(OutputStream s);  // "stdout" "stderr"

// Appended to a line that was cut at max_line_bytes.
inline constexpr std::string_view kTruncatedMark = "\u2026[truncated]";

// `line` itself when it fits in max_line_bytes; else CutLine(line). What both a
// process's lines and an in-thread call's (plugin, HTTP) go through.
std::string FitLine(std::string_view line, std::size_t max_line_bytes);
// `prefix`, the first bytes of a longer line, as that line is shown: at most its first
// max_line_bytes, never ending inside a UTF-8 character (one cut at prefix's own end
// is dropped too), plus kTruncatedMark.
std::string CutLine(std::string_view prefix, std::size_t max_line_bytes);

// At most max_lines lines reach `sink` (the rest are only counted); a throwing sink
// loses its line, never the caller's thread (a run's supervisor or call thread, where
// an exception would end the daemon). An empty sink discards the lines, still counted.
// Not thread-safe.
class LineBudget {
 public:
  LineBudget(OutputSink sink, std::size_t max_lines)
      : sink_(std::move(sink)), max_lines_(max_lines) {}

  void Deliver(std::string_view stream, std::string_view line);
  // Lines not delivered because max_lines was reached.
  std::size_t dropped() const { return dropped_; }
  // No line reaches the sink after this.
  void Detach() { sink_ = nullptr; }

 private:
  OutputSink sink_;
  std::size_t max_lines_;
  std::size_t delivered_ = 0;
  std::size_t dropped_ = 0;
};

class OutputCapture {
 public:
  // An empty `sink` discards the lines (they still count against max_lines).
  OutputCapture(OutputSink sink, std::size_t max_lines, std::size_t max_line_bytes);

  // Bytes read from `s`: each complete line ('\n' removed) goes to the sink at once.
  // A line longer than max_line_bytes goes as soon as it is that long: its first
  // max_line_bytes (never splitting a UTF-8 character) plus kTruncatedMark; the rest
  // of it, up to its '\n', is discarded.
  void Feed(OutputStream s, std::string_view bytes);
  // End of `s`: a final line without '\n' goes to the sink. Idempotent.
  void Finish(OutputStream s);

  // Lines not delivered because max_lines was reached.
  std::size_t dropped_lines() const { return lines_.dropped(); }

 private:
  struct StreamState {
    std::string partial;   // bytes of the current line so far
    bool skipping = false; // inside the discarded rest of a cut line
  };

  void Deliver(OutputStream s, std::string_view line);

  LineBudget lines_;
  std::size_t max_line_bytes_;
  std::array<StreamState, 2> streams_;
};

}  // namespace tickd::jobs
