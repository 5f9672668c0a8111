/* ptxas stand-in: `ptxas [options] file.ptx -o file.cubin` writes a PTX cubin (ptx_cubin.h)
 * holding the PTX, which zluda-py's driver translates when the "cubin" is loaded; NVIDIA's
 * ptxas writes SASS, which it cannot. `zluda run` points Triton at it (TRITON_PTXAS_PATH).
 * Options that tune NVIDIA's code generator are accepted and ignored; `--version` names the
 * CUDA release of the newest PTX ISA the driver accepts (ZL_CUDA_RELEASE, set by the build),
 * from which Triton picks the PTX ISA it writes. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptx_cubin.h"

#ifndef ZL_CUDA_RELEASE
#error "build with -DZL_CUDA_RELEASE=\"13.0\""
#endif

/* options whose value is the next argument, as ptxas spells them */
static const char *const with_value[] = {
    "-o", "--output-file", "-arch", "--gpu-name", "-O", "--opt-level", "-maxrregcount", "--maxrregcount",
    "-e", "--entry", "-m", "--machine", "-def-load-cache", "--def-load-cache", "-def-store-cache",
    "--def-store-cache", "-fmad", "--fmad", "-split-compile", "--split-compile",
};

static int takes_value(const char *opt) {
    for (size_t i = 0; i < sizeof with_value / sizeof *with_value; i++)
        if (!strcmp(opt, with_value[i])) return 1;
    return 0;
}

/* the sm of "sm_86" / "sm_90a" */
static unsigned sm_of(const char *arch) { return strncmp(arch, "sm_", 3) ? 0 : (unsigned)atoi(arch + 3); }

static int fail(const char *what, const char *path) {
    fprintf(stderr, "ptxas fatal   : %s%s%s\n", what, path ? ": " : "", path ? path : "");
    return 255;
}

int main(int argc, char **argv) {
    const char *input = NULL, *output = "elf.o", *arch = NULL;
    int verbose = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *eq = strchr(a, '=');
        if (!strcmp(a, "--version") || !strcmp(a, "-V")) {
            printf("ptxas: zluda-py stand-in (the PTX is kept for the driver to translate)\n"
                   "Cuda compilation tools, release %s, V%s.0\n", ZL_CUDA_RELEASE, ZL_CUDA_RELEASE);
            return 0;
        }
        if (a[0] != '-') {
            input = a;
            continue;
        }
        const char *value = NULL;
        char name[64];
        snprintf(name, sizeof name, "%.*s", eq ? (int)(eq - a) : (int)strlen(a), a);
        if (eq) value = eq + 1;
        else if (takes_value(a)) {
            if (++i == argc) return fail("missing value of option", a);
            value = argv[i];
        }
        if (!strcmp(name, "-o") || !strcmp(name, "--output-file")) output = value;
        else if (!strcmp(name, "-arch") || !strcmp(name, "--gpu-name")) arch = value;
        else if (!strcmp(name, "-v") || !strcmp(name, "--verbose")) verbose = 1;
    }
    if (!input) return fail("no input file", NULL);

    FILE *f = fopen(input, "rb");
    if (!f) return fail("cannot open input file", input);
    size_t cap = 1 << 16, size = 0, got;
    char *ptx = malloc(cap), *bigger;
    while (ptx && (got = fread(ptx + size, 1, cap - size, f)) > 0) {
        if ((size += got) < cap) continue;
        if (!(bigger = realloc(ptx, cap *= 2))) free(ptx);
        ptx = bigger;
    }
    fclose(f);
    if (!ptx) return fail("out of memory reading", input);
    size = strnlen(ptx, size);
    if (!memmem(ptx, size, ".version", 8)) return fail("not PTX (no .version directive)", input);

    zl_part part = {ZL_PART_PTX, ptx, size};
    unsigned sm = arch ? sm_of(arch) : zl_ptx_target(ptx, size);
    size_t total = zl_ptx_cubin(&part, 1, sm, NULL);
    char *image = malloc(total);
    if (!image) return fail("out of memory", NULL);
    zl_ptx_cubin(&part, 1, sm, image);
    FILE *out = fopen(output, "wb");
    if (!out || fwrite(image, 1, total, out) != total || fclose(out)) return fail("cannot write output file", output);
    if (verbose)
        fprintf(stderr, "ptxas info    : %s: PTX kept for zluda-py to translate (sm_%u)\n", input, sm);
    return 0;
}
