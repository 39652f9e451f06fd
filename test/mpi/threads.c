/*
 * threads: MPI_THREAD_MULTIPLE with two threads per rank talking to the
 * peer rank concurrently, each on its own duplicated communicator and tag.
 * Thread 0 does a ping-pong (even rank starts); thread 1 does simultaneous
 * two-way exchanges (MPI_Irecv + MPI_Isend + MPI_Waitall, and every 4th
 * time MPI_Sendrecv).  Sizes cycle through 0 B .. 1 MiB in a different
 * order per thread.  The pattern seed includes the thread number, so a
 * message delivered to the wrong thread/communicator is detected.
 *
 * Ranks are paired (0,1), (2,3), ...; needs an even number of ranks.
 * Option: -n N  exchanges per thread (default 150).
 */
#include "mpitest.h"

#include <pthread.h>
#include <unistd.h>

#define NTHREADS 2
#define GUARD 32

static const size_t sizes[] = {0,     1,     17,    1024,   4095,   8192,
                               65535, 65536, 65537, 200000, 524288, 1048576};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))
#define MAXSZ 1048576

typedef struct {
    int id;
    MPI_Comm comm;
    int rank, peer, iters;
    uint64_t sent;
} targ_t;

static void *worker(void *arg)
{
    targ_t *t = arg;
    uint8_t *sbuf = mt_malloc(MAXSZ + GUARD), *rbuf = mt_malloc(MAXSZ + GUARD);
    int tag = 100 + t->id;
    char what[128];

    for (int it = 0; it < t->iters; it++) {
        size_t n = sizes[(it * (t->id ? 5 : 7) + t->id * 3) % NSIZES];
        uint32_t myseed = mt_seed(t->rank, t->id, it, (uint32_t) n);
        uint32_t peerseed = mt_seed(t->peer, t->id, it, (uint32_t) n);
        MPI_Status st;
        memset(rbuf, MT_POISON, n + GUARD);
        mt_fill(sbuf, n, myseed);

        if (t->id == 0) {
            /* ping-pong: both directions carry the sender's own pattern */
            if (t->rank < t->peer) {
                MT_CHECK(MPI_Send(sbuf, (int) n, MPI_BYTE, t->peer, tag, t->comm));
                MT_CHECK(MPI_Recv(rbuf, (int) (n + GUARD), MPI_BYTE, t->peer, tag, t->comm, &st));
            } else {
                MT_CHECK(MPI_Recv(rbuf, (int) (n + GUARD), MPI_BYTE, t->peer, tag, t->comm, &st));
                MT_CHECK(MPI_Send(sbuf, (int) n, MPI_BYTE, t->peer, tag, t->comm));
            }
        } else if (it % 4 == 3) {
            MT_CHECK(MPI_Sendrecv(sbuf, (int) n, MPI_BYTE, t->peer, tag, rbuf, (int) (n + GUARD),
                                  MPI_BYTE, t->peer, tag, t->comm, &st));
        } else {
            MPI_Request rq[2];
            MPI_Status sts[2];
            MT_CHECK(MPI_Irecv(rbuf, (int) (n + GUARD), MPI_BYTE, t->peer, tag, t->comm, &rq[0]));
            MT_CHECK(MPI_Isend(sbuf, (int) n, MPI_BYTE, t->peer, tag, t->comm, &rq[1]));
            MT_CHECK(MPI_Waitall(2, rq, sts));
            st = sts[0];
        }
        snprintf(what, sizeof(what),
                 "thread %d iteration %d: %zu bytes from "
                 "rank %d",
                 t->id, it, n, t->peer);
        mt_check_bytes(&st, n, what);
        if (st.MPI_SOURCE != t->peer || st.MPI_TAG != tag) {
            mt_die("%s: status says source %d tag %d", what, st.MPI_SOURCE, st.MPI_TAG);
        }
        mt_verify(rbuf, n, peerseed, what);
        mt_verify_poison(rbuf + n, GUARD, "receive guard area");
        t->sent += n;
    }
    free(sbuf);
    free(rbuf);
    return NULL;
}

int main(int argc, char **argv)
{
    int provided = -1, rank, nprocs, opt, iters = 150;
    pthread_t th[NTHREADS];
    targ_t args[NTHREADS];

    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    mt_setup("threads");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (provided < MPI_THREAD_MULTIPLE) {
        mt_die("MPI_THREAD_MULTIPLE not provided (provided level %d, "
               "wanted %d)",
               provided, MPI_THREAD_MULTIPLE);
    }
    while ((opt = getopt(argc, argv, "n:")) != -1) {
        if (opt == 'n' && atoi(optarg) > 0) {
            iters = atoi(optarg);
        } else {
            mt_die("usage: threads [-n iterations]");
        }
    }
    if (nprocs < 2 || nprocs % 2) {
        mt_die("needs an even number of ranks");
    }

    /* communicators are created collectively, before the threads start */
    for (int t = 0; t < NTHREADS; t++) {
        args[t].id = t;
        args[t].rank = rank;
        args[t].peer = rank ^ 1;
        args[t].iters = iters;
        args[t].sent = 0;
        MT_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &args[t].comm));
        MPI_Comm_set_errhandler(args[t].comm, MPI_ERRORS_RETURN);
    }
    double t0 = MPI_Wtime();
    for (int t = 0; t < NTHREADS; t++) {
        if (pthread_create(&th[t], NULL, worker, &args[t]) != 0) {
            mt_die("pthread_create failed");
        }
    }
    uint64_t sent = 0;
    for (int t = 0; t < NTHREADS; t++) {
        pthread_join(th[t], NULL);
        sent += args[t].sent;
        MT_CHECK(MPI_Comm_free(&args[t].comm));
    }
    if (rank == 0) {
        printf("threads: %d threads x %d exchanges per rank, %.2f s\n", NTHREADS, iters,
               MPI_Wtime() - t0);
    }
    mt_report_bytes(sent);
    mt_ok("threads");
    MPI_Finalize();
    return 0;
}
