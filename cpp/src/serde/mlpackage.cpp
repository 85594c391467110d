// .mlpackage writing (atomic) and reading (validated).
#include "milkit/serde/mlpackage.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>

#include "full_fsync.h"
#include "milkit/serde/blob.h"
#include "milkit/serde/proto_reader.h"
#include "milkit/serde/proto_writer.h"
#include "milkit/types/error.h"

namespace milkit {

namespace fs = std::filesystem;

namespace {

constexpr const char* kAuthor = "com.apple.CoreML";
constexpr const char* kModelDesc = "CoreML Model Specification";
constexpr const char* kWeightsDesc = "CoreML Model Weights";
constexpr size_t kMaxManifest = 16 << 20;

std::string errno_text() { return std::strerror(errno); }

void fsync_path(const fs::path& p, bool dir) {
  int fd = ::open(p.c_str(), (dir ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) throw IOError("cannot open '" + p.string() + "' to sync: " + errno_text());
  int rc = detail::full_fsync(fd);
  ::close(fd);
  if (rc != 0) throw IOError("cannot sync '" + p.string() + "': " + errno_text());
}

void write_file(const fs::path& p, const std::string& bytes, bool sync) {
  int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw IOError("cannot create '" + p.string() + "': " + errno_text());
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      std::string e = errno_text();
      ::close(fd);
      throw IOError("cannot write '" + p.string() + "': " + e);
    }
    done += static_cast<size_t>(w);
  }
  if (sync && detail::full_fsync(fd) != 0) {
    std::string e = errno_text();
    ::close(fd);
    throw IOError("cannot sync '" + p.string() + "': " + e);
  }
  if (::close(fd) != 0) throw IOError("cannot close '" + p.string() + "': " + errno_text());
}

std::string read_file(const fs::path& p, size_t limit, const char* what) {
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw IOError("cannot open " + std::string(what) + " '" + p.string() + "': " + errno_text());
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw FormatError(std::string(what) + " '" + p.string() + "' is not a regular file");
  }
  if (static_cast<uint64_t>(st.st_size) > limit) {
    ::close(fd);
    throw FormatError(std::string(what) + " '" + p.string() + "' is too large (" + std::to_string(st.st_size) + " bytes)");
  }
  std::string out(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < out.size()) {
    ssize_t r = ::read(fd, &out[done], out.size() - done);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      ::close(fd);
      throw IOError("cannot read '" + p.string() + "'");
    }
    done += static_cast<size_t>(r);
  }
  ::close(fd);
  return out;
}

std::string random_suffix() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* hex = "0123456789abcdef";
  std::string s;
  uint64_t v = rng();
  for (int i = 0; i < 12; ++i) s += hex[(v >> (4 * i)) & 15];
  return s;
}

// Whether `p` (canonical) lies inside `root` (canonical).
bool inside(const fs::path& root, const fs::path& p) {
  auto r = root.begin(), q = p.begin();
  for (; r != root.end(); ++r, ++q)
    if (q == p.end() || *r != *q) return false;
  return true;
}

}  // namespace

Target default_package_target(const Program& program) {
  int t = static_cast<int>(Target::iOS15);
  for (const auto& [_, f] : program.functions()) t = std::max(t, static_cast<int>(f->opset()));
  return static_cast<Target>(t);
}

std::string random_uuid() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  uint8_t b[16];
  uint64_t a = rng(), c = rng();
  std::memcpy(b, &a, 8);
  std::memcpy(b + 8, &c, 8);
  b[6] = static_cast<uint8_t>((b[6] & 0x0f) | 0x40);  // version 4
  b[8] = static_cast<uint8_t>((b[8] & 0x3f) | 0x80);  // RFC 4122 variant
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    s += hex[b[i] >> 4];
    s += hex[b[i] & 15];
  }
  return s;
}

std::string manifest_json(const std::string& model_id, const std::string& weights_id) {
  nlohmann::json j;
  j["fileFormatVersion"] = "1.0.0";
  j["itemInfoEntries"][weights_id] = {{"author", kAuthor},
                                      {"description", kWeightsDesc},
                                      {"name", "weights"},
                                      {"path", "com.apple.CoreML/weights"}};
  j["itemInfoEntries"][model_id] = {{"author", kAuthor},
                                    {"description", kModelDesc},
                                    {"name", "model.mlmodel"},
                                    {"path", "com.apple.CoreML/model.mlmodel"}};
  j["rootModelIdentifier"] = model_id;
  return j.dump(4) + "\n";
}

void write_mlpackage(const Program& program, const PackageOptions& options, const std::string& path) {
  if (path.empty()) throw IOError("empty package path");
  fs::path target = fs::absolute(fs::path(path)).lexically_normal();
  if (target.filename().empty()) target = target.parent_path();
  const fs::path parent = target.parent_path();
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec) throw IOError("cannot create directory '" + parent.string() + "': " + ec.message());
  const std::string base = target.filename().string();
  const fs::path tmp = parent / ("." + base + ".tmp-" + random_suffix());
  const Target tgt = options.target ? *options.target : default_package_target(program);

  try {
    const fs::path data = tmp / "Data" / kAuthor;
    const fs::path wdir = data / "weights";
    fs::create_directories(wdir, ec);
    if (ec) throw IOError("cannot create directory '" + wdir.string() + "': " + ec.message());
    std::unique_ptr<BlobWriter> blob;
    ProtoWriteOptions po;
    po.target = tgt;
    po.enumerated_shapes = options.enumerated_shapes;
    po.description = options.description;
    po.build_info = options.build_info;
    po.weights = [&]() -> BlobWriter& {
      if (!blob) blob = std::make_unique<BlobWriter>((wdir / "weight.bin").string());
      return *blob;
    };
    std::string bytes = write_model_proto(program, po);
    if (blob) blob->close(options.sync);
    write_file(data / "model.mlmodel", bytes, options.sync);
    write_file(tmp / "Manifest.json", manifest_json(random_uuid(), random_uuid()), options.sync);
    if (options.sync) {
      fsync_path(wdir, true);
      fsync_path(data, true);
      fsync_path(tmp / "Data", true);
      fsync_path(tmp, true);
    }
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }

  // swap into place
  fs::path old;
  if (fs::symlink_status(target, ec).type() != fs::file_type::not_found) {
    old = parent / ("." + base + ".old-" + random_suffix());
    if (::rename(target.c_str(), old.c_str()) != 0) {
      std::string e = errno_text();
      fs::remove_all(tmp, ec);
      throw IOError("cannot move the existing '" + target.string() + "' aside: " + e);
    }
  }
  if (::rename(tmp.c_str(), target.c_str()) != 0) {
    std::string e = errno_text();
    if (!old.empty()) ::rename(old.c_str(), target.c_str());
    fs::remove_all(tmp, ec);
    throw IOError("cannot rename the new package to '" + target.string() + "': " + e);
  }
  if (options.sync) {
    try {
      fsync_path(parent, true);
    } catch (const IOError&) {
      // the package is in place; a directory that cannot be synced is not an error
    }
  }
  if (!old.empty()) fs::remove_all(old, ec);
}

// ---- reading ---------------------------------------------------------------------------------

namespace {

[[noreturn]] void bad_manifest(const fs::path& m, const std::string& what) {
  throw FormatError("'" + m.string() + "': " + what);
}

struct Located {
  fs::path model;
  fs::path weights;  // may be empty
  fs::path root;     // canonical containment root
};

// Resolves Data/<rel> inside the package, rejecting escapes (.., absolute, symlinks out).
fs::path resolve_item(const fs::path& manifest, const fs::path& data_root, const std::string& rel) {
  if (rel.empty()) bad_manifest(manifest, "item with an empty path");
  fs::path r(rel);
  if (r.is_absolute() || r.has_root_name() || r.has_root_directory())
    bad_manifest(manifest, "item path '" + rel + "' is absolute");
  for (const auto& c : r)
    if (c == "..") bad_manifest(manifest, "item path '" + rel + "' leaves the package");
  if (rel.find('\0') != std::string::npos) bad_manifest(manifest, "item path contains a NUL byte");
  std::error_code ec;
  fs::path full = fs::canonical(data_root / r, ec);
  if (ec) bad_manifest(manifest, "item path 'Data/" + rel + "' does not exist");
  if (!inside(data_root, full)) bad_manifest(manifest, "item path '" + rel + "' resolves outside the package");
  return full;
}

Located locate(const std::string& path) {
  std::error_code ec;
  fs::path p(path);
  auto st = fs::status(p, ec);
  if (ec || st.type() == fs::file_type::not_found) throw IOError("no such model: '" + path + "'");
  Located loc;
  if (fs::is_regular_file(st)) {  // a bare model.mlmodel with its weights folder
    loc.model = fs::canonical(p, ec);
    if (ec) throw IOError("cannot resolve '" + path + "': " + ec.message());
    loc.root = loc.model.parent_path();
    fs::path w = loc.root / "weights";
    if (fs::is_directory(w, ec)) {
      fs::path cw = fs::canonical(w, ec);
      if (!ec && inside(loc.root, cw)) loc.weights = cw;
    }
    return loc;
  }
  if (!fs::is_directory(st)) throw IOError("'" + path + "' is neither a package directory nor a model file");
  fs::path root = fs::canonical(p, ec);
  if (ec) throw IOError("cannot resolve '" + path + "': " + ec.message());
  loc.root = root;
  fs::path mpath = root / "Manifest.json";
  if (!fs::exists(fs::symlink_status(mpath, ec)))
    throw FormatError("'" + path + "' is not an .mlpackage: Manifest.json is missing");
  {
    fs::path cm = fs::canonical(mpath, ec);
    if (ec || !inside(root, cm)) bad_manifest(mpath, "Manifest.json resolves outside the package");
  }
  std::string text = read_file(mpath, kMaxManifest, "manifest");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    bad_manifest(mpath, std::string("invalid JSON: ") + e.what());
  }
  if (!j.is_object()) bad_manifest(mpath, "not a JSON object");
  auto fv = j.find("fileFormatVersion");
  if (fv == j.end() || !fv->is_string()) bad_manifest(mpath, "missing fileFormatVersion");
  static const std::regex ver(R"(^(\d{1,9})\.(\d{1,9})\.(\d{1,9})$)");
  std::smatch m;
  const std::string vs = fv->get<std::string>();
  if (!std::regex_match(vs, m, ver)) bad_manifest(mpath, "fileFormatVersion '" + vs + "' is not major.minor.patch");
  long maj = std::stol(m[1]), min = std::stol(m[2]), pat = std::stol(m[3]);
  if (maj > 1 || (maj == 1 && (min > 0 || pat > 0)))
    bad_manifest(mpath, "fileFormatVersion " + vs + " is newer than the supported 1.0.0");
  auto items = j.find("itemInfoEntries");
  if (items == j.end() || !items->is_object()) bad_manifest(mpath, "missing itemInfoEntries");
  auto rootid = j.find("rootModelIdentifier");
  if (rootid == j.end() || !rootid->is_string()) bad_manifest(mpath, "missing rootModelIdentifier");
  fs::path data_root = fs::canonical(root / "Data", ec);
  if (ec) bad_manifest(mpath, "the package has no Data directory");
  if (!inside(root, data_root)) bad_manifest(mpath, "Data resolves outside the package");
  std::map<std::string, fs::path> resolved;
  fs::path weights_item;
  for (auto it = items->begin(); it != items->end(); ++it) {
    const auto& e = it.value();
    if (!e.is_object()) bad_manifest(mpath, "item '" + it.key() + "' is not an object");
    for (const char* k : {"path", "name", "author", "description"}) {
      auto f = e.find(k);
      if (f == e.end() || !f->is_string()) bad_manifest(mpath, "item '" + it.key() + "' has no string '" + k + "'");
    }
    fs::path full = resolve_item(mpath, data_root, e["path"].get<std::string>());
    resolved[it.key()] = full;
    if (e["name"].get<std::string>() == "weights" && e["author"].get<std::string>() == kAuthor)
      weights_item = full;
  }
  auto r = resolved.find(rootid->get<std::string>());
  if (r == resolved.end()) bad_manifest(mpath, "rootModelIdentifier '" + rootid->get<std::string>() + "' names no item");
  if (!fs::is_regular_file(r->second, ec)) bad_manifest(mpath, "the root model item is not a file");
  loc.model = r->second;
  if (!weights_item.empty()) {
    loc.weights = weights_item;
  } else {
    fs::path w = loc.model.parent_path() / "weights";
    if (fs::is_directory(w, ec)) {
      fs::path cw = fs::canonical(w, ec);
      if (!ec && inside(root, cw)) loc.weights = cw;
    }
  }
  return loc;
}

}  // namespace

namespace {

// Messages may quote names from a damaged file: keep them valid UTF-8 (Python decodes them).
std::string printable(const std::string& s) {
  std::string out;
  size_t i = 0;
  auto hex = [&](unsigned char c) {
    static const char* h = "0123456789abcdef";
    out += "\\x";
    out += h[c >> 4];
    out += h[c & 15];
  };
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    bool ok = n > 0 && i + n <= s.size();
    for (size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80;
    if (ok && n == 1 && c < 0x20 && c != '\n' && c != '\t') ok = false;
    if (!ok) {
      hex(c);
      ++i;
      continue;
    }
    out.append(s, i, n);
    i += n;
  }
  return out;
}

std::shared_ptr<Program> read_mlpackage_impl(const std::string& path,
                                             std::optional<Target> minimum_target);

}  // namespace

std::shared_ptr<Program> read_mlpackage(const std::string& path,
                                        std::optional<Target> minimum_target) {
  try {
    return read_mlpackage_impl(path, minimum_target);
  } catch (const FormatError& e) {
    throw FormatError(printable(e.what()));
  } catch (const IOError& e) {
    throw IOError(printable(e.what()));
  } catch (const fs::filesystem_error& e) {
    throw IOError(printable(e.what()));
  }
}

namespace {

std::shared_ptr<Program> read_mlpackage_impl(const std::string& path,
                                             std::optional<Target> minimum_target) {
  Located loc = locate(path);
  std::string bytes = read_file(loc.model, size_t{1} << 31, "model");
  std::map<std::string, std::shared_ptr<BlobReader>> readers;
  BlobResolver resolver = [&](const std::string& file_name) -> std::shared_ptr<BlobReader> {
    std::string base = file_name.substr(file_name.find_last_of('/') == std::string::npos ? 0 : file_name.find_last_of('/') + 1);
    if (base.empty() || base == "." || base == ".." || base.find('\0') != std::string::npos)
      throw FormatError(loc.model.string() + ": invalid blob file name '" + file_name + "'");
    if (auto it = readers.find(base); it != readers.end()) return it->second;
    if (loc.weights.empty())
      throw FormatError(loc.model.string() + ": blob value '" + file_name + "' but the package has no weights directory");
    std::error_code ec;
    fs::path f = fs::canonical(loc.weights / base, ec);
    if (ec) throw FormatError(loc.model.string() + ": weight file '" + (loc.weights / base).string() + "' does not exist");
    if (!inside(loc.root, f)) throw FormatError(loc.model.string() + ": weight file '" + base + "' resolves outside the package");
    auto r = BlobReader::open(f.string());
    readers[base] = r;
    return r;
  };
  return read_model_proto(bytes, resolver, loc.model.string(), minimum_target);
}

}  // namespace

}  // namespace milkit
