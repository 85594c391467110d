// milkit/passes/compression.h - what the weight compression passes share: coremltools'
// OptimizationConfig, resolved per const op in C++, and its rules for which weights compress.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "milkit/compress/quantize.h"
#include "milkit/ir/ir.h"
#include "milkit/passes/pass.h"
#include "milkit/types/datatype.h"

namespace milkit::compression {

/// coremltools' CompressionGranularity.
enum class Granularity { PerTensor, PerGroupedChannel, PerChannel, PerBlock };

/// One op-level config (coremltools' OpLinearQuantizerConfig, OpPalettizerConfig,
/// OpThresholdPrunerConfig or OpMagnitudePrunerConfig), as the Python API serializes it (JSON).
struct OpConfig {
  /// The config class name ("OpLinearQuantizerConfig", ...).
  std::string type;
  /// The canonical JSON text (two configs are equal when their texts are).
  std::string text;
  /// Weights with at most this many elements are left alone; nullopt is an error when used.
  std::optional<int64_t> weight_threshold;
  /// Linear quantizer and palettizer: the mode, upper case ("LINEAR_SYMMETRIC", "KMEANS", ...).
  std::string mode;
  /// Linear quantizer: the quantized dtype.
  DataType dtype = DataType::Int8;
  /// Linear quantizer and palettizer: the granularity.
  Granularity granularity = Granularity::PerTensor;
  /// Linear quantizer per_block: an int block size, or one per axis (`block_sizes`).
  int64_t block_size = 32;
  /// Per-axis block sizes when the config gave a list.
  std::optional<std::vector<int64_t>> block_sizes;
  /// Palettizer: bits (0: inferred for unique / custom).
  int nbits = 0;
  /// Palettizer per_grouped_channel: channels per group.
  int64_t group_size = 32;
  /// Palettizer: the channel axis, when given.
  std::optional<int64_t> channel_axis;
  /// Palettizer: vector length of each LUT entry.
  int64_t cluster_dim = 1;
  /// Palettizer: normalize by a per-channel scale first.
  bool enable_per_channel_scale = false;
  /// Palettizer custom mode: the id of the Python lut_function (-1: none).
  int64_t lut_function = -1;
  /// Threshold pruner.
  double threshold = 1e-12, minimum_sparsity_percentile = 0.5;
  /// Magnitude pruner: target sparsity, or n:m.
  std::optional<double> target_sparsity;
  /// Magnitude pruner: block size of block sparsity (nullopt: none).
  std::optional<int64_t> prune_block_size;
  /// Magnitude pruner n:m ratio.
  std::optional<std::pair<int64_t, int64_t>> n_m_ratio;
  /// Magnitude pruner: the dim of block / n:m sparsity.
  std::optional<int64_t> dim;
};

/// coremltools' OptimizationConfig: global, per op type and per op name configs (a null pointer
/// means "do not compress").
struct Config {
  /// Applies where nothing more specific does.
  std::shared_ptr<const OpConfig> global;
  /// By op type ("conv", "linear").
  std::map<std::string, std::shared_ptr<const OpConfig>> op_type;
  /// By op or const name.
  std::map<std::string, std::shared_ptr<const OpConfig>> op_name;

  /// Parses the JSON the Python API writes: {"global": cfg|null, "op_type": {..}, "op_name":
  /// {..}}. Throws ValueError on malformed input.
  static Config parse(const std::string& json);
  /// The config of a const (or constexpr) op, as coremltools' _get_const_op_config: its name,
  /// else (following constexpr children) the config of the ops reading it, which must agree
  /// (ValueError naming both ops otherwise); nullptr when it feeds only block outputs or is
  /// skipped.
  const OpConfig* for_const(const Operation* op) const;
  /// The config of a non-const op: by name, by type, else global.
  const OpConfig* for_op(const Operation* op) const;
};

/// Whether a value would be written to the weight file (coremltools' should_use_weight_file at
/// iOS15: fp16, fp32, uint8 or int8 with at least 10 elements).
bool uses_weight_file(const Value& v);

/// coremltools' need_compress_const: no constexpr op reads the const (unless
/// `constexpr_child_ok`: the pass accepted that joint-compression pattern), rank >= 2 (unless it
/// feeds a constexpr op), stored in the weight file, and more elements than the config's
/// weight_threshold (ValueError naming the op when that is unset). With `joint`, the size is the
/// dense weight's at the end of the constexpr chain the op feeds.
bool needs_compression(const Operation* op, const OpConfig& cfg, bool joint = false,
                       bool constexpr_child_ok = false);

/// The pass's "config" option parsed (ValueError naming the pass when it is missing).
Config config_option(const PassOptions& opts, const std::string& pass);

/// Whether a weight pass leaves `op` alone because its function is older than iOS16 (coremltools'
/// minimum for weight compression): then it records a warning naming the op.
bool before_ios16(const Function& f, const Operation* op);

/// The "joint_compression" option ("0" / "1", default "0"); ValueError when it is set and a
/// function is older than iOS18 (coremltools' message).
bool joint_option(const Program& p, const PassOptions& opts);

/// The only op reading `op`'s first output when exactly one does, else nullptr.
Operation* single_child(const Operation* op);

/// The value of a constexpr op's outputs, computed with the interpreter's kernels (its constexpr
/// inputs first); coremltools' materialized_val_inference.
std::vector<std::shared_ptr<const Value>> materialize(const Function& f, const Operation* op);

/// The values of many constexpr ops at once (program order; the ones they read are computed too):
/// by output var.
std::map<const Var*, std::shared_ptr<const Value>> materialize_all(
    const Function& f, const std::vector<Operation*>& ops);

/// The dense values of sparse data: `nonzero` laid out where `mask` (uint1, the dense shape) is 1.
std::vector<float> sparse_to_dense(const Value& nonzero, const Value& mask);

/// The input and output channel axes of a weight from the ops reading it (coremltools'
/// select_input_output_channel_axis); nullopt where readers disagree.
std::pair<std::optional<int64_t>, std::optional<int64_t>> channel_axes(const Operation* const_op);

/// Block sizes per axis for the weight of `shape` that `const_op` holds (coremltools'
/// infer_block_sizes; for joint compression the dense weight) and the channel axis; block sizes
/// nullopt when the axes cannot be decided. ValueError (naming the op) for a per-axis block_size
/// list of the wrong length.
std::pair<std::optional<std::vector<int64_t>>, std::optional<int64_t>> block_sizes(
    const Operation* const_op, const OpConfig& cfg, const std::vector<int64_t>& shape);

/// Replaces every use of `const_op`'s output by `v` and erases the const.
void replace_const(Operation* const_op, Var* v);

/// A value of dtype `dt` (fp16 / fp32 written directly, others through doubles) from floats.
Value value_from_floats(DataType dt, std::vector<int64_t> shape, const float* data, size_t n);

/// A value over bytes already in milkit's unpacked layout of `dt` (no copy).
Value value_from_bytes(DataType dt, std::vector<int64_t> shape, std::vector<uint8_t> bytes);

/// Bytes of compressed results a process keeps in memory at once (kResultBytesInMemory); beyond
/// it results are spilled to the page cache like decompressed weights, so that compressing a
/// model larger than memory does not grow the process's own memory with the model.
constexpr size_t kResultBytesInMemory = size_t{32} << 20;

/// A buffer over a compressed result (quantized data, pruned values, masks): kept in memory
/// while the results kept stay within kResultBytesInMemory (a save then writes it once, straight
/// from memory; its bytes count again once the buffer is gone), else spilled.
std::shared_ptr<const Buffer> result_buffer(std::vector<uint8_t> bytes);

/// The same over uninitialized-allocated bytes (compress::UninitBytes), without a copy when kept.
std::shared_ptr<const Buffer> result_buffer(
    std::vector<uint8_t, compress::UninitAllocator<uint8_t>> bytes);

/// A compressed result as a value (sub-byte dtypes packed) over result_buffer: for results
/// smaller than the weight they replace. `bytes` are in milkit's unpacked layout of `dt`.
Value value_in_memory(DataType dt, std::vector<int64_t> shape, std::vector<uint8_t> bytes);

/// The same over a sub-byte value's bytes already packed (Core ML's layout, `numel` elements).
Value packed_in_memory(DataType dt, std::vector<int64_t> shape, std::vector<uint8_t> packed);

/// Every element of a numeric value as float (for fp16: the exact fp16 numbers).
std::vector<float> floats(const Value& v);

/// Calls fn(function, op) for every const op of every function (nested blocks first, as
/// coremltools' passes collect them), ops in program order.
void for_each_const(Program& p, const std::function<void(Function&, Operation*)>& fn);

/// What a custom LUT function (coremltools' OpPalettizerConfig lut_function) made of a weight:
/// the iOS18 constexpr_lut_to_dense operands.
struct CustomLut {
  /// Index width: ceil(log2(entries)).
  int nbits = 0;
  /// LUT values (in the weight's dtype), shape `lut_shape` (rank + 2).
  std::vector<float> lut;
  /// The LUT's shape.
  std::vector<int64_t> lut_shape;
  /// One index per element (or per vector), shape `indices_shape`.
  std::vector<uint8_t> indices;
  /// The indices' shape.
  std::vector<int64_t> indices_shape;
  /// The vector axis (-1 for scalar entries).
  int vector_axis = -1;
};

/// Calls the custom LUT function `id` on a weight, per group of `group_size` channels along
/// `channel_axis` (0: one group), as coremltools' grouped_channelwise_compress does.
using LutFunctionHook = std::function<CustomLut(
    int64_t id, const std::vector<float>& data, const std::vector<int64_t>& shape, DataType dtype,
    int64_t channel_axis, int64_t group_size, int64_t cluster_dim)>;

/// Installs the hook that runs custom LUT functions (the Python bindings install one).
void set_lut_function_hook(LutFunctionHook hook);

/// The installed hook (empty when none: custom palettization is then a ValueError).
const LutFunctionHook& lut_function_hook();

/// One weight's compression, in three steps: chosen (serially, reading the IR), computed (on the
/// thread pool, touching no IR), applied (serially, in program order).
struct Job {
  /// The numerical work; runs beside other jobs' (warnings go to `warnings`).
  std::function<void()> compute;
  /// Rewrites the IR with the result; false when the weight was left as it was.
  std::function<bool()> apply;
  /// Warnings the computation made, recorded when the job is applied.
  std::shared_ptr<std::vector<std::string>> warnings = std::make_shared<std::vector<std::string>>();
  /// The computation splits its own work over the threads (milkit::parallel_for over channel
  /// groups): it runs on its own with the whole pool rather than beside other jobs, whose sizes
  /// would leave threads idle.
  bool splits = false;
};

/// for_each_const with the numerical work of several weights at once: `prepare` returns the job
/// of a const (or nullopt to leave it), jobs are computed in parallel a window at a time (up to 4
/// per thread, handed out as threads come free; a window closes early once its weights hold 1.5
/// per thread of its largest; a job that `splits` runs alone, with every thread) and applied in
/// program order (an error a computation raises is raised in its turn, after the jobs before it
/// are applied), so the result and the warnings do not depend on the thread count, and no more
/// than a window of weights is held decompressed. Returns whether any job was applied.
bool for_each_const_parallel(
    Program& p, const std::function<std::optional<Job>(Function&, Operation*)>& prepare);

/// Records a warning where coremltools logs one and skips a weight (the message names the op).
/// The Python API re-raises them as Python warnings after the pass.
void warn(const std::string& message);

/// Gives the heap's free memory back to the system (glibc's malloc_trim; nothing elsewhere).
/// The compression passes free one large buffer per weight; glibc's rising mmap threshold keeps
/// such buffers in its heap after free, which would count as the process's memory.
void release_free_memory();

/// The warnings recorded since the last call, oldest first (thread-safe).
std::vector<std::string> take_warnings();

}  // namespace milkit::compression
