#include "cron/parser.h"

#include <array>
#include <cctype>
#include <chrono>
#include <string>

#include "base/duration.h"
#include "base/fnv1a.h"

namespace tickd::cron::internal {
namespace {

enum class Field { kSecond, kMinute, kHour, kDom, kMonth, kDow, kYear };

constexpr std::string_view kFieldNames[] = {"second", "minute",      "hour", "day-of-month",
                                            "month",  "day-of-week", "year"};

constexpr std::string_view kMonthNames[] = {"JAN", "FEB", "MAR", "APR", "MAY", "JUN",
                                            "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"};
constexpr std::string_view kDayNames[] = {"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"};

// Field layouts: which field each written position holds.
constexpr Field kLayout5[] = {Field::kMinute, Field::kHour, Field::kDom, Field::kMonth,
                              Field::kDow};
constexpr Field kLayout7[] = {Field::kSecond, Field::kMinute, Field::kHour, Field::kDom,
                              Field::kMonth,  Field::kDow,    Field::kYear};

char Upper(char c) { return static_cast<char>(std::toupper(static_cast<unsigned char>(c))); }

bool EqualsUpper(std::string_view text, std::string_view upper) {
  if (text.size() != upper.size()) return false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (Upper(text[i]) != upper[i]) return false;
  }
  return true;
}

bool AllDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

struct Macro {
  std::string_view name;
  std::string_view fields;  // cron dialect, seconds first
};
constexpr Macro kMacros[] = {
    {"@yearly", "0 0 0 1 1 *"},  {"@annually", "0 0 0 1 1 *"}, {"@monthly", "0 0 0 1 * *"},
    {"@weekly", "0 0 0 * * 0"},  {"@daily", "0 0 0 * * *"},    {"@midnight", "0 0 0 * * *"},
    {"@hourly", "0 0 * * * *"},
};

// Parses the fields of one expression into a Spec, remembering where it is so every
// error names the expression, the field and the column.
class FieldParser {
 public:
  // `hash_name` is what `H` hashes (the job's name); empty: `H` is an error.
  FieldParser(std::string_view expr, Dialect dialect, std::string_view hash_name = {})
      : expr_(expr), dialect_(dialect), hash_name_(hash_name) {}

  tl::expected<Spec, ParseError> Run() {
    std::array<std::string_view, 8> texts;
    std::array<int, 8> columns{};
    std::size_t count = 0;
    for (std::size_t i = 0; i < expr_.size();) {
      if (IsSpace(expr_[i])) {
        ++i;
        continue;
      }
      const std::size_t start = i;
      while (i < expr_.size() && !IsSpace(expr_[i])) ++i;
      if (count == texts.size()) return CountError(count + 1);
      texts[count] = expr_.substr(start, i - start);
      columns[count] = static_cast<int>(start) + 1;
      ++count;
    }
    const bool ok_count = dialect_ == Dialect::kCron     ? count >= 5 && count <= 7
                          : dialect_ == Dialect::kQuartz ? count == 6 || count == 7
                                                         : count == 6;
    if (!ok_count) return CountError(count);

    Spec spec;
    spec.seconds = 1;  // 5-field cron: second 0
    spec.years.fill(~std::uint64_t{0});
    spec.years[3] &= (std::uint64_t{1} << (kMaxYear - kMinYear + 1 - 192)) - 1;
    spec.rule = dialect_ == Dialect::kCron ? DayRule::kOr : DayRule::kAnd;
    const Field* layout = count == 5 ? kLayout5 : kLayout7;
    int dom_index = 0, dow_index = 0;
    for (std::size_t i = 0; i < count; ++i) {
      index_ = static_cast<int>(i) + 1;
      field_ = layout[i];
      if (field_ == Field::kDom) dom_index = index_;
      if (field_ == Field::kDow) dow_index = index_;
      if (auto err = ParseField(texts[i], columns[i], spec)) return tl::unexpected(*err);
    }
    if (dialect_ == Dialect::kQuartz) {
      const bool dom_q = texts[dom_index - 1] == "?";
      const bool dow_q = texts[dow_index - 1] == "?";
      if (dom_q == dow_q) {
        index_ = dow_index;
        field_ = Field::kDow;
        return tl::unexpected(Error(columns[dow_index - 1],
                                    dom_q ? "'?' may be used in only one of day-of-month and "
                                            "day-of-week (quartz)"
                                          : "one of day-of-month and day-of-week must be '?' "
                                            "(quartz)"));
      }
    }
    spec.Finish();
    return spec;
  }

 private:
  tl::unexpected<ParseError> CountError(std::size_t count) const {
    const char* want = dialect_ == Dialect::kCron     ? "5, 6 or 7"
                       : dialect_ == Dialect::kQuartz ? "6 or 7"
                                                      : "6";
    return tl::unexpected(MakeParseError(
        expr_, 0, "", 0,
        std::string("expected ") + want + " fields in the " +
            std::string(DialectName(dialect_)) + " dialect, got " + std::to_string(count)));
  }

  ParseError Error(int column, std::string_view message) const {
    return MakeParseError(expr_, index_, kFieldNames[static_cast<int>(field_)], column, message);
  }

  int Min() const {
    switch (field_) {
      case Field::kDom:
      case Field::kMonth:
        return 1;
      case Field::kDow:
        return dialect_ == Dialect::kQuartz ? 1 : 0;
      case Field::kYear:
        return kMinYear;
      default:
        return 0;
    }
  }
  int Max() const {
    switch (field_) {
      case Field::kSecond:
      case Field::kMinute:
        return 59;
      case Field::kHour:
        return 23;
      case Field::kDom:
        return 31;
      case Field::kMonth:
        return 12;
      case Field::kDow:
        return 7;
      case Field::kYear:
        return kMaxYear;
    }
    return 0;
  }
  // How many distinct values the field has; a step must be smaller.
  int Span() const { return field_ == Field::kDow ? 7 : Max() - Min() + 1; }
  std::string RangeText() const { return std::to_string(Min()) + "-" + std::to_string(Max()); }

  // A number or (month, day-of-week) a three-letter name, in the dialect's numbering.
  tl::expected<int, ParseError> Value(std::string_view text, int column) const {
    if (text.empty()) return tl::unexpected(Error(column, "missing value"));
    int v = 0;
    if (AllDigits(text)) {
      if (text.size() > 6) {
        return tl::unexpected(
            Error(column, std::string(text) + " is out of range " + RangeText()));
      }
      for (char c : text) v = v * 10 + (c - '0');
    } else {
      v = -1;
      if (field_ == Field::kMonth) {
        for (int i = 0; i < 12; ++i) {
          if (EqualsUpper(text, kMonthNames[i])) v = i + 1;
        }
      } else if (field_ == Field::kDow) {
        for (int i = 0; i < 7; ++i) {
          if (EqualsUpper(text, kDayNames[i])) v = dialect_ == Dialect::kQuartz ? i + 1 : i;
        }
      }
      if (v < 0) {
        const bool named = field_ == Field::kMonth || field_ == Field::kDow;
        return tl::unexpected(Error(column, "'" + std::string(text) + "' is not a number" +
                                                (named ? " or a name" : "")));
      }
    }
    if (v < Min() || v > Max()) {
      return tl::unexpected(
          Error(column, std::to_string(v) + " is out of range " + RangeText()));
    }
    return v;
  }

  // Day of week in the dialect's numbering → 0 (Sunday) … 6.
  int DowBit(int v) const { return dialect_ == Dialect::kQuartz ? v - 1 : v % 7; }

  void SetValue(Spec& spec, int v) const {
    switch (field_) {
      case Field::kSecond:
        spec.seconds |= std::uint64_t{1} << v;
        break;
      case Field::kMinute:
        spec.minutes |= std::uint64_t{1} << v;
        break;
      case Field::kHour:
        spec.hours |= std::uint64_t{1} << v;
        break;
      case Field::kDom:
        spec.dom |= std::uint64_t{1} << v;
        break;
      case Field::kMonth:
        spec.months |= std::uint64_t{1} << v;
        break;
      case Field::kDow:
        spec.dow |= 1u << DowBit(v);
        break;
      case Field::kYear: {
        const unsigned i = static_cast<unsigned>(v - kMinYear);
        spec.years[i / 64] |= std::uint64_t{1} << (i % 64);
        break;
      }
    }
  }

  std::optional<ParseError> ParseField(std::string_view text, int column, Spec& spec) {
    switch (field_) {
      case Field::kSecond:
        spec.seconds = 0;
        break;
      case Field::kYear:
        spec.years.fill(0);
        break;
      default:
        break;
    }
    const bool star = text == "*" || text == "?";
    if (text == "?" && field_ != Field::kDom && field_ != Field::kDow) {
      return Error(column, "'?' is only allowed in day-of-month and day-of-week");
    }
    if (field_ == Field::kDom) spec.dom_star = star;
    if (field_ == Field::kDow) spec.dow_star = star;
    if (field_ == Field::kHour) spec.hour_star = star;
    if (field_ == Field::kYear) spec.has_year = !star;
    if (text == "?") text = "*";

    const bool is_list = text.find(',') != std::string_view::npos;
    std::size_t pos = 0;
    for (;;) {
      const std::size_t comma = text.find(',', pos);
      const std::size_t end = comma == std::string_view::npos ? text.size() : comma;
      const int elem_col = column + static_cast<int>(pos);
      if (end == pos) return Error(elem_col, "empty list element");
      if (auto err = ParseElement(text.substr(pos, end - pos), elem_col, is_list, spec)) {
        return err;
      }
      if (comma == std::string_view::npos) break;
      pos = comma + 1;
    }
    return std::nullopt;
  }

  // L, L-n, LW, L-nW, nW (day of month); L, xL, x#n (day of week). Returns false when
  // `elem` is not one of them.
  tl::expected<bool, ParseError> ParseSpecial(std::string_view elem, int col, bool is_list,
                                              Spec& spec) {
    const bool dom = field_ == Field::kDom, dow = field_ == Field::kDow;
    if (!dom && !dow) return false;  // "L", "5#2" elsewhere fail as "not a number"
    const bool has_l = elem.find_first_of("lL") != std::string_view::npos;
    const bool has_w = dom && elem.size() >= 2 && Upper(elem.back()) == 'W';
    const bool has_hash = elem.find('#') != std::string_view::npos;
    const bool looks_special =
        has_hash || (has_l && (elem.size() == 1 || (!dom && Upper(elem.back()) == 'L') ||
                               (dom && Upper(elem[0]) == 'L'))) ||
        has_w || (dom && EqualsUpper(elem, "W"));
    if (!looks_special) return false;
    // Quartz: "Support for specifying 'L' [or multiple 'nth' days] with other days of
    // the week is not implemented"; its day-of-month lists and every other dialect's
    // accept them.
    if (is_list && dow && dialect_ == Dialect::kQuartz) {
      return tl::unexpected(
          Error(col, "'" + std::string(elem) + "' cannot be combined with other values (quartz)"));
    }
    if (elem.find('/') != std::string_view::npos) {
      return tl::unexpected(Error(col, "'" + std::string(elem) + "' cannot take a step"));
    }
    if (dom) {
      spec.dom_specials = true;
      std::string_view rest = elem;
      const bool weekday = has_w;
      if (weekday) rest.remove_suffix(1);
      if (!rest.empty() && Upper(rest[0]) == 'L') {
        int n = 0;
        if (rest.size() > 1) {
          if (rest[1] != '-' || !AllDigits(rest.substr(2)) || rest.size() > 4) {
            return tl::unexpected(
                Error(col, "'" + std::string(elem) + "' is not L, L-n, LW or L-nW"));
          }
          for (char c : rest.substr(2)) n = n * 10 + (c - '0');
          if (n > 30) {
            return tl::unexpected(
                Error(col + 2, "L-" + std::to_string(n) + ": offset is out of range 0-30"));
          }
        }
        (weekday ? spec.dom_last_weekday : spec.dom_last) |= 1u << n;
        return true;
      }
      if (!weekday || !AllDigits(rest)) {
        return tl::unexpected(Error(col, "'" + std::string(elem) + "' is not a valid day"));
      }
      auto v = Value(rest, col);
      if (!v) return tl::unexpected(v.error());
      spec.dom_nearest |= std::uint64_t{1} << *v;
      return true;
    }
    // Day of week.
    spec.dow_specials = true;
    if (EqualsUpper(elem, "L")) {  // Quartz: "L" alone is the last day of the week
      spec.dow |= 1u << 6;
      return true;
    }
    if (has_hash) {
      const std::size_t hash = elem.find('#');
      auto x = Value(elem.substr(0, hash), col);
      if (!x) return tl::unexpected(x.error());
      const std::string_view nth = elem.substr(hash + 1);
      const int nth_col = col + static_cast<int>(hash) + 1;
      if (!AllDigits(nth) || nth.size() > 1 || nth[0] < '1' || nth[0] > '5') {
        return tl::unexpected(
            Error(nth_col, "'#" + std::string(nth) + "': the week must be 1-5"));
      }
      spec.dow_nth |= std::uint64_t{1} << ((nth[0] - '1') * 7 + DowBit(*x));
      return true;
    }
    auto x = Value(elem.substr(0, elem.size() - 1), col);
    if (!x) return tl::unexpected(x.error());
    spec.dow_last |= 1u << DowBit(*x);
    return true;
  }

  // The step after '/' (1 to the field's span - 1).
  tl::expected<int, ParseError> Step(std::string_view step_text, int step_col) const {
    if (!AllDigits(step_text)) {
      return tl::unexpected(Error(step_col, step_text.empty() ? "missing step after '/'"
                                                              : "step '" + std::string(step_text) +
                                                                    "' is not a number"));
    }
    const int step = step_text.size() > 6 ? 1'000'000 : std::stoi(std::string(step_text));
    if (step < 1 || step >= Span()) {
      return tl::unexpected(Error(step_col, "step " + std::to_string(step) + " is out of range 1-" +
                                                std::to_string(Span() - 1)));
    }
    return step;
  }

  // Where "*" and "a/n" end: 7 is only another spelling of Sunday, so they end at
  // Saturday.
  int OpenMax() const { return field_ == Field::kDow && dialect_ != Dialect::kQuartz ? 6 : Max(); }

  // Jenkins' `H` (docs/design.md §2): a value taken from a hash of the job's name, so
  // that jobs written alike ("H * * * *") spread over the field instead of all firing at
  // once, while every replica derives the same value from the same name. h = FNV-1a 64
  // of "<job name>:<field name>"; `H` = lo + h mod (hi - lo + 1) over the field's range
  // (day of month: 1-28, so it fires every month), `H(a-b)` the same within a-b, `H/n`
  // and `H(a-b)/n` every n from lo + h mod min(n, hi - lo + 1).
  std::optional<ParseError> ParseHash(std::string_view elem, int col, bool is_list, Spec& spec) {
    if (is_list) return Error(col, "'H' cannot be combined with other values in a list");
    if (field_ == Field::kYear) return Error(col, "'H' is not allowed in the year field");
    if (hash_name_.empty()) {
      return Error(col, "'H' needs a job name to hash (it is the job's name in a job file; "
                        "give tickd next --job NAME)");
    }
    int lo = Min(), hi = field_ == Field::kDom ? 28 : OpenMax();
    std::string_view rest = elem.substr(1);
    auto rest_col = [&] { return col + static_cast<int>(elem.size() - rest.size()); };
    if (!rest.empty() && rest[0] == '(') {
      const std::size_t close = rest.find(')');
      const std::string_view range = rest.substr(1, close == std::string_view::npos
                                                        ? std::string_view::npos
                                                        : close - 1);
      const std::size_t dash = range.find('-');
      if (close == std::string_view::npos || dash == std::string_view::npos) {
        return Error(rest_col(), "H( takes a range and a ')', e.g. H(0-29)");
      }
      const int range_col = rest_col() + 1;
      auto first = Value(range.substr(0, dash), range_col);
      if (!first) return first.error();
      auto last = Value(range.substr(dash + 1), range_col + static_cast<int>(dash) + 1);
      if (!last) return last.error();
      if (*first > *last) {
        return Error(range_col, "range " + std::string(range) + " goes backwards (" +
                                    std::to_string(*first) + " > " + std::to_string(*last) + ")");
      }
      lo = *first;
      hi = *last;
      rest = rest.substr(close + 1);
    }
    int step = 0;
    if (!rest.empty()) {
      if (rest[0] != '/') {
        return Error(rest_col(), "unexpected '" + std::string(rest) +
                                     "' after H (H, H(a-b), H/n or H(a-b)/n)");
      }
      rest = rest.substr(1);
      auto parsed = Step(rest, rest_col());
      if (!parsed) return parsed.error();
      step = *parsed;
    }
    std::uint64_t h = Fnv1a64(hash_name_);
    h = Fnv1a64(":", h);
    h = Fnv1a64(kFieldNames[static_cast<int>(field_)], h);
    const std::uint64_t size = static_cast<std::uint64_t>(hi - lo + 1);
    if (step == 0) {
      SetValue(spec, lo + static_cast<int>(h % size));
      return std::nullopt;
    }
    const std::uint64_t offset =
        h % std::min<std::uint64_t>(static_cast<std::uint64_t>(step), size);
    for (int v = lo + static_cast<int>(offset); v <= hi; v += step) SetValue(spec, v);
    return std::nullopt;
  }

  std::optional<ParseError> ParseElement(std::string_view elem, int col, bool is_list,
                                         Spec& spec) {
    if (elem.find('?') != std::string_view::npos) {
      return Error(col, "'?' must be the whole field");
    }
    if (!elem.empty() && elem[0] == 'H') return ParseHash(elem, col, is_list, spec);
    auto special = ParseSpecial(elem, col, is_list, spec);
    if (!special) return special.error();
    if (*special) return std::nullopt;

    std::string_view base = elem;
    int step = 1;
    const std::size_t slash = elem.find('/');
    if (slash != std::string_view::npos) {
      base = elem.substr(0, slash);
      const std::string_view step_text = elem.substr(slash + 1);
      const int step_col = col + static_cast<int>(slash) + 1;
      auto parsed = Step(step_text, step_col);
      if (!parsed) return parsed.error();
      step = *parsed;
    }
    int lo = Min(), hi = OpenMax();
    if (base != "*") {
      const std::size_t dash = base.find('-');
      auto first = Value(base.substr(0, dash), col);
      if (!first) return first.error();
      lo = *first;
      if (dash != std::string_view::npos) {
        const int hi_col = col + static_cast<int>(dash) + 1;
        auto last = Value(base.substr(dash + 1), hi_col);
        if (!last) return last.error();
        hi = *last;
        // Sunday may be spelled 0 or 7: "FRI-SUN" ends at 7, "SUN-MON" with 7 starts at 0.
        if (field_ == Field::kDow && dialect_ != Dialect::kQuartz) {
          if (hi == 0 && lo > 0) hi = 7;
          if (lo == 7 && hi < 7) lo = 0;
        }
        if (lo > hi) {
          return Error(col, "range " + std::string(base) + " goes backwards (" +
                                std::to_string(lo) + " > " + std::to_string(hi) + ")");
        }
      } else if (slash == std::string_view::npos) {
        hi = lo;
      }
    }
    for (int v = lo; v <= hi; v += step) SetValue(spec, v);
    return std::nullopt;
  }

  std::string_view expr_;
  Dialect dialect_;
  std::string_view hash_name_;
  int index_ = 0;
  Field field_ = Field::kSecond;
};

tl::expected<Spec, ParseError> ParseEvery(std::string_view expr, std::string_view rest,
                                          int column) {
  auto d = ParseDuration(rest);
  if (!d) return tl::unexpected(MakeParseError(expr, 0, "", column, d.error().detail));
  if (*d < std::chrono::seconds(1) || d->count() % 1000 != 0) {
    return tl::unexpected(MakeParseError(expr, 0, "", column,
                                         "@every needs a whole number of seconds, at least 1s"));
  }
  Spec spec;
  spec.every_seconds = d->count() / 1000;
  spec.hour_star = true;
  return spec;
}

}  // namespace

ParseError MakeParseError(std::string_view expr, int field, std::string_view field_name,
                          int column, std::string_view message) {
  ParseError e;
  e.field = field;
  e.field_name = std::string(field_name);
  e.column = column;
  e.message = std::string(expr) + ": ";
  if (field > 0) {
    e.message += "field " + std::to_string(field) + " (" + e.field_name + ") at column " +
                 std::to_string(column) + ": ";
  } else if (column > 0) {
    e.message += "at column " + std::to_string(column) + ": ";
  }
  e.message += message;
  return e;
}

tl::expected<Spec, ParseError> ParseSpec(std::string_view expr, Dialect dialect,
                                         std::string_view hash_name) {
  std::size_t start = 0;
  while (start < expr.size() && IsSpace(expr[start])) ++start;
  if (start < expr.size() && expr[start] == '@') {
    std::size_t end = start;
    while (end < expr.size() && !IsSpace(expr[end])) ++end;
    const std::string_view word = expr.substr(start, end - start);
    std::size_t rest = end;
    while (rest < expr.size() && IsSpace(expr[rest])) ++rest;
    std::size_t rest_end = expr.size();
    while (rest_end > rest && IsSpace(expr[rest_end - 1])) --rest_end;
    if (EqualsUpper(word, "@EVERY")) {
      if (rest == rest_end) {
        return tl::unexpected(MakeParseError(expr, 0, "", static_cast<int>(end) + 1,
                                             "@every needs a duration, e.g. @every 30s"));
      }
      return ParseEvery(expr, expr.substr(rest, rest_end - rest), static_cast<int>(rest) + 1);
    }
    for (const Macro& m : kMacros) {
      if (word.size() != m.name.size()) continue;
      bool same = true;
      for (std::size_t i = 0; i < word.size(); ++i) {
        if (std::tolower(static_cast<unsigned char>(word[i])) != m.name[i]) same = false;
      }
      if (!same) continue;
      if (rest != rest_end) {
        return tl::unexpected(MakeParseError(expr, 0, "", static_cast<int>(rest) + 1,
                                             "unexpected text after " + std::string(m.name)));
      }
      return FieldParser(m.fields, Dialect::kCron).Run();
    }
    return tl::unexpected(MakeParseError(
        expr, 0, "", static_cast<int>(start) + 1,
        "unknown macro '" + std::string(word) +
            "' (use @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly or "
            "@every <duration>)"));
  }
  return FieldParser(expr, dialect, hash_name).Run();
}

}  // namespace tickd::cron::internal
