// Error values shared by every tickd module. Modules return errors; they never
// throw them across a module boundary (app/main.cc alone maps them to exit codes).
#pragma once

#include <string>
#include <utility>

#include <tl/expected.hpp>

namespace tickd {

// An error with the context it happened in, e.g. Error("sqlite: open ./tickd.db",
// "database is locked"). ToString() joins them as "context: detail".
struct Error {
  std::string context;  // where: a file, a backend, an operation
  std::string detail;   // what went wrong

  Error() = default;
  Error(std::string context_in, std::string detail_in)
      : context(std::move(context_in)), detail(std::move(detail_in)) {}

  std::string ToString() const { return context.empty() ? detail : context + ": " + detail; }
};

template <typename T>
using Result = tl::expected<T, Error>;

inline tl::unexpected<Error> MakeError(std::string context, std::string detail) {
  return tl::unexpected<Error>(Error(std::move(context), std::move(detail)));
}

}  // namespace tickd
