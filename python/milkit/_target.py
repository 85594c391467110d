"""Deployment targets (coremltools' ``ct.target``)."""

from __future__ import annotations

from enum import IntEnum

__all__ = ["AvailableTarget", "target"]


class AvailableTarget(IntEnum):
    """A deployment target; the value is Core ML's specification version."""

    iOS13 = 4
    iOS14 = 5
    iOS15 = 6
    iOS16 = 7
    iOS17 = 8
    iOS18 = 9
    iOS26 = 10

    # aliases of the same specification versions
    macOS10_15 = 4
    macOS10_16 = 5
    macOS11 = 5
    macOS12 = 6
    macOS13 = 7
    macOS14 = 8
    macOS15 = 9
    macOS26 = 10
    watchOS6 = 4
    watchOS7 = 5
    watchOS8 = 6
    watchOS9 = 7
    watchOS10 = 8
    watchOS11 = 9
    watchOS26 = 10
    tvOS13 = 4
    tvOS14 = 5
    tvOS15 = 6
    tvOS16 = 7
    tvOS17 = 8
    tvOS18 = 9
    tvOS26 = 10
    visionOS1 = 8
    visionOS2 = 9
    visionOS26 = 10


target = AvailableTarget
