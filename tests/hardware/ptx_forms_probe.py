"""Which texture and surface instruction forms an NVIDIA driver loads: one PTX module per form,
loaded as PTX (the driver's JIT) and as a ptxas cubin, each CUresult printed:

    python3 -m tests.hardware.ptx_forms_probe

tests/cuda/e2e_textures.cu's module would not load on an H100 (driver 580.159.04) once it held
inline PTX for the forms below: every launch of it failed with cudaErrorNotSupported. This names
the form (golden/ptx_forms_probe.txt).
"""

from __future__ import annotations

import sys

from tests.hardware.cudadrv import CudaError, Driver
from tests.hardware.record_fuzz import _ptxas

# form name -> instruction(s) over %t (a .u64 handle), %r (.b32 registers), %f (.f32), %h (.b16), %p (.pred)
FORMS = {
    "tex.2d.v4.f32.f32": "tex.2d.v4.f32.f32 {%f1, %f2, %f3, %f4}, [%t, {%f5, %f6}];",
    "tex.2d.v4.f16.f32": "tex.2d.v4.f16.f32 {%h1, %h2, %h3, %h4}, [%t, {%f5, %f6}];",
    "tex.2d.v2.f16x2.f32": "tex.2d.v2.f16x2.f32 {%r1, %r2}, [%t, {%f5, %f6}];",
    "txq.width": "txq.width.b32 %r1, [%t];",
    "txq.channel_order": "txq.channel_order.b32 %r1, [%t];",
    "txq.channel_data_type": "txq.channel_data_type.b32 %r1, [%t];",
    "txq.num_samples": "txq.num_samples.b32 %r1, [%t];",
    "suq.width": "suq.width.b32 %r1, [%t];",
    "suq.channel_data_type": "suq.channel_data_type.b32 %r1, [%t];",
    "suq.memory_layout": "suq.memory_layout.b32 %r1, [%t];",
    "sust.b.2d.v4.b32": "sust.b.2d.v4.b32.trap [%t, {%r5, %r6}], {%r1, %r2, %r3, %r4};",
    "sust.p.2d.v4.b32": "sust.p.2d.v4.b32.trap [%t, {%r5, %r6}], {%r1, %r2, %r3, %r4};",
    "sured.b.add.1d.u32": "sured.b.add.1d.u32.trap [%t, {%r5}], %r1;",
    "sured.b.max.1d.s32": "sured.b.max.1d.s32.trap [%t, {%r5}], %r1;",
    "sured.p.add.1d.u32": "sured.p.add.1d.u32.trap [%t, {%r5}], %r1;",
    "suld.b.2d.v4.b32": "suld.b.2d.v4.b32.trap {%r1, %r2, %r3, %r4}, [%t, {%r5, %r6}];",
    **{f"txq.{q}": f"txq.{q}.b32 %r1, [%t];" for q in ("height", "depth", "normalized_coords", "filter_mode",
       "addr_mode_0", "addr_mode_1", "addr_mode_2", "array_size", "num_mipmap_levels")},
    "txq.level.width": "txq.level.width.b32 %r1, [%t], %r5;",
    **{f"suq.{q}": f"suq.{q}.b32 %r1, [%t];" for q in ("height", "depth", "channel_order", "array_size")},
    "istypep.texref": "istypep.texref %p, %t;",
    "istypep.samplerref": "istypep.samplerref %p, %t;",
    "istypep.surfref": "istypep.surfref %p, %t;",
    "tld4.r.2d": "tld4.r.2d.v4.f32.f32 {%f1, %f2, %f3, %f4}, [%t, {%f5, %f6}];",
}


def module(body: str) -> str:
    return f"""\
.version 8.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 k_t, .param .u64 k_out)
{{
	.reg .u64 %t, %o;
	.reg .b32 %r<8>;
	.reg .f32 %f<8>;
	.reg .b16 %h<8>;
	.reg .pred %p;
	ld.param.u64 %t, [k_t];
	ld.param.u64 %o, [k_out];
	mov.b32 %r1, 1; mov.b32 %r2, 2; mov.b32 %r3, 3; mov.b32 %r4, 4; mov.b32 %r5, 0; mov.b32 %r6, 0;
	mov.f32 %f5, 0f3F000000; mov.f32 %f6, 0f3F000000;
	mov.b16 %h1, 0;
	{body}
	st.global.u32 [%o], %r1;
	ret;
}}
"""


def main() -> int:
    drv = Driver()
    major, minor = drv.compute_capability()
    arch = f"sm_{major}{minor}"
    print(f"# {drv.describe()['name']}, {arch}: form, result of loading it as PTX (driver JIT), as a ptxas {arch} cubin")
    every = " ".join(b for n, b in FORMS.items() if n != "sured.p.add.1d.u32")  # ptxas refuses that one
    loadable = " ".join(b for n, b in FORMS.items() if n not in ("sured.p.add.1d.u32", "suq.channel_data_type",
                                                                 "suq.memory_layout", "suq.channel_order"))
    for name, body in [*FORMS.items(), ("all of them but sured.p", every),
                       ("all but sured.p and suq's channel and layout queries", loadable)]:
        ptx = module(body)
        results = []
        for image in (ptx, None):
            try:
                loaded = drv.load(ptx if image is not None else _ptxas(ptx, arch))
                results.append("0")
                try:  # some forms load but leave their kernel out of the module
                    loaded.function("k")
                except CudaError as e:
                    results[-1] = f"0, cuModuleGetFunction {e.code} {drv.error_name(e.code)}"
            except CudaError as e:
                results.append(f"{e.code} {drv.error_name(e.code)}")
            except Exception as e:  # ptxas refused it
                results.append(f"ptxas: {type(e).__name__}")
        print(f"{name}: jit {results[0]}; cubin {results[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
