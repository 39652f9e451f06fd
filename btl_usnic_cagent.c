/*
 * The connectivity checker's engine and its host agent (btl_usnic_cc.h).
 *
 * The engine runs checks: one entry per (local address, peer address, full
 * size), each with its candidate sizes, a random nonce and the waiters to
 * tell.  It owns one UDP socket per local address.  It is driven by one
 * thread (the client's, btl_usnic_cclient.c) and needs no lock.
 *
 * The agent is the engine's front door for the other processes of the
 * host: a SOCK_SEQPACKET Unix socket; every message is one struct
 * usnic_cc_msg.  A client says HELLO with its version, the agent answers
 * HELLO with its own (a mismatch closes the connection: the client then
 * checks by itself), then REQ -> RES, any number, in any order, matched by
 * the client's id.  A verdict already known is answered at once.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* accept4, struct ucred */
#endif
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "btl_usnic_cagent.h"
#include "btl_usnic_cc.h"

/* sizes per check: the small ping, the full size, the ladder's rungs
 * below it (6 at most) and the search's probes between two rungs */
#define CC_MAX_SIZES 32
/* probes sent per round between the largest size answered and the
 * smallest above it that is not: each round narrows the gap ninefold */
#define CC_SEARCH_PROBES 8
/* probes are multiples of this; the search stops once the gap is no wider */
#define CC_SEARCH_STEP 4u
#define CC_MAX_SOCKS 16

struct cc_waiter {
    uint64_t waiter;
};

struct cc_entry {
    struct usnic_cc_req req;
    int sock;                     /* index into e->socks, -1: none could be opened */
    uint32_t sizes[CC_MAX_SIZES]; /* sizes[0] the small ping, sizes[1] the full size */
    int nsizes;
    uint32_t answered; /* bit i: sizes[i] came back */
    uint64_t nonce;
    struct usnic_sip_key secret; /* the pinged module's: key of its pongs' MAC */
    uint64_t next_us;            /* next round due */
    int rounds;
    bool done;
    struct usnic_cc_result res;
    struct cc_waiter *w;
    int nw, cap_w;
};

struct cc_sock {
    uint32_t ip;
    uint16_t port; /* network byte order: where its pings come from (their MAC) */
    int fd;
};

struct cc_engine {
    int ack_timeout_ms, num_retries;
    cc_done_fn done;
    void *ctx;
    void (*log)(int, const char *);
    struct cc_entry *ent;
    int nent, cap_ent;
    struct cc_sock socks[CC_MAX_SOCKS];
    int nsocks;
    _Alignas(struct usnic_cc_ping) uint8_t buf[USNIC_CC_MAX_DGRAM + 1]; /* read as a ping header */
};

static void elog(const struct cc_engine *e, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void elog(const struct cc_engine *e, int level, const char *fmt, ...)
{
    char msg[256];
    va_list ap;

    if (NULL == e->log) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    e->log(level, msg);
}

/* IP packet sizes commonly met below a path's MTU: a black hole usually
 * passes one of them.  As UDP payloads (IPv4 + UDP headers: 28 bytes). */
static const uint32_t cc_ladder[] = {9000 - 28, 4096 - 28, 1500 - 28,
                                     1400 - 28, 1280 - 28, 576 - 28};

struct cc_engine *cc_engine_new(int ack_timeout_ms, int num_retries, cc_done_fn done, void *ctx,
                                void (*log)(int, const char *))
{
    struct cc_engine *e = calloc(1, sizeof(*e));

    if (NULL == e) {
        return NULL;
    }
    e->ack_timeout_ms = ack_timeout_ms > 0 ? ack_timeout_ms : 1;
    e->num_retries = num_retries > 0 ? num_retries : 1;
    e->done = done;
    e->ctx = ctx;
    e->log = log;
    return e;
}

void cc_engine_free(struct cc_engine *e)
{
    if (NULL == e) {
        return;
    }
    for (int i = 0; i < e->nsocks; i++) {
        close(e->socks[i].fd);
    }
    for (int i = 0; i < e->nent; i++) {
        free(e->ent[i].w);
    }
    free(e->ent);
    free(e);
}

static int engine_sock(struct cc_engine *e, uint32_t ip)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = ip};
    socklen_t slen = sizeof(sin);
    int fd, v = IP_PMTUDISC_PROBE;
    char a[INET_ADDRSTRLEN];

    for (int i = 0; i < e->nsocks; i++) {
        if (e->socks[i].ip == ip) {
            return i;
        }
    }
    inet_ntop(AF_INET, &ip, a, sizeof(a));
    if (e->nsocks == CC_MAX_SOCKS) {
        elog(e, 5, "no socket for %s: more than %d local addresses", a, CC_MAX_SOCKS);
        return -1;
    }
    fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        elog(e, 5, "no socket for %s: %s", a, strerror(errno));
        return -1;
    }
    /* DF on every ping, whatever the kernel believes the path MTU is */
    if (0 != setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &v, sizeof(v)) ||
        0 != bind(fd, (struct sockaddr *) &sin, sizeof(sin)) ||
        0 != getsockname(fd, (struct sockaddr *) &sin, &slen)) {
        elog(e, 5, "no socket for %s: %s", a, strerror(errno));
        close(fd);
        return -1;
    }
    e->socks[e->nsocks].ip = ip;
    e->socks[e->nsocks].port = sin.sin_port;
    e->socks[e->nsocks].fd = fd;
    return e->nsocks++;
}

static void finish(struct cc_engine *e, struct cc_entry *x, uint32_t status, uint32_t size)
{
    if (0 != x->res.forged) {
        elog(e, 5, "%u pongs with a wrong MAC dropped during this check", x->res.forged);
    }
    x->done = true;
    x->res.status = status;
    x->res.size = size;
    x->res.rounds = (uint32_t) x->rounds;
    x->res.by_agent = 0; /* (forged: counted since entry_start) */
    for (int i = 0; i < x->nw; i++) {
        /* every process of the host that waited gets the verdict, but
         * the forged pongs go to the count of one of them only: summed
         * over the job, cc_forged is what was dropped */
        struct usnic_cc_result res = x->res;
        if (i > 0) {
            res.forged = 0;
        }
        e->done(e->ctx, x->w[i].waiter, &x->req, &res);
    }
    x->nw = 0;
}

static void add_waiter(struct cc_entry *x, uint64_t waiter)
{
    if (x->nw == x->cap_w) {
        int cap = x->cap_w ? 2 * x->cap_w : 4;
        struct cc_waiter *w = realloc(x->w, (size_t) cap * sizeof(*w));
        if (NULL == w) {
            return; /* the waiter's own timeout covers it */
        }
        x->w = w;
        x->cap_w = cap;
    }
    x->w[x->nw++].waiter = waiter;
}

/* (Re)start entry x as a new check of req: its sizes, a fresh nonce, the
 * first round at once.  Its waiters (none after a verdict) stay. */
static void entry_start(struct cc_engine *e, struct cc_entry *x, const struct usnic_cc_req *req,
                        uint64_t now_us)
{
    uint32_t full = req->full;

    x->req = *req;
    usnic_sip_key_load(&x->secret, req->remote_secret);
    x->nsizes = 0;
    x->answered = 0;
    x->rounds = 0;
    x->done = false;
    memset(&x->res, 0, sizeof(x->res));
    if (full > USNIC_CC_MAX_DGRAM) {
        full = USNIC_CC_MAX_DGRAM;
    }
    if (full < USNIC_CC_SMALL) {
        full = USNIC_CC_SMALL;
    }
    x->sizes[x->nsizes++] = USNIC_CC_SMALL;
    if (full > USNIC_CC_SMALL) {
        x->sizes[x->nsizes++] = full;
    }
    for (size_t i = 0; i < sizeof(cc_ladder) / sizeof(cc_ladder[0]); i++) {
        if (cc_ladder[i] < full && cc_ladder[i] > USNIC_CC_SMALL && x->nsizes < CC_MAX_SIZES) {
            x->sizes[x->nsizes++] = cc_ladder[i];
        }
    }
    if (0 != getrandom(&x->nonce, sizeof(x->nonce), GRND_NONBLOCK) || 0 == x->nonce) {
        x->nonce = now_us * 0x9e3779b97f4a7c15ull ^ (uint64_t) (uintptr_t) x;
    }
    x->next_us = now_us; /* the first round goes out at once */
    x->sock = engine_sock(e, req->local_ip);
}

void cc_engine_add(struct cc_engine *e, const struct usnic_cc_req *req, uint64_t waiter,
                   uint64_t now_us)
{
    struct cc_entry *x = NULL;

    for (int i = 0; i < e->nent; i++) {
        struct cc_entry *y = &e->ent[i];
        if (y->req.local_ip == req->local_ip && y->req.remote_ip == req->remote_ip &&
            y->req.full == req->full) {
            x = y;
            break;
        }
    }
    if (NULL != x && !x->done) {
        add_waiter(x, waiter); /* the same check under way */
        return;
    }
    if (NULL != x && 0 == req->epoch) {
        struct usnic_cc_result res = x->res;
        res.forged = 0;                         /* (counted with the first waiter: finish) */
        e->done(e->ctx, waiter, &x->req, &res); /* the verdict kept */
        return;
    }
    if (NULL != x) {
        /* a check again while the job runs: the verdict given may be old */
        elog(e, 20, "checking a path again (re-check %u)", (unsigned) req->epoch);
        entry_start(e, x, req, now_us);
    } else {
        if (e->nent == e->cap_ent) {
            int cap = e->cap_ent ? 2 * e->cap_ent : 16;
            struct cc_entry *n = realloc(e->ent, (size_t) cap * sizeof(*n));
            if (NULL == n) {
                struct usnic_cc_result res = {.status = USNIC_CC_UNCHECKED};
                e->done(e->ctx, waiter, req, &res);
                return;
            }
            e->ent = n;
            e->cap_ent = cap;
        }
        x = &e->ent[e->nent++];
        memset(x, 0, sizeof(*x));
        entry_start(e, x, req, now_us);
    }
    add_waiter(x, waiter);
    if (x->sock < 0) {
        finish(e, x, USNIC_CC_UNCHECKED, 0);
    }
}

void cc_engine_forget(struct cc_engine *e, uint32_t tag)
{
    for (int i = 0; i < e->nent; i++) {
        struct cc_entry *x = &e->ent[i];
        int k = 0;
        for (int j = 0; j < x->nw; j++) {
            if ((uint32_t) (x->w[j].waiter >> 32) != tag) {
                x->w[k++] = x->w[j];
            }
        }
        x->nw = k;
    }
}

int cc_engine_fds(const struct cc_engine *e, int *fds, int max)
{
    int n = 0;

    for (int i = 0; i < e->nsocks && n < max; i++) {
        fds[n++] = e->socks[i].fd;
    }
    return n;
}

/* The largest size answered above the small ping (0: none), and the
 * smallest size above it that is not (0: none). */
static void answered_bounds(const struct cc_entry *x, uint32_t *lo, uint32_t *hi)
{
    *lo = 0;
    *hi = 0;
    for (int j = 1; j < x->nsizes; j++) {
        if ((x->answered & (1u << j)) && x->sizes[j] > *lo) {
            *lo = x->sizes[j];
        }
    }
    for (int j = 1; j < x->nsizes; j++) {
        if (!(x->answered & (1u << j)) && x->sizes[j] > *lo && (0 == *hi || x->sizes[j] < *hi)) {
            *hi = x->sizes[j];
        }
    }
}

/*
 * The ladder's rungs are far apart (8972, 4068, 1472, ...): a path of an
 * MTU between two of them, say 8000 bytes, or 1450 under a VXLAN overlay,
 * would get the rung below (4068, 1372).  Once a rung came back and the
 * size above it did not, every round also probes CC_SEARCH_PROBES sizes
 * evenly spread between them, and the next round searches the gap left
 * between the largest of those that came back and the smallest that did
 * not: 4068 to 8972 is down to 60 bytes after two rounds and to a few
 * bytes after four, the search of RFC 8899 done in parallel.  The rungs
 * still go first: most black holes sit exactly on one (a 1500-byte port
 * in a 9000-byte network).
 */
static void search_probes(struct cc_entry *x, uint32_t lo, uint32_t hi)
{
    uint32_t gap;

    if (lo < USNIC_CC_MIN_USEFUL || 0 == hi || hi - lo <= CC_SEARCH_STEP) {
        return;
    }
    gap = hi - lo;
    for (uint32_t k = 1; k <= CC_SEARCH_PROBES && x->nsizes < CC_MAX_SIZES; k++) {
        uint32_t s = lo + (uint32_t) ((uint64_t) gap * k / (CC_SEARCH_PROBES + 1));
        s -= s % CC_SEARCH_STEP;
        if (s > lo && s < hi && s != x->sizes[x->nsizes - 1]) {
            x->sizes[x->nsizes++] = s;
        }
    }
}

/* Whether size i goes out again this round: the small ping and the full
 * size until they came back, and the sizes above the largest answered up
 * to the smallest unanswered above it (a ping lost by chance gets another
 * try); sizes below the largest answered, or above a smaller failure,
 * would tell nothing new. */
static bool resend_size(const struct cc_entry *x, int i, uint32_t lo, uint32_t hi)
{
    if (x->answered & (1u << i)) {
        return false;
    }
    if (i <= 1 || 0 == lo) {
        return true;
    }
    return x->sizes[i] > lo && x->sizes[i] <= hi;
}

static void send_round(struct cc_engine *e, struct cc_entry *x)
{
    struct sockaddr_in to = {
        .sin_family = AF_INET, .sin_addr.s_addr = x->req.remote_ip, .sin_port = x->req.remote_port};
    struct usnic_cc_ping *p = (struct usnic_cc_ping *) e->buf;
    uint32_t lo, hi;

    answered_bounds(x, &lo, &hi); /* (before the new probes, which lie between) */
    if (x->rounds > 0) {
        search_probes(x, lo, hi);
    }
    /* the first round asks for the small and the full size only: most
     * paths carry the full size, and then two pings do */
    for (int i = 0; i < (0 == x->rounds && x->nsizes > 2 ? 2 : x->nsizes); i++) {
        if (!resend_size(x, i, lo, hi)) {
            continue;
        }
        memset(e->buf, 0xa5, x->sizes[i]);
        memset(p, 0, sizeof(*p));
        p->magic = USNIC_CC_MAGIC;
        p->version = USNIC_CC_VERSION;
        p->type = USNIC_CC_PING;
        p->size = x->sizes[i];
        p->to_key = x->req.remote_key;
        p->nonce = x->nonce;
        usnic_sip_tag_store(
            p->mac, usnic_cc_ping_mac(&x->secret, p, e->socks[x->sock].ip, e->socks[x->sock].port));
        /* EMSGSIZE (larger than our own interface takes) is as good as lost */
        (void) sendto(e->socks[x->sock].fd, e->buf, x->sizes[i], MSG_DONTWAIT,
                      (struct sockaddr *) &to, sizeof(to));
    }
}

/* A pong arrived on socket s. */
static void take_pong(struct cc_engine *e, int s, size_t len, const struct sockaddr_in *from)
{
    const struct usnic_cc_ping *p = (const struct usnic_cc_ping *) e->buf;

    if (len < sizeof(*p) || USNIC_CC_MAGIC != p->magic || USNIC_CC_VERSION != p->version ||
        USNIC_CC_PONG != p->type || p->size != len) {
        return;
    }
    for (int i = 0; i < e->nent; i++) {
        struct cc_entry *x = &e->ent[i];
        if (x->done || x->sock != s || x->nonce != p->nonce ||
            x->req.remote_ip != from->sin_addr.s_addr || x->req.remote_port != from->sin_port) {
            continue;
        }
        if (p->to_key != x->req.remote_key ||
            !usnic_sip_tag_equal(usnic_sip_tag_load(p->mac), usnic_cc_pong_mac(&x->secret, p))) {
            /* not from the process pinged (someone who read the ping) */
            if (0 == x->res.forged++) {
                char a[INET_ADDRSTRLEN];
                inet_ntop(AF_INET, &from->sin_addr, a, sizeof(a));
                elog(e, 5, "a %zu-byte pong from %s:%u has a wrong MAC: dropped", len, a,
                     (unsigned) ntohs(from->sin_port));
            }
            return;
        }
        for (int j = 0; j < x->nsizes; j++) {
            if (x->sizes[j] == len) {
                x->answered |= 1u << j;
            }
        }
        if (x->nsizes > 1 ? (x->answered & 3u) == 3u : (x->answered & 1u)) {
            finish(e, x, USNIC_CC_OK, x->sizes[x->nsizes > 1 ? 1 : 0]);
        }
        return;
    }
}

/* A check again while the job runs (epoch > 0) comes after data of the
 * size in use stayed unacknowledged through retransmissions for a second
 * or more (or from the raise timer): once the small ping and a smaller
 * size came back while the full size went unanswered through this many
 * rounds, the full size is as good as lost, and waiting for num_retries
 * rounds would only keep the data stuck longer. */
#define CC_RECHECK_ROUNDS 4

static bool verdict_due(const struct cc_engine *e, const struct cc_entry *x)
{
    if (x->rounds >= e->num_retries) {
        return true;
    }
    return 0 != x->req.epoch && x->rounds >= CC_RECHECK_ROUNDS && (x->answered & 1u) &&
           0 != (x->answered & ~3u);
}

static void verdict(struct cc_engine *e, struct cc_entry *x)
{
    uint32_t best = 0;

    if (!(x->answered & 1u)) {
        finish(e, x, USNIC_CC_NOPATH, 0);
        return;
    }
    for (int j = 1; j < x->nsizes; j++) {
        if ((x->answered & (1u << j)) && x->sizes[j] > best) {
            best = x->sizes[j];
        }
    }
    finish(e, x, USNIC_CC_REDUCED, best);
}

int cc_engine_run(struct cc_engine *e, int ready_fd, uint64_t now_us)
{
    int64_t next = -1;

    for (int s = 0; s < e->nsocks; s++) {
        if (e->socks[s].fd != ready_fd) {
            continue;
        }
        for (int n = 0; n < 256; n++) {
            struct sockaddr_in from;
            socklen_t fl = sizeof(from);
            ssize_t r = recvfrom(e->socks[s].fd, e->buf, sizeof(e->buf), MSG_DONTWAIT,
                                 (struct sockaddr *) &from, &fl);
            if (r < 0) {
                if (EAGAIN == errno || EWOULDBLOCK == errno) {
                    break;
                }
                continue; /* an ICMP error queued on the socket: the round's timer decides */
            }
            if (fl == sizeof(from) && AF_INET == from.sin_family) {
                take_pong(e, s, (size_t) r, &from);
            }
        }
    }
    for (int i = 0; i < e->nent; i++) {
        struct cc_entry *x = &e->ent[i];
        if (x->done) {
            continue;
        }
        if (now_us >= x->next_us) {
            if (verdict_due(e, x)) {
                verdict(e, x);
                continue;
            }
            send_round(e, x);
            x->rounds++;
            x->next_us = now_us + (uint64_t) e->ack_timeout_ms * 1000u;
        }
        if (next < 0 || (int64_t) (x->next_us - now_us) < next) {
            next = (int64_t) (x->next_us - now_us);
        }
    }
    return next < 0 ? -1 : (int) ((next + 999) / 1000);
}

uint64_t usnic_cc_pong_mac(const struct usnic_sip_key *secret, const struct usnic_cc_ping *pong)
{
    return usnic_siphash24(secret, pong, offsetof(struct usnic_cc_ping, mac));
}

uint64_t usnic_cc_ping_mac(const struct usnic_sip_key *secret, const struct usnic_cc_ping *ping,
                           uint32_t from_ip, uint16_t from_port)
{
    return usnic_sip_request_mac(secret, ping, offsetof(struct usnic_cc_ping, mac), from_ip,
                                 from_port);
}

bool usnic_cc_make_pong(uint8_t *buf, size_t len, uint64_t key, const struct usnic_sip_key *secret,
                        uint32_t from_ip, uint16_t from_port, bool *forged)
{
    struct usnic_cc_ping *p = (struct usnic_cc_ping *) buf;

    *forged = false;
    if (len < sizeof(*p) || len > USNIC_CC_MAX_DGRAM || USNIC_CC_MAGIC != p->magic ||
        USNIC_CC_VERSION != p->version || USNIC_CC_PING != p->type || 0 != p->zero ||
        0 != p->zero2 || p->size != len || p->to_key != key) {
        return false;
    }
    if (!usnic_sip_tag_equal(usnic_sip_tag_load(p->mac),
                             usnic_cc_ping_mac(secret, p, from_ip, from_port))) {
        *forged = true;
        return false;
    }
    p->type = USNIC_CC_PONG;
    usnic_sip_tag_store(p->mac, usnic_cc_pong_mac(secret, p));
    return true;
}

/* ---- the agent: the engine's door for the host's other processes ---- */

int cc_agent_listen(const char *path)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    int fd;

    if (strlen(path) >= sizeof(sun.sun_path)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    strcpy(sun.sun_path, path);
    fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -1;
    }
    unlink(path); /* a socket left by an earlier run of this job id */
    if (0 != bind(fd, (struct sockaddr *) &sun, sizeof(sun)) || 0 != chmod(path, 0600) ||
        0 != listen(fd, 128)) {
        int err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    return fd;
}

int cc_agent_accept(int lfd)
{
    int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    struct ucred cred;
    socklen_t cl = sizeof(cred);

    if (fd < 0) {
        return -1;
    }
    /* only processes of our own user talk to the agent */
    if (0 != getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) || cred.uid != geteuid()) {
        close(fd);
        return -1;
    }
    return fd;
}

bool cc_msg_valid(const struct usnic_cc_msg *m, ssize_t len)
{
    return len == (ssize_t) sizeof(*m) && USNIC_CC_MAGIC == m->magic && m->type >= CC_MSG_HELLO &&
           m->type <= CC_MSG_RES;
}
