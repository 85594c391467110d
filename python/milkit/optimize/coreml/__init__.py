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
from ._post_training_quantization import linear_quantize_weights, palettize_weights, prune_weights

__all__ = [
    "CompressionGranularity",
    "OpCompressorConfig",
    "OpLinearQuantizerConfig",
    "OpMagnitudePrunerConfig",
    "OpPalettizerConfig",
    "OpThresholdPrunerConfig",
    "OptimizationConfig",
    "linear_quantize_weights",
    "palettize_weights",
    "prune_weights",
]
