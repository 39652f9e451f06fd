/*
 * usnic-td, part 2: domains, memory registrations, address vectors
 * (FI_AV_MAP, with the usnic get_distance extension) and completion queues.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "usnic_td.h"

static int no_cntr(struct fid_domain *d, struct fi_cntr_attr *a, struct fid_cntr **c, void *x)
{
    (void) d, (void) a, (void) c, (void) x;
    return -FI_ENOSYS; /* "No counters are supported" (fi_usnic(7)) */
}

static int no_poll(struct fid_domain *d, struct fi_poll_attr *a, struct fid_poll **p)
{
    (void) d, (void) a, (void) p;
    return -FI_ENOSYS;
}

static int no_sep(struct fid_domain *d, struct fi_info *i, struct fid_ep **e, void *x)
{
    (void) d, (void) i, (void) e, (void) x;
    return -FI_ENOSYS;
}

static int no_stx(struct fid_domain *d, struct fi_tx_attr *a, struct fid_stx **s, void *x)
{
    (void) d, (void) a, (void) s, (void) x;
    return -FI_ENOSYS;
}

static int no_srx(struct fid_domain *d, struct fi_rx_attr *a, struct fid_ep **e, void *x)
{
    (void) d, (void) a, (void) e, (void) x;
    return -FI_ENOSYS;
}

static int no_atomic(struct fid_domain *d, enum fi_datatype t, enum fi_op o,
                     struct fi_atomic_attr *a, uint64_t f)
{
    (void) d, (void) t, (void) o, (void) a, (void) f;
    return -FI_EOPNOTSUPP;
}

/* ------------------------------------------------------------------ MR */

static int mr_close(struct fid *fid)
{
    struct td_mr *mr = container_of(fid, struct td_mr, fid.fid);
    struct td_domain *dom = mr->dom;
    struct td_mr **pp;

    if (mr->posted > 0) {
        int ret = td_violation(dom,
                               "fi_close(mr [%p, +%zu)) while %u posted receive(s) still target "
                               "it: the adapter would write into unregistered memory",
                               (void *) mr->base, mr->len, mr->posted);
        if (0 != ret) {
            return ret;
        }
    }
    for (pp = &dom->mrs; NULL != *pp; pp = &(*pp)->next) {
        if (*pp == mr) {
            *pp = mr->next;
            break;
        }
    }
    dom->c.mr_dereg++;
    free(mr);
    return 0;
}

static struct fi_ops mr_fi_ops = {
    .size = sizeof(struct fi_ops),
    .close = mr_close,
};

static int mr_reg(struct fid *fid, const void *buf, size_t len, uint64_t access, uint64_t offset,
                  uint64_t requested_key, uint64_t flags, struct fid_mr **mr_o, void *context)
{
    static uint64_t next_key = 1;
    struct td_domain *dom;
    struct td_mr *mr;

    (void) access;
    (void) offset;
    (void) requested_key;
    if (0 != flags) {
        return -FI_EBADFLAGS;
    }
    if (FI_CLASS_DOMAIN != fid->fclass) {
        return -FI_EINVAL;
    }
    dom = container_of(fid, struct td_domain, fid.fid);
    mr = calloc(1, sizeof(*mr));
    if (NULL == mr) {
        return -FI_ENOMEM;
    }
    mr->fid.fid.fclass = FI_CLASS_MR;
    mr->fid.fid.context = context;
    mr->fid.fid.ops = &mr_fi_ops;
    /* The real provider leaves mem_desc NULL; the double hands out a
     * non-NULL descriptor so that a missing desc can be told apart. */
    mr->fid.mem_desc = mr;
    mr->fid.key = __atomic_fetch_add(&next_key, 1, __ATOMIC_RELAXED);
    mr->dom = dom;
    mr->base = (uintptr_t) buf;
    mr->len = len;
    mr->next = dom->mrs;
    dom->mrs = mr;
    dom->c.mr_reg++;
    *mr_o = &mr->fid;
    return 0;
}

static int mr_regv(struct fid *fid, const struct iovec *iov, size_t count, uint64_t access,
                   uint64_t offset, uint64_t requested_key, uint64_t flags, struct fid_mr **mr,
                   void *context)
{
    if (1 != count) {
        return -FI_EINVAL; /* mr_iov_limit is 1 */
    }
    return mr_reg(fid, iov[0].iov_base, iov[0].iov_len, access, offset, requested_key, flags, mr,
                  context);
}

static int mr_regattr(struct fid *fid, const struct fi_mr_attr *attr, uint64_t flags,
                      struct fid_mr **mr)
{
    if (1 != attr->iov_count) {
        return -FI_EINVAL;
    }
    return mr_reg(fid, attr->mr_iov[0].iov_base, attr->mr_iov[0].iov_len, attr->access,
                  attr->offset, attr->requested_key, flags, mr, attr->context);
}

/*
 * FI_MR_LOCAL: the registration that covers [buf, buf + len).  With
 * USNIC_TD_DESC=require (default) it must be the one named by desc, as
 * fi_mr(3) asks; with USNIC_TD_DESC=any, any registration of the domain
 * will do (what the hardware itself needs).  On a violation *ret holds what
 * the operation must return (0 in warn mode: carry on).
 */
struct td_mr *td_mr_find(struct td_domain *dom, void *desc, const void *buf, size_t len,
                         const char *what, int *ret)
{
    uintptr_t lo = (uintptr_t) buf, hi = lo + len;
    struct td_mr *mr;

    *ret = 0;
    if (td.desc_check) {
        if (NULL == desc) {
            *ret = td_violation(dom,
                                "%s: buffer %p (%zu bytes incl. prefix) passed with desc == NULL; "
                                "FI_MR_LOCAL requires fi_mr_desc() of a registration covering it",
                                what, buf, len);
            return NULL;
        }
        for (mr = dom->mrs; NULL != mr && mr != desc; mr = mr->next) {
        }
        if (NULL == mr) {
            *ret = td_violation(dom, "%s: desc %p is not a live registration of this domain", what,
                                desc);
            return NULL;
        }
        if (lo < mr->base || hi > mr->base + mr->len) {
            *ret = td_violation(dom,
                                "%s: buffer [%p, +%zu) is not inside the registration its desc "
                                "names, [%p, +%zu)",
                                what, buf, len, (void *) mr->base, mr->len);
            return NULL;
        }
        return mr;
    }
    for (mr = dom->mrs; NULL != mr; mr = mr->next) {
        if (lo >= mr->base && hi <= mr->base + mr->len) {
            return mr;
        }
    }
    *ret = td_violation(dom, "%s: buffer [%p, +%zu) is not covered by any registration (fi_mr_reg)",
                        what, buf, len);
    return NULL;
}

/* ------------------------------------------------------------------ AV */

struct td_av_entry *td_av_check(struct td_av *av, fi_addr_t addr)
{
    struct td_av_entry *e;

    if (NULL == av || FI_ADDR_NOTAVAIL == addr) {
        return NULL;
    }
    for (e = av->entries; NULL != e; e = e->next) {
        if ((fi_addr_t) (uintptr_t) e == addr) {
            return e;
        }
    }
    return NULL;
}

fi_addr_t td_av_lookup_sin(struct td_av *av, const struct sockaddr_in *sin)
{
    if (NULL != av) {
        for (struct td_av_entry *e = av->entries; NULL != e; e = e->next) {
            if (e->sin.sin_addr.s_addr == sin->sin_addr.s_addr &&
                e->sin.sin_port == sin->sin_port) {
                return (fi_addr_t) (uintptr_t) e;
            }
        }
    }
    return FI_ADDR_NOTAVAIL;
}

static int av_insert(struct fid_av *fav, const void *addr, size_t count, fi_addr_t *fi_addr,
                     uint64_t flags, void *context)
{
    struct td_av *av = container_of(fav, struct td_av, fid);
    const struct sockaddr_in *sin = addr;
    int *errors = context;
    int ok = 0;

    if (flags & ~(FI_MORE | (av->async ? 0 : FI_SYNC_ERR))) {
        return -FI_EBADFLAGS;
    }
    if (av->async && NULL == av->eq) {
        return -FI_ENOEQ;
    }
    for (size_t i = 0; i < count; i++) {
        struct td_av_entry *e = NULL;
        int err = 0;
        if (AF_INET != sin[i].sin_family) {
            err = FI_EINVAL;
        } else if (!td_addr_allowed(sin[i].sin_addr.s_addr)) {
            err = FI_EHOSTUNREACH; /* the double only talks to 127.0.0.0/8 */
        } else if (NULL == (e = calloc(1, sizeof(*e)))) {
            err = FI_ENOMEM;
        }
        if (flags & FI_SYNC_ERR) {
            errors[i] = err;
        }
        if (0 != err) {
            fi_addr[i] = FI_ADDR_NOTAVAIL;
            if (av->async) {
                struct fi_eq_err_entry ee = {0};
                ee.fid = &av->fid.fid;
                ee.context = context;
                ee.data = i;
                ee.err = err;
                td_eq_post(av->eq, FI_AV_COMPLETE, &ee, sizeof(ee), true);
            }
            continue;
        }
        e->sin.sin_family = AF_INET;
        e->sin.sin_addr = sin[i].sin_addr;
        e->sin.sin_port = sin[i].sin_port;
        e->next = av->entries;
        av->entries = e;
        fi_addr[i] = (fi_addr_t) (uintptr_t) e;
        av->dom->c.av_inserts++;
        ok++;
    }
    if (av->async) {
        struct fi_eq_entry ent = {0};
        ent.fid = &av->fid.fid;
        ent.context = context;
        ent.data = (uint64_t) ok;
        td_eq_post(av->eq, FI_AV_COMPLETE, &ent, sizeof(ent), false);
        return 0;
    }
    return ok;
}

static int av_insertsvc(struct fid_av *fav, const char *node, const char *service,
                        fi_addr_t *fi_addr, uint64_t flags, void *context)
{
    struct addrinfo ah = {0}, *ai = NULL;
    struct sockaddr_in sin;

    ah.ai_family = AF_INET;
    ah.ai_socktype = SOCK_DGRAM;
    if (NULL == node || NULL == service || 0 != getaddrinfo(node, service, &ah, &ai)) {
        return -FI_EINVAL;
    }
    memcpy(&sin, ai->ai_addr, sizeof(sin));
    freeaddrinfo(ai);
    return av_insert(fav, &sin, 1, fi_addr, flags, context);
}

static int av_remove(struct fid_av *fav, fi_addr_t *fi_addr, size_t count, uint64_t flags)
{
    struct td_av *av = container_of(fav, struct td_av, fid);

    (void) flags;
    for (size_t i = 0; i < count; i++) {
        struct td_av_entry **pp;
        if (FI_ADDR_NOTAVAIL == fi_addr[i]) {
            continue;
        }
        for (pp = &av->entries; NULL != *pp; pp = &(*pp)->next) {
            if ((fi_addr_t) (uintptr_t) *pp == fi_addr[i]) {
                break;
            }
        }
        if (NULL == *pp) {
            int ret = td_violation(av->dom, "fi_av_remove: fi_addr 0x%llx is not in this AV",
                                   (unsigned long long) fi_addr[i]);
            if (0 != ret) {
                return ret;
            }
            continue;
        }
        struct td_av_entry *e = *pp;
        *pp = e->next;
        free(e);
        fi_addr[i] = FI_ADDR_NOTAVAIL; /* as the real provider does */
    }
    return 0;
}

static int av_lookup(struct fid_av *fav, fi_addr_t fi_addr, void *addr, size_t *addrlen)
{
    struct td_av *av = container_of(fav, struct td_av, fid);
    struct td_av_entry *e = td_av_check(av, fi_addr);
    size_t n = *addrlen < sizeof(e->sin) ? *addrlen : sizeof(e->sin);

    if (NULL == e) {
        return -FI_EINVAL;
    }
    memcpy(addr, &e->sin, n);
    *addrlen = sizeof(e->sin);
    return 0;
}

static const char *av_straddr(struct fid_av *fav, const void *addr, char *buf, size_t *len)
{
    const struct sockaddr_in *sin = addr;
    char ip[INET_ADDRSTRLEN];
    int n;

    (void) fav;
    if (NULL == addr || NULL == buf || NULL == len) {
        return NULL;
    }
    inet_ntop(AF_INET, &sin->sin_addr, ip, sizeof(ip));
    n = snprintf(buf, *len, "fi_sockaddr_in://%s:%u", ip, ntohs(sin->sin_port));
    *len = (size_t) n + 1;
    return buf;
}

static int av_get_distance(struct fid_av *fav, void *addr, int *metric)
{
    struct td_av *av = container_of(fav, struct td_av, fid);
    const struct sockaddr_in *sin = addr;
    const struct td_dev *d = av->dom->dev;

    if ((sin->sin_addr.s_addr & d->mask_be) == (d->ip_be & d->mask_be)) {
        *metric = 0;
    } else if (td_addr_allowed(sin->sin_addr.s_addr)) {
        *metric = 1;
    } else {
        *metric = -1;
    }
    return 0;
}

static struct fi_usnic_ops_av ext_av_ops = {
    .size = sizeof(struct fi_usnic_ops_av),
    .get_distance = av_get_distance,
};

static int av_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops, void *ctx)
{
    (void) fid, (void) flags, (void) ctx;
    if (0 != strcmp(name, FI_USNIC_AV_OPS_1)) {
        return -FI_EINVAL;
    }
    *ops = &ext_av_ops;
    return 0;
}

static int av_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
    struct td_av *av = container_of(fid, struct td_av, fid.fid);

    (void) flags;
    if (FI_CLASS_EQ != bfid->fclass || NULL != av->eq) {
        return -FI_EINVAL;
    }
    av->eq = container_of(bfid, struct td_eq, fid.fid);
    av->eq->refs++;
    return 0;
}

static int av_close(struct fid *fid)
{
    struct td_av *av = container_of(fid, struct td_av, fid.fid);

    if (av->refs > 0) {
        return -FI_EBUSY;
    }
    while (NULL != av->entries) {
        struct td_av_entry *e = av->entries;
        av->entries = e->next;
        free(e);
    }
    if (NULL != av->eq) {
        av->eq->refs--;
    }
    av->dom->refs--;
    free(av);
    return 0;
}

static struct fi_ops av_fi_ops = {
    .size = sizeof(struct fi_ops),
    .close = av_close,
    .bind = av_bind,
    .ops_open = av_ops_open,
};

static struct fi_ops_av av_ops = {
    .size = sizeof(struct fi_ops_av),
    .insert = av_insert,
    .insertsvc = av_insertsvc,
    .remove = av_remove,
    .lookup = av_lookup,
    .straddr = av_straddr,
};

static int av_open(struct fid_domain *domain, struct fi_av_attr *attr, struct fid_av **av_o,
                   void *context)
{
    struct td_domain *dom = container_of(domain, struct td_domain, fid);
    struct td_av *av;

    if (NULL == attr || NULL == av_o) {
        return -FI_EINVAL;
    }
    if (NULL != attr->name || NULL != attr->map_addr || (attr->flags & FI_READ)) {
        return -FI_ENOSYS; /* named AVs */
    }
    if ((attr->flags & ~FI_EVENT) || 0 != attr->rx_ctx_bits) {
        return -FI_EINVAL;
    }
    if (FI_AV_TABLE == attr->type) {
        return -FI_ENOSYS; /* "Address vectors only support FI_AV_MAP" */
    }
    if (FI_AV_UNSPEC != attr->type && FI_AV_MAP != attr->type) {
        return -FI_EINVAL;
    }
    av = calloc(1, sizeof(*av));
    if (NULL == av) {
        return -FI_ENOMEM;
    }
    av->fid.fid.fclass = FI_CLASS_AV;
    av->fid.fid.context = context;
    av->fid.fid.ops = &av_fi_ops;
    av->fid.ops = &av_ops;
    av->dom = dom;
    av->async = 0 != (attr->flags & FI_EVENT);
    dom->refs++;
    *av_o = &av->fid;
    return 0;
}

/* ------------------------------------------------------------------ CQ */

int td_cq_push(struct td_cq *cq, const struct td_cq_ent *ent)
{
    if (cq->count == cq->size) {
        /* The adapter would overwrite entries the application has not read. */
        return td_violation(cq->dom,
                            "CQ overrun: %zu completions unread in a CQ of size %zu (size the CQ "
                            "for every send and receive that can be outstanding)",
                            cq->count, cq->size);
    }
    cq->ring[(cq->head + cq->count) % cq->size] = *ent;
    cq->count++;
    return 0;
}

void td_cq_forget_ep(struct td_cq *cq, struct td_ep *ep)
{
    for (size_t i = 0; i < cq->count; i++) {
        struct td_cq_ent *e = &cq->ring[(cq->head + i) % cq->size];
        if (e->ep == ep) {
            e->ep = NULL;
        }
    }
    for (size_t i = 0; i < cq->neps; i++) {
        if (cq->eps[i] == ep) {
            cq->eps[i] = cq->eps[--cq->neps];
            break;
        }
    }
}

static void cq_pop(struct td_cq *cq)
{
    struct td_cq_ent *e = &cq->ring[cq->head];

    if (NULL != e->ep) {
        if (e->is_send) {
            e->ep->tx_used -= e->credits;
        } else {
            e->ep->rx_used -= e->credits;
        }
    }
    cq->head = (cq->head + 1) % cq->size;
    cq->count--;
}

static ssize_t cq_read_common(struct fid_cq *fcq, void *buf, size_t count, fi_addr_t *src)
{
    struct td_cq *cq = container_of(fcq, struct td_cq, fid);
    uint8_t *out = buf;
    size_t n = 0;

    td_control_poll(false);
    for (size_t i = 0; i < cq->neps; i++) {
        td_ep_progress(cq->eps[i]);
    }
    if (cq->count > 0 && 0 != cq->ring[cq->head].err) {
        return -FI_EAVAIL;
    }
    while (n < count && cq->count > 0 && 0 == cq->ring[cq->head].err) {
        struct td_cq_ent *e = &cq->ring[cq->head];
        switch (cq->fmt) {
        case FI_CQ_FORMAT_CONTEXT: {
            struct fi_cq_entry *c = (void *) out;
            c->op_context = e->ctx;
            out += sizeof(*c);
            break;
        }
        case FI_CQ_FORMAT_MSG: {
            struct fi_cq_msg_entry *m = (void *) out;
            m->op_context = e->ctx;
            m->flags = e->flags;
            m->len = e->len;
            out += sizeof(*m);
            break;
        }
        default: {
            struct fi_cq_data_entry *d = (void *) out;
            d->op_context = e->ctx;
            d->flags = e->flags;
            d->len = e->len;
            d->buf = NULL;
            d->data = 0;
            out += sizeof(*d);
            break;
        }
        }
        if (NULL != src) {
            src[n] = e->src;
        }
        cq_pop(cq);
        n++;
    }
    return n > 0 ? (ssize_t) n : -FI_EAGAIN;
}

static ssize_t cq_read(struct fid_cq *fcq, void *buf, size_t count)
{
    return cq_read_common(fcq, buf, count, NULL);
}

/* The real provider has readfrom on FI_CQ_FORMAT_CONTEXT queues only. */
static ssize_t cq_readfrom(struct fid_cq *fcq, void *buf, size_t count, fi_addr_t *src)
{
    struct td_cq *cq = container_of(fcq, struct td_cq, fid);

    if (FI_CQ_FORMAT_CONTEXT != cq->fmt) {
        return -FI_ENOSYS;
    }
    return cq_read_common(fcq, buf, count, src);
}

static ssize_t cq_readerr(struct fid_cq *fcq, struct fi_cq_err_entry *buf, uint64_t flags)
{
    struct td_cq *cq = container_of(fcq, struct td_cq, fid);
    struct td_cq_ent *e;

    (void) flags;
    if (0 == cq->count || 0 == cq->ring[cq->head].err) {
        return -FI_EAGAIN;
    }
    e = &cq->ring[cq->head];
    buf->op_context = e->ctx;
    buf->flags = e->flags;
    buf->len = e->len;
    buf->buf = NULL;
    buf->data = 0;
    buf->tag = 0;
    buf->olen = 0;
    buf->err = e->err;
    buf->prov_errno = e->prov_errno;
    if (FI_VERSION_GE(cq->dom->api, FI_VERSION(1, 5))) {
        buf->err_data_size = 0; /* no error data, as the real provider */
    } else {
        buf->err_data = NULL;
    }
    cq->last_prov_errno = e->prov_errno;
    snprintf(cq->last_why, sizeof(cq->last_why), "%s", NULL != e->why ? e->why : "");
    cq_pop(cq);
    return 1;
}

static ssize_t cq_sread(struct fid_cq *fcq, void *buf, size_t count, const void *cond, int timeout)
{
    struct timespec t0, t;

    (void) cond;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        ssize_t ret = cq_read(fcq, buf, count);
        if (-FI_EAGAIN != ret) {
            return ret;
        }
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (timeout >= 0 &&
            (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 >= timeout) {
            return -FI_EAGAIN;
        }
        usleep(100);
    }
}

/* The text of a usnic completion error: the real provider's fi_strerror of
 * the code, and what the double knows of why it happened. */
static const char *cq_strerror(struct fid_cq *fcq, int prov_errno, const void *err_data, char *buf,
                               size_t len)
{
    struct td_cq *cq = container_of(fcq, struct td_cq, fid);
    static char own[256];

    (void) err_data;
    if (NULL == buf || 0 == len) {
        buf = own;
        len = sizeof(own);
    }
    if (prov_errno == cq->last_prov_errno && '\0' != cq->last_why[0]) {
        snprintf(buf, len, "%s (usnic: %s)", fi_strerror(prov_errno), cq->last_why);
    } else {
        snprintf(buf, len, "%s", fi_strerror(prov_errno));
    }
    return buf;
}

static int cq_close(struct fid *fid)
{
    struct td_cq *cq = container_of(fid, struct td_cq, fid.fid);

    if (cq->refs > 0) {
        return -FI_EBUSY;
    }
    cq->dom->refs--;
    free(cq->eps);
    free(cq->ring);
    free(cq);
    return 0;
}

static int cq_control(struct fid *fid, int command, void *arg)
{
    (void) fid, (void) arg;
    return FI_GETWAIT == command ? -FI_EOPBADSTATE : -FI_ENOSYS;
}

static struct fi_ops cq_fi_ops = {
    .size = sizeof(struct fi_ops),
    .close = cq_close,
    .control = cq_control,
};

static struct fi_ops_cq cq_ops = {
    .size = sizeof(struct fi_ops_cq),
    .read = cq_read,
    .readfrom = cq_readfrom,
    .readerr = cq_readerr,
    .sread = cq_sread,
    .strerror = cq_strerror,
};

static int cq_open(struct fid_domain *domain, struct fi_cq_attr *attr, struct fid_cq **cq_o,
                   void *context)
{
    struct td_domain *dom = container_of(domain, struct td_domain, fid);
    struct td_cq *cq;

    if (NULL == attr) {
        return -FI_EINVAL;
    }
    switch (attr->wait_obj) {
    case FI_WAIT_NONE:
    case FI_WAIT_UNSPEC:
        break;
    case FI_WAIT_FD:
    case FI_WAIT_SET:
        return -FI_EINVAL; /* needs USD_CAP_GRP_INTR, which the double lacks */
    default:
        return -FI_ENOSYS;
    }
    if (attr->size > TD_MAX_CQE) {
        return -FI_EINVAL;
    }
    if (0 == attr->size) {
        attr->size = TD_MAX_CQE;
    }
    if (FI_CQ_FORMAT_UNSPEC == attr->format) {
        attr->format = FI_CQ_FORMAT_CONTEXT;
    }
    if (FI_CQ_FORMAT_CONTEXT != attr->format && FI_CQ_FORMAT_MSG != attr->format &&
        FI_CQ_FORMAT_DATA != attr->format) {
        return -FI_ENOSYS;
    }
    cq = calloc(1, sizeof(*cq));
    if (NULL == cq) {
        return -FI_ENOMEM;
    }
    cq->size = attr->size;
    cq->ring = calloc(cq->size, sizeof(*cq->ring));
    if (NULL == cq->ring) {
        free(cq);
        return -FI_ENOMEM;
    }
    cq->fid.fid.fclass = FI_CLASS_CQ;
    cq->fid.fid.context = context;
    cq->fid.fid.ops = &cq_fi_ops;
    cq->fid.ops = &cq_ops;
    cq->dom = dom;
    cq->fmt = attr->format;
    dom->refs++;
    *cq_o = &cq->fid;
    return 0;
}

/* -------------------------------------------------------------- domain */

static void print_counters(struct td_domain *dom, FILE *f)
{
    const struct td_counters *c = &dom->c;

    fprintf(f,
            "usnic-td pid=%d domain=%s: registrations=%llu deregistrations=%llu sends=%llu "
            "injects=%llu recvs_posted=%llu send_completions=%llu recv_completions=%llu "
            "bytes_sent=%llu bytes_received=%llu prefix_ops=%llu violations=%llu eagain=%llu "
            "enospc=%llu dropped_link_down=%llu dropped_no_recv=%llu truncated=%llu "
            "injected_errors=%llu av_inserts=%llu\n",
            (int) getpid(), dom->dev->name, (unsigned long long) c->mr_reg,
            (unsigned long long) c->mr_dereg, (unsigned long long) c->sends,
            (unsigned long long) c->injects, (unsigned long long) c->recvs_posted,
            (unsigned long long) c->send_comps, (unsigned long long) c->recv_comps,
            (unsigned long long) c->bytes_sent, (unsigned long long) c->bytes_recv,
            (unsigned long long) c->prefix_ops, (unsigned long long) c->violations,
            (unsigned long long) c->eagain, (unsigned long long) c->enospc,
            (unsigned long long) c->drop_linkdown, (unsigned long long) c->drop_norecv,
            (unsigned long long) c->trunc, (unsigned long long) c->injected_errs,
            (unsigned long long) c->av_inserts);
}

static int domain_close(struct fid *fid)
{
    struct td_domain *dom = container_of(fid, struct td_domain, fid.fid);
    struct td_domain **pp;
    unsigned leaked = 0;

    if (dom->refs > 0) {
        return -FI_EBUSY;
    }
    for (struct td_mr *mr = dom->mrs; NULL != mr; mr = mr->next) {
        leaked++;
    }
    if (NULL != td.log_path) {
        FILE *f = fopen(td.log_path, "a");
        if (NULL != f) {
            print_counters(dom, f);
            if (leaked) {
                fprintf(f, "usnic-td pid=%d domain=%s: %u registration(s) still open\n",
                        (int) getpid(), dom->dev->name, leaked);
            }
            fclose(f);
        }
    }
    if (td.verbose) {
        print_counters(dom, stderr);
    }
    pthread_mutex_lock(&td_lock);
    for (pp = &td_domains; NULL != *pp; pp = &(*pp)->next) {
        if (*pp == dom) {
            *pp = dom->next;
            break;
        }
    }
    pthread_mutex_unlock(&td_lock);
    while (NULL != dom->mrs) {
        struct td_mr *mr = dom->mrs;
        dom->mrs = mr->next;
        free(mr);
    }
    if (NULL != dom->eq) {
        dom->eq->refs--;
    }
    dom->fab->refs--;
    fi_freeinfo(dom->info);
    free(dom);
    return 0;
}

static int domain_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
    struct td_domain *dom = container_of(fid, struct td_domain, fid.fid);

    if (flags & FI_REG_MR) {
        return -FI_EOPNOTSUPP;
    }
    if (FI_CLASS_EQ != bfid->fclass || NULL != dom->eq) {
        return -FI_EINVAL;
    }
    pthread_mutex_lock(&td_lock);
    dom->eq = container_of(bfid, struct td_eq, fid.fid);
    dom->eq->refs++;
    pthread_mutex_unlock(&td_lock);
    return 0;
}

static struct fi_ops domain_fi_ops = {
    .size = sizeof(struct fi_ops),
    .close = domain_close,
    .bind = domain_bind,
};

static struct fi_ops_domain domain_ops = {
    .size = sizeof(struct fi_ops_domain),
    .av_open = av_open,
    .cq_open = cq_open,
    .endpoint = td_ep_open,
    .scalable_ep = no_sep,
    .cntr_open = no_cntr,
    .poll_open = no_poll,
    .stx_ctx = no_stx,
    .srx_ctx = no_srx,
    .query_atomic = no_atomic,
};

static struct fi_ops_mr mr_ops = {
    .size = sizeof(struct fi_ops_mr),
    .reg = mr_reg,
    .regv = mr_regv,
    .regattr = mr_regattr,
};

int td_domain_open(struct fid_fabric *fabric, struct fi_info *info, struct fid_domain **dom_o,
                   void *context)
{
    struct td_fabric *fab = container_of(fabric, struct td_fabric, fid);
    const struct sockaddr_in *sin = info->src_addr;
    struct td_domain *dom;

    if (NULL != info->domain_attr) {
        if (NULL != info->domain_attr->name &&
            0 != strcmp(info->domain_attr->name, fab->dev->name)) {
            return -FI_ENODATA;
        }
        if (!td_mr_mode_ok(fabric->api_version, info)) {
            return -FI_ENODATA; /* the caller ignored fi_getinfo's mr_mode */
        }
    }
    if ((FI_SOCKADDR_IN != info->addr_format && FI_SOCKADDR != info->addr_format) || NULL == sin ||
        sizeof(*sin) != info->src_addrlen || AF_INET != sin->sin_family ||
        sin->sin_addr.s_addr != fab->dev->ip_be) {
        return -FI_EINVAL;
    }
    td_control_poll(true);
    if (!fab->dev->link_up) {
        return -FI_ENETDOWN; /* usd_open checks the link */
    }
    dom = calloc(1, sizeof(*dom));
    if (NULL == dom) {
        return -FI_ENOMEM;
    }
    dom->info = fi_dupinfo(info);
    if (NULL == dom->info) {
        free(dom);
        return -FI_ENOMEM;
    }
    dom->fid.fid.fclass = FI_CLASS_DOMAIN;
    dom->fid.fid.context = context;
    dom->fid.fid.ops = &domain_fi_ops;
    dom->fid.ops = &domain_ops;
    dom->fid.mr = &mr_ops;
    dom->fab = fab;
    dom->dev = fab->dev;
    dom->api = fabric->api_version;
    fab->refs++;
    pthread_mutex_lock(&td_lock);
    dom->next = td_domains;
    td_domains = dom;
    pthread_mutex_unlock(&td_lock);
    *dom_o = &dom->fid;
    return 0;
}
