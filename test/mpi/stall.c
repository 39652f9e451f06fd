/*
 * Peer failure: rank 1 stops taking part (it sleeps without calling MPI,
 * so it acknowledges nothing) while rank 0 has a large message in flight.
 * With a short btl_usnic_peer_timeout, rank 0's BTL must declare the peer
 * unreachable and the job must end with the "lost contact" help message
 * instead of hanging.  If MPI_Send returns anyway, rank 0 says so.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int rank;
    size_t len = 8u << 20;
    char *buf;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    buf = malloc(len);
    memset(buf, rank, len);
    /* one small exchange first, so both sides have endpoints */
    if (0 == rank) {
        MPI_Send(buf, 8, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
        MPI_Recv(buf, 8, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(buf, (int) len, MPI_CHAR, 1, 2, MPI_COMM_WORLD);
        printf("STALL: send completed without the peer\n");
    } else {
        MPI_Recv(buf, 8, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(buf, 8, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
        sleep(60); /* silent: no progress, no ACKs */
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
