/*
 * uring_pp - could io_uring let a waiting rank notice a datagram without a
 * system call?  A UDP ping-pong between two processes on 127.0.0.1, each
 * pinned to its own CPU, that waits for each datagram in one of four ways:
 *
 *   plain  recv(MSG_DONTWAIT) in a loop: what the kernel backend's
 *          progress loop does (one system call per look)
 *   uring  a multishot receive (IORING_OP_RECV, IORING_RECV_MULTISHOT)
 *          into a ring of provided buffers, and a loop over the completion
 *          queue in shared memory: no system call per look
 *   coop   the same with IORING_SETUP_COOP_TASKRUN | TASKRUN_FLAG: the
 *          loop enters the kernel (io_uring_get_events) only when the
 *          kernel flags work waiting for it
 *   defer  IORING_SETUP_SINGLE_ISSUER | DEFER_TASKRUN: io_uring_get_events
 *          on every look (the completion is only made then)
 *
 * Sends are plain send() on a connected socket in every mode.  Prints the
 * half round trip and the empty looks per round trip.
 *
 *   bench/build/uring_pp [-m plain|uring|coop|defer] [-n iterations] [-s bytes]
 *
 * Session 25 (docs/perf-kernel-backend.md), 8 bytes, five runs of each:
 * plain 4.1-5.1 us, uring 55-62 us, coop 6.1-6.9 us, defer 5.6-6.2 us.
 * The datagram reaches the socket during the sender's send, but the
 * multishot receive completes only in task work that runs when the
 * receiver next enters the kernel, so a loop that never enters it waits
 * for the next interrupt (uring), and one that enters it to let the work
 * run pays the system call it meant to save, and more (coop, defer).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <liburing.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define UP_NBUF 64  /* provided buffers */
#define UP_BUF 2048 /* bytes each */
#define UP_WARMUP 1000

enum up_mode {
    UP_PLAIN,
    UP_URING,
    UP_COOP,
    UP_DEFER
};

struct up_rx {
    int fd;
    struct io_uring ring;
    struct io_uring_buf_ring *br;
    uint8_t *bufs;
};

static enum up_mode mode = UP_PLAIN;
static long empty_looks;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

static void die(const char *what, int err)
{
    fprintf(stderr, "uring_pp: %s: %s\n", what, strerror(err));
    exit(1);
}

static int connected_socket(uint16_t port, uint16_t peer)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_DGRAM, 0);

    a.sin_port = htons(port);
    if (fd < 0 || 0 != bind(fd, (struct sockaddr *) &a, sizeof(a))) {
        die("bind", errno);
    }
    a.sin_port = htons(peer);
    if (0 != connect(fd, (struct sockaddr *) &a, sizeof(a))) {
        die("connect", errno);
    }
    return fd;
}

static void arm(struct up_rx *r)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);

    io_uring_prep_recv_multishot(sqe, r->fd, NULL, 0, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = 1;
    io_uring_submit(&r->ring);
}

static void rx_setup(struct up_rx *r, int fd)
{
    struct io_uring_params p;
    struct io_uring_buf_reg reg;
    int rc;

    r->fd = fd;
    if (UP_PLAIN == mode) {
        return;
    }
    memset(&p, 0, sizeof(p));
    if (UP_COOP == mode) {
        p.flags = IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG;
    } else if (UP_DEFER == mode) {
        p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
    }
    rc = io_uring_queue_init_params(64, &r->ring, &p);
    if (rc < 0) {
        die("io_uring_queue_init_params", -rc);
    }
    r->br = mmap(NULL, UP_NBUF * sizeof(struct io_uring_buf), PROT_READ | PROT_WRITE,
                 MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
    r->bufs = malloc(UP_NBUF * UP_BUF);
    if (MAP_FAILED == r->br || NULL == r->bufs) {
        die("buffers", ENOMEM);
    }
    memset(&reg, 0, sizeof(reg));
    reg.ring_addr = (unsigned long) r->br;
    reg.ring_entries = UP_NBUF;
    reg.bgid = 1;
    rc = io_uring_register_buf_ring(&r->ring, &reg, 0);
    if (rc < 0) {
        die("io_uring_register_buf_ring", -rc);
    }
    io_uring_buf_ring_init(r->br);
    for (int i = 0; i < UP_NBUF; i++) {
        io_uring_buf_ring_add(r->br, r->bufs + i * UP_BUF, UP_BUF, (unsigned short) i,
                              io_uring_buf_ring_mask(UP_NBUF), i);
    }
    io_uring_buf_ring_advance(r->br, UP_NBUF);
    arm(r);
}

/* The next datagram into out; returns its length. */
static int rx_wait(struct up_rx *r, uint8_t *out)
{
    for (;;) {
        struct io_uring_cqe *cqe;

        if (UP_PLAIN == mode) {
            ssize_t n = recv(r->fd, out, UP_BUF, MSG_DONTWAIT);
            if (n >= 0) {
                return (int) n;
            }
            empty_looks++;
            continue;
        }
        if (UP_DEFER == mode ||
            (UP_COOP == mode && (IO_URING_READ_ONCE(*r->ring.sq.kflags) & IORING_SQ_TASKRUN))) {
            io_uring_get_events(&r->ring);
        }
        if (0 == io_uring_peek_cqe(&r->ring, &cqe)) {
            int res = cqe->res;
            unsigned flags = cqe->flags;
            unsigned bid = flags >> IORING_CQE_BUFFER_SHIFT;

            if (res < 0) {
                die("multishot receive", -res);
            }
            memcpy(out, r->bufs + bid * UP_BUF, (size_t) res);
            io_uring_buf_ring_add(r->br, r->bufs + bid * UP_BUF, UP_BUF, (unsigned short) bid,
                                  io_uring_buf_ring_mask(UP_NBUF), 0);
            io_uring_buf_ring_advance(r->br, 1);
            io_uring_cqe_seen(&r->ring, cqe);
            if (!(flags & IORING_CQE_F_MORE)) {
                arm(r); /* the kernel ended the multishot receive */
            }
            return res;
        }
        empty_looks++;
    }
}

static void pin(int cpu)
{
    cpu_set_t s;

    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    (void) sched_setaffinity(0, sizeof(s), &s);
}

int main(int argc, char **argv)
{
    static const char *names[] = {"plain", "uring", "coop", "defer"};
    static uint8_t buf[UP_BUF];
    long iters = 100000;
    int size = 8, opt;
    uint16_t base = (uint16_t) (40000 + getpid() % 10000);
    struct up_rx rx;
    pid_t pid;
    double t0 = 0;

    while ((opt = getopt(argc, argv, "m:n:s:")) != -1) {
        if ('m' == opt) {
            int i;
            for (i = 0; i < 4 && 0 != strcmp(optarg, names[i]); i++) {
            }
            if (4 == i) {
                die("-m", EINVAL);
            }
            mode = (enum up_mode) i;
        } else if ('n' == opt) {
            iters = atol(optarg);
        } else if ('s' == opt) {
            size = atoi(optarg);
        } else {
            fprintf(stderr, "usage: uring_pp [-m plain|uring|coop|defer] [-n iters] [-s bytes]\n");
            return 2;
        }
    }
    if (size < 1 || size > UP_BUF || iters < 1) {
        die("-s 1..2048, -n >= 1", EINVAL);
    }
    pid = fork();
    if (0 == pid) {
        pin(1);
        rx_setup(&rx, connected_socket((uint16_t) (base + 1), base));
        for (long i = 0; i < iters + UP_WARMUP; i++) {
            int n = rx_wait(&rx, buf);
            (void) send(rx.fd, buf, (size_t) n, 0);
        }
        _exit(0);
    }
    pin(0);
    rx_setup(&rx, connected_socket(base, (uint16_t) (base + 1)));
    usleep(100000); /* the echo side is ready */
    for (long i = 0; i < iters + UP_WARMUP; i++) {
        if (UP_WARMUP == i) {
            t0 = now_s();
            empty_looks = 0;
        }
        (void) send(rx.fd, buf, (size_t) size, 0);
        (void) rx_wait(&rx, buf);
    }
    printf("%s %d B: half round trip %.3f us, %.1f empty looks per round trip\n", names[mode], size,
           (now_s() - t0) / (double) iters / 2 * 1e6, (double) empty_looks / (double) iters);
    waitpid(pid, NULL, 0);
    return 0;
}
