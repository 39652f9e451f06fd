/*
 * The reliability core (rules in btl_usnic_rel.h).  No I/O, no clock of its
 * own, no Open MPI: everything outside goes through rel->ops.
 */
#include <stdlib.h>
#include <string.h>

#include "btl_usnic_rel.h"

/* a branch hint (the core does not include Open MPI) */
#define USNIC_REL_LIKELY(x) __builtin_expect(!!(x), 1)

static uint64_t clamp_rto(const struct usnic_rel *rel, uint64_t rto)
{
    if (rto < rel->timing.rto_min) {
        return rel->timing.rto_min;
    }
    return (rto > rel->timing.rto_max) ? rel->timing.rto_max : rto;
}

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
                   uint32_t fast_retrans_dups, const struct usnic_rel_timing *timing)
{
    memset(rel, 0, sizeof(*rel));
    rel->ops = ops;
    rel->ctx = ctx;
    rel->timing = *timing;
    if (rel->timing.rto_min < 1) {
        rel->timing.rto_min = 1;
    }
    if (rel->timing.rto_max < rel->timing.rto_min) {
        rel->timing.rto_max = rel->timing.rto_min;
    }

    rel->tx.win_size = round_up_pow2(tx_win ? tx_win : 1);
    rel->tx.win = calloc(rel->tx.win_size, sizeof(*rel->tx.win));
    rel->tx.next = tx_isn;
    rel->tx.acked = tx_isn - 1u;
    rel->tx.fast_retrans_dups = fast_retrans_dups;
    rel->tx.rto = clamp_rto(rel, timing->rto_init);
    rel->tx.rack.end = tx_isn;

    rel->rx.win_size = round_up_pow2(rx_win ? rx_win : 1);
    rel->rx.seen = calloc(rel->rx.win_size, 1);
    rel->rx.expected = rx_isn;
    rel->rx.highest = rx_isn - 1u;
    rel->ack_every = rel->tx.win_size / 4 ? rel->tx.win_size / 4 : 1;

    if (NULL == rel->tx.win || NULL == rel->rx.seen) {
        usnic_rel_fini(rel);
        return -1;
    }
    return 0;
}

void usnic_rel_fini(struct usnic_rel *rel)
{
    free(rel->tx.win);
    free(rel->rx.seen);
    rel->tx.win = NULL;
    rel->rx.seen = NULL;
}

static inline struct usnic_rel_seg **tx_slot(struct usnic_rel *rel, usnic_seq_t seq)
{
    return &rel->tx.win[seq & (rel->tx.win_size - 1u)];
}

/* Segments this far ahead of the one being acknowledged are prefetched. */
#define ACK_PREFETCH_AHEAD 4u

/* Prefetch the transport's object of the segment at seq (in the window). */
static inline void prefetch_seg(struct usnic_rel *rel, usnic_seq_t seq)
{
    const struct usnic_rel_seg *seg = *tx_slot(rel, seq);

    if (NULL != seg) {
        const uint8_t *base = (const uint8_t *) seg - rel->ops->seg_lead;
        size_t n = (0 != rel->ops->seg_bytes) ? rel->ops->seg_bytes : sizeof(*seg);
        for (size_t off = 0; off < n; off += 64) {
            __builtin_prefetch(base + off, 1);
        }
    }
}

static inline unsigned lane_of(const struct usnic_rel_seg *seg)
{
    return seg->lane % USNIC_REL_LANES;
}

static inline uint64_t min_deadline(uint64_t a, uint64_t b)
{
    return (0 == a) ? b : (0 == b || a < b) ? a : b;
}

/* ---- the timer ---- */

uint64_t usnic_rel_tx_rto(const struct usnic_rel *rel)
{
    uint64_t rto = rel->tx.rto;

    if (USNIC_REL_LIKELY(0 == rel->tx.backoff)) {
        return rto; /* already within [rto_min, rto_max] */
    }
    for (uint32_t i = 0; i < rel->tx.backoff && rto < rel->timing.rto_max; i++) {
        rto <<= 1;
    }
    return (rto < rel->timing.rto_max) ? rto : rel->timing.rto_max;
}

/* Tell the transport when the timer must fire next, if that changed. */
static void timer_update(struct usnic_rel *rel)
{
    uint64_t d = min_deadline(rel->tx.rto_deadline, rel->tx.rack.deadline);

    if (d != rel->tx.deadline) {
        rel->tx.deadline = d;
        rel->ops->timer_set(rel, d);
    }
}

/* Probe timeout: two round trips after the tail went out (RFC 8985), or
 * SRTT + 4 RTTVAR if round trips vary more than that (as QUIC's PTO: a
 * peer that is often slow to answer gets fewer needless probes), plus the
 * peer's ACK delay; never beyond the RTO.  Only with a measured round
 * trip. */
static uint64_t probe_timeout(const struct usnic_rel *rel, uint64_t rto)
{
    uint64_t pto = 2 * rel->tx.srtt, var = rel->tx.srtt + 4 * rel->tx.rttvar;

    pto = ((var > pto) ? var : pto) + rel->timing.ack_delay;
    return (pto < rto) ? pto : rto;
}

/* (Re)start the probe or retransmission timeout from now. */
static void timer_restart(struct usnic_rel *rel, uint64_t now)
{
    uint64_t rto;

    if (0 == usnic_rel_tx_inflight(rel)) {
        /* nothing outstanding (the common end of a ping-pong's ACK) */
        rel->tx.rto_deadline = 0;
        rel->tx.pto_armed = false;
        rel->tx.rack.deadline = 0;
        if (0 != rel->tx.deadline) {
            rel->tx.deadline = 0;
            rel->ops->timer_set(rel, 0);
        }
        return;
    }
    rto = usnic_rel_tx_rto(rel);
    if (rel->timing.tlp && 0 != rel->tx.srtt && !rel->tx.probe_out && 0 == rel->tx.backoff) {
        rel->tx.pto_armed = true;
        rel->tx.rto_deadline = now + rel->tx.pto;
    } else {
        rel->tx.pto_armed = false;
        rel->tx.rto_deadline = now + rto;
    }
    timer_update(rel);
}

/* ---- sender ---- */

usnic_seq_t usnic_rel_tx_push(struct usnic_rel *rel, struct usnic_rel_seg *seg)
{
    usnic_seq_t seq = rel->tx.next++;

    seg->seq = seq;
    seg->state = USNIC_REL_SEG_IN_WINDOW;
    seg->sends = 0;
    seg->xmit_ts = 0;
    *tx_slot(rel, seq) = seg;
    return seq;
}

void usnic_rel_tx_sent(struct usnic_rel *rel, struct usnic_rel_seg *seg, uint64_t now)
{
    seg->sends++;
    seg->xmit_ts = now;
    seg->state &= ~USNIC_REL_SEG_RESEND;
    /* RFC 6298: start the timer if it is not running; RFC 8985: restart
     * the probe timeout after new data (the tail moved); and give a resent
     * oldest segment a whole timeout to be acknowledged (it may wait behind
     * everything queued after its first copy) */
    if (0 == rel->tx.rto_deadline || (1 == seg->sends && rel->tx.pto_armed) ||
        (seg->sends > 1 && seg == usnic_rel_tx_oldest(rel))) {
        timer_restart(rel, now);
    }
}

static void queue_resend(struct usnic_rel *rel, struct usnic_rel_seg *seg)
{
    seg->state |= USNIC_REL_SEG_RESEND;
    rel->ops->resend(rel, seg);
}

/* Send a ping on the lane of seg: its answer tells what arrived before it. */
static void send_ping(struct usnic_rel *rel, const struct usnic_rel_seg *seg, uint64_t now)
{
    rel->tx.ping.waiting = true;
    rel->tx.ping.lane = (uint8_t) lane_of(seg);
    rel->tx.ping.ts = usnic_rel_ts(now);
    rel->tx.ping.sent_at = now;
    rel->tx.ping.next = rel->tx.next;
    rel->ops->probe(rel, rel->tx.ping.lane, rel->tx.ping.ts);
}

static void release(struct usnic_rel *rel, struct usnic_rel_seg *seg)
{
    if (seg->state & USNIC_REL_SEG_RESEND) {
        rel->ops->resend_cancel(rel, seg);
    }
    seg->state = 0;
    rel->ops->acked(rel, seg);
}

/* A round-trip sample (RFC 6298, section 2); progress: it came with data
 * the peer got, and only that ends the backoff (as TCP keeps a backed-off
 * timeout until new data is acknowledged, RFC 6298 section 5). */
static void rtt_sample(struct usnic_rel *rel, uint64_t r, bool progress)
{
    uint64_t var4;

    if (0 == r) {
        r = 1;
    }
    if (0 == rel->tx.srtt) {
        rel->tx.srtt = r;
        rel->tx.rttvar = r / 2;
        rel->tx.min_rtt = r;
    } else {
        uint64_t delta = (rel->tx.srtt > r) ? rel->tx.srtt - r : r - rel->tx.srtt;
        rel->tx.rttvar = (3 * rel->tx.rttvar + delta) / 4;
        rel->tx.srtt = (7 * rel->tx.srtt + r) / 8;
        if (r < rel->tx.min_rtt) {
            rel->tx.min_rtt = r;
        }
    }
    var4 = 4 * rel->tx.rttvar;
    rel->tx.rto = clamp_rto(rel, rel->tx.srtt + (var4 ? var4 : 1));
    rel->tx.pto = probe_timeout(rel, rel->tx.rto);
    if (progress) {
        rel->tx.backoff = 0;
    }
    rel->stats.rtt_samples++;
}

/*
 * Bookkeeping for a segment the peer reported (ACK or SACK), before it is
 * released: the newest send the loss detection may compare others with,
 * and the round trip that send took.
 */
static void note_delivered(struct usnic_rel *rel, const struct usnic_rel_seg *seg, uint64_t now)
{
    uint64_t rtt = now - seg->xmit_ts;
    unsigned lane = lane_of(seg);

    if (0 == seg->sends) {
        return; /* it never left (its post failed): nothing to learn */
    }
    /* A resent segment's ACK may answer either copy.  RFC 8985 takes it
     * only when it cannot be the answer to the last copy (too soon). */
    if (seg->sends > 1 && rtt < rel->tx.min_rtt) {
        return;
    }
    if (seg->xmit_ts >= rel->tx.rack.xmit_ts[lane]) {
        rel->tx.rack.xmit_ts[lane] = seg->xmit_ts;
        rel->tx.rack.rtt = rtt;
    }
    if (usnic_seq_gt(seg->seq + 1u, rel->tx.rack.end)) {
        rel->tx.rack.end = seg->seq + 1u;
    }
}

/*
 * RACK: resend what was sent before a segment of its lane that the peer
 * has, once it has been out longer than the last round trip plus the
 * reordering allowance; arm the timer for the rest.
 */
static void detect_losses(struct usnic_rel *rel, uint64_t now)
{
    uint64_t reo = rel->tx.min_rtt / 4;

    rel->tx.rack.deadline = 0;
    for (usnic_seq_t s = rel->tx.acked + 1u; usnic_seq_lt(s, rel->tx.rack.end); s++) {
        struct usnic_rel_seg *seg = *tx_slot(rel, s);
        uint64_t lost_at;

        if (NULL == seg || (seg->state & USNIC_REL_SEG_RESEND) || 0 == seg->sends ||
            seg->xmit_ts >= rel->tx.rack.xmit_ts[lane_of(seg)]) {
            continue; /* gone, queued, or not sent before anything the peer has */
        }
        lost_at = seg->xmit_ts + rel->tx.rack.rtt + reo;
        if (now >= lost_at) {
            rel->stats.retrans_sack++;
            queue_resend(rel, seg);
        } else {
            rel->tx.rack.deadline = min_deadline(rel->tx.rack.deadline, lost_at);
        }
    }
}

/* Release reported segments of a SACK word (bit i: first + i); returns
 * how many, and in *rtt the round trip of the newest of them sent only
 * once (unchanged: none newer than *newest). */
static int sack_release(struct usnic_rel *rel, usnic_seq_t first, uint64_t bits, uint64_t now,
                        uint64_t *newest, uint64_t *rtt)
{
    int released = 0;

    for (int i = 0; i < USNIC_REL_SACK_WORD_BITS && 0 != (bits >> i); i++) {
        usnic_seq_t s = first + (uint32_t) i;
        struct usnic_rel_seg **slot;
        if (!(bits & ((uint64_t) 1 << i))) {
            continue;
        }
        if (usnic_seq_ge(s, rel->tx.next)) {
            break; /* never sent (bad SACK) */
        }
        slot = tx_slot(rel, s);
        if (NULL != *slot) {
            struct usnic_rel_seg *seg = *slot;
            note_delivered(rel, seg, now);
            if (1 == seg->sends && seg->xmit_ts >= *newest) {
                *newest = seg->xmit_ts; /* a receiver reports a hole at once */
                *rtt = now - seg->xmit_ts;
            }
            *slot = NULL;
            release(rel, seg);
            rel->stats.sacked++;
            released++;
        }
    }
    return released;
}

int usnic_rel_tx_ack(struct usnic_rel *rel, usnic_seq_t ack, bool explicit_ack, uint64_t sack_bits,
                     uint32_t ts_echo, uint64_t now)
{
    if (!explicit_ack && 0 == sack_bits && ack == rel->tx.acked &&
        0 == usnic_rel_tx_inflight(rel)) {
        /* a data packet's ACK of what was acknowledged already, with
         * nothing in flight (every datagram of a train after the first
         * carries the same one): nothing to release or measure, and the
         * timers were stopped when the window emptied */
        return 0;
    }
    return usnic_rel_tx_ack_sack(rel, ack, explicit_ack, &sack_bits, 0 != sack_bits ? 1u : 0u,
                                 false, ts_echo, now);
}

int usnic_rel_tx_ack_sack(struct usnic_rel *rel, usnic_seq_t ack, bool explicit_ack,
                          const void *sack, unsigned nwords, bool more, uint32_t ts_echo,
                          uint64_t now)
{
    uint64_t sack_rtt = 0, sack_newest = 0;
    int released = 0;
    bool advanced, answer;

    if (usnic_seq_ge(ack, rel->tx.next)) {
        rel->stats.bad_acks++;
        return -1;
    }
    advanced = usnic_seq_gt(ack, rel->tx.acked);
    /* Only an ACK packet answers our ping: it carries the receiver's whole
     * state (SACK and "more").  A data packet echoes the ping's stamp too,
     * but its cumulative ACK says nothing about what arrived beyond the gap;
     * taken for an answer, it had everything sent before the ping resent. */
    answer = explicit_ack && rel->tx.ping.waiting && 0 != ts_echo && ts_echo == rel->tx.ping.ts;
    if (nwords > USNIC_REL_SACK_WORDS_MAX) {
        nwords = USNIC_REL_SACK_WORDS_MAX; /* the parser allows no more */
    }
    if (!advanced && !answer && explicit_ack && 0 == nwords && ack == rel->tx.acked &&
        usnic_rel_tx_inflight(rel) > 0) {
        /* a repeat of the current edge, sent as an explicit ACK while data
         * is outstanding, says "I am missing acked+1": resend it, once.
         * Only without a SACK bitmap: with one, RACK knows better, lane by
         * lane (counted blindly, a priority-channel packet overtaking a
         * data-channel one resent the slower one: every resend measured
         * without loss was one of those). */
        rel->stats.dup_acks++;
        if (++rel->tx.dup_acks == rel->tx.fast_retrans_dups) {
            struct usnic_rel_seg *seg = *tx_slot(rel, rel->tx.acked + 1u);
            if (NULL != seg && !(seg->state & USNIC_REL_SEG_RESEND) && 1 == seg->sends) {
                rel->stats.retrans_fast++;
                queue_resend(rel, seg);
            }
        }
    }
    while (usnic_seq_lt(rel->tx.acked, ack)) {
        struct usnic_rel_seg **slot;
        if (usnic_seq_lt(rel->tx.acked + ACK_PREFETCH_AHEAD, ack)) {
            prefetch_seg(rel, rel->tx.acked + ACK_PREFETCH_AHEAD + 1u);
        }
        rel->tx.acked++;
        slot = tx_slot(rel, rel->tx.acked);
        if (NULL != *slot) {
            struct usnic_rel_seg *seg = *slot;
            note_delivered(rel, seg, now);
            *slot = NULL;
            release(rel, seg);
            released++;
        }
    }
    /* a bitmap that came with an older edge is stale: the cumulative ACK
     * has moved past the hole it describes */
    if (0 != nwords && usnic_seq_ge(ack, rel->tx.acked)) {
        for (unsigned w = 0; w < nwords; w++) {
            uint64_t bits;
            memcpy(&bits, (const uint8_t *) sack + 8u * w, sizeof(bits));
            released += sack_release(rel, ack + 2u + USNIC_REL_SACK_WORD_BITS * w, bits, now,
                                     &sack_newest, &sack_rtt);
        }
    }
    if (answer) {
        /* our ping arrived: it counts as a delivered packet of its lane,
         * sent after everything before tx.next then */
        unsigned lane = rel->tx.ping.lane % USNIC_REL_LANES;
        uint64_t rtt = now - rel->tx.ping.sent_at;
        rel->tx.ping.waiting = false;
        rel->stats.probes_answered++;
        if (rel->tx.ping.sent_at >= rel->tx.rack.xmit_ts[lane]) {
            rel->tx.rack.xmit_ts[lane] = rel->tx.ping.sent_at;
            rel->tx.rack.rtt = rtt;
        }
        /* Everything of the lane sent before the ping has arrived or is
         * lost, but when the receiver holds more than its SACK could say
         * ("more"), the answer tells which only up to the end of the SACK.
         * Taking the rest for losses resent most of a wide window for every
         * probe (MTU 1500: a 1 MiB message is 744 segments). */
        usnic_seq_t end = rel->tx.ping.next;
        if (more) {
            usnic_seq_t reach = ack + 2u + USNIC_REL_SACK_WORD_BITS * nwords;
            if (usnic_seq_lt(reach, end)) {
                end = reach;
            }
        }
        if (usnic_seq_gt(end, rel->tx.rack.end)) {
            rel->tx.rack.end = end;
        }
        /* An answer that brings nothing new ends no backoff: the peer
         * is there, but what we resend does not reach it (an MTU black
         * hole: small datagrams pass, large ones vanish).  Ending it
         * resent the whole window into the hole at every timeout of a
         * few hundred microseconds: 800,000 datagrams in 4 s, against
         * about 20 resends of the window while the timeout doubles. */
        if (rel->tx.ping.sent_at >= rel->tx.measure_from) {
            rtt_sample(rel, rtt, released > 0);
        }
    } else if (advanced && 0 != ts_echo) {
        uint32_t rtt = (uint32_t) now - ts_echo; /* modulo 2^32, like the stamps */
        uint64_t sent = now - rtt;
        if (rtt < 0x80000000u && sent >= rel->tx.measure_from) {
            rtt_sample(rel, rtt, true);
        }
    } else if (0 != sack_rtt && sack_newest >= rel->tx.measure_from) {
        /* no new edge, but the peer reported segments it got (it does so at
         * once): a measurement, and proof that it answers */
        rtt_sample(rel, sack_rtt, true);
    }
    if (advanced) {
        rel->tx.dup_acks = 0;
    }
    if (released > 0) {
        /* progress, even if only selective: a probe may go again (a resend
         * lost once more is then found in round trips, not by the RTO) */
        rel->tx.probe_out = false;
    }
    if ((released > 0 || answer) && usnic_seq_lt(rel->tx.acked + 1u, rel->tx.rack.end)) {
        detect_losses(rel, now); /* something lies between the edge and what arrived */
    }
    if (released > 0 || 0 == usnic_rel_tx_inflight(rel)) {
        timer_restart(rel, now); /* RFC 6298 5.3; stops it when nothing is left */
    } else {
        timer_update(rel);
    }
    return released;
}

void usnic_rel_tx_send_failed(struct usnic_rel *rel, struct usnic_rel_seg *seg)
{
    if (!(seg->state & USNIC_REL_SEG_RESEND)) {
        queue_resend(rel, seg);
    }
}

uint32_t usnic_rel_tx_resend_all(struct usnic_rel *rel)
{
    uint32_t n = 0;

    for (usnic_seq_t s = rel->tx.acked + 1u; usnic_seq_lt(s, rel->tx.next); s++) {
        struct usnic_rel_seg *seg = *tx_slot(rel, s);
        if (NULL != seg && 0 != seg->sends && !(seg->state & USNIC_REL_SEG_RESEND)) {
            queue_resend(rel, seg);
            n++;
        }
    }
    return n;
}

/* Newest segment still held, or NULL. */
static struct usnic_rel_seg *tx_newest(const struct usnic_rel *rel)
{
    for (usnic_seq_t s = rel->tx.next - 1u; usnic_seq_gt(s, rel->tx.acked); s--) {
        struct usnic_rel_seg *seg = usnic_rel_tx_at(rel, s);
        if (NULL != seg) {
            return seg;
        }
    }
    return NULL;
}

void usnic_rel_tx_timer(struct usnic_rel *rel, uint64_t now)
{
    if (0 != rel->tx.rack.deadline && now >= rel->tx.rack.deadline) {
        detect_losses(rel, now);
    }
    if (0 != rel->tx.rto_deadline && now >= rel->tx.rto_deadline) {
        struct usnic_rel_seg *seg;
        if (rel->tx.pto_armed) {
            /* probe timeout: a ping behind the newest segment */
            seg = tx_newest(rel);
            rel->stats.tlp_probes++;
            rel->tx.probe_out = true;
        } else {
            /* retransmission timeout: a ping behind the oldest, and wait
             * twice as long */
            seg = usnic_rel_tx_oldest(rel);
            rel->stats.retrans_timeout++;
            rel->tx.backoff++;
            rel->tx.measure_from = now; /* (the ping below is measured) */
        }
        if (NULL != seg) {
            send_ping(rel, seg, now);
        }
        rel->tx.pto_armed = false;
        rel->tx.rto_deadline = (0 != usnic_rel_tx_inflight(rel)) ? now + usnic_rel_tx_rto(rel) : 0;
    }
    timer_update(rel);
}

struct usnic_rel_seg *usnic_rel_tx_oldest(const struct usnic_rel *rel)
{
    /* the oldest still held: slots a SACK released are skipped */
    for (usnic_seq_t s = rel->tx.acked + 1u; usnic_seq_lt(s, rel->tx.next); s++) {
        struct usnic_rel_seg *seg = usnic_rel_tx_at(rel, s);
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

void usnic_rel_rx_commit(struct usnic_rel *rel, usnic_seq_t seq, uint32_t ts, uint64_t now)
{
    uint32_t mask = rel->rx.win_size - 1u;

    if (seq != rel->rx.expected) {
        rel->rx.ack_now = true; /* a gap: tell the sender at once */
    } else if (!rel->rx.ts_held) {
        /* the first packet since our last ACK that moves our edge: the next
         * ACK echoes its time, so the sender's measurement includes however
         * long that ACK is held (RFC 7323 picks the same packet) */
        rel->rx.ts_recent = ts;
        rel->rx.ts_held = true;
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

unsigned usnic_rel_rx_sack(const struct usnic_rel *rel, uint64_t *words, unsigned max, bool *more)
{
    uint32_t mask = rel->rx.win_size - 1u;
    int32_t span = usnic_seq_diff(rel->rx.highest, rel->rx.expected);
    unsigned n = 0;

    if (max > USNIC_REL_SACK_WORDS_MAX) {
        max = USNIC_REL_SACK_WORDS_MAX;
    }
    /* bit i of word w <-> expected + 1 + 64 w + i, i.e. (ack = expected - 1)
     * + 2 + 64 w + i; highest = expected + span */
    *more = span > (int32_t) (USNIC_REL_SACK_WORD_BITS * max);
    for (unsigned w = 0; w < max && (int32_t) (USNIC_REL_SACK_WORD_BITS * w) < span; w++) {
        uint64_t bits = 0;
        for (uint32_t i = 0; i < USNIC_REL_SACK_WORD_BITS; i++) {
            int32_t k = (int32_t) (USNIC_REL_SACK_WORD_BITS * w + i);
            if (k >= span) {
                break;
            }
            if (rel->rx.seen[(rel->rx.expected + 1u + (uint32_t) k) & mask]) {
                bits |= (uint64_t) 1 << i;
            }
        }
        words[w] = bits;
        if (0 != bits) {
            n = w + 1;
        }
    }
    return n;
}

uint64_t usnic_rel_rx_sack_bits(const struct usnic_rel *rel)
{
    uint64_t bits = 0;
    bool more;

    return (0 != usnic_rel_rx_sack(rel, &bits, 1, &more)) ? bits : 0;
}

void usnic_rel_rx_duplicate(struct usnic_rel *rel, uint32_t ts)
{
    rel->stats.rx_dup++;
    rel->rx.ack_now = true;
    if (!rel->rx.ts_held) {
        /* Nothing was waiting for an ACK: ours was lost (or the sender gave
         * up on it early).  Echo this copy, which the ACK answers; the time
         * of the last packet before it would count the sender's whole
         * timeout as a round trip. */
        rel->rx.ts_recent = ts;
        rel->rx.ts_held = true;
    }
}
