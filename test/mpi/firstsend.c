/*
 * firstsend: the first message to a peer that is away from MPI.
 *
 * Right after MPI_Init, before any other traffic, rank 1 computes outside
 * MPI (sleeps) for -a SECONDS, then receives one message of -n BYTES from
 * rank 0 and checks every byte.  Rank 0 sends it at once with MPI_Send and
 * prints how long the call took: "FIRSTSEND: MPI_Send of N bytes returned
 * after X s, the peer away for S s".  The other ranks only make the job as
 * large as wanted (t_incast case 6 runs it with 4: session 32 tried a share
 * of the peer's buffer before its first ACK that depended on the job's size,
 * docs/perf-incast.md).
 */
#include "mpitest.h"

#include <unistd.h>

int main(int argc, char **argv)
{
    int rank, np, c, away = 3;
    size_t len = 120000;
    uint8_t *buf;

    MPI_Init(&argc, &argv);
    mt_setup("firstsend");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    while ((c = getopt(argc, argv, "a:n:")) != -1) {
        switch (c) {
        case 'a':
            away = atoi(optarg);
            break;
        case 'n':
            len = (size_t) strtoul(optarg, NULL, 0);
            break;
        default:
            mt_die("usage: firstsend [-a SECONDS] [-n BYTES]");
        }
    }
    if (np < 2 || away < 1 || len < 1 || len > (size_t) 1 << 30) {
        mt_die("needs 2 or more ranks, -a >= 1, -n in 1 .. 2^30");
    }
    buf = mt_malloc(len);
    if (0 == rank) {
        double t0, t1;
        mt_fill(buf, len, mt_seed(0, 1, (uint32_t) len, 7));
        t0 = MPI_Wtime();
        MT_CHECK(MPI_Send(buf, (int) len, MPI_BYTE, 1, 7, MPI_COMM_WORLD));
        t1 = MPI_Wtime();
        printf("FIRSTSEND: MPI_Send of %zu bytes returned after %.3f s, the peer away for %d s\n",
               len, t1 - t0, away);
        fflush(stdout);
    } else if (1 == rank) {
        MPI_Status st;
        sleep((unsigned) away); /* computing: no progress, no ACKs */
        memset(buf, 0, len);
        MT_CHECK(MPI_Recv(buf, (int) len, MPI_BYTE, 0, 7, MPI_COMM_WORLD, &st));
        mt_check_bytes(&st, len, "first message");
        mt_verify(buf, len, mt_seed(0, 1, (uint32_t) len, 7), "first message");
    }
    free(buf);
    mt_report_bytes(0 == rank ? len : 0);
    mt_ok("firstsend");
    MPI_Finalize();
    return 0;
}
