// ONNX tensors to milkit values: element types, raw / typed / external data, narrowing.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "converter.h"
#include "milkit/types/error.h"

namespace milkit {
namespace onnx_detail {

namespace fs = std::filesystem;
using onnx::TensorProto;

std::optional<DataType> mil_dtype(int t) {
  switch (t) {
    case TensorProto::FLOAT:
    case TensorProto::DOUBLE:
    case TensorProto::BFLOAT16:
    case TensorProto::FLOAT8E4M3FN:
    case TensorProto::FLOAT8E4M3FNUZ:
    case TensorProto::FLOAT8E5M2:
    case TensorProto::FLOAT8E5M2FNUZ:
    case TensorProto::FLOAT4E2M1:
    case kFloat8E8M0:
      return DataType::Float32;
    case TensorProto::INT4:
    case TensorProto::UINT4:
    case kInt2:
    case kUInt2:
    case TensorProto::FLOAT16:
      return DataType::Float16;
    case TensorProto::BOOL:
      return DataType::Bool;
    case TensorProto::INT8:
    case TensorProto::UINT8:
    case TensorProto::INT16:
    case TensorProto::UINT16:
    case TensorProto::INT32:
    case TensorProto::UINT32:
    case TensorProto::INT64:
    case TensorProto::UINT64:
      return DataType::Int32;
    default:
      return std::nullopt;
  }
}

std::string onnx_type_name(int t) {
  static const char* names[] = {
      "UNDEFINED",      "FLOAT",    "UINT8",        "INT8",           "UINT16",
      "INT16",          "INT32",    "INT64",        "STRING",         "BOOL",
      "FLOAT16",        "DOUBLE",   "UINT32",       "UINT64",         "COMPLEX64",
      "COMPLEX128",     "BFLOAT16", "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2",
      "FLOAT8E5M2FNUZ", "UINT4",    "INT4",         "FLOAT4E2M1",     "FLOAT8E8M0",
      "UINT2",          "INT2"};
  if (t >= 0 && t < static_cast<int>(sizeof(names) / sizeof(names[0]))) return names[t];
  return "type " + std::to_string(t);
}

namespace {

// The milkit dtype holding an ONNX element type exactly (before narrowing).
std::optional<DataType> exact_dtype(int t) {
  switch (t) {
    case TensorProto::FLOAT:
      return DataType::Float32;
    case TensorProto::DOUBLE:
      return DataType::Float64;
    case TensorProto::FLOAT16:
      return DataType::Float16;
    case TensorProto::BFLOAT16:
      return DataType::BFloat16;
    case TensorProto::BOOL:
      return DataType::Bool;
    case TensorProto::INT8:
      return DataType::Int8;
    case TensorProto::UINT8:
      return DataType::UInt8;
    case TensorProto::INT16:
      return DataType::Int16;
    case TensorProto::UINT16:
      return DataType::UInt16;
    case TensorProto::INT32:
      return DataType::Int32;
    case TensorProto::UINT32:
      return DataType::UInt32;
    case TensorProto::INT64:
      return DataType::Int64;
    case TensorProto::UINT64:
      return DataType::UInt64;
    default:
      return std::nullopt;
  }
}

struct Mapping {
  void* addr = nullptr;
  size_t len = 0;
  ~Mapping() {
    if (addr) ::munmap(addr, len);
  }
};

// Maps an external data file, checking that it stays inside the model's folder.
struct Mapped {
  const uint8_t* data;
  size_t size;
  std::shared_ptr<const void> owner;
};

Mapped map_external(ExternalData& ext, const std::string& location, const std::string& what) {
  if (location.empty()) throw FormatError(what + ": external data without a 'location'");
  fs::path rel(location);
  if (rel.is_absolute())
    throw FormatError(what + ": external data location '" + location + "' is an absolute path");
  for (const fs::path& part : rel)  // const: libc++'s path::iterator yields paths by value
    if (part == "..")
      throw FormatError(what + ": external data location '" + location +
                        "' leaves the model's folder");
  if (ext.base_dir.empty())
    throw FormatError(what + ": external data '" + location +
                      "' needs the model's folder (convert the .onnx file by path, not as bytes)");
  std::error_code ec;
  fs::path base = fs::weakly_canonical(fs::path(ext.base_dir), ec);
  fs::path full = fs::weakly_canonical(fs::path(ext.base_dir) / rel, ec);
  if (ec)
    throw IOError(what + ": cannot resolve external data '" + location + "': " + ec.message());
  auto b = base.string(), f = full.string();
  if (f.size() <= b.size() || f.compare(0, b.size(), b) != 0 ||
      (b.back() != '/' && f[b.size()] != '/'))
    throw FormatError(what + ": external data location '" + location +
                      "' leaves the model's folder");
  auto it = ext.maps.find(f);
  if (it == ext.maps.end()) {
    int fd = ::open(f.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      throw IOError(what + ": cannot open external data file '" + f + "': " + std::strerror(errno));
    struct stat st;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      throw FormatError(what + ": external data '" + f + "' is not a regular file");
    }
    auto m = std::make_shared<Mapping>();
    m->len = static_cast<size_t>(st.st_size);
    if (m->len) {
      void* a = ::mmap(nullptr, m->len, PROT_READ, MAP_PRIVATE, fd, 0);
      if (a == MAP_FAILED) {
        ::close(fd);
        throw IOError(what + ": cannot map external data file '" + f +
                      "': " + std::strerror(errno));
      }
      m->addr = a;
    }
    ::close(fd);
    it = ext.maps.emplace(f, m).first;
    ext.sizes[f] = m->len;
  }
  auto* m = static_cast<const Mapping*>(it->second.get());
  return {static_cast<const uint8_t*>(m->addr), m->len, it->second};
}

template <class T>
std::shared_ptr<const Buffer> pack(const T* src, int64_t n, DataType dt) {
  std::vector<uint8_t> out(static_cast<size_t>(n) * dtype_storage_bytes(dt));
  if (dtype_storage_bytes(dt) == sizeof(T)) {
    if (n) std::memcpy(out.data(), src, out.size());
  } else {
    // narrower storage (int32_data holding int8/int16/bool/fp16 bits)
    for (int64_t i = 0; i < n; ++i) {
      switch (dtype_storage_bytes(dt)) {
        case 1:
          out[i] = static_cast<uint8_t>(src[i]);
          break;
        case 2: {
          uint16_t v = static_cast<uint16_t>(src[i]);
          std::memcpy(&out[2 * i], &v, 2);
          break;
        }
        case 4: {
          uint32_t v = static_cast<uint32_t>(src[i]);
          std::memcpy(&out[4 * i], &v, 4);
          break;
        }
        default: {
          uint64_t v = static_cast<uint64_t>(src[i]);
          std::memcpy(&out[8 * i], &v, 8);
        }
      }
    }
  }
  return Buffer::take(std::move(out));
}

}  // namespace

Value decode_tensor(const TensorProto& t, ExternalData& ext,
                    const std::shared_ptr<const void>& keep, const std::string& what) {
  std::vector<int64_t> shape(t.dims().begin(), t.dims().end());
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      throw FormatError(what + ": negative dimension " + std::to_string(d) + " in its shape");
    if (d != 0 && n > (int64_t(1) << 40) / d)
      throw FormatError(what + ": shape has more than 2^40 elements");
    n *= d;
  }
  int et = t.data_type();
  if (et == TensorProto::STRING) {
    if (t.string_data_size() != n)
      throw FormatError(what + ": holds " + std::to_string(t.string_data_size()) +
                        " strings, its shape needs " + std::to_string(n));
    return Value::strings(shape,
                          std::vector<std::string>(t.string_data().begin(), t.string_data().end()));
  }
  if (auto v = decode_narrow(t, shape, n, what)) return std::move(*v);
  auto dt = exact_dtype(et);
  if (!dt)
    throw ValueError(what + ": element type " + onnx_type_name(et) + " is not supported by milkit");
  size_t esz = static_cast<size_t>(dtype_storage_bytes(*dt));
  size_t need = static_cast<size_t>(n) * esz;
  auto check_size = [&](size_t have, const char* where) {
    if (have != need)
      throw FormatError(what + ": " + where + " holds " + std::to_string(have) +
                        " bytes, its shape (" + std::to_string(n) + " x " + onnx_type_name(et) +
                        ") needs " + std::to_string(need));
  };
  if (t.data_location() == TensorProto::EXTERNAL) {
    std::string location;
    int64_t offset = 0, length = -1;
    for (auto& kv : t.external_data()) {
      try {
        if (kv.key() == "location")
          location = kv.value();
        else if (kv.key() == "offset")
          offset = std::stoll(kv.value());
        else if (kv.key() == "length")
          length = std::stoll(kv.value());
      } catch (const std::exception&) {
        throw FormatError(what + ": external data '" + kv.key() + "' is not a number: '" +
                          kv.value() + "'");
      }
    }
    auto [base, size, owner] = map_external(ext, location, what);
    if (offset < 0 || static_cast<size_t>(offset) > size)
      throw FormatError(what + ": external data offset " + std::to_string(offset) +
                        " is past the end of '" + location + "' (" + std::to_string(size) +
                        " bytes)");
    size_t avail = size - static_cast<size_t>(offset);
    size_t len = length < 0 ? need : static_cast<size_t>(length);
    if (len > avail)
      throw FormatError(what + ": external data in '" + location + "' needs " +
                        std::to_string(len) + " bytes at offset " + std::to_string(offset) +
                        ", the file has " + std::to_string(avail));
    check_size(len, "its external data");
    return Value(*dt, shape, Buffer::borrow(base + offset, need, owner));
  }
  if (t.has_raw_data()) {
    check_size(t.raw_data().size(), "raw_data");
    return Value(*dt, shape, Buffer::borrow(t.raw_data().data(), need, keep));
  }
  auto typed_count = [&](int have, const char* field) {
    if (have != n)
      throw FormatError(what + ": " + field + " holds " + std::to_string(have) +
                        " values, its shape needs " + std::to_string(n));
  };
  switch (et) {
    case TensorProto::FLOAT:
      typed_count(t.float_data_size(), "float_data");
      return Value(*dt, shape, pack(t.float_data().data(), n, *dt));
    case TensorProto::DOUBLE:
      typed_count(t.double_data_size(), "double_data");
      return Value(*dt, shape, pack(t.double_data().data(), n, *dt));
    case TensorProto::INT64:
      typed_count(t.int64_data_size(), "int64_data");
      return Value(*dt, shape, pack(t.int64_data().data(), n, *dt));
    case TensorProto::UINT32:
    case TensorProto::UINT64:
      typed_count(t.uint64_data_size(), "uint64_data");
      return Value(*dt, shape, pack(t.uint64_data().data(), n, *dt));
    default:
      typed_count(t.int32_data_size(), "int32_data");
      return Value(*dt, shape, pack(t.int32_data().data(), n, *dt));
  }
}

Value narrow(const Value& v, const std::string& what) {
  switch (v.dtype()) {
    case DataType::Float64:
    case DataType::BFloat16:
      return v.cast(DataType::Float32);
    case DataType::Int64:
    case DataType::UInt64:
    case DataType::UInt32: {
      auto ints = v.to_ints();
      for (size_t i = 0; i < ints.size(); ++i) {
        bool bad = v.dtype() == DataType::UInt64
                       ? static_cast<uint64_t>(ints[i]) > uint64_t(INT32_MAX)
                       : (ints[i] < INT32_MIN || ints[i] > INT32_MAX);
        if (bad)
          throw ValueError(what + ": element " + std::to_string(i) + " (" +
                           std::to_string(ints[i]) +
                           ") does not fit in int32, which Core ML computes integers in");
      }
      return v.cast(DataType::Int32);
    }
    case DataType::Int8:
    case DataType::UInt8:
    case DataType::Int16:
    case DataType::UInt16:
      return v.cast(DataType::Int32);
    default:
      return v;
  }
}

}  // namespace onnx_detail
}  // namespace milkit
