"""Pruning numerics against coremltools' own prune_weights functions."""

import numpy as np
import pytest
from milkit._core import _compress


@pytest.fixture(scope="module")
def prune_weights():
    from coremltools.optimize.coreml._quantization_passes import prune_weights

    return prune_weights


def sparse(dense):
    """(nonzero values, mask) of a dense result, as coremltools' sparse params hold them."""
    flat = dense.reshape(-1)
    return flat[flat != 0], (flat != 0)


def assert_same(ref, got):
    if ref is None:
        assert isinstance(got, str)
        return
    assert not isinstance(got, str), got
    mask = np.unpackbits(ref.mask, count=int(np.prod(ref.shape)), bitorder="little").astype(bool)
    values, got_mask = sparse(got)
    np.testing.assert_array_equal(got_mask, mask)
    assert values.dtype == ref.nonzero_data.dtype
    assert values.tobytes() == ref.nonzero_data.tobytes()


def weight(shape, dtype, seed, ties=False):
    rng = np.random.default_rng(seed)
    if ties:  # few distinct magnitudes, both signs
        return (rng.integers(-4, 5, size=shape) * 0.25).astype(dtype)
    return (rng.standard_normal(shape) * 0.1).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@pytest.mark.parametrize("threshold", [1e-12, 5e-8, 0.03, 0.1])
def test_threshold_matches(prune_weights, dtype, threshold):
    w = weight((20, 30), dtype, 1)
    w[0, :5] = np.array([6e-8, -6e-8, 0, -0.0, 0.03], dtype)  # fp16 rounds the threshold itself
    for minimum in (0.0, 0.3, 0.9):
        ref = prune_weights.compress_by_threshold(w, threshold, minimum)
        assert_same(ref, _compress.prune(w, "threshold", threshold=threshold, minimum_sparsity=minimum))


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@pytest.mark.parametrize("sparsity", [0.0, 0.1, 0.25, 0.5, 0.77, 0.99, 1.0])
@pytest.mark.parametrize("ties", [False, True])
def test_magnitude_matches(prune_weights, dtype, sparsity, ties):
    for shape in [(20, 30), (8, 6, 3, 3), (7,)]:
        w = weight(shape, dtype, 2, ties)
        ref = prune_weights.compress_by_magnitude(w, sparsity)
        assert_same(ref, _compress.prune(w, "magnitude", target_sparsity=sparsity))


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("block_size", [2, 3, 4, 8])
@pytest.mark.parametrize("ties", [False, True])
def test_block_magnitude_matches(prune_weights, dtype, dim, block_size, ties):
    for shape in [(20, 18), (10, 9, 3, 3), (9, 7, 2)]:
        w = weight(shape, dtype, block_size, ties)
        for sparsity in (0.3, 0.5, 0.8):
            ref = prune_weights.compress_by_magnitude(w, sparsity, block_size=block_size, dim=dim)
            got = _compress.prune(w, "magnitude", target_sparsity=sparsity, block_size=block_size, dim=dim)
            assert_same(ref, got)


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("n,m", [(1, 2), (2, 4), (3, 4), (4, 8), (5, 7), (8, 16), (4, 4)])
def test_nm_matches(prune_weights, dtype, dim, n, m):
    for shape in [(40, 36), (34, 32, 3, 3), (33, 35, 2)]:
        w = weight(shape, dtype, n * m)
        ref = prune_weights.compress_by_nm_sparsity(w, (n, m), dim)
        assert_same(ref, _compress.prune(w, "nm", n=n, m=m, dim=dim))


@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("n,m", [(1, 2), (2, 4), (3, 4), (4, 8), (5, 7), (8, 16), (3, 16)])
def test_nm_fp16_ties_match(prune_weights, dim, n, m):
    # numpy sorts runs of up to 16 fp16 values stably: ties prune the earlier element
    for shape in [(40, 36), (34, 32, 3, 3)]:
        w = weight(shape, np.float16, n + m, ties=True)
        ref = prune_weights.compress_by_nm_sparsity(w, (n, m), dim)
        assert_same(ref, _compress.prune(w, "nm", n=n, m=m, dim=dim))


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@pytest.mark.parametrize("n,m", [(2, 4), (10, 20)])
def test_nm_ties_prune_the_same_magnitudes(prune_weights, dtype, n, m):
    # numpy's SIMD argsort orders ties by the CPU: what is pruned agrees up to equal magnitudes
    w = weight((48, 60), dtype, 9, ties=True)
    ref = prune_weights.decompress(prune_weights.compress_by_nm_sparsity(w, (n, m), 1))
    got = _compress.prune(w, "nm", n=n, m=m, dim=1)

    def removed(dense):  # per run, the sorted magnitudes that pruning zeroed
        gone = np.where(dense == 0, np.abs(w.astype(np.float64)), 0)
        return np.sort(gone.reshape(48, -1, m), axis=-1)

    np.testing.assert_array_equal(removed(got), removed(ref))


def test_nm_and_full_sparsity_keep_negative_zero_signs():
    w = np.array([[-1, 2, -3, 4, 5, -6, 7, 8]] * 2, np.float32)
    got = _compress.prune(w, "nm", n=2, m=4, dim=1)
    assert np.signbit(got[0, 0]) and got[0, 0] == 0
    full = _compress.prune(w, "magnitude", target_sparsity=1.0)
    assert (full == 0).all() and np.array_equal(np.signbit(full), w < 0)


def test_skips(prune_weights):
    w = weight((6, 8), np.float32, 0)
    assert isinstance(_compress.prune(w, "nm", n=2, m=4, dim=0), str)  # m > channels / 2
    assert isinstance(_compress.prune(w, "magnitude", target_sparsity=0.5, block_size=4, dim=0), str)
    assert isinstance(_compress.prune(w, "threshold", threshold=1e-3, minimum_sparsity=0.5), str)
    assert prune_weights.compress_by_nm_sparsity(w, (2, 4), 0) is None
