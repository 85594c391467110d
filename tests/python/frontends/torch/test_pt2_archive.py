"""The .pt2 archive reader (torch.export.save): program JSON, weights and lifted constants.

Archives are made with torch.export.save on small modules; bad archives are derived from them by
cutting the file or rewriting its zip with Python's zipfile.
"""

import json
import os
import random
import struct
import zipfile

import milkit
import numpy as np
import pytest
import torch
from milkit import _core

pytestmark = pytest.mark.filterwarnings("ignore:No complete tensor found")


class MLP(torch.nn.Module):
    """Two linears, an int64 buffer, a fp32 buffer and a lifted constant (plain tensor attribute)."""

    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(6, 8)
        self.l2 = torch.nn.Linear(8, 3)
        self.register_buffer("steps", torch.arange(3, dtype=torch.int64) * 7)
        self.register_buffer("scale", torch.rand(3))
        self.offset = torch.tensor([0.5, -1.0, 2.0])

    def forward(self, x):
        h = torch.relu(self.l1(x))
        return self.l2(h) * self.scale + self.offset + self.steps


def save(model, args, path):
    model.eval()
    ep = torch.export.export(model, args)
    torch.export.save(ep, str(path))
    return ep


def bits(t):
    """A tensor's bytes in numpy, bf16 as uint16 bits (as the binding gives it)."""
    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


def assert_same_bits(got, t):
    want = bits(t)
    got = np.asarray(got)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.tobytes() == want.tobytes()


@pytest.fixture
def mlp_pt2(tmp_path):
    torch.manual_seed(0)
    path = tmp_path / "mlp.pt2"
    ep = save(MLP(), (torch.randn(2, 6),), path)
    return path, ep


def test_round_trip_mlp(mlp_pt2):
    path, ep = mlp_pt2
    d = _core.read_pt2_archive(str(path))
    assert d["model_name"] == "model"
    assert d["source"] == str(path)
    assert set(d["weights"]) == set(ep.state_dict) == {"l1.weight", "l1.bias", "l2.weight", "l2.bias", "steps", "scale"}
    for fqn, t in ep.state_dict.items():
        assert_same_bits(d["weights"][fqn], t)
    assert set(d["constants"]) == set(ep.constants) == {"offset"}
    assert_same_bits(d["constants"]["offset"], ep.constants["offset"])
    assert d["is_param"] == {"l1.weight": True, "l1.bias": True, "l2.weight": True, "l2.bias": True,
                             "steps": False, "scale": False, "offset": False}
    assert d["dtype"]["steps"] == "int64" and d["dtype"]["l1.weight"] == "fp32"
    # model_json is the entry's text, a program of schema 8
    with zipfile.ZipFile(path) as z:
        name = next(n for n in z.namelist() if n.endswith("/models/model.json"))
        assert d["model_json"] == z.read(name).decode()
    program = json.loads(d["model_json"])
    assert program["schema_version"]["major"] == 8
    specs = program["graph_module"]["signature"]["input_specs"]
    assert any("parameter" in s and s["parameter"]["parameter_name"] == "l1.weight" for s in specs)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_models_keep_their_dtype(tmp_path, dtype):
    torch.manual_seed(1)
    model = MLP().to(dtype)
    path = tmp_path / "half.pt2"
    ep = save(model, (torch.randn(2, 6, dtype=dtype),), path)
    d = _core.read_pt2_archive(str(path))
    name = {torch.float16: "fp16", torch.bfloat16: "bf16"}[dtype]
    for fqn, t in ep.state_dict.items():
        assert_same_bits(d["weights"][fqn], t)
        assert d["dtype"][fqn] == (name if t.is_floating_point() else "int64")
    assert d["borrowed"]["l1.weight"]


class Buffers(torch.nn.Module):
    """Buffers of every integer / bool dtype, a fp64 scalar, a complex-free zoo."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(3)
        self.register_buffer("i8", torch.randint(-128, 127, (2, 3), dtype=torch.int8, generator=g))
        self.register_buffer("u8", torch.randint(0, 255, (5,), dtype=torch.uint8, generator=g))
        self.register_buffer("i16", torch.randint(-3000, 3000, (4,), dtype=torch.int16, generator=g))
        self.register_buffer("i32", torch.randint(-10**6, 10**6, (2, 2), dtype=torch.int32, generator=g))
        self.register_buffer("i64", torch.tensor([-(2**40), 5, 2**50]))
        self.register_buffer("b", torch.tensor([True, False, True]))
        self.register_buffer("f64", torch.tensor([[1.0 / 3, 1e300, -2.5]], dtype=torch.float64))
        self.register_buffer("s", torch.tensor(3.25))  # 0-d

    def forward(self, x):
        acc = x + self.s
        for t in (self.i8, self.u8, self.i16, self.i32, self.i64, self.b, self.f64):
            acc = acc + t.sum().to(x.dtype)
        return acc


def test_dtypes_and_scalar(tmp_path):
    path = tmp_path / "buffers.pt2"
    ep = save(Buffers(), (torch.randn(2),), path)
    d = _core.read_pt2_archive(str(path))
    w = d["weights"]
    for fqn in ("i8", "u8", "i16", "i32", "i64", "b", "s"):
        assert_same_bits(w[fqn], ep.state_dict[fqn])
    assert d["dtype"] == {"i8": "int8", "u8": "uint8", "i16": "int16", "i32": "int32", "i64": "int64",
                          "b": "bool", "f64": "fp32", "s": "fp32"}
    # fp64 is narrowed to fp32 (MIL has no fp64 weights): 1e300 becomes inf, as numpy casts it
    with np.errstate(over="ignore"):
        want = ep.state_dict["f64"].numpy().astype(np.float32)
    np.testing.assert_array_equal(w["f64"], want)
    assert not d["borrowed"]["f64"]
    assert np.asarray(w["s"]).shape == () and float(w["s"]) == 3.25


class Strided(torch.nn.Module):
    """A transposed parameter, a parameter over a slice of a bigger storage, tied linears."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(2)
        self.t = torch.nn.Parameter(torch.randn(4, 3).t())
        self.p = torch.nn.Parameter(torch.randn(10)[2:6])
        self.a = torch.nn.Linear(4, 4)
        self.b = torch.nn.Linear(4, 4)
        self.b.weight = self.a.weight

    def forward(self, x):
        return self.b(self.a(x @ self.t)) + self.p


def test_strides_storage_offset_and_tied_weights(tmp_path):
    path = tmp_path / "strided.pt2"
    ep = save(Strided(), (torch.randn(2, 3),), path)
    with zipfile.ZipFile(path) as z:
        cfg = json.loads(z.read(next(n for n in z.namelist() if n.endswith("model_weights_config.json"))))["config"]
    # what torch wrote: the transposed parameter strided, the slice at an offset of its storage
    assert [s["as_int"] for s in cfg["t"]["tensor_meta"]["strides"]] == [1, 3]
    assert cfg["p"]["tensor_meta"]["storage_offset"]["as_int"] == 2
    assert cfg["a.weight"]["path_name"] == cfg["b.weight"]["path_name"]
    d = _core.read_pt2_archive(str(path))
    for fqn, t in ep.state_dict.items():
        assert_same_bits(d["weights"][fqn], t)
    assert not d["borrowed"]["t"]  # gathered into a contiguous copy
    assert d["borrowed"]["p"]  # contiguous at an offset: still zero-copy
    # tied weights: one entry, one memory
    wa, wb = d["weights"]["a.weight"], d["weights"]["b.weight"]
    assert wa.__array_interface__["data"][0] == wb.__array_interface__["data"][0]


def mapped_ranges(path):
    """(start, end) of this process's mappings of `path`."""
    real = os.path.realpath(path)
    out = []
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(None, 5)
            if len(parts) == 6 and parts[5].strip() == real:
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                out.append((lo, hi))
    return out


def test_weights_borrow_the_file_mapping(mlp_pt2):
    path, ep = mlp_pt2
    d = _core.read_pt2_archive(str(path))
    ranges = mapped_ranges(path)
    assert ranges, "the archive is not mapped while its arrays live"
    with zipfile.ZipFile(path) as z:
        cfg = json.loads(z.read(next(n for n in z.namelist() if n.endswith("model_weights_config.json"))))["config"]
        infos = {i.filename.split("/data/weights/")[-1]: i for i in z.infolist()}
    raw = path.read_bytes()
    lo = ranges[0][0]
    for fqn, a in d["weights"].items():
        assert d["borrowed"][fqn]
        assert not a.flags.owndata and not a.flags.writeable
        addr = a.__array_interface__["data"][0]
        assert any(s <= addr and addr + a.nbytes <= e for s, e in ranges), fqn
        # the bytes sit where the zip's local header says the entry's data starts
        info = infos[cfg[fqn]["path_name"]]
        n, extra = struct.unpack("<HH", raw[info.header_offset + 26:info.header_offset + 30])
        assert addr - lo == info.header_offset + 30 + n + extra, fqn
    del d, a
    import gc

    gc.collect()
    assert not mapped_ranges(path), "the mapping outlives every array"


# ---- bad archives ---------------------------------------------------------------------------------


def rewrite(src, dst, edit=lambda name, data: data, compression=zipfile.ZIP_STORED):
    """Copies the zip `src` to `dst`, entry by entry through edit(name, bytes) (None drops it)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", compression) as zout:
        for info in zin.infolist():
            data = edit(info.filename, zin.read(info.filename))
            if data is not None:
                zout.writestr(info.filename, data)
    return dst


def edit_json(suffix, fn):
    def edit(name, data):
        if name.endswith(suffix):
            j = json.loads(data)
            fn(j)
            return json.dumps(j).encode()
        return data

    return edit


def raises(path, exc=milkit.FormatError, *words):
    with pytest.raises(exc) as ei:
        _core.read_pt2_archive(str(path))
    msg = str(ei.value)
    assert str(path) in msg, msg
    for w in words:
        assert w in msg, (w, msg)
    return ei.value


def test_truncated_files(mlp_pt2, tmp_path):
    path, _ = mlp_pt2
    raw = path.read_bytes()
    with zipfile.ZipFile(path) as z:
        infos = z.infolist()
        first_cd = z.start_dir  # the central directory (torch's sample inputs hold a zip of their own)
    cd_start = raw.rfind(b"PK\x01\x02")  # the last central directory record
    eocd = raw.rfind(b"PK\x05\x06")
    assert raw[first_cd:first_cd + 4] == b"PK\x01\x02"
    assert 0 < first_cd < cd_start < eocd
    cuts = {0, 1, 4, 22, 30, 100, first_cd, first_cd + 10, cd_start + 20, eocd, eocd + 10, len(raw) - 1}
    cuts |= set(range(eocd - 44, len(raw)))  # the zip64 records and the plain end record
    for i in infos:  # inside each entry's header and data
        cuts |= {i.header_offset + 10, i.header_offset + 64 + i.file_size // 2}
    cuts = sorted(c for c in cuts if c < len(raw))
    assert len(cuts) > 20
    for n in cuts:
        bad = tmp_path / f"cut_{n}.pt2"
        bad.write_bytes(raw[:n])
        raises(bad)


def test_random_bytes(tmp_path):
    rng = random.Random(7)
    for i, size in enumerate([1, 21, 22, 64, 4096, 70000]):
        bad = tmp_path / f"random_{i}.pt2"
        bad.write_bytes(bytes(rng.randrange(256) for _ in range(size)))
        raises(bad, milkit.FormatError, "not a zip")
    empty = tmp_path / "empty.pt2"
    empty.write_bytes(b"")
    raises(empty, milkit.FormatError, "empty")


def test_mutated_bytes_never_crash(mlp_pt2, tmp_path):
    """Single-byte damage anywhere: a clean result or milkit's ValueError/FormatError, never worse."""
    path, _ = mlp_pt2
    raw = bytearray(path.read_bytes())
    rng = random.Random(11)
    eocd = raw.rfind(b"PK\x05\x06")
    with zipfile.ZipFile(path) as z:
        first_cd = z.start_dir
    positions = [rng.randrange(len(raw)) for _ in range(120)] + list(range(first_cd, first_cd + 46)) + list(
        range(eocd, len(raw)))
    bad = tmp_path / "mutated.pt2"
    failures = 0
    for k, pos in enumerate(positions):
        b = bytearray(raw)
        b[pos] ^= 0xFF if k % 2 else rng.randrange(1, 256)
        bad.write_bytes(bytes(b))
        try:
            _core.read_pt2_archive(str(bad))
        except ValueError as e:  # FormatError, or ValueError for what damage made unsupported
            assert isinstance(e, milkit.MilkitValueError), type(e)
            assert str(bad) in str(e)
            failures += 1
    assert failures > 40  # the central directory and end records are all checked


def test_zip_without_model_json(mlp_pt2, tmp_path):
    path, _ = mlp_pt2
    bad = rewrite(path, tmp_path / "nomodel.pt2", lambda n, d: None if n.endswith("models/model.json") else d)
    raises(bad, milkit.FormatError, "models/<name>.json")


def test_not_a_pt2_zip(tmp_path):
    bad = tmp_path / "other.zip"
    with zipfile.ZipFile(bad, "w") as z:
        z.writestr("archive/data.pkl", b"\x80\x02.")
        z.writestr("archive/version", b"3")
    raises(bad, milkit.FormatError, "archive/archive_format")
    flat = tmp_path / "flat.zip"
    with zipfile.ZipFile(flat, "w") as z:
        z.writestr("archive_format", b"pt2")
    raises(flat, milkit.FormatError, "not inside a folder")


def test_archive_format_not_pt2(mlp_pt2, tmp_path):
    path, _ = mlp_pt2
    bad = rewrite(path, tmp_path / "fmt.pt2", lambda n, d: b"pt3" if n.endswith("/archive_format") else d)
    raises(bad, milkit.FormatError, "archive_format", "'pt3'")


def test_corrupted_model_json(mlp_pt2, tmp_path):
    path, _ = mlp_pt2
    bad = rewrite(path, tmp_path / "json.pt2", lambda n, d: d[: len(d) // 2] if n.endswith("models/model.json") else d)
    raises(bad, milkit.FormatError, "models/model.json", "not valid JSON")
    # damage inside graph_module (which the reader does not build) is still found
    bad = rewrite(path, tmp_path / "json2.pt2",
                  lambda n, d: d.replace(b'"nodes": [', b'"nodes": [,', 1) if n.endswith("models/model.json") else d)
    raises(bad, milkit.FormatError, "models/model.json", "not valid JSON")
    bad = rewrite(path, tmp_path / "cfg.pt2", lambda n, d: b"{\"config\": [" if n.endswith("weights_config.json") else d)
    raises(bad, milkit.FormatError, "model_weights_config.json", "not valid JSON")
    bad = rewrite(path, tmp_path / "cfg2.pt2", lambda n, d: b"{\"conf\": {}}" if n.endswith("constants_config.json") else d)
    raises(bad, milkit.FormatError, "model_constants_config.json", "'config'")
    bad = rewrite(path, tmp_path / "nocfg.pt2", lambda n, d: None if n.endswith("weights_config.json") else d)
    raises(bad, milkit.FormatError, "model_weights_config.json")


def test_unsupported_schema_major(mlp_pt2, tmp_path):
    path, _ = mlp_pt2

    def bump(j):
        j["schema_version"]["major"] = 9
        j["schema_version"]["minor"] = 1

    bad = rewrite(path, tmp_path / "schema.pt2", edit_json("models/model.json", bump))
    raises(bad, milkit.FormatError, "schema version 9.1 is not supported (milkit reads 8.x)")
    bad = rewrite(path, tmp_path / "noschema.pt2", edit_json("models/model.json", lambda j: j.pop("schema_version")))
    raises(bad, milkit.FormatError, "models/model.json", "schema_version")


def test_config_points_at_missing_entry(mlp_pt2, tmp_path):
    path, _ = mlp_pt2
    with zipfile.ZipFile(path) as z:
        cfg = json.loads(z.read(next(n for n in z.namelist() if n.endswith("model_weights_config.json"))))["config"]
    entry = cfg["l2.weight"]["path_name"]
    bad = rewrite(path, tmp_path / "missing.pt2", lambda n, d: None if n.endswith("/data/weights/" + entry) else d)
    raises(bad, milkit.FormatError, "weight 'l2.weight'", f"data/weights/{entry}", "not in the archive")

    def renamed(j):
        j["config"]["offset"]["path_name"] = "tensor_99"

    bad = rewrite(path, tmp_path / "renamed.pt2", edit_json("model_constants_config.json", renamed))
    raises(bad, milkit.FormatError, "constant 'offset'", "data/constants/tensor_99")


def test_weight_shorter_than_declared(mlp_pt2, tmp_path):
    path, _ = mlp_pt2
    with zipfile.ZipFile(path) as z:
        cfg = json.loads(z.read(next(n for n in z.namelist() if n.endswith("model_weights_config.json"))))["config"]
    entry = cfg["l1.weight"]["path_name"]  # 8 x 6 fp32 = 192 bytes
    bad = rewrite(path, tmp_path / "short.pt2", lambda n, d: d[:-4] if n.endswith("/data/weights/" + entry) else d)
    raises(bad, milkit.FormatError, "weight 'l1.weight'", f"data/weights/{entry}", "is 188 bytes, its shape needs 192")

    # a storage offset or stride that reaches past the entry
    def offset(j):
        j["config"]["l1.bias"]["tensor_meta"]["storage_offset"] = {"as_int": 5}

    bad = rewrite(path, tmp_path / "offset.pt2", edit_json("model_weights_config.json", offset))
    raises(bad, milkit.FormatError, "weight 'l1.bias'", "is 32 bytes, its shape needs 52")

    def huge(j):
        j["config"]["l1.bias"]["tensor_meta"]["sizes"] = [{"as_int": 2**40}, {"as_int": 2**40}]
        j["config"]["l1.bias"]["tensor_meta"]["strides"] = [{"as_int": 2**40}, {"as_int": 1}]

    bad = rewrite(path, tmp_path / "huge.pt2", edit_json("model_weights_config.json", huge))
    raises(bad, milkit.FormatError, "weight 'l1.bias'")


def test_central_directory_size_past_the_end(mlp_pt2, tmp_path):
    """An entry the central directory makes longer than the file is refused, not read past the end."""
    path, _ = mlp_pt2
    raw = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as z:
        cfg = json.loads(z.read(next(n for n in z.namelist() if n.endswith("model_weights_config.json"))))["config"]
        pos = z.start_dir
    entry = cfg["l1.weight"]["path_name"]
    while True:  # walk the central directory records to the entry's
        n, m, k = struct.unpack("<HHH", raw[pos + 28:pos + 34])
        if raw[pos + 46:pos + 46 + n].decode().endswith("/data/weights/" + entry):
            break
        pos += 46 + n + m + k
    raw[pos + 20:pos + 28] = struct.pack("<II", 10**9, 10**9)  # compressed, uncompressed size
    bad = tmp_path / "cdsize.pt2"
    bad.write_bytes(bytes(raw))
    raises(bad, milkit.FormatError, f"data/weights/{entry}", "past the end")


def test_symbolic_size_in_a_weight(mlp_pt2, tmp_path):
    path, _ = mlp_pt2

    def sym(j):
        j["config"]["l1.bias"]["tensor_meta"]["sizes"][0] = {"as_expr": {"expr_str": "s0", "hint": None}}

    bad = rewrite(path, tmp_path / "sym.pt2", edit_json("model_weights_config.json", sym))
    raises(bad, milkit.FormatError, "weight 'l1.bias'", "symbolic (s0)")


def test_pickled_entry_is_unsupported(mlp_pt2, tmp_path):
    path, _ = mlp_pt2

    def pickled(j):
        j["config"]["scale"]["use_pickle"] = True

    bad = rewrite(path, tmp_path / "pickle.pt2", edit_json("model_weights_config.json", pickled))
    e = raises(bad, ValueError, "weight 'scale'", "pickler")
    assert not isinstance(e, milkit.FormatError)  # well-formed, just not something milkit reads


class Complex(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("z", torch.randn(3, dtype=torch.complex64))

    def forward(self, x):
        return x + torch.view_as_real(self.z).sum()


def test_unsupported_dtype(tmp_path):
    path = tmp_path / "complex.pt2"
    save(Complex(), (torch.randn(2),), path)
    e = raises(path, ValueError, "weight 'z'", "dtype COMPLEXFLOAT is not supported")
    assert not isinstance(e, milkit.FormatError)


def test_deflated_entries_are_inflated(mlp_pt2, tmp_path):
    path, ep = mlp_pt2
    packed = rewrite(path, tmp_path / "deflated.pt2", compression=zipfile.ZIP_DEFLATED)
    with zipfile.ZipFile(packed) as z:
        assert all(i.compress_type == zipfile.ZIP_DEFLATED for i in z.infolist())
    d = _core.read_pt2_archive(str(packed))
    for fqn, t in ep.state_dict.items():
        assert_same_bits(d["weights"][fqn], t)
        assert d["borrowed"][fqn]  # over the inflated entry, which the buffer keeps alive
    assert not mapped_ranges(packed) or all(
        not (s <= d["weights"]["l1.weight"].__array_interface__["data"][0] < e) for s, e in mapped_ranges(packed))
    # damage inside a compressed weight: inflate fails or the CRC does not match
    raw = bytearray(packed.read_bytes())
    with zipfile.ZipFile(packed) as z:
        info = next(i for i in z.infolist() if i.filename.endswith("/data/weights/weight_0"))
    start = info.header_offset + 30 + len(info.filename)
    raw[start + info.compress_size // 2] ^= 0x55
    bad = tmp_path / "deflated_bad.pt2"
    bad.write_bytes(bytes(raw))
    raises(bad, milkit.FormatError, info.filename)


def test_unreadable_file(tmp_path):
    with pytest.raises(milkit.MilkitIOError):
        _core.read_pt2_archive(str(tmp_path / "nope.pt2"))
    with pytest.raises(milkit.MilkitIOError):
        _core.read_pt2_archive(str(tmp_path))


def zip64_records(path):
    """(entries whose central record keeps a size or offset in a zip64 extra field, whether the
    archive ends with a zip64 end of central directory record)."""
    raw = path.read_bytes()
    n, p = 0, raw.find(b"PK\x01\x02")
    while p >= 0:
        csize, usize = struct.unpack_from("<II", raw, p + 20)
        offset = struct.unpack_from("<I", raw, p + 42)[0]
        n += 0xFFFFFFFF in (csize, usize, offset)
        p = raw.find(b"PK\x01\x02", p + 4)
    return n, b"PK\x06\x06" in raw[-200:]


@pytest.mark.parametrize("compression", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
def test_zip64_records(mlp_pt2, tmp_path, monkeypatch, compression):
    # Archives past 4 GiB keep sizes and offsets in zip64 extra fields (central directory and
    # local headers) and end with a zip64 end record. zipfile writes them for any size once its
    # limit is lowered to zero: every record then takes its zip64 form.
    path, ep = mlp_pt2
    monkeypatch.setattr(zipfile, "ZIP64_LIMIT", 0)
    big = tmp_path / "zip64.pt2"
    with zipfile.ZipFile(path) as zin, zipfile.ZipFile(big, "w", compression) as zout:
        for info in zin.infolist():
            with zout.open(zipfile.ZipInfo(info.filename, info.date_time), "w", force_zip64=True) as f:
                f.write(zin.read(info.filename))
    monkeypatch.undo()
    entries, end64 = zip64_records(big)
    assert end64 and entries == len(zipfile.ZipFile(path).infolist())
    d = _core.read_pt2_archive(str(big))
    for fqn, t in ep.state_dict.items():
        assert_same_bits(d["weights"][fqn], t)
    x = torch.randn(2, 6)
    m = milkit.convert(str(big), compute_precision=milkit.precision.FLOAT32)
    got = next(iter(m.predict({"x": x.numpy()}).values()))
    np.testing.assert_allclose(got, ep.module()(x).detach().numpy(), rtol=1e-5, atol=1e-5)


def test_zip64_offset_field_too_short(mlp_pt2, tmp_path, monkeypatch):
    # a central record whose offset is 0xFFFFFFFF must find it in a zip64 extra field
    path, _ = mlp_pt2
    monkeypatch.setattr(zipfile, "ZIP64_LIMIT", 0)
    big = rewrite(path, tmp_path / "zip64.pt2")
    monkeypatch.undo()
    raw = bytearray(big.read_bytes())
    p = raw.rfind(b"PK\x01\x02")
    name_len, extra_len = struct.unpack_from("<HH", raw, p + 28)
    extra = p + 46 + name_len
    assert struct.unpack_from("<HH", raw, extra) == (1, extra_len - 4)
    struct.pack_into("<H", raw, extra + 2, 0)  # the field claims no bytes
    name = raw[p + 46:p + 46 + name_len].decode()
    struct.pack_into("<I", raw, p + 42, 0xFFFFFFFF)
    bad = tmp_path / "bad.pt2"
    bad.write_bytes(bytes(raw))
    raises(bad, milkit.FormatError, name)
