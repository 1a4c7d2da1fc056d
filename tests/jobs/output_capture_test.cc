#include "jobs/output_capture.h"

#include <catch2/catch.hpp>
#include <string>
#include <utility>
#include <vector>

#include "jobs/thread_execution.h"

namespace tickd::jobs {
namespace {

using Line = std::pair<std::string, std::string>;  // stream, text

struct Collector {
  std::vector<Line> lines;
  OutputSink Sink() {
    return [this](std::string_view stream, std::string_view line) {
      lines.emplace_back(std::string(stream), std::string(line));
    };
  }
};

TEST_CASE("OutputCapture splits lines across reads and keeps streams apart", "[jobs]") {
  Collector c;
  OutputCapture cap(c.Sink(), 100, 100);
  cap.Feed(OutputStream::kStdout, "one\ntw");
  cap.Feed(OutputStream::kStderr, "err1\n");
  cap.Feed(OutputStream::kStdout, "o\n\nthree");
  cap.Finish(OutputStream::kStdout);
  cap.Finish(OutputStream::kStderr);
  cap.Finish(OutputStream::kStdout);  // idempotent
  const std::vector<Line> want = {{"stdout", "one"}, {"stderr", "err1"}, {"stdout", "two"},
                                  {"stdout", ""},    {"stdout", "three"}};
  CHECK(c.lines == want);
  CHECK(cap.dropped_lines() == 0);
}

TEST_CASE("OutputCapture cuts long lines and marks them", "[jobs]") {
  Collector c;
  OutputCapture cap(c.Sink(), 100, 5);
  cap.Feed(OutputStream::kStdout, "12345\n123");
  cap.Feed(OutputStream::kStdout, "456789");
  cap.Feed(OutputStream::kStdout, "abc\nnext\n");
  REQUIRE(c.lines.size() == 3);
  CHECK(c.lines[0].second == "12345");  // exactly the limit: not cut
  CHECK(c.lines[1].second == "12345" + std::string(kTruncatedMark));
  CHECK(c.lines[2].second == "next");
}

TEST_CASE("OutputCapture never cuts inside a UTF-8 character", "[jobs]") {
  Collector c;
  OutputCapture cap(c.Sink(), 100, 4);
  cap.Feed(OutputStream::kStdout, "ab\xC3\xA9\xC3\xA9\n");  // "abéé": a cut at 4 is clean
  cap.Feed(OutputStream::kStdout, "abc\xE2\x82\xACz\n");    // "abc€z": 4 is inside €
  REQUIRE(c.lines.size() == 2);
  CHECK(c.lines[0].second == "ab\xC3\xA9" + std::string(kTruncatedMark));
  CHECK(c.lines[1].second == "abc" + std::string(kTruncatedMark));
}

TEST_CASE("OutputCapture delivers at most max_lines and counts the rest", "[jobs]") {
  Collector c;
  OutputCapture cap(c.Sink(), 3, 100);
  cap.Feed(OutputStream::kStdout, "1\n2\n");
  cap.Feed(OutputStream::kStderr, "e1\ne2\n");
  cap.Feed(OutputStream::kStdout, "3\npartial");
  cap.Finish(OutputStream::kStdout);
  CHECK(c.lines.size() == 3);
  CHECK(cap.dropped_lines() == 3);  // e2, 3, partial
}

TEST_CASE("an in-thread call's lines are cut and marked as a process's are", "[jobs]") {
  Collector c;
  ProcessSpec spec;
  spec.max_output_lines = 3;
  spec.max_line_bytes = 4;
  CallOutput out(c.Sink(), spec);
  out.Line("stdout", "abcd");                  // exactly the limit: not cut
  out.Line("stdout", "abc\xE2\x82\xACz");      // "abc€z": 4 is inside €
  out.Line("stderr", "ab\xC3\xA9\xC3\xA9");     // "abéé": a cut at 4 is clean
  out.Line("stdout", "over the line budget");  // counted, not delivered
  const std::vector<Line> want = {{"stdout", "abcd"},
                                  {"stdout", "abc" + std::string(kTruncatedMark)},
                                  {"stderr", "ab\xC3\xA9" + std::string(kTruncatedMark)}};
  CHECK(c.lines == want);
  CHECK(out.dropped() == 1);
  CHECK(FitLine("", 0).empty());
  CHECK(FitLine("x", 0) == kTruncatedMark);
}

TEST_CASE("CutLine marks the first bytes of a longer line, dropping a character cut at "
          "their end",
          "[jobs]") {
  const std::string mark(kTruncatedMark);
  CHECK(CutLine("abc", 100) == "abc" + mark);             // whole characters: all kept
  CHECK(CutLine("ab\xE2\x82", 100) == "ab" + mark);       // € cut after 2 of its 3 bytes
  CHECK(CutLine("ab\xE2", 100) == "ab" + mark);           // … after its lead byte
  CHECK(CutLine("ab\xE2\x82\xAC", 100) == "ab\xE2\x82\xAC" + mark);  // € whole
  CHECK(CutLine("a\xF0\x9F\x98", 100) == "a" + mark);     // a 4-byte character, 3 kept
  CHECK(CutLine("abc\xE2\x82\xACz", 4) == "abc" + mark);  // the limit inside €, as FitLine
  CHECK(CutLine("", 100) == mark);
}

TEST_CASE("OutputCapture survives a throwing sink", "[jobs]") {
  int calls = 0;
  OutputCapture cap(
      [&calls](std::string_view, std::string_view) {
        ++calls;
        throw std::runtime_error("sink broke");
      },
      10, 10);
  cap.Feed(OutputStream::kStdout, "a\nb\n");
  CHECK(calls == 2);
}

}  // namespace
}  // namespace tickd::jobs
