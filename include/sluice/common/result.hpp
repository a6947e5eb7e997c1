#pragma once

#include <string>
#include <utility>
#include <variant>

namespace sluice {

/// What kind of failure an Error is; stores map every client error onto one of these.
enum class ErrorKind {
  kInvalidArgument,  ///< the caller's input is wrong (bad JSON, bad YAML, bad flag)
  kNotFound,
  kTimeout,      ///< a deadline passed (store call)
  kConnection,   ///< the store is unreachable or the connection broke
  kScript,       ///< the store rejected a script (Lua error, NOSCRIPT after reload)
  kUnavailable,  ///< the component is shutting down or not ready
  kInternal,
};

/// A failure with a human-readable message that says what and where.
struct Error {
  ErrorKind kind = ErrorKind::kInternal;
  std::string message;
};

inline Error makeError(ErrorKind kind, std::string message) {
  return Error{kind, std::move(message)};
}

/// Expected failures are values (docs/architecture.md, "Conventions"): shaped like std::expected<T,
/// Error>.
template <typename T>
class [[nodiscard]] Result {
 public:
  // Two overloads rather than one by value: a value moved in is moved once, not twice (the
  // decision path moves large values through Results).
  Result(T&& value) : v_(std::in_place_index<0>, std::move(value)) {}    // NOLINT: implicit
  Result(const T& value) : v_(std::in_place_index<0>, value) {}          // NOLINT: implicit
  Result(Error error) : v_(std::in_place_index<1>, std::move(error)) {}  // NOLINT

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &std::get<0>(v_); }
  const T* operator->() const { return &std::get<0>(v_); }
  T& operator*() & { return std::get<0>(v_); }
  const T& operator*() const& { return std::get<0>(v_); }

  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return error_; }

 private:
  Error error_;
  bool ok_ = true;
};

using Status = Result<void>;

}  // namespace sluice
