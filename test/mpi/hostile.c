/*
 * hostile: the attacker of test/mpi/t_hostile.sh.  A plain C program (no
 * MPI), run as root on the host of a 2-rank usnic job, that throws
 * thousands of hostile datagrams per scenario at the four usnic ports of
 * the job (priority and data channel of rank 0 and rank 1).
 *
 *   hostile -p R0PRIO,R0DATA,R1PRIO,R1DATA [-S R0PRIO,R0DATA,R1PRIO,R1DATA]
 *           [-n N] [-r RATE] [-B BYTES]
 *           [-m PRIO_BUF] [-s SEED] [-a header|full] [-b] [SCENARIO,...|blind|all]
 *
 *   -p  the victim ports, rank 0 then rank 1, priority then data channel
 *   -S  the ports the ranks send from, in the same order (the kernel
 *       backend sends from ports of its own); default: the -p ports
 *   -n  datagrams per port per scenario (default 1000)
 *   -r  at most RATE datagrams per second in all (default 20000)
 *   -B  at most BYTES bytes of datagrams per second in all (default 60e6)
 *   -m  bytes a priority-channel receive buffer holds (default 568): longer
 *       datagrams to a priority port are truncated by the receiver
 *   -s  random seed (default: from getrandom; printed either way)
 *   -a  the job's btl_usnic_auth, header (default) or full: what the
 *       payload scenario predicts
 *   -b  blind: never read the job's traffic (no capture socket at all);
 *       only the blind scenarios may run
 *
 * Datagrams go out from the attacker's own UDP socket (127.0.0.1, a port
 * of its own) or, to spoof a source, from a raw socket (IPPROTO_RAW: the
 * IPv4 header is ours) with source 127.0.0.1 and the port the victim's
 * peer sends from on the same channel, so the address check passes.  Spoofed packets
 * carry TOS 0x28 so that the capture can tell them from the job's own.
 *
 * On-path knowledge (not with -b): an AF_PACKET socket on lo, filtered
 * (BPF) to UDP between the job's ports, reads the job's genuine datagrams:
 * each rank's sender key and src_module as its peer sees them, whether
 * the connection uses the CRC, the current sequence, ACK and msg_id
 * numbers, live PUT registration keys, chunk positions, and copies of
 * genuine packets of every type for replay.
 *
 * Blind scenarios (knowledge: the four ports and the job's size only):
 *   random      random bytes, random lengths 0..9000 (a quarter spoofed)
 *   trunc_self  self-made well-formed packets of every type truncated at
 *               every length
 *   fields      each header field out of range: version, type, flags,
 *               reserved, msg_id of an ACK, payload_len too big/small,
 *               chunk msg_len/offset beyond bounds and overflowing, a
 *               CHUNK longer than any fragment, PUT reg_offset overflowing
 *   wrongkey    well-formed packets under random keys (0, ~0 too), with
 *               src_module hints outside the job
 *   unknown     random keys with the hint naming vpid 0xFFFFFF, the
 *               victim itself, the other (real) rank, a module index the
 *               job does not have, the first vpid beyond the job
 *   foreign     a foreign 2-rank job's traffic (its own keys, hints of its
 *               vpids 0 and 1, consistent sequence numbers), from the
 *               attacker's port and from spoofed ports of no job process
 *   spoofblind  raw socket, source = the victim's peer's real port, random
 *               keys
 *   putguess    PUTs to guessed registration keys (generation << 32 |
 *               index as the old format used, small integers) under
 *               random sender keys, own and spoofed source
 *   tagblind    FRAGs with tag 255, 254, 0 and random tags, random keys
 *
 * On-path scenarios (forged packets are spoofed from the peer's port with
 * a real key, a random MAC and, when the connection uses it, a correct
 * CRC; a quarter go from the attacker's own port with the real key):
 *   trunc       captured genuine packets truncated at every length
 *   tag         FRAGs with tag 255 and other tags under the real key
 *   spoof       forged packets of every type; when the CRC is on, some
 *               with a wrong CRC; some spoofed from the peer's port of the
 *               other channel
 *   inwin       a captured data header with new payload, seq in the window
 *   outwin      the same with seq outside the window, +-2^31, random
 *   ack         forged ACKs (explicit and piggy-backed) with ack_seq around
 *               the real values, pings (ACK_REQ), ts_echo values
 *   sack        forged ACKs with random SACK bitmaps of 1 to 16 words, with
 *               and without SACK_MORE
 *   put         PUTs to live captured registration keys with new offsets,
 *               to guessed and to random keys
 *   chunk       CHUNKs overlapping a live genuine message's chunks (its
 *               msg_id, msg_len, offsets around the real ones)
 *   payload     genuine data packets with payload bytes changed, MAC kept,
 *               CRC fixed, from their real source: auth full refuses them
 *               (drop_AUTH), auth header takes them for copies
 *   replay      genuine packets (every type) replayed right after capture,
 *               spoofed from their real source, and from the own port; and
 *               the victim's own packets reflected back to it
 *   replay_xlane genuine packets of one channel replayed on the other
 *               channel (spoofed from the peer's port of that channel), in
 *               the order they were sent, right after capture
 *   replay_late genuine packets captured at the start, replayed at the end
 *
 * Output: a line per scenario with the datagrams sent to each port, then
 *   SENT <port> <n>                  datagrams sent to the port in all
 *   EXPECT <port> <REASON> <n>       of those, how many must be counted as
 *                                    REASON (SHORT VERSION TYPE LENGTH
 *                                    SENDER ADDRESS CHECKSUM AUTH
 *                                    CHUNK_RANGE PUT_RANGE: drop_REASON,
 *                                    SENDER meaning drop_SENDER + drop_PENDING
 *                                    - unparked; COPY: rx_copies + ack_copies;
 *                                    ANY: some drop, reason not predicted)
 * Exit status 0 if every scenario ran, 2 if an on-path scenario had
 * nothing to work with, 1 on errors.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ---- wire format (btl_usnic_proto.h, v3), by offset ------------------ */

#define O_VERSION 0
#define O_TYPE 1
#define O_FLAGS 2
#define O_TAG 3
#define O_PLEN 4
#define O_KEY 8
#define O_SRCMOD 16
#define O_SEQ 20
#define O_ACK 24
#define O_MSGID 28
#define O_TS 32
#define O_TSECHO 36
#define O_LANE 40
#define O_RESERVED 41 /* 1 reserved byte (then allow, any value) */
#define O_CRC 44
#define O_MAC 48
#define HDR 56
#define O_MSGLEN 56 /* chunk header */
#define O_OFFSET 64
#define O_REGKEY 72 /* put header */
#define O_REGOFF 80
#define HDR_CHUNK 72
#define HDR_PUT 88

#define VERSION 9 /* v9: liveness probes carry a MAC; v8: allow, beside the reserved byte */
#define T_ACK 1
#define T_FRAG 2
#define T_CHUNK 3
#define T_PUT 4
#define T_PART 5
#define F_ACK 0x01
#define F_ACKREQ 0x02
#define F_SACK 0x04
#define F_SACK_MORE 0x10 /* 0x08 is LINK_DOWN */
#define F_PAD 0x20       /* bytes after the payload, in neither MAC nor CRC */

#define TOS_MARK 0x28
#define MAXPKT 65536
#define NT 4     /* targets */
#define NSAMP 16 /* genuine packets kept per target and type */
#define MAXCRAFT 9000

enum reason {
    R_SHORT,
    R_VERSION,
    R_TYPE,
    R_LENGTH,
    R_SENDER,
    R_ADDRESS,
    R_CHECKSUM,
    R_AUTH,
    R_CHUNK_RANGE,
    R_PUT_RANGE,
    R_COPY,
    R_ANY,
    R__COUNT
};
static const char *const reason_name[R__COUNT] = {"SHORT",       "VERSION",   "TYPE",     "LENGTH",
                                                  "SENDER",      "ADDRESS",   "CHECKSUM", "AUTH",
                                                  "CHUNK_RANGE", "PUT_RANGE", "COPY",     "ANY"};

/* ---- little helpers -------------------------------------------------- */

static void put8(uint8_t *b, size_t o, uint8_t v)
{
    b[o] = v;
}
static void put32(uint8_t *b, size_t o, uint32_t v)
{
    for (int i = 0; i < 4; i++) {
        b[o + i] = (uint8_t) (v >> (8 * i));
    }
}
static void put64(uint8_t *b, size_t o, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        b[o + i] = (uint8_t) (v >> (8 * i));
    }
}
static uint32_t get32(const uint8_t *b, size_t o)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) {
        v = (v << 8) | b[o + i];
    }
    return v;
}
static uint64_t get64(const uint8_t *b, size_t o)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) {
        v = (v << 8) | b[o + i];
    }
    return v;
}

static uint64_t rng_s;
static uint64_t rnd64(void)
{
    uint64_t z = (rng_s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static uint32_t rnd32(void)
{
    return (uint32_t) rnd64();
}
/* uniform enough in [0, n) for n > 0 */
static uint64_t below(uint64_t n)
{
    return n ? rnd64() % n : 0;
}
static void rnd_fill(uint8_t *b, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w = rnd64();
        memcpy(b + i, &w, 8);
    }
    if (i < n) {
        uint64_t w = rnd64();
        memcpy(b + i, &w, n - i);
    }
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + 1e-9 * (double) ts.tv_nsec;
}

static void sleep_s(double s)
{
    struct timespec ts;
    if (s <= 0) {
        return;
    }
    ts.tv_sec = (time_t) s;
    ts.tv_nsec = (long) ((s - (double) ts.tv_sec) * 1e9);
    nanosleep(&ts, NULL);
}

/* CRC32C (Castagnoli, reflected 0x82F63B78), bytewise with a table. */
static uint32_t crc_tab[256];
static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) {
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        }
        crc_tab[i] = c;
    }
}
static uint32_t crc32c(uint32_t crc, const uint8_t *p, size_t n)
{
    uint32_t s = ~crc;
    while (n--) {
        s = crc_tab[(s ^ *p++) & 0xff] ^ (s >> 8);
    }
    return ~s;
}
/* The datagram's CRC field as the protocol defines it: everything but itself. */
static uint32_t pkt_crc(const uint8_t *b, size_t len)
{
    return crc32c(crc32c(0, b, O_CRC), b + O_MAC, len - O_MAC);
}

/* Header bytes before the payload, by packet type. */
static size_t hdr_len(int type)
{
    return (T_ACK == type || T_FRAG == type)     ? HDR
           : (T_CHUNK == type || T_PART == type) ? HDR_CHUNK
                                                 : HDR_PUT;
}

/* ---- targets, sockets, counting --------------------------------------- */

struct target {
    uint16_t port;       /* victim port */
    uint16_t from;       /* the port this rank sends from on this channel (-S; default port) */
    uint16_t peer_port;  /* the port the victim's peer sends from on the same channel */
    uint16_t peer_other; /* the port the peer sends from on the other channel */
    int rank, chan;      /* victim rank, channel (0 prio, 1 data) */
};
static struct target tg[NT];
static int udp_fd = -1, raw_fd = -1;

/* one of the ports the job receives on or sends from */
static bool job_port(unsigned port)
{
    for (int t = 0; t < NT; t++) {
        if (port == tg[t].port || port == tg[t].from) {
            return true;
        }
    }
    return false;
}

static size_t prio_buf = 568;
static double rate = 20000, byte_rate = 60e6;
static unsigned long long sent[NT], scen_sent[NT], expect[NT][R__COUNT];
static unsigned long long total_sent, total_bytes, send_errors;
static double pace_start;

/* At most `rate` datagrams and `byte_rate` bytes per second (large
 * datagrams at full speed would only overflow the victims' socket buffers). */
static void pace(size_t len)
{
    total_bytes += len;
    if (0 == (total_sent & 15) || len > 4096) {
        double due = pace_start + (double) total_sent / rate, now = now_s();
        double due_b = pace_start + (double) total_bytes / byte_rate;
        if (due_b > due) {
            due = due_b;
        }
        if (due > now) {
            sleep_s(due - now);
        }
    }
}

static bool send_retry(int fd, const void *b, size_t len, const struct sockaddr_in *to)
{
    for (int tries = 0; tries < 100; tries++) {
        if (sendto(fd, b, len, 0, (const struct sockaddr *) to, sizeof(*to)) == (ssize_t) len) {
            return true;
        }
        if (EINTR != errno && ENOBUFS != errno && EAGAIN != errno) {
            break;
        }
        sleep_s(0.001);
    }
    send_errors++;
    return false;
}

/* What a receive buffer of the target will hold of a len-byte datagram. */
static size_t seen_len(int t, size_t len)
{
    return (0 == tg[t].chan && len > prio_buf) ? prio_buf : len;
}

static void count(int t, size_t len, enum reason why)
{
    pace(len);
    sent[t]++;
    scen_sent[t]++;
    total_sent++;
    expect[t][why]++;
}

/* From the attacker's own port. */
static void send_own(int t, const uint8_t *b, size_t len, enum reason why)
{
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(tg[t].port)};
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (send_retry(udp_fd, b, len, &to)) {
        count(t, len, why);
    }
}

/* From 127.0.0.1:sport, through the raw socket. */
static void send_spoof(int t, uint16_t sport, const uint8_t *b, size_t len, enum reason why)
{
    static uint8_t pkt[MAXPKT + 64];
    struct iphdr *ip = (struct iphdr *) pkt;
    uint8_t *udp = pkt + sizeof(*ip);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(tg[t].port)};
    size_t ulen = 8 + len;

    if (sizeof(*ip) + ulen > 65535) {
        return;
    }
    memset(ip, 0, sizeof(*ip));
    ip->version = 4;
    ip->ihl = 5;
    ip->tos = TOS_MARK;
    ip->tot_len = htons((uint16_t) (sizeof(*ip) + ulen));
    ip->id = htons((uint16_t) rnd32());
    ip->frag_off = htons(0x4000); /* DF */
    ip->ttl = 64;
    ip->protocol = IPPROTO_UDP;
    ip->saddr = htonl(INADDR_LOOPBACK);
    ip->daddr = htonl(INADDR_LOOPBACK);
    udp[0] = (uint8_t) (sport >> 8);
    udp[1] = (uint8_t) sport;
    udp[2] = (uint8_t) (tg[t].port >> 8);
    udp[3] = (uint8_t) tg[t].port;
    udp[4] = (uint8_t) (ulen >> 8);
    udp[5] = (uint8_t) ulen;
    udp[6] = udp[7] = 0; /* no UDP checksum (IPv4 allows it) */
    memcpy(udp + 8, b, len);
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (send_retry(raw_fd, pkt, sizeof(*ip) + ulen, &to)) {
        count(t, len, why);
    }
}

/* ---- on-path knowledge ------------------------------------------------ */

struct sample {
    uint8_t *b;
    size_t len;
};

/* What the attacker learned about the packets arriving at one target. */
struct know {
    bool seen;     /* a genuine packet peer -> target was read */
    uint64_t key;  /* the peer's sender key */
    uint32_t hint; /* its src_module */
    unsigned long long pkts, crc_pkts;
    bool have_seq, have_ack, have_msgid;
    uint32_t seq, ack, msgid, ts; /* newest values seen */
    uint8_t last_data[HDR_PUT];   /* newest FRAG/CHUNK/PUT headers */
    size_t last_data_len;
    bool have_chunk;
    uint64_t chunk_msglen, chunk_off; /* newest CHUNK */
    uint32_t chunk_msgid, chunk_plen;
    uint64_t put_keys[16], put_regoff[16], put_msglen[16];
    int nput, put_next;
    struct sample samp[5][NSAMP]; /* by type 1..4 */
    int nsamp[5], samp_next[5];
};
static struct know kn[NT];
/* copies made at the start, for replay_late */
static struct sample early[NT][5][NSAMP];
static int nearly[NT][5];
static int cap_fd = -1;
static bool blind, auth_full;
static unsigned long long cap_total, cap_marked, cap_other;

static int target_of(uint16_t sport, uint16_t dport)
{
    for (int t = 0; t < NT; t++) {
        if (tg[t].port == dport && tg[t].peer_port == sport) {
            return t;
        }
    }
    return -1;
}

static bool crc_on(int t)
{
    /* the connection's setting: every genuine datagram has a CRC or none
     * has (a genuine CRC of 0 happens once in 2^32) */
    return kn[t].crc_pkts * 2 > kn[t].pkts;
}

static void keep_sample(struct sample *ring, int *n, int *next, const uint8_t *b, size_t len)
{
    struct sample *s = &ring[*next];
    if (NULL == s->b) {
        s->b = malloc(MAXPKT);
        if (NULL == s->b) {
            return;
        }
    }
    memcpy(s->b, b, len);
    s->len = len;
    *next = (*next + 1) % NSAMP;
    if (*n < NSAMP) {
        (*n)++;
    }
}

static void learn(int t, const uint8_t *b, size_t len)
{
    struct know *k = &kn[t];
    unsigned type = b[O_TYPE];
    uint32_t seq = get32(b, O_SEQ);

    if (len < HDR || VERSION != b[O_VERSION] || type < T_ACK || type > T_PUT) {
        return;
    }
    if (T_ACK != type && (b[O_FLAGS] & F_PAD) && len >= hdr_len(type) &&
        len - hdr_len(type) > get32(b, O_PLEN)) {
        /* a padded datagram (a train went on after it): kept without its
         * padding, which no MAC or CRC covers, so that every byte a
         * scenario truncates or changes is one the receiver checks */
        len = hdr_len(type) + get32(b, O_PLEN);
    }
    k->seen = true;
    k->key = get64(b, O_KEY);
    k->hint = get32(b, O_SRCMOD);
    k->pkts++;
    k->crc_pkts += (0 != get32(b, O_CRC));
    if ((b[O_FLAGS] & F_ACK) && (!k->have_ack || (int32_t) (get32(b, O_ACK) - k->ack) > 0)) {
        k->ack = get32(b, O_ACK);
        k->have_ack = true;
    }
    if (T_ACK != type) {
        size_t hl = hdr_len(type);
        if (!k->have_seq || (int32_t) (seq - k->seq) > 0) {
            k->seq = seq;
            k->have_seq = true;
        }
        if (T_PUT != type && (!k->have_msgid || (int32_t) (get32(b, O_MSGID) - k->msgid) > 0)) {
            k->msgid = get32(b, O_MSGID);
            k->have_msgid = true;
        }
        if (len >= hl) {
            memcpy(k->last_data, b, hl);
            k->last_data_len = hl;
        }
        if (T_CHUNK == type && len >= HDR_CHUNK) {
            k->have_chunk = true;
            k->chunk_msgid = get32(b, O_MSGID);
            k->chunk_msglen = get64(b, O_MSGLEN);
            k->chunk_off = get64(b, O_OFFSET);
            k->chunk_plen = get32(b, O_PLEN);
        }
        if (T_PUT == type && len >= HDR_PUT) {
            uint64_t rk = get64(b, O_REGKEY);
            int i;
            for (i = 0; i < k->nput && k->put_keys[i] != rk; i++) {
            }
            if (i == k->nput) {
                i = k->put_next;
                k->put_next = (k->put_next + 1) % 16;
                if (k->nput < 16) {
                    k->nput++;
                }
            }
            k->put_keys[i] = rk;
            k->put_regoff[i] = get64(b, O_REGOFF);
            k->put_msglen[i] = get64(b, O_MSGLEN);
        }
    }
    if (0 != get32(b, O_TS)) {
        k->ts = get32(b, O_TS);
    }
    keep_sample(k->samp[type], &k->nsamp[type], &k->samp_next[type], b, len);
}

static int cap_open(void)
{
    /* UDP (not a fragment) from one of the job's sending ports to one of
     * its receiving ports */
    struct sock_filter f[17] = {
        BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 9),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_UDP, 0, 14),
        BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 6),
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 0x1fff, 12, 0),
        BPF_STMT(BPF_LDX | BPF_B | BPF_MSH, 0),
        BPF_STMT(BPF_LD | BPF_H | BPF_IND, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, tg[0].from, 3, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, tg[1].from, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, tg[2].from, 1, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, tg[3].from, 0, 6),
        BPF_STMT(BPF_LD | BPF_H | BPF_IND, 2),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, tg[0].port, 3, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, tg[1].port, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, tg[2].port, 1, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, tg[3].port, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, 0x40000),
        BPF_STMT(BPF_RET | BPF_K, 0),
    };
    struct sock_fprog prog = {.len = 17, .filter = f};
    struct sockaddr_ll sll = {.sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_IP)};
    int fd, bytes = 8 << 20;

    fd = socket(AF_PACKET, SOCK_DGRAM, htons(ETH_P_IP));
    if (fd < 0) {
        perror("hostile: socket(AF_PACKET)");
        return -1;
    }
    sll.sll_ifindex = (int) if_nametoindex("lo");
    if (0 != setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)) ||
        0 != bind(fd, (struct sockaddr *) &sll, sizeof(sll))) {
        perror("hostile: capture socket");
        close(fd);
        return -1;
    }
    (void) setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof(bytes));
    return fd;
}

/*
 * Read the job's traffic for `secs` seconds (or until `want` packets came):
 * first throw away what queued up meanwhile, so what is learned is current.
 */
static unsigned cap_sample(double secs, unsigned want)
{
    static uint8_t buf[MAXPKT + 64];
    double end = now_s() + secs;
    unsigned got = 0;

    if (cap_fd < 0) {
        return 0;
    }
    while (recv(cap_fd, buf, 1, MSG_DONTWAIT | MSG_TRUNC) >= 0) {
    }
    while (got < want) {
        struct pollfd pfd = {.fd = cap_fd, .events = POLLIN};
        double left = end - now_s();
        ssize_t n;
        size_t ihl;
        uint16_t sport, dport;
        int t;

        if (left <= 0 || poll(&pfd, 1, (int) (left * 1000) + 1) <= 0) {
            if (left <= 0) {
                break;
            }
            continue;
        }
        n = recv(cap_fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n < 28) {
            continue;
        }
        ihl = (size_t) (buf[0] & 15) * 4;
        if ((size_t) n < ihl + 8) {
            continue;
        }
        cap_total++;
        if (TOS_MARK == buf[1]) {
            cap_marked++; /* one of ours */
            continue;
        }
        sport = (uint16_t) (buf[ihl] << 8 | buf[ihl + 1]);
        dport = (uint16_t) (buf[ihl + 2] << 8 | buf[ihl + 3]);
        t = target_of(sport, dport);
        if (t < 0) {
            cap_other++;
            continue;
        }
        learn(t, buf + ihl + 8, (size_t) n - ihl - 8);
        got++;
    }
    return got;
}

static void stash_early(void)
{
    for (int t = 0; t < NT; t++) {
        for (int ty = 1; ty <= 4; ty++) {
            int dummy = 0;
            for (int i = 0; i < kn[t].nsamp[ty]; i++) {
                keep_sample(early[t][ty], &nearly[t][ty], &dummy, kn[t].samp[ty][i].b,
                            kn[t].samp[ty][i].len);
            }
        }
    }
}

static void print_knowledge(const char *when)
{
    for (int t = 0; t < NT; t++) {
        const struct know *k = &kn[t];
        printf("hostile: knowledge %s: port %u (rank %d %s) from %u: %s key=0x%016llx "
               "src_module=0x%08x crc=%s seq=%u ack=%u msg_id=%u live_put_keys=%d "
               "samples ACK=%d FRAG=%d CHUNK=%d PUT=%d\n",
               when, tg[t].port, tg[t].rank, tg[t].chan ? "data" : "prio", tg[t].peer_port,
               k->seen ? "seen" : "NOTHING SEEN", (unsigned long long) k->key, k->hint,
               crc_on(t) ? "on" : "off", k->seq, k->ack, k->msgid, k->nput, k->nsamp[T_ACK],
               k->nsamp[T_FRAG], k->nsamp[T_CHUNK], k->nsamp[T_PUT]);
    }
    printf("hostile: capture read %llu datagrams (%llu of ours skipped, %llu other flows)\n",
           cap_total, cap_marked, cap_other);
    fflush(stdout);
}

/* ---- packet crafting -------------------------------------------------- */

static uint8_t pk[MAXPKT];

/* Largest datagram worth crafting for target t (a priority port's buffer). */
static size_t craft_max(int t)
{
    return tg[t].chan ? MAXCRAFT : prio_buf;
}

/* A random src_module hint naming no process of a 2-rank job. */
static uint32_t hint_outside(void)
{
    return ((2 + (uint32_t) below(0xFFFFFD)) << 8) | (uint32_t) below(256);
}

/*
 * A well-formed datagram of `type` in pk (random fields where any value
 * passes the receiver's format checks); returns its length.
 * plen_max bounds the payload (at least 1 for CHUNK and PUT).
 */
static size_t craft(int type, uint64_t key, uint32_t hint, size_t plen_max)
{
    size_t hl = hdr_len(type);
    size_t plen = 0;
    uint8_t flags = 0;

    memset(pk, 0, HDR_PUT);
    if (T_ACK == type) {
        flags = F_ACK | ((rnd32() & 1) ? F_SACK : 0) | ((rnd32() & 3) == 0 ? F_ACKREQ : 0);
        plen = (flags & F_SACK) ? 8 : 0;
    } else if (T_PART == type) {
        /* whole 64-byte units (the datagram's end may follow later) */
        plen = (plen_max >= 64) ? 64 * (1 + below(plen_max / 64)) : plen_max;
    } else {
        flags = (uint8_t) (rnd32() & (F_ACK | F_ACKREQ));
        plen = (T_FRAG == type) ? below(plen_max + 1) : 1 + below(plen_max);
    }
    put8(pk, O_VERSION, VERSION);
    put8(pk, O_TYPE, (uint8_t) type);
    put8(pk, O_FLAGS, flags);
    put8(pk, O_TAG, (T_ACK == type || T_PART == type) ? 0 : (uint8_t) (65 + below(8)));
    put32(pk, O_PLEN, (uint32_t) plen);
    put64(pk, O_KEY, key);
    put32(pk, O_SRCMOD, hint);
    put32(pk, O_SEQ, (T_ACK == type) ? 0 : rnd32());
    put32(pk, O_ACK, (flags & F_ACK) ? rnd32() : 0);
    put32(pk, O_MSGID, (T_ACK == type || T_PART == type) ? 0 : rnd32());
    put32(pk, O_TS, rnd32() | 1);
    put32(pk, O_TSECHO, (T_PART == type) ? 0 : rnd32());
    put64(pk, O_MAC, rnd64());
    if (T_CHUNK == type || T_PUT == type) {
        /* a CHUNK's message stays well below any fragment size limit */
        uint64_t msg_len = plen + below((T_CHUNK == type) ? 100000 - plen : 1 << 22);
        uint64_t off = below(msg_len - plen + 1);
        put64(pk, O_MSGLEN, msg_len);
        put64(pk, O_OFFSET, off);
    }
    if (T_PART == type) {
        /* part of a datagram of at most 64 KiB, at a multiple of 64; a
         * part that is not whole units ends its datagram */
        uint64_t off = 64, total = 64 + plen;
        if (0 == plen % 64) {
            off = 64 * below((65536 - plen) / 64 + 1);
            total = off + plen + 64 * below((65536 - off - plen) / 64 + 1);
        }
        put64(pk, O_MSGLEN, total);
        put64(pk, O_OFFSET, off);
    }
    if (T_PUT == type) {
        put64(pk, O_REGKEY, rnd64());
        put64(pk, O_REGOFF, below(1 << 24));
    }
    rnd_fill(pk + hl, plen);
    return hl + plen;
}

/* Seal as a forger can: a random MAC, and the right CRC when it is used. */
static void seal(int t, size_t len, bool good_crc)
{
    put64(pk, O_MAC, rnd64());
    put32(pk, O_CRC, 0);
    if (crc_on(t)) {
        uint32_t c = pkt_crc(pk, len);
        put32(pk, O_CRC, good_crc ? c : c ^ (1u << below(32)));
    }
}

/* Payload room for a craft() of type to target t. */
static size_t room(int t, int type)
{
    size_t hl = hdr_len(type);
    return craft_max(t) - hl;
}

/*
 * Send a forged packet carrying the real key of t's peer: mostly spoofed
 * from the peer's port (only the MAC, or the CRC, can stop it), one in
 * four from the attacker's own port (the address check stops it).
 */
static void send_forged(int t, size_t len)
{
    if (0 == below(4)) {
        seal(t, len, true);
        send_own(t, pk, len, R_ADDRESS);
    } else if (crc_on(t) && 0 == below(8)) {
        seal(t, len, false);
        send_spoof(t, tg[t].peer_port, pk, len, R_CHECKSUM);
    } else {
        seal(t, len, true);
        send_spoof(t, tg[t].peer_port, pk, len, R_AUTH);
    }
}

/* ---- blind scenarios -------------------------------------------------- */

static void sc_random(int t, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        size_t len = (0 == below(4)) ? below(HDR + 40) : below(9001);
        rnd_fill(pk, len);
        if (len > 0 && below(2)) {
            pk[0] = VERSION; /* get past the version check more often */
        }
        if (len > 1 && below(2)) {
            pk[1] = (uint8_t) (1 + below(4));
        }
        if (0 == below(4)) {
            send_spoof(t, tg[t].peer_port, pk, len, R_ANY);
        } else {
            send_own(t, pk, len, R_ANY);
        }
    }
}

/*
 * The template (a well-formed datagram) cut short: at every length up to
 * 120 (all of the headers and then some), then at up to 30 random lengths
 * beyond.  Uses at most *left datagrams.
 */
static void truncations(int t, const uint8_t *tmpl, size_t len, unsigned *left)
{
    for (size_t l = 0; l<len && * left> 0; l++) {
        if (120 == l) {
            for (int j = 0; j < 30 && *left > 0; j++) {
                size_t cut = l + below(len - l);
                memcpy(pk, tmpl, cut);
                send_own(t, pk, cut, seen_len(t, cut) < HDR ? R_SHORT : R_LENGTH);
                (*left)--;
            }
            break;
        }
        memcpy(pk, tmpl, l);
        send_own(t, pk, l, seen_len(t, l) < HDR ? R_SHORT : R_LENGTH);
        (*left)--;
    }
}

static void sc_trunc_self(int t, unsigned n)
{
    static uint8_t tmpl[MAXCRAFT];
    while (n > 0) {
        int type = 1 + (int) below(5);
        size_t len = craft(type, rnd64(), hint_outside(), room(t, type));
        memcpy(tmpl, pk, len);
        truncations(t, tmpl, len, &n);
    }
}

/* Apply field variant v (of NVARIANTS) to a fresh well-formed packet. */
#define NVARIANTS 25
static void field_variant(int t, int v, uint64_t key, uint32_t hint)
{
    size_t len;
    enum reason why;
    int type = 1 + (int) below(4);
    /* every one but VERSION: the versions before it, the next, the high bit */
    static const uint8_t bad_versions[] = {
        0, 1, VERSION - 1, VERSION + 1, VERSION + 2, 0x80 | VERSION, 0xff};
    static const uint8_t bad_types[] = {0, 6, 7, 8, 0x41, 0x81, 0xff};
    size_t hl;

    switch (v) {
    case 0: /* version */
        len = craft(type, key, hint, room(t, type));
        put8(pk, O_VERSION, bad_versions[below(sizeof(bad_versions))]);
        why = R_VERSION;
        break;
    case 1: /* type */
        len = craft(type, key, hint, room(t, type));
        put8(pk, O_TYPE, bad_types[below(sizeof(bad_types))]);
        why = R_TYPE;
        break;
    case 2: /* unknown flag bits */
        len = craft(type, key, hint, room(t, type));
        put8(pk, O_FLAGS, (uint8_t) (pk[O_FLAGS] | (0x40u << below(2))));
        why = R_TYPE;
        break;
    case 3: /* reserved bytes, or a lane beyond the two channels */
        len = craft(type, key, hint, room(t, type));
        if (below(2)) {
            put8(pk, O_RESERVED, (uint8_t) (1u << below(8)));
        } else {
            put8(pk, O_LANE, (uint8_t) (2 + below(254)));
        }
        why = R_TYPE;
        break;
    case 4: /* ACK without the ACK flag */
        len = craft(T_ACK, key, hint, 0);
        put8(pk, O_FLAGS, (uint8_t) (pk[O_FLAGS] & ~F_ACK));
        why = R_TYPE;
        break;
    case 5: /* SACK or SACK_MORE on a data packet */
        type = 2 + (int) below(3);
        len = craft(type, key, hint, room(t, type));
        put8(pk, O_FLAGS, (uint8_t) (pk[O_FLAGS] | (below(2) ? F_SACK : F_SACK_MORE)));
        why = R_TYPE;
        break;
    case 6: /* ACK with a msg_id */
        len = craft(T_ACK, key, hint, 0);
        put32(pk, O_MSGID, rnd32() | 1);
        why = R_TYPE;
        break;
    case 7: /* payload_len one too big */
        len = craft(type, key, hint, room(t, type) - 1);
        put32(pk, O_PLEN, get32(pk, O_PLEN) + 1);
        why = R_LENGTH;
        break;
    case 8: /* payload_len one too small */
        type = 2 + (int) below(3);
        len = craft(type, key, hint, room(t, type) - 1);
        if (0 == get32(pk, O_PLEN)) {
            len++; /* an empty FRAG: one byte more than announced */
        } else {
            put32(pk, O_PLEN, get32(pk, O_PLEN) - 1);
        }
        why = R_LENGTH;
        break;
    case 9: /* payload_len huge */
        len = craft(type, key, hint, room(t, type));
        put32(pk, O_PLEN, 0xFFFFFFFFu - (uint32_t) below(1 << 16));
        why = R_LENGTH;
        break;
    case 10: /* CHUNK/PUT shorter than its headers */
        type = 3 + (int) below(2);
        craft(type, key, hint, 1);
        hl = (T_CHUNK == type) ? HDR_CHUNK : HDR_PUT;
        len = HDR + below(hl - HDR);
        put32(pk, O_PLEN, 0);
        why = R_LENGTH;
        break;
    case 11: /* ACK with SACK flag and no bitmap, or a bitmap without the flag */
        len = craft(T_ACK, key, hint, 0);
        if (pk[O_FLAGS] & F_SACK) {
            put32(pk, O_PLEN, 0);
            len = HDR;
        } else {
            put32(pk, O_PLEN, 8);
            rnd_fill(pk + HDR, 8);
            len = HDR + 8;
        }
        why = R_LENGTH;
        break;
    case 12: /* chunk msg_len 0 */
        type = 3 + (int) below(2);
        len = craft(type, key, hint, room(t, type));
        put64(pk, O_MSGLEN, 0);
        why = R_CHUNK_RANGE;
        break;
    case 13: /* chunk without payload */
        type = 3 + (int) below(2);
        craft(type, key, hint, 1);
        len = (T_CHUNK == type) ? HDR_CHUNK : HDR_PUT;
        put32(pk, O_PLEN, 0);
        why = R_CHUNK_RANGE;
        break;
    case 14: /* offset + payload beyond msg_len */
        type = 3 + (int) below(2);
        len = craft(type, key, hint, room(t, type));
        put64(pk, O_OFFSET, get64(pk, O_MSGLEN) - get32(pk, O_PLEN) + 1 + below(1 << 20));
        why = R_CHUNK_RANGE;
        break;
    case 15: /* offset + payload overflowing 64 bits (a PUT's msg_len is not
              * bounded by a fragment size: only the range check stops it) */
        type = 3 + (int) below(2);
        len = craft(type, key, hint, room(t, type));
        put64(pk, O_OFFSET, UINT64_MAX - below(get32(pk, O_PLEN)));
        put64(pk, O_MSGLEN, UINT64_MAX - below(1 << 20));
        why = R_CHUNK_RANGE;
        break;
    case 16: /* CHUNK of a fragment larger than any */
        len = craft(T_CHUNK, key, hint, room(t, T_CHUNK));
        put64(pk, O_MSGLEN, ((uint64_t) 1 << (32 + below(31))) + below(1 << 20));
        put64(pk, O_OFFSET, 0);
        why = R_CHUNK_RANGE;
        break;
    case 17: /* PUT reg_offset + msg_len overflowing */
        len = craft(T_PUT, key, hint, room(t, T_PUT));
        put64(pk, O_REGOFF, UINT64_MAX - below(get64(pk, O_MSGLEN)));
        why = R_PUT_RANGE;
        break;
    case 18: /* PUT msg_len near 2^64 with an offset that fits it */
        len = craft(T_PUT, key, hint, room(t, T_PUT));
        put64(pk, O_MSGLEN, UINT64_MAX - below(1000));
        put64(pk, O_REGOFF, 1000 + below(1 << 20));
        why = R_PUT_RANGE;
        break;
    case 19: /* a header cut inside the common header, but lots of bytes announced */
        len = craft(type, key, hint, room(t, type));
        len = below(HDR);
        why = R_SHORT;
        break;
    case 20: /* CHUNK msg_len just beyond a fragment (eager limit) */
        len = craft(T_CHUNK, key, hint, room(t, T_CHUNK));
        put64(pk, O_MSGLEN, (uint64_t) (16 << 20) + below(1 << 20));
        put64(pk, O_OFFSET, 0);
        why = R_CHUNK_RANGE;
        break;
    case 21: /* PART with a field of its own set: flags, tag, msg_id, ack, echo */
        len = craft(T_PART, key, hint, room(t, T_PART));
        switch (below(5)) {
        case 0:
            put8(pk, O_FLAGS, (uint8_t) (F_ACK << below(2)));
            break;
        case 1:
            put8(pk, O_TAG, (uint8_t) (1 + below(255)));
            break;
        case 2:
            put32(pk, O_MSGID, rnd32() | 1);
            break;
        case 3:
            put32(pk, O_ACK, rnd32() | 1);
            break;
        default:
            put32(pk, O_TSECHO, rnd32() | 1);
            break;
        }
        why = R_TYPE;
        break;
    case 22: /* PART at an offset that is no multiple of 64, or of a part
              * length that is not whole units and does not end the datagram */
        len = craft(T_PART, key, hint, room(t, T_PART));
        if (below(2)) {
            put64(pk, O_OFFSET, get64(pk, O_OFFSET) + 1 + below(63));
            put64(pk, O_MSGLEN, get64(pk, O_OFFSET) + get32(pk, O_PLEN) + below(64));
        } else {
            len = HDR_CHUNK + 1 + below(63);
            put32(pk, O_PLEN, (uint32_t) (len - HDR_CHUNK));
            put64(pk, O_OFFSET, 0);
            put64(pk, O_MSGLEN, 200 + below(60000));
        }
        why = R_CHUNK_RANGE;
        break;
    case 23: /* PART of a datagram beyond 64 KiB, or shorter than a header */
        len = craft(T_PART, key, hint, room(t, T_PART));
        if (below(2)) {
            put64(pk, O_MSGLEN, 65537 + below(UINT32_MAX));
        } else {
            len = HDR_CHUNK + 1 + below(55);
            put32(pk, O_PLEN, (uint32_t) (len - HDR_CHUNK));
            put64(pk, O_OFFSET, 0);
            put64(pk, O_MSGLEN, len - HDR_CHUNK);
        }
        why = R_CHUNK_RANGE;
        break;
    default: /* several fields wrong: the first check decides */
        len = craft(type, key, hint, room(t, type));
        put8(pk, O_TYPE, 9);
        put8(pk, O_RESERVED, 1);
        put32(pk, O_PLEN, 12345);
        why = R_TYPE;
        break;
    }
    if (len >= HDR) {
        put64(pk, O_MAC, rnd64());
    }
    send_own(t, pk, len, seen_len(t, len) < HDR ? R_SHORT : why);
}

static void sc_fields(int t, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        field_variant(t, (int) (i % NVARIANTS), rnd64(), hint_outside());
    }
}

static void sc_wrongkey(int t, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        int type = 1 + (int) (i % 5);
        uint64_t key = (0 == i % 97) ? 0 : (1 == i % 97) ? UINT64_MAX : rnd64();
        size_t len = craft(type, key, hint_outside(), room(t, type));
        send_own(t, pk, len, R_SENDER);
    }
}

static void sc_unknown(int t, unsigned n)
{
    const uint32_t me = (uint32_t) tg[t].rank, peer = 1u - me;
    const uint32_t hints[] = {0xFFFFFF00u,     peer << 8, me << 8,
                              (peer << 8) | 1, 2u << 8,   0xFFFFFFFFu};
    for (unsigned i = 0; i < n; i++) {
        int type = 1 + (int) below(5);
        size_t len = craft(type, rnd64(), hints[i % 6], room(t, type));
        send_own(t, pk, len, R_SENDER);
    }
}

static void sc_foreign(int t, unsigned n)
{
    /* a foreign job: two modules with their own keys, sequence numbers and
     * messages, as a real job on the same host would send them by mistake */
    static uint64_t fkey[2];
    static uint32_t fseq[2], fmsg[2];
    static uint16_t fport[2];
    if (0 == fkey[0]) {
        for (int j = 0; j < 2; j++) {
            fkey[j] = rnd64();
            fseq[j] = rnd32();
            fmsg[j] = 0;
            fport[j] = (uint16_t) (20000 + below(30000));
        }
    }
    for (unsigned i = 0; i < n; i++) {
        int j = (int) (i & 1), type = (0 == i % 5) ? T_ACK : (0 == i % 3) ? T_CHUNK : T_FRAG;
        size_t len = craft(type, fkey[j], (uint32_t) j << 8, room(t, type));
        if (T_ACK != type) {
            put32(pk, O_SEQ, fseq[j]++);
            put32(pk, O_MSGID, fmsg[j]++);
        }
        if (0 == i % 4 && !job_port(fport[j])) {
            send_spoof(t, fport[j], pk, len, R_SENDER);
        } else {
            send_own(t, pk, len, R_SENDER);
        }
    }
}

static void sc_spoofblind(int t, unsigned n)
{
    const uint32_t peer_hint = (1u - (uint32_t) tg[t].rank) << 8;
    for (unsigned i = 0; i < n; i++) {
        int type = 1 + (int) (i % 4);
        size_t len = craft(type, rnd64(), (i & 1) ? peer_hint : hint_outside(), room(t, type));
        send_spoof(t, (0 == i % 5) ? tg[t].peer_other : tg[t].peer_port, pk, len, R_SENDER);
    }
}

/* A registration key as a guesser would try it. */
static uint64_t guessed_regkey(unsigned i)
{
    switch (i % 4) {
    case 0:
        return ((uint64_t) (i / 4 % 3) << 32) | (i / 12 % 64); /* generation << 32 | index */
    case 1:
        return i / 4 % 256; /* small integers */
    case 2:
        return ((uint64_t) 1 << 32) | below(16);
    default:
        return rnd64();
    }
}

static void put_fill(int t, uint64_t key, uint32_t hint, uint64_t regkey, uint64_t regoff,
                     uint64_t msg_len, size_t *len)
{
    size_t plen = 1 + below(room(t, T_PUT));
    if (msg_len < plen) {
        msg_len = plen + below(1 << 20);
    }
    *len = craft(T_PUT, key, hint, plen);
    plen = get32(pk, O_PLEN);
    put64(pk, O_REGKEY, regkey);
    put64(pk, O_REGOFF, regoff);
    put64(pk, O_MSGLEN, msg_len);
    put64(pk, O_OFFSET, below(msg_len - plen + 1));
}

static void sc_putguess(int t, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        size_t len;
        put_fill(t, rnd64(), (1u - (uint32_t) tg[t].rank) << 8, guessed_regkey(i),
                 below(4) ? 0 : below(1 << 22), 1 + below(4 << 20), &len);
        if (i & 1) {
            send_spoof(t, tg[t].peer_port, pk, len, R_SENDER);
        } else {
            send_own(t, pk, len, R_SENDER);
        }
    }
}

static const uint8_t odd_tags[] = {255, 254, 0, 1, 64, 65, 66, 127, 128, 200};

static void sc_tagblind(int t, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        size_t len = craft(T_FRAG, rnd64(), (1u - (uint32_t) tg[t].rank) << 8, room(t, T_FRAG));
        put8(pk, O_TAG, (i % 3) ? odd_tags[i % sizeof(odd_tags)] : (uint8_t) rnd32());
        send_own(t, pk, len, R_SENDER);
    }
}

/* ---- on-path scenarios ------------------------------------------------ */

/* A data packet (FRAG/CHUNK/PUT) starting from the newest genuine header. */
static size_t from_genuine(int t, int type, size_t plen)
{
    const struct know *k = &kn[t];
    size_t hl = hdr_len(type);
    if (plen > room(t, type)) {
        plen = room(t, type);
    }
    if (T_FRAG != type && 0 == plen) {
        plen = 1;
    }
    craft(type, k->key, k->hint, plen);
    memcpy(pk, k->last_data, HDR); /* the genuine common header */
    put8(pk, O_TYPE, (uint8_t) type);
    put8(pk, O_FLAGS, (uint8_t) (pk[O_FLAGS] & (F_ACK | F_ACKREQ)));
    put32(pk, O_PLEN, (uint32_t) plen);
    put64(pk, O_KEY, k->key);
    put32(pk, O_SRCMOD, k->hint);
    if (T_PUT == type) {
        put32(pk, O_MSGID, rnd32());
    }
    if (T_CHUNK == type || T_PUT == type) {
        uint64_t msg_len = k->have_chunk ? k->chunk_msglen : plen + below(1 << 16);
        if (msg_len < plen) {
            msg_len = plen;
        }
        put64(pk, O_MSGLEN, msg_len);
        put64(pk, O_OFFSET, below(msg_len - plen + 1));
    }
    if (T_PUT == type) {
        put64(pk, O_REGKEY, k->nput ? k->put_keys[below((uint64_t) k->nput)] : rnd64());
        put64(pk, O_REGOFF, below(1 << 20));
    }
    rnd_fill(pk + hl, plen);
    return hl + plen;
}

static void sc_trunc(int t, unsigned n)
{
    const struct know *k = &kn[t];
    int types[4], nt = 0;
    for (int ty = 1; ty <= 4; ty++) {
        if (k->nsamp[ty] > 0) {
            types[nt++] = ty;
        }
    }
    for (unsigned i = 0; n > 0; i++) {
        const struct sample *s = &k->samp[types[i % nt]][below((uint64_t) k->nsamp[types[i % nt]])];
        truncations(t, s->b, s->len, &n);
    }
}

static void sc_tag(int t, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        size_t len = from_genuine(t, T_FRAG, below(400));
        put8(pk, O_TAG, (i % 2) ? 255 : odd_tags[i % sizeof(odd_tags)]);
        put32(pk, O_SEQ, kn[t].seq + 1 + (uint32_t) below(32));
        put32(pk, O_MSGID, kn[t].msgid + 1 + (uint32_t) below(4));
        send_forged(t, len);
    }
}

static void sc_spoof(int t, unsigned n)
{
    const struct know *k = &kn[t];
    for (unsigned i = 0; i < n; i++) {
        int type = 1 + (int) (i % 5);
        size_t len = craft(type, k->key, k->hint, room(t, type));
        if (T_ACK != type) {
            put32(pk, O_SEQ, k->seq + (uint32_t) below(64));
        }
        if (0 == i % 7) {
            /* right key, right host, the peer's port of the other channel */
            seal(t, len, true);
            send_spoof(t, tg[t].peer_other, pk, len, R_ADDRESS);
        } else if (crc_on(t) && 0 == i % 5) {
            seal(t, len, false);
            send_spoof(t, tg[t].peer_port, pk, len, R_CHECKSUM);
        } else {
            seal(t, len, true);
            send_spoof(t, tg[t].peer_port, pk, len, R_AUTH);
        }
    }
}

static void sc_window(int t, unsigned n, bool inside)
{
    for (unsigned i = 0; i < n; i++) {
        int type = (i % 3) ? T_FRAG : T_CHUNK;
        size_t len = from_genuine(t, type, below(room(t, type)));
        uint32_t seq = kn[t].seq;
        if (inside) {
            seq += (uint32_t) ((int32_t) below(96) - 32);
        } else {
            switch (i % 4) {
            case 0:
                seq += 4096 + (uint32_t) below(1 << 20);
                break;
            case 1:
                seq += 0x80000000u + (uint32_t) below(64);
                break;
            case 2:
                seq -= 0x7FFFFFF0u + (uint32_t) below(16);
                break;
            default:
                seq = rnd32();
                break;
            }
        }
        put32(pk, O_SEQ, seq);
        put32(pk, O_TS, kn[t].ts + 1 + (uint32_t) below(1000));
        send_forged(t, len);
    }
}

/* Sequence numbers the victim has sent to its peer: what an ACK could name. */
static uint32_t victim_tx_seq(int t)
{
    /* the reverse flow: the victim's packets to its peer, either channel */
    for (int r = 0; r < NT; r++) {
        if (tg[r].rank != tg[t].rank && kn[r].have_seq) {
            return kn[r].seq;
        }
    }
    return kn[t].ack;
}

static void sc_ack(int t, unsigned n, bool sack)
{
    const struct know *k = &kn[t];
    for (unsigned i = 0; i < n; i++) {
        uint32_t base = (i & 1) ? k->ack : victim_tx_seq(t);
        uint32_t ack = base + (uint32_t) ((int32_t) below(200) - 100);
        size_t len;
        if (0 == i % 17) {
            ack = rnd32();
        }
        if (!sack && 0 == i % 3) {
            /* piggy-backed on a data packet */
            len = from_genuine(t, T_FRAG, below(200));
            put8(pk, O_FLAGS, F_ACK);
            put32(pk, O_SEQ, k->seq + (uint32_t) below(8));
        } else {
            /* a SACK of 1 to 16 words, with or without SACK_MORE */
            size_t words = sack ? 1 + below(16) : 0;
            len = craft(T_ACK, k->key, k->hint, 0);
            put8(pk, O_FLAGS,
                 (uint8_t) (F_ACK | (sack ? F_SACK : 0) | ((i % 5) ? 0 : F_ACKREQ) |
                            ((sack && below(2)) ? F_SACK_MORE : 0)));
            put32(pk, O_PLEN, (uint32_t) (8 * words));
            len = HDR + 8 * words;
            for (size_t w = 0; w < words; w++) {
                uint64_t bits = rnd64();
                if (i % 3 == 1) {
                    bits = UINT64_MAX;
                } else if (i % 3 == 2) {
                    bits &= bits >> 7;
                }
                put64(pk, HDR + 8 * w, bits);
            }
        }
        put32(pk, O_ACK, ack);
        put32(pk, O_TS, k->ts + 1 + (uint32_t) below(100000));
        put32(pk, O_TSECHO, (i & 2) ? k->ts : rnd32());
        send_forged(t, len);
    }
}

static void sc_put(int t, unsigned n)
{
    const struct know *k = &kn[t];
    for (unsigned i = 0; i < n; i++) {
        uint64_t regkey, regoff, msg_len = 1 + below(4 << 20);
        size_t len;
        if (k->nput > 0 && (i % 3) != 2) {
            int j = (int) below((uint64_t) k->nput);
            regkey = k->put_keys[j];
            msg_len = k->put_msglen[j];
            /* new offsets: the same PUT moved, before, inside, after its region */
            regoff = k->put_regoff[j] + (uint64_t) ((int64_t) below(1 << 21) - (1 << 20));
            if (0 == i % 5) {
                regoff = (uint64_t) 1 << (20 + below(40));
            }
        } else {
            regkey = guessed_regkey(i);
            regoff = below(1 << 22);
        }
        regoff &= ((uint64_t) 1 << 60) - 1; /* no overflow: the range check must not see it */
        put_fill(t, k->key, k->hint, regkey, regoff, msg_len, &len);
        put32(pk, O_SEQ, k->seq + 1 + (uint32_t) below(64));
        put32(pk, O_TS, k->ts + 1 + (uint32_t) below(1000));
        send_forged(t, len);
    }
}

static void sc_chunk(int t, unsigned n)
{
    const struct know *k = &kn[t];
    int src = t;
    /* a priority port sees no chunks: borrow the data channel's message */
    if (!kn[src].have_chunk) {
        for (int r = 0; r < NT; r++) {
            if (tg[r].rank == tg[t].rank && kn[r].have_chunk) {
                src = r;
            }
        }
    }
    for (unsigned i = 0; i < n; i++) {
        const struct know *c = &kn[src];
        uint64_t msg_len = c->have_chunk ? c->chunk_msglen : 100000;
        uint64_t off0 = c->have_chunk ? c->chunk_off : 0;
        size_t plen = 1 + below(room(t, T_CHUNK));
        size_t len = from_genuine(t, T_CHUNK, plen);
        uint64_t off;
        plen = get32(pk, O_PLEN);
        if (msg_len < plen) {
            msg_len = plen;
        }
        /* overlap the genuine chunk: start somewhere before or inside it */
        off = off0 + (uint64_t) ((int64_t) below(2 * plen + 1) - (int64_t) plen);
        if ((int64_t) off < 0 || off + plen > msg_len) {
            off = msg_len - plen;
        }
        put32(pk, O_MSGID, (c->have_chunk ? c->chunk_msgid : k->msgid) + (uint32_t) below(2));
        put64(pk, O_MSGLEN, msg_len);
        put64(pk, O_OFFSET, off);
        put32(pk, O_SEQ, k->seq + (uint32_t) ((int32_t) below(64) - 16));
        send_forged(t, len);
    }
}

/*
 * Genuine packets of ring (arriving at t) replayed: from their real source
 * (copies), from the attacker's port (the address check), and one in eight
 * a packet the victim itself sent (from rev), reflected back to it from
 * its peer's port: its own key names no peer.
 */
static void replay(int t, unsigned n, struct sample ring[5][NSAMP], const int *nring,
                   struct sample rev[5][NSAMP], const int *nrev)
{
    int types[4], nt = 0;
    for (int ty = 1; ty <= 4; ty++) {
        if (nring[ty] > 0) {
            types[nt++] = ty;
        }
    }
    for (unsigned i = 0; i < n; i++) {
        int ty = types[i % nt];
        const struct sample *s = &ring[ty][below((uint64_t) nring[ty])];
        /* datagrams of up to 64 KiB: only one in four of the replays, so as
         * not to overflow the victim's socket buffer */
        for (int tries = 0; tries < 8 && s->len > MAXCRAFT && 0 != i % 4; tries++) {
            ty = types[below((uint64_t) nt)];
            s = &ring[ty][below((uint64_t) nring[ty])];
        }
        if (0 == i % 4) {
            send_own(t, s->b, s->len, seen_len(t, s->len) < s->len ? R_LENGTH : R_ADDRESS);
        } else if (3 == i % 8 && nrev[types[i % nt]] > 0) {
            s = &rev[types[i % nt]][below((uint64_t) nrev[types[i % nt]])];
            send_spoof(t, tg[t].peer_port, s->b, s->len,
                       seen_len(t, s->len) < s->len ? R_LENGTH : R_SENDER);
        } else {
            send_spoof(t, tg[t].peer_port, s->b, s->len, R_COPY);
        }
    }
}

/*
 * A forger's change: genuine data packets (already received) with payload
 * bytes altered, header and MAC kept, the CRC made right again, from their
 * real source.  With auth full the MAC covers the payload: drop_AUTH; with
 * auth header it does not, and the packet is a copy like any replay.
 */
static void sc_payload(int t, unsigned n)
{
    const struct know *k = &kn[t];
    const struct sample *small[3 * NSAMP], *any[3 * NSAMP];
    int nsmall = 0, nany = 0;

    for (int ty = T_FRAG; ty <= T_PUT; ty++) {
        for (int i = 0; i < k->nsamp[ty]; i++) {
            const struct sample *c = &k->samp[ty][i];
            if (c->len > hdr_len(ty)) {
                any[nany++] = c;
                if (c->len <= MAXCRAFT) {
                    small[nsmall++] = c;
                }
            }
        }
    }
    for (unsigned i = 0; i < n && nany > 0; i++) {
        /* large ones (up to 64 KiB) only one time in four */
        const struct sample *s = (nsmall > 0 && 0 != i % 4) ? small[below((uint64_t) nsmall)]
                                                            : any[below((uint64_t) nany)];
        size_t hl = hdr_len(s->b[O_TYPE]);
        memcpy(pk, s->b, s->len);
        for (int j = 0; j < 1 + (int) below(4); j++) {
            pk[hl + below(s->len - hl)] ^= (uint8_t) (1 + below(255));
        }
        if (0 == memcmp(pk + hl, s->b + hl, s->len - hl)) {
            /* the changes cancelled out (the same byte twice with the same
             * value): that would be a genuine copy, not a forgery (CI once
             * counted one AUTH short and one COPY over) */
            pk[hl] ^= 1;
        }
        if (crc_on(t)) {
            put32(pk, O_CRC, pkt_crc(pk, s->len));
        }
        send_spoof(t, tg[t].peer_port, pk, s->len,
                   seen_len(t, s->len) < s->len ? R_LENGTH : (auth_full ? R_AUTH : R_COPY));
    }
}

static int by_ts(const void *a, const void *b)
{
    const struct sample *x = *(const struct sample *const *) a;
    const struct sample *y = *(const struct sample *const *) b;
    int32_t d = (int32_t) (get32(x->b, O_TS) - get32(y->b, O_TS));
    return (d > 0) - (d < 0);
}

/*
 * Genuine packets of the victim's other channel, replayed on this one
 * (spoofed from the peer's port of this channel, so the address check
 * passes): a lane's timestamps say nothing about the other lane's packets,
 * but the header names the lane it was sent on, under the MAC.  In
 * batches: read the traffic for a moment, replay what came in the order it
 * was sent (oldest stamp first), again.  Each is dropped as ADDRESS.
 */
static void sc_replay_xlane(int t, unsigned n)
{
    const struct sample *list[4 * NSAMP];
    while (n > 0) {
        const struct know *o = &kn[t ^ 1]; /* same rank, other channel */
        int m = 0;
        cap_sample(0.005, 64);
        for (int ty = 1; ty <= 4; ty++) {
            for (int i = 0; i < o->nsamp[ty]; i++) {
                if (o->samp[ty][i].len <= MAXCRAFT) {
                    list[m++] = &o->samp[ty][i];
                }
            }
        }
        if (0 == m) {
            return;
        }
        qsort(list, (size_t) m, sizeof(list[0]), by_ts);
        for (int i = 0; i < m && n > 0; i++, n--) {
            /* (a priority port keeps only the start of a longer one) */
            send_spoof(t, tg[t].peer_port, list[i]->b, list[i]->len,
                       seen_len(t, list[i]->len) < list[i]->len ? R_LENGTH : R_ADDRESS);
        }
    }
}

/* ---- driver ----------------------------------------------------------- */

struct scenario {
    const char *name;
    bool onpath;
    void (*run)(int t, unsigned n);
};

static void sc_inwin(int t, unsigned n)
{
    sc_window(t, n, true);
}
static void sc_outwin(int t, unsigned n)
{
    sc_window(t, n, false);
}
static void sc_ack_plain(int t, unsigned n)
{
    sc_ack(t, n, false);
}
static void sc_sack(int t, unsigned n)
{
    sc_ack(t, n, true);
}
static void sc_replay(int t, unsigned n)
{
    replay(t, n, kn[t].samp, kn[t].nsamp, kn[(t + 2) % NT].samp, kn[(t + 2) % NT].nsamp);
}
static void sc_replay_late(int t, unsigned n)
{
    replay(t, n, early[t], nearly[t], early[(t + 2) % NT], nearly[(t + 2) % NT]);
}

static const struct scenario scenarios[] = {
    {"random", false, sc_random},
    {"trunc_self", false, sc_trunc_self},
    {"fields", false, sc_fields},
    {"wrongkey", false, sc_wrongkey},
    {"unknown", false, sc_unknown},
    {"foreign", false, sc_foreign},
    {"spoofblind", false, sc_spoofblind},
    {"putguess", false, sc_putguess},
    {"tagblind", false, sc_tagblind},
    {"trunc", true, sc_trunc},
    {"tag", true, sc_tag},
    {"spoof", true, sc_spoof},
    {"inwin", true, sc_inwin},
    {"outwin", true, sc_outwin},
    {"ack", true, sc_ack_plain},
    {"sack", true, sc_sack},
    {"put", true, sc_put},
    {"chunk", true, sc_chunk},
    {"payload", true, sc_payload},
    {"replay", true, sc_replay},
    {"replay_xlane", true, sc_replay_xlane},
    {"replay_late", true, sc_replay_late},
};
#define NSCEN ((int) (sizeof(scenarios) / sizeof(scenarios[0])))

/* Has the on-path scenario s what it needs for target t? */
static const char *missing(const struct scenario *s, int t)
{
    const struct know *k = &kn[t];
    bool any = false;
    if (!k->seen) {
        return "no genuine packet seen";
    }
    if (0 == strcmp(s->name, "replay_late")) {
        for (int ty = 1; ty <= 4; ty++) {
            any |= nearly[t][ty] > 0;
        }
        return any ? NULL : "nothing captured at the start";
    }
    if (0 == strcmp(s->name, "replay_xlane")) {
        for (int ty = 1; ty <= 4; ty++) {
            for (int i = 0; i < kn[t ^ 1].nsamp[ty]; i++) {
                any |= kn[t ^ 1].samp[ty][i].len <= MAXCRAFT;
            }
        }
        return any ? NULL : "no packet of the other channel of at most 9000 bytes";
    }
    if (0 == strcmp(s->name, "payload")) {
        for (int ty = T_FRAG; ty <= T_PUT; ty++) {
            for (int i = 0; i < k->nsamp[ty]; i++) {
                any |= k->samp[ty][i].len > hdr_len(ty);
            }
        }
        return any ? NULL : "no data packet with a payload captured";
    }
    if (0 == strcmp(s->name, "trunc") || 0 == strcmp(s->name, "replay")) {
        for (int ty = 1; ty <= 4; ty++) {
            any |= k->nsamp[ty] > 0;
        }
        return any ? NULL : "nothing captured";
    }
    if (0 == k->last_data_len && 0 != strcmp(s->name, "spoof")) {
        return "no data packet seen";
    }
    return NULL;
}

/* -p (from == 0): the receiving ports; -S (from == 1): the sending ports */
static int parse_ports(const char *arg, int from)
{
    unsigned p[NT];
    if (4 != sscanf(arg, "%u,%u,%u,%u", &p[0], &p[1], &p[2], &p[3])) {
        return -1;
    }
    for (int t = 0; t < NT; t++) {
        if (0 == p[t] || p[t] > 65535) {
            return -1;
        }
        if (from) {
            tg[t].from = (uint16_t) p[t];
        } else {
            tg[t].port = (uint16_t) p[t];
        }
        tg[t].rank = t / 2;
        tg[t].chan = t % 2;
    }
    return 0;
}


static void usage(void)
{
    fprintf(stderr,
            "usage: hostile -p R0PRIO,R0DATA,R1PRIO,R1DATA [-S R0PRIO,R0DATA,R1PRIO,R1DATA] "
            "[-n N] [-r RATE] [-B BYTES] "
            "[-m PRIO_BUF] [-s SEED] [-a header|full] [-b] [SCENARIO,...|blind|all]\n");
    exit(1);
}

int main(int argc, char **argv)
{
    unsigned n = 1000;
    uint64_t seed = 0;
    bool have_seed = false, want[NSCEN], ports_given = false, from_given = false;
    const char *list = "all";
    int opt, rc = 0;
    struct sockaddr_in me = {.sin_family = AF_INET};
    int bytes = 4 << 20;
    double t0;

    while (-1 != (opt = getopt(argc, argv, "p:S:n:r:B:m:s:a:b"))) {
        switch (opt) {
        case 'p':
            if (0 != parse_ports(optarg, 0)) {
                usage();
            }
            ports_given = true;
            break;
        case 'S':
            if (0 != parse_ports(optarg, 1)) {
                usage();
            }
            from_given = true;
            break;
        case 'n':
            n = (unsigned) strtoul(optarg, NULL, 0);
            break;
        case 'r':
            rate = atof(optarg);
            break;
        case 'B':
            byte_rate = atof(optarg);
            break;
        case 'm':
            prio_buf = (size_t) strtoul(optarg, NULL, 0);
            break;
        case 's':
            seed = strtoull(optarg, NULL, 0);
            have_seed = true;
            break;
        case 'b':
            blind = true;
            break;
        case 'a':
            if (0 == strcmp(optarg, "full")) {
                auth_full = true;
            } else if (0 != strcmp(optarg, "header")) {
                usage();
            }
            break;
        default:
            usage();
        }
    }
    if (!ports_given || rate <= 0 || byte_rate <= 0 || prio_buf < HDR || prio_buf > MAXCRAFT) {
        usage();
    }
    for (int t = 0; t < NT; t++) {
        if (!from_given) {
            tg[t].from = tg[t].port; /* the ranks send from their receiving ports */
        }
    }
    for (int t = 0; t < NT; t++) {
        tg[t].peer_port = tg[(t + 2) % NT].from;
        tg[t].peer_other = tg[(t + 2) % NT + (tg[t].chan ? -1 : 1)].from;
    }
    if (optind < argc) {
        list = argv[optind];
    }
    for (int s = 0; s < NSCEN; s++) {
        want[s] =
            (0 == strcmp(list, "all")) || (0 == strcmp(list, "blind") && !scenarios[s].onpath);
    }
    if (0 != strcmp(list, "all") && 0 != strcmp(list, "blind")) {
        char *copy = strdup(list), *save = NULL;
        for (char *w = strtok_r(copy, ",", &save); NULL != w; w = strtok_r(NULL, ",", &save)) {
            int s;
            for (s = 0; s < NSCEN && 0 != strcmp(scenarios[s].name, w); s++) {
            }
            if (s == NSCEN) {
                fprintf(stderr, "hostile: unknown scenario '%s'\n", w);
                exit(1);
            }
            want[s] = true;
        }
        free(copy);
    }
    for (int s = 0; s < NSCEN; s++) {
        if (want[s] && scenarios[s].onpath && blind) {
            fprintf(stderr, "hostile: scenario %s needs the job's traffic (not with -b)\n",
                    scenarios[s].name);
            exit(1);
        }
    }
    if (!have_seed && sizeof(seed) != getrandom(&seed, sizeof(seed), 0)) {
        seed = (uint64_t) time(NULL) ^ ((uint64_t) getpid() << 32);
    }
    rng_s = seed;
    crc_init();

    udp_fd = socket(AF_INET, SOCK_DGRAM, 0);
    raw_fd = socket(AF_INET, SOCK_RAW, IPPROTO_RAW);
    if (udp_fd < 0 || raw_fd < 0) {
        perror("hostile: socket (the attacker must run as root)");
        return 1;
    }
    me.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (0 != bind(udp_fd, (struct sockaddr *) &me, sizeof(me))) {
        perror("hostile: bind");
        return 1;
    }
    (void) setsockopt(udp_fd, SOL_SOCKET, SO_SNDBUFFORCE, &bytes, sizeof(bytes));
    (void) setsockopt(raw_fd, SOL_SOCKET, SO_SNDBUFFORCE, &bytes, sizeof(bytes));
    {
        socklen_t sl = sizeof(me);
        getsockname(udp_fd, (struct sockaddr *) &me, &sl);
    }
    printf("hostile: seed=0x%016llx n=%u per port per scenario, rate<=%.0f/s and %.0f MB/s, %s, "
           "own port %u, targets rank0 %u/%u rank1 %u/%u (prio/data)\n",
           (unsigned long long) seed, n, rate, byte_rate / 1e6,
           blind ? "BLIND (no capture)" : "on-path (capturing lo)", ntohs(me.sin_port), tg[0].port,
           tg[1].port, tg[2].port, tg[3].port);

    if (!blind) {
        unsigned got;
        cap_fd = cap_open();
        if (cap_fd < 0) {
            return 1;
        }
        got = cap_sample(0.5, 4000);
        stash_early();
        printf("hostile: captured %u genuine datagrams\n", got);
        print_knowledge("at start");
        /* a CRC of our own over genuine packets must match theirs */
        for (int t = 0; t < NT; t++) {
            for (int ty = 1; ty <= 4 && crc_on(t); ty++) {
                for (int i = 0; i < kn[t].nsamp[ty]; i++) {
                    const struct sample *s = &kn[t].samp[ty][i];
                    if (pkt_crc(s->b, s->len) != get32(s->b, O_CRC)) {
                        printf("hostile: WARNING: our CRC32C of a genuine %zu-byte packet "
                               "differs from its crc field\n",
                               s->len);
                    }
                }
            }
        }
    }

    t0 = pace_start = now_s();
    for (int s = 0; s < NSCEN; s++) {
        const struct scenario *sc = &scenarios[s];
        double ts = now_s();
        char line[512];
        int off;
        if (!want[s]) {
            continue;
        }
        if (sc->onpath) {
            cap_sample(0.05, 400); /* current numbers, fresh packets */
        }
        off = snprintf(line, sizeof(line), "SCENARIO %-11s", sc->name);
        for (int t = 0; t < NT; t++) {
            const char *why = sc->onpath ? missing(sc, t) : NULL;
            scen_sent[t] = 0;
            if (NULL != why) {
                printf("hostile: scenario %s: port %u skipped: %s\n", sc->name, tg[t].port, why);
                rc = 2;
                continue;
            }
            sc->run(t, n);
        }
        for (int t = 0; t < NT; t++) {
            off += snprintf(line + off, sizeof(line) - (size_t) off, " %u=%llu", tg[t].port,
                            scen_sent[t]);
        }
        printf("%s total=%llu (%.2f s)\n", line,
               scen_sent[0] + scen_sent[1] + scen_sent[2] + scen_sent[3], now_s() - ts);
        fflush(stdout);
    }
    if (!blind) {
        print_knowledge("at end");
    }
    for (int t = 0; t < NT; t++) {
        printf("SENT %u %llu\n", tg[t].port, sent[t]);
    }
    for (int t = 0; t < NT; t++) {
        for (int r = 0; r < R__COUNT; r++) {
            if (expect[t][r]) {
                printf("EXPECT %u %s %llu\n", tg[t].port, reason_name[r], expect[t][r]);
            }
        }
    }
    printf("hostile: done: %llu datagrams (%llu bytes) in %.1f s, %llu send errors\n", total_sent,
           total_bytes, now_s() - t0, send_errors);
    return (0 != send_errors) ? 1 : rc;
}
