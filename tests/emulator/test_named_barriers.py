"""Named barriers on the AMDGPU targets (amdgpu/warp.py `_named_barrier`): LDS words whose phase
runs mod 3, with bar.red's count per phase. Here two groups of 64 threads reduce on barriers 1 and
2 seven times in a loop (popc, and `and` true in all rounds but one), so each barrier's phase
wraps twice and every count word is reused; expected values: numpy's count of the predicate per
group and round."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tinygrad", reason="the emulator decodes with tinygrad (pip install '.[test]')")

from zluda_py.emulator import run_ptx  # noqa: E402

pytestmark = pytest.mark.usefixtures("lld")  # AMDGPU code objects need ld.lld (tests/conftest.py)

ROUNDS = 7
PTX = f"""
.version 8.0
.target sm_80
.address_size 64

.visible .entry red_rounds(.param .u64 out)
{{
  .reg .pred %p, %q;
  .reg .b32 %t, %id, %i, %r, %acc, %m, %w, %any;
  .reg .b64 %o, %a;
  mov.u32 %t, %tid.x;
  shr.u32 %id, %t, 6;
  add.u32 %id, %id, 1;
  mov.u32 %i, 0;
  mov.u32 %acc, 0;
LOOP:
  add.u32 %m, %t, %i;
  and.b32 %m, %m, 3;
  setp.eq.u32 %p, %m, 0;
  bar.red.popc.u32 %r, %id, 64, %p;
  mad.lo.u32 %w, %i, 65537, 1;
  mad.lo.u32 %acc, %r, %w, %acc;
  setp.ne.u32 %q, %i, 3;
  bar.red.and.pred %q, %id, 64, %q;
  selp.u32 %any, 1000, 0, %q;
  add.u32 %acc, %acc, %any;
  add.u32 %i, %i, 1;
  setp.lt.u32 %p, %i, {ROUNDS};
  @%p bra LOOP;
  ld.param.u64 %a, [out];
  mul.wide.u32 %o, %t, 4;
  add.s64 %a, %a, %o;
  st.global.u32 [%a], %acc;
  ret;
}}
"""


@pytest.mark.parametrize("arch", ["gfx1100", "gfx950"])
def test_bar_red_with_a_thread_count_in_a_loop(arch: str) -> None:
    out = run_ptx(PTX, "red_rounds", 1, 128, [np.zeros(128, np.uint32)], arch)[0]
    t = np.arange(128)
    expected = np.zeros(128, np.int64)
    for i in range(ROUNDS):
        for group in (t < 64, t >= 64):
            expected[group] += (i * 65537 + 1) * np.count_nonzero((t[group] + i) % 4 == 0) + (1000 if i != 3 else 0)
    np.testing.assert_array_equal(out, expected.astype(np.uint32))
