/*
 * pingpong: verified ping-pong for every size from 0 bytes up to 16 MiB + 1
 * (0, 1 and 2^k-1, 2^k, 2^k+1 for k = 1..24), run in both directions
 * (first the even rank of each pair starts, then the odd rank).
 *
 * Ranks are paired (0,1), (2,3), ...; an unpaired last rank only takes part
 * in the final bookkeeping.  Every received byte is checked, as are the
 * received byte count and a poisoned guard area behind the message.
 *
 * Options:
 *   -i MULT  iteration multiplier (float, default 1; each size runs at
 *            least once)
 *   -m MAX   largest message size in bytes (suffix k/K or m/M allowed,
 *            default 16777217)
 *   -n MIN   smallest message size in bytes (the same suffixes; default 0)
 *   -v       print one line per size from rank 0
 *   -V       send with a strided datatype (every other byte of a buffer twice
 *            the message's size; received as plain bytes): the PML packs it,
 *            so the transport sends from a buffer of its own
 *   -S       scribble over the send buffer as soon as MPI_Send returns: the
 *            transport must not read it after it said the send was done
 *            (a chunk it resends later must come from a copy of its own)
 */
#include "mpitest.h"

#include <unistd.h>

#define GUARD 64
#define MAX_SIZES 80

static size_t parse_size(const char *s)
{
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 0);
    if (end == s) {
        mt_die("bad size '%s'", s);
    }
    if (*end == 'k' || *end == 'K') {
        v <<= 10;
        end++;
    } else if (*end == 'm' || *end == 'M') {
        v <<= 20;
        end++;
    }
    if (*end != '\0') {
        mt_die("bad size '%s'", s);
    }
    return (size_t) v;
}

/* Base iteration count per size: many for small, 1-2 for multi-MiB. */
static int base_iters(size_t n)
{
    if (n <= 1024) {
        return 50;
    } else if (n <= 65536) {
        return 20;
    } else if (n <= (1u << 20)) {
        return 6;
    } else if (n <= (4u << 20)) {
        return 2;
    }
    return 1;
}

static int build_sizes(size_t max, size_t *sizes)
{
    int n = 0;
    sizes[n++] = 0;
    sizes[n++] = 1;
    for (int k = 1; k <= 24; k++) {
        size_t p = (size_t) 1 << k;
        size_t cand[3] = {p - 1, p, p + 1};
        for (int j = 0; j < 3; j++) {
            if (cand[j] > sizes[n - 1]) {
                sizes[n++] = cand[j];
            }
        }
    }
    while (n > 0 && sizes[n - 1] > max) {
        n--;
    }
    return n;
}

/* Send the n bytes at buf: as they are, or (wide != NULL) spread over
 * every other byte of wide and sent with a strided datatype; then, with
 * scribble, overwrite what was sent from. */
static void send_msg(uint8_t *buf, uint8_t *wide, size_t n, int peer, int tag, int scribble)
{
    if (NULL == wide) {
        MT_CHECK(MPI_Send(buf, (int) n, MPI_BYTE, peer, tag, MPI_COMM_WORLD));
        if (scribble) {
            memset(buf, 0xEE, n);
        }
        return;
    }
    MPI_Datatype every_other;
    for (size_t i = 0; i < n; i++) {
        wide[2 * i] = buf[i];
    }
    MT_CHECK(MPI_Type_vector((int) n, 1, 2, MPI_BYTE, &every_other));
    MT_CHECK(MPI_Type_commit(&every_other));
    MT_CHECK(MPI_Send(wide, n ? 1 : 0, every_other, peer, tag, MPI_COMM_WORLD));
    MT_CHECK(MPI_Type_free(&every_other));
    if (scribble) {
        memset(wide, 0xEE, 2 * n);
    }
}

int main(int argc, char **argv)
{
    double mult = 1.0;
    size_t max = ((size_t) 1 << 24) + 1, min = 0;
    int verbose = 0, scribble = 0, strided = 0, opt;
    int rank, size;

    MPI_Init(&argc, &argv);
    mt_setup("pingpong");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    while ((opt = getopt(argc, argv, "i:m:n:vSV")) != -1) {
        switch (opt) {
        case 'i':
            mult = atof(optarg);
            break;
        case 'm':
            max = parse_size(optarg);
            break;
        case 'n':
            min = parse_size(optarg);
            break;
        case 'v':
            verbose = 1;
            break;
        case 'S':
            scribble = 1;
            break;
        case 'V':
            strided = 1;
            break;
        default:
            mt_die("usage: pingpong [-i mult] [-m max_bytes] [-n min_bytes] [-v] [-S] [-V]");
        }
    }
    if (size < 2) {
        mt_die("needs at least 2 ranks");
    }
    if (mult <= 0) {
        mt_die("iteration multiplier must be > 0");
    }

    size_t sizes[MAX_SIZES];
    int nsizes = build_sizes(max, sizes);
    int first = 0;
    while (first < nsizes && sizes[first] < min) {
        first++;
    }
    memmove(sizes, sizes + first, (size_t) (nsizes - first) * sizeof(sizes[0]));
    nsizes -= first;
    size_t bufmax = (nsizes > 0 ? sizes[nsizes - 1] : 0) + GUARD;
    uint8_t *sbuf = mt_malloc(bufmax);
    uint8_t *rbuf = mt_malloc(bufmax);
    uint8_t *wide = strided ? mt_malloc(2 * bufmax) : NULL; /* -V: the strided send buffer */

    int peer = rank ^ 1;
    uint64_t sent = 0;
    unsigned long long msgs = 0;
    double t0 = MPI_Wtime();

    for (int dir = 0; dir < 2 && peer < size; dir++) {
        /* dir 0: even rank starts; dir 1: odd rank starts */
        int starter = (dir == 0) ? (rank & ~1) : (rank | 1);
        int i_start = (rank == starter);
        int responder = (starter == rank) ? peer : rank;
        for (int s = 0; s < nsizes; s++) {
            size_t n = sizes[s];
            int iters = (int) (base_iters(n) * mult + 0.5);
            int tag = dir * 1000 + s;
            char what[128];
            if (iters < 1) {
                iters = 1;
            }
            double ts = MPI_Wtime();
            for (int it = 0; it < iters; it++) {
                uint32_t seed_ping =
                    mt_seed((uint32_t) starter, (uint32_t) n, (uint32_t) it, 2u * dir);
                uint32_t seed_pong =
                    mt_seed((uint32_t) responder, (uint32_t) n, (uint32_t) it, 2u * dir + 1);
                MPI_Status st;
                memset(rbuf, MT_POISON, n + GUARD);
                if (i_start) {
                    mt_fill(sbuf, n, seed_ping);
                    send_msg(sbuf, wide, n, peer, tag, scribble);
                    MT_CHECK(MPI_Recv(rbuf, (int) (n + GUARD), MPI_BYTE, peer, tag, MPI_COMM_WORLD,
                                      &st));
                    snprintf(what, sizeof(what), "pong of %zu bytes from rank %d (dir %d, iter %d)",
                             n, peer, dir, it);
                    mt_check_bytes(&st, n, what);
                    mt_verify(rbuf, n, seed_pong, what);
                } else {
                    MT_CHECK(MPI_Recv(rbuf, (int) (n + GUARD), MPI_BYTE, peer, tag, MPI_COMM_WORLD,
                                      &st));
                    snprintf(what, sizeof(what), "ping of %zu bytes from rank %d (dir %d, iter %d)",
                             n, peer, dir, it);
                    mt_check_bytes(&st, n, what);
                    mt_verify(rbuf, n, seed_ping, what);
                    mt_fill(sbuf, n, seed_pong);
                    send_msg(sbuf, wide, n, peer, tag, scribble);
                }
                mt_verify_poison(rbuf + n, GUARD, "receive guard area");
                sent += n;
                msgs++;
            }
            if (verbose && rank == 0) {
                printf("dir %d size %10zu iters %3d  %.3f s\n", dir, n, iters, MPI_Wtime() - ts);
                fflush(stdout);
            }
        }
    }

    double elapsed = MPI_Wtime() - t0;
    if (rank == 0) {
        printf("pingpong: %d sizes (0 .. %zu bytes), 2 directions, "
               "%llu messages sent by rank 0, %.2f s\n",
               nsizes, nsizes ? sizes[nsizes - 1] : 0, msgs, elapsed);
    }
    mt_report_bytes(sent);
    free(sbuf);
    free(wide);
    free(rbuf);
    mt_ok("pingpong");
    MPI_Finalize();
    return 0;
}
