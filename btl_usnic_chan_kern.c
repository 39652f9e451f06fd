/*
 * The kernel backend (btl_usnic_chan.h): UDP sockets of our own, no
 * libfabric.  What it does that the libfabric udp provider cannot:
 *
 *  - receive in batches (recvmmsg), and with UDP_GRO on the data channel,
 *    where the kernel hands over several datagrams of one sender in one
 *    buffer, each split off here at the segment size it reports;
 *  - send the chunks of a fragment as a train: one sendmsg with
 *    UDP_SEGMENT, whose iovec interleaves each datagram's headers (in our
 *    segment) with its payload (in the user's or the pack buffer), so the
 *    payload is copied once, by the kernel, as with a single send; a train
 *    of datagrams of at most btl_usnic_train_copy bytes (MTU 1500) is
 *    copied into one buffer first instead, since the kernel's import of
 *    two pieces per datagram costs more than that copy (train_gather).
 *    Every datagram on the wire is still an independent MTU-sized packet
 *    with its own usnic header.  Where the kernel refuses UDP_SEGMENT the
 *    train goes out datagram by datagram from then on (verbose note,
 *    once).
 *
 *  - receive the chunks of a PUT or of a chunked fragment that arrives in
 *    order straight into the PUT's target or the fragment's reassembly
 *    buffer ("direct receive"): the iovec of the next receive puts each
 *    expected chunk's header in a buffer of ours and its payload where it
 *    belongs, so the payload is not copied once more on its way.  Whatever
 *    arrives instead lands in a part of that memory that no valid chunk
 *    has filled yet (btl_usnic_recv.c: direct_track), is copied back out
 *    and processed as usual, and the chunks that belong there overwrite it
 *    before the PUT or fragment can complete.
 *
 * Sends are complete when sendmsg returns (the kernel copied the data), so
 * there are no send completions; EAGAIN (socket buffer full) means try
 * later.  The source address of every arrival comes with it, for the
 * sender check (USNIC_SRC_SOCKET).
 *
 * Sends do not leave from the receiving socket of a channel but from a
 * port of their own (chan->tx_fd, published as tx_port in the modex
 * record): up to btl_usnic_connect_peers peers get a socket per channel
 * that shares that port (SO_REUSEPORT) and is connected to the peer's
 * channel, at our first send to them (kern_peer_connect).  An
 * unconnected send makes the kernel look up the route of every datagram;
 * a connected socket keeps it (docs/perf-kernel-backend.md, session 12:
 * 8-byte round trips 4-13% shorter at MTU 1500).  The receiving
 * socket cannot be connected instead: a socket connected to the peer's
 * port would take the peer's datagrams to that port away from it.  No
 * peer sends to a port we only send from, so these sockets drop whatever
 * reaches them (a socket filter that accepts nothing).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* recvmmsg */
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <stdatomic.h>
#include <linux/filter.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "btl_usnic.h"
#include "btl_usnic_chan.h"
#include "btl_usnic_endpoint.h"
#include "btl_usnic_live.h"
#include "btl_usnic_frag.h"
#include "btl_usnic_reg.h"
#include "btl_usnic_util.h"

#ifndef SOL_UDP
#define SOL_UDP 17
#endif
#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

/*
 * The data path's socket calls go to the kernel through syscall(2), not
 * through libc's wrappers of the same names.  Those are cancellation
 * points: in a process with more than one thread (Open MPI's run-time has
 * several, and so does the liveness check) each of them switches the
 * calling thread's cancellation type on before the system call and off
 * after it, two atomic operations on the thread's descriptor; in perf of a
 * busy-polling rank they were 5% of its samples.  A send or receive of
 * ours has no business being a cancellation point anyway.  Phase A/B at
 * MTU 1500 (docs/perf-kernel-backend.md, session 20): ping-pongs of 8 B to
 * 8 KiB 0.984-1.000 of the time with the wrappers, windows of 64 messages
 * 1.004-1.016 of the bandwidth.  Same arguments, results and errno as the
 * wrappers', which remain on an architecture without these system calls
 * of their own, or in a build with -DUSNIC_LIBC_SOCKET_CALLS.
 */
#if !defined(USNIC_LIBC_SOCKET_CALLS) && defined(SYS_recvfrom) && defined(SYS_recvmsg) &&          \
    defined(SYS_recvmmsg) && defined(SYS_sendmsg) && defined(SYS_sendmmsg) && defined(SYS_sendto)
#define KERN_RAW_SOCKET_CALLS 1
#else
#define KERN_RAW_SOCKET_CALLS 0
#endif

static inline ssize_t k_recvfrom(int fd, void *buf, size_t len, int flags, struct sockaddr *from,
                                 socklen_t *fromlen)
{
#if KERN_RAW_SOCKET_CALLS
    return (ssize_t) syscall(SYS_recvfrom, (long) fd, buf, len, (long) flags, from, fromlen);
#else
    return recvfrom(fd, buf, len, flags, from, fromlen);
#endif
}

static inline ssize_t k_recvmsg(int fd, struct msghdr *mh, int flags)
{
#if KERN_RAW_SOCKET_CALLS
    return (ssize_t) syscall(SYS_recvmsg, (long) fd, mh, (long) flags);
#else
    return recvmsg(fd, mh, flags);
#endif
}

static inline int k_recvmmsg(int fd, struct mmsghdr *msgs, unsigned int n, int flags)
{
#if KERN_RAW_SOCKET_CALLS
    return (int) syscall(SYS_recvmmsg, (long) fd, msgs, (unsigned long) n, (long) flags, NULL);
#else
    return recvmmsg(fd, msgs, n, flags, NULL);
#endif
}

static inline ssize_t k_sendmsg(int fd, const struct msghdr *mh, int flags)
{
#if KERN_RAW_SOCKET_CALLS
    return (ssize_t) syscall(SYS_sendmsg, (long) fd, mh, (long) flags);
#else
    return sendmsg(fd, mh, flags);
#endif
}

static inline int k_sendmmsg(int fd, struct mmsghdr *msgs, unsigned int n, int flags)
{
#if KERN_RAW_SOCKET_CALLS
    return (int) syscall(SYS_sendmmsg, (long) fd, msgs, (unsigned long) n, (long) flags);
#else
    return sendmmsg(fd, msgs, n, flags);
#endif
}

static inline ssize_t k_sendto(int fd, const void *buf, size_t len, int flags,
                               const struct sockaddr *to, socklen_t tolen)
{
#if KERN_RAW_SOCKET_CALLS
    return (ssize_t) syscall(SYS_sendto, (long) fd, buf, len, (long) flags, to,
                             (unsigned long) tolen);
#else
    return sendto(fd, buf, len, flags, to, tolen);
#endif
}

static inline ssize_t k_send(int fd, const void *buf, size_t len, int flags)
{
    return k_sendto(fd, buf, len, flags, NULL, 0);
}

/* At most this many bytes in one train (the kernel's limit is one IPv4
 * datagram: 65507 bytes of UDP payload). */
#define KERN_TRAIN_BYTES 65000u
/* A train needs at least two datagrams: only for data datagrams this small. */
#define KERN_TRAIN_DGRAM_MAX (KERN_TRAIN_BYTES / 2)
/* Arrivals read per recvmmsg call, at most. */
#define KERN_RX_BATCH 64

/* Direct receive: expected chunks per receive (at most what UDP_GRO can
 * coalesce into one 64 KiB receive), and receives per poll. */
#define KERN_DIRECT_SEGS 64
#define KERN_DIRECT_ROUNDS 32
#define KERN_GRO_BYTES 65536

/* Direct receive state of the data channel. */
struct kern_direct {
    union {
        uint8_t b[USNIC_HDR_LEN_MAX];
        uint64_t align;
    } hdr[KERN_DIRECT_SEGS];                    /* the expected chunks' headers land here */
    struct iovec iov[2 * KERN_DIRECT_SEGS + 1]; /* header, payload, ..., then tail */
    uint8_t *tail;   /* KERN_GRO_BYTES: what follows the expected chunks */
    uint8_t *gather; /* KERN_GRO_BYTES: a receive put back together */
};

/*
 * A held train (btl_usnic_tx_coalesce): a send left the data channel's
 * train open for the next messages to join.  The progress engine owns
 * chan->train except while the liveness thread sends a train that was
 * held too long: HELD_OPEN (nobody works on it) -> HELD_SENDING (the
 * thread took it) -> HELD_SENT (what happened is in the held_* fields);
 * the progress engine takes it back (HELD_OPEN -> HELD_NONE) before it
 * touches chan->train again, or, once sent, accounts for it and empties
 * it.  The thread writes nothing of the module but the train's own
 * datagrams and the channel's stage buffer.
 */
enum {
    HELD_NONE = 0,
    HELD_OPEN,
    HELD_SENDING,
    HELD_SENT
};

struct kern_held_result {
    bool ok;            /* the kernel took the train */
    int err;            /* errno if not */
    unsigned lanes;     /* header MACs computed 8 at a time */
    bool copied;        /* sent as one buffer (btl_usnic_train_copy) */
    uint64_t connected; /* sends on a connected socket */
};

/*
 * Trains (and datagrams too large to share one) that wait for the next
 * ones of the same send burst, to go to the kernel together in one
 * sendmmsg (btl_usnic_tx_batch).  A 1 MiB message is 16 trains of 64 KB
 * (or, on loopback, 16 datagrams of 64 KB): one system call each costs
 * its fixed part 16 times.  A raw loopback stream of 64 KB datagrams ran
 * at 7.8 GB/s with a sendmsg each and 10.2 GB/s in sendmmsg batches of 4-16
 * (docs/perf-kernel-backend.md, session 27).  Every message of a batch
 * goes to the same socket; the batch is sent when it is full, when the
 * next train goes elsewhere, and whenever the channel's train is flushed,
 * so nothing waits longer than its send burst, and the newest train stays
 * open (chan->train.n > 0) while older ones wait here: a pending batch is
 * never left behind by a caller that looks only at chan->train.
 */
#define KERN_BATCH_MAX 16
typedef union {
    char buf[CMSG_SPACE(sizeof(uint16_t))];
    struct cmsghdr align;
} kern_gso_ctrl; /* a UDP_SEGMENT control message */
struct kern_msg {
    usnic_seg_t *seg[USNIC_TRAIN_MAX];
    const mca_btl_base_endpoint_t *ep;
    int n;
    uint16_t gso;   /* the train's datagram length; 0: one datagram, no UDP_SEGMENT */
    bool copied;    /* one buffer (train_gather) */
    bool connected; /* on ep's connected socket */
    struct iovec iov[3 * USNIC_TRAIN_MAX];
    kern_gso_ctrl ctrl;
};
struct kern_batch {
    int n, fd;
    unsigned lanes; /* header MACs computed 8 at a time for what waits */
    struct mmsghdr mm[KERN_BATCH_MAX];
    struct kern_msg m[KERN_BATCH_MAX];
};

/* Receive state of a channel: every buffer is "posted" (handed to
 * recvmmsg) at every poll, in a fixed ring. */
struct kern_rx {
    int n;
    bool busy;                  /* its buffers are being processed: no recursive poll */
    bool single;                /* the last poll found at most one datagram (a GRO channel: none) */
    struct kern_direct *direct; /* data channel with UDP_GRO or large datagrams only */
    uint8_t *stage;           /* KERN_TRAIN_BYTES per batch slot: trains copied together (lazily) */
    struct kern_batch *batch; /* btl_usnic_tx_batch > 1 (lazily) */
    atomic_int held;          /* HELD_*: the data channel's train left open (see above) */
    uint64_t held_since;      /* when it was left open (usnic_now_us()) */
    struct kern_held_result held_res; /* HELD_SENT: what the thread's send did */
    usnic_seg_t **segs;
    struct mmsghdr *msgs;
    struct iovec *iov;
    struct sockaddr_in *from;
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } * ctrl;
};

static struct kern_rx *rx_of(usnic_channel_t *chan)
{
    return (struct kern_rx *) chan->backend_priv;
}

/* A UDP socket that takes nothing that arrives: its filter accepts no
 * datagram (we only send from it). */
static int deaf_socket(void)
{
    static struct sock_filter drop_all[] = {BPF_STMT(BPF_RET | BPF_K, 0)};
    struct sock_fprog prog = {.len = 1, .filter = drop_all};
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    if (fd >= 0 && 0 != setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog))) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

/* The channel's sending port (chan->tx_fd, tx_addr).  Bound first and
 * made SO_REUSEPORT after, so that the port is ours alone (a bind to port
 * 0 with SO_REUSEPORT may be given a port that a socket of the same user
 * shares already); the peers' connected sockets join it later.  Without
 * it the channel sends from its receiving socket. */
static void tx_open(usnic_module_t *module, usnic_channel_t *chan, int bytes)
{
    struct sockaddr_in sin = module->if_addr;
    socklen_t alen = sizeof(chan->tx_addr);
    int one = 1, rcv = 0, snd = 0;
    int fd = deaf_socket();

    sin.sin_port = 0;
    if (fd < 0 || 0 != bind(fd, (struct sockaddr *) &sin, sizeof(sin)) ||
        0 != getsockname(fd, (struct sockaddr *) &chan->tx_addr, &alen) ||
        0 != setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one))) {
        USNIC_VERBOSE(5, "%s: channel %d: no sending port of its own (%s): sending from %u",
                      module->ifname, chan->id, strerror(errno), ntohs(chan->addr.sin_port));
        if (fd >= 0) {
            close(fd);
        }
        memset(&chan->tx_addr, 0, sizeof(chan->tx_addr));
        return;
    }
    usnic_sock_buffers(fd, bytes, &rcv, &snd);
    chan->tx_fd = fd;
}

/* A socket of ep's own to its channel c: shares the channel's sending
 * port, connected to the peer's port.  -1 (errno set) if it cannot be. */
static int peer_socket(usnic_module_t *module, const mca_btl_base_endpoint_t *ep, int c)
{
    const usnic_channel_t *chan = &module->chan[c];
    int one = 1, rcv = 0, snd = 0;
    int fd = deaf_socket();
    struct rlimit rl;

    if (fd < 0) {
        return -1;
    }
    if (0 == getrlimit(RLIMIT_NOFILE, &rl) && RLIM_INFINITY != rl.rlim_cur &&
        (rlim_t) fd >= rl.rlim_cur / 2) {
        /* half the process's descriptors stay for the application */
        close(fd);
        errno = EMFILE;
        return -1;
    }
    if (0 != setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) ||
        0 != bind(fd, (const struct sockaddr *) &chan->tx_addr, sizeof(chan->tx_addr)) ||
        0 != connect(fd, (const struct sockaddr *) &ep->sin[c], sizeof(ep->sin[c]))) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    usnic_sock_buffers(fd, mca_btl_usnic_component.params.udp_sockbuf, &rcv, &snd);
    return fd;
}

static int channel_open(usnic_module_t *module, usnic_channel_t *chan, int tx_depth, int rx_depth)
{
    const usnic_params_t *p = &mca_btl_usnic_component.params;
    struct sockaddr_in sin = module->if_addr;
    socklen_t alen = sizeof(chan->addr);
    int rcv = 0, snd = 0;

    chan->prefix = 0;
    chan->tx_depth = tx_depth;
    chan->tx_credits = tx_depth; /* sends complete at once: never consumed */
    chan->inject_size = 0;
    chan->rx_depth = rx_depth;
    chan->sock_fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (chan->sock_fd < 0) {
        USNIC_VERBOSE(5, "%s: socket: %s", module->ifname, strerror(errno));
        return OPAL_ERROR;
    }
    sin.sin_port = 0;
    if (0 != bind(chan->sock_fd, (struct sockaddr *) &sin, sizeof(sin)) ||
        0 != getsockname(chan->sock_fd, (struct sockaddr *) &chan->addr, &alen)) {
        USNIC_VERBOSE(5, "%s: bind: %s", module->ifname, strerror(errno));
        return OPAL_ERROR;
    }
    usnic_sock_buffers(chan->sock_fd, p->udp_sockbuf, &rcv, &snd);
    chan->rcvbuf = rcv;
    tx_open(module, chan, p->udp_sockbuf);
    USNIC_VERBOSE(20, "%s: channel %d socket buffers: receive %d, send %d bytes", module->ifname,
                  chan->id, rcv, snd);
    chan->batch = USNIC_CHAN_DATA == chan->id && p->tx_batch > 1;
    if (USNIC_CHAN_DATA == chan->id && chan->mtu <= KERN_TRAIN_DGRAM_MAX) {
        int one = 1;
        chan->gso = (0 != p->gso);
        chan->gro =
            (0 != p->gso) && 0 == setsockopt(chan->sock_fd, SOL_UDP, UDP_GRO, &one, sizeof(one));
        if (0 != p->gso && !chan->gro) {
            USNIC_VERBOSE(10, "%s: UDP_GRO refused (%s): one datagram per receive", module->ifname,
                          strerror(errno));
        }
    }
    return OPAL_SUCCESS;
}

static void channel_close(usnic_channel_t *chan)
{
    struct kern_rx *rx = rx_of(chan);

    if (NULL != rx) {
        for (int i = 0; i < rx->n; i++) {
            if (NULL != rx->segs[i]) {
                opal_free_list_return(&chan->rx_segs, &rx->segs[i]->super);
            }
        }
        free(rx->segs);
        free(rx->msgs);
        free(rx->iov);
        free(rx->from);
        free(rx->ctrl);
        free(rx->stage);
        free(rx->batch);
        if (NULL != rx->direct) {
            free(rx->direct->tail);
            free(rx->direct->gather);
            free(rx->direct);
        }
        free(rx);
        chan->backend_priv = NULL;
    }
    if (chan->sock_fd >= 0) {
        close(chan->sock_fd); /* ours */
        chan->sock_fd = -1;
    }
    if (chan->tx_fd >= 0) {
        close(chan->tx_fd);
        chan->tx_fd = -1;
    }
}

static int kern_open(usnic_module_t *module, int rd_num)
{
    const usnic_params_t *p = &mca_btl_usnic_component.params;

    if (OPAL_SUCCESS !=
            channel_open(module, &module->chan[USNIC_CHAN_PRIO], p->prio_sd_num, p->prio_rd_num) ||
        OPAL_SUCCESS != channel_open(module, &module->chan[USNIC_CHAN_DATA], p->sd_num, rd_num)) {
        return OPAL_ERROR;
    }
    if (module->chan[USNIC_CHAN_DATA].gso) {
        usnic_live_flush_register(module); /* its held trains (btl_usnic_tx_coalesce) */
    }
    return OPAL_SUCCESS;
}

static void kern_train_flush(usnic_module_t *module, usnic_channel_t *chan);

static void kern_release(usnic_module_t *module)
{
    /* the liveness thread sends none of our trains from now on */
    usnic_live_flush_unregister(module);
    if (NULL != rx_of(&module->chan[USNIC_CHAN_DATA])) {
        kern_train_flush(module, &module->chan[USNIC_CHAN_DATA]);
    }
    for (int c = 0; c < USNIC_NUM_CHANNELS; c++) {
        channel_close(&module->chan[c]);
    }
}

/* Entry i of the recvmmsg vector, ready to receive. */
static void reset_msg(const usnic_channel_t *chan, struct kern_rx *rx, int i)
{
    struct msghdr *mh = &rx->msgs[i].msg_hdr;

    mh->msg_name = &rx->from[i];
    mh->msg_namelen = sizeof(rx->from[i]);
    mh->msg_iov = &rx->iov[i];
    mh->msg_iovlen = 1;
    mh->msg_control = chan->gro ? rx->ctrl[i].buf : NULL;
    mh->msg_controllen = chan->gro ? sizeof(rx->ctrl[i].buf) : 0;
    mh->msg_flags = 0;
}

/* Take the channel's receive buffers and set up its recvmmsg vectors. */
static int kern_post_recvs(usnic_module_t *module, usnic_channel_t *chan)
{
    struct kern_rx *rx = calloc(1, sizeof(*rx));
    int n = chan->rx_depth;

    (void) module;
    if (NULL == rx) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    chan->backend_priv = rx;
    rx->segs = calloc((size_t) n, sizeof(*rx->segs));
    rx->msgs = calloc((size_t) n, sizeof(*rx->msgs));
    rx->iov = calloc((size_t) n, sizeof(*rx->iov));
    rx->from = calloc((size_t) n, sizeof(*rx->from));
    rx->ctrl = calloc((size_t) n, sizeof(*rx->ctrl));
    if (NULL == rx->segs || NULL == rx->msgs || NULL == rx->iov || NULL == rx->from ||
        NULL == rx->ctrl) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    for (int i = 0; i < n; i++) {
        rx->segs[i] = (usnic_seg_t *) opal_free_list_get(&chan->rx_segs);
        if (NULL == rx->segs[i]) {
            return OPAL_ERR_OUT_OF_RESOURCE;
        }
        rx->n = i + 1;
        rx->iov[i].iov_base = rx->segs[i]->buf;
        rx->iov[i].iov_len = chan->rx_buf;
        reset_msg(chan, rx, i);
    }
    /* With UDP_GRO, or with datagrams too large for trains (loopback's
     * 65507 bytes): a receive then brings many bytes, so one recvmsg with
     * its own iovec per receive costs less than the copy it saves.  (At
     * 1472-byte datagrams without GRO it would replace a batch of 64 by
     * single receives.) */
    if (USNIC_CHAN_DATA == chan->id &&
        ((chan->gro && chan->rx_buf >= KERN_GRO_BYTES) || chan->mtu > KERN_TRAIN_DGRAM_MAX) &&
        0 != mca_btl_usnic_component.params.direct_recv) {
        rx->direct = calloc(1, sizeof(*rx->direct));
        if (NULL == rx->direct) {
            return OPAL_ERR_OUT_OF_RESOURCE;
        }
        rx->direct->tail = malloc(KERN_GRO_BYTES);
        rx->direct->gather = malloc(KERN_GRO_BYTES);
        if (NULL == rx->direct->tail || NULL == rx->direct->gather) {
            return OPAL_ERR_OUT_OF_RESOURCE;
        }
    }
    return OPAL_SUCCESS;
}

/* The segment size UDP_GRO reports for a coalesced receive, 0 if none. */
static uint32_t gro_size(struct msghdr *mh)
{
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); NULL != cm; cm = CMSG_NXTHDR(mh, cm)) {
        if (SOL_UDP == cm->cmsg_level && UDP_GRO == cm->cmsg_type &&
            cm->cmsg_len >= CMSG_LEN(sizeof(int))) {
            int v;
            memcpy(&v, CMSG_DATA(cm), sizeof(v));
            return (v > 0) ? (uint32_t) v : 0;
        }
    }
    return 0;
}

/* Where the datagram being processed came from (module->rx_from). */
static void set_source(usnic_module_t *module, const struct sockaddr_in *from, socklen_t namelen)
{
    module->rx_from.ip = from->sin_addr.s_addr;
    module->rx_from.port = from->sin_port;
    if (OPAL_UNLIKELY(namelen != sizeof(*from))) {
        module->rx_from.ip = 0; /* not from IPv4: no peer has this source */
        module->rx_from.port = 0;
    }
}

/* One receive of len bytes at buf: a datagram, or (UDP_GRO segment size
 * step < len) several of one sender, each step bytes but the last.  A
 * datagram longer than the buffer (MSG_TRUNC) is handed over as what
 * arrived, its first bytes, as the libfabric providers do: its header's
 * length no longer matches (drop_LENGTH). */
static int rx_batch(usnic_module_t *module, usnic_channel_t *chan, const uint8_t *buf, size_t len,
                    size_t step)
{
    int count = 0;

    if (0 == step || step >= len) {
        usnic_rx_datagram(module, chan, buf, len);
        return 1;
    }
    usnic_rx_macs_ahead(module, buf, len, step);
    for (size_t off = 0; off < len; off += step) {
        usnic_rx_datagram(module, chan, buf + off, (len - off < step) ? len - off : step);
        count++;
    }
    usnic_rx_macs_done(module);
    return count;
}

/* Bytes [from, to) of what a receive wrote across iov, copied to dst. */
static void iov_gather(const struct iovec *iov, size_t niov, size_t from, size_t to, uint8_t *dst)
{
    size_t pos = 0;

    for (size_t i = 0; i < niov && pos < to; pos += iov[i].iov_len, i++) {
        size_t a = (from > pos) ? from - pos : 0;
        size_t b = (to - pos < iov[i].iov_len) ? to - pos : iov[i].iov_len;
        if (a < b) {
            memcpy(dst, (const uint8_t *) iov[i].iov_base + a, b - a);
            dst += b - a;
        }
    }
}

/* Does the header in a direct receive's slot name the chunk expected
 * there (of want's PUT or fragment, at offset off, payload_len bytes)?
 * This only says where its payload is; the receive path validates it as
 * any other. */
static bool direct_expected(const uint8_t *h, const struct usnic_direct *want, uint64_t sender_key,
                            uint64_t off, size_t payload_len)
{
    const struct usnic_pkt_hdr *hdr = (const struct usnic_pkt_hdr *) h;
    const struct usnic_chunk_hdr *ch = (const struct usnic_chunk_hdr *) (h + sizeof(*hdr));
    const struct usnic_put_hdr *put =
        (const struct usnic_put_hdr *) (h + sizeof(*hdr) + sizeof(*ch));

    if (hdr->type != want->type || hdr->msg_id != want->msg_id || hdr->sender_key != sender_key ||
        hdr->payload_len != payload_len || ch->offset != off || ch->msg_len != want->msg_len) {
        return false;
    }
    return (USNIC_PKT_PUT == want->type)
               ? put->reg_key == want->reg_key && put->reg_offset == want->reg_offset
               : hdr->tag == want->tag;
}

/*
 * Direct receive (see the top of this file): while module->direct names a
 * PUT or chunked fragment arriving in order, receive one GRO batch at a
 * time with the next chunks' payloads placed where they belong.  Returns
 * the datagrams processed; *drained: the socket had nothing more.  Stops at
 * the first receive that held anything else (another sender's datagrams, a
 * loss or a copy in the stream): that one goes the usual way, and so do
 * the next polls' until a PUT or fragment arrives in order again.
 */
static int kern_direct_poll(usnic_module_t *module, usnic_channel_t *chan, struct kern_rx *rx,
                            bool *drained)
{
    struct kern_direct *kd = rx->direct;
    /* without UDP_GRO a receive holds one datagram */
    const size_t kmax = chan->gro ? KERN_DIRECT_SEGS : 1;
    int count = 0;

    *drained = false;
    for (int round = 0; round < KERN_DIRECT_ROUNDS && NULL != module->direct.ep; round++) {
        const struct usnic_direct want = module->direct; /* receiving changes it */
        mca_btl_base_endpoint_t *ep = want.ep;
        const bool put = (USNIC_PKT_PUT == want.type);
        const size_t hlen = put ? USNIC_HDR_LEN_PUT : USNIC_HDR_LEN_CHUNK;
        const size_t step = hlen + want.plen;
        union {
            char buf[CMSG_SPACE(sizeof(int))];
            struct cmsghdr align;
        } ctrl;
        struct sockaddr_in from;
        struct msghdr mh;
        uint8_t *base = NULL;
        uint64_t sender_key;
        size_t niov = 0, k = 0, r, seg_step, j = 0;
        ssize_t got;

        /* the PUT's target (still registered) or the fragment's reassembly
         * buffer (still being filled) */
        if (put) {
            (void) usnic_reg_resolve(&mca_btl_usnic_component.regs, want.reg_key, want.reg_offset,
                                     want.msg_len, &base);
        } else {
            base = usnic_reasm_dest(&ep->reasm, want.msg_id, want.msg_len);
        }
        if (NULL == base || ep->dead || ep->crc || 2 == ep->auth || step > KERN_GRO_BYTES) {
            module->direct.ep = NULL;
            break;
        }
        if (!chan->gro && step <= KERN_TRAIN_DGRAM_MAX) {
            /* small datagrams without GRO (a path to this peer cut to a
             * smaller size): a batch of 64 receives costs less than a
             * system call per datagram saves */
            break;
        }
        sender_key = ep->remote.key; /* (callbacks below may change the endpoint) */
        for (uint64_t off = want.next;
             off < want.msg_len && k < kmax && (k + 1) * step <= KERN_GRO_BYTES;
             off += want.plen, k++) {
            uint64_t left = want.msg_len - off;
            kd->iov[niov].iov_base = kd->hdr[k].b;
            kd->iov[niov++].iov_len = hlen;
            kd->iov[niov].iov_base = base + off;
            kd->iov[niov++].iov_len = (left < want.plen) ? (size_t) left : want.plen;
        }
        kd->iov[niov].iov_base = kd->tail;
        kd->iov[niov++].iov_len = KERN_GRO_BYTES;

        memset(&mh, 0, sizeof(mh));
        mh.msg_name = &from;
        mh.msg_namelen = sizeof(from);
        mh.msg_iov = kd->iov;
        mh.msg_iovlen = niov;
        mh.msg_control = ctrl.buf;
        mh.msg_controllen = sizeof(ctrl.buf);
        got = k_recvmsg(chan->sock_fd, &mh, MSG_DONTWAIT);
        if (got < 0) {
            *drained = true; /* nothing (or an error, which the usual receive sees too) */
            break;
        }
        r = (size_t) got;
        set_source(module, &from, mh.msg_namelen);
        if (0 == r) {
            usnic_rx_datagram(module, chan, kd->tail, 0); /* an empty datagram: dropped, counted */
            count++;
            continue;
        }
        seg_step = gro_size(&mh);
        if (0 == seg_step || seg_step >= r) {
            seg_step = r; /* one datagram */
        } else {
            module->stats.gro_batches++;
        }
        if (seg_step == step) {
            /* every header received is in its slot: their MACs together */
            size_t nseg = (r + seg_step - 1) / seg_step;
            usnic_rx_macs_headers(module, ep, kd->hdr[0].b, sizeof(kd->hdr[0]), hlen,
                                  (unsigned) ((nseg < k) ? nseg : k));
        }
        for (size_t pos = 0; pos < r; pos += seg_step, j++) {
            size_t len = (r - pos < seg_step) ? r - pos : seg_step;
            size_t plen = (j < k) ? kd->iov[2 * j + 1].iov_len : 0;
            /* the message's last chunk may be padded (a train went on with
             * the next message): the padding went to the tail */
            bool padded =
                j + 1 == k && len >= hlen && len - hlen > plen &&
                want.next + j * want.plen + plen == want.msg_len &&
                0 != (((const struct usnic_pkt_hdr *) kd->hdr[j].b)->flags & USNIC_PKT_FLAG_PAD);
            if (j < k && (seg_step == step || len == r) && len >= hlen &&
                (len - hlen == plen || padded) &&
                direct_expected(kd->hdr[j].b, &want, sender_key, want.next + j * want.plen, plen)) {
                if (padded) {
                    module->stats.rx_direct_pad++;
                }
                usnic_rx_datagram_split(module, chan, kd->hdr[j].b, hlen,
                                        kd->iov[2 * j + 1].iov_base, plen);
                count++;
                continue;
            }
            /* not the chunk expected there: the rest of this receive, put
             * back together before anything is written, goes the usual way
             * (after a message's last chunk: the next message's first) */
            if (j != k || want.next + k * want.plen < want.msg_len) {
                module->stats.rx_direct_miss++;
            }
            if (r - pos > KERN_GRO_BYTES) {
                r = pos + KERN_GRO_BYTES; /* never so (UDP_GRO stops at 64 KiB) */
            }
            usnic_rx_macs_done(module);
            iov_gather(kd->iov, niov, pos, r, kd->gather);
            count += rx_batch(module, chan, kd->gather, r - pos, seg_step);
            return count;
        }
        usnic_rx_macs_done(module); /* (the next receive writes the slots again) */
    }
    return count;
}

/* The receive buffers about to be processed stay as they are until
 * defer_end(): their chunks may be left there (deferred chunks), and a
 * chunk may be predicted from the one before it (usnic_rx_batch_begin).
 * Returns what defer_end() restores (a poll may run inside another's
 * callbacks). */
static bool defer_begin(usnic_module_t *module)
{
    bool was = module->rx_defer;

    module->rx_defer = (0 != mca_btl_usnic_component.params.in_place);
    usnic_rx_batch_begin(module);
    return was;
}

/* Before the buffers are received into again. */
static void defer_end(usnic_module_t *module, bool was)
{
    usnic_rx_defer_flush(module);
    module->rx_defer = was;
    usnic_rx_batch_end(module);
}

static int kern_poll(usnic_module_t *module, usnic_channel_t *chan)
{
    struct kern_rx *rx = rx_of(chan);
    int batch = (rx->n < KERN_RX_BATCH) ? rx->n : KERN_RX_BATCH;
    int n, count = 0;
    bool defer;

    if (OPAL_UNLIKELY(rx->busy)) {
        return 0; /* a callback of an arrival polled again: its buffers are in use */
    }
    if (NULL != rx->direct && NULL != module->direct.ep) {
        bool drained;
        defer = module->rx_defer;
        rx->busy = true;
        module->rx_defer = false; /* (what it gathers lies in a buffer reused at once) */
        usnic_rx_batch_begin(module);
        count = kern_direct_poll(module, chan, rx, &drained);
        usnic_rx_batch_end(module);
        module->rx_defer = defer;
        rx->busy = false;
        if (drained) {
            return count;
        }
    }
    if (rx->single && !chan->gro) {
        /* An idle or latency-bound channel: recvfrom costs a quarter less
         * than an empty recvmmsg (no msghdr and iovec to copy in), which
         * shortens the busy-poll loop and so the time to notice an arrival
         * (docs/perf-kernel-backend.md, "8-byte latency").  After a
         * datagram came this way, the next poll is a batch again. */
        socklen_t fl = sizeof(rx->from[0]);
        ssize_t got = k_recvfrom(chan->sock_fd, rx->segs[0]->buf, rx->iov[0].iov_len, MSG_DONTWAIT,
                                 (struct sockaddr *) &rx->from[0], &fl);
        if (got < 0) {
            return count;
        }
        rx->single = false;
        rx->busy = true;
        set_source(module, &rx->from[0], fl);
        defer = defer_begin(module);
        count += rx_batch(module, chan, rx->segs[0]->buf, (size_t) got, 0);
        defer_end(module, defer);
        rx->busy = false;
        return count;
    }
    if (rx->single) {
        /* The data channel (UDP_GRO) after a poll that found nothing: the
         * next arrival is likely one train, which one recvmsg brings (with
         * its segment size), where a recvmmsg would import a second msghdr
         * and try the socket again for nothing before returning.  Phase
         * A/B at MTU 1500: ping-pongs of 2-32 KiB 1.2-2.8% faster, 64-256
         * KiB 0.3-2.2% slower, windows one way and both ways from 1.8%
         * less to 5.4% more bandwidth (docs/perf-kernel-backend.md,
         * session 20).  After an arrival the next poll is a batch again. */
        ssize_t got = k_recvmsg(chan->sock_fd, &rx->msgs[0].msg_hdr, MSG_DONTWAIT);
        if (got < 0) {
            return count;
        }
        rx->msgs[0].msg_len = (unsigned int) got;
        rx->single = false;
        n = 1;
    } else {
        n = k_recvmmsg(chan->sock_fd, rx->msgs, (unsigned) batch, MSG_DONTWAIT);
        /* (a GRO receive is a train: one of them is no reason to stop
         * batching; only an empty poll is) */
        rx->single = chan->gro ? (n <= 0) : (n <= 1);
        if (n <= 0) {
            return count;
        }
    }
    rx->busy = true;
    defer = defer_begin(module); /* until every datagram of the batch is processed */
    for (int i = 0; i < n; i++) {
        struct msghdr *mh = &rx->msgs[i].msg_hdr;
        uint32_t len = rx->msgs[i].msg_len;
        uint32_t step = chan->gro ? gro_size(mh) : 0;

        set_source(module, &rx->from[i], mh->msg_namelen);
        if (0 != step && step < len) {
            module->stats.gro_batches++;
        }
        count += rx_batch(module, chan, rx->segs[i]->buf, len, step);
    }
    defer_end(module, defer);
    for (int i = 0; i < n; i++) {
        reset_msg(chan, rx, i); /* the kernel wrote these */
    }
    rx->busy = false;
    return count;
}

/* An error that a connected socket keeps from an ICMP message about an
 * earlier datagram (the peer's port or host unreachable) and reports
 * instead of sending the next one. */
static bool icmp_error(int e)
{
    return ECONNREFUSED == e || EHOSTUNREACH == e || ENETUNREACH == e || EHOSTDOWN == e;
}

/* Does a send to ep's channel go out on ep's connected socket? */
static bool send_connected(const usnic_module_t *module, const usnic_channel_t *chan,
                           const mca_btl_base_endpoint_t *ep)
{
    return OPAL_LIKELY(ep->module == module && ep->conn_fd[chan->id] >= 0);
}

/* The socket a send to ep's channel goes out on: ep's connected socket
 * where it has one, else the channel's sending port. */
static int send_fd(const usnic_module_t *module, const usnic_channel_t *chan,
                   const mca_btl_base_endpoint_t *ep)
{
    return send_connected(module, chan, ep) ? ep->conn_fd[chan->id]
           : (chan->tx_fd >= 0)             ? chan->tx_fd
                                            : chan->sock_fd;
}

/* A msghdr for iov (n pieces) to ep's channel, with a UDP_SEGMENT of gso
 * bytes (0: none; its control message in ctrl), naming the peer unless
 * the socket is connected to it.  Returns the socket (send_fd). */
static int send_msg(usnic_module_t *module, usnic_channel_t *chan,
                    const mca_btl_base_endpoint_t *ep, struct msghdr *mh, struct iovec *iov,
                    size_t n, uint16_t gso, kern_gso_ctrl *ctrl)
{
    memset(mh, 0, sizeof(*mh));
    if (!send_connected(module, chan, ep)) {
        mh->msg_name = (void *) &ep->sin[chan->id];
        mh->msg_namelen = sizeof(ep->sin[chan->id]);
    }
    mh->msg_iov = iov;
    mh->msg_iovlen = n;
    if (0 != gso) {
        struct cmsghdr *cm;
        memset(ctrl, 0, sizeof(*ctrl));
        mh->msg_control = ctrl->buf;
        mh->msg_controllen = sizeof(ctrl->buf);
        cm = CMSG_FIRSTHDR(mh);
        cm->cmsg_level = SOL_UDP;
        cm->cmsg_type = UDP_SEGMENT;
        cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
        memcpy(CMSG_DATA(cm), &gso, sizeof(gso));
    }
    return send_fd(module, chan, ep);
}

/* sendmsg of mh on fd; on a connected socket (no msg_name) counted in
 * *connected, and sent again once after an error about an earlier datagram
 * (this one was not sent, and the error is cleared: whether the peer is
 * gone is the liveness check's business, not this send's). */
static ssize_t send_one(int fd, const struct msghdr *mh, uint64_t *connected)
{
    ssize_t rc = k_sendmsg(fd, mh, MSG_DONTWAIT);

    if (NULL == mh->msg_name) {
        if (OPAL_UNLIKELY(rc < 0 && icmp_error(errno))) {
            rc = k_sendmsg(fd, mh, MSG_DONTWAIT);
        }
        (*connected)++;
    }
    return rc;
}

static ssize_t send_iov(usnic_module_t *module, usnic_channel_t *chan,
                        const mca_btl_base_endpoint_t *ep, struct iovec *iov, size_t n,
                        uint16_t gso, uint64_t *connected)
{
    kern_gso_ctrl ctrl;
    struct msghdr mh;
    int fd = send_msg(module, chan, ep, &mh, iov, n, gso, &ctrl);

    return send_one(fd, &mh, connected);
}

static size_t seg_iov(const usnic_seg_t *seg, struct iovec *iov)
{
    iov[0].iov_base = seg->buf;
    iov[0].iov_len = seg->hdr_len;
    if (0 == seg->zc_len) {
        return 1;
    }
    iov[1].iov_base = (void *) seg->zc_ptr;
    iov[1].iov_len = seg->zc_len;
    return 2;
}

static int kern_send(usnic_module_t *module, usnic_channel_t *chan, usnic_seg_t *seg,
                     const mca_btl_base_endpoint_t *ep)
{
    struct iovec iov[2];
    size_t n = seg_iov(seg, iov);
    ssize_t rc;

    if (1 == n && send_connected(module, chan, ep)) {
        /* one contiguous datagram (ACKs, small messages): send, without
         * the msghdr and iovec the kernel would copy in first */
        rc = k_send(ep->conn_fd[chan->id], iov[0].iov_base, iov[0].iov_len, MSG_DONTWAIT);
        if (OPAL_UNLIKELY(rc < 0 && icmp_error(errno))) {
            rc = k_send(ep->conn_fd[chan->id], iov[0].iov_base, iov[0].iov_len, MSG_DONTWAIT);
        }
        module->stats.tx_connected++;
    } else if (1 == n) {
        rc = k_sendto((chan->tx_fd >= 0) ? chan->tx_fd : chan->sock_fd, iov[0].iov_base,
                      iov[0].iov_len, MSG_DONTWAIT, (const struct sockaddr *) &ep->sin[chan->id],
                      sizeof(ep->sin[chan->id]));
    } else {
        rc = send_iov(module, chan, ep, iov, n, 0, &module->stats.tx_connected);
    }
    if (OPAL_LIKELY(rc >= 0)) {
        return OPAL_SUCCESS;
    }
    if (EAGAIN == errno || EWOULDBLOCK == errno || ENOBUFS == errno || EINTR == errno) {
        return OPAL_ERR_RESOURCE_BUSY;
    }
    /* (the first, then the 2nd, 4th, 8th...: an interface that is down
     * fails every send until it is up again) */
    if (0 == (module->stats.tx_errors & (module->stats.tx_errors + 1))) {
        USNIC_VERBOSE(5, "%s: sendmsg: %s (send errors so far: %llu)", module->ifname,
                      strerror(errno), (unsigned long long) module->stats.tx_errors + 1);
    }
    module->stats.tx_errors++;
    return OPAL_ERROR;
}

/* What pads a train's short datagram (never written). */
static uint8_t kern_zeros[KERN_TRAIN_DGRAM_MAX];

/*
 * A train of datagrams of at most btl_usnic_train_copy bytes goes to the
 * kernel as one buffer: its headers, payloads and padding copied together
 * here.  The kernel takes an iovec of two or three pieces per datagram
 * more slowly than the copy costs when the datagrams are small: a raw
 * ping-pong of 12-datagram trains of 1472 bytes between the namespace
 * hosts took 8.2-8.5 us per half round trip that way, 7.3-7.4 copied, and
 * MTU 1500 streams of 8-256 KiB messages ran 5-15% faster.  With 8972-byte
 * datagrams the pieces cost less per byte than the copy, and streams ran
 * 5-20% slower copied (docs/perf-kernel-backend.md, session 13).
 *
 * But not a train of chunks of a PUT larger than btl_usnic_train_copy_put_max:
 * their payloads come straight from the user's buffer, one too large to
 * stay in the cache, where a fragment's come from a buffer the PML has
 * just filled.  Copied, such a payload is read from memory, written to the
 * stage and read again by the kernel; in pieces the kernel reads it once.
 * Between the namespace hosts at MTU 1500, once the receiver streamed its
 * PUT chunks (session 31), every PUT in pieces: ping-pongs of 512 KiB-4
 * MiB 5-18% less time, windows of 1-4 MiB messages 0-3% more bandwidth,
 * but windows of 512 KiB messages (PUTs from one buffer that stays in a 2
 * MiB cache) 9-11% less; and every train in pieces, fragments' too: 12-23%
 * less bandwidth for 16-256 KiB messages.  Nor a train of a smaller PUT
 * that started with nothing else in flight to its peer (frag->pieces, set
 * in send_chunks): it is waited for, and the copy delays its every train
 * (512 KiB ping-pongs 8-9% faster so, the streams unchanged).
 *
 * false: not copied.
 */
static bool train_gather(usnic_module_t *module, usnic_channel_t *chan, int n, struct iovec *iov,
                         int slot)
{
    struct kern_rx *rx = rx_of(chan);
    int slots = mca_btl_usnic_component.params.tx_batch;
    uint8_t *p, *start;

    if (chan->train.seg_len > module->train_copy || chan->train.pieces == n || NULL == rx) {
        return false;
    }
    if (NULL == rx->stage && NULL == (rx->stage = malloc((size_t) KERN_TRAIN_BYTES *
                                                         (size_t) (slots > 1 ? slots : 1)))) {
        return false;
    }
    p = start = rx->stage + (size_t) slot * KERN_TRAIN_BYTES;
    for (int i = 0; i < n; i++) {
        const usnic_seg_t *seg = chan->train.seg[i];
        memcpy(p, seg->buf, seg->hdr_len);
        p += seg->hdr_len;
        if (0 != seg->zc_len) {
            memcpy(p, seg->zc_ptr, seg->zc_len);
            p += seg->zc_len;
        }
        memset(p, 0, chan->train.pad[i]);
        p += chan->train.pad[i];
    }
    iov->iov_base = start;
    iov->iov_len = (size_t) (p - start);
    return true;
}

/* The channel's train of n sealed datagrams as an iovec for the kernel:
 * one buffer copied together in stage slot slot (trains of more than one
 * datagram, train_gather: *copied), or each datagram's pieces and
 * padding.  Returns the pieces. */
static size_t train_iov(usnic_module_t *module, usnic_channel_t *chan, int n, struct iovec *iov,
                        int slot, bool *copied)
{
    size_t k = 0;

    *copied = n > 1 && train_gather(module, chan, n, iov, slot);
    if (*copied) {
        return 1;
    }
    for (int i = 0; i < n; i++) {
        k += seg_iov(chan->train.seg[i], &iov[k]);
        if (0 != chan->train.pad[i]) {
            iov[k].iov_base = kern_zeros;
            iov[k++].iov_len = chan->train.pad[i];
        }
    }
    return k;
}

/* The sendmsg of a train (UDP_SEGMENT on) in mh, what it did into res. */
static void train_sendmsg(int fd, const struct msghdr *mh, struct kern_held_result *res)
{
    if (OPAL_UNLIKELY(mca_btl_usnic_component.params.debug_gso_refused)) {
        res->err = EIO; /* as a kernel or device without segmentation offload says */
    } else if (send_one(fd, mh, &res->connected) >= 0) {
        res->ok = true;
    } else {
        res->err = errno;
    }
}

/* Hand the train (n > 1 datagrams, UDP_SEGMENT on) to the kernel in one
 * sendmsg: its header MACs, then one copy or the pieces.  Writes nothing
 * of the module (the liveness thread sends a held train with it). */
static void train_send(usnic_module_t *module, usnic_channel_t *chan, int n,
                       struct kern_held_result *res)
{
    struct iovec iov[3 * USNIC_TRAIN_MAX];
    kern_gso_ctrl ctrl;
    struct msghdr mh;
    size_t k;
    int fd;

    memset(res, 0, sizeof(*res));
    res->lanes = usnic_train_seal(chan->train.ep, chan->train.seg, n);
    k = train_iov(module, chan, n, iov, 0, &res->copied);
    fd = send_msg(module, chan, chan->train.ep, &mh, iov, k, (uint16_t) chan->train.seg_len, &ctrl);
    train_sendmsg(fd, &mh, res);
}

/* After a train of n datagrams segs to ep left (tried: it was handed to
 * the kernel, with what that did in res) or instead of it: the counters,
 * the fall back to single datagrams, and the train's references to its
 * datagrams.  (n == 1, tried: one datagram that left.) */
static void train_done(usnic_module_t *module, usnic_channel_t *chan,
                       const mca_btl_base_endpoint_t *ep, usnic_seg_t *const *segs, int n,
                       bool tried, const struct kern_held_result *res)
{
    bool ok = tried && res->ok;

    module->stats.macs_tx_lanes += res->lanes;
    module->stats.tx_connected += res->connected;
    module->stats.trains_copied += res->copied ? 1 : 0;
    if (ok) {
        module->stats.gso_trains += n > 1;
    } else if (tried) {
        int e = res->err;
        if (EIO == e || ENOPROTOOPT == e || EINVAL == e || EOPNOTSUPP == e) {
            /* no segmentation offload here (old kernel, device without it) */
            USNIC_VERBOSE(5,
                          "%s: the kernel refuses UDP_SEGMENT (%s): sending datagram by "
                          "datagram from now on",
                          module->ifname, strerror(e));
            chan->gso = false;
        } else {
            /* the socket buffer is full: the whole train is lost */
            for (int i = 0; i < n; i++) {
                usnic_train_failed(module, segs[i]);
            }
            ok = true;
        }
    }
    for (int i = 0; i < n; i++) {
        usnic_seg_t *seg = segs[i];
        if (!ok && OPAL_SUCCESS != kern_send(module, chan, seg, ep)) {
            usnic_train_failed(module, seg);
        }
        usnic_seg_put(seg); /* the train's reference */
    }
}

/* Before the progress engine touches chan->train: a held train back (see
 * HELD_*): still open, it is ours again as it was; sent by the liveness
 * thread, it is accounted for and emptied. */
static void held_take(usnic_module_t *module, usnic_channel_t *chan)
{
    struct kern_rx *rx = rx_of(chan);
    int st, n;

    if (OPAL_LIKELY(NULL == rx ||
                    HELD_NONE == (st = atomic_load_explicit(&rx->held, memory_order_acquire)))) {
        return;
    }
    if (HELD_OPEN == st &&
        atomic_compare_exchange_strong_explicit(&rx->held, &st, HELD_NONE, memory_order_acquire,
                                                memory_order_acquire)) {
        return;
    }
    while (HELD_SENT != atomic_load_explicit(&rx->held, memory_order_acquire)) {
        /* the thread is in its sendmsg */
    }
    n = chan->train.n;
    chan->train.n = 0;
    module->stats.tx_late++;
    train_done(module, chan, chan->train.ep, chan->train.seg, n, true, &rx->held_res);
    atomic_store_explicit(&rx->held, HELD_NONE, memory_order_release);
}

/* The messages of batch b go to the kernel: in one sendmmsg, and what it
 * did not take (an error stops it) one by one, as they would have gone
 * alone. */
static void batch_send(usnic_module_t *module, usnic_channel_t *chan, struct kern_batch *b)
{
    int n = b->n, sent = 0;

    if (0 == n) {
        return;
    }
    b->n = 0;
    module->stats.macs_tx_lanes += b->lanes;
    b->lanes = 0;
    if (n > 1 && OPAL_LIKELY(!mca_btl_usnic_component.params.debug_gso_refused)) {
        sent = k_sendmmsg(b->fd, b->mm, (unsigned) n, MSG_DONTWAIT);
        if (sent < 0) {
            sent = 0; /* (the first failed: sent again alone below, with its error handled) */
        }
        module->stats.tx_batched += (uint64_t) sent;
    }
    for (int i = 0; i < n; i++) {
        struct kern_msg *m = &b->m[i];
        struct kern_held_result res = {.copied = m->copied};

        if (i < sent) {
            res.ok = true;
            res.connected = m->connected;
            train_done(module, chan, m->ep, m->seg, m->n, true, &res);
        } else if (0 == m->gso) {
            train_done(module, chan, m->ep, m->seg, 1, false, &res); /* a send of its own */
        } else {
            train_sendmsg(b->fd, &b->mm[i].msg_hdr, &res);
            train_done(module, chan, m->ep, m->seg, m->n, true, &res);
        }
    }
}

/* Move the channel's train (n >= 1 datagrams) into batch b, sealed and
 * laid out for the kernel; the batch goes first if it is for another
 * socket, and goes when it is full. */
static void batch_push(usnic_module_t *module, usnic_channel_t *chan, struct kern_batch *b)
{
    const mca_btl_base_endpoint_t *ep = chan->train.ep;
    int n = chan->train.n, fd = send_fd(module, chan, ep);
    struct kern_msg *m;
    size_t k;

    if (0 != b->n && fd != b->fd) {
        batch_send(module, chan, b); /* one socket per sendmmsg */
    }
    m = &b->m[b->n];
    b->lanes += usnic_train_seal(ep, chan->train.seg, n);
    m->ep = ep;
    m->n = n;
    m->gso = (n > 1) ? (uint16_t) chan->train.seg_len : 0;
    k = train_iov(module, chan, n, m->iov, b->n, &m->copied);
    memcpy(m->seg, chan->train.seg, (size_t) n * sizeof(m->seg[0]));
    chan->train.n = 0;
    b->fd = send_msg(module, chan, ep, &b->mm[b->n].msg_hdr, m->iov, k, m->gso, &m->ctrl);
    m->connected = (NULL == b->mm[b->n].msg_hdr.msg_name);
    if (++b->n >= mca_btl_usnic_component.params.tx_batch) {
        batch_send(module, chan, b);
    }
}

/* The channel's batch, made when first needed; NULL: none (tx_batch 1). */
static struct kern_batch *batch_of(usnic_channel_t *chan)
{
    struct kern_rx *rx = rx_of(chan);

    if (mca_btl_usnic_component.params.tx_batch < 2 || NULL == rx) {
        return NULL;
    }
    if (NULL == rx->batch) {
        rx->batch = calloc(1, sizeof(*rx->batch));
    }
    return rx->batch;
}

static void kern_train_flush(usnic_module_t *module, usnic_channel_t *chan)
{
    struct kern_rx *rx = rx_of(chan);
    struct kern_held_result res;
    int n;

    held_take(module, chan);
    n = chan->train.n;
    if (NULL != rx && NULL != rx->batch && 0 != rx->batch->n) {
        /* older trains of this burst wait: this one goes with them */
        if (0 != n) {
            batch_push(module, chan, rx->batch);
        }
        batch_send(module, chan, rx->batch);
        return;
    }
    if (0 == n) {
        return;
    }
    chan->train.n = 0;
    if (n > 1 && chan->gso) {
        train_send(module, chan, n, &res);
        train_done(module, chan, chan->train.ep, chan->train.seg, n, true, &res);
    } else {
        memset(&res, 0, sizeof(res));
        res.lanes = usnic_train_seal(chan->train.ep, chan->train.seg, n);
        train_done(module, chan, chan->train.ep, chan->train.seg, n, false, &res);
    }
}

/* btl_usnic_tx_coalesce: leave the data channel's train open for the next
 * messages to join; taken back by the next train_add or train_flush, or
 * sent by the liveness thread if none comes in time. */
static void kern_train_hold(usnic_module_t *module, usnic_channel_t *chan)
{
    struct kern_rx *rx = rx_of(chan);

    held_take(module, chan); /* (a send that added nothing leaves an earlier held train) */
    if (NULL != rx && NULL != rx->batch) {
        /* older trains first: the thread sends only the held one */
        batch_send(module, chan, rx->batch);
    }
    if (NULL == rx || chan->train.n < 2 || !chan->gso || !usnic_live_flusher()) {
        kern_train_flush(module, chan);
        return;
    }
    rx->held_since = usnic_now_us();
    atomic_store(&rx->held, HELD_OPEN);
    usnic_live_flush_arm();
}

int usnic_kern_flush_held(usnic_module_t *module, uint64_t now, uint64_t after_us)
{
    usnic_channel_t *chan = &module->chan[USNIC_CHAN_DATA];
    struct kern_rx *rx = rx_of(chan);
    int st = HELD_OPEN;

    if (NULL == rx || HELD_OPEN != atomic_load(&rx->held)) {
        return 0;
    }
    if (usnic_elapsed_us(now, rx->held_since) < after_us) {
        return 1; /* (now, read before the train was held, may be the earlier) */
    }
    if (!atomic_compare_exchange_strong_explicit(&rx->held, &st, HELD_SENDING, memory_order_acquire,
                                                 memory_order_relaxed)) {
        return 0; /* taken back */
    }
    train_send(module, chan, chan->train.n, &rx->held_res);
    atomic_store_explicit(&rx->held, HELD_SENT, memory_order_release);
    return 0;
}

/*
 * May a datagram of len bytes to ep join the channel's train?  The kernel
 * cuts a train at its first datagram's length, so only the last may be
 * shorter.  A shorter one in the middle (the end of one message, the next
 * message's chunks after it) is padded to the train's length: the padding
 * costs the kernel a copy of a few zeros and the wire as many bytes, and
 * saves a system call and a trip of its own through the stack for the
 * next part of the train (docs/perf-kernel-backend.md, session 11).
 */
static bool kern_train_joins(usnic_module_t *module, usnic_channel_t *chan, uint32_t len,
                             const mca_btl_base_endpoint_t *ep)
{
    int last = chan->train.n - 1;
    usnic_seg_t *prev = chan->train.seg[last];
    uint32_t pad;

    if (!chan->gso || chan->train.ep != ep || len > chan->train.seg_len ||
        USNIC_TRAIN_MAX == chan->train.n || chan->train.bytes + len > KERN_TRAIN_BYTES) {
        return false;
    }
    if (!chan->train.closed) {
        return true;
    }
    pad = chan->train.seg_len - usnic_seg_wire_len(prev);
    if (0 != chan->train.pad[last] || pad > sizeof(kern_zeros) ||
        chan->train.bytes + pad + len > KERN_TRAIN_BYTES || !usnic_train_pad(module, prev, ep)) {
        return false;
    }
    chan->train.pad[last] = (uint16_t) pad;
    chan->train.bytes += pad;
    chan->train.closed = false;
    return true;
}

/*
 * Does the channel's train, cut by a datagram of len bytes to ep, go at
 * once rather than wait in the batch for the next ones?  When it is all
 * its peer has in flight (a ping-pong, a blocking send): the receiver
 * starts on it while the rest of the message is made.  Phase A/B at MTU
 * 9000 (docs/perf-kernel-backend.md, session 27): 64 KiB ping-pongs, two
 * trains, took 3.6% longer with both in one sendmmsg; with the first alone
 * as long as without batches.  Behind other data the receiver is busy
 * anyway, and the batch saves system calls (windows of 64 KiB messages
 * 1.16x as fast).
 */
static bool train_goes_alone(const usnic_channel_t *chan, const mca_btl_base_endpoint_t *ep,
                             uint32_t len)
{
    const mca_btl_base_endpoint_t *to = chan->train.ep;

    return to->inflight_bytes < chan->train.bytes + (to == ep ? len : 0) + KERN_TRAIN_BYTES;
}

static int kern_train_add(usnic_module_t *module, usnic_channel_t *chan, usnic_seg_t *seg,
                          const mca_btl_base_endpoint_t *ep)
{
    uint32_t len = usnic_seg_wire_len(seg);

    if (!chan->gso && !chan->batch) {
        return kern_send(module, chan, seg, ep);
    }
    held_take(module, chan);
    if (0 != chan->train.n && !kern_train_joins(module, chan, len, ep)) {
        struct kern_batch *b = batch_of(chan);
        if (NULL != b && !train_goes_alone(chan, ep, len)) {
            batch_push(module, chan, b); /* goes with the next ones of this burst */
        } else {
            kern_train_flush(module, chan);
        }
    }
    if (0 == chan->train.n) {
        chan->train.ep = ep;
        chan->train.seg_len = len;
        chan->train.bytes = 0;
        chan->train.closed = false;
        chan->train.pieces = 0;
    } else if (len < chan->train.seg_len) {
        chan->train.closed = true; /* the kernel cuts at seg_len: only the last may be shorter */
    }
    seg->refs++; /* until the train leaves */
    if (NULL != seg->frag && seg->frag->pieces && 0 != seg->zc_len) {
        chan->train.pieces++; /* (see train_gather) */
    }
    chan->train.pad[chan->train.n] = 0;
    chan->train.seg[chan->train.n++] = seg;
    chan->train.bytes += len;
    return OPAL_SUCCESS;
}

/* ep->sin is all a send needs.  Up to btl_usnic_connect_peers peers also
 * get connected sockets (see the top of this file), but only at our first
 * send to them (kern_peer_connect): opening one costs 40-80 us (the
 * kernel allocates and compiles its socket filter), and much more when
 * many processes do it at once.  Opened here for every peer, they were
 * the largest part of usnic's extra time in an MPI_Init of 32 ranks
 * (docs/perf-init.md, session 28), and most jobs talk to few of the peers
 * they are given. */
static int kern_peer_add(usnic_module_t *module, mca_btl_base_endpoint_t *ep)
{
    (void) module;
    ep->conn_due = true;
    return OPAL_SUCCESS;
}

static void kern_peer_connect(usnic_module_t *module, mca_btl_base_endpoint_t *ep)
{
    int c, fd[USNIC_NUM_CHANNELS];

    ep->conn_due = false;
    if (module->conn_peers >= mca_btl_usnic_component.params.connect_peers || module->conn_short) {
        return;
    }
    for (c = 0; c < USNIC_NUM_CHANNELS; c++) {
        fd[c] = (module->chan[c].tx_fd >= 0) ? peer_socket(module, ep, c) : -1;
        if (fd[c] < 0) {
            break;
        }
    }
    if (c < USNIC_NUM_CHANNELS) {
        if (module->chan[c].tx_fd >= 0) {
            /* out of descriptors (EMFILE), or the peer unreachable for now:
             * it is sent to from the channel's sending port, naming it */
            USNIC_VERBOSE(10, "%s: no connected socket to a peer (%s)", module->ifname,
                          strerror(errno));
            module->conn_short = (EMFILE == errno || ENFILE == errno);
        }
        while (c-- > 0) {
            close(fd[c]);
        }
        return;
    }
    for (c = 0; c < USNIC_NUM_CHANNELS; c++) {
        ep->conn_fd[c] = fd[c];
    }
    module->conn_peers++;
    module->stats.peers_connected++;
}

static void kern_peer_del(usnic_module_t *module, mca_btl_base_endpoint_t *ep)
{
    if (0 != module->chan[USNIC_CHAN_DATA].train.n &&
        ep == module->chan[USNIC_CHAN_DATA].train.ep) {
        /* a train to it, perhaps held (the liveness thread would use its
         * socket): it leaves now */
        kern_train_flush(module, &module->chan[USNIC_CHAN_DATA]);
    }
    if (ep->conn_fd[0] < 0) {
        return;
    }
    for (int c = 0; c < USNIC_NUM_CHANNELS; c++) {
        if (ep->conn_fd[c] >= 0) {
            close(ep->conn_fd[c]);
            ep->conn_fd[c] = -1;
        }
    }
    module->conn_peers--;
}

/* A datagram of size bytes from the data socket to itself, within 200 ms. */
static bool kern_self_test(usnic_module_t *module, uint32_t size)
{
    usnic_channel_t *chan = &module->chan[USNIC_CHAN_DATA];
    uint64_t deadline = usnic_now_us() + 200000;
    uint8_t *out = malloc(size), *in = malloc(chan->rx_buf);
    bool arrived = false;

    if (NULL == out || NULL == in) {
        free(out);
        free(in);
        return false;
    }
    memset(out, 0x5a, size);
    out[0] = 0; /* not a valid protocol version: never mistaken for traffic */
    if (sendto(chan->sock_fd, out, size, 0, (struct sockaddr *) &chan->addr, sizeof(chan->addr)) ==
        (ssize_t) size) {
        while (!arrived && usnic_now_us() < deadline) {
            ssize_t r = recv(chan->sock_fd, in, chan->rx_buf, MSG_DONTWAIT);
            arrived = (r == (ssize_t) size && 0 == in[0] && 0x5a == in[size - 1]);
            if (r < 0) {
                usleep(1000);
            }
        }
    }
    free(out);
    free(in);
    return arrived;
}

/* A module for one IPv4 interface, its sockets open. */
static usnic_module_t *kern_module_create(const char *ifname, const struct sockaddr_in *addr)
{
    const usnic_params_t *p = &mca_btl_usnic_component.params;
    usnic_module_t *module = usnic_module_new(ifname, addr, "kernel", &usnic_backend_kern);
    uint32_t data_mtu;

    if (NULL == module) {
        return NULL;
    }
    module->is_udp = true;
    module->zero_copy = true;
    module->src_check = USNIC_SRC_SOCKET;
    module->advertised_mtu = (module->if_mtu > 28 && module->if_mtu - 28 < 1472)
                                 ? module->if_mtu - 28
                                 : 1472; /* what fits a standard Ethernet frame */
    data_mtu = (p->udp_datagram_size < 0) ? module->advertised_mtu
                                          : usnic_udp_datagram_size(module->if_mtu);
    if (data_mtu < module->advertised_mtu) {
        data_mtu = module->advertised_mtu;
    }
    if (data_mtu < USNIC_HDR_LEN_MAX + 64) {
        USNIC_VERBOSE(20, "%s: skipped, datagrams of %u bytes are too small", module->ifname,
                      data_mtu);
        free(module);
        return NULL;
    }
    if (0 != p->gso && data_mtu <= KERN_TRAIN_DGRAM_MAX) {
        /* room for what UDP_GRO coalesces */
        module->chan[USNIC_CHAN_DATA].rx_buf = 65536;
    }
    usnic_module_set_sizes(module, data_mtu);
    if (OPAL_SUCCESS != kern_open(module, usnic_module_rd_num(module, true))) {
        kern_release(module);
        free(module);
        return NULL;
    }
    return module;
}

static int kern_discover(const char *prov, const struct usnic_filters *flt, int max)
{
    struct ifaddrs *ifs = NULL, *ifa;
    char seen[USNIC_MAX_MODULES][IF_NAMESIZE];
    int nseen = 0, found = 0;

    (void) prov;
    if (0 != getifaddrs(&ifs)) {
        USNIC_VERBOSE(5, "kernel backend: getifaddrs: %s", strerror(errno));
        return 0;
    }
    for (ifa = ifs; NULL != ifa && (0 == max || found < max) && nseen < USNIC_MAX_MODULES;
         ifa = ifa->ifa_next) {
        const struct sockaddr_in *sin = (const struct sockaddr_in *) ifa->ifa_addr;
        usnic_module_t *module;
        bool dup = false;

        if (NULL == sin || AF_INET != sin->sin_family || !(ifa->ifa_flags & IFF_UP)) {
            continue;
        }
        /* one module per interface: its first IPv4 address */
        for (int i = 0; i < nseen; i++) {
            dup = dup || (0 == strcmp(seen[i], ifa->ifa_name));
        }
        if (dup || !usnic_device_usable(ifa->ifa_name, sin->sin_addr.s_addr, flt)) {
            continue;
        }
        snprintf(seen[nseen++], IF_NAMESIZE, "%s", ifa->ifa_name);
        module = kern_module_create(ifa->ifa_name, sin);
        if (NULL != module && NULL != usnic_module_commit(module)) {
            found++;
        }
    }
    freeifaddrs(ifs);
    if (0 == found) {
        USNIC_VERBOSE(10, "kernel backend: no usable interface");
    }
    return found;
}

const usnic_backend_t usnic_backend_kern = {
    .name = "kernel",
    .discover = kern_discover,
    .open = kern_open,
    .release = kern_release,
    .post_recvs = kern_post_recvs,
    .poll = kern_poll,
    .send = kern_send,
    .train_add = kern_train_add,
    .train_flush = kern_train_flush,
    .train_hold = kern_train_hold,
    .peer_add = kern_peer_add,
    .peer_connect = kern_peer_connect,
    .peer_del = kern_peer_del,
    .self_test = kern_self_test,
};
