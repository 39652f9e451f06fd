/*
 * The receive path: receive buffers, the BTL's side of the receive
 * dispatch (btl_usnic_rx.h: every arriving datagram is validated
 * completely before anything is touched, and fragments reach the PML in
 * the sender's order) and fault injection.  A packet that fails a check is
 * dropped and counted by reason; nothing from the wire is ever asserted.
 */
#include <inttypes.h>
#include <string.h>
#include <emmintrin.h>

#include "btl_usnic.h"
#include "btl_usnic_chan.h"
#include "btl_usnic_endpoint.h"
#include "btl_usnic_frag.h"
#include "btl_usnic_live.h"
#include "btl_usnic_proc.h"
#include "btl_usnic_rx.h"
#include "btl_usnic_util.h"

/*
 * Copy with non-temporal stores, past the caches: for the chunks of large
 * PUTs, which fill far more memory than the caches hold and would only
 * evict what the process works on (measured: +30% bandwidth at 1 MiB, a
 * little more latency when the data is read back at once).
 *
 * Streaming stores are ordered with nothing: another CPU may see later
 * ordinary stores (a request marked complete) before them.  The fence that
 * orders them waits for every line to leave the write-combining buffers,
 * and one per chunk made MTU 1500's 1416-byte chunks slower than an
 * ordinary copy (session 30).  So the copy only notes that a fence is due
 * (rx_unfenced) and usnic_rx_fence() makes it once, before anything the
 * PML or the user can see: a callback into the PML, and the end of every
 * module's progress call (in the thread that streamed, the progress
 * engine's, which holds the component's lock).  Nobody reads the PUT's
 * target before then: its origin tells the PML here that the PUT is done
 * by a message of its own (ob1's FIN), sent after our ACK of its last
 * chunk, which reaches the PML through rx_deliver.
 */
static bool rx_unfenced; /* chunks were streamed since the last fence */

static void copy_stream(uint8_t *dst, const uint8_t *src, size_t len)
{
    size_t head = (64 - ((uintptr_t) dst & 63)) & 63;

    /* Whole cache lines only: a line shared with the neighbouring chunk (or
     * the part before an unaligned start) is written through the cache, so
     * no line is ever written partly by streaming stores, which costs a
     * read-modify-write of memory per line. */
    if (head > len) {
        head = len;
    }
    memcpy(dst, src, head);
    dst += head;
    src += head;
    len -= head;
    if (len >= 64) {
        rx_unfenced = true;
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
    memcpy(dst, src, len);
}

void usnic_rx_fence(void)
{
    if (OPAL_UNLIKELY(rx_unfenced)) {
        rx_unfenced = false;
        _mm_sfence();
    }
}

/* ---- the transport's side of the receive dispatch (btl_usnic_rx.h) ---- */

/* Did the datagram being processed come from the address of ep's channel? */
static inline bool source_ok(const usnic_module_t *module, const mca_btl_base_endpoint_t *ep)
{
    switch (module->src_check) {
    case USNIC_SRC_FI:
        return module->rx_from.fi == ep->addr[module->rx_from.lane];
    case USNIC_SRC_PREFIX:
        return module->rx_from.ip == ep->remote.ipv4 &&
               module->rx_from.port == ep->remote.port[module->rx_from.lane];
    case USNIC_SRC_SOCKET:
        /* the kernel backend sends from a port of its own (tx_port) */
        return module->rx_from.ip == ep->remote.ipv4 &&
               module->rx_from.port == ((0 != ep->remote.tx_port[module->rx_from.lane])
                                            ? ep->remote.tx_port[module->rx_from.lane]
                                            : ep->remote.port[module->rx_from.lane]);
    default:
        return true;
    }
}

static enum usnic_drop_reason rx_lookup(void *t, const struct usnic_pkt_hdr *hdr,
                                        struct usnic_rx_conn *c)
{
    usnic_module_t *module = t;
    mca_btl_base_endpoint_t *ep = usnic_endpoint_for_key(module, hdr->sender_key);

    if (OPAL_UNLIKELY(NULL == ep)) {
        mca_btl_base_endpoint_t *via = NULL;
        /* the stream of another of our modules, detoured around a link
         * that is down: it must come from the sender's address here */
        ep = (mca_btl_usnic_component.num_modules > 1)
                 ? usnic_endpoint_detoured(module, hdr->sender_key, &via)
                 : NULL;
        if (NULL == ep) {
            /* perhaps a process of our job the PML has not added yet: its
             * record is fetched without blocking; anything else goes now */
            return usnic_lookup_start(hdr->src_module >> 8);
        }
        if (OPAL_UNLIKELY(ep->dead || via->dead)) {
            return USNIC_DROP_SENDER;
        }
        if (OPAL_UNLIKELY(!source_ok(module, via))) {
            return USNIC_DROP_ADDRESS;
        }
        if (hdr->flags & USNIC_PKT_FLAG_LINK_DOWN) {
            /* the sender's link is down: answer the same way.  (A datagram
             * detoured only because we had been, has no flag: else both
             * sides would keep each other on the detour for good.) */
            uint64_t now = usnic_now_us();
            if (ep->detour_until <= now && !ep->module->link_down) {
                /* what we sent it directly since its link went down is lost */
                usnic_endpoint_resend_around(ep);
            }
            ep->detour_until = now + 1000000;
        }
    } else if (OPAL_UNLIKELY(ep->dead)) {
        return USNIC_DROP_SENDER;
    } else if (OPAL_UNLIKELY(!source_ok(module, ep))) {
        return USNIC_DROP_ADDRESS;
    } else {
        if (OPAL_UNLIKELY(0 != ep->detour_until)) {
            ep->detour_until = 0; /* its datagrams come directly again: so do ours */
        }
        c->predict = true; /* (not a detour: nothing more to do for its next datagrams) */
    }
    c->rel = &ep->rel;
    c->reasm = &ep->reasm;
    c->ep = ep;
    c->key = &ep->rx_mac_key;
    c->memo = &ep->rx_mac_memo;
    c->auth = ep->auth;
    c->crc = ep->crc;
    c->parts = &ep->rx_parts;
    return USNIC_PKT_OK;
}

static bool rx_tag_ok(void *t, uint8_t tag)
{
    (void) t;
    /* the PML's table has MCA_BTL_TAG_MAX (255) entries: tag 255 is past its end */
    return tag < MCA_BTL_TAG_MAX && NULL != mca_btl_base_active_message_trigger[tag].cbfunc;
}

static void rx_deliver(void *t, void *ep, uint8_t tag, const void *data, uint64_t len)
{
    usnic_module_t *module = t;
    const mca_btl_active_message_callback_t *reg = &mca_btl_base_active_message_trigger[tag];
    mca_btl_base_segment_t segment;
    mca_btl_base_descriptor_t desc;
    (void) ep;

    segment.seg_addr.pval = (void *) data;
    segment.seg_len = len;
    memset(&desc, 0, sizeof(desc));
    desc.des_segments = &segment;
    desc.des_segment_count = 1;
    usnic_rx_fence();
    reg->cbfunc(&module->super, tag, &desc, reg->cbdata);
}

/* A first piece shorter than this goes copied together: ob1 reads its
 * header (at most 40 bytes) from the first segment. */
#define USNIC_PIECE_HDR_MIN 64

/* ob1's tags whose fragments carry user data after their header in the
 * first segment (ompi/mca/pml/ob1/pml_ob1_hdr.h: MATCH, RNDV, FRAG); its
 * receive callbacks for these take up to MCA_BTL_DES_MAX_SEGMENTS
 * segments.  Other tags get one contiguous segment. */
static bool tag_takes_segments(uint8_t tag)
{
    return MCA_BTL_TAG_PML + 1 == tag || MCA_BTL_TAG_PML + 2 == tag || MCA_BTL_TAG_PML + 6 == tag;
}

/* A fragment still in the receive buffers it arrived in, handed over as
 * one segment per chunk. */
static bool rx_deliver_pieces(void *t, void *ep, uint8_t tag, const struct usnic_reasm_piece *piece,
                              unsigned n, uint64_t len)
{
    usnic_module_t *module = t;
    const mca_btl_active_message_callback_t *reg = &mca_btl_base_active_message_trigger[tag];
    mca_btl_base_segment_t segments[MCA_BTL_DES_MAX_SEGMENTS];
    mca_btl_base_descriptor_t desc;
    (void) ep;
    (void) len;

    if (!tag_takes_segments(tag) || 0 == n || n > MCA_BTL_DES_MAX_SEGMENTS ||
        piece[0].len < USNIC_PIECE_HDR_MIN) {
        return false;
    }
    for (unsigned i = 0; i < n; i++) {
        segments[i].seg_addr.pval = (void *) piece[i].data;
        segments[i].seg_len = piece[i].len;
    }
    memset(&desc, 0, sizeof(desc));
    desc.des_segments = segments;
    desc.des_segment_count = n;
    module->stats.rx_in_place++;
    usnic_rx_fence();
    reg->cbfunc(&module->super, tag, &desc, reg->cbdata);
    return true;
}

static void rx_deferred(void *t, void *ep, struct usnic_reasm_table *reasm)
{
    usnic_module_t *module = t;
    (void) ep;

    if (OPAL_UNLIKELY(module->n_deferred >= USNIC_DEFER_TABLES)) {
        /* (process_packet lets a packet defer only while there is room:
         * never so) */
        usnic_reasm_materialize(reasm);
        return;
    }
    module->deferred[module->n_deferred++] = reasm;
}

void usnic_rx_defer_flush(usnic_module_t *module)
{
    for (int i = 0; i < module->n_deferred; i++) {
        usnic_reasm_materialize(module->deferred[i]);
    }
    module->n_deferred = 0;
}

static enum usnic_drop_reason rx_put_resolve(void *t, uint64_t key, uint64_t reg_offset,
                                             uint64_t len, uint8_t **dest)
{
    (void) t;
    return usnic_reg_resolve(&mca_btl_usnic_component.regs, key, reg_offset, len, dest);
}

/* Is this PUT's target likely in the cache?  Yes if it was the target of
 * one of the last few PUTs: a buffer used again and again (a ping-pong's)
 * is likely still cached and read right after the transfer.  Fresh memory
 * (a stream through many buffers) is not: a large PUT into it is copied
 * past the caches, and with small datagrams received in place.  The first
 * chunk of a PUT decides; its other chunks follow that decision. */
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

/*
 * Keep module->direct, the PUT or chunked fragment whose chunks have all
 * arrived in order up to direct.next and none after it: the kernel backend
 * receives its next chunks straight into the PUT's target or the
 * fragment's reassembly buffer, where whatever lands that turns out not to
 * be those chunks is overwritten by them before the PUT or fragment can
 * complete.  So it starts only with a first chunk arriving as the next
 * packet of its connection with nothing after it received (every later
 * chunk has a later sequence number), and any chunk of it arriving
 * elsewhere than at direct.next ends it.  Called for new, validated chunks
 * only, once they are written.
 *
 * A chunked fragment is received so only where its chunks carry at least
 * USNIC_DIRECT_CHUNK_MIN bytes.  The scattered receive costs the kernel
 * something per piece of its iovec (two per datagram); into a PUT's target
 * it saves the copy into the user's memory, but a fragment's reassembly
 * buffer is copied once more by the PML anyway, and there, with 1472-byte
 * datagrams, the pieces cost more than the copy from a receive buffer
 * saves: a 64 KiB GRO batch took 8.6-11.8 us to receive scattered against
 * 5.2 us into one buffer, and without it 128 and 256 KiB ping-pongs at MTU
 * 1500 took 11% and 9% less time, their streams 5% and 7% more bandwidth.
 * With 8972-byte datagrams it made no difference, with loopback's 65507
 * bytes the scattered receive was 3-4% faster (docs/perf-kernel-backend.md,
 * session 15).
 *
 * A PUT whose first chunk was copied past the caches (streamed: large, and
 * its target not one of the last few) is not received in place either
 * where its chunks carry USNIC_DIRECT_CHUNK_MIN bytes or more.  The
 * kernel's copy into the target is an ordinary one, which reads every line
 * of a cold target before writing it; a receive buffer that stays in the
 * cache and non-temporal stores from it beat that: 1 MiB streams into 64
 * distinct targets on loopback 5.4-5.9 against 4.3-4.8 GB/s, between two
 * hosts at MTU 9000 1.01-1.27x, median 1.14 (docs/perf-kernel-backend.md,
 * session 17).
 *
 * Chunks smaller than USNIC_DIRECT_CHUNK_MIN (MTU 1500's) go through the
 * receive buffers, into a PUT's target too, never in place: the scattered
 * receive costs the kernel more per datagram than the copy does.  Between
 * the namespace hosts at MTU 1500 (session 30, interleaved runs of
 * windows of 64 messages), with an ordinary copy: 512 KiB PUTs 3000-3150
 * MB/s in place, 4000-4100 so; 1 MiB 3560-3600 and 4050-4120; 2 MiB 3680
 * and 4030-4130; ping-pongs of 512 KiB-4 MiB unchanged (sessions 17 and
 * 19 had the in-place receive ahead into fresh memory on another
 * machine).  Copied past the caches with one fence per progress call (see
 * copy_stream), 1 MiB 4490-4600 (session 31).
 */
#define USNIC_DIRECT_CHUNK_MIN 4096

static void direct_track(usnic_module_t *module, mca_btl_base_endpoint_t *ep,
                         const struct usnic_pkt_view *v, bool streamed)
{
    struct usnic_direct *d = &module->direct;
    const struct usnic_pkt_hdr *h = v->hdr;
    uint64_t off = v->chunk->offset, end = off + v->payload_len;

    if (d->ep == ep && d->msg_id == h->msg_id && d->type == h->type) {
        if (off == d->next && (v->payload_len == d->plen || end == d->msg_len) &&
            end < d->msg_len) {
            d->next = end;
        } else {
            d->ep = NULL; /* out of order (a hole may follow), or its last chunk */
        }
        return;
    }
    if (0 == off && end < v->chunk->msg_len && ep->module == module && !ep->dead &&
        v->payload_len >= USNIC_DIRECT_CHUNK_MIN && (NULL == v->put || !streamed) &&
        h->seq == ep->rel.rx.expected &&
        usnic_seq_diff(ep->rel.rx.expected, ep->rel.rx.highest) == 1) {
        d->ep = ep;
        d->type = h->type;
        d->tag = h->tag;
        d->msg_id = h->msg_id;
        d->plen = v->payload_len;
        d->reg_key = (NULL != v->put) ? v->put->reg_key : 0;
        d->reg_offset = (NULL != v->put) ? v->put->reg_offset : 0;
        d->msg_len = v->chunk->msg_len;
        d->next = end;
    }
}

/* A chunk of a fragment went into its reassembly buffer: in place if the
 * kernel backend received it there. */
static void rx_chunk_added(void *t, void *ep, const struct usnic_pkt_view *v)
{
    usnic_module_t *module = t;
    mca_btl_base_endpoint_t *e = ep;

    /* (received in place only while module->direct names this fragment:
     * most chunks need no look at the table) */
    if (module->direct.ep == e) {
        const uint8_t *buf = usnic_reasm_dest(&e->reasm, v->hdr->msg_id, v->chunk->msg_len);
        if (NULL != buf && buf + v->chunk->offset == v->payload) {
            module->stats.rx_direct++;
        }
    }
    direct_track(module, e, v, false);
}

static void rx_put_write(void *t, void *ep, uint8_t *dest, const struct usnic_pkt_view *v)
{
    usnic_module_t *module = t;
    bool stream, reused;

    if (dest == v->payload) {
        module->stats.rx_direct++; /* the kernel received it in place */
        direct_track(module, ep, v, false);
        return;
    }
    reused = put_target_reused(module, dest - v->chunk->offset, 0 == v->chunk->offset);
    stream =
        v->chunk->msg_len >= module->stream_copy_min && 0 != module->stream_copy_min && !reused;
    if (stream) {
        copy_stream(dest, v->payload, v->payload_len);
        module->stats.rx_put_streamed++;
    } else {
        memcpy(dest, v->payload, v->payload_len);
    }
    direct_track(module, ep, v, stream);
}

static void rx_acked(void *t, void *ep, int released)
{
    mca_btl_base_endpoint_t *e = ep;
    (void) released;

    e->last_progress_us = ((usnic_module_t *) t)->now_us;
    if (OPAL_UNLIKELY(e->live_watched)) {
        e->live_watched = false; /* it acknowledges again: no more probes */
        usnic_live_quiet(e);
    }
}

/*
 * Incast.  Every peer keeps at most its inflight_limit in flight to us, but
 * our data channel's receive buffer is one for all of them: enough peers
 * sending at once overflow it, and what overflows is lost and sent again
 * after a timeout.  So every ACK we send says how much its peer may keep
 * in flight (the header's allow field): the buffer's budget divided among
 * the peers that sent us data in the current epoch or the last one (a
 * datagram of at least USNIC_ALLOW_BULK bytes of payload: peers that only
 * exchange small messages with us take next to nothing of the buffer, and
 * counting them would cut the share of those that stream).  The
 * budget is what one peer may have anyway (half the buffer, as peers
 * assume from our modex record), so a single sender sees no difference.
 * An epoch lasts USNIC_ALLOW_EPOCH_US: long enough that the peers of a
 * collective that pauses between its rounds still count at the next round,
 * short enough that a lone sender gets the whole budget back soon after
 * the others stopped.
 */
#define USNIC_ALLOW_EPOCH_US 50000u
#define USNIC_ALLOW_BULK 1024u

static void allow_set(usnic_module_t *module)
{
    uint32_t n = (module->allow.cur > module->allow.prev) ? module->allow.cur : module->allow.prev;

    module->allow.kib = usnic_rel_allow_share(module->allow.budget, n);
}

void usnic_allow_init(usnic_module_t *module, bool on)
{
    int rcvbuf = module->chan[USNIC_CHAN_DATA].rcvbuf;

    module->allow.max = (on && rcvbuf > 0) ? (uint64_t) rcvbuf / 2 : 0;
    module->allow.budget = module->allow.max;
    module->allow.epoch = 1;
    module->allow.epoch_start = 0;
    module->allow.cur = module->allow.prev = 0;
    module->allow.kib = 0;
    module->allow.drops = usnic_socket_drops(module->chan[USNIC_CHAN_DATA].sock_fd);
    if (0 != module->allow.budget) {
        allow_set(module); /* the whole budget: no sender yet */
    }
}

/* The end of an epoch: what the kernel dropped for a full buffer since the
 * last one says how much of it the peers may really fill.  The buffer
 * holds less payload than its size says (the kernel charges every datagram
 * its whole allocation, several times the payload of a segmented train on
 * some paths), and the process may be slow to empty it (more ranks than
 * CPUs): so after an epoch with drops the budget halves, down to 1/32 of
 * the buffer's half, and after one without it grows back by 1/8 of that. */
static void allow_epoch_end(usnic_module_t *module, uint64_t now)
{
    /* if a whole epoch passed without data, the last one's senders are gone too */
    bool quiet = (now - module->allow.epoch_start >= 2 * USNIC_ALLOW_EPOCH_US);
    uint64_t drops = usnic_socket_drops(module->chan[USNIC_CHAN_DATA].sock_fd);
    bool dropped = (drops != module->allow.drops);

    module->allow.budget = usnic_rel_allow_budget(module->allow.budget, module->allow.max, dropped);
    if (dropped) {
        module->allow.drops = drops;
        module->stats.allow_cuts++;
    }
    USNIC_VERBOSE(40,
                  "%s: sharing epoch %u: %u senders (%u the epoch before), %s, budget "
                  "now %" PRIu64 " KiB",
                  module->ifname, module->allow.epoch, module->allow.cur, module->allow.prev,
                  dropped ? "the buffer overflowed" : "no overflow", module->allow.budget >> 10);
    module->allow.prev = quiet ? 0 : module->allow.cur;
    module->allow.cur = 0;
    module->allow.epoch++;
    module->allow.epoch_start = now;
    allow_set(module);
}

/* ep sent us a bulk datagram: count it among this epoch's senders. */
static void allow_count(usnic_module_t *module, mca_btl_base_endpoint_t *ep)
{
    uint64_t now = module->now_us;

    if (0 == module->allow.max) {
        module->allow.epoch_start = now; /* (so that this is not called for every packet) */
        return;
    }
    if (now - module->allow.epoch_start >= USNIC_ALLOW_EPOCH_US) {
        allow_epoch_end(module, now);
    }
    if (ep->allow_epoch != module->allow.epoch) {
        ep->allow_epoch = module->allow.epoch;
        module->allow.cur++;
        if (module->allow.cur > module->allow.prev) {
            allow_set(module);
        }
        if (module->allow.cur > module->stats.rx_senders_max) {
            module->stats.rx_senders_max = module->allow.cur;
            USNIC_VERBOSE(20,
                          "%s: %u peers sending to us at once: each may keep %u KiB in flight "
                          "(the receive buffer's %" PRIu64 " KiB shared)",
                          module->ifname, module->allow.cur, (unsigned) module->allow.kib,
                          module->allow.budget >> 10);
        }
    }
}

/* ACKs go out through the module whose stream it is (ep->module): not t
 * when the datagram came around a link that is down (rx_lookup). */
static void rx_accepted(void *t, void *ep, uint32_t payload_len)
{
    usnic_module_t *module = t;
    mca_btl_base_endpoint_t *e = ep;

    module->stats.rx_bytes += payload_len;
    if (payload_len >= USNIC_ALLOW_BULK &&
        (e->allow_epoch != module->allow.epoch ||
         module->now_us - module->allow.epoch_start >= USNIC_ALLOW_EPOCH_US)) {
        allow_count(module, e);
    }
    usnic_ack_schedule(e->module, e);
}

static void rx_ack_schedule(void *t, void *ep)
{
    (void) t;
    usnic_ack_schedule(((mca_btl_base_endpoint_t *) ep)->module, ep);
}

static void rx_drop(void *t, void *ep, enum usnic_drop_reason why)
{
    usnic_module_t *module = t;
    (void) ep;

    module->stats.drops[why]++;
    if (USNIC_DROP_DUPLICATE == why) {
        module->stats.dup_rx++;
    } else if (USNIC_DROP_INJECTED != why && USNIC_DROP_PENDING != why) {
        module->stats.bad_pkts++;
    }
}

static void rx_ack_rx(void *t, void *ep, bool fresh)
{
    usnic_module_t *module = t;
    (void) ep;

    if (fresh) {
        module->stats.acks_rx++; /* copies are counted by the connection */
    }
}

static const struct usnic_rx_ops btl_rx_ops = {
    .lookup = rx_lookup,
    .tag_ok = rx_tag_ok,
    .deliver = rx_deliver,
    .deliver_pieces = rx_deliver_pieces,
    .deferred = rx_deferred,
    .put_resolve = rx_put_resolve,
    .put_write = rx_put_write,
    .chunk_added = rx_chunk_added,
    .acked = rx_acked,
    .accepted = rx_accepted,
    .ack_schedule = rx_ack_schedule,
    .drop = rx_drop,
    .ack_rx = rx_ack_rx,
};

/*
 * Hold a datagram whose sender's record is being fetched (the dispatch said
 * PENDING).  Only where the source can be checked when it is released
 * (the prefix gives its address) or the MAC vouches for it: with FI_SOURCE
 * a sender not yet in the address vector has no address to compare, so
 * without a MAC the datagram is dropped and its sender sends it again.
 */
static void park(usnic_module_t *module, const uint8_t *buf, size_t len)
{
    usnic_parked_t *pk = NULL;
    const struct usnic_pkt_hdr *hdr = (const struct usnic_pkt_hdr *) buf;

    if ((USNIC_SRC_FI == module->src_check &&
         USNIC_AUTH_NONE == mca_btl_usnic_component.params.auth) ||
        module->n_parked >= USNIC_PARK_MAX || len > module->chan[USNIC_CHAN_DATA].mtu) {
        return;
    }
    for (int i = 0; i < USNIC_PARK_MAX; i++) {
        if (0 == module->parked[i].len) {
            pk = &module->parked[i];
            break;
        }
    }
    if (NULL == pk) {
        return;
    }
    if (NULL == pk->buf) {
        pk->buf = malloc(module->chan[USNIC_CHAN_DATA].mtu);
        if (NULL == pk->buf) {
            return;
        }
    }
    memcpy(pk->buf, buf, len);
    pk->len = (uint32_t) len;
    pk->vpid = hdr->src_module >> 8;
    pk->from = module->rx_from;
    module->n_parked++;
    module->stats.parked++;
}

/* The header MACs of n datagrams from ep at bufs (each lens[i] bytes in
 * its buffer), the i-th at base + i * step, computed together. */
static void macs_together(usnic_module_t *module, const mca_btl_base_endpoint_t *ep,
                          const uint8_t *const bufs[], const size_t lens[], unsigned n,
                          const uint8_t *base, size_t step)
{
    if (NULL == ep || ep->dead || USNIC_AUTH_HEADER != ep->auth || ep->crc) {
        return;
    }
    usnic_pkt_macs(bufs, lens, n, &ep->rx_mac_key, module->rx_macs.tag, module->rx_macs.ok);
    module->rx_macs.base = base;
    module->rx_macs.step = step;
    module->rx_macs.key = &ep->rx_mac_key;
    module->rx_macs.n = n;
    module->stats.macs_rx_lanes += n;
}

void usnic_rx_macs_ahead(usnic_module_t *module, const uint8_t *buf, size_t len, size_t step)
{
    const struct usnic_pkt_hdr *hdr = (const struct usnic_pkt_hdr *) buf;
    const uint8_t *bufs[USNIC_TRAIN_MAX];
    size_t lens[USNIC_TRAIN_MAX];
    unsigned n = 0;

    module->rx_macs.n = 0;
    if (!module->mac_lanes || 0 == step || len < sizeof(*hdr) || len < USNIC_SIP_LANES_MIN * step) {
        return;
    }
    for (size_t off = 0; off < len && n < USNIC_TRAIN_MAX; off += step) {
        bufs[n] = buf + off;
        lens[n++] = (len - off < step) ? len - off : step;
    }
    /* the sender its first datagram names (a coalesced receive comes from
     * one address); the dispatch uses a tag only for a datagram whose own
     * lookup finds the same key */
    macs_together(module, usnic_endpoint_for_key(module, hdr->sender_key), bufs, lens, n, buf,
                  step);
}

void usnic_rx_macs_headers(usnic_module_t *module, const mca_btl_base_endpoint_t *ep,
                           const uint8_t *hdrs, size_t stride, size_t hdr_len, unsigned n)
{
    const uint8_t *bufs[USNIC_TRAIN_MAX];
    size_t lens[USNIC_TRAIN_MAX];

    module->rx_macs.n = 0;
    if (!module->mac_lanes || n < USNIC_SIP_LANES_MIN || n > USNIC_TRAIN_MAX) {
        return;
    }
    for (unsigned i = 0; i < n; i++) {
        bufs[i] = hdrs + i * stride;
        lens[i] = hdr_len;
    }
    macs_together(module, ep, bufs, lens, n, hdrs, stride);
}

/* The key and (*tag) the MAC of the datagram at buf was computed ahead
 * with, if it is one of the coalesced receive's where it arrived; NULL if
 * it was not. */
static inline const struct usnic_sip_key *mac_ahead(const usnic_module_t *module,
                                                    const uint8_t *buf, uint64_t *tag)
{
    size_t at, i;

    if (0 == module->rx_macs.n || (uintptr_t) buf < (uintptr_t) module->rx_macs.base) {
        return NULL;
    }
    at = (size_t) ((uintptr_t) buf - (uintptr_t) module->rx_macs.base);
    i = at / module->rx_macs.step;
    if (i >= module->rx_macs.n || i * module->rx_macs.step != at || !module->rx_macs.ok[i]) {
        return NULL;
    }
    *tag = module->rx_macs.tag[i];
    return module->rx_macs.key;
}

/* Where the datagram being processed came from, as one number: equal for
 * two datagrams exactly when source_ok() compares the same source. */
static inline uint64_t source_token(const usnic_module_t *module)
{
    switch (module->src_check) {
    case USNIC_SRC_FI:
        return (uint64_t) module->rx_from.fi;
    case USNIC_SRC_PREFIX:
    case USNIC_SRC_SOCKET:
        return ((uint64_t) module->rx_from.ip << 32) | ((uint64_t) module->rx_from.port << 8) |
               module->rx_from.lane;
    default:
        return 0;
    }
}

void usnic_rx_batch_begin(usnic_module_t *module)
{
    module->rx_pred.ok = false;
    module->rx_pred_scope++;
}

void usnic_rx_batch_end(usnic_module_t *module)
{
    module->rx_pred.ok = false;
    module->rx_pred_scope--;
    module->stats.rx_predicted += module->rx_pred.hits;
    module->rx_pred.hits = 0;
}

void usnic_rx_predict_forget(void)
{
    for (int i = 0; i < mca_btl_usnic_component.num_modules; i++) {
        mca_btl_usnic_component.modules[i]->rx_pred.ok = false;
    }
}

static void process_packet(usnic_module_t *module, const uint8_t *buf, size_t len,
                           const uint8_t *payload)
{
    uint64_t mac_tag = 0;
    const struct usnic_sip_key *mac_key = mac_ahead(module, buf, &mac_tag);
    const bool predict = module->rx_predict && module->rx_pred_scope > 0;
    const struct usnic_rx_params p = {
        .max_msg_len = module->max_msg_len,
        .now = module->now_us,
        .lane = module->rx_from.lane,
        .payload = payload,
        .defer = module->rx_defer && module->n_deferred < USNIC_DEFER_TABLES,
        .mac_key = mac_key,
        .mac_tag = mac_tag,
        .predict = predict ? &module->rx_pred : NULL,
        .src = predict ? source_token(module) : 0, /* (read only with a prediction) */
    };

    enum usnic_drop_reason why = usnic_rx_dispatch(&btl_rx_ops, module, buf, len, &p);

    if (OPAL_UNLIKELY(USNIC_PKT_OK != why)) {
        /* (a direct receive's buf holds the header only) */
        size_t in_buf = (NULL == payload) ? len : USNIC_HDR_LEN_MAX;
        if (USNIC_DROP_PENDING == why && NULL == payload) {
            park(module, buf, len);
        }
        if (opal_output_get_verbosity(opal_btl_base_framework.framework_output) >= 60) {
            char dump[512];
            usnic_pkt_dump(buf, in_buf, dump, sizeof(dump));
            USNIC_VERBOSE(60, "%s: dropped (%s) on channel %u: %s", module->ifname,
                          usnic_drop_reason_name(why), module->rx_from.lane, dump);
        }
    }
}

/* A datagram in a buffer of our own that is reused before the receive
 * batch ends (parked, held back or put together by fault injection): its
 * chunks are copied, never deferred. */
static void process_packet_kept(usnic_module_t *module, const uint8_t *buf, size_t len)
{
    bool defer = module->rx_defer;

    module->rx_defer = false;
    process_packet(module, buf, len, NULL);
    module->rx_defer = defer;
}

void usnic_release_parked(usnic_module_t *module, uint32_t vpid)
{
    enum usnic_src_check check = module->src_check;
    usnic_rx_source_t from = module->rx_from;

    for (int i = 0; i < USNIC_PARK_MAX && module->n_parked > 0; i++) {
        usnic_parked_t *pk = &module->parked[i];
        uint32_t len = pk->len;

        if (0 == len || pk->vpid != vpid) {
            continue;
        }
        pk->len = 0;
        module->n_parked--;
        /* its source as it arrived: the prefix's address, or (FI_SOURCE)
         * none that the address vector knew then, so the MAC must vouch */
        module->rx_from = pk->from;
        module->src_check = (USNIC_SRC_PREFIX == check) ? check : USNIC_SRC_NONE;
        module->now_us = usnic_now_us();
        module->stats.unparked++;
        process_packet_kept(module, pk->buf, len);
        module->src_check = check;
    }
    module->rx_from = from;
}

void usnic_parked_fini(usnic_module_t *module)
{
    for (int i = 0; i < USNIC_PARK_MAX; i++) {
        free(module->parked[i].buf);
        module->parked[i].buf = NULL;
        module->parked[i].len = 0;
    }
    module->n_parked = 0;
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
        f->held_from = module->rx_from;
        return;
    }
    if (buf == f->whole_buf) {
        process_packet_kept(module, buf, len);
    } else {
        process_packet(module, buf, len, NULL); /* the receive buffer: may defer */
    }
    if (f->dup_rate > 0.0 && usnic_rand_unit(&f->rng) < f->dup_rate) {
        module->stats.inj_dup++;
        process_packet_kept(module, buf, len);
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
    {
        usnic_rx_source_t from = module->rx_from;
        module->rx_from = f->held_from; /* where it came from, not the last arrival */
        process_packet_kept(module, f->held_buf, len);
        module->rx_from = from;
    }
}

void usnic_rx_datagram(usnic_module_t *module, usnic_channel_t *chan, const uint8_t *buf,
                       size_t len)
{
    module->stats.rx_pkts++;
    module->rx_from.lane = (uint8_t) chan->id;
    if (OPAL_UNLIKELY(usnic_fault_on_rx(&module->fault))) {
        inject(module, buf, len);
    } else {
        process_packet(module, buf, len, NULL);
    }
}

void usnic_rx_datagram_split(usnic_module_t *module, usnic_channel_t *chan, const uint8_t *hdr,
                             size_t hdr_len, const uint8_t *payload, size_t payload_len)
{
    if (OPAL_UNLIKELY(NULL != module->fault.whole_buf)) {
        /* fault injection takes whole datagrams: this one put together (a
         * dropped one leaves its payload where nothing valid is yet) */
        size_t len = hdr_len + payload_len;
        if (len <= module->chan[USNIC_CHAN_DATA].mtu) { /* (never larger) */
            memcpy(module->fault.whole_buf, hdr, hdr_len);
            memcpy(module->fault.whole_buf + hdr_len, payload, payload_len);
            usnic_rx_datagram(module, chan, module->fault.whole_buf, len);
        }
        return;
    }
    module->stats.rx_pkts++;
    module->rx_from.lane = (uint8_t) chan->id;
    process_packet(module, hdr, hdr_len + payload_len, payload);
}
