/* Free lists of segments and fragments (types and lifetime rules in btl_usnic_frag.h). */
#include "btl_usnic_frag.h"
#include "btl_usnic_chan.h"
#include "btl_usnic_endpoint.h"

static void seg_construct(usnic_seg_t *seg)
{
    seg->refs = 0;
    seg->frag = NULL;
    seg->ep = NULL;
    seg->zc_ptr = NULL;
    seg->zc_len = 0;
    seg->rel.state = 0;
    seg->desc = NULL;
    seg->posted = false;
}
OBJ_CLASS_INSTANCE(usnic_seg_t, opal_free_list_item_t, seg_construct, NULL);

static void frag_construct(usnic_frag_t *frag)
{
    frag->base.des_segments = frag->segs;
    frag->seg = NULL;
    frag->big_buf = NULL;
}
OBJ_CLASS_INSTANCE(usnic_frag_t, mca_btl_base_descriptor_t, frag_construct, NULL);

static int seg_item_init(opal_free_list_item_t *item, void *ctx)
{
    usnic_seg_list_ctx_t *c = ctx;
    usnic_seg_t *seg = (usnic_seg_t *) item;

    seg->module = c->module;
    seg->kind = c->kind;
    seg->chan = c->chan;
    seg->buf = (uint8_t *) item->ptr + c->module->chan[c->chan].prefix;
    if (NULL != c->module->backend->seg_desc) {
        /* the pool registered the chunk holding the buffer just before */
        seg->desc = c->module->backend->seg_desc(c->module, item->ptr);
    }
    return OPAL_SUCCESS;
}

static int frag_item_init(opal_free_list_item_t *item, void *ctx)
{
    usnic_frag_t *frag = (usnic_frag_t *) item;
    frag->module = ctx;
    return OPAL_SUCCESS;
}

static int seg_list_init(usnic_module_t *module, opal_free_list_t *fl, int slot,
                         enum usnic_seg_kind kind, enum usnic_channel_id chan, size_t bytes,
                         int num, int max)
{
    usnic_seg_list_ctx_t *c = &module->seg_list_ctx[slot];
    struct mca_mpool_base_module_t *mpool =
        (NULL != module->backend->seg_mpool) ? module->backend->seg_mpool(module) : NULL;

    c->module = module;
    c->kind = kind;
    c->chan = chan;
    OBJ_CONSTRUCT(fl, opal_free_list_t);
    return opal_free_list_init(fl, sizeof(usnic_seg_t), opal_cache_line_size,
                               OBJ_CLASS(usnic_seg_t), module->chan[chan].prefix + bytes,
                               opal_cache_line_size, num, max, num, mpool, 0, NULL, seg_item_init,
                               c);
}

static void buf_item_construct(usnic_buf_item_t *item)
{
    item->pool = NULL;
}

OBJ_CLASS_INSTANCE(usnic_buf_item_t, opal_free_list_item_t, buf_item_construct, NULL);

static int buf_item_init(opal_free_list_item_t *item, void *ctx)
{
    ((usnic_buf_item_t *) item)->pool = ctx;
    return OPAL_SUCCESS;
}

opal_free_list_item_t *usnic_buf_get(usnic_module_t *module, size_t len)
{
    if (len <= module->mid_buf_len) {
        return opal_free_list_get(&module->mid_bufs);
    }
    if (len <= module->max_msg_len) {
        return opal_free_list_get(&module->big_bufs);
    }
    return NULL;
}

void usnic_buf_return(opal_free_list_item_t *item)
{
    opal_free_list_return(((usnic_buf_item_t *) item)->pool, item);
}

/* A pool of pack / reassembly buffers of len bytes: 8 at first, at most 1024. */
static int buf_list_init(opal_free_list_t *fl, size_t len)
{
    OBJ_CONSTRUCT(fl, opal_free_list_t);
    return opal_free_list_init(fl, sizeof(usnic_buf_item_t), opal_cache_line_size,
                               OBJ_CLASS(usnic_buf_item_t), len, opal_cache_line_size, 8, 1024, 8,
                               NULL, 0, NULL, buf_item_init, fl);
}

int usnic_frag_lists_init(usnic_module_t *module)
{
    const usnic_params_t *p = &mca_btl_usnic_component.params;
    int rc;

    rc = seg_list_init(module, &module->send_segs, 0, USNIC_SEG_SEND, USNIC_CHAN_DATA,
                       module->chan[USNIC_CHAN_DATA].mtu, 64, module->seg_max);
    if (OPAL_SUCCESS != rc) {
        return rc;
    }
    rc =
        seg_list_init(module, &module->ack_segs, 1, USNIC_SEG_ACK, USNIC_CHAN_PRIO,
                      USNIC_HDR_LEN_ACK + USNIC_SACK_WORDS_MAX * sizeof(struct usnic_sack), 64, -1);
    if (OPAL_SUCCESS != rc) {
        return rc;
    }
    for (int c = 0; c < USNIC_NUM_CHANNELS; c++) {
        usnic_channel_t *chan = &module->chan[c];
        rc = seg_list_init(module, &chan->rx_segs, 2 + c, USNIC_SEG_RECV, c, chan->rx_buf,
                           chan->rx_depth, chan->rx_depth + 1);
        if (OPAL_SUCCESS != rc) {
            return rc;
        }
    }

    OBJ_CONSTRUCT(&module->frags, opal_free_list_t);
    rc = opal_free_list_init(&module->frags, sizeof(usnic_frag_t), opal_cache_line_size,
                             OBJ_CLASS(usnic_frag_t), 0, 0, 256, p->seg_num, 256, NULL, 0, NULL,
                             frag_item_init, module);
    if (OPAL_SUCCESS != rc) {
        return rc;
    }
    module->mid_buf_len =
        (module->max_msg_len < USNIC_MID_BUF_BYTES) ? module->max_msg_len : USNIC_MID_BUF_BYTES;
    rc = buf_list_init(&module->mid_bufs, module->mid_buf_len);
    if (OPAL_SUCCESS != rc) {
        return rc;
    }
    return buf_list_init(&module->big_bufs, module->max_msg_len);
}

void usnic_frag_lists_fini(usnic_module_t *module)
{
    OBJ_DESTRUCT(&module->big_bufs);
    OBJ_DESTRUCT(&module->mid_bufs);
    OBJ_DESTRUCT(&module->frags);
    for (int c = 0; c < USNIC_NUM_CHANNELS; c++) {
        OBJ_DESTRUCT(&module->chan[c].rx_segs);
    }
    OBJ_DESTRUCT(&module->ack_segs);
    OBJ_DESTRUCT(&module->send_segs);
}

/*
 * Prefetch what the next two allocations from fl will touch: the buffer
 * of the next segment (whose first line, with super.ptr, the previous call
 * prefetched) and the lines of the one after it.  A sender that streams a
 * train allocates a segment every ~100 ns, and each one's lines come from
 * memory (usnic_seg_t).  The items are never freed while the list lives,
 * so reading a stale link only prefetches the wrong lines.
 */
static inline void seg_prefetch_next(opal_free_list_t *fl, size_t prefix)
{
    opal_list_item_t *ghost = &fl->super.opal_lifo_ghost;
    opal_free_list_item_t *n1 = (opal_free_list_item_t *) fl->super.opal_lifo_head.data.item;
    opal_list_item_t *n2;

    if ((opal_list_item_t *) n1 == ghost) {
        return;
    }
    __builtin_prefetch((const uint8_t *) n1->ptr + prefix, 1);
    n2 = (opal_list_item_t *) n1->super.opal_list_next;
    if (NULL != n2 && n2 != ghost) {
        for (size_t off = 0; off < sizeof(usnic_seg_t); off += 64) {
            __builtin_prefetch((const uint8_t *) n2 + off, 1);
        }
    }
}

usnic_seg_t *usnic_seg_alloc(usnic_module_t *module, enum usnic_seg_kind kind)
{
    opal_free_list_t *fl = (USNIC_SEG_ACK == kind) ? &module->ack_segs : &module->send_segs;
    usnic_seg_t *seg = (usnic_seg_t *) opal_free_list_get(fl);

    if (OPAL_LIKELY(NULL != seg)) {
        if (USNIC_SEG_SEND == kind) {
            seg_prefetch_next(fl, module->chan[USNIC_CHAN_DATA].prefix);
        }
        seg->refs = 0;
        seg->frag = NULL;
        seg->zc_ptr = NULL;
        seg->zc_len = 0;
        seg->rel.state = 0;
        seg->chan = (USNIC_SEG_ACK == kind) ? USNIC_CHAN_PRIO : USNIC_CHAN_DATA;
    }
    return seg;
}

void usnic_seg_put(usnic_seg_t *seg)
{
    if (--seg->refs > 0) {
        return;
    }
    switch (seg->kind) {
    case USNIC_SEG_ACK:
        opal_free_list_return(&seg->module->ack_segs, &seg->super);
        break;
    case USNIC_SEG_SEND:
        opal_free_list_return(&seg->module->send_segs, &seg->super);
        break;
    case USNIC_SEG_RECV:
        break; /* receive buffers are reposted, never put */
    }
}

static usnic_frag_t *frag_get(usnic_module_t *module, struct mca_btl_base_endpoint_t *ep,
                              enum usnic_frag_kind kind, uint32_t flags)
{
    usnic_frag_t *frag = (usnic_frag_t *) opal_free_list_get(&module->frags);

    if (OPAL_UNLIKELY(NULL == frag)) {
        return NULL;
    }
    frag->kind = kind;
    frag->ep = ep;
    frag->seg = NULL;
    frag->big_buf = NULL;
    frag->data = NULL;
    frag->data_len = 0;
    frag->hdr_len = 0;
    frag->total_len = 0;
    frag->next_off = 0;
    frag->chunks_unacked = 0;
    frag->queued = false;
    frag->sent = false;
    frag->early_listed = false;
    frag->pieces = false;
    frag->base.des_segments = frag->segs;
    frag->base.des_segment_count = 1;
    frag->base.des_flags = flags;
    frag->base.des_cbfunc = NULL;
    frag->base.des_cbdata = NULL;
    frag->base.des_context = NULL;
    frag->base.order = MCA_BTL_NO_ORDER;
    return frag;
}

usnic_frag_t *usnic_frag_alloc_small(usnic_module_t *module, struct mca_btl_base_endpoint_t *ep,
                                     size_t len, uint32_t flags)
{
    usnic_frag_t *frag = frag_get(module, ep, USNIC_FRAG_SMALL, flags);
    usnic_seg_t *seg;

    if (OPAL_UNLIKELY(NULL == frag)) {
        return NULL;
    }
    seg = usnic_seg_alloc(module, USNIC_SEG_SEND);
    if (OPAL_UNLIKELY(NULL == seg)) {
        opal_free_list_return(&module->frags, &frag->base.super);
        return NULL;
    }
    seg->refs = 1; /* the fragment's hold */
    seg->frag = frag;
    seg->ep = ep;
    frag->seg = seg;
    frag->segs[0].seg_addr.pval = seg->buf + USNIC_HDR_LEN_FRAG;
    frag->segs[0].seg_len = len;
    return frag;
}

usnic_frag_t *usnic_frag_alloc_large(usnic_module_t *module, struct mca_btl_base_endpoint_t *ep,
                                     uint32_t flags)
{
    return frag_get(module, ep, USNIC_FRAG_LARGE, flags);
}

void usnic_frag_release(usnic_frag_t *frag)
{
    usnic_module_t *module = frag->module;

    if (NULL != frag->seg) {
        frag->seg->frag = NULL;
        usnic_seg_put(frag->seg);
        frag->seg = NULL;
    }
    if (NULL != frag->big_buf) {
        usnic_buf_return(frag->big_buf);
        frag->big_buf = NULL;
    }
    opal_free_list_return(&module->frags, &frag->base.super);
}
