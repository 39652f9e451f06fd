/*
 * The reliability core: send window, receive window, cumulative ACKs,
 * retransmission decisions.
 *
 * It knows nothing about libfabric or Open MPI.  A connection (one per
 * local-module/peer-module pair) talks to its transport only through
 * struct usnic_rel_ops, so the unit tests drive it over a simulated lossy,
 * duplicating, reordering link and the BTL drives it over FI_EP_DGRAM.
 *
 * Sender rules
 *   - Every FRAG/CHUNK/PUT segment takes the next sequence number and a
 *     slot in the send window.  The window holds [tx.acked+1, tx.next-1];
 *     at most tx.win_size segments are unacknowledged at once.
 *   - Whenever a segment goes on the wire its retransmit timer is armed.
 *   - A cumulative ACK for s releases every segment up to s.
 *   - Only the oldest segment still held is ever resent on suspicion: when its timer expires, or
 when the fast-retransmit
 *     threshold of duplicate ACKs is reached (explicit ACK packets repeating
 *     tx.acked while data is outstanding).  A later segment whose timer
 *     expires has its timer re-armed instead: the cumulative ACK cannot say
 *     whether it arrived, and resending the whole window after one loss
 *     would flood the peer.

 *
 * Receiver rules
 *   - rx.expected is the lowest sequence number not yet received; all
 *     before it arrived.  Packets in [expected, expected+win_size-1] that
 *     were not seen yet are accepted (their fragments then reach the PML
 *     in the sender's order: btl_usnic_reasm.h), anything before expected
 *     is a duplicate (and means our ACK was lost: ACK at once), anything
 *     beyond the window is dropped.
 *   - An accepted packet makes an ACK owed; the transport sends it
 *     piggy-backed on data, or explicitly once the ACK delay has passed.
 *     A packet that arrives out of order (a gap before it) makes the ACK
 *     due at once, with a selective-ACK bitmap of what arrived beyond the
 *     gap, so the sender learns of a loss within one round trip.
 *
 * Selective ACKs (sender)
 *   - Segments a SACK reports as received are released at once (their
 *     window slots stay counted until the cumulative ACK passes them).
 *   - A segment not reported while at least USNIC_REL_SACK_DUPS segments
 *     of its own lane after it are is taken as lost and resent once (later
 *     resends of it are by timer only).  Only its lane counts: a segment on
 *     another lane (another channel) may simply have been overtaken.
 */
#ifndef BTL_USNIC_REL_H
#define BTL_USNIC_REL_H

#include <stdbool.h>
#include <stdint.h>

#include "btl_usnic_seq.h"

/* State bits of a segment as the core sees it. */
#define USNIC_REL_SEG_IN_WINDOW 0x1u   /* holds a send-window slot, not yet acked */
#define USNIC_REL_SEG_TIMER 0x2u       /* retransmit timer armed */
#define USNIC_REL_SEG_RESEND 0x4u      /* queued for resend by the transport */
#define USNIC_REL_SEG_SACK_RESENT 0x8u /* already resent once because of a SACK */

/* Segments reported after a missing one before the missing one is resent. */
#define USNIC_REL_SACK_DUPS 3

/* Embedded in the transport's send segment. */
/* Retransmit backoff: the oldest segment, sent n times, is resent after
 * 2^(n-1) timer expiries, at most this many (a peer busy outside MPI gets a
 * few probes, not one per timeout). */
#define USNIC_REL_BACKOFF_MAX 16u

struct usnic_rel_seg {
    usnic_seq_t seq;
    uint32_t state; /* USNIC_REL_SEG_* */
    uint32_t sends; /* times put on the wire */
    uint32_t waits; /* timer expiries since it was last put on the wire */
    uint8_t lane;   /* set by the transport before usnic_rel_tx_push(): segments of one
                       lane arrive in order unless lost (e.g. one UDP socket); lanes
                       may overtake each other */
};

struct usnic_rel;

struct usnic_rel_ops {
    /* start / stop the segment's retransmit timer */
    void (*timer_arm)(struct usnic_rel *rel, struct usnic_rel_seg *seg);
    void (*timer_cancel)(struct usnic_rel *rel, struct usnic_rel_seg *seg);
    /* put the segment on the transport's resend queue */
    void (*resend)(struct usnic_rel *rel, struct usnic_rel_seg *seg);
    /* the segment left the resend queue without being sent (it was acked) */
    void (*resend_cancel)(struct usnic_rel *rel, struct usnic_rel_seg *seg);
    /* the peer has the segment: the transport may release it */
    void (*acked)(struct usnic_rel *rel, struct usnic_rel_seg *seg);
};

enum usnic_rx_verdict {
    USNIC_RX_NEW,    /* first time seen, in window: accept */
    USNIC_RX_DUP,    /* seen before: drop, ACK at once */
    USNIC_RX_BEYOND, /* too far ahead of the window: drop */
};

struct usnic_rel_stats {
    uint64_t retrans_timeout; /* resends queued by timer expiry */
    uint64_t retrans_fast;    /* resends queued by duplicate ACKs */
    uint64_t retrans_sack;    /* resends queued because a SACK showed a loss */
    uint64_t sacked;          /* segments released early by a SACK */
    uint64_t timer_rearms;    /* expired timers of non-oldest segments, re-armed */
    uint64_t timer_backoffs;  /* expired timers of the oldest, re-armed (backing off) */
    uint64_t dup_acks;        /* explicit ACKs that acknowledged nothing new */
    uint64_t rx_dup;          /* duplicate data packets received */
    uint64_t rx_beyond;       /* data packets beyond the receive window */
    uint64_t bad_acks;        /* ACKs of sequence numbers never sent */
};

struct usnic_rel {
    const struct usnic_rel_ops *ops;
    void *ctx; /* transport's per-connection pointer */

    struct {
        usnic_seq_t next;           /* sequence number of the next new segment */
        usnic_seq_t acked;          /* all up to here acked; window is [acked+1, next-1] */
        uint32_t win_size;          /* power of two */
        struct usnic_rel_seg **win; /* win[seq & (win_size-1)] for seq in the window */
        uint8_t *lane;              /* lane[seq & (win_size-1)]: lane it was first sent on */
        uint32_t dup_acks;          /* consecutive duplicate explicit ACKs of acked */
        uint32_t fast_retrans_dups; /* dup ACKs that trigger a fast retransmit; 0 = never */
    } tx;

    struct {
        usnic_seq_t expected;    /* lowest not yet received; all before it were */
        uint32_t win_size;       /* power of two */
        uint8_t *seen;           /* seen[seq & (win_size-1)] for seq in [expected, expected+win) */
        usnic_seq_t highest;     /* highest sequence number accepted; == expected-1 if no gap */
        bool ack_owed;           /* accepted data not yet acknowledged */
        bool ack_now;            /* a duplicate arrived: ACK without delay */
        uint32_t unacked;        /* packets accepted since our last ACK */
        uint64_t ack_owed_since; /* transport time when ack_owed became true */
    } rx;

    uint32_t ack_every; /* ACK at once after this many unacknowledged packets */
    struct usnic_rel_stats stats;
};

/*
 * Initialise a connection.  tx_isn is our first sequence number to the
 * peer, rx_isn the peer's first sequence number to us.  Window sizes are
 * rounded up to powers of two.  Returns 0, or -1 when out of memory.
 */
int usnic_rel_init(struct usnic_rel *rel, const struct usnic_rel_ops *ops, void *ctx,
                   uint32_t tx_win, uint32_t rx_win, usnic_seq_t tx_isn, usnic_seq_t rx_isn,
                   uint32_t fast_retrans_dups);
void usnic_rel_fini(struct usnic_rel *rel);

/* ---- sender ---- */

static inline uint32_t usnic_rel_tx_inflight(const struct usnic_rel *rel)
{
    return (uint32_t) (rel->tx.next - rel->tx.acked - 1u);
}

static inline bool usnic_rel_tx_window_open(const struct usnic_rel *rel)
{
    return usnic_rel_tx_inflight(rel) < rel->tx.win_size;
}

/* Give seg the next sequence number and a window slot.  The window must be open. */
usnic_seq_t usnic_rel_tx_push(struct usnic_rel *rel, struct usnic_rel_seg *seg);

/*
 * Process a selective ACK that came with cumulative ACK `ack` (call after
 * usnic_rel_tx_ack()): bit i of `bits` reports ack + 2 + i as received.
 * Returns the number of segments released.
 */
int usnic_rel_tx_sack(struct usnic_rel *rel, usnic_seq_t ack, uint64_t bits);

/* The segment was just handed to the wire (first send or resend): arm its timer. */
void usnic_rel_tx_sent(struct usnic_rel *rel, struct usnic_rel_seg *seg);

/*
 * Process a cumulative ACK.  explicit_ack is true for ACK packets (only
 * those count as duplicate ACKs).  Returns the number of segments released,
 * or -1 if the ACK acknowledges sequence numbers never sent (bad packet).
 */
int usnic_rel_tx_ack(struct usnic_rel *rel, usnic_seq_t ack, bool explicit_ack);

/* Handing the segment to the wire failed: queue it for resend (not counted as a retransmit). */
void usnic_rel_tx_send_failed(struct usnic_rel *rel, struct usnic_rel_seg *seg);

/* The segment's retransmit timer expired. */
void usnic_rel_tx_timeout(struct usnic_rel *rel, struct usnic_rel_seg *seg);

/* Oldest segment still unacknowledged (not released by an ACK or SACK), or NULL. */
struct usnic_rel_seg *usnic_rel_tx_oldest(const struct usnic_rel *rel);

/* ---- receiver ---- */

/* Classify a data packet's sequence number without changing state. */
enum usnic_rx_verdict usnic_rel_rx_check(const struct usnic_rel *rel, usnic_seq_t seq);

/*
 * Record the packet as received (after usnic_rel_rx_check() said NEW and the
 * transport accepted the content).  now is the transport's clock, used for
 * the delayed ACK.
 */
void usnic_rel_rx_commit(struct usnic_rel *rel, usnic_seq_t seq, uint64_t now);

/* A duplicate arrived (usnic_rel_rx_check() said DUP): count it, ACK soon. */
void usnic_rel_rx_duplicate(struct usnic_rel *rel);

/* The cumulative ACK value to send: the last in-order sequence number. */
static inline usnic_seq_t usnic_rel_rx_ack_value(const struct usnic_rel *rel)
{
    return rel->rx.expected - 1u;
}

/* The SACK bitmap to send with usnic_rel_rx_ack_value() (0: nothing beyond the gap). */
uint64_t usnic_rel_rx_sack_bits(const struct usnic_rel *rel);

/* Must an explicit ACK go out now? */
static inline bool usnic_rel_ack_due(const struct usnic_rel *rel, uint64_t now, uint64_t delay)
{
    return rel->rx.ack_now || (rel->rx.ack_owed && (now - rel->rx.ack_owed_since >= delay ||
                                                    rel->rx.unacked >= rel->ack_every));
}

/* An ACK carrying usnic_rel_rx_ack_value() went out (explicit or piggy-backed). */
static inline void usnic_rel_ack_sent(struct usnic_rel *rel)
{
    rel->rx.ack_owed = false;
    rel->rx.ack_now = false;
    rel->rx.unacked = 0;
}

#endif /* BTL_USNIC_REL_H */
