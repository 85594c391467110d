// milkit._core._compress: the compression numerics (palettization, pruning, bit packing), a
// private hook for tests that compare them with coremltools.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common.h"
#include "milkit/compress/kmeans.h"
#include "milkit/compress/palettize.h"
#include "milkit/compress/prune.h"
#include "milkit/types/error.h"

namespace milkit::py_bind {

namespace {

// A numpy array's values as floats, its shape and the dtype whose arithmetic to reproduce.
struct Weight {
  std::vector<float> values;
  compress::WeightView view;
};

Weight weight_from(const py::array& a) {
  Weight w;
  std::string kind = py::str(a.dtype());
  DataType dt;
  if (kind == "float16")
    dt = DataType::Float16;
  else if (kind == "float32")
    dt = DataType::Float32;
  else if (kind == "int32")
    dt = DataType::Int32;
  else
    throw ValueError("_compress: weights must be float16, float32 or int32, got " + kind);
  py::array_t<float, py::array::c_style | py::array::forcecast> f(a);
  w.values.assign(f.data(), f.data() + f.size());
  w.view.data = w.values.data();
  w.view.shape.assign(a.shape(), a.shape() + a.ndim());
  w.view.dtype = dt;
  return w;
}

// Values back in the weight's numpy dtype.
py::array to_dtype(const std::vector<float>& v, const std::vector<int64_t>& shape,
                   const py::dtype& dt) {
  py::array_t<float> f(std::vector<py::ssize_t>(shape.begin(), shape.end()));
  if (!v.empty()) std::memcpy(f.mutable_data(), v.data(), v.size() * sizeof(float));
  return f.attr("astype")(dt);
}

compress::PaletteMode mode_from(const std::string& m) {
  if (m == "kmeans" || m == "KMEANS") return compress::PaletteMode::KMeans;
  if (m == "uniform" || m == "UNIFORM") return compress::PaletteMode::Uniform;
  if (m == "unique" || m == "UNIQUE") return compress::PaletteMode::Unique;
  throw ValueError("_compress: unknown mode '" + m + "'");
}

}  // namespace

void init_compress(py::module_& root) {
  py::module_ m = root.def_submodule("_compress", "compression numerics (private, for tests)");
  m.def(
      "palettize",
      [](const py::array& a, const std::string& mode, int nbits, int channel_axis,
         int64_t group_size, int cluster_dim) -> py::object {
        Weight w = weight_from(a);
        compress::PaletteSpec s{mode_from(mode), nbits, channel_axis, group_size, cluster_dim};
        std::string why;
        std::optional<compress::Palette> p;
        {
          py::gil_scoped_release release;
          p = compress::palettize(w.view, s, &why);
        }
        if (!p) return py::str(why);
        py::array lut = to_dtype(p->lut, p->lut_shape, a.dtype());
        py::array_t<uint8_t> idx(
            std::vector<py::ssize_t>(p->indices_shape.begin(), p->indices_shape.end()));
        std::memcpy(idx.mutable_data(), p->indices.data(), p->indices.size());
        return py::make_tuple(
            lut, idx, p->nbits,
            p->vector_axis < 0 ? py::object(py::none()) : py::object(py::int_(p->vector_axis)));
      },
      py::arg("array"), py::arg("mode"), py::arg("nbits"), py::arg("channel_axis") = 0,
      py::arg("group_size") = 0, py::arg("cluster_dim") = 1,
      "(lut, indices, nbits, vector_axis) as coremltools' grouped_channelwise_compress, or the "
      "reason it skips (a str).");
  m.def(
      "prune",
      [](const py::array& a, const std::string& kind, double threshold, double minimum_sparsity,
         double target_sparsity, int64_t block_size, int n, int mm, int dim) -> py::object {
        Weight w = weight_from(a);
        compress::PruneSpec s;
        if (kind == "threshold")
          s.kind = compress::PruneSpec::Threshold;
        else if (kind == "magnitude")
          s.kind = compress::PruneSpec::Magnitude;
        else if (kind == "nm")
          s.kind = compress::PruneSpec::NM;
        else
          throw ValueError("_compress: unknown prune kind '" + kind + "'");
        s.threshold = threshold;
        s.minimum_sparsity = minimum_sparsity;
        s.target_sparsity = target_sparsity;
        s.block_size = block_size;
        s.n = n;
        s.m = mm;
        s.dim = dim;
        std::string why;
        auto out = compress::prune(w.view, s, &why);
        if (!out) return py::str(why);
        return to_dtype(*out, w.view.shape, a.dtype());
      },
      py::arg("array"), py::arg("kind"), py::arg("threshold") = 1e-12,
      py::arg("minimum_sparsity") = 0.5, py::arg("target_sparsity") = 0.0,
      py::arg("block_size") = 0, py::arg("n") = 0, py::arg("m") = 0, py::arg("dim") = 0,
      "The pruned weight (same dtype), or the reason it skips (a str).");
  m.def(
      "pack_bits",
      [](const py::array_t<uint8_t, py::array::c_style | py::array::forcecast>& v, int nbits) {
        std::vector<uint8_t> in(v.data(), v.data() + v.size());
        std::vector<uint8_t> out = compress::pack_bits(in, nbits);
        py::array_t<uint8_t> r(static_cast<py::ssize_t>(out.size()));
        if (!out.empty()) std::memcpy(r.mutable_data(), out.data(), out.size());
        return r;
      },
      py::arg("values"), py::arg("nbits"));
  m.def(
      "kmeans1d",
      [](const std::vector<double>& values, const std::vector<double>& weights, int k) {
        compress::KMeans1D r = compress::kmeans1d(values, weights, k);
        return py::make_tuple(r.centroids, std::vector<int>(r.cluster.begin(), r.cluster.end()));
      },
      py::arg("values"), py::arg("weights"), py::arg("k"));
}

}  // namespace milkit::py_bind
