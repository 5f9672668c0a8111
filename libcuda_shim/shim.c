/* The C half of libcuda.so.1: what must not (or need not) go through Python.
 *   - cuGetProcAddress(_v2): (name, cudaVersion, flags) -> entry point, from the generated
 *     zl_procs[] table (entry_points.txt);
 *   - cuGetExportTable: the private tables cudart 13 reads (../shared/design/CUDART_CONTRACT.md);
 *   - the per-thread context stack and context-local storage, because cudart asks CLS `get`
 *     before every runtime call;
 *   - stubs answering CUDA_ERROR_NOT_SUPPORTED for entry points we do not implement;
 *   - start-up and shutdown of the embedded Python driver (zl_enter, asked by the generated
 *     wrapper of every Python-implemented entry point before it calls into Python).
 * Included after driver_api.h, the generated tables and start-up constants by build_shim.py;
 * the wrappers follow it. */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ZL_SUCCESS 0
#define ZL_INVALID_VALUE 1
#define ZL_NOT_INITIALIZED 3
#define ZL_DEINITIALIZED 4
#define ZL_INVALID_CONTEXT 201
#define ZL_NOT_FOUND 500
#define ZL_NOT_SUPPORTED 801
#define ZL_UNKNOWN 999

/* ---- logging of unimplemented entry points: once per name ---- */
static pthread_mutex_t zl_log_lock = PTHREAD_MUTEX_INITIALIZER;

static CUresult zl_unsupported(const char *what, int *logged) {
    pthread_mutex_lock(&zl_log_lock);
    if (!*logged) {
        *logged = 1;
        fprintf(stderr, "zluda: %s is not implemented; returning CUDA_ERROR_NOT_SUPPORTED\n", what);
    }
    pthread_mutex_unlock(&zl_log_lock);
    return ZL_NOT_SUPPORTED;
}

/* ---- per-thread context stack (cuCtxPush/Pop/Set/GetCurrent keep it via these) ---- */
#define ZL_CTX_DEPTH 64
static __thread void *zl_ctx_stack[ZL_CTX_DEPTH];
static __thread int zl_ctx_depth;

void *zluda_tls_current(void) { return zl_ctx_depth ? zl_ctx_stack[zl_ctx_depth - 1] : NULL; }

void zluda_tls_set_current(void *ctx) {
    if (zl_ctx_depth) {
        if (ctx) zl_ctx_stack[zl_ctx_depth - 1] = ctx;
        else zl_ctx_depth--;
    } else if (ctx) {
        zl_ctx_stack[zl_ctx_depth++] = ctx;
    }
}

int zluda_tls_push(void *ctx) {
    if (zl_ctx_depth == ZL_CTX_DEPTH) return 0;
    zl_ctx_stack[zl_ctx_depth++] = ctx;
    return 1;
}

void *zluda_tls_pop(void) { return zl_ctx_depth ? zl_ctx_stack[--zl_ctx_depth] : NULL; }

/* ---- context-local storage (export table c693336e): a small locked array ---- */
typedef struct { void *ctx, *key, *value, *dtor; } zl_cls_entry;
static zl_cls_entry *zl_cls;
static size_t zl_cls_len, zl_cls_cap;
static pthread_mutex_t zl_cls_lock = PTHREAD_MUTEX_INITIALIZER;

static zl_cls_entry *zl_cls_find(void *ctx, void *key) {
    for (size_t i = 0; i < zl_cls_len; i++)
        if (zl_cls[i].ctx == ctx && zl_cls[i].key == key) return &zl_cls[i];
    return NULL;
}

static CUresult zl_cls_put(void *ctx, void *key, void *value, void *dtor) {
    if (!ctx) ctx = zluda_tls_current();
    if (!ctx) return ZL_INVALID_CONTEXT;
    CUresult rc = ZL_SUCCESS;
    pthread_mutex_lock(&zl_cls_lock);
    zl_cls_entry *e = zl_cls_find(ctx, key);
    if (!e) {
        if (zl_cls_len == zl_cls_cap) {
            size_t cap = zl_cls_cap ? 2 * zl_cls_cap : 16;
            zl_cls_entry *grown = realloc(zl_cls, cap * sizeof *grown);
            if (!grown) { rc = 2; /* CUDA_ERROR_OUT_OF_MEMORY */ goto out; }
            zl_cls = grown;
            zl_cls_cap = cap;
        }
        e = &zl_cls[zl_cls_len++];
        e->ctx = ctx;
        e->key = key;
    }
    e->value = value;
    e->dtor = dtor;
out:
    pthread_mutex_unlock(&zl_cls_lock);
    return rc;
}

static CUresult zl_cls_delete(void *ctx, void *key) {
    if (!ctx) ctx = zluda_tls_current();
    if (!ctx) return ZL_INVALID_CONTEXT;
    CUresult rc = ZL_INVALID_VALUE;
    pthread_mutex_lock(&zl_cls_lock);
    zl_cls_entry *e = zl_cls_find(ctx, key);
    if (e) {
        *e = zl_cls[--zl_cls_len];
        rc = ZL_SUCCESS;
    }
    pthread_mutex_unlock(&zl_cls_lock);
    return rc;
}

/* Must fail when nothing is stored: success without a value makes cudart skip its
 * per-context setup. */
static CUresult zl_cls_get(void **value, void *ctx, void *key) {
    if (!ctx) ctx = zluda_tls_current();
    if (!ctx) return ZL_INVALID_CONTEXT;
    CUresult rc = ZL_INVALID_VALUE;
    pthread_mutex_lock(&zl_cls_lock);
    zl_cls_entry *e = zl_cls_find(ctx, key);
    if (e) {
        *value = e->value;
        rc = ZL_SUCCESS;
    }
    pthread_mutex_unlock(&zl_cls_lock);
    return rc;
}

/* Called by the Python driver when a context is destroyed or reset: its storage goes too,
 * so cudart's next `get` fails and it sets the context up again. */
void zluda_cls_drop_context(void *ctx) {
    pthread_mutex_lock(&zl_cls_lock);
    for (size_t i = 0; i < zl_cls_len;)
        if (zl_cls[i].ctx == ctx) zl_cls[i] = zl_cls[--zl_cls_len];
        else i++;
    pthread_mutex_unlock(&zl_cls_lock);
}

/* ---- private export tables (../shared/design/CUDART_CONTRACT.md; docs/driver.md lists what
 * each cudart 12.0-13.5 asks for) ----
 * A table is an array of function pointers, slot 0 holding its size in bytes (CLS aside).
 * ZL_EXPORT_TABLE(name, slots) declares one; build_shim.py generates a stub per slot
 * (zl_stubs_<name>[]), and zl_fill_export_tables puts them in every slot left NULL: a cudart
 * calling a slot we have not implemented gets CUDA_ERROR_NOT_SUPPORTED and the log says which. */
#define ZL_EXPORT_TABLE(name, slots) static void *zl_##name[slots]

/* The six argument registers (SysV x86-64): whatever the slot's real parameters, tracing shows them. */
static CUresult zl_slot_unused(const char *table, int slot, int *logged, unsigned long a0, unsigned long a1,
                               unsigned long a2, unsigned long a3, unsigned long a4, unsigned long a5) {
    if (getenv("ZLUDA_TRACE"))
        fprintf(stderr, "zluda: export table %s slot %d called (%#lx, %#lx, %#lx, %#lx, %#lx, %#lx)\n", table, slot,
                a0, a1, a2, a3, a4, a5);
    char what[96];
    snprintf(what, sizeof what, "export table %s slot %d", table, slot);
    return zl_unsupported(what, logged);
}

static CUresult zl_get_primary_ctx(CUcontext *pctx, CUdevice dev);
static CUresult zl_runtime_check(void);
static CUresult zl_hooks_slot2(void **buf, size_t *n);
static CUresult zl_hooks_slot6(void **buf, size_t *n);
static CUresult zl_unwrap_context(CUcontext ctx, unsigned int *wrapped, CUcontext *unwrapped);
static CUresult zl_context_wrapper_check(void);
static CUresult zl_integrity_slot1(unsigned int runtime_version, unsigned long long unix_seconds, unsigned char *out);

ZL_EXPORT_TABLE(cudart_interface, 16) = {[2] = (void *)zl_get_primary_ctx, [12] = (void *)zl_runtime_check};
ZL_EXPORT_TABLE(tools_hooks, 16) = {[2] = (void *)zl_hooks_slot2, [6] = (void *)zl_hooks_slot6};
ZL_EXPORT_TABLE(tools_tls, 16);
ZL_EXPORT_TABLE(context_wrapper, 16) = {[2] = (void *)zl_unwrap_context, [3] = (void *)zl_context_wrapper_check};
ZL_EXPORT_TABLE(integrity, 16) = {[1] = (void *)zl_integrity_slot1};
/* cudart 13.4+ fails every call (error 500) without it and calls none of its slots; 95 slots as
 * NVIDIA's driver serves it (community reports) */
ZL_EXPORT_TABLE(tools_context, 95);
static void *zl_cls_table[3] = {(void *)zl_cls_put, (void *)zl_cls_delete, (void *)zl_cls_get};

/* CUDART_INTERFACE slot 2: the primary context of a device */
static CUresult zl_get_primary_ctx(CUcontext *pctx, CUdevice dev) { return zluda_primary_ctx(pctx, dev); }

/* CUDART_INTERFACE slot 12: called without arguments by cudart 13.1+ at its first call; any
 * error fails that call (cudaGetDeviceCount) with it */
static CUresult zl_runtime_check(void) { return ZL_SUCCESS; }

/* TOOLS_RUNTIME_CALLBACK_HOOKS slots 2 and 6: zeroed u32 arrays (n entries) cudart reads
 * per-callback flags from; non-zero entries make it call tools slots we do not implement.
 * cudart insists on n >= 445 (12.0) ... 567 (13.5) for slot 2, n >= 14 for slot 6. */
static uint32_t zl_hooks_flags2[1024], zl_hooks_flags6[64];
static CUresult zl_hooks_slot2(void **buf, size_t *n) {
    *buf = zl_hooks_flags2;
    *n = sizeof zl_hooks_flags2 / sizeof zl_hooks_flags2[0];
    return ZL_SUCCESS;
}
static CUresult zl_hooks_slot6(void **buf, size_t *n) {
    *buf = zl_hooks_flags6;
    *n = sizeof zl_hooks_flags6 / sizeof zl_hooks_flags6[0];
    return ZL_SUCCESS;
}

/* CONTEXT_WRAPPER slot 2: our contexts are never wrapped; slot 3: init-time check */
static CUresult zl_unwrap_context(CUcontext ctx, unsigned int *wrapped, CUcontext *unwrapped) {
    *wrapped = 0;
    if (unwrapped) *unwrapped = ctx;
    return ZL_SUCCESS;
}
static CUresult zl_context_wrapper_check(void) { return ZL_SUCCESS; }

/* INTEGRITY_CHECK slot 1: the HMAC-MD2 answer is computed in Python (zluda_py.driver.integrity);
 * C passes what only C knows: pthread_self() and the addresses hashed into it. */
static CUresult zl_integrity_slot1(unsigned int runtime_version, unsigned long long unix_seconds, unsigned char *out) {
    return zluda_integrity(runtime_version, unix_seconds, out, (unsigned long long)(uint32_t)pthread_self(),
                           (unsigned long long)(uintptr_t)zl_cudart_interface,
                           (unsigned long long)(uintptr_t)zl_integrity,
                           (unsigned long long)(uintptr_t)zl_integrity_slot1);
}

typedef struct {
    unsigned char uuid[16];
    const char *name;
    void **table;
    void *const *stubs; /* NULL: no size header, every slot implemented */
    size_t slots;
} zl_export_table;
#define ZL_TABLE(name) #name, zl_##name, zl_stubs_##name, sizeof zl_##name / sizeof zl_##name[0]
static const zl_export_table zl_export_tables[] = {
    {{0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a, 0x89, 0x87, 0xd9, 0x39, 0x12, 0xfd, 0x9d, 0xf9}, ZL_TABLE(cudart_interface)},
    {{0xa0, 0x94, 0x79, 0x8c, 0x2e, 0x74, 0x2e, 0x74, 0x93, 0xf2, 0x08, 0x00, 0x20, 0x0c, 0x0a, 0x66}, ZL_TABLE(tools_hooks)},
    {{0x42, 0xd8, 0x5a, 0x81, 0x23, 0xf6, 0xcb, 0x47, 0x82, 0x98, 0xf6, 0xe7, 0x8a, 0x3a, 0xec, 0xdc}, ZL_TABLE(tools_tls)},
    {{0xc6, 0x93, 0x33, 0x6e, 0x11, 0x21, 0xdf, 0x11, 0xa8, 0xc3, 0x68, 0xf3, 0x55, 0xd8, 0x95, 0x93}, "cls", zl_cls_table, NULL, 3},
    {{0x26, 0x3e, 0x88, 0x60, 0x7c, 0xd2, 0x61, 0x43, 0x92, 0xf6, 0xbb, 0xd5, 0x00, 0x6d, 0xfa, 0x7e}, ZL_TABLE(context_wrapper)},
    {{0xd4, 0x08, 0x20, 0x55, 0xbd, 0xe6, 0x70, 0x4b, 0x8d, 0x34, 0xba, 0x12, 0x3c, 0x66, 0xe1, 0xf2}, ZL_TABLE(integrity)},
    {{0x21, 0x31, 0x8c, 0x60, 0x97, 0x14, 0x32, 0x48, 0x8c, 0xa6, 0x41, 0xff, 0x73, 0x24, 0xc8, 0xf2}, ZL_TABLE(tools_context)},
};
#define ZL_EXPORT_TABLES (sizeof zl_export_tables / sizeof zl_export_tables[0])

__attribute__((constructor)) static void zl_fill_export_tables(void) {
    for (size_t i = 0; i < ZL_EXPORT_TABLES; i++) {
        const zl_export_table *t = &zl_export_tables[i];
        if (!t->stubs) continue;
        t->table[0] = (void *)(t->slots * sizeof(void *));
        for (size_t s = 1; s < t->slots; s++)
            if (!t->table[s]) t->table[s] = t->stubs[s];
    }
}

/* f8cff951-2146-8b4e-b9e2-fb469e7c0dd9 (cudart 12.9+, before cuInit) stays NOT_FOUND: cudart
 * carries on without it (a community report says a table there makes it skip start-up steps). */
CUresult cuGetExportTable(const void **ppExportTable, const unsigned char *pExportTableId) {
    if (!ppExportTable || !pExportTableId) return ZL_INVALID_VALUE;
    const zl_export_table *found = NULL;
    for (size_t i = 0; i < ZL_EXPORT_TABLES && !found; i++)
        if (!memcmp(zl_export_tables[i].uuid, pExportTableId, 16)) found = &zl_export_tables[i];
    *ppExportTable = found ? found->table : NULL;
    if (getenv("ZLUDA_TRACE")) {
        fprintf(stderr, "zluda: cuGetExportTable: %s ", found ? "table" : "no table");
        for (int i = 0; i < 16; i++) fprintf(stderr, "%02x", pExportTableId[i]);
        fprintf(stderr, found ? " (%s)\n" : "\n", found ? found->name : "");
    }
    return found ? ZL_SUCCESS : ZL_NOT_FOUND;
}

/* ---- cuGetProcAddress ---- */
#define ZL_PER_THREAD_DEFAULT_STREAM 2
#define ZL_SYMBOL_FOUND 0
#define ZL_SYMBOL_NOT_FOUND 1
#define ZL_VERSION_NOT_SUFFICIENT 2

CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, unsigned long long flags);

static void *zl_lookup(const char *name, int version, unsigned long long flags, int *status) {
    const zl_proc *best = NULL;
    int known = 0;
    for (size_t i = 0; i < sizeof zl_procs / sizeof zl_procs[0]; i++) {
        const zl_proc *p = &zl_procs[i];
        if (strcmp(p->name, name)) continue;
        known = 1;
        if (p->version <= version && (!best || p->version > best->version)) best = p;
    }
    if (!best) {
        *status = known ? ZL_VERSION_NOT_SUFFICIENT : ZL_SYMBOL_NOT_FOUND;
        return NULL;
    }
    *status = ZL_SYMBOL_FOUND;
    if ((flags & ZL_PER_THREAD_DEFAULT_STREAM) && best->per_thread) return best->per_thread;
    return best->fn;
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, unsigned long long flags,
                             int *symbolStatus) {
    if (!symbol || !pfn) return ZL_INVALID_VALUE;
    int status;
    if (!strcmp(symbol, "cuGetProcAddress")) {
        *pfn = cudaVersion >= 12000 ? (void *)cuGetProcAddress_v2 : (void *)cuGetProcAddress;
        status = ZL_SYMBOL_FOUND;
    } else if (!strcmp(symbol, "cuGetExportTable")) {
        *pfn = (void *)cuGetExportTable;
        status = ZL_SYMBOL_FOUND;
    } else {
        *pfn = zl_lookup(symbol, cudaVersion, flags, &status);
    }
    if (symbolStatus) *symbolStatus = status;
    if (status != ZL_SYMBOL_FOUND && *symbol && getenv("ZLUDA_TRACE"))
        fprintf(stderr, "zluda: cuGetProcAddress(%s, %d, %llu): not found\n", symbol, cudaVersion, flags);
    return status == ZL_SYMBOL_FOUND || !*symbol ? ZL_SUCCESS : ZL_NOT_FOUND;
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, unsigned long long flags) {
    return cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, NULL);
}

/* ---- where this library lives, so the embedded Python can find the package next to it ---- */
const char *zluda_shim_path(void) {
    Dl_info info;
    if (dladdr((void *)zluda_shim_path, &info) && info.dli_fname) return info.dli_fname;
    return "";
}

/* ---- start-up and shutdown ----
 * cffi starts Python at the first call into it, as whatever interpreter the first `python3` on
 * PATH is, and when its start-up fails every extern returns 0, CUDA_SUCCESS. So the first entry
 * point called starts the driver here, once: for a C host, Python is started as the interpreter
 * zluda-py was installed with; for any host, the bootstrap code makes zluda_py and its
 * dependencies importable; then cffi runs its init code. A failure is reported once, in one line,
 * and every entry point answers an error from then on; after shutdown (exit), they answer
 * CUDA_ERROR_DEINITIALIZED without touching Python, which may be gone. */
enum { ZL_STARTING, ZL_READY, ZL_FAILED, ZL_SHUT_DOWN };
static int zl_state = ZL_STARTING;
static pthread_once_t zl_start_once = PTHREAD_ONCE_INIT;
static char zl_why[4096];

/* called by the init code when attaching the driver failed */
void zluda_start_failed(const char *why) { snprintf(zl_why, sizeof zl_why, "%s", why); }

void zluda_shutdown(void) { __atomic_store_n(&zl_state, ZL_SHUT_DOWN, __ATOMIC_RELEASE); }

/* The Python API below binds to the first libpython of the process: a host running another
 * Python version (python3.12 loading a library built for 3.11) is refused before any other call. */
static int zl_same_python(void) {
    char want[16];
    int n = snprintf(want, sizeof want, "%d.%d.", PY_MAJOR_VERSION, PY_MINOR_VERSION);
    const char *running = Py_GetVersion();
    if (!strncmp(running, want, (size_t)n)) return 1;
    snprintf(zl_why, sizeof zl_why, "this process runs Python %.*s, this libcuda.so.1 was built for Python %d.%d (%s); "
             "run the program with that Python, or install zluda-py with this one", (int)strcspn(running, " "), running,
             PY_MAJOR_VERSION, PY_MINOR_VERSION, zl_build_python);
    return 0;
}

/* Extension modules (_cffi_backend, numpy) resolve Python's symbols globally, but a host that
 * dlopens this library RTLD_LOCAL (cudart does) keeps the libpython it brought in local. */
static void zl_python_global(void) {
    Dl_info info;
    if (dladdr((void *)Py_GetVersion, &info) && info.dli_fname)
        dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
}

/* The interpreter a C host's Python is started as: Python finds its standard library and
 * site-packages (a venv's through its pyvenv.cfg) from this path. A library built elsewhere
 * (its recorded interpreter missing) takes the bin/ beside the libpython it runs on. */
static const char *zl_python_executable(char *buf, size_t size) {
    if (!access(zl_build_python, X_OK)) return zl_build_python;
    Dl_info info;
    if (!dladdr((void *)Py_InitializeFromConfig, &info) || !info.dli_fname) return NULL;
    const char *lib = strrchr(info.dli_fname, '/');
    int dir = lib ? (int)(lib - info.dli_fname) : 0;
    while (dir > 0 && info.dli_fname[dir - 1] != '/') dir--;  /* <prefix>/lib/libpython -> <prefix>/ */
    snprintf(buf, size, "%.*sbin/python%d.%d", dir, info.dli_fname, PY_MAJOR_VERSION, PY_MINOR_VERSION);
    return buf;
}

/* Signals whose disposition belongs to a C host: Python, embedded, must not take them over. */
static const int zl_host_signals[] = {SIGINT, SIGTERM, SIGPIPE, SIGXFSZ, SIGHUP, SIGQUIT};
#define ZL_HOST_SIGNALS (sizeof zl_host_signals / sizeof zl_host_signals[0])

/* A C host. PYTHON* variables are ignored (isolated configuration): they belong to whichever
 * Python the user works with, not to the one embedded here; the user site stays (pip --user).
 * No Python signal handlers: Ctrl-C must stop the program (or run its own handler), not raise
 * KeyboardInterrupt in whatever driver thread Python runs. install_signal_handlers = 0 is not
 * enough: the `_signal` module, once imported (subprocess imports it), installs its SIGINT
 * handler wherever SIGINT is SIG_DFL; so it is imported now and the host's dispositions put back. */
static int zl_init_python(void) {
    struct sigaction saved[ZL_HOST_SIGNALS];
    for (size_t i = 0; i < ZL_HOST_SIGNALS; i++) sigaction(zl_host_signals[i], NULL, &saved[i]);
    char buf[4096];
    const char *exe = zl_python_executable(buf, sizeof buf);
    PyConfig config;
    PyConfig_InitIsolatedConfig(&config);
    config.isolated = 0;
    config.user_site_directory = 1;
    config.install_signal_handlers = 0;
    PyStatus status = exe ? PyConfig_SetBytesString(&config, &config.executable, exe) : PyStatus_Ok();
    if (!PyStatus_Exception(status)) status = Py_InitializeFromConfig(&config);
    PyConfig_Clear(&config);
    if (PyStatus_Exception(status)) {
        snprintf(zl_why, sizeof zl_why, "Python (%.2000s) did not start: %.1000s", exe ? exe : "?",
                 status.err_msg ? status.err_msg : "unknown error");
        return 0;
    }
    Py_XDECREF(PyImport_ImportModule("_signal"));
    PyErr_Clear();
    for (size_t i = 0; i < ZL_HOST_SIGNALS; i++) sigaction(zl_host_signals[i], &saved[i], NULL);
    PyEval_SaveThread(); /* Python holds no thread until the next call takes it */
    return 1;
}

/* The pending Python exception as one line into zl_why (the traceback too with ZLUDA_TRACE). */
static void zl_python_error(void) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (getenv("ZLUDA_TRACE") && type) PyErr_Display(type, value, tb);
    PyObject *text = value ? PyObject_Str(value) : NULL;
    const char *msg = text ? PyUnicode_AsUTF8(text) : NULL;
    snprintf(zl_why, sizeof zl_why, "%s: %s", type ? ((PyTypeObject *)type)->tp_name : "error", msg ? msg : "");
    PyErr_Clear();
    Py_XDECREF(text);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
}

static int zl_bootstrap(void) {
    PyGILState_STATE gil = PyGILState_Ensure();
    PyObject *globals = PyDict_New(), *shim = PyUnicode_DecodeFSDefault(zluda_shim_path()), *result = NULL;
    if (globals && shim && !PyDict_SetItemString(globals, "shim", shim) &&
        !PyDict_SetItemString(globals, "__builtins__", PyEval_GetBuiltins()))
        result = PyRun_String(zl_bootstrap_code, Py_file_input, globals, globals);
    if (!result) zl_python_error();
    Py_XDECREF(result);
    Py_XDECREF(shim);
    Py_XDECREF(globals);
    PyGILState_Release(gil);
    return result != NULL;
}

static int zl_finalizing(void) {
#if PY_VERSION_HEX >= 0x030D0000
    return Py_IsFinalizing();
#else
    return _Py_IsFinalizing();
#endif
}

/* the driver ran and a Python host's interpreter is finalising (RELEASED_AT_EXIT in build_shim.py) */
static int zl_python_host_exiting(void) {
    return __atomic_load_n(&zl_state, __ATOMIC_ACQUIRE) == ZL_READY && zl_finalizing();
}

/* fork() after the driver started: the child has none of its threads (stream workers) and
 * only a copy of its state. As with NVIDIA's driver, CUDA is unusable there: every
 * Python-implemented entry point, cuInit included, answers CUDA_ERROR_NOT_INITIALIZED without
 * entering Python (the copy of the interpreter may hold locks of threads that are gone). */
static int zl_forked;
static void zl_fork_child(void) { __atomic_store_n(&zl_forked, 1, __ATOMIC_RELAXED); }

static void zl_start(void) {
    int state = ZL_FAILED;
    pthread_atfork(NULL, NULL, zl_fork_child);
    if (!zl_same_python()) goto out;
    zl_python_global();
    if (!Py_IsInitialized()) {
        if (!zl_init_python()) goto out;
    } else if (zl_finalizing()) { /* first called while a Python host exits: nothing to start */
        state = ZL_SHUT_DOWN;
        goto out;
    }
    if (!zl_bootstrap()) goto out;
    if (cffi_start_python()) {
        if (!zl_why[0]) snprintf(zl_why, sizeof zl_why, "cffi's embedding did not start (see above)");
        goto out;
    }
    if (zl_why[0]) goto out; /* the init code's report */
    /* Python keeps pointers into this library: it must never be unloaded (a dlclose by cudart) */
    dlopen(zluda_shim_path(), RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
    /* a C host: calls from atexit handlers registered before this one, and from destructors of
     * objects made before it (C++ statics), come after shutdown, as with NVIDIA's driver */
    atexit(zluda_shutdown);
    state = ZL_READY;
out:
    if (state == ZL_FAILED)
        fprintf(stderr, "zluda: the CUDA driver cannot start: %s; every CUDA call will fail (cuInit: "
                "CUDA_ERROR_UNKNOWN)\n", zl_why);
    __atomic_store_n(&zl_state, state, __ATOMIC_RELEASE);
}

/* Ctrl-C in a Python host stopped an entry point's wait (KeyboardInterrupt in Python): it is
 * raised again in the host's interpreter once the call has returned (zl_leave), where the host
 * can handle it, as after a call into NVIDIA's driver. */
static __thread int zl_interrupted;
void zluda_interrupted(void) { zl_interrupted = 1; }
static CUresult zl_leave(CUresult rc) {
    if (zl_interrupted) {
        zl_interrupted = 0;
        PyErr_SetInterrupt();
    }
    return rc;
}

/* 0 when the driver runs (starting it on the first call), else what the entry point returns */
static CUresult zl_enter(int is_init) {
    if (__atomic_load_n(&zl_forked, __ATOMIC_RELAXED)) return ZL_NOT_INITIALIZED;
    int state = __atomic_load_n(&zl_state, __ATOMIC_ACQUIRE);
    /* A Python host's atexit handlers all still reach the driver (frameworks free their arrays
     * there, as under NVIDIA's); once its interpreter finalises, Python code cannot run. */
    if (state == ZL_READY) return zl_finalizing() ? ZL_DEINITIALIZED : ZL_SUCCESS;
    if (state == ZL_STARTING) {
        pthread_once(&zl_start_once, zl_start);
        state = __atomic_load_n(&zl_state, __ATOMIC_ACQUIRE);
        if (state == ZL_READY) return ZL_SUCCESS;
    }
    if (state == ZL_SHUT_DOWN) return ZL_DEINITIALIZED;
    return is_init ? ZL_UNKNOWN : ZL_NOT_INITIALIZED;
}
