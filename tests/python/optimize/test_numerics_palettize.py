"""Palettization numerics against coremltools' own palettize_weights functions, byte for byte."""

import numpy as np
import pytest
from milkit._core import _compress

SHAPES = [((64, 40), 0, 16), ((64, 40), 1, 8), ((32, 16, 3, 3), 0, 8), ((32, 16, 3, 3), 1, 4), ((100, 50), 0, 0)]


@pytest.fixture(scope="module")
def ct():
    from coremltools.optimize import _utils as optimize_utils
    from coremltools.optimize.coreml._quantization_passes import palettize_weights

    return palettize_weights, optimize_utils


def ours(w, mode, nbits, axis, group_size, cluster_dim=1):
    return _compress.palettize(w, mode, nbits, axis, group_size, cluster_dim)


def assert_same(ct, w, mode, nbits, axis, group_size, cluster_dim=1):
    palettize_weights, _ = ct
    ref = palettize_weights.grouped_channelwise_compress(
        w, mode.upper(), nbits or None, axis, group_size, None, cluster_dim
    )
    got = ours(w, mode, nbits, axis, group_size, cluster_dim)
    if ref is None:
        assert isinstance(got, str)
        return None
    lut, idx, got_nbits, vector_axis = got
    assert lut.dtype == ref.lut.dtype and lut.shape == ref.lut.shape
    assert lut.tobytes() == ref.lut.tobytes()
    assert idx.shape == ref.indices.shape
    np.testing.assert_array_equal(idx, ref.indices.astype(np.uint8))
    assert vector_axis == ref.vector_axis
    assert 2**got_nbits == ref.lut.shape[-2]
    return got


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@pytest.mark.parametrize("nbits", [1, 2, 3, 4, 6, 8])
@pytest.mark.parametrize("shape,axis,group_size", SHAPES)
def test_uniform_matches(ct, dtype, nbits, shape, axis, group_size):
    rng = np.random.default_rng(nbits)
    w = (rng.standard_normal(shape) * 0.1).astype(dtype)
    assert_same(ct, w, "uniform", nbits, axis, group_size)


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_uniform_adversarial(ct, dtype):
    rng = np.random.default_rng(5)
    # values on exact half-steps of the grid (ties in np.round), large ranges, repeated values
    w = (rng.integers(0, 31, size=(16, 12)) * 0.5).astype(dtype)
    for nbits in (1, 2, 4, 8):
        assert_same(ct, w, "uniform", nbits, 0, 4)
    big = (rng.standard_normal((8, 10)) * 3000).astype(dtype)
    assert_same(ct, big, "uniform", 3, 1, 5)


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@pytest.mark.parametrize("shape,axis,group_size", SHAPES)
def test_unique_matches(ct, dtype, shape, axis, group_size):
    rng = np.random.default_rng(1)
    w = (rng.integers(-6, 6, size=shape) * 0.125).astype(dtype)
    assert_same(ct, w, "unique", 0, axis, group_size)
    assert_same(ct, w, "unique", 6, axis, group_size)  # a given nbits grows to fit


def test_unique_vectors_and_skips(ct):
    rng = np.random.default_rng(2)
    w = rng.integers(-2, 2, size=(16, 6)).astype(np.float16)
    assert_same(ct, w, "unique", 0, 0, 8, cluster_dim=2)
    assert_same(ct, w, "unique", 0, 1, 0, cluster_dim=3)
    many = rng.standard_normal((40, 40)).astype(np.float32)
    assert isinstance(ours(many, "unique", 0, 0, 0), str)  # more than 256 distinct values
    assert assert_same(ct, many, "uniform", 4, 0, 7) is None  # 7 does not divide 40


@pytest.mark.parametrize(
    "shape,axis,group_size,nbits",
    [
        ((128, 200), 0, 64, 4),
        ((128, 200), 1, 100, 3),
        ((64, 40, 3, 3), 0, 32, 2),
        ((64, 40, 3, 3), 1, 20, 8),
        ((16, 4096), 0, 0, 8),
        ((40, 300), 0, 0, 6),
        ((200, 100), 0, 100, 1),
    ],
)
def test_kmeans_fp16_large_groups_match_kmeans1d(ct, shape, axis, group_size, nbits):
    # groups of >= 10000 fp16 values: coremltools' exact 1-D k-means path
    rng = np.random.default_rng(nbits)
    w = (rng.standard_normal(shape) * 0.05).astype(np.float16)
    assert_same(ct, w, "kmeans", nbits, axis, group_size)


def test_kmeans_fp16_many_ties(ct):
    # few distinct values with very uneven counts: the dynamic program's ties decide
    rng = np.random.default_rng(11)
    levels = np.array([-1, -0.5, -0.25, 0, 0.25, 0.5, 1, 2, 4], np.float16)
    w = levels[rng.choice(len(levels), size=(100, 120), p=[0.3, 0.05, 0.05, 0.2, 0.05, 0.05, 0.1, 0.1, 0.1])]
    for nbits in (1, 2, 3, 4):
        assert_same(ct, w, "kmeans", nbits, 0, 0)
    symmetric = np.tile(np.array([-1, 1, -2, 2], np.float16), (100, 30))
    assert_same(ct, symmetric, "kmeans", 1, 0, 0)


def lloyd(x, k, iters=100, seed=0):
    """Plain Lloyd k-means (random distinct starting points), the reference for small groups."""
    rng = np.random.default_rng(seed)
    x = x.reshape(len(x), -1).astype(np.float64)
    uniq = np.unique(x, axis=0)
    c = uniq[rng.choice(len(uniq), size=min(k, len(uniq)), replace=False)]
    for _ in range(iters):
        lab = ((x[:, None, :] - c[None]) ** 2).sum(-1).argmin(1)
        c = np.array([x[lab == j].mean(0) if (lab == j).any() else c[j] for j in range(len(c))])
    return ((x - c[lab]) ** 2).sum()


def reconstruction_error(w, got, axis, cluster_dim=1):
    lut, idx, _, _ = got
    groups = lut.shape[axis]
    wt = np.swapaxes(w, 0, axis).astype(np.float64)
    it = np.swapaxes(idx, 0, axis)
    lt = np.swapaxes(lut, 0, axis).reshape(groups, lut.shape[-2], cluster_dim).astype(np.float64)
    err = 0.0
    rows = wt.shape[0] // groups
    for g in range(groups):
        part = wt[g * rows:(g + 1) * rows]
        vec = np.moveaxis(part.reshape(rows // cluster_dim, cluster_dim, *part.shape[1:]), 1, -1)
        err += ((vec - lt[g][it[g * rows // cluster_dim:(g + 1) * rows // cluster_dim]]) ** 2).sum()
    return err


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_kmeans_small_groups_beat_lloyd(dtype):
    # where coremltools uses scikit-learn, the exact solver's error is at most a k-means run's
    try:
        from sklearn.cluster import KMeans
    except ImportError:
        KMeans = None
    rng = np.random.default_rng(3)
    w = (rng.standard_normal((24, 30)) * 0.1).astype(dtype)
    for nbits in (1, 2, 3, 4):
        got = ours(w, "kmeans", nbits, 0, 8)
        ours_err = reconstruction_error(w, got, 0)
        ref = 0.0
        for g in range(3):
            part = w[g * 8:(g + 1) * 8].reshape(-1, 1).astype(np.float64)
            if KMeans is not None:
                km = KMeans(2**nbits, init="k-means++", tol=1e-2, n_init=1, random_state=0).fit(part)
                ref += ((part - km.cluster_centers_[km.labels_]) ** 2).sum()
            else:
                ref += lloyd(part, 2**nbits)
        # the LUT is rounded to the weight's dtype: allow that rounding's share
        assert ours_err <= ref * (1 + 1e-3) + 1e-9


@pytest.mark.parametrize("cluster_dim,axis", [(2, 0), (4, 1)])
def test_vector_kmeans_close_to_lloyd(cluster_dim, axis):
    rng = np.random.default_rng(4)
    w = (rng.standard_normal((16, 32)) * 0.1).astype(np.float32)
    got = ours(w, "kmeans", 3, axis, 0, cluster_dim)
    lut, idx, nbits, vector_axis = got
    assert vector_axis == axis and nbits == 3
    assert lut.shape == tuple([1, 1] + [8, cluster_dim])
    err = reconstruction_error(w, got, axis, cluster_dim)
    vecs = np.moveaxis(np.swapaxes(w, 0, axis).reshape(-1, cluster_dim, np.swapaxes(w, 0, axis).shape[1]), 1, -1)
    ref = min(lloyd(vecs.reshape(-1, cluster_dim), 8, seed=s) for s in range(3))
    assert err <= ref * 1.1
    # deterministic
    again = ours(w, "kmeans", 3, axis, 0, cluster_dim)
    assert again[0].tobytes() == lut.tobytes() and np.array_equal(again[1], idx)


def test_kmeans_rejects_nan():
    w = np.ones((4, 4), np.float32)
    w[1, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        ours(w, "kmeans", 2, 0, 0)


@pytest.mark.parametrize("nbits", [1, 2, 3, 4, 6, 8])
def test_pack_bits_matches(ct, nbits):
    _, optimize_utils = ct
    rng = np.random.default_rng(nbits)
    for n in (1, 7, 8, 13, 100):
        v = rng.integers(0, 2**nbits, size=n).astype(np.uint8)
        np.testing.assert_array_equal(_compress.pack_bits(v, nbits), optimize_utils.pack_elements_into_bits(v, nbits))


def test_kmeans1d_matches_coremltools_solver_on_ties():
    # the solver against the weighted 1-D k-means coremltools ships, on inputs full of equal
    # costs (integer and symmetric values, few distinct values with very uneven counts): the same
    # clusters and the same centroid bits
    from coremltools._deps import kmeans1d

    rng = np.random.default_rng(3)
    for trial in range(300):
        kind = trial % 4
        n = int(rng.integers(1, 400 if trial % 10 else 3000))
        if kind == 0:
            values = rng.integers(-50, 50, size=n).astype(np.float64)
        elif kind == 1:
            values = rng.integers(-16, 16, size=n) * 0.125
        elif kind == 2:
            values = np.ldexp(rng.integers(0, 2048, size=n), -rng.integers(0, 12, size=n)) * rng.choice([-1, 1], n)
        else:
            values = rng.standard_normal(n).astype(np.float16).astype(np.float64)
        values = np.unique(values)
        counts = rng.choice([1.0, 2.0, 7.0, 1000.0], size=len(values), p=[0.5, 0.3, 0.15, 0.05])
        k = int(rng.choice([1, 2, 3, 4, 8, 16, 64, 256]))
        ref = kmeans1d.cluster(values, k, weights=counts)
        centroids, clusters = _compress.kmeans1d(values.tolist(), counts.tolist(), k)
        assert clusters == list(ref.clusters), (trial, k)
        assert np.array(centroids).tobytes() == np.array(ref.centroids).tobytes(), (trial, k)
