/* Connectivity verdicts applied to endpoints (btl_usnic_path.h). */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "opal/util/output.h"
#include "opal/util/proc.h"
#include "opal/util/show_help.h"

#include "btl_usnic.h"
#include "btl_usnic_cc.h"
#include "btl_usnic_chan.h"
#include "btl_usnic_endpoint.h"
#include "btl_usnic_path.h"
#include "btl_usnic_proc.h"
#include "btl_usnic_proto.h"

#define PATH_CONNECT_TIMEOUT_MS 5000 /* how long a client looks for its host's agent */

static bool path_on;
static uint32_t path_seen;
/* the earliest deadline of the checks pending (UINT64_MAX: none) */
static uint64_t path_due = UINT64_MAX;
/* how long a start-up check may take before it counts as UNCHECKED (us) */
static uint64_t path_timeout;
/* when a path that loses nothing has its verdict: one round of pings (us) */
static uint64_t path_first_round;

/* The search for the agent, then every round of pings and some slack;
 * USNIC_CC_TEST_PATH_TIMEOUT_MS (tests only) sets it. */
static uint64_t path_timeout_us(void)
{
    const usnic_params_t *p = &mca_btl_usnic_component.params;
    const char *t = getenv("USNIC_CC_TEST_PATH_TIMEOUT_MS");

    if (NULL != t && atoi(t) > 0) {
        return 1000u * (uint64_t) atoi(t);
    }
    return 1000u *
           (uint64_t) (PATH_CONNECT_TIMEOUT_MS + 2000 +
                       (p->connectivity_error_num_retries + 2) * p->connectivity_ack_timeout);
}

/* The checker's thread reports through this.  Not opal_output: it takes
 * its lock only when the job uses threads and shares one buffer, so two
 * threads in it at once corrupt the heap (seen: glibc's malloc abort in a
 * rank whose checker logged while the main thread did).  One write(2) of a
 * line formatted like opal_output's is atomic and lock-free. */
static void path_log(int level, const char *msg)
{
    char line[512];
    int n;

    if (opal_output_get_verbosity(opal_btl_base_framework.framework_output) < level) {
        return;
    }
    n = snprintf(line, sizeof(line), "[%s:%d] btl:usnic: %s\n", opal_process_info.nodename,
                 (int) getpid(), msg);
    if (n > 0) {
        ssize_t w =
            write(STDERR_FILENO, line, (size_t) n < sizeof(line) ? (size_t) n : sizeof(line) - 1);
        (void) w;
    }
}

void usnic_path_init(void)
{
    usnic_component_t *c = &mca_btl_usnic_component;
    const usnic_params_t *p = &c->params;
    struct usnic_cc_config cfg = {0};
    char path[256] = "";
    const char *delay = getenv("USNIC_CC_TEST_AGENT_DELAY_MS"); /* tests only */
    bool any = false;
    int rc;

    path_on = false;
    if (0 == p->connectivity_check) {
        USNIC_VERBOSE(5, "connectivity checker off (btl_usnic_connectivity_check 0)");
        return;
    }
    for (int i = 0; i < c->num_modules; i++) {
        any = any || 0 != c->modules[i]->live_port;
    }
    if (!any) {
        USNIC_VERBOSE(5, "connectivity checker off: no module has a liveness responder to "
                         "answer pings (btl_usnic_liveness)");
        return;
    }
    if (NULL != opal_process_info.job_session_dir) {
        snprintf(path, sizeof(path), "%s/usnic-cagent.sock", opal_process_info.job_session_dir);
    }
    cfg.sock_path = path;
    cfg.agent = 0 == opal_process_info.my_local_rank;
    cfg.ack_timeout_ms = p->connectivity_ack_timeout;
    cfg.num_retries = p->connectivity_error_num_retries;
    cfg.connect_timeout_ms = PATH_CONNECT_TIMEOUT_MS;
    cfg.agent_delay_ms = (NULL != delay) ? atoi(delay) : 0;
    cfg.log = path_log;
    rc = usnic_cc_init(&cfg);
    if (0 != rc) {
        USNIC_VERBOSE(5, "connectivity checker not started (%s): paths are not checked",
                      strerror(-rc));
        return;
    }
    path_on = true;
    path_seen = usnic_cc_generation();
    path_timeout = path_timeout_us();
    path_first_round = 1000u * (uint64_t) p->connectivity_ack_timeout;
    if (cfg.agent && cfg.agent_delay_ms > 0) {
        USNIC_VERBOSE(5, "connectivity agent listens %d ms late (USNIC_CC_TEST_AGENT_DELAY_MS)",
                      cfg.agent_delay_ms);
    }
    USNIC_VERBOSE(20, "connectivity checker started (%s, socket %s)",
                  cfg.agent ? "agent of this host" : "client", path[0] ? path : "none");
}

void usnic_path_fini(void)
{
    if (path_on) {
        usnic_cc_fini();
        path_on = false;
    }
}

/* The datagram size the endpoint uses now (its FRAG payload and header). */
static uint32_t path_in_use(const mca_btl_base_endpoint_t *ep)
{
    return ep->frag_max + (uint32_t) USNIC_HDR_LEN_FRAG;
}

/* Ask the checker about ep's path for datagrams of `full` bytes. */
static uint32_t path_request(const mca_btl_base_endpoint_t *ep, uint32_t full, uint16_t epoch)
{
    struct usnic_cc_req req;

    memset(&req, 0, sizeof(req));
    req.local_ip = ep->module->if_addr.sin_addr.s_addr;
    req.remote_ip = ep->remote.ipv4;
    req.remote_port = ep->remote.live_port;
    req.full = full;
    req.remote_key = ep->remote.key;
    memcpy(req.remote_secret, ep->remote.secret, sizeof(req.remote_secret));
    req.epoch = epoch;
    return usnic_cc_request(&req);
}

void usnic_path_endpoint(mca_btl_base_endpoint_t *ep)
{
    /* the pair's datagram size, as usnic_endpoint_create cut it from both
     * sides' records */
    ep->path_full = path_in_use(ep);
    ep->path_size = 0;
    ep->path_handle = 0;
    ep->path_state = USNIC_PATH_READY;
    ep->stuck_since = 0;
    ep->recheck_handle = 0;
    ep->recheck_epoch = 0;
    ep->recheck_after = 0;
    ep->recheck_full = 0;
    ep->raise_at = 0;
    if (!path_on || 0 == ep->remote.live_port) {
        return;
    }
    ep->path_handle = path_request(ep, ep->path_full, 0);
    if (0 != ep->path_handle) {
        ep->path_state = USNIC_PATH_PENDING;
        ep->path_held = false;
        ep->path_waited = false;
        ep->path_asked = usnic_now_us();
        if (ep->path_asked + path_timeout < path_due) {
            path_due = ep->path_asked + path_timeout;
        }
    }
}

static const char *peer_host(const mca_btl_base_endpoint_t *ep)
{
    return (NULL != ep->proc && NULL != ep->proc->proc_hostname) ? ep->proc->proc_hostname
                                                                 : "unknown";
}

/* Report a path that cannot be used and tell the PML: datagrams of
 * `expected` bytes vanish, `size` is the largest that passed. */
static void path_fail(mca_btl_base_endpoint_t *ep, const char *topic, uint32_t expected,
                      uint32_t size)
{
    usnic_module_t *module = ep->module;
    char lip[INET_ADDRSTRLEN], rip[INET_ADDRSTRLEN], rif[USNIC_IFNAME_BUF];
    const usnic_params_t *p = &mca_btl_usnic_component.params;

    if (ep->dead) {
        return;
    }
    ep->dead = true;
    usnic_rx_predict_forget();
    inet_ntop(AF_INET, &module->if_addr.sin_addr, lip, sizeof(lip));
    inet_ntop(AF_INET, &ep->remote.ipv4, rip, sizeof(rip));
    usnic_rec_ifname(&ep->remote, rif);
    if (0 == strcmp(topic, "no path")) {
        usnic_show_help_running(topic, opal_process_info.nodename, module->ifname, lip,
                                peer_host(ep), rif, rip, p->connectivity_error_num_retries,
                                p->connectivity_ack_timeout);
    } else {
        usnic_show_help_running(topic, opal_process_info.nodename, module->ifname, lip,
                                peer_host(ep), rif, rip, expected, size);
    }
    if (NULL != module->error_cb) {
        module->error_cb(&module->super, MCA_BTL_ERROR_FLAGS_FATAL, ep->proc,
                         (char *) "usnic: no usable path to peer");
    }
}

/* Say that ep's path carries `size` where `expected` was meant: once per
 * pair of interfaces, topic and size (every endpoint over the same path
 * gets the same verdict). */
static void path_warn_once(const mca_btl_base_endpoint_t *ep, const char *topic, uint32_t expected,
                           uint32_t size)
{
    static struct {
        uint64_t path;
        const char *topic;
    } warned[64];
    static int nwarned;
    usnic_module_t *module = ep->module;
    uint64_t k = ((uint64_t) ep->remote.ipv4 << 32) ^ module->if_addr.sin_addr.s_addr ^
                 ((uint64_t) size << 16);
    char lip[INET_ADDRSTRLEN], rip[INET_ADDRSTRLEN], rif[USNIC_IFNAME_BUF];

    for (int i = 0; i < nwarned; i++) {
        if (warned[i].path == k && warned[i].topic == topic) {
            return;
        }
    }
    if (nwarned < 64) {
        warned[nwarned].path = k;
        warned[nwarned++].topic = topic;
    }
    inet_ntop(AF_INET, &module->if_addr.sin_addr, lip, sizeof(lip));
    inet_ntop(AF_INET, &ep->remote.ipv4, rip, sizeof(rip));
    usnic_rec_ifname(&ep->remote, rif);
    usnic_show_help_running(topic, opal_process_info.nodename, module->ifname, lip, peer_host(ep),
                            rif, rip, expected, size);
}

/* A REDUCED verdict: may the pair go on with `size`-byte datagrams where
 * `in_use` were meant?  The fallback is on, and the size is smaller and
 * still useful (a PUT's headers fit it, and so does a PART's unit). */
_Static_assert(USNIC_CC_MIN_USEFUL > USNIC_HDR_LEN_PUT &&
                   USNIC_CC_MIN_USEFUL >= USNIC_HDR_LEN_CHUNK + USNIC_PART_UNIT,
               "a useful size carries a PUT chunk and a PART");
static bool path_can_shrink(uint32_t size, uint32_t in_use)
{
    return 0 != mca_btl_usnic_component.params.connectivity_mtu_fallback &&
           size >= USNIC_CC_MIN_USEFUL && size < in_use;
}

/* `size`-byte datagrams to this peer from now on (at most the pair's
 * full size): the fragments not cut yet are cut to it. */
static void path_resize(mca_btl_base_endpoint_t *ep, uint32_t size)
{
    ep->path_size = size;
    usnic_endpoint_set_dgram(ep, size);
    /* the peer checks the same path and cuts its chunks alike, but when
     * it changes size is its own verdict's: accept any chunk size */
    ep->reasm.chunk = 0;
}

/* While ep's path carries less than the pair's full size, try the full
 * size again btl_usnic_connectivity_raise_after from now. */
static void path_raise_later(mca_btl_base_endpoint_t *ep, uint64_t now)
{
    const int after = mca_btl_usnic_component.params.connectivity_raise_after;

    ep->raise_at = 0;
    if (0 != after && !ep->dead && path_in_use(ep) < ep->path_full) {
        ep->raise_at = now + (uint64_t) after * 1000000u;
    }
}

/* May ep's path be checked again now: the checker runs, the peer answers
 * pings, no check of its path is pending or under way, it is alive? */
static bool path_recheck_possible(const mca_btl_base_endpoint_t *ep)
{
    return path_on && 0 != ep->remote.live_port && 0 == ep->recheck_handle &&
           USNIC_PATH_PENDING != ep->path_state && !ep->dead;
}

/* Ask the checker about ep's path again while the job runs, for `full`
 * bytes (a new epoch: no verdict given before is taken).  False if the
 * request could not be made. */
static bool path_recheck(mca_btl_base_endpoint_t *ep, uint32_t full)
{
    if (0 == ++ep->recheck_epoch) {
        ep->recheck_epoch = 1; /* (0 is the start-up check's) */
    }
    ep->recheck_full = full;
    ep->recheck_handle = path_request(ep, full, ep->recheck_epoch);
    return 0 != ep->recheck_handle;
}

static void path_apply(mca_btl_base_endpoint_t *ep, const struct usnic_cc_result *res)
{
    usnic_module_t *module = ep->module;
    char lip[INET_ADDRSTRLEN], rip[INET_ADDRSTRLEN], rif[USNIC_IFNAME_BUF];

    ep->path_state = USNIC_PATH_READY;
    module->stats.cc_forged += res->forged;
    inet_ntop(AF_INET, &module->if_addr.sin_addr, lip, sizeof(lip));
    inet_ntop(AF_INET, &ep->remote.ipv4, rip, sizeof(rip));
    usnic_rec_ifname(&ep->remote, rif);
    switch (res->status) {
    case USNIC_CC_OK:
        ep->path_size = res->size;
        USNIC_VERBOSE(20, "path %s (%s) -> %s %s (%s): %u-byte datagrams proven (%s, %u rounds)",
                      module->ifname, lip, peer_host(ep), rif, rip, res->size,
                      res->by_agent ? "host agent" : "this process", res->rounds);
        return;
    case USNIC_CC_REDUCED:
        if (!path_can_shrink(res->size, ep->path_full)) {
            path_fail(ep, "path mtu black hole", ep->path_full, res->size);
            return;
        }
        path_resize(ep, res->size);
        /* fragments allocated while the check ran were cut for the full
         * size: those go as PART packets */
        ep->tx_dgram_max = res->size;
        path_raise_later(ep, usnic_now_us());
        USNIC_VERBOSE(5, "path %s (%s) -> %s %s (%s): %u-byte datagrams vanish, %u pass: using %u",
                      module->ifname, lip, peer_host(ep), rif, rip, ep->path_full, res->size,
                      res->size);
        path_warn_once(ep, "path mtu reduced", ep->path_full, res->size);
        return;
    case USNIC_CC_NOPATH:
        path_fail(ep, "no path", 0, 0);
        return;
    default:
        USNIC_VERBOSE(5, "path %s (%s) -> %s %s (%s): not checked; using %u-byte datagrams",
                      module->ifname, lip, peer_host(ep), rif, rip, ep->path_full);
        return;
    }
}

void usnic_path_first_wait(mca_btl_base_endpoint_t *ep)
{
    struct usnic_cc_result res;
    uint64_t now = usnic_now_us(), until = ep->path_asked + path_first_round;
    bool got;

    ep->path_waited = true;
    if (now >= until) {
        return; /* late already: a ping was lost, or the path is a black hole */
    }
    usnic_unlock();
    got = usnic_cc_wait(ep->path_handle, &res, (int) ((until - now + 999u) / 1000u));
    usnic_lock();
    USNIC_VERBOSE(20, "path to %s: a first send waited %llu us for the verdict (%s)", peer_host(ep),
                  (unsigned long long) usnic_elapsed_us(usnic_now_us(), now),
                  got ? "it came" : "not yet: the send waits in the queue");
    if (got && USNIC_PATH_PENDING == ep->path_state) { /* (or another thread applied it) */
        path_apply(ep, &res);
        usnic_path_map_write();
    }
}

void usnic_path_stuck(mca_btl_base_endpoint_t *ep, uint32_t seq, uint32_t bytes, uint64_t now)
{
    const int stuck_after = mca_btl_usnic_component.params.connectivity_recheck_after;
    char lip[INET_ADDRSTRLEN], rip[INET_ADDRSTRLEN];

    if (0 == ep->stuck_since || seq != ep->stuck_seq) {
        ep->stuck_seq = seq; /* a new oldest segment: its first timeout */
        ep->stuck_since = now;
        return;
    }
    /* (a small datagram lost again and again is no matter of size) */
    if (0 == stuck_after ||
        usnic_elapsed_us(now, ep->stuck_since) < (uint64_t) stuck_after * 1000u ||
        !path_recheck_possible(ep) || now < ep->recheck_after || bytes <= USNIC_CC_MIN_USEFUL) {
        return;
    }
    if (!path_recheck(ep, path_in_use(ep))) {
        ep->recheck_after = now + USNIC_PATH_RECHECK_GAP_US;
        return;
    }
    inet_ntop(AF_INET, &ep->module->if_addr.sin_addr, lip, sizeof(lip));
    inet_ntop(AF_INET, &ep->remote.ipv4, rip, sizeof(rip));
    USNIC_VERBOSE(5,
                  "path %s (%s) -> %s (%s): segment %u (a %u-byte datagram) unacknowledged "
                  "through retransmission timeouts for %llu ms: checking the path again for "
                  "%u-byte datagrams",
                  ep->module->ifname, lip, peer_host(ep), rip, (unsigned) seq, (unsigned) bytes,
                  (unsigned long long) (usnic_elapsed_us(now, ep->stuck_since) / 1000),
                  (unsigned) path_in_use(ep));
}

void usnic_path_raise(mca_btl_base_endpoint_t *ep, uint64_t now)
{
    char lip[INET_ADDRSTRLEN], rip[INET_ADDRSTRLEN];

    ep->raise_at = 0;
    /* (a check under way sets the next try when its verdict comes) */
    if (!path_recheck_possible(ep) || path_in_use(ep) >= ep->path_full) {
        return;
    }
    if (!path_recheck(ep, ep->path_full)) {
        path_raise_later(ep, now);
        return;
    }
    inet_ntop(AF_INET, &ep->module->if_addr.sin_addr, lip, sizeof(lip));
    inet_ntop(AF_INET, &ep->remote.ipv4, rip, sizeof(rip));
    USNIC_VERBOSE(5,
                  "path %s (%s) -> %s (%s): %u-byte datagrams for %d s: checking whether %u pass "
                  "again",
                  ep->module->ifname, lip, peer_host(ep), rip, (unsigned) path_in_use(ep),
                  mca_btl_usnic_component.params.connectivity_raise_after,
                  (unsigned) ep->path_full);
}

/* The verdict of a check again while the job runs: one that data stuck
 * asked for (recheck_full is the size in use), or the raise timer (the
 * pair's full size). */
static void path_recheck_apply(mca_btl_base_endpoint_t *ep, const struct usnic_cc_result *res)
{
    usnic_module_t *module = ep->module;
    uint32_t in_use = path_in_use(ep), grow = 0;
    uint64_t now = usnic_now_us();
    char lip[INET_ADDRSTRLEN], rip[INET_ADDRSTRLEN];

    ep->recheck_handle = 0;
    module->stats.cc_forged += res->forged;
    /* the next check of stuck data may come as soon as data is stuck
     * again after the path changed size (it failed again), but only 10 s
     * after one that found nothing to change (losses only) */
    ep->recheck_after = 0;
    ep->stuck_since = 0;
    inet_ntop(AF_INET, &module->if_addr.sin_addr, lip, sizeof(lip));
    inet_ntop(AF_INET, &ep->remote.ipv4, rip, sizeof(rip));
    if (USNIC_CC_REDUCED == res->status && res->size < in_use) {
        if (!path_can_shrink(res->size, in_use)) {
            path_fail(ep, "path mtu black hole while running", in_use, res->size);
            return;
        }
        /* Cut smaller from now on; what was cut at the old size (in the
         * window, or a whole fragment the PML handed over) goes in parts
         * (btl_usnic_part.h), and all of it again now: the oldest of it
         * has been waiting through backed-off timeouts for seconds. */
        path_resize(ep, res->size);
        ep->tx_dgram_max = res->size;
        module->stats.path_shrunk++;
        path_raise_later(ep, now);
        (void) usnic_rel_tx_resend_all(&ep->rel);
        USNIC_VERBOSE(5,
                      "path %s (%s) -> %s (%s) checked again: %u-byte datagrams vanish, %u pass: "
                      "using %u from now on, and sending the %u in flight in parts",
                      module->ifname, lip, peer_host(ep), rip, in_use, res->size, res->size,
                      (unsigned) usnic_rel_tx_inflight(&ep->rel));
        path_warn_once(ep, "path mtu reduced while running", in_use, res->size);
        return;
    }
    if (USNIC_CC_OK == res->status) {
        grow = ep->recheck_full;
    } else if (USNIC_CC_REDUCED == res->status) {
        grow = res->size;
    }
    if (grow > in_use && grow <= ep->path_full && !ep->dead) {
        /* New data is cut larger; what was cut smaller goes as it is, and
         * what still waits from before the path shrank goes whole if it
         * fits now. */
        path_resize(ep, grow);
        ep->tx_dgram_max = (grow < ep->path_full) ? grow : 0;
        module->stats.path_grown++;
        path_raise_later(ep, now);
        USNIC_VERBOSE(5,
                      "path %s (%s) -> %s (%s) checked again: %u-byte datagrams pass again: "
                      "using %u from now on (the pair's full size: %u)",
                      module->ifname, lip, peer_host(ep), rip, grow, grow, ep->path_full);
        return;
    }
    path_raise_later(ep, now);
    if (ep->recheck_full <= in_use) {
        ep->recheck_after = now + USNIC_PATH_RECHECK_GAP_US;
    }
    if (USNIC_CC_REDUCED == res->status) {
        USNIC_VERBOSE(5,
                      "path %s (%s) -> %s (%s) checked again: %u-byte datagrams still vanish, %u "
                      "pass: staying at %u (next try in %d s)",
                      module->ifname, lip, peer_host(ep), rip, ep->recheck_full, res->size, in_use,
                      mca_btl_usnic_component.params.connectivity_raise_after);
        return;
    }
    USNIC_VERBOSE(
        5, "path %s (%s) -> %s (%s) checked again: %s", module->ifname, lip, peer_host(ep), rip,
        USNIC_CC_OK == res->status       ? "full-size datagrams pass (only losses)"
        : USNIC_CC_NOPATH == res->status ? "nothing passes now (btl_usnic_peer_timeout decides)"
                                         : "could not be checked");
}

void usnic_path_progress(void)
{
    usnic_component_t *c = &mca_btl_usnic_component;
    uint64_t now = 0, due = UINT64_MAX;
    uint32_t gen;
    bool any = false;

    if (!path_on) {
        return;
    }
    gen = usnic_cc_generation();
    if (OPAL_LIKELY(gen == path_seen)) {
        if (OPAL_LIKELY(UINT64_MAX == path_due)) {
            return;
        }
        now = usnic_now_us();
        if (now < path_due) {
            return;
        }
    }
    path_seen = gen;
    for (int i = 0; i < c->num_modules; i++) {
        opal_list_item_t *item;
        OPAL_LIST_FOREACH(item, &c->modules[i]->endpoints, opal_list_item_t)
        {
            mca_btl_base_endpoint_t *ep = (mca_btl_base_endpoint_t *) item;
            struct usnic_cc_result res;
            if (USNIC_PATH_PENDING == ep->path_state) {
                if (usnic_cc_result(ep->path_handle, &res)) {
                    path_apply(ep, &res);
                    any = true;
                } else if ((0 != now ? now : (now = usnic_now_us())) >=
                           ep->path_asked + path_timeout) {
                    /* no verdict in time: the checker is gone or stuck */
                    USNIC_VERBOSE(5, "path to %s: no verdict %llu ms after the check was asked for",
                                  peer_host(ep), (unsigned long long) (path_timeout / 1000u));
                    memset(&res, 0, sizeof(res));
                    res.status = USNIC_CC_UNCHECKED;
                    path_apply(ep, &res);
                    any = true;
                } else if (ep->path_asked + path_timeout < due) {
                    due = ep->path_asked + path_timeout;
                }
            }
            if (0 != ep->recheck_handle && usnic_cc_result(ep->recheck_handle, &res)) {
                path_recheck_apply(ep, &res);
                any = true;
            }
        }
    }
    path_due = due;
    if (any) {
        usnic_path_map_write();
    }
}

void usnic_path_map_write(void)
{
    usnic_component_t *c = &mca_btl_usnic_component;
    const char *prefix = c->params.connectivity_map;
    char name[1024], tmp[1040];
    FILE *f;

    if (NULL == prefix || '\0' == prefix[0]) {
        return;
    }
    snprintf(name, sizeof(name), "%s-%s-pid%d-rank%u.txt", prefix, opal_process_info.nodename,
             (int) getpid(), (unsigned) OPAL_PROC_MY_NAME.vpid);
    snprintf(tmp, sizeof(tmp), "%s.tmp", name);
    f = fopen(tmp, "w");
    if (NULL == f) {
        static bool told;
        if (!told) {
            told = true;
            usnic_show_help_running("connectivity map", opal_process_info.nodename, name,
                                    strerror(errno));
        }
        return;
    }
    fprintf(f, "# usnic connectivity map: host %s, pid %d, rank %u\n", opal_process_info.nodename,
            (int) getpid(), (unsigned) OPAL_PROC_MY_NAME.vpid);
    fprintf(f, "# peer-rank peer-host local-if local-ip -> peer-if peer-ip datagram check\n");
    for (int i = 0; i < c->num_modules; i++) {
        usnic_module_t *module = c->modules[i];
        opal_list_item_t *item;
        char lip[INET_ADDRSTRLEN];

        inet_ntop(AF_INET, &module->if_addr.sin_addr, lip, sizeof(lip));
        OPAL_LIST_FOREACH(item, &module->endpoints, opal_list_item_t)
        {
            mca_btl_base_endpoint_t *ep = (mca_btl_base_endpoint_t *) item;
            char rip[INET_ADDRSTRLEN], rif[USNIC_IFNAME_BUF];
            const char *state;

            inet_ntop(AF_INET, &ep->remote.ipv4, rip, sizeof(rip));
            usnic_rec_ifname(&ep->remote, rif);
            if (USNIC_PATH_PENDING == ep->path_state) {
                state = "pending";
            } else if (ep->dead) {
                state = "failed";
            } else if (0 == ep->path_size) {
                state = "unchecked";
            } else if (ep->path_size < ep->path_full) {
                state = "reduced";
            } else {
                state = "ok";
            }
            fprintf(f, "%u %s %s %s -> %s %s %u %s\n",
                    (NULL != ep->proc) ? (unsigned) ep->proc->proc_name.vpid : 0u, peer_host(ep),
                    module->ifname, lip, rif, rip,
                    0 != ep->path_size ? ep->path_size : ep->path_full, state);
        }
    }
    if (0 != fclose(f) || 0 != rename(tmp, name)) {
        unlink(tmp);
    }
}
