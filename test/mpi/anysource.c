/*
 * anysource: every rank sends R messages to every other rank with varying
 * tags and sizes (24 B .. ~300 KB, i.e. eager and rendezvous); receivers use
 * MPI_ANY_SOURCE / MPI_ANY_TAG only and must work out from the status who
 * sent what.  Each message starts with a header (sender, receiver, round,
 * tag, length) followed by a pattern; the status fields, the count and the
 * header must all agree with each other and with the expected values, each
 * (sender, round) must arrive exactly once, and messages from one sender
 * must be matched in the order they were sent (MPI non-overtaking rule).
 *
 * Phase 1: all receives pre-posted (MPI_Irecv, then a barrier, then sends).
 * Phase 2: all sends first, barrier, then MPI_Probe/MPI_Iprobe + MPI_Recv
 *          of exactly the probed size (unexpected-message path).
 * Phase 3: sends and blocking MPI_Recv(ANY_SOURCE, ANY_TAG) mixed freely.
 * A barrier separates the phases, or a wildcard receive could match a
 * faster peer's message of the next phase.
 *
 * Option: -r R  messages per ordered pair and phase (default 16).
 */
#include "mpitest.h"

#include <unistd.h>

typedef struct {
    int32_t src, dst, round, tag;
    uint32_t len;
    uint32_t pad;
} hdr_t;

static const size_t size_table[] = {24,     100, 1500, 8192,  65536 + 17, 100000,
                                    300000, 40,  4000, 70000, 1024};
#define NSIZES (sizeof(size_table) / sizeof(size_table[0]))
#define MAXMSG (300000 + 64)

static int rank, nprocs, rounds = 16;
static uint64_t sent_bytes;

static size_t msg_len(int src, int dst, int r)
{
    size_t base = size_table[(r + src * 3 + dst) % NSIZES];
    return base + (size_t) ((src * 7 + dst + r) % 13);
}

static int msg_tag(int src, int dst, int r)
{
    return 1 + (r * 37 + src * 11 + dst * 5) % 1000;
}

static uint32_t msg_seed(int src, int dst, int r)
{
    return mt_seed(src, dst, r, 0xA5A5);
}

static void make_msg(uint8_t *buf, int dst, int r)
{
    hdr_t h = {rank, dst, r, msg_tag(rank, dst, r), (uint32_t) msg_len(rank, dst, r), 0};
    memcpy(buf, &h, sizeof(h));
    mt_fill_at(buf + sizeof(h), h.len - sizeof(h), msg_seed(rank, dst, r), sizeof(h));
}

/*
 * Check one received message against its status; record it in seen[] and
 * enforce per-sender ordering via last[].  base: first round of the phase.
 */
static void check_msg(const uint8_t *buf, const MPI_Status *st, int base, char *seen, int *last,
                      const char *phase)
{
    int count = -1;
    hdr_t h;
    MT_CHECK(MPI_Get_count(st, MPI_BYTE, &count));
    if (count < (int) sizeof(h)) {
        mt_die("%s: message from status source %d tag %d has only %d bytes", phase, st->MPI_SOURCE,
               st->MPI_TAG, count);
    }
    memcpy(&h, buf, sizeof(h));
    if (h.src != st->MPI_SOURCE || h.tag != st->MPI_TAG || h.len != (uint32_t) count ||
        h.dst != rank) {
        mt_die("%s: status (source %d, tag %d, count %d) does not match "
               "message header (src %d, dst %d, round %d, tag %d, len %u)",
               phase, st->MPI_SOURCE, st->MPI_TAG, count, h.src, h.dst, h.round, h.tag, h.len);
    }
    if (h.src < 0 || h.src >= nprocs || h.src == rank || h.round < base ||
        h.round >= base + rounds) {
        mt_die("%s: unexpected message src %d round %d", phase, h.src, h.round);
    }
    if (h.tag != msg_tag(h.src, rank, h.round) || h.len != msg_len(h.src, rank, h.round)) {
        mt_die("%s: message src %d round %d has tag %d len %u, expected tag "
               "%d len %zu",
               phase, h.src, h.round, h.tag, h.len, msg_tag(h.src, rank, h.round),
               msg_len(h.src, rank, h.round));
    }
    char *s = &seen[h.src * rounds + (h.round - base)];
    if (*s) {
        mt_die("%s: message src %d round %d received twice", phase, h.src, h.round);
    }
    *s = 1;
    if (h.round <= last[h.src]) {
        mt_die("%s: order violation: from rank %d round %d matched after "
               "round %d",
               phase, h.src, h.round, last[h.src]);
    }
    last[h.src] = h.round;
    char what[160];
    snprintf(what, sizeof(what),
             "%s: message from rank %d round %d tag %d "
             "(offsets count from the end of the %zu-byte header)",
             phase, h.src, h.round, h.tag, sizeof(h));
    mt_verify_at(buf + sizeof(h), h.len - sizeof(h), msg_seed(h.src, rank, h.round), sizeof(h),
                 what);
}

static void check_all_seen(const char *seen, const char *phase)
{
    for (int s = 0; s < nprocs; s++) {
        for (int r = 0; r < rounds && s != rank; r++) {
            if (!seen[s * rounds + r]) {
                mt_die("%s: message from rank %d round %d never received", phase, s, r);
            }
        }
    }
}

/* Isend everything for rounds [base, base+rounds); returns buffers/reqs. */
static void post_sends(int base, uint8_t **sbuf, MPI_Request *sreq)
{
    int n = 0;
    for (int r = base; r < base + rounds; r++) {
        for (int k = 1; k < nprocs; k++) {
            int dst = (rank + k) % nprocs;
            size_t len = msg_len(rank, dst, r);
            sbuf[n] = mt_malloc(len);
            make_msg(sbuf[n], dst, r);
            MT_CHECK(MPI_Isend(sbuf[n], (int) len, MPI_BYTE, dst, msg_tag(rank, dst, r),
                               MPI_COMM_WORLD, &sreq[n]));
            sent_bytes += len;
            n++;
        }
    }
}

static void finish_sends(int n, uint8_t **sbuf, MPI_Request *sreq)
{
    MT_CHECK(MPI_Waitall(n, sreq, MPI_STATUSES_IGNORE));
    for (int i = 0; i < n; i++) {
        free(sbuf[i]);
    }
}

int main(int argc, char **argv)
{
    int opt;
    MPI_Init(&argc, &argv);
    mt_setup("anysource");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    while ((opt = getopt(argc, argv, "r:")) != -1) {
        if (opt == 'r' && atoi(optarg) > 0) {
            rounds = atoi(optarg);
        } else {
            mt_die("usage: anysource [-r rounds]");
        }
    }
    if (nprocs < 2) {
        mt_die("needs at least 2 ranks");
    }

    int nmsg = (nprocs - 1) * rounds;
    uint8_t **sbuf = mt_malloc(sizeof(*sbuf) * nmsg);
    uint8_t **rbuf = mt_malloc(sizeof(*rbuf) * nmsg);
    MPI_Request *sreq = mt_malloc(sizeof(*sreq) * nmsg);
    MPI_Request *rreq = mt_malloc(sizeof(*rreq) * nmsg);
    MPI_Status *rst = mt_malloc(sizeof(*rst) * nmsg);
    char *seen = mt_malloc(nprocs * rounds);
    int *last = mt_malloc(sizeof(int) * nprocs);

    /* ---- phase 1: pre-posted wildcard receives ---- */
    for (int i = 0; i < nmsg; i++) {
        rbuf[i] = mt_malloc(MAXMSG);
        MT_CHECK(MPI_Irecv(rbuf[i], MAXMSG, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD,
                           &rreq[i]));
    }
    MT_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    post_sends(0, sbuf, sreq);
    MT_CHECK(MPI_Waitall(nmsg, rreq, rst));
    memset(seen, 0, nprocs * rounds);
    for (int s = 0; s < nprocs; s++) {
        last[s] = -1;
    }
    /* receives were posted in order i = 0..nmsg-1 */
    for (int i = 0; i < nmsg; i++) {
        check_msg(rbuf[i], &rst[i], 0, seen, last, "phase 1 (Irecv)");
        free(rbuf[i]);
    }
    check_all_seen(seen, "phase 1 (Irecv)");
    finish_sends(nmsg, sbuf, sreq);
    /* wildcard receives would match a fast peer's next-phase messages */
    MT_CHECK(MPI_Barrier(MPI_COMM_WORLD));

    /* ---- phase 2: unexpected messages, probe then receive ---- */
    post_sends(rounds, sbuf, sreq);
    MT_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    memset(seen, 0, nprocs * rounds);
    for (int s = 0; s < nprocs; s++) {
        last[s] = -1;
    }
    for (int i = 0; i < nmsg; i++) {
        MPI_Status pst, st;
        int count = -1, flag = 0;
        if (i % 2) {
            MT_CHECK(MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &pst));
        } else {
            while (!flag) {
                MT_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &pst));
            }
        }
        MT_CHECK(MPI_Get_count(&pst, MPI_BYTE, &count));
        uint8_t *buf = mt_malloc(count);
        MT_CHECK(MPI_Recv(buf, count, MPI_BYTE, pst.MPI_SOURCE, pst.MPI_TAG, MPI_COMM_WORLD, &st));
        if (st.MPI_SOURCE != pst.MPI_SOURCE || st.MPI_TAG != pst.MPI_TAG) {
            mt_die("phase 2: probed source %d tag %d but received source %d "
                   "tag %d",
                   pst.MPI_SOURCE, pst.MPI_TAG, st.MPI_SOURCE, st.MPI_TAG);
        }
        check_msg(buf, &st, rounds, seen, last, "phase 2 (Probe)");
        free(buf);
    }
    check_all_seen(seen, "phase 2 (Probe)");
    finish_sends(nmsg, sbuf, sreq);
    MT_CHECK(MPI_Barrier(MPI_COMM_WORLD));

    /* ---- phase 3: blocking wildcard receives, no synchronisation ---- */
    post_sends(2 * rounds, sbuf, sreq);
    memset(seen, 0, nprocs * rounds);
    for (int s = 0; s < nprocs; s++) {
        last[s] = -1;
    }
    uint8_t *buf = mt_malloc(MAXMSG);
    for (int i = 0; i < nmsg; i++) {
        MPI_Status st;
        MT_CHECK(MPI_Recv(buf, MAXMSG, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
        check_msg(buf, &st, 2 * rounds, seen, last, "phase 3 (Recv)");
    }
    free(buf);
    check_all_seen(seen, "phase 3 (Recv)");
    finish_sends(nmsg, sbuf, sreq);

    if (rank == 0) {
        printf("anysource: %d ranks, %d messages per ordered pair\n", nprocs, 3 * rounds);
    }
    mt_report_bytes(sent_bytes);
    free(sbuf);
    free(rbuf);
    free(sreq);
    free(rreq);
    free(rst);
    free(seen);
    free(last);
    mt_ok("anysource");
    MPI_Finalize();
    return 0;
}
