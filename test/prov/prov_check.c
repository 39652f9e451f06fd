/*
 * Self-test of the usnic test-double provider (run by t_prov.sh).  Talks to
 * it only through libfabric, as the BTL would, and prints one PASS/FAIL
 * line per check.  Expects FI_PROVIDER_PATH, USNIC_TD_STRICT=error,
 * USNIC_TD_CONTROL (a writable file), USNIC_TD_LOG and USNIC_TD_NUM_VF=4,
 * USNIC_TD_QP_PER_VF=5, USNIC_TD_CQ_PER_VF=7.
 *
 *   prov_check            all checks of this process
 *   prov_check abort      (child) posts an unregistered buffer, must abort
 *   prov_check listing    (child) prints the devices fi_getinfo offers
 *   prov_check noprefix   checks without FI_MSG_PREFIX (USNIC_TD_REQUIRE_PREFIX=0)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#include "btl_usnic_fi_ext.h"

#define PREFIX 64
#define BUFSZ 2048
#define NBUF 16

static int passed, failed;

static void check(int ok, const char *fmt, ...)
{
    va_list ap;

    printf("%s: ", ok ? "PASS" : "FAIL");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    if (ok) {
        passed++;
    } else {
        failed++;
    }
}

#define REQUIRE(expr)                                                                              \
    do {                                                                                           \
        int rc_ = (int) (expr);                                                                    \
        if (0 != rc_) {                                                                            \
            printf("FAIL: %s: %d (%s)\n", #expr, rc_, fi_strerror(-rc_));                          \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* What a correct user of the usnic provider asks for. */
static struct fi_info *good_hints(void)
{
    struct fi_info *h = fi_allocinfo();

    h->caps = FI_MSG;
    h->mode = FI_MSG_PREFIX;
    h->addr_format = FI_SOCKADDR_IN;
    h->ep_attr->type = FI_EP_DGRAM;
    h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED;
    h->fabric_attr->prov_name = strdup("usnic");
    return h;
}

static void control(const char *line)
{
    const char *path = getenv("USNIC_TD_CONTROL");
    FILE *f = fopen(path, "a");

    if (NULL == f) {
        printf("FAIL: cannot append to %s\n", path);
        exit(1);
    }
    fprintf(f, "%s\n", line);
    fclose(f);
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ------------------------------------------------------------------ world */

struct side {
    struct fid_ep *ep;
    struct fid_cq *cq;
    struct sockaddr_in addr;
    fi_addr_t peer; /* the other side, in the AV */
};

static struct fi_info *info;
static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_av *av;
static struct fid_eq *eq, *av_eq;
static struct side A, B;
static uint8_t *bufs;
static struct fid_mr *mr;
static void *desc;

static uint8_t *buf(int i)
{
    return bufs + (size_t) i * BUFSZ;
}

static void open_side(struct side *s, enum fi_cq_format fmt, size_t cq_size)
{
    struct fi_cq_attr ca = {0};
    size_t alen = sizeof(s->addr);

    ca.format = fmt;
    ca.size = cq_size;
    ca.wait_obj = FI_WAIT_NONE;
    REQUIRE(fi_endpoint(domain, info, &s->ep, NULL));
    REQUIRE(fi_cq_open(domain, &ca, &s->cq, NULL));
    REQUIRE(fi_ep_bind(s->ep, &s->cq->fid, FI_TRANSMIT | FI_RECV));
    REQUIRE(fi_ep_bind(s->ep, &av->fid, 0));
    REQUIRE(fi_enable(s->ep));
    REQUIRE(fi_getname(&s->ep->fid, &s->addr, &alen));
}

static void close_side(struct side *s)
{
    REQUIRE(fi_close(&s->ep->fid));
    REQUIRE(fi_close(&s->cq->fid));
}

/* Wait (up to 2 s) for one completion; returns 1, or -FI_EAVAIL with *err
 * filled, or -FI_EAGAIN. */
static ssize_t wait_comp(struct side *s, struct fi_cq_msg_entry *e, struct fi_cq_err_entry *err)
{
    for (int i = 0; i < 2000; i++) {
        ssize_t n = fi_cq_read(s->cq, e, 1);
        if (1 == n) {
            return 1;
        }
        if (-FI_EAVAIL == n) {
            memset(err, 0, sizeof(*err));
            fi_cq_readerr(s->cq, err, 0);
            return -FI_EAVAIL;
        }
        sleep_ms(1);
    }
    return -FI_EAGAIN;
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) {
        p[i] = (uint8_t) (seed + i * 7);
    }
}

static int same(const uint8_t *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] != (uint8_t) (seed + i * 7)) {
            return 0;
        }
    }
    return 1;
}

/* ------------------------------------------------------------- checks */

static void check_getinfo(void)
{
    struct fi_info *h = good_hints(), *fi = NULL;
    int rc = fi_getinfo(FI_VERSION(1, 5), NULL, NULL, 0, h, &fi);
    const struct sockaddr_in *sin;

    check(0 == rc && NULL != fi, "fi_getinfo(1.5) with FI_MSG_PREFIX and FI_MR_LOCAL finds usnic");
    if (0 != rc) {
        exit(1);
    }
    sin = fi->src_addr;
    check(0 == strcmp(fi->fabric_attr->prov_name, "usnic") && FI_EP_DGRAM == fi->ep_attr->type,
          "prov_name usnic, FI_EP_DGRAM");
    check(FI_MSG_PREFIX == (fi->mode & (FI_MSG_PREFIX | FI_CONTEXT)) &&
              64 == fi->ep_attr->msg_prefix_size,
          "mode FI_MSG_PREFIX (no FI_CONTEXT), msg_prefix_size 64");
    check((FI_MR_LOCAL | FI_MR_ALLOCATED) == fi->domain_attr->mr_mode,
          "mr_mode FI_MR_LOCAL|FI_MR_ALLOCATED");
    check(1536 == fi->ep_attr->max_msg_size && 950 == fi->tx_attr->inject_size,
          "max_msg_size 1536 (MTU 1500 - 28 + 64 prefix), inject_size 950");
    check(4 == fi->tx_attr->iov_limit && 4 == fi->rx_attr->iov_limit && 1023 == fi->tx_attr->size &&
              1023 == fi->rx_attr->size,
          "iov_limit 4, tx/rx size 1023");
    check((FI_MSG | FI_SEND | FI_RECV | FI_SOURCE) == fi->caps,
          "caps FI_MSG|FI_SEND|FI_RECV|FI_SOURCE");
    check(FI_SOCKADDR_IN == fi->addr_format && AF_INET == sin->sin_family &&
              htonl(INADDR_LOOPBACK) == sin->sin_addr.s_addr,
          "src_addr 127.0.0.1");
    check(0 == strcmp(fi->fabric_attr->name, "127.0.0.0/8") &&
              0 == strcmp(fi->domain_attr->name, "usnic_0"),
          "fabric 127.0.0.0/8, domain usnic_0 (got %s, %s)", fi->fabric_attr->name,
          fi->domain_attr->name);
    check(FI_THREAD_ENDPOINT == fi->domain_attr->threading &&
              FI_PROGRESS_MANUAL == fi->domain_attr->data_progress,
          "threading FI_THREAD_ENDPOINT, data progress manual");
    info = fi;

    h->mode = FI_CONTEXT;
    fi = NULL;
    rc = fi_getinfo(FI_VERSION(1, 5), NULL, NULL, 0, h, &fi);
    check(-FI_ENODATA == rc, "no FI_MSG_PREFIX in hints->mode: -FI_ENODATA (%d)", rc);
    fi_freeinfo(fi);

    h->mode = FI_CONTEXT | FI_MSG_PREFIX;
    h->domain_attr->mr_mode = 0;
    fi = NULL;
    rc = fi_getinfo(FI_VERSION(1, 5), NULL, NULL, 0, h, &fi);
    check(-FI_ENODATA == rc, "mr_mode without FI_MR_LOCAL: -FI_ENODATA, as the real provider (%d)",
          rc);
    fi_freeinfo(fi);

    /* the 1.4-API query of Open MPI 4.1's usnic BTL */
    h->mode = FI_LOCAL_MR | FI_MSG_PREFIX;
    h->addr_format = FI_SOCKADDR;
    h->tx_attr->iov_limit = 1;
    h->rx_attr->iov_limit = 1;
    fi = NULL;
    rc = fi_getinfo(FI_VERSION(1, 4), NULL, NULL, 0, h, &fi);
    check(0 == rc && FI_MR_BASIC == fi->domain_attr->mr_mode && 1 == fi->tx_attr->iov_limit &&
              4095 == fi->tx_attr->size && 0 == strcmp(fi->fabric_attr->name, "127.0.0.0/8"),
          "API 1.4 with FI_LOCAL_MR: FI_MR_BASIC, iov_limit 1 gives size 4095");
    fi_freeinfo(fi);

    h->tx_attr->iov_limit = 9;
    fi = NULL;
    rc = fi_getinfo(FI_VERSION(1, 4), NULL, NULL, 0, h, &fi);
    check(-FI_ENODATA == rc, "tx iov_limit 9 > 8: -FI_ENODATA");
    fi_freeinfo(fi);
    fi_freeinfo(h);
}

static void open_world(void)
{
    struct fi_eq_attr ea = {0};
    struct fi_av_attr aa = {0};

    REQUIRE(fi_fabric(info->fabric_attr, &fabric, NULL));
    REQUIRE(fi_domain(fabric, info, &domain, NULL));
    ea.wait_obj = FI_WAIT_UNSPEC;
    REQUIRE(fi_eq_open(fabric, &ea, &eq, NULL));
    check(FI_WAIT_FD == ea.wait_obj, "EQ FI_WAIT_UNSPEC becomes FI_WAIT_FD");
    REQUIRE(fi_domain_bind(domain, &eq->fid, 0));
    aa.type = FI_AV_MAP;
    REQUIRE(fi_av_open(domain, &aa, &av, NULL));
    if (posix_memalign((void **) &bufs, 4096, (size_t) NBUF * BUFSZ)) {
        exit(1);
    }
    memset(bufs, 0, (size_t) NBUF * BUFSZ);
    REQUIRE(fi_mr_reg(domain, bufs, (size_t) NBUF * BUFSZ, FI_SEND | FI_RECV, 0, 0, 0, &mr, NULL));
    desc = fi_mr_desc(mr);
    open_side(&A, FI_CQ_FORMAT_MSG, 0);
    open_side(&B, FI_CQ_FORMAT_MSG, 0);
    check(1 == fi_av_insert(av, &B.addr, 1, &A.peer, 0, NULL) &&
              1 == fi_av_insert(av, &A.addr, 1, &B.peer, 0, NULL),
          "fi_av_insert of both endpoints' fi_getname addresses");
}

static void check_traffic(void)
{
    struct fi_cq_msg_entry e;
    struct fi_cq_err_entry err;
    const uint8_t *hdr;
    struct iovec iov[3];
    void *descs[3] = {desc, desc, desc};
    struct fi_msg msg = {0};
    int ok;

    /* fi_send -> fi_recv */
    REQUIRE(fi_recv(B.ep, buf(0), PREFIX + 1472, desc, FI_ADDR_UNSPEC, buf(0)));
    fill(buf(1) + PREFIX, 1000, 3);
    REQUIRE(fi_send(A.ep, buf(1), PREFIX + 1000, desc, A.peer, buf(1)));
    ok = (1 == wait_comp(&A, &e, &err));
    check(ok && e.op_context == buf(1) && (e.flags & FI_SEND) && PREFIX + 1000 == e.len,
          "fi_send completes with len = prefix + payload (%zu)", e.len);
    ok = (1 == wait_comp(&B, &e, &err));
    check(ok && e.op_context == buf(0) && (e.flags & FI_RECV) && PREFIX + 1000 == e.len &&
              same(buf(0) + PREFIX, 1000, 3),
          "fi_recv gets the 1000 bytes after its prefix, len = prefix + payload");
    hdr = buf(0) + PREFIX - 42;
    check(0x08 == hdr[12] && 0x45 == hdr[14] && 17 == hdr[23] &&
              0 == memcmp(hdr + 26, &A.addr.sin_addr, 4) &&
              0 == memcmp(hdr + 34, &A.addr.sin_port, 2),
          "receive prefix holds Ethernet/IPv4/UDP headers naming the sender");

    /* fi_sendv (prefix in iov[0]) -> fi_recvmsg with two buffers */
    iov[0].iov_base = buf(2);
    iov[0].iov_len = PREFIX + 100;
    iov[1].iov_base = buf(3);
    iov[1].iov_len = 300;
    msg.msg_iov = iov;
    msg.desc = descs;
    msg.iov_count = 2;
    msg.context = buf(2);
    REQUIRE(fi_recvmsg(B.ep, &msg, 0));
    iov[0].iov_base = buf(4);
    iov[0].iov_len = PREFIX + 50;
    iov[1].iov_base = buf(5);
    iov[1].iov_len = 200;
    fill(buf(4) + PREFIX, 50, 9);
    fill(buf(5), 200, 9 + 50 * 7);
    REQUIRE(fi_sendv(A.ep, iov, descs, 2, A.peer, buf(4)));
    ok = (1 == wait_comp(&A, &e, &err));
    ok = ok && 1 == wait_comp(&B, &e, &err);
    check(ok && PREFIX + 250 == e.len && same(buf(2) + PREFIX, 100, 9) &&
              same(buf(3), 150, 9 + 100 * 7),
          "fi_sendv of 2 buffers into fi_recvmsg of 2 buffers: 250 bytes scattered");

    /* fi_sendmsg, then fi_inject (no descriptor, no completion) */
    REQUIRE(fi_recv(B.ep, buf(6), PREFIX + 64, desc, FI_ADDR_UNSPEC, buf(6)));
    REQUIRE(fi_recv(B.ep, buf(7), PREFIX + 64, desc, FI_ADDR_UNSPEC, buf(7)));
    iov[0].iov_base = buf(8);
    iov[0].iov_len = PREFIX + 10;
    fill(buf(8) + PREFIX, 10, 77);
    msg.iov_count = 1;
    msg.addr = A.peer;
    msg.context = buf(8);
    REQUIRE(fi_sendmsg(A.ep, &msg, FI_COMPLETION));
    ok = (1 == wait_comp(&A, &e, &err)) && e.op_context == buf(8);
    {
        uint8_t small[PREFIX + 20];
        fill(small + PREFIX, 20, 55);
        REQUIRE(fi_inject(A.ep, small, sizeof(small), A.peer));
    }
    ok = ok && 1 == wait_comp(&B, &e, &err) && same(buf(6) + PREFIX, 10, 77);
    ok =
        ok && 1 == wait_comp(&B, &e, &err) && PREFIX + 20 == e.len && same(buf(7) + PREFIX, 20, 55);
    check(ok, "fi_sendmsg and fi_inject (unregistered stack buffer) delivered");
    check(-FI_EAGAIN == fi_cq_read(A.cq, &e, 1), "fi_inject generates no completion");
}

static void check_readfrom(void)
{
    struct side C;
    struct fi_cq_entry ce;
    fi_addr_t from = 0, cpeer;
    ssize_t n = 0;

    open_side(&C, FI_CQ_FORMAT_CONTEXT, 0);
    if (1 != fi_av_insert(av, &C.addr, 1, &cpeer, 0, NULL)) {
        printf("FAIL: fi_av_insert\n");
        exit(1);
    }
    REQUIRE(fi_recv(C.ep, buf(9), PREFIX + 100, desc, FI_ADDR_UNSPEC, buf(9)));
    REQUIRE(fi_send(A.ep, buf(10), PREFIX + 5, desc, cpeer, NULL));
    for (int i = 0; i < 2000 && 1 != n; i++) {
        n = fi_cq_readfrom(C.cq, &ce, 1, &from);
        sleep_ms(1);
    }
    check(1 == n && from == B.peer,
          "fi_cq_readfrom (FI_CQ_FORMAT_CONTEXT) names the sender's fi_addr");
    {
        struct fi_cq_msg_entry e;
        n = fi_cq_readfrom(A.cq, &e, 1, &from);
        check(-FI_ENOSYS == n,
              "fi_cq_readfrom on a FI_CQ_FORMAT_MSG queue: -FI_ENOSYS, as the real provider");
        while (1 == fi_cq_read(A.cq, &e, 1)) {
        }
    }
    REQUIRE(fi_av_remove(av, &cpeer, 1, 0));
    close_side(&C);
}

static void check_violations(void)
{
    uint8_t *stray = calloc(1, BUFSZ);
    struct fid_mr *mr2;
    uint8_t *other;
    struct fi_cq_msg_entry e;
    struct fi_cq_err_entry err;
    ssize_t rc;

    rc = fi_send(A.ep, stray, PREFIX + 10, NULL, A.peer, NULL);
    check(-FI_EINVAL == rc, "fi_send of an unregistered buffer, desc NULL: -FI_EINVAL (%zd)", rc);
    rc = fi_send(A.ep, buf(1), PREFIX + 10, NULL, A.peer, NULL);
    check(-FI_EINVAL == rc, "fi_send of a registered buffer without its desc: -FI_EINVAL");
    rc = fi_recv(B.ep, stray, PREFIX + 100, desc, FI_ADDR_UNSPEC, NULL);
    check(-FI_EINVAL == rc, "fi_recv of a buffer outside the desc's registration: -FI_EINVAL");
    other = malloc(BUFSZ);
    REQUIRE(fi_mr_reg(domain, other, BUFSZ, FI_RECV, 0, 0, 0, &mr2, NULL));
    rc = fi_recv(B.ep, buf(0), PREFIX + 100, fi_mr_desc(mr2), FI_ADDR_UNSPEC, NULL);
    check(-FI_EINVAL == rc, "fi_recv with another registration's desc: -FI_EINVAL");
    rc = fi_send(A.ep, buf(1), 20, desc, A.peer, NULL);
    check(-FI_EINVAL == rc, "fi_send shorter than the prefix: -FI_EINVAL");
    rc = fi_send(A.ep, buf(1), 1537, desc, A.peer, NULL);
    check(-FI_EINVAL == rc, "fi_send of 1537 bytes > max_msg_size 1536: -FI_EINVAL");
    rc = fi_send(A.ep, buf(1), 1536, desc, A.peer, buf(1));
    check(0 == rc && 1 == wait_comp(&A, &e, &err), "fi_send of exactly max_msg_size is fine");
    rc = fi_inject(A.ep, buf(1), PREFIX + 951, A.peer);
    check(-FI_ENOSPC == rc, "fi_inject of 951 bytes > inject_size 950: -FI_ENOSPC");
    rc = fi_send(A.ep, buf(1), PREFIX + 10, desc, 0xdead, NULL);
    check(-FI_EINVAL == rc, "fi_send to an fi_addr not in the AV: -FI_EINVAL");

    /* deregistering memory under a posted receive */
    REQUIRE(fi_recv(B.ep, other, PREFIX + 100, fi_mr_desc(mr2), FI_ADDR_UNSPEC, other));
    rc = fi_close(&mr2->fid);
    check(-FI_EINVAL == rc, "fi_close(mr) under a posted receive: -FI_EINVAL");
    REQUIRE(fi_send(A.ep, buf(1), PREFIX + 8, desc, A.peer, buf(1)));
    wait_comp(&A, &e, &err);
    wait_comp(&B, &e, &err);
    check(0 == fi_close(&mr2->fid), "fi_close(mr) once the receive completed");
    free(other);
    free(stray);
}

static void check_abort_child(const char *self)
{
    int pfd[2];
    pid_t pid;
    char out[4096] = "";
    size_t got = 0;
    ssize_t n;
    int st = 0;

    if (0 != pipe(pfd)) {
        exit(1);
    }
    pid = fork();
    if (0 == pid) {
        dup2(pfd[1], 2);
        close(pfd[0]);
        unsetenv("USNIC_TD_STRICT"); /* the default: abort */
        execl(self, self, "abort", (char *) NULL);
        _exit(99);
    }
    close(pfd[1]);
    while ((n = read(pfd[0], out + got, sizeof(out) - 1 - got)) > 0) {
        got += (size_t) n;
    }
    out[got] = '\0';
    close(pfd[0]);
    waitpid(pid, &st, 0);
    check(WIFSIGNALED(st) && SIGABRT == WTERMSIG(st),
          "default USNIC_TD_STRICT: an unregistered fi_send aborts the process");
    check(NULL != strstr(out, "USNIC-TD VIOLATION:"), "... after printing \"USNIC-TD VIOLATION:\"");
}

static int child_abort(void)
{
    static uint8_t stray[256];

    if (NULL == freopen("/dev/null", "w", stdout)) {
        return 1;
    }
    setenv("USNIC_TD_VERBOSE", "0", 1);
    check_getinfo();
    open_world();
    fi_send(A.ep, stray, PREFIX + 10, NULL, A.peer, NULL);
    printf("child: not aborted\n");
    return 0;
}

static void check_extension(void)
{
    struct fi_usnic_ops_fabric *fops = NULL;
    struct fi_usnic_ops_av *aops = NULL;
    struct fi_usnic_info ui;
    int metric = 9, rc;
    struct sockaddr_in far = {0};

    rc = fi_open_ops(&fabric->fid, FI_USNIC_FABRIC_OPS_1, 0, (void **) &fops, NULL);
    check(0 == rc && NULL != fops && sizeof(*fops) == fops->size,
          "fi_open_ops(fabric, FI_USNIC_FABRIC_OPS_1)");
    memset(&ui, 0, sizeof(ui));
    rc = fops->getinfo(1, fabric, &ui);
    check(0 == rc && 1 == ui.ui_version && 40000 == ui.ui.v1.ui_link_speed &&
              0 == strcmp(ui.ui.v1.ui_ifname, "lo") &&
              htonl(0xff000000u) == ui.ui.v1.ui_netmask_be && 4 == ui.ui.v1.ui_num_vf &&
              5 == ui.ui.v1.ui_qp_per_vf && 7 == ui.ui.v1.ui_cq_per_vf,
          "getinfo v1: link 40000 Mb/s, lo, /8, num_vf 4, qp/vf 5, cq/vf 7");
    memset(&ui, 0, sizeof(ui));
    rc = fops->getinfo(2, fabric, &ui);
    check(0 == rc && 2 == ui.ui_version && 1500 == ui.ui.v2.ui_mtu && 1 == ui.ui.v2.ui_link_up &&
              0 == strcmp(ui.ui.v2.ui_devname, "usnic_0") && 8 == ui.ui.v2.ui_prefixlen &&
              0x1137 == ui.ui.v2.ui_vendor_id && NULL != ui.ui.v2.ui_caps &&
              NULL != ui.ui.v2.ui_caps[0] && 4095 == ui.ui.v2.ui_max_send_credits,
          "getinfo v2: usnic_0, MTU 1500, link up, Cisco vendor id, caps list");
    if (0 == rc) {
        for (struct fi_usnic_cap **c = ui.ui.v2.ui_caps; NULL != *c; c++) {
            free(*c);
        }
        free(ui.ui.v2.ui_caps);
    }
    check(-FI_EINVAL == fops->getinfo(3, fabric, &ui), "getinfo v3: -FI_EINVAL");
    check(-FI_EINVAL == fi_open_ops(&fabric->fid, "fabric_ops 2", 0, (void **) &fops, NULL),
          "unknown ops name: -FI_EINVAL");
    rc = fi_open_ops(&av->fid, FI_USNIC_AV_OPS_1, 0, (void **) &aops, NULL);
    check(0 == rc && 0 == aops->get_distance(av, &B.addr, &metric) && 0 == metric,
          "AV get_distance of a local endpoint: 0");
    far.sin_family = AF_INET;
    far.sin_addr.s_addr = inet_addr("192.0.2.1");
    check(0 == aops->get_distance(av, &far, &metric) && -1 == metric,
          "AV get_distance outside 127/8: -1 (unreachable)");
}

/* Wait (2 s) for a link event on the domain's EQ; returns its data or -1. */
static int link_event(void)
{
    uint32_t ev;
    struct fi_eq_entry ent;

    for (int i = 0; i < 2000; i++) {
        ssize_t n = fi_eq_read(eq, &ev, &ent, sizeof(ent), 0);
        if (n == (ssize_t) sizeof(ent) && BTL_USNIC_EQ_LINKSTATE == ev && ent.fid == &domain->fid) {
            return (int) ent.data;
        }
        sleep_ms(1);
    }
    return -1;
}

static void check_link(void)
{
    struct fi_cq_msg_entry e;
    struct fi_cq_err_entry err;
    struct fi_usnic_ops_fabric *fops;
    struct fi_usnic_info ui;
    char text[256];
    ssize_t rc;
    int fd = -1;

    check(0 == fi_control(&eq->fid, FI_GETWAIT, &fd) && fd >= 0, "EQ FI_GETWAIT gives an fd");
    control("link usnic_0 down");
    {
        struct pollfd pfd = {fd, POLLIN, 0};
        check(1 == poll(&pfd, 1, 2000),
              "link down wakes a process asleep in poll() on the EQ's fd (watcher thread)");
    }
    check(BTL_USNIC_EQ_LINK_DOWN == link_event(), "link down: EQ event 42, data 1 (link down)");
    REQUIRE(fi_recv(B.ep, buf(0), PREFIX + 100, desc, FI_ADDR_UNSPEC, buf(0)));
    rc = fi_send(A.ep, buf(1), PREFIX + 10, desc, A.peer, buf(1));
    rc = (0 == rc) ? wait_comp(&A, &e, &err) : rc;
    fi_cq_strerror(A.cq, err.prov_errno, err.err_data, text, sizeof(text));
    check(-FI_EAVAIL == rc && err.op_context == buf(1) && FI_EOTHER == err.err &&
              NULL != strstr(text, "link down"),
          "send on a downed link completes in error: \"%s\"", text);
    sleep_ms(20);
    check(-FI_EAGAIN == fi_cq_read(B.cq, &e, 1), "nothing is received while the link is down");
    fi_open_ops(&fabric->fid, FI_USNIC_FABRIC_OPS_1, 0, (void **) &fops, NULL);
    fops->getinfo(1, fabric, &ui); /* v1 has no link state; v2 does */
    memset(&ui, 0, sizeof(ui));
    fops->getinfo(2, fabric, &ui);
    check(0 == ui.ui.v2.ui_link_up, "getinfo v2 reports ui_link_up 0");
    for (struct fi_usnic_cap **c = ui.ui.v2.ui_caps; NULL != c && NULL != *c; c++) {
        free(*c);
    }
    free(ui.ui.v2.ui_caps);

    control("link usnic_0 up");
    check(BTL_USNIC_EQ_LINK_UP == link_event(), "link up: EQ event 42, data 0 (link up)");
    fill(buf(1) + PREFIX, 33, 5);
    REQUIRE(fi_send(A.ep, buf(1), PREFIX + 33, desc, A.peer, buf(1)));
    check(1 == wait_comp(&A, &e, &err) && 1 == wait_comp(&B, &e, &err) && PREFIX + 33 == e.len &&
              same(buf(0) + PREFIX, 33, 5),
          "after link up, traffic resumes");
}

static void check_cq_errors(void)
{
    struct fi_cq_msg_entry e;
    struct fi_cq_err_entry err;
    char text[256];
    const char *s;
    int errs = 0;

    control("cqerr usnic_0 2 send crc");
    sleep_ms(5);
    for (int i = 0; i < 3; i++) {
        REQUIRE(fi_send(A.ep, buf(1), PREFIX + 8, desc, A.peer, buf(1 + i)));
    }
    for (int i = 0; i < 3; i++) {
        ssize_t rc = wait_comp(&A, &e, &err);
        if (-FI_EAVAIL == rc && FI_ECRC == err.prov_errno && FI_ECRC == err.err) {
            errs++;
        }
    }
    s = fi_cq_strerror(A.cq, err.prov_errno, NULL, text, sizeof(text));
    check(2 == errs, "cqerr 2 send crc: 2 of 3 send completions fail with prov_errno FI_ECRC");
    s = fi_cq_strerror(A.cq, FI_ECRC, NULL, text, sizeof(text));
    check(NULL != strstr(s, "CRC"), "fi_cq_strerror decodes it: \"%s\"", s);
    while (1 == fi_cq_read(B.cq, &e, 1)) {
    }

    control("cqerr usnic_0 1 recv trunc");
    sleep_ms(5);
    REQUIRE(fi_recv(B.ep, buf(0), PREFIX + 100, desc, FI_ADDR_UNSPEC, buf(0)));
    REQUIRE(fi_send(A.ep, buf(1), PREFIX + 8, desc, A.peer, buf(1)));
    wait_comp(&A, &e, &err);
    check(-FI_EAVAIL == wait_comp(&B, &e, &err) && FI_ETRUNC == err.prov_errno &&
              err.op_context == buf(0),
          "cqerr 1 recv trunc: the receive completes with prov_errno FI_ETRUNC");

    /* a real truncation: the datagram is longer than the posted buffer */
    REQUIRE(fi_recv(B.ep, buf(0), PREFIX + 16, desc, FI_ADDR_UNSPEC, buf(0)));
    REQUIRE(fi_send(A.ep, buf(1), PREFIX + 100, desc, A.peer, buf(1)));
    wait_comp(&A, &e, &err);
    check(-FI_EAVAIL == wait_comp(&B, &e, &err) && FI_ETRUNC == err.err,
          "a 100-byte datagram into a 16-byte receive: FI_ETRUNC");
}

static void check_queues(void)
{
    struct side S;
    struct fi_cq_msg_entry e[8];
    ssize_t rc = 0;
    int i;

    open_side(&S, FI_CQ_FORMAT_MSG, 4);
    for (i = 0; i < 5 && 0 == rc; i++) {
        rc = fi_send(S.ep, buf(1), PREFIX + 8, desc, A.peer, NULL);
    }
    check(5 == i && -FI_EINVAL == rc, "5th unread completion in a CQ of size 4: overrun refused");
    while (fi_cq_read(S.cq, e, 8) > 0) {
    }
    check(1023 == S.ep->ops->tx_size_left(S.ep) && 1023 == S.ep->ops->rx_size_left(S.ep),
          "tx/rx_size_left 1023 on an idle endpoint");
    close_side(&S);
    sleep_ms(5);
    while (fi_cq_read(B.cq, e, 8) > 0) {
    }
}

static void check_async_av(void)
{
    struct fid_av *av2;
    struct fi_av_attr aa = {0};
    struct fi_eq_attr ea = {0};
    struct fi_eq_entry ent;
    uint32_t ev = 0;
    fi_addr_t a = 0;
    int ctx, rc;

    aa.type = FI_AV_MAP;
    aa.flags = FI_EVENT;
    REQUIRE(fi_av_open(domain, &aa, &av2, NULL));
    rc = fi_av_insert(av2, &B.addr, 1, &a, 0, &ctx);
    check(-FI_ENOEQ == rc, "FI_EVENT AV without an EQ: -FI_ENOEQ");
    ea.wait_obj = FI_WAIT_NONE;
    REQUIRE(fi_eq_open(fabric, &ea, &av_eq, NULL));
    REQUIRE(fi_av_bind(av2, &av_eq->fid, 0));
    rc = fi_av_insert(av2, &B.addr, 1, &a, 0, &ctx);
    check(0 == rc && sizeof(ent) == fi_eq_read(av_eq, &ev, &ent, sizeof(ent), 0) &&
              FI_AV_COMPLETE == ev && &ctx == ent.context && 1 == ent.data && FI_ADDR_NOTAVAIL != a,
          "FI_EVENT AV: insert returns 0, FI_AV_COMPLETE with data 1");
    REQUIRE(fi_close(&av2->fid));
    REQUIRE(fi_close(&av_eq->fid));
}

static void close_world(void)
{
    close_side(&A);
    close_side(&B);
    REQUIRE(fi_close(&mr->fid));
    REQUIRE(fi_close(&av->fid));
    REQUIRE(fi_close(&domain->fid));
    REQUIRE(fi_close(&eq->fid));
    REQUIRE(fi_close(&fabric->fid));
    fi_freeinfo(info);
    free(bufs);
}

static void check_log(void)
{
    const char *path = getenv("USNIC_TD_LOG");
    char line[2048];
    int counters = 0, violations = 0;
    FILE *f = NULL != path ? fopen(path, "r") : NULL;

    while (NULL != f && NULL != fgets(line, sizeof(line), f)) {
        if (NULL != strstr(line, "registrations=2 deregistrations=2")) {
            counters++;
        }
        if (0 == strncmp(line, "USNIC-TD VIOLATION:", 19)) {
            violations++;
        }
    }
    if (NULL != f) {
        fclose(f);
    }
    check(counters >= 1, "USNIC_TD_LOG has the domain's counters (registrations=2 ...)");
    check(violations >= 9, "USNIC_TD_LOG has the violation lines (%d)", violations);
}

static int child_listing(void)
{
    struct fi_info *h = good_hints(), *fi = NULL, *p;

    if (0 == fi_getinfo(FI_VERSION(1, 5), NULL, NULL, 0, h, &fi)) {
        for (p = fi; NULL != p; p = p->next) {
            if (FI_EP_DGRAM == p->ep_attr->type) {
                printf("%s %s %zu\n", p->domain_attr->name, p->fabric_attr->name,
                       p->ep_attr->max_msg_size);
            }
        }
    }
    fi_freeinfo(fi);
    fi_freeinfo(h);
    return 0;
}

/* Without FI_MSG_PREFIX (only with USNIC_TD_REQUIRE_PREFIX=0): the real
 * provider's other mode, payload only, one descriptor less. */
static int run_noprefix(void)
{
    struct fi_info *h = good_hints();
    struct fi_cq_msg_entry e;
    struct fi_cq_err_entry err;
    int rc, ok;

    h->mode = 0;
    rc = fi_getinfo(FI_VERSION(1, 5), NULL, NULL, 0, h, &info);
    fi_freeinfo(h);
    check(0 == rc && 0 == (info->mode & FI_MSG_PREFIX) && 0 == info->ep_attr->msg_prefix_size &&
              1472 == info->ep_attr->max_msg_size && 3 == info->tx_attr->iov_limit,
          "no FI_MSG_PREFIX: prefix 0, max_msg_size 1472, iov_limit 3");
    if (0 != rc) {
        return 1;
    }
    open_world();
    fill(buf(1), 1472, 11);
    REQUIRE(fi_recv(B.ep, buf(0), 1472, desc, FI_ADDR_UNSPEC, buf(0)));
    REQUIRE(fi_send(A.ep, buf(1), 1472, desc, A.peer, buf(1)));
    ok = (1 == wait_comp(&A, &e, &err)) && 1472 == e.len;
    ok = ok && 1 == wait_comp(&B, &e, &err) && 1472 == e.len && same(buf(0), 1472, 11);
    check(ok, "no FI_MSG_PREFIX: 1472 bytes from offset 0, completion len 1472");
    check(-FI_EINVAL == fi_send(A.ep, buf(1), 1473, desc, A.peer, NULL),
          "no FI_MSG_PREFIX: 1473 bytes > max_msg_size refused");
    close_world();
    printf("prov_check noprefix: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && 0 == strcmp(argv[1], "noprefix")) {
        return run_noprefix();
    }
    if (argc > 1 && 0 == strcmp(argv[1], "abort")) {
        return child_abort();
    }
    if (argc > 1 && 0 == strcmp(argv[1], "listing")) {
        return child_listing();
    }
    check_getinfo();
    open_world();
    check_traffic();
    check_readfrom();
    check_violations();
    check_abort_child(argv[0]);
    check_extension();
    check_link();
    check_cq_errors();
    check_queues();
    check_async_av();
    close_world();
    check_log();
    printf("prov_check: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
