/*
 * The send engine.
 *
 * Fragments wait on their endpoint's send queue, in order.  The progress
 * engine (and btl_send, when the queue is empty) hands them to the wire as
 * the endpoint's send window and the channel's send credits allow:
 *   SMALL fragments as one FRAG datagram, on the priority channel when they
 *   are at most btl_usnic_priority_limit bytes;
 *   LARGE fragments and PUTs as a run of CHUNK/PUT datagrams on the data
 *   channel, each a fresh segment whose payload is sent from the
 *   fragment's memory through the provider's iov.
 * Retransmissions always go on the data channel, before new data, at most
 * btl_usnic_max_resends_per_iteration per call.
 */
#include <string.h>

#include "btl_usnic_chan.h"
#include "btl_usnic_live.h"
#include "btl_usnic_path.h"
#include "btl_usnic_send.h"
#include "btl_usnic_util.h"

/* The clock for the reliability core: the progress call's reading while in
 * progress, a fresh one for a send the PML makes from outside it (the
 * application may have been away for long). */
static inline uint64_t usnic_module_now(usnic_module_t *module)
{
    if (!module->in_progress) {
        module->now_us = usnic_now_us();
    }
    return module->now_us;
}

/* Put our cumulative ACK for this peer in the header; true if one was owed. */
static inline bool fill_ack(mca_btl_base_endpoint_t *ep, struct usnic_pkt_hdr *hdr)
{
    bool owed = ep->rel.rx.ack_owed || ep->rel.rx.ack_now;

    hdr->flags |= USNIC_PKT_FLAG_ACK;
    hdr->ack_seq = usnic_rel_rx_ack_value(&ep->rel);
    hdr->ts_echo = ep->rel.rx.ts_recent;
    hdr->allow = ep->module->allow.kib;
    usnic_rel_ack_sent(&ep->rel);
    return owed;
}

/* Fault injection (btl_usnic_debug_corrupt_rate): flip one bit of the
 * datagram's contiguous part after its checksum and MAC were computed, as
 * a faulty link or NIC would.  Returns the byte's offset + 1 (0: none) so
 * the caller restores it once the provider has the datagram. */
static size_t corrupt(usnic_module_t *module, usnic_seg_t *seg, uint8_t *mask)
{
    usnic_fault_t *f = &module->fault;
    size_t at;

    if (usnic_rand_unit(&f->rng) >= f->corrupt_rate || 0 == seg->hdr_len) {
        return 0;
    }
    /* mostly where a receiver cannot tell otherwise: payload and MAC */
    if (seg->hdr_len > USNIC_MAC_OFFSET && usnic_rand_unit(&f->rng) < 0.75) {
        at = USNIC_MAC_OFFSET + usnic_rand(&f->rng) % (seg->hdr_len - USNIC_MAC_OFFSET);
    } else {
        at = usnic_rand(&f->rng) % seg->hdr_len;
    }
    *mask = (uint8_t) (1u << (usnic_rand(&f->rng) & 7));
    seg->buf[at] ^= *mask;
    module->stats.inj_corrupt++;
    return at + 1;
}

/* Is the header MAC of a datagram that is about to join ep's train on chan
 * left for the train to compute with the others' (auth header, the lanes
 * in use, no checksum, no corruption to inject after the MAC)? */
static inline bool seal_later(const usnic_module_t *module, const mca_btl_base_endpoint_t *ep,
                              const usnic_channel_t *chan)
{
    return module->mac_lanes && module->batching && USNIC_AUTH_HEADER == ep->auth && !ep->crc &&
           chan->gso && NULL != module->backend->train_add && !(module->fault.corrupt_rate > 0.0);
}

/* The header MACs of the n datagrams of a train to ep that were left for
 * it (seal_later), computed together; called by the backend's train_flush
 * before anything of the train is sent (also from the liveness thread, for
 * a train it owns: nothing of the module is written).  Returns how many. */
unsigned usnic_train_seal(const mca_btl_base_endpoint_t *ep, usnic_seg_t *const segs[], int n)
{
    uint8_t *bufs[USNIC_TRAIN_MAX];
    size_t lens[USNIC_TRAIN_MAX];
    unsigned k = 0;

    for (int i = 0; i < n && i < USNIC_TRAIN_MAX; i++) {
        if (segs[i]->seal_later) {
            segs[i]->seal_later = false;
            bufs[k] = segs[i]->buf;
            lens[k++] = segs[i]->hdr_len;
        }
    }
    if (0 != k) {
        usnic_pkt_seal_headers(bufs, lens, k, &ep->tx_mac_key);
    }
    return k;
}

/*
 * A datagram larger than ep's path now carries (it shrank while the job
 * ran: btl_usnic_path.c), sent as PART packets (btl_usnic_part.h): sealed
 * whole first, as it would have gone, then cut.  Each part goes alone
 * (not in a train), after whatever the channel's train holds.  Busy when
 * the channel lacks a credit or a buffer for any part: the caller sends
 * it all again later (the receiver drops the parts it has).
 */
static int post_parts(usnic_module_t *module, mca_btl_base_endpoint_t *ep, usnic_seg_t *seg,
                      usnic_channel_t *chan)
{
    const struct usnic_pkt_hdr *hdr = (const struct usnic_pkt_hdr *) seg->buf;
    uint32_t len = usnic_seg_wire_len(seg);
    uint32_t per = usnic_part_payload(ep->tx_dgram_max);
    int rc = OPAL_SUCCESS;

    if (OPAL_UNLIKELY(0 == per || chan->tx_credits < (int) ((len + per - 1) / per))) {
        return OPAL_ERR_RESOURCE_BUSY;
    }
    seg->seal_later = false;
    if (0 != ep->auth || ep->crc) {
        usnic_pkt_seal(seg->buf, seg->hdr_len, seg->zc_ptr, seg->zc_len, &ep->tx_mac_key,
                       &ep->tx_mac_memo, ep->auth, ep->crc);
    }
    if (NULL != module->backend->train_flush && 0 != chan->train.n) {
        module->backend->train_flush(module, chan); /* keep the lane's order */
    }
    for (uint32_t off = 0; off < len && OPAL_SUCCESS == rc; off += per) {
        uint32_t n = (len - off < per) ? len - off : per;
        usnic_seg_t *part = usnic_seg_alloc(module, USNIC_SEG_SEND);

        if (OPAL_UNLIKELY(NULL == part)) {
            return OPAL_ERR_RESOURCE_BUSY;
        }
        part->hdr_len = (uint32_t) usnic_part_build(part->buf, seg->buf, seg->hdr_len, seg->zc_ptr,
                                                    seg->zc_len, off, n, hdr->ts);
        part->zc_ptr = NULL;
        part->zc_len = 0;
        part->payload_len = n;
        part->refs = 1; /* ours until the backend took its own reference, if it needs one */
        if (0 != ep->auth || ep->crc) {
            usnic_pkt_seal(part->buf, part->hdr_len, NULL, 0, &ep->tx_mac_key, NULL, ep->auth,
                           ep->crc);
        }
        rc = module->backend->send(module, chan, part, ep);
        usnic_seg_put(part);
        if (OPAL_SUCCESS == rc) {
            module->stats.tx_pkts++;
        }
    }
    if (OPAL_SUCCESS == rc) {
        module->stats.tx_bytes += seg->payload_len;
        module->stats.tx_parted++;
    }
    return rc;
}

/* Hand one datagram to ep's peer on channel cid, its MAC and checksum
 * computed now (its header is final) or, in a train, when the train
 * leaves.  OPAL_ERR_RESOURCE_BUSY: try later.  Any other error (the
 * network unreachable, the interface down: counted in tx_errors) is a
 * datagram lost on the way for the caller: the retransmission timer sends
 * it again, with its backoff, instead of every progress call while the
 * interface is down (a 2 s link flap cost 170,000 failed system calls). */
static int post(usnic_module_t *module, mca_btl_base_endpoint_t *ep, usnic_seg_t *seg,
                enum usnic_channel_id cid)
{
    usnic_channel_t *chan = &module->chan[cid];
    size_t bad = 0;
    uint8_t mask = 0;
    int rc;

    if (OPAL_UNLIKELY(chan->tx_credits <= 0)) {
        return OPAL_ERR_RESOURCE_BUSY;
    }
    if (OPAL_UNLIKELY(ep->conn_due) && ep->module == module) {
        module->backend->peer_connect(module, ep); /* our first send to it */
    }
    ((struct usnic_pkt_hdr *) seg->buf)->lane = (uint8_t) cid;
    /* (padding is for a train to decide, copy by copy) */
    ((struct usnic_pkt_hdr *) seg->buf)->flags &=
        (uint8_t) ~(USNIC_PKT_FLAG_LINK_DOWN | USNIC_PKT_FLAG_PAD);
    if (OPAL_UNLIKELY(module->link_down)) {
        ((struct usnic_pkt_hdr *) seg->buf)->flags |= USNIC_PKT_FLAG_LINK_DOWN;
    }
    if (OPAL_UNLIKELY(0 != ep->tx_dgram_max) && usnic_seg_wire_len(seg) > ep->tx_dgram_max) {
        rc = post_parts(module, ep, seg, chan);
        if (OPAL_ERR_RESOURCE_BUSY == rc) {
            module->stats.tx_eagain++;
        }
        return rc;
    }
    /* joining a train, its MAC may be computed with the others' when the
     * train leaves (usnic_train_seal) */
    seg->seal_later = seal_later(module, ep, chan);
    if (!seg->seal_later && (0 != ep->auth || ep->crc)) {
        usnic_pkt_seal(seg->buf, seg->hdr_len, seg->zc_ptr, seg->zc_len, &ep->tx_mac_key,
                       &ep->tx_mac_memo, ep->auth, ep->crc);
    }
    if (OPAL_UNLIKELY(module->fault.corrupt_rate > 0.0)) {
        bad = corrupt(module, seg, &mask);
    }
    if (module->batching && NULL != module->backend->train_add && 0 == bad) {
        rc = module->backend->train_add(module, chan, seg, ep);
    } else {
        if (NULL != module->backend->train_flush && 0 != chan->train.n) {
            module->backend->train_flush(module, chan); /* keep the lane's order */
        }
        rc = module->backend->send(module, chan, seg, ep);
    }
    if (OPAL_UNLIKELY(0 != bad)) {
        /* the provider copied or sent it (udp: sendmsg; inject: copied) */
        seg->buf[bad - 1] ^= mask;
    }
    if (OPAL_LIKELY(OPAL_SUCCESS == rc)) {
        module->stats.tx_pkts++;
        module->stats.tx_bytes += seg->payload_len;
    } else if (OPAL_ERR_RESOURCE_BUSY == rc) {
        module->stats.tx_eagain++;
    }
    return rc;
}

/* First transmission of a data segment: sequence number, window slot, timer. */
static void transmit_new(usnic_module_t *module, mca_btl_base_endpoint_t *ep, usnic_seg_t *seg,
                         enum usnic_channel_id cid)
{
    struct usnic_pkt_hdr *hdr = (struct usnic_pkt_hdr *) seg->buf;
    uint64_t now = usnic_module_now(module);

    if (0 == usnic_rel_tx_inflight(&ep->rel)) {
        ep->last_progress_us = now; /* fresh: the app may have been away for long */
    }
    usnic_path_raise_due(ep, now);
    module->tx_blocked_since = 0;  /* a send goes: not waiting (module_progress) */
    seg->rel.lane = (uint8_t) cid; /* each channel is one UDP socket: in order */
    hdr->seq = usnic_rel_tx_push(&ep->rel, &seg->rel);
    seg->refs++; /* the window's reference, dropped when acked */
    seg->ep = ep;
    seg->chan = cid;
    ep->inflight_bytes += usnic_seg_wire_len(seg);
    if (fill_ack(ep, hdr)) {
        module->stats.piggy_acks++;
    }
    hdr->ts = usnic_rel_ts(now);
    if (OPAL_LIKELY(OPAL_ERR_RESOURCE_BUSY != post(module, ep, seg, cid))) {
        /* sent, or refused for good (post: lost on the way) */
        usnic_rel_tx_sent(&ep->rel, &seg->rel, now);
    } else {
        usnic_rel_tx_send_failed(&ep->rel, &seg->rel);
    }
}

/* What the peer allows us in bytes (UINT64_MAX: no limit asked). */
static inline uint64_t peer_allow(const mca_btl_base_endpoint_t *ep)
{
    return (0 != ep->rel.tx.allow) ? (uint64_t) ep->rel.tx.allow << 10 : UINT64_MAX;
}

/* The bytes ep may have in flight: our own limit, or less if the peer
 * asks for less (it shares its receive buffers among everyone sending to
 * it: allow_count), but never less than allow_floor.  While its
 * stream goes around a link that is down, it shares the other module's
 * receive buffers at the peer with that module's own stream, so it gets
 * half. */
static inline uint64_t inflight_limit(const usnic_module_t *module,
                                      const mca_btl_base_endpoint_t *ep)
{
    uint64_t limit = ep->inflight_limit, allow = peer_allow(ep);

    if (allow < limit) { /* (allow_floor is below our own limit) */
        limit = (allow < ep->allow_floor) ? ep->allow_floor : allow;
    }
    if (OPAL_UNLIKELY(module->link_down || 0 != ep->detour_until)) {
        return limit / 2;
    }
    return limit;
}

/* May a new datagram of `wire` bytes go to ep's peer on channel cid now? */
static inline bool can_send(usnic_module_t *module, mca_btl_base_endpoint_t *ep,
                            enum usnic_channel_id cid, uint32_t wire)
{
    uint64_t limit = inflight_limit(module, ep);

    if (!usnic_path_allows(ep, wire)) {
        /* its path is still being checked: the sends wait in its queue,
         * the progress engine sends them at the verdict */
        if (!ep->path_held) {
            ep->path_held = true;
            module->stats.path_held++;
        }
        return false;
    }
    if (OPAL_UNLIKELY(!usnic_rel_tx_window_open(&ep->rel) || ep->inflight_bytes >= limit)) {
        module->stats.window_full++;
        if (0 == module->tx_blocked_since) {
            module->tx_blocked_since = usnic_module_now(module);
        }
        if (ep->inflight_bytes >= limit && peer_allow(ep) < ep->inflight_limit) {
            module->stats.allow_full++;
        }
        return false;
    }
    return module->chan[cid].tx_credits > 0;
}

static inline enum usnic_channel_id channel_for(const mca_btl_base_endpoint_t *ep,
                                                uint32_t payload_len)
{
    return (payload_len <= ep->prio_frag_max) ? USNIC_CHAN_PRIO : USNIC_CHAN_DATA;
}

int usnic_send_small(usnic_module_t *module, mca_btl_base_endpoint_t *ep, usnic_frag_t *frag)
{
    usnic_seg_t *seg = frag->seg;
    uint32_t len = (uint32_t) frag->segs[0].seg_len;
    enum usnic_channel_id cid = channel_for(ep, len);

    if (!can_send(module, ep, cid, (uint32_t) USNIC_HDR_LEN_FRAG + len)) {
        return OPAL_ERR_RESOURCE_BUSY;
    }
    usnic_pkt_hdr_init(module, (struct usnic_pkt_hdr *) seg->buf, USNIC_PKT_FRAG, frag->tag, len,
                       frag->msg_id);
    seg->hdr_len = (uint32_t) USNIC_HDR_LEN_FRAG + len;
    seg->payload_len = len;
    transmit_new(module, ep, seg, cid);
    return OPAL_SUCCESS;
}

/* Bytes [off, off+n) of a LARGE/PUT fragment into a chunk segment. */
static void chunk_payload(usnic_module_t *module, usnic_frag_t *frag, usnic_seg_t *seg,
                          uint32_t hdr_len, uint64_t off, uint32_t n)
{
    uint8_t *dst = seg->buf + hdr_len;
    uint32_t inl = 0;

    if (off < frag->hdr_len) {
        inl = frag->hdr_len - (uint32_t) off;
        if (inl > n) {
            inl = n;
        }
        memcpy(dst, frag->hdr_buf + off, inl);
    }
    seg->hdr_len = hdr_len + inl;
    seg->zc_ptr = NULL;
    seg->zc_len = 0;
    if (n > inl) {
        const uint8_t *src = frag->data + (off + inl - frag->hdr_len);
        if (module->zero_copy) {
            seg->zc_ptr = src;
            seg->zc_len = n - inl;
        } else {
            memcpy(dst + inl, src, n - inl);
            seg->hdr_len += n - inl;
        }
    }
    seg->payload_len = n;
}

static int send_chunks(usnic_module_t *module, mca_btl_base_endpoint_t *ep, usnic_frag_t *frag);

/* Let the sends from here on join trains (post() hands them to
 * train_add).  False where there are no trains, or where a caller already
 * batches and will end the batch itself. */
static bool batch_begin(usnic_module_t *module)
{
    if (NULL == module->backend->train_add ||
        !(module->chan[USNIC_CHAN_DATA].gso || module->chan[USNIC_CHAN_DATA].batch) ||
        module->batching) {
        return false;
    }
    module->batching = true;
    return true;
}

/* Hand every channel's train to the kernel; hold_data: but leave the data
 * channel's open for the next messages (btl_usnic_tx_coalesce). */
static void batch_end(usnic_module_t *module, bool hold_data)
{
    module->batching = false;
    for (int c = 0; c < USNIC_NUM_CHANNELS; c++) {
        if (0 == module->chan[c].train.n) {
            continue;
        }
        if (hold_data && USNIC_CHAN_DATA == c) {
            module->backend->train_hold(module, &module->chan[c]);
        } else {
            module->backend->train_flush(module, &module->chan[c]);
        }
    }
}

/*
 * The chunks of a fragment go to one peer on the data channel, one after
 * the other: with a backend that has trains they are queued while the
 * loop runs and handed to the kernel together (one system call for up to
 * USNIC_TRAIN_MAX datagrams) when it ends, or, hold_train, left open for
 * the next messages to join.  Outside progress the chunks share one clock
 * reading (a vDSO call of about 25 ns each otherwise: 24 of them for a 32
 * KiB message); they leave within microseconds of each other, as do those
 * that progress sends with its own one reading.
 */
static int send_chunks_batch(usnic_module_t *module, mca_btl_base_endpoint_t *ep,
                             usnic_frag_t *frag, bool hold_train)
{
    bool batch = batch_begin(module);
    bool clock = !module->in_progress;
    int rc;

    if (clock) {
        module->now_us = usnic_now_us();
        module->in_progress = true;
    }
    rc = send_chunks(module, ep, frag);
    if (clock) {
        module->in_progress = false;
    }
    if (batch) {
        batch_end(module, hold_train);
    }
    return rc;
}

int usnic_send_chunks(usnic_module_t *module, mca_btl_base_endpoint_t *ep, usnic_frag_t *frag)
{
    return send_chunks_batch(module, ep, frag, false);
}

/* A datagram of a train the kernel refused: in the window as sent, so
 * treat it as lost (queued for resending now). */
void usnic_train_failed(usnic_module_t *module, usnic_seg_t *seg)
{
    mca_btl_base_endpoint_t *ep = seg->ep;

    module->stats.tx_pkts--;
    module->stats.tx_bytes -= seg->payload_len;
    module->stats.tx_eagain++;
    if (NULL != ep && !ep->dead) {
        usnic_rel_tx_send_failed(&ep->rel, &seg->rel);
    }
}

bool usnic_train_pad(usnic_module_t *module, usnic_seg_t *seg, const mca_btl_base_endpoint_t *ep)
{
    struct usnic_pkt_hdr *hdr = (struct usnic_pkt_hdr *) seg->buf;

    if (USNIC_PKT_ACK == hdr->type) {
        return false; /* an ACK is exactly its length */
    }
    hdr->flags |= USNIC_PKT_FLAG_PAD;
    if (!seg->seal_later && (0 != ep->auth || ep->crc)) {
        /* without the memo: the flag is among the words it keeps, and the
         * datagrams after this one go without it */
        usnic_pkt_seal(seg->buf, seg->hdr_len, seg->zc_ptr, seg->zc_len, &ep->tx_mac_key, NULL,
                       ep->auth, ep->crc);
    }
    module->stats.gso_pads++;
    return true;
}

static int send_chunks(usnic_module_t *module, mca_btl_base_endpoint_t *ep, usnic_frag_t *frag)
{
    bool put = (USNIC_FRAG_PUT == frag->kind);
    uint32_t hdr_len = (uint32_t) (put ? USNIC_HDR_LEN_PUT : USNIC_HDR_LEN_CHUNK);
    uint32_t max = put ? ep->put_max : ep->chunk_max;

    if (put && 0 == frag->next_off) {
        /* A PUT larger than btl_usnic_train_copy_put_max comes from memory
         * out of the cache, and one that starts with nothing else in
         * flight to its peer is waited for (a ping-pong, a blocking
         * send): either way its trains go uncopied, the kernel reading its
         * payloads where they are (btl_usnic_chan_kern.c, train_gather) */
        frag->pieces = 0 != module->put_copy_max &&
                       (frag->total_len > module->put_copy_max || 0 == ep->inflight_bytes);
    }
    while (frag->next_off < frag->total_len) {
        struct usnic_pkt_hdr *hdr;
        struct usnic_chunk_hdr *ch;
        usnic_seg_t *seg;
        uint64_t left = frag->total_len - frag->next_off;
        uint32_t n = (left < max) ? (uint32_t) left : max;

        if (!can_send(module, ep, USNIC_CHAN_DATA, hdr_len + n)) {
            return OPAL_ERR_RESOURCE_BUSY;
        }
        seg = usnic_seg_alloc(module, USNIC_SEG_SEND);
        if (OPAL_UNLIKELY(NULL == seg)) {
            return OPAL_ERR_RESOURCE_BUSY;
        }
        hdr = (struct usnic_pkt_hdr *) seg->buf;
        usnic_pkt_hdr_init(module, hdr, put ? USNIC_PKT_PUT : USNIC_PKT_CHUNK, frag->tag, n,
                           frag->msg_id);
        ch = (struct usnic_chunk_hdr *) (seg->buf + sizeof(*hdr));
        ch->msg_len = frag->total_len;
        ch->offset = frag->next_off;
        if (put) {
            struct usnic_put_hdr *ph = (struct usnic_put_hdr *) (ch + 1);
            ph->reg_key = frag->put_key;
            ph->reg_offset = frag->put_offset;
        }
        chunk_payload(module, frag, seg, hdr_len, frag->next_off, n);
        seg->frag = frag;
        frag->chunks_unacked++;
        frag->next_off += n;
        transmit_new(module, ep, seg, USNIC_CHAN_DATA);
    }
    frag->sent = true;
    if (0 == frag->chunks_unacked) {
        opal_list_append(&module->done_frags, &frag->base.super.super);
    }
    return OPAL_SUCCESS;
}

/* Try to hand the endpoint's queued fragments to the wire, in order. */
static void sendq_drain(usnic_module_t *module, mca_btl_base_endpoint_t *ep)
{
    opal_list_item_t *item;

    while (NULL != (item = opal_list_get_first(&ep->sendq)) &&
           item != opal_list_get_end(&ep->sendq)) {
        usnic_frag_t *frag = (usnic_frag_t *) item;
        int rc;

        if (USNIC_FRAG_SMALL == frag->kind) {
            rc = usnic_send_small(module, ep, frag);
            if (OPAL_SUCCESS != rc) {
                return;
            }
            opal_list_remove_first(&ep->sendq);
            frag->queued = false;
            frag->sent = true;
            /* the data is in our segment: report completion now */
            opal_list_append(&module->done_frags, &frag->base.super.super);
        } else {
            opal_list_remove_first(&ep->sendq);
            frag->queued = false;
            rc = usnic_send_chunks(module, ep, frag);
            if (OPAL_SUCCESS != rc) {
                /* not all chunks out yet: back to the head of the queue */
                opal_list_prepend(&ep->sendq, &frag->base.super.super);
                frag->queued = true;
                return;
            }
        }
    }
}

/* The same, where the window opened for several queued fragments at once:
 * with a backend that has trains, their datagrams share trains (a short
 * last chunk padded, btl_usnic_chan_kern.c), handed to the kernel when the
 * queue stops. */
static void endpoint_progress_sendq(usnic_module_t *module, mca_btl_base_endpoint_t *ep)
{
    bool batch = batch_begin(module);

    sendq_drain(module, ep);
    if (batch) {
        batch_end(module, false);
    }
}

int usnic_progress_sends(usnic_module_t *module)
{
    opal_list_item_t *item, *next;

    for (item = opal_list_get_first(&module->sendq_eps);
         item != opal_list_get_end(&module->sendq_eps); item = next) {
        mca_btl_base_endpoint_t *ep = usnic_ep_of_sendq_item(item);
        next = opal_list_get_next(item);
        if (!ep->dead) {
            endpoint_progress_sendq(module, ep);
        }
        if (opal_list_is_empty(&ep->sendq) || ep->dead) {
            opal_list_remove_item(&module->sendq_eps, item);
            ep->on_sendq_list = false;
        }
    }
    return OPAL_SUCCESS;
}

void usnic_endpoint_enqueue(mca_btl_base_endpoint_t *ep, usnic_frag_t *frag)
{
    frag->queued = true;
    opal_list_append(&ep->sendq, &frag->base.super.super);
    usnic_endpoint_sendq_arm(ep);
}

/* btl_usnic_tx_coalesce: a message of at most a third of a train that
 * would leave as a short train of its own while a good part of the window
 * is still unacknowledged leaves its train open instead, for the next
 * messages to join: trains fill up (streams of 2-16 KiB messages at MTU
 * 1500 1.5-1.75x the bandwidth, docs/perf-kernel-backend.md, session 15;
 * from 32 KiB a message is a long enough train by itself).  An open train
 * goes when it is full, at the next progress call, or, if the application
 * went on computing, within about a millisecond from the liveness thread
 * (USNIC_LIVE_FLUSH_US). */
#define USNIC_COALESCE_MSG_MAX (24u * 1024u)

static inline bool coalesce(usnic_module_t *module, const mca_btl_base_endpoint_t *ep,
                            const usnic_frag_t *frag)
{
    return 0 != module->tx_coalesce && frag->total_len <= USNIC_COALESCE_MSG_MAX &&
           ep->inflight_bytes >= module->tx_coalesce && NULL != module->backend->train_hold &&
           module->chan[USNIC_CHAN_DATA].gso && !module->batching && usnic_live_flusher();
}

void usnic_send_chunked(usnic_module_t *module, mca_btl_base_endpoint_t *ep, usnic_frag_t *frag)
{
    bool hold;

    if (!opal_list_is_empty(&ep->sendq)) {
        usnic_endpoint_enqueue(ep, frag); /* behind the others */
        return;
    }
    hold = coalesce(module, ep, frag);
    if (OPAL_UNLIKELY(hold)) {
        module->stats.tx_held++;
    }
    if (OPAL_SUCCESS != send_chunks_batch(module, ep, frag, hold)) {
        usnic_endpoint_enqueue(ep, frag); /* the rest of it later */
    }
}

int usnic_progress_resends(usnic_module_t *module)
{
    int max = mca_btl_usnic_component.params.max_resends_per_iteration;
    int sent = 0;

    while (sent < max && !opal_list_is_empty(&module->resendq)) {
        usnic_seg_t *seg = (usnic_seg_t *) opal_list_get_first(&module->resendq);
        mca_btl_base_endpoint_t *ep = seg->ep;
        struct usnic_pkt_hdr *hdr = (struct usnic_pkt_hdr *) seg->buf;
        int rc;

        if (ep->dead) {
            /* leave it in the window; it is never sent again */
            opal_list_remove_first(&module->resendq);
            seg->rel.state &= ~USNIC_REL_SEG_RESEND;
            continue;
        }
        if (OPAL_UNLIKELY(seg->posted)) {
            break; /* its last post has not completed: the provider owns its buffer */
        }
        if (fill_ack(ep, hdr)) {
            module->stats.piggy_acks++;
        }
        hdr->ts = usnic_rel_ts(module->now_us); /* this copy's own send time */
        /* every resend goes on the data channel: that is this copy's lane
         * (a newer priority-channel packet may overtake it without it
         * being lost) */
        seg->rel.lane = (uint8_t) USNIC_CHAN_DATA;
        rc = post(module, ep, seg, USNIC_CHAN_DATA);
        if (OPAL_ERR_RESOURCE_BUSY == rc) {
            break;
        }
        opal_list_remove_first(&module->resendq);
        if (OPAL_SUCCESS == rc && seg->rel.sends > 0) {
            module->stats.retrans++;
        }
        /* (refused for good: lost on the way, see post) */
        usnic_rel_tx_sent(&ep->rel, &seg->rel, module->now_us);
        sent++;
    }
    return sent;
}

/*
 * A LARGE fragment sent from the user's memory completes when its last
 * chunk is acknowledged: until then a lost chunk is resent from there.
 * In a ping-pong, or any blocking send, that ACK comes with the peer's
 * answer, so the PML meets the answer before it has posted the receive
 * for it, and takes the unexpected path (a buffer, a copy in, a copy out
 * when the receive comes).  When nothing else to this peer is in flight,
 * a fragment of at most btl_usnic_early_copy_max bytes is copied into a
 * buffer of ours once it is on the wire instead; its chunks are resent
 * from the copy, and the PML gets its completion at the next progress
 * call.  The copy is made while the datagrams travel and the peer works
 * on them; in a stream, where other fragments are in flight, nothing is
 * copied.  A fragment that was packed into a buffer of ours (a
 * non-contiguous datatype) needs no copy and completes the same way.  Only
 * where a send hands the bytes to the kernel before it returns (no segment
 * is still with a provider), and where the fragment is ours to keep after
 * the callback.
 */
void usnic_send_early(usnic_module_t *module, mca_btl_base_endpoint_t *ep, usnic_frag_t *frag)
{
    struct usnic_rel *rel = &ep->rel;

    if (USNIC_FRAG_LARGE != frag->kind || !frag->sent || 0 == frag->chunks_unacked ||
        0 == frag->data_len || frag->data_len > module->early_copy_max || !module->zero_copy ||
        module->batching || NULL == frag->base.des_cbfunc ||
        !(frag->base.des_flags & MCA_BTL_DES_FLAGS_BTL_OWNERSHIP) ||
        usnic_rel_tx_inflight(rel) != frag->chunks_unacked || !opal_list_is_empty(&ep->sendq) ||
        0 != module->chan[USNIC_CHAN_DATA].train.n) {
        return; /* (a train still open reads the user's memory when it leaves) */
    }
    for (usnic_seq_t s = rel->tx.acked + 1u; usnic_seq_lt(s, rel->tx.next); s++) {
        struct usnic_rel_seg *r = usnic_rel_tx_at(rel, s);
        if (NULL != r && usnic_seg_of(r)->posted) {
            return; /* a provider may still read the user's memory */
        }
    }
    if (NULL == frag->big_buf) {
        /* in the user's memory: resend from a copy of ours */
        opal_free_list_item_t *copy = usnic_buf_get(module, frag->data_len);
        uint8_t *to;
        if (NULL == copy) {
            return;
        }
        to = copy->ptr;
        memcpy(to, frag->data, frag->data_len);
        for (usnic_seq_t s = rel->tx.acked + 1u; usnic_seq_lt(s, rel->tx.next); s++) {
            struct usnic_rel_seg *r = usnic_rel_tx_at(rel, s);
            usnic_seg_t *seg = (NULL != r) ? usnic_seg_of(r) : NULL;
            if (NULL != seg && seg->frag == frag && 0 != seg->zc_len) {
                seg->zc_ptr = to + ((const uint8_t *) seg->zc_ptr - frag->data);
            }
        }
        frag->data = to;
        frag->big_buf = copy;
    }
    frag->early_listed = true;
    module->stats.early_copies++;
    opal_list_append(&module->done_frags, &frag->base.super.super);
}

/* Report completion of sent fragments to the PML, or of PUTs to their requester. */
int usnic_progress_done_frags(usnic_module_t *module)
{
    opal_list_item_t *item;
    int count = 0;

    while (NULL != (item = opal_list_remove_first(&module->done_frags))) {
        usnic_frag_t *frag = (usnic_frag_t *) item;
        mca_btl_base_endpoint_t *ep = frag->ep;

        count++;
        if (USNIC_FRAG_PUT == frag->kind) {
            mca_btl_base_rdma_completion_fn_t cb = frag->put_cb;
            void *local = frag->put_local, *ctx = frag->put_cbcontext, *data = frag->put_cbdata;
            struct mca_btl_base_registration_handle_t *lh = frag->put_local_handle;
            usnic_frag_release(frag);
            cb(&module->super, ep, local, lh, ctx, data, OPAL_SUCCESS);
            continue;
        }
        if (frag->early_listed) {
            frag->early_listed = false;
            if (0 != frag->chunks_unacked) {
                /* complete for the PML now (its data has a copy of ours);
                 * the fragment stays with its segments until the last ACK,
                 * which lists it again, without a callback */
                mca_btl_base_completion_fn_t cb = frag->base.des_cbfunc;
                frag->base.des_cbfunc = NULL;
                if (NULL != cb) {
                    cb(&module->super, ep, &frag->base, OPAL_SUCCESS);
                }
                continue;
            }
        }
        if (NULL != frag->base.des_cbfunc) {
            frag->base.des_cbfunc(&module->super, ep, &frag->base, OPAL_SUCCESS);
        }
        if (frag->base.des_flags & MCA_BTL_DES_FLAGS_BTL_OWNERSHIP) {
            usnic_frag_release(frag);
        }
    }
    return count;
}

int usnic_send_inline(usnic_module_t *module, mca_btl_base_endpoint_t *ep, usnic_seg_t *seg,
                      uint32_t payload_len)
{
    enum usnic_channel_id cid = channel_for(ep, payload_len);

    if (!can_send(module, ep, cid, (uint32_t) USNIC_HDR_LEN_FRAG + payload_len)) {
        return OPAL_ERR_RESOURCE_BUSY;
    }
    /* a fragment numbered now goes out now: numbers stay in send order */
    ((struct usnic_pkt_hdr *) seg->buf)->msg_id = ep->next_msg_id++;
    seg->hdr_len = (uint32_t) USNIC_HDR_LEN_FRAG + payload_len;
    seg->payload_len = payload_len;
    transmit_new(module, ep, seg, cid);
    return OPAL_SUCCESS;
}

/* ---- explicit ACKs (btl_usnic_ack.c keeps the policy; this is the packet) ---- */

/* An explicit ACK (with SACK when there is a gap) on channel cid; with
 * ping_ts != 0 a ping: it asks the peer to ACK at once and carries ping_ts. */
static int send_ack_packet(usnic_module_t *module, mca_btl_base_endpoint_t *ep,
                           enum usnic_channel_id cid, uint32_t ping_ts)
{
    usnic_seg_t *seg;
    struct usnic_pkt_hdr *hdr;
    uint64_t sack[USNIC_SACK_WORDS_MAX];
    /* as many words as the peer's channel takes in one datagram (its MTU
     * is ours); the priority channel holds at least one */
    size_t room = (module->chan[cid].mtu - USNIC_HDR_LEN_ACK) / sizeof(struct usnic_sack);
    unsigned nwords;
    bool more;
    int rc;

    if (module->chan[cid].tx_credits <= 0) {
        return OPAL_ERR_RESOURCE_BUSY;
    }
    seg = usnic_seg_alloc(module, USNIC_SEG_ACK);
    if (NULL == seg) {
        return OPAL_ERR_RESOURCE_BUSY;
    }
    hdr = (struct usnic_pkt_hdr *) seg->buf;
    nwords = usnic_rel_rx_sack(&ep->rel, sack,
                               room < USNIC_SACK_WORDS_MAX ? (unsigned) room : USNIC_SACK_WORDS_MAX,
                               &more);
    usnic_pkt_hdr_init(module, hdr, USNIC_PKT_ACK, 0, nwords * (uint32_t) sizeof(struct usnic_sack),
                       0);
    (void) fill_ack(ep, hdr);
    seg->hdr_len = (uint32_t) USNIC_HDR_LEN_ACK;
    if (0 != nwords) {
        hdr->flags |= USNIC_PKT_FLAG_SACK;
        memcpy(seg->buf + USNIC_HDR_LEN_ACK, sack, nwords * sizeof(struct usnic_sack));
        seg->hdr_len += nwords * (uint32_t) sizeof(struct usnic_sack);
        module->stats.sacks_tx++;
    }
    if (more) {
        hdr->flags |= USNIC_PKT_FLAG_SACK_MORE;
    }
    /* Every ACK packet to a peer is stamped later than the one before (the
     * receiver takes one that is not as a copy: btl_usnic_rel.h); a ping
     * that waited for a free channel goes with the time it really leaves,
     * which its answer will echo. */
    {
        uint32_t ts = usnic_rel_ts(usnic_module_now(module));
        if ((int32_t) (ts - ep->ack_ts_last) <= 0) {
            ts = usnic_rel_ts((uint64_t) ep->ack_ts_last + 1u);
        }
        ep->ack_ts_last = ts;
        hdr->ts = ts;
        if (0 != ping_ts) {
            hdr->flags |= USNIC_PKT_FLAG_ACK_REQ;
            if (ep->rel.tx.ping.waiting && ep->rel.tx.ping.ts == ping_ts) {
                ep->rel.tx.ping.ts = ts;
            }
        }
    }
    seg->payload_len = 0;
    seg->refs = 1; /* ours until post() took its own reference, if it needs one */
    rc = post(module, ep, seg, cid);
    usnic_seg_put(seg);
    if (OPAL_ERR_RESOURCE_BUSY == rc) {
        ep->rel.rx.ack_now = true; /* the ACK is still owed: try again */
        return OPAL_ERR_RESOURCE_BUSY;
    }
    if (OPAL_SUCCESS != rc) {
        /* refused for good: lost on the way (see post); the peer's timer
         * asks again */
        return OPAL_SUCCESS;
    }
    if (0 != ping_ts) {
        module->stats.pings_tx++;
    } else {
        module->stats.acks_tx++;
    }
    return OPAL_SUCCESS;
}

int usnic_send_ack(usnic_module_t *module, mca_btl_base_endpoint_t *ep)
{
    return send_ack_packet(module, ep, USNIC_CHAN_PRIO, 0);
}

int usnic_send_ping(usnic_module_t *module, mca_btl_base_endpoint_t *ep)
{
    int rc = send_ack_packet(module, ep, (enum usnic_channel_id) ep->ping_lane, ep->ping_ts);

    if (OPAL_SUCCESS == rc) {
        ep->ping_ts = 0;
    }
    return rc;
}
