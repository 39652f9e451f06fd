/*
 * incast: every rank but 0 sends K messages of SIZE bytes to rank 0 at once
 * (non-blocking, all posted together), ROUNDS times; rank 0 reports the
 * aggregate bandwidth into it.  With --mca btl_usnic_print_stats 1 the
 * per-rank counters show what the many-to-one burst cost in
 * retransmissions: each sender limits only its own data in flight, so
 * enough senders together can overflow the receiver's socket buffer.
 * Every received byte is checked.
 *
 * usage: incast [-k K] [-s SIZE_MIB] [-r ROUNDS]   (defaults 8, 4, 3)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int rank, np, k = 8, rounds = 3, c, bad = 0;
    size_t size = (size_t) 4 << 20, nbuf;
    unsigned char *buf;
    MPI_Request *req;
    double t0, t1;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    while ((c = getopt(argc, argv, "k:s:r:")) != -1) {
        if (c == 'k') {
            k = atoi(optarg);
        } else if (c == 's') {
            size = (size_t) atol(optarg) << 20;
        } else if (c == 'r') {
            rounds = atoi(optarg);
        } else {
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (np < 2 || k < 1 || rounds < 1 || size == 0 || size > (size_t) 1 << 30) {
        if (rank == 0) {
            fprintf(stderr, "incast: needs 2+ ranks, K >= 1, 1 <= SIZE_MIB <= 1024\n");
        }
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    nbuf = (size_t) k * (rank == 0 ? (size_t) np : 1);
    buf = malloc(size * nbuf);
    req = malloc(sizeof(*req) * nbuf);
    if (NULL == buf || NULL == req) {
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    memset(buf, 0, size * nbuf); /* no page faults inside the timed part */
    if (rank != 0) {
        for (int i = 0; i < k; i++) {
            memset(buf + (size_t) i * size, (rank * 31 + i) & 0xff, size);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    for (int it = 0; it < rounds; it++) {
        int n = 0;
        if (rank == 0) {
            for (int p = 1; p < np; p++) {
                for (int i = 0; i < k; i++) {
                    MPI_Irecv(buf + ((size_t) p * k + i) * size, (int) size, MPI_BYTE, p, i,
                              MPI_COMM_WORLD, &req[n++]);
                }
            }
        } else {
            for (int i = 0; i < k; i++) {
                MPI_Isend(buf + (size_t) i * size, (int) size, MPI_BYTE, 0, i, MPI_COMM_WORLD,
                          &req[n++]);
            }
        }
        MPI_Waitall(n, req, MPI_STATUSES_IGNORE);
    }
    t1 = MPI_Wtime();
    if (rank == 0) {
        for (int p = 1; p < np; p++) {
            for (int i = 0; i < k; i++) {
                const unsigned char *m = buf + ((size_t) p * k + i) * size;
                unsigned char want = (unsigned char) ((p * 31 + i) & 0xff);
                for (size_t j = 0; j < size; j++) {
                    bad += (m[j] != want);
                }
            }
        }
        printf("incast np=%d: %d x %zu MiB from each of %d senders, %d rounds: %.1f MB/s into "
               "rank 0, %d bad bytes\n",
               np, k, size >> 20, np - 1, rounds,
               (double) rounds * (np - 1) * k * (double) size / (t1 - t0) / 1e6, bad);
    }
    free(buf);
    free(req);
    MPI_Finalize();
    return bad ? 1 : 0;
}
