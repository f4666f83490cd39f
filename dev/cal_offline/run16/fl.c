#include <math.h>
#include <string.h>
/* fluid model: K producers, producer i in group g[i] (FIFO of capacity C each), buffer entity e[i]
 * (beta bytes each), FIFOs drained fairly at R; returns the last producer's issue end (ns). */
double fl_sim(int K, const int *g, int ng, const int *e, int ne, double B, double r, double R,
              double C, double beta, double dt)
{
    double left[1024], own[1024], fill[64], want[1024], tot[1024], gt[64], frac[1024], gf[64];
    int eg[1024];
    for (int i = 0; i < K; i++) { left[i] = B; eg[e[i]] = g[i]; }
    memset(own, 0, sizeof own); memset(fill, 0, sizeof fill);
    double t = 0; int ndone = 0; double last = 0;
    char done[1024]; memset(done, 0, sizeof done);
    while (ndone < K) {
        double d = R * dt;
        for (int it = 0; it < ng && d > 1e-9; it++) {
            int n = 0;
            for (int j = 0; j < ng; j++) n += fill[j] > 1e-9;
            if (!n) break;
            double s = d / n;
            for (int j = 0; j < ng; j++) if (fill[j] > 1e-9) { double x = fill[j] < s ? fill[j] : s; fill[j] -= x; d -= x; }
        }
        for (int i = 0; i < K; i++) want[i] = left[i] < r * dt ? left[i] : r * dt;
        if (beta > 0) {
            for (int x = 0; x < ne; x++) tot[x] = 0;
            for (int i = 0; i < K; i++) tot[e[i]] += want[i];
            for (int x = 0; x < ne; x++) { double room = beta - own[x]; if (room < 0) room = 0; frac[x] = tot[x] > 0 ? (room / tot[x] < 1 ? room / tot[x] : 1) : 0; }
            for (int i = 0; i < K; i++) { double a = want[i] * frac[e[i]]; left[i] -= a; own[e[i]] += a; }
            for (int j = 0; j < ng; j++) gt[j] = 0;
            for (int x = 0; x < ne; x++) gt[eg[x]] += own[x];
            for (int j = 0; j < ng; j++) { double room = C - fill[j]; if (room < 0) room = 0; gf[j] = gt[j] > 0 ? (room / gt[j] < 1 ? room / gt[j] : 1) : 0; }
            for (int x = 0; x < ne; x++) { double a = own[x] * gf[eg[x]]; own[x] -= a; fill[eg[x]] += a; }
        } else {
            for (int j = 0; j < ng; j++) gt[j] = 0;
            for (int i = 0; i < K; i++) gt[g[i]] += want[i];
            for (int j = 0; j < ng; j++) { double room = C - fill[j]; if (room < 0) room = 0; gf[j] = gt[j] > 0 ? (room / gt[j] < 1 ? room / gt[j] : 1) : 0; }
            for (int i = 0; i < K; i++) { double a = want[i] * gf[g[i]]; left[i] -= a; fill[g[i]] += a; }
        }
        t += dt;
        for (int i = 0; i < K; i++) if (!done[i] && left[i] <= 1e-6) { done[i] = 1; ndone++; last = t; }
    }
    return last;
}
