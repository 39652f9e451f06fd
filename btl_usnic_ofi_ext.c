/*
 * The usnic provider's extension (btl_usnic_fi_ext.h): what a VF is (its
 * Linux interface, link speed, MTU, netmask, link state), whether the
 * adapter has enough VFs, queue pairs and completion queues for the
 * processes of this host, and link events on an EQ bound to the domain.
 */
#include <arpa/inet.h>
#include <inttypes.h>
#include <string.h>

#include "opal/util/proc.h"
#include "opal/util/show_help.h"

#include "btl_usnic.h"
#include "btl_usnic_chan.h"
#include "btl_usnic_endpoint.h"
#include "btl_usnic_ofi.h"
#include "btl_usnic_util.h"

static uint32_t mask_bits(uint32_t mask_be)
{
    uint32_t m = ntohl(mask_be), bits = 0;

    while (m & 0x80000000u) {
        bits++;
        m <<= 1;
    }
    return bits;
}

void usnic_ofi_vf_query(const struct fi_info *fi, struct usnic_vf_facts *vf)
{
    struct fi_usnic_ops_fabric *ops = NULL;
    struct fi_usnic_info ui;
    struct fid_fabric *fabric = NULL;
    int rc;

    memset(vf, 0, sizeof(*vf));
    rc = fi_fabric(fi->fabric_attr, &fabric, NULL);
    if (0 != rc) {
        USNIC_VERBOSE(20, "device %s: fi_fabric: %s", fi->domain_attr->name, fi_strerror(-rc));
        return;
    }
    rc = fi_open_ops(&fabric->fid, FI_USNIC_FABRIC_OPS_1, 0, (void **) &ops, NULL);
    if (0 != rc || NULL == ops) {
        USNIC_VERBOSE(20, "device %s: no usnic extension (%s)", fi->domain_attr->name,
                      fi_strerror(-rc));
        fi_close(&fabric->fid);
        return;
    }
    memset(&ui, 0, sizeof(ui));
    rc = ops->getinfo(2, fabric, &ui);
    if (0 == rc) {
        const struct fi_usnic_info_v2 *v2 = &ui.ui.v2;
        vf->version = 2;
        vf->mtu = v2->ui_mtu;
        vf->link_up = (0 != v2->ui_link_up);
        vf->prefixlen = v2->ui_prefixlen;
        if (NULL != v2->ui_caps) {
            for (int i = 0; NULL != v2->ui_caps[i]; i++) {
                free(v2->ui_caps[i]);
            }
            free(v2->ui_caps); /* the caller owns it (fi_usnic(7)) */
        }
    } else {
        memset(&ui, 0, sizeof(ui));
        rc = ops->getinfo(1, fabric, &ui);
        vf->version = 1;
        vf->link_up = true; /* it would not be listed otherwise */
        vf->prefixlen = mask_bits(ui.ui.v1.ui_netmask_be);
    }
    fi_close(&fabric->fid);
    if (0 != rc) {
        USNIC_VERBOSE(20, "device %s: usnic extension getinfo: %s", fi->domain_attr->name,
                      fi_strerror(-rc));
        return;
    }
    /* version 2 begins with the version 1 fields */
    vf->link_mbps = ui.ui.v1.ui_link_speed;
    snprintf(vf->ifname, sizeof(vf->ifname), "%.*s", (int) sizeof(ui.ui.v1.ui_ifname),
             ui.ui.v1.ui_ifname);
    if (0 == vf->prefixlen) {
        vf->prefixlen = mask_bits(ui.ui.v1.ui_netmask_be);
    }
    vf->num_vf = ui.ui.v1.ui_num_vf;
    vf->qp_per_vf = ui.ui.v1.ui_qp_per_vf;
    vf->cq_per_vf = ui.ui.v1.ui_cq_per_vf;
    vf->known = true;
    USNIC_VERBOSE(10,
                  "device %s: usnic extension v%d: interface %s, link %s, %u Mb/s, MTU %u, "
                  "/%u, %u VFs with %u QPs and %u CQs each",
                  fi->domain_attr->name, vf->version, vf->ifname, vf->link_up ? "up" : "down",
                  vf->link_mbps, vf->mtu, vf->prefixlen, vf->num_vf, vf->qp_per_vf, vf->cq_per_vf);
}

bool usnic_ofi_vf_usable(const char *dev, const struct usnic_vf_facts *vf, uint32_t addr,
                         const struct usnic_filters *flt)
{
    if (!usnic_device_passes_filters(dev, vf->ifname, addr, flt)) {
        return false;
    }
    if (!vf->link_up) {
        char abuf[INET_ADDRSTRLEN] = "?";
        inet_ntop(AF_INET, &addr, abuf, sizeof(abuf));
        USNIC_VERBOSE(20, "device %s (%s, %s): skipped, link down", dev, vf->ifname, abuf);
        return false;
    }
    return true;
}

bool usnic_ofi_vf_resources_ok(const char *dev, const char *fabric_name,
                               const struct usnic_vf_facts *vf)
{
    static bool reported = false;
    /* every process of this host opens its own VF; each module needs a
     * queue pair (endpoint) and a completion queue per channel */
    unsigned procs = (unsigned) opal_process_info.num_local_peers + 1;
    char what[200];

    if (vf->num_vf < procs) {
        snprintf(what, sizeof(what),
                 "%u usNIC VFs (virtual functions) on the adapter of %s, but %u processes of "
                 "this job on this host need one each",
                 vf->num_vf, dev, procs);
    } else if (vf->qp_per_vf < USNIC_NUM_CHANNELS) {
        snprintf(what, sizeof(what),
                 "%u transmit/receive queue pairs per usNIC VF, but each process needs %d",
                 vf->qp_per_vf, USNIC_NUM_CHANNELS);
    } else if (vf->cq_per_vf < USNIC_NUM_CHANNELS) {
        snprintf(what, sizeof(what), "%u completion queues per usNIC VF, but each process needs %d",
                 vf->cq_per_vf, USNIC_NUM_CHANNELS);
    } else {
        return true;
    }
    USNIC_VERBOSE(5, "device %s: not enough resources: %s", dev, what);
    if (!reported) {
        reported = true;
        opal_show_help("help-mpi-btl-usnic.txt", "not enough usnic resources", true, dev,
                       NULL != fabric_name ? fabric_name : "?", opal_process_info.nodename, what);
    }
    return false;
}

void usnic_ofi_events_open(usnic_module_t *module)
{
    struct usnic_ofi_state *st = module->ofi;
    struct fi_eq_attr attr;
    int rc;

    memset(&attr, 0, sizeof(attr));
    attr.size = 64;
    attr.wait_obj = FI_WAIT_NONE;
    rc = fi_eq_open(module->fabric, &attr, &st->eq, NULL);
    if (0 == rc) {
        rc = fi_domain_bind(module->domain, &st->eq->fid, 0);
        if (0 != rc) {
            fi_close(&st->eq->fid);
            st->eq = NULL;
        }
    }
    if (0 != rc) {
        USNIC_VERBOSE(10, "%s: no link events (EQ: %s)", module->ifname, fi_strerror(-rc));
    }
}

/* The link of a module went down or came back. */
static void link_event(usnic_module_t *module, bool down)
{
    char abuf[INET_ADDRSTRLEN];

    module->stats.link_events++;
    if (down == module->link_down) {
        return;
    }
    module->link_down = down;
    if (NULL != module->ofi) {
        module->ofi->down_since = usnic_now_us();
    }
    inet_ntop(AF_INET, &module->if_addr.sin_addr, abuf, sizeof(abuf));
    if (down) {
        int up = 0;
        for (int i = 0; i < mca_btl_usnic_component.num_modules; i++) {
            const usnic_module_t *m = mca_btl_usnic_component.modules[i];
            up += (!m->finalized && !m->link_down) ? 1 : 0;
        }
        /* what left on this link since it went down is lost, and nothing
         * will acknowledge it here: send it around now (the peer's side
         * does the same when our first detoured datagram reaches it) */
        for (opal_list_item_t *item = opal_list_get_first(&module->endpoints);
             item != opal_list_get_end(&module->endpoints); item = opal_list_get_next(item)) {
            usnic_endpoint_resend_around((mca_btl_base_endpoint_t *) item);
        }
        USNIC_VERBOSE(1, "%s (%s): link down, %d usnic device(s) of this process still up",
                      module->ifname, abuf, up);
        usnic_show_help_running("link down", module->ifname,
                                NULL != module->ofi ? module->ofi->vf.ifname : "?", abuf,
                                opal_process_info.nodename, up);
    } else {
        /* try the direct way at once: a peer whose own link is still down
         * says so with its next datagram (flagged), and we go around again,
         * resending what was lost (btl_usnic_recv.c) */
        for (opal_list_item_t *item = opal_list_get_first(&module->endpoints);
             item != opal_list_get_end(&module->endpoints); item = opal_list_get_next(item)) {
            ((mca_btl_base_endpoint_t *) item)->detour_until = 0;
        }
        /* the counters let a reader (and t_usnic_prov) see what went
         * direct and what went around after this moment */
        USNIC_VERBOSE(1,
                      "%s (%s): link up again, traffic resumes (so far tx_pkts=%" PRIu64
                      " detours=%" PRIu64 ")",
                      module->ifname, abuf, module->stats.tx_pkts, module->stats.detours);
    }
}

/* The link has been down for btl_usnic_peer_timeout: peers with data
 * outstanding that no other module reaches are unreachable (an error
 * for the job, not a hang). */
static void give_up(usnic_module_t *module)
{
    opal_list_item_t *item;
    char why[200];

    snprintf(why, sizeof(why),
             "the link of device %s has been down for %d s and no other usnic device of this "
             "process reaches the peer",
             module->ifname, mca_btl_usnic_component.params.peer_timeout);
    for (item = opal_list_get_first(&module->endpoints);
         item != opal_list_get_end(&module->endpoints); item = opal_list_get_next(item)) {
        mca_btl_base_endpoint_t *ep = (mca_btl_base_endpoint_t *) item;
        if (!ep->dead &&
            (0 != usnic_rel_tx_inflight(&ep->rel) || !opal_list_is_empty(&ep->sendq)) &&
            !usnic_endpoint_detour_exists(ep)) {
            usnic_endpoint_fail(ep, why);
        }
    }
}

void usnic_ofi_events_poll(usnic_module_t *module)
{
    struct usnic_ofi_state *st = module->ofi;
    uint64_t now = module->in_progress ? module->now_us : usnic_now_us();
    struct fi_eq_entry ent;
    uint32_t event;
    ssize_t n;

    if (now < st->next_eq_poll) {
        return;
    }
    st->next_eq_poll = now + 1000;
    for (;;) {
        memset(&ent, 0, sizeof(ent));
        n = fi_eq_read(st->eq, &event, &ent, sizeof(ent), 0);
        if (-FI_EAVAIL == n) {
            struct fi_eq_err_entry err;
            memset(&err, 0, sizeof(err));
            (void) fi_eq_readerr(st->eq, &err, 0);
            USNIC_VERBOSE(10, "%s: EQ error %d", module->ifname, err.err);
            continue;
        }
        if (n <= 0) {
            break;
        }
        if (BTL_USNIC_EQ_LINKSTATE == event) {
            link_event(module, BTL_USNIC_EQ_LINK_DOWN == ent.data);
        } else {
            USNIC_VERBOSE(20, "%s: EQ event %u ignored", module->ifname, event);
        }
    }
    /* (down_since may be later than now, a reading from before the event
     * came: such a link went down a moment ago, not 2^64 - x us ago) */
    if (module->link_down &&
        usnic_elapsed_us(now, st->down_since) >
            (uint64_t) mca_btl_usnic_component.params.peer_timeout * 1000000u) {
        give_up(module);
    }
}
