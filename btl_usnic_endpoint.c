/*
 * Endpoints: creation from a peer's modex record, the reliability core's
 * transport operations (timers through the module's hotel, the resend
 * queue, releasing acknowledged segments), and peer failure.
 */
#include <string.h>

#include "opal/util/show_help.h"

#include "btl_usnic_endpoint.h"
#include "btl_usnic_frag.h"
#include "btl_usnic_util.h"

static void endpoint_construct(mca_btl_base_endpoint_t *ep)
{
    OBJ_CONSTRUCT(&ep->sendq_item, opal_list_item_t);
    OBJ_CONSTRUCT(&ep->ack_item, opal_list_item_t);
    OBJ_CONSTRUCT(&ep->timer_item, opal_list_item_t);
    ep->on_timer_list = false;
    ep->timer_seg = NULL;
    OBJ_CONSTRUCT(&ep->sendq, opal_list_t);
    ep->on_sendq_list = false;
    ep->on_ack_list = false;
    ep->dead = false;
    ep->next_msg_id = 0;
    ep->next_put_id = 0;
    memset(&ep->rel, 0, sizeof(ep->rel));
    memset(&ep->reasm, 0, sizeof(ep->reasm));
}

static void endpoint_destruct(mca_btl_base_endpoint_t *ep)
{
    OBJ_DESTRUCT(&ep->sendq);
    OBJ_DESTRUCT(&ep->ack_item);
    OBJ_DESTRUCT(&ep->timer_item);
    OBJ_DESTRUCT(&ep->sendq_item);
}
OBJ_CLASS_INSTANCE(mca_btl_base_endpoint_t, opal_list_item_t, endpoint_construct,
                   endpoint_destruct);

static inline usnic_seg_t *seg_of(struct usnic_rel_seg *r)
{
    return (usnic_seg_t *) ((char *) r - offsetof(usnic_seg_t, rel));
}

/* ---- reliability core operations ----
 *
 * Retransmit timers.  The core only ever resends the oldest segment still
 * held when a timer expires, so an endpoint needs one running timer: a
 * hotel room for its oldest segment.  The room is taken lazily: a segment
 * handed to the wire only puts the endpoint on module->timer_eps, and the
 * progress engine checks the oldest segment into the hotel once it has
 * waited USNIC_TIMER_ARM_DELAY_US without an ACK.  Most small messages are
 * acknowledged sooner (the reply carries the ACK), so they never touch the
 * hotel.  The effective timeout is that delay plus btl_usnic_retrans_timeout.
 */

static void want_timer(mca_btl_base_endpoint_t *ep)
{
    if (!ep->on_timer_list) {
        ep->on_timer_list = true;
        ep->timer_wanted_us = ep->module->now_us;
        opal_list_append(&ep->module->timer_eps, &ep->timer_item);
    }
}

static void op_timer_arm(struct usnic_rel *rel, struct usnic_rel_seg *r)
{
    mca_btl_base_endpoint_t *ep = rel->ctx;

    seg_of(r)->hotel_room = -1;
    if (NULL == ep->timer_seg) {
        want_timer(ep);
    }
}

/* If seg holds the endpoint's hotel room, give it up (and want one for the next oldest). */
static void drop_timer(mca_btl_base_endpoint_t *ep, usnic_seg_t *seg)
{
    if (seg == ep->timer_seg) {
        opal_hotel_checkout(&ep->module->hotel, seg->hotel_room);
        seg->hotel_room = -1;
        ep->timer_seg = NULL;
        if (0 != usnic_rel_tx_inflight(&ep->rel)) {
            want_timer(ep);
        }
    }
}

static void op_timer_cancel(struct usnic_rel *rel, struct usnic_rel_seg *r)
{
    drop_timer(rel->ctx, seg_of(r));
}

int usnic_progress_timers(usnic_module_t *module, uint64_t now)
{
    opal_list_item_t *item, *next;
    int armed = 0;

    for (item = opal_list_get_first(&module->timer_eps);
         item != opal_list_get_end(&module->timer_eps); item = next) {
        mca_btl_base_endpoint_t *ep = usnic_ep_of_timer_item(item);
        struct usnic_rel_seg *oldest;
        usnic_seg_t *seg;

        next = opal_list_get_next(item);
        if (NULL == ep->timer_seg && !ep->dead) {
            oldest = usnic_rel_tx_oldest(&ep->rel);
            if (NULL != oldest && (oldest->state & USNIC_REL_SEG_RESEND)) {
                oldest = NULL; /* its resend arms the timer again */
            }
            if (NULL != oldest) {
                if (now - ep->timer_wanted_us < USNIC_TIMER_ARM_DELAY_US) {
                    continue; /* not yet: the ACK is probably on its way */
                }
                seg = seg_of(oldest);
                if (OPAL_SUCCESS != opal_hotel_checkin(&module->hotel, seg, &seg->hotel_room)) {
                    continue; /* no room now: try again next time */
                }
                ep->timer_seg = seg;
                armed++;
            }
        }
        opal_list_remove_item(&module->timer_eps, item);
        ep->on_timer_list = false;
    }
    return armed;
}

static void op_resend(struct usnic_rel *rel, struct usnic_rel_seg *r)
{
    mca_btl_base_endpoint_t *ep = rel->ctx;
    opal_list_append(&ep->module->resendq, &seg_of(r)->super.super);
}

static void op_resend_cancel(struct usnic_rel *rel, struct usnic_rel_seg *r)
{
    mca_btl_base_endpoint_t *ep = rel->ctx;
    opal_list_remove_item(&ep->module->resendq, &seg_of(r)->super.super);
}

static void op_acked(struct usnic_rel *rel, struct usnic_rel_seg *r)
{
    mca_btl_base_endpoint_t *ep = rel->ctx;
    usnic_seg_t *seg = seg_of(r);
    usnic_frag_t *frag = seg->frag;

    drop_timer(ep, seg); /* normally done by timer_cancel already */
    ep->inflight_bytes -= seg->hdr_len + seg->zc_len;
    if (NULL != frag && USNIC_FRAG_SMALL != frag->kind) {
        seg->frag = NULL;
        if (0 == --frag->chunks_unacked && frag->sent) {
            opal_list_append(&ep->module->done_frags, &frag->base.super.super);
        }
    }
    usnic_seg_put(seg); /* the window's reference */
}

static const struct usnic_rel_ops endpoint_rel_ops = {
    .timer_arm = op_timer_arm,
    .timer_cancel = op_timer_cancel,
    .resend = op_resend,
    .resend_cancel = op_resend_cancel,
    .acked = op_acked,
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
    item = opal_free_list_get(&module->big_bufs);
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
    usnic_module_t *module = ctx;

    if (NULL == handle) {
        free(buf);
    } else {
        opal_free_list_return(&module->big_bufs, handle);
    }
}

mca_btl_base_endpoint_t *usnic_endpoint_create(usnic_module_t *module, opal_proc_t *proc,
                                               const struct usnic_modex_rec *rec)
{
    const usnic_params_t *p = &mca_btl_usnic_component.params;
    mca_btl_base_endpoint_t *ep = NULL;
    struct sockaddr_in sin;
    int rc;

    if (OPAL_SUCCESS ==
        opal_hash_table_get_value_uint32(&module->senders, rec->module_id, (void **) &ep)) {
        return ep;
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

    for (int c = 0; c < USNIC_NUM_CHANNELS; c++) {
        memset(&sin, 0, sizeof(sin));
        sin.sin_family = AF_INET;
        sin.sin_addr.s_addr = rec->ipv4;
        sin.sin_port = rec->port[c];
        rc = fi_av_insert(module->av, &sin, 1, &ep->addr[c], 0, NULL);
        if (1 != rc) {
            USNIC_VERBOSE(5, "%s: fi_av_insert failed: %d", module->ifname, rc);
            OBJ_RELEASE(ep);
            return NULL;
        }
    }

    if (0 != usnic_rel_init(&ep->rel, &endpoint_rel_ops, ep, (uint32_t) p->send_window,
                            (uint32_t) p->recv_window, module->local_isn, rec->isn,
                            (uint32_t) p->fast_retrans_dups) ||
        0 != usnic_reasm_table_init(&ep->reasm,
                                    ((uint32_t) p->reasm_slots > rec->send_window)
                                        ? (uint32_t) p->reasm_slots
                                        : rec->send_window,
                                    &ep->reasm_alloc, 0)) {
        usnic_rel_fini(&ep->rel);
        OBJ_RELEASE(ep);
        return NULL;
    }
    ep->rel.ack_every = (rec->send_window / 4 > 0) ? rec->send_window / 4 : 1;
    {
        uint32_t data = module->chan[USNIC_CHAN_DATA].mtu;
        uint32_t prio = module->chan[USNIC_CHAN_PRIO].mtu;
        if (rec->mtu[USNIC_CHAN_DATA] < data) {
            data = rec->mtu[USNIC_CHAN_DATA];
        }
        if (rec->mtu[USNIC_CHAN_PRIO] < prio) {
            prio = rec->mtu[USNIC_CHAN_PRIO];
        }
        ep->frag_max = data - (uint32_t) USNIC_HDR_LEN_FRAG;
        ep->prio_frag_max = prio - (uint32_t) USNIC_HDR_LEN_FRAG;
        ep->chunk_max = data - (uint32_t) USNIC_HDR_LEN_CHUNK;
        ep->put_max = data - (uint32_t) USNIC_HDR_LEN_PUT;
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
        ep->inflight_bytes = 0;
    }
    ep->last_progress_us = usnic_now_us();
    module->now_us = ep->last_progress_us;

    opal_hash_table_set_value_uint32(&module->senders, rec->module_id, ep);
    opal_list_append(&module->endpoints, &ep->super);
    USNIC_VERBOSE(20, "%s: endpoint to module 0x%x (%s) created", module->ifname, rec->module_id,
                  (NULL != proc && NULL != proc->proc_hostname) ? proc->proc_hostname : "?");
    return ep;
}

void usnic_endpoint_destroy(mca_btl_base_endpoint_t *ep)
{
    usnic_module_t *module = ep->module;

    opal_hash_table_remove_value_uint32(&module->senders, ep->remote.module_id);
    if (module->last_sender == ep) {
        module->last_sender = NULL;
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
    if (NULL != ep->timer_seg) {
        opal_hotel_checkout(&module->hotel, ep->timer_seg->hotel_room);
        ep->timer_seg = NULL;
    }
    usnic_reasm_table_fini(&ep->reasm);
    usnic_rel_fini(&ep->rel);
    OBJ_RELEASE(ep);
}

mca_btl_base_endpoint_t *usnic_endpoint_for_sender(usnic_module_t *module, uint32_t module_id)
{
    mca_btl_base_endpoint_t *ep = NULL;
    struct usnic_modex_rec *recs = NULL;
    const struct usnic_modex_rec *rec;
    opal_process_name_t name;
    opal_proc_t *proc;
    size_t nrecs = 0;

    if (OPAL_LIKELY(module_id == module->last_sender_id && NULL != module->last_sender)) {
        return module->last_sender;
    }
    if (OPAL_LIKELY(OPAL_SUCCESS ==
                    opal_hash_table_get_value_uint32(&module->senders, module_id, (void **) &ep))) {
        module->last_sender_id = module_id;
        module->last_sender = ep;
        return ep;
    }
    /* A process of our job that the PML has not added yet (it adds peers
     * lazily, on first send): build the endpoint from its modex record. */
    name = OPAL_PROC_MY_NAME;
    name.vpid = module_id >> 8;
    if (name.vpid == OPAL_PROC_MY_NAME.vpid || NULL == opal_proc_for_name) {
        return NULL;
    }
    proc = opal_proc_for_name(name);
    if (NULL == proc || OPAL_SUCCESS != usnic_modex_recv(proc, &recs, &nrecs)) {
        return NULL;
    }
    rec = usnic_pair(module, proc, recs, nrecs);
    if (NULL != rec && rec->module_id == module_id) {
        ep = usnic_endpoint_create(module, proc, rec);
    }
    free(recs);
    return ep;
}

void usnic_endpoint_timer_expired(opal_hotel_t *hotel, int room, void *occupant)
{
    usnic_seg_t *seg = occupant;
    mca_btl_base_endpoint_t *ep = seg->ep;
    const usnic_params_t *p = &mca_btl_usnic_component.params;
    (void) hotel;
    (void) room;

    seg->hotel_room = -1;
    if (ep->timer_seg == seg) {
        ep->timer_seg = NULL;
    }
    if (ep->dead) {
        seg->rel.state &= ~USNIC_REL_SEG_TIMER;
        return;
    }
    if (p->peer_timeout > 0 &&
        usnic_now_us() - ep->last_progress_us > (uint64_t) p->peer_timeout * 1000000u) {
        seg->rel.state &= ~USNIC_REL_SEG_TIMER;
        usnic_endpoint_fail(ep, "no acknowledgement within btl_usnic_peer_timeout");
        return;
    }
    USNIC_VERBOSE(30, "%s: retransmit timeout: seq %u (%u bytes, %s channel) to module 0x%x",
                  ep->module->ifname, (unsigned) ((struct usnic_pkt_hdr *) seg->buf)->seq,
                  (unsigned) (seg->hdr_len + seg->zc_len),
                  USNIC_CHAN_PRIO == seg->chan ? "priority" : "data", ep->remote.module_id);
    usnic_rel_tx_timeout(&ep->rel, &seg->rel);
}

void usnic_endpoint_fail(mca_btl_base_endpoint_t *ep, const char *why)
{
    usnic_module_t *module = ep->module;
    char addr[INET_ADDRSTRLEN];

    if (ep->dead) {
        return;
    }
    ep->dead = true;
    inet_ntop(AF_INET, &ep->remote.ipv4, addr, sizeof(addr));
    opal_show_help("help-mpi-btl-usnic.txt", "peer unreachable", true, opal_process_info.nodename,
                   module->ifname,
                   (NULL != ep->proc && NULL != ep->proc->proc_hostname) ? ep->proc->proc_hostname
                                                                         : "unknown",
                   addr, mca_btl_usnic_component.params.peer_timeout, why);
    if (NULL != module->error_cb) {
        module->error_cb(&module->super, MCA_BTL_ERROR_FLAGS_FATAL, ep->proc,
                         (char *) "usnic: peer unreachable");
    }
}
