/*
 * The receive dispatch: what happens to one arriving datagram, from the
 * first byte checked to the fragment handed to the PML.  It knows nothing
 * of libfabric or Open MPI; the transport supplies what it needs through
 * struct usnic_rx_ops.  The BTL (btl_usnic_recv.c) and the unit tests'
 * simulated link (test/unit/simlink.c) run this same code.
 *
 * Order of checks (a packet failing any of them is dropped and counted by
 * reason, and nothing of it has any effect):
 *   1. usnic_pkt_parse(): lengths, version, type, flags, job key, chunk bounds
 *   2. sender: a known peer module
 *   3. piggy-backed ACK: acknowledges nothing we never sent (then SACK)
 *   4. sequence number: new and inside the receive window
 *   5. by type: FRAG and CHUNK need a PML handler for their tag and a place
 *      in the fragment table (btl_usnic_reasm.h); PUT needs its target
 *      range inside a live registration.
 * Only then is the sequence number committed (and so acknowledged), and
 * fragments are handed to the PML in the sender's order.
 */
#ifndef BTL_USNIC_RX_H
#define BTL_USNIC_RX_H

#include <stdbool.h>
#include <stdint.h>

#include "btl_usnic_proto.h"
#include "btl_usnic_reasm.h"
#include "btl_usnic_rel.h"

/* A peer connection as the dispatch sees it. */
struct usnic_rx_conn {
    struct usnic_rel *rel;
    struct usnic_reasm_table *reasm;
    void *ep; /* the transport's endpoint, passed back to the ops */
};

struct usnic_rx_ops {
    /* The connection of sender module `module`; false if unknown.  Never blocks. */
    bool (*lookup)(void *t, uint32_t module, struct usnic_rx_conn *conn);
    /* Is there a PML handler for this tag? */
    bool (*tag_ok)(void *t, uint8_t tag);
    /* Hand one whole fragment to the PML. */
    void (*deliver)(void *t, void *ep, uint8_t tag, const void *data, uint64_t len);
    /* The address of bytes [reg_offset, reg_offset + len) of registration
     * key: USNIC_PKT_OK and *dest, or the drop reason. */
    enum usnic_drop_reason (*put_resolve)(void *t, uint64_t key, uint64_t reg_offset, uint64_t len,
                                          uint8_t **dest);
    /* Write a PUT chunk's payload at dest (its place: the PUT's target plus
     * the chunk's offset); v is the packet, for the transport's bookkeeping. */
    void (*put_write)(void *t, void *ep, uint8_t *dest, const struct usnic_pkt_view *v);
    /* An ACK released `released` (> 0) of our segments to this peer. */
    void (*acked)(void *t, void *ep, int released);
    /* A packet was committed: payload_len bytes; an ACK is now owed. */
    void (*accepted)(void *t, void *ep, uint32_t payload_len);
    /* An explicit ACK to this peer may be due (duplicate, ACK request). */
    void (*ack_schedule)(void *t, void *ep);
    /* The packet is dropped for `why`; ep is NULL before the sender is known. */
    void (*drop)(void *t, void *ep, enum usnic_drop_reason why);
    /* An ACK packet was accepted. */
    void (*ack_rx)(void *t, void *ep);
};

struct usnic_rx_params {
    uint64_t job_key;
    uint64_t max_msg_len; /* largest PML fragment we reassemble */
    uint64_t now;         /* transport clock: round trips, loss detection, delayed ACK */
};

/* Hand every fragment that is complete and next in order to the PML. */
static inline void usnic_rx_drain(const struct usnic_rx_ops *ops, void *t,
                                  const struct usnic_rx_conn *c)
{
    struct usnic_reasm *r;

    while (NULL != (r = usnic_reasm_pop(c->reasm))) {
        ops->deliver(t, c->ep, r->tag, r->buf, r->msg_len);
        usnic_reasm_release(c->reasm, r);
    }
}

static inline void usnic_rx_commit(const struct usnic_rx_ops *ops, void *t,
                                   const struct usnic_rx_conn *c, const struct usnic_pkt_view *v,
                                   uint64_t now)
{
    usnic_rel_rx_commit(c->rel, v->hdr->seq, v->hdr->ts, now);
    ops->accepted(t, c->ep, v->payload_len);
}

/*
 * Process one datagram.  Returns USNIC_PKT_OK if it was taken (or was an
 * ACK), else the reason it was dropped (already reported through ops->drop).
 */
static inline enum usnic_drop_reason usnic_rx_dispatch(const struct usnic_rx_ops *ops, void *t,
                                                       const void *buf, size_t len,
                                                       const struct usnic_rx_params *p)
{
    struct usnic_pkt_view v;
    struct usnic_rx_conn c;
    const struct usnic_pkt_hdr *hdr;
    enum usnic_drop_reason why;

    why = usnic_pkt_parse(buf, len, p->job_key, p->max_msg_len, &v);
    if (USNIC_PKT_OK != why) {
        ops->drop(t, NULL, why);
        return why;
    }
    hdr = v.hdr;
    if (!ops->lookup(t, hdr->src_module, &c)) {
        ops->drop(t, NULL, USNIC_DROP_SENDER);
        return USNIC_DROP_SENDER;
    }

    if (hdr->flags & USNIC_PKT_FLAG_ACK) {
        int released = usnic_rel_tx_ack(c.rel, hdr->ack_seq, USNIC_PKT_ACK == hdr->type,
                                        (NULL != v.sack) ? v.sack->bits : 0, hdr->ts_echo, p->now);
        if (released < 0) {
            ops->drop(t, c.ep, USNIC_DROP_ACK_RANGE);
            return USNIC_DROP_ACK_RANGE;
        }
        if (released > 0) {
            ops->acked(t, c.ep, released);
        }
        if (USNIC_PKT_ACK == hdr->type) {
            ops->ack_rx(t, c.ep);
            if (hdr->flags & USNIC_PKT_FLAG_ACK_REQ) {
                /* a ping: answer at once, echoing its stamp */
                usnic_rel_rx_ping(c.rel, hdr->ts);
                ops->ack_schedule(t, c.ep);
            }
            return USNIC_PKT_OK;
        }
    }
    if (hdr->flags & USNIC_PKT_FLAG_ACK_REQ) {
        c.rel->rx.ack_now = true;
        ops->ack_schedule(t, c.ep);
    }

    switch (usnic_rel_rx_check(c.rel, hdr->seq)) {
    case USNIC_RX_NEW:
        break;
    case USNIC_RX_DUP:
        usnic_rel_rx_duplicate(c.rel, hdr->ts);
        ops->ack_schedule(t, c.ep);
        ops->drop(t, c.ep, USNIC_DROP_DUPLICATE);
        return USNIC_DROP_DUPLICATE;
    case USNIC_RX_BEYOND:
    default:
        c.rel->stats.rx_beyond++;
        ops->drop(t, c.ep, USNIC_DROP_WINDOW);
        return USNIC_DROP_WINDOW;
    }

    switch (hdr->type) {
    case USNIC_PKT_FRAG:
    case USNIC_PKT_CHUNK: {
        bool whole = (USNIC_PKT_FRAG == hdr->type);
        uint64_t msg_len = whole ? v.payload_len : v.chunk->msg_len;

        if (!ops->tag_ok(t, hdr->tag)) {
            why = USNIC_DROP_TYPE;
            break;
        }
        why = usnic_reasm_check(c.reasm, hdr->msg_id, msg_len, hdr->tag, whole);
        if (USNIC_PKT_OK != why) {
            break;
        }
        if (whole && usnic_reasm_is_next(c.reasm, hdr->msg_id)) {
            /* its turn: straight from the packet, no copy */
            usnic_rx_commit(ops, t, &c, &v, p->now);
            usnic_reasm_skip(c.reasm);
            ops->deliver(t, c.ep, hdr->tag, v.payload, v.payload_len);
        } else {
            why = whole ? usnic_reasm_hold(c.reasm, hdr->msg_id, v.payload, v.payload_len, hdr->tag)
                        : usnic_reasm_add(c.reasm, hdr->msg_id, msg_len, v.chunk->offset, v.payload,
                                          v.payload_len, hdr->tag);
            if (USNIC_PKT_OK != why) {
                break;
            }
            usnic_rx_commit(ops, t, &c, &v, p->now);
        }
        usnic_rx_drain(ops, t, &c);
        return USNIC_PKT_OK;
    }

    case USNIC_PKT_PUT: {
        uint8_t *dest;
        why = ops->put_resolve(t, v.put->reg_key, v.put->reg_offset, v.chunk->msg_len, &dest);
        if (USNIC_PKT_OK != why) {
            break;
        }
        ops->put_write(t, c.ep, dest + v.chunk->offset, &v);
        if (v.chunk->offset + v.payload_len == v.chunk->msg_len) {
            /* The PUT's last chunk: its initiator sends ob1's FIN only
             * once every chunk is acknowledged, and no data of ours can
             * carry the ACK before that FIN arrives: acknowledge now
             * (measured: 1 MiB ping-pong 209 -> 188 us, 512 KiB 139 ->
             * 103 us).  Not for chunked send fragments: there the reply
             * usually carries the ACK, and an explicit one cost 64 KiB
             * ping-pongs 17 -> 22 us. */
            c.rel->rx.ack_now = true;
        }
        usnic_rx_commit(ops, t, &c, &v, p->now);
        return USNIC_PKT_OK;
    }

    default:
        why = USNIC_DROP_TYPE; /* usnic_pkt_parse() lets no other type through */
        break;
    }
    ops->drop(t, c.ep, why);
    return why;
}

#endif /* BTL_USNIC_RX_H */
