// Helpers shared by the torch.export importer's operator families: argument access
// shortcuts, shapes, dtypes and small MIL compositions.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "converter.h"

namespace milkit {
namespace torch_detail {

using C = Converter;

Var* self(C& cv, const json& n);
/// The float dtype a float-valued op computes in: the node's output dtype, else fp32.
DataType float_out(C& cv, const json& n, Var* x);
Var* bin(C& cv, const char* op, Var* x, Var* y);
/// A float op of one input (ints promote to the default float).
void unary(OpTable& t, const char* name, const char* mil);
/// An op that keeps the input dtype (abs, neg of ints are fine in MIL).
void unary_keep(OpTable& t, const char* name, const char* mil);
Var* clip(C& cv, Var* x, std::optional<double> lo, std::optional<double> hi);
Var* sel(C& cv, Var* cond, Var* a, Var* b);
/// `x` with a trailing axis of one element (for comparisons against every element of a list).
Var* trailing_axis(C& cv, Var* x);
/// How many elements along the last axis of `cmp` (a bool tensor) are true, as int32.
Var* count_true(C& cv, Var* cmp);
Var* input(C& cv, const json& n);
bool is_const(Var* v);
std::vector<int64_t> expand_list(C& cv, const json& n, std::vector<int64_t> v, size_t k, const char* what);
Var* matmul(C& cv, Var* x, Var* y, bool ty = false);
/// softmax(x) along `axis` with rows that are -inf throughout giving 0, not NaN (torch's
/// _safe_softmax, which scaled_dot_product_attention uses for fully masked query rows)
Var* safe_softmax(C& cv, Var* x, int64_t axis);
/// whether `j` (node inputs or graph outputs, subgraphs included) reads tensor `name`
bool json_reads(const json& j, const std::string& name);
/// whether output `k` of node `n` is read by any node or is a program output (torch names every
/// output of a multi-output op, used or not)
bool output_used(C& cv, const json& n, size_t k);
int64_t known_dim(C& cv, const json& n, Var* x, int64_t ax, const char* what);
Var* reduce_op(C& cv, const char* op, Var* x, const std::vector<int64_t>& axes, bool keep);
/// A gather-family op on x of any dtype: MIL's gathers do not take bool, so a bool x goes
/// through int32 and back.
Var* gather_any(C& cv, const char* type, Var* x, std::vector<Arg> rest);
// A shape built from pieces: literal ints or dims of `x` (by index).
struct Piece {
  bool from_x;
  int64_t v;
};

Var* build_shape(C& cv, Var* x, const std::vector<Piece>& ps);
/// A torch size list (ints and SymInts) as a MIL shape; sizes equal to x's dims are read from x.
Var* size_shape(C& cv, const std::vector<Dim>& ds, Var* like = nullptr);
Var* reshape(C& cv, Var* x, Var* shape);
/// Broadcasts `x` to `ds` (torch's expand: -1 keeps the dim).
Var* expand_to(C& cv, const json& n, Var* x, std::vector<Dim> ds);
// begin/end of a torch slice on an axis of size `size` (nullopt end: to the end)
struct SliceSpec {
  int64_t start = 0;
  std::optional<int64_t> end;
  int64_t step = 1;
};

Var* slice_axis(C& cv, const json& n, Var* x, int64_t dim, const SliceSpec& s, Var* start_var = nullptr,
                Var* end_var = nullptr);
/// [x, y, ...] cast to one dtype (torch's promotion over the list; empty 1-d tensors dropped)
std::vector<Var*> promote_all(C& cv, std::vector<Var*> vs, std::optional<DataType> want);
Arg values_arg(const std::vector<Var*>& vs);
Var* fill(C& cv, Var* shape, double v, DataType dt);
DataType factory_dtype(C& cv, const json& n, Var* like, DataType def);
Var* shape_of_var(C& cv, Var* x);
/// torch's pad list (last dim first, pairs) as MIL's (first dim first) for rank r
std::vector<int64_t> mil_pad(const std::vector<int64_t>& p, int r);
Var* pad(C& cv, const json& n, Var* x, const std::vector<int64_t>& tp, const std::string& mode, double value);
/// [0, 1, ..., d - 1] as int32
Var* range_of(C& cv, Dim d);
/// x as rank 1
Var* flat(C& cv, Var* x);
/// outer(x, y) = x[:, None] * y[None, :]; kron: x's and y's dims interleaved, multiplied, merged
Var* times(C& cv, const json& n, Var* x, Var* y);
void like(C& cv, const json& n, double v);
Var* reshape(C& cv, Var* v, const std::vector<Dim>& dims);
/// atan2(y, x) of two float vars of one dtype (torch's quadrants; atan2(0, 0) = 0).
Var* atan2_of(C& cv, Var* y, Var* x);
/// A list element dim: a constant, or the symbol itself (so the gathered sequence keeps it).
ArgItem elem_dim(C& cv, Dim d);

}  // namespace torch_detail
}  // namespace milkit
