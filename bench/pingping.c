/*
 * pingping: both ranks send a message, then both receive one, N times
 * (the exchange pattern of issue 9's 2 KiB report).  Rank 0 prints
 *   pingping iters=N size=S elapsed_s=T us_per_iter=U errors=E
 * Every message carries the sender's rank and the iteration in every byte
 * (checked on receipt: a wrong byte counts an error, exit status 1).
 * usage: pingping [iterations (default 20000)] [bytes (default 2048)]
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned char pattern(int rank, long i)
{
    return (unsigned char) (rank * 101 + i * 7 + 1);
}

int main(int argc, char **argv)
{
    int rank, nprocs;
    long n = (argc > 1) ? atol(argv[1]) : 20000, errors = 0, all = 0;
    int size = (argc > 2) ? atoi(argv[2]) : 2048;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (2 != nprocs || n < 1 || size < 1) {
        if (0 == rank) {
            fprintf(stderr, "usage: pingping [iterations] [bytes], exactly 2 ranks\n");
        }
        MPI_Finalize();
        return 2;
    }
    unsigned char *s = malloc((size_t) size), *r = malloc((size_t) size);
    if (NULL == s || NULL == r) {
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int peer = 1 - rank;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (long i = 0; i < n; i++) {
        memset(s, pattern(rank, i), (size_t) size);
        MPI_Send(s, size, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
        MPI_Recv(r, size, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (r[0] != pattern(peer, i) || r[size - 1] != pattern(peer, i) ||
            r[size / 2] != pattern(peer, i)) {
            errors++;
        }
    }
    double t = MPI_Wtime() - t0;
    MPI_Reduce(&errors, &all, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (0 == rank) {
        printf("pingping iters=%ld size=%d elapsed_s=%.3f us_per_iter=%.2f errors=%ld\n", n, size,
               t, t / (double) n * 1e6, all);
    }
    free(s);
    free(r);
    MPI_Finalize();
    return (0 == all) ? 0 : 1;
}
