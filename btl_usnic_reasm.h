/*
 * The receive side's fragment table: reassembly of chunked PML fragments,
 * and delivery of all PML fragments in the order the peer sent them.
 *
 * Why in order.  ob1 accepts fragments of one message in any order and
 * unpacks each at its offset (opal_convertor_set_position).  In Open MPI
 * 4.1.4 that positioning is wrong for some nested datatypes when it has to
 * skip forward from where the previous fragment ended: a fragment that
 * arrives ahead of the one before it is unpacked at the wrong place in the
 * user's buffer.  (Measured with Debian's 4.1.4 alone, no network: a
 * hindexed of an out-of-order indexed_block of a resized struct, unpacked
 * in 149968-byte pieces, comes out wrong for 18 of 50 random piece orders;
 * in order it is always right.)  Over a datagram network a lost chunk makes
 * the next fragment complete first, so the BTL must not pass that on: it
 * hands fragments to the PML strictly in the sender's order, as a byte
 * stream transport would.  A fragment that completes early waits here.
 *
 * Numbering.  The sender numbers the PML fragments it sends to one peer
 * consecutively (msg_id, in every FRAG and CHUNK packet); `next` is the
 * number of the next one to hand over.  A fragment is held in slot
 * msg_id mod nslots (a power of two, so that this follows the numbers
 * across their 32-bit wrap).
 *
 * Sizing rule: the table must have at least as many slots as the peer's
 * send window has segments.  Fragment `next` has not been handed over, so
 * one of its datagrams is missing, and that datagram is still inside the
 * sender's window; the sender numbers and sends its fragments in one
 * order, so every later fragment was sent after it, inside that window
 * too.  The fragments that can arrive are therefore numbered less than a
 * window beyond `next` and never share a slot.  A packet numbered a
 * table's length or more beyond `next` is dropped (unacknowledged, so the
 * sender repeats it later).
 *
 * Chunks may arrive in any order; duplicates never reach this code (the
 * sequence-number layer drops them).  Buffers come from the caller (free
 * lists in the BTL, malloc in the tests).
 */
#ifndef BTL_USNIC_REASM_H
#define BTL_USNIC_REASM_H

#include <stdbool.h>
#include <stdint.h>

#include "btl_usnic_proto.h"

struct usnic_reasm_alloc {
    /* Return a buffer of at least len bytes (NULL if none); *handle is
     * passed back to put.  urgent: the buffer is for fragment `next`, which
     * every later one waits for; refusing it could stall the connection for
     * good while waiting fragments hold the pool, so the allocator should
     * go beyond its pool if it must (at most one such buffer per peer). */
    void *(*get)(void *ctx, uint64_t len, bool urgent, void **handle);
    void (*put)(void *ctx, void *buf, void *handle);
    void *ctx;
};

/* Chunks of one fragment tracked individually (beyond that, bytes are counted). */
#define USNIC_REASM_MAX_CHUNKS 512

/*
 * Deferred chunks.  A transport whose receive buffers stay untouched until
 * it says so (the kernel backend, for one batch of receives) may let the
 * table leave a fragment's chunks where they arrived instead of copying
 * them into the fragment's buffer: as long as they arrive in order from
 * offset 0, up to USNIC_REASM_PIECES of them, the table only notes where
 * each one is.  If the fragment completes that way, the PML can have it
 * as those pieces (a descriptor of several segments) without any copy.
 * A chunk that cannot be a piece (out of order, one piece too many, or a
 * caller that cannot defer it) is copied into the fragment's buffer at its
 * offset, as without deferral, and the pieces stay: they hold bytes [0,
 * end), the buffer whatever arrived beyond.  The PML then gets the pieces
 * and, as the last segment, the buffer's [end, msg_len); so a fragment of
 * more chunks than a descriptor has segments still keeps its first
 * USNIC_REASM_PIECES - 1 chunks where they arrived.  Only the transport
 * about to reuse its buffers (usnic_reasm_materialize()) copies the pieces
 * into the buffer, and from then on the fragment is reassembled as usual.
 * The buffer is taken when the first chunk arrives either way, so copying
 * the pieces in never fails.  One fragment per table (per peer) at a time.
 */
#define USNIC_REASM_PIECES 16

struct usnic_reasm_piece {
    const uint8_t *data;
    uint64_t len; /* (a chunk that lies right behind the piece before joins it) */
};

struct usnic_reasm_defer {
    bool active; /* a fragment's chunks are pieces (state PARTIAL, COMPLETE or DELIVERING) */
    uint8_t n;   /* pieces */
    uint32_t msg_id;
    uint64_t end; /* bytes they hold: [0, end) of the fragment */
    struct usnic_reasm_piece piece[USNIC_REASM_PIECES];
};

enum usnic_reasm_state {
    USNIC_REASM_FREE = 0,
    USNIC_REASM_PARTIAL,   /* chunks still missing */
    USNIC_REASM_COMPLETE,  /* every byte is in, waiting for its turn */
    USNIC_REASM_DELIVERING /* taken by usnic_reasm_pop(), not yet released */
};

struct usnic_reasm {
    uint8_t state; /* enum usnic_reasm_state */
    uint8_t tag;   /* PML tag of the fragment */
    uint32_t msg_id;
    uint64_t msg_len;  /* total length; buf holds at least this much */
    uint64_t received; /* bytes copied in so far, <= msg_len */
    bool deferred;     /* its chunks are the table's pieces (defer), not yet in buf */
    uint8_t *buf;
    void *handle;
    uint64_t got[USNIC_REASM_MAX_CHUNKS / 64]; /* chunks received, when the table knows
                                                  the chunk size */
};

struct usnic_reasm_table {
    struct usnic_reasm *slots;
    uint32_t nslots;
    uint32_t next; /* msg_id of the next fragment the PML gets */
    const struct usnic_reasm_alloc *alloc;
    /* The sender's chunk size, 0 if unknown.  When known, every chunk must
     * start at a multiple of it and be whole (or the fragment's tail), and
     * each may arrive once: overlapping or repeated chunks are rejected, so
     * a fragment is complete only when every byte was written. */
    uint64_t chunk;
    uint64_t waited; /* fragments complete before their turn (they waited here) */
    struct usnic_reasm_defer defer;
};

/* first_msg_id: the number of the peer's first fragment; nslots is rounded up to a power of two. */
int usnic_reasm_table_init(struct usnic_reasm_table *t, uint32_t nslots,
                           const struct usnic_reasm_alloc *alloc, uint32_t first_msg_id);
/* releases every held fragment */
void usnic_reasm_table_fini(struct usnic_reasm_table *t);

/*
 * Check that a fragment's packet can be taken, without changing anything
 * (the sequence layer commits only packets that are taken).  whole: a FRAG
 * (the fragment in one packet), else a CHUNK of a msg_len-byte fragment.
 * Returns USNIC_PKT_OK, USNIC_DROP_CHUNK_RANGE (a number already handed
 * over, or inconsistent with the fragment under way) or
 * USNIC_DROP_REASSEMBLY (too far ahead, or its slot still busy).  Bounds of
 * offset/len against msg_len were already checked by usnic_pkt_parse().
 */
enum usnic_drop_reason usnic_reasm_check(const struct usnic_reasm_table *t, uint32_t msg_id,
                                         uint64_t msg_len, uint8_t tag, bool whole);

/* After usnic_reasm_check() said OK for a whole fragment: may the PML have
 * it straight from the packet?  (It is the next one.) */
static inline bool usnic_reasm_is_next(const struct usnic_reasm_table *t, uint32_t msg_id)
{
    return msg_id == t->next;
}

/* The next fragment was handed over straight from its packet. */
static inline void usnic_reasm_skip(struct usnic_reasm_table *t)
{
    t->next++;
}

/*
 * Copy a chunk in (after usnic_reasm_check() said OK).  Returns
 * USNIC_PKT_OK, USNIC_DROP_CHUNK_RANGE if the chunk does not fit the
 * table's chunk size or was already received (nothing is written), or
 * USNIC_DROP_REASSEMBLY if no buffer could be had.  data may already be in
 * place (the kernel backend's direct receive): then nothing is copied.
 */
enum usnic_drop_reason usnic_reasm_add(struct usnic_reasm_table *t, uint32_t msg_id,
                                       uint64_t msg_len, uint64_t offset, const void *data,
                                       uint32_t len, uint8_t tag);

/*
 * usnic_reasm_add(), where defer says that data stays where it is until
 * the caller's next usnic_reasm_materialize() on this table: the chunk
 * may then become a piece of a deferred fragment (see above) instead of
 * being copied.  *deferred_now: this chunk began a deferred fragment (the
 * caller must materialize this table before its buffers change).
 */
enum usnic_drop_reason usnic_reasm_add_defer(struct usnic_reasm_table *t, uint32_t msg_id,
                                             uint64_t msg_len, uint64_t offset, const void *data,
                                             uint32_t len, uint8_t tag, bool defer,
                                             bool *deferred_now);

/* The segments of the complete deferred fragment r (the table's): its
 * pieces, then the rest from its buffer if the pieces do not reach its
 * end.  Writes at most USNIC_REASM_PIECES to out and returns how many. */
unsigned usnic_reasm_pieces(const struct usnic_reasm_table *t, const struct usnic_reasm *r,
                            struct usnic_reasm_piece *out);

/* Copy the deferred fragment's pieces (if there is one) into its buffer;
 * it is reassembled as usual from then on. */
void usnic_reasm_materialize(struct usnic_reasm_table *t);

/*
 * The buffer fragment msg_id of msg_len bytes is being reassembled in (or
 * was, if complete and not handed over yet), or NULL (not begun, handed
 * over, or another fragment there).
 */
uint8_t *usnic_reasm_dest(const struct usnic_reasm_table *t, uint32_t msg_id, uint64_t msg_len);

/*
 * Keep a copy of a whole fragment that arrived before its turn (after
 * usnic_reasm_check() said OK and usnic_reasm_is_next() said no).
 * USNIC_PKT_OK, or USNIC_DROP_REASSEMBLY if no buffer could be had.
 */
enum usnic_drop_reason usnic_reasm_hold(struct usnic_reasm_table *t, uint32_t msg_id,
                                        const void *data, uint64_t len, uint8_t tag);

/*
 * The next fragment, if it is complete: it becomes DELIVERING and `next`
 * moves on; the caller hands r->buf (r->msg_len bytes, tag r->tag) to the
 * PML, or, if r->deferred, usnic_reasm_pieces() (or materializes it
 * first), and then calls usnic_reasm_release().  NULL if
 * it is not complete.
 */
struct usnic_reasm *usnic_reasm_pop(struct usnic_reasm_table *t);

void usnic_reasm_release(struct usnic_reasm_table *t, struct usnic_reasm *r);

#endif /* BTL_USNIC_REASM_H */
