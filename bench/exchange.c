/*
 * exchange: a fixed 2-rank MPI exchange, timed as a whole (for loss.sh).
 *
 * One cycle is a ping-pong of every size in the list (default
 * 8,64,512,4k,32k,256k,1m bytes): rank 0 sends a message of that size, rank
 * 1 receives it, checks every byte and answers with a message of the same
 * size and its own pattern, which rank 0 checks.  The work is identical in
 * every run (same cycles, sizes, order and patterns), so the elapsed time of
 * two runs is directly comparable, e.g. with and without packet loss.
 *
 * One untimed warm-up cycle establishes the connections first.  Then both
 * ranks pass a barrier and rank 0 times `cycles` cycles with MPI_Wtime.
 * The checks are inside the timed part (the same for every transport).
 *
 * Output (rank 0, stdout), one line:
 *   exchange cycles=C messages=M bytes=B elapsed_s=S errors=E
 * where messages and bytes count both directions.  Exit status 1 if any
 * byte was wrong (on either rank), 2 for bad usage.
 */
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_SIZES 32
#define TAG_PING 21
#define TAG_PONG 22

static int rank;
static long errors;

/* The pattern: 64-bit word i of a message is base + i * K, where base
 * depends on the cycle c, the size s and the direction d (0 ping, 1 pong);
 * a trailing partial word takes the low bytes of its word.  Cheap enough
 * (vectorised adds and compares) that the exchange time is communication. */
#define K 0x9e3779b97f4a7c15ull

static uint64_t base(long c, long s, int d)
{
    uint64_t x = (uint64_t) c * 0xff51afd7ed558ccdull ^ (uint64_t) s * 0xc4ceb9fe1a85ec53ull ^
                 (uint64_t) d << 63;
    return x ^ (x >> 29);
}

static void fill(unsigned char *p, long size, long c, int d)
{
    uint64_t b = base(c, size, d), *w = (uint64_t *) p;
    long n = size / 8;
    for (long i = 0; i < n; i++)
        w[i] = b + (uint64_t) i * K;
    if (size % 8) {
        uint64_t last = b + (uint64_t) n * K;
        memcpy(p + 8 * n, &last, (size_t) (size % 8));
    }
}

static void check(const unsigned char *p, long size, long c, int d, const MPI_Status *st)
{
    uint64_t b = base(c, size, d), bad = 0;
    const uint64_t *w = (const uint64_t *) p;
    long n = size / 8, i;
    int count;

    MPI_Get_count(st, MPI_BYTE, &count);
    if (count != size) {
        if (errors < 10)
            fprintf(stderr, "exchange: rank %d: cycle %ld size %ld: got %d bytes\n", rank, c, size,
                    count);
        errors++;
        return;
    }
    for (i = 0; i < n; i++)
        bad |= w[i] ^ (b + (uint64_t) i * K);
    if (size % 8) {
        uint64_t last = b + (uint64_t) n * K;
        bad |= memcmp(p + 8 * n, &last, (size_t) (size % 8)) != 0;
    }
    if (bad) {
        for (i = 0; i < n && w[i] == b + (uint64_t) i * K; i++)
            ;
        if (errors < 10)
            fprintf(stderr, "exchange: rank %d: cycle %ld size %ld: data mismatch near byte %ld\n",
                    rank, c, size, 8 * i);
        errors++;
    }
}

static long parse_size(const char *s)
{
    char *end;
    long v = strtol(s, &end, 0);
    if (*end == 'k' || *end == 'K')
        v <<= 10, end++;
    else if (*end == 'm' || *end == 'M')
        v <<= 20, end++;
    if (end == s || *end || v < 0 || v > (1L << 28))
        return -1;
    return v;
}

static void usage(int code)
{
    if (rank == 0)
        fprintf(code ? stderr : stdout,
                "usage: exchange [-n cycles] [-s sizes]      (run with exactly 2 ranks)\n"
                "  -n cycles  timed cycles (default 50)\n"
                "  -s sizes   comma list of message sizes, k/m suffixes ok\n"
                "             (default 8,64,512,4k,32k,256k,1m)\n"
                "Each cycle: one ping-pong per size, every byte checked on arrival.\n"
                "Output: exchange cycles=C messages=M bytes=B elapsed_s=S errors=E\n");
    MPI_Finalize();
    exit(code);
}

/* one ping-pong per size; cycle number c selects the data pattern */
static void cycle(long c, const long *sizes, int nsizes, unsigned char *sbuf, unsigned char *rbuf)
{
    MPI_Status st;
    for (int k = 0; k < nsizes; k++) {
        long s = sizes[k];
        if (rank == 0) {
            fill(sbuf, s, c, 0);
            MPI_Send(sbuf, (int) s, MPI_BYTE, 1, TAG_PING, MPI_COMM_WORLD);
            memset(rbuf, 0, (size_t) s);
            MPI_Recv(rbuf, (int) s, MPI_BYTE, 1, TAG_PONG, MPI_COMM_WORLD, &st);
            check(rbuf, s, c, 1, &st);
        } else {
            memset(rbuf, 0, (size_t) s);
            MPI_Recv(rbuf, (int) s, MPI_BYTE, 0, TAG_PING, MPI_COMM_WORLD, &st);
            check(rbuf, s, c, 0, &st);
            fill(sbuf, s, c, 1);
            MPI_Send(sbuf, (int) s, MPI_BYTE, 0, TAG_PONG, MPI_COMM_WORLD);
        }
    }
}

int main(int argc, char **argv)
{
    long cycles = 50, sizes[MAX_SIZES], maxsize = 0, total = 0;
    int nsizes = 0, np, opt;
    const char *list = "8,64,512,4k,32k,256k,1m";

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);

    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0)
            usage(0);
    while ((opt = getopt(argc, argv, "n:s:h")) != -1) {
        switch (opt) {
        case 'n':
            cycles = strtol(optarg, NULL, 0);
            if (cycles < 1)
                usage(2);
            break;
        case 's':
            list = optarg;
            break;
        case 'h':
            usage(0);
            break;
        default:
            usage(2);
        }
    }
    if (optind != argc)
        usage(2);
    if (np != 2) {
        if (rank == 0)
            fprintf(stderr, "exchange: run with exactly 2 ranks (got %d)\n", np);
        MPI_Finalize();
        return 2;
    }
    {
        char *dup = strdup(list), *save = NULL, *tok;
        for (tok = strtok_r(dup, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            long v = parse_size(tok);
            if (v < 0 || nsizes == MAX_SIZES) {
                if (rank == 0)
                    fprintf(stderr, "exchange: bad size list '%s'\n", list);
                usage(2);
            }
            sizes[nsizes++] = v;
            total += v;
            if (v > maxsize)
                maxsize = v;
        }
        free(dup);
        if (nsizes == 0)
            usage(2);
    }

    unsigned char *sbuf = aligned_alloc(64, ((size_t) maxsize + 71) / 64 * 64);
    unsigned char *rbuf = aligned_alloc(64, ((size_t) maxsize + 71) / 64 * 64);
    if (!sbuf || !rbuf) {
        fprintf(stderr, "exchange: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    cycle(-1, sizes, nsizes, sbuf, rbuf); /* warm-up: connections, registrations */
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (long c = 0; c < cycles; c++)
        cycle(c, sizes, nsizes, sbuf, rbuf);
    double elapsed = MPI_Wtime() - t0;

    long all_errors = 0;
    MPI_Reduce(&errors, &all_errors, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("exchange cycles=%ld messages=%ld bytes=%ld elapsed_s=%.6f errors=%ld\n", cycles,
               2 * cycles * nsizes, 2 * cycles * total, elapsed, all_errors);
        fflush(stdout);
    }
    free(sbuf);
    free(rbuf);
    MPI_Bcast(&all_errors, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return all_errors ? 1 : 0;
}
