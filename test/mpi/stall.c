/*
 * Peer liveness.  Rank 0 sends rank 1 a large message (8 MiB by default)
 * while rank 1 does not take part in MPI:
 *
 *   stall busy SECONDS  rank 1 computes outside MPI (sleeps) for SECONDS,
 *                       then receives the message and checks every byte:
 *                       a live peer, however long it is away, must not be
 *                       declared dead.  Prints "STALL: busy peer ok".
 *   stall stop          rank 1 stops itself (SIGSTOP): no progress, and its
 *                       liveness thread is frozen too, so it answers
 *                       nothing.  Rank 0's BTL must declare it unreachable
 *                       within btl_usnic_peer_timeout and the job must end;
 *                       if MPI_Send returns anyway, rank 0 says so.
 *
 * Exit status 1 on a data mismatch.
 */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static unsigned char pattern(size_t i)
{
    return (unsigned char) ((i * 131u + (i >> 12)) & 0xff);
}

int main(int argc, char **argv)
{
    int rank, busy = -1;
    size_t len = 8u << 20;
    unsigned char *buf;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc >= 3 && 0 == strcmp(argv[1], "busy")) {
        busy = atoi(argv[2]);
    } else if (argc < 2 || 0 != strcmp(argv[1], "stop")) {
        if (0 == rank) {
            fprintf(stderr, "usage: stall busy SECONDS | stall stop\n");
        }
        MPI_Finalize();
        return 2;
    }
    buf = malloc(len);
    if (NULL == buf) {
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    /* one small exchange first, so both sides have endpoints */
    if (0 == rank) {
        for (size_t i = 0; i < len; i++) {
            buf[i] = pattern(i);
        }
        MPI_Send(buf, 8, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
        MPI_Recv(buf + len - 8, 8, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        memset(buf + len - 8, 0, 8);
        for (size_t i = len - 8; i < len; i++) {
            buf[i] = pattern(i);
        }
        MPI_Send(buf, (int) len, MPI_CHAR, 1, 2, MPI_COMM_WORLD);
        printf("STALL: send completed%s\n", busy >= 0 ? "" : " without the peer");
        fflush(stdout);
    } else {
        MPI_Recv(buf, 8, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(buf, 8, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
        if (busy < 0) {
            raise(SIGSTOP); /* frozen: no progress, no liveness answers */
        } else {
            printf("STALL: rank 1 away from MPI for %d s\n", busy);
            fflush(stdout);
            sleep((unsigned) busy); /* computing: no progress, no ACKs */
            memset(buf, 0, len);
            MPI_Recv(buf, (int) len, MPI_CHAR, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            for (size_t i = 0; i < len; i++) {
                if (buf[i] != pattern(i)) {
                    fprintf(stderr, "STALL: byte %zu is %u, expected %u\n", i, buf[i], pattern(i));
                    MPI_Abort(MPI_COMM_WORLD, 1);
                }
            }
            printf("STALL: busy peer ok, %zu bytes intact after %d s away\n", len, busy);
            fflush(stdout);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    free(buf);
    MPI_Finalize();
    return 0;
}
