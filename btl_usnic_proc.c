/* Modex records and interface pairing (see btl_usnic_proc.h). */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "opal/mca/pmix/pmix.h"
#include "opal/util/show_help.h"

#include "btl_usnic_proc.h"
#include "btl_usnic_util.h"

static bool is_little_endian(void)
{
    const uint16_t one = 1;
    return 1 == *(const uint8_t *) &one;
}

void usnic_modex_fill(usnic_module_t *module, struct usnic_modex_rec *rec)
{
    memset(rec, 0, sizeof(*rec));
    rec->version = USNIC_MODEX_VERSION;
    rec->proto_version = USNIC_PROTO_VERSION;
    rec->prefixlen = (uint8_t) module->if_prefixlen;
    rec->little_endian = is_little_endian();
    rec->module_id = module->module_id;
    rec->job_key = mca_btl_usnic_component.job_key;
    rec->ipv4 = module->if_addr.sin_addr.s_addr;
    for (int c = 0; c < USNIC_NUM_CHANNELS; c++) {
        rec->port[c] = module->chan[c].addr.sin_port;
        rec->mtu[c] = module->chan[c].mtu;
    }
    rec->link_mbps = module->link_mbps;
    rec->isn = module->local_isn;
    rec->max_msg_len = module->max_msg_len;
    rec->send_window = (uint32_t) mca_btl_usnic_component.params.send_window;
    rec->rcvbuf = (uint32_t) module->chan[USNIC_CHAN_DATA].rcvbuf;
    {
        size_t n = strlen(module->prov_name);
        memcpy(rec->provider, module->prov_name,
               n < sizeof(rec->provider) - 1 ? n : sizeof(rec->provider) - 1);
    }
}

int usnic_modex_publish(void)
{
    usnic_component_t *c = &mca_btl_usnic_component;
    struct usnic_modex_rec *recs;
    int rc;

    recs = calloc((size_t) (c->num_modules ? c->num_modules : 1), sizeof(*recs));
    if (NULL == recs) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    for (int i = 0; i < c->num_modules; i++) {
        usnic_modex_fill(c->modules[i], &recs[i]);
    }
    OPAL_MODEX_SEND(rc, OPAL_PMIX_GLOBAL, &c->super.btl_version, recs,
                    c->num_modules * sizeof(*recs));
    free(recs);
    return rc;
}

int usnic_modex_recv(const opal_proc_t *proc, struct usnic_modex_rec **recs, size_t *nrecs)
{
    usnic_component_t *c = &mca_btl_usnic_component;
    uint8_t *data = NULL;
    size_t size = 0;
    int rc;

    OPAL_MODEX_RECV(rc, &c->super.btl_version, &proc->proc_name, (void **) &data, &size);
    if (OPAL_SUCCESS != rc) {
        return rc;
    }
    if (NULL == data || 0 == size || 0 != size % sizeof(struct usnic_modex_rec) ||
        size / sizeof(struct usnic_modex_rec) > USNIC_MAX_MODULES) {
        free(data);
        return OPAL_ERR_BAD_PARAM;
    }
    *recs = (struct usnic_modex_rec *) data;
    *nrecs = size / sizeof(struct usnic_modex_rec);
    return OPAL_SUCCESS;
}

static void report_mismatch(usnic_module_t *module, const opal_proc_t *proc,
                            const struct usnic_modex_rec *rec, const char *what)
{
    static bool reported = false;
    char theirs[160];

    if (reported) {
        return;
    }
    reported = true;
    snprintf(theirs, sizeof(theirs), "modex v%u, protocol v%u, provider %.16s, %s-endian",
             rec->version, rec->proto_version, rec->provider,
             rec->little_endian ? "little" : "big");
    opal_show_help("help-mpi-btl-usnic.txt", "peer mismatch", true, opal_process_info.nodename,
                   module->ifname, (NULL != proc->proc_hostname) ? proc->proc_hostname : "unknown",
                   what, USNIC_MODEX_VERSION, USNIC_PROTO_VERSION, module->prov_name, theirs);
}

const struct usnic_modex_rec *usnic_pair(usnic_module_t *module, const opal_proc_t *proc,
                                         const struct usnic_modex_rec *recs, size_t nrecs)
{
    const struct usnic_modex_rec *best = NULL;

    for (size_t i = 0; i < nrecs; i++) {
        const struct usnic_modex_rec *r = &recs[i];
        if (USNIC_MODEX_VERSION != r->version || USNIC_PROTO_VERSION != r->proto_version) {
            report_mismatch(module, proc, r, "protocol version");
            continue;
        }
        if (0 != strncmp(r->provider, module->prov_name, sizeof(r->provider))) {
            report_mismatch(module, proc, r, "libfabric provider");
            continue;
        }
        if (r->little_endian != is_little_endian()) {
            report_mismatch(module, proc, r, "byte order");
            continue;
        }
        if (r->job_key != mca_btl_usnic_component.job_key) {
            continue;
        }
        if (r->max_msg_len > module->max_msg_len) {
            report_mismatch(module, proc, r,
                            "fragment size (btl_usnic_max_send_size and "
                            "eager limits must match)");
            continue;
        }
        if (!usnic_same_subnet(module->if_addr.sin_addr.s_addr, module->if_prefixlen, r->ipv4,
                               r->prefixlen)) {
            continue;
        }
        /* Prefer the peer module whose position matches ours, for spreading
         * traffic over several interfaces on the same subnet. */
        if (NULL == best || (size_t) module->index == i) {
            best = r;
        }
    }
    return best;
}
