#include "base/utf8.h"

namespace tickd {

std::size_t Utf8Length(std::string_view v) {
  if (v.empty()) return 0;
  const auto byte = [&v](std::size_t i) { return static_cast<unsigned char>(v[i]); };
  const unsigned char c = byte(0);
  if (c < 0x80) return 1;
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xbf;  // the second byte's range
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) lo = 0xa0;  // overlong
    if (c == 0xed) hi = 0x9f;  // surrogates
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) lo = 0x90;  // overlong
    if (c == 0xf4) hi = 0x8f;  // above U+10FFFF
  } else {
    return 0;  // a continuation byte, an overlong lead (0xc0, 0xc1), or 0xf5–0xff
  }
  if (v.size() < n || byte(1) < lo || byte(1) > hi) return 0;
  for (std::size_t i = 2; i < n; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xbf) return 0;
  }
  return n;
}

bool IsValidUtf8(std::string_view v) {
  for (std::size_t i = 0; i < v.size();) {
    const std::size_t n = Utf8Length(v.substr(i));
    if (n == 0) return false;
    i += n;
  }
  return true;
}

}  // namespace tickd
