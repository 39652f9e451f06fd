/*
 * mmsg_stream: what sending several datagrams per system call is worth,
 * without the BTL (docs/perf-kernel-backend.md, session 27).
 *
 * A child process receives on a UDP socket bound to 127.0.0.1 (recvmmsg,
 * blocking with MSG_WAITFORONE, or with -p busy-polling with MSG_DONTWAIT,
 * as the BTL's progress engine does); the parent streams datagrams of -d
 * bytes to it from a connected socket for -t seconds, 1 MiB at a time out
 * of a 1 MiB buffer (as the BTL sends a message's datagrams from the
 * user's memory), -b datagrams per system call: sendmsg each with -b 1,
 * sendmmsg otherwise.  The receiver reports the bytes it got per second
 * (the sender's rate when the sender is the slower side; the kernel drops
 * what the receiver's buffer cannot hold).
 *
 * usage: mmsg_stream [-b BATCH] [-d BYTES] [-t SECONDS] [-p]
 * Output: one line, "batch B dgram D MB/s R".
 * Loopback only.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MSG_BYTES (1 << 20)
#define MAX_BATCH 64
#define SOCKBUF (8 << 20)

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double) t.tv_sec + (double) t.tv_nsec * 1e-9;
}

/* Count what arrives until a 1-byte datagram says the stream ended. */
static void receive(int fd, size_t dgram, int poll, int batch)
{
    static struct mmsghdr mm[MAX_BATCH];
    static struct iovec iov[MAX_BATCH];
    char *bufs = malloc(dgram * MAX_BATCH);
    double first = 0;
    long long bytes = 0;

    if (NULL == bufs) {
        _exit(1);
    }
    for (;;) {
        int n;
        for (int i = 0; i < MAX_BATCH; i++) {
            iov[i].iov_base = bufs + (size_t) i * dgram;
            iov[i].iov_len = dgram;
            memset(&mm[i], 0, sizeof(mm[i]));
            mm[i].msg_hdr.msg_iov = &iov[i];
            mm[i].msg_hdr.msg_iovlen = 1;
        }
        n = recvmmsg(fd, mm, MAX_BATCH, poll ? MSG_DONTWAIT : MSG_WAITFORONE, NULL);
        for (int i = 0; i < n; i++) {
            if (1 == mm[i].msg_len) {
                printf("batch %d dgram %zu MB/s %.0f\n", batch, dgram,
                       first > 0 ? (double) bytes / (now_s() - first) / 1e6 : 0.0);
                fflush(stdout);
                _exit(0);
            }
            if (0 == bytes) {
                first = now_s();
            }
            bytes += mm[i].msg_len;
        }
    }
}

int main(int argc, char **argv)
{
    static char src[MSG_BYTES];
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof(addr);
    struct mmsghdr mm[MAX_BATCH];
    struct iovec iov[MAX_BATCH];
    int batch = 4, poll = 0, opt, rfd, sfd, status, buf = SOCKBUF;
    size_t dgram = 65000, per;
    double secs = 2, start;
    pid_t child;

    while ((opt = getopt(argc, argv, "b:d:t:p")) != -1) {
        switch (opt) {
        case 'b':
            batch = atoi(optarg);
            break;
        case 'd':
            dgram = (size_t) strtoul(optarg, NULL, 10);
            break;
        case 't':
            secs = atof(optarg);
            break;
        case 'p':
            poll = 1;
            break;
        default:
            fprintf(stderr, "usage: mmsg_stream [-b BATCH] [-d BYTES] [-t SECONDS] [-p]\n");
            return 2;
        }
    }
    if (batch < 1 || batch > MAX_BATCH || dgram < 2 || dgram > 65507 || secs <= 0) {
        fprintf(stderr, "mmsg_stream: -b 1..%d, -d 2..65507, -t > 0\n", MAX_BATCH);
        return 2;
    }
    rfd = socket(AF_INET, SOCK_DGRAM, 0);
    (void) setsockopt(rfd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf));
    if (rfd < 0 || 0 != bind(rfd, (struct sockaddr *) &addr, sizeof(addr)) ||
        0 != getsockname(rfd, (struct sockaddr *) &addr, &alen)) {
        perror("mmsg_stream: receiving socket");
        return 1;
    }
    child = fork();
    if (child < 0) {
        perror("mmsg_stream: fork");
        return 1;
    }
    if (0 == child) {
        receive(rfd, dgram, poll, batch);
    }
    sfd = socket(AF_INET, SOCK_DGRAM, 0);
    (void) setsockopt(sfd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof(buf));
    if (sfd < 0 || 0 != connect(sfd, (struct sockaddr *) &addr, sizeof(addr))) {
        perror("mmsg_stream: sending socket");
        return 1;
    }
    memset(src, 0x5a, sizeof(src));
    per = MSG_BYTES / dgram; /* datagrams per 1 MiB "message" */
    start = now_s();
    while (now_s() - start < secs) {
        for (size_t i = 0; i < per;) {
            int k = 0, sent;
            for (; k < batch && i + (size_t) k < per; k++) {
                iov[k].iov_base = src + (i + (size_t) k) * dgram;
                iov[k].iov_len = dgram;
                memset(&mm[k], 0, sizeof(mm[k]));
                mm[k].msg_hdr.msg_iov = &iov[k];
                mm[k].msg_hdr.msg_iovlen = 1;
            }
            if (1 == batch) {
                sent = sendmsg(sfd, &mm[0].msg_hdr, 0) >= 0 ? 1 : 0;
            } else {
                sent = sendmmsg(sfd, mm, (unsigned) k, 0);
            }
            i += sent > 0 ? (size_t) sent : 0;
        }
    }
    usleep(100000); /* let the receiver drain, then tell it to stop */
    for (int i = 0; i < 100 && 0 == waitpid(child, &status, WNOHANG); i++) {
        (void) send(sfd, "x", 1, 0);
        usleep(10000);
    }
    waitpid(child, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
