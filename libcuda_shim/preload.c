/* libzluda_preload.so: preloaded by `zluda run` so that programs which dlopen the driver by
 * an absolute path (e.g. /usr/lib/x86_64-linux-gnu/libcuda.so.1) get ours. Any dlopen whose
 * file name is libcuda.so or libcuda.so.<version> is redirected to the libcuda.so.1 that
 * sits next to this library; everything else goes to the real dlopen untouched (as a tail
 * call, so the loader still sees the original caller for its RPATH/RUNPATH lookup).
 * toolchain.c, in the same library, steers NVRTC and nvJitLink to PTX (docs/toolchains.md). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void *(*dlopen_fn)(const char *, int);

static dlopen_fn real_dlopen;
static char our_driver[PATH_MAX];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void resolve(void) {
    real_dlopen = (dlopen_fn)dlsym(RTLD_NEXT, "dlopen");
    Dl_info info;
    if (dladdr((void *)resolve, &info) && info.dli_fname) {
        const char *slash = strrchr(info.dli_fname, '/');
        size_t dir = slash ? (size_t)(slash - info.dli_fname) + 1 : 0;
        if (dir + sizeof "libcuda.so.1" <= sizeof our_driver) {
            memcpy(our_driver, info.dli_fname, dir);
            memcpy(our_driver + dir, "libcuda.so.1", sizeof "libcuda.so.1");
        }
    }
}

/* "libcuda.so", "libcuda.so.1", "libcuda.so.580.65.06": the driver under any of its names */
static int is_driver(const char *path) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (strncmp(base, "libcuda.so", 10)) return 0;
    for (const char *p = base + 10; *p; p++)
        if (!(*p == '.' || (*p >= '0' && *p <= '9'))) return 0;
    return 1;
}

void *dlopen(const char *file, int mode) {
    pthread_once(&once, resolve);
    if (file && our_driver[0] && is_driver(file) && strcmp(file, our_driver)) {
        if (getenv("ZLUDA_TRACE")) fprintf(stderr, "zluda: dlopen(%s) -> %s\n", file, our_driver);
        file = our_driver;
    }
    return real_dlopen(file, mode);
}
