"""``MLModel``: a converted model backed by a package directory (coremltools' ``ct.models.MLModel``):
save, predict on any OS with milkit's interpreter, states, the notebook display."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from typing import Any, Sequence

from . import _core
from .progress import Progress

__all__ = ['MLModel']


class MLModel:
    """A converted model backed by a package directory (coremltools' ``MLModel`` subset)."""

    def __init__(self, model: str | os.PathLike | Any, is_temp_package: bool = False, mil_program: Any = None,
                 skip_model_load: bool = True, skipped_passes: Sequence[str] = (), compute_units: Any = None,
                 weights_dir: str | None = None, function_name: str | None = None,
                 optimization_hints: Any = None) -> None:
        if hasattr(model, "SerializeToString") and hasattr(model, "WhichOneof"):
            # a Model proto (coremltools' spec): written as a temporary package with a copy of
            # `weights_dir`, which an ML Program needs
            model = _package_from_spec(model, weights_dir)
            is_temp_package = True
        self.package_path = os.fspath(model)
        if not os.path.exists(self.package_path):
            raise ValueError(f"no model at {self.package_path!r}")
        self.is_temp_package = is_temp_package
        self._mil_program = mil_program
        self.skipped_passes = list(skipped_passes)
        self.compute_unit = compute_units
        self.function_name = function_name
        self._plan: Any = None
        self._plan_lock = threading.Lock()

    @property
    def weights_dir(self) -> str:
        return os.path.join(self.package_path, "Data", "com.apple.CoreML", "weights")

    def save(self, path: str | os.PathLike) -> None:
        """Copies the package to ``path`` (atomically: a copy beside it, then a rename).

        The files of a temporary package that ``convert`` wrote (``is_temp_package``) are never
        written again, so on the same file system they are hard-linked rather than copied: saving a
        model with hundreds of MB of weights then takes milliseconds. Other packages (one loaded
        from the user's own path) are always copied."""
        path = os.fspath(path)
        parent = os.path.dirname(os.path.abspath(path))
        tmp = tempfile.mkdtemp(prefix=".milkit-save-", dir=parent)
        try:
            staged = os.path.join(tmp, "pkg")
            total = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(self.package_path) for f in fs)
            with Progress(f"save {os.path.basename(path)}", total=total, unit="B", unit_scale=True) as bar:
                link = [self.is_temp_package]

                def copy(src: str, dst: str) -> Any:
                    size = os.path.getsize(src)
                    if link[0]:
                        try:
                            os.link(src, dst)
                            bar.update(size)
                            return dst
                        except OSError:  # another file system, or no hard links there
                            link[0] = False
                    out = shutil.copy2(src, dst)
                    bar.update(size)
                    return out

                shutil.copytree(self.package_path, staged, copy_function=copy)
            old = None
            if os.path.exists(path):
                old = os.path.join(tmp, "old")
                os.rename(path, old)
            try:
                os.rename(staged, path)
            except OSError:
                if old is not None:
                    os.rename(old, path)
                raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def get_spec(self) -> Any:
        """The Model proto, parsed with coremltools' generated classes (needs coremltools)."""
        from coremltools.proto import Model_pb2

        spec = Model_pb2.Model()
        with open(os.path.join(self.package_path, "Data", "com.apple.CoreML", "model.mlmodel"), "rb") as f:
            spec.ParseFromString(f.read())
        return spec

    def get_program(self) -> Any:
        """The MIL program as converted."""
        return self._mil_program

    def _get_plan(self) -> Any:
        """The interpreter's plan of the package's function (made once, from the package itself)."""
        with self._plan_lock:
            if self._plan is None:
                from . import runtime
                from .io import load

                with Progress(f"load {os.path.basename(self.package_path)}", total=2) as bar:
                    prog = load(self.package_path)
                    bar.update(1, "plan")
                    name = self.function_name or prog.default_function_name
                    self._plan = runtime.plan(prog, name)
                    bar.update(1)
                self._fn = prog.functions[name]
                self._enumerated = _package_enumerated_shapes(self.package_path)
                self._image_in, self._image_out = _package_image_features(self.package_path, self.function_name)
            return self._plan

    def predict(self, data: Any, state: Any = None) -> Any:
        """Runs the model with milkit's interpreter (any OS), as coremltools' ``MLModel.predict``:
        `data` is a dict of input name -> array (a list of dicts runs each and returns a list);
        returns a dict of output name -> numpy array (a classifier's label is a str or int and its
        probabilities a dict label -> float, as Core ML returns them). Image inputs take PIL images
        (mode 'RGB' for RGB / BGR, 'L' for GRAYSCALE, 'F' for GRAYSCALE_FLOAT16), turned into the
        tensor Core ML feeds; image outputs come back as PIL images ('RGBA', 'L' or 'F'). Stateful models take
        ``state=model.make_state()``. Several threads may predict on one model at once.

        Feeds and results follow Core ML: a rank-0 output comes back with shape (1,) and a rank-0
        input takes a (1,) array; fp64 / int64 / bool feeds are cast to the input's dtype, and float
        feeds of an int input too when their values are integers (1.5 for an int input raises)."""
        from . import runtime

        plan = self._get_plan()
        if isinstance(data, (list, tuple)):
            return [self.predict(d, state) for d in data]
        if self._image_in and isinstance(data, dict):
            from .image_types import check_image_size, image_to_array

            data = dict(data)
            for name, desc in self._image_in.items():
                if name in data:
                    data[name] = image_to_array(data[name], name, desc["colorSpace"])
                    check_image_size(data[name], name, desc)
        feed = runtime.coerce_inputs(self._fn, data, as_coreml=True)
        for name, shapes in self._enumerated.items():
            if name in feed and list(feed[name].shape) not in shapes:
                raise ValueError(f"input {name!r} has shape {tuple(feed[name].shape)}, which is not one of the "
                                 f"model's enumerated shapes {[tuple(s) for s in shapes]}")
        out = runtime.outputs_as_coreml(self._fn, plan.run(feed, state))
        for name, value in out.items():
            # Core ML's multiarrays have rank >= 1: a rank-0 output comes back with shape (1,)
            if getattr(value, "ndim", None) == 0 and not isinstance(value, str):
                out[name] = value.reshape(1)
        if self._image_out:
            from .image_types import array_to_image

            for name, desc in self._image_out.items():
                if name in out:
                    out[name] = array_to_image(out[name], name, desc["colorSpace"])
        return out

    def make_state(self) -> Any:
        """A fresh state object (zero-filled) for a stateful (iOS18) model."""
        plan = self._get_plan()
        if not plan.has_states:
            raise ValueError("the model has no states")
        return plan.make_state()

    def __del__(self) -> None:
        if getattr(self, "is_temp_package", False):
            shutil.rmtree(self.package_path, ignore_errors=True)

    def __repr__(self) -> str:
        return f"MLModel({self.package_path!r})"

    def _repr_html_(self) -> str:
        from .display import mlmodel_html

        return mlmodel_html(self)


def _write_package(spec: Any, package_path: str, weights_dir: str | None) -> None:
    """A package holding the spec and a copy of `weights_dir` (as coremltools' ModelPackage lays
    it out: Manifest.json, Data/com.apple.CoreML/model.mlmodel and weights/)."""
    import json
    import uuid

    data = os.path.join(package_path, "Data", "com.apple.CoreML")
    os.makedirs(data, exist_ok=True)
    with open(os.path.join(data, "model.mlmodel"), "wb") as f:
        f.write(spec.SerializeToString())
    manifest = json.loads(_core.manifest_json(str(uuid.uuid4()), str(uuid.uuid4())))
    if weights_dir is not None:
        shutil.copytree(weights_dir, os.path.join(data, "weights"))
    else:
        entries = manifest["itemInfoEntries"]
        for key in [k for k, e in entries.items() if e["name"] == "weights"]:
            del entries[key]
    with open(os.path.join(package_path, "Manifest.json"), "w", encoding="utf-8") as f:
        f.write(json.dumps(manifest, indent=4, sort_keys=True) + "\n")


def _package_from_spec(spec: Any, weights_dir: str | None) -> str:
    """A temporary .mlpackage holding `spec` (and a copy of `weights_dir`), as coremltools makes
    one for ``MLModel(spec, weights_dir=...)``."""
    if spec.WhichOneof("Type") == "mlProgram" and weights_dir is None:
        raise Exception("MLModel of type mlProgram cannot be loaded just from the model spec object. It also needs "
                        "the path to the weights file. Please provide that as well, using the 'weights_dir' argument.")
    path = tempfile.mkdtemp(suffix=".mlpackage")
    try:
        os.rmdir(path)
        _write_package(spec, path, weights_dir)
    except BaseException:
        shutil.rmtree(path, ignore_errors=True)
        raise
    return path


def _package_enumerated_shapes(path: str) -> dict:
    """Input name -> list of enumerated shapes, from the package's model description."""
    with open(_package_model_path(path), "rb") as f:
        shapes = _core.enumerated_shapes(f.read())
    return {k: [list(s) for s in v] for k, v in shapes.items()}


def _package_image_features(path: str, function_name: str | None) -> tuple:
    """(input name -> image description, output name -> image description) of the package's
    function (the default one when `function_name` is None), from its model description."""
    import json

    with open(_package_model_path(path), "rb") as f:
        desc = json.loads(_core.model_description_json(f.read(), path))
    ins, outs = desc.get("input", []), desc.get("output", [])
    for fd in desc.get("functions", []):
        if fd.get("name") == (function_name or desc.get("defaultFunctionName")):
            ins, outs = fd.get("input", []), fd.get("output", [])
    pick = lambda fs: {f["name"]: f["type"] for f in fs if f["type"].get("kind") == "image"}  # noqa: E731
    return pick(ins), pick(outs)


def _package_model_path(path: str) -> str:
    """The model.mlmodel of a package (its Manifest's root item), or `path` itself for a file."""
    import json

    model = path
    if os.path.isdir(path):
        model = os.path.join(path, "Data", "com.apple.CoreML", "model.mlmodel")
        manifest = os.path.join(path, "Manifest.json")
        if os.path.exists(manifest):
            with open(manifest, encoding="utf-8") as f:
                m = json.load(f)
            entry = m.get("itemInfoEntries", {}).get(m.get("rootModelIdentifier", ""), {})
            if "path" in entry:
                model = os.path.join(path, "Data", entry["path"])
    return model
