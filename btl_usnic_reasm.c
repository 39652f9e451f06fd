/* Reassembly of chunked fragments (see btl_usnic_reasm.h). */
#include <stdlib.h>
#include <string.h>

#include "btl_usnic_reasm.h"

int usnic_reasm_table_init(struct usnic_reasm_table *t, uint32_t nslots,
                           const struct usnic_reasm_alloc *alloc)
{
    t->nslots = nslots ? nslots : 1;
    t->alloc = alloc;
    t->chunk = 0;
    t->slots = calloc(t->nslots, sizeof(*t->slots));
    return (NULL == t->slots) ? -1 : 0;
}

void usnic_reasm_table_fini(struct usnic_reasm_table *t)
{
    if (NULL == t->slots) {
        return;
    }
    for (uint32_t i = 0; i < t->nslots; i++) {
        if (t->slots[i].active) {
            usnic_reasm_release(t, &t->slots[i]);
        }
    }
    free(t->slots);
    t->slots = NULL;
}

static inline struct usnic_reasm *slot_of(const struct usnic_reasm_table *t, uint32_t msg_id)
{
    return &t->slots[msg_id % t->nslots];
}

enum usnic_drop_reason usnic_reasm_check(const struct usnic_reasm_table *t, uint32_t msg_id,
                                         uint64_t msg_len, uint8_t tag)
{
    const struct usnic_reasm *r = slot_of(t, msg_id);

    if (!r->active) {
        return USNIC_PKT_OK;
    }
    if (r->msg_id != msg_id) {
        return USNIC_DROP_REASSEMBLY;
    }
    if (r->msg_len != msg_len || r->tag != tag) {
        return USNIC_DROP_CHUNK_RANGE;
    }
    return USNIC_PKT_OK;
}

enum usnic_drop_reason usnic_reasm_add(struct usnic_reasm_table *t, uint32_t msg_id,
                                       uint64_t msg_len, uint64_t offset, const void *data,
                                       uint32_t len, uint8_t tag, struct usnic_reasm **done)
{
    struct usnic_reasm *r = slot_of(t, msg_id);
    uint64_t idx = 0;
    bool track = false;

    *done = NULL;
    if (0 != t->chunk) {
        if (0 != offset % t->chunk || len > t->chunk ||
            (len != t->chunk && offset + len != msg_len)) {
            return USNIC_DROP_CHUNK_RANGE;
        }
        idx = offset / t->chunk;
        track = (msg_len + t->chunk - 1) / t->chunk <= USNIC_REASM_MAX_CHUNKS;
        if (track && r->active && (r->got[idx / 64] & ((uint64_t) 1 << (idx % 64)))) {
            return USNIC_DROP_CHUNK_RANGE; /* this piece was written already */
        }
    }
    if (!r->active) {
        r->buf = t->alloc->get(t->alloc->ctx, msg_len, &r->handle);
        if (NULL == r->buf) {
            return USNIC_DROP_REASSEMBLY;
        }
        r->active = true;
        r->msg_id = msg_id;
        r->msg_len = msg_len;
        r->tag = tag;
        r->received = 0;
        memset(r->got, 0, sizeof(r->got));
    }
    if (track) {
        r->got[idx / 64] |= (uint64_t) 1 << (idx % 64);
    }
    memcpy(r->buf + offset, data, len);
    r->received += len;
    if (r->received >= r->msg_len) {
        *done = r;
    }
    return USNIC_PKT_OK;
}

void usnic_reasm_release(struct usnic_reasm_table *t, struct usnic_reasm *r)
{
    t->alloc->put(t->alloc->ctx, r->buf, r->handle);
    r->buf = NULL;
    r->handle = NULL;
    r->active = false;
}
