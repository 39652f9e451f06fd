/*
 * Segments and fragments.
 *
 * Nomenclature
 *   fragment  what the PML asks us to send or PUT, any size (usnic_frag_t,
 *             the descriptor the PML sees).
 *   segment   one datagram's worth: a buffer with our headers (usnic_seg_t).
 *   chunk     a segment carrying a piece of a fragment too large for one
 *             datagram.
 *
 * A SMALL fragment fits one datagram: it owns one segment from the start and
 * the PML writes its header and data straight into that segment's buffer.
 * A LARGE fragment (or a PUT) is cut into chunks as the window allows; each
 * chunk is a fresh segment whose header lives in its buffer and whose data
 * is sent from the fragment's memory (user buffer or pack buffer) through
 * the provider's iov, without a copy when the iov limit allows.
 *
 * Segment lifetime: a segment is returned to its free list when its
 * reference count drops to zero.  References: one while it holds a send
 * window slot (until ACKed), one per post to the provider whose completion
 * has not been seen (datagrams small enough for fi_inject have none), and
 * one held by a SMALL fragment that embeds it.
 */
#ifndef BTL_USNIC_FRAG_H
#define BTL_USNIC_FRAG_H

#include "btl_usnic.h"
#include "btl_usnic_rel.h"

#include <rdma/fi_endpoint.h>

#include "opal/datatype/opal_convertor.h"

BEGIN_C_DECLS

enum usnic_seg_kind {
    USNIC_SEG_SEND, /* data segment from module->send_segs */
    USNIC_SEG_ACK,  /* explicit ACK from module->ack_segs */
    USNIC_SEG_RECV  /* receive buffer from a channel's rx_segs */
};

/*
 * The fields are in the order of the cache lines they share (items are
 * cache-line aligned): what acknowledging a segment touches fits the first
 * two lines (the free list's link, refs, zc_len; rel, kind, hdr_len,
 * module, ep, frag, zc_ptr).  A streaming sender touches each segment once
 * when it sends it and again when it is acknowledged, and the window's
 * payload passes through the cache in between, so every line touched is a
 * miss (usnic_seg_alloc and the ACK loop prefetch them).
 */
typedef struct usnic_seg {
    opal_free_list_item_t super; /* super.ptr: prefix + MTU bytes of buffer */
    int refs;                    /* see the lifetime rules above */
    uint32_t zc_len;
    struct usnic_rel_seg rel; /* reliability state (seq, timer, resend) */
    enum usnic_seg_kind kind;
    uint32_t hdr_len; /* bytes of buf to send (headers + inline payload) */
    struct usnic_module *module;
    struct mca_btl_base_endpoint_t *ep;
    struct usnic_frag *frag;    /* parent fragment, if any */
    const void *zc_ptr;         /* zero-copy payload after buf, or NULL */
    enum usnic_channel_id chan; /* channel it is sent on / was received on */
    uint32_t payload_len;       /* payload bytes (inline + zero-copy) */
    uint8_t *buf;               /* super.ptr + prefix: where our header starts */
    void *desc;              /* FI_MR_LOCAL: fi_mr_desc() of the registration holding super.ptr */
    bool posted;             /* handed to the provider, completion not seen yet (fictx in use) */
    bool seal_later;         /* in a train: its header MAC is computed when the train leaves */
    struct fi_context fictx; /* operation context handed to libfabric */
} usnic_seg_t;
OBJ_CLASS_DECLARATION(usnic_seg_t);

/* The bytes the segment's datagram has on the wire (headers, inline and
 * zero-copy payload; not a train's padding). */
static inline uint32_t usnic_seg_wire_len(const usnic_seg_t *seg)
{
    return seg->hdr_len + seg->zc_len;
}

/* The segment whose reliability state r is. */
static inline usnic_seg_t *usnic_seg_of(struct usnic_rel_seg *r)
{
    return (usnic_seg_t *) ((char *) r - offsetof(usnic_seg_t, rel));
}

enum usnic_frag_kind {
    USNIC_FRAG_SMALL, /* one FRAG datagram */
    USNIC_FRAG_LARGE, /* CHUNK datagrams */
    USNIC_FRAG_PUT    /* PUT datagrams (internal; the PML never sees it) */
};

/* Room for the PML header of a LARGE fragment (ob1's largest is < 100 bytes). */
#define USNIC_PML_HDR_MAX 128

typedef struct usnic_frag {
    mca_btl_base_descriptor_t base;
    mca_btl_base_segment_t segs[2]; /* [0] PML header (+data), [1] data when separate */
    enum usnic_frag_kind kind;
    struct usnic_module *module;
    struct mca_btl_base_endpoint_t *ep;
    uint8_t tag;

    /* SMALL: the one segment; segs[0] points into its buffer */
    usnic_seg_t *seg;

    /* LARGE and PUT: what is being chunked */
    uint64_t total_len;      /* fragment bytes: PML header + data */
    uint64_t next_off;       /* next byte to put in a chunk; invariant: <= total_len */
    uint32_t chunks_unacked; /* chunks sent and not yet acknowledged */
    uint32_t msg_id;
    uint32_t hdr_len; /* LARGE: bytes of PML header in hdr_buf */
    uint8_t hdr_buf[USNIC_PML_HDR_MAX];
    const uint8_t *data; /* user memory (zero copy) or pack buffer */
    uint64_t data_len;
    opal_free_list_item_t *big_buf; /* pack buffer, if data was packed */

    /* PUT */
    uint64_t put_key;
    uint64_t put_offset;
    mca_btl_base_rdma_completion_fn_t put_cb;
    void *put_cbcontext;
    void *put_cbdata;
    void *put_local;
    struct mca_btl_base_registration_handle_t *put_local_handle;

    bool queued;       /* on the endpoint's send queue */
    bool sent;         /* every byte handed to the wire at least once */
    bool early_listed; /* LARGE: on done_frags to complete before its ACKs (usnic_send_early) */
    bool pieces; /* PUT: its trains go to the kernel uncopied (btl_usnic_train_copy_put_max) */
} usnic_frag_t;
OBJ_CLASS_DECLARATION(usnic_frag_t);

/* What a registration handle carries (opaque to the PML, copied over the wire). */
struct mca_btl_base_registration_handle_t {
    uint64_t key;  /* usnic_reg key */
    uint64_t base; /* registered address */
    uint64_t len;  /* registered length */
};

/*
 * Pack and reassembly buffers come in two sizes: up to USNIC_MID_BUF_BYTES
 * (what the eager limit was before it doubled, so that the many chunked
 * fragments below it do not each hold a buffer of the largest size) and up
 * to the module's max_msg_len.  Each pool holds at most 1024 buffers; an
 * item knows its pool.
 */
#define USNIC_MID_BUF_BYTES (150000 + USNIC_PML_HDR_MAX)

typedef struct usnic_buf_item {
    opal_free_list_item_t super;
    opal_free_list_t *pool;
} usnic_buf_item_t;
OBJ_CLASS_DECLARATION(usnic_buf_item_t);

/* A buffer of at least len bytes (NULL: none free, or len too large). */
opal_free_list_item_t *usnic_buf_get(struct usnic_module *module, size_t len);
void usnic_buf_return(opal_free_list_item_t *item);

int usnic_frag_lists_init(struct usnic_module *module);
void usnic_frag_lists_fini(struct usnic_module *module);

usnic_seg_t *usnic_seg_alloc(struct usnic_module *module, enum usnic_seg_kind kind);
void usnic_seg_put(usnic_seg_t *seg);

usnic_frag_t *usnic_frag_alloc_small(struct usnic_module *module,
                                     struct mca_btl_base_endpoint_t *ep, size_t len,
                                     uint32_t flags);
usnic_frag_t *usnic_frag_alloc_large(struct usnic_module *module,
                                     struct mca_btl_base_endpoint_t *ep, uint32_t flags);
void usnic_frag_release(usnic_frag_t *frag);


END_C_DECLS

#endif /* BTL_USNIC_FRAG_H */
