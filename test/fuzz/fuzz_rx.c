/*
 * libFuzzer target over the real receive dispatch of the usnic BTL
 * (usnic_rx_dispatch() in btl_usnic_rx.h): parse, sender lookup, CRC and
 * MAC, reliability (ACK, SACK, sequence window), reassembly and in-order
 * delivery, PUT resolution against a keyed registration table.
 *
 * Every input is independent: the whole receiving transport (two known
 * peers, each with its own usnic_rel connection, send window with segments
 * in flight and reassembly table; one registration table) is built at the
 * start of the input and freed at its end.
 *
 * Input format (test/fuzz/make_corpus.c writes inputs in it):
 *
 *   byte 0        configuration (CFG_*):
 *                   bits 0-1  auth: 0 none, 1 header, 2 full, 3 mixed
 *                             (peer 0 header, peer 1 full)
 *                   bit 2     CRC32C required
 *                   bit 3     sealed: the harness writes the correct MAC and
 *                             CRC into each datagram (after its mutations),
 *                             and into the datagram a PART carries whole,
 *                             so the fuzzer reaches the logic behind them;
 *                             clear: raw bytes, exercising the rejection
 *                   bit 4     the "default" peer for the mutations is peer 1
 *                   bit 5     tag_ok says yes (to tags < 255); clear: never
 *                   bit 6     reassembly knows the sender's chunk size
 *                   bit 7     small max_msg_len (below the datagram size)
 *   then datagrams, each:
 *     2 bytes LE  bits 0-13: length (at most 9000; cut to what is left),
 *                 bits 14-15: time step before it (1 us, 100 us, 10 ms,
 *                 31 minutes: beyond the timestamps' horizon)
 *     1 byte      mutations the harness applies (MUT_*), so the fuzzer
 *                 reaches deep states without guessing 64-bit values
 *     1 byte      aux: bits 0-1 lane; bit 2 tamper (flip a byte after
 *                 sealing); bit 3 comes from the wrong source address;
 *                 bits 4-7 where to tamper (in 16ths of the datagram)
 *     length bytes: the datagram
 *
 * Each datagram is run through usnic_rx_dispatch() from an exact-size heap
 * copy (so AddressSanitizer sees any over-read), and every check below
 * traps (__builtin_trap) on violation:
 *   - the return value is a valid drop reason the dispatch may return, and
 *     matches what our own usnic_pkt_parse() and lookup said;
 *   - exactly one drop callback with that reason when not OK, none when OK;
 *     ep NULL in it exactly when the sender was not known;
 *   - nothing delivered, written or accepted when not OK; a committed
 *     sequence number is a duplicate afterwards, a rejected new one is not;
 *   - the CRC/MAC verdict equals an independent computation of what the
 *     wire format (btl_usnic_proto.h) says they cover; in particular with
 *     auth and raw (not sealed) datagrams nothing is accepted unless it
 *     carries the true MAC of its bytes (see raw_true_mac below);
 *   - delivered fragments: tag accepted by tag_ok, length within
 *     max_msg_len (or the datagram itself, for a FRAG handed over straight
 *     from it), in the sender's order, bytes equal to what the accepted
 *     packets carried, complete when the chunk size is known;
 *   - every PUT lands inside the live registration its key names (never
 *     the removed one), guard bytes after every buffer untouched;
 *   - PART packets (btl_usnic_part.h) are joined in each peer's parts
 *     table: a part is never committed, delivered or acknowledged by
 *     itself, and passes only what every packet passes (sender, CRC, MAC,
 *     lane) plus a new sequence number inside the window; the datagram
 *     they complete is dispatched again from the start, and every check
 *     here holds for it as for one that arrived whole (its sender, CRC,
 *     MAC and window verdicts computed when its lookup comes);
 *   - a peer's allowance (rel.tx.allow, the header's allow field) changes
 *     only with a datagram from that peer that passed its MAC, to the
 *     value that datagram carries, and never with an old ACK packet (a
 *     copy or a replay);
 *   - reliability: tx.acked only moves forward and stays before tx.next,
 *     in-flight within the window, rx.expected only moves forward (within
 *     one window), rx.highest >= rx.expected - 1, window slots consistent,
 *     every segment released exactly once and only once acknowledged,
 *     released counts agree, timers never set in the past;
 *   - statistics never go backwards;
 *   - LeakSanitizer: everything is freed at the end of the input.
 *
 * Set FUZZ_RX_VERBOSE=1 to print each datagram's verdict, FUZZ_RX_STATS=1
 * for counters at exit.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btl_usnic_auth.h"
#include "btl_usnic_part.h"
#include "btl_usnic_proto.h"
#include "btl_usnic_reasm.h"
#include "btl_usnic_reg.h"
#include "btl_usnic_rel.h"
#include "btl_usnic_rx.h"

/* ---------------------------------------------------------------- input format */

#define CFG_AUTH_MASK 0x03u
#define CFG_CRC 0x04u
#define CFG_SEALED 0x08u
#define CFG_PEER1 0x10u
#define CFG_TAG_OK 0x20u
#define CFG_CHUNK 0x40u
#define CFG_SMALL 0x80u

#define MUT_KEY 0x01u   /* sender_key, src_module := the peer's */
#define MUT_SEQ 0x02u   /* seq := rx.expected + (int8) seq */
#define MUT_ACK 0x04u   /* ack_seq := tx.acked + (int8) ack_seq; ts_echo := ping if bit 8 */
#define MUT_PUT 0x08u   /* reg_key := registration key number (reg_key & 0xff) % NKEYS */
#define MUT_MSGID 0x10u /* msg_id := reasm.next + (int8) msg_id */
#define MUT_LEN 0x20u   /* version, lane, reserved, payload_len (and an ACK's msg_id) made right */
#define MUT_TS 0x40u    /* ts := a fresh stamp */
#define MUT_OTHER 0x80u /* the mutations use the other peer */

#define AUX_LANE 0x03u
#define AUX_TAMPER 0x04u
#define AUX_BADSRC 0x08u
/* without AUX_TAMPER, bit 4 (else the tamper position's) lets chunks be
 * deferred (usnic_rx_params.defer); the tables are materialized right
 * after the dispatch, before the datagram's buffer goes */
#define AUX_DEFER 0x10u

#define MAX_DGRAM 9000u

/* ---------------------------------------------------------------- the transport */

#define NPEERS 2
#define TX_WIN 16
#define RX_WIN 32
#define REASM_SLOTS 32
#define POOL_BUFS 6 /* reassembly buffers per peer before only urgent ones are given */
#define CHUNK_SIZE 200
#define MAX_MSG_LARGE (1u << 17) /* more than USNIC_REASM_MAX_CHUNKS chunks of CHUNK_SIZE */
#define MAX_MSG_SMALL 1024u
#define INFLIGHT_TARGET 10
#define ACK_DELAY 50 /* us: an explicit ACK goes once one was owed this long */
#define JOB_SIZE 4
#define OWN_VPID 2
#define GUARD 32
#define GUARD_BYTE 0xCB
#define STALE_BYTE 0x5E
#define POISON_BYTE 0xA5
#define SEG_MAGIC 0x5E65u

static const uint64_t REG_LEN[] = {1, 64, 1000, 4096};
#define NREGS (sizeof(REG_LEN) / sizeof(REG_LEN[0]))
#define STALE_LEN 512u
#define NKEYS (NREGS + 1) /* the live ones, then the removed one */

struct fz;

struct fz_seg {
    struct usnic_rel_seg rel;
    uint32_t magic;
    bool queued; /* on our resend queue */
};

#define SEG_OF(p) ((struct fz_seg *) (void *) ((char *) (p) -offsetof(struct fz_seg, rel)))

/* What the harness knows of a fragment under reassembly (from the packets accepted). */
struct fz_shadow {
    bool active;
    uint32_t msg_id;
    uint8_t tag;
    uint64_t msg_len;
    uint64_t sum; /* payload bytes accepted */
    uint8_t *data;
    uint8_t *written;
};

struct fz_buf {
    uint8_t *p;
    uint64_t len;
    bool extra; /* given beyond the pool, for the fragment next in order */
};

struct fz_peer {
    struct fz *fz;
    int idx;
    uint64_t key;
    uint32_t module;
    struct usnic_sip_key mac;
    struct usnic_sip_memo memo; /* the receiver's, for this peer's MACs */
    int auth;
    bool crc;
    bool rel_ok, reasm_ok;
    struct usnic_rel rel;
    struct usnic_reasm_table reasm;
    struct usnic_parts parts;
    struct usnic_reasm_alloc alloc;
    struct fz_buf bufs[REASM_SLOTS + 1];
    unsigned pool_live, extra_live;
    struct fz_shadow shadow[REASM_SLOTS];
    uint64_t deadline; /* the core's timer (0: none) */
    uint32_t pings;
    uint64_t delivered;
    uint32_t pushed; /* segments ever pushed into the send window */
};

struct fz_reg {
    uint8_t *buf; /* len + GUARD bytes */
    uint64_t len;
    uint64_t key;
    bool live;
};

/* What one dispatch did, as seen through the callbacks. */
struct fz_cur {
    bool active;
    bool defer; /* the dispatch may defer chunks (AUX_DEFER) */
    const uint8_t *buf;
    size_t len;
    bool parsed; /* our own usnic_pkt_parse() said OK */
    struct usnic_pkt_view v;
    bool bad_src;
    unsigned lookups;
    enum usnic_drop_reason lookup_why;
    struct fz_peer *peer; /* the sender, when known */
    unsigned drops;
    enum usnic_drop_reason drop_why;
    void *drop_ep;
    unsigned delivers, put_writes, accepteds, ack_rxs, ack_scheds, resolves;
    int released;      /* sum of the rx ops' acked() */
    int rel_acked;     /* segments released through the rel ops */
    bool applied;      /* the packet's chunk was entered into its shadow */
    bool authed;       /* it (the whole datagram of a join) passed sender, CRC, MAC and lane */
    bool ack_stale;    /* an ACK packet not newer than the last of its lane (a copy, a replay) */
    uint8_t *put_dest; /* what put_resolve gave */
    /* A PART that completed its datagram: the dispatch of the whole one
     * looks its sender up again (usnic_rx_part).  From then on buf, len,
     * v and peer are the whole datagram's, these the PART's ... */
    bool joined;
    bool whole_refused; /* the datagram it completed did not parse */
    struct usnic_pkt_view part_v;
    struct fz_peer *part_peer;
    /* ... and these what the whole one's checks must say */
    struct fz_peer *whole_known;
    bool whole_crc_ok, whole_mac_ok;
    enum usnic_rx_verdict whole_verdict;
};

struct fz {
    uint8_t cfg;
    bool sealed, tag_ok;
    uint64_t max_msg_len;
    uint64_t now;
    uint32_t ts_ctr;
    struct fz_peer peer[NPEERS];
    struct usnic_reg_table regs;
    bool regs_ok;
    struct fz_reg reg[NKEYS];
    struct fz_cur cur;
    /* header prediction, kept from datagram to datagram for the whole
     * input (longer than the BTL keeps it: one receive batch) */
    struct usnic_rx_predict pred;
};

/* ---------------------------------------------------------------- failures and stats */

static int verbose = -1;

static struct {
    uint64_t inputs, dgrams, ok[8], drops[USNIC_DROP__COUNT], delivered, reassembled, put_writes,
        released, raw_true_mac, timers, resends, deferred, predicted, parts, joined, allows,
        inner_sealed, joined_mac;
} stats;

static void print_stats(void)
{
    fprintf(stderr,
            "fuzz_rx stats: inputs %" PRIu64 " datagrams %" PRIu64 " ok ACK %" PRIu64
            " FRAG %" PRIu64 " CHUNK %" PRIu64 " PUT %" PRIu64 " delivered %" PRIu64
            " (reassembled %" PRIu64 ") put_writes %" PRIu64 " released %" PRIu64 " timers %" PRIu64
            " resends %" PRIu64 " raw-with-true-MAC %" PRIu64 " deferred %" PRIu64
            " predicted %" PRIu64 " parts %" PRIu64 " joined %" PRIu64 " allow changes %" PRIu64
            " inner sealed %" PRIu64 " joined with a MAC %" PRIu64 "\n",
            stats.inputs, stats.dgrams, stats.ok[USNIC_PKT_ACK], stats.ok[USNIC_PKT_FRAG],
            stats.ok[USNIC_PKT_CHUNK], stats.ok[USNIC_PKT_PUT], stats.delivered, stats.reassembled,
            stats.put_writes, stats.released, stats.timers, stats.resends, stats.raw_true_mac,
            stats.deferred, stats.predicted, stats.parts, stats.joined, stats.allows,
            stats.inner_sealed, stats.joined_mac);
    for (int r = 1; r < USNIC_DROP__COUNT; r++) {
        if (stats.drops[r]) {
            fprintf(stderr, "  drop %-12s %" PRIu64 "\n",
                    usnic_drop_reason_name((enum usnic_drop_reason) r), stats.drops[r]);
        }
    }
}

static void fz_fail(const char *what, int line)
{
    fprintf(stderr, "fuzz_rx.c:%d: invariant violated: %s\n", line, what);
    __builtin_trap();
}

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fz_fail(#c, __LINE__);                                                                 \
        }                                                                                          \
    } while (0)

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (NULL == p) {
        fprintf(stderr, "fuzz_rx: out of memory\n");
        abort();
    }
    return p;
}

/* ---------------------------------------------------------------- independent integrity */

/* CRC32C, bit-reflected polynomial 0x82F63B78 (RFC 3720), by a byte table of our own. */
static uint32_t crc_tab[256];

static void crc_tab_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) {
            c = (c & 1u) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        }
        crc_tab[i] = c;
    }
}

static uint32_t crc_run(uint32_t crc, const uint8_t *p, size_t n)
{
    crc = ~crc;
    for (size_t i = 0; i < n; i++) {
        crc = crc_tab[(crc ^ p[i]) & 0xffu] ^ (crc >> 8);
    }
    return ~crc;
}

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t) p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16 | (uint32_t) p[3] << 24;
}

static uint64_t rd64(const uint8_t *p)
{
    return (uint64_t) rd32(p) | (uint64_t) rd32(p + 4) << 32;
}

static void wr32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) {
        p[i] = (uint8_t) (v >> (8 * i));
    }
}

static void wr64(uint8_t *p, uint64_t v)
{
    wr32(p, (uint32_t) v);
    wr32(p + 4, (uint32_t) (v >> 32));
}

/* The CRC field's value: CRC32C of the datagram without its bytes [44, 48). */
static uint32_t oracle_crc(const uint8_t *b, size_t len)
{
    return crc_run(crc_run(0, b, USNIC_CRC_OFFSET), b + USNIC_MAC_OFFSET, len - USNIC_MAC_OFFSET);
}

/* The MAC field's value (protocol 5 and 6): the fields of header [0, 44) and of
 * the chunk/PUT headers in the MAC's order (those successive datagrams
 * share first: [0, 20), lane and reserved, msg_len, the PUT header; then
 * msg_id, seq, ts, ack_seq, ts_echo, the chunk offset), an ACK's bitmap,
 * and with auth 2 the rest (a parsed datagram). */
static uint64_t oracle_mac(const uint8_t *b, size_t len, const struct usnic_sip_key *k, int auth)
{
    const size_t hdr = sizeof(struct usnic_pkt_hdr);
    bool chunk = (USNIC_PKT_CHUNK == b[1] || USNIC_PKT_PUT == b[1] || USNIC_PKT_PART == b[1]);
    size_t h = hdr;
    struct usnic_sip_state s;

    usnic_sip_init(&s, k);
    usnic_sip_update(&s, b, 20);     /* version .. src_module */
    usnic_sip_update(&s, b + 40, 4); /* lane, reserved */
    if (chunk) {
        usnic_sip_update(&s, b + hdr, 8); /* msg_len */
        h += sizeof(struct usnic_chunk_hdr);
    }
    if (USNIC_PKT_PUT == b[1]) {
        usnic_sip_update(&s, b + h, sizeof(struct usnic_put_hdr));
        h += sizeof(struct usnic_put_hdr);
    }
    usnic_sip_update(&s, b + 28, 4); /* msg_id */
    usnic_sip_update(&s, b + 20, 4); /* seq */
    usnic_sip_update(&s, b + 32, 4); /* ts */
    usnic_sip_update(&s, b + 24, 4); /* ack_seq */
    usnic_sip_update(&s, b + 36, 4); /* ts_echo */
    if (chunk) {
        usnic_sip_update(&s, b + hdr + 8, 8); /* offset */
    }
    if (USNIC_PKT_ACK == b[1]) {
        usnic_sip_update(&s, b + hdr, len - hdr); /* the SACK bitmap */
        h = len;
    }
    if (2 == auth) {
        usnic_sip_update(&s, b + h, len - h);
    }
    return usnic_sip_final(&s);
}

/* ---------------------------------------------------------------- reliability ops */

static struct fz_peer *peer_of(struct usnic_rel *rel)
{
    return rel->ctx;
}

static void check_seg(const struct fz_seg *s)
{
    CHECK(SEG_MAGIC == s->magic);
}

static void op_resend(struct usnic_rel *rel, struct usnic_rel_seg *rseg)
{
    struct fz_seg *s = SEG_OF(rseg);
    (void) rel;

    check_seg(s);
    CHECK(!s->queued);
    CHECK(rseg->state & USNIC_REL_SEG_IN_WINDOW);
    CHECK(rseg->state & USNIC_REL_SEG_RESEND);
    s->queued = true;
}

static void op_resend_cancel(struct usnic_rel *rel, struct usnic_rel_seg *rseg)
{
    struct fz_seg *s = SEG_OF(rseg);
    (void) rel;

    check_seg(s);
    CHECK(s->queued);
    s->queued = false;
}

static void op_acked(struct usnic_rel *rel, struct usnic_rel_seg *rseg)
{
    struct fz_peer *p = peer_of(rel);
    struct fz_seg *s = SEG_OF(rseg);

    check_seg(s);
    CHECK(!s->queued);
    CHECK(0 == rseg->state);
    /* acknowledged now: the cumulative edge reached it, or a SACK beyond it */
    CHECK(usnic_seq_ge(rseg->seq, rel->tx.acked) && usnic_seq_lt(rseg->seq, rel->tx.next));
    CHECK(rel->tx.win[rseg->seq & (rel->tx.win_size - 1u)] != rseg);
    CHECK(p->fz->cur.active); /* only ACKs release, and they only come through the dispatch */
    p->fz->cur.rel_acked++;
    stats.released++;
    s->magic = 0;
    free(s); /* any later use by the core is a use-after-free */
}

static void op_timer_set(struct usnic_rel *rel, uint64_t deadline)
{
    struct fz_peer *p = peer_of(rel);

    CHECK(0 == deadline || deadline >= p->fz->now);
    p->deadline = deadline;
}

static void op_probe(struct usnic_rel *rel, uint8_t lane, uint32_t ts)
{
    struct fz_peer *p = peer_of(rel);

    CHECK(lane < USNIC_REL_LANES);
    CHECK(0 != ts);
    p->pings++;
}

static const struct usnic_rel_ops fz_rel_ops = {
    .resend = op_resend,
    .resend_cancel = op_resend_cancel,
    .acked = op_acked,
    .timer_set = op_timer_set,
    .probe = op_probe,
};

/* ---------------------------------------------------------------- reassembly buffers */

static void *buf_get(void *ctx, uint64_t len, bool urgent, void **handle)
{
    struct fz_peer *p = ctx;
    struct fz_buf *b = NULL;
    bool extra = false;

    *handle = NULL;
    CHECK(p->fz->cur.active);
    if (len > p->fz->max_msg_len) {
        return NULL; /* as the BTL's allocator */
    }
    if (p->pool_live >= POOL_BUFS) {
        if (!urgent) {
            return NULL;
        }
        extra = true;
    }
    for (unsigned i = 0; i < sizeof(p->bufs) / sizeof(p->bufs[0]); i++) {
        if (NULL == p->bufs[i].p) {
            b = &p->bufs[i];
            break;
        }
    }
    CHECK(NULL != b); /* more buffers out than slots in the table */
    b->p = xmalloc((size_t) len);
    memset(b->p, POISON_BYTE, len ? (size_t) len : 1);
    b->len = len;
    b->extra = extra;
    if (extra) {
        p->extra_live++;
        /* only the fragment next in order gets one: never two at once */
        CHECK(p->extra_live <= 1);
    } else {
        p->pool_live++;
    }
    *handle = b;
    return b->p;
}

static void buf_put(void *ctx, void *buf, void *handle)
{
    struct fz_peer *p = ctx;
    struct fz_buf *b = handle;

    CHECK(NULL != b && b >= p->bufs && b < p->bufs + sizeof(p->bufs) / sizeof(p->bufs[0]));
    CHECK(b->p == buf && NULL != buf);
    free(b->p);
    b->p = NULL;
    if (b->extra) {
        p->extra_live--;
    } else {
        p->pool_live--;
    }
}

static const struct fz_buf *buf_find(const struct fz_peer *p, const void *ptr)
{
    for (unsigned i = 0; i < sizeof(p->bufs) / sizeof(p->bufs[0]); i++) {
        if (NULL != p->bufs[i].p && p->bufs[i].p == ptr) {
            return &p->bufs[i];
        }
    }
    return NULL;
}

/* ---------------------------------------------------------------- shadow of reassembly */

static struct fz_shadow *shadow_of(struct fz_peer *p, uint32_t msg_id)
{
    return &p->shadow[msg_id & (REASM_SLOTS - 1u)];
}

static void shadow_free(struct fz_shadow *sh)
{
    free(sh->data);
    free(sh->written);
    memset(sh, 0, sizeof(*sh));
}

/* Enter the current packet (an accepted FRAG held or CHUNK) into its shadow. */
static void shadow_apply(struct fz *f)
{
    const struct fz_cur *c = &f->cur;
    const struct usnic_pkt_hdr *h = c->v.hdr;
    struct fz_shadow *sh = shadow_of(c->peer, h->msg_id);
    uint64_t msg_len, off;

    if (USNIC_PKT_FRAG == h->type) {
        msg_len = c->v.payload_len;
        off = 0;
    } else {
        msg_len = c->v.chunk->msg_len;
        off = c->v.chunk->offset;
    }
    if (!sh->active) {
        sh->active = true;
        sh->msg_id = h->msg_id;
        sh->tag = h->tag;
        sh->msg_len = msg_len;
        sh->sum = 0;
        sh->data = xmalloc((size_t) msg_len);
        sh->written = calloc(msg_len ? (size_t) msg_len : 1, 1);
        CHECK(NULL != sh->written);
    }
    /* the table took it: it must be this fragment's, and consistent */
    CHECK(sh->msg_id == h->msg_id);
    CHECK(sh->msg_len == msg_len);
    CHECK(sh->tag == h->tag);
    CHECK(off + c->v.payload_len <= msg_len);
    if (c->v.payload_len) {
        memcpy(sh->data + off, c->v.payload, c->v.payload_len);
        memset(sh->written + off, 1, c->v.payload_len);
    }
    sh->sum += c->v.payload_len;
}

/* ---------------------------------------------------------------- rx ops */

static void push_seg(struct fz *f, struct fz_peer *p, uint8_t lane, unsigned sends);

/* The PML answers some fragments (odd tags) from its callback: a new
 * segment goes out, carrying our ACK, in the middle of the dispatch. */
static void pml_reply(struct fz *f, struct fz_peer *p, uint8_t tag)
{
    if ((tag & 1u) && usnic_rel_tx_window_open(&p->rel)) {
        push_seg(f, p, (uint8_t) (tag % USNIC_REL_LANES), 1);
        usnic_rel_ack_sent(&p->rel); /* piggy-backed */
    }
}

/* What the connection's CRC and MAC must say of datagram b (parsed as v)
 * from the known peer, computed independently, and its window verdict. */
static void oracle_checks(const uint8_t *b, size_t len, const struct usnic_pkt_view *v,
                          struct fz_peer *known, bool *crc_ok, bool *mac_ok,
                          enum usnic_rx_verdict *verdict)
{
    size_t sealed = len;

    if (0 != (v->hdr->flags & USNIC_PKT_FLAG_PAD)) {
        /* version 6: padding after the payload is in neither */
        sealed = usnic_pkt_hdr_len(v->hdr->type) + rd32(b + 4);
    }
    *crc_ok = !known->crc || rd32(b + USNIC_CRC_OFFSET) == oracle_crc(b, sealed);
    *mac_ok = 0 == known->auth ||
              rd64(b + USNIC_MAC_OFFSET) == oracle_mac(b, sealed, &known->mac, known->auth);
    *verdict = USNIC_RX_NEW;
    if (USNIC_PKT_ACK != v->hdr->type) {
        *verdict = usnic_rel_rx_check(&known->rel, v->hdr->seq);
    }
}

/* The peer whose key a header names (NULL: none of them). */
static struct fz_peer *peer_named(struct fz *f, const struct usnic_pkt_hdr *hdr)
{
    for (int i = 0; i < NPEERS; i++) {
        if (hdr->sender_key == f->peer[i].key) {
            return &f->peer[i];
        }
    }
    return NULL;
}

/* The second lookup of a dispatch: the PART being dispatched completed its
 * datagram, and the whole one at hdr goes through the dispatch again. */
static void join_begin(struct fz *f, const struct usnic_pkt_hdr *hdr)
{
    struct fz_cur *c = &f->cur;

    CHECK(1 == c->lookups && !c->joined && c->parsed && USNIC_PKT_PART == c->v.hdr->type);
    CHECK(NULL != c->peer && USNIC_PKT_OK == c->lookup_why);
    c->joined = true;
    c->part_v = c->v;
    c->part_peer = c->peer;
    c->peer = NULL;
    c->buf = (const uint8_t *) hdr;
    c->len = (size_t) c->part_v.chunk->msg_len;
    /* it was parsed before its lookup, with the same limits */
    CHECK(USNIC_PKT_OK == usnic_pkt_parse(c->buf, c->len, f->max_msg_len, &c->v));
    CHECK(USNIC_PKT_PART != c->v.hdr->type); /* parts of parts are refused before */
    c->whole_known = peer_named(f, c->v.hdr);
    c->whole_crc_ok = c->whole_mac_ok = true;
    c->whole_verdict = USNIC_RX_NEW;
    if (NULL != c->whole_known) {
        oracle_checks(c->buf, c->len, &c->v, c->whole_known, &c->whole_crc_ok, &c->whole_mac_ok,
                      &c->whole_verdict);
    }
    stats.joined++;
}

static enum usnic_drop_reason rx_lookup(void *t, const struct usnic_pkt_hdr *hdr,
                                        struct usnic_rx_conn *c)
{
    struct fz *f = t;

    CHECK(f->cur.active);
    if (0 != f->cur.lookups) {
        join_begin(f, hdr);
    }
    CHECK((const uint8_t *) hdr == f->cur.buf);
    f->cur.lookups++;
    for (int i = 0; i < NPEERS; i++) {
        struct fz_peer *p = &f->peer[i];
        if (hdr->sender_key == p->key) {
            if (f->cur.bad_src) {
                f->cur.lookup_why = USNIC_DROP_ADDRESS;
                return USNIC_DROP_ADDRESS;
            }
            c->rel = &p->rel;
            c->reasm = &p->reasm;
            c->parts = &p->parts;
            c->ep = p;
            c->predict = true;
            c->key = &p->mac;
            c->memo = &p->memo;
            c->auth = p->auth;
            c->crc = p->crc;
            f->cur.peer = p;
            f->cur.lookup_why = USNIC_PKT_OK;
            return USNIC_PKT_OK;
        }
    }
    /* a process of our job whose record we have not fetched yet */
    f->cur.lookup_why = ((hdr->src_module >> 8) < JOB_SIZE && (hdr->src_module >> 8) != OWN_VPID)
                            ? USNIC_DROP_PENDING
                            : USNIC_DROP_SENDER;
    return f->cur.lookup_why;
}

static bool rx_tag_ok(void *t, uint8_t tag)
{
    struct fz *f = t;
    CHECK(f->cur.active && NULL != f->cur.peer);
    return f->tag_ok && tag < 255;
}

static void rx_deliver(void *t, void *ep, uint8_t tag, const void *data, uint64_t len)
{
    struct fz *f = t;
    struct fz_cur *c = &f->cur;
    struct fz_peer *p = ep;
    uint32_t msg_id;
    struct fz_shadow *sh;
    const uint8_t *d = data;

    CHECK(c->active && NULL != c->peer && p == c->peer);
    CHECK(f->tag_ok && tag < 255);
    c->delivers++;
    p->delivered++;
    stats.delivered++;
    /* usnic_reasm_skip() / usnic_reasm_pop() moved next past it */
    msg_id = p->reasm.next - 1u;
    sh = shadow_of(p, msg_id);
    if (d == c->buf + sizeof(struct usnic_pkt_hdr) && USNIC_PKT_FRAG == c->v.hdr->type &&
        !c->applied && c->v.hdr->msg_id == msg_id) {
        /* a FRAG handed over straight from its datagram */
        CHECK(len == c->v.payload_len);
        CHECK(tag == c->v.hdr->tag);
        CHECK(!sh->active);
        c->applied = true;
        pml_reply(f, p, tag);
        return;
    }
    /* from a reassembly buffer: ours, live, big enough, within max_msg_len */
    stats.reassembled++;
    {
        const struct fz_buf *b = buf_find(p, data);
        CHECK(NULL != b);
        CHECK(len <= b->len || (0 == len && 0 == b->len));
    }
    CHECK(len <= f->max_msg_len);
    if (!c->applied && (USNIC_PKT_FRAG == c->v.hdr->type || USNIC_PKT_CHUNK == c->v.hdr->type) &&
        c->v.hdr->msg_id == msg_id) {
        shadow_apply(f); /* the packet being dispatched completed it */
        c->applied = true;
    }
    CHECK(sh->active && sh->msg_id == msg_id);
    CHECK(sh->msg_len == len);
    CHECK(sh->tag == tag);
    CHECK(sh->sum >= len); /* complete: at least as many bytes arrived */
    for (uint64_t i = 0; i < len; i++) {
        if (sh->written[i]) {
            CHECK(d[i] == sh->data[i]);
        } else {
            /* a hole: only possible when chunks are not tracked one by one */
            CHECK(0 == p->reasm.chunk ||
                  (len + CHUNK_SIZE - 1) / CHUNK_SIZE > USNIC_REASM_MAX_CHUNKS);
        }
    }
    shadow_free(sh);
    pml_reply(f, p, tag);
}

static const struct fz_reg *reg_by_key(const struct fz *f, uint64_t key)
{
    for (unsigned i = 0; i < NKEYS; i++) {
        if (f->reg[i].key == key) {
            return &f->reg[i];
        }
    }
    return NULL;
}

static enum usnic_drop_reason rx_put_resolve(void *t, uint64_t key, uint64_t reg_offset,
                                             uint64_t len, uint8_t **dest)
{
    struct fz *f = t;
    enum usnic_drop_reason why;
    const struct fz_reg *r;

    CHECK(f->cur.active && NULL != f->cur.peer);
    CHECK(USNIC_PKT_PUT == f->cur.v.hdr->type);
    f->cur.resolves++;
    why = usnic_reg_resolve(&f->regs, key, reg_offset, len, dest);
    CHECK(USNIC_PKT_OK == why || USNIC_DROP_PUT_RANGE == why);
    r = reg_by_key(f, key);
    if (USNIC_PKT_OK == why) {
        /* exactly the registration the key names, and the whole PUT inside it */
        CHECK(NULL != r && r->live);
        CHECK(reg_offset <= r->len && len <= r->len - reg_offset);
        CHECK(*dest == r->buf + reg_offset);
        f->cur.put_dest = *dest;
    } else if (NULL != r && r->live) {
        CHECK(!(reg_offset <= r->len && len <= r->len - reg_offset)); /* fits, yet refused */
    }
    return why;
}

static void rx_put_write(void *t, void *ep, uint8_t *dest, const struct usnic_pkt_view *v)
{
    struct fz *f = t;
    struct fz_cur *c = &f->cur;
    bool inside = false;

    CHECK(c->active && ep == c->peer && NULL != c->put_dest);
    CHECK(v->hdr == c->v.hdr && NULL != v->chunk && NULL != v->put);
    CHECK(dest == c->put_dest + v->chunk->offset);
    for (unsigned i = 0; i < NREGS; i++) {
        const struct fz_reg *r = &f->reg[i];
        if (r->live && dest >= r->buf && dest <= r->buf + r->len &&
            v->payload_len <= (uint64_t) (r->buf + r->len - dest)) {
            inside = true;
        }
    }
    CHECK(inside);
    c->put_writes++;
    stats.put_writes++;
    memcpy(dest, v->payload, v->payload_len);
}

static void rx_acked(void *t, void *ep, int released)
{
    struct fz *f = t;
    CHECK(f->cur.active && ep == f->cur.peer);
    CHECK(released > 0);
    f->cur.released += released;
}

static void rx_accepted(void *t, void *ep, uint32_t payload_len)
{
    struct fz *f = t;
    CHECK(f->cur.active && ep == f->cur.peer);
    CHECK(USNIC_PKT_ACK != f->cur.v.hdr->type);
    CHECK(payload_len == f->cur.v.payload_len);
    f->cur.accepteds++;
}

static void rx_ack_schedule(void *t, void *ep)
{
    struct fz *f = t;
    CHECK(f->cur.active && ep == f->cur.peer);
    f->cur.ack_scheds++;
}

static void rx_drop(void *t, void *ep, enum usnic_drop_reason why)
{
    struct fz *f = t;
    CHECK(f->cur.active);
    if (NULL == ep && NULL != f->cur.peer && !f->cur.joined && f->cur.parsed &&
        USNIC_PKT_PART == f->cur.v.hdr->type) {
        /* a PART completed its datagram, which its own parse refused
         * before any sender was looked up for it */
        f->cur.whole_refused = true;
    } else {
        CHECK(ep == (void *) f->cur.peer);
    }
    f->cur.drops++;
    f->cur.drop_why = why;
    f->cur.drop_ep = ep;
}

static void rx_ack_rx(void *t, void *ep, bool fresh)
{
    struct fz *f = t;
    CHECK(f->cur.active && ep == f->cur.peer);
    CHECK(USNIC_PKT_ACK == f->cur.v.hdr->type);
    f->cur.ack_rxs++;
    f->cur.ack_stale = !fresh;
}

static void rx_deferred(void *t, void *ep, struct usnic_reasm_table *reasm)
{
    struct fz *f = t;
    struct fz_peer *p = ep;

    CHECK(f->cur.active && p == f->cur.peer && reasm == &p->reasm);
    CHECK(f->cur.defer && USNIC_PKT_CHUNK == f->cur.v.hdr->type && 0 == f->cur.v.chunk->offset);
    stats.deferred++;
}

static const struct usnic_rx_ops fz_rx_ops = {
    .lookup = rx_lookup,
    .tag_ok = rx_tag_ok,
    .deliver = rx_deliver,
    .deferred = rx_deferred,
    .put_resolve = rx_put_resolve,
    .put_write = rx_put_write,
    .acked = rx_acked,
    .accepted = rx_accepted,
    .ack_schedule = rx_ack_schedule,
    .drop = rx_drop,
    .ack_rx = rx_ack_rx,
};

/* ---------------------------------------------------------------- invariants */

#define NSTATS (sizeof(struct usnic_rel_stats) / sizeof(uint64_t))

struct fz_snap {
    usnic_seq_t next, acked, expected;
    uint32_t allow;
    uint32_t reasm_next;
    uint64_t waited;
    uint64_t st[NSTATS];
    uint64_t delivered;
    uint32_t pushed;
};

static void snap(const struct fz_peer *p, struct fz_snap *s)
{
    s->next = p->rel.tx.next;
    s->acked = p->rel.tx.acked;
    s->allow = p->rel.tx.allow;
    s->expected = p->rel.rx.expected;
    s->reasm_next = p->reasm.next;
    s->waited = p->reasm.waited;
    memcpy(s->st, &p->rel.stats, sizeof(s->st));
    s->delivered = p->delivered;
    s->pushed = p->pushed;
}

static void check_peer(const struct fz_peer *p, const struct fz_snap *b)
{
    const struct usnic_rel *r = &p->rel;
    uint64_t st[NSTATS];
    uint32_t txmask = r->tx.win_size - 1u, rxmask = r->rx.win_size - 1u;

    /* the send window: [acked+1, next-1], at most win_size */
    /* only the PML's replies from its callbacks send new data */
    CHECK((uint32_t) (r->tx.next - b->next) == p->pushed - b->pushed);
    CHECK(usnic_seq_lt(r->tx.acked, r->tx.next));
    CHECK(usnic_seq_ge(r->tx.acked, b->acked));
    CHECK(usnic_rel_tx_inflight(r) <= r->tx.win_size);
    for (uint32_t i = 0; i < r->tx.win_size; i++) {
        const struct usnic_rel_seg *seg = r->tx.win[i];
        if (NULL != seg) {
            check_seg(SEG_OF(seg));
            CHECK((seg->seq & txmask) == i);
            CHECK(usnic_seq_gt(seg->seq, r->tx.acked) && usnic_seq_lt(seg->seq, r->tx.next));
            CHECK(seg->state & USNIC_REL_SEG_IN_WINDOW);
            CHECK(!!(seg->state & USNIC_REL_SEG_RESEND) == SEG_OF(seg)->queued);
        }
    }
    /* the receive window */
    CHECK(usnic_seq_ge(r->rx.expected, b->expected));
    CHECK((uint32_t) (r->rx.expected - b->expected) <= r->rx.win_size);
    CHECK(usnic_seq_ge(r->rx.highest, r->rx.expected - 1u));
    CHECK(usnic_seq_diff(r->rx.highest, r->rx.expected) < (int32_t) r->rx.win_size);
    CHECK(0 == r->rx.seen[r->rx.expected & rxmask]);
    for (uint32_t k = 0; k < r->rx.win_size; k++) {
        usnic_seq_t s = r->rx.expected + k;
        if (r->rx.seen[s & rxmask]) {
            CHECK(usnic_seq_le(s, r->rx.highest));
        }
    }
    /* fragments are handed over in order, never taken back */
    CHECK(usnic_seq_ge(p->reasm.next, b->reasm_next));
    CHECK(p->reasm.waited >= b->waited);
    CHECK(p->delivered - b->delivered == (uint64_t) (uint32_t) (p->reasm.next - b->reasm_next));
    /* statistics never go backwards */
    memcpy(st, &r->stats, sizeof(st));
    for (size_t i = 0; i < NSTATS; i++) {
        CHECK(st[i] >= b->st[i]);
    }
    CHECK(p->extra_live <= 1 && p->pool_live <= POOL_BUFS);
}

static void check_regs(const struct fz *f)
{
    for (unsigned i = 0; i < NKEYS; i++) {
        const struct fz_reg *r = &f->reg[i];
        for (unsigned k = 0; k < GUARD; k++) {
            CHECK(GUARD_BYTE == r->buf[r->len + k]);
        }
        if (!r->live) {
            for (uint64_t k = 0; k < r->len; k++) {
                CHECK(STALE_BYTE == r->buf[k]); /* a removed registration is never written */
            }
        }
    }
    CHECK(f->regs.count == NREGS);
}

/* ---------------------------------------------------------------- the sender side */

static void push_seg(struct fz *f, struct fz_peer *p, uint8_t lane, unsigned sends)
{
    struct fz_seg *s = xmalloc(sizeof(*s));

    memset(s, 0, sizeof(*s));
    s->magic = SEG_MAGIC;
    (void) usnic_rel_tx_push(&p->rel, &s->rel);
    p->pushed++;
    s->rel.lane = lane;
    for (unsigned i = 0; i < sends; i++) {
        usnic_rel_tx_sent(&p->rel, &s->rel, f->now);
    }
    if (0 == sends) {
        usnic_rel_tx_send_failed(&p->rel, &s->rel);
        CHECK(s->queued);
    }
}

/* The ACK the transport would send now: the last in-order number, and
 * SACK words of exactly the numbers received beyond the gap, the last word
 * not empty, "more" exactly when something arrived beyond the words. */
static void check_ack(const struct fz_peer *p)
{
    const struct usnic_rel *r = &p->rel;
    uint64_t bits = usnic_rel_rx_sack_bits(r);
    uint64_t w[USNIC_REL_SACK_WORDS_MAX];
    bool more;
    unsigned n = usnic_rel_rx_sack(r, w, USNIC_REL_SACK_WORDS_MAX, &more);
    usnic_seq_t ack = usnic_rel_rx_ack_value(r);
    const uint32_t all = USNIC_REL_SACK_WORD_BITS * USNIC_REL_SACK_WORDS_MAX;

    CHECK(ack == r->rx.expected - 1u);
    CHECK(usnic_rel_rx_check(r, ack) == USNIC_RX_DUP);
    CHECK(n <= USNIC_REL_SACK_WORDS_MAX);
    CHECK(0 == n || 0 != w[n - 1]);
    CHECK(bits == (0 != n ? w[0] : 0));
    for (uint32_t i = 0; i < all; i++) {
        usnic_seq_t s = ack + 2u + i;
        bool seen = usnic_seq_le(s, r->rx.highest) && usnic_seq_diff(s, r->rx.expected) >= 0 &&
                    usnic_seq_diff(s, r->rx.expected) < (int32_t) r->rx.win_size &&
                    USNIC_RX_DUP == usnic_rel_rx_check(r, s);
        uint32_t wi = i / USNIC_REL_SACK_WORD_BITS;
        bool reported = wi < n && (w[wi] & ((uint64_t) 1 << (i % USNIC_REL_SACK_WORD_BITS)));
        CHECK(reported == seen);
    }
    CHECK(more == (usnic_seq_diff(r->rx.highest, r->rx.expected) > (int32_t) all));
    if (usnic_seq_lt(r->rx.highest, r->rx.expected)) {
        CHECK(0 == bits && 0 == n && !more);
    }
}

/* The transport's side of the reliability core between datagrams: fire a
 * due timer, send what is queued for resend (unless told to wait), keep
 * new data in flight. */
static void transport_step(struct fz *f, bool resend)
{
    for (int i = 0; i < NPEERS; i++) {
        struct fz_peer *p = &f->peer[i];
        struct fz_snap b;

        snap(p, &b);
        if (0 != p->deadline && f->now >= p->deadline) {
            stats.timers++;
            usnic_rel_tx_timer(&p->rel, f->now);
            CHECK(0 == p->deadline || p->deadline > f->now);
        }
        if (resend) {
            for (uint32_t k = 0; k < p->rel.tx.win_size; k++) {
                struct usnic_rel_seg *seg = p->rel.tx.win[k];
                if (NULL != seg && SEG_OF(seg)->queued) {
                    SEG_OF(seg)->queued = false;
                    seg->lane = (uint8_t) ((seg->lane + 1u) % USNIC_REL_LANES);
                    usnic_rel_tx_sent(&p->rel, seg, f->now);
                    stats.resends++;
                }
            }
        }
        if (usnic_rel_ack_due(&p->rel, f->now, ACK_DELAY)) {
            check_ack(p);
            usnic_rel_ack_sent(&p->rel);
        }
        check_peer(p, &b);
        while (usnic_rel_tx_inflight(&p->rel) < INFLIGHT_TARGET &&
               usnic_rel_tx_window_open(&p->rel)) {
            push_seg(f, p, (uint8_t) (p->rel.tx.next % USNIC_REL_LANES), 1);
        }
    }
}

/* ---------------------------------------------------------------- setup and teardown */

static void fz_fini(struct fz *f)
{
    for (int i = 0; i < NPEERS; i++) {
        struct fz_peer *p = &f->peer[i];
        if (p->rel_ok) {
            for (uint32_t k = 0; k < p->rel.tx.win_size; k++) {
                if (NULL != p->rel.tx.win[k]) {
                    struct fz_seg *s = SEG_OF(p->rel.tx.win[k]);
                    p->rel.tx.win[k] = NULL;
                    free(s);
                }
            }
            usnic_rel_fini(&p->rel);
        }
        if (p->reasm_ok) {
            usnic_reasm_table_fini(&p->reasm);
        }
        usnic_parts_fini(&p->parts);
        for (unsigned k = 0; k < REASM_SLOTS; k++) {
            shadow_free(&p->shadow[k]);
        }
        CHECK(0 == p->pool_live && 0 == p->extra_live);
    }
    if (f->regs_ok) {
        usnic_reg_table_fini(&f->regs);
    }
    for (unsigned i = 0; i < NKEYS; i++) {
        free(f->reg[i].buf);
    }
}

static void fz_init(struct fz *f, uint8_t cfg)
{
    static const uint64_t keys[NPEERS] = {0x6A09E667F3BCC908ull, 0xBB67AE8584CAA73Bull};
    static const uint32_t modules[NPEERS] = {(0u << 8) | 1u, (3u << 8) | 0u};
    /* initial sequence numbers and fragment numbers: peer 0 close to the 32-bit wrap */
    static const usnic_seq_t tx_isn[NPEERS] = {0xFFFFFFF8u, 1000u};
    static const usnic_seq_t rx_isn[NPEERS] = {0xFFFFFFF0u, 7000000u};
    static const uint32_t first_msg[NPEERS] = {0xFFFFFFFEu, 7u};
    const struct usnic_rel_timing timing = {
        .rto_init = 1000, .rto_min = 200, .rto_max = 100000, .ack_delay = 50, .tlp = true};
    struct usnic_sip_key put_key;
    uint8_t kb[USNIC_SIP_KEY_BYTES];
    int auth = (int) (cfg & CFG_AUTH_MASK);

    memset(f, 0, sizeof(*f));
    f->cfg = cfg;
    f->sealed = 0 != (cfg & CFG_SEALED);
    f->tag_ok = 0 != (cfg & CFG_TAG_OK);
    f->max_msg_len = (cfg & CFG_SMALL) ? MAX_MSG_SMALL : MAX_MSG_LARGE;
    f->now = 1000000;
    f->ts_ctr = 0x7FFFFF00u;

    for (int i = 0; i < NPEERS; i++) {
        struct fz_peer *p = &f->peer[i];
        p->fz = f;
        p->idx = i;
        p->key = keys[i];
        p->module = modules[i];
        for (int k = 0; k < USNIC_SIP_KEY_BYTES; k++) {
            kb[k] = (uint8_t) (0x31 * (i + 1) + 7 * k);
        }
        usnic_sip_key_load(&p->mac, kb);
        p->auth = (3 == auth) ? 1 + i : auth;
        p->crc = 0 != (cfg & CFG_CRC);
        p->alloc.get = buf_get;
        p->alloc.put = buf_put;
        p->alloc.ctx = p;
        if (0 != usnic_rel_init(&p->rel, &fz_rel_ops, p, TX_WIN, RX_WIN, tx_isn[i], rx_isn[i], 3,
                                &timing)) {
            abort();
        }
        p->rel_ok = true;
        if (0 != usnic_reasm_table_init(&p->reasm, REASM_SLOTS, &p->alloc, first_msg[i])) {
            abort();
        }
        p->reasm_ok = true;
        CHECK(REASM_SLOTS == p->reasm.nslots);
        p->reasm.chunk = (cfg & CFG_CHUNK) ? CHUNK_SIZE : 0;
        usnic_parts_init(&p->parts);
        /* segments in flight, sent over the last millisecond on all lanes,
         * a few of them twice */
        for (unsigned k = 0; k < INFLIGHT_TARGET; k++) {
            /* the sixth one's post failed: queued for resend, never sent yet */
            push_seg(f, p, (uint8_t) (k % USNIC_REL_LANES), (5 == k) ? 0 : (k % 4 == 3) ? 2 : 1);
            f->now += 100;
        }
    }

    /* registrations: NREGS live ones, one removed (its slot reused by a live one) */
    usnic_reg_table_init(&f->regs);
    f->regs_ok = true;
    for (int k = 0; k < USNIC_SIP_KEY_BYTES; k++) {
        kb[k] = (uint8_t) (0xC3 ^ (11 * k));
    }
    usnic_sip_key_load(&put_key, kb);
    usnic_reg_table_set_key(&f->regs, &put_key);
    for (unsigned i = 0; i < NKEYS; i++) {
        struct fz_reg *r = &f->reg[i];
        r->len = (i < NREGS) ? REG_LEN[i] : STALE_LEN;
        r->buf = xmalloc((size_t) r->len + GUARD);
        memset(r->buf, (i < NREGS) ? 0 : STALE_BYTE, (size_t) r->len);
        memset(r->buf + r->len, GUARD_BYTE, GUARD);
    }
    for (unsigned i = 0; i < NKEYS; i++) {
        /* the removed one goes in second, so a live one reuses its slot */
        unsigned j = (0 == i) ? 0 : (1 == i) ? NREGS : i - 1;
        struct fz_reg *r = &f->reg[j];
        if (0 != usnic_reg_add(&f->regs, (uint64_t) (uintptr_t) r->buf, r->len, &r->key)) {
            abort();
        }
        r->live = true;
        if (NREGS == j) {
            CHECK(0 == usnic_reg_remove(&f->regs, r->key));
            r->live = false;
        }
    }
    for (unsigned i = 0; i < NKEYS; i++) {
        for (unsigned k = 0; k < i; k++) {
            CHECK(f->reg[i].key != f->reg[k].key);
        }
    }
}

/* ---------------------------------------------------------------- one datagram */


static void mutate(struct fz *f, uint8_t *b, size_t len, uint8_t mut, uint8_t lane)
{
    const struct fz_peer *p =
        &f->peer[((f->cfg & CFG_PEER1) ? 1 : 0) ^ ((mut & MUT_OTHER) ? 1 : 0)];
    unsigned type = (len >= 2) ? b[1] : 0;

    if ((mut & MUT_LEN) && len >= sizeof(struct usnic_pkt_hdr)) {
        size_t h = usnic_pkt_hdr_len(type);
        b[0] = USNIC_PROTO_VERSION;
        b[offsetof(struct usnic_pkt_hdr, lane)] = (uint8_t) (lane % USNIC_PKT_LANES);
        b[offsetof(struct usnic_pkt_hdr, reserved)] = 0; /* (allow is left as it came) */
        if (0 != h && len >= h) {
            wr32(b + offsetof(struct usnic_pkt_hdr, payload_len), (uint32_t) (len - h));
        }
        if (USNIC_PKT_ACK == type) {
            wr32(b + offsetof(struct usnic_pkt_hdr, msg_id), 0);
        }
    }
    if ((mut & MUT_KEY) && len >= offsetof(struct usnic_pkt_hdr, seq)) {
        wr64(b + offsetof(struct usnic_pkt_hdr, sender_key), p->key);
        wr32(b + offsetof(struct usnic_pkt_hdr, src_module), p->module);
    }
    if ((mut & MUT_SEQ) && len >= offsetof(struct usnic_pkt_hdr, ack_seq)) {
        uint8_t *q = b + offsetof(struct usnic_pkt_hdr, seq);
        wr32(q, p->rel.rx.expected + (uint32_t) (int32_t) (int8_t) q[0]);
    }
    if ((mut & MUT_ACK) && len >= offsetof(struct usnic_pkt_hdr, lane)) {
        uint8_t *q = b + offsetof(struct usnic_pkt_hdr, ack_seq);
        if ((q[1] & 1u) && p->rel.tx.ping.waiting) {
            wr32(b + offsetof(struct usnic_pkt_hdr, ts_echo), p->rel.tx.ping.ts);
        }
        wr32(q, p->rel.tx.acked + (uint32_t) (int32_t) (int8_t) q[0]);
    }
    if ((mut & MUT_MSGID) && len >= offsetof(struct usnic_pkt_hdr, ts)) {
        uint8_t *q = b + offsetof(struct usnic_pkt_hdr, msg_id);
        wr32(q, p->reasm.next + (uint32_t) (int32_t) (int8_t) q[0]);
    }
    if ((mut & MUT_TS) && len >= offsetof(struct usnic_pkt_hdr, ts_echo)) {
        f->ts_ctr++;
        if (0 == f->ts_ctr) {
            f->ts_ctr = 1;
        }
        wr32(b + offsetof(struct usnic_pkt_hdr, ts), f->ts_ctr);
    }
    if ((mut & MUT_PUT) && USNIC_PKT_PUT == type && len >= USNIC_HDR_LEN_PUT) {
        uint8_t *q = b + USNIC_HDR_LEN_CHUNK;
        wr64(q, f->reg[q[0] % NKEYS].key);
    }
}

static bool reason_possible(enum usnic_drop_reason r)
{
    return (unsigned) r < USNIC_DROP__COUNT && USNIC_DROP_RX_ERROR != r && USNIC_DROP_INJECTED != r;
}

/* The checks every packet gets after its parse, as the dispatch must have
 * made them: the sender's lookup, then CRC and MAC exactly as the
 * independent computation says, then the lane.  False when one of them
 * decided the verdict (checked here), true when the packet passed them. */
static bool check_passed(struct fz *f, enum usnic_drop_reason why, const struct fz_peer *known,
                         bool crc_ok, bool mac_ok, uint8_t lane)
{
    const struct fz_cur *c = &f->cur;

    if (USNIC_PKT_OK != c->lookup_why) {
        CHECK(why == c->lookup_why && NULL == c->peer);
        return false;
    }
    CHECK(c->peer == known);
    if (!crc_ok) {
        CHECK(USNIC_DROP_CHECKSUM == why);
        return false;
    }
    if (!mac_ok) {
        CHECK(USNIC_DROP_AUTH == why);
        return false;
    }
    CHECK(USNIC_DROP_CHECKSUM != why && USNIC_DROP_AUTH != why);
    if (c->v.hdr->lane != lane) {
        /* sent to the other socket: never taken here */
        CHECK(USNIC_DROP_ADDRESS == why);
        return false;
    }
    return true;
}

/* The checks of a dispatch whose packet parsed (the whole datagram of a
 * join: lookups is then 2), from its sender's lookup on: known is the
 * sender the key names, crc_ok, mac_ok and verdict what the oracles said
 * before the dispatch. */
static void check_packet(struct fz *f, enum usnic_drop_reason why, struct fz_peer *known,
                         bool crc_ok, bool mac_ok, enum usnic_rx_verdict verdict, bool predicted,
                         uint8_t lane, unsigned lookups)
{
    struct fz_cur *c = &f->cur;

    if (predicted) {
        /* nothing the full path would have refused */
        CHECK(0 == c->lookups && NULL != known && c->peer == known && !c->bad_src && crc_ok &&
              mac_ok && USNIC_RX_NEW == verdict && c->v.hdr->lane == lane &&
              USNIC_PKT_ACK != c->v.hdr->type && USNIC_PKT_FRAG != c->v.hdr->type &&
              0 == (c->v.hdr->flags & USNIC_PKT_FLAG_ACK_REQ));
    } else {
        CHECK(lookups == c->lookups);
    }
    if (!check_passed(f, why, known, crc_ok, mac_ok, lane)) {
        return;
    }
    c->authed = true;
    if (!f->sealed && 0 != known->auth) {
        /* Raw bytes passed the MAC: only because they carry the true MAC of
         * their bytes (checked just above, independently of
         * usnic_pkt_verify()), which a fuzzer can learn from the comparison
         * it watches, but no forger without the secret can produce. */
        stats.raw_true_mac++;
    }
    /* the ACK and data paths */
    CHECK(c->released == c->rel_acked);
    if (USNIC_PKT_ACK == c->v.hdr->type) {
        CHECK(USNIC_PKT_OK == why || USNIC_DROP_ACK_RANGE == why);
        CHECK(0 == c->accepteds && 0 == c->delivers && 0 == c->put_writes);
        CHECK((USNIC_PKT_OK == why) == (1 == c->ack_rxs));
    } else {
        CHECK(0 == c->ack_rxs);
        if (USNIC_PKT_OK == why) {
            CHECK(USNIC_RX_NEW == verdict);
            CHECK(1 == c->accepteds);
            CHECK(USNIC_RX_DUP == usnic_rel_rx_check(&known->rel, c->v.hdr->seq));
            if (USNIC_PKT_PUT == c->v.hdr->type) {
                CHECK(1 == c->put_writes && 0 == c->delivers && 1 == c->resolves);
            } else {
                CHECK(0 == c->put_writes);
                if (!c->applied) {
                    shadow_apply(f); /* taken, waiting for the rest or its turn */
                    c->applied = true;
                }
            }
        } else {
            CHECK(0 == c->accepteds);
            if (USNIC_RX_NEW == verdict) {
                CHECK(USNIC_RX_NEW == usnic_rel_rx_check(&known->rel, c->v.hdr->seq));
            }
            if (USNIC_DROP_WINDOW == why) {
                CHECK(USNIC_RX_BEYOND == verdict);
            }
        }
    }
    if (USNIC_PKT_OK == why) {
        stats.ok[c->v.hdr->type & 7u]++;
    }
}

/* The checks of a dispatch whose packet parsed as a PART. */
static void check_part(struct fz *f, enum usnic_drop_reason why, struct fz_peer *known, bool crc_ok,
                       bool mac_ok, enum usnic_rx_verdict verdict, bool predicted, uint8_t lane)
{
    struct fz_cur *c = &f->cur;

    CHECK(!predicted);
    stats.parts++;
    if (c->joined) {
        /* the part that completed it passed every check a packet gets, and
         * the whole datagram every check of its own */
        CHECK(NULL != known && c->part_peer == known && crc_ok && mac_ok &&
              USNIC_RX_NEW == verdict && c->part_v.hdr->lane == lane);
        check_packet(f, why, c->whole_known, c->whole_crc_ok, c->whole_mac_ok, c->whole_verdict,
                     false, lane, 2);
        if (c->authed && 0 != c->whole_known->auth) {
            stats.joined_mac++; /* its own MAC passed (seal_inner) */
        }
        return;
    }
    CHECK(1 == c->lookups);
    if (!check_passed(f, why, known, crc_ok, mac_ok, lane)) {
        return;
    }
    /* a part alone is never committed, delivered or acknowledged, and
     * leaves its sequence number as it was */
    CHECK(0 == c->accepteds && 0 == c->delivers && 0 == c->put_writes && 0 == c->ack_rxs);
    CHECK(verdict == usnic_rel_rx_check(&known->rel, c->v.hdr->seq));
    CHECK(!c->whole_refused || (USNIC_RX_NEW == verdict && USNIC_PKT_OK != why));
    if (USNIC_RX_BEYOND == verdict) {
        CHECK(USNIC_DROP_WINDOW == why);
    } else if (USNIC_RX_DUP == verdict) {
        CHECK(USNIC_DROP_DUPLICATE == why);
    }
}

/* A sealed PART that carries a whole datagram by itself (offset 0, all of
 * it): seal that datagram too, with the key of the peer it names (else the
 * default one), so that the whole datagram's own MAC and CRC can pass and
 * the fuzzer reaches what comes after them for it as well.  (A datagram in
 * several parts is assembled in the receiver only: its bytes stay as the
 * fuzzer made them.) */
static void seal_inner(struct fz *f, uint8_t *b, const struct usnic_pkt_view *v)
{
    struct usnic_pkt_view w;
    const struct fz_peer *s;
    uint8_t *inner;

    if (USNIC_PKT_PART != v->hdr->type || 0 != v->chunk->offset ||
        v->chunk->msg_len != v->payload_len) {
        return;
    }
    inner = b + USNIC_HDR_LEN_CHUNK;
    if (USNIC_PKT_OK != usnic_pkt_parse(inner, v->payload_len, f->max_msg_len, &w)) {
        return;
    }
    s = peer_named(f, w.hdr);
    if (NULL == s) {
        s = &f->peer[(f->cfg & CFG_PEER1) ? 1 : 0];
    }
    usnic_pkt_seal(inner, w.len, NULL, 0, &s->mac, NULL, s->auth, s->crc);
    stats.inner_sealed++;
}

static void one_datagram(struct fz *f, const uint8_t *in, size_t len, uint8_t mut, uint8_t aux)
{
    uint8_t *b = malloc(len); /* exact size: ASan sees any read past the datagram */
    struct fz_cur *c = &f->cur;
    struct fz_snap before[NPEERS];
    enum usnic_drop_reason parse_why, why;
    enum usnic_rx_verdict verdict = USNIC_RX_NEW;
    struct fz_peer *known = NULL;
    bool crc_ok = true, mac_ok = true;
    struct usnic_rx_params prm;
    bool predicted, part;

    memset(&prm, 0, sizeof(prm));
    if (len > 0) {
        CHECK(NULL != b);
        memcpy(b, in, len);
    }
    stats.dgrams++;
    mutate(f, b, len, mut, (uint8_t) (aux & AUX_LANE));

    memset(c, 0, sizeof(*c));
    c->buf = b;
    c->len = len;
    c->bad_src = 0 != (aux & AUX_BADSRC);
    parse_why = usnic_pkt_parse(b, len, f->max_msg_len, &c->v);
    c->parsed = (USNIC_PKT_OK == parse_why);
    if (c->parsed) {
        known = peer_named(f, c->v.hdr);
        if (f->sealed) {
            const struct fz_peer *s = known ? known : &f->peer[(f->cfg & CFG_PEER1) ? 1 : 0];
            seal_inner(f, b, &c->v);
            /* (the seal ends with the payload: any padding is not in it) */
            usnic_pkt_seal(b, c->v.len, NULL, 0, &s->mac, NULL, s->auth, s->crc);
        }
    }
    if ((aux & AUX_TAMPER) && len > 0) {
        b[((aux >> 4) * len) / 16] ^= 0x20;
        parse_why = usnic_pkt_parse(b, len, f->max_msg_len, &c->v);
        c->parsed = (USNIC_PKT_OK == parse_why);
        known = c->parsed ? peer_named(f, c->v.hdr) : NULL;
    }
    if (NULL != known) {
        oracle_checks(b, len, &c->v, known, &crc_ok, &mac_ok, &verdict);
    }
    part = c->parsed && USNIC_PKT_PART == c->v.hdr->type;

    for (int i = 0; i < NPEERS; i++) {
        snap(&f->peer[i], &before[i]);
    }
    prm.max_msg_len = f->max_msg_len;
    prm.now = f->now;
    prm.lane = (uint8_t) (aux & AUX_LANE);
    prm.payload = NULL;
    prm.defer = !(aux & AUX_TAMPER) && (aux & AUX_DEFER);
    prm.predict = &f->pred;
    prm.src = c->bad_src ? 1u : 0u; /* (where the lookup's source check says so) */
    c->defer = prm.defer;
    c->active = true;
    /* Will it take the predicted path (no lookup)?  Then every check
     * below must come out as on the full path, and its sender is the
     * prediction's. */
    predicted = f->pred.ok && usnic_rx_predicted(&f->pred, b, len, &prm);
    if (predicted) {
        c->peer = f->pred.c.ep;
        stats.predicted++;
    }
    why = usnic_rx_dispatch(&fz_rx_ops, f, b, len, &prm);
    c->active = false;
    for (int i = 0; i < NPEERS; i++) {
        /* the receive batch (this one datagram) ends: nothing may still
         * point into b after this */
        usnic_reasm_materialize(&f->peer[i].reasm);
        CHECK(!f->peer[i].reasm.defer.active);
    }

    {
        /* the log line of a dropped datagram: safe on anything, always terminated */
        char out[512];
        size_t outlen = 1 + (len * 37u) % sizeof(out), n;
        memset(out, 0x7F, sizeof(out));
        CHECK(0 == usnic_pkt_dump(b, len, out, 0) && 0x7F == (uint8_t) out[0]);
        n = usnic_pkt_dump(b, len, out, outlen);
        CHECK(n < outlen && '\0' == out[n] && strlen(out) == n);
        for (size_t k = outlen; k < sizeof(out); k++) {
            CHECK(0x7F == (uint8_t) out[k]);
        }
    }
    if (verbose > 0) {
        char dump[512];
        usnic_pkt_dump(b, len, dump, sizeof(dump));
        fprintf(stderr, "  dgram mut=%02x aux=%02x now=%" PRIu64 " -> %s: %s\n", mut, aux, f->now,
                usnic_drop_reason_name(why), dump);
    }

    /* the verdict itself */
    CHECK(reason_possible(why));
    stats.drops[(unsigned) why < USNIC_DROP__COUNT ? why : 0]++;
    if (USNIC_PKT_OK == why) {
        CHECK(0 == c->drops);
    } else {
        CHECK(1 == c->drops && c->drop_why == why);
        CHECK(0 == c->delivers && 0 == c->put_writes && 0 == c->accepteds);
    }
    /* parse and lookup come first, each exactly as they said */
    if (!c->parsed) {
        CHECK(why == parse_why && 0 == c->lookups);
        goto done;
    }
    if (part) {
        check_part(f, why, known, crc_ok, mac_ok, verdict, predicted, prm.lane);
    } else {
        check_packet(f, why, known, crc_ok, mac_ok, verdict, predicted, prm.lane, 1);
    }

done:
    for (int i = 0; i < NPEERS; i++) {
        check_peer(&f->peer[i], &before[i]);
        if (&f->peer[i] != c->peer) {
            /* a datagram changes nothing of a peer it is not from */
            CHECK(f->peer[i].rel.rx.expected == before[i].expected);
            CHECK(f->peer[i].rel.tx.acked == before[i].acked);
            CHECK(f->peer[i].reasm.next == before[i].reasm_next);
        }
        /* what a peer lets us keep in flight to it (the header's allow):
         * only a packet from it that passed its MAC changes it, and only
         * to what that packet says */
        if (f->peer[i].rel.tx.allow != before[i].allow) {
            CHECK(c->authed && &f->peer[i] == c->peer && c->parsed && !c->ack_stale);
            CHECK(f->peer[i].rel.tx.allow == c->v.hdr->allow);
            stats.allows++;
        }
    }
    check_regs(f);
    free(b);
}

/* ---------------------------------------------------------------- entry point */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct fz f;
    static const uint64_t steps[4] = {1, 100, 10000, (uint64_t) 31 * 60 * 1000000};
    size_t pos = 1;

    if (verbose < 0) {
        const char *v = getenv("FUZZ_RX_VERBOSE");
        verbose = (NULL != v && '\0' != v[0] && '0' != v[0]) ? 1 : 0;
        v = getenv("FUZZ_RX_STATS");
        if (NULL != v && '\0' != v[0] && '0' != v[0]) {
            atexit(print_stats);
        }
        crc_tab_init();
    }
    if (0 == size) {
        return 0;
    }
    stats.inputs++;
    fz_init(&f, data[0]);
    if (verbose > 0) {
        fprintf(stderr,
                "input: cfg=%02x (auth %u crc %d sealed %d peer %d tag_ok %d chunk %d "
                "max_msg_len %" PRIu64 ")\n",
                data[0], data[0] & CFG_AUTH_MASK, !!(data[0] & CFG_CRC), f.sealed,
                !!(data[0] & CFG_PEER1), f.tag_ok, !!(data[0] & CFG_CHUNK), f.max_msg_len);
    }
    while (size - pos >= 4) {
        unsigned lf = (unsigned) data[pos] | (unsigned) data[pos + 1] << 8;
        uint8_t mut = data[pos + 2], aux = data[pos + 3];
        size_t len = lf & 0x3FFFu;

        pos += 4;
        if (len > MAX_DGRAM) {
            len = MAX_DGRAM;
        }
        if (len > size - pos) {
            len = size - pos;
        }
        f.now += steps[lf >> 14];
        transport_step(&f, false); /* a timer that came due while we waited */
        one_datagram(&f, data + pos, len, mut, aux);
        transport_step(&f, (lf >> 14) != 0);
        pos += len;
    }
    fz_fini(&f);
    return 0;
}
