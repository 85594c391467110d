"""Symbolic sizes through the torch.export importer: F.unfold of symbolic spatial sizes, as_strided views,
upsampling to sizes known at run time only, topk with a symbolic k, inputs declared as
multiples (8 * k) and the sizes derived from them, and affine_grid. Each dynamic program is
checked against torch eager on several input sizes."""

import pytest
import torch
import torch.nn.functional as F
from support.torch_util import DIALECTS, Fn, check, r

torch.manual_seed(0)
D = torch.export.Dim


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("kw", [dict(kernel_size=3, padding=1), dict(kernel_size=(2, 3), stride=2, padding=1),
                                dict(kernel_size=2, dilation=2, padding=(0, 1))])
def test_unfold_symbolic_spatial(dialect, kw):
    dyn = (({2: D("h", min=4, max=32), 3: D("w", min=4, max=32)},),)
    check(Fn(lambda x: F.unfold(x, **kw)), (r(2, 3, 8, 8),), dialect, dynamic_shapes=dyn,
          more_args=[(r(2, 3, 5, 11),), (r(2, 3, 16, 6),)])


@pytest.mark.parametrize("dialect", DIALECTS)
def test_unfold_symbolic_batch_and_spatial_fp16(dialect):
    dyn = (({0: D("b", min=1, max=8), 3: D("w", min=4, max=32)},),)
    check(Fn(lambda x: F.unfold(x, 3)), (r(2, 2, 6, 8),), dialect, dynamic_shapes=dyn, precision="fp16",
          rtol=2e-2, more_args=[(r(3, 2, 6, 13),)])


# torch's core decomposition of several modes computes sizes and scales as float arithmetic on
# symbolic sizes (ToFloat, Float('2.0'), TruncToInt, FloatTrueDiv): whole numbers and ratios of sizes
UPSAMPLE_MODES = [("nearest", None), ("nearest-exact", None), ("bilinear", False), ("bilinear", True),
                  ("bicubic", False), ("bicubic", True)]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("mode,ac", UPSAMPLE_MODES)
def test_upsample_to_symbolic_size(dialect, mode, ac):
    # the target size comes from another input: known at run time only
    fn = Fn(lambda x, y: F.interpolate(x, size=(y.shape[2] * 2, y.shape[3]), mode=mode, align_corners=ac))
    dyn = ({}, {2: D("h2", min=2, max=32), 3: D("w2", min=2, max=32)})
    check(fn, (r(1, 2, 4, 5), r(1, 1, 5, 6)), dialect, dynamic_shapes=(dyn,),
          more_args=[(r(1, 2, 4, 5), r(1, 1, 3, 2)), (r(1, 2, 4, 5), r(1, 1, 9, 17))])


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("mode,ac", UPSAMPLE_MODES)
def test_upsample_symbolic_input_by_factor(dialect, mode, ac):
    fn = Fn(lambda x: F.interpolate(x, scale_factor=2, mode=mode, align_corners=ac))
    dyn = (({2: D("h", min=2, max=32), 3: D("w", min=2, max=32)},),)
    check(fn, (r(1, 2, 4, 5),), dialect, dynamic_shapes=dyn, more_args=[(r(1, 2, 7, 3),), (r(1, 2, 2, 9),)])


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("mode", ["linear", "nearest"])
def test_upsample_1d_to_symbolic_size(dialect, mode):
    fn = Fn(lambda x, y: F.interpolate(x, size=y.shape[1] + 3, mode=mode))
    check(fn, (r(1, 2, 6), r(1, 5)), dialect, dynamic_shapes=(({}, {1: D("n", min=1, max=32)}),),
          more_args=[(r(1, 2, 6), r(1, 11))])


class PosEmbed(torch.nn.Module):
    """A ViT position embedding on a 14x14 patch grid interpolated (bicubic) to the patch grid of
    the input image, as DINOv2 does for images of other sizes."""

    def __init__(self):
        super().__init__()
        self.pos = torch.nn.Parameter(torch.randn(1, 8, 14, 14))
        self.patch = torch.nn.Conv2d(3, 8, 14, stride=14)

    def forward(self, x):
        p = self.patch(x)
        pos = F.interpolate(self.pos, size=(x.shape[2] // 14, x.shape[3] // 14), mode="bicubic", align_corners=False)
        return (p + pos).flatten(2).transpose(1, 2)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_position_embedding_interpolated_to_image_size(dialect):
    dyn = ({2: 14 * D("ph", min=2, max=40), 3: 14 * D("pw", min=2, max=40)},)
    check(PosEmbed().eval(), (r(1, 3, 224, 224),), dialect, dynamic_shapes=dyn, rtol=1e-3,
          more_args=[(r(1, 3, 140, 294),), (r(1, 3, 28, 56),)])


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("largest", [True, False])
def test_topk_symbolic_k(dialect, largest):
    fn = Fn(lambda x, y: torch.topk(x, y.shape[0], dim=1, largest=largest))
    check(fn, (r(3, 8), r(4)), dialect, dynamic_shapes=((None, {0: D("k", min=1, max=8)}),),
          more_args=[(r(3, 8), r(1)), (r(3, 8), r(8))])


@pytest.mark.parametrize("dialect", DIALECTS)
def test_topk_symbolic_axis_and_k(dialect):
    fn = Fn(lambda x: torch.topk(x, x.shape[1] // 2, dim=1).values)
    check(fn, (r(3, 8),), dialect, dynamic_shapes=(({1: 2 * D("n", min=2, max=16)},),),
          more_args=[(r(3, 6),), (r(3, 20),)])


K = D("k", min=2, max=16)
MULT8 = (({1: 8 * K},),)


class UNet(torch.nn.Module):
    """Stride-2 stages and upsampled skip connections on an input whose sizes are multiples of 8."""

    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.c2 = torch.nn.Conv2d(4, 8, 3, stride=2, padding=1)
        self.c3 = torch.nn.Conv2d(8, 8, 3, stride=2, padding=1)
        self.u = torch.nn.Conv2d(16, 4, 3, padding=1)
        self.o = torch.nn.Conv2d(8, 2, 1)

    def forward(self, x):
        a = self.c1(x)
        b = self.c2(a)
        c = self.c3(b)
        b2 = self.u(torch.cat([F.interpolate(c, scale_factor=2.0, mode="nearest"), b], 1))
        return self.o(torch.cat([F.interpolate(b2, scale_factor=2.0, mode="bilinear"), a], 1))


MULTIPLE_CASES = {
    "frames": lambda x: x.reshape(x.shape[0], x.shape[1] // 8, 8).mean(-1),
    "pad_then_slice": lambda x: F.pad(x, (1, 1))[:, : x.shape[1] // 8 + 2],
    "derived_factories": lambda x: (torch.zeros(x.shape[0], x.shape[1] // 8) + x[:, ::8],
                                    x.new_zeros(2 * (x.shape[1] // 8)), torch.full((x.shape[1] // 8 + 2,), 3.0)),
    "derived_arange": lambda x: torch.arange(x.shape[1] // 8) * 2 + x[:, -(x.shape[1] // 8):],
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", sorted(MULTIPLE_CASES))
def test_input_declared_as_multiple(dialect, name):
    check(Fn(MULTIPLE_CASES[name]), (r(2, 32),), dialect, dynamic_shapes=MULT8,
          more_args=[(r(2, 48),), (r(2, 128),)])


@pytest.mark.parametrize("dialect", DIALECTS)
def test_unet_on_multiples_of_8(dialect):
    dyn = ({2: 8 * K, 3: 8 * D("w", min=2, max=16)},)
    check(UNet().eval(), (r(1, 3, 32, 32),), dialect, dynamic_shapes=dyn,
          more_args=[(r(1, 3, 48, 64),), (r(1, 3, 16, 128),)])


def test_input_not_a_multiple_is_refused_at_predict():
    from support.torch_util import convert, export
    ep = export(Fn(MULTIPLE_CASES["pad_then_slice"]), (r(2, 32),), "training", MULT8)
    mm = convert(ep)
    with pytest.raises(Exception, match="multiple_of_8"):
        mm.predict({"a_0": r(2, 20).numpy()})


# (a one-row grid only as exported: torch's own core decomposition of it does not export, an
# in-place detach_)
@pytest.mark.parametrize("dialect,ac,size", [(d, ac, size) for d in DIALECTS for ac in (False, True)
                                             for size in ((2, 3, 4, 5), (2, 3, 1, 6), (2, 1, 3, 4, 5))
                                             if d == "training" or size[2] != 1])
def test_affine_grid(dialect, ac, size):
    theta = r(2, len(size) - 2, len(size) - 1)
    check(Fn(lambda t: F.affine_grid(t, size, align_corners=ac)), (theta,), dialect)


class _PooledHead(torch.nn.Module):
    """Swin's head: channels-last features permuted to NCHW, pooled to 1x1 and flattened (the
    decomposition views the pooled tensor through as_strided with its own sizes and strides)."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(8)
        self.pool = torch.nn.AdaptiveAvgPool2d(1)
        self.fc = torch.nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.norm(x).permute(0, 3, 1, 2)), 1))


@pytest.mark.parametrize("dialect", DIALECTS)
def test_as_strided_identity_view_of_symbolic_batch(dialect):
    check(_PooledHead().eval(), (r(2, 5, 5, 8),), dialect, dynamic_shapes=({0: D("b", min=1, max=8)},),
          more_args=[(r(1, 5, 5, 8),), (r(5, 5, 5, 8),)])


def test_as_strided_other_view_of_symbolic_sizes_is_refused():
    # a view of a tensor with a symbolic size that is not the tensor itself needs sizes known when
    # converting: refused, naming the op
    from support.torch_util import convert, export

    fn = Fn(lambda x: torch.as_strided(x, (x.shape[0], 2), (4, 2)))
    ep = export(fn, (r(3, 4),), dynamic_shapes=(({0: D("b", min=2, max=8)},),))
    with pytest.raises(Exception, match="as_strided.*supported only as the tensor itself"):
        convert(ep)
