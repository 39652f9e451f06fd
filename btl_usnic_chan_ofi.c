/*
 * The libfabric backend (btl_usnic_chan.h): FI_EP_DGRAM endpoints of a
 * provider, usnic on Cisco VIC hardware, udp (plain sockets, one system
 * call per datagram) elsewhere.  Discovery asks the provider for its
 * devices; a module's channels are two endpoints sharing one completion
 * queue each, receive buffers are posted with fi_recv, and sends complete
 * through the queue (or at once with fi_inject).
 *
 * Every mode and attribute the provider returns is obeyed:
 *   FI_MR_LOCAL    (the usnic provider) every posted buffer lies in a
 *                  registration and its descriptor goes with the post: the
 *                  segment free lists take their memory from a pool that
 *                  registers each chunk once when it is allocated
 *                  (ofi_pool_alloc), and each segment keeps its chunk's
 *                  descriptor (seg->desc).  User memory is never posted:
 *                  data is copied into segments (no zero copy).
 *   FI_MSG_PREFIX  msg_prefix_size bytes before every buffer (chan->prefix),
 *                  counted in every length and in max_msg_size.
 *   FI_CONTEXT     each post's own fi_context (seg->fictx), never reused
 *                  before the post completed (seg->posted).
 *   sizes          max_msg_size, inject_size, iov_limit, tx/rx queue sizes.
 * Completion errors are read with fi_cq_readerr, decoded by the provider
 * (fi_cq_strerror) and reported once per module.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "opal/util/argv.h"
#include "opal/util/show_help.h"

#include "btl_usnic.h"
#include "btl_usnic_chan.h"
#include "btl_usnic_endpoint.h"
#include "btl_usnic_frag.h"
#include "btl_usnic_ofi.h"
#include "btl_usnic_util.h"

/* Mode bits we can honour, and the memory registration modes. */
#define OFI_MODES (FI_CONTEXT | FI_MSG_PREFIX | FI_LOCAL_MR)
#define OFI_MR_MODES (FI_MR_LOCAL | FI_MR_ALLOCATED)

static struct fi_info *query_provider_caps(const char *prov, enum fi_threading threading,
                                           uint64_t caps)
{
    struct fi_info *hints, *info = NULL;
    int rc;

    hints = fi_allocinfo();
    if (NULL == hints) {
        return NULL;
    }
    hints->caps = caps;
    hints->mode = OFI_MODES;
    hints->domain_attr->mr_mode = OFI_MR_MODES;
    hints->ep_attr->type = FI_EP_DGRAM;
    hints->addr_format = FI_SOCKADDR_IN;
    hints->domain_attr->threading = threading;
    hints->fabric_attr->prov_name = strdup(prov);
    rc = fi_getinfo(FI_VERSION(1, 5), NULL, NULL, 0, hints, &info);
    fi_freeinfo(hints);
    if (0 != rc) {
        USNIC_VERBOSE(5, "provider %s (threading %d): fi_getinfo: %s", prov, (int) threading,
                      fi_strerror(-rc));
        return NULL;
    }
    return info;
}

/*
 * Every libfabric call of this component is serialised: by the component
 * lock when MPI threads are in use, by the single thread otherwise.  So ask
 * for FI_THREAD_DOMAIN, which lets the provider drop its own locks (about a
 * tenth of the instructions of a small-message round trip with udp), and
 * take whatever the provider offers if it cannot.
 */
static struct fi_info *query_provider_threading(const char *prov, enum fi_threading threading)
{
    struct fi_info *info = query_provider_caps(prov, threading, FI_MSG | FI_SOURCE);
    return (NULL != info) ? info : query_provider_caps(prov, threading, FI_MSG);
}

/*
 * FI_SOURCE, where the provider has it, names the sender of every datagram
 * (btl_usnic_recv.c drops a datagram whose source is not its claimed
 * sender's modex address); the usnic provider puts the received headers in
 * the receive prefix instead.
 */
static struct fi_info *query_provider(const char *prov)
{
    struct fi_info *info = query_provider_threading(prov, FI_THREAD_DOMAIN);
    return (NULL != info) ? info : query_provider_threading(prov, FI_THREAD_UNSPEC);
}

/* ---- registered segment memory (FI_MR_LOCAL) ---- */

static void ofi_state_free(struct usnic_ofi_state *st)
{
    free(st->chunks);
    free(st);
}

/* The segment lists' pool: aligned memory, registered with the domain for
 * sends and receives when the provider wants local registrations. */
static void *ofi_pool_alloc(mca_mpool_base_module_t *mpool, size_t size, size_t align,
                            uint32_t flags)
{
    struct usnic_ofi_state *st = (struct usnic_ofi_state *) mpool;
    usnic_module_t *module = st->module;
    struct usnic_ofi_chunk *ch;
    void *p = NULL;
    (void) flags;

    if (st->released || NULL == module->domain) {
        return NULL;
    }
    if (st->n_chunks == st->cap_chunks) {
        int cap = st->cap_chunks ? 2 * st->cap_chunks : 16;
        void *n = realloc(st->chunks, (size_t) cap * sizeof(*st->chunks));
        if (NULL == n) {
            return NULL;
        }
        st->chunks = n;
        st->cap_chunks = cap;
    }
    if (align < sizeof(void *)) {
        align = sizeof(void *);
    }
    if (0 != posix_memalign(&p, align, size)) {
        return NULL;
    }
    ch = &st->chunks[st->n_chunks];
    ch->base = p;
    ch->len = size;
    ch->mr = NULL;
    ch->desc = NULL;
    if (st->mr_local) {
        int rc = fi_mr_reg(module->domain, p, size, FI_SEND | FI_RECV, 0,
                           (uint64_t) st->n_chunks + 1, 0, &ch->mr, NULL);
        if (0 != rc) {
            USNIC_VERBOSE(5, "%s: fi_mr_reg of %zu bytes: %s", module->ifname, size,
                          fi_strerror(-rc));
            free(p);
            return NULL;
        }
        ch->desc = fi_mr_desc(ch->mr);
        module->stats.mr_regs++;
        USNIC_VERBOSE(30, "%s: registered %zu bytes of segment buffers (registration %d)",
                      module->ifname, size, st->n_chunks + 1);
    }
    st->n_chunks++;
    st->live_chunks++;
    return p;
}

static void ofi_pool_free(mca_mpool_base_module_t *mpool, void *addr)
{
    struct usnic_ofi_state *st = (struct usnic_ofi_state *) mpool;

    for (int i = st->n_chunks - 1; i >= 0; i--) {
        if (st->chunks[i].base == addr) {
            if (NULL != st->chunks[i].mr) {
                fi_close(&st->chunks[i].mr->fid);
                st->chunks[i].mr = NULL;
            }
            st->chunks[i].base = NULL;
            st->live_chunks--;
            break;
        }
    }
    free(addr);
    if (st->released && 0 == st->live_chunks) {
        ofi_state_free(st);
    }
}

static mca_mpool_base_module_t *ofi_seg_mpool(usnic_module_t *module)
{
    return (NULL != module->ofi && module->ofi->mr_local) ? &module->ofi->mpool : NULL;
}

static void *ofi_seg_desc(usnic_module_t *module, const void *buf)
{
    const struct usnic_ofi_state *st = module->ofi;

    for (int i = (NULL != st) ? st->n_chunks - 1 : -1; i >= 0; i--) {
        const struct usnic_ofi_chunk *ch = &st->chunks[i];
        if (NULL != ch->base && (const uint8_t *) buf >= ch->base &&
            (const uint8_t *) buf < ch->base + ch->len) {
            return ch->desc;
        }
    }
    return NULL;
}

/* Close every registration (the endpoints are closed: nothing is posted). */
static void ofi_regs_close(struct usnic_ofi_state *st)
{
    for (int i = 0; i < st->n_chunks; i++) {
        if (NULL != st->chunks[i].mr) {
            fi_close(&st->chunks[i].mr->fid);
            st->chunks[i].mr = NULL;
            st->chunks[i].desc = NULL;
        }
    }
}

/* Is this fi_info a device we should use?  Says why not at verbose level. */
static bool usable(const struct fi_info *fi, const struct usnic_filters *flt, uint32_t *addr)
{
    const char *dev = fi->domain_attr->name;
    const struct sockaddr_in *sin = fi->src_addr;

    if (NULL == sin || FI_SOCKADDR_IN != fi->addr_format || AF_INET != sin->sin_family) {
        USNIC_VERBOSE(20, "device %s: skipped, no IPv4 address", dev);
        return false;
    }
    if (0 == (fi->caps & FI_MSG) || FI_EP_DGRAM != fi->ep_attr->type) {
        USNIC_VERBOSE(20, "device %s: skipped, no FI_EP_DGRAM with FI_MSG", dev);
        return false;
    }
    if (!usnic_device_usable(dev, sin->sin_addr.s_addr, flt)) {
        return false;
    }
    *addr = sin->sin_addr.s_addr;
    return true;
}

/* Post a receive buffer; on failure it goes back to its free list. */
static int post_recv(usnic_module_t *module, usnic_channel_t *chan, usnic_seg_t *seg)
{
    ssize_t rc = fi_recv(chan->ep, seg->super.ptr, chan->prefix + chan->mtu, seg->desc,
                         FI_ADDR_UNSPEC, &seg->fictx);
    if (OPAL_UNLIKELY(0 != rc)) {
        USNIC_VERBOSE(5, "%s: fi_recv: %s", module->ifname, fi_strerror((int) -rc));
        opal_free_list_return(&chan->rx_segs, &seg->super);
        return OPAL_ERROR;
    }
    return OPAL_SUCCESS;
}

static int ofi_post_recvs(usnic_module_t *module, usnic_channel_t *chan)
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

static int channel_open(usnic_module_t *module, usnic_channel_t *chan, enum usnic_channel_id id,
                        uint32_t mtu, int tx_depth, int rx_depth)
{
    const usnic_params_t *p = &mca_btl_usnic_component.params;
    struct fi_cq_attr cq_attr = {0};
    size_t alen = sizeof(chan->addr);
    int rc;

    chan->id = id;
    chan->mtu = mtu;
    chan->prefix =
        (module->info->mode & FI_MSG_PREFIX) ? module->info->ep_attr->msg_prefix_size : 0;
    if (module->info->tx_attr->size > 0 && (size_t) tx_depth > module->info->tx_attr->size) {
        /* the provider's send queue is shorter: its size bounds our credits */
        tx_depth = (int) module->info->tx_attr->size;
    }
    chan->tx_depth = tx_depth;
    chan->tx_credits = tx_depth;
    chan->inject_size = module->info->tx_attr->inject_size;
    chan->rx_depth = rx_depth;

    rc = fi_endpoint(module->domain, module->info, &chan->ep, NULL);
    if (0 != rc) {
        USNIC_VERBOSE(5, "%s: fi_endpoint: %s", module->ifname, fi_strerror(-rc));
        return OPAL_ERROR;
    }
    cq_attr.format = FI_CQ_FORMAT_MSG;
    cq_attr.size = (size_t) (p->cq_num > 0 ? p->cq_num : tx_depth + rx_depth + 16);
    cq_attr.wait_obj = FI_WAIT_NONE;
    rc = fi_cq_open(module->domain, &cq_attr, &chan->cq, NULL);
    if (0 == rc) {
        rc = fi_ep_bind(chan->ep, &chan->cq->fid, FI_TRANSMIT | FI_RECV);
    }
    if (0 == rc) {
        rc = fi_ep_bind(chan->ep, &module->av->fid, 0);
    }
    if (0 == rc) {
        rc = fi_enable(chan->ep);
    }
    if (0 == rc) {
        rc = fi_getname(&chan->ep->fid, &chan->addr, &alen);
    }
    if (0 != rc) {
        USNIC_VERBOSE(5, "%s: channel %d setup: %s", module->ifname, id, fi_strerror(-rc));
        return OPAL_ERROR;
    }
    chan->rcvbuf = 0;
    chan->sock_fd = -1;
    if (!module->is_udp) {
        /* an adapter (usnic) holds only what fits in the receives we
         * posted and drops the rest: that is the buffer peers keep half of
         * in flight (btl_usnic_endpoint.c) */
        size_t ring = (size_t) rx_depth * mtu;
        chan->rcvbuf = (int) (ring < INT_MAX ? ring : INT_MAX);
    } else {
        int rcv = 0, snd = 0;
        chan->sock_fd = usnic_udp_tune_socket(&chan->addr, p->udp_sockbuf, &rcv, &snd);
        if (chan->sock_fd >= 0) {
            chan->rcvbuf = rcv;
            USNIC_VERBOSE(20, "%s: channel %d socket buffers: receive %d, send %d bytes",
                          module->ifname, id, rcv, snd);
        } else {
            USNIC_VERBOSE(20, "%s: channel %d: UDP socket not found, buffers left as they are",
                          module->ifname, id);
        }
    }
    return OPAL_SUCCESS;
}

static void channel_close(usnic_channel_t *chan)
{
    if (NULL != chan->ep) {
        fi_close(&chan->ep->fid);
        chan->ep = NULL;
    }
    if (NULL != chan->cq) {
        fi_close(&chan->cq->fid);
        chan->cq = NULL;
    }
}

static void ofi_release(usnic_module_t *module)
{
    struct usnic_ofi_state *st = module->ofi;

    for (int c = 0; c < USNIC_NUM_CHANNELS; c++) {
        channel_close(&module->chan[c]);
    }
    if (NULL != st) {
        /* nothing is posted any more: registrations may go, before the domain */
        ofi_regs_close(st);
    }
    if (NULL != module->av) {
        fi_close(&module->av->fid);
    }
    if (NULL != module->domain) {
        fi_close(&module->domain->fid);
    }
    if (NULL != st && NULL != st->eq) {
        fi_close(&st->eq->fid);
        st->eq = NULL;
    }
    if (NULL != module->fabric) {
        fi_close(&module->fabric->fid);
    }
    if (NULL != module->info) {
        fi_freeinfo(module->info);
    }
    module->av = NULL;
    module->domain = NULL;
    module->fabric = NULL;
    module->info = NULL;
    if (NULL != st) {
        /* the segment lists still hold chunks: the pool frees the state
         * with the last of them */
        st->released = true;
        module->ofi = NULL;
        if (0 == st->live_chunks) {
            ofi_state_free(st);
        }
    }
}

/*
 * The largest datagram of the data channel: what the provider advertises,
 * bounded by the interface MTU.  The udp provider is plain UDP sockets, so
 * there the interface MTU is the real limit (9000 with jumbo frames, 65536
 * on loopback); a self-test at startup proves it (ofi_self_test).
 */
static uint32_t choose_datagram_size(usnic_module_t *module, uint32_t advertised, uint32_t if_mtu)
{
    uint32_t size = advertised;

    module->advertised_mtu = advertised;
    if (module->is_udp && mca_btl_usnic_component.params.udp_datagram_size >= 0 && if_mtu > 28) {
        size = usnic_udp_datagram_size(if_mtu);
        /* a cap below the advertised size is not followed, but an
         * interface MTU below it is: larger datagrams would be fragmented */
        if (size < advertised && if_mtu - 28 >= advertised) {
            size = advertised;
        }
    } else if (if_mtu > 28 && size > if_mtu - 28) {
        size = if_mtu - 28;
    }
    return size;
}

static int ofi_open(usnic_module_t *module, int rd_num)
{
    const usnic_params_t *p = &mca_btl_usnic_component.params;
    struct fi_av_attr av_attr = {0};
    int rc;

    rc = fi_fabric(module->info->fabric_attr, &module->fabric, NULL);
    if (0 == rc) {
        rc = fi_domain(module->fabric, module->info, &module->domain, NULL);
    }
    if (0 == rc) {
        av_attr.type = FI_AV_MAP;
        rc = fi_av_open(module->domain, &av_attr, &module->av, NULL);
    }
    if (0 != rc) {
        USNIC_VERBOSE(5, "%s: fabric/domain/AV setup: %s", module->ifname, fi_strerror(-rc));
        return OPAL_ERROR;
    }
    if (NULL != module->ofi && module->ofi->vf.known) {
        usnic_ofi_events_open(module);
    }
    if (OPAL_SUCCESS != usnic_check_rx_limits(module->prov_name, module->ifname,
                                              module->info->rx_attr->size, rd_num)) {
        mca_btl_usnic_component.param_error = true; /* reported: not a missing device */
        return OPAL_ERROR;
    }
    if (OPAL_SUCCESS != channel_open(module, &module->chan[USNIC_CHAN_PRIO], USNIC_CHAN_PRIO,
                                     module->chan[USNIC_CHAN_PRIO].mtu, p->prio_sd_num,
                                     p->prio_rd_num) ||
        OPAL_SUCCESS != channel_open(module, &module->chan[USNIC_CHAN_DATA], USNIC_CHAN_DATA,
                                     module->chan[USNIC_CHAN_DATA].mtu, p->sd_num, rd_num)) {
        return OPAL_ERROR;
    }
    return OPAL_SUCCESS;
}

/*
 * Send one datagram of `size` bytes from the data channel to itself and wait
 * (up to 200 ms) for it to arrive whole.  Runs before any peer exists, so
 * every completion seen here is the test's own.
 */
static bool ofi_self_test(usnic_module_t *module, uint32_t size)
{
    usnic_channel_t *chan = &module->chan[USNIC_CHAN_DATA];
    uint64_t deadline = usnic_now_us() + 200000;
    bool sent = false, arrived = false;
    fi_addr_t self;
    usnic_seg_t *seg;
    ssize_t rc;

    if (1 != fi_av_insert(module->av, &chan->addr, 1, &self, 0, NULL)) {
        return false;
    }
    seg = usnic_seg_alloc(module, USNIC_SEG_SEND);
    if (NULL == seg) {
        fi_av_remove(module->av, &self, 1, 0);
        return false;
    }
    seg->refs = 1;
    memset(seg->buf, 0x5a, size);
    seg->buf[0] = 0; /* not a valid protocol version: never mistaken for traffic */
    rc = fi_send(chan->ep, seg->buf - chan->prefix, chan->prefix + size, seg->desc, self,
                 &seg->fictx);
    while (0 == rc && (!sent || !arrived) && usnic_now_us() < deadline) {
        struct fi_cq_msg_entry ent;
        usnic_seg_t *s;
        if (1 != fi_cq_read(chan->cq, &ent, 1)) {
            if (-FI_EAVAIL == fi_cq_read(chan->cq, &ent, 1)) {
                struct fi_cq_err_entry err = {0};
                (void) fi_cq_readerr(chan->cq, &err, 0);
                if (NULL != err.op_context && err.op_context != &seg->fictx) {
                    s = (usnic_seg_t *) ((char *) err.op_context - offsetof(usnic_seg_t, fictx));
                    post_recv(module, chan, s);
                } else {
                    sent = true;
                }
            }
            continue;
        }
        if (ent.op_context == &seg->fictx) {
            sent = true;
            continue;
        }
        s = (usnic_seg_t *) ((char *) ent.op_context - offsetof(usnic_seg_t, fictx));
        if (ent.len == chan->prefix + size && 0 == s->buf[0] && 0x5a == s->buf[size - 1] &&
            0x5a == s->buf[size / 2]) {
            arrived = true;
        }
        post_recv(module, chan, s);
    }
    usnic_seg_put(seg);
    fi_av_remove(module->av, &self, 1, 0);
    return arrived;
}

/* USNIC_SRC_PREFIX: the source of a datagram from the Ethernet, IPv4 and
 * UDP headers the provider put in its receive prefix (checked, never
 * trusted: anything else leaves an address no peer has). */
static void source_from_prefix(usnic_module_t *module, const usnic_channel_t *chan,
                               const uint8_t *buf)
{
    const size_t eth = 14, ip = 20, udp = 8;

    module->rx_from.ip = 0;
    module->rx_from.port = 0;
    if (chan->prefix >= eth + ip + udp) {
        /* the headers end where the datagram starts */
        const uint8_t *e = buf - (eth + ip + udp);
        if (0x08 == e[12] && 0x00 == e[13] && 0x45 == e[eth] && 17 == e[eth + 9]) {
            memcpy(&module->rx_from.ip, e + eth + 12, 4);
            memcpy(&module->rx_from.port, e + eth + ip, 2);
        }
    }
}

static inline usnic_seg_t *seg_of(void *op_context)
{
    return (usnic_seg_t *) ((char *) op_context - offsetof(usnic_seg_t, fictx));
}

/* A send's completion (or failure): its credit and its post's reference. */
static inline void send_done(usnic_channel_t *chan, usnic_seg_t *seg)
{
    chan->tx_credits++;
    seg->posted = false;
    usnic_seg_put(seg);
}

/*
 * A completion in error: read it (fi_cq_readerr), let the provider decode
 * it (fi_cq_strerror), report the first of the module once, and recover:
 * a failed send is a lost datagram (the reliability layer sends it again),
 * a failed receive a datagram that did not arrive; its buffer is reposted.
 */
static int cq_error(usnic_module_t *module, usnic_channel_t *chan)
{
    struct fi_cq_err_entry err;
    char buf[256];
    const char *text;
    usnic_seg_t *seg;
    bool recv;

    memset(&err, 0, sizeof(err));
    if (fi_cq_readerr(chan->cq, &err, 0) <= 0) {
        return 0;
    }
    module->stats.cq_errors++;
    seg = (NULL != err.op_context) ? seg_of(err.op_context) : NULL;
    recv = (NULL != seg) ? (USNIC_SEG_RECV == seg->kind) : (0 != (err.flags & FI_RECV));
    buf[0] = '\0';
    text = fi_cq_strerror(chan->cq, err.prov_errno, err.err_data, buf, sizeof(buf));
    if (NULL == text || '\0' == text[0]) {
        text = fi_strerror(0 != err.prov_errno ? err.prov_errno : err.err);
    }
    if (NULL != module->ofi && !module->ofi->cq_err_reported && !module->link_down) {
        char code[64];
        module->ofi->cq_err_reported = true;
        snprintf(code, sizeof(code), "%d (%s), provider code %d", err.err, fi_strerror(err.err),
                 err.prov_errno);
        usnic_show_help_running("completion error", opal_process_info.nodename, module->ifname,
                                module->prov_name,
                                USNIC_CHAN_PRIO == chan->id ? "priority" : "data",
                                recv ? "receive" : "send", code, text);
    } else {
        USNIC_VERBOSE(20, "%s: %s completion error %d (provider %d): %s", module->ifname,
                      recv ? "receive" : "send", err.err, err.prov_errno, text);
    }
    if (NULL == seg) {
        return 1;
    }
    if (recv) {
        /* e.g. a datagram longer than the buffer, or a CRC error */
        module->stats.rx_pkts++;
        module->stats.drops[USNIC_DROP_RX_ERROR]++;
        module->stats.bad_pkts++;
        post_recv(module, chan, seg);
    } else {
        module->stats.tx_errors++;
        send_done(chan, seg);
    }
    return 1;
}

/* One fi_cq_read of up to 16 completions, each handled; the bytes
 * received are added to *bytes. */
static int ofi_poll_once(usnic_module_t *module, usnic_channel_t *chan, size_t *bytes)
{
    struct fi_cq_msg_entry ent[16];
    fi_addr_t src[16];
    ssize_t n;

    if (USNIC_SRC_FI == module->src_check) {
        n = fi_cq_readfrom(chan->cq, ent, 16, src);
    } else {
        n = fi_cq_read(chan->cq, ent, 16);
    }
    if (n > 0) {
        for (ssize_t i = 0; i < n; i++) {
            usnic_seg_t *seg = seg_of(ent[i].op_context);
            if (USNIC_SEG_RECV == seg->kind) {
                size_t len = ent[i].len >= chan->prefix ? ent[i].len - chan->prefix : 0;
                if (USNIC_SRC_FI == module->src_check) {
                    module->rx_from.fi = src[i];
                } else if (USNIC_SRC_PREFIX == module->src_check) {
                    source_from_prefix(module, chan, seg->buf);
                }
                usnic_rx_datagram(module, chan, seg->buf, len);
                post_recv(module, chan, seg);
                *bytes += len;
            } else {
                send_done(chan, seg);
            }
        }
        return (int) n;
    }
    if (-FI_EAVAIL == n) {
        return cq_error(module, chan);
    }
    if (-FI_EAGAIN != n && 0 != n) {
        USNIC_VERBOSE(5, "%s: fi_cq_read: %s", module->ifname, fi_strerror((int) -n));
    }
    return 0;
}

/*
 * The udp provider takes one datagram off its socket per fi_cq_read, so a
 * rank that polls once in a while (it computes between MPI_Test calls)
 * would read one datagram per poll and fall behind any stream, its peers'
 * windows full and their timers firing (test/mpi/starve.c, 1472-byte
 * datagrams: 3.4 s for 1 MiB at one poll per millisecond).  While the
 * last poll found something, keep reading, up to OFI_POLL_BUDGET
 * completions or OFI_POLL_BYTES received, whichever comes first: reading
 * much more before the ACKs go out cost bandwidth (64 KiB datagrams on
 * lo, up to 64 of them per poll: 1880-2952 MB/s at 64 KiB against
 * 2759-3927).  After an empty poll read once, so that an idle or
 * latency-bound channel pays no second call for the one that finds its
 * datagram.
 */
#define OFI_POLL_BUDGET 64
#define OFI_POLL_BYTES 65536

static int ofi_poll(usnic_module_t *module, usnic_channel_t *chan)
{
    size_t bytes = 0;
    int count, n;

    if (USNIC_CHAN_PRIO == chan->id && NULL != module->ofi && NULL != module->ofi->eq) {
        usnic_ofi_events_poll(module);
    }
    count = ofi_poll_once(module, chan, &bytes);
    if (chan->rx_streak) {
        while (count > 0 && count < OFI_POLL_BUDGET && bytes < OFI_POLL_BYTES &&
               (n = ofi_poll_once(module, chan, &bytes)) > 0) {
            count += n;
        }
    }
    chan->rx_streak = (count > 0);
    return count;
}

/*
 * A datagram of module's stream to ep while module's link is down (or the
 * peer's: its datagrams come around), sent unchanged through another
 * module that reaches the same process, to that process's address there:
 * the receiver finds the stream by its key (usnic_endpoint_detoured).  It
 * is copied into the other module's segment (its registrations are its
 * own).  No such module: OPAL_ERR_RESOURCE_BUSY (the reliability layer
 * tries again, usnic_ofi_events_poll gives up after btl_usnic_peer_timeout).
 */
static int send_detour(usnic_module_t *module, usnic_channel_t *chan, usnic_seg_t *seg,
                       const mca_btl_base_endpoint_t *ep)
{
    const usnic_component_t *c = &mca_btl_usnic_component;
    uint32_t len = usnic_seg_wire_len(seg);

    for (int i = 0; i < c->num_modules; i++) {
        usnic_module_t *m = c->modules[i];
        mca_btl_base_endpoint_t *via;
        usnic_seg_t *copy;
        int rc;

        if (m == module || m->finalized || m->link_down || m->backend != &usnic_backend_ofi ||
            len > m->chan[USNIC_CHAN_DATA].mtu || m->chan[chan->id].tx_credits <= 0 ||
            NULL == (via = usnic_endpoint_sibling(m, ep))) {
            continue;
        }
        copy = usnic_seg_alloc(m, USNIC_SEG_SEND);
        if (NULL == copy) {
            continue;
        }
        memcpy(copy->buf, seg->buf, seg->hdr_len);
        if (0 != seg->zc_len) {
            memcpy(copy->buf + seg->hdr_len, seg->zc_ptr, seg->zc_len);
        }
        copy->hdr_len = len;
        copy->refs = 1;
        rc = m->backend->send(m, &m->chan[chan->id], copy, via);
        usnic_seg_put(copy);
        if (OPAL_SUCCESS == rc) {
            module->stats.detours++;
            return OPAL_SUCCESS;
        }
    }
    return OPAL_ERR_RESOURCE_BUSY;
}

/* Hand one sealed datagram to the provider.  OPAL_ERR_RESOURCE_BUSY: try later. */
static int ofi_send(usnic_module_t *module, usnic_channel_t *chan, usnic_seg_t *seg,
                    const mca_btl_base_endpoint_t *ep)
{
    fi_addr_t dest = ep->addr[chan->id];
    struct iovec iov[2];
    void *desc[2];
    size_t n = 1;
    ssize_t rc;

    if (OPAL_UNLIKELY(seg->posted)) {
        return OPAL_ERR_RESOURCE_BUSY; /* its fi_context and buffer are the provider's */
    }
    if (OPAL_UNLIKELY(module->link_down || 0 != ep->detour_until)) {
        if (module->link_down || ep->detour_until > usnic_now_us()) {
            return send_detour(module, chan, seg, ep);
        }
        ((mca_btl_base_endpoint_t *) ep)->detour_until = 0; /* the peer's datagrams came back */
    }
    iov[0].iov_base = seg->buf - chan->prefix;
    iov[0].iov_len = chan->prefix + seg->hdr_len;
    desc[0] = seg->desc;
    /* inject_size does not count the message prefix (fi_getinfo(3)) */
    if (0 == seg->zc_len && seg->hdr_len <= chan->inject_size) {
        /* small and contiguous: the provider copies it now, no completion
         * to wait for (we keep the segment for retransmission anyway) */
        rc = fi_inject(chan->ep, iov[0].iov_base, iov[0].iov_len, dest);
        if (OPAL_LIKELY(0 == rc)) {
            return OPAL_SUCCESS;
        }
        if (-FI_EAGAIN == rc) {
            return OPAL_ERR_RESOURCE_BUSY;
        }
        USNIC_VERBOSE(5, "%s: fi_inject: %s", module->ifname, fi_strerror((int) -rc));
        return OPAL_ERROR;
    }
    if (0 != seg->zc_len) {
        /* only when no registration is needed (module->zero_copy) */
        iov[1].iov_base = (void *) seg->zc_ptr;
        iov[1].iov_len = seg->zc_len;
        desc[1] = NULL;
        n = 2;
    }
    rc = fi_sendv(chan->ep, iov, desc, n, dest, &seg->fictx);
    if (OPAL_UNLIKELY(0 != rc)) {
        if (-FI_EAGAIN == rc) {
            return OPAL_ERR_RESOURCE_BUSY;
        }
        USNIC_VERBOSE(5, "%s: fi_sendv: %s", module->ifname, fi_strerror((int) -rc));
        return OPAL_ERROR;
    }
    chan->tx_credits--;
    seg->posted = true;
    seg->refs++; /* until the send completion */
    return OPAL_SUCCESS;
}

static int ofi_peer_add(usnic_module_t *module, mca_btl_base_endpoint_t *ep)
{
    for (int c = 0; c < USNIC_NUM_CHANNELS; c++) {
        int rc = fi_av_insert(module->av, &ep->sin[c], 1, &ep->addr[c], 0, NULL);
        if (1 != rc) {
            USNIC_VERBOSE(5, "%s: fi_av_insert failed: %d", module->ifname, rc);
            return OPAL_ERROR;
        }
    }
    return OPAL_SUCCESS;
}

/* The backend state of a new module, obeying fi's memory registration mode. */
static struct usnic_ofi_state *ofi_state_new(usnic_module_t *module, const struct fi_info *fi,
                                             const struct usnic_vf_facts *vf)
{
    struct usnic_ofi_state *st = calloc(1, sizeof(*st));

    if (NULL == st) {
        return NULL;
    }
    st->mpool.mpool_alloc = ofi_pool_alloc;
    st->mpool.mpool_free = ofi_pool_free;
    st->mpool.mpool_name = "btl_usnic_ofi";
    st->module = module;
    st->mr_local =
        (0 != (fi->domain_attr->mr_mode & FI_MR_LOCAL)) || (0 != (fi->mode & FI_LOCAL_MR));
    if (NULL != vf) {
        st->vf = *vf;
    }
    return st;
}

/* A module for one device of the provider, its channels open. */
static usnic_module_t *ofi_module_create(struct fi_info *fi, const struct usnic_vf_facts *vf)
{
    usnic_module_t *module;
    uint32_t data_mtu, advertised;

    module = usnic_module_new(fi->domain_attr->name, (const struct sockaddr_in *) fi->src_addr,
                              fi->fabric_attr->prov_name, &usnic_backend_ofi);
    if (NULL == module) {
        return NULL;
    }
    module->info = fi_dupinfo(fi);
    module->ofi = ofi_state_new(module, fi, vf);
    if (NULL == module->info || NULL == module->ofi) {
        if (NULL != module->info) {
            fi_freeinfo(module->info);
        }
        free(module->ofi);
        free(module);
        return NULL;
    }
    if (NULL != vf && vf->known) {
        /* the VF's own facts: the device is no Linux interface of its name */
        module->if_mtu = vf->mtu;
        module->if_prefixlen = vf->prefixlen;
        module->link_mbps = vf->link_mbps;
        if (module->link_mbps > 0) {
            module->super.btl_bandwidth = module->link_mbps;
        }
    }
    module->is_udp = (0 == strcmp(module->prov_name, "udp"));
    if (0 == strcmp(module->prov_name, "usnic") && (module->info->mode & FI_MSG_PREFIX) &&
        module->info->ep_attr->msg_prefix_size >= 14 + 20 + 8) {
        module->src_check = USNIC_SRC_PREFIX;
    } else if (module->info->caps & FI_SOURCE) {
        module->src_check = USNIC_SRC_FI;
    } else {
        module->src_check = USNIC_SRC_NONE;
        USNIC_VERBOSE(5,
                      "%s: provider %s cannot tell datagram sources: only keys and the MAC "
                      "identify senders",
                      module->ifname, module->prov_name);
    }
    /* max_msg_size counts the prefix in prefix mode (the usnic provider's
     * 1536 at MTU 1500 is 64 + 1472) */
    advertised = (uint32_t) fi->ep_attr->max_msg_size;
    if ((module->info->mode & FI_MSG_PREFIX) && advertised > fi->ep_attr->msg_prefix_size) {
        advertised -= (uint32_t) fi->ep_attr->msg_prefix_size;
    }
    data_mtu = choose_datagram_size(module, advertised, module->if_mtu);
    if (data_mtu < USNIC_HDR_LEN_MAX + 64) {
        USNIC_VERBOSE(20, "%s: skipped, datagrams of %u bytes are too small", module->ifname,
                      data_mtu);
        fi_freeinfo(module->info);
        free(module->ofi);
        free(module);
        return NULL;
    }
    usnic_module_set_sizes(module, data_mtu);
    /* zero copy posts user memory: only where it needs no registration */
    module->zero_copy = module->info->tx_attr->iov_limit >= 2 && !module->ofi->mr_local;
    USNIC_VERBOSE(5,
                  "%s: provider %s: mode%s%s%s, mr_mode%s%s, prefix %zu, max_msg_size %zu, "
                  "inject %zu, iov_limit %zu, tx/rx size %zu/%zu%s",
                  module->ifname, module->prov_name,
                  (module->info->mode & FI_MSG_PREFIX) ? " FI_MSG_PREFIX" : "",
                  (module->info->mode & FI_CONTEXT) ? " FI_CONTEXT" : "",
                  (module->info->mode & FI_LOCAL_MR) ? " FI_LOCAL_MR" : "",
                  (module->info->domain_attr->mr_mode & FI_MR_LOCAL) ? " FI_MR_LOCAL" : "",
                  (module->info->domain_attr->mr_mode & FI_MR_ALLOCATED) ? " FI_MR_ALLOCATED" : "",
                  (module->info->mode & FI_MSG_PREFIX) ? module->info->ep_attr->msg_prefix_size : 0,
                  module->info->ep_attr->max_msg_size, module->info->tx_attr->inject_size,
                  module->info->tx_attr->iov_limit, module->info->tx_attr->size,
                  module->info->rx_attr->size,
                  module->ofi->mr_local ? ": buffers registered, no zero copy" : "");
    if (OPAL_SUCCESS != ofi_open(module, usnic_module_rd_num(module, module->is_udp))) {
        ofi_release(module);
        free(module);
        return NULL;
    }
    return module;
}

static int ofi_discover(const char *prov, const struct usnic_filters *flt, int max)
{
    struct fi_info *infos, *fi;
    char **seen = NULL;
    int found = 0;

    if (!usnic_ofi_dl_load()) {
        USNIC_VERBOSE(10, "provider %s: libfabric not available", prov);
        return 0;
    }
    infos = query_provider(prov);
    if (NULL == infos) {
        USNIC_VERBOSE(10, "provider %s: no devices", prov);
        return 0;
    }
    for (fi = infos; NULL != fi && (0 == max || found < max); fi = fi->next) {
        struct usnic_vf_facts vf;
        usnic_module_t *module;
        uint32_t addr;
        bool dup = false;

        if (NULL == fi->domain_attr || NULL == fi->domain_attr->name) {
            continue;
        }
        /* one module per device: the provider lists a device once per address */
        for (int i = 0; NULL != seen && NULL != seen[i]; i++) {
            dup = dup || (0 == strcmp(seen[i], fi->domain_attr->name));
        }
        if (dup) {
            continue;
        }
        if (0 != (fi->mode & ~(uint64_t) OFI_MODES) ||
            0 != (fi->domain_attr->mr_mode & ~OFI_MR_MODES)) {
            USNIC_VERBOSE(20, "device %s: skipped, mode 0x%llx / mr_mode 0x%x not supported",
                          fi->domain_attr->name, (unsigned long long) fi->mode,
                          (unsigned) fi->domain_attr->mr_mode);
            continue;
        }
        memset(&vf, 0, sizeof(vf));
        if (0 == strcmp(prov, "usnic")) {
            usnic_ofi_vf_query(fi, &vf);
        }
        if (vf.known) {
            /* a VF: its facts come from the extension, not from a Linux
             * interface of the device's name */
            const struct sockaddr_in *sin = fi->src_addr;
            if (NULL == sin || FI_SOCKADDR_IN != fi->addr_format || AF_INET != sin->sin_family ||
                0 == (fi->caps & FI_MSG) || FI_EP_DGRAM != fi->ep_attr->type) {
                continue;
            }
            addr = sin->sin_addr.s_addr;
            if (!usnic_ofi_vf_usable(fi->domain_attr->name, &vf, addr, flt)) {
                continue;
            }
            if (!usnic_ofi_vf_resources_ok(fi->domain_attr->name, fi->fabric_attr->name, &vf)) {
                mca_btl_usnic_component.param_error = true; /* reported */
                continue;
            }
        } else if (!usable(fi, flt, &addr)) {
            continue;
        }
        opal_argv_append_nosize(&seen, fi->domain_attr->name);
        module = ofi_module_create(fi, vf.known ? &vf : NULL);
        if (NULL != module && NULL != usnic_module_commit(module)) {
            found++;
        }
    }
    opal_argv_free(seen);
    fi_freeinfo(infos);
    return found;
}

const usnic_backend_t usnic_backend_ofi = {
    .name = "libfabric",
    .discover = ofi_discover,
    .open = ofi_open,
    .release = ofi_release,
    .post_recvs = ofi_post_recvs,
    .poll = ofi_poll,
    .send = ofi_send,
    .train_add = NULL,
    .train_flush = NULL,
    .peer_add = ofi_peer_add,
    .peer_del = NULL,
    .self_test = ofi_self_test,
    .seg_mpool = ofi_seg_mpool,
    .seg_desc = ofi_seg_desc,
};
