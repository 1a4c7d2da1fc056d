#include "jobs/output_capture.h"

#include <algorithm>
#include <utility>

namespace tickd::jobs {
namespace {

// The largest cut <= `limit` that does not split a UTF-8 sequence of `line`.
std::size_t Utf8CutPoint(std::string_view line, std::size_t limit) {
  std::size_t cut = limit;
  // Step back over continuation bytes (10xxxxxx), at most the 3 a sequence can have.
  for (int i = 0; i < 3 && cut > 0 && cut < line.size() &&
                  (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80;
       ++i) {
    --cut;
  }
  return cut;
}

}  // namespace

std::string FitLine(std::string_view line, std::size_t max_line_bytes) {
  if (line.size() <= max_line_bytes) return std::string(line);
  return CutLine(line, max_line_bytes);
}

std::string CutLine(std::string_view prefix, std::size_t max_line_bytes) {
  std::size_t cut = Utf8CutPoint(prefix, std::min(prefix.size(), max_line_bytes));
  if (cut == prefix.size()) {
    // What follows is unknown: drop a last sequence shorter than its lead byte says.
    std::size_t lead = cut;
    while (lead > 0 && cut - lead < 3 &&
           (static_cast<unsigned char>(prefix[lead - 1]) & 0xC0) == 0x80) {
      --lead;
    }
    if (lead > 0) {
      const auto b = static_cast<unsigned char>(prefix[lead - 1]);
      const std::size_t need = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1;
      if (cut - (lead - 1) < need) cut = lead - 1;
    }
  }
  std::string out(prefix.substr(0, cut));
  out.append(kTruncatedMark);
  return out;
}

std::string_view OutputStreamName(OutputStream s) {
  return s == OutputStream::kStdout ? "stdout" : "stderr";
}

OutputCapture::OutputCapture(OutputSink sink, std::size_t max_lines,
                             std::size_t max_line_bytes)
    : lines_(std::move(sink), max_lines), max_line_bytes_(max_line_bytes) {}

void OutputCapture::Feed(OutputStream s, std::string_view bytes) {
  StreamState& st = streams_[static_cast<std::size_t>(s)];
  while (!bytes.empty()) {
    const std::size_t nl = bytes.find('\n');
    const std::string_view piece = bytes.substr(0, nl);
    if (!st.skipping) {
      // Keep at most one byte beyond the limit: enough to know the line is too long.
      const std::size_t room = max_line_bytes_ - st.partial.size();
      st.partial.append(piece.substr(0, piece.size() > room ? room + 1 : piece.size()));
      if (st.partial.size() > max_line_bytes_) {
        Deliver(s, CutLine(st.partial, max_line_bytes_));
        st.partial.clear();
        st.skipping = true;
      }
    }
    if (nl == std::string_view::npos) return;
    if (!st.skipping) Deliver(s, st.partial);
    st.partial.clear();
    st.skipping = false;
    bytes.remove_prefix(nl + 1);
  }
}

void OutputCapture::Finish(OutputStream s) {
  StreamState& st = streams_[static_cast<std::size_t>(s)];
  if (!st.skipping && !st.partial.empty()) Deliver(s, st.partial);
  st.partial.clear();
  st.skipping = false;
}

void OutputCapture::Deliver(OutputStream s, std::string_view line) {
  lines_.Deliver(OutputStreamName(s), line);
}

void LineBudget::Deliver(std::string_view stream, std::string_view line) {
  if (delivered_ >= max_lines_) {
    ++dropped_;
    return;
  }
  ++delivered_;
  if (!sink_) return;
  try {
    sink_(stream, line);
  } catch (...) {
    // The line is lost; the run goes on.
  }
}

}  // namespace tickd::jobs
