/*
 * usnic-td, part 3: FI_EP_DGRAM endpoints and the data path.  Every
 * endpoint owns a non-blocking UDP socket bound to its device's address;
 * sends go out at once, receives are taken from the socket when the
 * application reads a completion queue (FI_PROGRESS_MANUAL).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include "usnic_td.h"

#define TD_POISON 0xa5 /* written over the provider-owned start of a send prefix */

static struct td_ep *ep_of(struct fid_ep *fep)
{
    return container_of(fep, struct td_ep, fid);
}

/* -------------------------------------------------------- wire headers */

static uint16_t ip_checksum(const uint8_t *h, size_t len)
{
    uint32_t sum = 0;

    for (size_t i = 0; i + 1 < len; i += 2) {
        sum += (uint32_t) (h[i] << 8 | h[i + 1]);
    }
    while (sum >> 16) {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    return (uint16_t) ~sum;
}

/*
 * The 42 bytes the adapter puts in front of a datagram (Ethernet, IPv4 with
 * DF, UDP), written at `h`: in a send prefix they are what would go on the
 * wire, in a receive prefix what the adapter delivers with the payload.
 */
static void put_headers(uint8_t *h, const struct sockaddr_in *from, const struct sockaddr_in *to,
                        size_t payload)
{
    uint16_t v;
    uint8_t *ip = h + TD_ETH_HDR, *udp = ip + 20;

    memset(h, 0, TD_UDP_HDR);
    h[0] = 0x02; /* locally administered MACs made of the IPv4 addresses */
    h[1] = 0x25;
    memcpy(h + 2, &to->sin_addr, 4);
    h[6] = 0x02;
    h[7] = 0x25;
    memcpy(h + 8, &from->sin_addr, 4);
    h[12] = 0x08; /* ETHERTYPE_IP */
    h[13] = 0x00;
    ip[0] = 0x45;
    v = htons((uint16_t) (20 + 8 + payload));
    memcpy(ip + 2, &v, 2);
    ip[6] = 0x40; /* don't fragment, as usd_create_dest sets */
    ip[8] = 64;
    ip[9] = 17; /* UDP */
    memcpy(ip + 12, &from->sin_addr, 4);
    memcpy(ip + 16, &to->sin_addr, 4);
    v = htons(ip_checksum(ip, 20));
    memcpy(ip + 10, &v, 2);
    memcpy(udp, &from->sin_port, 2);
    memcpy(udp + 2, &to->sin_port, 2);
    v = htons((uint16_t) (8 + payload));
    memcpy(udp + 4, &v, 2);
}

/* -------------------------------------------------------------- sends */

enum {
    TX_INJECT = 1,
    TX_COMPLETION = 2
};

static ssize_t tx_common(struct td_ep *ep, const struct iovec *iov, void **desc, size_t count,
                         fi_addr_t dest, void *context, int how, const char *what)
{
    static __thread uint8_t wire[65536];
    struct td_domain *dom = ep->dom;
    struct td_av_entry *to;
    struct td_cq_ent ce = {0};
    size_t total = 0, payload, off = 0;
    unsigned need;
    int ret;

    td_control_poll(false);
    if (!ep->enabled) {
        return -FI_EOPBADSTATE;
    }
    if (0 == count) {
        return -FI_EINVAL;
    }
    if (count > ep->tx_iov_limit) {
        dom->c.enospc++;
        return -FI_ENOSPC;
    }
    for (size_t i = 0; i < count; i++) {
        total += iov[i].iov_len;
    }
    if (iov[0].iov_len < ep->prefix) {
        ret = td_violation(dom,
                           "%s: first buffer has %zu bytes, less than the %zu-byte message "
                           "prefix (FI_MSG_PREFIX: len includes the prefix)",
                           what, iov[0].iov_len, ep->prefix);
        return 0 != ret ? ret : -FI_EINVAL;
    }
    payload = total - ep->prefix;
    if (how & TX_INJECT) {
        if (payload > TD_INJECT_SIZE) {
            dom->c.enospc++;
            return -FI_ENOSPC; /* the prefix is not counted (fi_getinfo(3)) */
        }
    } else {
        for (size_t i = 0; i < count; i++) {
            td_mr_find(dom, NULL != desc ? desc[i] : NULL, iov[i].iov_base, iov[i].iov_len, what,
                       &ret);
            if (0 != ret) {
                return ret;
            }
        }
    }
    if (total > ep->max_msg) {
        ret = td_violation(dom, "%s: %zu bytes (incl. prefix) exceed max_msg_size %zu", what, total,
                           ep->max_msg);
        if (0 != ret) {
            return ret;
        }
    }
    to = td_av_check(ep->av, dest);
    if (NULL == to) {
        ret = td_violation(dom, "%s: destination fi_addr 0x%llx is not in the endpoint's AV", what,
                           (unsigned long long) dest);
        return 0 != ret ? ret : -FI_EINVAL;
    }
    need = (unsigned) count + (ep->prefix ? 0 : 1);
    if ((how & TX_COMPLETION) && ep->tx_used + need > ep->tx_max) {
        dom->c.eagain++;
        return -FI_EAGAIN;
    }

    /* the datagram: everything after the prefix */
    memcpy(wire, (const uint8_t *) iov[0].iov_base + ep->prefix, iov[0].iov_len - ep->prefix);
    off = iov[0].iov_len - ep->prefix;
    for (size_t i = 1; i < count && off + iov[i].iov_len <= sizeof(wire); i++) {
        memcpy(wire + off, iov[i].iov_base, iov[i].iov_len);
        off += iov[i].iov_len;
    }
    if (ep->prefix && !(how & TX_INJECT)) {
        /* the prefix belongs to the provider: fill it as the adapter would */
        uint8_t *p = iov[0].iov_base;
        memset(p, TD_POISON, ep->prefix - TD_UDP_HDR);
        put_headers(p + ep->prefix - TD_UDP_HDR, &ep->addr, &to->sin, payload);
    }

    ce.ctx = context;
    ce.flags = FI_MSG | FI_SEND;
    ce.len = ep->prefix ? total : payload;
    ce.src = FI_ADDR_NOTAVAIL;
    ce.is_send = true;
    if (!dom->dev->link_up) {
        dom->c.drop_linkdown++;
        if (td.linkdown_error) {
            ce.err = ce.prov_errno = FI_EOTHER;
            ce.why = "link down, datagram not sent";
        }
    } else if ((how & TX_COMPLETION) && td_take_cqerr(dom->dev, true, &ce.prov_errno, &ce.why)) {
        ce.err = ce.prov_errno;
        dom->c.injected_errs++;
    } else if (sendto(ep->sock, wire, off, 0, (const struct sockaddr *) &to->sin, sizeof(to->sin)) <
               0) {
        if (EAGAIN == errno || EWOULDBLOCK == errno || ENOBUFS == errno) {
            dom->c.eagain++;
            return -FI_EAGAIN;
        }
        td_log("usnic-td pid=%d: sendto: %s (datagram lost)\n", (int) getpid(), strerror(errno));
    } else {
        dom->c.bytes_sent += payload;
    }
    if (how & TX_INJECT) {
        dom->c.injects++;
    } else {
        dom->c.sends++;
    }
    if (ep->prefix) {
        dom->c.prefix_ops++;
    }
    if (how & TX_COMPLETION) {
        ce.ep = ep;
        ce.credits = need;
        if (0 != (ret = td_cq_push(ep->tcq, &ce))) {
            return ret;
        }
        ep->tx_used += need;
        dom->c.send_comps++;
    }
    return 0;
}

static int tx_flags(struct td_ep *ep, uint64_t flags)
{
    int how = 0;

    if (!ep->tx_selective || (flags & FI_COMPLETION)) {
        how |= TX_COMPLETION;
    }
    if (flags & FI_INJECT) {
        how |= TX_INJECT;
    }
    return how;
}

static ssize_t ep_send(struct fid_ep *fep, const void *buf, size_t len, void *desc, fi_addr_t dest,
                       void *context)
{
    struct td_ep *ep = ep_of(fep);
    struct iovec iov = {(void *) buf, len};

    return tx_common(ep, &iov, &desc, 1, dest, context, tx_flags(ep, ep->tx_op_flags), "fi_send");
}

static ssize_t ep_sendv(struct fid_ep *fep, const struct iovec *iov, void **desc, size_t count,
                        fi_addr_t dest, void *context)
{
    struct td_ep *ep = ep_of(fep);

    return tx_common(ep, iov, desc, count, dest, context, tx_flags(ep, ep->tx_op_flags),
                     "fi_sendv");
}

static ssize_t ep_sendmsg(struct fid_ep *fep, const struct fi_msg *msg, uint64_t flags)
{
    struct td_ep *ep = ep_of(fep);

    return tx_common(ep, msg->msg_iov, msg->desc, msg->iov_count, msg->addr, msg->context,
                     tx_flags(ep, flags), "fi_sendmsg");
}

static ssize_t ep_inject(struct fid_ep *fep, const void *buf, size_t len, fi_addr_t dest)
{
    struct iovec iov = {(void *) buf, len};

    /* fi_inject: no descriptor, no completion, buffer free on return */
    return tx_common(ep_of(fep), &iov, NULL, 1, dest, NULL, TX_INJECT, "fi_inject");
}

/* ----------------------------------------------------------- receives */

static ssize_t rx_common(struct td_ep *ep, const struct iovec *iov, void **desc, size_t count,
                         void *context, const char *what)
{
    struct td_domain *dom = ep->dom;
    struct td_rx *rx;
    unsigned need;
    int ret;

    td_control_poll(false);
    if (!ep->enabled) {
        return -FI_EOPBADSTATE;
    }
    if (0 == count) {
        return -FI_EINVAL;
    }
    if (count > ep->rx_iov_limit) {
        dom->c.enospc++;
        return -FI_ENOSPC;
    }
    if (iov[0].iov_len < ep->prefix) {
        ret = td_violation(dom,
                           "%s: first buffer has %zu bytes, less than the %zu-byte message "
                           "prefix (FI_MSG_PREFIX: len includes the prefix)",
                           what, iov[0].iov_len, ep->prefix);
        return 0 != ret ? ret : -FI_EINVAL;
    }
    need = (unsigned) count + (ep->prefix ? 0 : 1);
    if (ep->rx_used + need > ep->rx_max || ep->rxq_count == ep->rxq_size) {
        dom->c.eagain++;
        return -FI_EAGAIN;
    }
    rx = &ep->rxq[(ep->rxq_head + ep->rxq_count) % ep->rxq_size];
    memset(rx, 0, sizeof(*rx));
    for (size_t i = 0; i < count; i++) {
        rx->mr[i] = td_mr_find(dom, NULL != desc ? desc[i] : NULL, iov[i].iov_base, iov[i].iov_len,
                               what, &ret);
        if (0 != ret) {
            return ret;
        }
        rx->iov[i] = iov[i];
    }
    for (size_t i = 0; i < count; i++) {
        if (NULL != rx->mr[i]) {
            rx->mr[i]->posted++;
        }
    }
    rx->ctx = context;
    rx->cnt = count;
    rx->credits = need;
    ep->rxq_count++;
    ep->rx_used += need;
    dom->c.recvs_posted++;
    if (ep->prefix) {
        dom->c.prefix_ops++;
    }
    return 0;
}

static ssize_t ep_recv(struct fid_ep *fep, void *buf, size_t len, void *desc, fi_addr_t src,
                       void *context)
{
    struct iovec iov = {buf, len};

    (void) src;
    return rx_common(ep_of(fep), &iov, &desc, 1, context, "fi_recv");
}

static ssize_t ep_recvv(struct fid_ep *fep, const struct iovec *iov, void **desc, size_t count,
                        fi_addr_t src, void *context)
{
    (void) src;
    return rx_common(ep_of(fep), iov, desc, count, context, "fi_recvv");
}

static ssize_t ep_recvmsg(struct fid_ep *fep, const struct fi_msg *msg, uint64_t flags)
{
    (void) flags; /* FI_MORE only delays the doorbell on the real adapter */
    return rx_common(ep_of(fep), msg->msg_iov, msg->desc, msg->iov_count, msg->context,
                     "fi_recvmsg");
}

/* Throw away whatever waits in the socket, counting it. */
static void drain(struct td_ep *ep, uint64_t *counter)
{
    char b;

    while (recv(ep->sock, &b, 1, MSG_DONTWAIT | MSG_TRUNC) >= 0) {
        (*counter)++;
    }
}

/* Move arrived datagrams into posted receives and their completions. */
void td_ep_progress(struct td_ep *ep)
{
    struct td_domain *dom = ep->dom;

    if (!ep->enabled) {
        return;
    }
    if (!dom->dev->link_up) {
        drain(ep, &dom->c.drop_linkdown); /* nothing arrives on a dead link */
        return;
    }
    for (int budget = 64; budget > 0; budget--) {
        struct td_rx *rx;
        struct iovec v[TD_MAX_SGE];
        struct sockaddr_in from;
        struct msghdr mh = {0};
        struct td_cq_ent ce = {0};
        ssize_t n;

        if (0 == ep->rxq_count) {
            /* no receive descriptor: the adapter drops the frame */
            drain(ep, &dom->c.drop_norecv);
            return;
        }
        rx = &ep->rxq[ep->rxq_head];
        memcpy(v, rx->iov, rx->cnt * sizeof(v[0]));
        v[0].iov_base = (uint8_t *) v[0].iov_base + ep->prefix;
        v[0].iov_len -= ep->prefix;
        mh.msg_name = &from;
        mh.msg_namelen = sizeof(from);
        mh.msg_iov = v;
        mh.msg_iovlen = rx->cnt;
        n = recvmsg(ep->sock, &mh, MSG_DONTWAIT);
        if (n < 0) {
            return;
        }
        ep->rxq_head = (ep->rxq_head + 1) % ep->rxq_size;
        ep->rxq_count--;
        for (size_t i = 0; i < rx->cnt; i++) {
            if (NULL != rx->mr[i]) {
                rx->mr[i]->posted--;
            }
        }
        if (ep->prefix) {
            put_headers((uint8_t *) rx->iov[0].iov_base + ep->prefix - TD_UDP_HDR, &from, &ep->addr,
                        (size_t) n);
        }
        ce.ctx = rx->ctx;
        ce.flags = FI_MSG | FI_RECV;
        ce.len = (size_t) n + ep->prefix;
        ce.src = td_av_lookup_sin(ep->av, &from);
        ce.ep = ep;
        ce.credits = rx->credits;
        if (mh.msg_flags & MSG_TRUNC) {
            ce.err = ce.prov_errno = FI_ETRUNC;
            ce.why = "datagram longer than the posted buffer";
            dom->c.trunc++;
        } else if (td_take_cqerr(dom->dev, false, &ce.prov_errno, &ce.why)) {
            ce.err = ce.prov_errno;
            dom->c.injected_errs++;
        } else {
            dom->c.bytes_recv += (uint64_t) n;
        }
        if (0 != td_cq_push(ep->rcq, &ce)) {
            ep->rx_used -= rx->credits;
            continue;
        }
        dom->c.recv_comps++;
    }
}

/* ------------------------------------------------------ endpoint misc */

static ssize_t rx_size_left(struct fid_ep *fep)
{
    struct td_ep *ep = ep_of(fep);

    if (!ep->enabled) {
        return -FI_EOPBADSTATE;
    }
    return (ssize_t) ((ep->rx_max - ep->rx_used) / (ep->rx_iov_limit + (ep->prefix ? 0 : 1)));
}

static ssize_t tx_size_left(struct fid_ep *fep)
{
    struct td_ep *ep = ep_of(fep);

    if (!ep->enabled) {
        return -FI_EOPBADSTATE;
    }
    return (ssize_t) ((ep->tx_max - ep->tx_used) / (ep->tx_iov_limit + (ep->prefix ? 0 : 1)));
}

static ssize_t no_cancel(fid_t fid, void *context)
{
    (void) fid, (void) context;
    return -FI_ENOSYS;
}

static int no_getopt(fid_t fid, int level, int name, void *val, size_t *len)
{
    (void) fid, (void) level, (void) name, (void) val, (void) len;
    return -FI_ENOPROTOOPT;
}

static int no_setopt(fid_t fid, int level, int name, const void *val, size_t len)
{
    (void) fid, (void) level, (void) name, (void) val, (void) len;
    return -FI_ENOPROTOOPT;
}

static int no_ctx(struct fid_ep *sep, int index, void *attr, struct fid_ep **ep, void *ctx)
{
    (void) sep, (void) index, (void) attr, (void) ep, (void) ctx;
    return -FI_ENOSYS;
}

static int no_tx_ctx(struct fid_ep *s, int i, struct fi_tx_attr *a, struct fid_ep **e, void *c)
{
    return no_ctx(s, i, a, e, c);
}

static int no_rx_ctx(struct fid_ep *s, int i, struct fi_rx_attr *a, struct fid_ep **e, void *c)
{
    return no_ctx(s, i, a, e, c);
}

static ssize_t no_senddata(struct fid_ep *e, const void *b, size_t l, void *d, uint64_t data,
                           fi_addr_t a, void *c)
{
    (void) e, (void) b, (void) l, (void) d, (void) data, (void) a, (void) c;
    return -FI_ENOSYS;
}

static ssize_t no_injectdata(struct fid_ep *e, const void *b, size_t l, uint64_t data, fi_addr_t a)
{
    (void) e, (void) b, (void) l, (void) data, (void) a;
    return -FI_ENOSYS;
}

static int no_setname(fid_t fid, void *addr, size_t len)
{
    (void) fid, (void) addr, (void) len;
    return -FI_ENOSYS;
}

static int no_getpeer(struct fid_ep *ep, void *addr, size_t *len)
{
    (void) ep, (void) addr, (void) len;
    return -FI_ENOSYS;
}

static int no_connect(struct fid_ep *ep, const void *addr, const void *param, size_t len)
{
    (void) ep, (void) addr, (void) param, (void) len;
    return -FI_ENOSYS;
}

static int no_listen(struct fid_pep *pep)
{
    (void) pep;
    return -FI_ENOSYS;
}

static int no_accept(struct fid_ep *ep, const void *param, size_t len)
{
    (void) ep, (void) param, (void) len;
    return -FI_ENOSYS;
}

static int no_reject(struct fid_pep *pep, fid_t h, const void *param, size_t len)
{
    (void) pep, (void) h, (void) param, (void) len;
    return -FI_ENOSYS;
}

static int no_shutdown(struct fid_ep *ep, uint64_t flags)
{
    (void) ep, (void) flags;
    return -FI_ENOSYS;
}

static int no_join(struct fid_ep *ep, const void *addr, uint64_t flags, struct fid_mc **mc,
                   void *ctx)
{
    (void) ep, (void) addr, (void) flags, (void) mc, (void) ctx;
    return -FI_ENOSYS;
}

static int ep_getname(fid_t fid, void *addr, size_t *addrlen)
{
    struct td_ep *ep = container_of(fid, struct td_ep, fid.fid);
    size_t have = *addrlen;

    *addrlen = sizeof(ep->addr);
    if (have < sizeof(ep->addr)) {
        return -FI_ETOOSMALL;
    }
    memcpy(addr, &ep->addr, sizeof(ep->addr));
    return 0;
}

static int ep_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
    struct td_ep *ep = container_of(fid, struct td_ep, fid.fid);

    switch (bfid->fclass) {
    case FI_CLASS_AV:
        /* Open MPI <= 1.4-API era passed FI_RECV here; the real one forgives it */
        if (FI_VERSION_LT(ep->dom->api, FI_VERSION(1, 5))) {
            flags &= ~FI_RECV;
        }
        if (0 != flags) {
            return -FI_EBADFLAGS;
        }
        if (NULL != ep->av) {
            return -FI_EINVAL;
        }
        ep->av = container_of(bfid, struct td_av, fid.fid);
        ep->av->refs++;
        return 0;
    case FI_CLASS_CQ: {
        struct td_cq *cq = container_of(bfid, struct td_cq, fid.fid);
        if (flags & ~(FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION)) {
            return -FI_EBADFLAGS;
        }
        if (((flags & FI_TRANSMIT) && NULL != ep->tcq) || ((flags & FI_RECV) && NULL != ep->rcq)) {
            return -FI_EINVAL;
        }
        if ((flags & FI_RECV) && (flags & FI_SELECTIVE_COMPLETION)) {
            return -FI_EOPNOTSUPP;
        }
        if (flags & FI_TRANSMIT) {
            ep->tcq = cq;
            ep->tx_selective = 0 != (flags & FI_SELECTIVE_COMPLETION);
            cq->refs++;
        }
        if (flags & FI_RECV) {
            struct td_ep **eps = realloc(cq->eps, (cq->neps + 1) * sizeof(*eps));
            if (NULL == eps) {
                return -FI_ENOMEM;
            }
            cq->eps = eps;
            cq->eps[cq->neps++] = ep;
            ep->rcq = cq;
            cq->refs++;
        }
        return 0;
    }
    case FI_CLASS_EQ:
        if (NULL != ep->eq) {
            return -FI_EINVAL;
        }
        ep->eq = container_of(bfid, struct td_eq, fid.fid);
        ep->eq->refs++;
        return 0;
    default:
        return -FI_EINVAL;
    }
}

static int ep_control(struct fid *fid, int command, void *arg)
{
    struct td_ep *ep = container_of(fid, struct td_ep, fid.fid);

    (void) arg;
    if (FI_ENABLE != command) {
        return -FI_ENOSYS;
    }
    if (NULL == ep->tcq || NULL == ep->rcq) {
        return -FI_EOPBADSTATE;
    }
    td_control_poll(true);
    if (!ep->dom->dev->link_up) {
        return -FI_ENETDOWN; /* usd_create_qp checks the link */
    }
    ep->enabled = true;
    return 0;
}

static int ep_close(struct fid *fid)
{
    struct td_ep *ep = container_of(fid, struct td_ep, fid.fid);

    for (size_t i = 0; i < ep->rxq_count; i++) {
        struct td_rx *rx = &ep->rxq[(ep->rxq_head + i) % ep->rxq_size];
        for (size_t j = 0; j < rx->cnt; j++) {
            if (NULL != rx->mr[j]) {
                rx->mr[j]->posted--;
            }
        }
    }
    if (NULL != ep->tcq) {
        td_cq_forget_ep(ep->tcq, ep);
        ep->tcq->refs--;
    }
    if (NULL != ep->rcq) {
        td_cq_forget_ep(ep->rcq, ep);
        ep->rcq->refs--;
    }
    if (NULL != ep->av) {
        ep->av->refs--;
    }
    if (NULL != ep->eq) {
        ep->eq->refs--;
    }
    ep->dom->refs--;
    close(ep->sock);
    free(ep->rxq);
    free(ep);
    return 0;
}

static struct fi_ops ep_fi_ops = {
    .size = sizeof(struct fi_ops),
    .close = ep_close,
    .bind = ep_bind,
    .control = ep_control,
};

static struct fi_ops_ep ep_base_ops = {
    .size = sizeof(struct fi_ops_ep),
    .cancel = no_cancel,
    .getopt = no_getopt,
    .setopt = no_setopt,
    .tx_ctx = no_tx_ctx,
    .rx_ctx = no_rx_ctx,
    .rx_size_left = rx_size_left,
    .tx_size_left = tx_size_left,
};

static struct fi_ops_cm ep_cm_ops = {
    .size = sizeof(struct fi_ops_cm),
    .setname = no_setname,
    .getname = ep_getname,
    .getpeer = no_getpeer,
    .connect = no_connect,
    .listen = no_listen,
    .accept = no_accept,
    .reject = no_reject,
    .shutdown = no_shutdown,
    .join = no_join,
};

static struct fi_ops_msg ep_msg_ops = {
    .size = sizeof(struct fi_ops_msg),
    .recv = ep_recv,
    .recvv = ep_recvv,
    .recvmsg = ep_recvmsg,
    .send = ep_send,
    .sendv = ep_sendv,
    .sendmsg = ep_sendmsg,
    .inject = ep_inject,
    .senddata = no_senddata,
    .injectdata = no_injectdata,
};

int td_ep_open(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep_o, void *context)
{
    struct td_domain *dom = container_of(domain, struct td_domain, fid);
    struct td_ep *ep;
    size_t tx_size, rx_size, extra;
    socklen_t alen;

    if (NULL == info || (info->caps & ~TD_CAPS)) {
        return -FI_EBADF;
    }
    if (NULL != info->handle) {
        return -FI_EINVAL; /* passive endpoints are not emulated */
    }
    if (NULL != info->ep_attr && FI_EP_DGRAM != info->ep_attr->type) {
        return -FI_EINVAL;
    }
    if ((info->mode & FI_MSG_PREFIX) && NULL == info->ep_attr) {
        return -FI_EBADF;
    }
    ep = calloc(1, sizeof(*ep));
    if (NULL == ep) {
        return -FI_ENOMEM;
    }
    ep->dom = dom;
    ep->prefix = (info->mode & FI_MSG_PREFIX) ? TD_PREFIX : 0;
    ep->max_msg = td_max_msg_size(FI_VERSION(1, 5), dom->dev, 0 != ep->prefix);
    ep->tx_iov_limit = ep->rx_iov_limit = TD_DFLT_SGE;
    tx_size = rx_size = TD_MAX_CREDITS / TD_DFLT_SGE;
    if (NULL != info->tx_attr) {
        ep->tx_op_flags = info->tx_attr->op_flags;
        ep->tx_iov_limit = info->tx_attr->iov_limit ? info->tx_attr->iov_limit : ep->tx_iov_limit;
        tx_size = info->tx_attr->size ? info->tx_attr->size : tx_size;
    }
    if (NULL != info->rx_attr) {
        ep->rx_iov_limit = info->rx_attr->iov_limit ? info->rx_attr->iov_limit : ep->rx_iov_limit;
        rx_size = info->rx_attr->size ? info->rx_attr->size : rx_size;
    }
    extra = ep->prefix ? 0 : 1; /* a descriptor for the header */
    if (ep->tx_iov_limit > TD_MAX_SGE || ep->rx_iov_limit > TD_MAX_SGE ||
        tx_size * (ep->tx_iov_limit + extra) > TD_MAX_CREDITS ||
        rx_size * (ep->rx_iov_limit + extra) > TD_MAX_CREDITS) {
        free(ep);
        return -FI_EINVAL;
    }
    ep->tx_max = (unsigned) (tx_size * (ep->tx_iov_limit + extra));
    ep->rx_max = (unsigned) (rx_size * (ep->rx_iov_limit + extra));
    ep->rxq_size = ep->rx_max;
    ep->rxq = calloc(ep->rxq_size, sizeof(*ep->rxq));
    ep->sock = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (NULL == ep->rxq || ep->sock < 0) {
        free(ep->rxq);
        free(ep);
        return -FI_ENOMEM;
    }
    {
        /* the adapter lands arrivals in posted receives while the process
         * is away, up to its receive queue's size: give the socket room for
         * that many datagrams (about 4 KiB each as the kernel counts), so
         * that datagrams are lost where the adapter loses them, when no
         * receive is posted (dropped_no_recv), not in a small socket buffer */
        int want = (int) (rx_size * 4096);
        if (0 != setsockopt(ep->sock, SOL_SOCKET, SO_RCVBUFFORCE, &want, sizeof(want))) {
            (void) setsockopt(ep->sock, SOL_SOCKET, SO_RCVBUF, &want, sizeof(want));
        }
    }
    ep->addr.sin_family = AF_INET;
    ep->addr.sin_addr.s_addr = dom->dev->ip_be;
    if (NULL != info->src_addr && info->src_addrlen >= sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *src = info->src_addr;
        ep->addr.sin_port = src->sin_port;
    }
    alen = sizeof(ep->addr);
    if (0 != bind(ep->sock, (struct sockaddr *) &ep->addr, sizeof(ep->addr)) ||
        0 != getsockname(ep->sock, (struct sockaddr *) &ep->addr, &alen)) {
        int err = errno;
        close(ep->sock);
        free(ep->rxq);
        free(ep);
        return -err;
    }
    ep->fid.fid.fclass = FI_CLASS_EP;
    ep->fid.fid.context = context;
    ep->fid.fid.ops = &ep_fi_ops;
    ep->fid.ops = &ep_base_ops;
    ep->fid.cm = &ep_cm_ops;
    ep->fid.msg = &ep_msg_ops;
    if (ep->prefix) {
        info->ep_attr->msg_prefix_size = TD_PREFIX; /* as usdf_ep_dgram_open */
    }
    dom->refs++;
    *ep_o = &ep->fid;
    return 0;
}
