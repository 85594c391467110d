"""``milkit compress PKG -o OUT.mlpackage``: palettize, quantize or prune a package's weights with
milkit.optimize.coreml, from the common settings or a coremltools YAML config."""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from typing import Any, Callable, Tuple

from ._common import CliError, human_bytes

__all__ = ["register", "run"]

NAME = "compress"


def register(sub: Any) -> None:
    p = sub.add_parser(
        NAME, help="palettize, quantize or prune a package's weights",
        description="Compresses the weights of an .mlpackage as coremltools.optimize.coreml does: one of "
                    "--palettize NBITS, --quantize DTYPE, --prune SPARSITY (or --n-m N:M), or --config "
                    "config.yaml (coremltools' OptimizationConfig YAML: config_type, global_config, "
                    "op_type_configs, op_name_configs). Weights with at most --weight-threshold elements "
                    "stay as they are.")
    p.add_argument("model", metavar="PKG", help="the .mlpackage to compress")
    p.add_argument("-o", "--output", required=True, metavar="OUT.mlpackage", help="the package to write")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--palettize", type=int, metavar="NBITS", choices=(1, 2, 3, 4, 6, 8),
                      help="palettize to 2**NBITS entries per table")
    what.add_argument("--quantize", metavar="DTYPE", choices=("int8", "uint8", "int4", "uint4"),
                      help="quantize linearly to DTYPE")
    what.add_argument("--prune", type=float, metavar="SPARSITY", help="prune by magnitude to this sparsity")
    what.add_argument("--n-m", metavar="N:M", help="prune N of every M weights (n:m sparsity)")
    what.add_argument("--config", metavar="YAML", help="a coremltools OptimizationConfig YAML file")
    p.add_argument("--mode", help="palettize: kmeans (default), uniform, unique; quantize: linear_symmetric "
                                  "(default), linear")
    p.add_argument("--granularity", help="palettize: per_tensor (default), per_grouped_channel; quantize: "
                                         "per_channel (default), per_tensor, per_block")
    p.add_argument("--group-size", type=int, default=32, help="channels per table for per_grouped_channel (32)")
    p.add_argument("--block-size", type=int, default=None,
                   help="quantize per_block: block size (32); prune: block sparsity block size")
    p.add_argument("--channel-axis", type=int, default=None, help="palettize: the channel axis")
    p.add_argument("--cluster-dim", type=int, default=1, help="palettize: vector length of each entry (1)")
    p.add_argument("--per-channel-scale", action="store_true", help="palettize: normalize each channel first")
    p.add_argument("--weight-threshold", type=int, default=2048,
                   help="leave weights with at most this many elements (2048)")
    p.add_argument("--joint", action="store_true", help="compress an already compressed model further (iOS18)")
    p.set_defaults(func=run)


def _from_flags(args: argparse.Namespace, c: Any) -> Tuple[Callable, Any]:
    t = args.weight_threshold
    if args.palettize is not None:
        cfg = c.OpPalettizerConfig(mode=args.mode or "kmeans", nbits=args.palettize,
                                   granularity=args.granularity or "per_tensor", group_size=args.group_size,
                                   channel_axis=args.channel_axis, cluster_dim=args.cluster_dim,
                                   enable_per_channel_scale=args.per_channel_scale, weight_threshold=t)
        return c.palettize_weights, c.OptimizationConfig(global_config=cfg)
    if args.quantize is not None:
        cfg = c.OpLinearQuantizerConfig(mode=args.mode or "linear_symmetric", dtype=args.quantize,
                                        granularity=args.granularity or "per_channel",
                                        block_size=args.block_size or 32, weight_threshold=t)
        return c.linear_quantize_weights, c.OptimizationConfig(global_config=cfg)
    if args.n_m is not None:
        try:
            n, m = (int(x) for x in args.n_m.split(":"))
        except ValueError:
            raise CliError(f"--n-m: expected N:M (two integers), got {args.n_m!r}") from None
        cfg = c.OpMagnitudePrunerConfig(n_m_ratio=(n, m), weight_threshold=t)
        return c.prune_weights, c.OptimizationConfig(global_config=cfg)
    cfg = c.OpMagnitudePrunerConfig(target_sparsity=float(args.prune), block_size=args.block_size, weight_threshold=t)
    return c.prune_weights, c.OptimizationConfig(global_config=cfg)


def _from_yaml(path: str, c: Any) -> Tuple[Callable, Any]:
    if not os.path.isfile(path):
        raise CliError(f"{path}: no such file")
    config = c.OptimizationConfig.from_yaml(path)
    kinds = {type(x) for x in config._all()}
    if not kinds:
        raise CliError(f"{path}: the config compresses nothing (no global, op type or op name config)")
    if kinds <= {c.OpPalettizerConfig}:
        return c.palettize_weights, config
    if kinds <= {c.OpLinearQuantizerConfig}:
        return c.linear_quantize_weights, config
    if kinds <= {c.OpThresholdPrunerConfig, c.OpMagnitudePrunerConfig}:
        return c.prune_weights, config
    raise CliError(f"{path}: one config may not mix {', '.join(sorted(k.__name__ for k in kinds))}; "
                   "compress in steps (--joint)")


def _weight_bytes(path: str) -> int:
    w = os.path.join(path, "Data", "com.apple.CoreML", "weights", "weight.bin")
    return os.path.getsize(w) if os.path.exists(w) else 0


def run(args: argparse.Namespace) -> int:
    import milkit
    import milkit.optimize.coreml as c

    if not os.path.isdir(args.model):
        raise CliError(f"{args.model}: not an .mlpackage directory")
    parent = os.path.dirname(os.path.abspath(args.output))
    if not os.path.isdir(parent):
        raise CliError(f"{args.output}: the directory {parent} does not exist")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            fn, config = _from_yaml(args.config, c) if args.config else _from_flags(args, c)
            model = milkit.models.MLModel(args.model)
            out = fn(model, config, joint_compression=args.joint)
            out.save(args.output)
        except (milkit.MilkitError, ValueError, TypeError, OSError) as e:
            raise CliError(f"{args.model}: {' '.join(str(e).split())}") from e
    for w in caught:
        if not issubclass(w.category, milkit.SkippedPassesWarning):
            sys.stderr.write(f"milkit compress: warning: {w.message}\n")
    before, after = _weight_bytes(args.model), _weight_bytes(args.output)
    n = sum(1 for f in out.get_program().functions.values() for o in f.find_ops()
            if o.op_type.startswith("constexpr_"))
    print(f"wrote {args.output} ({n} compressed weight op{'s' if n != 1 else ''}; weights "
          f"{human_bytes(before)} -> {human_bytes(after)})")
    return 0
