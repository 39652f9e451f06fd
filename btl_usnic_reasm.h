/*
 * Reassembly of chunked PML fragments on the receive side.
 *
 * Each connection has a small table of fragments being reassembled,
 * indexed by msg_id modulo the table size.
 *
 * Sizing rule: the table must have at least as many slots as the peer's
 * send window has segments.  A fragment under reassembly always has a
 * missing chunk inside the sender's window, and the sender numbers its
 * chunked fragments consecutively, so all fragments under way have msg_ids
 * less than a window apart and never share a slot.  A smaller table can
 * deadlock: a newer fragment holds the slot an older one needs while the
 * older one's unacknowledged chunk keeps the window full.  Chunks may arrive in any order
 * (duplicates never reach this code: the sequence-number layer drops them).
 * A fragment is complete when msg_len bytes have been copied in.
 *
 * Buffers come from the caller (free lists in the BTL, malloc in tests).
 */
#ifndef BTL_USNIC_REASM_H
#define BTL_USNIC_REASM_H

#include <stdbool.h>
#include <stdint.h>

#include "btl_usnic_proto.h"

struct usnic_reasm_alloc {
    /* return a buffer of at least len bytes, *handle is passed back to release */
    void *(*get)(void *ctx, uint64_t len, void **handle);
    void (*put)(void *ctx, void *buf, void *handle);
    void *ctx;
};

/* Chunks of one fragment tracked individually (beyond that, bytes are counted). */
#define USNIC_REASM_MAX_CHUNKS 512

struct usnic_reasm {
    bool active;
    uint8_t tag; /* PML tag of the fragment */
    uint32_t msg_id;
    uint64_t msg_len;  /* total length; buf holds at least this much */
    uint64_t received; /* bytes copied in so far, <= msg_len */
    uint8_t *buf;
    void *handle;
    uint64_t got[USNIC_REASM_MAX_CHUNKS / 64]; /* chunks received, when the table knows
                                                  the chunk size */
};

struct usnic_reasm_table {
    struct usnic_reasm *slots;
    uint32_t nslots;
    const struct usnic_reasm_alloc *alloc;
    /* The sender's chunk size, 0 if unknown.  When known, every chunk must
     * start at a multiple of it and be whole (or the fragment's tail), and
     * each may arrive once: overlapping or repeated chunks are rejected, so
     * a fragment is complete only when every byte was written. */
    uint64_t chunk;
};

int usnic_reasm_table_init(struct usnic_reasm_table *t, uint32_t nslots,
                           const struct usnic_reasm_alloc *alloc);
/* releases every active reassembly */
void usnic_reasm_table_fini(struct usnic_reasm_table *t);

/*
 * Check that a chunk can be taken, without changing anything (the sequence
 * layer commits only packets that are taken): USNIC_PKT_OK, or
 * USNIC_DROP_CHUNK_RANGE (inconsistent with the fragment already under way)
 * or USNIC_DROP_REASSEMBLY (slot taken by another fragment).
 * Bounds of offset/len against msg_len were already checked by
 * usnic_pkt_parse().
 */
enum usnic_drop_reason usnic_reasm_check(const struct usnic_reasm_table *t, uint32_t msg_id,
                                         uint64_t msg_len, uint8_t tag);

/*
 * Copy a chunk in.  Returns USNIC_PKT_OK and sets *done to the finished
 * reassembly when this chunk completed it (the caller delivers and then
 * calls usnic_reasm_release()), USNIC_DROP_CHUNK_RANGE if the chunk does not
 * fit the table's chunk size or was already received (nothing is written),
 * or USNIC_DROP_REASSEMBLY if no buffer could be had.  Call only after
 * usnic_reasm_check() returned OK.
 */
enum usnic_drop_reason usnic_reasm_add(struct usnic_reasm_table *t, uint32_t msg_id,
                                       uint64_t msg_len, uint64_t offset, const void *data,
                                       uint32_t len, uint8_t tag, struct usnic_reasm **done);

void usnic_reasm_release(struct usnic_reasm_table *t, struct usnic_reasm *r);

#endif /* BTL_USNIC_REASM_H */
