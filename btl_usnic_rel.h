/*
 * The reliability core: send window, receive window, cumulative and
 * selective ACKs, round-trip measurement, and every retransmission
 * decision.
 *
 * It knows nothing about libfabric or Open MPI and has no clock of its
 * own: the transport passes `now` in (any unit, the same everywhere: the
 * BTL uses microseconds, the unit tests' simulated link nanoseconds).  A
 * connection (one per local-module/peer-module pair) talks to its
 * transport only through struct usnic_rel_ops, so the unit tests drive it
 * over a simulated lossy, duplicating, reordering link and the BTL drives
 * it over datagrams.
 *
 * Sender rules
 *   - Every FRAG/CHUNK/PUT segment takes the next sequence number and a
 *     slot in the send window.  The window holds [tx.acked+1, tx.next-1];
 *     at most tx.win_size segments are unacknowledged at once.
 *   - A cumulative ACK for s releases every segment up to s; a selective
 *     ACK (SACK) releases the segments it reports (their window slots stay
 *     counted until the cumulative ACK passes them).
 *   - Round trips are measured from every ACK that moves the cumulative
 *     edge, by its timestamp echo: the receiver returns the send time of
 *     the first packet that moved its edge since its last ACK (RFC 7323's
 *     choice: a peer that holds its ACK, busy outside MPI, lengthens the
 *     measurement rather than hiding), or, when a duplicate arrives with
 *     nothing owed (our ACK was lost), that duplicate's; every copy of a
 *     packet carries its own send time, so ACKs of resent packets measure
 *     too.  The retransmission timeout
 *     (RTO) follows them as in RFC 6298: SRTT and
 *     RTTVAR with gains 1/8 and 1/4, RTO = SRTT + 4 RTTVAR, at least
 *     timing.rto_min and at most timing.rto_max; timing.rto_init before
 *     the first measurement.
 *   - One timer per connection (ops->timer_set gives the transport its
 *     deadline; it calls usnic_rel_tx_timer() when it passes).  While
 *     data is outstanding it is one of:
 *       a probe timeout (PTO, as in RACK-TLP, RFC 8985): 2 SRTT after the
 *         last new segment went out, or SRTT + 4 RTTVAR if larger (QUIC's
 *         form: round trips that vary widely, a peer often slow to answer,
 *         make fewer needless probes), plus the peer's ACK delay; at most
 *         the RTO; only once a round trip was measured and while no
 *         backoff is in force.  It sends a probe behind the newest segment
 *         still held (one per ACK of new data).
 *       the RTO: it sends a probe behind the oldest segment still held,
 *         and the timeout doubles, up to timing.rto_max, until a round
 *         trip is measured from an ACK that reports data delivered (a
 *         peer busy outside MPI gets a few probes, not a storm; a ping's
 *         answer that reports nothing new measures, but keeps the
 *         backoff: the resends it shows lost go out once per timeout,
 *         not every few hundred microseconds into a path that drops
 *         them).
 *     An ACK of new data restarts it; an empty window stops it.
 *   - A probe is not data: it is a ping (ops->probe: an ACK packet asking
 *     for an immediate ACK, stamped with its own send time) sent on the
 *     lane of the segment it looks after.  Its answer (an ACK echoing the
 *     ping's stamp) proves that everything sent before it on that lane
 *     either arrived or was lost, and the loss detection below resends
 *     only what is missing.  (QUIC's PING as a probe.)  A peer that holds
 *     its ACKs while it computes outside MPI so costs a few small pings,
 *     never a resend of data it already has; a really lost tail costs the
 *     probe timeout and one round trip.
 *   - Time-based loss detection (RACK, RFC 8985): segments of one lane
 *     (e.g. one UDP socket) arrive in the order they were sent unless
 *     lost.  A segment not yet acknowledged that was sent before something
 *     of its lane the peer acknowledged (a segment, or a ping) is lost
 *     once it has been out for that one's round trip plus a reordering
 *     allowance (min RTT / 4); until then the timer waits for that moment.
 *     Lanes may overtake each other, so only a segment's own lane counts.
 *   - fast_retrans_dups explicit duplicate ACKs (repeating tx.acked while
 *     data is outstanding, without a SACK bitmap - with one, RACK decides,
 *     lane by lane; answers to pings do not count) also resend the oldest
 *     segment, once.
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
 */
#ifndef BTL_USNIC_REL_H
#define BTL_USNIC_REL_H

#include <stdbool.h>
#include <stdint.h>

#include "btl_usnic_seq.h"

/* State bits of a segment as the core sees it. */
#define USNIC_REL_SEG_IN_WINDOW 0x1u /* holds a send-window slot, not yet acked */
#define USNIC_REL_SEG_RESEND 0x4u    /* queued for resend by the transport */

/* Lanes tracked separately by the loss detection (lane numbers are taken modulo this). */
#define USNIC_REL_LANES 4
/* A SACK is 1 to USNIC_REL_SACK_WORDS_MAX 64-bit words: bit i of word w
 * says ack + 2 + 64 w + i arrived.  With "more", the receiver also holds
 * segments beyond them, of which the ACK says nothing. */
#define USNIC_REL_SACK_WORD_BITS 64
#define USNIC_REL_SACK_WORDS_MAX 16
/* Segments a SACK can describe beyond the cumulative edge (ack + 2 ..
 * ack + 1 + this): the widest automatic send window. */
#define USNIC_REL_SACK_REACH (USNIC_REL_SACK_WORDS_MAX * (unsigned) USNIC_REL_SACK_WORD_BITS)

/* Embedded in the transport's send segment. */
struct usnic_rel_seg {
    usnic_seq_t seq;
    uint32_t state;   /* USNIC_REL_SEG_* */
    uint32_t sends;   /* times put on the wire */
    uint8_t lane;     /* set by the transport before each usnic_rel_tx_sent() (push for the
                         first): copies sent on one lane arrive in order unless lost
                         (e.g. one UDP socket); lanes may overtake each other */
    uint64_t xmit_ts; /* when it was last put on the wire */
};

struct usnic_rel;

struct usnic_rel_ops {
    /* put the segment on the transport's resend queue */
    void (*resend)(struct usnic_rel *rel, struct usnic_rel_seg *seg);
    /* the segment left the resend queue without being sent (it was acked) */
    void (*resend_cancel)(struct usnic_rel *rel, struct usnic_rel_seg *seg);
    /* the peer has the segment: the transport may release it */
    void (*acked)(struct usnic_rel *rel, struct usnic_rel_seg *seg);
    /* call usnic_rel_tx_timer() once `now` reaches deadline (0: no timer) */
    void (*timer_set)(struct usnic_rel *rel, uint64_t deadline);
    /* send a ping on `lane`: an ACK packet (with our ACK, as an explicit
     * ACK) that asks for an immediate ACK, stamped ts */
    void (*probe)(struct usnic_rel *rel, uint8_t lane, uint32_t ts);
    /* the transport's object around each usnic_rel_seg: it starts seg_lead
     * bytes before it, and acknowledging a segment touches its first
     * seg_bytes bytes, which the ACK loop prefetches a few segments ahead
     * (0: the usnic_rel_seg only) */
    size_t seg_lead, seg_bytes;
};

/* Timer settings, in the transport's time unit. */
struct usnic_rel_timing {
    uint64_t rto_init;  /* retransmission timeout before the first round trip is measured */
    uint64_t rto_min;   /* the RTO never goes below this */
    uint64_t rto_max;   /* nor above this, backoff included */
    uint64_t ack_delay; /* longest the peer may delay an ACK (widens the probe timeout) */
    bool tlp;           /* send tail-loss probes */
};

/* The newest timestamp seen (ts) and our clock when it was (at; 0: none yet). */
struct usnic_rel_ts_mark {
    uint32_t ts;
    uint64_t at;
};

/* Timestamps are 32-bit microseconds and wrap after 71 minutes: a mark
 * older than this no longer tells what is newer. */
#define USNIC_REL_TS_HORIZON ((uint64_t) 30 * 60 * 1000000)

enum usnic_rx_verdict {
    USNIC_RX_NEW,    /* first time seen, in window: accept */
    USNIC_RX_DUP,    /* seen before: drop, ACK at once */
    USNIC_RX_BEYOND, /* too far ahead of the window: drop */
};

struct usnic_rel_stats {
    uint64_t retrans_timeout; /* RTO expiries (each sends a probe) */
    uint64_t retrans_fast;    /* resends queued by duplicate ACKs */
    uint64_t retrans_sack;    /* resends queued because ACKs showed a loss (RACK) */
    uint64_t tlp_probes;      /* probe-timeout expiries (each sends a probe) */
    uint64_t probes_answered; /* probes whose answer came back */
    uint64_t sacked;          /* segments released early by a SACK */
    uint64_t rtt_samples;     /* round trips measured */
    uint64_t dup_acks;        /* explicit ACKs that acknowledged nothing new */
    uint64_t rx_dup;          /* duplicate data packets received, sent again by the peer */
    uint64_t rx_copies;       /* duplicates not sent again: the network's copies, or replays */
    uint64_t ack_copies;      /* ACK packets not newer than the last of their lane: copies */
    uint64_t rx_beyond;       /* data packets beyond the receive window */
    uint64_t bad_acks;        /* ACKs of sequence numbers never sent */
};

struct usnic_rel {
    const struct usnic_rel_ops *ops;
    void *ctx; /* transport's per-connection pointer */
    struct usnic_rel_timing timing;

    struct {
        usnic_seq_t next;           /* sequence number of the next new segment */
        usnic_seq_t acked;          /* all up to here acked; window is [acked+1, next-1] */
        uint32_t win_size;          /* power of two */
        struct usnic_rel_seg **win; /* win[seq & (win_size-1)] for seq in the window */
        uint32_t dup_acks;          /* consecutive duplicate explicit ACKs of acked */
        uint32_t fast_retrans_dups; /* dup ACKs that trigger a fast retransmit; 0 = never */
        /* what the peer allows us to keep in flight to it, in KiB, as its
         * last current ACK said (0: no limit asked); the transport applies it */
        uint32_t allow;

        /* round trips (RFC 6298); 0 until the first sample */
        uint64_t srtt, rttvar, min_rtt;
        uint64_t rto;     /* current timeout, before backoff */
        uint64_t pto;     /* probe timeout (from the last measurement) */
        uint32_t backoff; /* timeouts since the last valid round trip: RTO << backoff */
        /* Sends before this are not measured: their answers may measure
         * an absence instead of the path.  Set on our return from one
         * (usnic_rel_tx_away), and at every retransmission timeout: the
         * peer left what went before it unanswered for a whole RTO, and
         * its answer may come from a process that was away (computing
         * outside MPI): 12 s of absence became a 12 s round trip.  The
         * ping the timeout sent is measured by its answer.  (Skipping
         * after every ping, TLPs included, and after resends left too few
         * samples at 1% loss: 512 KiB ping-pongs 14% and 1 MiB 6% slower
         * in three alternating runs each; after a timeout only, no
         * difference beyond the runs' spread.) */
        uint64_t measure_from;

        /* the connection's timer */
        uint64_t rto_deadline; /* probe or retransmission timeout; 0 = not armed */
        bool pto_armed;        /* rto_deadline is a probe timeout */
        bool probe_out;        /* a probe timeout fired and no ACK of new data came since */
        uint64_t deadline;     /* the earliest of rto_deadline and rack.deadline, as told */

        /* the last ping */
        struct {
            bool waiting;     /* sent, not answered yet */
            uint8_t lane;     /* sent on */
            uint32_t ts;      /* its stamp, echoed by the answer */
            uint64_t sent_at; /* our clock when it went */
            usnic_seq_t next; /* tx.next then: everything before it was sent before it */
        } ping;

        /* time-based loss detection (RACK) */
        struct {
            uint64_t xmit_ts[USNIC_REL_LANES]; /* latest send time of an acked segment, by lane */
            usnic_seq_t end;   /* one past the newest sequence number worth a look */
            uint64_t rtt;      /* round trip of the most recently sent one acked */
            uint64_t deadline; /* when a segment will count as lost; 0 = none */
        } rack;
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
        uint32_t ts_recent;      /* ts the next ACK echoes (0: none yet) */
        bool ts_held;            /* ts_recent is of a packet not acknowledged yet */
        /* newest timestamp seen per lane, of data packets and of ACK packets
         * (usnic_rel_rx_fresh()) */
        struct usnic_rel_ts_mark data_ts[USNIC_REL_LANES], ack_ts[USNIC_REL_LANES];
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
                   uint32_t fast_retrans_dups, const struct usnic_rel_timing *timing);
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

/* The segment in the window's slot of seq (in [acked+1, next)), or NULL
 * if it was released early (SACK). */
static inline struct usnic_rel_seg *usnic_rel_tx_at(const struct usnic_rel *rel, usnic_seq_t seq)
{
    return rel->tx.win[seq & (rel->tx.win_size - 1u)];
}

/* Give seg the next sequence number and a window slot.  The window must be open. */
usnic_seq_t usnic_rel_tx_push(struct usnic_rel *rel, struct usnic_rel_seg *seg);

/* Microseconds from `since` to `now`; 0 when `since` is the later reading
 * (one taken after `now` by another thread, or by code that reads the
 * clock afresh within a progress call that read it at its start). */
static inline uint64_t usnic_elapsed_us(uint64_t now, uint64_t since)
{
    return (now > since) ? now - since : 0;
}

/*
 * A peer's liveness (btl_usnic_endpoint.c, peer_alive): `heard` is the
 * latest time something showed it alive (its ACK, a reply to a liveness
 * probe, or our own return from an absence, when nobody could be heard).
 * Silent for more than quiet_after: probe it; for more than timeout: dead.
 *
 * `heard` may be later than `now`: `now` is read once at the start of a
 * progress call, and the liveness thread stamps a reply (and an endpoint
 * made during the call its creation) with a fresh reading.  Such a peer
 * was heard a moment ago; taken as silent for 2^64 - x microseconds, it
 * was declared dead (t_liveness_netns, seen in CI).
 */
enum usnic_peer_state {
    USNIC_PEER_HEARD, /* heard within quiet_after */
    USNIC_PEER_QUIET, /* not within quiet_after, but within timeout */
    USNIC_PEER_DEAD   /* not within timeout */
};

static inline enum usnic_peer_state usnic_peer_state(uint64_t now, uint64_t heard,
                                                     uint64_t quiet_after, uint64_t timeout)
{
    uint64_t silent = usnic_elapsed_us(now, heard);

    if (silent > timeout) {
        return USNIC_PEER_DEAD;
    }
    return (silent > quiet_after) ? USNIC_PEER_QUIET : USNIC_PEER_HEARD;
}

/* The timestamp to put in a data packet sent at `now` (never 0). */
static inline uint32_t usnic_rel_ts(uint64_t now)
{
    uint32_t ts = (uint32_t) now;
    return ts ? ts : 1u;
}

/* We come back at `back` from an absence (no progress calls: computing
 * outside MPI, or descheduled).  The answers to what we sent before it may
 * have waited unread in our sockets all that time: they measure our
 * absence, not the round trip (a first sample of 12 s made the RTO and
 * probe timeout the ceiling for the next dozens of round trips).  Sends
 * before `back` are measured no more; their ACKs still release them. */
static inline void usnic_rel_tx_away(struct usnic_rel *rel, uint64_t back)
{
    if (back > rel->tx.measure_from) {
        rel->tx.measure_from = back;
    }
}

/* The segment was just handed to the wire (first send or resend) at `now`. */
void usnic_rel_tx_sent(struct usnic_rel *rel, struct usnic_rel_seg *seg, uint64_t now);

/*
 * Process an ACK: cumulative `ack`, and with it a selective-ACK bitmap
 * (bit i reports ack + 2 + i as received; 0 if none) and the timestamp
 * echo (0: none).  explicit_ack is true for ACK packets (only those count
 * as duplicate ACKs).  Returns the number of segments released, or -1 if
 * the ACK acknowledges sequence numbers never sent (bad packet: nothing is
 * changed).
 */
int usnic_rel_tx_ack(struct usnic_rel *rel, usnic_seq_t ack, bool explicit_ack, uint64_t sack_bits,
                     uint32_t ts_echo, uint64_t now);
/* The same with a SACK of nwords words (0: none) at sack, which need not be
 * aligned, and the receiver's "more" (USNIC_REL_SACK_WORDS_MAX above).  An
 * answer to our ping declares lost only what the SACK describes when more
 * is set; usnic_rel_tx_ack() is this with more = false. */
int usnic_rel_tx_ack_sack(struct usnic_rel *rel, usnic_seq_t ack, bool explicit_ack,
                          const void *sack, unsigned nwords, bool more, uint32_t ts_echo,
                          uint64_t now);

/* Handing the segment to the wire failed: queue it for resend (not counted as a retransmit). */
void usnic_rel_tx_send_failed(struct usnic_rel *rel, struct usnic_rel_seg *seg);
/* The path under the segments in flight broke (e.g. the link they left on
 * went down): queue every segment sent and not yet acknowledged for resend
 * now, instead of waiting for RACK or the timeout to find each lost one
 * (nothing acknowledges them while the path is gone, so RACK has nothing to
 * go by).  Copies that did arrive are dropped by the receiver as
 * duplicates.  Returns how many were queued. */
uint32_t usnic_rel_tx_resend_all(struct usnic_rel *rel);

/* The connection's timer (ops->timer_set) expired. */
void usnic_rel_tx_timer(struct usnic_rel *rel, uint64_t now);

/* Oldest segment still unacknowledged (not released by an ACK or SACK), or NULL. */
struct usnic_rel_seg *usnic_rel_tx_oldest(const struct usnic_rel *rel);

/* The retransmission timeout in force now, backoff included. */
uint64_t usnic_rel_tx_rto(const struct usnic_rel *rel);

/* ---- receiver ---- */

/* Classify a data packet's sequence number without changing state. */
enum usnic_rx_verdict usnic_rel_rx_check(const struct usnic_rel *rel, usnic_seq_t seq);

/*
 * Record the packet as received (after usnic_rel_rx_check() said NEW and the
 * transport accepted the content).  ts is the packet's timestamp (for the
 * echo), now the transport's clock, used for the delayed ACK.
 */
void usnic_rel_rx_commit(struct usnic_rel *rel, usnic_seq_t seq, uint32_t ts, uint64_t now);

/* A duplicate arrived (usnic_rel_rx_check() said DUP), with timestamp ts: count it, ACK soon. */
void usnic_rel_rx_duplicate(struct usnic_rel *rel, uint32_t ts);

/* A ping arrived (an ACK packet asking for an ACK), stamped ts: ACK at once, echoing ts. */
static inline void usnic_rel_rx_ping(struct usnic_rel *rel, uint32_t ts)
{
    rel->rx.ack_now = true;
    rel->rx.ts_recent = ts;
    rel->rx.ts_held = true;
}

/*
 * Is this packet news?  A peer stamps every copy it sends with its clock,
 * and copies on one lane arrive in the order they were sent; so a data
 * packet (ack: an ACK packet) whose stamp is not newer than the newest of
 * its kind on its lane is a copy the network made, or a replay, not
 * something the peer sent again.  A newer stamp becomes the mark.
 */
static inline bool usnic_rel_ts_fresh(struct usnic_rel_ts_mark *m, uint32_t ts, uint64_t now)
{
    if (0 == m->at || now - m->at > USNIC_REL_TS_HORIZON || (int32_t) (ts - m->ts) > 0) {
        m->ts = ts;
        m->at = now ? now : 1u;
        return true;
    }
    return false;
}

static inline bool usnic_rel_rx_fresh(struct usnic_rel *rel, bool ack, unsigned lane, uint32_t ts,
                                      uint64_t now)
{
    struct usnic_rel_ts_mark *m = ack ? rel->rx.ack_ts : rel->rx.data_ts;
    return usnic_rel_ts_fresh(&m[lane % USNIC_REL_LANES], ts, now);
}

/* The cumulative ACK value to send: the last in-order sequence number. */
static inline usnic_seq_t usnic_rel_rx_ack_value(const struct usnic_rel *rel)
{
    return rel->rx.expected - 1u;
}

/* The SACK bitmap to send with usnic_rel_rx_ack_value() (0: nothing beyond the gap). */
uint64_t usnic_rel_rx_sack_bits(const struct usnic_rel *rel);
/* The SACK to send with usnic_rel_rx_ack_value(): at most max words (1 ..
 * USNIC_REL_SACK_WORDS_MAX) into words, trailing empty words left out;
 * returns how many (0: nothing arrived beyond the gap within them).  *more:
 * segments arrived beyond the last word it could fill. */
unsigned usnic_rel_rx_sack(const struct usnic_rel *rel, uint64_t *words, unsigned max, bool *more);

/*
 * The allowance a receiver advertises (the header's allow field): how it
 * shares its buffer among the peers sending to it (the transport counts
 * them and reads its drop counter; btl_usnic_recv.c).
 *
 * usnic_rel_allow_share: budget bytes among n senders (0 counts as 1), in
 * KiB as the header carries it: at least 1, at most 65535.
 * usnic_rel_allow_budget: the budget for the next epoch: after an epoch in
 * which the buffer overflowed (dropped) it halves, but not below max/32;
 * after one without, it grows by max/8, up to max.
 */
static inline uint16_t usnic_rel_allow_share(uint64_t budget, uint32_t n)
{
    uint64_t kib = budget / (n > 0 ? n : 1) / 1024;

    return (uint16_t) (kib < 1 ? 1 : (kib > UINT16_MAX ? UINT16_MAX : kib));
}

static inline uint64_t usnic_rel_allow_budget(uint64_t budget, uint64_t max, bool dropped)
{
    uint64_t least = max / 32, step = max / 8;

    if (dropped) {
        return (budget / 2 > least) ? budget / 2 : least;
    }
    return (max - budget > step) ? budget + step : max;
}

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
    rel->rx.ts_held = false;
}

#endif /* BTL_USNIC_REL_H */
