/*
 * incast: every rank but 0 sends to rank 0 at once, messages of random
 * sizes (1 B to MAX bytes, drawn per round and sender from the seed, with
 * extra weight on the protocol boundaries: eager, chunked, PUT); with -b
 * rank 0 sends to every other rank at the same time (both directions).
 * Every buffer is refilled every round with a pattern of (seed, round,
 * sender, message), receives are posted with guard bytes, and every byte
 * is checked.  Many senders into one receiver is what overflows a shared
 * receive buffer; the BTL must neither lose nor mix up anything.
 *
 * usage: incast [-k MSGS] [-m MAX] [-r ROUNDS] [-s SEED] [-b]
 *        (defaults 6 messages per sender and round, 2 MiB, 3 rounds, seed 1)
 * Prints the seed first, "BYTES n" (payload bytes this rank sent) and
 * "OK incast".
 */
#include <unistd.h>

#include "mpitest.h"

#define GUARD 64

static uint64_t rng_next(uint64_t *s)
{
    /* splitmix64 */
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* The size of message i of sender `from` in round r. */
static size_t msg_size(uint32_t seed, int r, int from, int i, size_t max)
{
    static const size_t edges[] = {1,     64,    1024,   8192,   16384,  65536,
                                   65507, 65508, 131072, 300000, 300001, 1048576};
    uint64_t s =
        ((uint64_t) seed << 32) ^ ((uint64_t) r << 20) ^ ((uint64_t) from << 8) ^ (uint64_t) i;
    uint64_t x = rng_next(&s);
    size_t n;

    if (x % 3 == 0) {
        /* a boundary, or one byte beside it */
        n = edges[(x >> 8) % (sizeof(edges) / sizeof(edges[0]))] + (size_t) ((x >> 16) % 3) - 1;
    } else {
        n = 1 + (size_t) ((x >> 8) % max);
    }
    return (n < 1) ? 1 : (n > max ? max : n);
}

int main(int argc, char **argv)
{
    int rank, np, k = 6, rounds = 3, both = 0, c;
    size_t max = (size_t) 2 << 20;
    uint32_t seed = 1;
    uint64_t sent = 0;

    MPI_Init(&argc, &argv);
    mt_setup("incast");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    while ((c = getopt(argc, argv, "k:m:r:s:b")) != -1) {
        switch (c) {
        case 'k':
            k = atoi(optarg);
            break;
        case 'm':
            max = (size_t) atol(optarg);
            break;
        case 'r':
            rounds = atoi(optarg);
            break;
        case 's':
            seed = (uint32_t) strtoul(optarg, NULL, 0);
            break;
        case 'b':
            both = 1;
            break;
        default:
            mt_die("usage: incast [-k MSGS] [-m MAX] [-r ROUNDS] [-s SEED] [-b]");
        }
    }
    if (np < 2 || k < 1 || rounds < 1 || max < 1) {
        mt_die("needs 2+ ranks, -k >= 1, -r >= 1, -m >= 1");
    }
    if (0 == rank) {
        printf("incast: seed %u, %d senders, %d messages each of 1..%zu bytes, %d rounds%s\n", seed,
               np - 1, k, max, rounds, both ? ", rank 0 sending to all at once" : "");
        fflush(stdout);
    }

    {
        /* rank 0: k receives from each sender (+ k sends to each with -b);
         * others: k sends (+ k receives with -b) */
        int nin = (0 == rank) ? k * (np - 1) : (both ? k : 0);
        int nout = (0 == rank) ? (both ? k * (np - 1) : 0) : k;
        unsigned char **in = mt_malloc(sizeof(*in) * (size_t) (nin + 1));
        unsigned char **out = mt_malloc(sizeof(*out) * (size_t) (nout + 1));
        size_t *in_n = mt_malloc(sizeof(*in_n) * (size_t) (nin + 1));
        MPI_Request *req = mt_malloc(sizeof(*req) * (size_t) (nin + nout + 1));
        MPI_Status *st = mt_malloc(sizeof(*st) * (size_t) (nin + nout + 1));

        for (int i = 0; i < nin; i++) {
            in[i] = mt_malloc(max + 2 * GUARD);
        }
        for (int i = 0; i < nout; i++) {
            out[i] = mt_malloc(max);
        }
        for (int r = 0; r < rounds; r++) {
            int n = 0, ni = 0, no = 0;
            /* receives first, each with guard bytes on both sides */
            for (int p = 0; p < np; p++) {
                int from = (0 == rank) ? p : 0;
                if (p == rank || (0 != rank && (!both || p != 0))) {
                    continue;
                }
                for (int i = 0; i < k; i++) {
                    /* what `from` sends to us: its sizes are drawn per
                     * direction (senders -> 0: from = sender; 0 -> x: np + x) */
                    int who = (0 == rank) ? from : np + rank;
                    size_t sz = msg_size(seed, r, who, i, max);
                    memset(in[ni], MT_POISON, max + 2 * GUARD);
                    in_n[ni] = sz;
                    MT_CHECK(MPI_Irecv(in[ni] + GUARD, (int) sz, MPI_BYTE, (0 == rank) ? p : 0, i,
                                       MPI_COMM_WORLD, &req[n++]));
                    ni++;
                }
            }
            MT_CHECK(MPI_Barrier(MPI_COMM_WORLD));
            /* then every send at once */
            for (int p = 0; p < np; p++) {
                if (p == rank || (0 == rank && !both) || (0 != rank && p != 0)) {
                    continue;
                }
                for (int i = 0; i < k; i++) {
                    int who = (0 == rank) ? np + p : rank;
                    size_t sz = msg_size(seed, r, who, i, max);
                    mt_fill(out[no], sz, mt_seed(seed, (uint32_t) r, (uint32_t) who, (uint32_t) i));
                    MT_CHECK(
                        MPI_Isend(out[no], (int) sz, MPI_BYTE, p, i, MPI_COMM_WORLD, &req[n++]));
                    sent += sz;
                    no++;
                }
            }
            MT_CHECK(MPI_Waitall(n, req, st));
            /* every byte, and the guards */
            ni = 0;
            for (int p = 0; p < np; p++) {
                if (p == rank || (0 != rank && (!both || p != 0))) {
                    continue;
                }
                for (int i = 0; i < k; i++) {
                    int who = (0 == rank) ? p : np + rank;
                    char what[96];
                    snprintf(what, sizeof(what), "round %d, message %d from rank %d (%zu bytes)", r,
                             i, p, in_n[ni]);
                    mt_check_bytes(&st[ni], in_n[ni], what); /* (receives come first) */
                    mt_verify_poison(in[ni], GUARD, what);
                    mt_verify(in[ni] + GUARD, in_n[ni],
                              mt_seed(seed, (uint32_t) r, (uint32_t) who, (uint32_t) i), what);
                    mt_verify_poison(in[ni] + GUARD + in_n[ni], GUARD, what);
                    ni++;
                }
            }
        }
        for (int i = 0; i < nin; i++) {
            free(in[i]);
        }
        for (int i = 0; i < nout; i++) {
            free(out[i]);
        }
        free(in);
        free(out);
        free(in_n);
        free(req);
        free(st);
    }
    mt_report_bytes(sent);
    mt_ok("incast");
    MPI_Finalize();
    return 0;
}
