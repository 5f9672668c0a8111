/* LD_PRELOAD library for launch_probe: logs (to stderr) the launch entry points cudart asks
 * cuGetProcAddress for, and what the driver's launch functions return to it. cudart finds
 * cuGetProcAddress with dlsym on its own handle of libcuda, which preloading alone cannot
 * intercept, so dlsym is wrapped too. Built on the NVIDIA machine only:
 *   gcc -shared -fPIC -o interpose.so interpose.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef int CUresult;
typedef void* (*dlsym_fn)(void*, const char*);
typedef CUresult (*gpa2_fn)(const char*, void**, int, unsigned long long, void*);
typedef CUresult (*gpa1_fn)(const char*, void**, int, unsigned long long);
typedef CUresult (*launch_fn)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              void*, void**, void**);
typedef CUresult (*launchex_fn)(const void*, void*, void**, void**);

static dlsym_fn real_dlsym_fn;
static gpa2_fn real_gpa2;
static gpa1_fn real_gpa1;
static launch_fn real_launch[2];   /* cuLaunchKernel, cuLaunchKernel_ptsz */
static launchex_fn real_launchex[2];

static void* real_dlsym(void* h, const char* name) {
    if (!real_dlsym_fn) {
        real_dlsym_fn = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
        if (!real_dlsym_fn) real_dlsym_fn = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    }
    return real_dlsym_fn(h, name);
}

#define LAUNCH(i, label)                                                                                        \
    static CUresult launch##i(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,        \
                              unsigned bz, unsigned sh, void* s, void** p, void** x) {                         \
        CUresult r = real_launch[i](f, gx, gy, gz, bx, by, bz, sh, s, p, x);                                   \
        fprintf(stderr, "[interpose] %s grid (%u,%u,%u) block (%u,%u,%u) shared %u -> %d\n", label, gx, gy, gz,  \
                bx, by, bz, sh, r);                                                                            \
        return r;                                                                                              \
    }                                                                                                          \
    static CUresult launchex##i(const void* c, void* f, void** p, void** x) {                                  \
        CUresult r = real_launchex[i](c, f, p, x);                                                             \
        fprintf(stderr, "[interpose] %sEx -> %d\n", label, r);                                                 \
        return r;                                                                                              \
    }
LAUNCH(0, "cuLaunchKernel")
LAUNCH(1, "cuLaunchKernel_ptsz")

static CUresult gpa2(const char* sym, void** pfn, int ver, unsigned long long flags, void* st);

static void wrap(const char* sym, void** pfn, int ver, unsigned long long flags, CUresult r) {
    if (!strcmp(sym, "cuGetProcAddress") && r == 0 && *pfn) {  /* cudart asks for it again, by version */
        real_gpa2 = (gpa2_fn)*pfn;
        *pfn = (void*)gpa2;
        return;
    }
    if (strncmp(sym, "cuLaunch", 8) != 0) return;
    fprintf(stderr, "[interpose] cuGetProcAddress(%s, %d, flags %llu) -> %d\n", sym, ver, flags, r);
    if (r != 0 || !*pfn) return;
    int ptsz = (flags & 2) != 0;
    if (!strcmp(sym, "cuLaunchKernel")) {
        real_launch[ptsz] = (launch_fn)*pfn;
        *pfn = ptsz ? (void*)launch1 : (void*)launch0;
    } else if (!strcmp(sym, "cuLaunchKernelEx")) {
        real_launchex[ptsz] = (launchex_fn)*pfn;
        *pfn = ptsz ? (void*)launchex1 : (void*)launchex0;
    }
}

static CUresult gpa2(const char* sym, void** pfn, int ver, unsigned long long flags, void* st) {
    CUresult r = real_gpa2(sym, pfn, ver, flags, st);
    wrap(sym, pfn, ver, flags, r);
    return r;
}

static CUresult gpa1(const char* sym, void** pfn, int ver, unsigned long long flags) {
    CUresult r = real_gpa1(sym, pfn, ver, flags);
    wrap(sym, pfn, ver, flags, r);
    return r;
}

void* dlsym(void* h, const char* name) {
    void* p = real_dlsym(h, name);
    if (p && !strcmp(name, "cuGetProcAddress_v2")) {
        real_gpa2 = (gpa2_fn)p;
        return (void*)gpa2;
    }
    if (p && !strcmp(name, "cuGetProcAddress")) {
        real_gpa1 = (gpa1_fn)p;
        return (void*)gpa1;
    }
    return p;
}
