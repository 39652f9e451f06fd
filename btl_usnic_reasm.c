/* The receive side's fragment table (see btl_usnic_reasm.h). */
#include <stdlib.h>
#include <string.h>

#include "btl_usnic_reasm.h"
#include "btl_usnic_seq.h"

int usnic_reasm_table_init(struct usnic_reasm_table *t, uint32_t nslots,
                           const struct usnic_reasm_alloc *alloc, uint32_t first_msg_id)
{
    /* A power of two, so that slots follow msg_ids across the 32-bit wrap
     * (with 62 slots, 0xFFFFFFFC and 0 would share one, 4 numbers apart). */
    t->nslots = 1;
    while (t->nslots < nslots && t->nslots < (1u << 31)) {
        t->nslots <<= 1;
    }
    t->next = first_msg_id;
    t->alloc = alloc;
    t->chunk = 0;
    t->waited = 0;
    memset(&t->defer, 0, sizeof(t->defer));
    t->slots = NULL; /* at the first fragment that needs one (table_ready) */
    return 0;
}

/* The slots, allocated when the first fragment needs one: most peers'
 * fragments arrive whole and in turn and never do, and a table cleared at
 * once for every peer (256 slots of 112 bytes by default) was most of an
 * endpoint's start-up cost (docs/perf-init.md, session 28).  Until then
 * every slot reads as free. */
static bool table_ready(struct usnic_reasm_table *t)
{
    if (NULL == t->slots) {
        t->slots = calloc(t->nslots, sizeof(*t->slots));
    }
    return NULL != t->slots;
}

void usnic_reasm_table_fini(struct usnic_reasm_table *t)
{
    if (NULL == t->slots) {
        return;
    }
    for (uint32_t i = 0; i < t->nslots; i++) {
        if (USNIC_REASM_FREE != t->slots[i].state) {
            usnic_reasm_release(t, &t->slots[i]);
        }
    }
    free(t->slots);
    t->slots = NULL;
}

static inline struct usnic_reasm *slot_of(const struct usnic_reasm_table *t, uint32_t msg_id)
{
    return &t->slots[msg_id & (t->nslots - 1u)];
}

enum usnic_drop_reason usnic_reasm_check(const struct usnic_reasm_table *t, uint32_t msg_id,
                                         uint64_t msg_len, uint8_t tag, bool whole)
{
    int32_t ahead = usnic_seq_diff(msg_id, t->next);
    const struct usnic_reasm *r;

    if (ahead < 0) {
        return USNIC_DROP_CHUNK_RANGE; /* handed over already */
    }
    if ((uint32_t) ahead >= t->nslots) {
        return USNIC_DROP_REASSEMBLY;
    }
    if (NULL == t->slots) {
        return USNIC_PKT_OK; /* (every slot free) */
    }
    r = slot_of(t, msg_id);
    if (USNIC_REASM_FREE == r->state) {
        return USNIC_PKT_OK;
    }
    if (r->msg_id != msg_id) {
        return USNIC_DROP_REASSEMBLY; /* an older one is still being handed over */
    }
    /* this fragment is under way already: only more of its chunks fit */
    if (whole || USNIC_REASM_PARTIAL != r->state || r->msg_len != msg_len || r->tag != tag) {
        return USNIC_DROP_CHUNK_RANGE;
    }
    return USNIC_PKT_OK;
}

/* Take a free slot for fragment msg_id with a buffer of len bytes. */
static struct usnic_reasm *slot_open(struct usnic_reasm_table *t, uint32_t msg_id, uint64_t len,
                                     uint8_t tag)
{
    struct usnic_reasm *r;

    if (!table_ready(t)) {
        return NULL;
    }
    r = slot_of(t, msg_id);
    r->buf = t->alloc->get(t->alloc->ctx, len, msg_id == t->next, &r->handle);
    if (NULL == r->buf) {
        return NULL;
    }
    r->state = USNIC_REASM_PARTIAL;
    r->msg_id = msg_id;
    r->msg_len = len;
    r->tag = tag;
    r->received = 0;
    r->deferred = false;
    memset(r->got, 0, sizeof(r->got));
    return r;
}

void usnic_reasm_materialize(struct usnic_reasm_table *t)
{
    struct usnic_reasm *r;
    uint64_t off = 0;

    if (!t->defer.active) {
        return;
    }
    r = slot_of(t, t->defer.msg_id);
    if (r->deferred && r->msg_id == t->defer.msg_id) {
        for (unsigned i = 0; i < t->defer.n; i++) {
            memcpy(r->buf + off, t->defer.piece[i].data, t->defer.piece[i].len);
            off += t->defer.piece[i].len;
        }
        r->deferred = false;
    }
    t->defer.active = false;
    t->defer.n = 0;
}

enum usnic_drop_reason usnic_reasm_add(struct usnic_reasm_table *t, uint32_t msg_id,
                                       uint64_t msg_len, uint64_t offset, const void *data,
                                       uint32_t len, uint8_t tag)
{
    bool deferred_now;
    return usnic_reasm_add_defer(t, msg_id, msg_len, offset, data, len, tag, false, &deferred_now);
}

enum usnic_drop_reason usnic_reasm_add_defer(struct usnic_reasm_table *t, uint32_t msg_id,
                                             uint64_t msg_len, uint64_t offset, const void *data,
                                             uint32_t len, uint8_t tag, bool defer,
                                             bool *deferred_now)
{
    struct usnic_reasm *r;
    uint64_t idx = 0;
    bool track = false, piece = false, joins = false;
    struct usnic_reasm_piece *last = NULL; /* the deferred fragment's last piece */

    *deferred_now = false;
    if (!table_ready(t)) {
        return USNIC_DROP_REASSEMBLY;
    }
    r = slot_of(t, msg_id);
    if (0 != t->chunk) {
        if (0 != offset % t->chunk || len > t->chunk ||
            (len != t->chunk && offset + len != msg_len)) {
            return USNIC_DROP_CHUNK_RANGE;
        }
        idx = offset / t->chunk;
        track = (msg_len + t->chunk - 1) / t->chunk <= USNIC_REASM_MAX_CHUNKS;
        if (track && USNIC_REASM_FREE != r->state &&
            (r->got[idx / 64] & ((uint64_t) 1 << (idx % 64)))) {
            return USNIC_DROP_CHUNK_RANGE; /* this piece was written already */
        }
    }
    if (USNIC_REASM_FREE == r->state) {
        if (NULL == slot_open(t, msg_id, msg_len, tag)) {
            return USNIC_DROP_REASSEMBLY;
        }
        if (defer && 0 == offset && !t->defer.active) {
            /* the first chunk, in order: a deferred fragment begins */
            r->deferred = true;
            t->defer.active = true;
            t->defer.msg_id = msg_id;
            t->defer.n = 0;
            t->defer.end = 0;
            *deferred_now = true;
        }
    }
    if (r->deferred) {
        last = &t->defer.piece[t->defer.n - (t->defer.n > 0)];
        joins = t->defer.n > 0 && last->data + last->len == (const uint8_t *) data;
        /* the pieces hold [0, end) and the buffer what arrived beyond: a
         * chunk at end extends them while a segment is left for that tail
         * (or it is the fragment's last chunk, and there is no tail) */
        piece = defer && offset == t->defer.end &&
                (joins || t->defer.n + 1u < USNIC_REASM_PIECES ||
                 (t->defer.n + 1u == USNIC_REASM_PIECES && offset + len == msg_len));
        if (!piece && offset < t->defer.end) {
            usnic_reasm_materialize(t); /* (cannot happen: bytes the pieces hold) */
        }
    }
    if (track) {
        r->got[idx / 64] |= (uint64_t) 1 << (idx % 64);
    }
    if (piece) {
        if (joins) {
            last->len += len; /* right behind the piece before: one piece */
        } else {
            t->defer.piece[t->defer.n].data = (const uint8_t *) data;
            t->defer.piece[t->defer.n].len = len;
            t->defer.n++;
        }
        t->defer.end += len;
    } else if (r->buf + offset != (const uint8_t *) data) {
        memcpy(r->buf + offset, data, len);
    }
    r->received += len;
    if (r->received >= r->msg_len) {
        r->state = USNIC_REASM_COMPLETE;
        t->waited += (msg_id != t->next);
    }
    return USNIC_PKT_OK;
}

unsigned usnic_reasm_pieces(const struct usnic_reasm_table *t, const struct usnic_reasm *r,
                            struct usnic_reasm_piece *out)
{
    unsigned n = t->defer.n;

    memcpy(out, t->defer.piece, n * sizeof(*out));
    if (t->defer.end < r->msg_len) {
        out[n].data = r->buf + t->defer.end;
        out[n++].len = r->msg_len - t->defer.end;
    }
    return n;
}

uint8_t *usnic_reasm_dest(const struct usnic_reasm_table *t, uint32_t msg_id, uint64_t msg_len)
{
    const struct usnic_reasm *r;

    if ((uint32_t) usnic_seq_diff(msg_id, t->next) >= t->nslots || NULL == t->slots) {
        return NULL; /* handed over already, or too far ahead, or nothing held */
    }
    r = slot_of(t, msg_id);
    /* (not a deferred fragment: its first bytes are not in its buffer yet) */
    return ((USNIC_REASM_PARTIAL == r->state || USNIC_REASM_COMPLETE == r->state) &&
            r->msg_id == msg_id && r->msg_len == msg_len && !r->deferred)
               ? r->buf
               : NULL;
}

enum usnic_drop_reason usnic_reasm_hold(struct usnic_reasm_table *t, uint32_t msg_id,
                                        const void *data, uint64_t len, uint8_t tag)
{
    /* a zero-length fragment still needs a buffer pointer to hand over */
    struct usnic_reasm *r = slot_open(t, msg_id, len ? len : 1, tag);

    if (NULL == r) {
        return USNIC_DROP_REASSEMBLY;
    }
    r->msg_len = len;
    if (len > 0) {
        memcpy(r->buf, data, len);
    }
    r->received = len;
    r->state = USNIC_REASM_COMPLETE;
    t->waited++;
    return USNIC_PKT_OK;
}

struct usnic_reasm *usnic_reasm_pop(struct usnic_reasm_table *t)
{
    struct usnic_reasm *r;

    if (NULL == t->slots) {
        return NULL;
    }
    r = slot_of(t, t->next);
    if (USNIC_REASM_COMPLETE != r->state || r->msg_id != t->next) {
        return NULL;
    }
    r->state = USNIC_REASM_DELIVERING;
    t->next++;
    return r;
}

void usnic_reasm_release(struct usnic_reasm_table *t, struct usnic_reasm *r)
{
    if (r->deferred) {
        /* handed over as pieces (or given up): they are nobody's now */
        r->deferred = false;
        t->defer.active = false;
        t->defer.n = 0;
    }
    t->alloc->put(t->alloc->ctx, r->buf, r->handle);
    r->buf = NULL;
    r->handle = NULL;
    r->state = USNIC_REASM_FREE;
}
