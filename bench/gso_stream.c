/*
 * gso_stream: raw UDP streaming probe, the ceiling for a kernel-UDP backend
 * of the BTL (no libfabric, no MPI, no reliability).
 *
 * One-way streaming of fixed-size datagrams for -t seconds from a sender
 * (the client, which measures and prints) to a receiver (the server), in
 * these modes (-m):
 *   plain     one sendto() per datagram; the receiver drains with recvmmsg()
 *             (blocking, MSG_WAITFORONE; -p: busy-polling, MSG_DONTWAIT)
 *   plaingro  as plain, but the receiver enables UDP_GRO: shows whether the
 *             receiving device coalesces plain datagrams (lo never does; on
 *             the veth test bed none were, even with GRO turned on:
 *             docs/perf-gso-raw.md)
 *   gso       the sender sets UDP_SEGMENT to the datagram size, so one
 *             sendmsg() carries up to -s datagrams (and at most 65507 bytes);
 *             the receiver enables UDP_GRO, receives 64 KiB buffers with
 *             recvmmsg() and splits each one at the gso_size of its UDP_GRO
 *             cmsg
 *   gsoiov    as gso, but every segment is two iovecs, a 56-byte header and
 *             its payload, as the BTL sends a header in front of user data
 *             without copying the data an extra time
 *   gsocopy   as gso, but every send first copies each segment's 56-byte header
 *             and payload from separate buffers into one contiguous buffer: the
 *             alternative to gsoiov (an extra copy instead of more iovecs)
 *   gsomsg    as gso, and gsoiovmsg as gsoiov, but the payloads come from a
 *   gsoiovmsg buffer of -M bytes (default 1 MiB), one train after the other,
 *             wrapping around at its end, as a stream of MPI messages sent
 *             from one buffer would; gso and gsoiov resend the same train,
 *             whose bytes stay in the CPU's nearest caches
 *   gsopairmsg as gsoiovmsg, but every second datagram carries its header
 *             after its payload (a trailer), so that two datagrams' payloads
 *             are one iovec and a trailer and the next header another: one
 *             iovec per datagram instead of two (the odd datagram's first 8
 *             bytes, run id and number, are written into the payload buffer)
 *   gsocopymsg as gsomsg, but every send first copies each segment's header
 *             and its payload from the -M buffer into one train buffer, as
 *             the BTL does at MTU 1500 (btl_usnic_train_copy)
 *   gsozc     as gso, with SO_ZEROCOPY on the socket and MSG_ZEROCOPY on every
 *             send: the kernel pins the pages of the send buffer instead of
 *             copying them, and says on the socket's error queue when it no
 *             longer needs them (a range of send numbers, SO_EE_ORIGIN_ZEROCOPY;
 *             ee_code SO_EE_CODE_ZEROCOPY_COPIED if it copied after all, as it
 *             must when the data is delivered to a socket of this host).  The
 *             sender rotates over a ring of -z send buffers and, before it
 *             reuses one, reaps completions until that buffer's send is done.
 *             If the kernel refuses SO_ZEROCOPY the mode sends as gso (zc=0).
 *   gsoiovzc  gsozc with gsoiov's layout (a header iovec and a payload iovec per
 *             segment, each slot with its own headers).  Every iovec becomes
 *             at least one page fragment of the GSO packet, and a packet holds
 *             at most MAX_SKB_FRAGS of them: the kernel refuses larger trains
 *             with EMSGSIZE, so the mode lowers the segments per send until
 *             one is accepted (and says so in a comment line)
 *   pp        reference latency: 8-byte ping-pong, sendto()/recvfrom() with
 *             MSG_DONTWAIT busy-polling on both sides (with a sched_yield()
 *             every GS_PP_YIELD empty polls, so that two pollers sharing one
 *             CPU do not wait a whole time slice for each other)
 *   pptrain   reference latency of messages that take several datagrams: a
 *             ping-pong of messages of every power of two in -T MIN:MAX
 *             bytes above one datagram, each sent as UDP_SEGMENT trains of
 *             -d byte datagrams (at most -s datagrams and 65507 bytes per
 *             send) from one contiguous buffer, and received with UDP_GRO
 *             and recvmmsg into 64 KiB buffers, both sockets connected,
 *             both sides busy-polling.  What it leaves out of what the BTL
 *             does for such a message: headers, MACs, copies in user space,
 *             reassembly and the PML; so usnic's latency over this is what
 *             the BTL and ob1 add at each size.  Every datagram starts with
 *             the run's id and the message's number, and a message counts
 *             only its own datagrams (a lost one costs that round trip, not
 *             the next ones).  Each size runs for a fifth of -t.
 * If the kernel refuses UDP_SEGMENT (setsockopt, or EIO on the first send)
 * the measurement falls back to plain sends and says so (gso=0
 * fallback=plain); a refused UDP_GRO is reported as gro=0.
 *
 * Receiver busy polling (-P usecs): the receiving socket gets SO_BUSY_POLL =
 * usecs (and with -Q budget also SO_PREFER_BUSY_POLL = 1 and
 * SO_BUSY_POLL_BUDGET = budget): a receive call then polls the device queue
 * (NAPI) that last delivered to the socket for up to usecs before it sleeps.
 * The kernel can only do that when the packets came through a NAPI instance
 * with an id; the receiver reports the socket's SO_INCOMING_NAPI_ID at the end
 * of the stream (rx_napi_id=0: there was none, busy polling could not poll).
 *
 * Both sockets are unconnected (sendto/sendmsg name the peer every time, as a
 * BTL with many peers would; -k: the sender connects its socket instead, so
 * that the kernel looks its route up once); socket buffers are -B bytes, forced as root
 * (SO_SNDBUFFORCE / SO_RCVBUFFORCE).  The sender paces nothing; the receiver
 * counts the datagrams of this measurement (each starts with the
 * measurement's 32-bit run id) and the loss is what did not arrive.
 *
 * Processes: "-L addr[:port]" is the server: it waits for one client on TCP
 * addr:port (default 47473), receives on UDP addr:port and exits when that
 * client says goodbye.  "-C addr[:port]" is the client.  Without either, the
 * program forks a server on -a (default 127.0.0.1) and is the client.  The
 * TCP connection carries the control messages (struct ctl_msg); both ends
 * run this same binary (same byte order, checked by the magic number).
 *
 * Output (stdout), one line per measurement (mode x size x repetition):
 *   gso_stream: mode=gso size=1472 rep=1 MB/s=... dgrams/s=... dgrams=...
 *     sent=... loss=... syscalls_per_MiB=... tx_syscalls_per_MiB=...
 *     rx_syscalls_per_MiB=... segs_per_send=... dgrams_per_recv=...
 *     tx_MB/s=... tx_cpu_us_per_MiB=... rx_cpu_us_per_MiB=... rx_drops=...
 *     stale=... gro_chunks=... rx=block rx_empty_polls=... gso=1 gro=1
 *     seconds=... zc=0 zc_sends=... zc_completions=... zc_copied=...
 *     zc_notifs=... zc_waits=... busy_poll=0 busy_budget=0 busy_set=...
 *     rx_napi_id=...
 *   gso_stream: mode=pp size=8 rep=1 lat_us=... min_us=... mean_us=...
 *     iters=... lost=...
 *   gso_stream: mode=pptrain size=MESSAGE dgram=D rep=1 lat_us=... min_us=...
 *     mean_us=... iters=... lost=... seconds=...
 * MB/s is the receiver's goodput (1 MB = 1e6 bytes): datagram bytes received
 * after its first receive call, over the time from that call to its last
 * one.  zc=1: the sends carried MSG_ZEROCOPY; zc_sends: such sends the
 * kernel accepted; zc_completions: those it reported done; zc_copied: those
 * among them reported with SO_EE_CODE_ZEROCOPY_COPIED; zc_notifs: error
 * queue messages read (a message covers a range of sends); zc_waits: times
 * the sender had to wait for a completion before reusing a buffer.
 * busy_poll / busy_budget: what -P / -Q asked for; busy_set: which of
 * SO_BUSY_POLL (1), SO_PREFER_BUSY_POLL (2) and SO_BUSY_POLL_BUDGET (4) the
 * receiver's kernel accepted (-1: one was refused, see the comment line).  tx_/rx_syscalls_per_MiB
 * are the sender's sends per MiB sent and the receiver's data-returning receive calls per MiB
 * received; syscalls_per_MiB is their sum.  *_cpu_us_per_MiB: the thread's CPU time in its loop (on
 * lo and veth the sender's CPU also covers the receive path up to the socket queue, which runs in
 * the sending syscall).  rx_drops: the receiving socket's drop counter (SO_MEMINFO); gro_chunks:
 * buffers that arrived with a UDP_GRO cmsg.  Lines starting with '#' are comments (socket buffers,
 * fallbacks).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <linux/errqueue.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif
/* socket options newer than some C libraries (values of asm-generic/socket.h) */
#ifndef SO_BUSY_POLL
#define SO_BUSY_POLL 46
#endif
#ifndef SO_INCOMING_NAPI_ID
#define SO_INCOMING_NAPI_ID 56
#endif
#ifndef SO_ZEROCOPY
#define SO_ZEROCOPY 60
#endif
#ifndef SO_PREFER_BUSY_POLL
#define SO_PREFER_BUSY_POLL 69
#endif
#ifndef SO_BUSY_POLL_BUDGET
#define SO_BUSY_POLL_BUDGET 70
#endif
#ifndef MSG_ZEROCOPY
#define MSG_ZEROCOPY 0x4000000
#endif

#define GS_PORT_DEFAULT 47473
#define GS_UDP_MAX 65507 /* 65535 - 20 (IPv4) - 8 (UDP) */
#define GS_RXBUF 65536   /* one receive buffer: a whole GRO chunk */
#define GS_HDR 56        /* gsoiov, gsocopy: header bytes per segment */
#define GS_MAX_SIZES 16
#define GS_MAX_SEGS 128               /* iovec pairs per sendmsg */
#define GS_IDLE_MS 20                 /* receiver: queue idle this long = stream over */
#define GS_PP_SIZE 8                  /* ping-pong datagram */
#define GS_PP_WARMUP 200              /* ping-pong round trips not measured */
#define GS_PP_TIMEOUT_NS 1000000000LL /* a reply not seen within this: lost */
#define GS_PP_MAX_SAMPLES (1 << 21)
#define GS_PP_YIELD 256 /* ping-pong: sched_yield() after this many empty polls */
#define GS_ACCEPT_TIMEOUT_MS 60000
#define GS_CONNECT_TIMEOUT_S 10
#define GS_MAGIC 0x67736f31u /* "gso1" */

enum gs_mode {
    GS_PLAIN,
    GS_PLAINGRO,
    GS_GSO,
    GS_GSOIOV,
    GS_GSOCOPY,
    GS_GSOMSG,
    GS_GSOIOVMSG,
    GS_GSOPAIRMSG,
    GS_GSOCOPYMSG,
    GS_GSOZC,
    GS_GSOIOVZC,
    GS_PP,
    GS_PPTRAIN,
    GS_NMODES
};
static const char *const gs_mode_name[GS_NMODES] = {
    "plain",      "plaingro",   "gso",   "gsoiov",   "gsocopy", "gsomsg", "gsoiovmsg",
    "gsopairmsg", "gsocopymsg", "gsozc", "gsoiovzc", "pp",      "pptrain"};

/* modes that send with UDP_SEGMENT, with a header iovec, with MSG_ZEROCOPY */
#define GS_IS_GSO(m) ((m) >= GS_GSO && (m) <= GS_GSOIOVZC)
#define GS_IS_IOV(m) (GS_GSOIOV == (m) || GS_GSOIOVMSG == (m) || GS_GSOIOVZC == (m))
/* modes whose payloads come from a -M byte buffer, in order, not one train's */
#define GS_IS_MSG(m)                                                                               \
    (GS_GSOMSG == (m) || GS_GSOIOVMSG == (m) || GS_GSOPAIRMSG == (m) || GS_GSOCOPYMSG == (m))
/* modes whose datagrams carry GS_HDR bytes of header besides their payload */
#define GS_HAS_HDR(m)                                                                              \
    (GS_IS_IOV(m) || GS_GSOCOPY == (m) || GS_IS_ZC(m) || GS_GSOPAIRMSG == (m) ||                   \
     GS_GSOCOPYMSG == (m))
#define GS_IS_ZC(m) (GS_GSOZC == (m) || GS_GSOIOVZC == (m))

/* control messages, client <-> server */
enum gs_op {
    GS_START = 1, /* c->s: mode, size, run_id, want_gro, sockbuf, batch */
    GS_READY,     /* s->c: port (UDP), gro (1 granted, 0 refused), err, sockbuf (effective) */
    GS_END,       /* c->s: the stream (or ping-pong) is over */
    GS_RESULT,    /* s->c: the receiver's counters */
    GS_BYE        /* c->s: no more measurements; the server exits */
};

struct ctl_msg {
    uint32_t magic; /* GS_MAGIC: same binary, same byte order */
    uint32_t op;    /* enum gs_op */
    uint32_t mode;  /* enum gs_mode */
    uint32_t size;  /* datagram bytes */
    uint32_t run_id;
    uint32_t want_gro;  /* START: enable UDP_GRO on the receiving socket */
    uint32_t port;      /* READY: the server's UDP port */
    uint32_t gro;       /* READY: 1 = UDP_GRO enabled */
    int32_t err;        /* READY: errno of a refused UDP_GRO */
    uint32_t batch;     /* START: recvmmsg vector length */
    uint32_t rx_poll;   /* START: 1 = receiver busy-polls (MSG_DONTWAIT), 0 = blocks */
    uint32_t busy_poll; /* START: SO_BUSY_POLL usecs for the receiver (0: none) */
    uint32_t connected; /* START (pp): the server connects to the client's first ping (-k) */
    uint32_t msg_bytes; /* START (pptrain): bytes of each message */
    uint64_t sockbuf;   /* START: requested; READY: effective SO_RCVBUF */
    /* RESULT */
    uint64_t dgrams;      /* datagrams of this run received */
    uint64_t bytes;       /* their bytes */
    uint64_t win_dgrams;  /* datagrams received after the first receive call */
    uint64_t win_bytes;   /* their bytes */
    uint64_t win_ns;      /* first to last data-returning receive call */
    uint64_t calls;       /* data-returning receive calls */
    uint64_t chunks;      /* buffers received (a GRO chunk holds several datagrams) */
    uint64_t gro_chunks;  /* buffers that came with a UDP_GRO cmsg */
    uint64_t stale;       /* datagrams of another run, ignored */
    uint64_t drops;       /* SO_MEMINFO drops of the receiving socket */
    uint64_t cpu_ns;      /* receiver thread CPU time in its loop */
    uint64_t empty;       /* busy-polling receiver: receive calls that found nothing */
    uint32_t busy_budget; /* START: SO_BUSY_POLL_BUDGET (and SO_PREFER_BUSY_POLL), 0: none */
    int32_t busy_set;     /* READY: busy-poll options accepted (bits 1, 2, 4), -1: refused */
    int32_t busy_err;     /* READY: errno of a refused busy-poll option */
    uint32_t napi_id;     /* RESULT: SO_INCOMING_NAPI_ID of the receiving socket */
};
_Static_assert(sizeof(struct ctl_msg) == 176, "ctl_msg layout");

/* every datagram starts with this (gsoiov: the first bytes of its header) */
struct gs_hdr {
    uint32_t run_id;
    uint32_t seq;
    uint8_t pad[GS_HDR - 8];
};
_Static_assert(sizeof(struct gs_hdr) == GS_HDR, "gs_hdr size");

struct opts {
    int role;             /* 0: fork both, 'L': server, 'C': client */
    const char *peer;     /* -L / -C address */
    int port;             /* -L / -C port */
    const char *addr;     /* -a: local address (fork mode: both sides) */
    int modes[GS_NMODES]; /* -m, in order */
    int nmodes;
    size_t sizes[GS_MAX_SIZES]; /* -d */
    int nsizes;
    double seconds;   /* -t */
    int reps;         /* -r */
    int sockbuf;      /* -B */
    int batch;        /* -b */
    int maxsegs;      /* -s */
    int rx_poll;      /* -p */
    int zc_ring;      /* -z: send buffers of the zerocopy modes */
    int busy_poll;    /* -P: receiver SO_BUSY_POLL usecs */
    int busy_budget;  /* -Q: receiver SO_BUSY_POLL_BUDGET, with SO_PREFER_BUSY_POLL */
    size_t msg_bytes; /* -M: payload buffer of gsomsg / gsoiovmsg */
    int connected;    /* -k: the sender connect()s its socket to the receiver */
    size_t train_min; /* -T: pptrain message sizes */
    size_t train_max; /* -T */
};

static struct opts o;
static const char *self_name = "client";

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "gso_stream[%s]: ", self_name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

static int64_t now_ns(clockid_t clk)
{
    struct timespec ts;

    clock_gettime(clk, &ts);
    return (int64_t) ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* ------------------------------------------------------------------------ */
/* control channel                                                           */

static int ctl_fd = -1;

static void ctl_send(struct ctl_msg *m, uint32_t op)
{
    const char *p = (const char *) m;
    size_t left = sizeof(*m);

    m->magic = GS_MAGIC;
    m->op = op;
    while (left > 0) {
        ssize_t n = send(ctl_fd, p, left, MSG_NOSIGNAL);
        if (n < 0) {
            if (EINTR == errno) {
                continue;
            }
            die("control send: %s", strerror(errno));
        }
        p += n;
        left -= (size_t) n;
    }
}

/* Read one message; wait at most timeout_ms (-1: forever).  Returns 0 on
 * timeout before its first byte, 1 on a message; dies otherwise. */
static int ctl_recv(struct ctl_msg *m, int timeout_ms)
{
    char *p = (char *) m;
    size_t got = 0;

    while (got < sizeof(*m)) {
        struct pollfd pfd = {.fd = ctl_fd, .events = POLLIN};
        int pr = poll(&pfd, 1, got == 0 ? timeout_ms : 10000);
        ssize_t n;

        if (pr < 0 && EINTR == errno) {
            continue;
        }
        if (pr < 0) {
            die("control poll: %s", strerror(errno));
        }
        if (0 == pr) {
            if (0 == got) {
                return 0;
            }
            die("control message cut short");
        }
        n = recv(ctl_fd, p + got, sizeof(*m) - got, 0);
        if (n < 0 && EINTR == errno) {
            continue;
        }
        if (n < 0) {
            die("control recv: %s", strerror(errno));
        }
        if (0 == n) {
            die("control connection closed by the peer");
        }
        got += (size_t) n;
    }
    if (GS_MAGIC != m->magic) {
        die("control message with a bad magic number (another program or byte order?)");
    }
    return 1;
}

static void ctl_expect(struct ctl_msg *m, uint32_t op, int timeout_ms)
{
    if (!ctl_recv(m, timeout_ms)) {
        die("control: no answer from the peer within %d ms", timeout_ms);
    }
    if (m->op != op) {
        die("control: expected message %u, got %u", op, m->op);
    }
}

/* ------------------------------------------------------------------------ */
/* sockets                                                                   */

static void parse_addr(const char *text, int default_port, struct sockaddr_in *sa)
{
    char host[64];
    const char *colon = strrchr(text, ':');
    size_t hl = colon ? (size_t) (colon - text) : strlen(text);
    int port = default_port;

    if (hl >= sizeof(host)) {
        die("address too long: %s", text);
    }
    memcpy(host, text, hl);
    host[hl] = '\0';
    if (colon) {
        char *end;
        long v = strtol(colon + 1, &end, 10);
        if ('\0' != *end || v < 0 || v > 65535) {
            die("bad port in %s", text);
        }
        port = (int) v;
    }
    memset(sa, 0, sizeof(*sa));
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t) port);
    if (1 != inet_pton(AF_INET, host, &sa->sin_addr)) {
        die("not an IPv4 address: %s", host);
    }
}

/* Socket buffers of bytes each (forced for root / CAP_NET_ADMIN, otherwise
 * capped by net.core.[rw]mem_max); returns the effective SO_RCVBUF. */
static int set_bufs(int fd, int bytes)
{
    int eff = 0;
    socklen_t len = sizeof(eff);

    if (bytes > 0) {
        if (0 != setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof(bytes))) {
            (void) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
        }
        if (0 != setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &bytes, sizeof(bytes))) {
            (void) setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
        }
    }
    (void) getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &eff, &len);
    return eff;
}

static int udp_socket(const struct sockaddr_in *bind_to, int bytes, int *rcvbuf)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

    if (fd < 0) {
        die("socket: %s", strerror(errno));
    }
    *rcvbuf = set_bufs(fd, bytes);
    if (bind_to && 0 != bind(fd, (const struct sockaddr *) bind_to, sizeof(*bind_to))) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

static uint64_t socket_drops(int fd)
{
    uint32_t mem[SK_MEMINFO_VARS];
    socklen_t len = sizeof(mem);

    if (0 == getsockopt(fd, SOL_SOCKET, SO_MEMINFO, mem, &len) &&
        len > SK_MEMINFO_DROPS * sizeof(mem[0])) {
        return mem[SK_MEMINFO_DROPS];
    }
    return 0;
}

static int tcp_listen(const struct sockaddr_in *sa)
{
    int one = 1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0) {
        die("socket: %s", strerror(errno));
    }
    (void) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (0 != bind(fd, (const struct sockaddr *) sa, sizeof(*sa)) || 0 != listen(fd, 1)) {
        die("TCP listen on %s:%d: %s", inet_ntoa(sa->sin_addr), ntohs(sa->sin_port),
            strerror(errno));
    }
    return fd;
}

static int tcp_accept(int lfd)
{
    struct pollfd pfd = {.fd = lfd, .events = POLLIN};
    int fd, one = 1;

    if (poll(&pfd, 1, GS_ACCEPT_TIMEOUT_MS) <= 0) {
        die("no client within %d s", GS_ACCEPT_TIMEOUT_MS / 1000);
    }
    fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) {
        die("accept: %s", strerror(errno));
    }
    (void) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

/* connect to the server, retrying while it is not listening yet */
static int tcp_connect(const struct sockaddr_in *sa, const struct sockaddr_in *local)
{
    int64_t deadline = now_ns(CLOCK_MONOTONIC) + GS_CONNECT_TIMEOUT_S * 1000000000LL;
    int one = 1;

    for (;;) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            die("socket: %s", strerror(errno));
        }
        if (local && 0 != bind(fd, (const struct sockaddr *) local, sizeof(*local))) {
            die("bind to %s: %s", inet_ntoa(local->sin_addr), strerror(errno));
        }
        if (0 == connect(fd, (const struct sockaddr *) sa, sizeof(*sa))) {
            (void) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
            return fd;
        }
        if ((ECONNREFUSED != errno && ENETUNREACH != errno) || now_ns(CLOCK_MONOTONIC) > deadline) {
            die("connect to %s:%d: %s", inet_ntoa(sa->sin_addr), ntohs(sa->sin_port),
                strerror(errno));
        }
        close(fd);
        usleep(50000);
    }
}

/* ------------------------------------------------------------------------ */
/* server (receiver, echoer)                                                 */

struct rx_ring {
    int n;
    char *buf;
    struct mmsghdr *mm;
    struct iovec *iov;
    char *cbuf;
};

#define GS_CMSG_SPACE CMSG_SPACE(sizeof(int))

static void rx_ring_init(struct rx_ring *r, int n)
{
    r->n = n;
    r->buf = malloc((size_t) n * GS_RXBUF);
    r->mm = calloc((size_t) n, sizeof(*r->mm));
    r->iov = calloc((size_t) n, sizeof(*r->iov));
    r->cbuf = calloc((size_t) n, GS_CMSG_SPACE);
    if (!r->buf || !r->mm || !r->iov || !r->cbuf) {
        die("out of memory");
    }
    memset(r->buf, 0, (size_t) n * GS_RXBUF);
    for (int i = 0; i < n; i++) {
        r->iov[i].iov_base = r->buf + (size_t) i * GS_RXBUF;
        r->iov[i].iov_len = GS_RXBUF;
        r->mm[i].msg_hdr.msg_iov = &r->iov[i];
        r->mm[i].msg_hdr.msg_iovlen = 1;
        r->mm[i].msg_hdr.msg_control = r->cbuf + (size_t) i * GS_CMSG_SPACE;
    }
}

static void rx_ring_free(struct rx_ring *r)
{
    free(r->buf);
    free(r->mm);
    free(r->iov);
    free(r->cbuf);
}

/* gso_size of a received buffer: its UDP_GRO cmsg, or 0 if none */
static int gro_size(struct msghdr *mh)
{
    for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
        if (SOL_UDP == c->cmsg_level && UDP_GRO == c->cmsg_type) {
            int v;
            memcpy(&v, CMSG_DATA(c), sizeof(v));
            return v;
        }
    }
    return 0;
}

/* count the datagrams of one received buffer into res */
static uint64_t rx_account(struct msghdr *mh, size_t len, uint32_t run_id, struct ctl_msg *res)
{
    const char *p = mh->msg_iov[0].iov_base;
    int gso = gro_size(mh);
    size_t seg = gso > 0 ? (size_t) gso : len;
    uint64_t bytes = 0;

    if (mh->msg_flags & MSG_TRUNC) {
        die("received buffer truncated (datagram larger than %d bytes?)", GS_RXBUF);
    }
    res->chunks++;
    if (gso > 0) {
        res->gro_chunks++;
    }
    for (size_t off = 0; off < len; off += seg) {
        size_t l = len - off < seg ? len - off : seg;
        uint32_t id = 0;
        if (l >= sizeof(id)) {
            memcpy(&id, p + off, sizeof(id));
        }
        if (id == run_id && l >= sizeof(id)) {
            res->dgrams++;
            bytes += l;
        } else {
            res->stale++;
        }
    }
    res->bytes += bytes;
    return bytes;
}

static void serve_stream(int fd, const struct ctl_msg *start, struct ctl_msg *res)
{
    struct rx_ring r;
    struct ctl_msg end;
    struct timeval tv = {.tv_sec = 0, .tv_usec = GS_IDLE_MS * 1000};
    int64_t first = 0, last = 0, cpu0;
    uint64_t drops0 = socket_drops(fd);
    int end_seen = 0;
    int flags = start->rx_poll ? MSG_DONTWAIT : MSG_WAITFORONE;
    int64_t mark; /* last data or idle check (busy-polling) */

    rx_ring_init(&r, (int) start->batch);
    (void) setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    cpu0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
    mark = now_ns(CLOCK_MONOTONIC);
    for (;;) {
        int n;

        for (int i = 0; i < r.n; i++) {
            r.mm[i].msg_hdr.msg_controllen = GS_CMSG_SPACE;
            r.mm[i].msg_hdr.msg_flags = 0;
        }
        n = recvmmsg(fd, r.mm, (unsigned int) r.n, flags, NULL);
        if (n > 0) {
            int64_t t = now_ns(CLOCK_MONOTONIC);
            uint64_t b = 0, d = res->dgrams;
            for (int i = 0; i < n; i++) {
                b += rx_account(&r.mm[i].msg_hdr, r.mm[i].msg_len, start->run_id, res);
            }
            if (0 == res->calls) {
                first = t;
            } else {
                res->win_bytes += b;
                res->win_dgrams += res->dgrams - d;
            }
            last = mark = t;
            res->calls++;
            continue;
        }
        if (n < 0 && EAGAIN != errno && EWOULDBLOCK != errno && EINTR != errno) {
            die("recvmmsg: %s", strerror(errno));
        }
        if (start->rx_poll) {
            int64_t t = now_ns(CLOCK_MONOTONIC);
            if (t - mark < GS_IDLE_MS * 1000000LL) {
                res->empty++;
                continue;
            }
            mark = t;
        }
        /* the queue was idle for GS_IDLE_MS */
        if (end_seen) {
            break;
        }
        if (ctl_recv(&end, 0)) {
            if (GS_END != end.op) {
                die("control: expected the end of the stream, got %u", end.op);
            }
            end_seen = 1; /* drain whatever is still queued, then stop */
        }
    }
    res->cpu_ns = (uint64_t) (now_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0);
    res->win_ns = (uint64_t) (last - first);
    res->drops = socket_drops(fd) - drops0;
    rx_ring_free(&r);
}

/* A ping-pong server's poll that found nothing: yield the CPU now and
 * then; true once the client has said the ping-pong is over. */
static bool pp_idle(unsigned *idle)
{
    struct ctl_msg end;

    if (0 == (++*idle % GS_PP_YIELD)) {
        sched_yield();
    }
    if (0 == (*idle & 1023) && ctl_recv(&end, 0)) {
        if (GS_END != end.op) {
            die("control: expected the end of the ping-pong, got %u", end.op);
        }
        return true;
    }
    return false;
}

static void serve_pingpong(int fd, const struct ctl_msg *start, struct ctl_msg *res)
{
    char buf[256];
    unsigned idle = 0;

    int connected = 0;

    for (;;) {
        struct sockaddr_in from;
        socklen_t fl = sizeof(from);
        ssize_t n = recvfrom(fd, buf, sizeof(buf), MSG_DONTWAIT, (struct sockaddr *) &from, &fl);
        if (n > 0) {
            if (start->connected && !connected) {
                if (0 != connect(fd, (struct sockaddr *) &from, fl)) {
                    die("connect: %s", strerror(errno));
                }
                connected = 1;
            }
            if ((connected ? send(fd, buf, (size_t) n, 0)
                           : sendto(fd, buf, (size_t) n, 0, (struct sockaddr *) &from, fl)) < 0 &&
                EAGAIN != errno && ENOBUFS != errno) {
                die("sendto: %s", strerror(errno));
            }
            res->dgrams++;
            idle = 0;
            continue;
        }
        if (n < 0 && EAGAIN != errno && EWOULDBLOCK != errno && EINTR != errno) {
            die("recvfrom: %s", strerror(errno));
        }
        if (pp_idle(&idle)) {
            break;
        }
    }
}

/* The busy-poll options of START on the receiving socket fd: a mask of those
 * the kernel accepted (1 SO_BUSY_POLL, 2 SO_PREFER_BUSY_POLL, 4
 * SO_BUSY_POLL_BUDGET), or -1 with *err set when one was refused. */
static int32_t busy_poll_enable(int fd, const struct ctl_msg *m, int32_t *err)
{
    int v = (int) m->busy_poll, one = 1, budget = (int) m->busy_budget;
    int32_t set = 0;

    if (0 != setsockopt(fd, SOL_SOCKET, SO_BUSY_POLL, &v, sizeof(v))) {
        *err = errno;
        return -1;
    }
    set |= 1;
    if (budget > 0) {
        if (0 != setsockopt(fd, SOL_SOCKET, SO_PREFER_BUSY_POLL, &one, sizeof(one))) {
            *err = errno;
            return -1;
        }
        set |= 2;
        if (0 != setsockopt(fd, SOL_SOCKET, SO_BUSY_POLL_BUDGET, &budget, sizeof(budget))) {
            *err = errno;
            return -1;
        }
        set |= 4;
    }
    return set;
}

/* ------------------------------------------------------------------------ */
/* pptrain: ping-pong of messages sent as trains                            */

#define GS_TRAIN_RX 16               /* receive buffers of 64 KiB per recvmmsg */
#define GS_TRAIN_LOST_NS 200000000LL /* a reply not complete within this: lost */

/* The message's number in every datagram of a message of len bytes. */
static void train_stamp(uint8_t *buf, size_t len, size_t dgram, uint32_t run_id, uint32_t seq)
{
    for (size_t off = 0; off < len; off += dgram) {
        uint32_t id[2] = {run_id, seq};
        memcpy(buf + off, id, (len - off < sizeof(id)) ? len - off : sizeof(id));
    }
}

/* len bytes of buf to the connected fd, as trains of dgram-byte datagrams. */
static void train_send(int fd, const uint8_t *buf, size_t len, size_t dgram)
{
    size_t per = (size_t) o.maxsegs * dgram, off = 0;

    if (per > GS_UDP_MAX) {
        per = GS_UDP_MAX / dgram * dgram;
    }
    while (off < len) {
        size_t n = (len - off < per) ? len - off : per;
        char c[CMSG_SPACE(sizeof(uint16_t))];
        struct iovec v = {(void *) (buf + off), n};
        struct msghdr mh = {.msg_iov = &v, .msg_iovlen = 1};
        uint16_t seg = (uint16_t) dgram;
        ssize_t rc;

        if (n > dgram) {
            struct cmsghdr *cm;
            memset(c, 0, sizeof(c));
            mh.msg_control = c;
            mh.msg_controllen = sizeof(c);
            cm = CMSG_FIRSTHDR(&mh);
            cm->cmsg_level = SOL_UDP;
            cm->cmsg_type = UDP_SEGMENT;
            cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
            memcpy(CMSG_DATA(cm), &seg, sizeof(seg));
        }
        rc = sendmsg(fd, &mh, 0);
        if (rc < 0) {
            if (EAGAIN == errno || ENOBUFS == errno || EINTR == errno) {
                continue;
            }
            die("pptrain: sendmsg of %zu bytes: %s", n, strerror(errno));
        }
        off += n;
    }
}

/* One busy-poll receive: the bytes of datagrams numbered *seq of run_id
 * are added to *got.  follow (the server): a datagram with a later number
 * starts a new message (*seq and *got follow it); one numbered answered
 * (the message last echoed) is old.  *from: the first datagram's source.
 * Returns the datagrams seen, 0 if none was waiting. */
static int train_recv(int fd, struct rx_ring *r, uint32_t run_id, uint32_t *seq, bool follow,
                      uint32_t answered, size_t *got, struct sockaddr_in *from)
{
    int n;

    for (int i = 0; i < r->n; i++) {
        r->mm[i].msg_hdr.msg_controllen = GS_CMSG_SPACE;
        r->mm[i].msg_hdr.msg_flags = 0;
    }
    r->mm[0].msg_hdr.msg_name = from;
    r->mm[0].msg_hdr.msg_namelen = (NULL != from) ? sizeof(*from) : 0;
    n = recvmmsg(fd, r->mm, (unsigned int) r->n, MSG_DONTWAIT, NULL);
    if (n < 0) {
        if (EAGAIN == errno || EWOULDBLOCK == errno || EINTR == errno) {
            return 0;
        }
        die("pptrain: recvmmsg: %s", strerror(errno));
    }
    for (int i = 0; i < n; i++) {
        struct msghdr *mh = &r->mm[i].msg_hdr;
        size_t len = r->mm[i].msg_len;
        int g = gro_size(mh);
        size_t step = (g > 0 && (size_t) g < len) ? (size_t) g : len;
        const uint8_t *p = mh->msg_iov[0].iov_base;

        for (size_t off = 0; off < len; off += step) {
            size_t d = (len - off < step) ? len - off : step;
            uint32_t id[2];
            if (d < sizeof(id)) {
                continue;
            }
            memcpy(id, p + off, sizeof(id));
            if (id[0] != run_id) {
                continue;
            }
            if (follow && id[1] != *seq && id[1] != answered && (int32_t) (id[1] - *seq) > 0) {
                *seq = id[1];
                *got = 0;
            }
            if (id[1] == *seq) {
                *got += d;
            }
        }
    }
    return n;
}

/* pptrain's receiver: echo each whole message, as a train of its own. */
static void serve_pptrain(int fd, const struct ctl_msg *start, struct ctl_msg *res)
{
    size_t dgram = start->size, msg = start->msg_bytes, got = 0;
    uint8_t *out = malloc(msg);
    struct rx_ring r;
    uint32_t seq = 0, answered = UINT32_MAX;
    unsigned idle = 0;
    bool connected = false;

    if (NULL == out || dgram < 8 || msg <= dgram) {
        die("pptrain: bad message size %zu or datagram size %zu", msg, dgram);
    }
    memset(out, 0x5a, msg);
    rx_ring_init(&r, GS_TRAIN_RX);
    for (;;) {
        struct sockaddr_in from;
        int n = train_recv(fd, &r, start->run_id, &seq, true, answered, &got, &from);

        if (n > 0) {
            if (!connected) {
                if (0 != connect(fd, (struct sockaddr *) &from, sizeof(from))) {
                    die("pptrain: connect: %s", strerror(errno));
                }
                connected = true;
            }
            if (got >= msg && seq != answered) {
                train_stamp(out, msg, dgram, start->run_id, seq);
                train_send(fd, out, msg, dgram);
                answered = seq;
                got = 0;
                res->dgrams++; /* (messages echoed) */
            }
            idle = 0;
            continue;
        }
        if (pp_idle(&idle)) {
            break;
        }
    }
    rx_ring_free(&r);
    free(out);
}

/* serve one client: measurements until GS_BYE */
static void server_loop(const struct sockaddr_in *local)
{
    struct ctl_msg m;

    for (;;) {
        struct sockaddr_in sa = *local;
        struct ctl_msg res;
        int fd, rcvbuf, on;

        (void) ctl_recv(&m, -1);
        if (GS_BYE == m.op) {
            return;
        }
        if (GS_START != m.op) {
            die("control: expected a measurement or goodbye, got %u", m.op);
        }
        if (m.mode >= GS_NMODES || m.batch < 1 || m.batch > 1024 || m.sockbuf > INT_MAX) {
            die("control: bad START message");
        }
        /* a fresh socket per measurement: nothing of an earlier one is queued */
        fd = udp_socket(&sa, (int) m.sockbuf, &rcvbuf);
        if (fd < 0 && EADDRINUSE == errno) {
            sa.sin_port = 0;
            fd = udp_socket(&sa, (int) m.sockbuf, &rcvbuf);
        }
        if (fd < 0) {
            die("UDP bind to %s: %s", inet_ntoa(sa.sin_addr), strerror(errno));
        }
        socklen_t sl = sizeof(sa);
        (void) getsockname(fd, (struct sockaddr *) &sa, &sl);
        memset(&res, 0, sizeof(res));
        res.port = ntohs(sa.sin_port);
        res.sockbuf = (uint64_t) rcvbuf;
        if (m.want_gro) {
            on = 1;
            if (0 == setsockopt(fd, SOL_UDP, UDP_GRO, &on, sizeof(on))) {
                res.gro = 1;
            } else {
                res.err = errno;
            }
        }
        if (m.busy_poll) {
            res.busy_set = busy_poll_enable(fd, &m, &res.busy_err);
        }
        ctl_send(&res, GS_READY);
        memset(&res, 0, sizeof(res));
        if (GS_PP == m.mode) {
            serve_pingpong(fd, &m, &res);
        } else if (GS_PPTRAIN == m.mode) {
            serve_pptrain(fd, &m, &res);
        } else {
            serve_stream(fd, &m, &res);
        }
        socklen_t nl = sizeof(res.napi_id);
        if (0 != getsockopt(fd, SOL_SOCKET, SO_INCOMING_NAPI_ID, &res.napi_id, &nl)) {
            res.napi_id = 0;
        }
        close(fd);
        ctl_send(&res, GS_RESULT);
    }
}

/* ------------------------------------------------------------------------ */
/* client (sender, pinger)                                                   */

struct tx_stats {
    uint64_t dgrams, bytes, calls, errs;
    int64_t ns, cpu_ns;
    int segs;     /* datagrams per send */
    int fallback; /* 1: UDP_SEGMENT refused, sent plain */
    int zc;       /* 1: sends carried MSG_ZEROCOPY */
    /* zerocopy modes (see the output fields zc_*) */
    uint64_t zc_sends, zc_completions, zc_copied, zc_notifs, zc_waits;
};

/* Try UDP_SEGMENT = size on fd; 0 on success, the errno otherwise. */
static int gso_enable(int fd, int size)
{
    return 0 == setsockopt(fd, SOL_UDP, UDP_SEGMENT, &size, sizeof(size)) ? 0 : errno;
}

static void say_fallback(int mode, size_t size, int err, const char *how)
{
    printf("# gso_stream: mode=%s size=%zu: the kernel refused UDP_SEGMENT (%s: %s); "
           "falling back to plain sends (one datagram per sendto)\n",
           gs_mode_name[mode], size, how, strerror(err));
}

static void stream_send(int fd, const struct sockaddr_in *dst, int mode, size_t size,
                        uint32_t run_id, struct tx_stats *st)
{
    int gso = GS_IS_GSO(mode);
    int copy = GS_GSOCOPY == mode;
    int pair = GS_GSOPAIRMSG == mode, copymsg = GS_GSOCOPYMSG == mode;
    int segs = 1, err;
    /* gsopairmsg: the trailer of odd datagram 2i+1 and the header of 2i+2,
     * next to each other on the wire, in one iovec */
    static char pairhdr[GS_MAX_SEGS / 2][2 * GS_HDR];
    char *stage = NULL; /* gsocopymsg: the train, put together on every send */
    struct gs_hdr hdrs[GS_MAX_SEGS];
    struct iovec iov[2 * GS_MAX_SEGS];
    struct msghdr mh;
    char *buf;
    char *src = NULL;            /* gsocopy: the payloads, copied on every send */
    size_t foot = 0, step = 0;   /* gsomsg, gsoiovmsg: buffer bytes, bytes per train */
    size_t off = 0;              /* where the next train's payload starts */
    size_t plen = size - GS_HDR; /* gsoiov, gsocopy: payload per segment */
    uint32_t seq = 0;
    int64_t t0, deadline, cpu0;

    if (gso && 0 != (err = gso_enable(fd, (int) size))) {
        say_fallback(mode, size, err, "setsockopt");
        st->fallback = 1;
        gso = 0;
    }
    if (gso) {
        segs = (int) (GS_UDP_MAX / size);
        segs = segs > o.maxsegs ? o.maxsegs : segs < 1 ? 1 : segs;
    }
    buf = malloc((size_t) segs * size);
    if (!buf) {
        die("out of memory");
    }
    memset(buf, 0xa5, (size_t) segs * size);
    if (copy) {
        src = malloc((size_t) segs * plen);
        if (!src) {
            die("out of memory");
        }
        memset(src, 0x5a, (size_t) segs * plen);
    }
    memset(hdrs, 0, sizeof(hdrs));
    for (int k = 0; k < GS_MAX_SEGS; k++) {
        hdrs[k].run_id = run_id;
    }
    memset(&mh, 0, sizeof(mh));
    mh.msg_name = (void *) dst;
    mh.msg_namelen = sizeof(*dst);
    if (o.connected) {
        /* the kernel keeps the route in the socket: no lookup per send */
        if (0 != connect(fd, (const struct sockaddr *) dst, sizeof(*dst))) {
            die("connect: %s", strerror(errno));
        }
        mh.msg_name = NULL;
        mh.msg_namelen = 0;
    }
    mh.msg_iov = iov;
    if (GS_IS_MSG(mode)) {
        /* -M bytes of payload, rounded up to whole trains: sent train by train */
        size_t train = (size_t) segs * (GS_HAS_HDR(mode) && gso ? plen : size);
        foot = (o.msg_bytes + train - 1) / train * train;
        free(buf);
        buf = malloc(foot);
        if (!buf) {
            die("out of memory");
        }
        memset(buf, 0xa5, foot);
        step = train;
    }
    if ((pair || copymsg) && !gso) {
        die("%s needs UDP_SEGMENT", gs_mode_name[mode]);
    }
    if (copymsg && NULL == (stage = malloc((size_t) segs * size))) {
        die("out of memory");
    }
    memset(pairhdr, 0, sizeof(pairhdr));
    if (pair) {
        /* hdr 0 | pay 0, pay 1 | trl 1, hdr 2 | pay 2, pay 3 | trl 3, ...:
         * one payload iovec per pair of datagrams (adjacent in the message
         * buffer) and one header iovec between pairs; the odd datagram's
         * first 8 bytes (run id, sequence number) are written into the
         * message buffer, as gsomsg writes every datagram's */
        size_t k = 0;
        iov[k].iov_base = &hdrs[0];
        iov[k++].iov_len = GS_HDR;
        for (int i = 0; 2 * i < segs; i++) {
            iov[k].iov_base = NULL; /* the payloads: set per train */
            iov[k++].iov_len = (2 * i + 1 < segs) ? 2 * plen : plen;
            if (2 * i + 1 < segs) {
                memcpy(pairhdr[i] + GS_HDR, &hdrs[0], 4); /* header 2i+2: the run id */
                iov[k].iov_base = pairhdr[i];
                iov[k++].iov_len = (2 * i + 2 < segs) ? 2 * GS_HDR : GS_HDR;
            }
        }
        mh.msg_iovlen = k;
    } else if (copymsg) {
        iov[0].iov_base = stage;
        iov[0].iov_len = (size_t) segs * size;
        mh.msg_iovlen = 1;
    } else if (GS_IS_IOV(mode) && gso) {
        /* header iovec + payload iovec per segment; the payload is one buffer */
        for (int k = 0; k < segs; k++) {
            iov[2 * k].iov_base = &hdrs[k];
            iov[2 * k].iov_len = GS_HDR;
            iov[2 * k + 1].iov_base = buf + (size_t) k * plen;
            iov[2 * k + 1].iov_len = plen;
        }
        mh.msg_iovlen = (size_t) (2 * segs);
    } else {
        iov[0].iov_base = buf;
        iov[0].iov_len = (size_t) segs * size;
        mh.msg_iovlen = 1;
    }

restart:
    st->segs = segs;
    t0 = now_ns(CLOCK_MONOTONIC);
    cpu0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
    deadline = t0 + (int64_t) (o.seconds * 1e9);
    for (;;) {
        ssize_t n;

        if (0 == (st->calls & 15) && now_ns(CLOCK_MONOTONIC) >= deadline) {
            break;
        }
        if (pair) {
            /* the next train's payloads, and every datagram's run id and
             * sequence number (an odd one's at its payload's start) */
            hdrs[0].seq = seq++;
            for (int i = 0, k = 1; 2 * i < segs; i++, k += 2) {
                char *p = buf + off + (size_t) (2 * i) * plen;
                iov[k].iov_base = p;
                if (2 * i + 1 < segs) {
                    struct gs_hdr h = {.run_id = run_id, .seq = seq++};
                    memcpy(p + plen, &h, 8);
                    if (2 * i + 2 < segs) {
                        memcpy(pairhdr[i] + GS_HDR + 4, &seq, 4);
                        seq++;
                    }
                }
            }
        } else if (copymsg) {
            for (int k = 0; k < segs; k++) {
                char *d = stage + (size_t) k * size;
                hdrs[k].seq = seq++;
                memcpy(d, &hdrs[k], GS_HDR);
                memcpy(d + GS_HDR, buf + off + (size_t) k * plen, plen);
            }
        } else if (0 != step) {
            /* the next train of the message buffer */
            if (mh.msg_iovlen > 1) {
                for (int k = 0; k < segs; k++) {
                    iov[2 * k + 1].iov_base = buf + off + (size_t) k * plen;
                }
            } else {
                iov[0].iov_base = buf + off;
            }
        }
        /* every datagram's header: run id and sequence number */
        if (pair || copymsg) {
            /* (done above) */
        } else if (mh.msg_iovlen > 1) {
            for (int k = 0; k < segs; k++) {
                hdrs[k].seq = seq++;
            }
        } else if (copy) {
            for (int k = 0; k < segs; k++) {
                char *d = buf + (size_t) k * size;
                hdrs[k].seq = seq++;
                memcpy(d, &hdrs[k], GS_HDR);
                memcpy(d + GS_HDR, src + (size_t) k * plen, plen);
            }
        } else {
            for (int k = 0; k < segs; k++) {
                struct gs_hdr h = {.run_id = run_id, .seq = seq++};
                memcpy(buf + off + (size_t) k * size, &h, 8);
            }
        }
        if (1 == segs && mh.msg_iovlen == 1) {
            n = o.connected
                    ? send(fd, buf + off, size, 0)
                    : sendto(fd, buf + off, size, 0, (const struct sockaddr *) dst, sizeof(*dst));
        } else {
            n = sendmsg(fd, &mh, 0);
        }
        if (n < 0) {
            if (EIO == errno && gso && 0 == st->calls) {
                /* UDP_SEGMENT accepted, but the device cannot segment */
                say_fallback(mode, size, errno, "first sendmsg");
                err = 0;
                (void) setsockopt(fd, SOL_UDP, UDP_SEGMENT, &err, sizeof(err));
                st->fallback = 1;
                gso = 0;
                segs = 1;
                step = off = 0; /* the plain fallback resends the buffer's start */
                iov[0].iov_base = buf;
                iov[0].iov_len = size;
                mh.msg_iovlen = 1;
                goto restart;
            }
            if (EAGAIN == errno || ENOBUFS == errno || EINTR == errno || ECONNREFUSED == errno) {
                st->errs++;
                continue;
            }
            die("send of %d x %zu bytes: %s", segs, size, strerror(errno));
        }
        st->calls++;
        st->dgrams += (uint64_t) segs;
        st->bytes += (uint64_t) n;
        if (0 != step && (off += step) + step > foot) {
            off = 0;
        }
    }
    st->cpu_ns = now_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
    st->ns = now_ns(CLOCK_MONOTONIC) - t0;
    free(buf);
    free(src);
    free(stage);
}

/* gsozc, gsoiovzc: one send buffer of the ring */
struct zc_slot {
    char *mem;           /* page-aligned: the headers (gsoiovzc), then the payloads */
    struct gs_hdr *hdrs; /* gsoiovzc: the slot's headers */
    char *buf;           /* gsozc: the whole train; gsoiovzc: the payloads */
    struct iovec *iov;   /* the slot's iovecs */
    size_t iovlen;
    int busy; /* its last send is not reported complete yet */
};

/* the iovecs of every slot for segs datagrams per send */
static void zc_layout(struct zc_slot *slots, int n, int iovmode, int segs, size_t size)
{
    size_t plen = size - GS_HDR;

    for (int i = 0; i < n; i++) {
        struct zc_slot *z = &slots[i];
        if (iovmode) {
            for (int k = 0; k < segs; k++) {
                z->iov[2 * k].iov_base = &z->hdrs[k];
                z->iov[2 * k].iov_len = GS_HDR;
                z->iov[2 * k + 1].iov_base = z->buf + (size_t) k * plen;
                z->iov[2 * k + 1].iov_len = plen;
            }
            z->iovlen = (size_t) (2 * segs);
        } else {
            z->iov[0].iov_base = z->buf;
            z->iov[0].iov_len = (size_t) segs * size;
            z->iovlen = 1;
        }
    }
}

/* Read every zerocopy notification queued on fd's error queue and free the
 * slots of the sends it reports: the kernel numbers the MSG_ZEROCOPY sends it
 * accepts 0, 1, 2, ... (it takes a number back when it refuses a send), and
 * send number i used slot i % n.  Returns the notifications read. */
static int zc_reap(int fd, struct zc_slot *slots, int n, struct tx_stats *st)
{
    int got = 0;

    for (;;) {
        char control[CMSG_SPACE(sizeof(struct sock_extended_err) + sizeof(struct sockaddr_in))];
        struct msghdr mh;

        memset(&mh, 0, sizeof(mh));
        mh.msg_control = control;
        mh.msg_controllen = sizeof(control);
        if (recvmsg(fd, &mh, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) {
            if (EAGAIN == errno || EWOULDBLOCK == errno) {
                return got;
            }
            if (EINTR == errno) {
                continue;
            }
            die("recvmsg(MSG_ERRQUEUE): %s", strerror(errno));
        }
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
            struct sock_extended_err ee;
            uint32_t cnt;

            if (SOL_IP != c->cmsg_level || IP_RECVERR != c->cmsg_type) {
                continue;
            }
            memcpy(&ee, CMSG_DATA(c), sizeof(ee));
            if (SO_EE_ORIGIN_ZEROCOPY != ee.ee_origin) {
                continue; /* not ours (an ICMP error would need IP_RECVERR) */
            }
            if (0 != ee.ee_errno) {
                die("zerocopy notification with error %s", strerror((int) ee.ee_errno));
            }
            /* sends ee_info .. ee_data, inclusive */
            cnt = ee.ee_data - ee.ee_info + 1;
            got++;
            st->zc_notifs++;
            st->zc_completions += cnt;
            if (ee.ee_code & SO_EE_CODE_ZEROCOPY_COPIED) {
                st->zc_copied += cnt;
            }
            for (uint32_t k = 0; k < cnt && k < (uint32_t) n; k++) {
                slots[(ee.ee_info + k) % (uint32_t) n].busy = 0;
            }
        }
    }
}

/* wait until slot z is free: reap, then wait for the error queue (POLLERR) */
static void zc_wait(int fd, struct zc_slot *slots, int n, struct zc_slot *z, struct tx_stats *st)
{
    if (!z->busy) {
        return;
    }
    (void) zc_reap(fd, slots, n, st);
    if (z->busy) {
        st->zc_waits++;
    }
    while (z->busy) {
        struct pollfd pfd = {.fd = fd, .events = 0}; /* POLLERR is always reported */
        int pr = poll(&pfd, 1, 2000);
        if (pr < 0 && EINTR != errno) {
            die("poll for zerocopy completions: %s", strerror(errno));
        }
        if (0 == pr) {
            die("no zerocopy completion within 2 s");
        }
        (void) zc_reap(fd, slots, n, st);
    }
}

/* gsozc / gsoiovzc: stream_send with MSG_ZEROCOPY from a ring of o.zc_ring
 * send buffers (see the header comment) */
static void stream_send_zc(int fd, const struct sockaddr_in *dst, int mode, size_t size,
                           uint32_t run_id, struct tx_stats *st)
{
    int iovmode = GS_IS_IOV(mode);
    int n = o.zc_ring, segs, err, one = 1, zflag = MSG_ZEROCOPY, refused = 0;
    size_t plen = size - GS_HDR, hdr_bytes, bytes;
    struct zc_slot *slots = calloc((size_t) n, sizeof(*slots));
    struct msghdr mh;
    uint32_t seq = 0;
    int64_t t0, deadline, cpu0;

    if (!slots) {
        die("out of memory");
    }
    if (0 != (err = gso_enable(fd, (int) size))) {
        /* the zerocopy comparison is between GSO modes: no plain fallback */
        die("mode %s: the kernel refused UDP_SEGMENT (%s)", gs_mode_name[mode], strerror(err));
    }
    if (0 == setsockopt(fd, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof(one))) {
        st->zc = 1;
    } else {
        printf("# gso_stream: mode=%s size=%zu: the kernel refused SO_ZEROCOPY (%s); sending "
               "without MSG_ZEROCOPY (zc=0)\n",
               gs_mode_name[mode], size, strerror(errno));
        zflag = 0;
    }
    segs = (int) (GS_UDP_MAX / size);
    segs = segs > o.maxsegs ? o.maxsegs : segs < 1 ? 1 : segs;
    hdr_bytes = iovmode ? ((size_t) segs * GS_HDR + 4095) & ~(size_t) 4095 : 0;
    bytes = hdr_bytes + (((size_t) segs * (iovmode ? plen : size) + 4095) & ~(size_t) 4095);
    for (int i = 0; i < n; i++) {
        struct zc_slot *z = &slots[i];
        z->mem = aligned_alloc(4096, bytes);
        z->iov = calloc((size_t) (2 * segs), sizeof(*z->iov));
        if (!z->mem || !z->iov) {
            die("out of memory");
        }
        memset(z->mem, 0xa5, bytes); /* fault the pages in */
        z->hdrs = (struct gs_hdr *) z->mem;
        z->buf = z->mem + hdr_bytes;
        if (iovmode) {
            memset(z->hdrs, 0, hdr_bytes);
            for (int k = 0; k < segs; k++) {
                z->hdrs[k].run_id = run_id;
            }
        }
    }
    zc_layout(slots, n, iovmode, segs, size);
    memset(&mh, 0, sizeof(mh));
    mh.msg_name = (void *) dst;
    mh.msg_namelen = sizeof(*dst);

    t0 = now_ns(CLOCK_MONOTONIC);
    cpu0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
    deadline = t0 + (int64_t) (o.seconds * 1e9);
    for (;;) {
        /* send number zc_sends goes out of slot zc_sends % n (without
         * MSG_ZEROCOPY the slots are simply used in turn) */
        struct zc_slot *z = &slots[(zflag ? st->zc_sends : st->calls) % (uint64_t) n];
        ssize_t r;

        if (0 == (st->calls & 15) && now_ns(CLOCK_MONOTONIC) >= deadline) {
            break;
        }
        zc_wait(fd, slots, n, z, st);
        for (int k = 0; k < segs; k++) {
            if (iovmode) {
                z->hdrs[k].seq = seq + (uint32_t) k;
            } else {
                struct gs_hdr h = {.run_id = run_id, .seq = seq + (uint32_t) k};
                memcpy(z->buf + (size_t) k * size, &h, 8);
            }
        }
        mh.msg_iov = z->iov;
        mh.msg_iovlen = z->iovlen;
        r = sendmsg(fd, &mh, zflag);
        if (r < 0) {
            if (EMSGSIZE == errno && iovmode && zflag && 0 == st->calls && segs > 1) {
                /* more page fragments than a packet holds: one segment less */
                if (0 == refused) {
                    refused = segs;
                }
                segs--;
                zc_layout(slots, n, iovmode, segs, size);
                continue;
            }
            if (ENOBUFS == errno && zflag) {
                /* notifications not read yet hold socket option memory */
                st->errs++;
                (void) zc_reap(fd, slots, n, st);
                continue;
            }
            if (EAGAIN == errno || ENOBUFS == errno || EINTR == errno || ECONNREFUSED == errno) {
                st->errs++;
                continue;
            }
            die("send of %d x %zu bytes: %s", segs, size, strerror(errno));
        }
        if (zflag) {
            z->busy = 1;
            st->zc_sends++;
        }
        if (refused && 0 == st->calls) {
            printf("# gso_stream: mode=%s size=%zu: the kernel refused MSG_ZEROCOPY sends of %d "
                   "to %d segments of 2 iovecs (EMSGSIZE: more page fragments than a packet "
                   "holds); %d segments per send\n",
                   gs_mode_name[mode], size, refused, segs + 1, segs);
        }
        seq += (uint32_t) segs;
        st->calls++;
        st->dgrams += (uint64_t) segs;
        st->bytes += (uint64_t) r;
    }
    /* every buffer back before they are freed (and the completions counted) */
    for (int i = 0; i < n; i++) {
        zc_wait(fd, slots, n, &slots[i], st);
    }
    st->segs = segs;
    st->cpu_ns = now_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
    st->ns = now_ns(CLOCK_MONOTONIC) - t0;
    for (int i = 0; i < n; i++) {
        free(slots[i].mem);
        free(slots[i].iov);
    }
    free(slots);
}

static double per_mib(double count, double bytes)
{
    return bytes > 0 ? count / (bytes / 1048576.0) : 0.0;
}

static void measure_stream(const struct sockaddr_in *server, const struct sockaddr_in *local,
                           int mode, size_t size, int rep, uint32_t run_id)
{
    struct ctl_msg m;
    struct tx_stats st;
    struct sockaddr_in dst = *server;
    int fd, rcvbuf;
    int want_gro = GS_PLAIN != mode;
    static int said_bufs;

    memset(&m, 0, sizeof(m));
    memset(&st, 0, sizeof(st));
    fd = udp_socket(local, o.sockbuf, &rcvbuf);
    if (fd < 0) {
        die("UDP bind to %s: %s", inet_ntoa(local->sin_addr), strerror(errno));
    }
    m.mode = (uint32_t) mode;
    m.size = (uint32_t) size;
    m.run_id = run_id;
    m.want_gro = (uint32_t) want_gro;
    m.batch = (uint32_t) o.batch;
    m.rx_poll = (uint32_t) o.rx_poll;
    m.busy_poll = (uint32_t) o.busy_poll;
    m.busy_budget = (uint32_t) o.busy_budget;
    m.sockbuf = (uint64_t) o.sockbuf;
    ctl_send(&m, GS_START);
    ctl_expect(&m, GS_READY, 30000);
    dst.sin_port = htons((uint16_t) m.port);
    if (m.busy_set < 0) {
        printf("# gso_stream: mode=%s size=%zu: the receiver's kernel refused a busy-poll "
               "option (%s); busy_set=-1\n",
               gs_mode_name[mode], size, strerror(m.busy_err));
    }
    int busy_set = (int) m.busy_set;
    if (!said_bufs) {
        int snd = 0;
        socklen_t sl = sizeof(snd);
        (void) getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &snd, &sl);
        printf("# gso_stream: socket buffers (as the kernel reports them): sender SO_SNDBUF %d, "
               "receiver SO_RCVBUF %llu\n",
               snd, (unsigned long long) m.sockbuf);
        said_bufs = 1;
    }
    if (want_gro && !m.gro) {
        printf("# gso_stream: mode=%s size=%zu: the receiver's kernel refused UDP_GRO (%s); it "
               "receives one datagram per buffer\n",
               gs_mode_name[mode], size, strerror(m.err));
    }
    int gro = (int) m.gro;

    if (GS_IS_ZC(mode)) {
        stream_send_zc(fd, &dst, mode, size, run_id, &st);
    } else {
        stream_send(fd, &dst, mode, size, run_id, &st);
    }
    close(fd);
    memset(&m, 0, sizeof(m));
    ctl_send(&m, GS_END);
    ctl_expect(&m, GS_RESULT, 30000 + (int) (o.seconds * 1000));

    double win = (double) m.win_ns * 1e-9;
    double mbs = win > 0 ? (double) m.win_bytes / win / 1e6 : 0.0;
    double dps = win > 0 ? (double) m.win_dgrams / win : 0.0;
    double loss = st.dgrams ? 1.0 - (double) m.dgrams / (double) st.dgrams : 0.0;
    double txs = per_mib((double) st.calls, (double) st.bytes);
    double rxs = per_mib((double) m.calls, (double) m.bytes);

    printf("gso_stream: mode=%s size=%zu rep=%d MB/s=%.1f dgrams/s=%.0f dgrams=%llu sent=%llu "
           "loss=%.6f syscalls_per_MiB=%.2f tx_syscalls_per_MiB=%.2f rx_syscalls_per_MiB=%.2f "
           "segs_per_send=%d dgrams_per_recv=%.2f tx_MB/s=%.1f tx_cpu_us_per_MiB=%.1f "
           "rx_cpu_us_per_MiB=%.1f rx_drops=%llu stale=%llu gro_chunks=%llu rx=%s "
           "rx_empty_polls=%llu gso=%d gro=%d%s seconds=%.3f zc=%d zc_sends=%llu "
           "zc_completions=%llu zc_copied=%llu zc_notifs=%llu zc_waits=%llu busy_poll=%d "
           "busy_budget=%d busy_set=%d rx_napi_id=%u\n",
           gs_mode_name[mode], size, rep, mbs, dps, (unsigned long long) m.dgrams,
           (unsigned long long) st.dgrams, loss < 0 ? 0.0 : loss, txs + rxs, txs, rxs, st.segs,
           m.calls ? (double) m.dgrams / (double) m.calls : 0.0,
           st.ns > 0 ? (double) st.bytes / ((double) st.ns * 1e-9) / 1e6 : 0.0,
           per_mib((double) st.cpu_ns * 1e-3, (double) st.bytes),
           per_mib((double) m.cpu_ns * 1e-3, (double) m.bytes), (unsigned long long) m.drops,
           (unsigned long long) m.stale, (unsigned long long) m.gro_chunks,
           o.rx_poll ? "poll" : "block", (unsigned long long) m.empty,
           GS_IS_GSO(mode) && !st.fallback, gro, st.fallback ? " fallback=plain" : "", win, st.zc,
           (unsigned long long) st.zc_sends, (unsigned long long) st.zc_completions,
           (unsigned long long) st.zc_copied, (unsigned long long) st.zc_notifs,
           (unsigned long long) st.zc_waits, o.busy_poll, o.busy_budget, busy_set, m.napi_id);
    fflush(stdout);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *) a, y = *(const int64_t *) b;
    return x < y ? -1 : x > y;
}

/* A ping-pong client's measurement: round trips after the first `warmup`
 * are timed for `seconds`; the report gives half round trips. */
struct pp_run {
    int64_t *samples;
    uint64_t n, lost;
    int64_t sum, deadline;
    uint32_t warmup;
    double seconds;
};

static void pp_begin(struct pp_run *p, uint32_t warmup, double seconds)
{
    memset(p, 0, sizeof(*p));
    p->samples = malloc(GS_PP_MAX_SAMPLES * sizeof(*p->samples));
    if (NULL == p->samples) {
        die("out of memory");
    }
    p->warmup = warmup;
    p->seconds = seconds;
}

/* Before round trip seq: false once the measurement is over. */
static bool pp_next(struct pp_run *p, uint32_t seq)
{
    if (p->warmup == seq) {
        p->deadline = now_ns(CLOCK_MONOTONIC) + (int64_t) (p->seconds * 1e9);
    }
    return seq <= p->warmup || now_ns(CLOCK_MONOTONIC) < p->deadline;
}

/* Round trip seq, begun at t0, is complete. */
static void pp_done(struct pp_run *p, uint32_t seq, int64_t t0)
{
    int64_t t = now_ns(CLOCK_MONOTONIC) - t0;

    if (seq >= p->warmup && p->n < GS_PP_MAX_SAMPLES) {
        p->samples[p->n++] = t;
        p->sum += t;
    }
}

/* A poll for the reply found nothing: yield the CPU now and then; true
 * (the round trip counted lost) once timeout_ns have passed since t0. */
static bool pp_lost(struct pp_run *p, unsigned *spins, int64_t t0, int64_t timeout_ns)
{
    if (0 == (++*spins % GS_PP_YIELD)) {
        sched_yield();
        if (now_ns(CLOCK_MONOTONIC) - t0 > timeout_ns) {
            p->lost++;
            return true;
        }
    }
    return false;
}

/* Close fd, end the measurement with the server, and print its line:
 * head (mode, sizes, repetition), then the half round trips. */
static void pp_finish(struct pp_run *p, int fd, const char *what, const char *head)
{
    struct ctl_msg m;

    close(fd);
    memset(&m, 0, sizeof(m));
    ctl_send(&m, GS_END);
    ctl_expect(&m, GS_RESULT, 30000);
    if (0 == p->n) {
        die("%s: no reply arrived", what);
    }
    qsort(p->samples, p->n, sizeof(*p->samples), cmp_i64);
    printf("gso_stream: %s lat_us=%.3f min_us=%.3f mean_us=%.3f iters=%llu lost=%llu "
           "seconds=%.3f\n",
           head, (double) p->samples[p->n / 2] / 2e3, (double) p->samples[0] / 2e3,
           (double) p->sum / (double) p->n / 2e3, (unsigned long long) p->n,
           (unsigned long long) p->lost, p->seconds);
    fflush(stdout);
    free(p->samples);
}

static void measure_pingpong(const struct sockaddr_in *server, const struct sockaddr_in *local,
                             int rep, uint32_t run_id)
{
    struct ctl_msg m;
    struct sockaddr_in dst = *server;
    struct pp_run p;
    int fd, rcvbuf;
    char head[64];

    pp_begin(&p, GS_PP_WARMUP, o.seconds);
    memset(&m, 0, sizeof(m));
    fd = udp_socket(local, o.sockbuf, &rcvbuf);
    if (fd < 0) {
        die("UDP bind to %s: %s", inet_ntoa(local->sin_addr), strerror(errno));
    }
    m.mode = GS_PP;
    m.size = GS_PP_SIZE;
    m.connected = (uint32_t) o.connected;
    m.run_id = run_id;
    m.batch = 1;
    m.sockbuf = (uint64_t) o.sockbuf;
    ctl_send(&m, GS_START);
    ctl_expect(&m, GS_READY, 30000);
    dst.sin_port = htons((uint16_t) m.port);
    if (o.connected && 0 != connect(fd, (struct sockaddr *) &dst, sizeof(dst))) {
        die("connect: %s", strerror(errno));
    }

    for (uint32_t seq = 0; pp_next(&p, seq); seq++) {
        uint32_t ping[2] = {run_id, seq}, pong[64];
        int64_t t0;
        unsigned spins = 0;

        t0 = now_ns(CLOCK_MONOTONIC);
        if ((o.connected
                 ? send(fd, ping, GS_PP_SIZE, 0)
                 : sendto(fd, ping, GS_PP_SIZE, 0, (struct sockaddr *) &dst, sizeof(dst))) < 0 &&
            EAGAIN != errno && ENOBUFS != errno) {
            die("sendto: %s", strerror(errno));
        }
        for (;;) {
            ssize_t n = recvfrom(fd, pong, sizeof(pong), MSG_DONTWAIT, NULL, NULL);
            if (GS_PP_SIZE == n && pong[0] == run_id && pong[1] == seq) {
                pp_done(&p, seq, t0);
                break;
            }
            if (n < 0 && EAGAIN != errno && EWOULDBLOCK != errno && EINTR != errno) {
                die("recvfrom: %s", strerror(errno));
            }
            if (pp_lost(&p, &spins, t0, GS_PP_TIMEOUT_NS)) {
                break;
            }
        }
    }
    snprintf(head, sizeof(head), "mode=pp size=%d rep=%d", GS_PP_SIZE, rep);
    pp_finish(&p, fd, "ping-pong", head);
}

/* pptrain's datagram size: the largest of -d that the path's MTU carries
 * unfragmented (as the BTL sends interface-MTU datagrams); 0 if none. */
static size_t train_dgram(const struct sockaddr_in *server, const struct sockaddr_in *local)
{
    int rcvbuf, mtu = 0;
    socklen_t ml = sizeof(mtu);
    int fd = udp_socket(local, 0, &rcvbuf);
    size_t best = 0;

    if (fd < 0 || 0 != connect(fd, (const struct sockaddr *) server, sizeof(*server)) ||
        0 != getsockopt(fd, IPPROTO_IP, IP_MTU, &mtu, &ml) || mtu < 576) {
        die("pptrain: the path MTU to %s: %s", inet_ntoa(server->sin_addr), strerror(errno));
    }
    close(fd);
    for (int s = 0; s < o.nsizes; s++) {
        if (o.sizes[s] <= (size_t) mtu - 28 && o.sizes[s] > best) {
            best = o.sizes[s];
        }
    }
    if (0 == best) {
        printf("# pptrain: no -d datagram size fits the path MTU %d: not run\n", mtu);
    }
    return best;
}

/* pptrain's sender: the half round trip of msg-byte messages sent as trains
 * of dgram-byte datagrams, for a fifth of -t. */
static void measure_pptrain(const struct sockaddr_in *server, const struct sockaddr_in *local,
                            size_t dgram, size_t msg, int rep, uint32_t run_id)
{
    struct ctl_msg m;
    struct sockaddr_in dst = *server;
    struct rx_ring r;
    struct pp_run p;
    int fd, rcvbuf, on = 1;
    uint8_t *out = malloc(msg);
    char head[96];

    if (NULL == out) {
        die("out of memory");
    }
    pp_begin(&p, GS_PP_WARMUP / 10, (o.seconds / 5 < 0.1) ? 0.1 : o.seconds / 5);
    memset(out, 0xa5, msg);
    rx_ring_init(&r, GS_TRAIN_RX);
    memset(&m, 0, sizeof(m));
    fd = udp_socket(local, o.sockbuf, &rcvbuf);
    if (fd < 0) {
        die("UDP bind to %s: %s", inet_ntoa(local->sin_addr), strerror(errno));
    }
    if (0 != setsockopt(fd, SOL_UDP, UDP_GRO, &on, sizeof(on))) {
        die("pptrain: UDP_GRO: %s", strerror(errno));
    }
    m.mode = GS_PPTRAIN;
    m.size = (uint32_t) dgram;
    m.msg_bytes = (uint32_t) msg;
    m.want_gro = 1;
    m.connected = 1;
    m.run_id = run_id;
    m.batch = 1;
    m.sockbuf = (uint64_t) o.sockbuf;
    ctl_send(&m, GS_START);
    ctl_expect(&m, GS_READY, 30000);
    if (!m.gro) {
        die("pptrain: the receiver's UDP_GRO was refused (%s)", strerror(m.err));
    }
    dst.sin_port = htons((uint16_t) m.port);
    if (0 != connect(fd, (struct sockaddr *) &dst, sizeof(dst))) {
        die("connect: %s", strerror(errno));
    }
    for (uint32_t seq = 0; pp_next(&p, seq); seq++) {
        size_t got = 0;
        int64_t t0;
        unsigned spins = 0;

        train_stamp(out, msg, dgram, run_id, seq);
        t0 = now_ns(CLOCK_MONOTONIC);
        train_send(fd, out, msg, dgram);
        for (;;) {
            uint32_t want = seq;
            if (train_recv(fd, &r, run_id, &want, false, UINT32_MAX, &got, NULL) > 0 &&
                got >= msg) {
                pp_done(&p, seq, t0);
                break;
            }
            if (pp_lost(&p, &spins, t0, GS_TRAIN_LOST_NS)) {
                break;
            }
        }
    }
    snprintf(head, sizeof(head), "mode=pptrain size=%zu dgram=%zu rep=%d", msg, dgram, rep);
    pp_finish(&p, fd, "pptrain", head);
    free(out);
    rx_ring_free(&r);
}

static void client_loop(const struct sockaddr_in *server, const struct sockaddr_in *local)
{
    struct ctl_msg m;
    uint32_t run_id = ((uint32_t) getpid() << 16) ^ (uint32_t) now_ns(CLOCK_MONOTONIC);

    for (int i = 0; i < o.nmodes; i++) {
        int mode = o.modes[i];
        int nsz = GS_PP == mode ? 1 : o.nsizes;
        if (GS_PPTRAIN == mode) {
            size_t d = train_dgram(server, local);
            for (size_t msg = 1; 0 != d && msg <= o.train_max; msg <<= 1) {
                if (msg < o.train_min || msg <= d) {
                    continue;
                }
                for (int rep = 1; rep <= o.reps; rep++) {
                    measure_pptrain(server, local, d, msg, rep, ++run_id);
                }
            }
            continue;
        }
        for (int s = 0; s < nsz; s++) {
            for (int rep = 1; rep <= o.reps; rep++) {
                run_id++;
                if (GS_PP == mode) {
                    measure_pingpong(server, local, rep, run_id);
                } else {
                    measure_stream(server, local, mode, o.sizes[s], rep, run_id);
                }
            }
        }
    }
    memset(&m, 0, sizeof(m));
    ctl_send(&m, GS_BYE);
}

/* ------------------------------------------------------------------------ */
/* options                                                                   */

static void usage(int code)
{
    fprintf(code ? stderr : stdout,
            "usage: gso_stream [options]\n"
            "  -L addr[:port]  server: wait for one client on TCP addr:port (default port\n"
            "                  %d), receive on UDP addr:port; settings come from the client\n"
            "  -C addr[:port]  client: connect to that server, send, measure, print\n"
            "                  (neither -L nor -C: fork a server on -a, be its client)\n"
            "  -a addr         local address to bind (default 127.0.0.1 without -C; with -C:\n"
            "                  any)\n"
            "  -m list         modes: plain,plaingro,gso,gsoiov,gsocopy,gsomsg,gsoiovmsg,\n"
            "                  gsopairmsg,gsocopymsg,gsozc,gsoiovzc,pp,pptrain\n"
            "                  (default plain,gso,gsoiov,pp)\n"
            "  -d list         datagram sizes, comma separated (default 1472; gsoiov needs\n"
            "                  more than %d; so do gsocopy and gsoiovzc); pp always uses\n"
            "                  %d bytes; pptrain the largest that the path MTU carries\n"
            "  -t seconds      per measurement (default 2)\n"
            "  -r reps         repetitions of every mode and size (default 3)\n"
            "  -B bytes        socket buffers to request (default 8388608; forced as root)\n"
            "  -b n            recvmmsg vector length, 64 KiB buffers each (default 32)\n"
            "  -s n            most datagrams per UDP_SEGMENT send (default 64; also at most\n"
            "                  65507 bytes per send)\n"
            "  -k              the sender connect()s its socket to the receiver and sends\n"
            "                  without naming it (the route is looked up once, not per send);\n"
            "                  pp: both ends\n"
            "  -p              the receiver busy-polls (recvmmsg with MSG_DONTWAIT, as an MPI\n"
            "                  progress loop does) instead of blocking (MSG_WAITFORONE)\n"
            "  -z n            gsozc, gsoiovzc: send buffers in the ring, each one train\n"
            "                  (default 8)\n"
            "  -P usecs        receiver: SO_BUSY_POLL usecs (default 0: not set)\n"
            "  -Q budget       with -P: also SO_PREFER_BUSY_POLL 1 and SO_BUSY_POLL_BUDGET\n"
            "                  budget\n"
            "  -M bytes        gsomsg, gsoiovmsg, gsopairmsg, gsocopymsg: the payload\n"
            "                  buffer sent train by train\n"
            "                  (default 1048576)\n"
            "  -T MIN:MAX      pptrain: message sizes, the powers of two in MIN..MAX bytes\n"
            "                  above one datagram (k, m allowed; default 2048:1m)\n"
            "Output: one 'gso_stream: mode=M size=S rep=R key=value...' line per measurement;\n"
            "comments start with '#'.\n",
            GS_PORT_DEFAULT, GS_HDR, GS_PP_SIZE);
    exit(code);
}

static long parse_num(const char *s, const char *what, long lo, long hi)
{
    char *end;
    long v = strtol(s, &end, 10);

    if ('\0' != *end || end == s || v < lo || v > hi) {
        die("%s: expected a number in %ld..%ld, got '%s'", what, lo, hi, s);
    }
    return v;
}

static void parse_modes(const char *s)
{
    char *dup = strdup(s), *save = NULL;

    o.nmodes = 0;
    for (char *tok = strtok_r(dup, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int m;
        for (m = 0; m < GS_NMODES && 0 != strcmp(tok, gs_mode_name[m]); m++) {
        }
        if (GS_NMODES == m) {
            die("unknown mode '%s'", tok);
        }
        if (o.nmodes == GS_NMODES) {
            die("too many modes");
        }
        o.modes[o.nmodes++] = m;
    }
    free(dup);
}

/* -T MIN:MAX, bytes with an optional k or m (KiB, MiB) */
static size_t parse_bytes(const char *s, const char **end)
{
    char *e;
    unsigned long long v = strtoull(s, &e, 10);

    if (e == s) {
        die("-T: expected MIN:MAX in bytes (k, m allowed), got '%s'", s);
    }
    if ('k' == *e || 'K' == *e) {
        v <<= 10, e++;
    } else if ('m' == *e || 'M' == *e) {
        v <<= 20, e++;
    }
    *end = e;
    return (size_t) v;
}

static void parse_train_sizes(const char *s)
{
    const char *e;

    o.train_min = parse_bytes(s, &e);
    if (':' != *e) {
        die("-T: expected MIN:MAX, got '%s'", s);
    }
    o.train_max = parse_bytes(e + 1, &e);
    if ('\0' != *e || o.train_min > o.train_max || o.train_max > (size_t) 64 << 20) {
        die("-T: expected MIN:MAX with MIN <= MAX <= 64m, got '%s'", s);
    }
}

static void parse_sizes(const char *s)
{
    char *dup = strdup(s), *save = NULL;

    o.nsizes = 0;
    for (char *tok = strtok_r(dup, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (o.nsizes == GS_MAX_SIZES) {
            die("too many sizes");
        }
        o.sizes[o.nsizes++] = (size_t) parse_num(tok, "-d", 8, GS_UDP_MAX);
    }
    free(dup);
}

int main(int argc, char **argv)
{
    struct sockaddr_in server, local, *localp = NULL;
    int ch;
    pid_t child = -1;

    o.seconds = 2.0;
    o.reps = 3;
    o.sockbuf = 8 * 1024 * 1024;
    o.batch = 32;
    o.maxsegs = 64;
    o.zc_ring = 8;
    o.msg_bytes = 1024 * 1024;
    o.train_min = 2048;
    o.train_max = 1024 * 1024;
    parse_modes("plain,gso,gsoiov,pp");
    parse_sizes("1472");
    while ((ch = getopt(argc, argv, "L:C:a:m:d:t:r:B:b:s:pz:P:Q:M:T:kh")) != -1) {
        switch (ch) {
        case 'T':
            parse_train_sizes(optarg);
            break;
        case 'L':
        case 'C':
            o.role = ch;
            o.peer = optarg;
            break;
        case 'a':
            o.addr = optarg;
            break;
        case 'm':
            parse_modes(optarg);
            break;
        case 'd':
            parse_sizes(optarg);
            break;
        case 't':
            o.seconds = strtod(optarg, NULL);
            if (!(o.seconds > 0 && o.seconds <= 3600)) {
                die("-t: expected seconds in (0, 3600]");
            }
            break;
        case 'r':
            o.reps = (int) parse_num(optarg, "-r", 1, 1000);
            break;
        case 'B':
            o.sockbuf = (int) parse_num(optarg, "-B", 0, INT_MAX / 2);
            break;
        case 'b':
            o.batch = (int) parse_num(optarg, "-b", 1, 1024);
            break;
        case 's':
            o.maxsegs = (int) parse_num(optarg, "-s", 1, GS_MAX_SEGS);
            break;
        case 'p':
            o.rx_poll = 1;
            break;
        case 'z':
            o.zc_ring = (int) parse_num(optarg, "-z", 1, 1024);
            break;
        case 'P':
            o.busy_poll = (int) parse_num(optarg, "-P", 0, 1000000);
            break;
        case 'Q':
            o.busy_budget = (int) parse_num(optarg, "-Q", 1, 65535);
            break;
        case 'M':
            o.msg_bytes = (size_t) parse_num(optarg, "-M", 1, 1L << 30);
            break;
        case 'k':
            o.connected = 1;
            break;
        case 'h':
            usage(0);
            break;
        default:
            usage(2);
        }
    }
    if (optind < argc) {
        usage(2);
    }
    if (o.busy_budget && !o.busy_poll) {
        die("-Q needs -P (a busy-poll time)");
    }
    for (int i = 0; i < o.nmodes; i++) {
        int hdr = GS_HAS_HDR(o.modes[i]);
        for (int s = 0; s < o.nsizes && hdr; s++) {
            if (o.sizes[s] <= GS_HDR) {
                die("modes gsoiov, gsocopy, gsopairmsg, gsocopymsg, gsozc and gsoiovzc need "
                    "datagrams larger than their "
                    "%d-byte header",
                    GS_HDR);
            }
        }
    }
    setvbuf(stdout, NULL, _IOLBF, 0);

    if ('L' == o.role) {
        int lfd;
        self_name = "server";
        parse_addr(o.peer, GS_PORT_DEFAULT, &server);
        lfd = tcp_listen(&server);
        ctl_fd = tcp_accept(lfd);
        close(lfd);
        server_loop(&server);
        return 0;
    }
    if ('C' == o.role) {
        parse_addr(o.peer, GS_PORT_DEFAULT, &server);
        if (o.addr) {
            parse_addr(o.addr, 0, &local);
            localp = &local;
        }
    } else {
        /* fork mode: a server on -a, an ephemeral port */
        int lfd;
        socklen_t sl = sizeof(server);
        parse_addr(o.addr ? o.addr : "127.0.0.1", 0, &server);
        local = server;
        local.sin_port = 0;
        localp = &local;
        lfd = tcp_listen(&server);
        (void) getsockname(lfd, (struct sockaddr *) &server, &sl);
        fflush(stdout);
        child = fork();
        if (child < 0) {
            die("fork: %s", strerror(errno));
        }
        if (0 == child) {
            self_name = "server";
            ctl_fd = tcp_accept(lfd);
            close(lfd);
            server_loop(&server);
            _exit(0);
        }
        close(lfd);
    }
    ctl_fd = tcp_connect(&server, localp);
    client_loop(&server, localp);
    close(ctl_fd);
    if (child > 0) {
        int status;
        if (waitpid(child, &status, 0) < 0 || !WIFEXITED(status) || 0 != WEXITSTATUS(status)) {
            die("the server process failed");
        }
    }
    return 0;
}
