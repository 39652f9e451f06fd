/*
 * hostile_job: the victim of test/mpi/t_hostile.sh.  Two ranks exchange
 * data-checked messages in both directions at once, round after round,
 * until told to stop, while the test throws hostile datagrams at their
 * usnic ports.
 *
 * One round: each rank posts a receive for every size of the list below,
 * then sends every size to the other rank, all at once (so the priority
 * channel, eager fragments, chunked fragments and rendezvous PUTs are all
 * in flight together), and waits for all of them.  Send buffers are
 * refilled every round with a pattern that depends on (round, size,
 * sender rank) and the byte offset; every received byte is checked, so is
 * the received count and a guard area behind each receive buffer.
 *
 * Sizes (with Open MPI 4.1 ob1 and usnic's defaults: priority channel for
 * fragments up to 512 bytes, datagrams of 65507 bytes on lo, eager limit
 * 300000, rendezvous with emulated PUT above it):
 *   0, 1, 7, 100, 300, 450, 480     tiny: one FRAG on the priority channel
 *   512, 513, 1500, 8192, 40000     eager, one FRAG on the data channel
 *   65536, 70001, 131072, 149000,   eager, chunked (CHUNK)
 *   262144
 *   1048583, 4194304                rendezvous: PUT chunks
 *
 * Rank 0 prints a progress line about every second, also in the middle of
 * a round:
 *   PROGRESS t=<seconds since start> rounds=<completed> msgs=<received> bytes=<received>
 * (msgs and bytes: what rank 0 received and checked so far), and at the end
 *   hostile_job: rounds=N seconds=S
 *   BYTES <payload bytes exchanged>
 *   OK hostile_job rounds=N
 * Any mismatch aborts the job (non-zero exit).
 *
 * Options:
 *   -t SEC   stop after SEC seconds at the latest (default 60)
 *   -f FILE  stop at the end of the round during which FILE appeared
 *            (checked by rank 0 about every 0.2 s)
 *   -T SEC   hard limit: abort if one round takes longer than SEC seconds
 *            (default 30; a stalled transport fails instead of hanging)
 */
#include "mpitest.h"

#include <unistd.h>

#define GUARD 64
#define NSIZES ((int) (sizeof(sizes) / sizeof(sizes[0])))

static const size_t sizes[] = {0,      1,      7,      100,     300,    450,   480,
                               512,    513,    1500,   8192,    40000,  65536, 70001,
                               131072, 149000, 262144, 1048583, 4194304};

/* splitmix64: a 64-bit word of the pattern from (seed, word index). */
static inline uint64_t pat_word(uint64_t seed, uint64_t i)
{
    uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t pat_seed(uint32_t round, uint32_t size_idx, uint32_t rank)
{
    return ((uint64_t) mt_seed(round, size_idx, rank, 0x4057113u) << 32) |
           mt_seed(rank, round, size_idx, 0x10b5u);
}

static void pat_fill(uint8_t *buf, size_t n, uint64_t seed)
{
    size_t words = n / 8;
    for (size_t i = 0; i < words; i++) {
        uint64_t w = pat_word(seed, i);
        memcpy(buf + 8 * i, &w, 8);
    }
    if (n % 8) {
        uint64_t w = pat_word(seed, words);
        memcpy(buf + 8 * words, &w, n % 8);
    }
}

static void pat_check(const uint8_t *buf, size_t n, uint64_t seed, uint32_t round, size_t size,
                      int from)
{
    size_t words = n / 8;
    for (size_t i = 0; i <= words; i++) {
        uint64_t w = pat_word(seed, i);
        size_t off = 8 * i, len = (i < words) ? 8 : n % 8;
        if (0 != len && 0 != memcmp(buf + off, &w, len)) {
            size_t bad = 0, first = off;
            const uint8_t *wb = (const uint8_t *) &w;
            for (size_t j = 0; j < len; j++) {
                if (buf[off + j] != wb[j]) {
                    first = off + j;
                    break;
                }
            }
            for (size_t k = 0; k < n; k++) {
                uint64_t ww = pat_word(seed, k / 8);
                bad += (buf[k] != ((const uint8_t *) &ww)[k % 8]);
            }
            mt_die("data mismatch: round %u, %zu-byte message from rank %d: first bad offset "
                   "%zu, %zu bad bytes",
                   round, size, from, first, bad);
        }
    }
}

int main(int argc, char **argv)
{
    double max_sec = 60.0, round_limit = 30.0;
    const char *stopfile = NULL;
    int rank, nprocs, peer, opt;
    uint8_t *sbuf[NSIZES], *rbuf[NSIZES];
    MPI_Request req[2 * NSIZES];
    MPI_Status st[2 * NSIZES];
    int idx[2 * NSIZES];
    unsigned long long rounds = 0, my_msgs = 0, my_bytes = 0;
    double t0, next_line, next_stopcheck;
    int stop = 0;

    MPI_Init(&argc, &argv);
    mt_setup("hostile_job");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (2 != nprocs) {
        mt_die("needs exactly 2 ranks, got %d", nprocs);
    }
    while (-1 != (opt = getopt(argc, argv, "t:f:T:"))) {
        switch (opt) {
        case 't':
            max_sec = atof(optarg);
            break;
        case 'f':
            stopfile = optarg;
            break;
        case 'T':
            round_limit = atof(optarg);
            break;
        default:
            mt_die("usage: hostile_job [-t max_seconds] [-f stopfile] [-T round_limit]");
        }
    }
    peer = 1 - rank;
    for (int s = 0; s < NSIZES; s++) {
        sbuf[s] = mt_malloc(sizes[s] + GUARD);
        rbuf[s] = mt_malloc(sizes[s] + GUARD);
    }

    MT_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    t0 = MPI_Wtime();
    next_line = t0 + 1.0;
    next_stopcheck = t0 + 0.2;
    for (uint32_t round = 0;; round++) {
        int pending = 2 * NSIZES;
        double rstart;

        /* rank 0 decides whether to go on; everyone learns it here */
        if (0 == rank && !stop) {
            double now = MPI_Wtime();
            if (now - t0 >= max_sec) {
                stop = 1;
            } else if (NULL != stopfile && now >= next_stopcheck) {
                next_stopcheck = now + 0.2;
                stop = (0 == access(stopfile, F_OK));
            }
        }
        MT_CHECK(MPI_Bcast(&stop, 1, MPI_INT, 0, MPI_COMM_WORLD));
        if (stop) {
            break;
        }

        for (int s = 0; s < NSIZES; s++) {
            memset(rbuf[s] + sizes[s], MT_POISON, GUARD);
            MT_CHECK(
                MPI_Irecv(rbuf[s], (int) sizes[s], MPI_BYTE, peer, s, MPI_COMM_WORLD, &req[s]));
        }
        for (int s = 0; s < NSIZES; s++) {
            pat_fill(sbuf[s], sizes[s], pat_seed(round, (uint32_t) s, (uint32_t) rank));
            MT_CHECK(MPI_Isend(sbuf[s], (int) sizes[s], MPI_BYTE, peer, s, MPI_COMM_WORLD,
                               &req[NSIZES + s]));
        }
        rstart = MPI_Wtime();
        while (pending > 0) {
            int done = 0;
            double now;

            MT_CHECK(MPI_Testsome(2 * NSIZES, req, &done, idx, st));
            for (int k = 0; k < done && MPI_UNDEFINED != done; k++) {
                int i = idx[k];
                pending--;
                if (i < NSIZES) {
                    char what[64];
                    snprintf(what, sizeof(what), "round %u size %zu", round, sizes[i]);
                    mt_check_bytes(&st[k], sizes[i], what);
                    pat_check(rbuf[i], sizes[i], pat_seed(round, (uint32_t) i, (uint32_t) peer),
                              round, sizes[i], peer);
                    mt_verify_poison(rbuf[i] + sizes[i], GUARD, what);
                    my_msgs++;
                    my_bytes += sizes[i];
                }
            }
            now = MPI_Wtime();
            if (0 == rank && now >= next_line) {
                printf("PROGRESS t=%.2f rounds=%llu msgs=%llu bytes=%llu\n", now - t0, rounds,
                       my_msgs, my_bytes);
                fflush(stdout);
                while (next_line <= now) {
                    next_line += 1.0;
                }
            }
            if (now - rstart > round_limit) {
                mt_die("round %u not complete after %.0f s (%d of %d requests pending)", round,
                       round_limit, pending, 2 * NSIZES);
            }
        }
        rounds++;
    }

    if (0 == rank) {
        printf("hostile_job: rounds=%llu seconds=%.1f\n", rounds, MPI_Wtime() - t0);
        fflush(stdout);
    }
    mt_report_bytes(my_bytes);
    MT_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    if (0 == rank) {
        printf("OK hostile_job rounds=%llu\n", rounds);
        fflush(stdout);
    }
    for (int s = 0; s < NSIZES; s++) {
        free(sbuf[s]);
        free(rbuf[s]);
    }
    MPI_Finalize();
    return 0;
}
