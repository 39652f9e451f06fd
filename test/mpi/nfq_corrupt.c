/*
 * nfq_corrupt: a faulty link for the network-namespace test bed.
 *
 * Takes the packets an nft rule queues to NFQUEUE queue -q (IPv4 UDP to the
 * job's ports, on a host's ingress), and in a fraction -r of the UDP
 * datagrams flips one random bit of the UDP payload (the usnic datagram),
 * chosen uniformly among all its bits.  The UDP checksum of a datagram it
 * changed is set to 0, "no checksum" in IPv4, so the kernel delivers the
 * corrupted datagram the way a NIC that corrupts data after its own
 * checksum check would.  Every packet is accepted, changed or not: this
 * program never drops anything.
 *
 * Traffic never stops because of it: the nft rule should use the queue's
 * "bypass" flag (packets pass while nothing listens on the queue), and the
 * queue is opened "fail open" (packets pass when the queue or this
 * program's socket is full).
 *
 * Counters (key=value, one line): seen (packets queued to us), udp (of
 * those, unfragmented IPv4 UDP with a payload: the candidates), corrupted
 * (bits flipped, one per corrupted datagram), hdr_corrupted (of those, the
 * flip was in the first -H bytes of the payload), plus the seed.  Written to
 * the file -o after set-up (its appearance means "ready"), every -i
 * milliseconds and at the end (atomically: a temporary file is renamed),
 * and printed to stdout on SIGTERM or SIGINT, which end the program.
 * With -l, every flip is also logged to FILE, one line each: its number,
 * the UDP payload's length, the byte and bit flipped, and the payload's
 * first two bytes in hex (for usnic: version and packet type).
 *
 * Usage: nfq_corrupt -r RATE [-q QUEUE] [-s SEED] [-o FILE] [-l FILE] [-H BYTES] [-i MS]
 * Runs as root, in the namespace whose packets it is to see (ip netns exec).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <libnetfilter_queue/libnetfilter_queue.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink_queue.h>

#ifndef SOL_NETLINK
#define SOL_NETLINK 270
#endif
#ifndef NETLINK_NO_ENOBUFS
#define NETLINK_NO_ENOBUFS 5
#endif

struct counts {
    unsigned long long seen;
    unsigned long long udp;
    unsigned long long corrupted;
    unsigned long long hdr_corrupted;
    unsigned long long verdict_errors;
    unsigned long long recv_errors;
};

static struct counts cnt;
static uint64_t rng_state;
static uint64_t seed;
static double rate;
static unsigned long hdr_bytes;
static const char *count_file;
static FILE *flip_log;
static volatile sig_atomic_t stop_sig;

/* splitmix64: small, seedable, good enough to pick packets and bits */
static uint64_t rng_next(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* uniform in [0, 1) */
static double rng_unit(void)
{
    return (double) (rng_next() >> 11) * (1.0 / 9007199254740992.0);
}

static void format_counts(char *buf, size_t len)
{
    snprintf(buf, len,
             "seen=%llu udp=%llu corrupted=%llu hdr_corrupted=%llu hdr_bytes=%lu "
             "verdict_errors=%llu recv_errors=%llu seed=%" PRIu64 "\n",
             cnt.seen, cnt.udp, cnt.corrupted, cnt.hdr_corrupted, hdr_bytes, cnt.verdict_errors,
             cnt.recv_errors, seed);
}

/* Replace the counts file (write a temporary file, then rename it). */
static void write_counts(void)
{
    char tmp[PATH_MAX], line[512];
    FILE *f;

    if (NULL == count_file) {
        return;
    }
    if (snprintf(tmp, sizeof(tmp), "%s.tmp", count_file) >= (int) sizeof(tmp)) {
        return;
    }
    f = fopen(tmp, "w");
    if (NULL == f) {
        return;
    }
    format_counts(line, sizeof(line));
    fputs(line, f);
    if (0 != fclose(f) || 0 != rename(tmp, count_file)) {
        fprintf(stderr, "nfq_corrupt: cannot write %s: %s\n", count_file, strerror(errno));
    }
}

/* Maybe flip one bit of the UDP payload of an IPv4 packet; true if changed. */
static int maybe_corrupt(unsigned char *p, size_t len)
{
    size_t ihl, udp_len, payload_len, bit;
    unsigned char *payload, head0, head1;

    if (len < 20 || 4 != (p[0] >> 4) || 17 != p[9]) {
        return 0;
    }
    ihl = (size_t) (p[0] & 15u) * 4;
    /* only whole datagrams: no fragment offset, no "more fragments" */
    if (ihl < 20 || len < ihl + 8 || 0 != (((unsigned) p[6] << 8 | p[7]) & 0x3fffu)) {
        return 0;
    }
    udp_len = (size_t) p[ihl + 4] << 8 | p[ihl + 5];
    if (udp_len > len - ihl) {
        udp_len = len - ihl;
    }
    if (udp_len <= 8) {
        return 0;
    }
    payload = p + ihl + 8;
    payload_len = udp_len - 8;
    cnt.udp++;
    if (rng_unit() >= rate) {
        return 0;
    }
    bit = (size_t) (rng_next() % ((uint64_t) payload_len * 8));
    head0 = payload[0];
    head1 = payload_len > 1 ? payload[1] : 0;
    payload[bit / 8] ^= (unsigned char) (1u << (bit % 8));
    /* UDP checksum 0: none (IPv4), so the kernel does not check it */
    p[ihl + 6] = 0;
    p[ihl + 7] = 0;
    cnt.corrupted++;
    if (bit / 8 < hdr_bytes) {
        cnt.hdr_corrupted++;
    }
    if (NULL != flip_log) {
        fprintf(flip_log, "flip=%llu len=%zu byte=%zu bit=%zu head=%02x%02x\n", cnt.corrupted,
                payload_len, bit / 8, bit % 8, head0, head1);
    }
    return 1;
}

static int on_packet(struct nfq_q_handle *qh, struct nfgenmsg *msg, struct nfq_data *nfa,
                     void *data)
{
    struct nfqnl_msg_packet_hdr *ph = nfq_get_msg_packet_hdr(nfa);
    unsigned char *pkt = NULL;
    int len;
    uint32_t id;
    (void) msg;
    (void) data;

    if (NULL == ph) {
        return 0;
    }
    id = ntohl(ph->packet_id);
    cnt.seen++;
    len = nfq_get_payload(nfa, &pkt);
    if (len > 0 && NULL != pkt && maybe_corrupt(pkt, (size_t) len)) {
        if (nfq_set_verdict(qh, id, NF_ACCEPT, (uint32_t) len, pkt) < 0) {
            cnt.verdict_errors++;
        }
    } else if (nfq_set_verdict(qh, id, NF_ACCEPT, 0, NULL) < 0) {
        cnt.verdict_errors++;
    }
    return 0;
}

static void on_signal(int sig)
{
    stop_sig = sig;
}

static void usage(void)
{
    fprintf(stderr, "usage: nfq_corrupt -r RATE [-q QUEUE] [-s SEED] [-o FILE] [-l FILE] "
                    "[-H BYTES] [-i MS]\n");
    exit(2);
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000u + (uint64_t) ts.tv_nsec / 1000000u;
}

int main(int argc, char **argv)
{
    static char buf[256 * 1024] __attribute__((aligned));
    struct nfq_handle *h;
    struct nfq_q_handle *qh;
    struct sigaction sa;
    unsigned long queue = 0, interval = 500;
    int opt, fd, one = 1, bufsize = 8 << 20, have_rate = 0, have_seed = 0;
    char *end, line[512];
    uint64_t next_write;

    while (-1 != (opt = getopt(argc, argv, "r:q:s:o:l:H:i:"))) {
        errno = 0;
        end = NULL;
        switch (opt) {
        case 'r':
            rate = strtod(optarg, &end);
            have_rate = 1;
            if (!(rate >= 0.0 && rate <= 1.0)) {
                usage();
            }
            break;
        case 'q':
            queue = strtoul(optarg, &end, 0);
            if (queue > 65535) {
                usage();
            }
            break;
        case 's':
            seed = strtoull(optarg, &end, 0);
            have_seed = 1;
            break;
        case 'o':
            count_file = optarg;
            break;
        case 'l':
            flip_log = fopen(optarg, "a");
            if (NULL == flip_log) {
                fprintf(stderr, "nfq_corrupt: cannot open %s: %s\n", optarg, strerror(errno));
                return 1;
            }
            break;
        case 'H':
            hdr_bytes = strtoul(optarg, &end, 0);
            break;
        case 'i':
            interval = strtoul(optarg, &end, 0);
            if (0 == interval) {
                usage();
            }
            break;
        default:
            usage();
        }
        if (NULL != end && ('\0' != *end || end == optarg || 0 != errno)) {
            usage();
        }
    }
    if (!have_rate || optind != argc) {
        usage();
    }
    if (!have_seed) {
        seed = (uint64_t) time(NULL) ^ ((uint64_t) getpid() << 32);
    }
    rng_state = seed;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal; /* no SA_RESTART: poll() returns at once */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    h = nfq_open();
    if (NULL == h) {
        fprintf(stderr, "nfq_corrupt: nfq_open: %s\n", strerror(errno));
        return 1;
    }
    /* old kernels want the protocol family bound; new ones ignore it */
    (void) nfq_unbind_pf(h, AF_INET);
    (void) nfq_bind_pf(h, AF_INET);
    qh = nfq_create_queue(h, (uint16_t) queue, on_packet, NULL);
    if (NULL == qh) {
        fprintf(stderr, "nfq_corrupt: cannot bind queue %lu: %s\n", queue, strerror(errno));
        nfq_close(h);
        return 1;
    }
    if (nfq_set_mode(qh, NFQNL_COPY_PACKET, 0xffff) < 0) {
        fprintf(stderr, "nfq_corrupt: cannot ask for whole packets: %s\n", strerror(errno));
        nfq_destroy_queue(qh);
        nfq_close(h);
        return 1;
    }
    /* never hold traffic up: accept what does not fit in the queue */
    if (nfq_set_queue_flags(qh, NFQA_CFG_F_FAIL_OPEN, NFQA_CFG_F_FAIL_OPEN) < 0) {
        fprintf(stderr, "nfq_corrupt: warning: no fail-open flag: %s\n", strerror(errno));
    }
    (void) nfq_set_queue_maxlen(qh, 8192);
    fd = nfq_fd(h);
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bufsize, sizeof(bufsize)) < 0) {
        (void) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bufsize, sizeof(bufsize));
    }
    (void) setsockopt(fd, SOL_NETLINK, NETLINK_NO_ENOBUFS, &one, sizeof(one));

    printf("nfq_corrupt: queue %lu, corrupting %g of the UDP datagrams, seed %" PRIu64 "\n", queue,
           rate, seed);
    fflush(stdout);
    write_counts(); /* the file's appearance says we are ready */
    next_write = now_ms() + interval;

    while (!stop_sig) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int n = poll(&pfd, 1, (int) (interval < 200 ? interval : 200));

        if (n > 0) {
            /* everything that is waiting, without blocking */
            for (;;) {
                ssize_t got = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
                if (got > 0) {
                    nfq_handle_packet(h, buf, (int) got);
                    continue;
                }
                if (got < 0 && EINTR == errno) {
                    continue;
                }
                if (got < 0 && EAGAIN != errno && EWOULDBLOCK != errno) {
                    cnt.recv_errors++; /* e.g. ENOBUFS: fail-open let those pass */
                }
                break;
            }
        } else if (n < 0 && EINTR != errno) {
            fprintf(stderr, "nfq_corrupt: poll: %s\n", strerror(errno));
            break;
        }
        if (now_ms() >= next_write) {
            if (NULL != flip_log) {
                fflush(flip_log);
            }
            write_counts();
            next_write = now_ms() + interval;
        }
    }
    if (NULL != flip_log) {
        fclose(flip_log);
    }
    write_counts();
    format_counts(line, sizeof(line));
    printf("nfq_corrupt: %s%s", stop_sig ? "stopped: " : "error: ", line);
    fflush(stdout);
    nfq_destroy_queue(qh);
    nfq_close(h);
    return stop_sig ? 0 : 1;
}
