"""coremltools.optimize.coreml's API: configs and the post-training compression functions."""

from __future__ import annotations

from ._config import (
    CompressionGranularity,
    OpCompressorConfig,
    OpLinearQuantizerConfig,
    OpMagnitudePrunerConfig,
    OpPalettizerConfig,
    OpThresholdPrunerConfig,
    OptimizationConfig,
)
from ._metadata import CoreMLOpMetaData, CoreMLWeightMetaData, get_weights_metadata
from ._post_training_quantization import (
    decompress_weights,
    linear_quantize_activations,
    linear_quantize_weights,
    palettize_weights,
    prune_weights,
)

__all__ = [
    "CompressionGranularity",
    "CoreMLOpMetaData",
    "CoreMLWeightMetaData",
    "OpCompressorConfig",
    "OpLinearQuantizerConfig",
    "OpMagnitudePrunerConfig",
    "OpPalettizerConfig",
    "OpThresholdPrunerConfig",
    "OptimizationConfig",
    "decompress_weights",
    "get_weights_metadata",
    "linear_quantize_activations",
    "linear_quantize_weights",
    "palettize_weights",
    "prune_weights",
]
