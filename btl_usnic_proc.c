/* Modex records and interface pairing (see btl_usnic_proc.h). */
#include <arpa/inet.h>
#include <stdlib.h>
#include <ctype.h>
#include <string.h>

#include <unistd.h>

#include "opal/mca/pmix/pmix.h"
#include "opal/sys/atomic.h"
#include "opal/threads/mutex.h"
#include "opal/util/show_help.h"

#include "btl_usnic_endpoint.h"
#include "btl_usnic_proc.h"
#include "btl_usnic_route.h"
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
    rec->key = module->key;
    memcpy(rec->secret, module->secret, sizeof(rec->secret));
    rec->auth = (uint8_t) mca_btl_usnic_component.params.auth;
    rec->checksum = (uint8_t) (0 != mca_btl_usnic_component.params.checksum);
    rec->ipv4 = module->if_addr.sin_addr.s_addr;
    for (int c = 0; c < USNIC_NUM_CHANNELS; c++) {
        rec->port[c] = module->chan[c].addr.sin_port;
        rec->tx_port[c] = module->chan[c].tx_addr.sin_port;
        rec->mtu[c] = module->chan[c].mtu;
    }
    rec->link_mbps = module->link_mbps;
    rec->max_msg_len = module->max_msg_len;
    rec->send_window = module->send_window;
    rec->rcvbuf = (uint32_t) module->chan[USNIC_CHAN_DATA].rcvbuf;
    rec->live_port = module->live_port;
    {
        size_t n = strlen(module->prov_name);
        memcpy(rec->provider, module->prov_name,
               n < sizeof(rec->provider) - 1 ? n : sizeof(rec->provider) - 1);
        n = strlen(module->ifname);
        memcpy(rec->ifname, module->ifname,
               n < sizeof(rec->ifname) - 1 ? n : sizeof(rec->ifname) - 1);
    }
}

const char *usnic_rec_ifname(const struct usnic_modex_rec *rec, char out[USNIC_IFNAME_BUF])
{
    size_t k;

    for (k = 0; k < sizeof(rec->ifname) && k + 1 < USNIC_IFNAME_BUF && '\0' != rec->ifname[k];
         k++) {
        out[k] = isprint((unsigned char) rec->ifname[k]) ? rec->ifname[k] : '?';
    }
    out[k] = '\0';
    if (0 == k) {
        strcpy(out, "unknown");
    }
    return out;
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

bool usnic_modex_valid(const void *data, size_t size)
{
    return NULL != data && 0 != size && 0 == size % sizeof(struct usnic_modex_rec) &&
           size / sizeof(struct usnic_modex_rec) <= USNIC_MAX_MODULES;
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
    if (!usnic_modex_valid(data, size)) {
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

/* Why the peer's record r cannot pair with this module at all (NULL: it can). */
static const char *record_unusable(const usnic_module_t *module, const struct usnic_modex_rec *r)
{
    if (USNIC_MODEX_VERSION != r->version || USNIC_PROTO_VERSION != r->proto_version) {
        return "protocol version";
    }
    if (0 != strncmp(r->provider, module->prov_name, sizeof(r->provider))) {
        return "libfabric provider";
    }
    if (r->little_endian != is_little_endian()) {
        return "byte order";
    }
    if (r->auth > USNIC_AUTH_FULL || 0 == r->key) {
        return "modex record (authentication mode or key)";
    }
    if (r->max_msg_len > module->max_msg_len) {
        return "fragment size (btl_usnic_max_send_size and eager limits must match)";
    }
    return NULL;
}

/* "eth0 (10.0.0.1/24) and h2's module 0x100 (10.0.1.2/24): WHAT: WHY" */
static void pair_verbose(const usnic_module_t *module, const opal_proc_t *proc,
                         const struct usnic_modex_rec *r, const char *what, const char *why)
{
    char ours[INET_ADDRSTRLEN], theirs[INET_ADDRSTRLEN];

    inet_ntop(AF_INET, &module->if_addr.sin_addr, ours, sizeof(ours));
    inet_ntop(AF_INET, &r->ipv4, theirs, sizeof(theirs));
    USNIC_VERBOSE(USNIC_PAIR_VERBOSE, "%s (%s/%u) and %s's module 0x%x (%s/%u): %s: %s",
                  module->ifname, ours, module->if_prefixlen,
                  (NULL != proc->proc_hostname) ? proc->proc_hostname : "?", r->module_id, theirs,
                  r->prefixlen, what, why);
}

/* Of two candidates, the peer module whose position matches ours wins (it
 * spreads traffic over several interfaces on one subnet), else the first. */
static bool better_candidate(const usnic_module_t *module, const struct usnic_modex_rec *best,
                             size_t i)
{
    return NULL == best || (size_t) module->index == i;
}

const struct usnic_modex_rec *usnic_pair(usnic_module_t *module, const opal_proc_t *proc,
                                         const struct usnic_modex_rec *recs, size_t nrecs)
{
    const bool verbose =
        opal_output_get_verbosity(opal_btl_base_framework.framework_output) >= USNIC_PAIR_VERBOSE;
    const uint32_t ours = module->if_addr.sin_addr.s_addr;
    const struct usnic_modex_rec *best = NULL;
    const struct usnic_route *route[USNIC_MAX_MODULES] = {NULL};
    bool usable[USNIC_MAX_MODULES] = {false};
    bool same[USNIC_MAX_MODULES] = {false};
    bool routed = false;
    char why[160];

    nrecs = (nrecs < USNIC_MAX_MODULES) ? nrecs : USNIC_MAX_MODULES;
    /* 1. a peer interface on our subnet */
    for (size_t i = 0; i < nrecs; i++) {
        const struct usnic_modex_rec *r = &recs[i];
        const char *bad = record_unusable(module, r);
        if (NULL != bad) {
            report_mismatch(module, proc, r, bad);
            if (verbose) {
                snprintf(why, sizeof(why), "%s differs", bad);
                pair_verbose(module, proc, r, "not paired", why);
            }
            continue;
        }
        usable[i] = true;
        same[i] = usnic_same_subnet(ours, module->if_prefixlen, r->ipv4, r->prefixlen);
        if (same[i] && better_candidate(module, best, i)) {
            best = r;
        }
    }
    /* 2. else one the kernel routes to through our interface */
    if (NULL == best && mca_btl_usnic_component.params.routed_peers) {
        for (size_t i = 0; i < nrecs; i++) {
            if (usable[i]) {
                route[i] = usnic_route_get(ours, recs[i].ipv4);
                if (USNIC_ROUTE_VIA_DEV == route[i]->verdict && better_candidate(module, best, i)) {
                    best = &recs[i];
                    routed = true;
                }
            }
        }
    }
    if (!verbose) {
        return best;
    }
    for (size_t i = 0; i < nrecs; i++) {
        const struct usnic_modex_rec *r = &recs[i];
        if (!usable[i]) {
            continue;
        }
        if (r == best) {
            uint32_t d = module->chan[USNIC_CHAN_DATA].mtu, t = r->mtu[USNIC_CHAN_DATA];
            int n = 0;
            if (routed) {
                usnic_route_describe(route[i], why, sizeof(why));
                n = (int) strlen(why);
            } else {
                n = snprintf(why, sizeof(why), "same subnet");
            }
            snprintf(why + n, sizeof(why) - (size_t) n,
                     "; datagrams of %u bytes (ours %u, theirs %u)", (t < d) ? t : d, d, t);
            pair_verbose(module, proc, r, "paired", why);
        } else if (same[i]) {
            pair_verbose(module, proc, r, "not paired",
                         "same subnet, but another interface of the peer is used");
        } else if (NULL != route[i]) {
            usnic_route_describe(route[i], why, sizeof(why));
            pair_verbose(module, proc, r, "not paired",
                         (USNIC_ROUTE_VIA_DEV == route[i]->verdict)
                             ? "routed too, but another interface of the peer is used"
                             : why);
        } else if (NULL != best) {
            pair_verbose(module, proc, r, "not paired",
                         "other subnet, and another interface of the peer shares ours");
        } else {
            pair_verbose(module, proc, r, "not paired",
                         "other subnet, and routed peers are off (btl_usnic_routed_peers 0)");
        }
    }
    return best;
}

/* ---------------------------------------------------------------------- */
/* Lazy peers: fetching a modex record without blocking (btl_usnic_proc.h) */

enum lookup_state {
    LOOKUP_NEVER = 0,
    LOOKUP_PENDING = 1,
    LOOKUP_DONE = 2
};

/* A record that arrived, queued by the PMIx thread for the progress engine. */
struct lookup_done {
    struct lookup_done *next;
    uint32_t vpid;
    size_t size; /* 0: nothing usable came */
    uint8_t data[];
};

struct usnic_lookups {
    opal_mutex_t lock; /* guards done_head/done_tail (the PMIx thread appends) */
    struct lookup_done *done_head, *done_tail;
    volatile int32_t ready;    /* done list not empty */
    volatile int32_t inflight; /* fetches whose callback has not run yet */
    uint8_t *state;            /* enum lookup_state, by vpid */
    uint32_t nprocs;
    char *key; /* the modex key of this component */
};

static struct usnic_lookups *lookups_get(void)
{
    usnic_component_t *c = &mca_btl_usnic_component;
    struct usnic_lookups *l = c->lookups;

    if (OPAL_LIKELY(NULL != l)) {
        return l;
    }
    if (c->job_size < 2 || NULL == opal_pmix.get_nb) {
        return NULL;
    }
    l = calloc(1, sizeof(*l));
    if (NULL == l) {
        return NULL;
    }
    l->nprocs = c->job_size;
    l->state = calloc(l->nprocs, 1);
    l->key = mca_base_component_to_string(&c->super.btl_version);
    if (NULL == l->state || NULL == l->key) {
        free(l->state);
        free(l->key);
        free(l);
        return NULL;
    }
    OBJ_CONSTRUCT(&l->lock, opal_mutex_t);
    c->lookups = l;
    return l;
}

struct lookup_req {
    struct usnic_lookups *l;
    uint32_t vpid;
};

/* Runs in the PMIx library's thread: copy, queue, nothing else. */
static void lookup_cb(int status, opal_value_t *kv, void *cbdata)
{
    struct lookup_req *req = cbdata;
    struct usnic_lookups *l = req->l;
    const void *bytes = NULL;
    size_t size = 0;
    struct lookup_done *d;

    if (OPAL_SUCCESS == status && NULL != kv && OPAL_BYTE_OBJECT == kv->type &&
        usnic_modex_valid(kv->data.bo.bytes, (size_t) kv->data.bo.size)) {
        bytes = kv->data.bo.bytes;
        size = (size_t) kv->data.bo.size;
    }
    d = malloc(sizeof(*d) + size);
    if (NULL != d) {
        d->next = NULL;
        d->vpid = req->vpid;
        d->size = size;
        if (0 != size) {
            memcpy(d->data, bytes, size);
        }
        opal_mutex_lock(&l->lock);
        if (NULL == l->done_tail) {
            l->done_head = d;
        } else {
            l->done_tail->next = d;
        }
        l->done_tail = d;
        opal_mutex_unlock(&l->lock);
        opal_atomic_wmb();
        l->ready = 1;
    }
    free(req);
    opal_atomic_wmb();
    (void) opal_atomic_add_fetch_32(&l->inflight, -1);
}

enum usnic_drop_reason usnic_lookup_start(uint32_t vpid)
{
    struct usnic_lookups *l;
    struct lookup_req *req;
    opal_process_name_t name;
    int rc;

    if (vpid == OPAL_PROC_MY_NAME.vpid || vpid >= mca_btl_usnic_component.job_size) {
        return USNIC_DROP_SENDER; /* not a peer of our job: never asked about */
    }
    l = lookups_get();
    if (NULL == l || vpid >= l->nprocs) {
        return USNIC_DROP_SENDER;
    }
    if (LOOKUP_NEVER != l->state[vpid]) {
        return (LOOKUP_PENDING == l->state[vpid]) ? USNIC_DROP_PENDING : USNIC_DROP_SENDER;
    }
    /* one try per process, whatever happens: PENDING until the progress
     * engine takes the answer (lookup_complete), DONE at once on failure */
    l->state[vpid] = LOOKUP_PENDING;
    req = malloc(sizeof(*req));
    if (NULL == req) {
        l->state[vpid] = LOOKUP_DONE;
        return USNIC_DROP_SENDER;
    }
    req->l = l;
    req->vpid = vpid;
    name = OPAL_PROC_MY_NAME;
    name.vpid = vpid;
    (void) opal_atomic_add_fetch_32(&l->inflight, 1);
    rc = opal_pmix.get_nb(&name, l->key, NULL, lookup_cb, req);
    if (OPAL_SUCCESS != rc) {
        /* no callback will come */
        (void) opal_atomic_add_fetch_32(&l->inflight, -1);
        free(req);
        l->state[vpid] = LOOKUP_DONE;
        USNIC_VERBOSE(20, "lookup of rank %u: get_nb failed (%d)", vpid, rc);
        return USNIC_DROP_SENDER;
    }
    USNIC_VERBOSE(20, "rank %u sent to us before its endpoint existed: fetching its record", vpid);
    return USNIC_DROP_PENDING;
}

bool usnic_lookup_ready(void)
{
    const struct usnic_lookups *l = mca_btl_usnic_component.lookups;
    return NULL != l && 0 != l->ready;
}

/* The record of vpid arrived (or not: size 0): endpoints, then held datagrams. */
static void lookup_complete(struct usnic_lookups *l, const struct lookup_done *d)
{
    usnic_component_t *c = &mca_btl_usnic_component;
    opal_process_name_t name = OPAL_PROC_MY_NAME;
    opal_proc_t *proc = NULL;

    l->state[d->vpid] = LOOKUP_DONE;
    name.vpid = d->vpid;
    if (0 != d->size && NULL != opal_proc_for_name) {
        proc = opal_proc_for_name(name);
    }
    for (int i = 0; i < c->num_modules; i++) {
        usnic_module_t *module = c->modules[i];
        if (module->finalized) {
            continue;
        }
        if (NULL != proc) {
            const struct usnic_modex_rec *rec =
                usnic_pair(module, proc, (const struct usnic_modex_rec *) d->data,
                           d->size / sizeof(struct usnic_modex_rec));
            if (NULL != rec) {
                (void) usnic_endpoint_create(module, proc, rec);
            }
        }
        usnic_release_parked(module, d->vpid);
    }
}

void usnic_lookup_progress(void)
{
    struct usnic_lookups *l = mca_btl_usnic_component.lookups;
    struct lookup_done *d, *next;

    if (NULL == l) {
        return;
    }
    opal_mutex_lock(&l->lock);
    d = l->done_head;
    l->done_head = l->done_tail = NULL;
    l->ready = 0;
    opal_mutex_unlock(&l->lock);
    for (; NULL != d; d = next) {
        next = d->next;
        if (d->vpid < l->nprocs) {
            lookup_complete(l, d);
        }
        free(d);
    }
}

void usnic_lookup_fini(void)
{
    struct usnic_lookups *l = mca_btl_usnic_component.lookups;
    uint64_t deadline = usnic_now_us() + 2000000;
    struct lookup_done *d, *next;

    if (NULL == l) {
        return;
    }
    /* a callback still to come would run code that is about to be unloaded */
    while (0 != l->inflight && usnic_now_us() < deadline) {
        usleep(1000);
    }
    if (0 != l->inflight) {
        USNIC_VERBOSE(5, "%d modex lookups still unanswered at close", (int) l->inflight);
        return; /* leak it rather than free what a callback will touch */
    }
    for (d = l->done_head; NULL != d; d = next) {
        next = d->next;
        free(d);
    }
    OBJ_DESTRUCT(&l->lock);
    free(l->state);
    free(l->key);
    free(l);
    mca_btl_usnic_component.lookups = NULL;
}
