/*
 * Endpoints: creation from a peer's modex record, the reliability core's
 * transport operations (the connection timers' deadlines, pings, the resend
 * queue, releasing acknowledged segments), and peer failure.
 */
#include <string.h>

#include "opal/util/show_help.h"

#include "btl_usnic_chan.h"
#include "btl_usnic_endpoint.h"
#include "btl_usnic_path.h"
#include "btl_usnic_live.h"
#include "btl_usnic_frag.h"
#include "btl_usnic_send.h"
#include "btl_usnic_util.h"

static void endpoint_construct(mca_btl_base_endpoint_t *ep)
{
    OBJ_CONSTRUCT(&ep->sendq_item, opal_list_item_t);
    OBJ_CONSTRUCT(&ep->ack_item, opal_list_item_t);
    OBJ_CONSTRUCT(&ep->timer_item, opal_list_item_t);
    ep->on_timer_list = false;
    ep->timer_deadline = 0;
    ep->live_slot = -1;
    for (int c = 0; c < USNIC_NUM_CHANNELS; c++) {
        ep->conn_fd[c] = -1;
    }
    ep->conn_due = false;
    ep->live_watched = false;
    ep->detour_until = 0;
    ep->ping_ts = 0;
    ep->ack_ts_last = 0;
    OBJ_CONSTRUCT(&ep->sendq, opal_list_t);
    ep->on_sendq_list = false;
    ep->on_ack_list = false;
    ep->dead = false;
    ep->next_msg_id = 0;
    ep->next_put_id = 0;
    memset(&ep->rel, 0, sizeof(ep->rel));
    memset(&ep->reasm, 0, sizeof(ep->reasm));
    usnic_parts_init(&ep->rx_parts);
    ep->tx_dgram_max = 0;
}

static void endpoint_destruct(mca_btl_base_endpoint_t *ep)
{
    usnic_parts_fini(&ep->rx_parts);
    OBJ_DESTRUCT(&ep->sendq);
    OBJ_DESTRUCT(&ep->ack_item);
    OBJ_DESTRUCT(&ep->timer_item);
    OBJ_DESTRUCT(&ep->sendq_item);
}
OBJ_CLASS_INSTANCE(mca_btl_base_endpoint_t, opal_list_item_t, endpoint_construct,
                   endpoint_destruct);

/* ---- reliability core operations ----
 *
 * Retransmit timers.  The core keeps one timer per connection and tells
 * its deadline through timer_set; the endpoint then sits on
 * module->timer_eps, and module->next_timer holds the earliest deadline,
 * so the progress engine looks at the list only when something is due.
 * Deadlines are in microseconds of usnic_now_us().
 */

static void op_timer_set(struct usnic_rel *rel, uint64_t deadline)
{
    mca_btl_base_endpoint_t *ep = rel->ctx;
    usnic_module_t *module = ep->module;

    ep->timer_deadline = deadline;
    if (0 == deadline) {
        return; /* leaves the list at the next scan */
    }
    if (!ep->on_timer_list) {
        ep->on_timer_list = true;
        opal_list_append(&module->timer_eps, &ep->timer_item);
    }
    if (0 == module->next_timer || deadline < module->next_timer) {
        module->next_timer = deadline;
    }
}

/*
 * Is the peer alive?  It is while it acknowledges our data.  A peer quiet
 * for a while with data outstanding may be computing outside MPI: its
 * liveness thread is probed (btl_usnic_live.h), and while it answers, it
 * lives.  Dead: neither ACKs nor answers for btl_usnic_peer_timeout.
 */
static bool peer_alive(mca_btl_base_endpoint_t *ep, uint64_t now)
{
    const usnic_params_t *p = &mca_btl_usnic_component.params;
    uint64_t timeout = (uint64_t) p->peer_timeout * 1000000u, last = ep->last_progress_us;
    uint64_t quiet_after = timeout / 4 < 1000000u ? timeout / 4 : 1000000u;
    enum usnic_peer_state st;

    /* while we were away nobody could be heard: count from our return */
    if (ep->module->back_us > last) {
        last = ep->module->back_us;
    }

    if (0 == p->peer_timeout) {
        return true;
    }
    st = usnic_peer_state(now, last, quiet_after, timeout);
    if (USNIC_PEER_HEARD != st && usnic_live_possible(ep)) {
        uint64_t heard;
        if (!ep->live_watched) {
            ep->live_watched = true;
            usnic_live_watch(ep);
        }
        heard = usnic_live_heard(ep); /* (may be later than now: usnic_peer_state) */
        if (heard > last) {
            st = usnic_peer_state(now, heard, quiet_after, timeout);
        }
    }
    return USNIC_PEER_DEAD != st;
}

/* The endpoint's timer is due: the peer's liveness, then the core's decision. */
static void endpoint_timer(mca_btl_base_endpoint_t *ep, uint64_t now)
{
    uint64_t timeouts = ep->rel.stats.retrans_timeout, probes = ep->rel.stats.tlp_probes;

    if (!peer_alive(ep, now)) {
        ep->timer_deadline = 0;
        usnic_endpoint_fail(ep, usnic_live_possible(ep)
                                    ? "neither acknowledgements nor answers to liveness probes "
                                      "within btl_usnic_peer_timeout"
                                    : "no acknowledgement within btl_usnic_peer_timeout");
        return;
    }
    usnic_rel_tx_timer(&ep->rel, now);
    if (ep->rel.stats.retrans_timeout != timeouts || ep->rel.stats.tlp_probes != probes) {
        struct usnic_rel_seg *r = usnic_rel_tx_oldest(&ep->rel);
        if (ep->rel.stats.retrans_timeout != timeouts && NULL != r) {
            const usnic_seg_t *seg = usnic_seg_of(r);
            usnic_path_stuck(ep, r->seq, usnic_seg_wire_len(seg), now);
        }
        USNIC_VERBOSE(30,
                      "%s: %s to module 0x%x: oldest seq %u, %u in flight, srtt %llu us, "
                      "next timeout %llu us",
                      ep->module->ifname,
                      ep->rel.stats.tlp_probes != probes ? "tail-loss probe" : "retransmit timeout",
                      ep->remote.module_id, NULL != r ? (unsigned) r->seq : 0u,
                      (unsigned) usnic_rel_tx_inflight(&ep->rel),
                      (unsigned long long) ep->rel.tx.srtt,
                      (unsigned long long) usnic_rel_tx_rto(&ep->rel));
    }
}

void usnic_progress_timers(usnic_module_t *module, uint64_t now)
{
    opal_list_item_t *item, *next;

    module->next_timer = 0;
    for (item = opal_list_get_first(&module->timer_eps);
         item != opal_list_get_end(&module->timer_eps); item = next) {
        mca_btl_base_endpoint_t *ep = usnic_ep_of_timer_item(item);

        next = opal_list_get_next(item);
        if (0 != ep->timer_deadline && !ep->dead && now >= ep->timer_deadline) {
            endpoint_timer(ep, now); /* may set a new deadline (and next_timer) */
        }
        if (0 == ep->timer_deadline || ep->dead) {
            opal_list_remove_item(&module->timer_eps, item);
            ep->on_timer_list = false;
        } else if (0 == module->next_timer || ep->timer_deadline < module->next_timer) {
            module->next_timer = ep->timer_deadline;
        }
    }
}

static void op_resend(struct usnic_rel *rel, struct usnic_rel_seg *r)
{
    mca_btl_base_endpoint_t *ep = rel->ctx;
    opal_list_append(&ep->module->resendq, &usnic_seg_of(r)->super.super);
}

static void op_resend_cancel(struct usnic_rel *rel, struct usnic_rel_seg *r)
{
    mca_btl_base_endpoint_t *ep = rel->ctx;
    opal_list_remove_item(&ep->module->resendq, &usnic_seg_of(r)->super.super);
}

static void op_acked(struct usnic_rel *rel, struct usnic_rel_seg *r)
{
    mca_btl_base_endpoint_t *ep = rel->ctx;
    usnic_seg_t *seg = usnic_seg_of(r);
    usnic_frag_t *frag = seg->frag;

    ep->inflight_bytes -= usnic_seg_wire_len(seg);
    if (NULL != frag && USNIC_FRAG_SMALL != frag->kind) {
        seg->frag = NULL;
        if (0 == --frag->chunks_unacked && frag->sent && !frag->early_listed) {
            opal_list_append(&ep->module->done_frags, &frag->base.super.super);
        }
    }
    usnic_seg_put(seg); /* the window's reference */
}

/* The core wants a ping on `lane`: send it now if the channel takes it,
 * else it goes out from the ACK list (usnic_progress_acks). */
static void op_probe(struct usnic_rel *rel, uint8_t lane, uint32_t ts)
{
    mca_btl_base_endpoint_t *ep = rel->ctx;

    ep->ping_ts = ts;
    ep->ping_lane = (lane < USNIC_NUM_CHANNELS) ? lane : (uint8_t) USNIC_CHAN_DATA;
    if (OPAL_SUCCESS != usnic_send_ping(ep->module, ep)) {
        usnic_ack_schedule(ep->module, ep);
    }
}

static const struct usnic_rel_ops endpoint_rel_ops = {
    .resend = op_resend,
    .resend_cancel = op_resend_cancel,
    .acked = op_acked,
    .timer_set = op_timer_set,
    .probe = op_probe,
    .seg_lead = offsetof(usnic_seg_t, rel),
    .seg_bytes = offsetof(usnic_seg_t, chan), /* usnic_seg_t: the first two lines */
};

/* ---- reassembly buffers ---- */

static void *reasm_get(void *ctx, uint64_t len, bool urgent, void **handle)
{
    usnic_module_t *module = ctx;
    opal_free_list_item_t *item;
    void *buf;

    *handle = NULL;
    if (len > module->max_msg_len) {
        return NULL;
    }
    item = usnic_buf_get(module, len);
    if (OPAL_LIKELY(NULL != item)) {
        *handle = item;
        return item->ptr;
    }
    if (!urgent) {
        return NULL; /* dropped unacknowledged: the peer sends it again */
    }
    /* The pool is held by fragments waiting for their turn, and this is the
     * one they wait for: never refuse it (btl_usnic_reasm.h). */
    buf = malloc(len ? len : 1);
    if (NULL != buf) {
        module->stats.reasm_overflow++;
    }
    return buf;
}

static void reasm_put(void *ctx, void *buf, void *handle)
{
    (void) ctx;
    if (NULL == handle) {
        free(buf);
    } else {
        usnic_buf_return(handle);
    }
}

/*
 * The first sequence number a sender uses toward a receiver: a PRF of the
 * two modules' keys under the sender's secret, so it differs for every
 * connection and nobody without the secret can predict it, while the
 * receiver (which has the secret from the modex) computes the same.  The
 * label keeps these inputs apart from every MAC input (which are longer).
 */
static uint64_t connection_prf(const struct usnic_sip_key *sender_secret, uint64_t label,
                               uint64_t sender_key, uint64_t receiver_key)
{
    const uint64_t in[3] = {label, sender_key, receiver_key};
    return usnic_siphash24(sender_secret, in, sizeof(in));
}

static uint32_t connection_isn(const struct usnic_sip_key *sender_secret, uint64_t sender_key,
                               uint64_t receiver_key)
{
    return (uint32_t) connection_prf(sender_secret, 0x6e73692d63696e73ull /* "snic-isn" */,
                                     sender_key, receiver_key);
}

/*
 * The MAC key of the packets one module sends another: 128 bits from the
 * same PRF under two more labels.  A packet sealed for one receiver (or a
 * receiver's other module) is therefore worthless anywhere else, though a
 * sender uses one secret for all its peers.
 */
static void connection_mac_key(const struct usnic_sip_key *sender_secret, uint64_t sender_key,
                               uint64_t receiver_key, struct usnic_sip_key *out)
{
    out->k0 = connection_prf(sender_secret, 0x306b2d63616d2d73ull /* "s-mac-k0" */, sender_key,
                             receiver_key);
    out->k1 = connection_prf(sender_secret, 0x316b2d63616d2d73ull /* "s-mac-k1" */, sender_key,
                             receiver_key);
}

uint32_t usnic_endpoint_pair_mtu(const mca_btl_base_endpoint_t *ep, int chan)
{
    uint32_t mtu = ep->module->chan[chan].mtu;

    return (ep->remote.mtu[chan] < mtu) ? ep->remote.mtu[chan] : mtu;
}

void usnic_endpoint_set_dgram(mca_btl_base_endpoint_t *ep, uint32_t data)
{
    uint32_t prio = usnic_endpoint_pair_mtu(ep, USNIC_CHAN_PRIO);

    if (prio > data) {
        prio = data; /* (only when the path shrank: each side's is at most its data size) */
    }
    ep->frag_max = data - (uint32_t) USNIC_HDR_LEN_FRAG;
    ep->prio_frag_max = prio - (uint32_t) USNIC_HDR_LEN_FRAG;
    ep->chunk_max = data - (uint32_t) USNIC_HDR_LEN_CHUNK;
    ep->put_max = data - (uint32_t) USNIC_HDR_LEN_PUT;
}

mca_btl_base_endpoint_t *usnic_endpoint_create(usnic_module_t *module, opal_proc_t *proc,
                                               const struct usnic_modex_rec *rec)
{
    const usnic_params_t *p = &mca_btl_usnic_component.params;
    mca_btl_base_endpoint_t *ep = NULL;
    uint32_t tx_isn, rx_isn;

    if (OPAL_SUCCESS ==
        opal_hash_table_get_value_uint64(&module->senders, rec->key, (void **) &ep)) {
        /* the same key twice is the same module (2^-64 otherwise) */
        return (ep->remote.ipv4 == rec->ipv4 && ep->remote.port[0] == rec->port[0] &&
                ep->remote.port[1] == rec->port[1])
                   ? ep
                   : NULL;
    }
    if (rec->key == module->key) {
        return NULL;
    }

    ep = OBJ_NEW(mca_btl_base_endpoint_t);
    if (NULL == ep) {
        return NULL;
    }
    ep->module = module;
    ep->proc = proc;
    ep->remote = *rec;
    ep->reasm_alloc.get = reasm_get;
    ep->reasm_alloc.put = reasm_put;
    ep->reasm_alloc.ctx = module;
    {
        struct usnic_sip_key peer_secret;
        usnic_sip_key_load(&peer_secret, rec->secret);
        connection_mac_key(&module->mac_key, module->key, rec->key, &ep->tx_mac_key);
        connection_mac_key(&peer_secret, rec->key, module->key, &ep->rx_mac_key);
        memset(&ep->tx_mac_memo, 0, sizeof(ep->tx_mac_memo));
        memset(&ep->rx_mac_memo, 0, sizeof(ep->rx_mac_memo));
        rx_isn = connection_isn(&peer_secret, rec->key, module->key);
        tx_isn = connection_isn(&module->mac_key, module->key, rec->key);
    }
    /* each side asks for at least what the other does */
    ep->auth = (uint8_t) ((rec->auth > (uint8_t) p->auth) ? rec->auth : (uint8_t) p->auth);
    ep->crc = (0 != rec->checksum) || (0 != p->checksum);
    if (p->debug_isn >= 0) {
        tx_isn = rx_isn = (uint32_t) p->debug_isn;
    }

    for (int c = 0; c < USNIC_NUM_CHANNELS; c++) {
        memset(&ep->sin[c], 0, sizeof(ep->sin[c]));
        ep->sin[c].sin_family = AF_INET;
        ep->sin[c].sin_addr.s_addr = rec->ipv4;
        ep->sin[c].sin_port = rec->port[c];
    }
    if (OPAL_SUCCESS != module->backend->peer_add(module, ep)) {
        OBJ_RELEASE(ep);
        return NULL;
    }

    if (0 != usnic_rel_init(&ep->rel, &endpoint_rel_ops, ep, module->send_window,
                            (uint32_t) p->recv_window, tx_isn, rx_isn,
                            (uint32_t) p->fast_retrans_dups, &module->rel_timing) ||
        0 != usnic_reasm_table_init(&ep->reasm,
                                    ((uint32_t) p->reasm_slots > rec->send_window)
                                        ? (uint32_t) p->reasm_slots
                                        : rec->send_window,
                                    &ep->reasm_alloc, 0)) {
        usnic_rel_fini(&ep->rel);
        if (NULL != module->backend->peer_del) {
            module->backend->peer_del(module, ep);
        }
        OBJ_RELEASE(ep);
        return NULL;
    }
    ep->rel.ack_every = (rec->send_window / 4 > 0) ? rec->send_window / 4 : 1;
    {
        uint32_t data = usnic_endpoint_pair_mtu(ep, USNIC_CHAN_DATA);
        usnic_endpoint_set_dgram(ep, data);
        ep->reasm.chunk = ep->chunk_max; /* the peer cuts its fragments alike */
        /* keep what we have in flight within half the peer's kernel buffer
         * and btl_usnic_max_inflight, but always allow a few datagrams */
        ep->inflight_limit = (0 != rec->rcvbuf) ? rec->rcvbuf / 2 : UINT64_MAX;
        if (mca_btl_usnic_component.params.max_inflight > 0 &&
            ep->inflight_limit > (uint64_t) mca_btl_usnic_component.params.max_inflight) {
            ep->inflight_limit = (uint64_t) mca_btl_usnic_component.params.max_inflight;
        }
        if (ep->inflight_limit < 4u * data) {
            ep->inflight_limit = 4u * data;
        }
        /* however many of us share the peer's buffers: two datagrams */
        ep->allow_floor = 2u * data;
        ep->inflight_bytes = 0;
    }
    ep->last_progress_us = usnic_now_us();
    module->now_us = ep->last_progress_us;

    opal_hash_table_set_value_uint64(&module->senders, rec->key, ep);
    opal_list_append(&module->endpoints, &ep->super);
    usnic_path_endpoint(ep);
    USNIC_VERBOSE(20, "%s: endpoint to module 0x%x (%s) created: auth %s, checksum %s",
                  module->ifname, rec->module_id,
                  (NULL != proc && NULL != proc->proc_hostname) ? proc->proc_hostname : "?",
                  usnic_auth_mode_name(ep->auth), ep->crc ? "on" : "off");
    return ep;
}

void usnic_endpoint_destroy(mca_btl_base_endpoint_t *ep)
{
    usnic_module_t *module = ep->module;

    usnic_live_forget(ep);
    opal_hash_table_remove_value_uint64(&module->senders, ep->remote.key);
    if (module->last_sender == ep) {
        module->last_sender = NULL;
    }
    if (module->direct.ep == ep) {
        module->direct.ep = NULL;
    }
    opal_list_remove_item(&module->endpoints, &ep->super);
    if (ep->on_sendq_list) {
        opal_list_remove_item(&module->sendq_eps, &ep->sendq_item);
    }
    if (ep->on_ack_list) {
        opal_list_remove_item(&module->ack_eps, &ep->ack_item);
    }
    if (ep->on_timer_list) {
        opal_list_remove_item(&module->timer_eps, &ep->timer_item);
    }
    usnic_reasm_table_fini(&ep->reasm);
    usnic_rel_fini(&ep->rel);
    if (NULL != module->backend->peer_del) {
        module->backend->peer_del(module, ep);
    }
    OBJ_RELEASE(ep);
}

mca_btl_base_endpoint_t *usnic_endpoint_for_key(usnic_module_t *module, uint64_t key)
{
    mca_btl_base_endpoint_t *ep = NULL;

    if (OPAL_LIKELY(key == module->last_sender_key && NULL != module->last_sender)) {
        return module->last_sender;
    }
    if (OPAL_SUCCESS != opal_hash_table_get_value_uint64(&module->senders, key, (void **) &ep)) {
        return NULL;
    }
    module->last_sender_key = key;
    module->last_sender = ep;
    return ep;
}

mca_btl_base_endpoint_t *usnic_endpoint_sibling(usnic_module_t *module,
                                                const mca_btl_base_endpoint_t *ep)
{
    opal_list_item_t *item;

    for (item = opal_list_get_first(&module->endpoints);
         item != opal_list_get_end(&module->endpoints); item = opal_list_get_next(item)) {
        mca_btl_base_endpoint_t *e = (mca_btl_base_endpoint_t *) item;
        if (e->proc == ep->proc && !e->dead) {
            return e;
        }
    }
    return NULL;
}

mca_btl_base_endpoint_t *usnic_endpoint_detoured(usnic_module_t *module, uint64_t key,
                                                 mca_btl_base_endpoint_t **via)
{
    const usnic_component_t *c = &mca_btl_usnic_component;

    for (int i = 0; i < c->num_modules; i++) {
        usnic_module_t *m = c->modules[i];
        mca_btl_base_endpoint_t *ep;
        if (m == module || m->finalized || m->backend != module->backend ||
            OPAL_SUCCESS != opal_hash_table_get_value_uint64(&m->senders, key, (void **) &ep)) {
            continue;
        }
        *via = usnic_endpoint_sibling(module, ep);
        return (NULL != *via) ? ep : NULL;
    }
    return NULL;
}

bool usnic_endpoint_detour_exists(const mca_btl_base_endpoint_t *ep)
{
    const usnic_component_t *c = &mca_btl_usnic_component;

    for (int i = 0; i < c->num_modules; i++) {
        usnic_module_t *m = c->modules[i];
        if (m != ep->module && !m->finalized && !m->link_down &&
            NULL != usnic_endpoint_sibling(m, ep)) {
            return true;
        }
    }
    return false;
}

void usnic_endpoint_resend_around(mca_btl_base_endpoint_t *ep)
{
    if (!ep->dead && 0 != usnic_rel_tx_inflight(&ep->rel) && usnic_endpoint_detour_exists(ep)) {
        ep->module->stats.link_resends += usnic_rel_tx_resend_all(&ep->rel);
    }
}

void usnic_endpoint_fail(mca_btl_base_endpoint_t *ep, const char *why)
{
    usnic_module_t *module = ep->module;
    char addr[INET_ADDRSTRLEN], laddr[INET_ADDRSTRLEN], rif[USNIC_IFNAME_BUF];

    if (ep->dead) {
        return;
    }
    ep->dead = true;
    usnic_rx_predict_forget();
    inet_ntop(AF_INET, &ep->remote.ipv4, addr, sizeof(addr));
    inet_ntop(AF_INET, &module->if_addr.sin_addr, laddr, sizeof(laddr));
    usnic_show_help_running(
        "peer unreachable", opal_process_info.nodename, module->ifname, laddr,
        (NULL != ep->proc && NULL != ep->proc->proc_hostname) ? ep->proc->proc_hostname : "unknown",
        usnic_rec_ifname(&ep->remote, rif), addr, mca_btl_usnic_component.params.peer_timeout, why);
    if (NULL != module->error_cb) {
        module->error_cb(&module->super, MCA_BTL_ERROR_FLAGS_FATAL, ep->proc,
                         (char *) "usnic: peer unreachable");
    }
}
