/*
 * spawn: traffic between two jobs.  Started as one process (mpirun -np 1),
 * the parent spawns 2 copies of itself with MPI_Comm_spawn; a copy knows it
 * is a child because MPI_Comm_get_parent gives it an intercommunicator.
 *
 * Over the parent-children intercommunicator, the parent exchanges with each
 * child, and the two children exchange over the MPI_COMM_WORLD of their own
 * job, messages of 0, 1, 8, 512, 4096, 65536, 150000, 1 MiB and 4 MiB + 3
 * bytes (around the BTL's eager, rendezvous and PUT limits), in both
 * directions at once (all sends and receives of an iteration posted with
 * MPI_Isend / MPI_Irecv, receives first in even iterations, sends first in
 * odd ones), for several iterations.  The contents are a pattern of (sender,
 * receiver, size, iteration, phase); every byte, the received count, the
 * source, the tag and a poisoned guard area behind each message are checked.
 * Then parent and children merge the intercommunicator (parent first) and
 * check MPI_Allgather, MPI_Allreduce (SUM and MAX, small and 1 MiB) and
 * MPI_Bcast (from every root) over the merged communicator.
 *
 * Every process prints its verdict line ("spawn: <who> pid=... btl=...
 * verdict OK|FAILED ...", btl = the OMPI_MCA_btl it runs with).  Mismatches
 * are counted, not fatal; at the end the parent gathers the counts and the
 * received payload of all processes, prints "BYTES <n>" (point-to-point
 * payload received by all 3 processes) and "OK spawn" only if no process
 * saw a mismatch.  Failing MPI calls abort.  A watchdog (alarm) ends a
 * process that is still running after the time limit, naming the phase it
 * was stuck in.
 *
 * Options (the parent passes them on to its children):
 *   -i N   iterations of the point-to-point exchange (default 3)
 *   -t S   watchdog, seconds (default 50; 0 = none)
 */
#include "mpitest.h"

#include <signal.h>
#include <unistd.h>

#define NCHILD 2
#define GUARD 64
#define MAX_REPORTS 10
#define PARENT_ID 1000u
#define CHILD_ID(r) (2000u + (uint32_t) (r))

static const size_t sizes[] = {0, 1, 8, 512, 4096, 65536, 150000, 1u << 20, (4u << 20) + 3};
#define NSIZES ((int) (sizeof(sizes) / sizeof(sizes[0])))

enum phase_id {
    PH_P2P_INTER = 1, /* parent <-> children over the intercommunicator */
    PH_P2P_WORLD = 2, /* child <-> child over the children's MPI_COMM_WORLD */
    PH_BCAST = 3,
    PH_ALLREDUCE = 4,
};

static char who[64];                  /* "parent" or "child N" */
static uint32_t my_id;                /* PARENT_ID or CHILD_ID(rank) */
static unsigned long long errors;     /* mismatches seen by this process */
static unsigned long long recv_bytes; /* point-to-point payload received */
static unsigned long long recv_msgs;

/* ---- watchdog ------------------------------------------------------------ */

static const char *volatile phase = "MPI_Init";
static char alarm_msgs[2][256];
static const char *volatile alarm_msg = "ERROR spawn: watchdog: still running, in ";
static int watchdog_secs = 50;

static void set_phase(const char *p)
{
    phase = p;
}

static void write_all(const char *s)
{
    size_t n = 0;
    while (s[n] != '\0') {
        n++;
    }
    while (n > 0) {
        ssize_t w = write(STDERR_FILENO, s, n);
        if (w <= 0) {
            return;
        }
        s += w;
        n -= (size_t) w;
    }
}

static void on_alarm(int sig)
{
    (void) sig;
    write_all(alarm_msg);
    write_all(phase);
    write_all("\n");
    _exit(3);
}

/* The message names `who` (empty before MPI_Init); call again once known. */
static void watchdog_message(void)
{
    static int next;
    char *m = alarm_msgs[next];
    next ^= 1;
    snprintf(m, sizeof(alarm_msgs[0]),
             "ERROR spawn%s%s pid %d: watchdog: still running after %d s, in ", who[0] ? " " : "",
             who, (int) getpid(), watchdog_secs);
    alarm_msg = m;
}

static void watchdog_start(void)
{
    if (watchdog_secs <= 0) {
        return;
    }
    watchdog_message();
    signal(SIGALRM, on_alarm);
    alarm((unsigned) watchdog_secs);
}

/* ---- non-fatal checks -------------------------------------------------- */

static void report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void report(const char *fmt, ...)
{
    errors++;
    if (errors > MAX_REPORTS) {
        return;
    }
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "ERROR spawn %s pid %d: %s\n", who, (int) getpid(), msg);
    fflush(stderr);
}

/* Check buf[0..n) against the pattern of seed; count one error per buffer. */
static void check_pattern(const uint8_t *buf, size_t n, uint32_t seed, const char *what)
{
    for (size_t i = 0; i < n; i++) {
        if (buf[i] != mt_byte(seed, i)) {
            size_t bad = 0;
            for (size_t j = i; j < n; j++) {
                bad += (buf[j] != mt_byte(seed, j));
            }
            report("data mismatch in %s: first bad offset %zu of %zu bytes (got 0x%02x, "
                   "expected 0x%02x; %zu bad bytes)",
                   what, i, n, buf[i], mt_byte(seed, i), bad);
            return;
        }
    }
}

static void check_guard(const uint8_t *buf, const char *what)
{
    for (size_t i = 0; i < GUARD; i++) {
        if (buf[i] != MT_POISON) {
            report("%s: guard byte %zu behind the message overwritten (0x%02x)", what, i, buf[i]);
            return;
        }
    }
}

/* ---- point-to-point -------------------------------------------------------- */

static uint32_t p2p_seed(uint32_t from, uint32_t to, size_t n, int it, int ph)
{
    return mt_seed(from, to, (uint32_t) n, (uint32_t) it * 16u + (uint32_t) ph);
}

/*
 * One iteration with every peer at once: for each peer and size, an Irecv
 * of the peer's message and an Isend of ours (tag = size index), then one
 * MPI_Waitall and the checks.  peers[] are ranks in comm (its remote group
 * for an intercommunicator), ids[] their pattern identities.
 */
static void exchange(MPI_Comm comm, int npeers, const int *peers, const uint32_t *ids, int it,
                     int ph, const char *label)
{
    int nreq = 2 * npeers * NSIZES;
    MPI_Request *req = mt_malloc(sizeof(*req) * (size_t) nreq);
    MPI_Status *st = mt_malloc(sizeof(*st) * (size_t) nreq);
    uint8_t **sbuf = mt_malloc(sizeof(*sbuf) * (size_t) (npeers * NSIZES));
    uint8_t **rbuf = mt_malloc(sizeof(*rbuf) * (size_t) (npeers * NSIZES));
    int k = 0;

    for (int p = 0; p < npeers; p++) {
        for (int s = 0; s < NSIZES; s++) {
            int b = p * NSIZES + s;
            sbuf[b] = mt_malloc(sizes[s] + 1);
            rbuf[b] = mt_malloc(sizes[s] + GUARD);
            mt_fill(sbuf[b], sizes[s], p2p_seed(my_id, ids[p], sizes[s], it, ph));
            memset(rbuf[b], MT_POISON, sizes[s] + GUARD);
        }
    }
    /* receives first (expected messages) in even iterations, sends first
     * (unexpected messages at the peer) in odd ones */
    for (int pass = 0; pass < 2; pass++) {
        int do_recv = (pass == (it & 1));
        for (int p = 0; p < npeers; p++) {
            for (int s = 0; s < NSIZES; s++) {
                int b = p * NSIZES + s;
                if (do_recv) {
                    MT_CHECK(MPI_Irecv(rbuf[b], (int) (sizes[s] + GUARD), MPI_BYTE, peers[p], s,
                                       comm, &req[2 * b]));
                } else {
                    MT_CHECK(MPI_Isend(sbuf[b], (int) sizes[s], MPI_BYTE, peers[p], s, comm,
                                       &req[2 * b + 1]));
                }
                k++;
            }
        }
    }
    if (k != nreq) {
        mt_die("internal error: %d requests posted, %d expected", k, nreq);
    }
    MT_CHECK(MPI_Waitall(nreq, req, st));

    for (int p = 0; p < npeers; p++) {
        for (int s = 0; s < NSIZES; s++) {
            int b = p * NSIZES + s;
            size_t n = sizes[s];
            MPI_Status *rs = &st[2 * b];
            int count = -1;
            char what[160];
            snprintf(what, sizeof(what), "%s: %zu bytes from %s %d (iteration %d)", label, n,
                     ids[p] == PARENT_ID ? "parent" : "child", peers[p], it);
            MT_CHECK(MPI_Get_count(rs, MPI_BYTE, &count));
            if (count < 0 || (size_t) count != n) {
                report("%s: received %d bytes", what, count);
            }
            if (rs->MPI_SOURCE != peers[p] || rs->MPI_TAG != s) {
                report("%s: status says source %d tag %d, expected source %d tag %d", what,
                       rs->MPI_SOURCE, rs->MPI_TAG, peers[p], s);
            }
            check_pattern(rbuf[b], n, p2p_seed(ids[p], my_id, n, it, ph), what);
            check_guard(rbuf[b] + n, what);
            recv_bytes += n;
            recv_msgs++;
            free(sbuf[b]);
            free(rbuf[b]);
        }
    }
    free(sbuf);
    free(rbuf);
    free(st);
    free(req);
}

/* ---- collectives over the merged communicator ------------------------------ */

#define BIG_COUNT (1 << 18) /* 1 MiB of int */
#define BCAST_BYTES 300000

static int contrib(uint32_t id, int i, int it)
{
    return (int) (mt_hash(mt_seed(id, (uint32_t) it, PH_ALLREDUCE, 0), (uint64_t) i) & 0xFFFF);
}

static void collectives(MPI_Comm merged, const uint32_t *all_ids, int it)
{
    int mrank, msize;
    MT_CHECK(MPI_Comm_rank(merged, &mrank));
    MT_CHECK(MPI_Comm_size(merged, &msize));

    /* small allreduce: SUM and MAX of one value per process */
    long long v[2] = {(long long) my_id * (it + 1), (long long) mrank * 7 + it};
    long long sum = 0, max = 0, want_sum = 0;
    MT_CHECK(MPI_Allreduce(&v[0], &sum, 1, MPI_LONG_LONG, MPI_SUM, merged));
    MT_CHECK(MPI_Allreduce(&v[1], &max, 1, MPI_LONG_LONG, MPI_MAX, merged));
    for (int r = 0; r < msize; r++) {
        want_sum += (long long) all_ids[r] * (it + 1);
    }
    if (sum != want_sum) {
        report("allreduce SUM (iteration %d): %lld, expected %lld", it, sum, want_sum);
    }
    if (max != (long long) (msize - 1) * 7 + it) {
        report("allreduce MAX (iteration %d): %lld, expected %lld", it, max,
               (long long) (msize - 1) * 7 + it);
    }

    /* large allreduce: every process can compute every contribution */
    int *in = mt_malloc(sizeof(int) * BIG_COUNT);
    int *out = mt_malloc(sizeof(int) * BIG_COUNT);
    for (int i = 0; i < BIG_COUNT; i++) {
        in[i] = contrib(my_id, i, it);
        out[i] = -1;
    }
    MT_CHECK(MPI_Allreduce(in, out, BIG_COUNT, MPI_INT, MPI_SUM, merged));
    for (int i = 0; i < BIG_COUNT; i++) {
        int want = 0;
        for (int r = 0; r < msize; r++) {
            want += contrib(all_ids[r], i, it);
        }
        if (out[i] != want) {
            report("allreduce SUM of %d ints (iteration %d): element %d is %d, expected %d",
                   BIG_COUNT, it, i, out[i], want);
            break;
        }
    }
    free(in);
    free(out);

    /* bcast from every root */
    uint8_t *buf = mt_malloc(BCAST_BYTES + GUARD);
    for (int root = 0; root < msize; root++) {
        uint32_t seed = mt_seed(all_ids[root], (uint32_t) it, BCAST_BYTES, PH_BCAST);
        char what[96];
        memset(buf, MT_POISON, BCAST_BYTES + GUARD);
        if (mrank == root) {
            mt_fill(buf, BCAST_BYTES, seed);
        }
        MT_CHECK(MPI_Bcast(buf, BCAST_BYTES, MPI_BYTE, root, merged));
        snprintf(what, sizeof(what), "bcast of %d bytes from merged rank %d (iteration %d)",
                 BCAST_BYTES, root, it);
        check_pattern(buf, BCAST_BYTES, seed, what);
        check_guard(buf + BCAST_BYTES, what);
    }
    free(buf);
}

/* ---- main -------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    int iters = 3, opt;
    MPI_Comm parent, inter, merged;
    int wrank, wsize;

    while ((opt = getopt(argc, argv, "i:t:")) != -1) {
        switch (opt) {
        case 'i':
            iters = atoi(optarg);
            break;
        case 't':
            watchdog_secs = atoi(optarg);
            break;
        default:
            fprintf(stderr, "usage: spawn [-i iterations] [-t watchdog_seconds]\n");
            return 2;
        }
    }
    if (iters < 1) {
        fprintf(stderr, "spawn: iterations must be >= 1\n");
        return 2;
    }
    watchdog_start();

    MPI_Init(&argc, &argv);
    MPI_Comm_get_parent(&parent);
    int is_child = (parent != MPI_COMM_NULL);
    mt_setup(is_child ? "spawn (child)" : "spawn (parent)");
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    MT_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &wrank));
    MT_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &wsize));
    if (is_child) {
        snprintf(who, sizeof(who), "child %d", wrank);
        my_id = CHILD_ID(wrank);
    } else {
        snprintf(who, sizeof(who), "parent");
        my_id = PARENT_ID;
    }

    if (watchdog_secs > 0) {
        watchdog_message();
    }
    set_phase("startup after MPI_Init");

    if (!is_child) {
        if (wsize != 1) {
            mt_die("run the parent as a single process (mpirun -np 1), not %d", wsize);
        }
        char iarg[16], targ[16];
        snprintf(iarg, sizeof(iarg), "%d", iters);
        snprintf(targ, sizeof(targ), "%d", watchdog_secs);
        char *child_argv[] = {"-i", iarg, "-t", targ, NULL};
        int errcodes[NCHILD];
        set_phase("MPI_Comm_spawn");
        MT_CHECK(MPI_Comm_spawn(argv[0], child_argv, NCHILD, MPI_INFO_NULL, 0, MPI_COMM_SELF,
                                &inter, errcodes));
        for (int c = 0; c < NCHILD; c++) {
            if (errcodes[c] != MPI_SUCCESS) {
                mt_die("MPI_Comm_spawn: child %d error code %d", c, errcodes[c]);
            }
        }
    } else {
        inter = parent;
        if (wsize != NCHILD) {
            report("children's MPI_COMM_WORLD has %d processes, expected %d", wsize, NCHILD);
        }
    }
    MT_CHECK(MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN));

    int is_inter = 0, lsize = -1, rsize = -1;
    MT_CHECK(MPI_Comm_test_inter(inter, &is_inter));
    MT_CHECK(MPI_Comm_size(inter, &lsize));
    MT_CHECK(MPI_Comm_remote_size(inter, &rsize));
    if (!is_inter || lsize != (is_child ? NCHILD : 1) || rsize != (is_child ? 1 : NCHILD)) {
        mt_die("intercommunicator: inter=%d local size %d remote size %d", is_inter, lsize, rsize);
    }

    /* point-to-point between the jobs, and between the children */
    for (int it = 0; it < iters; it++) {
        if (is_child) {
            int pp[1] = {0};
            uint32_t pid[1] = {PARENT_ID};
            int cp[1] = {1 - wrank};
            uint32_t cid[1] = {CHILD_ID(1 - wrank)};
            set_phase("point-to-point with the parent (intercommunicator)");
            exchange(inter, 1, pp, pid, it, PH_P2P_INTER, "intercommunicator");
            set_phase("point-to-point with the other child (children's MPI_COMM_WORLD)");
            exchange(MPI_COMM_WORLD, 1, cp, cid, it, PH_P2P_WORLD, "children's MPI_COMM_WORLD");
        } else {
            int cp[NCHILD];
            uint32_t cid[NCHILD];
            for (int c = 0; c < NCHILD; c++) {
                cp[c] = c;
                cid[c] = CHILD_ID(c);
            }
            set_phase("point-to-point with the children (intercommunicator)");
            exchange(inter, NCHILD, cp, cid, it, PH_P2P_INTER, "intercommunicator");
        }
    }

    /* merged communicator: parent first (high = 0), then the children */
    set_phase("MPI_Intercomm_merge");
    MT_CHECK(MPI_Intercomm_merge(inter, is_child, &merged));
    MT_CHECK(MPI_Comm_set_errhandler(merged, MPI_ERRORS_RETURN));
    int mrank = -1, msize = -1;
    MT_CHECK(MPI_Comm_rank(merged, &mrank));
    MT_CHECK(MPI_Comm_size(merged, &msize));
    int want_mrank = is_child ? 1 + wrank : 0;
    if (msize != 1 + NCHILD || mrank != want_mrank) {
        mt_die("merged communicator: rank %d of %d, expected rank %d of %d", mrank, msize,
               want_mrank, 1 + NCHILD);
    }
    uint32_t all_ids[1 + NCHILD], want_ids[1 + NCHILD] = {PARENT_ID};
    for (int c = 0; c < NCHILD; c++) {
        want_ids[1 + c] = CHILD_ID(c);
    }
    set_phase("collectives over the merged communicator");
    MT_CHECK(MPI_Allgather(&my_id, 1, MPI_UINT32_T, all_ids, 1, MPI_UINT32_T, merged));
    for (int r = 0; r < msize; r++) {
        if (all_ids[r] != want_ids[r]) {
            report("allgather: merged rank %d has id %u, expected %u", r, (unsigned) all_ids[r],
                   (unsigned) want_ids[r]);
        }
    }
    for (int it = 0; it < iters; it++) {
        collectives(merged, want_ids, it);
    }

    /* verdicts: each process its own, the parent the job's */
    const char *btl = getenv("OMPI_MCA_btl");
    printf("spawn: %s pid=%d merged_rank=%d btl=%s verdict %s: received %llu bytes in %llu "
           "messages, %llu mismatches\n",
           who, (int) getpid(), mrank, btl ? btl : "(unset)", errors ? "FAILED" : "OK", recv_bytes,
           recv_msgs, errors);
    fflush(stdout);
    set_phase("gathering the verdicts");
    unsigned long long mine[2] = {recv_bytes, errors}, total[2] = {0, 0};
    MT_CHECK(MPI_Reduce(mine, total, 2, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0, merged));
    if (!is_child) {
        printf("spawn: %d processes (parent + %d children), %d iterations, sizes 0 .. %zu: "
               "%llu bytes received, %llu mismatches\n",
               msize, NCHILD, iters, sizes[NSIZES - 1], total[0], total[1]);
        if (total[1] == 0) {
            printf("BYTES %llu\n", total[0]);
            printf("OK spawn\n");
        } else {
            printf("FAILED spawn: %llu mismatches (see the ERROR lines)\n", total[1]);
        }
        fflush(stdout);
    }

    set_phase("MPI_Comm_disconnect");
    MT_CHECK(MPI_Comm_free(&merged));
    MT_CHECK(MPI_Comm_disconnect(&inter));
    set_phase("MPI_Finalize");
    MPI_Finalize();
    return (is_child ? errors : total[1]) ? 1 : 0;
}
