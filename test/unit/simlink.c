/* Simulated link and transport for the usnic core unit tests (see simlink.h). */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simlink.h"
#include "btl_usnic_rx.h"

#define SEG_OF(p) ((struct sim_seg *) (void *) ((char *) (p) -offsetof(struct sim_seg, rel)))

/* ---------------------------------------------------------------- PRNG */

uint64_t sim_rng_next(struct sim_rng *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t sim_rng_below(struct sim_rng *r, uint64_t n)
{
    return n ? sim_rng_next(r) % n : 0;
}

uint64_t sim_rng_range(struct sim_rng *r, uint64_t lo, uint64_t hi)
{
    if (hi <= lo) {
        return lo;
    }
    if (hi - lo == UINT64_MAX) {
        return sim_rng_next(r);
    }
    return lo + sim_rng_below(r, hi - lo + 1);
}

double sim_rng_unit(struct sim_rng *r)
{
    return (double) (sim_rng_next(r) >> 11) * 0x1.0p-53;
}

void sim_rng_shuffle32(struct sim_rng *r, uint32_t *v, size_t n)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t) sim_rng_below(r, i);
        uint32_t t = v[i - 1];
        v[i - 1] = v[j];
        v[j] = t;
    }
}

/* ---------------------------------------------------------------- contents */

uint64_t sim_msg_key(int from, uint32_t id)
{
    struct sim_rng r;
    sim_rng_seed(&r, ((uint64_t) (unsigned) from << 32) ^ id ^ 0x5EED5EED00000000ull);
    return sim_rng_next(&r);
}

void sim_msg_fill(uint64_t key, uint64_t off, void *dst, size_t n)
{
    uint8_t *d = dst;
    for (size_t i = 0; i < n; i++) {
        d[i] = sim_msg_byte(key, off + i);
    }
}

long long sim_msg_mismatch(uint64_t key, uint64_t off, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        if (b[i] != sim_msg_byte(key, off + i)) {
            return (long long) i;
        }
    }
    return -1;
}

uint64_t sim_fnv(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* ---------------------------------------------------------------- packets */

void sim_hdr_init(struct usnic_pkt_hdr *h, unsigned type, unsigned flags, unsigned tag,
                  uint32_t src_module, uint64_t sender_key, uint32_t seq, uint32_t ack_seq)
{
    memset(h, 0, sizeof(*h));
    h->version = USNIC_PROTO_VERSION;
    h->type = (uint8_t) type;
    h->flags = (uint8_t) flags;
    h->tag = (uint8_t) tag;
    h->src_module = src_module;
    h->sender_key = sender_key;
    h->seq = seq;
    h->ack_seq = ack_seq;
}

size_t sim_pkt_build(void *buf, size_t cap, const struct usnic_pkt_hdr *hdr,
                     const struct usnic_chunk_hdr *ch, const struct usnic_put_hdr *put,
                     const void *payload, uint32_t plen)
{
    uint8_t *b = buf;
    struct usnic_pkt_hdr h = *hdr;
    size_t n = sizeof(h) + (ch ? sizeof(*ch) : 0) + (put ? sizeof(*put) : 0);

    if (n + plen > cap) {
        return 0;
    }
    h.payload_len = plen;
    memcpy(b, &h, sizeof(h));
    n = sizeof(h);
    if (ch) {
        memcpy(b + n, ch, sizeof(*ch));
        n += sizeof(*ch);
    }
    if (put) {
        memcpy(b + n, put, sizeof(*put));
        n += sizeof(*put);
    }
    if (plen) {
        memcpy(b + n, payload, plen);
    }
    return n + plen;
}

/* ---------------------------------------------------------------- errors */

static void sim_error(struct sim *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sim_error(struct sim *s, const char *fmt, ...)
{
    if (0 == s->errors++) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(s->err, sizeof(s->err), fmt, ap);
        va_end(ap);
    }
}

static void *xcalloc(size_t n, size_t sz)
{
    void *p = calloc(n ? n : 1, sz ? sz : 1);
    if (NULL == p) {
        fprintf(stderr, "simlink: out of memory\n");
        abort();
    }
    return p;
}

static void *xrealloc(void *p, size_t sz)
{
    void *q = realloc(p, sz ? sz : 1);
    if (NULL == q) {
        fprintf(stderr, "simlink: out of memory\n");
        abort();
    }
    return q;
}

/* ---------------------------------------------------------------- event heap */

static bool pkt_before(const struct sim_pkt *a, const struct sim_pkt *b)
{
    return a->t < b->t || (a->t == b->t && a->order < b->order);
}

static void heap_push(struct sim *s, struct sim_pkt *p)
{
    size_t i;

    if (s->nheap == s->heap_cap) {
        s->heap_cap = s->heap_cap ? 2 * s->heap_cap : 256;
        s->heap = xrealloc(s->heap, s->heap_cap * sizeof(*s->heap));
    }
    p->order = s->pkt_order++;
    i = s->nheap++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!pkt_before(p, s->heap[parent])) {
            break;
        }
        s->heap[i] = s->heap[parent];
        i = parent;
    }
    s->heap[i] = p;
}

static struct sim_pkt *heap_pop(struct sim *s)
{
    struct sim_pkt *top, *last;
    size_t i = 0;

    if (0 == s->nheap) {
        return NULL;
    }
    top = s->heap[0];
    last = s->heap[--s->nheap];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= s->nheap) {
            break;
        }
        if (c + 1 < s->nheap && pkt_before(s->heap[c + 1], s->heap[c])) {
            c++;
        }
        if (!pkt_before(s->heap[c], last)) {
            break;
        }
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (s->nheap > 0) {
        s->heap[i] = last;
    }
    return top;
}

static void enqueue_copy(struct sim *s, int to, const void *buf, size_t len, uint64_t t,
                         uint64_t src)
{
    struct sim_pkt *p = xcalloc(1, sizeof(*p));
    p->src = src;
    /* exact-size allocation: the sanitizers catch any read past the datagram */
    p->buf = xcalloc(1, len);
    if (len) {
        memcpy(p->buf, buf, len);
    }
    p->len = len;
    p->to = to;
    p->t = t;
    heap_push(s, p);
}

/* ---------------------------------------------------------------- link */

static void xmit(struct sim *s, struct sim_ep *from, const uint8_t *buf, size_t len)
{
    uint64_t start, t;
    int copies;

    if (0 != s->cfg.part_max && len > s->cfg.part_max && s->now >= s->cfg.part_after_ns) {
        /* the path shrank: in parts, each sealed as the BTL seals them */
        uint32_t per = usnic_part_payload(s->cfg.part_max);
        uint8_t *part = xcalloc(1, s->cfg.part_max);
        const struct usnic_pkt_hdr *h = (const struct usnic_pkt_hdr *) (const void *) buf;

        for (size_t off = 0; off < len; off += per) {
            uint32_t n = (uint32_t) ((len - off < per) ? len - off : per);
            size_t plen = usnic_part_build(part, buf, len, NULL, 0, off, n, h->ts);
            sim_seal(s, from->idx, part, plen);
            xmit(s, from, part, plen);
        }
        free(part);
        s->parted++;
        return;
    }
    from->st.tx_pkts++;
    if (s->filter && s->filter(s, from->idx, buf, len, s->filter_arg)) {
        s->filtered++;
        return;
    }
    if (s->cfg.loss > 0 && sim_rng_unit(&s->rng) < s->cfg.loss) {
        s->lost++;
        return;
    }
    start = (from->link_free_ns > s->now) ? from->link_free_ns : s->now;
    from->link_free_ns = start + (len * s->cfg.ps_per_byte + 999) / 1000;
    t = from->link_free_ns + s->cfg.latency_ns;
    if (s->cfg.foreign > 0 && len >= sizeof(struct usnic_pkt_hdr) &&
        USNIC_PKT_ACK != ((const struct usnic_pkt_hdr *) (const void *) buf)->type &&
        sim_rng_unit(&s->rng) < s->cfg.foreign) {
        /* the same datagram from elsewhere, just before the genuine one */
        s->foreign++;
        enqueue_copy(s, 1 - from->idx, buf, len, t, SIM_SRC_FOREIGN);
    }
    if (s->cfg.forged > 0 && len >= USNIC_HDR_LEN_CHUNK &&
        USNIC_PKT_ACK != ((const uint8_t *) buf)[1] && sim_rng_unit(&s->rng) < s->cfg.forged) {
        /* one bit of bytes [20, 40), [48, 56) or, in a chunk, [56, 72) */
        static const uint8_t at[] = {20, 24, 28, 32, 36, 48, 52, 56, 60, 64, 68};
        uint8_t *bad = xcalloc(1, len);
        unsigned k = (unsigned) sim_rng_below(&s->rng, (USNIC_PKT_FRAG == buf[1]) ? 7 : 11);
        memcpy(bad, buf, len);
        bad[at[k] + sim_rng_below(&s->rng, 4)] ^= (uint8_t) (1u << sim_rng_below(&s->rng, 8));
        s->forged++;
        enqueue_copy(s, 1 - from->idx, bad, len, t, SIM_SRC_FORGED);
        free(bad);
    }
    copies = 1;
    if (s->cfg.dup > 0 && sim_rng_unit(&s->rng) < s->cfg.dup) {
        copies = 2;
        s->duplicated++;
    }
    for (int c = 0; c < copies; c++) {
        uint64_t extra = 0;
        if (s->cfg.reorder > 0 && sim_rng_unit(&s->rng) < s->cfg.reorder) {
            extra = sim_rng_range(&s->rng, 0, s->cfg.reorder_max_ns);
            s->delayed++;
        }
        enqueue_copy(s, 1 - from->idx, buf, len, t + extra + (uint64_t) c, SIM_SRC_PEER);
    }
}

/* ---------------------------------------------------------------- rel ops */

static struct sim_ep *ep_of(struct usnic_rel *rel)
{
    return rel->ctx;
}

static void op_timer_set(struct usnic_rel *rel, uint64_t deadline)
{
    struct sim_ep *ep = ep_of(rel);

    if (0 != deadline && deadline < ep->sim->now) {
        sim_error(ep->sim, "timer set in the past (%" PRIu64 " < %" PRIu64 ")", deadline,
                  ep->sim->now);
    }
    ep->timer_deadline = deadline;
    ep->st.timer_sets++;
}

static void send_ack_ts(struct sim *s, struct sim_ep *ep, uint32_t ping_ts);

/* The core wants a ping: an explicit ACK that asks for one at once (the
 * simulated link has one lane). */
static void op_probe(struct usnic_rel *rel, uint8_t lane, uint32_t ts)
{
    struct sim_ep *ep = ep_of(rel);
    (void) lane;
    ep->st.tx_pings++;
    send_ack_ts(ep->sim, ep, ts);
}

static void rq_unlink(struct sim_ep *ep, struct sim_seg *seg)
{
    if (seg->q_prev) {
        seg->q_prev->q_next = seg->q_next;
    } else {
        ep->rq_head = seg->q_next;
    }
    if (seg->q_next) {
        seg->q_next->q_prev = seg->q_prev;
    } else {
        ep->rq_tail = seg->q_prev;
    }
    seg->q_prev = seg->q_next = NULL;
    seg->q_on = false;
}

static void op_resend(struct usnic_rel *rel, struct usnic_rel_seg *rseg)
{
    struct sim_ep *ep = ep_of(rel);
    struct sim_seg *seg = SEG_OF(rseg);

    if (seg->q_on) {
        sim_error(ep->sim, "resend of seq %u already on the resend queue", rseg->seq);
        return;
    }
    seg->q_on = true;
    seg->q_next = NULL;
    seg->q_prev = ep->rq_tail;
    if (ep->rq_tail) {
        ep->rq_tail->q_next = seg;
    } else {
        ep->rq_head = seg;
    }
    ep->rq_tail = seg;
}

static void op_resend_cancel(struct usnic_rel *rel, struct usnic_rel_seg *rseg)
{
    struct sim_ep *ep = ep_of(rel);
    struct sim_seg *seg = SEG_OF(rseg);

    if (!seg->q_on) {
        sim_error(ep->sim, "resend_cancel of seq %u not on the resend queue", rseg->seq);
        return;
    }
    rq_unlink(ep, seg);
}

static void seg_free(struct sim_ep *ep, struct sim_seg *seg)
{
    ep->st.segs_live--;
    free(seg->pkt);
    free(seg);
}

static void op_acked(struct usnic_rel *rel, struct usnic_rel_seg *rseg)
{
    struct sim_ep *ep = ep_of(rel);
    struct sim_seg *seg = SEG_OF(rseg);

    if (seg->q_on) {
        sim_error(ep->sim, "seq %u acked while on the resend queue", rseg->seq);
        rq_unlink(ep, seg);
    }
    ep->st.released++;
    seg_free(ep, seg);
}

static const struct usnic_rel_ops sim_rel_ops = {
    .resend = op_resend,
    .resend_cancel = op_resend_cancel,
    .acked = op_acked,
    .timer_set = op_timer_set,
    .probe = op_probe,
};

/* ---------------------------------------------------------------- reassembly buffers */

static void *reasm_get(void *ctx, uint64_t len, bool urgent, void **handle)
{
    struct sim_ep *ep = ctx;
    void *p;

    *handle = NULL;
    if (urgent) {
        ep->st.reasm_urgent++;
    }
    if (ep->st.reasm_fail_next && !(urgent && ep->st.reasm_never_refuse_urgent)) {
        ep->st.reasm_fail_next--;
        return NULL;
    }
    if (len > SIZE_MAX) {
        return NULL;
    }
    p = malloc(len ? (size_t) len : 1);
    if (NULL == p) {
        return NULL;
    }
    /* poison: a hole left in a "complete" fragment shows up in the byte check */
    memset(p, 0xA5, len ? (size_t) len : 1);
    *handle = p;
    ep->st.reasm_live++;
    ep->st.reasm_gets++;
    return p;
}

static void reasm_put(void *ctx, void *buf, void *handle)
{
    struct sim_ep *ep = ctx;

    if (buf != handle) {
        sim_error(ep->sim, "reassembly buffer returned with a foreign handle");
    }
    ep->st.reasm_live--;
    free(buf);
}

/* ---------------------------------------------------------------- setup */

void sim_cfg_default(struct sim_cfg *c)
{
    memset(c, 0, sizeof(*c));
    c->seed = 1;
    c->reorder_max_ns = 200000;
    c->latency_ns = 5000;
    c->ps_per_byte = 800;
    c->rto_ns = 5000000;
    c->rto_min_ns = 200000;
    c->rto_max_ns = 100000000;
    c->tlp = true;
    c->ack_delay_ns = 50000;
    c->tx_win[0] = c->tx_win[1] = 64;
    c->rx_win[0] = c->rx_win[1] = 64;
    c->fast_retrans_dups = 3;
    c->isn[0] = 1000;
    c->isn[1] = 7000000;
    c->reasm_slots = 64;
    c->max_payload = 1400;
    c->max_msg_len = 1u << 20;
    c->sack_words = USNIC_SACK_WORDS_MAX;
    c->module_id[0] = 0x10A;
    c->module_id[1] = 0x10B;
    c->key[0] = 0x0123456789ABCDEFull;
    c->key[1] = 0xFEDCBA9876543210ull;
    for (int i = 0; i < 16; i++) {
        c->secret[0][i] = (uint8_t) (0x10 + i);
        c->secret[1][i] = (uint8_t) (0xA0 + 3 * i);
    }
    c->auth = 1; /* the BTL's default */
    c->crc = true;
}

int sim_init(struct sim *s, const struct sim_cfg *c)
{
    memset(s, 0, sizeof(*s));
    s->cfg = *c;
    sim_rng_seed(&s->rng, c->seed);
    for (int i = 0; i < 2; i++) {
        struct sim_ep *ep = &s->ep[i];
        ep->sim = s;
        ep->idx = i;
        ep->module_id = c->module_id[i];
        ep->key = c->key[i];
        usnic_sip_key_load(&ep->mac_key, c->secret[i]);
        ep->tx_isn = c->isn[i];
        ep->next_wire_id = c->first_msg_id[i];
        ep->next_put_id = ~c->first_msg_id[i]; /* PUT numbers: any other sequence */
        ep->known[0].key = c->key[1 - i];
        ep->known[0].ep = 1 - i;
        ep->nknown = 1;
        struct usnic_rel_timing timing = {.rto_init = c->rto_ns,
                                          .rto_min = c->rto_min_ns,
                                          .rto_max = c->rto_max_ns,
                                          .ack_delay = c->ack_delay_ns,
                                          .tlp = c->tlp};
        if (0 != usnic_rel_init(&ep->rel, &sim_rel_ops, ep, c->tx_win[i], c->rx_win[i], c->isn[i],
                                c->isn[1 - i], c->fast_retrans_dups, &timing)) {
            return -1;
        }
        /* as the BTL does: ACK at once after a quarter of the peer's send window */
        ep->rel.ack_every = (c->tx_win[1 - i] / 4) ? c->tx_win[1 - i] / 4 : 1;
        ep->alloc.get = reasm_get;
        ep->alloc.put = reasm_put;
        ep->alloc.ctx = ep;
        /* sizing rule of btl_usnic_reasm.h, applied as the BTL applies it */
        if (0 != usnic_reasm_table_init(&ep->reasm,
                                        (c->reasm_slots > c->tx_win[1 - i]) ? c->reasm_slots
                                                                            : c->tx_win[1 - i],
                                        &ep->alloc, c->first_msg_id[1 - i])) {
            return -1;
        }
        usnic_reg_table_init(&ep->reg);
        usnic_parts_init(&ep->parts);
    }
    return 0;
}

static void batch_end(struct sim *s);

void sim_fini(struct sim *s)
{
    struct sim_pkt *p;

    batch_end(s);
    free(s->batch);
    s->batch = NULL;

    while (NULL != (p = heap_pop(s))) {
        free(p->buf);
        free(p);
    }
    free(s->heap);
    s->heap = NULL;
    for (int i = 0; i < 2; i++) {
        struct sim_ep *ep = &s->ep[i];
        /* whatever is still in the send window */
        if (ep->rel.tx.win) {
            for (uint32_t k = 0; k < ep->rel.tx.win_size; k++) {
                struct sim_seg *seg = ep->rel.tx.win[k] ? SEG_OF(ep->rel.tx.win[k]) : NULL;
                if (seg) {
                    ep->rel.tx.win[k] = NULL;
                    seg_free(ep, seg);
                }
            }
        }
        usnic_rel_fini(&ep->rel);
        usnic_reasm_table_fini(&ep->reasm);
        usnic_reg_table_fini(&ep->reg);
        usnic_parts_fini(&ep->parts);
        free(ep->msgs);
        free(ep->seq_msg);
        free(ep->rx_log);
        ep->msgs = NULL;
        ep->seq_msg = NULL;
        ep->rx_log = NULL;
    }
}

void sim_seal(struct sim *s, int from, void *buf, size_t len)
{
    usnic_pkt_seal(buf, len, NULL, 0, &s->ep[from].mac_key, &s->ep[from].tx_memo, s->cfg.auth,
                   s->cfg.crc);
}

void sim_forget_sender(struct sim *s, int at, uint64_t key)
{
    struct sim_ep *ep = &s->ep[at];
    unsigned j = 0;

    for (unsigned i = 0; i < ep->nknown; i++) {
        if (ep->known[i].key != key) {
            ep->known[j++] = ep->known[i];
        }
    }
    ep->nknown = j;
    ep->pred.ok = false; /* (its connection is no more) */
}

/* ---------------------------------------------------------------- messages */

static struct sim_msg *msg_new(struct sim *s, int from)
{
    struct sim_ep *ep = &s->ep[from];
    struct sim_msg *m;

    if (ep->nmsgs == ep->msgs_cap) {
        ep->msgs_cap = ep->msgs_cap ? 2 * ep->msgs_cap : 64;
        ep->msgs = xrealloc(ep->msgs, ep->msgs_cap * sizeof(*ep->msgs));
    }
    m = &ep->msgs[ep->nmsgs];
    memset(m, 0, sizeof(*m));
    m->id = ep->nmsgs++;
    m->key = sim_msg_key(from, m->id);
    m->rx_hash = SIM_FNV_INIT;
    m->wire_id = UINT32_MAX;
    return m;
}

static uint64_t msg_hash(uint64_t key, uint64_t len)
{
    uint8_t tmp[4096];
    uint64_t h = SIM_FNV_INIT;
    for (uint64_t off = 0; off < len; off += sizeof(tmp)) {
        size_t n = (size_t) ((len - off < sizeof(tmp)) ? len - off : sizeof(tmp));
        sim_msg_fill(key, off, tmp, n);
        h = sim_fnv(h, tmp, n);
    }
    return h;
}

uint32_t sim_send(struct sim *s, int from, uint64_t len, uint8_t tag)
{
    struct sim_msg *m = msg_new(s, from);

    m->kind = SIM_MSG_SEND;
    m->tag = tag;
    m->len = len;
    m->hash = msg_hash(m->key, len);
    m->wire_id = s->ep[from].next_wire_id++;
    return m->id;
}

uint32_t sim_put(struct sim *s, int from, uint64_t reg_key, uint64_t reg_offset, uint64_t len)
{
    struct sim_msg *m = msg_new(s, from);

    if (0 == len) {
        sim_error(s, "sim_put of 0 bytes (not representable on the wire)");
    }
    m->kind = SIM_MSG_PUT;
    m->len = len;
    m->reg_key = reg_key;
    m->reg_offset = reg_offset;
    m->hash = msg_hash(m->key, len);
    m->wire_id = s->ep[from].next_put_id++;
    return m->id;
}

/* ---------------------------------------------------------------- sender */

static struct sim_seg *next_segment(struct sim *s, struct sim_ep *ep)
{
    struct sim_msg *m = &ep->msgs[ep->next_msg];
    uint64_t off = ep->next_off, rem = m->len - off;
    uint32_t plen = (uint32_t) ((rem > s->cfg.max_payload) ? s->cfg.max_payload : rem);
    struct usnic_pkt_hdr h;
    struct usnic_chunk_hdr ch;
    struct usnic_put_hdr put;
    struct sim_seg *seg;
    unsigned type;
    size_t hlen;
    uint8_t *payload;

    if (SIM_MSG_PUT == m->kind) {
        type = USNIC_PKT_PUT;
        hlen = USNIC_HDR_LEN_PUT;
    } else if (m->len <= s->cfg.max_payload) {
        type = USNIC_PKT_FRAG;
        hlen = USNIC_HDR_LEN_FRAG;
    } else {
        type = USNIC_PKT_CHUNK;
        hlen = USNIC_HDR_LEN_CHUNK;
    }

    seg = xcalloc(1, sizeof(*seg));
    seg->ep = ep;
    seg->msg = m->id;
    seg->len = hlen + plen;
    seg->pkt = xcalloc(1, seg->len);
    ep->st.segs_live++;

    payload = xcalloc(1, plen ? plen : 1);
    sim_msg_fill(m->key, off, payload, plen);
    sim_hdr_init(&h, type, 0, m->tag, ep->module_id, ep->key, 0, 0);
    h.msg_id = m->wire_id;
    memset(&ch, 0, sizeof(ch));
    ch.msg_len = m->len;
    ch.offset = off;
    memset(&put, 0, sizeof(put));
    put.reg_key = m->reg_key;
    put.reg_offset = m->reg_offset;
    if (seg->len != sim_pkt_build(seg->pkt, seg->len, &h, (USNIC_PKT_FRAG == type) ? NULL : &ch,
                                  (USNIC_PKT_PUT == type) ? &put : NULL, payload, plen)) {
        sim_error(s, "packet build failed");
    }
    free(payload);

    ep->next_off += plen;
    if (ep->next_off >= m->len) {
        ep->next_msg++;
        ep->next_off = 0;
    }
    return seg;
}

static void oracle_record(struct sim *s, struct sim_ep *ep, usnic_seq_t seq, uint32_t msg)
{
    uint32_t off = seq - ep->tx_isn;

    if ((uint64_t) off != ep->nsegs) {
        sim_error(s, "push gave seq %u, expected %u", seq, (uint32_t) (ep->tx_isn + ep->nsegs));
    }
    if (ep->nsegs == ep->seq_cap) {
        ep->seq_cap = ep->seq_cap ? 2 * ep->seq_cap : 1024;
        ep->seq_msg = xrealloc(ep->seq_msg, (size_t) ep->seq_cap * sizeof(*ep->seq_msg));
    }
    ep->seq_msg[ep->nsegs++] = msg;
}

/*
 * Put a data segment on the wire with the current cumulative ACK piggy-backed.
 * Returns false when the (simulated) local post failed: a first transmission
 * then goes to the resend queue through usnic_rel_tx_send_failed(), as in the
 * BTL; a resend stays where it is.
 */
static bool post_fails(struct sim *s, struct sim_ep *ep)
{
    if (s->cfg.send_fail > 0 && sim_rng_unit(&s->rng) < s->cfg.send_fail) {
        ep->st.tx_post_failed++;
        return true;
    }
    return false;
}

static bool post_seg(struct sim *s, struct sim_ep *ep, struct sim_seg *seg, bool ack_req)
{
    struct usnic_pkt_hdr *h = (struct usnic_pkt_hdr *) (void *) seg->pkt;

    if (post_fails(s, ep)) {
        return false;
    }
    if (seg->q_on) {
        rq_unlink(ep, seg);
    }
    if (!ack_req && 0 == seg->rel.sends && s->cfg.ack_req > 0 &&
        sim_rng_unit(&s->rng) < s->cfg.ack_req) {
        ack_req = true;
    }
    h->flags = USNIC_PKT_FLAG_ACK | (ack_req ? USNIC_PKT_FLAG_ACK_REQ : 0);
    h->ack_seq = usnic_rel_rx_ack_value(&ep->rel);
    h->ts = usnic_rel_ts(s->now);
    h->ts_echo = ep->rel.rx.ts_recent;
    sim_seal(s, ep->idx, seg->pkt, seg->len);
    xmit(s, ep, seg->pkt, seg->len);
    usnic_rel_ack_sent(&ep->rel);
    if (ack_req) {
        ep->st.tx_ack_reqs++;
    }
    if (0 == seg->rel.sends) {
        seg->first_sent_ns = s->now;
        ep->st.tx_data++;
    } else {
        ep->st.tx_resent++;
    }
    seg->last_sent_ns = s->now;
    usnic_rel_tx_sent(&ep->rel, &seg->rel, s->now);
    return true;
}

/* An explicit ACK, with the SACK bitmap when there is a gap (as the BTL
 * sends it); with ping_ts != 0 a ping asking for an ACK at once. */
static void send_ack_ts(struct sim *s, struct sim_ep *ep, uint32_t ping_ts)
{
    struct usnic_pkt_hdr h;
    uint64_t sk[USNIC_SACK_WORDS_MAX];
    uint64_t buf[(USNIC_HDR_LEN_ACK + sizeof(sk)) / 8];
    size_t len;
    bool more;
    unsigned nw = usnic_rel_rx_sack(&ep->rel, sk, s->cfg.no_sack ? 0u : s->cfg.sack_words, &more);

    sim_hdr_init(&h, USNIC_PKT_ACK,
                 USNIC_PKT_FLAG_ACK | (nw ? USNIC_PKT_FLAG_SACK : 0) |
                     (more ? USNIC_PKT_FLAG_SACK_MORE : 0) | (ping_ts ? USNIC_PKT_FLAG_ACK_REQ : 0),
                 0, ep->module_id, ep->key, 0, usnic_rel_rx_ack_value(&ep->rel));
    /* as the BTL stamps them: each ACK packet later than the one before,
     * a ping with the time it leaves (its answer echoes that) */
    h.ts = usnic_rel_ts(s->now);
    if ((int32_t) (h.ts - ep->ack_ts_last) <= 0) {
        h.ts = usnic_rel_ts((uint64_t) ep->ack_ts_last + 1u);
    }
    ep->ack_ts_last = h.ts;
    if (ping_ts && ep->rel.tx.ping.waiting && ep->rel.tx.ping.ts == ping_ts) {
        ep->rel.tx.ping.ts = h.ts;
    }
    h.ts_echo = ep->rel.rx.ts_recent;
    len = sim_pkt_build(buf, sizeof(buf), &h, NULL, NULL, sk, nw * sizeof(sk[0]));
    sim_seal(s, ep->idx, buf, len);
    xmit(s, ep, (const uint8_t *) buf, len);
    usnic_rel_ack_sent(&ep->rel);
    if (!ping_ts) {
        ep->st.tx_acks++;
    }
    if (nw) {
        ep->st.tx_sacks++;
    }
}

static void send_ack(struct sim *s, struct sim_ep *ep)
{
    send_ack_ts(s, ep, 0);
}

static bool ep_has_new(const struct sim_ep *ep)
{
    return ep->next_msg < ep->nmsgs;
}

static void pump(struct sim *s, struct sim_ep *ep)
{
    /* retransmissions first, in queue order; a failed post stops the queue */
    while (ep->rq_head) {
        struct sim_seg *seg = ep->rq_head;
        if (!(seg->rel.state & USNIC_REL_SEG_IN_WINDOW) ||
            !(seg->rel.state & USNIC_REL_SEG_RESEND)) {
            sim_error(s, "seq %u on the resend queue in state %#x", seg->rel.seq, seg->rel.state);
        }
        if (!post_seg(s, ep, seg, false)) {
            break;
        }
    }
    /* new data while the window is open */
    while (ep_has_new(ep)) {
        struct sim_seg *seg;
        usnic_seq_t seq;
        uint32_t inflight;

        if (!usnic_rel_tx_window_open(&ep->rel)) {
            ep->st.blocked++;
            break;
        }
        seg = next_segment(s, ep);
        seq = usnic_rel_tx_push(&ep->rel, &seg->rel);
        ((struct usnic_pkt_hdr *) (void *) seg->pkt)->seq = seq;
        oracle_record(s, ep, seq, seg->msg);
        inflight = usnic_rel_tx_inflight(&ep->rel);
        if (inflight > ep->rel.tx.win_size) {
            sim_error(s, "%u segments in flight with a window of %u", inflight,
                      ep->rel.tx.win_size);
        }
        if (inflight > ep->st.max_inflight) {
            ep->st.max_inflight = inflight;
        }
        if (!post_seg(s, ep, seg, s->cfg.ack_req_on_full && !usnic_rel_tx_window_open(&ep->rel))) {
            usnic_rel_tx_send_failed(&ep->rel, &seg->rel);
        }
    }
    /* an explicit ACK if one is owed and nothing carried it */
    if (usnic_rel_ack_due(&ep->rel, s->now, s->cfg.ack_delay_ns)) {
        send_ack(s, ep);
    }
}

/* ---------------------------------------------------------------- receiver */

static struct sim_ep *lookup_sender(struct sim *s, struct sim_ep *ep, uint64_t key)
{
    for (unsigned i = 0; i < ep->nknown; i++) {
        if (ep->known[i].key == key) {
            return &s->ep[ep->known[i].ep];
        }
    }
    return NULL;
}

/* Which of peer's messages the segment with this seq carried, or NULL. */
static struct sim_msg *oracle_msg(struct sim_ep *peer, usnic_seq_t seq)
{
    uint32_t off = seq - peer->tx_isn;

    if ((uint64_t) off >= peer->nsegs) {
        return NULL;
    }
    return &peer->msgs[peer->seq_msg[off]];
}

static void log_delivery(struct sim_ep *ep, struct sim_msg *m)
{
    if (ep->rx_nlog == ep->rx_cap) {
        ep->rx_cap = ep->rx_cap ? 2 * ep->rx_cap : 256;
        ep->rx_log = xrealloc(ep->rx_log, ep->rx_cap * sizeof(*ep->rx_log));
    }
    ep->rx_log[ep->rx_nlog].id = m->id;
    ep->rx_log[ep->rx_nlog].len = m->len;
    ep->rx_nlog++;
    m->delivered++;
    ep->st.delivered++;
    ep->st.delivered_bytes += m->len;
}

/* ---- the simulation's side of the receive dispatch (btl_usnic_rx.h) ---- */

static enum usnic_drop_reason sim_rx_lookup(void *t, const struct usnic_pkt_hdr *hdr,
                                            struct usnic_rx_conn *c)
{
    struct sim_ep *ep = t;
    struct sim_ep *peer = lookup_sender(ep->sim, ep, hdr->sender_key);

    if (NULL == peer) {
        return USNIC_DROP_SENDER;
    }
    if (SIM_SRC_PEER != ep->sim->rx_src && SIM_SRC_FORGED != ep->sim->rx_src) {
        return USNIC_DROP_ADDRESS; /* not from where the peer sends */
    }
    c->predict = true;
    c->rel = &ep->rel;
    c->reasm = &ep->reasm;
    c->ep = peer;
    c->key = &peer->mac_key;
    c->memo = &ep->rx_memo;
    c->auth = ep->sim->cfg.auth;
    c->crc = ep->sim->cfg.crc;
    c->parts = &ep->parts;
    return USNIC_PKT_OK;
}

static bool sim_rx_tag_ok(void *t, uint8_t tag)
{
    (void) t;
    (void) tag;
    return true; /* the simulated PML takes every tag */
}

/* A fragment reached the PML: it must be the peer's next SEND, whole. */
static void sim_rx_deliver(void *t, void *from, uint8_t tag, const void *data, uint64_t len)
{
    struct sim_ep *ep = t, *peer = from;
    struct sim_msg *m;

    while (ep->rx_next < peer->nmsgs && SIM_MSG_SEND != peer->msgs[ep->rx_next].kind) {
        ep->rx_next++;
    }
    if (ep->rx_next >= peer->nmsgs) {
        ep->st.unexpected++;
        return;
    }
    m = &peer->msgs[ep->rx_next++];
    m->rx_hash = sim_fnv(SIM_FNV_INIT, data, (size_t) len);
    if (tag != m->tag || len != m->len || sim_msg_mismatch(m->key, 0, data, (size_t) len) >= 0 ||
        m->rx_hash != m->hash) {
        m->corrupt++;
    }
    log_delivery(ep, m);
}

static enum usnic_drop_reason sim_rx_put_resolve(void *t, uint64_t key, uint64_t reg_offset,
                                                 uint64_t len, uint8_t **dest)
{
    return usnic_reg_resolve(&((struct sim_ep *) t)->reg, key, reg_offset, len, dest);
}

static void sim_rx_put_write(void *t, void *from, uint8_t *dest, const struct usnic_pkt_view *v)
{
    struct sim_ep *ep = t;
    struct sim_msg *m = oracle_msg(from, v->hdr->seq);

    memcpy(dest, v->payload, v->payload_len);
    if (NULL == m || SIM_MSG_PUT != m->kind || m->wire_id != v->hdr->msg_id ||
        m->len != v->chunk->msg_len || m->reg_key != v->put->reg_key ||
        m->reg_offset != v->put->reg_offset) {
        ep->st.unexpected++;
        return;
    }
    m->put_bytes += v->payload_len;
    if (m->put_bytes == m->len) {
        /* the whole PUT landed: check the target bytes */
        const uint8_t *base = dest - v->chunk->offset;
        m->rx_hash = sim_fnv(SIM_FNV_INIT, base, (size_t) m->len);
        if (sim_msg_mismatch(m->key, 0, base, (size_t) m->len) >= 0 || m->rx_hash != m->hash) {
            m->corrupt++;
        }
        log_delivery(ep, m);
    } else if (m->put_bytes > m->len) {
        m->corrupt++;
    }
}

static void sim_rx_acked(void *t, void *from, int released)
{
    (void) t;
    (void) from;
    (void) released;
}

static void sim_rx_accepted(void *t, void *from, uint32_t payload_len)
{
    (void) from;
    (void) payload_len;
    ((struct sim_ep *) t)->st.rx_accepted++;
}

static void sim_rx_ack_schedule(void *t, void *from)
{
    (void) t;
    (void) from; /* pump() sends what usnic_rel_ack_due() says */
}

static void sim_rx_drop(void *t, void *from, enum usnic_drop_reason r)
{
    (void) from;
    ((struct sim_ep *) t)->drops[((unsigned) r < USNIC_DROP__COUNT) ? r : 0]++;
}

static void sim_rx_ack_rx(void *t, void *from, bool fresh)
{
    (void) from;
    if (fresh) {
        ((struct sim_ep *) t)->st.rx_acks++;
    }
}

/* A deferred fragment's pieces, checked as the whole fragment. */
static bool sim_rx_deliver_pieces(void *t, void *from, uint8_t tag,
                                  const struct usnic_reasm_piece *piece, unsigned n, uint64_t len)
{
    struct sim_ep *ep = t;
    uint8_t *whole = xcalloc(1, len ? (size_t) len : 1);
    uint64_t off = 0;

    for (unsigned i = 0; i < n; i++) {
        if (off + piece[i].len > len) {
            ep->sim->errors++;
            snprintf(ep->sim->err, sizeof(ep->sim->err), "pieces longer than the fragment");
            break;
        }
        memcpy(whole + off, piece[i].data, (size_t) piece[i].len);
        off += piece[i].len;
    }
    if (off != len) {
        ep->sim->errors++;
        snprintf(ep->sim->err, sizeof(ep->sim->err), "pieces of %" PRIu64 " bytes for %" PRIu64,
                 off, len);
    }
    ep->st.delivered_pieces++;
    sim_rx_deliver(t, from, tag, whole, len);
    free(whole);
    return true;
}

static void sim_rx_deferred(void *t, void *from, struct usnic_reasm_table *reasm)
{
    struct sim_ep *ep = t;
    (void) from;
    (void) reasm; /* (ep->reasm) */
    ep->deferred = true;
}

static const struct usnic_rx_ops sim_rx_ops = {
    .lookup = sim_rx_lookup,
    .tag_ok = sim_rx_tag_ok,
    .deliver = sim_rx_deliver,
    .deliver_pieces = sim_rx_deliver_pieces,
    .deferred = sim_rx_deferred,
    .put_resolve = sim_rx_put_resolve,
    .put_write = sim_rx_put_write,
    .acked = sim_rx_acked,
    .accepted = sim_rx_accepted,
    .ack_schedule = sim_rx_ack_schedule,
    .drop = sim_rx_drop,
    .ack_rx = sim_rx_ack_rx,
};

/* cfg.mac_ahead: the key (and *tag) the dispatch gets as computed ahead */
static const struct usnic_sip_key *sim_mac_ahead(struct sim *s, struct sim_ep *ep,
                                                 const uint8_t *buf, size_t len, uint64_t *tag)
{
    static const struct usnic_sip_key other_key = {0x0123456789abcdefull, 0xfedcba9876543210ull};
    const struct usnic_sip_key *mac_key = NULL;
    uint64_t mac_tag = 0;

    if (0 != s->cfg.mac_ahead) {
        const struct sim_ep *peer = &s->ep[1 - (ep - s->ep)];
        const uint8_t *b[1] = {buf};
        size_t l[1] = {len};
        bool ok = false;

        usnic_pkt_macs(b, l, 1, &peer->mac_key, &mac_tag, &ok);
        if (ok) {
            mac_key = (3 == s->cfg.mac_ahead) ? &other_key : &peer->mac_key;
            mac_tag ^= (2 == s->cfg.mac_ahead) ? 1u : (3 == s->cfg.mac_ahead) ? ~0ull : 0u;
            ep->st.rx_macs_ahead++;
        }
    }
    *tag = mac_tag;
    return mac_key;
}

/* cfg.split: a CHUNK or PUT datagram's payload, unpadded, where neither
 * CRC nor MAC covers it: copied out to *payload (its header to *hdr), as a
 * direct receive leaves it; false: not such a datagram. */
static bool split_payload(const struct sim *s, const uint8_t *buf, size_t len, uint8_t **hdr,
                          uint8_t **payload)
{
    const struct usnic_pkt_hdr *h = (const struct usnic_pkt_hdr *) (const void *) buf;
    size_t hlen;

    if (!s->cfg.split || s->cfg.crc || s->cfg.auth > 1 || len < sizeof(*h) ||
        (USNIC_PKT_CHUNK != h->type && USNIC_PKT_PUT != h->type)) {
        return false;
    }
    hlen = usnic_pkt_hdr_len(h->type);
    if (len <= hlen || h->payload_len != len - hlen) {
        return false;
    }
    *hdr = xcalloc(1, hlen); /* (exact sizes: nothing may read past them) */
    *payload = xcalloc(1, len - hlen);
    memcpy(*hdr, buf, hlen);
    memcpy(*payload, buf + hlen, len - hlen);
    return true;
}

static void rx_packet(struct sim *s, struct sim_ep *ep, const uint8_t *buf, size_t len, bool defer)
{
    uint8_t *hdr = NULL, *payload = NULL;
    bool split = split_payload(s, buf, len, &hdr, &payload);
    uint64_t mac_tag = 0;
    const struct usnic_sip_key *mac_key =
        sim_mac_ahead(s, ep, split ? hdr : buf, split ? usnic_pkt_hdr_len(hdr[1]) : len, &mac_tag);
    struct usnic_pkt_view v;
    const struct usnic_rx_params p = {
        .max_msg_len = s->cfg.max_msg_len,
        .now = s->now,
        .lane = 0, /* one lane: the link keeps the order of what it does not reorder */
        .defer = defer,
        .mac_key = mac_key,
        .mac_tag = mac_tag,
        .predict = s->cfg.predict ? &ep->pred : NULL,
        .src = (SIM_SRC_FORGED == s->rx_src) ? SIM_SRC_PEER : s->rx_src,
        .payload = payload,
    };

    ep->st.rx_pkts++;
    if (USNIC_PKT_OK == usnic_pkt_parse(buf, len, s->cfg.max_msg_len, &v) &&
        (v.hdr->flags & USNIC_PKT_FLAG_ACK_REQ)) {
        ep->st.rx_ack_reqs++;
        ep->ack_req_in_run += (s->cfg.predict && ep->pred.ok);
    }
    ep->foreign_in_run += (s->cfg.predict && ep->pred.ok && SIM_SRC_FOREIGN == s->rx_src);
    ep->forged_in_run += (s->cfg.predict && ep->pred.ok && SIM_SRC_FORGED == s->rx_src);
    (void) usnic_rx_dispatch(&sim_rx_ops, ep, split ? hdr : buf, len, &p);
    if (split) {
        memset(payload, 0x5A, len - usnic_pkt_hdr_len(hdr[1])); /* (nothing may keep it) */
        free(hdr);
        free(payload);
    }
}

void sim_deliver_now(struct sim *s, int to, const void *buf, size_t len)
{
    uint8_t *copy = xcalloc(1, len);
    if (len) {
        memcpy(copy, buf, len);
    }
    s->rx_src = SIM_SRC_PEER;
    rx_packet(s, &s->ep[to], copy, len, false);
    free(copy);
}

void sim_inject(struct sim *s, int to, const void *buf, size_t len, uint64_t at_ns)
{
    enqueue_copy(s, to, buf, len, (at_ns < s->now) ? s->now : at_ns, SIM_SRC_PEER);
}

/* ---------------------------------------------------------------- loop */

static bool next_event(const struct sim *s, uint64_t *t)
{
    bool any = false;
    uint64_t best = UINT64_MAX;

#define CONSIDER(x)                                                                                \
    do {                                                                                           \
        uint64_t x_ = (x);                                                                         \
        if (!any || x_ < best) {                                                                   \
            best = x_;                                                                             \
        }                                                                                          \
        any = true;                                                                                \
    } while (0)

    if (s->nheap) {
        CONSIDER(s->heap[0]->t);
    }
    for (int i = 0; i < 2; i++) {
        if (s->ep[i].timer_deadline) {
            CONSIDER(s->ep[i].timer_deadline);
        }
    }
    for (int i = 0; i < 2; i++) {
        const struct sim_ep *ep = &s->ep[i];
        if (ep->rq_head || (ep_has_new(ep) && usnic_rel_tx_window_open(&ep->rel)) ||
            ep->rel.rx.ack_now) {
            CONSIDER(s->now);
        } else if (ep->rel.rx.ack_owed) {
            CONSIDER(ep->rel.rx.ack_owed_since + s->cfg.ack_delay_ns);
        }
    }
#undef CONSIDER
    *t = (best < s->now) ? s->now : best;
    return any;
}

/* cfg.defer: the batch ends: deferred pieces are copied in, then the
 * arrivals' buffers are scribbled over and freed. */
static void batch_end(struct sim *s)
{
    for (int i = 0; i < 2; i++) {
        s->ep[i].pred.ok = false; /* (as the BTL: predictions live within a batch) */
        if (s->ep[i].deferred) {
            usnic_reasm_materialize(&s->ep[i].reasm);
            s->ep[i].deferred = false;
        }
    }
    for (size_t i = 0; i < s->nbatch; i++) {
        memset(s->batch[i]->buf, 0x5A, s->batch[i]->len);
        free(s->batch[i]->buf);
        free(s->batch[i]);
    }
    s->nbatch = 0;
    s->batch_len = 1 + sim_rng_next(&s->rng) % 16;
}

bool sim_step(struct sim *s)
{
    uint64_t t;

    if (!next_event(s, &t)) {
        return false;
    }
    s->now = t;
    s->steps++;
    /* arrivals first, so ACKs cancel timers that expire at the same instant */
    while (s->nheap && s->heap[0]->t <= s->now) {
        struct sim_pkt *p = heap_pop(s);
        s->rx_src = p->src;
        rx_packet(s, &s->ep[p->to], p->buf, p->len, s->cfg.defer);
        if (!s->cfg.defer) {
            free(p->buf);
            free(p);
            continue;
        }
        if (s->nbatch == s->batch_cap) {
            s->batch_cap = s->batch_cap ? 2 * s->batch_cap : 16;
            s->batch = realloc(s->batch, s->batch_cap * sizeof(*s->batch));
            if (NULL == s->batch) {
                abort();
            }
        }
        s->batch[s->nbatch++] = p;
        if (s->nbatch >= s->batch_len) {
            batch_end(s);
        }
    }
    for (int i = 0; i < 2; i++) {
        struct sim_ep *ep = &s->ep[i];
        if (ep->timer_deadline && ep->timer_deadline <= s->now) {
            ep->st.timer_fires++;
            usnic_rel_tx_timer(&ep->rel, s->now);
        }
    }
    pump(s, &s->ep[0]);
    pump(s, &s->ep[1]);
    return true;
}

bool sim_quiescent(const struct sim *s)
{
    if (s->nheap) {
        return false;
    }
    for (int i = 0; i < 2; i++) {
        const struct sim_ep *ep = &s->ep[i];
        if (ep_has_new(ep) || ep->rq_head || usnic_rel_tx_inflight(&ep->rel) > 0 ||
            ep->rel.rx.ack_owed || ep->rel.rx.ack_now) {
            return false;
        }
    }
    return true;
}

int sim_run(struct sim *s, uint64_t max_ns)
{
    while (!sim_quiescent(s)) {
        if (s->errors) {
            return -1;
        }
        if (!sim_step(s)) {
            sim_error(s, "stalled at t=%" PRIu64 " ns with work left", s->now);
            return -1;
        }
        if (s->now > max_ns) {
            sim_error(s, "not done after %" PRIu64 " ns of simulated time", max_ns);
            return -1;
        }
    }
    return s->errors ? -1 : 0;
}

/* ---------------------------------------------------------------- results */

int sim_verify(const struct sim *s, char *why, size_t whylen)
{
    if (s->errors) {
        snprintf(why, whylen, "harness: %s (%" PRIu64 " errors)", s->err, s->errors);
        return -1;
    }
    for (int i = 0; i < 2; i++) {
        const struct sim_ep *ep = &s->ep[i];
        const struct sim_ep *peer = &s->ep[1 - i];
        if (peer->st.unexpected) {
            snprintf(why, whylen, "%c received %" PRIu64 " packets matching no message",
                     'A' + (1 - i), peer->st.unexpected);
            return -1;
        }
        for (uint32_t k = 0; k < ep->nmsgs; k++) {
            const struct sim_msg *m = &ep->msgs[k];
            if (1 != m->delivered || m->corrupt || m->rx_hash != m->hash) {
                snprintf(why, whylen,
                         "%c->%c msg %u (%s, %" PRIu64 " bytes): delivered %u times, corrupt %u, "
                         "hash %016" PRIx64 " vs %016" PRIx64,
                         'A' + i, 'A' + (1 - i), k, (SIM_MSG_PUT == m->kind) ? "PUT" : "SEND",
                         m->len, m->delivered, m->corrupt, m->rx_hash, m->hash);
                return -1;
            }
        }
    }
    return 0;
}

uint64_t sim_retrans(const struct sim *s)
{
    uint64_t n = 0;
    for (int i = 0; i < 2; i++) {
        const struct usnic_rel_stats *st = &s->ep[i].rel.stats;
        n += st->retrans_timeout + st->retrans_fast + st->retrans_sack;
    }
    return n;
}

void sim_summary(const struct sim *s, char *buf, size_t len)
{
    size_t n = 0;
    int w;

    w = snprintf(buf, len, "t=%" PRIu64 "us steps=%" PRIu64 " lost=%" PRIu64 " dup=%" PRIu64,
                 s->now / 1000, s->steps, s->lost, s->duplicated);
    n = (w > 0 && (size_t) w < len) ? (size_t) w : len;
    for (int i = 0; i < 2 && n < len; i++) {
        const struct sim_ep *ep = &s->ep[i];
        w = snprintf(buf + n, len - n,
                     " | %c: data=%" PRIu64 " resent=%" PRIu64 " acks=%" PRIu64 " sacks=%" PRIu64
                     " rto=%" PRIu64 " tlp=%" PRIu64 " fast=%" PRIu64 " rack=%" PRIu64
                     " sacked=%" PRIu64 " srtt=%" PRIu64 " dupacks=%" PRIu64 " deliv=%" PRIu64
                     " drops:",
                     'A' + i, ep->st.tx_data, ep->st.tx_resent, ep->st.tx_acks, ep->st.tx_sacks,
                     ep->rel.stats.retrans_timeout, ep->rel.stats.tlp_probes,
                     ep->rel.stats.retrans_fast, ep->rel.stats.retrans_sack, ep->rel.stats.sacked,
                     ep->rel.tx.srtt, ep->rel.stats.dup_acks, ep->st.delivered);
        n = (w > 0 && (size_t) w < len - n) ? n + (size_t) w : len;
        for (int r = 1; r < USNIC_DROP__COUNT && n < len; r++) {
            if (ep->drops[r]) {
                w = snprintf(buf + n, len - n, " %s=%" PRIu64,
                             usnic_drop_reason_name((enum usnic_drop_reason) r), ep->drops[r]);
                n = (w > 0 && (size_t) w < len - n) ? n + (size_t) w : len;
            }
        }
    }
}
