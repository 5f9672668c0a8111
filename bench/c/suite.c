// bench/kernels.py's C side: each kernel of bench/cuda/suite.cu as a loop nest, gcc -O3
// -march=native -fopenmp (threads from OMP_NUM_THREADS, inner loops `omp simd`).
//   suite REPS KERNEL:SIZE ...   prints "KERNEL BEST_SECONDS CHECKSUM", as the CUDA host does
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float in_f(unsigned i) { return (float)((i * 37u) % 101u) * 0.01f - 0.5f; }
static float in_g(unsigned i) { return (float)((int)((i * 37u) % 17u) - 8); }
static unsigned in_h(unsigned i) { return (i * 2654435761u) >> 8; }

static void saxpy(int n, float a, const float* restrict x, float* restrict y) {
    #pragma omp parallel for simd schedule(static)
    for (int i = 0; i < n; i++) y[i] = a * x[i] + y[i];
}

static void sgemm(int n, const float* restrict a, const float* restrict b, float* restrict c) {
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++) {
        float* restrict ci = c + (size_t)i * n;
        for (int j = 0; j < n; j++) ci[j] = 0.0f;
        for (int k = 0; k < n; k++) {
            float aik = a[(size_t)i * n + k];
            const float* restrict bk = b + (size_t)k * n;
            #pragma omp simd
            for (int j = 0; j < n; j++) ci[j] += aik * bk[j];
        }
    }
}

static void block_reduce(int n, const float* restrict in, float* restrict out) {
    #pragma omp parallel for schedule(static)
    for (int b = 0; b < n / 256; b++) {
        float s = 0.0f;
        #pragma omp simd reduction(+:s)
        for (int t = 0; t < 256; t++) s += in[b * 256 + t];
        out[b] = s;
    }
}

static void warp_reduce(int n, const float* restrict in, float* restrict out) {
    #pragma omp parallel for simd schedule(static)
    for (int w = 0; w < n / 32; w++) {
        float s = 0.0f;
        for (int t = 0; t < 32; t++) s += in[w * 32 + t];
        out[w] = s;
    }
}

static void stencil(int w, const float* restrict in, float* restrict out) {
    #pragma omp parallel for schedule(static)
    for (int y = 0; y < w; y++) {
        if (y == 0 || y == w - 1) {
            memcpy(out + (size_t)y * w, in + (size_t)y * w, sizeof(float) * w);
            continue;
        }
        const float* r = in + (size_t)y * w;
        float* o = out + (size_t)y * w;
        o[0] = r[0];
        o[w - 1] = r[w - 1];
        #pragma omp simd
        for (int x = 1; x < w - 1; x++) o[x] = 0.2f * (r[x] + r[x - 1] + r[x + 1] + r[x - w] + r[x + w]);
    }
}

static void histogram(int n, const unsigned* restrict in, unsigned* restrict bins) {
    #pragma omp parallel
    {
        unsigned local[256] = {0};
        #pragma omp for schedule(static)
        for (int i = 0; i < n; i++) local[in[i] & 255u]++;
        for (int k = 0; k < 256; k++) {
            #pragma omp atomic
            bins[k] += local[k];
        }
    }
}

static void nbody(int n, const float* restrict pos, float* restrict acc) {
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++) {
        float px = pos[4 * i], py = pos[4 * i + 1], pz = pos[4 * i + 2];
        float ax = 0.0f, ay = 0.0f, az = 0.0f;
        #pragma omp simd reduction(+:ax, ay, az)
        for (int j = 0; j < n; j++) {
            float dx = pos[4 * j] - px, dy = pos[4 * j + 1] - py, dz = pos[4 * j + 2] - pz;
            float d2 = dx * dx + dy * dy + dz * dz + 0.01f;
            float inv = 1.0f / sqrtf(d2);
            float s = pos[4 * j + 3] * inv * inv * inv;
            ax += dx * s; ay += dy * s; az += dz * s;
        }
        acc[4 * i] = ax; acc[4 * i + 1] = ay; acc[4 * i + 2] = az; acc[4 * i + 3] = 0.0f;
    }
}

static void scan(int n, const float* restrict in, float* restrict out) {
    #pragma omp parallel for schedule(static)
    for (int b = 0; b < n / 256; b++) {
        float s = 0.0f;
        for (int t = 0; t < 256; t++) out[b * 256 + t] = s += in[b * 256 + t];
    }
}

typedef void (*kernel_fn)(void);
static int n_;
static void *in_, *out_, *aux_;
static void run_saxpy(void) { saxpy(n_, 2.0f, in_, out_); }
static void run_sgemm(void) { sgemm(n_, in_, aux_, out_); }
static void run_block_reduce(void) { block_reduce(n_, in_, out_); }
static void run_warp_reduce(void) { warp_reduce(n_, in_, out_); }
static void run_stencil(void) { stencil(n_, in_, out_); }
static void run_histogram(void) { histogram(n_, in_, out_); }
static void run_nbody(void) { nbody(n_, in_, out_); }
static void run_scan(void) { scan(n_, in_, out_); }

// Checksum of the first run's output (same weights as the CUDA host), then the best of `reps`.
static void time_kernel(const char* name, kernel_fn fn, int reps, size_t count, int is_uint) {
    fn();
    double sum = 0;
    for (size_t k = 0; k < count; k++)
        sum += (is_uint ? (double)((unsigned*)out_)[k] : fabs((double)((float*)out_)[k])) * (double)(k % 7 + 1);
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t = omp_get_wtime();
        fn();
        t = omp_get_wtime() - t;
        if (t < best) best = t;
    }
    printf("%s %.9g %.17g\n", name, best, sum);
    fflush(stdout);
}

static void* floats(size_t count, float (*f)(unsigned), float scale) {
    float* p = aligned_alloc(64, (count * sizeof(float) + 63) / 64 * 64);
    for (size_t i = 0; i < count; i++) p[i] = f ? f(i) * scale : 0.0f;
    return p;
}

int main(int argc, char** argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s REPS KERNEL:SIZE...\n", argv[0]);
        return 2;
    }
    int reps = atoi(argv[1]);
    for (int k = 2; k < argc; k++) {
        char name[64];
        if (sscanf(argv[k], "%63[^:]:%d", name, &n_) != 2) return 2;
        size_t n = n_, count = n;
        kernel_fn fn;
        int is_uint = 0;
        aux_ = NULL;
        if (!strcmp(name, "saxpy") || !strcmp(name, "saxpy_grid")) {  // the same loop in C
            in_ = floats(n, in_f, 1.0f), out_ = floats(n, in_g, 1.0f), fn = run_saxpy;
        } else if (!strcmp(name, "sgemm")) {
            in_ = floats(n * n, in_f, 1.0f), aux_ = floats(n * n, in_g, 0.125f), out_ = floats(n * n, NULL, 0);
            fn = run_sgemm, count = n * n;
        } else if (!strcmp(name, "block_reduce") || !strcmp(name, "warp_reduce") || !strcmp(name, "scan")) {
            in_ = floats(n, in_g, 1.0f), out_ = floats(n, NULL, 0);
            fn = name[0] == 'b' ? run_block_reduce : name[0] == 'w' ? run_warp_reduce : run_scan;
            count = name[0] == 'b' ? n / 256 : name[0] == 'w' ? n / 32 : n;
        } else if (!strcmp(name, "stencil")) {
            in_ = floats(n * n, in_f, 1.0f), out_ = floats(n * n, NULL, 0), fn = run_stencil, count = n * n;
        } else if (!strcmp(name, "histogram")) {
            unsigned* x = aligned_alloc(64, (n * 4 + 63) / 64 * 64);
            for (size_t i = 0; i < n; i++) x[i] = in_h(i);
            in_ = x, out_ = calloc(256, sizeof(unsigned)), fn = run_histogram, count = 256, is_uint = 1;
        } else if (!strcmp(name, "nbody")) {
            float* p = floats(4 * n, in_f, 1.0f);
            for (size_t i = 0; i < n; i++) p[4 * i + 3] += 1.0f;
            in_ = p, out_ = floats(4 * n, NULL, 0), fn = run_nbody, count = 4 * n;
        } else {
            fprintf(stderr, "unknown kernel %s\n", name);
            return 2;
        }
        time_kernel(name, fn, reps, count, is_uint);
        free(in_), free(out_), free(aux_);
    }
    return 0;
}
