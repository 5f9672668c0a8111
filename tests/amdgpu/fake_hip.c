/* A stand-in for ROCm's libamdhip64.so, for testing the HIP backend where there is no AMD GPU.
 *
 * "Device" memory is host memory, so copies and fills can be checked by reading it back. The
 * calls the backend makes are checked as ROCm would (copies must use hipMemcpyDefault;
 * frees must name a live allocation of the right kind; hipModuleLoadData takes only an AMDGPU
 * HSA code object v5; functions and globals are looked up in its symbol table) and written,
 * one line each, to $FAKE_HIP_LOG. Kernels do not run: a launch records its function, grid,
 * block, dynamic LDS, kernarg bytes and stream. Streams are numbered from 1 as they are created
 * (0 is the null stream); asynchronous calls must name a live one, and log its number. Knobs: $FAKE_HIP_DEVICES (default 1),
 * $FAKE_HIP_MEMORY (bytes one allocation may have, default 1 GiB), $FAKE_HIP_FAULT (a kernel
 * whose launch makes the next synchronize report hipErrorIllegalAddress).
 */
#include <elf.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int hipError_t;
enum {
    hipSuccess = 0, hipErrorInvalidValue = 1, hipErrorOutOfMemory = 2, hipErrorNoDevice = 100,
    hipErrorInvalidImage = 200, hipErrorNotFound = 500, hipErrorIllegalAddress = 700,
    hipErrorHostMemoryNotRegistered = 713,
};
enum { HIP_MEMCPY_DEFAULT = 4, LAUNCH_PARAM_BUFFER_POINTER = 1, LAUNCH_PARAM_BUFFER_SIZE = 2, LAUNCH_PARAM_END = 3 };
enum { EM_AMDGPU_ = 224, ELFOSABI_AMDGPU_HSA_ = 64, ABI_VERSION_V5 = 3 };

static void __attribute__((format(printf, 1, 2))) note(const char *fmt, ...) {
    const char *path = getenv("FAKE_HIP_LOG");
    if (!path) return;
    FILE *f = fopen(path, "a");
    if (!f) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
    fclose(f);
}

/* ---------------------------------------------------------------- errors and devices */
const char *hipGetErrorString(hipError_t e) {
    switch (e) {
    case hipSuccess: return "no error";
    case hipErrorInvalidValue: return "invalid argument";
    case hipErrorOutOfMemory: return "out of memory";
    case hipErrorNoDevice: return "no ROCm-capable device is detected";
    case hipErrorInvalidImage: return "device kernel image is invalid";
    case hipErrorNotFound: return "named symbol not found";
    case hipErrorIllegalAddress: return "an illegal memory access was encountered";
    case hipErrorHostMemoryNotRegistered: return "host memory not registered";
    default: return "unknown error";
    }
}

static int devices(void) {
    const char *n = getenv("FAKE_HIP_DEVICES");
    return n ? atoi(n) : 1;
}

hipError_t hipInit(unsigned int flags) { return flags ? hipErrorInvalidValue : hipSuccess; }

hipError_t hipGetDeviceCount(int *count) {
    *count = devices();
    return *count ? hipSuccess : hipErrorNoDevice; /* as ROCm answers on a machine without a GPU */
}

/* Device properties the tests can recognise: attribute a of device d is 1000 * (d + 1) + a. */
hipError_t hipDeviceGetName(char *name, int len, int device) {
    if (device < 0 || device >= devices() || len <= 0)
        return hipErrorInvalidValue;
    snprintf(name, (size_t)len, "Fake AMD GPU %d", device);
    return hipSuccess;
}

hipError_t hipDeviceTotalMem(size_t *bytes, int device) {
    if (device < 0 || device >= devices())
        return hipErrorInvalidValue;
    *bytes = (size_t)(device + 1) << 34;
    return hipSuccess;
}

hipError_t hipDeviceGetAttribute(int *value, int attr, int device) {
    if (device < 0 || device >= devices())
        return hipErrorInvalidValue;
    *value = 1000 * (device + 1) + attr;
    return hipSuccess;
}

/* hipLimitStackSize (0) only, as the backend sets it before launches; logged as "limit stack N" */
hipError_t hipDeviceSetLimit(int limit, size_t value) {
    if (limit != 0) return hipErrorInvalidValue;
    note("limit stack %zu", value);
    return hipSuccess;
}

static hipError_t pending; /* an asynchronous error the next synchronize reports */

static hipError_t synchronize(void) {
    hipError_t e = pending;
    pending = hipSuccess;
    return e;
}

/* ---------------------------------------------------------------- streams */
enum { MAX_STREAMS = 4096 };
static int live[MAX_STREAMS + 1]; /* live[n]: stream n exists (n >= 1) */
static int streams_made;

/* The number of a stream handle (0 for the null stream), or -1 if it is not a live stream. */
static int stream_number(void *stream) {
    uintptr_t n = (uintptr_t)stream;
    if (n == 0) return 0;
    return n <= MAX_STREAMS && live[n] ? (int)n : -1;
}

static pthread_mutex_t streams_lock = PTHREAD_MUTEX_INITIALIZER; /* the driver's threads create streams at once */

hipError_t hipStreamCreateWithFlags(void **stream, unsigned int flags) {
    if (!stream || flags > 1) return hipErrorInvalidValue;
    pthread_mutex_lock(&streams_lock);
    int n = streams_made < MAX_STREAMS ? ++streams_made : 0;
    if (n) live[n] = 1;
    pthread_mutex_unlock(&streams_lock);
    if (!n) return hipErrorOutOfMemory;
    *stream = (void *)(uintptr_t)n;
    note("stream %d flags %u", n, flags);
    return hipSuccess;
}

hipError_t hipStreamDestroy(void *stream) {
    int n = stream_number(stream);
    if (n <= 0) return hipErrorInvalidValue;
    live[n] = 0;
    note("stream %d destroyed", n);
    return hipSuccess;
}

hipError_t hipStreamSynchronize(void *stream) { return stream_number(stream) < 0 ? hipErrorInvalidValue : synchronize(); }

/* ---------------------------------------------------------------- memory */
struct allocation { char *base; size_t size; const char *kind; struct allocation *next; };
static struct allocation *allocations;

static struct allocation **find(const void *base) {
    struct allocation **a = &allocations;
    while (*a && (*a)->base != base) a = &(*a)->next;
    return a;
}

static hipError_t allocate(void **ptr, size_t size, const char *kind) {
    const char *limit = getenv("FAKE_HIP_MEMORY");
    if (!ptr) return hipErrorInvalidValue;
    if (size > (limit ? strtoull(limit, NULL, 0) : 1ull << 30)) return hipErrorOutOfMemory;
    char *p = aligned_alloc(256, (size + 255) / 256 * 256);
    if (!p) return hipErrorOutOfMemory;
    struct allocation *a = malloc(sizeof *a);
    *a = (struct allocation){p, size, kind, allocations};
    allocations = a;
    *ptr = p;
    note("%s %zu", kind, size);
    return hipSuccess;
}

static hipError_t release(void *ptr, const char *kind, const char *kind2, hipError_t wrong) {
    struct allocation **a = find(ptr);
    if (!*a || (strcmp((*a)->kind, kind) && strcmp((*a)->kind, kind2))) return wrong;
    struct allocation *dead = *a;
    *a = dead->next;
    note("free %s %zu", dead->kind, dead->size);
    if (strcmp(dead->kind, "registered")) free(dead->base);
    free(dead);
    return hipSuccess;
}

hipError_t hipMalloc(void **ptr, size_t size) { return allocate(ptr, size, "device"); }
hipError_t hipHostMalloc(void **ptr, size_t size, unsigned int flags) { (void)flags; return allocate(ptr, size, "host"); }
hipError_t hipMallocManaged(void **ptr, size_t size, unsigned int flags) {
    return flags == 1 || flags == 2 ? allocate(ptr, size, "managed") : hipErrorInvalidValue;
}
hipError_t hipFree(void *ptr) { return ptr ? release(ptr, "device", "managed", hipErrorInvalidValue) : hipSuccess; }
hipError_t hipHostFree(void *ptr) { return ptr ? release(ptr, "host", "host", hipErrorInvalidValue) : hipSuccess; }

hipError_t hipHostRegister(void *ptr, size_t size, unsigned int flags) {
    if (!ptr || !size || *find(ptr)) return hipErrorInvalidValue;
    struct allocation *a = malloc(sizeof *a);
    *a = (struct allocation){ptr, size, "registered", allocations};
    allocations = a;
    note("registered %zu flags %u", size, flags);
    return hipSuccess;
}

hipError_t hipHostUnregister(void *ptr) { return release(ptr, "registered", "registered", hipErrorHostMemoryNotRegistered); }

hipError_t hipMemcpyAsync(void *dst, const void *src, size_t n, int kind, void *stream) {
    int number = stream_number(stream);
    if (kind != HIP_MEMCPY_DEFAULT || number < 0) return hipErrorInvalidValue;
    memmove(dst, src, n);
    note("hipMemcpyAsync %zu stream %d", n, number);
    return hipSuccess;
}

hipError_t hipMemcpyHtoD(void *dst, const void *src, size_t n) { memmove(dst, src, n); return hipSuccess; }
hipError_t hipMemcpyDtoH(void *dst, const void *src, size_t n) { memmove(dst, src, n); return hipSuccess; }

/* Stores count elements of `size` bytes each (value's low bytes) on a live stream. */
static hipError_t fill(void *dst, unsigned value, size_t size, size_t count, void *stream) {
    int number = stream_number(stream);
    if (number < 0) return hipErrorInvalidValue;
    for (size_t i = 0; i < count; i++) memcpy((char *)dst + size * i, &value, size);
    note("hipMemsetD%zuAsync %zu stream %d", 8 * size, count, number);
    return hipSuccess;
}

hipError_t hipMemsetD8Async(void *dst, unsigned char value, size_t count, void *stream) {
    return fill(dst, value, 1, count, stream);
}
hipError_t hipMemsetD16Async(void *dst, unsigned short value, size_t count, void *stream) {
    return fill(dst, value, 2, count, stream);
}
hipError_t hipMemsetD32Async(void *dst, int value, size_t count, void *stream) {
    return fill(dst, (unsigned)value, 4, count, stream);
}

/* ---------------------------------------------------------------- modules */
struct global { char *name; void *data; size_t size; struct global *next; };
struct module { unsigned char *image; size_t size; struct global *globals; };
struct function { char name[256]; };

/* The symbol `name` of the image's symbol table (dynamic or static), or NULL. */
static const Elf64_Sym *symbol(const struct module *m, const char *name) {
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)m->image;
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(m->image + eh->e_shoff);
    for (int i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_type != SHT_SYMTAB && sh[i].sh_type != SHT_DYNSYM) continue;
        const Elf64_Sym *syms = (const Elf64_Sym *)(m->image + sh[i].sh_offset);
        const char *strs = (const char *)(m->image + sh[sh[i].sh_link].sh_offset);
        for (size_t k = 0; k < sh[i].sh_size / sizeof(Elf64_Sym); k++)
            if (syms[k].st_shndx != SHN_UNDEF && !strcmp(strs + syms[k].st_name, name)) return &syms[k];
    }
    return NULL;
}

hipError_t hipModuleLoadData(void **module, const void *image) {
    const Elf64_Ehdr *eh = image;
    if (!module || !image || memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        eh->e_ident[EI_DATA] != ELFDATA2LSB || eh->e_ident[EI_OSABI] != ELFOSABI_AMDGPU_HSA_ ||
        eh->e_ident[EI_ABIVERSION] != ABI_VERSION_V5 || eh->e_type != ET_DYN || eh->e_machine != EM_AMDGPU_) {
        note("hipModuleLoadData rejected");
        return hipErrorInvalidImage;
    }
    struct module *m = calloc(1, sizeof *m);
    m->size = eh->e_shoff + (size_t)eh->e_shnum * eh->e_shentsize; /* lld writes the section headers last */
    m->image = malloc(m->size);
    memcpy(m->image, image, m->size);
    *module = m;
    note("hipModuleLoadData %zu", m->size);
    return hipSuccess;
}

hipError_t hipModuleUnload(void *module) {
    struct module *m = module;
    for (struct global *g = m->globals, *next; g; g = next) {
        next = g->next;
        free(g->name), free(g->data), free(g);
    }
    free(m->image), free(m);
    note("hipModuleUnload");
    return hipSuccess;
}

hipError_t hipModuleGetFunction(void **function, void *module, const char *name) {
    char kd[300];
    snprintf(kd, sizeof kd, "%s.kd", name); /* a kernel is found through its descriptor */
    const Elf64_Sym *s = symbol(module, kd);
    if (!s || ELF64_ST_TYPE(s->st_info) != STT_OBJECT || s->st_size != 64) return hipErrorNotFound;
    struct function *f = calloc(1, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", name);
    *function = f;
    return hipSuccess;
}

hipError_t hipModuleGetGlobal(void **dptr, size_t *bytes, void *module, const char *name) {
    struct module *m = module;
    struct global *g = m->globals;
    while (g && strcmp(g->name, name)) g = g->next;
    if (!g) {
        const Elf64_Sym *s = symbol(m, name);
        if (!s || ELF64_ST_TYPE(s->st_info) != STT_OBJECT) return hipErrorNotFound;
        g = calloc(1, sizeof *g);
        g->name = strdup(name), g->size = s->st_size, g->data = calloc(1, s->st_size ? s->st_size : 1);
        const Elf64_Shdr *sh = (const Elf64_Shdr *)(m->image + ((Elf64_Ehdr *)m->image)->e_shoff) + s->st_shndx;
        if (sh->sh_type != SHT_NOBITS) memcpy(g->data, m->image + sh->sh_offset + (s->st_value - sh->sh_addr), s->st_size);
        g->next = m->globals, m->globals = g;
    }
    if (dptr) *dptr = g->data;
    if (bytes) *bytes = g->size;
    return hipSuccess;
}

/* Logs each argument pointer's offset from the first and the 8 bytes it points at. */
hipError_t hipModuleLaunchCooperativeKernel(void *function, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                            unsigned by, unsigned bz, unsigned shared, void *stream, void **params) {
    const struct function *f = function;
    int number = stream_number(stream);
    if (number < 0 || !params || !gx || !gy || !gz || !bx || !by || !bz) return hipErrorInvalidValue;
    char line[4096];
    int n = snprintf(line, sizeof line, "cooperative %s grid %u %u %u block %u %u %u shared %u stream %d args", f->name,
                     gx, gy, gz, bx, by, bz, shared, number);
    for (int i = 0; i < 2 && n < (int)sizeof line - 64; i++) {
        unsigned long long v;
        memcpy(&v, params[i], 8);
        n += snprintf(line + n, sizeof line - (size_t)n, " +%td:%016llx", (char *)params[i] - (char *)params[0], v);
    }
    note("%s", line);
    return hipSuccess;
}

hipError_t hipModuleLaunchKernel(void *function, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                 unsigned bz, unsigned shared, void *stream, void **params, void **extra) {
    const struct function *f = function;
    const unsigned char *buf = NULL;
    size_t size = 0;
    int number = stream_number(stream);
    if (number < 0 || params || !extra || !gx || !gy || !gz || !bx || !by || !bz) return hipErrorInvalidValue;
    for (int i = 0; (uintptr_t)extra[i] != LAUNCH_PARAM_END; i += 2) {
        if ((uintptr_t)extra[i] == LAUNCH_PARAM_BUFFER_POINTER) buf = extra[i + 1];
        else if ((uintptr_t)extra[i] == LAUNCH_PARAM_BUFFER_SIZE) size = *(size_t *)extra[i + 1];
        else return hipErrorInvalidValue;
    }
    if (!buf && size) return hipErrorInvalidValue;
    char hex[2 * 4096 + 1] = "";
    for (size_t i = 0; i < size && i < 4096; i++) sprintf(hex + 2 * i, "%02x", buf[i]);
    note("launch %s grid %u %u %u block %u %u %u shared %u stream %d kernargs %s", f->name, gx, gy, gz, bx, by, bz,
         shared, number, hex);
    const char *fault = getenv("FAKE_HIP_FAULT");
    if (fault && !strcmp(fault, f->name)) pending = hipErrorIllegalAddress;
    return hipSuccess;
}
