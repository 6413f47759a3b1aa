// Status and Result<T>: errors carry one human-readable line that names the
// object (path, symbol, pid) and, where there is one, the errno text.
#pragma once

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace looptrace {

// Exit codes, perf/bpftrace style: 0 ok, 1 runtime failure, 2 usage error.
// Exit codes (docs/looptrace.md EXIT STATUS); 3 is a broken --fail-if
// budget.
enum class ErrorKind { kFailure = 1, kUsage = 2, kPermission = 4 };

class Status {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  static Status Error(std::string msg, ErrorKind kind = ErrorKind::kFailure) {
    Status s;
    s.msg_ = std::move(msg);
    s.kind_ = kind;
    s.failed_ = true;
    return s;
  }
  // Appends strerror(err) to the message: "open /x: No such file or directory".
  static Status Errno(const std::string& what, int err,
                      ErrorKind kind = ErrorKind::kFailure) {
    return Error(fmt::format("{}: {}", what, std::strerror(err)), kind);
  }

  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const std::string& message() const { return msg_; }
  ErrorKind kind() const { return kind_; }
  int exit_code() const { return ok() ? 0 : static_cast<int>(kind_); }

  // An optional second line printed after the error ("hint: ...").
  Status& with_hint(std::string hint) {
    hint_ = std::move(hint);
    return *this;
  }
  const std::string& hint() const { return hint_; }

 private:
  std::string msg_;
  std::string hint_;
  ErrorKind kind_ = ErrorKind::kFailure;
  bool failed_ = false;
};

template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}  // NOLINT

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace looptrace

#define LT_RETURN_IF_ERROR(expr)      \
  do {                                \
    ::looptrace::Status _st = (expr); \
    if (!_st.ok()) return _st;        \
  } while (0)
