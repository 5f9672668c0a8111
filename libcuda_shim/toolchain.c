/* NVRTC and nvJitLink under `zluda run` (part of libzluda_preload.so): a "cubin" asked of them
 * is a PTX cubin (ptx_cubin.h) holding the PTX, which the driver translates; NVIDIA's cubins
 * hold SASS, which it cannot. The real libraries keep doing the work (C++ compilation with its
 * diagnostics and headers, LTO), only told to stop at PTX.
 *
 * How calls reach these wrappers:
 *  - programs linked against libnvrtc/libnvJitLink: this library is preloaded, so its exported
 *    names win; each wrapper finds the real function with RTLD_NEXT;
 *  - programs that dlopen the library and dlsym its functions (cuda-python, CuPy, ctypes): the
 *    dlsym below answers a wrapped name, looked up in a handle of the real library, with the
 *    wrapper, and remembers the real function. Only the wrapped names are touched: every other
 *    lookup is a tail call to glibc's dlsym, which thereby sees the original caller (RTLD_NEXT
 *    is relative to the caller).
 * One real library of each kind per process is assumed (the first one a wrapper meets). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptx_cubin.h"

enum { NVRTC_SUCCESS = 0, NVRTC_ERROR_OUT_OF_MEMORY = 1, NVRTC_ERROR_INTERNAL_ERROR = 11 };
enum { NVJITLINK_SUCCESS = 0, NVJITLINK_ERROR_INTERNAL = 6 };
enum { NVJITLINK_INPUT_CUBIN = 1, NVJITLINK_INPUT_PTX = 2, NVJITLINK_INPUT_LTOIR = 3, NVJITLINK_INPUT_ANY = 10 };

/* ---- finding the real functions ---- */
typedef void *(*dlsym_fn)(void *, const char *);
static dlsym_fn real_dlsym;
static pthread_once_t dlsym_once = PTHREAD_ONCE_INIT;

static void resolve_dlsym(void) {
    /* dlvsym: a plain dlsym("dlsym") from here would find this file's dlsym */
    real_dlsym = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!real_dlsym) real_dlsym = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
}

typedef struct {
    const char *soname_prefix; /* "libnvrtc": which files are this library */
    void *handle;              /* our own reference to the real library, once found */
} toolchain;
static toolchain nvrtc = {"libnvrtc", NULL}, jitlink = {"libnvJitLink", NULL};

typedef struct {
    const char *name;
    toolchain *lib;
    void *real;
} slot;

/* Which real library fn lives in (NULL: none of ours); takes a reference to it the first time. */
static toolchain *library_of(void *fn) {
    Dl_info info;
    if (!fn || !dladdr(fn, &info) || !info.dli_fname) return NULL;
    const char *base = strrchr(info.dli_fname, '/');
    base = base ? base + 1 : info.dli_fname;
    toolchain *t = !strncmp(base, nvrtc.soname_prefix, strlen(nvrtc.soname_prefix)) ? &nvrtc
                 : !strncmp(base, jitlink.soname_prefix, strlen(jitlink.soname_prefix)) ? &jitlink : NULL;
    if (t && !__atomic_load_n(&t->handle, __ATOMIC_ACQUIRE)) {
        void *h = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
        void *none = NULL;
        if (h && !__atomic_compare_exchange_n(&t->handle, &none, h, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            dlclose(h);
    }
    return t;
}

static void adopt(slot *s, void *fn) {
    if (library_of(fn) == s->lib) __atomic_store_n(&s->real, fn, __ATOMIC_RELEASE);
}

/* The real function behind a wrapper: the one dlsym handed out, else the next definition
 * after this library (the program is linked against the real one). */
static void *real_of(slot *s) {
    void *fn = __atomic_load_n(&s->real, __ATOMIC_ACQUIRE);
    if (!fn) {
        pthread_once(&dlsym_once, resolve_dlsym);
        adopt(s, real_dlsym(RTLD_NEXT, s->name));
        fn = __atomic_load_n(&s->real, __ATOMIC_ACQUIRE);
    }
    return fn;
}

/* Another function of a real library that a wrapper already met. */
static void *real_in(toolchain *t, const char *name) {
    void *h = __atomic_load_n(&t->handle, __ATOMIC_ACQUIRE);
    return h ? real_dlsym(h, name) : NULL;
}

/* glibc's dlsym reads its caller's address (RTLD_NEXT is relative to it): it must be
 * reached by a jump, which -O2 makes of a call in tail position, and musttail guarantees */
#if defined(__has_attribute) && __has_attribute(musttail)
#define TAIL_CALL __attribute__((musttail))
#else
#define TAIL_CALL
#endif

static int trace(void) { return getenv("ZLUDA_TRACE") != NULL; }

/* ---- NVRTC ---- */
typedef int (*compile_fn)(void *, int, const char *const *);
typedef int (*size_fn)(void *, size_t *);
typedef int (*get_fn)(void *, char *);

/* "-arch=sm_86" -> "-arch=compute_86", or the value of a separate -arch: "sm_86" ->
 * "compute_86" (allocated); NULL when opt names no SASS target */
static char *to_compute(const char *opt, int value) {
    static const char *const options[] = {"-arch=", "--gpu-architecture="};
    for (size_t i = 0; i < (value ? 1 : sizeof options / sizeof *options); i++) {
        size_t n = value ? 0 : strlen(options[i]);
        if (strncmp(opt, options[i], n) || strncmp(opt + n, "sm_", 3)) continue;
        char *out = malloc(strlen(opt) + 6);  /* "sm_" becomes "compute_", and the NUL */
        if (out) sprintf(out, "%.*scompute_%s", (int)n, opt, opt + n + 3);
        return out;
    }
    return NULL;
}

/* nvrtcCompileProgram with every SASS target (-arch=sm_XX, --gpu-architecture=sm_XX, -arch
 * sm_XX) turned into its virtual one, so that NVRTC stops at PTX. */
static int nvrtc_compile(slot *s, void *prog, int n, const char *const *opts) {
    compile_fn real = (compile_fn)real_of(s);
    if (!real) return NVRTC_ERROR_INTERNAL_ERROR;
    if (n <= 0 || !opts) return real(prog, n, opts);
    const char **copy = calloc((size_t)n, sizeof *copy);
    char **owned = calloc((size_t)n, sizeof *owned);
    int rc = NVRTC_ERROR_OUT_OF_MEMORY;
    if (copy && owned) {
        for (int i = 0; i < n; i++) {
            int value = i > 0 && opts[i - 1] &&
                        (!strcmp(opts[i - 1], "-arch") || !strcmp(opts[i - 1], "--gpu-architecture"));
            owned[i] = opts[i] ? to_compute(opts[i], value) : NULL;
            copy[i] = owned[i] ? owned[i] : opts[i];
            if (owned[i] && trace()) fprintf(stderr, "zluda: nvrtc option %s -> %s\n", opts[i], owned[i]);
        }
        rc = real(prog, n, copy);
        for (int i = 0; i < n; i++) free(owned[i]);
    }
    free(copy);
    free(owned);
    return rc;
}

/* nvrtcGetCUBINSize / nvrtcGetCUBIN: the PTX cubin of nvrtcGetPTX's text. A program without
 * PTX (compiled to LTO-IR) gets the real answer. */
static int nvrtc_cubin(slot *s, void *prog, size_t *size_ret, char *out) {
    void *real = real_of(s);
    if (!real) return NVRTC_ERROR_INTERNAL_ERROR;
    size_fn ptx_size = (size_fn)real_in(&nvrtc, "nvrtcGetPTXSize");
    get_fn get_ptx = (get_fn)real_in(&nvrtc, "nvrtcGetPTX");
    size_t n = 0;
    if (!ptx_size || !get_ptx || (!size_ret && !out) || ptx_size(prog, &n) != NVRTC_SUCCESS || n < 2)
        return size_ret ? ((size_fn)real)(prog, size_ret) : ((get_fn)real)(prog, out);
    char *ptx = malloc(n);
    if (!ptx) return NVRTC_ERROR_OUT_OF_MEMORY;
    int rc = get_ptx(prog, ptx);
    if (rc == NVRTC_SUCCESS) {
        zl_part part = {ZL_PART_PTX, ptx, strnlen(ptx, n)};
        unsigned sm = zl_ptx_target(ptx, part.size);
        if (size_ret) *size_ret = zl_ptx_cubin(&part, 1, sm, NULL);
        if (out) zl_ptx_cubin(&part, 1, sm, out);
    }
    free(ptx);
    return rc;
}

static int nvrtc_cubin_size(slot *s, void *prog, size_t *size_ret) { return nvrtc_cubin(s, prog, size_ret, NULL); }
static int nvrtc_get_cubin(slot *s, void *prog, char *out) { return nvrtc_cubin(s, prog, NULL, out); }

/* ---- nvJitLink ---- */
/* What we keep of a link: its PTX and images (linked by the driver when loaded), whether
 * anything went to the real linker instead (LTO-IR), and the PTX cubin once complete. */
typedef struct link {
    struct link *next;
    void *handle; /* the real nvJitLinkHandle, which the program holds */
    unsigned sm;
    int lto, forwarded;
    zl_part *parts;
    size_t nparts;
    unsigned char *image;
    size_t image_size;
} link;
static link *links;
static pthread_mutex_t links_lock = PTHREAD_MUTEX_INITIALIZER;

static link *find_link(void *handle) {
    pthread_mutex_lock(&links_lock);
    link *l = links;
    while (l && l->handle != handle) l = l->next;
    pthread_mutex_unlock(&links_lock);
    return l;
}

static void free_link(link *l) {
    for (size_t i = 0; i < l->nparts; i++) free((void *)l->parts[i].data);
    free(l->parts);
    free(l->image);
    free(l);
}

static int add_part(link *l, int kind, const void *data, size_t size) {
    zl_part *parts = realloc(l->parts, (l->nparts + 1) * sizeof *parts);
    void *copy = malloc(size ? size : 1);
    if (!parts || !copy) {
        free(copy);
        if (parts) l->parts = parts;
        return -1;
    }
    memcpy(copy, data, size);
    l->parts = parts;
    l->parts[l->nparts++] = (zl_part){kind, copy, size};
    return 0;
}

typedef int (*create_fn)(void **, uint32_t, const char **);

/* nvJitLinkCreate; "-lto" links also get "-ptx", so that LTO-IR inputs become linked PTX */
static int jitlink_create(slot *s, void **handle, uint32_t n, const char **opts) {
    create_fn real = (create_fn)real_of(s);
    if (!real) return NVJITLINK_ERROR_INTERNAL;
    link *l = calloc(1, sizeof *l);
    const char **copy = calloc(n + 1, sizeof *copy);
    if (!l || !copy) {
        free(l);
        free(copy);
        return real(handle, n, opts);
    }
    int ptx = 0;
    for (uint32_t i = 0; i < n && opts; i++) {
        copy[i] = opts[i];
        if (!opts[i]) continue;
        if (!strncmp(opts[i], "-arch=sm_", 9)) l->sm = (unsigned)atoi(opts[i] + 9);
        l->lto |= !strcmp(opts[i], "-lto");
        ptx |= !strcmp(opts[i], "-ptx");
    }
    int added = l->lto && !ptx;
    if (added) copy[n] = "-ptx";
    int rc = real(handle, n + (uint32_t)added, copy);
    free(copy);
    if (rc != NVJITLINK_SUCCESS || !handle) {
        free(l);
        return rc;
    }
    l->handle = *handle;
    pthread_mutex_lock(&links_lock);
    l->next = links;
    links = l;
    pthread_mutex_unlock(&links_lock);
    return rc;
}

typedef int (*destroy_fn)(void **);

static int jitlink_destroy(slot *s, void **handle) {
    destroy_fn real = (destroy_fn)real_of(s);
    if (!real) return NVJITLINK_ERROR_INTERNAL;
    if (handle) {
        pthread_mutex_lock(&links_lock);
        for (link **p = &links; *p; p = &(*p)->next)
            if ((*p)->handle == *handle) {
                link *l = *p;
                *p = l->next;
                free_link(l);
                break;
            }
        pthread_mutex_unlock(&links_lock);
    }
    return real(handle);
}

static int looks_like_ptx(const char *data, size_t size) {
    return memmem(data, size, ".version", 8) && memmem(data, size, ".target", 7);
}

/* Whether data is CUDA's device runtime library (libcudadevrt.a): a GNU ar archive whose only
 * object is cuda_device_runtime.o (a long name: its header says "/N", N its offset in the "//"
 * table). Its code is SASS, and PTX ending in the driver's private system calls; the driver
 * provides the functions it defines instead (zluda_py/compiler/device_runtime.py). */
static int is_device_runtime(const unsigned char *data, size_t size) {
    static const char member[] = "cuda_device_runtime.o/\n";
    const char *names = NULL;
    size_t names_size = 0;
    int found = 0;
    if (size < 8 || memcmp(data, "!<arch>\n", 8)) return 0;
    for (size_t at = 8; at + 60 <= size;) {
        const char *header = (const char *)data + at;
        char field[11] = {0};
        memcpy(field, header + 48, 10);
        size_t length = strtoull(field, NULL, 10);
        if (length > size - at - 60) return 0;
        if (!memcmp(header, "// ", 3)) {
            names = header + 60;
            names_size = length;
        } else if (header[0] == '/' && header[1] >= '0' && header[1] <= '9') {
            memcpy(field, header + 1, 10);
            size_t offset = strtoull(field, NULL, 10);
            if (!names || offset > names_size || names_size - offset < sizeof member - 1 ||
                memcmp(names + offset, member, sizeof member - 1))
                return 0;
            found = 1;
        } else if (memcmp(header, "/ ", 2)) {  /* anything but the symbol table: another object */
            return 0;
        }
        at += 60 + length + (length & 1);
    }
    return found;
}

/* An input we keep (0: also the device runtime, dropped), or one for the real linker (1):
 * LTO-IR, and in an LTO link whatever may hold LTO-IR. Returns -1 when out of memory. */
static int keep_input(link *l, int type, const void *data, size_t size) {
    size_t n;
    if (is_device_runtime(data, size)) {
        if (trace()) fprintf(stderr, "zluda: nvJitLink: libcudadevrt.a left out (the driver provides it)\n");
        return 0;
    }
    if (zl_ptx_cubin_parts(data, size, NULL, 0, &n) == 0) {  /* ours, e.g. from NVRTC */
        zl_part *parts = malloc((n ? n : 1) * sizeof *parts);
        int rc = parts ? 0 : -1;
        zl_ptx_cubin_parts(data, size, parts, n, &n);
        for (size_t i = 0; i < n && !rc; i++) rc = add_part(l, parts[i].kind, parts[i].data, parts[i].size);
        free(parts);
        return rc;
    }
    if (type == NVJITLINK_INPUT_PTX || (type == NVJITLINK_INPUT_ANY && looks_like_ptx(data, size)))
        return add_part(l, ZL_PART_PTX, data, strnlen(data, size));
    if (type == NVJITLINK_INPUT_LTOIR || l->lto) return 1;
    /* a fatbin, nvcc object or cubin: the driver reads its PTX when the image is loaded */
    return add_part(l, ZL_PART_IMAGE, data, size);
}

typedef int (*add_data_fn)(void *, int, const void *, size_t, const char *);

static int jitlink_add_data(slot *s, void *handle, int type, const void *data, size_t size, const char *name) {
    add_data_fn real = (add_data_fn)real_of(s);
    if (!real) return NVJITLINK_ERROR_INTERNAL;
    link *l = find_link(handle);
    int keep = l && data && size ? keep_input(l, type, data, size) : 1;
    if (keep < 0) return NVJITLINK_ERROR_INTERNAL;
    if (keep == 0) return NVJITLINK_SUCCESS;
    if (l) l->forwarded = 1;
    return real(handle, type, data, size, name);
}

typedef int (*add_file_fn)(void *, int, const char *);

static int jitlink_add_file(slot *s, void *handle, int type, const char *path) {
    add_file_fn real = (add_file_fn)real_of(s);
    if (!real) return NVJITLINK_ERROR_INTERNAL;
    link *l = find_link(handle);
    FILE *f = l && path ? fopen(path, "rb") : NULL;
    int keep = 1;
    if (f) {
        /* read whole: fseek/ftell would miss a pipe's size */
        size_t cap = 1 << 16, size = 0, got;
        unsigned char *data = malloc(cap), *bigger;
        while (data && (got = fread(data + size, 1, cap - size, f)) > 0) {
            if ((size += got) < cap) continue;
            if (!(bigger = realloc(data, cap *= 2))) free(data);
            data = bigger;
        }
        fclose(f);
        keep = data ? keep_input(l, type, data, size) : -1;
        free(data);
    }
    if (keep < 0) return NVJITLINK_ERROR_INTERNAL;
    if (keep == 0) return NVJITLINK_SUCCESS;
    if (l) l->forwarded = 1;
    return real(handle, type, path);  /* also reports a missing file as NVIDIA's does */
}

typedef int (*complete_fn)(void *);

/* nvJitLinkComplete: the real link runs for what went to it (LTO-IR; its linked PTX joins
 * ours); the PTX cubin of everything is built here. */
static int jitlink_complete(slot *s, void *handle) {
    complete_fn real = (complete_fn)real_of(s);
    if (!real) return NVJITLINK_ERROR_INTERNAL;
    link *l = find_link(handle);
    if (!l || (!l->forwarded && !l->nparts)) return real(handle);
    if (l->forwarded) {
        int rc = real(handle);
        if (rc != NVJITLINK_SUCCESS) return rc;
        size_fn ptx_size = (size_fn)real_in(&jitlink, "nvJitLinkGetLinkedPtxSize");
        get_fn get_ptx = (get_fn)real_in(&jitlink, "nvJitLinkGetLinkedPtx");
        size_t n = 0;
        if (ptx_size && get_ptx && ptx_size(handle, &n) == NVJITLINK_SUCCESS && n > 1) {
            char *ptx = malloc(n);
            rc = ptx && get_ptx(handle, ptx) == NVJITLINK_SUCCESS ? add_part(l, ZL_PART_PTX, ptx, strnlen(ptx, n)) : -1;
            free(ptx);
            if (rc) return NVJITLINK_ERROR_INTERNAL;
        }
    }
    free(l->image);
    l->image_size = zl_ptx_cubin(l->parts, l->nparts, l->sm, NULL);
    l->image = malloc(l->image_size);
    if (!l->image) return NVJITLINK_ERROR_INTERNAL;
    zl_ptx_cubin(l->parts, l->nparts, l->sm, l->image);
    if (trace()) fprintf(stderr, "zluda: nvJitLink: a PTX cubin of %zu parts\n", l->nparts);
    return NVJITLINK_SUCCESS;
}

static int jitlink_cubin_size(slot *s, void *handle, size_t *size) {
    size_fn real = (size_fn)real_of(s);
    if (!real) return NVJITLINK_ERROR_INTERNAL;
    link *l = find_link(handle);
    if (!l || !l->image || !size) return real(handle, size);
    *size = l->image_size;
    return NVJITLINK_SUCCESS;
}

static int jitlink_get_cubin(slot *s, void *handle, void *out) {
    get_fn real = (get_fn)real_of(s);
    if (!real) return NVJITLINK_ERROR_INTERNAL;
    link *l = find_link(handle);
    if (!l || !l->image || !out) return real(handle, out);
    memcpy(out, l->image, l->image_size);
    return NVJITLINK_SUCCESS;
}

/* ---- the exported wrappers ----
 * X(symbol, library, implementation, parameters, arguments). nvJitLink's header maps each function
 * to a versioned symbol (nvJitLinkCreate -> __nvJitLinkCreate_13_5); a program built with an
 * older header calls an older one, so every version of CUDA 12 and 13 is wrapped, each
 * forwarding to the real function of its own name. */
#define ARGS(...) __VA_ARGS__
#define JITLINK_V(X, fn, impl, P, A, v) X(__nvJitLink##fn##_##v, jitlink, impl, P, A)
#define JITLINK(X, fn, impl, P, A)                                                                   \
    X(nvJitLink##fn, jitlink, impl, P, A)                                                            \
    JITLINK_V(X, fn, impl, P, A, 12_0) JITLINK_V(X, fn, impl, P, A, 12_1) JITLINK_V(X, fn, impl, P, A, 12_2) \
    JITLINK_V(X, fn, impl, P, A, 12_3) JITLINK_V(X, fn, impl, P, A, 12_4) JITLINK_V(X, fn, impl, P, A, 12_5) \
    JITLINK_V(X, fn, impl, P, A, 12_6) JITLINK_V(X, fn, impl, P, A, 12_7) JITLINK_V(X, fn, impl, P, A, 12_8) \
    JITLINK_V(X, fn, impl, P, A, 12_9) JITLINK_V(X, fn, impl, P, A, 13_0) JITLINK_V(X, fn, impl, P, A, 13_1) \
    JITLINK_V(X, fn, impl, P, A, 13_2) JITLINK_V(X, fn, impl, P, A, 13_3) JITLINK_V(X, fn, impl, P, A, 13_4) \
    JITLINK_V(X, fn, impl, P, A, 13_5) JITLINK_V(X, fn, impl, P, A, 13_6) JITLINK_V(X, fn, impl, P, A, 13_7) \
    JITLINK_V(X, fn, impl, P, A, 13_8) JITLINK_V(X, fn, impl, P, A, 13_9)

#define WRAPPED(X)                                                                                   \
    X(nvrtcCompileProgram, nvrtc, nvrtc_compile, (void *p, int n, const char *const *o), (p, n, o))  \
    X(nvrtcGetCUBINSize, nvrtc, nvrtc_cubin_size, (void *p, size_t *r), (p, r))                      \
    X(nvrtcGetCUBIN, nvrtc, nvrtc_get_cubin, (void *p, char *c), (p, c))                             \
    JITLINK(X, Create, jitlink_create, (void **h, uint32_t n, const char **o), (h, n, o))           \
    JITLINK(X, Destroy, jitlink_destroy, (void **h), (h))                                            \
    JITLINK(X, AddData, jitlink_add_data, (void *h, int t, const void *d, size_t z, const char *m), (h, t, d, z, m)) \
    JITLINK(X, AddFile, jitlink_add_file, (void *h, int t, const char *f), (h, t, f))               \
    JITLINK(X, Complete, jitlink_complete, (void *h), (h))                                           \
    JITLINK(X, GetLinkedCubinSize, jitlink_cubin_size, (void *h, size_t *z), (h, z))                \
    JITLINK(X, GetLinkedCubin, jitlink_get_cubin, (void *h, void *c), (h, c))

#define SLOT(sym, lib, impl, P, A) static slot slot_##sym = {#sym, &lib, NULL};
#define DEFINE(sym, lib, impl, P, A) int sym P { return impl(&slot_##sym, ARGS A); }
#define DECLARE(sym, lib, impl, P, A) int sym P;
#define ENTRY(sym, lib, impl, P, A) {&slot_##sym, (void *)sym},
WRAPPED(DECLARE)
WRAPPED(SLOT)
WRAPPED(DEFINE)

static const struct { slot *slot; void *wrapper; } wrapped[] = {WRAPPED(ENTRY)};

void *dlsym(void *handle, const char *name) {
    pthread_once(&dlsym_once, resolve_dlsym);
    if (handle != RTLD_NEXT && handle != RTLD_DEFAULT &&
        (!strncmp(name, "nvrtc", 5) || !strncmp(name, "nvJitLink", 9) || !strncmp(name, "__nvJitLink", 11))) {
        for (size_t i = 0; i < sizeof wrapped / sizeof *wrapped; i++) {
            if (strcmp(name, wrapped[i].slot->name)) continue;
            void *fn = real_dlsym(handle, name);
            adopt(wrapped[i].slot, fn);
            return __atomic_load_n(&wrapped[i].slot->real, __ATOMIC_ACQUIRE) == fn && fn ? wrapped[i].wrapper : fn;
        }
    }
    TAIL_CALL return real_dlsym(handle, name);
}
