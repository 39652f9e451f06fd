/*
 * The reliability core (rules in btl_usnic_rel.h).  No I/O, no clocks of its
 * own, no Open MPI: everything outside goes through rel->ops.
 */
#include <stdlib.h>
#include <string.h>

#include "btl_usnic_rel.h"

static uint32_t round_up_pow2(uint32_t v)
{
    uint32_t p = 1;
    while (p < v && p < (1u << 30)) {
        p <<= 1;
    }
    return p;
}

int usnic_rel_init(struct usnic_rel *rel, const struct usnic_rel_ops *ops, void *ctx,
                   uint32_t tx_win, uint32_t rx_win, usnic_seq_t tx_isn, usnic_seq_t rx_isn,
                   uint32_t fast_retrans_dups)
{
    memset(rel, 0, sizeof(*rel));
    rel->ops = ops;
    rel->ctx = ctx;

    rel->tx.win_size = round_up_pow2(tx_win ? tx_win : 1);
    rel->tx.win = calloc(rel->tx.win_size, sizeof(*rel->tx.win));
    rel->tx.lane = calloc(rel->tx.win_size, 1);
    rel->tx.next = tx_isn;
    rel->tx.acked = tx_isn - 1u;
    rel->tx.fast_retrans_dups = fast_retrans_dups;

    rel->rx.win_size = round_up_pow2(rx_win ? rx_win : 1);
    rel->rx.seen = calloc(rel->rx.win_size, 1);
    rel->rx.expected = rx_isn;
    rel->rx.highest = rx_isn - 1u;
    rel->ack_every = rel->tx.win_size / 4 ? rel->tx.win_size / 4 : 1;

    if (NULL == rel->tx.win || NULL == rel->tx.lane || NULL == rel->rx.seen) {
        usnic_rel_fini(rel);
        return -1;
    }
    return 0;
}

void usnic_rel_fini(struct usnic_rel *rel)
{
    free(rel->tx.win);
    free(rel->tx.lane);
    rel->tx.lane = NULL;
    free(rel->rx.seen);
    rel->tx.win = NULL;
    rel->rx.seen = NULL;
}

static inline struct usnic_rel_seg **tx_slot(struct usnic_rel *rel, usnic_seq_t seq)
{
    return &rel->tx.win[seq & (rel->tx.win_size - 1u)];
}

usnic_seq_t usnic_rel_tx_push(struct usnic_rel *rel, struct usnic_rel_seg *seg)
{
    usnic_seq_t seq = rel->tx.next++;

    seg->seq = seq;
    seg->state = USNIC_REL_SEG_IN_WINDOW;
    seg->sends = 0;
    seg->waits = 0;
    *tx_slot(rel, seq) = seg;
    rel->tx.lane[seq & (rel->tx.win_size - 1u)] = seg->lane;
    return seq;
}

void usnic_rel_tx_sent(struct usnic_rel *rel, struct usnic_rel_seg *seg)
{
    seg->sends++;
    seg->waits = 0;
    seg->state &= ~USNIC_REL_SEG_RESEND;
    if (!(seg->state & USNIC_REL_SEG_TIMER)) {
        seg->state |= USNIC_REL_SEG_TIMER;
        rel->ops->timer_arm(rel, seg);
    }
}

static void queue_resend(struct usnic_rel *rel, struct usnic_rel_seg *seg)
{
    if (seg->state & USNIC_REL_SEG_TIMER) {
        seg->state &= ~USNIC_REL_SEG_TIMER;
        rel->ops->timer_cancel(rel, seg);
    }
    seg->state |= USNIC_REL_SEG_RESEND;
    rel->ops->resend(rel, seg);
}

/* Resend the oldest unacknowledged segment. */
static void resend_oldest(struct usnic_rel *rel, struct usnic_rel_seg *seg)
{
    if (!(seg->state & USNIC_REL_SEG_RESEND)) {
        queue_resend(rel, seg);
    }
}

static void release(struct usnic_rel *rel, struct usnic_rel_seg *seg)
{
    if (seg->state & USNIC_REL_SEG_TIMER) {
        rel->ops->timer_cancel(rel, seg);
    }
    if (seg->state & USNIC_REL_SEG_RESEND) {
        rel->ops->resend_cancel(rel, seg);
    }
    seg->state = 0;
    rel->ops->acked(rel, seg);
}

int usnic_rel_tx_ack(struct usnic_rel *rel, usnic_seq_t ack, bool explicit_ack)
{
    int released = 0;

    if (usnic_seq_ge(ack, rel->tx.next)) {
        rel->stats.bad_acks++;
        return -1;
    }
    if (usnic_seq_le(ack, rel->tx.acked)) {
        /* Old or repeated.  Only a repeat of the current edge, sent as an
         * explicit ACK while data is outstanding, says "I am missing
         * acked+1". */
        if (explicit_ack && ack == rel->tx.acked && usnic_rel_tx_inflight(rel) > 0) {
            rel->stats.dup_acks++;
            if (++rel->tx.dup_acks == rel->tx.fast_retrans_dups) {
                struct usnic_rel_seg *seg = *tx_slot(rel, rel->tx.acked + 1u);
                if (NULL != seg && !(seg->state & USNIC_REL_SEG_RESEND)) {
                    rel->stats.retrans_fast++;
                    resend_oldest(rel, seg);
                }
            }
        }
        return 0;
    }

    while (usnic_seq_lt(rel->tx.acked, ack)) {
        struct usnic_rel_seg **slot;
        rel->tx.acked++;
        slot = tx_slot(rel, rel->tx.acked);
        if (NULL != *slot) {
            struct usnic_rel_seg *seg = *slot;
            *slot = NULL;
            release(rel, seg);
            released++;
        }
    }
    rel->tx.dup_acks = 0;
    return released;
}

int usnic_rel_tx_sack(struct usnic_rel *rel, usnic_seq_t ack, uint64_t bits)
{
    int released = 0;
    int top;

    if (0 == bits || usnic_seq_lt(ack, rel->tx.acked)) {
        return 0; /* stale: the cumulative ACK has moved past it */
    }
    /* release what arrived */
    for (int i = 0; i < 64; i++) {
        usnic_seq_t s = ack + 2u + (uint32_t) i;
        struct usnic_rel_seg **slot;
        if (!(bits & ((uint64_t) 1 << i))) {
            continue;
        }
        if (usnic_seq_ge(s, rel->tx.next) || usnic_seq_le(s, rel->tx.acked)) {
            break; /* never sent (bad SACK) or already acked */
        }
        slot = tx_slot(rel, s);
        if (NULL != *slot) {
            struct usnic_rel_seg *seg = *slot;
            *slot = NULL;
            release(rel, seg);
            rel->stats.sacked++;
            released++;
        }
    }
    /* resend, once, what is missing with enough reported after it */
    top = 63 - __builtin_clzll(bits); /* highest reported bit */
    for (int i = -1; i < top; i++) {
        usnic_seq_t s = ack + 2u + (uint32_t) i; /* i == -1: ack + 1, the gap itself */
        struct usnic_rel_seg *seg;
        int after;
        if (i >= 0 && (bits & ((uint64_t) 1 << i))) {
            continue;
        }
        if (usnic_seq_le(s, rel->tx.acked) || usnic_seq_ge(s, rel->tx.next)) {
            continue;
        }
        if (__builtin_popcountll(bits >> (i + 1)) < USNIC_REL_SACK_DUPS) {
            break;
        }
        after = 0;
        for (int j = i + 1; j <= top; j++) {
            usnic_seq_t t = ack + 2u + (uint32_t) j;
            if ((bits & ((uint64_t) 1 << j)) && rel->tx.lane[t & (rel->tx.win_size - 1u)] ==
                                                    rel->tx.lane[s & (rel->tx.win_size - 1u)]) {
                after++;
            }
        }
        if (after < USNIC_REL_SACK_DUPS) {
            continue; /* reported ones are on another lane: maybe only overtaken */
        }
        seg = *tx_slot(rel, s);
        if (NULL != seg && !(seg->state & (USNIC_REL_SEG_RESEND | USNIC_REL_SEG_SACK_RESENT))) {
            seg->state |= USNIC_REL_SEG_SACK_RESENT;
            rel->stats.retrans_sack++;
            queue_resend(rel, seg);
        }
    }
    return released;
}

void usnic_rel_tx_send_failed(struct usnic_rel *rel, struct usnic_rel_seg *seg)
{
    if (!(seg->state & USNIC_REL_SEG_RESEND)) {
        queue_resend(rel, seg);
    }
}

/* Timer expiries to wait before resending a segment sent `sends` times. */
static inline uint32_t backoff_waits(uint32_t sends)
{
    uint32_t w = 1;

    while (sends > 1 && w < USNIC_REL_BACKOFF_MAX) {
        w <<= 1;
        sends--;
    }
    return w;
}

void usnic_rel_tx_timeout(struct usnic_rel *rel, struct usnic_rel_seg *seg)
{
    if (!(seg->state & USNIC_REL_SEG_IN_WINDOW)) {
        return;
    }
    seg->state &= ~USNIC_REL_SEG_TIMER;
    if (seg->state & USNIC_REL_SEG_RESEND) {
        return;
    }
    if (seg != usnic_rel_tx_oldest(rel)) {
        /* not the oldest: it may well have arrived; wait for the ACKs */
        rel->stats.timer_rearms++;
        seg->state |= USNIC_REL_SEG_TIMER;
        rel->ops->timer_arm(rel, seg);
        return;
    }
    if (++seg->waits < backoff_waits(seg->sends)) {
        /* backing off: sent several times already, wait longer */
        rel->stats.timer_backoffs++;
        seg->state |= USNIC_REL_SEG_TIMER;
        rel->ops->timer_arm(rel, seg);
        return;
    }
    rel->stats.retrans_timeout++;
    resend_oldest(rel, seg);
}

struct usnic_rel_seg *usnic_rel_tx_oldest(const struct usnic_rel *rel)
{
    /* the oldest still held: slots a SACK released are skipped */
    for (usnic_seq_t s = rel->tx.acked + 1u; usnic_seq_lt(s, rel->tx.next); s++) {
        struct usnic_rel_seg *seg = rel->tx.win[s & (rel->tx.win_size - 1u)];
        if (NULL != seg) {
            return seg;
        }
    }
    return NULL;
}

enum usnic_rx_verdict usnic_rel_rx_check(const struct usnic_rel *rel, usnic_seq_t seq)
{
    int32_t delta = usnic_seq_diff(seq, rel->rx.expected);

    if (delta < 0) {
        return USNIC_RX_DUP;
    }
    if ((uint32_t) delta >= rel->rx.win_size) {
        return USNIC_RX_BEYOND;
    }
    if (rel->rx.seen[seq & (rel->rx.win_size - 1u)]) {
        return USNIC_RX_DUP;
    }
    return USNIC_RX_NEW;
}

void usnic_rel_rx_commit(struct usnic_rel *rel, usnic_seq_t seq, uint64_t now)
{
    uint32_t mask = rel->rx.win_size - 1u;

    if (seq != rel->rx.expected) {
        rel->rx.ack_now = true; /* a gap: tell the sender at once */
    }
    if (usnic_seq_gt(seq, rel->rx.highest)) {
        rel->rx.highest = seq;
    }
    rel->rx.seen[seq & mask] = 1;
    /* Slide past the in-order prefix; slots behind expected are cleared so
     * they can describe expected+win_size.. later. */
    while (rel->rx.seen[rel->rx.expected & mask]) {
        rel->rx.seen[rel->rx.expected & mask] = 0;
        rel->rx.expected++;
    }
    rel->rx.unacked++;
    if (!rel->rx.ack_owed) {
        rel->rx.ack_owed = true;
        rel->rx.ack_owed_since = now;
    }
}

uint64_t usnic_rel_rx_sack_bits(const struct usnic_rel *rel)
{
    uint32_t mask = rel->rx.win_size - 1u;
    uint64_t bits = 0;
    int32_t span = usnic_seq_diff(rel->rx.highest, rel->rx.expected);

    /* bit i <-> expected + 1 + i, i.e. (ack = expected - 1) + 2 + i */
    for (int32_t i = 0; i < span && i < 64; i++) {
        if (rel->rx.seen[(rel->rx.expected + 1u + (uint32_t) i) & mask]) {
            bits |= (uint64_t) 1 << i;
        }
    }
    return bits;
}

void usnic_rel_rx_duplicate(struct usnic_rel *rel)
{
    rel->stats.rx_dup++;
    rel->rx.ack_now = true;
}
