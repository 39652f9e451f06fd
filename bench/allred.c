/*
 * allred: many small MPI_Allreduce calls in a row, timed as a whole (for
 * loss.sh and spurious.sh).
 *
 * Iteration i reduces (MPI_SUM over MPI_DOUBLE, MPI_COMM_WORLD) a vector of
 * sizes[i % nsizes] bytes (default 8,16,32,64,128,256,512,1k: 1 to 128
 * doubles).  Every element is a small integer that depends on the rank, the
 * iteration and the element index, so the sum is exact in any order of
 * reduction: every rank computes the expected result itself and checks
 * every element of every iteration.  Each call is short and ends with
 * every rank waiting for a few small messages, so a lost datagram that was
 * the last one in flight stalls the whole job until the transport notices
 * (the pattern of MPICH's coll/allredmany test).
 *
 * One untimed warm-up pass over all sizes (and a barrier) comes first, then
 * rank 0 times `iters` iterations with MPI_Wtime and also the duration of
 * every single call (from its own point of view), for the percentiles.
 *
 * Output (rank 0, stdout), one line (wrapped here):
 *   allred ranks=N iters=I bytes=B elapsed_s=S p50_us=P p99_us=Q max_us=X
 *       slow_1ms=K errors=E
 * where bytes is one rank's contribution summed over the timed calls,
 * p50/p99/max the median, 99th percentile and longest call on rank 0, and
 * slow_1ms the number of calls that took 1 ms or more there.  Exit status 1
 * if any element was wrong (on any rank), 2 for bad usage.
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_SIZES 32

static int rank, nranks;
static long errors;

/* element j of rank r's contribution in iteration i: an integer below 2^20,
 * so any sum over up to 2^30 ranks is exact in a double */
static double value(long i, int j, int r)
{
    unsigned long x = (unsigned long) i * 2654435761ul + (unsigned long) j * 40503ul +
                      (unsigned long) r * 97531ul;
    return (double) ((x ^ (x >> 13)) & 0xfffff);
}

static long parse_size(const char *s)
{
    char *end;
    long v = strtol(s, &end, 0);
    if (*end == 'k' || *end == 'K')
        v <<= 10, end++;
    if (end == s || *end || v < 8 || v % 8 || v > (1L << 24))
        return -1;
    return v;
}

static void usage(int code)
{
    if (rank == 0)
        fprintf(code ? stderr : stdout,
                "usage: allred [-n iters] [-s sizes]      (any number of ranks >= 2)\n"
                "  -n iters   timed MPI_Allreduce calls (default 2000)\n"
                "  -s sizes   comma list of vector sizes in bytes, multiples of 8, k suffix ok\n"
                "             (default 8,16,32,64,128,256,512,1k); call i uses size i mod count\n"
                "Every element of every result is checked against the locally computed sum.\n"
                "Output: allred ranks=N iters=I bytes=B elapsed_s=S p50_us=P p99_us=Q max_us=X\n"
                "        slow_1ms=K errors=E  (one line)\n");
    MPI_Finalize();
    exit(code);
}

/* one MPI_Allreduce of iteration i with `count` doubles, checked */
static void one(long i, int count, double *in, double *out)
{
    for (int j = 0; j < count; j++) {
        in[j] = value(i, j, rank);
        out[j] = -1.0;
    }
    MPI_Allreduce(in, out, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    for (int j = 0; j < count; j++) {
        double want = 0.0;
        for (int r = 0; r < nranks; r++)
            want += value(i, j, r);
        if (out[j] != want) {
            if (errors < 10)
                fprintf(stderr,
                        "allred: rank %d: iteration %ld (%d doubles): element %d is %.17g, "
                        "expected %.17g\n",
                        rank, i, count, j, out[j], want);
            errors++;
        }
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    long iters = 2000, sizes[MAX_SIZES], maxsize = 0, bytes = 0, slow = 0;
    int nsizes = 0, opt;
    const char *list = "8,16,32,64,128,256,512,1k";

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0)
            usage(0);
    while ((opt = getopt(argc, argv, "n:s:h")) != -1) {
        switch (opt) {
        case 'n':
            iters = strtol(optarg, NULL, 0);
            if (iters < 1 || iters > 100000000)
                usage(2);
            break;
        case 's':
            list = optarg;
            break;
        case 'h':
            usage(0);
            break;
        default:
            usage(2);
        }
    }
    if (optind != argc)
        usage(2);
    if (nranks < 2) {
        if (rank == 0)
            fprintf(stderr, "allred: run with 2 or more ranks (got %d)\n", nranks);
        MPI_Finalize();
        return 2;
    }
    {
        char *dup = strdup(list), *save = NULL, *tok;
        for (tok = strtok_r(dup, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            long v = parse_size(tok);
            if (v < 0 || nsizes == MAX_SIZES) {
                if (rank == 0)
                    fprintf(stderr, "allred: bad size list '%s' (multiples of 8 bytes)\n", list);
                usage(2);
            }
            sizes[nsizes++] = v;
            if (v > maxsize)
                maxsize = v;
        }
        free(dup);
        if (nsizes == 0)
            usage(2);
    }

    double *in = malloc((size_t) maxsize), *out = malloc((size_t) maxsize);
    double *t = malloc((size_t) iters * sizeof(double));
    if (!in || !out || !t) {
        fprintf(stderr, "allred: rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    /* warm-up: every size once (connections, first-use costs); negative
     * iteration numbers, so the data differ from the timed calls */
    for (int k = 0; k < nsizes; k++)
        one(-1 - k, (int) (sizes[k] / 8), in, out);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime(), prev = t0;
    for (long i = 0; i < iters; i++) {
        long s = sizes[i % nsizes];
        one(i, (int) (s / 8), in, out);
        double now = MPI_Wtime();
        t[i] = now - prev;
        prev = now;
        bytes += s;
    }
    double elapsed = MPI_Wtime() - t0;

    long all_errors = 0;
    MPI_Reduce(&errors, &all_errors, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        for (long i = 0; i < iters; i++)
            slow += t[i] >= 1e-3;
        qsort(t, (size_t) iters, sizeof(double), cmp_double);
        printf("allred ranks=%d iters=%ld bytes=%ld elapsed_s=%.6f p50_us=%.1f p99_us=%.1f "
               "max_us=%.1f slow_1ms=%ld errors=%ld\n",
               nranks, iters, bytes, elapsed, 1e6 * t[iters / 2], 1e6 * t[iters * 99 / 100],
               1e6 * t[iters - 1], slow, all_errors);
        fflush(stdout);
    }
    free(in);
    free(out);
    free(t);
    MPI_Bcast(&all_errors, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return all_errors ? 1 : 0;
}
