/*
 * The connectivity checker's client (btl_usnic_cc.h): the process's side.
 *
 * One thread per process does all the checker's I/O.  Callers (the BTL's
 * threads) only touch the table of requests under cc.lock and wake the
 * thread through an eventfd; verdicts come back into the table and are
 * announced by a condition variable and a generation counter.
 *
 * Modes of the thread:
 *   AGENT   (local rank 0) it runs the engine for its own requests and
 *           serves the host's clients on the Unix socket;
 *   CLIENT  it forwards requests to the agent (connecting again after 1
 *           ms, then twice as long each time up to every 20 ms, until
 *           connect_timeout, since the agent may not listen yet) and waits
 *           for the RES messages;
 *   LOCAL   no agent (none came, version mismatch, or it went away): the
 *           thread runs the engine itself and re-issues every request the
 *           agent had not answered.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* eventfd, pthread_cond_timedwait under -std=c11 */
#endif
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "btl_usnic_cagent.h"
#include "btl_usnic_cc.h"

#define CC_MAX_CONNS 256
#define CC_LOCAL_TAG 0xffffffffu /* waiter tag of this process's own requests */
/* a client's tries to connect to the agent: after 1 ms, doubling up to 20 ms */
#define CC_CONNECT_GAP_MIN_US 1000u
#define CC_CONNECT_GAP_MAX_US 20000u

enum {
    REC_NEW,
    REC_SENT,
    REC_DONE
};
enum {
    MODE_AGENT,
    MODE_CLIENT,
    MODE_LOCAL
};

struct cc_rec {
    struct usnic_cc_req req;
    struct usnic_cc_result res;
    int state;
};

struct cc_conn {
    int fd; /* -1: free */
    uint32_t tag;
    bool hello;
};

static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool started, stop;
    pthread_t thread;
    int wake_fd;
    struct usnic_cc_config cfg;
    char path[sizeof(((struct sockaddr_un *) 0)->sun_path)];
    struct cc_rec *rec;
    uint32_t nrec, cap;
    uint32_t gen;
    /* thread-owned */
    int mode;
    struct cc_engine *eng;
    int listen_fd;
    struct cc_conn conns[CC_MAX_CONNS];
    uint32_t next_tag;
    int agent_fd;
    bool agent_hello;
    uint64_t connect_until, next_connect, listen_at;
    uint64_t connect_gap; /* us until the next try to connect to the agent */
    uint32_t connect_tries;
} cc = {.lock = PTHREAD_MUTEX_INITIALIZER,
        .cond = PTHREAD_COND_INITIALIZER,
        .wake_fd = -1,
        .listen_fd = -1,
        .agent_fd = -1};

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

static void clog_(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void clog_(int level, const char *fmt, ...)
{
    char msg[256];
    va_list ap;

    if (NULL == cc.cfg.log) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    cc.cfg.log(level, msg);
}

/* Called with cc.lock held. */
static void rec_done(uint32_t id, const struct usnic_cc_result *res)
{
    if (id < 1 || id > cc.nrec || REC_DONE == cc.rec[id - 1].state) {
        return;
    }
    cc.rec[id - 1].res = *res;
    cc.rec[id - 1].state = REC_DONE;
    __atomic_add_fetch(&cc.gen, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&cc.cond);
}

/* The engine's verdicts: to this process's table or to a client. */
static void engine_done(void *ctx, uint64_t waiter, const struct usnic_cc_req *req,
                        const struct usnic_cc_result *res)
{
    uint32_t tag = (uint32_t) (waiter >> 32), id = (uint32_t) waiter;
    (void) ctx;

    if (CC_LOCAL_TAG == tag) {
        pthread_mutex_lock(&cc.lock);
        rec_done(id, res);
        pthread_mutex_unlock(&cc.lock);
        return;
    }
    for (int i = 0; i < CC_MAX_CONNS; i++) {
        if (cc.conns[i].fd >= 0 && cc.conns[i].tag == tag) {
            struct usnic_cc_msg m = {.magic = USNIC_CC_MAGIC, .type = CC_MSG_RES, .id = id};
            m.req = *req;
            m.res = *res;
            m.res.by_agent = 1;
            /* a client too slow to read its answers loses them: its own
             * timeout then has it check by itself */
            (void) send(cc.conns[i].fd, &m, sizeof(m), MSG_DONTWAIT | MSG_NOSIGNAL);
            return;
        }
    }
}

static bool ensure_engine(void)
{
    if (NULL == cc.eng) {
        cc.eng =
            cc_engine_new(cc.cfg.ack_timeout_ms, cc.cfg.num_retries, engine_done, NULL, cc.cfg.log);
    }
    return NULL != cc.eng;
}

/* Hand every request not yet out to whoever decides now. */
static void dispatch(void)
{
    uint64_t t = now_us();

    pthread_mutex_lock(&cc.lock);
    for (uint32_t i = 0; i < cc.nrec; i++) {
        struct cc_rec *r = &cc.rec[i];
        if (REC_NEW != r->state) {
            continue;
        }
        if (MODE_CLIENT == cc.mode) {
            struct usnic_cc_msg m = {.magic = USNIC_CC_MAGIC, .type = CC_MSG_REQ, .id = i + 1};
            if (cc.agent_fd < 0 || !cc.agent_hello) {
                break; /* not connected yet */
            }
            m.req = r->req;
            if (send(cc.agent_fd, &m, sizeof(m), MSG_DONTWAIT | MSG_NOSIGNAL) !=
                (ssize_t) sizeof(m)) {
                break; /* full: again at the next wake-up */
            }
            r->state = REC_SENT;
        } else if (ensure_engine()) {
            struct cc_rec copy = *r;
            r->state = REC_SENT;
            /* the engine may answer at once (engine_done takes the lock) */
            pthread_mutex_unlock(&cc.lock);
            cc_engine_add(cc.eng, &copy.req, ((uint64_t) CC_LOCAL_TAG << 32) | (i + 1), t);
            pthread_mutex_lock(&cc.lock);
        } else {
            struct usnic_cc_result res = {.status = USNIC_CC_UNCHECKED};
            rec_done(i + 1, &res);
        }
    }
    pthread_mutex_unlock(&cc.lock);
}

/* No agent to talk to: check by ourselves from now on. */
static void go_local(const char *why)
{
    if (cc.agent_fd >= 0) {
        close(cc.agent_fd);
        cc.agent_fd = -1;
    }
    if (MODE_LOCAL == cc.mode) {
        return;
    }
    clog_(5, "connectivity checker: %s; this process checks its paths itself", why);
    cc.mode = MODE_LOCAL;
    pthread_mutex_lock(&cc.lock);
    for (uint32_t i = 0; i < cc.nrec; i++) {
        if (REC_SENT == cc.rec[i].state) {
            cc.rec[i].state = REC_NEW;
        }
    }
    pthread_mutex_unlock(&cc.lock);
}

static void try_connect(uint64_t t)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    struct usnic_cc_msg hello = {.magic = USNIC_CC_MAGIC,
                                 .type = CC_MSG_HELLO,
                                 .version = USNIC_CC_VERSION,
                                 .id = (uint32_t) getpid()};
    int fd;

    if (t < cc.next_connect) {
        return;
    }
    if (t >= cc.connect_until) {
        go_local("no agent listened in time");
        return;
    }
    /* The agent (local rank 0) starts listening about when the others
     * first look for it.  A first retry 20 ms later held every process
     * that missed it by a little that long: its first sends to a peer
     * wait for the path's verdict (btl_usnic_path.h; until session 33 the
     * sending call itself waited, and its peers' first messages meanwhile
     * went unacknowledged through four retransmission timeouts: half of
     * the 2-rank jobs on loopback took 20 ms longer to their first
     * message; session 30). */
    cc.next_connect = t + cc.connect_gap;
    cc.connect_gap =
        (cc.connect_gap < CC_CONNECT_GAP_MAX_US / 2) ? 2 * cc.connect_gap : CC_CONNECT_GAP_MAX_US;
    strcpy(sun.sun_path, cc.path);
    pthread_mutex_lock(&cc.lock);
    cc.connect_tries++;
    pthread_mutex_unlock(&cc.lock);
    fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return;
    }
    if (0 != connect(fd, (struct sockaddr *) &sun, sizeof(sun)) ||
        send(fd, &hello, sizeof(hello), MSG_NOSIGNAL) != (ssize_t) sizeof(hello)) {
        close(fd); /* not listening yet (ENOENT, ECONNREFUSED): again soon */
        return;
    }
    cc.agent_fd = fd;
    cc.agent_hello = false;
}

static void agent_read(void)
{
    for (;;) {
        struct usnic_cc_msg m;
        ssize_t r = recv(cc.agent_fd, &m, sizeof(m), MSG_DONTWAIT);
        if (r < 0 && (EAGAIN == errno || EWOULDBLOCK == errno)) {
            return;
        }
        if (r <= 0) {
            go_local("the agent went away");
            return;
        }
        if (!cc_msg_valid(&m, r)) {
            go_local("the agent sent something unexpected");
            return;
        }
        if (CC_MSG_HELLO == m.type) {
            if (USNIC_CC_VERSION != m.version) {
                char why[80];
                snprintf(why, sizeof(why), "the agent speaks version %u, we %u", m.version,
                         USNIC_CC_VERSION);
                go_local(why);
                return;
            }
            cc.agent_hello = true;
            clog_(20, "connectivity checker: connected to the host's agent (try %u)",
                  usnic_cc_connect_tries());
        } else if (CC_MSG_RES == m.type) {
            pthread_mutex_lock(&cc.lock);
            /* the agent answers with the request its check was made for:
             * the same path, maybe toward another process of the peer host */
            if (m.id >= 1 && m.id <= cc.nrec && cc.rec[m.id - 1].req.local_ip == m.req.local_ip &&
                cc.rec[m.id - 1].req.remote_ip == m.req.remote_ip &&
                cc.rec[m.id - 1].req.full == m.req.full) {
                rec_done(m.id, &m.res);
            }
            pthread_mutex_unlock(&cc.lock);
        }
    }
}

/* ---- the agent's side of the Unix socket ---- */

static void conn_close(struct cc_conn *c)
{
    if (NULL != cc.eng) {
        cc_engine_forget(cc.eng, c->tag);
    }
    close(c->fd);
    c->fd = -1;
}

static void conn_read(struct cc_conn *c)
{
    for (;;) {
        struct usnic_cc_msg m;
        ssize_t r = recv(c->fd, &m, sizeof(m), MSG_DONTWAIT);
        if (r < 0 && (EAGAIN == errno || EWOULDBLOCK == errno)) {
            return;
        }
        if (r <= 0 || !cc_msg_valid(&m, r)) {
            conn_close(c);
            return;
        }
        if (CC_MSG_HELLO == m.type) {
            struct usnic_cc_msg a = {.magic = USNIC_CC_MAGIC,
                                     .type = CC_MSG_HELLO,
                                     .version = USNIC_CC_VERSION,
                                     .id = (uint32_t) getpid()};
            (void) send(c->fd, &a, sizeof(a), MSG_DONTWAIT | MSG_NOSIGNAL);
            if (USNIC_CC_VERSION != m.version) {
                clog_(5, "connectivity agent: client pid %u speaks version %u, we %u", m.id,
                      m.version, USNIC_CC_VERSION);
                conn_close(c);
                return;
            }
            c->hello = true;
        } else if (CC_MSG_REQ == m.type && c->hello && ensure_engine()) {
            cc_engine_add(cc.eng, &m.req, ((uint64_t) c->tag << 32) | m.id, now_us());
        } else {
            conn_close(c);
            return;
        }
    }
}

static void agent_accept(void)
{
    for (;;) {
        int fd = cc_agent_accept(cc.listen_fd), i;
        if (fd < 0) {
            return;
        }
        for (i = 0; i < CC_MAX_CONNS && cc.conns[i].fd >= 0; i++) {
        }
        if (CC_MAX_CONNS == i) {
            close(fd); /* that client checks by itself */
            continue;
        }
        cc.conns[i].fd = fd;
        cc.conns[i].tag = ++cc.next_tag;
        if (CC_LOCAL_TAG == cc.conns[i].tag) {
            cc.conns[i].tag = ++cc.next_tag;
        }
        cc.conns[i].hello = false;
    }
}

static void agent_stop_listening(void)
{
    if (cc.listen_fd >= 0) {
        close(cc.listen_fd);
        cc.listen_fd = -1;
        unlink(cc.path);
    }
    for (int i = 0; i < CC_MAX_CONNS; i++) {
        if (cc.conns[i].fd >= 0) {
            conn_close(&cc.conns[i]);
        }
    }
}

/* ---- the thread ---- */

static void *cc_main(void *arg)
{
    (void) arg;

    for (;;) {
        struct pollfd pfd[CC_MAX_CONNS + 24];
        int n = 0, nfd, timeout = -1, engine_first, t1;
        uint64_t t = now_us();
        bool stop;

        pthread_mutex_lock(&cc.lock);
        stop = cc.stop;
        pthread_mutex_unlock(&cc.lock);
        if (stop) {
            break;
        }
        if (MODE_AGENT == cc.mode && cc.listen_fd < 0 && t >= cc.listen_at) {
            cc.listen_fd = cc_agent_listen(cc.path);
            if (cc.listen_fd < 0) {
                clog_(5,
                      "connectivity agent: cannot listen on %s (%s); each process checks "
                      "its paths itself",
                      cc.path, strerror(errno));
                cc.listen_at = UINT64_MAX;
            } else {
                clog_(20, "connectivity agent: listening on %s", cc.path);
            }
        }
        if (MODE_CLIENT == cc.mode && cc.agent_fd < 0) {
            try_connect(t);
            if (MODE_CLIENT == cc.mode && cc.agent_fd < 0) {
                timeout = (int) ((cc.next_connect > t ? cc.next_connect - t : 0) / 1000u) + 1;
            }
        }
        dispatch();

        pfd[n].fd = cc.wake_fd;
        pfd[n++].events = POLLIN;
        if (cc.listen_fd >= 0) {
            pfd[n].fd = cc.listen_fd;
            pfd[n++].events = POLLIN;
        } else if (MODE_AGENT == cc.mode && cc.listen_at != UINT64_MAX) {
            int w = (int) ((cc.listen_at - t) / 1000u) + 1;
            timeout = (timeout < 0 || w < timeout) ? w : timeout;
        }
        for (int i = 0; i < CC_MAX_CONNS; i++) {
            if (cc.conns[i].fd >= 0) {
                pfd[n].fd = cc.conns[i].fd;
                pfd[n++].events = POLLIN;
            }
        }
        if (cc.agent_fd >= 0) {
            pfd[n].fd = cc.agent_fd;
            pfd[n++].events = POLLIN;
        }
        engine_first = n;
        if (NULL != cc.eng) {
            int fds[16];
            nfd = cc_engine_fds(cc.eng, fds, 16);
            for (int i = 0; i < nfd; i++) {
                pfd[n].fd = fds[i];
                pfd[n++].events = POLLIN;
            }
            t1 = cc_engine_run(cc.eng, -1, t); /* timers only: poll says what to read */
            timeout = (t1 >= 0 && (timeout < 0 || t1 < timeout)) ? t1 : timeout;
        }
        if (poll(pfd, (nfds_t) n, timeout) < 0 && EINTR != errno) {
            break;
        }
        t = now_us();
        for (int i = 0; i < n; i++) {
            if (0 == pfd[i].revents) {
                continue;
            }
            if (pfd[i].fd == cc.wake_fd) {
                uint64_t v;
                (void) read(cc.wake_fd, &v, sizeof(v));
            } else if (pfd[i].fd == cc.listen_fd) {
                agent_accept();
            } else if (pfd[i].fd == cc.agent_fd) {
                agent_read();
            } else if (i >= engine_first) {
                (void) cc_engine_run(cc.eng, pfd[i].fd, t);
            } else {
                for (int j = 0; j < CC_MAX_CONNS; j++) {
                    if (cc.conns[j].fd == pfd[i].fd) {
                        conn_read(&cc.conns[j]);
                        break;
                    }
                }
            }
        }
    }
    return NULL;
}

int usnic_cc_init(const struct usnic_cc_config *cfg)
{
    int rc;

    pthread_mutex_lock(&cc.lock);
    if (cc.started) {
        pthread_mutex_unlock(&cc.lock);
        return 0;
    }
    if (strlen(cfg->sock_path) >= sizeof(cc.path)) {
        pthread_mutex_unlock(&cc.lock);
        return -ENAMETOOLONG;
    }
    cc.cfg = *cfg;
    strcpy(cc.path, cfg->sock_path);
    cc.cfg.sock_path = cc.path;
    for (int i = 0; i < CC_MAX_CONNS; i++) {
        cc.conns[i].fd = -1;
    }
    /* without a socket path there is no agent to be or to find */
    cc.mode = ('\0' == cc.path[0]) ? MODE_LOCAL : cfg->agent ? MODE_AGENT : MODE_CLIENT;
    cc.listen_at =
        now_us() + (uint64_t) (cfg->agent_delay_ms > 0 ? cfg->agent_delay_ms : 0) * 1000u;
    cc.connect_until = now_us() + (uint64_t) cfg->connect_timeout_ms * 1000u;
    cc.next_connect = 0;
    cc.connect_gap = CC_CONNECT_GAP_MIN_US;
    cc.connect_tries = 0;
    cc.stop = false;
    cc.wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (cc.wake_fd < 0) {
        rc = -errno;
        pthread_mutex_unlock(&cc.lock);
        return rc;
    }
    rc = pthread_create(&cc.thread, NULL, cc_main, NULL);
    if (0 != rc) {
        close(cc.wake_fd);
        cc.wake_fd = -1;
        pthread_mutex_unlock(&cc.lock);
        return -rc;
    }
    cc.started = true;
    pthread_mutex_unlock(&cc.lock);
    return 0;
}

static void wake(void)
{
    uint64_t one = 1;
    (void) write(cc.wake_fd, &one, sizeof(one));
}

/* Does record r hold an answered check again (epoch > 0) toward the same
 * peer process as req, over the same pair of addresses? */
static bool rec_reusable(const struct cc_rec *r, const struct usnic_cc_req *req)
{
    return REC_DONE == r->state && 0 != r->req.epoch && r->req.local_ip == req->local_ip &&
           r->req.remote_ip == req->remote_ip && r->req.remote_port == req->remote_port &&
           r->req.remote_key == req->remote_key;
}

uint32_t usnic_cc_request(const struct usnic_cc_req *req)
{
    uint32_t id = 0;

    pthread_mutex_lock(&cc.lock);
    if (!cc.started) {
        pthread_mutex_unlock(&cc.lock);
        return 0;
    }
    for (uint32_t i = 0; i < cc.nrec; i++) {
        if (0 == memcmp(&cc.rec[i].req, req, sizeof(*req))) {
            id = i + 1;
            break;
        }
    }
    /* A check again while the job runs takes over the record of the last
     * one toward the same peer (answered, and its verdict applied: the
     * BTL asks again only then), so that checks repeated all job long,
     * every btl_usnic_connectivity_raise_after on a path that stays
     * reduced, do not grow the table. */
    for (uint32_t i = 0; 0 == id && 0 != req->epoch && i < cc.nrec; i++) {
        if (rec_reusable(&cc.rec[i], req)) {
            memset(&cc.rec[i], 0, sizeof(cc.rec[0]));
            cc.rec[i].req = *req;
            cc.rec[i].state = REC_NEW;
            id = i + 1;
            wake();
        }
    }
    if (0 == id) {
        if (cc.nrec == cc.cap) {
            uint32_t cap = cc.cap ? 2 * cc.cap : 32;
            struct cc_rec *n = realloc(cc.rec, (size_t) cap * sizeof(*n));
            if (NULL == n) {
                pthread_mutex_unlock(&cc.lock);
                return 0;
            }
            cc.rec = n;
            cc.cap = cap;
        }
        memset(&cc.rec[cc.nrec], 0, sizeof(cc.rec[0]));
        cc.rec[cc.nrec].req = *req;
        cc.rec[cc.nrec].state = REC_NEW;
        id = ++cc.nrec;
        wake();
    }
    pthread_mutex_unlock(&cc.lock);
    return id;
}

bool usnic_cc_result(uint32_t handle, struct usnic_cc_result *res)
{
    bool done = false;

    pthread_mutex_lock(&cc.lock);
    if (handle >= 1 && handle <= cc.nrec && REC_DONE == cc.rec[handle - 1].state) {
        *res = cc.rec[handle - 1].res;
        done = true;
    }
    pthread_mutex_unlock(&cc.lock);
    return done;
}

bool usnic_cc_wait(uint32_t handle, struct usnic_cc_result *res, int timeout_ms)
{
    struct timespec until;
    bool done = false;

    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long) (timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&cc.lock);
    while (handle >= 1 && handle <= cc.nrec) {
        if (REC_DONE == cc.rec[handle - 1].state) {
            *res = cc.rec[handle - 1].res;
            done = true;
            break;
        }
        if (ETIMEDOUT == pthread_cond_timedwait(&cc.cond, &cc.lock, &until)) {
            break;
        }
    }
    pthread_mutex_unlock(&cc.lock);
    return done;
}

uint32_t usnic_cc_generation(void)
{
    return __atomic_load_n(&cc.gen, __ATOMIC_ACQUIRE);
}

void usnic_cc_fini(void)
{
    pthread_mutex_lock(&cc.lock);
    if (!cc.started) {
        pthread_mutex_unlock(&cc.lock);
        return;
    }
    cc.stop = true;
    wake();
    pthread_mutex_unlock(&cc.lock);
    pthread_join(cc.thread, NULL);
    agent_stop_listening();
    if (cc.agent_fd >= 0) {
        close(cc.agent_fd);
        cc.agent_fd = -1;
    }
    cc_engine_free(cc.eng);
    cc.eng = NULL;
    close(cc.wake_fd);
    cc.wake_fd = -1;
    pthread_mutex_lock(&cc.lock);
    free(cc.rec);
    cc.rec = NULL;
    cc.nrec = cc.cap = 0;
    cc.started = false;
    pthread_mutex_unlock(&cc.lock);
}

uint32_t usnic_cc_connect_tries(void)
{
    uint32_t n;

    pthread_mutex_lock(&cc.lock);
    n = cc.connect_tries;
    pthread_mutex_unlock(&cc.lock);
    return n;
}
