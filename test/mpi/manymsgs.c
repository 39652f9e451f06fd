/*
 * manymsgs: between all pairs of ranks, each rank keeps thousands of
 * MPI_Isend / MPI_Irecv outstanding at once (default 5000 each way per
 * peer), mixed sizes from 8 B to 64 KiB (60% <= 256 B, 30% <= 4 KiB,
 * 10% <= 64 KiB), four tags; then one MPI_Waitall and a full check.
 *
 * Message i to a peer has a size and tag known to both sides, and its
 * contents are the slice [off_i, off_i + len) of a per-(sender, receiver,
 * round) pattern, with off_i pseudo-random, so a message matched to the
 * wrong receive (same tag, same length) is still detected.  All sends to one
 * peer read from one shared pattern buffer (allowed since MPI-3).
 *
 * Options: -n N messages per peer and direction (default 5000),
 *          -r R rounds (default 2),
 *          -b B large messages instead: each B to B + 4095 bytes (e.g. 1 MiB:
 *             rendezvous and PUT, every message into a target of its own).
 */
#include "mpitest.h"

#include <unistd.h>

#define MAXLEN 65536
#define OFFSPAN 65536
#define NTAGS 4

static uint32_t pair_seed(int src, int dst, int round)
{
    return mt_seed(src, dst, round, 0x5EED);
}

static size_t big; /* -b: every message big .. big + 4095 bytes */

static size_t msg_len(uint32_t h)
{
    uint32_t cls = h % 10, r = h >> 8;
    if (0 != big) {
        return big + r % 4096;
    }
    if (cls < 6) {
        return 8 + r % 249; /* 8 .. 256 */
    } else if (cls < 9) {
        return 257 + r % (4096 - 257 + 1); /* 257 .. 4096 */
    }
    return 4097 + r % (MAXLEN - 4097 + 1); /* 4097 .. 65536 */
}

/* Size, tag and pattern offset of message i from src to dst. */
static void msg_desc(int src, int dst, int round, int i, size_t *len, int *tag, size_t *off)
{
    uint32_t h = mt_hash(pair_seed(src, dst, round) ^ 0x9999, (uint64_t) i);
    *len = msg_len(h);
    *tag = (int) (mt_hash(h, 1) % NTAGS);
    *off = mt_hash(h, 2) % OFFSPAN;
}

int main(int argc, char **argv)
{
    int rank, nprocs, opt, n = 5000, rounds = 2;
    uint64_t sent = 0;

    MPI_Init(&argc, &argv);
    mt_setup("manymsgs");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    while ((opt = getopt(argc, argv, "n:r:b:")) != -1) {
        if (opt == 'n' && atoi(optarg) > 0) {
            n = atoi(optarg);
        } else if (opt == 'r' && atoi(optarg) > 0) {
            rounds = atoi(optarg);
        } else if (opt == 'b' && atol(optarg) > 0 && atol(optarg) <= (1L << 28)) {
            big = (size_t) atol(optarg);
        } else {
            mt_die("usage: manymsgs [-n msgs_per_peer] [-r rounds] [-b message_bytes]");
        }
    }
    if (nprocs < 2) {
        mt_die("needs at least 2 ranks");
    }

    int npeers = nprocs - 1;
    size_t nreq = (size_t) 2 * npeers * n;
    MPI_Request *req = mt_malloc(sizeof(*req) * nreq);
    uint8_t **pat = mt_malloc(sizeof(*pat) * npeers);
    uint8_t **rbuf = mt_malloc(sizeof(*rbuf) * (size_t) npeers * n);
    size_t patlen = OFFSPAN + ((0 != big) ? big + 4096 : MAXLEN);
    for (int p = 0; p < npeers; p++) {
        pat[p] = mt_malloc(patlen);
    }

    double t0 = MPI_Wtime();
    for (int round = 0; round < rounds; round++) {
        size_t nr = 0;
        for (int p = 0; p < npeers; p++) {
            int dst = (rank + 1 + p) % nprocs;
            mt_fill(pat[p], patlen, pair_seed(rank, dst, round));
        }
        /* interleave receives and sends so that some messages arrive
         * before their receive is posted and some after */
        for (int i = 0; i < n; i++) {
            for (int p = 0; p < npeers; p++) {
                int dst = (rank + 1 + p) % nprocs;
                int src = (rank - 1 - p + nprocs) % nprocs;
                size_t len, off;
                int tag;

                msg_desc(src, rank, round, i, &len, &tag, &off);
                rbuf[(size_t) p * n + i] = mt_malloc(len);
                MT_CHECK(MPI_Irecv(rbuf[(size_t) p * n + i], (int) len, MPI_BYTE, src, tag,
                                   MPI_COMM_WORLD, &req[nr++]));
                msg_desc(rank, dst, round, i, &len, &tag, &off);
                MT_CHECK(MPI_Isend(pat[p] + off, (int) len, MPI_BYTE, dst, tag, MPI_COMM_WORLD,
                                   &req[nr++]));
                sent += len;
            }
        }
        MT_CHECK(MPI_Waitall((int) nr, req, MPI_STATUSES_IGNORE));

        for (int p = 0; p < npeers; p++) {
            int src = (rank - 1 - p + nprocs) % nprocs;
            for (int i = 0; i < n; i++) {
                size_t len, off;
                int tag;
                char what[128];
                uint8_t *b = rbuf[(size_t) p * n + i];
                msg_desc(src, rank, round, i, &len, &tag, &off);
                snprintf(what, sizeof(what),
                         "round %d message %d (tag %d, "
                         "%zu bytes) from rank %d",
                         round, i, tag, len, src);
                mt_verify_at(b, len, pair_seed(src, rank, round), off, what);
                free(b);
            }
        }
        /* the shared send patterns must not have been touched */
        for (int p = 0; p < npeers; p++) {
            int dst = (rank + 1 + p) % nprocs;
            mt_verify(pat[p], patlen, pair_seed(rank, dst, round),
                      "send pattern buffer after sends");
        }
    }

    if (rank == 0) {
        printf("manymsgs: %d ranks, %d rounds of %d outstanding sends + "
               "receives per peer, %.2f s\n",
               nprocs, rounds, n, MPI_Wtime() - t0);
    }
    mt_report_bytes(sent);
    for (int p = 0; p < npeers; p++) {
        free(pat[p]);
    }
    free(pat);
    free(rbuf);
    free(req);
    mt_ok("manymsgs");
    MPI_Finalize();
    return 0;
}
