#include "jobs/output_tail.h"

#include <string>

namespace tickd::jobs {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

bool Continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// The length of the valid UTF-8 sequence at the start of `s` (0: none there):
// shortest form only, no surrogates, nothing above U+10FFFF (RFC 3629).
std::size_t ValidSequence(std::string_view s) {
  const auto at = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char c = at(0);
  if (c >= 0x01 && c <= 0x7F) return 1;
  std::size_t n = 0;
  unsigned char lo = 0x80;
  unsigned char hi = 0xBF;  // the allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;  // overlong
    if (c == 0xED) hi = 0x9F;  // surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;  // overlong
    if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return 0;  // NUL, a stray continuation byte, C0/C1, F5..FF
  }
  if (s.size() < n || at(1) < lo || at(1) > hi) return 0;
  for (std::size_t i = 2; i < n; ++i) {
    if (!Continuation(at(i))) return 0;
  }
  return n;
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
