/*
 * The libfabric backend (btl_usnic_chan.h): FI_EP_DGRAM endpoints of a
 * provider, usnic on Cisco VIC hardware, udp (plain sockets, one system
 * call per datagram) elsewhere.  Discovery asks the provider for its
 * devices; a module's channels are two endpoints sharing one completion
 * queue each, receive buffers are posted with fi_recv, and sends complete
 * through the queue (or at once with fi_inject).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "opal/util/argv.h"

#include "btl_usnic.h"
#include "btl_usnic_chan.h"
#include "btl_usnic_endpoint.h"
#include "btl_usnic_frag.h"
#include "btl_usnic_util.h"

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
    hints->mode = FI_CONTEXT | FI_MSG_PREFIX;
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
    ssize_t rc = fi_recv(chan->ep, seg->super.ptr, chan->prefix + chan->mtu, NULL, FI_ADDR_UNSPEC,
                         &seg->fictx);
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
    if (module->is_udp) {
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
    for (int c = 0; c < USNIC_NUM_CHANNELS; c++) {
        channel_close(&module->chan[c]);
    }
    if (NULL != module->av) {
        fi_close(&module->av->fid);
    }
    if (NULL != module->domain) {
        fi_close(&module->domain->fid);
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
    rc = fi_send(chan->ep, seg->buf - chan->prefix, chan->prefix + size, NULL, self, &seg->fictx);
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

static int ofi_poll(usnic_module_t *module, usnic_channel_t *chan)
{
    struct fi_cq_msg_entry ent[16];
    fi_addr_t src[16];
    ssize_t n;
    int count = 0;

    if (USNIC_SRC_FI == module->src_check) {
        n = fi_cq_readfrom(chan->cq, ent, 16, src);
    } else {
        n = fi_cq_read(chan->cq, ent, 16);
    }
    if (n > 0) {
        for (ssize_t i = 0; i < n; i++) {
            usnic_seg_t *seg =
                (usnic_seg_t *) ((char *) ent[i].op_context - offsetof(usnic_seg_t, fictx));
            if (USNIC_SEG_RECV == seg->kind) {
                size_t len = ent[i].len >= chan->prefix ? ent[i].len - chan->prefix : 0;
                if (USNIC_SRC_FI == module->src_check) {
                    module->rx_from.fi = src[i];
                } else if (USNIC_SRC_PREFIX == module->src_check) {
                    source_from_prefix(module, chan, seg->buf);
                }
                usnic_rx_datagram(module, chan, seg->buf, len);
                post_recv(module, chan, seg);
            } else {
                chan->tx_credits++;
                usnic_seg_put(seg);
            }
        }
        count = (int) n;
    } else if (-FI_EAVAIL == n) {
        struct fi_cq_err_entry err = {0};
        if (fi_cq_readerr(chan->cq, &err, 0) > 0 && NULL != err.op_context) {
            usnic_seg_t *seg =
                (usnic_seg_t *) ((char *) err.op_context - offsetof(usnic_seg_t, fictx));
            USNIC_VERBOSE(20, "%s: completion error: %s", module->ifname, fi_strerror(err.err));
            if (USNIC_SEG_RECV == seg->kind) {
                /* e.g. a datagram longer than the buffer: an arrival that failed */
                module->stats.rx_pkts++;
                module->stats.drops[USNIC_DROP_RX_ERROR]++;
                module->stats.bad_pkts++;
                post_recv(module, chan, seg);
            } else {
                module->stats.tx_errors++;
                chan->tx_credits++;
                usnic_seg_put(seg);
            }
        }
        count = 1;
    }
    return count;
}

/* Hand one sealed datagram to the provider.  OPAL_ERR_RESOURCE_BUSY: try later. */
static int ofi_send(usnic_module_t *module, usnic_channel_t *chan, usnic_seg_t *seg,
                    const mca_btl_base_endpoint_t *ep)
{
    fi_addr_t dest = ep->addr[chan->id];
    struct iovec iov[2];
    size_t n = 1;
    ssize_t rc;

    iov[0].iov_base = seg->buf - chan->prefix;
    iov[0].iov_len = chan->prefix + seg->hdr_len;
    if (0 == seg->zc_len && iov[0].iov_len <= chan->inject_size) {
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
        iov[1].iov_base = (void *) seg->zc_ptr;
        iov[1].iov_len = seg->zc_len;
        n = 2;
    }
    rc = fi_sendv(chan->ep, iov, NULL, n, dest, &seg->fictx);
    if (OPAL_UNLIKELY(0 != rc)) {
        if (-FI_EAGAIN == rc) {
            return OPAL_ERR_RESOURCE_BUSY;
        }
        USNIC_VERBOSE(5, "%s: fi_sendv: %s", module->ifname, fi_strerror((int) -rc));
        return OPAL_ERROR;
    }
    chan->tx_credits--;
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

/* A module for one device of the provider, its channels open. */
static usnic_module_t *ofi_module_create(struct fi_info *fi)
{
    usnic_module_t *module;
    uint32_t data_mtu;

    module = usnic_module_new(fi->domain_attr->name, (const struct sockaddr_in *) fi->src_addr,
                              fi->fabric_attr->prov_name, &usnic_backend_ofi);
    if (NULL == module) {
        return NULL;
    }
    module->info = fi_dupinfo(fi);
    if (NULL == module->info) {
        free(module);
        return NULL;
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
    data_mtu = choose_datagram_size(module, (uint32_t) fi->ep_attr->max_msg_size, module->if_mtu);
    if (data_mtu < USNIC_HDR_LEN_MAX + 64) {
        USNIC_VERBOSE(20, "%s: skipped, datagrams of %u bytes are too small", module->ifname,
                      data_mtu);
        fi_freeinfo(module->info);
        free(module);
        return NULL;
    }
    usnic_module_set_sizes(module, data_mtu);
    module->zero_copy = module->info->tx_attr->iov_limit >= 2;
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

    infos = query_provider(prov);
    if (NULL == infos) {
        USNIC_VERBOSE(10, "provider %s: no devices", prov);
        return 0;
    }
    for (fi = infos; NULL != fi && (0 == max || found < max); fi = fi->next) {
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
        if (dup || !usable(fi, flt, &addr)) {
            continue;
        }
        opal_argv_append_nosize(&seen, fi->domain_attr->name);
        module = ofi_module_create(fi);
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
    .self_test = ofi_self_test,
};
