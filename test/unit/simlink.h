/*
 * A simulated link and transport for the unit tests of the usnic core.
 *
 * Two endpoints, A (0) and B (1), each own a struct usnic_rel (the one
 * connection to the other endpoint), a reassembly table and a registration
 * table.  Messages queued on an endpoint are cut into real wire packets
 * (struct usnic_pkt_hdr + chunk/put headers + payload, as in
 * btl_usnic_proto.h) and put on a simulated link that can lose, duplicate,
 * reorder and delay them.  The receiving endpoint runs every datagram through
 * usnic_pkt_parse(), the sender lookup, usnic_rel_tx_ack(),
 * usnic_rel_rx_check()/commit(), usnic_reasm_*() and usnic_reg_resolve()
 * exactly as the BTL does, and drops (and counts by reason) anything that is
 * not OK.
 *
 * Time is simulated (uint64 ns); the loop jumps from event to event (packet
 * arrival, retransmit timer, delayed ACK).  Randomness comes from one seeded
 * generator per simulation, so every run is reproducible from its seed.
 *
 * Message bytes are a function of (direction, message id) so the receiver can
 * check every delivered byte; the sender also keeps a hash of each message.
 * The receiving endpoint runs the BTL's own receive dispatch
 * (btl_usnic_rx.h), so fragments must reach it in the order they were
 * sent: each delivery is checked against the peer's next SEND message.  A
 * PUT chunk is matched to its PUT through the sender's record of which
 * message each sequence number carried (an oracle only the test uses;
 * nothing of it is on the wire).
 */
#ifndef USNIC_SIMLINK_H
#define USNIC_SIMLINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "btl_usnic_auth.h"
#include "btl_usnic_part.h"
#include "btl_usnic_proto.h"
#include "btl_usnic_reasm.h"
#include "btl_usnic_reg.h"
#include "btl_usnic_rel.h"
#include "btl_usnic_rx.h"

/* ---- deterministic PRNG (splitmix64) ---- */

struct sim_rng {
    uint64_t s;
};

static inline void sim_rng_seed(struct sim_rng *r, uint64_t seed)
{
    r->s = seed;
}
uint64_t sim_rng_next(struct sim_rng *r);
/* uniform in [0, n), 0 when n == 0 */
uint64_t sim_rng_below(struct sim_rng *r, uint64_t n);
/* uniform in [lo, hi] */
uint64_t sim_rng_range(struct sim_rng *r, uint64_t lo, uint64_t hi);
/* uniform in [0, 1) */
double sim_rng_unit(struct sim_rng *r);
/* in-place Fisher-Yates shuffle of n uint32_t */
void sim_rng_shuffle32(struct sim_rng *r, uint32_t *v, size_t n);

/* ---- message contents ---- */

/* Per-message key: direction (sender endpoint index) and message id. */
uint64_t sim_msg_key(int from, uint32_t id);
/* Byte i of the message with this key. */
static inline uint8_t sim_msg_byte(uint64_t key, uint64_t i)
{
    return (uint8_t) ((key >> ((i & 7u) << 3)) + i * 131u + (i >> 11));
}
void sim_msg_fill(uint64_t key, uint64_t off, void *dst, size_t n);
/* Index of the first byte that differs from the pattern, or -1. */
long long sim_msg_mismatch(uint64_t key, uint64_t off, const void *p, size_t n);

#define SIM_FNV_INIT 0xcbf29ce484222325ull
uint64_t sim_fnv(uint64_t h, const void *p, size_t n);

/* ---- packets ---- */

/* Fill a common header (payload_len is set by sim_pkt_build). */
void sim_hdr_init(struct usnic_pkt_hdr *h, unsigned type, unsigned flags, unsigned tag,
                  uint32_t src_module, uint64_t sender_key, uint32_t seq, uint32_t ack_seq);
/*
 * Lay out hdr (+ ch when non-NULL) (+ put when non-NULL) + payload into buf
 * and set hdr payload_len = plen.  Returns the datagram length, 0 when cap
 * is too small.  buf should be 8-byte aligned (as receive buffers are).
 */
size_t sim_pkt_build(void *buf, size_t cap, const struct usnic_pkt_hdr *hdr,
                     const struct usnic_chunk_hdr *ch, const struct usnic_put_hdr *put,
                     const void *payload, uint32_t plen);

/* ---- the simulation ---- */

enum {
    SIM_A = 0,
    SIM_B = 1
};

enum sim_msg_kind {
    SIM_MSG_SEND = 1,
    SIM_MSG_PUT = 2
};

struct sim_cfg {
    uint64_t seed;
    double loss;             /* fraction of datagrams lost (both directions, all types) */
    double dup;              /* fraction of datagrams delivered twice */
    double reorder;          /* fraction of datagrams given an extra random delay */
    uint64_t reorder_max_ns; /* that extra delay is uniform in [0, reorder_max_ns] */
    uint64_t latency_ns;     /* one-way propagation delay */
    uint64_t ps_per_byte;    /* serialization: picoseconds per byte (800 = 10 Gb/s) */
    uint64_t rto_ns;         /* retransmit timeout before a round trip is measured */
    uint64_t rto_min_ns;     /* floor of the measured timeout */
    uint64_t rto_max_ns;     /* ceiling, backoff included */
    bool tlp;                /* tail-loss probes */
    uint64_t ack_delay_ns;   /* delayed explicit ACK */
    uint32_t tx_win[2], rx_win[2];
    uint32_t fast_retrans_dups;
    uint32_t isn[2];          /* initial sequence number of A->B and of B->A */
    uint32_t first_msg_id[2]; /* first fragment msg_id each endpoint uses */
    uint32_t reasm_slots;     /* raised to the peer's send window, as the BTL does */
    uint32_t max_payload;     /* payload bytes per datagram */
    uint64_t max_msg_len;     /* usnic_pkt_parse() limit */
    uint32_t module_id[2];    /* src_module hints */
    uint64_t key[2];          /* sender keys: how a receiver finds its peer */
    uint8_t secret[2][16];    /* each side's MAC secret */
    int auth;                 /* 0 none, 1 header, 2 full: what the MAC covers (both ways) */
    bool crc;                 /* CRC32C on every datagram */
    double send_fail;         /* fraction of posts that fail locally (usnic_rel_tx_send_failed) */
    bool ack_req_on_full;     /* set USNIC_PKT_FLAG_ACK_REQ on the segment that fills the window */
    bool no_sack;             /* explicit ACKs never carry a selective-ACK bitmap */
    unsigned sack_words;      /* words of a SACK at most (1 .. USNIC_SACK_WORDS_MAX) */
    bool defer; /* arrivals come in batches whose datagrams stay in place until the batch
                   ends (1-16 arrivals): chunks may be deferred (btl_usnic_reasm.h) */
    /* header MACs handed to the dispatch computed ahead (usnic_rx_params.mac_key,
     * usnic_pkt_macs): 0 none; 1 right; 2 one bit off, under the connection's key;
     * 3 garbage under another key (the dispatch must not use it) */
    int mac_ahead;
    /* header prediction (usnic_rx_params.predict): each receiver keeps its
     * prediction from datagram to datagram, forgotten only at the end of a
     * batch (cfg.defer) and when a sender is forgotten */
    bool predict;
    /* hostile: fraction of data datagrams that also arrive, just before the
     * genuine copy, from another source (usnic_rx_params.src; the lookup
     * drops them, drop_ADDRESS) */
    double foreign;
    /* hostile: fraction of data datagrams that also arrive, just before the
     * genuine copy and from the peer's source, with one bit of a MAC'd
     * field flipped (seq, ack_seq, msg_id, ts, ts_echo, the chunk header)
     * or of the MAC itself (only with auth: the MAC must stop them) */
    double forged;
    /* fraction of first transmissions of data segments sent asking for an
     * immediate ACK (USNIC_PKT_FLAG_ACK_REQ) */
    double ack_req;
    /* a CHUNK's or PUT's payload arrives apart from its header
     * (usnic_rx_params.payload), as the kernel backend's direct receive
     * hands it over; only without CRC and auth full */
    bool split;
    /* a path that shrinks: from part_after_ns on, the link drops every
     * datagram longer than part_max bytes, and senders send those as PART
     * packets (btl_usnic_part.h), as the BTL does once it found out; 0:
     * never */
    uint32_t part_max;
    uint64_t part_after_ns;
};

struct sim_msg {
    uint32_t id; /* index in the sender's list */
    uint8_t kind;
    uint8_t tag;
    uint64_t len;
    uint64_t key;     /* sim_msg_key() */
    uint32_t wire_id; /* msg_id on the wire: fragment number (SEND) or PUT number */
    uint64_t reg_key, reg_offset;
    uint64_t hash; /* FNV of the bytes */
    /* what the receiver saw */
    uint32_t delivered;
    uint32_t corrupt;
    uint64_t rx_hash;
    uint64_t put_bytes;
};

struct sim_seg {
    struct usnic_rel_seg rel; /* the core's part */
    struct sim_ep *ep;
    uint32_t msg;                    /* index of the message it carries */
    struct sim_seg *q_prev, *q_next; /* resend queue */
    bool q_on;
    uint64_t first_sent_ns, last_sent_ns;
    size_t len;
    uint8_t *pkt; /* the datagram (malloc'd, so aligned) */
};

struct sim_rx_rec {
    uint32_t id;
    uint64_t len;
};

struct sim_ep_stats {
    uint64_t tx_pkts;        /* datagrams handed to the link (all kinds) */
    uint64_t tx_data;        /* first transmissions of data segments */
    uint64_t tx_resent;      /* retransmissions */
    uint64_t tx_acks;        /* explicit ACK packets (pings not counted) */
    uint64_t tx_pings;       /* pings (probes) */
    uint64_t tx_sacks;       /* of which carried a SACK bitmap */
    uint64_t tx_post_failed; /* posts that failed locally */
    uint64_t tx_ack_reqs;    /* data packets sent with USNIC_PKT_FLAG_ACK_REQ */
    uint64_t rx_pkts;        /* datagrams received */
    uint64_t rx_acks;        /* ACK packets accepted */
    uint64_t rx_ack_reqs;    /* packets that asked for an immediate ACK */
    uint64_t rx_macs_ahead;  /* data packets whose MAC came computed ahead (cfg.mac_ahead) */
    uint64_t rx_accepted;    /* data packets committed */
    uint64_t delivered;      /* messages delivered (SEND completed or PUT completed) */
    uint64_t delivered_bytes;
    uint64_t unexpected; /* accepted data matching no message of the peer */
    uint64_t blocked;    /* pumps that had data to push but found the window closed */
    uint32_t max_inflight;
    uint64_t released; /* segments released by ACKs (cumulative or selective) */
    int64_t segs_live;
    int64_t reasm_live; /* reassembly buffers handed out and not returned */
    uint64_t reasm_gets;
    uint32_t reasm_fail_next;       /* test hook: fail this many buffer gets */
    bool reasm_never_refuse_urgent; /* ... but never one for the fragment next in order */
    uint64_t reasm_urgent;          /* buffer gets for the fragment next in order */
    uint64_t timer_sets;            /* deadlines the core gave */
    uint64_t timer_fires;           /* times the connection's timer fired */
    uint64_t delivered_pieces;      /* fragments handed over as deferred pieces */
};

#define SIM_MAX_KNOWN 4

struct sim_ep {
    struct sim *sim;
    int idx;
    uint64_t timer_deadline; /* the core's timer (0: none) */
    uint32_t module_id;
    uint64_t key;
    struct usnic_sip_key mac_key;  /* its secret, loaded */
    struct usnic_sip_memo tx_memo; /* its MACs' memos (usnic_siphash24_memo): sealing */
    struct usnic_sip_memo rx_memo; /* and checking what arrives */
    uint32_t ack_ts_last;          /* each ACK packet is stamped later than the one before */
    uint32_t tx_isn;
    struct {
        uint64_t key;
        int ep;
    } known[SIM_MAX_KNOWN];
    unsigned nknown;

    struct usnic_rel rel;
    struct usnic_reasm_table reasm;
    struct usnic_parts parts; /* the peer's PART packets, joined */
    struct usnic_reasm_alloc alloc;
    struct usnic_reg_table reg;

    /* messages this endpoint sends */
    struct sim_msg *msgs;
    uint32_t nmsgs, msgs_cap;
    uint32_t next_msg;     /* first message not completely segmented */
    uint64_t next_off;     /* next byte of it */
    uint32_t next_wire_id; /* msg_id of the next SEND */
    uint32_t next_put_id;  /* msg_id of the next PUT */
    uint32_t rx_next;      /* index in the PEER's messages: the next SEND we expect */
    /* oracle: seq_msg[seq - tx_isn] = message carried by that segment */
    uint32_t *seq_msg;
    uint64_t nsegs, seq_cap;

    struct sim_seg *rq_head, *rq_tail;
    uint64_t link_free_ns;

    /* what this endpoint received */
    struct sim_rx_rec *rx_log;
    size_t rx_nlog, rx_cap;

    struct sim_ep_stats st;
    uint64_t drops[USNIC_DROP__COUNT];
    bool deferred;                /* its table has a deferred fragment in the current batch */
    struct usnic_rx_predict pred; /* cfg.predict */
    /* cfg.predict: datagrams that arrived while a prediction was live, from
     * another source (cfg.foreign) or asking for an ACK (cfg.ack_req) */
    uint64_t foreign_in_run, ack_req_in_run, forged_in_run;
};

/* the source every genuine datagram comes from, and cfg.foreign's */
#define SIM_SRC_PEER 0u
#define SIM_SRC_FOREIGN 0xF0E1u
#define SIM_SRC_FORGED 0xF0E2u /* (arrives as from the peer: the MAC must tell) */

struct sim_pkt {
    uint64_t t, order;
    uint64_t src; /* SIM_SRC_* */
    int to;
    size_t len;
    uint8_t *buf;
};

/* Return non-zero to drop the datagram before it reaches the link. */
typedef int (*sim_filter_fn)(struct sim *s, int from, const uint8_t *pkt, size_t len, void *arg);

struct sim {
    struct sim_cfg cfg;
    uint64_t now;
    struct sim_rng rng;
    struct sim_ep ep[2];

    struct sim_pkt **heap;
    size_t nheap, heap_cap;
    /* cfg.defer: the current batch's arrivals, kept until it ends */
    struct sim_pkt **batch;
    size_t nbatch, batch_cap, batch_len;
    uint64_t pkt_order;


    sim_filter_fn filter;
    void *filter_arg;

    uint64_t steps;
    uint64_t lost, filtered, duplicated, delayed, foreign, forged;
    uint64_t parted; /* datagrams sent as PART packets (cfg.part_max) */
    uint64_t rx_src; /* the source of the datagram being processed */
    uint64_t errors;
    char err[256];
};

void sim_cfg_default(struct sim_cfg *c);
int sim_init(struct sim *s, const struct sim_cfg *c);
void sim_fini(struct sim *s);

/* Queue a message from endpoint `from` to the other one; returns its id. */
uint32_t sim_send(struct sim *s, int from, uint64_t len, uint8_t tag);
/* Queue an emulated PUT of len (> 0) bytes into the peer's registration. */
uint32_t sim_put(struct sim *s, int from, uint64_t reg_key, uint64_t reg_offset, uint64_t len);

/* Advance to the next event and process it; false when nothing is left to happen. */
bool sim_step(struct sim *s);
/* Nothing queued, in flight, unacknowledged or owed. */
bool sim_quiescent(const struct sim *s);
/* Step until quiescent: 0, or -1 on a harness error, a stall, or passing max_ns. */
int sim_run(struct sim *s, uint64_t max_ns);

/* A raw datagram arrives at endpoint `to` at time at_ns (>= now). */
void sim_inject(struct sim *s, int to, const void *buf, size_t len, uint64_t at_ns);
/* A raw datagram arrives at endpoint `to` now, processed synchronously. */
void sim_deliver_now(struct sim *s, int to, const void *buf, size_t len);
/* Stop recognising a sender key at endpoint `at`. */
void sim_forget_sender(struct sim *s, int at, uint64_t key);
/* Write the MAC and CRC of a datagram as endpoint `from` would send it
 * (for datagrams a test builds by hand). */
void sim_seal(struct sim *s, int from, void *buf, size_t len);

/*
 * Every message queued on either endpoint was delivered exactly once with
 * the right bytes, nothing unexpected was delivered and the harness saw no
 * protocol-contract violation.  0, or -1 with the first problem in why.
 */
int sim_verify(const struct sim *s, char *why, size_t whylen);

/* Total rel.stats.retrans_timeout + retrans_fast + retrans_sack of both endpoints. */
uint64_t sim_retrans(const struct sim *s);
/* One-line summary of counters for failure messages. */
void sim_summary(const struct sim *s, char *buf, size_t len);

#endif /* USNIC_SIMLINK_H */
