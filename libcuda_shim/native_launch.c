/* The launch fast path (docs/driver.md, "The native launch path"): cuLaunchKernel(Ex) of a kernel
 * the Python driver has launched before, packed, checked and queued here without the
 * interpreter, then run by a C worker thread of its stream and the pool's helpers.
 *
 * Python registers, per CUfunction, what a launch of it needs (zluda_native_register: the
 * block runner, parameter layout, limits) once its first launch went through the Python path,
 * and forgets them all when anything they were derived from changes (unload, context destroy,
 * attributes, limits). Every stream has a zl_nstream; Python tells it about its own ops
 * (zluda_native_py_submit/_py_finish), so a launch is queued here only where nothing but this
 * stream's native launches is pending in the context (their order is then this queue's), and
 * Python ops wait for the native launches before them (zluda_native_last/_wait). Anything
 * else (an error to report, a capture, a sticky error, other pending work, cooperative
 * launches, `extra`, launch attributes) returns 0 and the Python driver handles the call as before. */
#include <sched.h>
#include <stddef.h>
#include <sys/uio.h>
#include <time.h>

/* launch record slots, in the order zluda_native_setup receives them (Python's abi.Ctx) */
enum { S_PARAMS, S_GRID_X, S_BLOCK_X, S_SHARED, S_DYN_SMEM, S_STACK, S_STACK_SIZE, S_FRAMES, S_STOP, S_FIRST,
       S_COUNT, S_SMID, S_NSMID, S_STATUS, S_BARRIERS, S_TOTAL_SMEM, S_RANGES, S_NRANGES, S_PARAM_SIZE,
       S_GRID_WORKSPACE, S_SHARED_WINDOW, S_SLOTS, S_BAR_BYTES, S_RESERVED_SMEM, S_ABORTED, S_KEPT, S_WARP,
       S_BASE_ALIGN, S_N };
static int64_t zl_abi[S_N];

#define ZL_MAX_PARAMS 64
typedef int32_t (*zl_runner_t)(void *);

typedef struct zl_nstream zl_nstream;

typedef struct zl_nctx {
    pthread_mutex_t lock;
    zl_nstream *legacy;
    int pending; /* Python ops and native launches of every stream of the context not finished */
    int sticky;  /* the context's sticky error: nothing more runs */
    int blocked; /* a capture under way or a cuCtxWaitEvent: Python orders every launch */
} zl_nctx;

typedef struct zl_nlaunch zl_nlaunch;

struct zl_nstream {
    zl_nctx *ctx;
    int py_pending, native_pending;
    uint64_t submitted, completed, py_mark; /* py_mark: `submitted` at Python's last op */
    zl_nlaunch *head, *tail;
    pthread_cond_t work, done;
    int started;
};

typedef struct zl_desc {
    int refs; /* the table's and each queued launch's */
    void *fn, *ctx_handle;
    zl_nctx *ctx;
    zl_runner_t runner;
    char name[256];
    uint32_t nparams, param_size, offsets[ZL_MAX_PARAMS], sizes[ZL_MAX_PARAMS];
    uint32_t max_threads, reqntid[3], max_dynamic_shared;
    int64_t static_shared, frame_bytes, stack_size, reserved_smem, workers;
} zl_desc;

/* the bounds-check table (compiler/cpu/bounds.py) launches read: copied in, counted */
typedef struct zl_ranges { int refs; int64_t n; uint64_t pairs[]; } zl_ranges;

struct zl_nlaunch {
    zl_nlaunch *next;
    zl_nstream *stream;
    zl_desc *desc; /* counted: a launch may outlive the descriptor's place in the table */
    uint64_t seq;
    uint32_t grid[3], block[3], shared;
    unsigned char params[];
};

/* a worker's launch record and buffers; `record` is what generated code and printf see */
typedef struct zl_worker {
    unsigned char *arena, *stacks, *frames, *bars;
    size_t arena_size, stacks_size, frames_size;
    char *out; /* device printf output of the launch running, written to fd 1 at its end */
    size_t out_len, out_cap;
    int64_t record[];
} zl_worker;

typedef struct zl_callbacks {
    void (*fault)(zl_nstream *s, const char *kernel, int32_t status, int64_t *record);
    void (*refresh_ranges)(void);
    void (*worker_started)(int64_t *record); /* its printf output goes to zluda_native_output */
} zl_callbacks;
static zl_callbacks zl_cb;

static pthread_mutex_t zl_native_lock = PTHREAD_MUTEX_INITIALIZER; /* descriptors, streams, ranges */
static int zl_native_on, zl_native_paused;
#define ZL_MAP 4096 /* open addressing: handle -> descriptor / stream (live ones far fewer) */
static void *zl_desc_keys[ZL_MAP]; static zl_desc *zl_desc_vals[ZL_MAP]; static int zl_desc_count;
static void *zl_stream_keys[ZL_MAP]; static zl_nstream *zl_stream_vals[ZL_MAP]; static int zl_stream_count;
static zl_ranges *zl_range_table;
static uint64_t zl_ranges_version = 1, zl_range_table_version;
static uint32_t zl_max_block[3], zl_max_grid[3];
static uint64_t zl_native_launches; /* launches queued here: tests see the path taken */

static size_t zl_slot(void *key) { return ((uintptr_t)key >> 4) * 0x9E3779B97F4A7C15ull >> 52; }

static void *zl_map_get(void **keys, void **vals, void *key) {
    for (size_t i = zl_slot(key), n = 0; n < ZL_MAP; i = (i + 1) % ZL_MAP, n++) {
        if (keys[i] == key) return vals[i];
        if (!keys[i]) return NULL;
    }
    return NULL;
}

/* put (val != NULL) or remove; removals move later entries of the run back into place */
static int zl_map_set(void **keys, void **vals, int *count, void *key, void *val) {
    size_t i = zl_slot(key), n = 0;
    for (; n < ZL_MAP && keys[i] && keys[i] != key; i = (i + 1) % ZL_MAP, n++) {}
    if (val) {
        if (!keys[i] && *count >= ZL_MAP / 2) return 0; /* full enough: Python keeps the rest */
        if (!keys[i]) ++*count;
        keys[i] = key, vals[i] = val;
        return 1;
    }
    if (n == ZL_MAP || !keys[i]) return 1;
    keys[i] = NULL, --*count;
    for (size_t j = (i + 1) % ZL_MAP; keys[j]; j = (j + 1) % ZL_MAP) {
        void *k = keys[j], *v = vals[j];
        keys[j] = NULL, --*count;
        zl_map_set(keys, vals, count, k, v);
    }
    return 1;
}

void zluda_native_setup(const int64_t *abi, const uint32_t *max_block, const uint32_t *max_grid, void *fault,
                        void *refresh_ranges, void *worker_started) {
    memcpy(zl_abi, abi, sizeof zl_abi);
    memcpy(zl_max_block, max_block, sizeof zl_max_block);
    memcpy(zl_max_grid, max_grid, sizeof zl_max_grid);
    zl_cb.fault = fault, zl_cb.refresh_ranges = refresh_ranges, zl_cb.worker_started = worker_started;
    __atomic_store_n(&zl_native_on, 1, __ATOMIC_RELEASE);
}

void *zluda_native_context(void) {
    zl_nctx *c = calloc(1, sizeof *c);
    if (c) pthread_mutex_init(&c->lock, NULL);
    return c;
}

void zluda_native_context_state(void *ctx, int sticky, int blocked) {
    zl_nctx *c = ctx;
    pthread_mutex_lock(&c->lock);
    c->sticky = sticky, c->blocked = blocked;
    pthread_mutex_unlock(&c->lock);
}

/* a stream of ctx (legacy: the context's legacy stream) */
void *zluda_native_stream(void *ctx, int legacy) {
    zl_nstream *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->ctx = ctx;
    pthread_cond_init(&s->work, NULL);
    pthread_cond_init(&s->done, NULL);
    if (legacy) ((zl_nctx *)ctx)->legacy = s;
    return s;
}

/* cuStreamCreate: cuLaunchKernel finds the stream by its handle */
void zluda_native_stream_name(void *stream, void *handle) {
    pthread_mutex_lock(&zl_native_lock);
    zl_map_set(zl_stream_keys, (void **)zl_stream_vals, &zl_stream_count, handle, stream);
    pthread_mutex_unlock(&zl_native_lock);
}

/* cuStreamDestroy: the handle no longer names it (its queued launches still run) */
void zluda_native_stream_forget(void *handle) {
    pthread_mutex_lock(&zl_native_lock);
    zl_map_set(zl_stream_keys, (void **)zl_stream_vals, &zl_stream_count, handle, NULL);
    pthread_mutex_unlock(&zl_native_lock);
}

/* the backend needs every launch in Python for now (1) or no more (0): registered host memory,
 * which each launch checks is still mapped */
void zluda_native_pause(int paused) { __atomic_store_n(&zl_native_paused, paused, __ATOMIC_RELEASE); }

/* Python queues an op on s: it must wait for the native launch returned (0: none pending) */
uint64_t zluda_native_py_submit(void *stream) {
    zl_nstream *s = stream;
    pthread_mutex_lock(&s->ctx->lock);
    s->py_pending++, s->ctx->pending++;
    s->py_mark = s->submitted;
    uint64_t last = s->submitted > s->completed ? s->submitted : 0;
    pthread_mutex_unlock(&s->ctx->lock);
    return last;
}

void zluda_native_py_finish(void *stream) {
    zl_nstream *s = stream;
    pthread_mutex_lock(&s->ctx->lock);
    s->py_pending--, s->ctx->pending--;
    pthread_mutex_unlock(&s->ctx->lock);
}

/* the stream's last work when that is a native launch queued after every Python op, else 0 */
uint64_t zluda_native_last(void *stream) {
    zl_nstream *s = stream;
    pthread_mutex_lock(&s->ctx->lock);
    uint64_t last = s->submitted > s->py_mark ? s->submitted : 0;
    pthread_mutex_unlock(&s->ctx->lock);
    return last;
}

/* whether launch `seq` of the stream has finished, waiting up to timeout_ms for it (0: no wait) */
int zluda_native_wait(void *stream, uint64_t seq, int timeout_ms) {
    zl_nstream *s = stream;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += (long)timeout_ms * 1000000;
    until.tv_sec += until.tv_nsec / 1000000000, until.tv_nsec %= 1000000000;
    pthread_mutex_lock(&s->ctx->lock);
    while (s->completed < seq && timeout_ms && pthread_cond_timedwait(&s->done, &s->ctx->lock, &until) == 0) {}
    int done = s->completed >= seq;
    pthread_mutex_unlock(&s->ctx->lock);
    return done;
}

static void zl_desc_release(zl_desc *d) {
    if (__atomic_sub_fetch(&d->refs, 1, __ATOMIC_ACQ_REL) == 0) free(d);
}

int zluda_native_register(void *fn, void *ctx_handle, void *ctx, void *runner, const char *name, uint32_t nparams,
                          const uint32_t *offsets, const uint32_t *sizes, uint32_t param_size, uint32_t max_threads,
                          const uint32_t *reqntid, uint32_t max_dynamic_shared, int64_t static_shared,
                          int64_t frame_bytes, int64_t stack_size, int64_t reserved_smem, int64_t workers) {
    if (nparams > ZL_MAX_PARAMS) return 0;
    zl_desc *d = calloc(1, sizeof *d);
    if (!d) return 0;
    d->fn = fn, d->ctx_handle = ctx_handle, d->ctx = ctx, d->runner = (zl_runner_t)runner;
    snprintf(d->name, sizeof d->name, "%s", name);
    d->nparams = nparams, d->param_size = param_size;
    memcpy(d->offsets, offsets, nparams * sizeof *offsets);
    memcpy(d->sizes, sizes, nparams * sizeof *sizes);
    d->max_threads = max_threads, d->max_dynamic_shared = max_dynamic_shared;
    memcpy(d->reqntid, reqntid, sizeof d->reqntid);
    d->static_shared = static_shared, d->frame_bytes = frame_bytes, d->stack_size = stack_size;
    d->reserved_smem = reserved_smem, d->workers = workers;
    d->refs = 1;
    pthread_mutex_lock(&zl_native_lock);
    zl_desc *old = zl_map_get(zl_desc_keys, (void **)zl_desc_vals, fn);
    int ok = zl_map_set(zl_desc_keys, (void **)zl_desc_vals, &zl_desc_count, fn, d);
    pthread_mutex_unlock(&zl_native_lock);
    if (!ok) free(d);
    else if (old) zl_desc_release(old);
    return ok;
}

void zluda_native_forget_all(void) {
    pthread_mutex_lock(&zl_native_lock);
    for (size_t i = 0; i < ZL_MAP; i++)
        if (zl_desc_keys[i]) zl_desc_release(zl_desc_vals[i]);
    memset(zl_desc_keys, 0, sizeof zl_desc_keys);
    zl_desc_count = 0;
    pthread_mutex_unlock(&zl_native_lock);
}

/* the bounds table changed (version: its new version); the next native launch asks Python for it */
void zluda_native_ranges_changed(uint64_t version) {
    pthread_mutex_lock(&zl_native_lock);
    if (version > zl_ranges_version) zl_ranges_version = version;
    pthread_mutex_unlock(&zl_native_lock);
}

void zluda_native_set_ranges(const uint64_t *pairs, int64_t n, uint64_t version) {
    zl_ranges *r = malloc(sizeof *r + 2 * n * sizeof *pairs);
    if (!r) return;
    r->refs = 1, r->n = n;
    memcpy(r->pairs, pairs, 2 * n * sizeof *pairs);
    pthread_mutex_lock(&zl_native_lock);
    zl_ranges *old = zl_range_table;
    zl_range_table = r, zl_range_table_version = version;
    if (version > zl_ranges_version) zl_ranges_version = version; /* changes before the listener was set */
    pthread_mutex_unlock(&zl_native_lock);
    if (old && __atomic_sub_fetch(&old->refs, 1, __ATOMIC_ACQ_REL) == 0) free(old);
}

static zl_ranges *zl_ranges_acquire(void) {
    for (int tries = 0; tries < 2; tries++) {
        pthread_mutex_lock(&zl_native_lock);
        zl_ranges *r = zl_range_table_version == zl_ranges_version ? zl_range_table : NULL;
        if (r) __atomic_add_fetch(&r->refs, 1, __ATOMIC_ACQ_REL);
        pthread_mutex_unlock(&zl_native_lock);
        if (r) return r;
        zl_cb.refresh_ranges(); /* Python: RANGES.snapshot() -> zluda_native_set_ranges */
    }
    return NULL; /* changing faster than it can be read: the caller waits for a stable one */
}

uint64_t zluda_native_launch_count(void) { return __atomic_load_n(&zl_native_launches, __ATOMIC_RELAXED); }

/* device printf of the launch running on `record` (hostcalls.py, from the worker's thread) */
void zluda_native_output(int64_t *record, const char *text, size_t len) {
    zl_worker *w = (zl_worker *)((char *)record - offsetof(zl_worker, record));
    if (w->out_len + len > w->out_cap) {
        size_t cap = (w->out_len + len) * 2;
        char *grown = realloc(w->out, cap);
        if (!grown) return;
        w->out = grown, w->out_cap = cap;
    }
    memcpy(w->out + w->out_len, text, len);
    w->out_len += len;
}

static int zl_grow(unsigned char **buf, size_t *have, size_t need) {
    if (*have >= need) return 1;
    free(*buf);
    *buf = malloc(need);
    *have = *buf ? need : 0;
    return *buf != NULL;
}

static zl_worker *zl_worker_new(void) {
    zl_worker *w = calloc(1, sizeof *w + zl_abi[S_SLOTS] * sizeof(int64_t));
    if (w) w->bars = malloc(zl_abi[S_BAR_BYTES]);
    return w;
}

/* blocks [first, first+count) of l on worker w, as runtime.py's run(i) does; the block status */
static int32_t zl_run_chunk(zl_worker *w, zl_nlaunch *l, zl_ranges *r, int64_t first, int64_t count, int64_t i,
                            int32_t *stop) {
    const zl_desc *d = l->desc;
    int64_t threads = (int64_t)l->block[0] * l->block[1] * l->block[2];
    int64_t nwarps = (threads + zl_abi[S_WARP] - 1) / zl_abi[S_WARP];
    int64_t total = d->static_shared + l->shared;
    int64_t window = d->reserved_smem ? (total + 15) / 16 * 16 + zl_abi[S_RESERVED_SMEM] : total;
    int64_t stack = d->stack_size;
    int64_t align = zl_abi[S_BASE_ALIGN]; /* of the arena's and the stacks' bases: .align of .shared/.local */
    if (!zl_grow(&w->arena, &w->arena_size, (window > 16 ? window : 16) + align) ||
        !zl_grow(&w->stacks, &w->stacks_size, (threads * stack > 16 ? threads * stack : 16) + align) ||
        !zl_grow(&w->frames, &w->frames_size, nwarps * d->frame_bytes > 64 ? nwarps * d->frame_bytes : 64))
        return -1; /* no memory for the buffers */
    int64_t *x = w->record;
    memset(x, 0, zl_abi[S_SLOTS] * sizeof *x);
    int64_t arena = ((int64_t)(uintptr_t)w->arena + align - 1) / align * align;
    int64_t stacks = ((int64_t)(uintptr_t)w->stacks + align - 1) / align * align;
    memset((void *)(uintptr_t)arena, 0, window);
    memset(w->bars, 0, zl_abi[S_BAR_BYTES]);
    x[zl_abi[S_PARAMS]] = (int64_t)(uintptr_t)l->params;
    for (int k = 0; k < 3; k++) {
        x[zl_abi[S_GRID_X] + k] = l->grid[k];
        x[zl_abi[S_BLOCK_X] + k] = l->block[k];
    }
    x[zl_abi[S_SHARED]] = arena;
    x[zl_abi[S_DYN_SMEM]] = l->shared;
    x[zl_abi[S_TOTAL_SMEM]] = total;
    x[zl_abi[S_SHARED_WINDOW]] = window;
    x[zl_abi[S_STACK]] = stacks;
    x[zl_abi[S_STACK_SIZE]] = stack;
    x[zl_abi[S_FRAMES]] = (int64_t)(uintptr_t)w->frames;
    x[zl_abi[S_STOP]] = (int64_t)(uintptr_t)stop;
    x[zl_abi[S_FIRST]] = first, x[zl_abi[S_COUNT]] = count;
    x[zl_abi[S_SMID]] = i % d->workers, x[zl_abi[S_NSMID]] = d->workers;
    x[zl_abi[S_BARRIERS]] = (int64_t)(uintptr_t)w->bars;
    x[zl_abi[S_GRID_WORKSPACE]] = 0;
    x[zl_abi[S_RANGES]] = (int64_t)(uintptr_t)r->pairs, x[zl_abi[S_NRANGES]] = r->n;
    x[zl_abi[S_PARAM_SIZE]] = d->param_size;
    int32_t status = d->runner(x);
    return status ? status : (int32_t)x[zl_abi[S_STATUS]];
}

static void zl_release(zl_ranges *r) {
    if (__atomic_sub_fetch(&r->refs, 1, __ATOMIC_ACQ_REL) == 0) free(r);
}

/* A launch's chunks (runtime.py's split: min(blocks, 4 x workers) ranges of blocks), taken one
 * at a time by its stream's worker and the pool's helpers, as Python's pool maps them. */
typedef struct zl_job {
    struct zl_job *next;
    zl_nlaunch *launch;
    zl_ranges *ranges;
    int64_t nblocks, chunks, taken, finished, fault_chunk;
    int32_t stop, fault;
    int64_t *record; /* the launch record of the first chunk (in chunk order) that faulted */
    char *out;       /* printf output of its chunks, in the order they finished */
    size_t out_len;
    pthread_cond_t all_done;
} zl_job;

static pthread_mutex_t zl_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t zl_pool_work = PTHREAD_COND_INITIALIZER;
static zl_job *zl_jobs; /* jobs with chunks not yet taken */
static int64_t zl_helpers; /* pool threads started: workers - 1 (a stream's worker is the other) */

static int zl_start_thread(void *(*fn)(void *), void *arg) {
    pthread_attr_t attr;
    pthread_t thread;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 << 20); /* native recursion through .func calls, as the pool's */
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int failed = pthread_create(&thread, &attr, fn, arg);
    pthread_attr_destroy(&attr);
    return !failed;
}

/* run chunk i of job on w (pool lock not held); the lock is held again on return */
static void zl_run_job_chunk(zl_worker *w, zl_job *job, int64_t i) {
    int64_t first = job->nblocks * i / job->chunks, count = job->nblocks * (i + 1) / job->chunks - first;
    int32_t status = zl_run_chunk(w, job->launch, job->ranges, first, count, i, &job->stop);
    int faulted = status && status != zl_abi[S_ABORTED];
    int64_t *record = NULL;
    if (faulted && status > 0 && (record = malloc(zl_abi[S_SLOTS] * sizeof *record)))
        memcpy(record, w->record, zl_abi[S_SLOTS] * sizeof *record);
    pthread_mutex_lock(&zl_pool_lock);
    if (faulted && (!job->fault || i < job->fault_chunk)) {
        free(job->record);
        job->fault = status, job->fault_chunk = i, job->record = record;
    } else {
        free(record);
    }
    if (w->out_len) {
        char *grown = realloc(job->out, job->out_len + w->out_len);
        if (grown) {
            memcpy(grown + job->out_len, w->out, w->out_len);
            job->out = grown, job->out_len += w->out_len;
        }
        w->out_len = 0;
    }
    if (++job->finished == job->chunks) pthread_cond_signal(&job->all_done);
    if (w->arena_size + w->stacks_size + w->frames_size > (size_t)zl_abi[S_KEPT]) {
        free(w->arena), free(w->stacks), free(w->frames);
        w->arena = w->stacks = w->frames = NULL;
        w->arena_size = w->stacks_size = w->frames_size = 0;
    }
}

/* the next chunk of job, unlisting the job when it was the last (pool lock held); -1: none left */
static int64_t zl_take(zl_job *job) {
    if (job->taken == job->chunks) return -1;
    int64_t i = job->taken++;
    if (job->taken == job->chunks)
        for (zl_job **p = &zl_jobs; *p; p = &(*p)->next)
            if (*p == job) {
                *p = job->next;
                break;
            }
    return i;
}

static void *zl_helper(void *arg) {
    (void)arg;
    zl_worker *w = zl_worker_new();
    zl_cb.worker_started(w ? w->record : NULL);
    pthread_mutex_lock(&zl_pool_lock);
    for (;;) {
        while (!zl_jobs || !w || !w->bars) pthread_cond_wait(&zl_pool_work, &zl_pool_lock);
        zl_job *job = zl_jobs;
        int64_t i = zl_take(job);
        pthread_mutex_unlock(&zl_pool_lock);
        zl_run_job_chunk(w, job, i);
    }
    return NULL;
}

/* one launch, run by the stream's worker w with the pool's helpers */
static void zl_run_launch(zl_worker *w, zl_nlaunch *l) {
    const zl_desc *d = l->desc;
    zl_job job = {.launch = l};
    while (!(job.ranges = zl_ranges_acquire())) sched_yield();
    job.nblocks = (int64_t)l->grid[0] * l->grid[1] * l->grid[2];
    job.chunks = job.nblocks < d->workers * 4 ? job.nblocks : d->workers * 4;
    pthread_cond_init(&job.all_done, NULL);
    pthread_mutex_lock(&zl_pool_lock);
    if (job.chunks > 1) {
        while (zl_helpers < d->workers - 1 && zl_start_thread(zl_helper, NULL)) zl_helpers++;
        job.next = zl_jobs, zl_jobs = &job;
        pthread_cond_broadcast(&zl_pool_work);
    }
    for (int64_t i; (i = zl_take(&job)) >= 0;) {
        pthread_mutex_unlock(&zl_pool_lock);
        zl_run_job_chunk(w, &job, i);
    }
    while (job.finished < job.chunks) pthread_cond_wait(&job.all_done, &zl_pool_lock);
    pthread_mutex_unlock(&zl_pool_lock);
    pthread_cond_destroy(&job.all_done);
    zl_release(job.ranges);
    for (size_t done = 0; done < job.out_len;) { /* in order, before the launch completes */
        ssize_t n = write(1, job.out + done, job.out_len - done);
        if (n <= 0) break;
        done += n;
    }
    free(job.out);
    if (job.fault) zl_cb.fault(l->stream, d->name, job.fault, job.record); /* no record: no memory for the buffers */
    free(job.record);
}

static void *zl_stream_worker(void *arg) {
    zl_nstream *s = arg;
    zl_worker *w = zl_worker_new();
    zl_cb.worker_started(w ? w->record : NULL);
    for (;;) {
        pthread_mutex_lock(&s->ctx->lock);
        while (!s->head) pthread_cond_wait(&s->work, &s->ctx->lock);
        zl_nlaunch *l = s->head;
        int sticky = s->ctx->sticky;
        pthread_mutex_unlock(&s->ctx->lock);
        if (!sticky) { /* a corrupted context runs nothing more */
            if (w && w->bars) zl_run_launch(w, l);
            else zl_cb.fault(s, l->desc->name, -1, NULL);
        }
        pthread_mutex_lock(&s->ctx->lock);
        s->head = l->next;
        if (!s->head) s->tail = NULL;
        s->completed = l->seq;
        s->native_pending--, s->ctx->pending--;
        pthread_cond_broadcast(&s->done);
        pthread_mutex_unlock(&s->ctx->lock);
        zl_desc_release(l->desc);
        free(l);
    }
    return NULL;
}

/* the native path of cuLaunchKernel(_ptsz): 1 when the launch was queued here, 0 when the
 * Python driver must handle the call (which then reports whatever is wrong with it) */
static int zl_native_launch(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                            unsigned shared, void *stream, void **kernel_params, void **extra, int per_thread) {
    if (!__atomic_load_n(&zl_native_on, __ATOMIC_ACQUIRE) || __atomic_load_n(&zl_native_paused, __ATOMIC_ACQUIRE) || extra)
        return 0;
    void *ctx_handle = zluda_tls_current();
    pthread_mutex_lock(&zl_native_lock);
    zl_desc *d = zl_map_get(zl_desc_keys, (void **)zl_desc_vals, f);
    if (d && d->ctx_handle == ctx_handle) __atomic_add_fetch(&d->refs, 1, __ATOMIC_ACQ_REL);
    else d = NULL;
    zl_nstream *s = NULL;
    if ((uintptr_t)stream > 2) s = zl_map_get(zl_stream_keys, (void **)zl_stream_vals, stream);
    pthread_mutex_unlock(&zl_native_lock);
    if (!d) return 0;
    zl_nlaunch *l = NULL;
    /* NULL is the legacy stream (the per-thread one in _ptsz), 1 CU_STREAM_LEGACY, 2 CU_STREAM_PER_THREAD */
    if ((uintptr_t)stream == 1 || (!stream && !per_thread)) s = d->ctx->legacy;
    if (!s || s->ctx != d->ctx) goto python;
    unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
    for (int k = 0; k < 3; k++)
        if (!grid[k] || !block[k] || grid[k] > zl_max_grid[k] || block[k] > zl_max_block[k]) goto python;
    uint64_t threads = (uint64_t)bx * by * bz;
    if (threads > d->max_threads || shared > d->max_dynamic_shared) goto python;
    if (d->reqntid[0] && (d->reqntid[0] != bx || d->reqntid[1] != by || d->reqntid[2] != bz)) goto python;
    l = malloc(sizeof *l + (d->param_size ? d->param_size : 1));
    if (!l) goto python;
    if (d->nparams) { /* the array and each parameter read with the kernel's checks: bad memory fails, never faults */
        void *pointers[ZL_MAX_PARAMS];
        struct iovec local[ZL_MAX_PARAMS], remote[ZL_MAX_PARAMS];
        size_t bytes = d->nparams * sizeof(void *), total = 0;
        local[0] = (struct iovec){pointers, bytes}, remote[0] = (struct iovec){kernel_params, bytes};
        if (!kernel_params || process_vm_readv(getpid(), local, 1, remote, 1, 0) != (ssize_t)bytes) goto python;
        memset(l->params, 0, d->param_size);
        for (uint32_t i = 0; i < d->nparams; i++) {
            if (!pointers[i]) goto python;
            local[i] = (struct iovec){l->params + d->offsets[i], d->sizes[i]};
            remote[i] = (struct iovec){pointers[i], d->sizes[i]};
            total += d->sizes[i];
        }
        if (process_vm_readv(getpid(), local, d->nparams, remote, d->nparams, 0) != (ssize_t)total) goto python;
    }
    l->next = NULL, l->stream = s, l->desc = d, l->shared = shared;
    memcpy(l->grid, grid, sizeof grid);
    memcpy(l->block, block, sizeof block);
    zl_nctx *c = d->ctx;
    pthread_mutex_lock(&c->lock);
    /* ordered by this stream's queue alone: nothing else pending in the context */
    if (c->sticky || c->blocked || s->py_pending || c->pending != s->native_pending) {
        pthread_mutex_unlock(&c->lock);
        goto python;
    }
    if (!s->started) {
        if (!zl_start_thread(zl_stream_worker, s)) {
            pthread_mutex_unlock(&c->lock);
            goto python;
        }
        s->started = 1;
    }
    l->seq = ++s->submitted;
    s->native_pending++, c->pending++;
    if (s->tail) s->tail->next = l;
    else s->head = l;
    s->tail = l;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&c->lock);
    __atomic_add_fetch(&zl_native_launches, 1, __ATOMIC_RELAXED);
    return 1;
python:
    free(l);
    zl_desc_release(d);
    return 0;
}


/* cuLaunchKernelEx(_ptsz): the same path for a config without attributes (cuda.h's CUlaunchConfig,
 * read with the kernel's checks: an unreadable one goes to Python, which reports it) */
typedef struct {
    unsigned grid[3], block[3], shared;
    void *stream, *attrs;
    unsigned nattrs;
} zl_launch_config;

static int zl_native_launch_ex(const void *config, void *f, void **kernel_params, void **extra, int per_thread) {
    zl_launch_config c;
    struct iovec local = {&c, sizeof c}, remote = {(void *)config, sizeof c};
    if (!config || !__atomic_load_n(&zl_native_on, __ATOMIC_ACQUIRE) ||
        process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != (ssize_t)sizeof c || c.nattrs)
        return 0;
    return zl_native_launch(f, c.grid[0], c.grid[1], c.grid[2], c.block[0], c.block[1], c.block[2], c.shared, c.stream,
                            kernel_params, extra, per_thread);
}
