// Kernels of the control-flow ops: cond and while_loop run their nested blocks; the list ops
// (make_list, list_length, list_read, list_write, list_gather, list_scatter) work on run-time list
// values, which are immutable: a write makes a new list sharing the untouched elements.
#include <cstdlib>
#include <cstring>

#include "kernels.h"
#include "milkit/exec/plan.h"

namespace milkit {

namespace {

// A run away while_loop is stopped with an error, not a hang (MILKIT_MAX_LOOP_ITERATIONS).
int64_t max_iterations() {
  static const int64_t n = [] {
    const char* e = std::getenv("MILKIT_MAX_LOOP_ITERATIONS");
    long long v = e ? std::atoll(e) : 0;
    return v > 0 ? static_cast<int64_t>(v) : int64_t{10000000};
  }();
  return n;
}

bool truth(const KernelCtx& k, const Tensor& t, const char* what) {
  if (t.numel() != 1) k.fail(std::string(what) + " must hold one element, got shape " + shape_str(t.shape()));
  return t.get(0) != 0;
}

void cond(KernelCtx& k) {
  std::vector<Tensor> outs = k.run_block(truth(k, k.in("pred"), "pred") ? 0 : 1, {});
  for (size_t i = 0; i < outs.size(); ++i) k.set(i, std::move(outs[i]));
}

void while_loop(KernelCtx& k) {
  std::vector<Tensor> vals;
  for (const Tensor* t : k.tuple("loop_vars")) vals.push_back(*t);
  const int64_t limit = max_iterations();
  for (int64_t it = 0;; ++it) {
    std::vector<Tensor> c = k.run_block(0, vals);
    if (!truth(k, c.at(0), "the cond block's output")) break;
    if (it >= limit)
      k.fail("stopped after " + std::to_string(limit) +
             " iterations (set MILKIT_MAX_LOOP_ITERATIONS to allow more)");
    vals = k.run_block(1, vals);
  }
  for (size_t i = 0; i < vals.size(); ++i) k.set(i, std::move(vals[i]));
}

const TensorList& list_in(const KernelCtx& k) {
  const Tensor& t = k.in("ls");
  if (!t.is_list()) k.fail("input 'ls' is not a list at run time");
  return t.items();
}

int64_t check_index(const KernelCtx& k, int64_t i, size_t n, bool may_grow) {
  if (i < 0 || (!may_grow && i >= static_cast<int64_t>(n)))
    k.index_error("index " + std::to_string(i) + " is out of range for a list of length " + std::to_string(n));
  return i;
}

const Tensor& element(const KernelCtx& k, const TensorList& ls, int64_t i) {
  check_index(k, i, ls.size(), false);
  if (!ls[i].defined()) k.fail("element " + std::to_string(i) + " of the list was never written");
  return ls[i];
}

bool dynamic_length(const KernelCtx& k) {
  const Type* t = k.op().input1("ls")->type();
  return t->dynamic_length();
}

void make_list(KernelCtx& k) {
  int64_t n = k.int_or("init_length", 1);
  if (n < 0) k.fail("init_length must be >= 0, got " + std::to_string(n));
  if (n > (int64_t{1} << 24)) k.fail("init_length " + std::to_string(n) + " is too large");
  k.set(0, Tensor::list(std::make_shared<const TensorList>(static_cast<size_t>(n))));
}

void list_length(KernelCtx& k) {
  Tensor& o = k.alloc(0, {});
  o.mutable_data<int32_t>()[0] = static_cast<int32_t>(list_in(k).size());
}

void check_elem(const KernelCtx& k, const Tensor& v, const TensorList& ls) {
  for (const Tensor& e : ls)
    if (e.defined() && e.shape() != v.shape())
      k.fail("element shape " + shape_str(v.shape()) + " differs from the list's elements " + shape_str(e.shape()));
}

// A copy of `ls` with room for index i (a dynamic list grows; a fixed one raises IndexError).
std::shared_ptr<TensorList> writable(const KernelCtx& k, const TensorList& ls, int64_t i) {
  check_index(k, i, ls.size(), dynamic_length(k));
  if (i >= (int64_t{1} << 24)) k.fail("index " + std::to_string(i) + " is too large");
  auto out = std::make_shared<TensorList>(ls);
  if (static_cast<size_t>(i) >= out->size()) out->resize(static_cast<size_t>(i) + 1);
  return out;
}

void list_write(KernelCtx& k) {
  const TensorList& ls = list_in(k);
  const Tensor& v = k.in("value");
  check_elem(k, v, ls);
  int64_t i = k.in("index").numel() == 1 ? static_cast<int64_t>(k.in("index").get(0)) : -1;
  if (k.in("index").numel() != 1) k.fail("index must hold one element");
  auto out = writable(k, ls, i);
  (*out)[static_cast<size_t>(i)] = v;
  k.set(0, Tensor::list(std::move(out)));
}

void list_read(KernelCtx& k) {
  if (k.in("index").numel() != 1) k.fail("index must hold one element");
  k.set(0, element(k, list_in(k), static_cast<int64_t>(k.in("index").get(0))));
}

void list_gather(KernelCtx& k) {
  const TensorList& ls = list_in(k);
  const Tensor& idx = k.in("indices");
  std::vector<const Tensor*> picked;
  for (int64_t j = 0; j < idx.numel(); ++j) picked.push_back(&element(k, ls, static_cast<int64_t>(idx.get(j))));
  std::vector<int64_t> eshape;
  DataType dt = k.declared_dtype(0);
  if (!picked.empty()) {
    eshape = picked[0]->shape();
    dt = picked[0]->dtype();
  } else {
    const Type* et = k.op().input1("ls")->type()->elem();
    for (Dim d : et->shape()) {
      if (!d->is_const()) k.fail("cannot gather 0 elements of a list with symbolic element shape " + et->str());
      eshape.push_back(d->value());
    }
  }
  std::vector<int64_t> shape = {idx.numel()};
  shape.insert(shape.end(), eshape.begin(), eshape.end());
  Tensor o = Tensor::empty(dt, shape);
  size_t nb = 0;
  for (const Tensor* p : picked) {
    if (p->shape() != eshape)
      k.fail("list elements have different shapes " + shape_str(eshape) + " and " + shape_str(p->shape()));
    std::memcpy(o.mutable_bytes() + nb, p->bytes(), p->nbytes());
    nb += p->nbytes();
  }
  k.set(0, std::move(o));
}

void list_scatter(KernelCtx& k) {
  const TensorList& ls = list_in(k);
  const Tensor& idx = k.in("indices");
  const Tensor& v = k.in("value");
  if (v.rank() < 1 || v.shape()[0] != idx.numel())
    k.fail("Cannot scatter " + std::to_string(v.rank() ? v.shape()[0] : 0) + " values to " +
           std::to_string(idx.numel()) + " indices");
  std::vector<int64_t> eshape(v.shape().begin() + 1, v.shape().end());
  auto out = std::make_shared<TensorList>(ls);
  size_t each = v.numel() ? v.nbytes() / static_cast<size_t>(v.shape()[0]) : 0;
  for (int64_t j = 0; j < idx.numel(); ++j) {
    int64_t i = static_cast<int64_t>(idx.get(j));
    check_index(k, i, out->size(), dynamic_length(k));
    if (i >= (int64_t{1} << 24)) k.fail("index " + std::to_string(i) + " is too large");
    if (static_cast<size_t>(i) >= out->size()) out->resize(static_cast<size_t>(i) + 1);
    Tensor e = Tensor::empty(v.dtype(), eshape);
    std::memcpy(e.mutable_bytes(), v.bytes() + each * static_cast<size_t>(j), each);
    check_elem(k, e, *out);
    (*out)[static_cast<size_t>(i)] = std::move(e);
  }
  k.set(0, Tensor::list(std::move(out)));
}

// _const_symbolic: a const whose value lives on its output var.
void const_symbolic(KernelCtx& k) {
  const auto& v = k.op().output(0)->value();
  if (!v || v->is_symbolic()) k.fail("its value is not known at run time");
  k.set(0, Tensor::from_value(*v));
}

}  // namespace

void register_control_flow_kernels(KernelRegistry& r) {
  r.add("cond", {cond, false});
  r.add("while_loop", {while_loop, false});
  r.add("make_list", {make_list, false});
  r.add("list_length", {list_length, false});
  r.add("list_write", {list_write, false});
  r.add("list_read", {list_read, false});
  r.add("list_gather", {list_gather, false});
  r.add("list_scatter", {list_scatter, false});
  r.add("_const_symbolic", {const_symbolic, false});
}

}  // namespace milkit
