#include "jobs/output_tail.h"

#include <string>

#include "base/utf8.h"

namespace tickd::jobs {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

bool Continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// The length of the valid UTF-8 sequence at the start of `s` (0: none there); a NUL
// counts as none, so that the stored text has none (see output_tail.h).
std::size_t ValidSequence(std::string_view s) {
  return s.empty() || s[0] == '\0' ? 0 : Utf8Length(s);
}

char Tag(std::string_view stream) {
  if (stream == "stderr") return 'e';
  return stream == "http" ? 'h' : 'o';
}

}  // namespace

std::string ValidUtf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  while (!bytes.empty()) {
    const std::size_t n = ValidSequence(bytes);
    if (n == 0) {
      out.append(kReplacement);
      bytes.remove_prefix(1);
    } else {
      out.append(bytes.substr(0, n));
      bytes.remove_prefix(n);
    }
  }
  return out;
}

void OutputTail::Add(std::string_view stream, std::string_view line) {
  if (max_bytes_ == 0) return;
  std::string entry;
  entry.reserve(line.size() + 3);
  entry.push_back(Tag(stream));
  entry.push_back(' ');
  entry.append(ValidUtf8(line));
  entry.push_back('\n');
  if (entry.size() > max_bytes_) {
    // Longer than the whole budget: keep its end, from a character's first byte.
    std::size_t from = entry.size() - max_bytes_ + 2;  // room for the tag again
    while (from < entry.size() && Continuation(static_cast<unsigned char>(entry[from]))) ++from;
    cut_bytes_ += from - 2;
    entry.erase(2, from - 2);
  }
  bytes_ += entry.size();
  lines_.push_back(std::move(entry));
  while (bytes_ > max_bytes_) {
    bytes_ -= lines_.front().size();
    cut_bytes_ += lines_.front().size();
    lines_.pop_front();
  }
}

std::string OutputTail::Text() const {
  std::string out;
  if (lines_.empty() && cut_bytes_ == 0) return out;
  out.reserve(bytes_ + 48);
  if (cut_bytes_ > 0) out += "! " + std::to_string(cut_bytes_) + " earlier bytes not kept\n";
  for (const std::string& line : lines_) out += line;
  return out;
}

std::vector<OutputLine> ParseOutputTail(std::string_view stored) {
  std::vector<OutputLine> out;
  while (!stored.empty()) {
    const std::size_t nl = stored.find('\n');
    const std::string_view line = stored.substr(0, nl);
    stored.remove_prefix(nl == std::string_view::npos ? stored.size() : nl + 1);
    const bool tagged = line.size() >= 2 && line[1] == ' ';
    const char tag = tagged ? line[0] : '?';
    const bool known = tag == 'o' || tag == 'e' || tag == 'h' || tag == '!';
    const std::string_view text = tagged && known ? line.substr(2) : line;
    const char* stream = tag == 'e'   ? "stderr"
                         : tag == 'h' ? "http"
                         : tag == '!' ? "tickd"
                                      : "stdout";
    out.push_back(OutputLine{stream, std::string(text)});
  }
  return out;
}

}  // namespace tickd::jobs
