/*
 * init_first: start-up time of an MPI job (bench/init.sh).
 *
 * Each rank measures, on CLOCK_MONOTONIC (the same clock on every rank of
 * one machine or of network namespaces on one machine):
 *   init   the wall time spent in MPI_Init
 *   first  from the start of MPI_Init until a first message has been
 *          received from the previous rank of a ring and the one sent to
 *          the next rank has completed (MPI_Isend / MPI_Irecv / MPI_Waitall)
 *   fin    the wall time spent in MPI_Finalize (printed by rank 0 only: it
 *          is measured after the reduction)
 * Rank 0 prints the maximum over the ranks of init and first, and the
 * spread of the MPI_Init start times (how far apart the ranks started):
 *   init_first np=N init_max_s=S first_max_s=S start_spread_s=S
 *   init_first fin0_s=S
 * Optional argument: a number of extra messages each rank sends around
 * the ring after the first (default 0), to check the path works beyond one.
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    double t0, t1, t2 = 0, t3, t4, v[3], mx[3], mn = 0;
    int rank, np, next, prev, extra = 0, i, out, in = -1, errors = 0;
    MPI_Request rq[2];

    t0 = now();
    MPI_Init(&argc, &argv);
    t1 = now();
    if (argc > 1)
        extra = atoi(argv[1]);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    next = (rank + 1) % np;
    prev = (rank + np - 1) % np;

    for (i = 0; i <= extra; i++) {
        out = rank * 1000 + i;
        MPI_Irecv(&in, 1, MPI_INT, prev, 7, MPI_COMM_WORLD, &rq[0]);
        MPI_Isend(&out, 1, MPI_INT, next, 7, MPI_COMM_WORLD, &rq[1]);
        MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
        if (in != prev * 1000 + i)
            errors++;
        if (i == 0)
            t2 = now();
    }

    v[0] = t1 - t0;
    v[1] = t2 - t0;
    v[2] = t0;
    MPI_Reduce(v, mx, 3, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&t0, &mn, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &errors, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("init_first np=%d init_max_s=%.4f first_max_s=%.4f start_spread_s=%.4f "
               "errors=%d\n",
               np, mx[0], mx[1], mx[2] - mn, errors);
        fflush(stdout);
    }
    t3 = now();
    MPI_Finalize();
    t4 = now();
    if (rank == 0) {
        printf("init_first fin0_s=%.4f\n", t4 - t3);
        fflush(stdout);
    }
    return errors ? 1 : 0;
}
