// milkit/compose/scan.h - cumulative sums, products and log-sum-exps along an axis.
#pragma once

#include <cstdint>
#include <utility>

#include "milkit/compose/emitter.h"

namespace milkit {
namespace compose {

/// How a cumulative op runs along its axis.
struct ScanSpec {
  int64_t axis = 0;        ///< The axis (may be negative).
  bool exclusive = false;  ///< Entry i combines the entries before i only (identity at the start).
  bool reverse = false;    ///< Runs from the end of the axis toward its start.
};

/// The running sum along `s.axis` (MIL's cumsum op).
Var* cumsum(Emitter& e, Var* x, const ScanSpec& s);
/// The running product along `s.axis`, whose length must be known: a Hillis-Steele scan of
/// log2(L) steps, each multiplying every entry by the one k before it (ones shifted in).
/// Products group differently from a left-to-right loop (last-bit differences in float).
Var* cumprod(Emitter& e, Var* x, const ScanSpec& s);
/// The running log(sum(exp)) along `s.axis` (known length, float x), by the same scan:
/// logaddexp(a, b) = max + log(1 + exp(min - max)), two -inf giving -inf.
Var* logcumsumexp(Emitter& e, Var* x, const ScanSpec& s);

/// The running maximum (or minimum) along `s.axis` (known length) and the index it came from,
/// by the same scan: each step keeps x where x >= (<=) the entry k before it, so later entries
/// win ties (torch's cummax / cummin); exact for every dtype. Returns (values, int32 indices).
std::pair<Var*, Var*> cumextreme(Emitter& e, Var* x, const ScanSpec& s, bool is_max);

}  // namespace compose
}  // namespace milkit
