/*
 * The usnic component: open/close, device discovery (providers in the
 * order of btl_usnic_providers; the first that yields a usable device wins),
 * module creation, and the progress engine.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "opal/mca/pmix/pmix.h"
#include "opal/runtime/opal_progress.h"
#include "opal/util/argv.h"
#include "opal/util/show_help.h"

#include "btl_usnic.h"
#include "btl_usnic_chan.h"
#include "btl_usnic_live.h"
#include "btl_usnic_path.h"
#include "btl_usnic_endpoint.h"
#include "btl_usnic_frag.h"
#include "btl_usnic_proc.h"
#include "btl_usnic_route.h"
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
    int rc = usnic_register_params();

    if (OPAL_SUCCESS == rc) {
        usnic_stats_register_pvars(&mca_btl_usnic_component.super.btl_version);
    }
    return rc;
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

    usnic_path_fini();
    usnic_live_stop();
    free(c->modules);
    c->modules = NULL;
    c->num_modules = 0;
    free(c->chosen_provider);
    c->chosen_provider = NULL;
    usnic_reg_table_fini(&c->regs);
    usnic_lookup_fini();
    usnic_route_fini();
    OBJ_DESTRUCT(&c->lock);
    return OPAL_SUCCESS;
}

/* ---------------------------------------------------------------------- */
/* discovery */

/* Is the device with this IPv4 address one we should use (filters, up)?
 * Says why not at verbose level. */
bool usnic_device_passes_filters(const char *dev, const char *alias, uint32_t addr,
                                 const struct usnic_filters *flt)
{
    char abuf[INET_ADDRSTRLEN] = "?", names[64];

    inet_ntop(AF_INET, &addr, abuf, sizeof(abuf));
    snprintf(names, sizeof(names), "%s%s%s", NULL != alias ? alias : "", NULL != alias ? ", " : "",
             abuf);
    /* a filter may name the device, its alias (a VF's Linux interface) or a network */
    if (flt->n_include > 0) {
        if (!usnic_if_filter_match(flt->include, flt->n_include, dev, addr) &&
            (NULL == alias || !usnic_if_filter_match(flt->include, flt->n_include, alias, addr))) {
            USNIC_VERBOSE(20, "device %s (%s): skipped, not in btl_usnic_if_include", dev, names);
            return false;
        }
        return true;
    }
    if (usnic_if_filter_match(flt->exclude, flt->n_exclude, dev, addr) ||
        (NULL != alias && usnic_if_filter_match(flt->exclude, flt->n_exclude, alias, addr))) {
        USNIC_VERBOSE(20, "device %s (%s): skipped, in btl_usnic_if_exclude", dev, names);
        return false;
    }
    if ((ntohl(addr) >> 24) == 127) {
        USNIC_VERBOSE(20,
                      "device %s (%s): skipped, loopback is used only when named in "
                      "btl_usnic_if_include",
                      dev, names);
        return false;
    }
    return true;
}

bool usnic_device_usable(const char *dev, uint32_t addr, const struct usnic_filters *flt)
{
    char abuf[INET_ADDRSTRLEN] = "?";
    bool up = false;
    uint32_t plen, mtu, speed;

    if (!usnic_device_passes_filters(dev, NULL, addr, flt)) {
        return false;
    }
    if (0 != usnic_if_facts(dev, addr, &up, &plen, &mtu, &speed) || !up) {
        inet_ntop(AF_INET, &addr, abuf, sizeof(abuf));
        USNIC_VERBOSE(20, "device %s (%s): skipped, interface is not up", dev, abuf);
        return false;
    }
    return true;
}

/* The largest datagram over plain UDP on an interface of this MTU: the
 * MTU minus IP and UDP headers, at most 65507, at most
 * btl_usnic_udp_datagram_size when that is positive. */
uint32_t usnic_udp_datagram_size(uint32_t if_mtu)
{
    const usnic_params_t *p = &mca_btl_usnic_component.params;
    uint32_t size = (if_mtu > 28) ? if_mtu - 28 : 0;

    if (size > 65507) {
        size = 65507; /* the largest UDP payload over IPv4 */
    }
    if (p->udp_datagram_size > 0 && size > (uint32_t) p->udp_datagram_size) {
        size = (uint32_t) p->udp_datagram_size;
    }
    return size;
}

/* Sizes that follow from the data channel MTU and the PML limits. */
void usnic_module_set_sizes(usnic_module_t *module, uint32_t data_mtu)
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
    for (int c = 0; c < USNIC_NUM_CHANNELS; c++) {
        if (module->chan[c].rx_buf < module->chan[c].mtu) {
            module->chan[c].rx_buf = module->chan[c].mtu;
        }
    }

    m = b->btl_max_send_size;
    if (b->btl_eager_limit > m) {
        m = b->btl_eager_limit;
    }
    if (b->btl_rndv_eager_limit > m) {
        m = b->btl_rndv_eager_limit;
    }
    module->max_msg_len = m + USNIC_PML_HDR_MAX;
    if (p->send_window > 0) {
        /* (at most USNIC_REL_SACK_REACH: btl_usnic_mca.c refuses more) */
        module->send_window = (uint32_t) p->send_window;
    } else {
        /* enough datagrams for what may be in flight, so small datagrams
         * (MTU 1500) fill the path as large ones do; but no more than a
         * SACK can describe (1024 segments beyond the edge).  Wider windows
         * (btl_usnic_max_inflight 4 MiB at MTU 1500 made 2048, half the
         * receive window) collapsed an incast of 8 senders on 2 CPUs
         * (namespace hosts, 4 MiB socket buffers) to 1-12 MB/s in 7 of 13
         * runs, senders living on tail probes for a minute, against
         * 250-360 MB/s in 9 of 9 at 1024 (docs/perf-incast.md, session 29). */
        uint64_t bytes = (p->max_inflight > 0) ? (uint64_t) p->max_inflight : 1024 * 1024;
        uint32_t w = 64;
        while ((uint64_t) w * data_mtu < bytes && w < (uint32_t) p->recv_window / 2 &&
               w < USNIC_REL_SACK_REACH) {
            w *= 2;
        }
        module->send_window = w;
    }
    if (0 == module->seg_max) {
        /* about 64 MiB of send segments per module, whatever their size */
        module->seg_max = p->seg_num;
        if ((uint64_t) module->seg_max * data_mtu > USNIC_TX_BYTES_MAX) {
            module->seg_max = (int) (USNIC_TX_BYTES_MAX / data_mtu);
            if (module->seg_max < 256) {
                module->seg_max = 256;
            }
        }
    }
}

/* Receive buffers to post on the data channel (btl_usnic_rd_num; 0 = auto).
 * Over sockets (few), posted buffers only receive what the kernel socket
 * buffer already holds, so a few suffice; a set that fits in the cache
 * saves the kernel's copy and ours a trip to memory.  A NIC provider drops
 * whatever finds no buffer posted, so it gets many.  At most about 16 MiB
 * of buffers. */
int usnic_module_rd_num(const usnic_module_t *module, bool few)
{
    const usnic_params_t *p = &mca_btl_usnic_component.params;
    uint32_t size = module->chan[USNIC_CHAN_DATA].rx_buf;
    uint32_t n;

    if (p->rd_num > 0) {
        n = (uint32_t) p->rd_num;
    } else if (!few) {
        n = 512;
    } else {
        n = USNIC_UDP_RX_HOT_BYTES / size;
        n = n < 8 ? 8 : n > 512 ? 512 : n;
    }
    if ((uint64_t) n * size > USNIC_RX_BYTES_MAX) {
        n = USNIC_RX_BYTES_MAX / size;
        if (n < 64) {
            n = 64;
        }
    }
    return (int) n;
}

/* A new module for a device: identity, addresses, no channels yet. */
usnic_module_t *usnic_module_new(const char *ifname, const struct sockaddr_in *addr,
                                 const char *prov_name, const usnic_backend_t *backend)
{
    const usnic_params_t *p = &mca_btl_usnic_component.params;
    usnic_module_t *module;
    bool up;
    int index = mca_btl_usnic_component.num_modules;

    if (index >= USNIC_MAX_MODULES) {
        return NULL;
    }
    module = calloc(1, sizeof(*module));
    if (NULL == module) {
        return NULL;
    }
    *module = usnic_module_template;
    module->backend = backend;
    module->index = index;
    module->module_id = ((uint32_t) OPAL_PROC_MY_NAME.vpid << 8) | (uint32_t) index;
    snprintf(module->ifname, sizeof(module->ifname), "%s", ifname);
    snprintf(module->prov_name, sizeof(module->prov_name), "%s", prov_name);
    module->if_addr = *addr;
    usnic_if_facts(module->ifname, addr->sin_addr.s_addr, &up, &module->if_prefixlen,
                   &module->if_mtu, &module->link_mbps);
    if (0 == module->link_mbps || module->link_mbps > 400000) {
        module->link_mbps = 0;
    } else {
        module->super.btl_bandwidth = module->link_mbps;
    }
    for (int c = 0; c < USNIC_NUM_CHANNELS; c++) {
        module->chan[c].id = (enum usnic_channel_id) c;
        module->chan[c].sock_fd = -1;
        module->chan[c].tx_fd = -1;
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
    module->stream_copy_min = (uint64_t) p->stream_copy_min;
    module->yield_blocked = (uint64_t) p->yield_blocked;
    module->rx_predict = (0 != p->rx_predict);
    module->early_copy_max = (uint64_t) p->early_copy_max;
    module->train_copy = (uint32_t) p->train_copy;
    module->put_copy_max = (uint64_t) p->put_copy_max;
    module->tx_coalesce = (uint64_t) p->tx_coalesce;
    module->mac_lanes = usnic_sip_lanes_select(0 != p->mac_lanes);
    USNIC_VERBOSE(20, "%s: header MACs of trains and coalesced receives: %s", ifname,
                  module->mac_lanes   ? "8 at a time (AVX-512 lanes)"
                  : 0 == p->mac_lanes ? "one by one (btl_usnic_mac_lanes 0)"
                                      : "one by one (no AVX-512 with VBMI2 on this CPU)");
    return module;
}

#define USNIC_SELF_TEST_TRIES 3

/*
 * A process that is neither root nor has CAP_NET_ADMIN gets socket buffers
 * of at most net.core.rmem_max (212992 bytes unless an administrator raised
 * it), whatever btl_usnic_udp_sockbuf asks.  Peers keep at most half of our
 * receive buffer in flight to us (btl_usnic_endpoint.c): below
 * btl_usnic_max_inflight that holds back every stream into this process
 * (1 MiB streams at MTU 1500 a third slower with a 208 KiB buffer, session
 * 32).  Said once per process, and only then: a cap above the in-flight
 * limit matters only to incasts (docs/perf-incast.md).
 */
static void sockbuf_check(const usnic_module_t *module)
{
    static bool said = false;
    const usnic_params_t *p = &mca_btl_usnic_component.params;
    int rcv = module->chan[USNIC_CHAN_DATA].rcvbuf;
    uint64_t granted = (uint64_t) (rcv > 0 ? rcv : 0) / 2; /* the kernel reports it doubled */
    uint64_t limit = (p->max_inflight > 0) ? (uint64_t) p->max_inflight : UINT64_MAX;
    char rmem[32] = "unknown", lim[48];
    FILE *f;

    if (said || !module->is_udp || p->udp_sockbuf <= 0 || 0 == granted ||
        granted >= (uint64_t) p->udp_sockbuf || granted >= limit) {
        return;
    }
    said = true;
    f = fopen("/proc/sys/net/core/rmem_max", "r");
    if (NULL != f) {
        if (NULL == fgets(rmem, sizeof(rmem), f)) {
            snprintf(rmem, sizeof(rmem), "unknown");
        }
        rmem[strcspn(rmem, "\n")] = '\0';
        fclose(f);
    }
    if (p->max_inflight > 0) {
        snprintf(lim, sizeof(lim), "%d bytes", p->max_inflight);
    } else {
        snprintf(lim, sizeof(lim), "0, none but this buffer");
    }
    opal_show_help("help-mpi-btl-usnic.txt", "socket buffer capped", true, p->udp_sockbuf,
                   opal_process_info.nodename, module->ifname, (int) granted, rmem, lim);
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
    usnic_allow_init(module, 0 != p->rx_share);
    sockbuf_check(module);
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
    if (usnic_fault_on_rx(&module->fault)) {
        module->fault.whole_buf = malloc(module->chan[USNIC_CHAN_DATA].mtu);
        if (NULL == module->fault.whole_buf) {
            return OPAL_ERR_OUT_OF_RESOURCE;
        }
    }
    for (int c = 0; c < USNIC_NUM_CHANNELS; c++) {
        rc = module->backend->post_recvs(module, &module->chan[c]);
        if (OPAL_SUCCESS != rc) {
            return rc;
        }
        USNIC_VERBOSE(20, "%s: channel %d: %d receive buffers of %u bytes posted", module->ifname,
                      c, module->chan[c].rx_depth, (unsigned) module->chan[c].rx_buf);
    }
    if (module->chan[USNIC_CHAN_DATA].mtu > module->advertised_mtu) {
        uint32_t size = module->chan[USNIC_CHAN_DATA].mtu;
        int tries = 0;
        bool ok = false;
        /* a datagram can be lost by chance: only several losses in a row count */
        while (!ok && tries++ < USNIC_SELF_TEST_TRIES) {
            ok = module->backend->self_test(module, size);
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
            usnic_module_set_sizes(module, module->advertised_mtu);
        }
    }
    return OPAL_SUCCESS;
}

usnic_module_t *usnic_module_commit(usnic_module_t *module)
{
    usnic_component_t *c = &mca_btl_usnic_component;
    char abuf[INET_ADDRSTRLEN];

    if (OPAL_SUCCESS != module_init_state(module)) {
        USNIC_VERBOSE(5, "%s: could not allocate module state", module->ifname);
        module->backend->release(module);
        free(module);
        return NULL;
    }
    c->modules[c->num_modules++] = module;
    inet_ntop(AF_INET, &module->if_addr.sin_addr, abuf, sizeof(abuf));
    USNIC_VERBOSE(5,
                  "using provider %s device %s (%s/%u): datagram %u bytes (priority %u), "
                  "ports %u/%u, link %u Mb/s, %s backend%s",
                  module->prov_name, module->ifname, abuf, module->if_prefixlen,
                  module->chan[USNIC_CHAN_DATA].mtu, module->chan[USNIC_CHAN_PRIO].mtu,
                  ntohs(module->chan[USNIC_CHAN_PRIO].addr.sin_port),
                  ntohs(module->chan[USNIC_CHAN_DATA].addr.sin_port), module->link_mbps,
                  module->backend->name,
                  module->chan[USNIC_CHAN_DATA].gso
                      ? (module->chan[USNIC_CHAN_DATA].gro ? " (UDP_SEGMENT trains, UDP_GRO)"
                                                           : " (UDP_SEGMENT trains)")
                      : (module->chan[USNIC_CHAN_DATA].gro ? " (UDP_GRO)" : ""));
    USNIC_VERBOSE(10, "%s: send window %u segments per peer (btl_usnic_send_window %d)",
                  module->ifname, module->send_window, mca_btl_usnic_component.params.send_window);
    if (0 != module->chan[USNIC_CHAN_DATA].tx_addr.sin_port) {
        USNIC_VERBOSE(5, "device %s sends from ports %u/%u (sockets connected to up to %d peers)",
                      module->ifname, ntohs(module->chan[USNIC_CHAN_PRIO].tx_addr.sin_port),
                      ntohs(module->chan[USNIC_CHAN_DATA].tx_addr.sin_port),
                      mca_btl_usnic_component.params.connect_peers);
    }
    return module;
}

/*
 * Does this host have a usNIC device?  The usnic provider serves Cisco VIC
 * interfaces through the usnic_verbs kernel module, which lists them under
 * /sys/class/infiniband as usnic_<n>.  Looking there costs a directory
 * read; asking libfabric first initialises every provider it has (0.4 s).
 */
static bool usnic_hw_present(void)
{
    DIR *d = opendir("/sys/class/infiniband");
    struct dirent *e;
    bool found = false;

    if (NULL == d) {
        return false;
    }
    while (!found && NULL != (e = readdir(d))) {
        found = (0 == strncmp(e->d_name, "usnic_", 6));
    }
    closedir(d);
    return found;
}

/* Try one entry of btl_usnic_providers: "kernel" is our own UDP backend,
 * anything else a libfabric provider.  Returns the modules it made. */
static int discover(const char *prov, const struct usnic_filters *flt, int max)
{
    if (0 == strcmp(prov, "kernel")) {
        return usnic_backend_kern.discover(prov, flt, max);
    }
    /* FI_PROVIDER_PATH may hold an external provider named usnic (the test
     * double of test/prov/): then libfabric is asked anyway */
    if (0 == strcmp(prov, "usnic") && !usnic_hw_present() && NULL == getenv("FI_PROVIDER_PATH")) {
        USNIC_VERBOSE(10, "provider usnic: no usNIC device in /sys/class/infiniband, not asked");
        return 0;
    }
    return usnic_backend_ofi.discover(prov, flt, max);
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
            USNIC_VERBOSE(5, "%s: the first of btl_usnic_providers (%s) with a usable device",
                          provs[i], p->providers);
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
    usnic_numa_apply();
    {
        unsigned cpus = usnic_host_cpus(), ranks = (unsigned) opal_process_info.num_local_peers + 1;
        const bool *mpi_yields = NULL;
        int idx = -1;
        c->yield_idle = (1 == p->yield_idle) || (-1 == p->yield_idle && ranks > cpus);
        /* Open MPI's own setting takes effect only at the end of MPI_Init:
         * where it yields, ours stays off from the start */
        if (OPAL_SUCCESS == mca_base_var_find_by_name("mpi_yield_when_idle", &idx) &&
            OPAL_SUCCESS == mca_base_var_get_value(idx, (void *) &mpi_yields, NULL, NULL) &&
            NULL != mpi_yields && *mpi_yields) {
            c->mpi_yields = true;
            c->yield_idle = false;
        }
        USNIC_VERBOSE(10,
                      "%u of the job's ranks on this host, %u CPUs: idle progress %s "
                      "(btl_usnic_yield_idle %d)",
                      ranks, cpus, c->yield_idle ? "yields the CPU" : "spins", p->yield_idle);
    }
    usnic_live_open();
    if (OPAL_SUCCESS != usnic_modex_publish()) {
        USNIC_VERBOSE(5, "modex publish failed");
        usnic_live_stop();
        return NULL;
    }
    (void) usnic_live_start();
    usnic_path_init();
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
    module->backend->release(module);
    usnic_frag_lists_fini(module);
    free(module->fault.held_buf);
    free(module->fault.whole_buf);
    usnic_parked_fini(module);
    OBJ_DESTRUCT(&module->done_frags);
    OBJ_DESTRUCT(&module->timer_eps);
    OBJ_DESTRUCT(&module->resendq);
    OBJ_DESTRUCT(&module->ack_eps);
    OBJ_DESTRUCT(&module->sendq_eps);
    OBJ_DESTRUCT(&module->endpoints);
    OBJ_DESTRUCT(&module->senders);
}

/*
 * Help messages about events while the job runs (a completion error, a
 * link that went down or a path MTU cut, a peer unreachable, no path) are
 * rendered here and written to this process's stderr, which the runtime
 * forwards as any output, instead of going through opal_show_help: Open
 * MPI 4.1.4's mpirun (with Debian's PMIx) relays an application process's
 * help message through a PMIx log handler that loses some when processes
 * send them at about the same time ("ORTE_ERROR_LOG: Data unpack would
 * read past end of buffer in file ../../../orte/util/show_help.c"), and
 * that has crashed mpirun itself (SIGSEGV in pmix_server_log_fn ->
 * orte_rml_oob_send_buffer_nb, seen in our CI when both ranks reported a
 * link down): a link that goes down must not end a job that can go on
 * without it.  The price: no aggregation across processes; each message
 * is still shown once per process and event.  Messages at start-up keep
 * opal_show_help (one per job, the job ends anyway).
 */
void usnic_show_help_running(const char *topic, ...)
{
    va_list ap;
    char *msg;

    va_start(ap, topic);
    msg = opal_show_help_vstring("help-mpi-btl-usnic.txt", topic, true, ap);
    va_end(ap);
    if (NULL != msg) {
        opal_output(0, "%s", msg);
        free(msg);
    }
}

/* ---------------------------------------------------------------------- */
/* progress */

#define USNIC_AWAY_US 250000u /* a gap between progress calls this long: we were away */

/*
 * Should this progress call give the CPU away when it is done (once, after
 * the BTL's lock is released)?  Yes if it found nothing to do and either
 * this host runs more of the job's ranks than it has CPUs
 * (btl_usnic_yield_idle), or sends have waited for a peer's window or
 * allowance (its ACKs) for btl_usnic_yield_blocked us.  Where ranks share
 * CPUs the peer that must drain our data, or another sender whose turn it
 * is, may be waiting for this one: 8 senders into one rank, 9 ranks on 2
 * CPUs (bench/incast.sh -H 3 -n 9, MTU 1500) moved 350-420 MB/s with
 * every blocked sender spinning, 5-6 times that with the CPU given away
 * (session 30).  On a CPU of its own sched_yield returns at once, and a
 * stream's ordinary waits for an ACK end well before the threshold.  Not
 * where Open MPI yields anyway (mpi_yield_when_idle: oversubscription it
 * knows of).
 */
static bool want_yield(usnic_module_t *module, uint64_t now, int count)
{
    const usnic_component_t *c = &mca_btl_usnic_component;

    if (OPAL_LIKELY(0 == module->tx_blocked_since) && OPAL_LIKELY(!c->yield_idle)) {
        return false;
    }
    if (0 != module->tx_blocked_since && opal_list_is_empty(&module->sendq_eps)) {
        module->tx_blocked_since = 0; /* nothing waits any more (a dead peer's sends) */
        return false;
    }
    if (0 != count || opal_progress_yield_when_idle || c->mpi_yields) {
        return false;
    }
    if (0 == module->tx_blocked_since) {
        module->stats.idle_yields++; /* (c->yield_idle) */
        return true;
    }
    if (c->yield_idle ||
        (0 != module->yield_blocked &&
         usnic_elapsed_us(now, module->tx_blocked_since) >= module->yield_blocked)) {
        module->stats.tx_yields++;
        return true;
    }
    return false;
}

static int module_progress(usnic_module_t *module, bool *yield)
{
    uint64_t now = usnic_now_us();
    int count;

    module->now_us = now;
    /* Away from MPI for a while (computing, or descheduled): what peers
     * sent meanwhile, ACKs included, waits unread in our sockets and may
     * not all be read by this call (an idle data channel is polled every
     * fourth call).  Our own silence must not count against the peers:
     * peer_alive() counts their quiet time from now at the earliest. */
    if (OPAL_UNLIKELY(now - module->last_poll_us > USNIC_AWAY_US) && 0 != module->last_poll_us) {
        opal_list_item_t *item;
        module->back_us = now;
        /* nor must the ACKs that waited count as round trips */
        OPAL_LIST_FOREACH(item, &module->endpoints, opal_list_item_t)
        {
            usnic_rel_tx_away(&((mca_btl_base_endpoint_t *) item)->rel, now);
        }
    }
    module->last_poll_us = now;
    module->in_progress = true;
    if (0 != module->chan[USNIC_CHAN_DATA].train.n && NULL != module->backend->train_flush) {
        /* a train left open for more messages (btl_usnic_tx_coalesce) */
        module->backend->train_flush(module, &module->chan[USNIC_CHAN_DATA]);
    }
    count = module->backend->poll(module, &module->chan[USNIC_CHAN_PRIO]);
    /* Polling a udp-provider channel costs a system call even when nothing
     * arrived.  While the data channel has been idle for a while, poll it
     * on every fourth call only: small messages and ACKs use the priority
     * channel, and the first data arrival brings full-rate polling back.
     * (Measured and rejected: polling an idle priority channel less while
     * data streams cost 8% of the bandwidth for 512 KiB-1 MiB messages at
     * 1472-byte datagrams, probably by delaying ob1's control messages;
     * reading a busy data channel several times per call cost 10%.)  A
     * due poll of an idle data channel is skipped when this call's
     * priority poll brought something: that arrival is probably what the
     * caller waits for, and its answer should not wait behind another
     * system call.  But not more than USNIC_DATA_SKIPS_MAX times in a row:
     * under a steady stream of small messages every priority poll brings
     * something, and the data channel must still be read
     * (test/mpi/starve.c). */
    if (module->data_idle < USNIC_DATA_IDLE_POLLS ||
        (0 == (module->data_idle & 3) &&
         (0 == count || module->data_skips >= USNIC_DATA_SKIPS_MAX))) {
        int n = module->backend->poll(module, &module->chan[USNIC_CHAN_DATA]);
        module->data_skips = 0;
        module->data_idle = (0 == n) ? module->data_idle + 1 : 0;
        count += n;
    } else {
        if (0 == (module->data_idle & 3)) {
            module->data_skips++;
        }
        module->data_idle++;
    }
    usnic_fault_flush(module, 0 == count);
    if (OPAL_UNLIKELY(usnic_lookup_ready())) {
        usnic_lookup_progress(); /* records of lazily added peers */
    }
    usnic_rx_fence(); /* what was received is visible before anyone is told */
    count += usnic_progress_done_frags(module);
    usnic_progress_resends(module);
    usnic_progress_sends(module);
    usnic_progress_acks(module, now);
    if (0 != module->next_timer && now >= module->next_timer) {
        usnic_progress_timers(module, now);
        usnic_progress_resends(module); /* what the timers decided */
    }
    *yield = want_yield(module, now, count);
    module->in_progress = false;
    return count;
}

int usnic_component_progress(void)
{
    usnic_component_t *c = &mca_btl_usnic_component;
    int count = 0;
    bool yield = false;

    usnic_lock();
    usnic_path_progress();
    for (int i = 0; i < c->num_modules; i++) {
        if (!c->modules[i]->finalized) {
            bool y;
            count += module_progress(c->modules[i], &y);
            yield = yield || y;
        }
    }
    usnic_unlock();
    if (OPAL_UNLIKELY(yield) && 0 == count) {
        sched_yield(); /* (want_yield: every module idle or waiting) */
    }
    return count;
}
