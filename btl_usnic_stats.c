/* Counters: the one-line summary printed at finalize (btl_usnic_print_stats). */
#include <stdio.h>
#include <unistd.h>

#include "opal/util/proc.h"

#include "btl_usnic.h"
#include "btl_usnic_endpoint.h"
#include "btl_usnic_live.h"
#include "btl_usnic_util.h"

/* Fold the reliability core's per-peer counters into the module's. */
static void collect(usnic_module_t *module)
{
    usnic_module_stats_t *s = &module->stats;
    opal_list_item_t *item;

    s->fast_retrans = 0;
    s->timeout_retrans = 0;
    s->sack_retrans = 0;
    s->tlp_probes = 0;
    s->frags_waited = 0;
    s->rx_copies = 0;
    s->ack_copies = 0;
    s->srtt_max_us = 0;
    s->rx_joined = 0;
    for (item = opal_list_get_first(&module->endpoints);
         item != opal_list_get_end(&module->endpoints); item = opal_list_get_next(item)) {
        const mca_btl_base_endpoint_t *ep = (const mca_btl_base_endpoint_t *) item;
        s->fast_retrans += ep->rel.stats.retrans_fast;
        s->timeout_retrans += ep->rel.stats.retrans_timeout;
        s->sack_retrans += ep->rel.stats.retrans_sack;
        s->tlp_probes += ep->rel.stats.tlp_probes;
        s->frags_waited += ep->reasm.waited;
        s->rx_copies += ep->rel.stats.rx_copies;
        s->ack_copies += ep->rel.stats.ack_copies;
        s->rx_joined += ep->rx_parts.joined;
        if (ep->rel.tx.srtt > s->srtt_max_us) {
            s->srtt_max_us = ep->rel.tx.srtt;
        }
    }
    usnic_live_counts(module->index, &s->live_probes, &s->live_replies, &s->live_answered,
                      &s->live_drops);
    s->kernel_drops = 0;
    for (int c = 0; c < USNIC_NUM_CHANNELS; c++) {
        s->kernel_drops += usnic_socket_drops(module->chan[c].sock_fd);
    }
}

void usnic_stats_format(const usnic_module_t *module, const char *prefix, char *buf, size_t len)
{
    const usnic_module_stats_t *s = &module->stats;
    size_t off = 0;
    int n;

    n = snprintf(buf, len, "%s host=%s pid=%d rank=%u dev=%s provider=%s", prefix,
                 opal_process_info.nodename, (int) getpid(), OPAL_PROC_MY_NAME.vpid, module->ifname,
                 module->prov_name);
    if (n < 0 || (size_t) n >= len) {
        return;
    }
    off = (size_t) n;
#define USNIC_STATS_PRINT(name, desc)                                                              \
    n = snprintf(buf + off, len - off, " " #name "=%llu", (unsigned long long) s->name);           \
    if (n < 0 || (size_t) n >= len - off) {                                                        \
        return;                                                                                    \
    }                                                                                              \
    off += (size_t) n;
    USNIC_STATS_FIELDS(USNIC_STATS_PRINT)
#undef USNIC_STATS_PRINT
    for (int r = 1; r < USNIC_DROP__COUNT; r++) {
        if (0 == s->drops[r]) {
            continue;
        }
        n = snprintf(buf + off, len - off, " drop_%s=%llu", usnic_drop_reason_name(r),
                     (unsigned long long) s->drops[r]);
        if (n < 0 || (size_t) n >= len - off) {
            return;
        }
        off += (size_t) n;
    }
}

void usnic_stats_print(usnic_module_t *module)
{
    char line[2048];

    if (!mca_btl_usnic_component.params.print_stats) {
        return;
    }
    collect(module);
    usnic_stats_format(module, "[usnic stats]", line, sizeof(line));
    opal_output(0, "%s", line);
}
