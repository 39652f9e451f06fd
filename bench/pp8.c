/*
 * pp8: 8-byte MPI ping-pong between 2 ranks, for instruction counting with
 * callgrind (callgrind.sh).  usage: pp8 [-p] [-s BYTES] ITERS
 *
 * Rank 0 sends 8 bytes (-s: BYTES, 8 to 16 MiB) to rank 1 and receives as
 * many back, ITERS times
 * (after a barrier; no warm-up, no timing, nothing printed but one line from
 * rank 0 at the end).  Both ranks check the data they receive.
 *
 * Default (handoff) mode: each receive is posted early (MPI_Irecv) and only
 * waited for (MPI_Wait) after the sender has said, through a POSIX
 * semaphore, that its MPI_Send has returned.  The waiting rank sleeps in
 * sem_wait instead of spinning in the MPI progress engine, so every
 * iteration executes the same code: one MPI_Irecv + MPI_Send + MPI_Wait per
 * rank and round trip, with the message already in the receiver's socket
 * when MPI_Wait polls (the datagram or TCP segment is delivered to the local
 * socket during the sender's send system call on loopback).  Without this,
 * the number of empty polls while the peer works depends on timing, and an
 * instruction count per round trip would not repeat.  The handoff itself
 * (sem_post + sem_wait in libc, about 180 instructions per round trip) is
 * called directly from pp8_loop, so callgrind.sh can report it separately.
 *
 * The handoff needs messages that go in one datagram: a message the BTL
 * sends in chunks completes its MPI_Send only once the peer acknowledged
 * it, and the peer sleeps in sem_wait (the job hangs).
 *
 * -p (plain) mode: a textbook MPI_Send/MPI_Recv ping-pong; waiting ranks
 * busy-poll, so instruction counts include a timing-dependent number of
 * empty progress calls.
 */
#include <mpi.h>

#include <errno.h>
#include <fcntl.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TAG_PING 31
#define TAG_PONG 32

static int rank;

static void die(const char *what)
{
    fprintf(stderr, "pp8: rank %d: %s: %s\n", rank, what, strerror(errno));
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/*
 * The measured loop, in a function of its own so that callgrind can count
 * only it (--collect-atstart=no --toggle-collect=pp8_loop).  Returns the
 * number of wrong values received.
 */
/* the message: the 64-bit value first, then the rest of the buffer */
static int size = 8;
static uint8_t *sbuf, *rbuf;

static void put_val(uint64_t v)
{
    memcpy(sbuf, &v, sizeof(v));
}

static uint64_t get_val(void)
{
    uint64_t v;
    memcpy(&v, rbuf, sizeof(v));
    return v;
}

__attribute__((noinline)) long pp8_loop(long iters, int plain, sem_t *to_me, sem_t *to_peer)
{
    int peer = 1 - rank;
    long bad = 0;
    MPI_Request req;

    if (plain) {
        for (long i = 0; i < iters; i++) {
            if (rank == 0) {
                put_val((uint64_t) i * 2 + 1);
                MPI_Send(sbuf, size, MPI_BYTE, peer, TAG_PING, MPI_COMM_WORLD);
                MPI_Recv(rbuf, size, MPI_BYTE, peer, TAG_PONG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                bad += get_val() != (uint64_t) i * 2 + 2;
            } else {
                MPI_Recv(rbuf, size, MPI_BYTE, peer, TAG_PING, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                bad += get_val() != (uint64_t) i * 2 + 1;
                put_val(get_val() + 1);
                MPI_Send(sbuf, size, MPI_BYTE, peer, TAG_PONG, MPI_COMM_WORLD);
            }
        }
    } else if (rank == 0) {
        for (long i = 0; i < iters; i++) {
            MPI_Irecv(rbuf, size, MPI_BYTE, peer, TAG_PONG, MPI_COMM_WORLD, &req);
            put_val((uint64_t) i * 2 + 1);
            MPI_Send(sbuf, size, MPI_BYTE, peer, TAG_PING, MPI_COMM_WORLD);
            if (sem_post(to_peer) != 0)
                die("sem_post");
            while (sem_wait(to_me) != 0)
                if (errno != EINTR)
                    die("sem_wait");
            MPI_Wait(&req, MPI_STATUS_IGNORE);
            bad += get_val() != (uint64_t) i * 2 + 2;
        }
    } else {
        MPI_Irecv(rbuf, size, MPI_BYTE, peer, TAG_PING, MPI_COMM_WORLD, &req);
        for (long i = 0; i < iters; i++) {
            while (sem_wait(to_me) != 0)
                if (errno != EINTR)
                    die("sem_wait");
            MPI_Wait(&req, MPI_STATUS_IGNORE);
            bad += get_val() != (uint64_t) i * 2 + 1;
            put_val(get_val() + 1);
            if (i + 1 < iters)
                MPI_Irecv(rbuf, size, MPI_BYTE, peer, TAG_PING, MPI_COMM_WORLD, &req);
            MPI_Send(sbuf, size, MPI_BYTE, peer, TAG_PONG, MPI_COMM_WORLD);
            if (sem_post(to_peer) != 0)
                die("sem_post");
        }
    }

    return bad;
}

int main(int argc, char **argv)
{
    int np, plain = 0, a = 1;
    long iters, bad;
    sem_t *to_peer = NULL, *to_me = NULL;
    char name[2][64];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    if (a < argc && strcmp(argv[a], "-p") == 0) {
        plain = 1;
        a++;
    }
    if (a + 1 < argc && strcmp(argv[a], "-s") == 0) {
        long v = strtol(argv[a + 1], NULL, 0);
        size = (v >= 8 && v <= 16L * 1024 * 1024) ? (int) v : -1;
        a += 2;
    }
    if (a + 1 != argc || (iters = strtol(argv[a], NULL, 0)) < 1 || np != 2 || size < 8) {
        if (rank == 0)
            fprintf(stderr,
                    "usage: mpirun -np 2 pp8 [-p] [-s BYTES] ITERS (8 <= BYTES <= 16 MiB)\n");
        MPI_Finalize();
        return 2;
    }
    sbuf = calloc(1, (size_t) size);
    rbuf = calloc(1, (size_t) size);
    if (NULL == sbuf || NULL == rbuf)
        die("calloc");
    int peer = 1 - rank;

    if (!plain) {
        /* semaphore names from rank 0's pid; each rank opens (or creates)
         * both, then rank 0 unlinks them once both are open */
        long id = (long) getpid();
        MPI_Bcast(&id, 1, MPI_LONG, 0, MPI_COMM_WORLD);
        for (int k = 0; k < 2; k++)
            snprintf(name[k], sizeof(name[k]), "/pp8-%ld-to%d", id, k);
        to_me = sem_open(name[rank], O_CREAT, 0600, 0);
        to_peer = sem_open(name[peer], O_CREAT, 0600, 0);
        if (to_me == SEM_FAILED || to_peer == SEM_FAILED)
            die("sem_open");
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) {
            sem_unlink(name[0]);
            sem_unlink(name[1]);
        }
    }

    MPI_Barrier(MPI_COMM_WORLD);
    bad = pp8_loop(iters, plain, to_me, to_peer);

    long all_bad = 0;
    MPI_Reduce(&bad, &all_bad, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("pp8 iters=%ld size=%d mode=%s errors=%ld\n", iters, size,
               plain ? "plain" : "handoff", all_bad);
    if (!plain) {
        sem_close(to_me);
        sem_close(to_peer);
    }
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return all_bad ? 1 : 0;
}
