"""Property tests of torch tensors through PyPTO: registered ops over random shapes, ranks and
dtypes against torch's own ops, and kernel launches on random views."""
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from .ops import GELU, SOFTMAX, scale_add, torch

DTYPES = {"float32": 2e-6, "float16": 2e-3, "bfloat16": 1.6e-2}
SETTINGS = settings(max_examples=12, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(shape=st.lists(st.integers(1, 70), min_size=1, max_size=3).map(tuple),
       dtype=st.sampled_from(sorted(DTYPES)), seed=st.integers(0, 2 ** 31 - 1))
def test_gelu_then_softmax_chain_matches_torch(shape, dtype, seed):
    gen = torch.Generator().manual_seed(seed)
    x = (torch.randn(shape, generator=gen) * 3).to(getattr(torch, dtype))
    y = GELU(x)
    expected = torch.nn.functional.gelu(x.float(), approximate="tanh").to(x.dtype)
    tol = DTYPES[dtype]
    torch.testing.assert_close(y, expected, rtol=tol, atol=tol)
    if x.dtype == torch.float32 and len(shape) == 2:
        torch.testing.assert_close(SOFTMAX(y), torch.softmax(y, dim=1), rtol=1e-5, atol=1e-6)


@SETTINGS
@given(n=st.integers(1, 3000), step=st.integers(1, 3), offset=st.integers(0, 5),
       alpha=st.floats(-4, 4, allow_nan=False, width=32))
def test_launch_on_views_matches_torch(n, step, offset, alpha):
    base = torch.randn(offset + n * step)
    x = base[offset::step][:n]
    y, out = torch.randn(n), torch.full((n,), float("nan"))
    scale_add[(-(-n // 512),)](x, y, out, n, alpha, BLOCK=512)
    torch.testing.assert_close(out, x * alpha + y, rtol=1e-6, atol=1e-6)
