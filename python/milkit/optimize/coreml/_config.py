"""Compression configs, with coremltools.optimize.coreml's names, defaults and validation: a config
is checked when it is built (ValueError naming the setting, as coremltools raises) and is handed to
the C++ passes as JSON, where it is resolved per const op."""

from __future__ import annotations

import enum
import json
from typing import IO, Any, Callable, Dict, List, Optional, Tuple, Union

import numpy as np

__all__ = [
    "CompressionGranularity",
    "OpCompressorConfig",
    "OpLinearQuantizerConfig",
    "OpMagnitudePrunerConfig",
    "OpPalettizerConfig",
    "OpThresholdPrunerConfig",
    "OptimizationConfig",
]


class CompressionGranularity(enum.Enum):
    """How finely a weight is compressed (coremltools' enum)."""

    PER_TENSOR = 1
    PER_GROUPED_CHANNEL = 2
    PER_CHANNEL = 3
    PER_BLOCK = 4


_GRANULARITY_NAMES = {g: g.name.lower() for g in CompressionGranularity}


def _granularity(value: Any) -> CompressionGranularity:
    if isinstance(value, CompressionGranularity):
        return value
    for g, name in _GRANULARITY_NAMES.items():
        if value == name:
            return g
    raise ValueError(f"Invalid granularity={value}")


def _check_weight_threshold(value: Any) -> Optional[int]:
    if value is None:
        return None
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
        raise TypeError(f"'weight_threshold' must be <class 'int'> (got {value!r} that is a {type(value)}).")
    if value < 0:
        raise ValueError(f'"weight_threshold" must be a non-negative integer. Got {value}.')
    return int(value)


def _check_type(name: str, value: Any, types: Any, optional: bool = False) -> Any:
    if value is None and optional:
        return value
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in (
            types if isinstance(types, tuple) else (types,))):
        raise TypeError(f"'{name}' must be {types} (got {value!r} that is a {type(value)}).")
    return value


class OpCompressorConfig:
    """The base of the op-level configs."""

    _FIELDS: Tuple[str, ...] = ()

    def _validate_op_type(self, op_type: str) -> None:
        """Raises when the config cannot apply to ops of `op_type`."""

    def _as_dict(self) -> Dict[str, Any]:
        return {f: getattr(self, f) for f in self._FIELDS}

    def _to_json(self, functions: Dict[int, Callable]) -> Dict[str, Any]:
        d = {k: v for k, v in self._as_dict().items()}
        d["type"] = type(self).__name__
        return d

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self._as_dict() == other._as_dict()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self).__name__, repr(self)))

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self._as_dict().items())
        return f"{type(self).__name__}({args})"

    @classmethod
    def _from_dict(cls, config_dict: Dict[str, Any]) -> "OpCompressorConfig":
        unknown = sorted(set(config_dict) - set(cls._FIELDS))
        if unknown:
            raise ValueError(f"{cls.__name__}: unknown keys {unknown}; valid keys are {list(cls._FIELDS)}")
        return cls(**config_dict)


def _dtype_name(dtype: Any) -> str:
    if isinstance(dtype, str):
        name = dtype
    elif isinstance(dtype, type) and issubclass(dtype, np.generic):
        name = np.dtype(dtype).name
    elif isinstance(dtype, np.dtype):
        name = dtype.name
    else:
        name = str(dtype)
    if name not in ("int8", "uint8", "int4", "uint4"):
        if name in ("int16", "uint16", "int32", "uint32", "int64", "uint64", "fp16", "fp32", "float16",
                    "float32", "float64", "bool", "uint1", "uint2", "uint3", "uint6"):
            raise ValueError(f"Invalid dtype. Should be int4/8 or uint4/8, but got {name}")
        raise ValueError(f"Invalid dtype {dtype}. Only support int8/uint8/int4/uint4.")
    return name


class OpLinearQuantizerConfig(OpCompressorConfig):
    """Linear (affine) weight quantization (coremltools' ``OpLinearQuantizerConfig``).

    Args:
        mode: ``"linear_symmetric"`` (default) or ``"linear"``.
        dtype: ``"int8"`` (default), ``"uint8"``, ``"int4"`` or ``"uint4"`` (a str, a numpy type or
            a ``milkit.types`` dtype).
        granularity: ``"per_channel"`` (default), ``"per_tensor"`` or ``"per_block"``.
        block_size: for per_block: the block size along the input channel (default 32), or one
            size per axis of the weight (0 takes the whole axis).
        weight_threshold: weights with at most this many elements are left alone (default 2048).
    """

    _FIELDS = ("mode", "dtype", "granularity", "block_size", "weight_threshold")

    def __init__(self, mode: str = "linear_symmetric", dtype: Any = "int8",
                 granularity: Union[str, CompressionGranularity] = CompressionGranularity.PER_CHANNEL,
                 block_size: Union[int, List[int], Tuple[int, ...]] = 32,
                 weight_threshold: Optional[int] = 2048) -> None:
        _check_type("mode", mode, str)
        if mode.upper() not in ("LINEAR_SYMMETRIC", "LINEAR"):
            raise ValueError(f"Only mode ('LINEAR_SYMMETRIC', 'LINEAR') supported for weight affine "
                             f'quantization. Got mode: "{mode}".')
        self.mode = mode.upper()
        from ... import types as _types

        self.dtype = getattr(_types, _dtype_name(dtype))
        g = _granularity(granularity)
        if g == CompressionGranularity.PER_GROUPED_CHANNEL:
            raise ValueError(f'"granularity" must be one of (per_tensor, per_channel, per_block), but got {g}')
        self.granularity = g
        if isinstance(block_size, (int, np.integer)) and not isinstance(block_size, bool):
            if block_size < 0:
                raise ValueError(f"The block_size must be non-negative values, but got {block_size}")
            block_size = int(block_size)
        elif isinstance(block_size, (list, tuple)):
            if any(not isinstance(b, int) or b < 0 for b in block_size):
                raise ValueError("All values in block_size must be non-negative values.")
        else:
            raise ValueError(f"The block_size should be int or list/tuple of int, but got {type(block_size)}.")
        self.block_size = block_size
        self.weight_threshold = _check_weight_threshold(weight_threshold)

    @property
    def nbits(self) -> int:
        """Bits of the quantized dtype."""
        return int(str(self.dtype)[-1])

    @property
    def signed(self) -> bool:
        """Whether the quantized dtype is signed."""
        return not str(self.dtype).startswith("u")

    def _to_json(self, functions: Dict[int, Callable]) -> Dict[str, Any]:
        d = super()._to_json(functions)
        d["granularity"] = _GRANULARITY_NAMES[self.granularity]
        d["dtype"] = str(self.dtype)
        d["block_size"] = list(self.block_size) if isinstance(self.block_size, (list, tuple)) else self.block_size
        return d


class OpThresholdPrunerConfig(OpCompressorConfig):
    """Sets weights with magnitude at most ``threshold`` to zero (coremltools'
    ``OpThresholdPrunerConfig``); a weight is left dense when less than
    ``minimum_sparsity_percentile`` of it would be zero."""

    _FIELDS = ("threshold", "minimum_sparsity_percentile", "weight_threshold")

    def __init__(self, threshold: float = 1e-12, minimum_sparsity_percentile: float = 0.5,
                 weight_threshold: Optional[int] = 2048) -> None:
        _check_type("threshold", threshold, float)
        _check_type("minimum_sparsity_percentile", minimum_sparsity_percentile, float)
        if threshold < 0:
            raise ValueError(f'Invalid value of "threshold": {threshold}. Needs to be in [0, inf)')
        if minimum_sparsity_percentile < 0 or minimum_sparsity_percentile > 1:
            raise ValueError(f'Invalid value of "minimum_sparsity_percentile": {minimum_sparsity_percentile}. '
                             f"Needs to be in [0, 1]")
        self.threshold = threshold
        self.minimum_sparsity_percentile = minimum_sparsity_percentile
        self.weight_threshold = _check_weight_threshold(weight_threshold)


class OpMagnitudePrunerConfig(OpCompressorConfig):
    """Prunes the smallest weights to a ``target_sparsity``, optionally in blocks of ``block_size``
    along ``dim``, or ``n_m_ratio`` (n of every m along ``dim``) (coremltools'
    ``OpMagnitudePrunerConfig``)."""

    _FIELDS = ("target_sparsity", "block_size", "n_m_ratio", "dim", "weight_threshold")
    _SUPPORTED_OPS_FOR_STRUCTURAL_PRUNING = {"conv": ["weight"], "linear": ["weight"]}

    def __init__(self, target_sparsity: Optional[float] = None, block_size: Optional[int] = None,
                 n_m_ratio: Optional[Tuple[int, int]] = None, dim: Optional[int] = None,
                 weight_threshold: Optional[int] = 2048) -> None:
        _check_type("target_sparsity", target_sparsity, float, optional=True)
        _check_type("block_size", block_size, int, optional=True)
        _check_type("n_m_ratio", n_m_ratio, (list, tuple), optional=True)
        _check_type("dim", dim, int, optional=True)
        msg = 'Either "target_sparsity" or "n_m_ratio" need to be set. They cannot be set at the same time.'
        if (target_sparsity is None) == (n_m_ratio is None):
            raise ValueError(msg)
        if target_sparsity is not None and not 0 <= target_sparsity <= 1:
            raise ValueError(f'Invalid value of "target_sparsity": {target_sparsity}. Needs to be in [0, 1].')
        if block_size is not None and n_m_ratio is not None:
            raise ValueError('"block_size" and "n_m_ratio" cannot be set at the same time.')
        if block_size is not None and block_size <= 1:
            raise ValueError(f'"block_size" must be an integer > 1. Got {block_size}.')
        if n_m_ratio is not None and (len(n_m_ratio) != 2 or n_m_ratio[0] > n_m_ratio[1]):
            raise ValueError(f'"n_m_ratio" must be a tuple of two integers (n, m). n <= m. Got {n_m_ratio}')
        if dim is not None:
            if block_size is None and n_m_ratio is None:
                raise ValueError('"dim" can only be set along with "block_size" or "n_m_ratio".')
            if dim not in (0, 1):
                raise ValueError(f'"dim" must be 1 or 0. Got {dim}.')
        if dim is None and block_size is not None:
            dim = 0
        if dim is None and n_m_ratio is not None:
            dim = 1
        self.target_sparsity = target_sparsity
        self.block_size = block_size
        self.n_m_ratio = tuple(n_m_ratio) if n_m_ratio is not None else None
        self.dim = dim
        self.weight_threshold = _check_weight_threshold(weight_threshold)

    def _is_structural_pruning(self) -> bool:
        return self.n_m_ratio is not None or self.block_size is not None

    def _validate_op_type(self, op_type: str) -> None:
        if self._is_structural_pruning() and op_type not in self._SUPPORTED_OPS_FOR_STRUCTURAL_PRUNING:
            raise ValueError(f"block sparsity or n:m pruning does not support op type {op_type}.")

    def _to_json(self, functions: Dict[int, Callable]) -> Dict[str, Any]:
        d = super()._to_json(functions)
        d["n_m_ratio"] = list(self.n_m_ratio) if self.n_m_ratio is not None else None
        return d


class OpPalettizerConfig(OpCompressorConfig):
    """Weight palettization: each weight becomes indices into a look-up table of 2**nbits
    entries (coremltools' ``OpPalettizerConfig``).

    Args:
        mode: ``"kmeans"`` (default), ``"uniform"``, ``"unique"`` or ``"custom"`` (with
            ``lut_function(weight) -> (lut, indices)``).
        nbits: 1, 2, 3, 4, 6 or 8 (required for kmeans and uniform, not allowed for unique and
            custom).
        granularity: ``"per_tensor"`` (default) or ``"per_grouped_channel"`` (``group_size``
            channels per table along ``channel_axis``).
        cluster_dim: vector palettization: each table entry is a vector of this length.
        enable_per_channel_scale: divide each output channel by its largest magnitude first.
        num_kmeans_workers: accepted for compatibility (milkit uses its thread pool).
        weight_threshold: weights with at most this many elements are left alone (default 2048).
    """

    _FIELDS = ("mode", "nbits", "lut_function", "granularity", "group_size", "channel_axis", "cluster_dim",
               "enable_per_channel_scale", "num_kmeans_workers", "weight_threshold")
    _VALID_NBITS = (1, 2, 3, 4, 6, 8)

    def __init__(self, mode: str = "kmeans", nbits: Optional[int] = None, lut_function: Optional[Callable] = None,
                 granularity: Union[str, CompressionGranularity] = CompressionGranularity.PER_TENSOR,
                 group_size: int = 32, channel_axis: Optional[int] = None, cluster_dim: int = 1,
                 enable_per_channel_scale: bool = False, num_kmeans_workers: int = 1,
                 weight_threshold: Optional[int] = 2048) -> None:
        _check_type("mode", mode, str)
        if mode.upper() not in ("KMEANS", "UNIFORM", "UNIQUE", "CUSTOM"):
            raise ValueError(f"Only modes ('KMEANS', 'UNIFORM', 'UNIQUE', 'CUSTOM') are supported for weight "
                             f'palettization. Got "mode": "{mode}".')
        m = mode.upper()
        if nbits is None and m in ("KMEANS", "UNIFORM"):
            raise ValueError(f'"nbits" must be provided for {mode} mode')
        if nbits is not None and m in ("UNIQUE", "CUSTOM"):
            raise ValueError(f'"nbits" must NOT be provided for {mode} mode')
        if nbits is not None and nbits not in self._VALID_NBITS:
            raise ValueError(f'Invalid value of "nbits" ({nbits}) for palettization. Supported "nbits" are '
                             f"{self._VALID_NBITS}")
        if lut_function is None and m == "CUSTOM":
            raise ValueError('"lut_function" can not be None, if "mode" is "custom".')
        if lut_function is not None and m != "CUSTOM":
            raise ValueError('"lut_function" must be None, if "mode" is not "custom".')
        if lut_function is not None and not callable(lut_function):
            raise ValueError(f'A function object must be provided as "lut_function". Got a "lut_function" as '
                             f"type {type(lut_function)}")
        g = _granularity(granularity)
        if g not in (CompressionGranularity.PER_TENSOR, CompressionGranularity.PER_GROUPED_CHANNEL):
            raise ValueError(f'"granularity" must be one of (per_tensor, per_grouped_channel), but got {g}')
        _check_type("cluster_dim", cluster_dim, int)
        _check_type("enable_per_channel_scale", enable_per_channel_scale, bool)
        _check_type("num_kmeans_workers", num_kmeans_workers, int)
        self.mode = m
        self.nbits = nbits
        self.lut_function = lut_function
        self.granularity = g
        self.group_size = group_size
        self.channel_axis = channel_axis
        self.cluster_dim = cluster_dim
        self.enable_per_channel_scale = enable_per_channel_scale
        self.num_kmeans_workers = num_kmeans_workers
        self.weight_threshold = _check_weight_threshold(weight_threshold)

    def _to_json(self, functions: Dict[int, Callable]) -> Dict[str, Any]:
        d = super()._to_json(functions)
        d["granularity"] = _GRANULARITY_NAMES[self.granularity]
        if self.lut_function is not None:
            key = id(self.lut_function)
            functions[key] = self.lut_function
            d["lut_function"] = key
        d.pop("num_kmeans_workers")
        return d

    @classmethod
    def _from_dict(cls, config_dict: Dict[str, Any]) -> "OpPalettizerConfig":
        if "lut_function" in config_dict:
            raise ValueError("_from_dict method does not support lut_function. Please create the "
                             "OpPalettizerConfig from scratch.")
        return super()._from_dict(config_dict)  # type: ignore[return-value]


_CONFIG_CLASSES = {c.__name__: c for c in (OpLinearQuantizerConfig, OpPalettizerConfig,
                                           OpThresholdPrunerConfig, OpMagnitudePrunerConfig)}


def _check_op_config(config: Any) -> None:
    if config is not None and not isinstance(config, OpCompressorConfig):
        raise ValueError(f"config must be type of OpCompressorConfig. Got {type(config)}.")


class OptimizationConfig:
    """Which config applies where: ``global_config`` everywhere, ``op_type_configs`` by op type
    (``"conv"``, ``"linear"``), ``op_name_configs`` by op or const name; ``None`` skips. The op
    name wins over the op type, which wins over the global config (coremltools'
    ``OptimizationConfig``)."""

    def __init__(self, global_config: Optional[OpCompressorConfig] = None,
                 op_type_configs: Optional[Dict[str, Optional[OpCompressorConfig]]] = None,
                 op_name_configs: Optional[Dict[str, Optional[OpCompressorConfig]]] = None) -> None:
        _check_op_config(global_config)
        for v in (op_type_configs or {}).values():
            _check_op_config(v)
        for k, v in (op_type_configs or {}).items():
            if v is not None:
                v._validate_op_type(k)
        for v in (op_name_configs or {}).values():
            _check_op_config(v)
        self.global_config = global_config
        self.op_type_configs: Dict[str, Optional[OpCompressorConfig]] = dict(op_type_configs or {})
        self.op_name_configs: Dict[str, Optional[OpCompressorConfig]] = dict(op_name_configs or {})

    def set_global(self, op_config: Optional[OpCompressorConfig]) -> None:
        """Sets the config applied to every const no other config selects."""
        _check_op_config(op_config)
        self.global_config = op_config

    def set_op_type(self, op_type: str, op_config: Optional[OpCompressorConfig]) -> None:
        """Sets the config of every op of `op_type` (``None``: leave them alone)."""
        _check_op_config(op_config)
        if op_config is not None:
            op_config._validate_op_type(op_type)
        self.op_type_configs[op_type] = op_config

    def set_op_name(self, op_name: str, op_config: Optional[OpCompressorConfig]) -> None:
        """Sets the config of one op or const by name (``None``: leave it alone)."""
        _check_op_config(op_config)
        self.op_name_configs[op_name] = op_config

    def _all(self) -> List[OpCompressorConfig]:
        out = [self.global_config] + list(self.op_type_configs.values()) + list(self.op_name_configs.values())
        return [c for c in out if c is not None]

    def _to_json(self) -> Tuple[str, Dict[int, Callable]]:
        functions: Dict[int, Callable] = {}

        def one(c: Optional[OpCompressorConfig]) -> Any:
            return None if c is None else c._to_json(functions)

        d = {"global": one(self.global_config),
             "op_type": {k: one(v) for k, v in self.op_type_configs.items()},
             "op_name": {k: one(v) for k, v in self.op_name_configs.items()}}
        return json.dumps(d, sort_keys=True), functions

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, OptimizationConfig) and self.global_config == other.global_config
                and self.op_type_configs == other.op_type_configs and self.op_name_configs == other.op_name_configs)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"OptimizationConfig(global_config={self.global_config!r}, op_type_configs={self.op_type_configs!r}, "
                f"op_name_configs={self.op_name_configs!r})")

    @classmethod
    def from_dict(cls, config_dict: Dict[str, Any]) -> "OptimizationConfig":
        """Builds a config from a nested dict: ``config_type`` (the class name), ``global_config``,
        ``op_type_configs`` and ``op_name_configs`` (each entry may override ``config_type``)."""
        valid = ("config_type", "global_config", "op_name_configs", "op_type_configs")
        for k in config_dict:
            if k not in valid:
                raise ValueError(f"Invalid key {k} to construct an OptimizationConfig object. "
                                 f"Supported keys are {valid}.")
        config_type = config_dict.get("config_type")
        if config_type is None or not isinstance(config_type, str):
            raise ValueError("config_type must be provided with type of string.")

        def make(attrs: Any) -> Optional[OpCompressorConfig]:
            if attrs is None:
                return None
            attrs = dict(attrs)
            name = attrs.pop("config_type", config_type)
            if name not in _CONFIG_CLASSES:
                raise ValueError(f"Invalid config_type {name!r}; valid types are {sorted(_CONFIG_CLASSES)}")
            return _CONFIG_CLASSES[name]._from_dict(attrs)

        kwargs: Dict[str, Any] = {}
        if config_dict.get("global_config") is not None:
            kwargs["global_config"] = make(config_dict["global_config"])
        for key in ("op_type_configs", "op_name_configs"):
            if config_dict.get(key) is None:
                continue
            if not isinstance(config_dict[key], dict):
                raise ValueError(f"{key} must be type of dict. Got {type(config_dict[key])}")
            kwargs[key] = {k: make(v) for k, v in config_dict[key].items()}
        return cls(**kwargs)

    @classmethod
    def from_yaml(cls, yml: Union[IO, str]) -> "OptimizationConfig":
        """Builds a config from a YAML file (a path or an open file) holding the same structure as
        :meth:`from_dict`."""
        try:
            import yaml
        except ImportError:
            raise ImportError("OptimizationConfig.from_yaml needs PyYAML (pip install pyyaml)") from None
        if isinstance(yml, str):
            with open(yml) as f:
                config_dict = yaml.safe_load(f)
        else:
            config_dict = yaml.safe_load(yml)
        return cls.from_dict(config_dict)
