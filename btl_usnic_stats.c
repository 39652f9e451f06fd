/* Counters: the one-line summary printed at finalize (btl_usnic_print_stats). */
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "opal/mca/base/mca_base_pvar.h"
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
                      &s->live_drops, &s->live_forged);
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
    char line[4096];

    if (!mca_btl_usnic_component.params.print_stats) {
        return;
    }
    collect(module);
    usnic_stats_format(module, "[usnic stats]", line, sizeof(line));
    opal_output(0, "%s", line);
}

/* ---- MPI_T performance variables ----
 *
 * Every counter of the stats line is also a performance variable,
 * btl_usnic_<name> (and btl_usnic_drop_<REASON> for each drop reason):
 * class COUNTER (srtt_max_us, rx_senders_max: LEVEL), one MPI_UNSIGNED_LONG,
 * the sum over the process's modules (those two: the largest), bound to no object,
 * read-only and continuous.  Reads take the component's lock, as the
 * progress engine does. */

/* Where a variable's counter is in usnic_module_stats_t (its ctx). */
#define PVAR_AT(ctx) ((size_t) (uintptr_t) (ctx))

static int pvar_read(const mca_base_pvar_t *pvar, void *value, void *obj)
{
    usnic_component_t *c = &mca_btl_usnic_component;
    const size_t at = PVAR_AT(pvar->ctx);
    const bool largest = usnic_stats_is_level(at);
    uint64_t v = 0;

    (void) obj;
    usnic_lock();
    for (int i = 0; i < c->num_modules; i++) {
        uint64_t x;
        collect(c->modules[i]);
        memcpy(&x, (const char *) &c->modules[i]->stats + at, sizeof(x));
        v = largest ? (x > v ? x : v) : v + x;
    }
    usnic_unlock();
    *(unsigned long *) value = (unsigned long) v;
    return OPAL_SUCCESS;
}

static int pvar_notify(mca_base_pvar_t *pvar, mca_base_pvar_event_t event, void *obj, int *count)
{
    (void) pvar;
    (void) obj;
    if (MCA_BASE_PVAR_HANDLE_BIND == event) {
        *count = 1; /* the process's total, however many modules it has */
    }
    return OPAL_SUCCESS;
}

static void pvar_add(const mca_base_component_t *comp, const char *name, const char *desc,
                     int var_class, size_t at)
{
    (void) mca_base_component_pvar_register(
        comp, name, desc, OPAL_INFO_LVL_4, var_class, MCA_BASE_VAR_TYPE_UNSIGNED_LONG, NULL,
        MCA_BASE_VAR_BIND_NO_OBJECT, MCA_BASE_PVAR_FLAG_READONLY | MCA_BASE_PVAR_FLAG_CONTINUOUS,
        pvar_read, NULL, pvar_notify, (void *) (uintptr_t) at);
}

void usnic_stats_register_pvars(const mca_base_component_t *comp)
{
    char name[64], desc[160];

#define USNIC_STATS_PVAR(field, text)                                                              \
    pvar_add(comp, #field, text,                                                                   \
             usnic_stats_is_level(offsetof(usnic_module_stats_t, field))                           \
                 ? MCA_BASE_PVAR_CLASS_LEVEL                                                       \
                 : MCA_BASE_PVAR_CLASS_COUNTER,                                                    \
             offsetof(usnic_module_stats_t, field));
    USNIC_STATS_FIELDS(USNIC_STATS_PVAR)
#undef USNIC_STATS_PVAR
    for (int r = 1; r < USNIC_DROP__COUNT; r++) {
        snprintf(name, sizeof(name), "drop_%s", usnic_drop_reason_name(r));
        snprintf(desc, sizeof(desc), "received packets dropped: %s", usnic_drop_reason_desc(r));
        pvar_add(comp, name, desc, MCA_BASE_PVAR_CLASS_COUNTER,
                 offsetof(usnic_module_stats_t, drops) + (size_t) r * sizeof(uint64_t));
    }
}
