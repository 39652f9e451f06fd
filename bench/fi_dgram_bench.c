/*
 * fi_dgram_bench: raw libfabric FI_EP_DGRAM benchmark (no MPI, no reliability).
 *
 * One command runs both sides: the program forks; the parent is the
 * "client" (pinger / streaming sender, it measures and prints), the child is
 * the "server" (echoer / streaming receiver).  Both open their own fabric,
 * domain, AV, CQs and endpoint bound to the interface address (default
 * 127.0.0.1) and exchange endpoint names over an AF_UNIX socketpair, which
 * is also used as the out-of-band control channel (start/stop of each test,
 * result reporting).  No datagram is ever sent to any address other than the
 * peer endpoint name obtained from fi_getname() on that interface address.
 *
 * Split mode runs the two sides as separate processes, e.g. in two network
 * namespaces or on two hosts: "-L addr" is the server (it waits for one
 * client on TCP addr:port and binds its endpoint to addr), "-C addr" the
 * client (its endpoint and its end of the control connection bound to -a,
 * it connects to the server at addr:port).  The control channel is then that
 * TCP connection; the client hands the server the settings it needs (provider,
 * largest datagram, queue depths, socket buffers), so the server takes no
 * other options.  Each side accepts only the peer endpoint whose address is
 * the other end of the control connection.  The streaming window needs the
 * receiver's clock: the client reads the server's CLOCK_MONOTONIC a few times
 * over the control connection; if every reading falls inside the round trip
 * that fetched it, both run on one kernel and share the clock (namespaces),
 * otherwise the offset of the fastest round trip is subtracted (reported).
 *
 * Tests
 *   lat     ping-pong, half round-trip time in us (median/min/max over reps)
 *   stream  one-way streaming: the sender sends size-d datagrams back to back
 *           for a fixed time; the receiver keeps receives posted, counts the
 *           datagrams of this run that arrive.  Reported:
 *             bw     goodput MB/s (1 MB = 1e6 bytes), bytes received / window
 *             rate   datagrams received per second
 *             loss   fraction of sent datagrams that never arrived
 *             txrate datagrams/s the sender managed to hand to the provider
 *           The window runs from the sender's first send to the receiver's
 *           last counted receive (both use CLOCK_MONOTONIC on the same host;
 *           split mode: see above).
 *
 * Output: one machine-readable line per test and size:
 *     test size median min max unit
 * Comment lines start with '#'.  -h additionally prints a human table
 * (also as '#' lines, so the output stays machine-readable).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include "btl_usnic_util.h"
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#define MAX_SIZES 64
#define MAX_REPS 1000
#define MAX_ADDRLEN 128
#define UDP4_MAX_PAYLOAD 65507 /* 65535 - 20 (IPv4) - 8 (UDP) */
#define WAIT_TIMEOUT_S 2.0     /* a ping-pong reply not seen within this: fail */
#define CTL_PORT_DEFAULT 47472 /* split mode: TCP control port */
#define ACCEPT_TIMEOUT_S 60    /* split mode: server waits this long for its client */
#define CONNECT_TIMEOUT_S 10   /* split mode: client retries connecting this long */
#define CLOCK_SAMPLES 16       /* split mode: server clock readings */

/* ------------------------------------------------------------------------ */
/* options                                                                   */

struct opts {
    const char *prov;
    const char *addr;
    size_t dsizes[MAX_SIZES]; /* -d list: the "big" datagram sizes */
    int ndsizes;
    size_t bsizes[MAX_SIZES]; /* -b list: extra (small) streaming sizes */
    int nbsizes;
    long lat_min, lat_max; /* -s / -S range of power-of-two ping-pong sizes */
    int do_lat, do_stream;
    int reps;
    long lat_iters; /* 0: automatic */
    double stream_ms;
    int rx_depth;
    int rx_depth_set; /* -R given: keep all rx_depth receives posted */
    int tx_depth;
    int human;
    int no_inject;
    int strict;  /* refuse sizes above the advertised max_msg_size */
    int sockbuf; /* -B: kernel socket buffer bytes (0 = system default) */
    int verbose;
    int split;            /* 0: fork both sides; 'L': split-mode server; 'C': client */
    const char *ctl_addr; /* -L / -C address */
    int ctl_port;         /* -P */
};

static struct opts o;
static const char *self_name = "client";

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "fi_dgram_bench[%s]: ", self_name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------------------ */
/* control channel (AF_UNIX socketpair between parent and child)            */

enum {
    CTL_ADDR = 1, /* a: addrlen, payload addr */
    CTL_PINGPONG, /* size, a: number of round trips to echo */
    CTL_PP_DONE,
    CTL_STREAM, /* size, a: run id */
    CTL_READY,
    CTL_STREAM_END, /* a: datagrams sent */
    CTL_STREAM_RES, /* a: datagrams received, b: bytes, t: last rx time */
    CTL_QUIT,
    CTL_ERROR,
    CTL_HELLO, /* split mode, client -> server: addr holds a struct hello */
    CTL_CLOCK  /* split mode: t: the server's CLOCK_MONOTONIC (reply) */
};

struct ctl {
    int32_t cmd;
    uint32_t size;
    int64_t a, b;
    double t;
    uint8_t addr[MAX_ADDRLEN];
};

static int ctl_fd = -1;

/* Split mode: the settings the server takes from its client. */
struct hello {
    uint32_t magic;
    uint32_t max_payload;
    int32_t rx_depth, rx_depth_set, tx_depth, sockbuf, strict, no_inject;
    char prov[64];
};
#define HELLO_MAGIC 0x66646231u /* "fdb1" */
_Static_assert(sizeof(struct hello) <= MAX_ADDRLEN, "struct hello must fit in ctl.addr");

/* The peer endpoint's address must be this one: our own interface address
 * (fork mode) or the other end of the control connection (split mode). */
static struct in_addr peer_ip;
static int peer_ip_set;
/* split mode: the server's CLOCK_MONOTONIC minus ours (0: same clock) */
static double clock_offset;

static void ctl_send(const struct ctl *c)
{
    const char *p = (const char *) c;
    size_t left = sizeof(*c);
    while (left) {
        ssize_t n = write(ctl_fd, p, left);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            die("control write: %s", strerror(errno));
        }
        p += n;
        left -= (size_t) n;
    }
}

/* Returns 1 when a message was read, 0 when none was pending (nonblock). */
static int ctl_recv_flags(struct ctl *c, int nonblock)
{
    char *p = (char *) c;
    size_t got = 0;
    while (got < sizeof(*c)) {
        ssize_t n =
            recv(ctl_fd, p + got, sizeof(*c) - got, (nonblock && got == 0) ? MSG_DONTWAIT : 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (nonblock && got == 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                return 0;
            die("control read: %s", strerror(errno));
        }
        if (n == 0) {
            if (strcmp(self_name, "server") == 0)
                _exit(0); /* client went away */
            die("control channel closed by peer");
        }
        got += (size_t) n;
    }
    if (c->cmd == CTL_ERROR)
        die("peer reported an error (see its message above)");
    return 1;
}

static void ctl_recv(struct ctl *c)
{
    (void) ctl_recv_flags(c, 0);
}

static void ctl_expect(struct ctl *c, int cmd)
{
    ctl_recv(c);
    if (c->cmd != cmd)
        die("control protocol: expected %d, got %d", cmd, c->cmd);
}

/* ------------------------------------------------------------------------ */
/* libfabric resources                                                       */

struct fab {
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_av *av;
    struct fid_cq *txcq, *rxcq;
    struct fid_ep *ep;
    struct fid_mr *mr;
    void *desc;
    fi_addr_t peer;
    size_t prefix;      /* FI_MSG_PREFIX space in front of every buffer */
    size_t slot;        /* bytes per buffer slot: prefix + max datagram */
    size_t max_payload; /* largest datagram we will use */
    size_t advertised;  /* ep_attr->max_msg_size reported by the provider */
    size_t inject_size;
    int hint_accepted; /* fi_getinfo accepted a max_msg_size hint > 1472 */
    char *pool;        /* rx slots followed by tx slots */
    char *rxbuf, *txbuf;
    int rx_depth, tx_depth;
    int rx_posted;  /* receives currently posted */
    int rx_target;  /* how many to keep posted (see rx_target_for) */
    int *rx_parked; /* buffers not reposted while rx_posted >= rx_target */
    int rx_nparked;
    struct fi_context *rxctx, *txctx;
    int *txfree;
    int ntxfree;
    long tx_outstanding;
};

static struct fab F;

#define FI_CHECK(call)                                                                             \
    do {                                                                                           \
        int ret_ = (int) (call);                                                                   \
        if (ret_)                                                                                  \
            die("%s failed: %d (%s)", #call, ret_, fi_strerror(-ret_));                            \
    } while (0)

static struct fi_info *make_hints(size_t max_msg)
{
    struct fi_info *h = fi_allocinfo();
    if (!h)
        die("fi_allocinfo failed");
    h->ep_attr->type = FI_EP_DGRAM;
    h->caps = FI_MSG;
    /* modes this program can honour */
    h->mode = FI_CONTEXT | FI_MSG_PREFIX;
    h->addr_format = FI_SOCKADDR_IN;
    /* we can register local buffers if the provider wants it */
    h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR;
    h->domain_attr->threading = FI_THREAD_DOMAIN;
    h->fabric_attr->prov_name = strdup(o.prov);
    if (max_msg)
        h->ep_attr->max_msg_size = max_msg;
    return h;
}

static void fab_getinfo(void)
{
    struct fi_info *hints;
    int ret;

    /* First ask for an endpoint that can carry the largest datagram we want.
     * If the provider does not advertise that much, fall back to plain hints
     * and (unless -x) send the larger datagrams anyway. */
    hints = make_hints(o.ndsizes ? F.max_payload : 0);
    ret = fi_getinfo(FI_VERSION(1, 17), o.addr, NULL, FI_SOURCE, hints, &F.info);
    if (ret == 0) {
        F.hint_accepted = 1;
    } else if (ret == -FI_ENODATA) {
        fi_freeinfo(hints);
        hints = make_hints(0);
        ret = fi_getinfo(FI_VERSION(1, 17), o.addr, NULL, FI_SOURCE, hints, &F.info);
    }
    fi_freeinfo(hints);
    if (ret)
        die("fi_getinfo(prov=%s, node=%s, FI_EP_DGRAM) failed: %d (%s)", o.prov, o.addr, ret,
            fi_strerror(-ret));
    /* keep only the first match */
    if (F.info->next) {
        fi_freeinfo(F.info->next);
        F.info->next = NULL;
    }
    F.advertised = F.info->ep_attr->max_msg_size;
    F.inject_size = F.info->tx_attr->inject_size;
    F.prefix = (F.info->mode & FI_MSG_PREFIX) ? F.info->ep_attr->msg_prefix_size : 0;
}

static void fab_open(void)
{
    struct fi_cq_attr cqa;
    struct fi_av_attr ava;
    size_t i;

    FI_CHECK(fi_fabric(F.info->fabric_attr, &F.fabric, NULL));
    FI_CHECK(fi_domain(F.fabric, F.info, &F.domain, NULL));

    memset(&ava, 0, sizeof(ava));
    ava.type =
        F.info->domain_attr->av_type == FI_AV_UNSPEC ? FI_AV_TABLE : F.info->domain_attr->av_type;
    ava.count = 4;
    FI_CHECK(fi_av_open(F.domain, &ava, &F.av, NULL));

    F.rx_depth = o.rx_depth;
    if (F.info->rx_attr->size && (size_t) F.rx_depth > F.info->rx_attr->size)
        F.rx_depth = (int) F.info->rx_attr->size;
    F.tx_depth = o.tx_depth;
    if (F.info->tx_attr->size && (size_t) F.tx_depth > F.info->tx_attr->size)
        F.tx_depth = (int) F.info->tx_attr->size;

    memset(&cqa, 0, sizeof(cqa));
    cqa.format = FI_CQ_FORMAT_MSG;
    cqa.wait_obj = FI_WAIT_NONE;
    cqa.size = (size_t) F.tx_depth * 2;
    FI_CHECK(fi_cq_open(F.domain, &cqa, &F.txcq, NULL));
    cqa.size = (size_t) F.rx_depth * 2;
    FI_CHECK(fi_cq_open(F.domain, &cqa, &F.rxcq, NULL));

    FI_CHECK(fi_endpoint(F.domain, F.info, &F.ep, NULL));
    FI_CHECK(fi_ep_bind(F.ep, &F.av->fid, 0));
    FI_CHECK(fi_ep_bind(F.ep, &F.txcq->fid, FI_TRANSMIT));
    FI_CHECK(fi_ep_bind(F.ep, &F.rxcq->fid, FI_RECV));
    FI_CHECK(fi_enable(F.ep));
    if (o.sockbuf > 0) {
        /* the same kernel buffers the usnic BTL asks for (btl_usnic_udp_sockbuf),
         * found and sized by the BTL's own helper */
        struct sockaddr_in bound;
        size_t blen = sizeof(bound);
        int rcv = 0, snd = 0;
        if (fi_getname(&F.ep->fid, &bound, &blen) == 0 && bound.sin_family == AF_INET &&
            usnic_udp_tune_socket(&bound, o.sockbuf, &rcv, &snd) == 0) {
            if (o.verbose)
                fprintf(stderr, "%s: socket buffers receive %d send %d\n", self_name, rcv, snd);
        } else if (o.verbose) {
            fprintf(stderr, "%s: socket not found, buffers unchanged\n", self_name);
        }
    }

    /* buffers: slot = prefix + largest payload, 64-byte aligned */
    F.slot = (F.prefix + F.max_payload + 63) & ~(size_t) 63;
    if (F.slot == 0)
        F.slot = 64;
    size_t total = F.slot * (size_t) (F.rx_depth + F.tx_depth);
    if (posix_memalign((void **) &F.pool, 4096, total))
        die("out of memory (%zu bytes of buffers)", total);
    memset(F.pool, 0xa5, total);
    F.rxbuf = F.pool;
    F.txbuf = F.pool + F.slot * (size_t) F.rx_depth;

    if (F.info->domain_attr->mr_mode & FI_MR_LOCAL) {
        FI_CHECK(fi_mr_reg(F.domain, F.pool, total, FI_SEND | FI_RECV, 0, 0, 0, &F.mr, NULL));
        F.desc = fi_mr_desc(F.mr);
    }

    F.rxctx = calloc((size_t) F.rx_depth, sizeof(*F.rxctx));
    F.rx_parked = calloc((size_t) F.rx_depth, sizeof(*F.rx_parked));
    F.rx_target = F.rx_depth;
    F.txctx = calloc((size_t) F.tx_depth, sizeof(*F.txctx));
    F.txfree = calloc((size_t) F.tx_depth, sizeof(*F.txfree));
    if (!F.rxctx || !F.txctx || !F.txfree)
        die("out of memory");
    for (i = 0; i < (size_t) F.tx_depth; i++)
        F.txfree[i] = (int) i;
    F.ntxfree = F.tx_depth;
}

static void fab_close(void)
{
    if (F.ep)
        fi_close(&F.ep->fid);
    if (F.mr)
        fi_close(&F.mr->fid);
    if (F.txcq)
        fi_close(&F.txcq->fid);
    if (F.rxcq)
        fi_close(&F.rxcq->fid);
    if (F.av)
        fi_close(&F.av->fid);
    if (F.domain)
        fi_close(&F.domain->fid);
    if (F.fabric)
        fi_close(&F.fabric->fid);
    if (F.info)
        fi_freeinfo(F.info);
    free(F.pool);
    free(F.rxctx);
    free(F.txctx);
    free(F.txfree);
}

static void cq_error(struct fid_cq *cq, const char *which)
{
    struct fi_cq_err_entry e;
    memset(&e, 0, sizeof(e));
    ssize_t r = fi_cq_readerr(cq, &e, 0);
    if (r < 0)
        die("%s CQ error, and fi_cq_readerr failed: %zd", which, r);
    die("%s CQ error: %d (%s), prov_errno %d (%s)", which, e.err, fi_strerror(e.err), e.prov_errno,
        fi_cq_strerror(cq, e.prov_errno, e.err_data, NULL, 0));
}

static inline char *rx_slot(int i)
{
    return F.rxbuf + F.slot * (size_t) i;
}
static inline char *tx_slot(int i)
{
    return F.txbuf + F.slot * (size_t) i;
}

static void drain_tx(void);

static void post_rx(int i)
{
    for (;;) {
        ssize_t r = fi_recv(F.ep, rx_slot(i), F.slot, F.desc, FI_ADDR_UNSPEC, &F.rxctx[i]);
        if (r == 0) {
            F.rx_posted++;
            return;
        }
        if (r != -FI_EAGAIN)
            die("fi_recv: %zd (%s)", r, fi_strerror((int) -r));
        /* queue full: should not happen since we post at most rx_size */
        drain_tx();
    }
}

/* A receive completed into buffer i: post it again, or park it while
 * enough others are posted. */
static void recycle_rx(int i)
{
    F.rx_posted--;
    if (F.rx_posted < F.rx_target)
        post_rx(i);
    else
        F.rx_parked[F.rx_nparked++] = i;
}

/* Receives to keep posted for datagrams of this size.  -R N: always N.
 * Default: the rule of the usnic BTL's automatic btl_usnic_rd_num over the
 * udp provider, so both receive into the same number of buffers: enough
 * for 512 KiB (at least 8, at most the -R default of 512).  A small set
 * stays in the CPU cache; the kernel socket buffer queues the rest. */
static int rx_target_for(size_t size)
{
    size_t n;
    if (o.rx_depth_set)
        return F.rx_depth;
    n = (512u * 1024) / (size + F.prefix > 0 ? size + F.prefix : 1);
    if (n < 8)
        n = 8;
    return n > (size_t) F.rx_depth ? F.rx_depth : (int) n;
}

/* Keep rx_target_for(size) receives posted from now on: parked buffers are
 * posted at once; surplus ones are parked as their receives complete. */
static void set_rx_target(size_t size)
{
    F.rx_target = rx_target_for(size);
    while (F.rx_posted < F.rx_target && F.rx_nparked > 0)
        post_rx(F.rx_parked[--F.rx_nparked]);
}

static void drain_tx(void)
{
    struct fi_cq_msg_entry e[64];
    for (;;) {
        ssize_t n = fi_cq_read(F.txcq, e, 64);
        if (n == -FI_EAGAIN)
            return;
        if (n == -FI_EAVAIL)
            cq_error(F.txcq, "tx");
        if (n < 0)
            die("fi_cq_read(tx): %zd (%s)", n, fi_strerror((int) -n));
        for (ssize_t k = 0; k < n; k++) {
            int idx = (int) ((struct fi_context *) e[k].op_context - F.txctx);
            if (idx < 0 || idx >= F.tx_depth)
                die("tx completion with unknown context");
            F.txfree[F.ntxfree++] = idx;
            F.tx_outstanding--;
        }
        if (n < 64)
            return;
    }
}

/* Grab a free tx slot (progressing the tx CQ if needed). */
static int get_tx_slot(void)
{
    while (F.ntxfree == 0)
        drain_tx();
    return F.txfree[--F.ntxfree];
}

/* Send len payload bytes from tx slot idx.  Returns 0; dies on hard errors. */
static void send_slot(int idx, size_t len)
{
    char *buf = tx_slot(idx);
    size_t total = F.prefix + len;
    for (;;) {
        ssize_t r;
        if (!o.no_inject && len <= F.inject_size) {
            r = fi_inject(F.ep, buf, total, F.peer);
            if (r == 0) {
                F.txfree[F.ntxfree++] = idx; /* buffer reusable right away */
                return;
            }
        } else {
            r = fi_send(F.ep, buf, total, F.desc, F.peer, &F.txctx[idx]);
            if (r == 0) {
                F.tx_outstanding++;
                return;
            }
        }
        if (r == -FI_EAGAIN) {
            drain_tx();
            continue;
        }
        if (r == -EMSGSIZE)
            die("datagram of %zu bytes rejected by provider '%s': %s "
                "(advertised max_msg_size %zu)",
                len, o.prov, fi_strerror((int) -r), F.advertised);
        die("send of %zu bytes failed: %zd (%s)", len, r, fi_strerror((int) -r));
    }
}

/* Poll the rx CQ once; returns number of entries placed in e (0 if none). */
static int poll_rx(struct fi_cq_msg_entry *e, int max)
{
    ssize_t n = fi_cq_read(F.rxcq, e, (size_t) max);
    if (n == -FI_EAGAIN)
        return 0;
    if (n == -FI_EAVAIL)
        cq_error(F.rxcq, "rx");
    if (n < 0)
        die("fi_cq_read(rx): %zd (%s)", n, fi_strerror((int) -n));
    return (int) n;
}

static inline int rx_index(const struct fi_cq_msg_entry *e)
{
    int idx = (int) ((struct fi_context *) e->op_context - F.rxctx);
    if (idx < 0 || idx >= F.rx_depth)
        die("rx completion with unknown context");
    return idx;
}

/* Wait for exactly one received datagram; repost its buffer; return payload
 * length.  Dies after WAIT_TIMEOUT_S (a lost ping-pong datagram). */
static size_t wait_one_rx(void)
{
    struct fi_cq_msg_entry e;
    unsigned spins = 0;
    double t0 = 0;
    for (;;) {
        if (poll_rx(&e, 1) == 1) {
            recycle_rx(rx_index(&e));
            if (e.len < F.prefix)
                continue; /* provider-internal packet without payload */
            return e.len - F.prefix;
        }
        if (F.tx_outstanding)
            drain_tx();
        if ((++spins & 0xfff) == 0) {
            double t = now_s();
            if (t0 == 0)
                t0 = t;
            else if (t - t0 > WAIT_TIMEOUT_S)
                die("no datagram received for %.1f s (lost ping-pong datagram?)", WAIT_TIMEOUT_S);
        }
    }
}

/* Throw away anything still arriving (stale datagrams of a previous test),
 * until nothing arrived for quiet_s seconds. */
static long drain_rx(double quiet_s)
{
    struct fi_cq_msg_entry e[64];
    long n = 0;
    double last = now_s();
    for (;;) {
        int k = poll_rx(e, 64);
        for (int j = 0; j < k; j++)
            recycle_rx(rx_index(&e[j]));
        n += k;
        if (F.tx_outstanding)
            drain_tx();
        double t = now_s();
        if (k)
            last = t;
        else if (t - last >= quiet_s)
            return n;
    }
}

/* ------------------------------------------------------------------------ */
/* setup shared by both sides                                                */

/* The largest datagram the options ask for. */
static size_t wanted_payload(void)
{
    size_t m = 0;
    int i;
    for (i = 0; i < o.ndsizes; i++)
        if (o.dsizes[i] > m)
            m = o.dsizes[i];
    for (i = 0; i < o.nbsizes; i++)
        if (o.bsizes[i] > m)
            m = o.bsizes[i];
    if (o.do_lat && (size_t) o.lat_max > m)
        m = (size_t) o.lat_max;
    return m;
}

static void setup_both(void)
{
    struct ctl c;
    uint8_t name[MAX_ADDRLEN];
    size_t namelen = sizeof(name);
    int i;

    fab_getinfo();
    F.max_payload = wanted_payload();
    if (o.strict && F.max_payload > F.advertised)
        die("datagram size %zu exceeds the provider's advertised max_msg_size "
            "%zu (-x given)",
            F.max_payload, F.advertised);
    fab_open();

    FI_CHECK(fi_getname(&F.ep->fid, name, &namelen));
    if (namelen > MAX_ADDRLEN)
        die("endpoint name too long (%zu)", namelen);
    memset(&c, 0, sizeof(c));
    c.cmd = CTL_ADDR;
    c.a = (int64_t) namelen;
    memcpy(c.addr, name, namelen);
    ctl_send(&c);
    ctl_expect(&c, CTL_ADDR);

    /* only ever talk to the peer's name on our interface address (split
     * mode: on the address at the other end of the control connection) */
    if (c.a == (int64_t) sizeof(struct sockaddr_in)) {
        struct sockaddr_in sin;
        memcpy(&sin, c.addr, sizeof(sin));
        struct sockaddr_in mine;
        memcpy(&mine, name, sizeof(mine));
        if (!peer_ip_set) {
            if (sin.sin_family != AF_INET || sin.sin_addr.s_addr != mine.sin_addr.s_addr)
                die("peer address is not on our interface address, refusing");
        } else if (sin.sin_family != AF_INET || sin.sin_addr.s_addr != peer_ip.s_addr) {
            char want[INET_ADDRSTRLEN] = "?";
            inet_ntop(AF_INET, &peer_ip, want, sizeof(want));
            die("peer endpoint address is not %s (the control connection's peer), refusing", want);
        }
    }
    int n = fi_av_insert(F.av, c.addr, 1, &F.peer, 0, NULL);
    if (n != 1)
        die("fi_av_insert returned %d", n);

    for (i = 0; i < F.rx_depth; i++)
        post_rx(i);
}

/* ------------------------------------------------------------------------ */
/* server (child)                                                            */

static void server_main(void)
{
    struct ctl c;
    struct fi_cq_msg_entry e[64];

    setup_both();
    for (;;) {
        ctl_recv(&c);
        if (c.cmd == CTL_QUIT)
            break;
        if (c.cmd == CTL_PINGPONG) {
            size_t size = c.size;
            set_rx_target(size);
            for (int64_t i = 0; i < c.a; i++) {
                size_t len = wait_one_rx();
                if (len != size)
                    die("ping-pong: got %zu bytes, expected %zu", len, size);
                send_slot(get_tx_slot(), size);
            }
            drain_tx();
            memset(&c, 0, sizeof(c));
            c.cmd = CTL_PP_DONE;
            ctl_send(&c);
        } else if (c.cmd == CTL_STREAM) {
            size_t size = c.size;
            uint32_t runid = (uint32_t) c.a;
            long got = 0, bytes = 0, foreign = 0;
            double tlast = 0, tend = 0;
            int64_t sent = -1;
            unsigned spins = 0;
            set_rx_target(size);
            drain_rx(0.005);
            memset(&c, 0, sizeof(c));
            c.cmd = CTL_READY;
            ctl_send(&c);
            for (;;) {
                int k = poll_rx(e, 64);
                if (k) {
                    double t = now_s();
                    for (int j = 0; j < k; j++) {
                        int idx = rx_index(&e[j]);
                        size_t len = e[j].len >= F.prefix ? e[j].len - F.prefix : 0;
                        int ours = (len == size);
                        if (ours && size >= 8) {
                            uint32_t id;
                            memcpy(&id, rx_slot(idx) + F.prefix, 4);
                            ours = (id == runid);
                        }
                        if (ours) {
                            got++;
                            bytes += (long) len;
                            tlast = t;
                        } else {
                            foreign++;
                        }
                        recycle_rx(idx);
                    }
                }
                if (sent < 0) {
                    if (k == 0 || (++spins & 0xff) == 0) {
                        if (ctl_recv_flags(&c, 1)) {
                            if (c.cmd != CTL_STREAM_END)
                                die("control protocol: expected stream end");
                            sent = c.a;
                            tend = now_s();
                        }
                    }
                } else {
                    /* sender is done: stop when everything arrived or the
                     * link has been quiet for a while */
                    double t = now_s();
                    if (got >= sent)
                        break;
                    double lastact = tlast > tend ? tlast : tend;
                    if (t - lastact > 0.02)
                        break;
                }
            }
            memset(&c, 0, sizeof(c));
            c.cmd = CTL_STREAM_RES;
            c.a = got;
            c.b = bytes;
            c.t = tlast;
            ctl_send(&c);
            if (o.verbose && foreign)
                fprintf(stderr, "# server: %ld stale datagrams ignored\n", foreign);
        } else if (c.cmd == CTL_CLOCK) {
            double t = now_s();
            memset(&c, 0, sizeof(c));
            c.cmd = CTL_CLOCK;
            c.t = t;
            ctl_send(&c);
        } else {
            die("control protocol: unexpected command %d", c.cmd);
        }
    }
    fab_close();
}

/* ------------------------------------------------------------------------ */
/* client (parent): measurements                                             */

struct result {
    const char *test;
    size_t size;
    double med, min, max;
    const char *unit;
};

static struct result results[4 * MAX_SIZES * 2];
static int nresults;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

static void add_result(const char *test, size_t size, double *v, int n, const char *unit)
{
    double s[MAX_REPS];
    memcpy(s, v, sizeof(double) * (size_t) n);
    qsort(s, (size_t) n, sizeof(double), cmp_double);
    double med = (n & 1) ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    struct result *r = &results[nresults++];
    r->test = test;
    r->size = size;
    r->med = med;
    r->min = s[0];
    r->max = s[n - 1];
    r->unit = unit;
    if (strcmp(unit, "frac") == 0)
        printf("%s %zu %.6f %.6f %.6f %s\n", test, size, med, s[0], s[n - 1], unit);
    else
        printf("%s %zu %.3f %.3f %.3f %s\n", test, size, med, s[0], s[n - 1], unit);
    fflush(stdout);
}

static void fill_payload(int idx, size_t size)
{
    char *p = tx_slot(idx) + F.prefix;
    for (size_t i = 0; i < size; i++)
        p[i] = (char) (i * 7 + 1);
}

/* One batch of round trips, returns elapsed seconds. */
static double pingpong_batch(size_t size, long iters)
{
    struct ctl c;
    memset(&c, 0, sizeof(c));
    c.cmd = CTL_PINGPONG;
    c.size = (uint32_t) size;
    c.a = iters;
    set_rx_target(size);
    ctl_send(&c);
    /* give the server a moment to enter its loop: not needed for
     * correctness (datagrams queue in its socket), so just start */
    double t0 = now_s();
    for (long i = 0; i < iters; i++) {
        send_slot(get_tx_slot(), size);
        size_t len = wait_one_rx();
        if (len != size)
            die("ping-pong: got %zu bytes back, expected %zu", len, size);
    }
    double t1 = now_s();
    drain_tx();
    ctl_expect(&c, CTL_PP_DONE);
    return t1 - t0;
}

static void test_lat(size_t size)
{
    double v[MAX_REPS];
    long iters = o.lat_iters;
    if (!iters) {
        iters = 2000;
        if (size > 1024)
            iters = 1000;
        if (size > 16384)
            iters = 500;
    }
    for (int i = 0; i < F.tx_depth; i++)
        fill_payload(i, size);
    /* warm-up, then adapt so that a repetition takes roughly 50 ms */
    long warm = iters / 10 > 50 ? iters / 10 : 50;
    double tw = pingpong_batch(size, warm);
    if (!o.lat_iters) {
        double per = tw / (double) warm;
        long want = (long) (0.05 / (per > 1e-9 ? per : 1e-9));
        if (want < iters)
            iters = want < 100 ? 100 : want;
    }
    for (int r = 0; r < o.reps; r++)
        v[r] = pingpong_batch(size, iters) / (double) iters / 2.0 * 1e6;
    add_result("lat", size, v, o.reps, "us");
}

static uint32_t next_runid = 0x5eed0001;

/* One streaming repetition. */
static void stream_once(size_t size, double *bw, double *rate, double *loss, double *txrate)
{
    struct ctl c;
    uint32_t runid = next_runid++;
    memset(&c, 0, sizeof(c));
    c.cmd = CTL_STREAM;
    c.size = (uint32_t) size;
    c.a = runid;
    ctl_send(&c);
    ctl_expect(&c, CTL_READY);

    for (int i = 0; i < F.tx_depth; i++) {
        fill_payload(i, size);
        if (size >= 8)
            memcpy(tx_slot(i) + F.prefix, &runid, 4);
    }
    long sent = 0;
    double dur = o.stream_ms / 1000.0;
    double t0 = now_s(), t1 = t0;
    for (;;) {
        if ((sent & 63) == 0) {
            t1 = now_s();
            if (t1 - t0 >= dur)
                break;
        }
        int idx = get_tx_slot();
        if (size >= 8) {
            uint32_t seq = (uint32_t) sent;
            memcpy(tx_slot(idx) + F.prefix + 4, &seq, 4);
        }
        send_slot(idx, size);
        sent++;
        if ((sent & 15) == 0 && F.tx_outstanding)
            drain_tx();
    }
    while (F.tx_outstanding)
        drain_tx();

    memset(&c, 0, sizeof(c));
    c.cmd = CTL_STREAM_END;
    c.a = sent;
    ctl_send(&c);
    ctl_expect(&c, CTL_STREAM_RES);
    long got = (long) c.a;
    double bytes = (double) c.b;
    double win = c.t - clock_offset - t0;
    *txrate = (double) sent / (t1 - t0);
    *loss = sent ? 1.0 - (double) got / (double) sent : 0.0;
    if (got > 0 && win > 0) {
        *bw = bytes / win / 1e6;
        *rate = (double) got / win;
    } else {
        *bw = 0;
        *rate = 0;
    }
}

static void test_stream(size_t size)
{
    double bw[MAX_REPS], rate[MAX_REPS], loss[MAX_REPS], txr[MAX_REPS];
    double d1, d2, d3, d4;
    stream_once(size, &d1, &d2, &d3, &d4); /* warm-up */
    for (int r = 0; r < o.reps; r++)
        stream_once(size, &bw[r], &rate[r], &loss[r], &txr[r]);
    add_result("bw", size, bw, o.reps, "MB/s");
    add_result("rate", size, rate, o.reps, "msgs/s");
    add_result("loss", size, loss, o.reps, "frac");
    add_result("txrate", size, txr, o.reps, "msgs/s");
}

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *) a, y = *(const size_t *) b;
    return (x > y) - (x < y);
}

static int uniq_sizes(size_t *v, int n)
{
    qsort(v, (size_t) n, sizeof(size_t), cmp_size);
    int m = 0;
    for (int i = 0; i < n; i++)
        if (m == 0 || v[m - 1] != v[i])
            v[m++] = v[i];
    return m;
}

static void print_human(void)
{
    printf("#\n# %-7s %9s %14s %14s %14s %s\n", "test", "size", "median", "min", "max", "unit");
    for (int i = 0; i < nresults; i++) {
        struct result *r = &results[i];
        int prec = strcmp(r->unit, "frac") == 0 ? 6 : 2;
        printf("# %-7s %9zu %14.*f %14.*f %14.*f %s\n", r->test, r->size, prec, r->med, prec,
               r->min, prec, r->max, r->unit);
    }
}

static long read_sysctl(const char *path)
{
    FILE *f = fopen(path, "r");
    long v = -1;
    if (f) {
        if (fscanf(f, "%ld", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
}

/* Split mode: read the server's CLOCK_MONOTONIC CLOCK_SAMPLES times and set
 * clock_offset; describes the outcome in desc. */
static void clock_sync(char *desc, size_t desclen)
{
    double best_rtt = 1e30, best_off = 0;
    int same = 1;
    for (int i = 0; i < CLOCK_SAMPLES; i++) {
        struct ctl c;
        memset(&c, 0, sizeof(c));
        c.cmd = CTL_CLOCK;
        double t0 = now_s();
        ctl_send(&c);
        ctl_expect(&c, CTL_CLOCK);
        double t1 = now_s();
        if (c.t < t0 || c.t > t1)
            same = 0;
        if (t1 - t0 < best_rtt) {
            best_rtt = t1 - t0;
            best_off = c.t - 0.5 * (t0 + t1);
        }
    }
    if (same) {
        clock_offset = 0;
        snprintf(desc, desclen,
                 "shared CLOCK_MONOTONIC (all %d server readings inside their round "
                 "trips: same kernel)",
                 CLOCK_SAMPLES);
    } else {
        clock_offset = best_off;
        snprintf(desc, desclen,
                 "server clock offset %.1f us estimated from the fastest of %d round "
                 "trips (+-%.1f us)",
                 best_off * 1e6, CLOCK_SAMPLES, best_rtt * 0.5e6);
    }
}

static void client_main(void)
{
    size_t lat_sizes[MAX_SIZES + 32], st_sizes[2 * MAX_SIZES];
    int nlat = 0, nst = 0, i;
    char clockdesc[160] = "";

    setup_both();
    if (o.split)
        clock_sync(clockdesc, sizeof(clockdesc));

    if (o.do_lat) {
        if (o.lat_min <= 0 && o.lat_max >= 0)
            lat_sizes[nlat++] = 0;
        for (long s = 1; s <= o.lat_max; s *= 2)
            if (s >= o.lat_min)
                lat_sizes[nlat++] = (size_t) s;
        for (i = 0; i < o.ndsizes; i++)
            lat_sizes[nlat++] = o.dsizes[i];
        nlat = uniq_sizes(lat_sizes, nlat);
    }
    if (o.do_stream) {
        size_t dmin = (size_t) -1;
        for (i = 0; i < o.ndsizes; i++) {
            st_sizes[nst++] = o.dsizes[i];
            if (o.dsizes[i] < dmin)
                dmin = o.dsizes[i];
        }
        for (i = 0; i < o.nbsizes; i++)
            if (o.bsizes[i] < dmin)
                st_sizes[nst++] = o.bsizes[i];
        nst = uniq_sizes(st_sizes, nst);
    }

    struct sockaddr_in sin;
    size_t len = sizeof(sin);
    char abuf[64] = "?";
    if (fi_getname(&F.ep->fid, &sin, &len) == 0 && sin.sin_family == AF_INET)
        inet_ntop(AF_INET, &sin.sin_addr, abuf, sizeof(abuf));
    printf("# fi_dgram_bench provider=%s fabric=%s domain=%s addr=%s ep=FI_EP_DGRAM\n",
           F.info->fabric_attr->prov_name, F.info->fabric_attr->name, F.info->domain_attr->name,
           abuf);
    printf("# advertised max_msg_size=%zu inject_size=%zu msg_prefix_size=%zu "
           "mode=0x%llx rx_size=%zu tx_size=%zu\n",
           F.advertised, F.inject_size, F.prefix, (unsigned long long) F.info->mode,
           F.info->rx_attr->size, F.info->tx_attr->size);
    if (F.max_payload > F.advertised)
        printf("# largest datagram %zu > advertised max_msg_size %zu: fi_getinfo "
               "%s; sending oversize datagrams anyway\n",
               F.max_payload, F.advertised,
               F.hint_accepted ? "succeeded with the larger max_msg_size hint "
                                 "but did not raise max_msg_size (hint ignored)"
                               : "rejected the larger max_msg_size hint "
                                 "(FI_ENODATA), retried without it");
    else if (F.max_payload > 1472)
        printf("# max_msg_size hint %zu honoured by fi_getinfo\n", F.max_payload);
    printf("# posted receives=%d%s tx slots=%d reps=%d stream_time=%.0fms "
           "net.core.rmem_default=%ld\n",
           F.rx_depth, o.rx_depth_set ? "" : " (kept posted: 512 KiB worth, >= 8)", F.tx_depth,
           o.reps, o.stream_ms, read_sysctl("/proc/sys/net/core/rmem_default"));
    if (o.split)
        printf("# split mode: server %s (TCP control port %d), client %s; clocks: %s\n", o.ctl_addr,
               o.ctl_port, abuf, clockdesc);
    printf("# test size median min max unit\n");
    fflush(stdout);

    for (i = 0; i < nlat; i++)
        test_lat(lat_sizes[i]);
    for (i = 0; i < nst; i++)
        test_stream(st_sizes[i]);

    struct ctl c;
    memset(&c, 0, sizeof(c));
    c.cmd = CTL_QUIT;
    ctl_send(&c);
    if (o.human)
        print_human();
    fab_close();
}

/* ------------------------------------------------------------------------ */
/* split mode: the control channel is a TCP connection                      */

static struct in_addr parse_ip4(const char *s, const char *what)
{
    struct in_addr a;
    if (inet_pton(AF_INET, s, &a) != 1)
        die("%s: '%s' is not an IPv4 address", what, s);
    return a;
}

static void ctl_nodelay(int fd)
{
    int one = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)))
        die("setsockopt(TCP_NODELAY): %s", strerror(errno));
}

/* Server: wait for one client on ctl_addr:ctl_port, take its settings. */
static void split_server_start(void)
{
    struct sockaddr_in sa, pa;
    socklen_t plen = sizeof(pa);
    struct pollfd pfd;
    struct ctl c;
    struct hello h;
    int one = 1, r;

    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0)
        die("socket: %s", strerror(errno));
    if (setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)))
        die("setsockopt(SO_REUSEADDR): %s", strerror(errno));
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t) o.ctl_port);
    sa.sin_addr = parse_ip4(o.ctl_addr, "-L");
    if (bind(lfd, (struct sockaddr *) &sa, sizeof(sa)) || listen(lfd, 1))
        die("listening on %s:%d: %s", o.ctl_addr, o.ctl_port, strerror(errno));
    if (o.verbose)
        fprintf(stderr, "server: listening on %s:%d\n", o.ctl_addr, o.ctl_port);
    memset(&pfd, 0, sizeof(pfd));
    pfd.fd = lfd;
    pfd.events = POLLIN;
    do {
        r = poll(&pfd, 1, ACCEPT_TIMEOUT_S * 1000);
    } while (r < 0 && errno == EINTR);
    if (r < 0)
        die("poll: %s", strerror(errno));
    if (r == 0)
        die("no client connected to %s:%d within %d s", o.ctl_addr, o.ctl_port, ACCEPT_TIMEOUT_S);
    ctl_fd = accept4(lfd, (struct sockaddr *) &pa, &plen, SOCK_CLOEXEC);
    if (ctl_fd < 0)
        die("accept: %s", strerror(errno));
    close(lfd);
    ctl_nodelay(ctl_fd);
    peer_ip = pa.sin_addr;
    peer_ip_set = 1;

    ctl_expect(&c, CTL_HELLO);
    memcpy(&h, c.addr, sizeof(h));
    if (h.magic != HELLO_MAGIC)
        die("the control connection's peer is not a fi_dgram_bench client of this version");
    h.prov[sizeof(h.prov) - 1] = '\0';
    o.prov = strdup(h.prov);
    o.ndsizes = 1;
    o.dsizes[0] = h.max_payload;
    o.nbsizes = 0;
    o.do_lat = 0;
    o.rx_depth = h.rx_depth;
    o.rx_depth_set = h.rx_depth_set;
    o.tx_depth = h.tx_depth;
    o.sockbuf = h.sockbuf;
    o.strict = h.strict;
    o.no_inject = h.no_inject;
    if (!o.prov || o.rx_depth < 1 || o.tx_depth < 1)
        die("bad settings from the client");
}

/* Client: connect to the server (retrying while it is not listening yet)
 * from our own address, and hand it the settings it needs. */
static void split_client_start(void)
{
    struct sockaddr_in sa, me;
    struct ctl c;
    struct hello h;
    double t0 = now_s();

    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t) o.ctl_port);
    sa.sin_addr = parse_ip4(o.ctl_addr, "-C");
    memset(&me, 0, sizeof(me));
    me.sin_family = AF_INET;
    me.sin_addr = parse_ip4(o.addr, "-a");
    for (;;) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            die("socket: %s", strerror(errno));
        if (bind(fd, (struct sockaddr *) &me, sizeof(me)))
            die("binding the control connection to %s: %s", o.addr, strerror(errno));
        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) == 0) {
            ctl_fd = fd;
            break;
        }
        int e = errno;
        close(fd);
        if ((e != ECONNREFUSED && e != EINTR && e != ETIMEDOUT && e != EHOSTUNREACH &&
             e != ENETUNREACH) ||
            now_s() - t0 > CONNECT_TIMEOUT_S)
            die("connecting to the server at %s:%d: %s", o.ctl_addr, o.ctl_port, strerror(e));
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    ctl_nodelay(ctl_fd);
    peer_ip = sa.sin_addr;
    peer_ip_set = 1;

    memset(&h, 0, sizeof(h));
    h.magic = HELLO_MAGIC;
    h.max_payload = (uint32_t) wanted_payload();
    h.rx_depth = o.rx_depth;
    h.rx_depth_set = o.rx_depth_set;
    h.tx_depth = o.tx_depth;
    h.sockbuf = o.sockbuf;
    h.strict = o.strict;
    h.no_inject = o.no_inject;
    if (strlen(o.prov) >= sizeof(h.prov))
        die("provider name too long for split mode");
    strcpy(h.prov, o.prov);
    memset(&c, 0, sizeof(c));
    c.cmd = CTL_HELLO;
    memcpy(c.addr, &h, sizeof(h));
    ctl_send(&c);
}

/* ------------------------------------------------------------------------ */

static int parse_list(const char *s, size_t *v, int max, const char *what)
{
    int n = 0;
    char *dup = strdup(s), *save = NULL, *tok;
    for (tok = strtok_r(dup, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *end;
        long x = strtol(tok, &end, 0);
        if (*end == 'k' || *end == 'K')
            x *= 1024, end++;
        if (*end || x < 0 || x > UDP4_MAX_PAYLOAD + 100000L)
            die("bad %s value '%s'", what, tok);
        if (n == max)
            die("too many %s values", what);
        v[n++] = (size_t) x;
    }
    free(dup);
    return n;
}

static void usage(int code)
{
    fprintf(code ? stderr : stdout,
            "usage: fi_dgram_bench [options]\n"
            "  -p prov    libfabric provider (default udp)\n"
            "  -a addr    interface address both processes bind to (default 127.0.0.1;\n"
            "             with -C: this process's own address)\n"
            "  -L addr    split mode, server side: wait for one client on TCP addr:port\n"
            "             (-P) and bind the endpoint to addr; every other setting comes\n"
            "             from the client\n"
            "  -C addr    split mode, client side: connect to the server at addr:port\n"
            "             (-P); measures and prints as without it\n"
            "  -P port    split mode TCP control port (default 47472)\n"
            "  -d list    datagram size(s) for streaming, comma separated (default 1472);\n"
            "             each is also measured by ping-pong.  Sizes above the provider's\n"
            "             advertised max_msg_size are requested via the max_msg_size hint\n"
            "             and, if refused, sent anyway (use -x to forbid that)\n"
            "  -b list    additional smaller streaming sizes (default 8,64,256,1024)\n"
            "  -t tests   lat,stream (default both)\n"
            "  -s min     smallest ping-pong size (default 0)\n"
            "  -S max     largest power-of-two ping-pong size (default 1024)\n"
            "  -r reps    repetitions, median reported (default 5)\n"
            "  -n iters   ping-pong round trips per repetition (default: automatic)\n"
            "  -T ms      streaming time per repetition (default 100)\n"
            "  -R depth   posted receives (default: up to 512, capped by rx_attr->size, with\n"
            "             only enough for 512 KiB kept posted per datagram size, at least 8,\n"
            "             as the usnic BTL does over udp; -R N keeps all N posted)\n"
            "  -W depth   tx slots / outstanding sends (default 256)\n"
            "  -I         never use fi_inject (always fi_send + tx completion)\n"
            "  -B bytes   kernel socket buffer size to request (default 16777216, as the\n"
            "             usnic BTL's btl_usnic_udp_sockbuf; 0 = system default)\n"
            "  -x         strict: refuse datagrams above advertised max_msg_size\n"
            "  -h         also print a human-readable table ('#' lines)\n"
            "  -v         verbose\n"
            "Output lines: test size median min max unit   (tests: lat us, bw MB/s,\n"
            "rate msgs/s, loss frac, txrate msgs/s).\n");
    exit(code);
}

int main(int argc, char **argv)
{
    int ch;
    static const struct option lopts[] = {{"help", no_argument, NULL, 1000}, {NULL, 0, NULL, 0}};

    o.prov = "udp";
    o.addr = "127.0.0.1";
    o.lat_min = 0;
    o.lat_max = 1024;
    o.do_lat = o.do_stream = 1;
    o.reps = 5;
    o.stream_ms = 100;
    o.rx_depth = 512;
    o.tx_depth = 256;
    o.dsizes[0] = 1472;
    o.sockbuf = 16 * 1024 * 1024;
    o.ndsizes = 1;
    o.nbsizes = parse_list("8,64,256,1024", o.bsizes, MAX_SIZES, "-b");
    o.ctl_port = CTL_PORT_DEFAULT;

    while ((ch = getopt_long(argc, argv, "p:a:d:b:t:s:S:r:n:T:R:W:B:IxhvL:C:P:", lopts, NULL)) !=
           -1) {
        switch (ch) {
        case 'L':
        case 'C':
            if (o.split && o.split != ch)
                die("-L and -C exclude each other");
            o.split = ch;
            o.ctl_addr = optarg;
            break;
        case 'P':
            o.ctl_port = atoi(optarg);
            if (o.ctl_port < 1 || o.ctl_port > 65535)
                die("-P: bad port '%s'", optarg);
            break;
        case 'p':
            o.prov = optarg;
            break;
        case 'a':
            o.addr = optarg;
            break;
        case 'd':
            o.ndsizes = parse_list(optarg, o.dsizes, MAX_SIZES, "-d");
            break;
        case 'b':
            o.nbsizes = parse_list(optarg, o.bsizes, MAX_SIZES, "-b");
            break;
        case 't':
            o.do_lat = strstr(optarg, "lat") != NULL;
            o.do_stream = strstr(optarg, "stream") != NULL || strstr(optarg, "bw") != NULL;
            if (!o.do_lat && !o.do_stream)
                die("-t: expected lat and/or stream");
            break;
        case 's':
            o.lat_min = atol(optarg);
            break;
        case 'S':
            o.lat_max = atol(optarg);
            break;
        case 'r':
            o.reps = atoi(optarg);
            break;
        case 'n':
            o.lat_iters = atol(optarg);
            break;
        case 'T':
            o.stream_ms = atof(optarg);
            break;
        case 'R':
            o.rx_depth = atoi(optarg);
            o.rx_depth_set = 1;
            break;
        case 'W':
            o.tx_depth = atoi(optarg);
            break;
        case 'B':
            o.sockbuf = atoi(optarg);
            break;
        case 'I':
            o.no_inject = 1;
            break;
        case 'x':
            o.strict = 1;
            break;
        case 'h':
            o.human = 1;
            break;
        case 'v':
            o.verbose = 1;
            break;
        case 1000:
            usage(0);
            break;
        default:
            usage(2);
        }
    }
    if (optind < argc)
        usage(2);
    if (o.reps < 1 || o.reps > MAX_REPS)
        die("-r must be 1..%d", MAX_REPS);
    if (o.rx_depth < 1 || o.tx_depth < 1 || o.stream_ms <= 0)
        die("bad -R/-W/-T value");
    if (o.lat_max > UDP4_MAX_PAYLOAD)
        die("-S too large");
    if (o.ndsizes == 0)
        die("-d: need at least one size");

    if (o.split) {
        /* a vanished peer makes the control write fail (and die() say so)
         * rather than kill us with SIGPIPE */
        signal(SIGPIPE, SIG_IGN);
        if (o.split == 'L') {
            self_name = "server";
            o.addr = o.ctl_addr;
            split_server_start();
            server_main();
        } else {
            split_client_start();
            client_main();
        }
        close(ctl_fd);
        return 0;
    }

    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
        die("socketpair: %s", strerror(errno));
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        die("fork: %s", strerror(errno));
    if (pid == 0) {
        self_name = "server";
        close(sv[0]);
        ctl_fd = sv[1];
        server_main();
        _exit(0);
    }
    close(sv[1]);
    ctl_fd = sv[0];
    client_main();
    close(ctl_fd);
    int st = 0;
    if (waitpid(pid, &st, 0) < 0)
        die("waitpid: %s", strerror(errno));
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        die("server process failed (status 0x%x)", st);
    return 0;
}
