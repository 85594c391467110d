"""milkit's version: the one place it is written (CMake and the wheel's metadata read it here)."""

__version__ = "0.1.0"
