// Thrust sort, reduce and inclusive/exclusive scan on device vectors, each compared with the
// same algorithm run on the host (std::). Kept to int keys: every extra type or comparator
// instantiates another set of CUB kernels to translate.
#include <algorithm>
#include <cstdio>
#include <numeric>
#include <vector>
#include <thrust/device_vector.h>
#include <thrust/functional.h>
#include <thrust/reduce.h>
#include <thrust/scan.h>
#include <thrust/sort.h>

static int failures = 0;
#define EXPECT(cond)                                                                                   \
    do {                                                                                               \
        if (!(cond) && failures++ < 10) fprintf(stderr, "%s:%d: FAILED %s\n", __FILE__, __LINE__, #cond); \
    } while (0)

int main() {
    const int n = 50000;
    std::vector<int> h(n);
    unsigned state = 12345;
    for (int i = 0; i < n; i++) {
        state = state * 1664525u + 1013904223u;
        h[i] = (int)(state >> 8) - (1 << 23);  // negative and positive
    }

    thrust::device_vector<int> d(h.begin(), h.end());
    thrust::sort(d.begin(), d.end());
    std::vector<int> sorted = h, back(n);
    std::sort(sorted.begin(), sorted.end());
    thrust::copy(d.begin(), d.end(), back.begin());
    EXPECT(back == sorted);

    thrust::device_vector<int> src(h.begin(), h.end());
    long long sum = thrust::reduce(src.begin(), src.end(), 0ll, thrust::plus<long long>());
    EXPECT(sum == std::accumulate(h.begin(), h.end(), 0ll));
    int mx = thrust::reduce(src.begin(), src.end(), h[0], thrust::maximum<int>());
    EXPECT(mx == *std::max_element(h.begin(), h.end()));

    thrust::device_vector<int> inc(n), exc(n);
    thrust::inclusive_scan(src.begin(), src.end(), inc.begin());
    thrust::exclusive_scan(src.begin(), src.end(), exc.begin(), 100);
    std::vector<int> hinc(n), hexc(n), ginc(n), gexc(n);
    std::inclusive_scan(h.begin(), h.end(), hinc.begin(), [](int x, int y) { return (int)((unsigned)x + (unsigned)y); });
    std::exclusive_scan(h.begin(), h.end(), hexc.begin(), 100, [](int x, int y) { return (int)((unsigned)x + (unsigned)y); });
    thrust::copy(inc.begin(), inc.end(), ginc.begin());
    thrust::copy(exc.begin(), exc.end(), gexc.begin());
    EXPECT(ginc == hinc);
    EXPECT(gexc == hexc);

    printf("thrust: %s\n", failures ? "FAILED" : "PASSED");
    return failures ? 1 : 0;
}
