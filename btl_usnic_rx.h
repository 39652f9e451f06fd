/*
 * The receive dispatch: what happens to one arriving datagram, from the
 * first byte checked to the fragment handed to the PML.  It knows nothing
 * of libfabric or Open MPI; the transport supplies what it needs through
 * struct usnic_rx_ops.  The BTL (btl_usnic_recv.c) and the unit tests'
 * simulated link (test/unit/simlink.c) run this same code.
 *
 * Order of checks (a packet failing any of them is dropped and counted by
 *   reason, and nothing of it has any effect):
 *   1. usnic_pkt_parse(): lengths, version, type, flags, chunk bounds
 *   2. sender: a known peer module by its key, sending from the address
 *      and port of its modex record (the transport's lookup)
 *   3. integrity: CRC32C, then the MAC under the sender's secret, as the
 *      connection requires (usnic_pkt_verify())
 *   4. piggy-backed ACK: acknowledges nothing we never sent (then SACK)
 *   5. sequence number: new and inside the receive window
 *   6. by type: FRAG and CHUNK need a PML handler for their tag and a place
 *      in the fragment table (btl_usnic_reasm.h); PUT needs its target
 *      range inside a live registration.
 * A PART (btl_usnic_part.h) goes through 1-3 and the window check of 5
 * (without committing: its datagram's own sequence number is committed
 * when the datagram is whole); the whole datagram then goes through all
 * of it again, from 1, as if it had arrived in one piece.
 * Packets that pass 1-3 but carry nothing new are not taken as news: a
 * duplicate data packet or an ACK packet whose timestamp is not newer
 * than the newest of its lane is a copy (the network's, or a replay) and
 * triggers no ACK, answers no ping and counts no duplicate ACK.
 * Only then is the sequence number committed (and so acknowledged), and
 * fragments are handed to the PML in the sender's order.
 */
#ifndef BTL_USNIC_RX_H
#define BTL_USNIC_RX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "btl_usnic_part.h"
#include "btl_usnic_proto.h"
#include "btl_usnic_reasm.h"
#include "btl_usnic_rel.h"

/* A peer connection as the dispatch sees it. */
struct usnic_rx_conn {
    struct usnic_rel *rel;
    struct usnic_reasm_table *reasm;
    void *ep;                        /* the transport's endpoint, passed back to the ops */
    const struct usnic_sip_key *key; /* the sender's MAC secret */
    struct usnic_sip_memo *memo;     /* for its MACs (usnic_siphash24_memo); may be NULL */
    int auth;                        /* 0 none, 1 header, 2 full (the connection's setting) */
    bool crc;                        /* CRC32C required */
    /* The lookup found the sender directly, with nothing to do for it
     * beyond the source check: its next chunks may take the predicted
     * path (struct usnic_rx_predict).  Left false by lookups that know
     * nothing of it. */
    bool predict;
    /* Where PART packets of this sender are joined (btl_usnic_part.h);
     * NULL: the transport takes none (they are dropped as TYPE). */
    struct usnic_parts *parts;
};

/*
 * Header prediction: the chunk accepted last (of a fragment or a PUT),
 * so that the next chunk of the same fragment or PUT from the same sender,
 * arriving next, is taken without the full sequence of checks.  A chunk
 * takes the predicted path only if its header equals that chunk's in
 * every field the checks read, but for seq (one more), the offset (where
 * that chunk ended) and ts, and if it came from the same source, on the
 * same lane, and its MAC (auth header) checks out as the full path checks
 * it, or the connection has none (auth none).  Then every check of the
 * full path would pass for it, for the same reasons:
 *   1. parse: the same lengths, type, flags, chunk length and PUT target;
 *      its range ends before the fragment's or PUT's does (not its last
 *      chunk);
 *   2. sender: the same key from the same source (params.src); the
 *      connection's state is current (the transport forgets the
 *      prediction when it could change: end of a receive batch, a peer
 *      declared dead);
 *   3. integrity: the header MAC (the tag computed ahead under the
 *      connection's key, else computed now); a payload apart from its
 *      header (params.payload) is allowed, as on the full path, only
 *      without CRC and auth full, which a prediction never has;
 *   4. ACK: no ACK request (the flags are the same, and a chunk that
 *      asked for an ACK is never predicted from); the cumulative ACK is
 *      processed as the full path processes it;
 *   5. sequence: the next expected, nothing received beyond it;
 *   6. CHUNK: the same tag and fragment (msg_id, msg_len), still being
 *      reassembled, since only the fragment's own chunks came in between.
 * What the full path would do with it is then done: the freshness mark,
 * the ACK, then usnic_reasm_add_defer() (which checks the chunk's place
 * itself) or the PUT's target looked up and written, and the commit.
 * Anything else takes the full path, which forgets the prediction first
 * and may set a new one.  The transport owns the struct and sets ok =
 * false whenever what it vouched for could change.
 */
struct usnic_rx_predict {
    bool ok;
    struct usnic_rx_conn c;   /* the sender's connection, as the lookup gave it */
    struct usnic_pkt_hdr hdr; /* the header of the chunk accepted last (CHUNK or PUT) */
    struct usnic_put_hdr put; /* PUT: its target */
    uint64_t msg_len;         /* its fragment's or PUT's length */
    uint64_t next_off;        /* where it ended */
    uint64_t src;             /* where it came from (usnic_rx_params.src) */
    uint32_t len;             /* its datagram's length */
    uint32_t hlen;            /* its headers' */
    uint64_t hits;            /* chunks taken on the predicted path */
};

struct usnic_rx_ops {
    /* The connection of the packet's sender (hdr->sender_key, from the
     * address the datagram came from): USNIC_PKT_OK and *conn, or
     * USNIC_DROP_SENDER / PENDING / ADDRESS.  Never blocks. */
    enum usnic_drop_reason (*lookup)(void *t, const struct usnic_pkt_hdr *hdr,
                                     struct usnic_rx_conn *conn);
    /* Is there a PML handler for this tag (always false for tags >= 255)? */
    bool (*tag_ok)(void *t, uint8_t tag);
    /* Hand one whole fragment to the PML. */
    void (*deliver)(void *t, void *ep, uint8_t tag, const void *data, uint64_t len);
    /* Optional (may be NULL): hand a whole fragment of len bytes to the
     * PML as n pieces (deferred chunks, btl_usnic_reasm.h), in order.
     * false: not taken (nothing was done); it is then copied together and
     * handed over with deliver. */
    bool (*deliver_pieces)(void *t, void *ep, uint8_t tag, const struct usnic_reasm_piece *piece,
                           unsigned n, uint64_t len);
    /* A fragment of this peer's is deferred (usnic_rx_params.defer): the
     * transport must call usnic_reasm_materialize() on the peer's table
     * before the memory of the packets it took changes.  Required where
     * defer is ever set. */
    void (*deferred)(void *t, void *ep, struct usnic_reasm_table *reasm);
    /* The address of bytes [reg_offset, reg_offset + len) of registration
     * key: USNIC_PKT_OK and *dest, or the drop reason. */
    enum usnic_drop_reason (*put_resolve)(void *t, uint64_t key, uint64_t reg_offset, uint64_t len,
                                          uint8_t **dest);
    /* Write a PUT chunk's payload at dest (its place: the PUT's target plus
     * the chunk's offset); v is the packet, for the transport's bookkeeping. */
    void (*put_write)(void *t, void *ep, uint8_t *dest, const struct usnic_pkt_view *v);
    /* A new chunk of a fragment went into its reassembly buffer (optional,
     * may be NULL): for the transport's bookkeeping. */
    void (*chunk_added)(void *t, void *ep, const struct usnic_pkt_view *v);
    /* An ACK released `released` (> 0) of our segments to this peer. */
    void (*acked)(void *t, void *ep, int released);
    /* A packet was committed: payload_len bytes; an ACK is now owed. */
    void (*accepted)(void *t, void *ep, uint32_t payload_len);
    /* An explicit ACK to this peer may be due (duplicate, ACK request). */
    void (*ack_schedule)(void *t, void *ep);
    /* The packet is dropped for `why`; ep is NULL before the sender is known. */
    void (*drop)(void *t, void *ep, enum usnic_drop_reason why);
    /* An ACK packet was accepted; fresh: its timestamp was newer than any
     * before on its lane (else it is a copy and changed nothing). */
    void (*ack_rx)(void *t, void *ep, bool fresh);
};

struct usnic_rx_params {
    uint64_t max_msg_len; /* largest PML fragment we reassemble */
    uint64_t now;         /* transport clock: round trips, loss detection, delayed ACK */
    uint8_t lane;         /* the channel it arrived on (copies on one lane keep their order) */
    /* The payload, when it is not right behind the header: the kernel
     * backend's direct receive put a chunk's header in one buffer and its
     * payload in the PUT's target or the fragment's reassembly buffer
     * (btl_usnic_chan_kern.c).  buf then holds the header only and len
     * counts header + payload.  Only for PUT and CHUNK headers, and only
     * where neither the CRC nor the MAC covers the payload; NULL: the
     * payload follows the header in buf. */
    const uint8_t *payload;
    /* The packet's memory stays as it is until the transport materializes
     * the tables that ops->deferred named: a chunk may be left there
     * (deferred chunks, btl_usnic_reasm.h). */
    bool defer;
    /* The datagram's header MAC computed ahead under mac_key (with other
     * datagrams': usnic_pkt_macs), NULL: none.  Used only where the
     * connection's key is mac_key and it takes auth header alone. */
    const struct usnic_sip_key *mac_key;
    uint64_t mac_tag;
    /* Header prediction (struct usnic_rx_predict), NULL: none.  src names
     * where the datagram came from (the transport's token: the same value
     * exactly when the lookup's source check would see the same source). */
    struct usnic_rx_predict *predict;
    uint64_t src;
};

/* Hand every fragment that is complete and next in order to the PML. */
static inline void usnic_rx_drain(const struct usnic_rx_ops *ops, void *t,
                                  const struct usnic_rx_conn *c)
{
    struct usnic_reasm *r;

    while (NULL != (r = usnic_reasm_pop(c->reasm))) {
        if (r->deferred) {
            /* its first chunks still where they arrived: as pieces if the
             * transport can, else copied together first */
            struct usnic_reasm_piece seg[USNIC_REASM_PIECES];
            unsigned n = usnic_reasm_pieces(c->reasm, r, seg);

            if (NULL == ops->deliver_pieces ||
                !ops->deliver_pieces(t, c->ep, r->tag, seg, n, r->msg_len)) {
                usnic_reasm_materialize(c->reasm);
                ops->deliver(t, c->ep, r->tag, r->buf, r->msg_len);
            }
        } else {
            ops->deliver(t, c->ep, r->tag, r->buf, r->msg_len);
        }
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

/* A new data packet's piggy-backed ACK (flags & USNIC_PKT_FLAG_ACK):
 * USNIC_PKT_OK, or dropped for a range it cannot acknowledge. */
static inline enum usnic_drop_reason usnic_rx_data_ack(const struct usnic_rx_ops *ops, void *t,
                                                       const struct usnic_rx_conn *c,
                                                       const struct usnic_pkt_hdr *hdr,
                                                       uint64_t now)
{
    int released = usnic_rel_tx_ack(c->rel, hdr->ack_seq, false, 0, hdr->ts_echo, now);

    if (released < 0) {
        ops->drop(t, c->ep, USNIC_DROP_ACK_RANGE);
        return USNIC_DROP_ACK_RANGE;
    }
    c->rel->tx.allow = hdr->allow; /* as current as the ACK it came with */
    if (released > 0) {
        ops->acked(t, c->ep, released);
    }
    return USNIC_PKT_OK;
}

/* A validated, new chunk of a fragment into its reassembly buffer (and
 * the transport told of it): USNIC_PKT_OK, or the reason it does not fit.
 * Nothing is reported dropped here. */
static inline enum usnic_drop_reason usnic_rx_add_chunk(const struct usnic_rx_ops *ops, void *t,
                                                        const struct usnic_rx_conn *c,
                                                        const struct usnic_pkt_view *v,
                                                        const struct usnic_rx_params *p)
{
    const struct usnic_pkt_hdr *h = v->hdr;
    bool deferred_now = false;
    enum usnic_drop_reason why = usnic_reasm_add_defer(
        c->reasm, h->msg_id, v->chunk->msg_len, v->chunk->offset, v->payload, v->payload_len,
        h->tag, p->defer && NULL == p->payload, &deferred_now);

    if (USNIC_PKT_OK != why) {
        return why;
    }
    if (deferred_now) {
        ops->deferred(t, c->ep, c->reasm);
    }
    if (NULL != ops->chunk_added) {
        ops->chunk_added(t, c->ep, v);
    }
    return USNIC_PKT_OK;
}

/* A validated, new PUT chunk written at its place in the target:
 * USNIC_PKT_OK, or the reason its target refuses it (not reported). */
static inline enum usnic_drop_reason usnic_rx_put_chunk(const struct usnic_rx_ops *ops, void *t,
                                                        const struct usnic_rx_conn *c,
                                                        const struct usnic_pkt_view *v)
{
    uint8_t *dest;
    enum usnic_drop_reason why =
        ops->put_resolve(t, v->put->reg_key, v->put->reg_offset, v->chunk->msg_len, &dest);

    if (USNIC_PKT_OK == why) {
        ops->put_write(t, c->ep, dest + v->chunk->offset, v);
    }
    return why;
}

/* The same PUT target (two compares: a call to memcmp for 16 bytes cost
 * the receiver of an MTU 1500 stream 9% of its time, per datagram) */
static inline bool usnic_rx_put_same(const struct usnic_put_hdr *a, const struct usnic_put_hdr *b)
{
    return a->reg_key == b->reg_key && a->reg_offset == b->reg_offset;
}

/* A chunk that follows the predicted one in every respect
 * (struct usnic_rx_predict)? */
static inline bool usnic_rx_predicted(const struct usnic_rx_predict *pr, const uint8_t *buf,
                                      size_t len, const struct usnic_rx_params *p)
{
    const struct usnic_pkt_hdr *h = (const struct usnic_pkt_hdr *) buf;
    const struct usnic_chunk_hdr *ch = (const struct usnic_chunk_hdr *) (h + 1);
    const struct usnic_rel *rel = pr->c.rel;

    if (len != pr->len || p->src != pr->src || p->lane != pr->hdr.lane ||
        /* version, type, flags, tag, payload_len, sender_key, src_module */
        0 != memcmp(h, &pr->hdr, offsetof(struct usnic_pkt_hdr, seq)) ||
        h->seq != pr->hdr.seq + 1u || h->msg_id != pr->hdr.msg_id || h->lane != pr->hdr.lane ||
        0 != h->reserved || ch->msg_len != pr->msg_len || ch->offset != pr->next_off ||
        ch->offset + h->payload_len >= ch->msg_len ||
        (USNIC_PKT_PUT == h->type &&
         !usnic_rx_put_same((const struct usnic_put_hdr *) (ch + 1), &pr->put))) {
        return false;
    }
    if (h->seq != rel->rx.expected || usnic_seq_diff(rel->rx.expected, rel->rx.highest) != 1) {
        return false;
    }
    if (0 == pr->c.auth) {
        return true;
    }
    /* auth header: the tag computed ahead, else computed now (as the
     * full path would) */
    if (NULL != p->mac_key && p->mac_key == pr->c.key) {
        return usnic_sip_tag_equal(h->mac, p->mac_tag);
    }
    return USNIC_PKT_OK ==
           usnic_pkt_verify(buf, pr->hlen + h->payload_len, pr->c.key, pr->c.memo, 1, false);
}

/* The chunk at buf follows the predicted one (usnic_rx_predicted()): do
 * what the full path would do with it. */
static inline enum usnic_drop_reason usnic_rx_take_predicted(const struct usnic_rx_ops *ops,
                                                             void *t, const uint8_t *buf,
                                                             const struct usnic_rx_params *p)
{
    struct usnic_rx_predict *pr = p->predict;
    const struct usnic_rx_conn *c = &pr->c;
    const struct usnic_pkt_hdr *h = (const struct usnic_pkt_hdr *) buf;
    const struct usnic_chunk_hdr *ch = (const struct usnic_chunk_hdr *) (h + 1);
    struct usnic_pkt_view v;
    enum usnic_drop_reason why;

    (void) usnic_rel_rx_fresh(c->rel, false, p->lane, h->ts, p->now);
    if (h->flags & USNIC_PKT_FLAG_ACK) {
        why = usnic_rx_data_ack(ops, t, c, h, p->now);
        if (USNIC_PKT_OK != why) {
            pr->ok = false;
            return why;
        }
    }
    v.hdr = h;
    v.chunk = ch;
    v.put = (USNIC_PKT_PUT == h->type) ? (const struct usnic_put_hdr *) (ch + 1) : NULL;
    v.sack = NULL;
    v.sack_words = 0;
    v.payload = (NULL != p->payload) ? p->payload : buf + pr->hlen;
    v.payload_len = h->payload_len;
    v.len = pr->hlen + h->payload_len;
    why =
        (NULL != v.put) ? usnic_rx_put_chunk(ops, t, c, &v) : usnic_rx_add_chunk(ops, t, c, &v, p);
    if (USNIC_PKT_OK != why) {
        pr->ok = false;
        ops->drop(t, c->ep, why);
        return why;
    }
    usnic_rx_commit(ops, t, c, &v, p->now);
    pr->hdr.seq = h->seq;
    pr->next_off = ch->offset + h->payload_len;
    pr->hits++;
    return USNIC_PKT_OK;
}

/* A chunk the full path accepted, not its fragment's last: predict the
 * next (struct usnic_rx_predict). */
static inline void usnic_rx_predict_set(struct usnic_rx_predict *pr, const struct usnic_rx_conn *c,
                                        const struct usnic_pkt_view *v, size_t len,
                                        const struct usnic_rx_params *p)
{
    const struct usnic_pkt_hdr *h = v->hdr;

    /* (a payload apart from its header only where neither CRC nor MAC
     * covers it: the full path dropped it otherwise) */
    if (!c->predict || c->crc || c->auth > 1 || 0 != (h->flags & USNIC_PKT_FLAG_ACK_REQ) ||
        v->chunk->offset + v->payload_len >= v->chunk->msg_len) {
        return;
    }
    pr->c = *c;
    memcpy(&pr->hdr, h, sizeof(pr->hdr));
    if (NULL != v->put) {
        memcpy(&pr->put, v->put, sizeof(pr->put));
    }
    pr->hlen = (uint32_t) usnic_pkt_hdr_len(h->type);
    pr->msg_len = v->chunk->msg_len;
    pr->next_off = v->chunk->offset + v->payload_len;
    pr->src = p->src;
    pr->len = (uint32_t) len;
    pr->ok = true;
}

static inline enum usnic_drop_reason usnic_rx_dispatch(const struct usnic_rx_ops *ops, void *t,
                                                       const void *buf, size_t len,
                                                       const struct usnic_rx_params *p);

/* A PART that passed checks 1-3: join it, and once its datagram is whole,
 * take that through the whole dispatch. */
static inline enum usnic_drop_reason usnic_rx_part(const struct usnic_rx_ops *ops, void *t,
                                                   struct usnic_rx_conn *c,
                                                   const struct usnic_pkt_view *v,
                                                   const struct usnic_rx_params *p)
{
    const struct usnic_pkt_hdr *hdr = v->hdr;
    enum usnic_rx_verdict verdict;
    enum usnic_drop_reason why;
    struct usnic_rx_params whole_p;
    const uint8_t *whole;

    if (NULL == c->parts || NULL != p->payload) {
        ops->drop(t, c->ep, USNIC_DROP_TYPE);
        return USNIC_DROP_TYPE;
    }
    verdict = usnic_rel_rx_check(c->rel, hdr->seq);
    if (USNIC_RX_BEYOND == verdict) {
        c->rel->stats.rx_beyond++;
        ops->drop(t, c->ep, USNIC_DROP_WINDOW);
        return USNIC_DROP_WINDOW;
    }
    if (USNIC_RX_DUP == verdict) {
        /* its datagram arrived: sent again because our ACK was lost, or
         * a copy.  Every part of one copy has the same stamp, so only its
         * first to arrive is fresh and asks for an ACK. */
        if (usnic_rel_rx_fresh(c->rel, false, p->lane, hdr->ts, p->now)) {
            usnic_rel_rx_duplicate(c->rel, hdr->ts);
            ops->ack_schedule(t, c->ep);
        } else {
            c->rel->stats.rx_copies++;
        }
        ops->drop(t, c->ep, USNIC_DROP_DUPLICATE);
        return USNIC_DROP_DUPLICATE;
    }
    why = usnic_parts_add(c->parts, hdr->seq, v->chunk->msg_len, v->chunk->offset, v->payload,
                          v->payload_len, &whole);
    if (USNIC_PKT_OK != why) {
        ops->drop(t, c->ep, why);
        return why;
    }
    if (NULL == whole) {
        return USNIC_PKT_OK; /* more parts to come */
    }
    /* The sender cuts its datagrams to us smaller from now on (its path
     * shrank: btl_usnic_path.c), the rest of a fragment under way too: its
     * chunks are no longer all of the size the table knew. */
    c->reasm->chunk = 0;
    if (USNIC_PKT_PART == whole[1]) {
        ops->drop(t, c->ep, USNIC_DROP_TYPE); /* parts of parts: never sent */
        return USNIC_DROP_TYPE;
    }
    whole_p = *p;
    whole_p.payload = NULL;
    whole_p.defer = false; /* the table's buffer is used again by the next part */
    whole_p.mac_key = NULL;
    whole_p.predict = NULL;
    return usnic_rx_dispatch(ops, t, whole, (size_t) v->chunk->msg_len, &whole_p);
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
    enum usnic_rx_verdict verdict;
    bool fresh;

    if (NULL != p->predict) {
        if (p->predict->ok && usnic_rx_predicted(p->predict, buf, len, p)) {
            return usnic_rx_take_predicted(ops, t, buf, p);
        }
        p->predict->ok = false;
    }
    why = usnic_pkt_parse(buf, len, p->max_msg_len, &v);
    if (USNIC_PKT_OK != why) {
        ops->drop(t, NULL, why);
        return why;
    }
    hdr = v.hdr;
    if (NULL != p->payload) {
        v.payload = p->payload;
    }
    c.memo = NULL; /* unless the lookup has one */
    c.predict = false;
    c.parts = NULL;
    why = ops->lookup(t, hdr, &c);
    if (USNIC_PKT_OK != why) {
        ops->drop(t, NULL, why);
        return why;
    }
    if (NULL != p->payload && (c.crc || 2 == c.auth)) {
        /* the CRC or MAC covers a payload that is not in buf: never so
         * (the kernel backend receives directly only without them) */
        ops->drop(t, c.ep, USNIC_DROP_AUTH);
        return USNIC_DROP_AUTH;
    }
    if (NULL != p->mac_key && p->mac_key == c.key && 1 == c.auth && !c.crc) {
        why = usnic_sip_tag_equal(hdr->mac, p->mac_tag) ? USNIC_PKT_OK : USNIC_DROP_AUTH;
        if (USNIC_PKT_OK != why) {
            ops->drop(t, c.ep, why);
            return why;
        }
    } else if (c.crc || 0 != c.auth) {
        /* (not the padding: the MAC and CRC end with the payload) */
        why = usnic_pkt_verify((const uint8_t *) buf, v.len, c.key, c.memo, c.auth, c.crc);
        if (USNIC_PKT_OK != why) {
            ops->drop(t, c.ep, why);
            return why;
        }
    }
    if (hdr->lane != p->lane) {
        /* sent to the peer's other socket (the MAC vouches for the lane):
         * redirected or replayed here, where this lane's timestamps could
         * not tell it for a copy */
        ops->drop(t, c.ep, USNIC_DROP_ADDRESS);
        return USNIC_DROP_ADDRESS;
    }

    if (USNIC_PKT_PART == hdr->type) {
        return usnic_rx_part(ops, t, &c, &v, p);
    }

    if (USNIC_PKT_ACK == hdr->type) {
        int released;

        if (!usnic_rel_rx_fresh(c.rel, true, p->lane, hdr->ts, p->now)) {
            /* not newer than the last ACK packet of its lane: a copy, or a
             * replay; what it says is old news, and nothing is done with it */
            c.rel->stats.ack_copies++;
            ops->ack_rx(t, c.ep, false);
            return USNIC_PKT_OK;
        }
        released = usnic_rel_tx_ack_sack(c.rel, hdr->ack_seq, true, v.sack, v.sack_words,
                                         0 != (hdr->flags & USNIC_PKT_FLAG_SACK_MORE), hdr->ts_echo,
                                         p->now);
        if (released < 0) {
            ops->drop(t, c.ep, USNIC_DROP_ACK_RANGE);
            return USNIC_DROP_ACK_RANGE;
        }
        c.rel->tx.allow = hdr->allow;
        if (released > 0) {
            ops->acked(t, c.ep, released);
        }
        ops->ack_rx(t, c.ep, true);
        if (hdr->flags & USNIC_PKT_FLAG_ACK_REQ) {
            /* a ping: answer at once, echoing its stamp */
            usnic_rel_rx_ping(c.rel, hdr->ts);
            ops->ack_schedule(t, c.ep);
        }
        return USNIC_PKT_OK;
    }

    verdict = usnic_rel_rx_check(c.rel, hdr->seq);
    if (USNIC_RX_BEYOND == verdict) {
        c.rel->stats.rx_beyond++;
        ops->drop(t, c.ep, USNIC_DROP_WINDOW);
        return USNIC_DROP_WINDOW;
    }
    fresh = usnic_rel_rx_fresh(c.rel, false, p->lane, hdr->ts, p->now);
    if (USNIC_RX_DUP == verdict && !fresh) {
        c.rel->stats.rx_copies++; /* the network's copy, or a replay: no news */
        ops->drop(t, c.ep, USNIC_DROP_DUPLICATE);
        return USNIC_DROP_DUPLICATE;
    }
    /* a new packet, or one the peer sent again: its ACK is current */
    if (hdr->flags & USNIC_PKT_FLAG_ACK) {
        why = usnic_rx_data_ack(ops, t, &c, hdr, p->now);
        if (USNIC_PKT_OK != why) {
            return why;
        }
    }
    if (USNIC_RX_DUP == verdict) {
        /* sent again after the original: our ACK was lost */
        usnic_rel_rx_duplicate(c.rel, hdr->ts);
        ops->ack_schedule(t, c.ep);
        ops->drop(t, c.ep, USNIC_DROP_DUPLICATE);
        return USNIC_DROP_DUPLICATE;
    }
    if (hdr->flags & USNIC_PKT_FLAG_ACK_REQ) {
        c.rel->rx.ack_now = true;
        ops->ack_schedule(t, c.ep);
    }

    switch (hdr->type) {
    case USNIC_PKT_FRAG:
    case USNIC_PKT_CHUNK: {
        bool whole = (USNIC_PKT_FRAG == hdr->type);
        uint64_t msg_len = whole ? v.payload_len : v.chunk->msg_len;

        if (!ops->tag_ok(t, hdr->tag)) {
            why = USNIC_DROP_TAG;
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
                        : usnic_rx_add_chunk(ops, t, &c, &v, p);
            if (USNIC_PKT_OK != why) {
                break;
            }
            usnic_rx_commit(ops, t, &c, &v, p->now);
        }
        usnic_rx_drain(ops, t, &c);
        if (!whole && NULL != p->predict) {
            usnic_rx_predict_set(p->predict, &c, &v, len, p);
        }
        return USNIC_PKT_OK;
    }

    case USNIC_PKT_PUT: {
        why = usnic_rx_put_chunk(ops, t, &c, &v);
        if (USNIC_PKT_OK != why) {
            break;
        }
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
        if (NULL != p->predict) {
            usnic_rx_predict_set(p->predict, &c, &v, len, p);
        }
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
