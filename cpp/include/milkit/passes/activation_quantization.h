// milkit/passes/activation_quantization.h - what the activation quantization passes share
// (compression::insert_prefix_quantize_dequantize_pair and
// compression::insert_suffix_quantize_dequantize_pair): calibrated ranges, the scale and zero
// point of a range as coremltools computes them, and coremltools' way of rewiring uses.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "milkit/builder/builder.h"
#include "milkit/ir/ir.h"
#include "milkit/passes/pass.h"
#include "milkit/types/datatype.h"

namespace milkit::compression {

/// Calibrated range [rmin, rmax] of each activation, by var name.
using ActivationStats = std::unordered_map<std::string, std::pair<double, double>>;

/// Parses the "activation_stats" pass option: a JSON object {var name: [rmin, rmax]} (or
/// coremltools' {var name: {"rmin": .., "rmax": ..}}); a bound may be the string "inf", "-inf"
/// or "nan". Throws ValueError naming `pass` on malformed input.
ActivationStats parse_activation_stats(const std::string& json, const std::string& pass);

/// The "activation_stats" option of an activation pass, parsed (coremltools' error when it is
/// missing).
ActivationStats activation_stats_option(const PassOptions& opts, const std::string& pass);

/// The scale and zero point of a quantize / dequantize pair.
struct ActivationQParams {
  /// The scale, an fp16 number (coremltools computes it in fp16).
  float scale = 1.0f;
  /// Whether coremltools writes a zero point (not for signed symmetric quantization).
  bool has_zero_point = false;
  /// The zero point, when there is one.
  int32_t zero_point = 0;
};

/// coremltools' get_min_and_max_values + quantize_weight_by_dtype on the pair [rmin, rmax]: both
/// bounds rounded to fp16, then numpy's fp16 arithmetic of linear (symmetric) quantization to
/// `qdtype`.
ActivationQParams activation_qparams(double rmin, double rmax, DataType qdtype, bool symmetric);

/// pymil's Block.replace_uses_of_var_after_op, child order included: every op after `anchor` in
/// its block (and the ops of their nested blocks, and those blocks' outputs) that reads
/// `old_var` reads `new_var` instead; such an op moves to the end of the reader list of each of
/// its inputs, as pymil's set_inputs does. With `block_outputs`, the outputs of `anchor`'s block
/// are replaced too (a function output keeps its name).
void replace_uses_after(Operation* anchor, Var* old_var, Var* new_var, bool block_outputs);

/// Creates `op`'s type again before `op` with the same inputs except `replaced` (input name ->
/// var), named like `op`; the new output var takes the name of `op`'s output. Returns the output.
Var* rebuild_op(Builder& b, Operation* op,
                const std::vector<std::pair<std::string, Var*>>& replaced);

/// Creates quantize(input) -> dequantize at the builder's insertion point, both with `scale` (a
/// rank-0 const of `scale_dtype`) and, when `q.has_zero_point`, the zero point (a rank-0 const of
/// `qdtype`); the quantize's output_dtype names `qdtype`. Returns {quantize out, dequantize out}.
std::pair<Var*, Var*> quantize_dequantize(Builder& b, Var* input, const ActivationQParams& q,
                                          DataType scale_dtype, DataType qdtype);

/// Whether `op` has one output read by exactly one op input, of type `type` (coremltools'
/// _check_child_op_type).
bool single_child_of_type(const Operation* op, const char* type);

}  // namespace milkit::compression
