/*
 * burst: a sender that computes after a burst of MPI_Isends.  Rank 0 posts
 * N sends of SIZE bytes to rank 1 (default 12 x 16 KiB: more than
 * btl_usnic_tx_coalesce's 64 KiB in flight, so the last of them are held
 * for more to join their train), then computes for SECONDS without any MPI
 * call, then waits for its sends.  Rank 1 posts its receives before the
 * burst and waits for them.  Every message arrives whole and in order
 * (pattern checked), and rank 1 must have all of them long before rank 0
 * is back in MPI: a train held for messages that never came is sent
 * within a few milliseconds without the sender's help (the liveness
 * thread).  Rank 1 prints "BURST: all N messages after X ms" and fails if
 * X is more than a quarter of the compute time; rank 0 prints "OK burst".
 *
 * Options: -n N messages (default 12), -s SIZE bytes (default 16384),
 *          -t SECONDS the sender computes (default 2), -r RANK the sender
 *          (default 0; the other rank receives).  The first exchange
 *          before the burst is one int each way: a datagram that may go
 *          before the connectivity checker's verdict on the path, so the
 *          burst may be the first data that needs it (t_connectivity
 *          delays that verdict on purpose).
 *
 * -l ROUNDS: instead, ROUNDS bursts, after each of which rank 0 computes
 * for a pseudo-random 0-1.5 ms (around the liveness thread's 500 us, so
 * that its sends of held trains meet the next burst's sends), every
 * message checked, no timing asserted: the handover of held trains under
 * load (run under AddressSanitizer by t_asan).
 */
#include "mpitest.h"

#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double) t.tv_sec + (double) t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    int rank, nprocs, opt, n = 12, rounds = 0, sender = 0;
    size_t size = 16384;
    double secs = 2.0, t0;
    uint8_t *buf;
    MPI_Request *req;

    MPI_Init(&argc, &argv);
    mt_setup("burst");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    while ((opt = getopt(argc, argv, "n:s:t:l:r:")) != -1) {
        if ('r' == opt && (0 == strcmp(optarg, "0") || 0 == strcmp(optarg, "1"))) {
            sender = atoi(optarg);
        } else if ('l' == opt && atoi(optarg) > 0) {
            rounds = atoi(optarg);
        } else if ('n' == opt && atoi(optarg) > 0) {
            n = atoi(optarg);
        } else if ('s' == opt && atol(optarg) > 0) {
            size = (size_t) atol(optarg);
        } else if ('t' == opt && atof(optarg) > 0) {
            secs = atof(optarg);
        } else {
            mt_die("usage: burst [-n N] [-s SIZE] [-r 0|1] [-t SECONDS | -l ROUNDS]");
        }
    }
    if (2 != nprocs) {
        mt_die("needs exactly 2 ranks");
    }
    buf = mt_malloc((size_t) n * size);
    req = mt_malloc(sizeof(*req) * (size_t) n);
    if (rounds > 0) {
        uint64_t moved = 0;
        for (int r = 0; r < rounds; r++) {
            uint32_t seed = mt_seed(0, 1, (uint32_t) r, 0xB1);
            if (0 == rank) {
                double until;
                for (int i = 0; i < n; i++) {
                    mt_fill(buf + (size_t) i * size, size, seed + (uint32_t) i);
                    MT_CHECK(MPI_Isend(buf + (size_t) i * size, (int) size, MPI_BYTE, 1, i,
                                       MPI_COMM_WORLD, &req[i]));
                }
                until = now_s() + (double) (mt_hash(seed, 7) % 1500) * 1e-6;
                while (now_s() < until) {
                    /* computing */
                }
            } else {
                memset(buf, MT_POISON, (size_t) n * size);
                for (int i = 0; i < n; i++) {
                    MT_CHECK(MPI_Irecv(buf + (size_t) i * size, (int) size, MPI_BYTE, 0, i,
                                       MPI_COMM_WORLD, &req[i]));
                }
            }
            MT_CHECK(MPI_Waitall(n, req, MPI_STATUSES_IGNORE));
            if (1 == rank) {
                for (int i = 0; i < n; i++) {
                    char what[64];
                    snprintf(what, sizeof(what), "round %d message %d", r, i);
                    mt_verify(buf + (size_t) i * size, size, seed + (uint32_t) i, what);
                }
            }
            moved += (0 == rank) ? (uint64_t) n * size : 0;
        }
        mt_report_bytes(moved);
        free(req);
        free(buf);
        mt_ok("burst");
        MPI_Finalize();
        return 0;
    }
    if (sender == rank) {
        for (int i = 0; i < n; i++) {
            mt_fill(buf + (size_t) i * size, size, mt_seed(0, 1, (uint32_t) i, 0xB0));
        }
    } else {
        memset(buf, MT_POISON, (size_t) n * size);
        for (int i = 0; i < n; i++) {
            MT_CHECK(MPI_Irecv(buf + (size_t) i * size, (int) size, MPI_BYTE, sender, i,
                               MPI_COMM_WORLD, &req[i]));
        }
    }
    /* a first exchange, so that the connection is up before the burst */
    MT_CHECK(MPI_Sendrecv_replace(&opt, 1, MPI_INT, 1 - rank, 99, 1 - rank, 99, MPI_COMM_WORLD,
                                  MPI_STATUS_IGNORE));
    MT_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    t0 = now_s();
    if (sender == rank) {
        volatile uint64_t spin = 0;
        for (int i = 0; i < n; i++) {
            MT_CHECK(MPI_Isend(buf + (size_t) i * size, (int) size, MPI_BYTE, 1 - sender, i,
                               MPI_COMM_WORLD, &req[i]));
        }
        while (now_s() - t0 < secs) {
            spin++; /* computing: no MPI call */
        }
        MT_CHECK(MPI_Waitall(n, req, MPI_STATUSES_IGNORE));
    } else {
        double ms;
        MT_CHECK(MPI_Waitall(n, req, MPI_STATUSES_IGNORE));
        ms = (now_s() - t0) * 1e3;
        for (int i = 0; i < n; i++) {
            char what[64];
            snprintf(what, sizeof(what), "message %d", i);
            mt_verify(buf + (size_t) i * size, size, mt_seed(0, 1, (uint32_t) i, 0xB0), what);
        }
        printf("BURST: all %d messages after %.1f ms (the sender computes for %.0f ms)\n", n, ms,
               secs * 1e3);
        fflush(stdout);
        if (ms > secs * 250.0) {
            mt_die("the burst's last messages waited for the sender to call MPI again");
        }
    }
    mt_report_bytes(sender == rank ? (uint64_t) n * size : 0);
    free(req);
    free(buf);
    mt_ok("burst");
    MPI_Finalize();
    return 0;
}
