// Thrust sort, sort_by_key, reduce, inclusive/exclusive scan and transform on device vectors,
// each compared with the same algorithm run on the host (std::).
#include <algorithm>
#include <cstdio>
#include <numeric>
#include <vector>
#include <thrust/device_vector.h>
#include <thrust/functional.h>
#include <thrust/reduce.h>
#include <thrust/scan.h>
#include <thrust/sort.h>
#include <thrust/transform.h>

static int failures = 0;
#define EXPECT(cond)                                                                                   \
    do {                                                                                               \
        if (!(cond) && failures++ < 10) fprintf(stderr, "%s:%d: FAILED %s\n", __FILE__, __LINE__, #cond); \
    } while (0)

struct square_minus {
    __host__ __device__ long long operator()(int x) const { return (long long)x * x - 7; }
};

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

    thrust::device_vector<int> keys(h.begin(), h.end());
    thrust::device_vector<int> vals(n);
    thrust::sequence(vals.begin(), vals.end());
    thrust::stable_sort_by_key(keys.begin(), keys.end(), vals.begin(), thrust::greater<int>());
    std::vector<int> order(n), got(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return h[a] > h[b]; });
    thrust::copy(vals.begin(), vals.end(), got.begin());
    EXPECT(got == order);

    thrust::device_vector<int> src(h.begin(), h.end());
    long long sum = thrust::reduce(src.begin(), src.end(), 0ll, thrust::plus<long long>());
    EXPECT(sum == std::accumulate(h.begin(), h.end(), 0ll));
    int mx = thrust::reduce(src.begin(), src.end(), h[0], thrust::maximum<int>());
    EXPECT(mx == *std::max_element(h.begin(), h.end()));

    thrust::device_vector<long long> sq(n);
    thrust::transform(src.begin(), src.end(), sq.begin(), square_minus());
    thrust::device_vector<long long> inc(n), exc(n);
    thrust::inclusive_scan(sq.begin(), sq.end(), inc.begin());
    thrust::exclusive_scan(sq.begin(), sq.end(), exc.begin(), 100ll);
    std::vector<long long> hsq(n), hinc(n), hexc(n), ginc(n), gexc(n);
    for (int i = 0; i < n; i++) hsq[i] = (long long)h[i] * h[i] - 7;
    std::inclusive_scan(hsq.begin(), hsq.end(), hinc.begin());
    std::exclusive_scan(hsq.begin(), hsq.end(), hexc.begin(), 100ll);
    thrust::copy(inc.begin(), inc.end(), ginc.begin());
    thrust::copy(exc.begin(), exc.end(), gexc.begin());
    EXPECT(ginc == hinc);
    EXPECT(gexc == hexc);

    printf("thrust: %s\n", failures ? "FAILED" : "PASSED");
    return failures ? 1 : 0;
}
