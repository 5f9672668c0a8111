/* The PTX cubin: what zluda-py's toolchain stand-ins (NVRTC and nvJitLink under `zluda run`,
 * the ptxas stand-in, cuLinkComplete) hand out where NVIDIA's tools hand out a cubin. It is
 * shaped like one (ELF64, e_machine EM_CUDA = 190, EI_OSABI 0x41, e_flags = sm << 8), so tools
 * that peek at a cubin are content, and it holds no SASS: one section per part, `.zluda.ptx`
 * (PTX text, NUL-terminated) or `.zluda.image` (an image the driver reads PTX from: a fatbin
 * or an nvcc object). The driver recognises it by content (zluda_py/fatbin/ptx_cubin.py), so
 * it survives a copy, a file and another process. Layout: ELF header, .shstrtab, the parts
 * (8-byte aligned), then the section headers, which end the image. */
#ifndef ZLUDA_PTX_CUBIN_H
#define ZLUDA_PTX_CUBIN_H

#include <stddef.h>

enum { ZL_PART_PTX = 0, ZL_PART_IMAGE = 1 };

typedef struct {
    int kind;         /* ZL_PART_PTX or ZL_PART_IMAGE */
    const void *data; /* PTX text (without its NUL) or the image's bytes */
    size_t size;
} zl_part;

/* The size of the PTX cubin holding parts; it is written to out unless out is NULL. */
size_t zl_ptx_cubin(const zl_part *parts, size_t n, unsigned sm, void *out);

/* Whether data is a PTX cubin (what zl_ptx_cubin writes). */
int zl_is_ptx_cubin(const void *data, size_t size);

/* The parts of a PTX cubin: *n is set to their count, and at most max are stored in parts
 * (pointing into data). Returns 0, or -1 when data is not a well-formed PTX cubin. */
int zl_ptx_cubin_parts(const void *data, size_t size, zl_part *parts, size_t max, size_t *n);

/* The sm of the PTX's `.target sm_XX` directive (86), 0 when it has none. */
unsigned zl_ptx_target(const char *ptx, size_t size);

#endif
