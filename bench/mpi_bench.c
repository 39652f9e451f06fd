/*
 * mpi_bench: point-to-point MPI benchmark for two ranks.
 *
 * Tests (-t, comma separated, default all):
 *   lat   ping-pong with MPI_Send/MPI_Recv, half round-trip time (us)
 *   bw    unidirectional bandwidth: rank 0 posts a window of MPI_Isend,
 *         MPI_Waitall, then waits for a short ack from rank 1 (MB/s)
 *   bibw  bidirectional bandwidth: both ranks post a window of MPI_Irecv and
 *         MPI_Isend to each other and MPI_Waitall (MB/s, both directions)
 *   rate  message rate: like bw but reported as messages/s; by default only
 *         run for sizes up to 8 KiB (-M)
 * Sizes: 0 and powers of two from 1 to 4 MiB, restricted with -s/-S.
 *
 * For every test and size: warm-up iterations (not timed), then `reps`
 * timed repetitions of `iters` iterations each; the median, min and max of
 * the per-repetition results are reported.  The iteration count starts from
 * a per-test base, is scaled down with the message size, and is further
 * reduced (never below a small minimum) if the warm-up shows that one
 * repetition would take longer than the target time (-T).  Where even the
 * minimum is slow (large messages on a slow transport), the number of
 * repetitions is reduced to fit a per-size time budget (-B), but never below
 * 3 (a comment line says so).  Rank 0 decides and broadcasts the counts, so
 * both ranks always agree.
 *
 * 1 MB = 1e6 bytes.  Output (rank 0, stdout), one line per test and size:
 *     test size median min max unit          (units: us, MB/s, msgs/s)
 * Lines starting with '#' are comments; -h adds a human-readable table as
 * '#' lines at the end.
 */
#include <mpi.h>

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_REPS 1001
#define MAX_SIZE_LOG 30

enum {
    T_LAT,
    T_BW,
    T_BIBW,
    T_RATE,
    T_COUNT
};
static const char *test_names[T_COUNT] = {"lat", "bw", "bibw", "rate"};
static const char *test_units[T_COUNT] = {"us", "MB/s", "MB/s", "msgs/s"};

enum {
    TAG_LAT = 11,
    TAG_DATA = 12,
    TAG_ACK = 13,
    TAG_BIDIR = 14
};

struct opts {
    long min_size, max_size;
    long rate_max;
    int tests[T_COUNT];
    int reps;
    int window;
    long iters;  /* 0: automatic */
    long warmup; /* -1: automatic */
    double target_ms;
    double budget_ms;
    int human;
    int verify;
};

static struct opts o;
static int rank, peer;
static char *sbuf, *rbuf;
static char ackbuf[4];
static MPI_Request *reqs;
static long verify_errors;

struct result {
    int test;
    long size;
    double med, min, max;
};
static struct result results[T_COUNT * (MAX_SIZE_LOG + 2)];
static int nresults;

static void usage(int code)
{
    if (rank == 0)
        fprintf(code ? stderr : stdout,
                "usage: mpi_bench [options]        (run with exactly 2 ranks)\n"
                "  -t tests   comma list of lat,bw,bibw,rate (default: all)\n"
                "  -s bytes   smallest message size (default 0)\n"
                "  -S bytes   largest message size (default 4194304; k/m suffixes ok)\n"
                "  -M bytes   largest size for the rate test (default 8192)\n"
                "  -r reps    timed repetitions per size, median reported (default 5)\n"
                "  -w n       window of non-blocking operations (default 64)\n"
                "  -i n       iterations per repetition for small sizes (default: per test)\n"
                "  -x n       warm-up iterations (default: iterations/10, at least 1)\n"
                "  -T ms      target time per repetition for the automatic iteration count;\n"
                "             0 disables the time-based reduction (default 20)\n"
                "  -B ms      time budget per test and size: if the repetitions would take\n"
                "             longer, use fewer (but at least 3); 0 disables (default 1000)\n"
                "  -v         verify received data (slower; timings include the checks)\n"
                "  -h         also print a human-readable table ('#' lines)\n"
                "  --help     this text\n"
                "Output: test size median min max unit  (us, MB/s with 1 MB = 1e6 B, msgs/s)\n");
    MPI_Finalize();
    exit(code);
}

static long parse_size(const char *s)
{
    char *end;
    long v = strtol(s, &end, 0);
    if (*end == 'k' || *end == 'K')
        v <<= 10, end++;
    else if (*end == 'm' || *end == 'M')
        v <<= 20, end++;
    if (*end || v < 0 || v > (1L << MAX_SIZE_LOG)) {
        if (rank == 0)
            fprintf(stderr, "mpi_bench: bad size '%s'\n", s);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return v;
}

static void parse_tests(const char *arg)
{
    char *dup = strdup(arg), *save = NULL, *tok;
    memset(o.tests, 0, sizeof(o.tests));
    for (tok = strtok_r(dup, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int k, found = 0;
        for (k = 0; k < T_COUNT; k++)
            if (strcmp(tok, test_names[k]) == 0)
                o.tests[k] = found = 1;
        if (strcmp(tok, "all") == 0)
            for (k = 0; k < T_COUNT; k++)
                o.tests[k] = found = 1;
        if (!found) {
            if (rank == 0)
                fprintf(stderr, "mpi_bench: unknown test '%s'\n", tok);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    free(dup);
}

/* ------------------------------------------------------------------------ */
/* data pattern for -v                                                       */

static inline unsigned char pat(long i, long size, int salt)
{
    return (unsigned char) (i * 131 + size * 7 + salt * 29 + 1);
}

static void fill(char *p, long size, int salt)
{
    for (long i = 0; i < size; i++)
        p[i] = (char) pat(i, size, salt);
}

static void check(const char *p, long size, int salt, const char *what)
{
    for (long i = 0; i < size; i++) {
        if ((unsigned char) p[i] != pat(i, size, salt)) {
            if (verify_errors < 10)
                fprintf(stderr,
                        "mpi_bench: rank %d: %s size %ld: data mismatch at "
                        "byte %ld (got 0x%02x, want 0x%02x, salt %d)\n",
                        rank, what, size, i, (unsigned char) p[i], pat(i, size, salt), salt);
            verify_errors++;
            return;
        }
    }
}

/* ------------------------------------------------------------------------ */
/* kernels: each runs `iters` iterations and returns the elapsed time on   */
/* rank 0 (the value on rank 1 is not used)                                  */

static double run_lat(long size, long iters)
{
    int salt0 = 1, salt1 = 2;
    if (o.verify) {
        fill(sbuf, size, rank == 0 ? salt0 : salt1);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (long i = 0; i < iters; i++) {
        if (o.verify)
            memset(rbuf, 0, (size_t) size);
        if (rank == 0) {
            MPI_Send(sbuf, (int) size, MPI_BYTE, peer, TAG_LAT, MPI_COMM_WORLD);
            MPI_Recv(rbuf, (int) size, MPI_BYTE, peer, TAG_LAT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (o.verify)
                check(rbuf, size, salt1, "lat");
        } else {
            MPI_Recv(rbuf, (int) size, MPI_BYTE, peer, TAG_LAT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (o.verify)
                check(rbuf, size, salt0, "lat");
            MPI_Send(sbuf, (int) size, MPI_BYTE, peer, TAG_LAT, MPI_COMM_WORLD);
        }
    }
    return MPI_Wtime() - t0;
}

/* unidirectional window: rank 0 sends, rank 1 receives and acks */
static double run_window(long size, long iters)
{
    int w, W = o.window;
    if (o.verify && rank == 0)
        for (w = 0; w < W; w++)
            fill(sbuf + (size_t) w * (size_t) size, size, w);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (long i = 0; i < iters; i++) {
        if (rank == 0) {
            for (w = 0; w < W; w++) {
                char *p = o.verify ? sbuf + (size_t) w * (size_t) size : sbuf;
                MPI_Isend(p, (int) size, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD, &reqs[w]);
            }
            MPI_Waitall(W, reqs, MPI_STATUSES_IGNORE);
            MPI_Recv(ackbuf, 4, MPI_BYTE, peer, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            if (o.verify)
                memset(rbuf, 0, (size_t) W * (size_t) size);
            for (w = 0; w < W; w++)
                MPI_Irecv(rbuf + (size_t) w * (size_t) size, (int) size, MPI_BYTE, peer, TAG_DATA,
                          MPI_COMM_WORLD, &reqs[w]);
            MPI_Waitall(W, reqs, MPI_STATUSES_IGNORE);
            if (o.verify)
                for (w = 0; w < W; w++)
                    check(rbuf + (size_t) w * (size_t) size, size, w, "bw");
            MPI_Send(ackbuf, 4, MPI_BYTE, peer, TAG_ACK, MPI_COMM_WORLD);
        }
    }
    return MPI_Wtime() - t0;
}

static double run_bibw(long size, long iters)
{
    int w, W = o.window;
    /* salts differ per direction so a message bounced back would be caught */
    int base_mine = rank == 0 ? 0 : 1000, base_peer = rank == 0 ? 1000 : 0;
    if (o.verify)
        for (w = 0; w < W; w++)
            fill(sbuf + (size_t) w * (size_t) size, size, base_mine + w);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (long i = 0; i < iters; i++) {
        if (o.verify)
            memset(rbuf, 0, (size_t) W * (size_t) size);
        for (w = 0; w < W; w++)
            MPI_Irecv(rbuf + (size_t) w * (size_t) size, (int) size, MPI_BYTE, peer, TAG_BIDIR,
                      MPI_COMM_WORLD, &reqs[W + w]);
        for (w = 0; w < W; w++) {
            char *p = o.verify ? sbuf + (size_t) w * (size_t) size : sbuf;
            MPI_Isend(p, (int) size, MPI_BYTE, peer, TAG_BIDIR, MPI_COMM_WORLD, &reqs[w]);
        }
        MPI_Waitall(2 * W, reqs, MPI_STATUSES_IGNORE);
        if (o.verify)
            for (w = 0; w < W; w++)
                check(rbuf + (size_t) w * (size_t) size, size, base_peer + w, "bibw");
    }
    return MPI_Wtime() - t0;
}

static double run_test(int t, long size, long iters)
{
    switch (t) {
    case T_LAT:
        return run_lat(size, iters);
    case T_BW:
    case T_RATE:
        return run_window(size, iters);
    default:
        return run_bibw(size, iters);
    }
}

/* per-repetition value from the elapsed time */
static double metric(int t, long size, long iters, double sec)
{
    double W = (double) o.window;
    switch (t) {
    case T_LAT:
        return sec / (double) iters / 2.0 * 1e6;
    case T_BW:
        return (double) size * W * (double) iters / sec / 1e6;
    case T_BIBW:
        return 2.0 * (double) size * W * (double) iters / sec / 1e6;
    default:
        return W * (double) iters / sec;
    }
}

/* Base iteration count for small messages and scaled-down count for large. */
static long base_iters(int t, long size)
{
    long base, minit;
    switch (t) {
    case T_LAT:
        base = 1000;
        minit = 10;
        break;
    case T_RATE:
        base = 200;
        minit = 2;
        break;
    default:
        base = 40;
        minit = 2;
        break;
    }
    if (o.iters)
        base = o.iters;
    if (size > 8192) {
        long scaled = base * 8192 / size;
        base = scaled < minit ? (o.iters && o.iters < minit ? o.iters : minit) : scaled;
    }
    return base < 1 ? 1 : base;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

static void measure(int t, long size)
{
    long iters = base_iters(t, size);
    long warm = o.warmup >= 0 ? o.warmup : (iters / 10 > 0 ? iters / 10 : 1);
    double v[MAX_REPS];

    long plan[2] = {iters, o.reps};
    if (warm > 0) {
        double tw = run_test(t, size, warm);
        double per = tw / (double) warm;
        if (per < 1e-9)
            per = 1e-9;
        if (o.target_ms > 0 && !o.iters) {
            /* shrink iterations if a repetition would exceed the target */
            long minit = t == T_LAT ? 10 : 1;
            double want = o.target_ms * 1e-3 / per;
            if (want < (double) iters)
                plan[0] = want < (double) minit ? minit : (long) want;
        }
        /* very slow sizes (one repetition far above target): fewer
         * repetitions, but never fewer than 3, so a median still exists */
        double rep_s = per * (double) plan[0];
        if (o.budget_ms > 0 && rep_s * (double) o.reps > o.budget_ms * 1e-3) {
            long r = (long) (o.budget_ms * 1e-3 / rep_s);
            if (r < 3)
                r = 3;
            if (r < plan[1])
                plan[1] = r;
        }
    }
    MPI_Bcast(plan, 2, MPI_LONG, 0, MPI_COMM_WORLD);
    iters = plan[0];
    int n = (int) plan[1];

    for (int r = 0; r < n; r++) {
        double sec = run_test(t, size, iters);
        v[r] = metric(t, size, iters, sec);
    }
    if (rank != 0)
        return;
    if (n < o.reps)
        printf("# %s %ld: %d repetitions of %ld iteration(s) (time budget)\n", test_names[t], size,
               n, iters);
    qsort(v, (size_t) n, sizeof(double), cmp_double);
    double med = (n & 1) ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    printf("%s %ld %.3f %.3f %.3f %s\n", test_names[t], size, med, v[0], v[n - 1], test_units[t]);
    fflush(stdout);
    struct result *res = &results[nresults++];
    res->test = t;
    res->size = size;
    res->med = med;
    res->min = v[0];
    res->max = v[n - 1];
}

static void print_human(long *sizes, int nsizes)
{
    int t, i, k;
    printf("#\n# medians over %d repetitions (fewer where noted); "
           "(+-x%%) = half of (max-min)/median\n",
           o.reps);
    printf("# %10s", "size");
    for (t = 0; t < T_COUNT; t++)
        if (o.tests[t]) {
            char h[32];
            snprintf(h, sizeof(h), "%s [%s]", test_names[t], test_units[t]);
            printf(" %24s", h);
        }
    printf("\n");
    for (i = 0; i < nsizes; i++) {
        printf("# %10ld", sizes[i]);
        for (t = 0; t < T_COUNT; t++) {
            if (!o.tests[t])
                continue;
            struct result *r = NULL;
            for (k = 0; k < nresults; k++)
                if (results[k].test == t && results[k].size == sizes[i])
                    r = &results[k];
            if (!r) {
                printf(" %24s", "-");
                continue;
            }
            char cell[64];
            double spread = r->med > 0 ? (r->max - r->min) / r->med * 100.0 : 0.0;
            snprintf(cell, sizeof(cell), "%.2f (+-%.0f%%)", r->med, spread / 2);
            printf(" %24s", cell);
        }
        printf("\n");
    }
}

int main(int argc, char **argv)
{
    int nprocs, ch, t;
    static const struct option lopts[] = {{"help", no_argument, NULL, 1000}, {NULL, 0, NULL, 0}};

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);

    o.min_size = 0;
    o.max_size = 4L << 20;
    o.rate_max = 8192;
    for (t = 0; t < T_COUNT; t++)
        o.tests[t] = 1;
    o.reps = 5;
    o.window = 64;
    o.warmup = -1;
    o.target_ms = 20;
    o.budget_ms = 1000;

    opterr = rank == 0;
    while ((ch = getopt_long(argc, argv, "t:s:S:M:r:w:i:x:T:B:vh", lopts, NULL)) != -1) {
        switch (ch) {
        case 't':
            parse_tests(optarg);
            break;
        case 's':
            o.min_size = parse_size(optarg);
            break;
        case 'S':
            o.max_size = parse_size(optarg);
            break;
        case 'M':
            o.rate_max = parse_size(optarg);
            break;
        case 'r':
            o.reps = atoi(optarg);
            break;
        case 'w':
            o.window = atoi(optarg);
            break;
        case 'i':
            o.iters = atol(optarg);
            break;
        case 'x':
            o.warmup = atol(optarg);
            break;
        case 'T':
            o.target_ms = atof(optarg);
            break;
        case 'B':
            o.budget_ms = atof(optarg);
            break;
        case 'v':
            o.verify = 1;
            break;
        case 'h':
            o.human = 1;
            break;
        case 1000:
            usage(0);
            break;
        default:
            usage(2);
        }
    }
    if (optind < argc)
        usage(2);
    if (nprocs != 2) {
        if (rank == 0)
            fprintf(stderr, "mpi_bench: needs exactly 2 ranks (got %d)\n", nprocs);
        MPI_Finalize();
        return 2;
    }
    if (o.reps < 1 || o.reps > MAX_REPS || o.window < 1 || o.window > 100000 || o.iters < 0 ||
        o.min_size > o.max_size) {
        if (rank == 0)
            fprintf(stderr, "mpi_bench: bad -r/-w/-i/-s/-S value\n");
        MPI_Finalize();
        return 2;
    }
    peer = 1 - rank;

    /* sizes: 0, 1, 2, 4, ... within [min, max] */
    long sizes[MAX_SIZE_LOG + 2];
    int nsizes = 0;
    if (o.min_size == 0)
        sizes[nsizes++] = 0;
    for (long s = 1; s <= o.max_size; s <<= 1)
        if (s >= o.min_size)
            sizes[nsizes++] = s;

    size_t slots = (size_t) o.window;
    size_t maxs = (size_t) (o.max_size > 0 ? o.max_size : 1);
    sbuf = malloc(maxs * (o.verify ? slots : 1));
    rbuf = malloc(maxs * slots);
    reqs = malloc(sizeof(MPI_Request) * 2 * slots);
    if (!sbuf || !rbuf || !reqs) {
        fprintf(stderr, "mpi_bench: rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(sbuf, 'a', maxs * (o.verify ? slots : 1));
    memset(rbuf, 0, maxs * slots);

    if (rank == 0) {
        char lib[MPI_MAX_LIBRARY_VERSION_STRING];
        int len;
        MPI_Get_library_version(lib, &len);
        char *nl = strchr(lib, '\n');
        if (nl)
            *nl = 0;
        printf("# mpi_bench np=2 reps=%d window=%d target=%.0fms budget=%.0fms "
               "verify=%d sizes=%ld..%ld (%s)\n",
               o.reps, o.window, o.target_ms, o.budget_ms, o.verify, o.min_size, o.max_size, lib);
        if (o.verify)
            printf("# verify mode: timings include data checks\n");
        printf("# test size median min max unit\n");
        fflush(stdout);
    }

    for (t = 0; t < T_COUNT; t++) {
        if (!o.tests[t])
            continue;
        for (int i = 0; i < nsizes; i++) {
            if (t == T_RATE && sizes[i] > o.rate_max)
                continue;
            measure(t, sizes[i]);
        }
    }

    long errs = 0;
    MPI_Reduce(&verify_errors, &errs, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        if (o.verify)
            printf("# verify: %ld data errors\n", errs);
        if (o.human)
            print_human(sizes, nsizes);
        fflush(stdout);
    }
    free(sbuf);
    free(rbuf);
    free(reqs);
    MPI_Finalize();
    return errs ? 3 : 0;
}
