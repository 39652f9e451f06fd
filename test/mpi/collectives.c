/*
 * collectives: MPI_Bcast (small int vectors from every root, 4 MiB byte
 * buffers), MPI_Allreduce (MPI_SUM of ints and doubles, counts 1 .. 1M,
 * also MPI_IN_PLACE) and MPI_Alltoallv with uneven counts (including zero
 * and > 64 KiB blocks) and gaps between blocks.  Results are checked
 * against values computed analytically; double inputs are chosen so that
 * every partial sum is exact, independent of reduction order.
 *
 * Option: -b BYTES  size of the large broadcast (default 4 MiB).
 */
#include "mpitest.h"

#include <unistd.h>

static int rank, nprocs;
static uint64_t wire_bytes; /* lower bound of inter-rank payload */

static void test_bcast_small(void)
{
    static const int counts[] = {0, 1, 7, 100, 1000, 20000};
    for (int root = 0; root < nprocs; root++) {
        for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
            int n = counts[c];
            uint32_t seed = mt_seed(root, n, 1, 0xBC);
            int *buf = mt_malloc(sizeof(int) * (n + 1));
            for (int i = 0; i <= n; i++) {
                buf[i] = (rank == root || i == n) ? (int) mt_hash(seed, i) : -1;
            }
            MT_CHECK(MPI_Bcast(buf, n, MPI_INT, root, MPI_COMM_WORLD));
            for (int i = 0; i <= n; i++) {
                if (buf[i] != (int) mt_hash(seed, i)) {
                    mt_die("bcast of %d ints from root %d: element %d is %d, "
                           "expected %d%s",
                           n, root, i, buf[i], (int) mt_hash(seed, i),
                           i == n ? " (element past the end)" : "");
                }
            }
            if (rank == root) {
                wire_bytes += (uint64_t) (nprocs - 1) * n * sizeof(int);
            }
            free(buf);
        }
    }
}

static void test_bcast_large(size_t bytes)
{
    uint8_t *buf = mt_malloc(bytes);
    for (int root = 0; root < nprocs; root++) {
        uint32_t seed = mt_seed(root, (uint32_t) bytes, 2, 0xBC);
        char what[64];
        if (rank == root) {
            mt_fill(buf, bytes, seed);
        } else {
            memset(buf, MT_POISON, bytes);
        }
        MT_CHECK(MPI_Bcast(buf, (int) bytes, MPI_BYTE, root, MPI_COMM_WORLD));
        snprintf(what, sizeof(what), "bcast of %zu bytes from root %d", bytes, root);
        mt_verify(buf, bytes, seed, what);
        if (rank == root) {
            wire_bytes += (uint64_t) (nprocs - 1) * bytes;
        }
    }
    free(buf);
}

/* int input of rank r: (r+1)*(i%1000) - r*(i%7) */
static void test_allreduce_int(int n, int in_place)
{
    int *in = mt_malloc(sizeof(int) * n), *out = mt_malloc(sizeof(int) * n);
    long s1 = (long) nprocs * (nprocs + 1) / 2; /* sum of r+1 */
    long s0 = (long) nprocs * (nprocs - 1) / 2; /* sum of r */
    for (int i = 0; i < n; i++) {
        in[i] = (rank + 1) * (i % 1000) - rank * (i % 7);
        out[i] = in_place ? in[i] : -12345;
    }
    MT_CHECK(MPI_Allreduce(in_place ? MPI_IN_PLACE : in, out, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    for (int i = 0; i < n; i++) {
        long want = s1 * (i % 1000) - s0 * (i % 7);
        if (out[i] != want) {
            mt_die("allreduce(sum) of %d ints%s: element %d is %d, expected "
                   "%ld",
                   n, in_place ? " in place" : "", i, out[i], want);
        }
    }
    if (rank == 0) {
        wire_bytes += (uint64_t) (nprocs - 1) * n * sizeof(int);
    }
    free(in);
    free(out);
}

/* double input of rank r: (r+1) * (0.5 + (i%1024)/4), all sums exact */
static void test_allreduce_double(int n)
{
    double *in = mt_malloc(sizeof(double) * n);
    double *out = mt_malloc(sizeof(double) * n);
    double s1 = (double) nprocs * (nprocs + 1) / 2;
    for (int i = 0; i < n; i++) {
        in[i] = (rank + 1) * (0.5 + (i % 1024) * 0.25);
        out[i] = -1.0;
    }
    MT_CHECK(MPI_Allreduce(in, out, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    for (int i = 0; i < n; i++) {
        double want = s1 * (0.5 + (i % 1024) * 0.25);
        if (out[i] != want) {
            mt_die("allreduce(sum) of %d doubles: element %d is %.17g, "
                   "expected %.17g",
                   n, i, out[i], want);
        }
    }
    if (rank == 0) {
        wire_bytes += (uint64_t) (nprocs - 1) * n * sizeof(double);
    }
    free(in);
    free(out);
}

/* bytes rank i sends to rank j in alltoallv iteration it */
static int a2a_count(int i, int j, int it)
{
    int c = ((i * 5 + j * 3 + it + 1) % 7) * 997;
    if ((i + j + it) % 3 == 0) {
        c += 150000;
    }
    return c;
}

#define SGAP 13
#define RGAP 29

static void test_alltoallv(int it)
{
    int *sc = mt_malloc(sizeof(int) * nprocs);
    int *sd = mt_malloc(sizeof(int) * nprocs);
    int *rc = mt_malloc(sizeof(int) * nprocs);
    int *rd = mt_malloc(sizeof(int) * nprocs);
    size_t stot = 0, rtot = 0;
    for (int p = 0; p < nprocs; p++) {
        sc[p] = a2a_count(rank, p, it);
        rc[p] = a2a_count(p, rank, it);
    }
    /* blocks laid out in reverse peer order, with gaps between them */
    for (int k = nprocs - 1; k >= 0; k--) {
        sd[k] = (int) stot + SGAP;
        stot += SGAP + sc[k];
        rd[k] = (int) rtot + RGAP;
        rtot += RGAP + rc[k];
    }
    stot += SGAP;
    rtot += RGAP;
    uint8_t *sbuf = mt_malloc(stot), *rbuf = mt_malloc(rtot);
    memset(sbuf, MT_POISON, stot);
    memset(rbuf, MT_POISON, rtot);
    for (int p = 0; p < nprocs; p++) {
        mt_fill(sbuf + sd[p], sc[p], mt_seed(rank, p, it, 0xA2A));
    }
    MT_CHECK(MPI_Alltoallv(sbuf, sc, sd, MPI_BYTE, rbuf, rc, rd, MPI_BYTE, MPI_COMM_WORLD));
    size_t prev_end = 0;
    for (int k = nprocs - 1; k >= 0; k--) {
        char what[96];
        snprintf(what, sizeof(what),
                 "alltoallv %d: block of %d bytes from "
                 "rank %d",
                 it, rc[k], k);
        mt_verify_poison(rbuf + prev_end, rd[k] - prev_end, "alltoallv gap before a receive block");
        mt_verify(rbuf + rd[k], rc[k], mt_seed(k, rank, it, 0xA2A), what);
        prev_end = rd[k] + rc[k];
        if (k != rank) {
            wire_bytes += sc[k];
        }
    }
    mt_verify_poison(rbuf + prev_end, rtot - prev_end,
                     "alltoallv gap after the last receive block");
    free(sbuf);
    free(rbuf);
    free(sc);
    free(sd);
    free(rc);
    free(rd);
}

int main(int argc, char **argv)
{
    int opt;
    size_t big = 4u << 20;

    MPI_Init(&argc, &argv);
    mt_setup("collectives");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    while ((opt = getopt(argc, argv, "b:")) != -1) {
        if (opt == 'b' && atol(optarg) > 0) {
            big = (size_t) atol(optarg);
        } else {
            mt_die("usage: collectives [-b bcast_bytes]");
        }
    }
    if (nprocs < 2) {
        mt_die("needs at least 2 ranks");
    }

    test_bcast_small();
    test_bcast_large(big);
    static const int counts[] = {1, 10, 1000, 65536, 1 << 20};
    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
        test_allreduce_int(counts[c], 0);
        test_allreduce_double(counts[c]);
    }
    test_allreduce_int(1 << 20, 1);
    test_allreduce_int(777, 1);
    for (int it = 0; it < 3; it++) {
        test_alltoallv(it);
    }

    mt_report_bytes(wire_bytes);
    mt_ok("collectives");
    MPI_Finalize();
    return 0;
}
