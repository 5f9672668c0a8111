"""`affine.Form.two_lane_test` against brute force: where it vouches for a form built from %tid.x,
a warp whose last lane lies on first + 31 * stride has every lane on that line, for every
%ntid.x (2-D blocks wrap %tid.x inside a warp) and every warp of the block."""

from __future__ import annotations

import numpy as np
import pytest

from zluda_py.compiler.cpu.affine import Form

NTID = [*range(1, 97), 100, 129, 255, 384, 1000, 1023]
STRIDES = [1, 4, 16, 3 << 20, 1 << 28, 1 << 29, 3 << 29, 1 << 31, (1 << 32) - 4]


def lanes_off_the_line(stride: int, bits: int, ntid: int) -> bool:
    """Whether some warp of a block with this %ntid.x passes the two-lane test with a lane off its line."""
    mod = 1 << bits
    warps = np.arange(max(ntid, 1), dtype=object)[:, None]
    tid = (warps * 32 + np.arange(32, dtype=object)[None, :]) % ntid
    value = (tid * stride) % mod
    line = (value[:, :1] + np.arange(32, dtype=object)[None, :] * stride) % mod
    passes = value[:, 31] == line[:, 31]
    return bool(np.any(passes & np.any(value != line, axis=1)))


@pytest.mark.parametrize("bits", [32, 64])
@pytest.mark.parametrize("stride", STRIDES)
def test_a_vouched_tid_form_has_every_lane_on_the_line(bits, stride):
    form = Form(stride % (1 << bits), bits, tid=True)
    if not form.two_lane_test:
        return
    bad = [n for n in NTID if lanes_off_the_line(stride % (1 << bits), bits, n)]
    assert not bad, f"stride {stride:#x} in {bits} bits: lanes off the line for %ntid.x {bad[:5]}"


def test_small_strides_stay_testable():
    # the fast paths' case: stride = the access size; losing it would send every 2-D access per lane
    assert all(Form(s, bits, tid=True).two_lane_test for s in (1, 2, 4, 8, 16) for bits in (32, 64))
