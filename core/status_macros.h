// RETURN_IF_ERROR / ASSIGN_OR_RETURN: the project's one way to propagate absl::Status.
#ifndef PSFLOW_CORE_STATUS_MACROS_H_
#define PSFLOW_CORE_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define PSFLOW_CONCAT_INNER_(a, b) a##b
#define PSFLOW_CONCAT_(a, b) PSFLOW_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` (an absl::Status) is not OK.
#define RETURN_IF_ERROR(expr)                        \
  do {                                               \
    ::absl::Status psflow_status_ = (expr);          \
    if (!psflow_status_.ok()) return psflow_status_; \
  } while (false)

// `lhs = value of expr` (an absl::StatusOr<T>), or returns its error from the enclosing function.
// `lhs` may be a declaration: ASSIGN_OR_RETURN(auto x, Parse(s));
#define ASSIGN_OR_RETURN(lhs, expr) \
  PSFLOW_ASSIGN_OR_RETURN_IMPL_(PSFLOW_CONCAT_(psflow_statusor_, __LINE__), lhs, expr)
#define PSFLOW_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return std::move(tmp).status();      \
  lhs = std::move(tmp).value()

#endif  // PSFLOW_CORE_STATUS_MACROS_H_
