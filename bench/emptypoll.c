/*
 * emptypoll - what one look at an empty UDP socket costs, per call: the
 * price of every progress-loop iteration of a rank that waits for a
 * message (the kernel backend asks its priority socket with recvmmsg on
 * every iteration and its data socket on every fourth while it is idle).
 *
 *   bench/build/emptypoll [-n calls] [-r rounds]
 *
 * Two non-blocking sockets bound to 127.0.0.1 that never receive anything;
 * for each way of asking (recvmmsg of 64 and of 1 message as the backend
 * sets them up, recvmsg, recv, recv with MSG_PEEK, poll of one and of both
 * sockets), -n calls timed with CLOCK_MONOTONIC, -r rounds interleaved;
 * prints the median and the range of nanoseconds per call.  Pin it
 * (taskset -c 1) for steadier numbers.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define EP_BATCH 64
#define EP_BUF 2048
#define EP_MAX_ROUNDS 99

enum ep_way {
    EP_MMSG64,
    EP_MMSG1,
    EP_MSG,
    EP_RECV,
    EP_PEEK,
    EP_POLL1,
    EP_POLL2,
    EP_NWAYS
};
static const char *const way_name[EP_NWAYS] = {
    "recvmmsg, 64 entries", "recvmmsg, 1 entry", "recvmsg",        "recv",
    "recv MSG_PEEK",        "poll, 1 socket",    "poll, 2 sockets"};

static char bufs[EP_BATCH][EP_BUF];
static struct mmsghdr msgs[EP_BATCH];
static struct iovec iovs[EP_BATCH];
static struct sockaddr_in froms[EP_BATCH];

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double) t.tv_sec + (double) t.tv_nsec * 1e-9;
}

static int udp_socket(void)
{
    struct sockaddr_in a;
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);

    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || 0 != bind(fd, (struct sockaddr *) &a, sizeof(a))) {
        perror("emptypoll: socket");
        exit(1);
    }
    return fd;
}

/* One empty look; returns 0 when the kernel said "nothing" as expected. */
static int look(enum ep_way w, int fd, struct pollfd *p)
{
    ssize_t n;

    switch (w) {
    case EP_MMSG64:
        n = recvmmsg(fd, msgs, EP_BATCH, MSG_DONTWAIT, NULL);
        break;
    case EP_MMSG1:
        n = recvmmsg(fd, msgs, 1, MSG_DONTWAIT, NULL);
        break;
    case EP_MSG:
        n = recvmsg(fd, &msgs[0].msg_hdr, MSG_DONTWAIT);
        break;
    case EP_RECV:
        n = recv(fd, bufs[0], EP_BUF, MSG_DONTWAIT);
        break;
    case EP_PEEK:
        n = recv(fd, bufs[0], EP_BUF, MSG_DONTWAIT | MSG_PEEK);
        break;
    case EP_POLL1:
        return poll(p, 1, 0);
    default:
        return poll(p, 2, 0);
    }
    return (n < 0 && EAGAIN == errno) ? 0 : 1;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    long calls = 1000000;
    int rounds = 5, ch, fd = udp_socket(), fd2 = udp_socket();
    struct pollfd p[2] = {{.fd = fd, .events = POLLIN}, {.fd = fd2, .events = POLLIN}};
    static double ns[EP_NWAYS][EP_MAX_ROUNDS];

    while ((ch = getopt(argc, argv, "n:r:h")) != -1) {
        switch (ch) {
        case 'n':
            calls = atol(optarg);
            break;
        case 'r':
            rounds = atoi(optarg);
            break;
        default:
            fprintf(stderr, "usage: %s [-n calls] [-r rounds (1..%d)]\n", argv[0], EP_MAX_ROUNDS);
            return 'h' == ch ? 0 : 2;
        }
    }
    if (calls < 1 || rounds < 1 || rounds > EP_MAX_ROUNDS) {
        fprintf(stderr, "emptypoll: -n must be positive, -r within 1..%d\n", EP_MAX_ROUNDS);
        return 2;
    }
    for (int i = 0; i < EP_BATCH; i++) {
        iovs[i].iov_base = bufs[i];
        iovs[i].iov_len = EP_BUF;
        msgs[i].msg_hdr.msg_iov = &iovs[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
        msgs[i].msg_hdr.msg_name = &froms[i];
        msgs[i].msg_hdr.msg_namelen = sizeof(froms[i]);
    }
    for (int r = 0; r < rounds; r++) {
        for (int w = 0; w < EP_NWAYS; w++) {
            long odd = 0;
            double t = now_s();
            for (long i = 0; i < calls; i++) {
                odd += look((enum ep_way) w, fd, p);
            }
            ns[w][r] = (now_s() - t) / (double) calls * 1e9;
            if (0 != odd) {
                fprintf(stderr, "emptypoll: %s found something %ld times\n", way_name[w], odd);
                return 1;
            }
        }
    }
    printf("# emptypoll: %ld calls per way and round, %d rounds; ns per call\n", calls, rounds);
    for (int w = 0; w < EP_NWAYS; w++) {
        qsort(ns[w], (size_t) rounds, sizeof(double), cmp_double);
        printf("%-22s %6.0f  [%.0f-%.0f]\n", way_name[w], ns[w][rounds / 2], ns[w][0],
               ns[w][rounds - 1]);
    }
    close(fd);
    close(fd2);
    return 0;
}
