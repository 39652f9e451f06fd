/*
 * starve: a large message must not wait behind a stream of small ones
 * from someone else.
 *
 * Three ranks.  Rank 2 streams 8-byte messages (tag 1) to rank 1, -W at a
 * time with a pause of -g microseconds after each window, until rank 1
 * tells it to stop.  Rank 0 sleeps -d seconds, then sends rank 1 one
 * message of -s bytes (tag 2): above the eager limit, a rendezvous whose
 * data comes by PUT, on rank 1's data socket, while the stream keeps its
 * priority socket busy.  Rank 0 waits for it with MPI_Test and short
 * sleeps, so that the two busy ranks have the machine's two cores.
 *
 * Rank 1 is slower than the stream on purpose: after every small message
 * it spins -w microseconds, so at nearly every progress call something new
 * waits on its priority socket; it tests the large receive after every
 * small message.  The large message must complete within -t seconds of
 * the start, while the stream still runs, with every byte in place at
 * that moment.  Then rank 1 stops the stream, drains what is left without
 * spinning, and checks every small message's sequence number.
 *
 * Found in review: a progress engine that skips its idle data socket in
 * any call whose priority poll brought something never read the PUT's
 * datagrams while such a stream lasted.  (With the stream and the large
 * message from the same rank, the PUT itself pauses the stream, and the
 * data socket gets read in the pause: hence three ranks.)  The same test
 * found that over libfabric's udp provider, which takes one datagram off
 * its socket per fi_cq_read, a receiver polling once a millisecond got one
 * datagram per poll: 3.4 s for the 1 MiB message in 1472-byte datagrams.
 *
 * Options: -s bytes (default 1 MiB), -d seconds before the large send
 * (0.5), -t seconds allowed (5), -w spin microseconds (50), -W window (1),
 * -g pause microseconds (12).
 */
#include "mpitest.h"

#include <unistd.h>

#define WIN_MAX 64
#define TAG_SMALL 1
#define TAG_BIG 2
#define TAG_END 3
#define TAG_STOP 5
#define R_BIG 0
#define R_SLOW 1
#define R_STREAM 2

static void spin_us(double us)
{
    double until = MPI_Wtime() + us * 1e-6;
    while (MPI_Wtime() < until) {
    }
}

static void stream(int win, double gap)
{
    uint64_t small[WIN_MAX];
    MPI_Request req[WIN_MAX], stopreq;
    unsigned long long n = 0;
    int stop = 0, dummy = 0;

    MT_CHECK(MPI_Irecv(&dummy, 1, MPI_INT, R_SLOW, TAG_STOP, MPI_COMM_WORLD, &stopreq));
    while (!stop) {
        for (int w = 0; w < win; w++) {
            small[w] = n + (uint64_t) w;
            MT_CHECK(MPI_Isend(&small[w], 8, MPI_BYTE, R_SLOW, TAG_SMALL, MPI_COMM_WORLD, &req[w]));
        }
        MT_CHECK(MPI_Waitall(win, req, MPI_STATUSES_IGNORE));
        n += (unsigned long long) win;
        spin_us(gap);
        MT_CHECK(MPI_Test(&stopreq, &stop, MPI_STATUS_IGNORE));
    }
    MT_CHECK(MPI_Send(&n, 1, MPI_UNSIGNED_LONG_LONG, R_SLOW, TAG_END, MPI_COMM_WORLD));
    mt_report_bytes(n * 8u);
}

static void send_big(uint8_t *big, size_t size, uint32_t seed, double delay)
{
    MPI_Request req;
    int done = 0;

    mt_fill(big, size, seed);
    usleep((useconds_t) (delay * 1e6));
    MT_CHECK(MPI_Isend(big, (int) size, MPI_BYTE, R_SLOW, TAG_BIG, MPI_COMM_WORLD, &req));
    while (!done) {
        MT_CHECK(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
        if (!done) {
            usleep(2000);
        }
    }
    mt_report_bytes(size);
}

static void next_small(unsigned long long *n)
{
    uint64_t v = 0;
    MPI_Status st;

    MT_CHECK(MPI_Recv(&v, 8, MPI_BYTE, R_STREAM, TAG_SMALL, MPI_COMM_WORLD, &st));
    if (v != *n) {
        mt_die("small message %llu carried %llu", *n, (unsigned long long) v);
    }
    (*n)++;
}

static void receive_slowly(uint8_t *big, size_t size, uint32_t seed, double allowed, double spin)
{
    MPI_Request req;
    MPI_Status st;
    int done = 0, stop = 1;
    unsigned long long n = 0, sent = 0, by_then;
    double t0 = MPI_Wtime(), took = -1.0;

    memset(big, MT_POISON, size);
    MT_CHECK(MPI_Irecv(big, (int) size, MPI_BYTE, R_BIG, TAG_BIG, MPI_COMM_WORLD, &req));
    /* the stream, slowly, until the large message is in or time is up */
    while (!done && MPI_Wtime() - t0 < allowed) {
        next_small(&n);
        spin_us(spin);
        MT_CHECK(MPI_Test(&req, &done, &st));
    }
    by_then = n;
    if (done) {
        took = MPI_Wtime() - t0;
        /* complete means every byte is in place now, before any other MPI call */
        mt_check_bytes(&st, size, "large message at completion");
        mt_verify(big, size, seed, "large message at completion");
    }
    /* stop the stream; the rest of it at full speed, then its end */
    MT_CHECK(MPI_Send(&stop, 1, MPI_INT, R_STREAM, TAG_STOP, MPI_COMM_WORLD));
    MT_CHECK(MPI_Recv(&sent, 1, MPI_UNSIGNED_LONG_LONG, R_STREAM, TAG_END, MPI_COMM_WORLD, &st));
    while (n < sent) {
        next_small(&n);
    }
    if (!done) {
        MT_CHECK(MPI_Wait(&req, &st));
        mt_check_bytes(&st, size, "large message");
        mt_verify(big, size, seed, "large message");
        mt_die("the %zu-byte message did not complete within %.1f s while %llu small messages "
               "came in from rank %d (it did once that stream stopped): starved behind them",
               size, allowed, by_then, R_STREAM);
    }
    printf("starve: %zu-byte message complete %.3f s after the start, %llu small messages "
           "received by then, %llu in all\n",
           size, took, by_then, sent);
    fflush(stdout);
    mt_report_bytes(0);
}

int main(int argc, char **argv)
{
    size_t size = 1u << 20;
    double delay = 0.5, allowed = 5.0, spin = 50.0, gap = 12.0;
    int rank, np, c, win = 1;
    uint8_t *big;
    uint32_t seed = mt_seed(7, 1, 2, 3);

    MPI_Init(&argc, &argv);
    mt_setup("starve");
    while ((c = getopt(argc, argv, "s:d:t:w:W:g:")) != -1) {
        switch (c) {
        case 's':
            size = (size_t) strtoull(optarg, NULL, 0);
            break;
        case 'd':
            delay = atof(optarg);
            break;
        case 't':
            allowed = atof(optarg);
            break;
        case 'w':
            spin = atof(optarg);
            break;
        case 'W':
            win = atoi(optarg);
            break;
        case 'g':
            gap = atof(optarg);
            break;
        default:
            mt_die("usage: starve [-s bytes] [-d s] [-t s] [-w us] [-W n] [-g us]");
        }
    }
    MT_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    MT_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &np));
    if (np != 3) {
        mt_die("needs exactly 3 ranks, got %d", np);
    }
    if (win < 1 || win > WIN_MAX || size < 1 || size > (size_t) 1 << 30 || delay < 0.0) {
        mt_die("bad option: -W 1..%d, -s 1..1 GiB, -d >= 0", WIN_MAX);
    }
    big = mt_malloc(size);
    MT_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    if (R_STREAM == rank) {
        stream(win, gap);
    } else if (R_BIG == rank) {
        send_big(big, size, seed, delay);
    } else {
        receive_slowly(big, size, seed, allowed, spin);
    }
    free(big);
    mt_ok("starve");
    MPI_Finalize();
    return 0;
}
