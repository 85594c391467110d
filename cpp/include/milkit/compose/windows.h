// milkit/compose/windows.h - sliding windows: im2col, col2im, pooling by taps, max_unpool.
#pragma once

#include <cstdint>
#include <vector>

#include "milkit/compose/emitter.h"

namespace milkit {
namespace compose {

/// The geometry of a sliding window over the spatial dims (one value per spatial dim; empty
/// stride / dilation / pads mean 1 / 1 / 0).
struct Window {
  std::vector<int64_t> kernel;     ///< Kernel size.
  std::vector<int64_t> stride;     ///< Step between windows.
  std::vector<int64_t> dilation;   ///< Step between taps of a window.
  std::vector<int64_t> pad_begin;  ///< Padding before each spatial dim.
  std::vector<int64_t> pad_end;    ///< Padding after each spatial dim.
  /// The window with every list filled to `sp` entries; ValueError when a list has another length.
  Window filled(size_t sp) const;
  /// The number of windows along dim i of an input of `in` entries: floor((in + pads - extent) /
  /// stride) + 1, with `ceil_mode` rounding up but dropping a last window that would start in
  /// the end padding.
  int64_t out_size(size_t i, int64_t in, bool ceil_mode) const;
};

/// F.unfold / ONNX's im2col: x [N, C, spatial...] (known spatial sizes) -> [N, C * K, L], row
/// c * K + t holding kernel tap t (row-major over the kernel) of every window (L windows,
/// row-major): one strided slice of the zero-padded input per tap (exact).
Var* im2col(Emitter& e, Var* x, const Window& w);
/// F.fold / ONNX's Col2Im: x [N, C * K, L] (C * K known; N and L may be known only at run time)
/// -> [N, C, image...], overlapping taps summed; taps that fall in the padding are dropped. A
/// scatter-add of every element into the flattened image (indices computed at import time).
Var* col2im(Emitter& e, Var* x, const std::vector<int64_t>& image, const Window& w);

/// What pool_by_taps computes over each window.
enum class PoolKind { Max, Avg, Sum };
/// How pool_by_taps numbers the position of each maximum.
enum class IndexOrder {
  RowMajor,     ///< Flat over the whole input [N, C, spatial...] (ONNX storage_order 0).
  ColumnMajor,  ///< Spatial index with the first dim fastest, plus (n * C + c) * plane
                ///< (storage_order 1).
  Plane,        ///< Flat over the spatial dims of each plane (torch's max_pool indices).
};
/// pool_by_taps' parameters.
struct PoolSpec {
  Window window;                  ///< Kernel, strides, dilations, pads.
  PoolKind kind = PoolKind::Max;  ///< Max, average or sum.
  bool ceil_mode = false;         ///< See Window::out_size.
  bool count_include_pad =
      false;  ///< Average: divide by the taps inside input + pads (not input only).
  IndexOrder index_order = IndexOrder::RowMajor;  ///< Numbering of `indices`.
};
/// Pools x [N, C, spatial...] (known spatial sizes) for any dilation, padding and ceil_mode:
/// every kernel tap is a strided slice of the padded input (max pads with -inf), combined by
/// maximum (the first maximum in row-major tap order wins) or sum (average: divided by the taps
/// counted per output). With `indices`, also each maximum's position (int32) as `index_order`
/// numbers it (needs the whole input shape known except for Plane).
Var* pool_by_taps(Emitter& e, Var* x, const PoolSpec& s, Var** indices = nullptr);

/// Which positions max_unpool's indices number.
enum class UnpoolIndices {
  Tensor,  ///< Flat over the whole output [N, C, out...] (ONNX MaxUnpool).
  Plane,   ///< Flat over the spatial dims of each output plane (torch's max_unpool).
};
/// Writes each x [N, C, spatial...] entry at its index into zeros of [N, C, out...]
/// (`out_spatial` per spatial dim), the rest 0. Tensor indices need x's shape known (an integer
/// x is scattered as fp32 and cast back); Plane indices allow N and C known only at run time.
Var* max_unpool(Emitter& e, Var* x, Var* indices, const std::vector<int64_t>& out_spatial,
                UnpoolIndices kind);

}  // namespace compose
}  // namespace milkit
