/*
 * phase_ab: an A/B comparison inside one job, for a machine whose speed
 * drifts (docs/perf-kernel-backend.md, session 15).
 *
 * Two runs of the same job, seconds apart, can differ by 20% on the test
 * machines, so comparing two builds, or two settings, run after one
 * another needs many rounds and still often resolves nothing.  Here the
 * component itself switches between the two behaviours by the clock:
 * behaviour B in every odd 50 ms phase of CLOCK_MONOTONIC, A in the even
 * ones.  Both ranks share the machine's clock, so they agree on the phase.
 * This program runs a ping-pong (or, with -w W, windows of W messages from
 * rank 0 to rank 1 followed by a 4-byte answer) for a few seconds per
 * size (or, with -w W -b, windows both ways at once), files every iteration that began and ended in
 * the same phase under A or B, and reports the median of each: both sample the same seconds of the
 * machine's drift.  Without a switch in the component both medians come from the same behaviour (an
 * A/A run): they agreed to 0-1% there.
 *
 * The switch goes into a scratch build at the decision point being
 * compared, e.g.
 *
 *     static inline bool phase_b(void)
 *     {
 *         static int on = -1;
 *         if (on < 0) {
 *             on = (NULL != getenv("USNIC_PHASE_AB"));
 *         }
 *         return on && ((usnic_now_us() / 50000u) & 1u);
 *     }
 *     ...
 *     if (chan->train.seg_len > module->train_copy || phase_b()) {
 *
 * and the job gets -x USNIC_PHASE_AB=1 (bench/phase_ab.sh does both the
 * test bed and the job).  A switch decided per message (at its first
 * packet) keeps each iteration in one behaviour; iterations that straddle
 * a phase boundary are not counted.
 *
 * usage: phase_ab [-w W [-b]] [-t SECONDS] SIZE...
 * Output (rank 0): one line per size:
 *   lat|bw SIZE A <median> B <median> B/A <ratio> nA nB
 * lat: half round trip in microseconds; bw: MB/s (1e6 bytes) of a window;
 * bibw: MB/s of both directions' windows together.
 */
#include <mpi.h>

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PHASE_US 50000.0
#define MAX_SAMPLES 2000000
#define MAX_WINDOW 256
#define BUF_BYTES (64u << 20)

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double) t.tv_sec * 1e6 + (double) t.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

static double median(double *v, long n)
{
    if (0 == n) {
        return 0.0;
    }
    qsort(v, (size_t) n, sizeof(*v), cmp_double);
    return v[n / 2];
}

/* One iteration: a round trip of size bytes, or a window of w messages
 * of size bytes to rank 1 and its 4-byte answer. */
static void iteration(int rank, char *buf, long size, int w, int both)
{
    if (w > 0 && both) {
        MPI_Request rq[2 * MAX_WINDOW];
        size_t half = BUF_BYTES / 2;
        for (int k = 0; k < w; k++) {
            size_t off = ((size_t) k * (size_t) size) % (half - (size_t) size);
            MPI_Irecv(buf + off, (int) size, MPI_BYTE, 1 - rank, 1, MPI_COMM_WORLD, &rq[k]);
            MPI_Isend(buf + half + off, (int) size, MPI_BYTE, 1 - rank, 1, MPI_COMM_WORLD,
                      &rq[w + k]);
        }
        MPI_Waitall(2 * w, rq, MPI_STATUSES_IGNORE);
    } else if (w > 0) {
        MPI_Request rq[MAX_WINDOW];
        for (int k = 0; k < w; k++) {
            char *b = buf + ((size_t) k * (size_t) size) % (BUF_BYTES - (size_t) size);
            if (0 == rank) {
                MPI_Isend(b, (int) size, MPI_BYTE, 1, 1, MPI_COMM_WORLD, &rq[k]);
            } else {
                MPI_Irecv(b, (int) size, MPI_BYTE, 0, 1, MPI_COMM_WORLD, &rq[k]);
            }
        }
        MPI_Waitall(w, rq, MPI_STATUSES_IGNORE);
        if (0 == rank) {
            MPI_Recv(buf, 4, MPI_BYTE, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Send(buf, 4, MPI_BYTE, 0, 2, MPI_COMM_WORLD);
        }
    } else if (0 == rank) {
        MPI_Send(buf, (int) size, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
        MPI_Recv(buf, (int) size, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        MPI_Recv(buf, (int) size, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(buf, (int) size, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
    }
}

int main(int argc, char **argv)
{
    int rank, nprocs, w = 0, both = 0, ch;
    double secs = 4.0;
    char *buf;
    static double sample[2][MAX_SAMPLES];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    while ((ch = getopt(argc, argv, "w:t:b")) != -1) {
        switch (ch) {
        case 'b':
            both = 1;
            break;
        case 'w':
            w = atoi(optarg);
            break;
        case 't':
            secs = atof(optarg);
            break;
        default:
            if (0 == rank) {
                fprintf(stderr, "usage: phase_ab [-w W [-b]] [-t SECONDS] SIZE...\n");
            }
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (2 != nprocs || w < 0 || w > MAX_WINDOW || optind >= argc) {
        if (0 == rank) {
            fprintf(stderr, "phase_ab: 2 ranks, -w 0..%d and at least one size\n", MAX_WINDOW);
        }
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    buf = malloc(BUF_BYTES);
    if (NULL == buf) {
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(buf, 1, BUF_BYTES);
    for (int a = optind; a < argc; a++) {
        long size = atol(argv[a]), n[2] = {0, 0};
        int go = 1;
        double end;

        if (size < 0 || (size_t) size > BUF_BYTES / 4) {
            if (0 == rank) {
                fprintf(stderr, "phase_ab: size %s out of range\n", argv[a]);
            }
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        for (int k = 0; k < 20; k++) {
            iteration(rank, buf, size, w, both); /* warm-up */
        }
        end = now_us() + secs * 1e6;
        while (go) {
            double t0 = now_us(), t1;
            long p0, p1;

            iteration(rank, buf, size, w, both);
            t1 = now_us();
            p0 = (long) (t0 / PHASE_US);
            p1 = (long) (t1 / PHASE_US);
            if (0 == rank && p0 == p1 && n[p0 & 1] < MAX_SAMPLES) {
                sample[p0 & 1][n[p0 & 1]++] =
                    (w > 0) ? (double) (both + 1) * w * (double) size / (t1 - t0) : (t1 - t0) / 2.0;
            }
            go = (t1 < end);
            MPI_Bcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD); /* outside the timed part */
        }
        if (0 == rank) {
            double ma = median(sample[0], n[0]), mb = median(sample[1], n[1]);
            printf("%s %ld A %.2f B %.2f B/A %.3f nA %ld nB %ld\n",
                   (w > 0) ? (both ? "bibw" : "bw") : "lat", size, ma, mb,
                   (ma > 0.0) ? mb / ma : 0.0, n[0], n[1]);
            fflush(stdout);
        }
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
