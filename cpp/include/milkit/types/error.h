// milkit/types/error.h - the exception hierarchy.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace milkit {

/// Base of every error milkit raises.
class Error : public std::runtime_error {
 public:
  /// Creates an error with a complete message.
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

/// A wrong type: bad dtype, missing or unknown argument (Python TypeError).
class TypeError : public Error {
 public:
  using Error::Error;
};

/// A wrong value or shape: conflicting dims, out-of-range axis (Python ValueError).
class ValueError : public Error {
 public:
  using Error::Error;
};

/// A malformed or inconsistent file or proto (Python ValueError subclass).
class FormatError : public ValueError {
 public:
  using ValueError::ValueError;
};

/// An index out of range: a gather or scatter index at run time, a scatter index checked with
/// validate_indices (Python IndexError and ValueError subclass).
class IndexError : public ValueError {
 public:
  using ValueError::ValueError;
};

/// A failed file operation (Python OSError).
class IOError : public Error {
 public:
  using Error::Error;
};

/// A structurally invalid program found by the verifier (Python ValueError subclass).
class VerifyError : public ValueError {
 public:
  using ValueError::ValueError;
};

/// A model or program with nodes an importer cannot convert, all of them listed (Python
/// ValueError subclass ``milkit.UnsupportedOpsError``, whose ``nodes`` are the labels).
class UnsupportedOpsError : public ValueError {
 public:
  /// Creates the error: `msg` is the whole message, `nodes` one label per node (op and source).
  UnsupportedOpsError(const std::string& msg, std::vector<std::string> nodes)
      : ValueError(msg), nodes_(std::move(nodes)) {}
  /// One label per node that cannot be converted, in graph order.
  const std::vector<std::string>& nodes() const { return nodes_; }

 private:
  std::vector<std::string> nodes_;
};

}  // namespace milkit
