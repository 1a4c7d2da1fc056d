#include "jobs/output_tail.h"

#include <catch2/catch.hpp>
#include <string>

namespace tickd::jobs {
namespace {

TEST_CASE("OutputTail keeps both streams in order, each line tagged", "[jobs]") {
  OutputTail tail(1024);
  CHECK(tail.Text().empty());
  tail.Add("stdout", "one");
  tail.Add("stderr", "warning: two");
  tail.Add("stdout", "");
  tail.Add("http", "HTTP/1.1 200 OK");
  CHECK(tail.Text() == "o one\ne warning: two\no \nh HTTP/1.1 200 OK\n");
  const std::vector<OutputLine> lines = ParseOutputTail(tail.Text());
  REQUIRE(lines.size() == 4);
  CHECK(lines[3].stream == "http");
  CHECK(lines[3].text == "HTTP/1.1 200 OK");
  CHECK(lines[0].stream == "stdout");
  CHECK(lines[0].text == "one");
  CHECK(lines[1].stream == "stderr");
  CHECK(lines[1].text == "warning: two");
  CHECK(lines[2].text.empty());
}

TEST_CASE("OutputTail keeps the last bytes and says how much it dropped", "[jobs]") {
  OutputTail tail(20);
  for (int i = 0; i < 10; ++i) tail.Add("stdout", "line" + std::to_string(i));  // 8 bytes each
  // 20 bytes hold the last two lines; eight were dropped.
  CHECK(tail.cut_bytes() == 64);
  CHECK(tail.Text() == "! 64 earlier bytes not kept\no line8\no line9\n");
  const std::vector<OutputLine> lines = ParseOutputTail(tail.Text());
  REQUIRE(lines.size() == 3);
  CHECK(lines[0].stream == "tickd");
  CHECK(lines[0].text == "64 earlier bytes not kept");
  CHECK(lines[2].text == "line9");
}

TEST_CASE("OutputTail cuts a line longer than its budget at a character boundary",
          "[jobs]") {
  OutputTail tail(10);
  // "é" is two bytes: 5 of them + tag, space and newline are 13 bytes.
  tail.Add("stderr", "\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9");
  const std::string text = tail.Text();
  const std::string kept = text.substr(text.find('\n') + 1);
  CHECK(kept.size() <= 10);
  CHECK(kept.rfind("e ", 0) == 0);
  CHECK(ValidUtf8(kept) == kept);  // no character split
  CHECK(kept == "e \xC3\xA9\xC3\xA9\xC3\xA9\n");
  CHECK(tail.cut_bytes() == 4);
}

TEST_CASE("OutputTail stores valid UTF-8 without NUL whatever the run printed", "[jobs]") {
  CHECK(ValidUtf8("plain") == "plain");
  CHECK(ValidUtf8(std::string("a\0b", 3)) == "a\xEF\xBF\xBD" "b");
  CHECK(ValidUtf8("\xFF\xC3") == "\xEF\xBF\xBD\xEF\xBF\xBD");
  CHECK(ValidUtf8("\xC0\xAF") == "\xEF\xBF\xBD\xEF\xBF\xBD");      // overlong '/'
  CHECK(ValidUtf8("\xED\xA0\x80") == "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  CHECK(ValidUtf8("\xF0\x9F\x98\x80") == "\xF0\x9F\x98\x80");      // U+1F600 kept
  OutputTail tail(100);
  tail.Add("stdout", std::string("x\0y", 3));
  CHECK(tail.Text() == "o x\xEF\xBF\xBDy\n");
}

TEST_CASE("OutputTail with no budget keeps nothing", "[jobs]") {
  OutputTail tail(0);
  tail.Add("stdout", "hello");
  CHECK(tail.Text().empty());
  CHECK(ParseOutputTail("").empty());
}

}  // namespace
}  // namespace tickd::jobs
