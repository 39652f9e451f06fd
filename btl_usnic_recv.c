/*
 * The receive path.  Every arriving datagram is validated completely before
 * anything is touched: header (usnic_pkt_parse), sender (a known peer
 * module), piggy-backed ACK (a sequence number we really sent), sequence
 * number (in the receive window, not seen before), then by type: PML tag
 * registered, chunk consistent with the fragment under reassembly, PUT range
 * inside a live registration.  A packet that fails is dropped and counted by
 * reason; nothing from the wire is ever asserted.
 */
#include <string.h>
#include <emmintrin.h>

#include "btl_usnic.h"
#include "btl_usnic_endpoint.h"
#include "btl_usnic_frag.h"
#include "btl_usnic_util.h"

/* Post a receive buffer; on failure it goes back to its free list. */
static int post_recv(usnic_module_t *module, usnic_channel_t *chan, usnic_seg_t *seg)
{
    ssize_t rc = fi_recv(chan->ep, seg->super.ptr, chan->prefix + chan->mtu, NULL, FI_ADDR_UNSPEC,
                         &seg->fictx);
    if (OPAL_UNLIKELY(0 != rc)) {
        USNIC_VERBOSE(5, "%s: fi_recv: %s", module->ifname, fi_strerror((int) -rc));
        opal_free_list_return(&chan->rx_segs, &seg->super);
        return OPAL_ERROR;
    }
    return OPAL_SUCCESS;
}

void usnic_repost_recv(usnic_module_t *module, usnic_channel_t *chan, usnic_seg_t *seg)
{
    (void) post_recv(module, chan, seg);
}

int usnic_post_recvs(usnic_module_t *module, usnic_channel_t *chan)
{
    for (int i = 0; i < chan->rx_depth; i++) {
        usnic_seg_t *seg = (usnic_seg_t *) opal_free_list_get(&chan->rx_segs);
        if (NULL == seg) {
            return OPAL_ERR_OUT_OF_RESOURCE;
        }
        if (OPAL_SUCCESS != post_recv(module, chan, seg)) {
            return OPAL_ERROR;
        }
    }
    return OPAL_SUCCESS;
}

/*
 * Copy with non-temporal stores, past the caches: for the chunks of large
 * PUTs, which fill far more memory than the caches hold and would only
 * evict what the process works on (measured: +30% bandwidth at 1 MiB, a
 * little more latency when the data is read back at once).
 */
static void copy_stream(uint8_t *dst, const uint8_t *src, size_t len)
{
    while (((uintptr_t) dst & 15) && len) {
        *dst++ = *src++;
        len--;
    }
    for (; len >= 64; len -= 64, src += 64, dst += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *) src);
        __m128i b = _mm_loadu_si128((const __m128i *) (src + 16));
        __m128i c = _mm_loadu_si128((const __m128i *) (src + 32));
        __m128i d = _mm_loadu_si128((const __m128i *) (src + 48));
        _mm_stream_si128((__m128i *) dst, a);
        _mm_stream_si128((__m128i *) (dst + 16), b);
        _mm_stream_si128((__m128i *) (dst + 32), c);
        _mm_stream_si128((__m128i *) (dst + 48), d);
    }
    _mm_sfence();
    memcpy(dst, src, len);
}

static inline void drop(usnic_module_t *module, enum usnic_drop_reason why)
{
    module->stats.drops[why]++;
    if (USNIC_DROP_DUPLICATE != why && USNIC_DROP_INJECTED != why) {
        module->stats.bad_pkts++;
    }
}

static void deliver(usnic_module_t *module, mca_btl_base_endpoint_t *ep, uint8_t tag,
                    const void *data, uint64_t len)
{
    const mca_btl_active_message_callback_t *reg = &mca_btl_base_active_message_trigger[tag];
    mca_btl_base_segment_t segment;
    mca_btl_base_descriptor_t desc;
    (void) ep;

    segment.seg_addr.pval = (void *) data;
    segment.seg_len = len;
    memset(&desc, 0, sizeof(desc));
    desc.des_segments = &segment;
    desc.des_segment_count = 1;
    reg->cbfunc(&module->super, tag, &desc, reg->cbdata);
}

static void accept_seq(usnic_module_t *module, mca_btl_base_endpoint_t *ep, usnic_seq_t seq,
                       uint32_t payload_len)
{
    usnic_rel_rx_commit(&ep->rel, seq, module->now_us);
    module->stats.rx_bytes += payload_len;
    usnic_ack_schedule(module, ep);
}

/* Should this large PUT's target be written through the cache?  Yes if it
 * was the target of one of the last few large PUTs: a buffer used again
 * and again (a ping-pong's) is likely still cached and read right after
 * the transfer.  Fresh memory (a stream through many buffers) is copied
 * past the caches.  The first chunk of a PUT decides; its other chunks
 * follow that decision. */
static bool put_target_reused(usnic_module_t *module, const uint8_t *dest, bool first)
{
    int i;

    for (i = 0; i < USNIC_PUT_RECENT; i++) {
        if (module->put_recent[i].dest == dest) {
            if (first) {
                module->put_recent[i].reused = true;
            }
            return module->put_recent[i].reused;
        }
    }
    if (first) {
        i = (int) (module->put_recent_next++ % USNIC_PUT_RECENT);
        module->put_recent[i].dest = dest;
        module->put_recent[i].reused = false;
    }
    return false;
}

static void process_packet(usnic_module_t *module, const uint8_t *buf, size_t len)
{
    struct usnic_pkt_view v;
    const struct usnic_pkt_hdr *hdr;
    mca_btl_base_endpoint_t *ep;
    enum usnic_drop_reason why;
    uint8_t *dest;

    why = usnic_pkt_parse(buf, len, mca_btl_usnic_component.job_key, module->max_msg_len, &v);
    if (OPAL_UNLIKELY(USNIC_PKT_OK != why)) {
        drop(module, why);
        return;
    }
    hdr = v.hdr;
    ep = usnic_endpoint_for_sender(module, hdr->src_module);
    if (OPAL_UNLIKELY(NULL == ep || ep->dead)) {
        drop(module, USNIC_DROP_SENDER);
        return;
    }

    if (hdr->flags & USNIC_PKT_FLAG_ACK) {
        int released = usnic_rel_tx_ack(&ep->rel, hdr->ack_seq, USNIC_PKT_ACK == hdr->type);
        if (OPAL_UNLIKELY(released < 0)) {
            drop(module, USNIC_DROP_ACK_RANGE);
            return;
        }
        if (NULL != v.sack) {
            released += usnic_rel_tx_sack(&ep->rel, hdr->ack_seq, v.sack->bits);
        }
        if (released > 0) {
            ep->last_progress_us = module->now_us;
        }
        if (USNIC_PKT_ACK == hdr->type) {
            module->stats.acks_rx++;
            return;
        }
    }
    if (hdr->flags & USNIC_PKT_FLAG_ACK_REQ) {
        ep->rel.rx.ack_now = true;
        usnic_ack_schedule(module, ep);
    }

    switch (usnic_rel_rx_check(&ep->rel, hdr->seq)) {
    case USNIC_RX_NEW:
        break;
    case USNIC_RX_DUP:
        usnic_rel_rx_duplicate(&ep->rel);
        usnic_ack_schedule(module, ep);
        module->stats.dup_rx++;
        drop(module, USNIC_DROP_DUPLICATE);
        return;
    case USNIC_RX_BEYOND:
        ep->rel.stats.rx_beyond++;
        drop(module, USNIC_DROP_WINDOW);
        return;
    }

    switch (hdr->type) {
    case USNIC_PKT_FRAG:
        if (OPAL_UNLIKELY(NULL == mca_btl_base_active_message_trigger[hdr->tag].cbfunc)) {
            drop(module, USNIC_DROP_TYPE);
            return;
        }
        accept_seq(module, ep, hdr->seq, v.payload_len);
        deliver(module, ep, hdr->tag, v.payload, v.payload_len);
        return;

    case USNIC_PKT_CHUNK: {
        struct usnic_reasm *done = NULL;
        if (OPAL_UNLIKELY(NULL == mca_btl_base_active_message_trigger[hdr->tag].cbfunc)) {
            drop(module, USNIC_DROP_TYPE);
            return;
        }
        why = usnic_reasm_check(&ep->reasm, v.chunk->msg_id, v.chunk->msg_len, hdr->tag);
        if (USNIC_PKT_OK == why) {
            why = usnic_reasm_add(&ep->reasm, v.chunk->msg_id, v.chunk->msg_len, v.chunk->offset,
                                  v.payload, v.payload_len, hdr->tag, &done);
        }
        if (OPAL_UNLIKELY(USNIC_PKT_OK != why)) {
            drop(module, why);
            return;
        }
        accept_seq(module, ep, hdr->seq, v.payload_len);
        if (NULL != done) {
            deliver(module, ep, done->tag, done->buf, done->msg_len);
            usnic_reasm_release(&ep->reasm, done);
        }
        return;
    }

    case USNIC_PKT_PUT:
        why = usnic_reg_resolve(&mca_btl_usnic_component.regs, v.put->reg_key, v.put->reg_offset,
                                v.chunk->msg_len, &dest);
        if (OPAL_UNLIKELY(USNIC_PKT_OK != why)) {
            drop(module, why);
            return;
        }
        if (v.chunk->msg_len >= module->stream_copy_min && 0 != module->stream_copy_min &&
            !put_target_reused(module, dest, 0 == v.chunk->offset)) {
            copy_stream(dest + v.chunk->offset, v.payload, v.payload_len);
        } else {
            memcpy(dest + v.chunk->offset, v.payload, v.payload_len);
        }
        accept_seq(module, ep, hdr->seq, v.payload_len);
        if (v.chunk->offset + v.payload_len == v.chunk->msg_len) {
            /* the PUT's last chunk: its initiator sends ob1's FIN only
             * once every chunk is acknowledged, and no data of ours can
             * carry the ACK before that FIN arrives: acknowledge now
             * (measured: 1 MiB ping-pong 209 -> 188 us, 512 KiB 139 ->
             * 103 us).  Not for chunked send fragments: there the reply
             * usually carries the ACK, and an explicit one cost 64 KiB
             * ping-pongs 17 -> 22 us. */
            ep->rel.rx.ack_now = true;
        }
        return;

    default:
        drop(module, USNIC_DROP_TYPE);
        return;
    }
}

/* Fault injection: decide what happens to an arriving packet. */
static void inject(usnic_module_t *module, const uint8_t *buf, size_t len)
{
    usnic_fault_t *f = &module->fault;

    if (f->drop_rate > 0.0 && usnic_rand_unit(&f->rng) < f->drop_rate) {
        module->stats.inj_drop++;
        module->stats.drops[USNIC_DROP_INJECTED]++;
        return;
    }
    if (f->reorder_rate > 0.0 && 0 == f->held_len && len <= module->chan[USNIC_CHAN_DATA].mtu &&
        len > 0 && usnic_rand_unit(&f->rng) < f->reorder_rate) {
        module->stats.inj_reorder++;
        memcpy(f->held_buf, buf, len);
        f->held_len = (uint32_t) len;
        return;
    }
    process_packet(module, buf, len);
    if (f->dup_rate > 0.0 && usnic_rand_unit(&f->rng) < f->dup_rate) {
        module->stats.inj_dup++;
        process_packet(module, buf, len);
    }
    usnic_fault_flush(module, true);
}

void usnic_fault_flush(usnic_module_t *module, bool idle)
{
    usnic_fault_t *f = &module->fault;
    uint32_t len = f->held_len;

    if (0 == len || !idle) {
        return;
    }
    f->held_len = 0;
    process_packet(module, f->held_buf, len);
}

void usnic_handle_recv(usnic_module_t *module, usnic_channel_t *chan, usnic_seg_t *seg, size_t len)
{
    module->stats.rx_pkts++;
    if (OPAL_UNLIKELY(module->fault.drop_rate > 0.0 || module->fault.dup_rate > 0.0 ||
                      module->fault.reorder_rate > 0.0)) {
        inject(module, seg->buf, len);
    } else {
        process_packet(module, seg->buf, len);
    }
    usnic_repost_recv(module, chan, seg);
}
