// How libtickd reports outcomes (read this before the other headers).
//
// Two kinds of failure, kept apart:
//   - a programming error (an invalid job name, a schedule that does not parse, a
//     call in the wrong state, a value read from an empty Expected) throws a standard
//     exception: std::invalid_argument or std::logic_error. They do not depend on the
//     store or the network, so a test of the calling program finds them;
//   - what the world decides (the store cannot be reached, a claim got no answer) is
//     returned as a StoreError inside an Expected<T>, never thrown.
// A lock held by another node is neither: it is an ordinary outcome (tickd/store.h).
#pragma once

#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

namespace tickd {

// The store did not answer, refused, or could not be opened. `message` names the
// store (its URL with any password masked) and what went wrong.
struct StoreError {
  std::string message;
};

// A T, or the StoreError that prevented it. Not thread-safe (a value).
template <typename T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit
  Expected(StoreError error) : v_(std::in_place_index<1>, std::move(error)) {}  // NOLINT

  bool has_value() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return has_value(); }

  // The value. Throws std::logic_error when this holds an error (read error() first).
  T& value() & { return Get(); }
  const T& value() const& { return const_cast<Expected*>(this)->Get(); }
  T&& value() && { return std::move(Get()); }
  T& operator*() & { return Get(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &Get(); }
  const T* operator->() const { return &value(); }

  // The error. Throws std::logic_error when this holds a value.
  const StoreError& error() const {
    if (has_value()) throw std::logic_error("tickd::Expected::error() on a value");
    return std::get<1>(v_);
  }

 private:
  T& Get() {
    if (!has_value()) {
      throw std::logic_error("tickd::Expected::value() on an error: " + std::get<1>(v_).message);
    }
    return std::get<0>(v_);
  }

  std::variant<T, StoreError> v_;
};

}  // namespace tickd
