/*
 * The usnic component: open/close, device discovery (providers in the
 * order of btl_usnic_providers; the first that yields a usable device wins),
 * module creation, and the progress engine.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "opal/mca/pmix/pmix.h"
#include "opal/runtime/opal_progress.h"
#include "opal/util/argv.h"
#include "opal/util/show_help.h"

#include "btl_usnic.h"
#include "btl_usnic_endpoint.h"
#include "btl_usnic_frag.h"
#include "btl_usnic_proc.h"
#include "btl_usnic_util.h"

static int usnic_component_register(void);
static int usnic_component_open(void);
static int usnic_component_close(void);
static mca_btl_base_module_t **usnic_component_init(int *num_btls, bool enable_progress_threads,
                                                    bool enable_mpi_threads);

usnic_component_t mca_btl_usnic_component = {
    .super =
        {
            .btl_version =
                {
                    MCA_BTL_DEFAULT_VERSION("usnic"),
                    .mca_open_component = usnic_component_open,
                    .mca_close_component = usnic_component_close,
                    .mca_register_component_params = usnic_component_register,
                },
            .btl_data =
                {
                    .param_field = MCA_BASE_METADATA_PARAM_CHECKPOINT,
                },
            .btl_init = usnic_component_init,
            .btl_progress = usnic_component_progress,
        },
};

static int usnic_component_register(void)
{
    return usnic_register_params();
}

static int usnic_component_open(void)
{
    usnic_component_t *c = &mca_btl_usnic_component;

#ifdef USNIC_HELP_DIR
    opal_show_help_add_dir(USNIC_HELP_DIR);
#endif
    c->num_modules = 0;
    c->modules = NULL;
    c->chosen_provider = NULL;
    c->lookups = NULL;
    c->param_error = false;
    OBJ_CONSTRUCT(&c->lock, opal_recursive_mutex_t);
    usnic_reg_table_init(&c->regs);
    return OPAL_SUCCESS;
}

static int usnic_component_close(void)
{
    usnic_component_t *c = &mca_btl_usnic_component;

    free(c->modules);
    c->modules = NULL;
    c->num_modules = 0;
    free(c->chosen_provider);
    c->chosen_provider = NULL;
    usnic_reg_table_fini(&c->regs);
    usnic_lookup_fini();
    OBJ_DESTRUCT(&c->lock);
    return OPAL_SUCCESS;
}

/* ---------------------------------------------------------------------- */
/* discovery */

struct usnic_filters {
    struct usnic_if_filter include[32];
    int n_include;
    struct usnic_if_filter exclude[32];
    int n_exclude;
};

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
    char abuf[INET_ADDRSTRLEN] = "?";
    bool up = false;
    uint32_t plen, mtu, speed;

    if (NULL == sin || FI_SOCKADDR_IN != fi->addr_format || AF_INET != sin->sin_family) {
        USNIC_VERBOSE(20, "device %s: skipped, no IPv4 address", dev);
        return false;
    }
    inet_ntop(AF_INET, &sin->sin_addr, abuf, sizeof(abuf));
    if (0 == (fi->caps & FI_MSG) || FI_EP_DGRAM != fi->ep_attr->type) {
        USNIC_VERBOSE(20, "device %s (%s): skipped, no FI_EP_DGRAM with FI_MSG", dev, abuf);
        return false;
    }
    if (flt->n_include > 0) {
        if (!usnic_if_filter_match(flt->include, flt->n_include, dev, sin->sin_addr.s_addr)) {
            USNIC_VERBOSE(20, "device %s (%s): skipped, not in btl_usnic_if_include", dev, abuf);
            return false;
        }
    } else {
        if (usnic_if_filter_match(flt->exclude, flt->n_exclude, dev, sin->sin_addr.s_addr)) {
            USNIC_VERBOSE(20, "device %s (%s): skipped, in btl_usnic_if_exclude", dev, abuf);
            return false;
        }
        if ((ntohl(sin->sin_addr.s_addr) >> 24) == 127) {
            USNIC_VERBOSE(20,
                          "device %s (%s): skipped, loopback is used only when named in "
                          "btl_usnic_if_include",
                          dev, abuf);
            return false;
        }
    }
    if (0 != usnic_if_facts(dev, sin->sin_addr.s_addr, &up, &plen, &mtu, &speed) || !up) {
        USNIC_VERBOSE(20, "device %s (%s): skipped, interface is not up", dev, abuf);
        return false;
    }
    *addr = sin->sin_addr.s_addr;
    return true;
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

static void module_release_resources(usnic_module_t *module)
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
 * on loopback); a self-test at startup proves it (datagram_self_test).
 */
static uint32_t choose_datagram_size(usnic_module_t *module, uint32_t advertised, uint32_t if_mtu)
{
    const usnic_params_t *p = &mca_btl_usnic_component.params;
    uint32_t size = advertised;

    module->advertised_mtu = advertised;
    if (module->is_udp && p->udp_datagram_size >= 0 && if_mtu > 28) {
        size = if_mtu - 28;
        if (size > 65507) {
            size = 65507; /* the largest UDP payload over IPv4 */
        }
        if (p->udp_datagram_size > 0 && size > (uint32_t) p->udp_datagram_size) {
            size = (uint32_t) p->udp_datagram_size;
        }
        if (size < advertised) {
            size = advertised;
        }
    } else if (if_mtu > 28 && size > if_mtu - 28) {
        size = if_mtu - 28;
    }
    return size;
}

/* Sizes that follow from the data channel MTU and the PML limits. */
static void module_set_sizes(usnic_module_t *module, uint32_t data_mtu)
{
    const usnic_params_t *p = &mca_btl_usnic_component.params;
    mca_btl_base_module_t *b = &module->super;
    uint32_t prio_mtu = (uint32_t) p->priority_limit + (uint32_t) USNIC_HDR_LEN_FRAG;
    size_t m;

    if (prio_mtu > data_mtu) {
        prio_mtu = data_mtu;
    }
    module->chan[USNIC_CHAN_DATA].mtu = data_mtu;
    module->chan[USNIC_CHAN_PRIO].mtu = prio_mtu;

    m = b->btl_max_send_size;
    if (b->btl_eager_limit > m) {
        m = b->btl_eager_limit;
    }
    if (b->btl_rndv_eager_limit > m) {
        m = b->btl_rndv_eager_limit;
    }
    module->max_msg_len = m + USNIC_PML_HDR_MAX;
}

/* Receive buffers to post on the data channel (btl_usnic_rd_num; 0 = auto).
 * Over the udp provider, posted buffers only receive what the kernel socket
 * buffer already holds, so a few suffice; a set that fits in the cache
 * saves the kernel's copy and ours a trip to memory.  A NIC provider drops
 * whatever finds no buffer posted, so it gets many. */
static int usnic_data_rd_num(int param, bool is_udp, uint32_t data_mtu)
{
    uint32_t n;

    if (param > 0) {
        return param;
    }
    if (!is_udp) {
        return 512;
    }
    n = USNIC_UDP_RX_HOT_BYTES / data_mtu;
    return n < 8 ? 8 : n > 512 ? 512 : (int) n;
}

static usnic_module_t *module_create(struct fi_info *fi, uint32_t addr, int index)
{
    const usnic_params_t *p = &mca_btl_usnic_component.params;
    usnic_module_t *module;
    struct fi_av_attr av_attr = {0};
    bool up;
    uint32_t if_mtu = 0;
    uint32_t data_mtu;
    int rd_num;
    int rc;

    module = calloc(1, sizeof(*module));
    if (NULL == module) {
        return NULL;
    }
    *module = usnic_module_template;
    module->index = index;
    module->module_id = ((uint32_t) OPAL_PROC_MY_NAME.vpid << 8) | (uint32_t) index;
    snprintf(module->ifname, sizeof(module->ifname), "%s", fi->domain_attr->name);
    snprintf(module->prov_name, sizeof(module->prov_name), "%s", fi->fabric_attr->prov_name);
    module->if_addr = *(const struct sockaddr_in *) fi->src_addr;
    usnic_if_facts(module->ifname, addr, &up, &module->if_prefixlen, &if_mtu, &module->link_mbps);
    if (0 == module->link_mbps || module->link_mbps > 400000) {
        module->link_mbps = 0;
    } else {
        module->super.btl_bandwidth = module->link_mbps;
    }
    /* our identity and MAC secret: from the kernel's CSPRNG, never derived
     * from anything an outsider can know (job id, pid, host, time) */
    do {
        if (0 != usnic_random_bytes(&module->key, sizeof(module->key)) ||
            0 != usnic_random_bytes(module->secret, sizeof(module->secret))) {
            opal_show_help("help-mpi-btl-usnic.txt", "no randomness", true,
                           opal_process_info.nodename, strerror(errno));
            free(module);
            return NULL;
        }
    } while (0 == module->key);
    usnic_sip_key_load(&module->mac_key, module->secret);

    module->info = fi_dupinfo(fi);
    if (NULL == module->info) {
        goto err_free;
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
    module->stream_copy_min = (uint64_t) p->stream_copy_min;
    data_mtu = choose_datagram_size(module, (uint32_t) fi->ep_attr->max_msg_size, if_mtu);
    if (data_mtu < USNIC_HDR_LEN_MAX + 64) {
        USNIC_VERBOSE(20, "%s: skipped, datagrams of %u bytes are too small", module->ifname,
                      data_mtu);
        goto err_free;
    }
    module_set_sizes(module, data_mtu);

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
        goto err_release;
    }
    module->zero_copy = module->info->tx_attr->iov_limit >= 2;
    /* memory bounds: about 16 MiB of receive buffers and 64 MiB of send
     * segments per module, whatever the datagram size */
    rd_num = usnic_data_rd_num(p->rd_num, module->is_udp, data_mtu);
    if ((uint64_t) rd_num * data_mtu > USNIC_RX_BYTES_MAX) {
        rd_num = (int) (USNIC_RX_BYTES_MAX / data_mtu);
        if (rd_num < 64) {
            rd_num = 64;
        }
    }
    if (OPAL_SUCCESS != usnic_check_rx_limits(module->prov_name, module->ifname,
                                              module->info->rx_attr->size, rd_num)) {
        mca_btl_usnic_component.param_error = true; /* reported: not a missing device */
        goto err_release;
    }
    module->seg_max = p->seg_num;
    if ((uint64_t) module->seg_max * data_mtu > USNIC_TX_BYTES_MAX) {
        module->seg_max = (int) (USNIC_TX_BYTES_MAX / data_mtu);
        if (module->seg_max < 256) {
            module->seg_max = 256;
        }
    }
    if (OPAL_SUCCESS != channel_open(module, &module->chan[USNIC_CHAN_PRIO], USNIC_CHAN_PRIO,
                                     module->chan[USNIC_CHAN_PRIO].mtu, p->prio_sd_num,
                                     p->prio_rd_num) ||
        OPAL_SUCCESS != channel_open(module, &module->chan[USNIC_CHAN_DATA], USNIC_CHAN_DATA,
                                     module->chan[USNIC_CHAN_DATA].mtu, p->sd_num, rd_num)) {
        goto err_release;
    }
    return module;

err_release:
    module_release_resources(module);
err_free:
    if (NULL != module->info) {
        fi_freeinfo(module->info);
    }
    free(module);
    return NULL;
}

#define USNIC_SELF_TEST_TRIES 3

/*
 * Send one datagram of `size` bytes from the data channel to itself and wait
 * (up to 200 ms) for it to arrive whole.  Runs before any peer exists, so
 * every completion seen here is the test's own.
 */
static bool datagram_self_test(usnic_module_t *module, uint32_t size)
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
                    usnic_repost_recv(module, chan, s);
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
        usnic_repost_recv(module, chan, s);
    }
    usnic_seg_put(seg);
    fi_av_remove(module->av, &self, 1, 0);
    return arrived;
}

/* Free lists, tables, timers and posted receives of a new module. */
static int module_init_state(usnic_module_t *module)
{
    const usnic_params_t *p = &mca_btl_usnic_component.params;
    int rc;

    OBJ_CONSTRUCT(&module->senders, opal_hash_table_t);
    opal_hash_table_init(&module->senders, 128);
    OBJ_CONSTRUCT(&module->endpoints, opal_list_t);
    OBJ_CONSTRUCT(&module->sendq_eps, opal_list_t);
    OBJ_CONSTRUCT(&module->ack_eps, opal_list_t);
    OBJ_CONSTRUCT(&module->resendq, opal_list_t);
    OBJ_CONSTRUCT(&module->done_frags, opal_list_t);
    OBJ_CONSTRUCT(&module->timer_eps, opal_list_t);

    rc = usnic_frag_lists_init(module);
    if (OPAL_SUCCESS != rc) {
        return rc;
    }
    module->next_timer = 0;
    module->rel_timing.rto_init = (uint64_t) p->retrans_timeout;
    module->rel_timing.rto_min = (uint64_t) p->retrans_timeout_min;
    module->rel_timing.rto_max = (uint64_t) p->retrans_timeout_max;
    module->rel_timing.ack_delay = (uint64_t) p->ack_delay;
    module->rel_timing.tlp = (0 != p->tlp);
    module->fault.drop_rate = p->debug_drop_rate;
    module->fault.dup_rate = p->debug_dup_rate;
    module->fault.reorder_rate = p->debug_reorder_rate;
    module->fault.corrupt_rate = p->debug_corrupt_rate;
    module->fault.rng =
        usnic_hash64(&module->module_id, sizeof(module->module_id), (uint64_t) p->debug_seed);
    if (module->fault.reorder_rate > 0.0) {
        module->fault.held_buf = malloc(module->chan[USNIC_CHAN_DATA].mtu);
        if (NULL == module->fault.held_buf) {
            return OPAL_ERR_OUT_OF_RESOURCE;
        }
    }
    for (int c = 0; c < USNIC_NUM_CHANNELS; c++) {
        rc = usnic_post_recvs(module, &module->chan[c]);
        if (OPAL_SUCCESS != rc) {
            return rc;
        }
        USNIC_VERBOSE(20, "%s: channel %d: %d receive buffers of %u bytes posted", module->ifname,
                      c, module->chan[c].rx_depth, (unsigned) module->chan[c].mtu);
    }
    if (module->chan[USNIC_CHAN_DATA].mtu > module->advertised_mtu) {
        uint32_t size = module->chan[USNIC_CHAN_DATA].mtu;
        int tries = 0;
        bool ok = false;
        /* a datagram can be lost by chance: only several losses in a row count */
        while (!ok && tries++ < USNIC_SELF_TEST_TRIES) {
            ok = datagram_self_test(module, size);
        }
        if (ok) {
            USNIC_VERBOSE(10, "%s: self-test datagram of %u bytes arrived: using %u-byte datagrams",
                          module->ifname, size, size);
        } else {
            char buf[16];
            snprintf(buf, sizeof(buf), "%u", size);
            opal_show_help("help-mpi-btl-usnic.txt", "datagram self-test failed", true,
                           opal_process_info.nodename, buf, module->ifname, USNIC_SELF_TEST_TRIES,
                           module->advertised_mtu);
            module_set_sizes(module, module->advertised_mtu);
        }
    }
    return OPAL_SUCCESS;
}

static int discover(const char *prov, const struct usnic_filters *flt, int max)
{
    usnic_component_t *c = &mca_btl_usnic_component;
    struct fi_info *infos = query_provider(prov), *fi;
    char **seen = NULL;
    int found = 0;

    if (NULL == infos) {
        USNIC_VERBOSE(10, "provider %s: no devices", prov);
        return 0;
    }
    for (fi = infos; NULL != fi && (0 == max || found < max); fi = fi->next) {
        usnic_module_t *module;
        uint32_t addr;

        if (NULL == fi->domain_attr || NULL == fi->domain_attr->name) {
            continue;
        }
        /* one module per device: the provider lists a device once per address */
        if (NULL != seen && opal_argv_count(seen) > 0) {
            bool dup = false;
            for (int i = 0; NULL != seen[i]; i++) {
                dup = dup || (0 == strcmp(seen[i], fi->domain_attr->name));
            }
            if (dup) {
                continue;
            }
        }
        if (!usable(fi, flt, &addr)) {
            continue;
        }
        opal_argv_append_nosize(&seen, fi->domain_attr->name);
        module = module_create(fi, addr, c->num_modules);
        if (NULL == module) {
            continue;
        }
        if (OPAL_SUCCESS != module_init_state(module)) {
            USNIC_VERBOSE(5, "%s: could not allocate module state", module->ifname);
            module_release_resources(module);
            free(module);
            continue;
        }
        c->modules[c->num_modules++] = module;
        found++;
        {
            char abuf[INET_ADDRSTRLEN];
            inet_ntop(AF_INET, &module->if_addr.sin_addr, abuf, sizeof(abuf));
            USNIC_VERBOSE(5,
                          "using provider %s device %s (%s/%u): datagram %u bytes (priority %u), "
                          "ports %u/%u, link %u Mb/s",
                          prov, module->ifname, abuf, module->if_prefixlen,
                          module->chan[USNIC_CHAN_DATA].mtu, module->chan[USNIC_CHAN_PRIO].mtu,
                          ntohs(module->chan[USNIC_CHAN_PRIO].addr.sin_port),
                          ntohs(module->chan[USNIC_CHAN_DATA].addr.sin_port), module->link_mbps);
        }
    }
    opal_argv_free(seen);
    fi_freeinfo(infos);
    return found;
}

static mca_btl_base_module_t **usnic_component_init(int *num_btls, bool enable_progress_threads,
                                                    bool enable_mpi_threads)
{
    usnic_component_t *c = &mca_btl_usnic_component;
    usnic_params_t *p = &c->params;
    struct usnic_filters flt;
    const char *bad = NULL;
    char **provs;
    mca_btl_base_module_t **btls;
    (void) enable_progress_threads;

    *num_btls = 0;
    if (OPAL_SUCCESS != usnic_check_params()) {
        return NULL;
    }
    c->use_threads = enable_mpi_threads;
    {
        /* the size of our job bounds which senders may be looked up lazily */
        opal_process_name_t wildcard = {OPAL_PROC_MY_NAME.jobid, OPAL_VPID_WILDCARD};
        uint32_t size = 0, *sizep = &size;
        int rc;
        OPAL_MODEX_RECV_VALUE(rc, OPAL_PMIX_JOB_SIZE, &wildcard, &sizep, OPAL_UINT32);
        c->job_size = (OPAL_SUCCESS == rc) ? size : 0;
    }
    {
        uint8_t k[USNIC_SIP_KEY_BYTES];
        if (0 != usnic_random_bytes(k, sizeof(k))) {
            opal_show_help("help-mpi-btl-usnic.txt", "no randomness", true,
                           opal_process_info.nodename, strerror(errno));
            return NULL;
        }
        usnic_sip_key_load(&c->put_key, k);
        usnic_reg_table_set_key(&c->regs, &c->put_key);
    }

    memset(&flt, 0, sizeof(flt));
    flt.n_include = usnic_if_filter_parse(p->if_include, flt.include, 32, &bad);
    flt.n_exclude = usnic_if_filter_parse(p->if_exclude, flt.exclude, 32, &bad);

    c->modules = calloc(USNIC_MAX_MODULES, sizeof(*c->modules));
    if (NULL == c->modules) {
        return NULL;
    }
    provs = opal_argv_split(p->providers, ',');
    for (int i = 0; NULL != provs && NULL != provs[i]; i++) {
        int max = p->max_btls > 0 ? p->max_btls : USNIC_MAX_MODULES;
        if (discover(provs[i], &flt, max) > 0) {
            c->chosen_provider = strdup(provs[i]);
            break;
        }
        USNIC_VERBOSE(5, "provider %s: no usable device, trying the next provider", provs[i]);
    }
    opal_argv_free(provs);

    if (0 == c->num_modules) {
        USNIC_VERBOSE(5, "no usable device with any provider in btl_usnic_providers (%s)%s",
                      p->providers,
                      ('\0' == p->if_include[0]) ? "; loopback needs btl_usnic_if_include" : "");
        if ('\0' != p->if_include[0] && !c->param_error) {
            opal_show_help("help-mpi-btl-usnic.txt", "no devices", true, opal_process_info.nodename,
                           p->providers, p->if_include);
        }
        return NULL;
    }
    if (OPAL_SUCCESS != usnic_modex_publish()) {
        USNIC_VERBOSE(5, "modex publish failed");
        return NULL;
    }
    btls = malloc((size_t) c->num_modules * sizeof(*btls));
    if (NULL == btls) {
        return NULL;
    }
    for (int i = 0; i < c->num_modules; i++) {
        btls[i] = &c->modules[i]->super;
    }
    *num_btls = c->num_modules;
    return btls;
}

/* Called from module finalize: undo module_create and module_init_state. */
void usnic_module_teardown(usnic_module_t *module)
{
    opal_list_item_t *item;

    while (NULL != (item = opal_list_remove_first(&module->endpoints))) {
        opal_list_prepend(&module->endpoints, item);
        usnic_endpoint_destroy((mca_btl_base_endpoint_t *) item);
    }
    /* segments in these lists belong to the free lists destroyed below */
    while (NULL != opal_list_remove_first(&module->resendq)) {
    }
    while (NULL != opal_list_remove_first(&module->done_frags)) {
    }
    while (NULL != opal_list_remove_first(&module->sendq_eps)) {
    }
    while (NULL != opal_list_remove_first(&module->ack_eps)) {
    }
    module_release_resources(module);
    usnic_frag_lists_fini(module);
    free(module->fault.held_buf);
    usnic_parked_fini(module);
    OBJ_DESTRUCT(&module->done_frags);
    OBJ_DESTRUCT(&module->timer_eps);
    OBJ_DESTRUCT(&module->resendq);
    OBJ_DESTRUCT(&module->ack_eps);
    OBJ_DESTRUCT(&module->sendq_eps);
    OBJ_DESTRUCT(&module->endpoints);
    OBJ_DESTRUCT(&module->senders);
}

/* ---------------------------------------------------------------------- */
/* progress */

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

static int poll_channel(usnic_module_t *module, usnic_channel_t *chan)
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
                usnic_handle_recv(module, chan, seg, len);
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
                usnic_repost_recv(module, chan, seg);
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

static int module_progress(usnic_module_t *module)
{
    uint64_t now = usnic_now_us();
    int count;

    module->now_us = now;
    module->in_progress = true;
    count = poll_channel(module, &module->chan[USNIC_CHAN_PRIO]);
    /* Polling a udp-provider channel costs a system call even when nothing
     * arrived.  While the data channel has been idle for a while, poll it
     * on every fourth call only: small messages and ACKs use the priority
     * channel, and the first data arrival brings full-rate polling back.
     * (Measured and rejected: polling an idle priority channel less while
     * data streams cost 8% of the bandwidth for 512 KiB-1 MiB messages at
     * 1472-byte datagrams, probably by delaying ob1's control messages;
     * reading a busy data channel several times per call cost 10%.) */
    if (module->data_idle < USNIC_DATA_IDLE_POLLS || 0 == (module->data_idle & 3)) {
        int n = poll_channel(module, &module->chan[USNIC_CHAN_DATA]);
        module->data_idle = (0 == n) ? module->data_idle + 1 : 0;
        count += n;
    } else {
        module->data_idle++;
    }
    usnic_fault_flush(module, 0 == count);
    if (OPAL_UNLIKELY(usnic_lookup_ready())) {
        usnic_lookup_progress(); /* records of lazily added peers */
    }
    count += usnic_progress_done_frags(module);
    usnic_progress_resends(module);
    usnic_progress_sends(module);
    usnic_progress_acks(module, now);
    if (0 != module->next_timer && now >= module->next_timer) {
        usnic_progress_timers(module, now);
        usnic_progress_resends(module); /* what the timers decided */
    }
    module->in_progress = false;
    return count;
}

int usnic_component_progress(void)
{
    usnic_component_t *c = &mca_btl_usnic_component;
    int count = 0;

    usnic_lock();
    for (int i = 0; i < c->num_modules; i++) {
        if (!c->modules[i]->finalized) {
            count += module_progress(c->modules[i]);
        }
    }
    usnic_unlock();
    return count;
}
