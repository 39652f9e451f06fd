/*
 * Liveness responder and prober (btl_usnic_live.h).
 *
 * One thread per process.  It owns one UDP socket per module and touches
 * nothing of the BTL but its own state below: the table of watched peers
 * (copies of what the progress engine gave it), guarded by one mutex that
 * the progress engine takes only when an endpoint has been quiet for a
 * while, never on the data path.
 *
 * The one exception: a train the kernel backend left open for the next
 * messages to join (btl_usnic_tx_coalesce) and that nobody took over
 * after USNIC_LIVE_FLUSH_US, because the application went on computing,
 * is sent by this thread (usnic_kern_flush_held(), which owns the train
 * by an atomic handover, btl_usnic_chan_kern.c).  Modules take part while
 * registered (usnic_live_flush_register), under the mutex.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include "btl_usnic.h"
#include "btl_usnic_auth.h"
#include "btl_usnic_cc.h"
#include "btl_usnic_endpoint.h"
#include "btl_usnic_live.h"
#include "btl_usnic_proto.h"
#include "btl_usnic_util.h"

#define LIVE_REPLIES_PER_SEC 2000 /* per module: more probes than this go unanswered */
#define LIVE_RX_BURST 64          /* datagrams read per socket per wake-up */

struct live_mod {
    int fd; /* -1: none */
    uint64_t key;
    struct usnic_sip_key mac; /* our secret: MACs of our replies, and of requests to us */
    uint32_t ip;              /* the socket's address and port (network byte order): */
    uint16_t port;            /* the source our probes' MACs name */
    uint64_t probes_tx, replies_rx, replies_tx, drops;
    uint64_t forged;    /* probes and pings with a wrong MAC (also in drops) */
    uint64_t pongs_tx;  /* connectivity pings echoed */
    uint64_t bucket_us; /* reply rate limit: time the bucket was last refilled */
    uint32_t tokens;
};

struct live_watch {
    bool used;
    bool active;
    int mod;
    struct sockaddr_in to; /* the peer's liveness socket */
    uint64_t peer_key;
    struct usnic_sip_key peer_mac; /* the peer's secret: MACs of its replies */
    uint64_t nonce, prev_nonce;
    uint64_t heard_us;
};

static struct {
    pthread_mutex_t lock;
    pthread_t thread;
    bool running;
    int wake_fd;
    int nmods;
    struct live_mod mods[USNIC_MAX_MODULES];
    struct live_watch *w;
    int nw;
    uint64_t interval_us;
    uint64_t rng;
    usnic_module_t *flush[USNIC_MAX_MODULES]; /* modules whose held trains this thread sends */
    int nflush;
    atomic_bool flush_armed; /* a train may be held: look every millisecond */
    /* the thread's: connectivity pings are up to 65507 bytes, read as headers */
    _Alignas(struct usnic_cc_ping) uint8_t rxbuf[65536];
} live = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake_fd = -1};

static uint64_t live_mac(const struct usnic_sip_key *key, const struct usnic_live_pkt *pkt)
{
    return usnic_siphash24(key, pkt, offsetof(struct usnic_live_pkt, mac));
}

/* A probe's MAC names where it comes from, under the secret of the module
 * probed: only a process of the job gets a reply, and only at its own
 * address (a reply to a replayed probe from elsewhere would reflect it). */
static uint64_t live_probe_mac(const struct usnic_sip_key *key, const struct usnic_live_pkt *pkt,
                               uint32_t from_ip, uint16_t from_port)
{
    return usnic_sip_request_mac(key, pkt, offsetof(struct usnic_live_pkt, mac), from_ip,
                                 from_port);
}

static void live_pkt_fill(struct usnic_live_pkt *pkt, uint8_t type, uint64_t to_key,
                          uint64_t from_key, uint64_t nonce)
{
    memset(pkt, 0, sizeof(*pkt));
    pkt->magic = USNIC_LIVE_MAGIC;
    pkt->version = USNIC_PROTO_VERSION;
    pkt->type = type;
    pkt->to_key = to_key;
    pkt->from_key = from_key;
    pkt->nonce = nonce;
}

static int open_socket(const struct sockaddr_in *ifaddr, uint16_t *port)
{
    struct sockaddr_in sin = *ifaddr;
    socklen_t len = sizeof(sin);
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    if (fd < 0) {
        return -1;
    }
    sin.sin_port = 0;
    /* connectivity pings are echoed with DF, whatever the kernel's path-MTU
     * cache says, so an answer proves the size both ways */
    (void) setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &(int){IP_PMTUDISC_PROBE}, sizeof(int));
    if (0 != bind(fd, (struct sockaddr *) &sin, sizeof(sin)) ||
        0 != getsockname(fd, (struct sockaddr *) &sin, &len)) {
        close(fd);
        return -1;
    }
    *port = sin.sin_port;
    return fd;
}

void usnic_live_open(void)
{
    usnic_component_t *c = &mca_btl_usnic_component;

    live.nmods = 0;
    for (int i = 0; i < c->num_modules && i < USNIC_MAX_MODULES; i++) {
        usnic_module_t *module = c->modules[i];
        struct live_mod *m = &live.mods[i];
        uint16_t port = 0;

        memset(m, 0, sizeof(*m));
        m->fd = -1;
        module->live_port = 0;
        if (0 == c->params.liveness) {
            continue;
        }
        m->fd = open_socket(&module->if_addr, &port);
        if (m->fd < 0) {
            USNIC_VERBOSE(5, "%s: no liveness socket (%s): peers rely on ACKs alone",
                          module->ifname, strerror(errno));
            continue;
        }
        m->key = module->key;
        m->mac = module->mac_key;
        m->ip = module->if_addr.sin_addr.s_addr;
        m->port = port;
        m->tokens = LIVE_REPLIES_PER_SEC;
        module->live_port = port;
        USNIC_VERBOSE(20, "%s: liveness socket on UDP port %u", module->ifname,
                      (unsigned) ntohs(port));
    }
    live.nmods = c->num_modules < USNIC_MAX_MODULES ? c->num_modules : USNIC_MAX_MODULES;
}

/* ---- the thread ---- */

static bool reply_allowed(struct live_mod *m, uint64_t now)
{
    if (now - m->bucket_us >= 1000000u) {
        m->bucket_us = now;
        m->tokens = LIVE_REPLIES_PER_SEC;
    }
    if (0 == m->tokens) {
        return false;
    }
    m->tokens--;
    return true;
}

static void handle_probe(struct live_mod *m, const struct usnic_live_pkt *in,
                         const struct sockaddr_in *from, uint64_t now)
{
    struct usnic_live_pkt out;

    if (in->to_key != m->key) {
        m->drops++;
        return;
    }
    /* before the rate limit: forgeries must not use up the replies */
    if (!usnic_sip_tag_equal(usnic_sip_tag_load(in->mac),
                             live_probe_mac(&m->mac, in, from->sin_addr.s_addr, from->sin_port))) {
        m->forged++;
        m->drops++;
        return;
    }
    if (!reply_allowed(m, now)) {
        m->drops++;
        return;
    }
    live_pkt_fill(&out, USNIC_LIVE_REPLY, in->from_key, m->key, in->nonce);
    usnic_sip_tag_store(out.mac, live_mac(&m->mac, &out));
    if (sendto(m->fd, &out, sizeof(out), MSG_DONTWAIT, (const struct sockaddr *) from,
               sizeof(*from)) == (ssize_t) sizeof(out)) {
        m->replies_tx++;
    }
}

/* Called with live.lock held. */
static void handle_reply(int mod, struct live_mod *m, const struct usnic_live_pkt *in,
                         const struct sockaddr_in *from, uint64_t now)
{
    if (in->to_key != m->key) {
        m->drops++;
        return;
    }
    for (int i = 0; i < live.nw; i++) {
        struct live_watch *w = &live.w[i];
        if (!w->used || w->mod != mod || w->peer_key != in->from_key ||
            (in->nonce != w->nonce && in->nonce != w->prev_nonce) ||
            from->sin_addr.s_addr != w->to.sin_addr.s_addr || from->sin_port != w->to.sin_port) {
            continue;
        }
        if (!usnic_sip_tag_equal(usnic_sip_tag_load(in->mac), live_mac(&w->peer_mac, in))) {
            break;
        }
        w->heard_us = now;
        m->replies_rx++;
        return;
    }
    m->drops++;
}

static void drain(int mod, uint64_t now)
{
    struct live_mod *m = &live.mods[mod];

    for (int n = 0; n < LIVE_RX_BURST; n++) {
        struct usnic_live_pkt pkt;
        struct sockaddr_in from;
        socklen_t flen = sizeof(from);
        ssize_t r = recvfrom(m->fd, live.rxbuf, sizeof(live.rxbuf), MSG_DONTWAIT | MSG_TRUNC,
                             (struct sockaddr *) &from, &flen);
        bool forged = false;

        if (r < 0) {
            return; /* EAGAIN: drained; anything else: try again at the next wake-up */
        }
        if (flen == sizeof(from) && AF_INET == from.sin_family &&
            (size_t) r <= sizeof(live.rxbuf) && (size_t) r != sizeof(pkt) &&
            usnic_cc_make_pong(live.rxbuf, (size_t) r, m->key, &m->mac, from.sin_addr.s_addr,
                               from.sin_port, &forged)) {
            /* a connectivity ping (btl_usnic_cc.h): back at the same size */
            if (reply_allowed(m, now) && sendto(m->fd, live.rxbuf, (size_t) r, MSG_DONTWAIT,
                                                (struct sockaddr *) &from, sizeof(from)) == r) {
                m->pongs_tx++;
            } else {
                m->drops++;
            }
            continue;
        }
        if (forged) {
            pthread_mutex_lock(&live.lock);
            m->forged++;
            m->drops++;
            pthread_mutex_unlock(&live.lock);
            continue;
        }
        if ((size_t) r == sizeof(pkt)) {
            memcpy(&pkt, live.rxbuf, sizeof(pkt));
        }
        pthread_mutex_lock(&live.lock);
        if ((size_t) r != sizeof(pkt) || flen != sizeof(from) || AF_INET != from.sin_family ||
            USNIC_LIVE_MAGIC != pkt.magic || USNIC_PROTO_VERSION != pkt.version || 0 != pkt.zero) {
            m->drops++;
        } else if (USNIC_LIVE_PROBE == pkt.type) {
            handle_probe(m, &pkt, &from, now);
        } else if (USNIC_LIVE_REPLY == pkt.type) {
            handle_reply(mod, m, &pkt, &from, now);
        } else {
            m->drops++;
        }
        pthread_mutex_unlock(&live.lock);
    }
}

/* Called with live.lock held: one probe to every watched peer. */
static void probe_round(void)
{
    for (int i = 0; i < live.nw; i++) {
        struct live_watch *w = &live.w[i];
        struct live_mod *m;
        struct usnic_live_pkt out;

        if (!w->used || !w->active) {
            continue;
        }
        m = &live.mods[w->mod];
        w->prev_nonce = w->nonce;
        w->nonce = usnic_rand(&live.rng);
        live_pkt_fill(&out, USNIC_LIVE_PROBE, w->peer_key, m->key, w->nonce);
        usnic_sip_tag_store(out.mac, live_probe_mac(&w->peer_mac, &out, m->ip, m->port));
        if (sendto(m->fd, &out, sizeof(out), MSG_DONTWAIT, (const struct sockaddr *) &w->to,
                   sizeof(w->to)) == (ssize_t) sizeof(out)) {
            m->probes_tx++;
        }
    }
}

bool usnic_live_flusher(void)
{
    return live.running;
}

/* Where module is in live.flush, -1 if not there (under the mutex). */
static int flush_index(const usnic_module_t *module)
{
    for (int i = 0; i < live.nflush; i++) {
        if (live.flush[i] == module) {
            return i;
        }
    }
    return -1;
}

void usnic_live_flush_register(usnic_module_t *module)
{
    pthread_mutex_lock(&live.lock);
    if (flush_index(module) < 0 && live.nflush < USNIC_MAX_MODULES) {
        live.flush[live.nflush++] = module;
    }
    pthread_mutex_unlock(&live.lock);
}

void usnic_live_flush_unregister(usnic_module_t *module)
{
    int i;

    pthread_mutex_lock(&live.lock);
    i = flush_index(module);
    if (i >= 0) {
        live.flush[i] = live.flush[--live.nflush];
    }
    pthread_mutex_unlock(&live.lock);
}

void usnic_live_flush_arm(void)
{
    /* (after the train was marked held: the thread clears the flag before
     * it looks, so either it sees the train or we see the flag clear) */
    if (!atomic_exchange(&live.flush_armed, true) && live.wake_fd >= 0) {
        uint64_t one = 1;
        (void) !write(live.wake_fd, &one, sizeof(one));
    }
}

/* Send the held trains that waited long enough; keep looking while any is held. */
static void flush_round(uint64_t now)
{
    int held = 0;

    atomic_store(&live.flush_armed, false);
    pthread_mutex_lock(&live.lock);
    for (int i = 0; i < live.nflush; i++) {
        held += usnic_kern_flush_held(live.flush[i], now, USNIC_LIVE_FLUSH_US);
    }
    pthread_mutex_unlock(&live.lock);
    if (held > 0) {
        atomic_store(&live.flush_armed, true);
    }
}

static void *live_main(void *arg)
{
    struct pollfd pfd[USNIC_MAX_MODULES + 1];
    int map[USNIC_MAX_MODULES + 1];
    uint64_t next_round = usnic_now_us() + live.interval_us;
    (void) arg;

    for (;;) {
        int n = 0, timeout_ms;
        uint64_t now = usnic_now_us();

        pfd[n].fd = live.wake_fd;
        pfd[n].events = POLLIN;
        map[n++] = -1;
        for (int i = 0; i < live.nmods; i++) {
            if (live.mods[i].fd >= 0) {
                pfd[n].fd = live.mods[i].fd;
                pfd[n].events = POLLIN;
                map[n++] = i;
            }
        }
        timeout_ms = (next_round > now) ? (int) ((next_round - now + 999) / 1000) : 0;
        if (atomic_load(&live.flush_armed) && timeout_ms > 1) {
            timeout_ms = 1;
        }
        if (poll(pfd, (nfds_t) n, timeout_ms) < 0 && EINTR != errno) {
            break;
        }
        now = usnic_now_us();
        if (pfd[0].revents & POLLIN) {
            uint64_t v;
            if (read(live.wake_fd, &v, sizeof(v)) < 0 && EAGAIN != errno) {
                break;
            }
            pthread_mutex_lock(&live.lock);
            bool stop = !live.running;
            pthread_mutex_unlock(&live.lock);
            if (stop) {
                break;
            }
        }
        for (int i = 1; i < n; i++) {
            if (pfd[i].revents & (POLLIN | POLLERR)) {
                drain(map[i], now);
            }
        }
        if (atomic_load(&live.flush_armed)) {
            flush_round(now);
        }
        if (now >= next_round) {
            pthread_mutex_lock(&live.lock);
            probe_round();
            pthread_mutex_unlock(&live.lock);
            next_round = now + live.interval_us;
        }
    }
    return NULL;
}

int usnic_live_start(void)
{
    const usnic_params_t *p = &mca_btl_usnic_component.params;
    bool any = false;
    int rc;

    for (int i = 0; i < live.nmods; i++) {
        any = any || live.mods[i].fd >= 0;
    }
    if (!any) {
        return OPAL_SUCCESS;
    }
    /* a probe round every fifth of the peer timeout, at most every second */
    live.interval_us = 1000000u;
    if (p->peer_timeout > 0 && (uint64_t) p->peer_timeout * 200000u < live.interval_us) {
        live.interval_us = (uint64_t) p->peer_timeout * 200000u;
    }
    if (0 != usnic_random_bytes(&live.rng, sizeof(live.rng)) || 0 == live.rng) {
        live.rng = usnic_now_us() | 1u;
    }
    live.wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (live.wake_fd < 0) {
        goto fail;
    }
    live.running = true;
    rc = pthread_create(&live.thread, NULL, live_main, NULL);
    if (0 != rc) {
        live.running = false;
        errno = rc;
        goto fail;
    }
    return OPAL_SUCCESS;

fail:
    USNIC_VERBOSE(5, "no liveness thread (%s): peers rely on ACKs alone", strerror(errno));
    usnic_live_stop();
    return OPAL_ERROR;
}

void usnic_live_stop(void)
{
    pthread_mutex_lock(&live.lock);
    bool was = live.running;
    live.running = false;
    pthread_mutex_unlock(&live.lock);
    if (was) {
        uint64_t one = 1;
        if (write(live.wake_fd, &one, sizeof(one)) == (ssize_t) sizeof(one)) {
            pthread_join(live.thread, NULL);
        } else {
            pthread_cancel(live.thread);
            pthread_join(live.thread, NULL);
        }
    }
    for (int i = 0; i < live.nmods; i++) {
        if (live.mods[i].fd >= 0) {
            close(live.mods[i].fd);
            live.mods[i].fd = -1;
        }
    }
    if (live.wake_fd >= 0) {
        close(live.wake_fd);
        live.wake_fd = -1;
    }
    free(live.w);
    live.w = NULL;
    live.nw = 0;
}

/* ---- the progress engine's side ---- */

bool usnic_live_possible(const mca_btl_base_endpoint_t *ep)
{
    int mod = ep->module->index;
    return 0 != ep->remote.live_port && mod < live.nmods && live.mods[mod].fd >= 0 && live.running;
}

void usnic_live_watch(mca_btl_base_endpoint_t *ep)
{
    struct live_watch *w;

    if (!usnic_live_possible(ep)) {
        return;
    }
    pthread_mutex_lock(&live.lock);
    if (ep->live_slot < 0) {
        int slot = -1;
        for (int i = 0; i < live.nw; i++) {
            if (!live.w[i].used) {
                slot = i;
                break;
            }
        }
        if (slot < 0) {
            struct live_watch *nw = realloc(live.w, (size_t) (live.nw + 16) * sizeof(*nw));
            if (NULL == nw) {
                pthread_mutex_unlock(&live.lock);
                return;
            }
            memset(nw + live.nw, 0, 16 * sizeof(*nw));
            live.w = nw;
            slot = live.nw;
            live.nw += 16;
        }
        w = &live.w[slot];
        memset(w, 0, sizeof(*w));
        w->used = true;
        w->mod = ep->module->index;
        w->to.sin_family = AF_INET;
        w->to.sin_addr.s_addr = ep->remote.ipv4;
        w->to.sin_port = ep->remote.live_port;
        w->peer_key = ep->remote.key;
        usnic_sip_key_load(&w->peer_mac, ep->remote.secret);
        ep->live_slot = slot;
    }
    w = &live.w[ep->live_slot];
    if (!w->active) {
        w->active = true;
        USNIC_VERBOSE(20, "%s: peer module 0x%x quiet with data outstanding: probing its liveness",
                      ep->module->ifname, ep->remote.module_id);
    }
    pthread_mutex_unlock(&live.lock);
}

void usnic_live_quiet(mca_btl_base_endpoint_t *ep)
{
    if (ep->live_slot < 0) {
        return;
    }
    pthread_mutex_lock(&live.lock);
    live.w[ep->live_slot].active = false;
    pthread_mutex_unlock(&live.lock);
}

uint64_t usnic_live_heard(const mca_btl_base_endpoint_t *ep)
{
    uint64_t t;

    if (ep->live_slot < 0) {
        return 0;
    }
    pthread_mutex_lock(&live.lock);
    t = live.w[ep->live_slot].heard_us;
    pthread_mutex_unlock(&live.lock);
    return t;
}

void usnic_live_forget(mca_btl_base_endpoint_t *ep)
{
    if (ep->live_slot < 0) {
        return;
    }
    pthread_mutex_lock(&live.lock);
    if (NULL != live.w) {
        memset(&live.w[ep->live_slot], 0, sizeof(live.w[0]));
    }
    pthread_mutex_unlock(&live.lock);
    ep->live_slot = -1;
}

void usnic_live_counts(int index, uint64_t *probes_tx, uint64_t *replies_rx, uint64_t *replies_tx,
                       uint64_t *drops, uint64_t *forged)
{
    *probes_tx = *replies_rx = *replies_tx = *drops = *forged = 0;
    if (index < 0 || index >= live.nmods) {
        return;
    }
    pthread_mutex_lock(&live.lock);
    *probes_tx = live.mods[index].probes_tx;
    *replies_rx = live.mods[index].replies_rx;
    *replies_tx = live.mods[index].replies_tx;
    *drops = live.mods[index].drops;
    *forged = live.mods[index].forged;
    pthread_mutex_unlock(&live.lock);
}
