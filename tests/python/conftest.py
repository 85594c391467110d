import importlib.abc
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

# shared fixtures of tests/python/support (a nested conftest.py is not copied by the wheel test)
pytest_plugins = ["support.multifunction_util"]


class _NoCoremltools(importlib.abc.MetaPathFinder):
    """Makes `import coremltools` skip the test (or the test module) that asks for it."""

    def find_spec(self, name, path=None, target=None):
        if name == "coremltools" or name.startswith("coremltools."):
            raise pytest.skip.Exception("needs coremltools (left out: MILKIT_TESTS_NO_COREMLTOOLS=1)",
                                        allow_module_level=True)
        return None


# Where coremltools cannot be installed (PyPI has no Linux aarch64 wheel of it; packaging/test-wheel.sh
# arm64), MILKIT_TESTS_NO_COREMLTOOLS=1 skips the tests that compare with it instead of failing them.
# Unset, a missing coremltools is an error as usual.
if os.environ.get("MILKIT_TESTS_NO_COREMLTOOLS") == "1":
    sys.meta_path.insert(0, _NoCoremltools())
