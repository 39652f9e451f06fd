/*
 * usnic-td: a conformance test double of libfabric's "usnic" provider,
 * loaded as an external provider (libusnic-fi.so, FI_PROVIDER_PATH).  It
 * offers what the Cisco usnic provider offers to FI_EP_DGRAM users, with
 * the same attributes, and checks the caller against that provider's
 * contract (FI_MR_LOCAL, FI_MSG_PREFIX, sizes), while the data travel over
 * kernel UDP sockets on 127.0.0.0/8.  See README.md for what is emulated.
 */
#ifndef USNIC_TD_H
#define USNIC_TD_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/uio.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/providers/fi_prov.h>

#include "btl_usnic_fi_ext.h"

#define TD_PROV_NAME "usnic"
#define TD_PROV_VERSION FI_VERSION(1, 0)

/* Facts of the real provider (libfabric 1.17, prov/usnic). */
#define TD_PREFIX 64         /* msg_prefix_size: USDF_HDR_BUF_ENTRY */
#define TD_ETH_HDR 14        /* struct ether_header */
#define TD_UDP_HDR 42        /* struct usd_udp_hdr: Ethernet + IPv4 + UDP */
#define TD_SEND_MAX_COPY 992 /* USD_SEND_MAX_COPY */
#define TD_INJECT_SIZE (TD_SEND_MAX_COPY - TD_UDP_HDR)
#define TD_DFLT_SGE 4        /* USDF_DGRAM_DFLT_SGE: default iov_limit */
#define TD_MAX_SGE 8         /* USDF_DGRAM_MAX_SGE */
#define TD_MAX_CREDITS 4095  /* uda_max_send_credits / uda_max_recv_credits */
#define TD_MAX_CQE 65535     /* uda_max_cqe */
#define TD_MR_CNT 65535      /* USDF_MR_CNT */
#define TD_EQ_DFLT_SIZE 1024 /* usdf_eq_open default */
#define TD_CAPS (FI_MSG | FI_SOURCE | FI_SEND | FI_RECV)
#define TD_SUPP_MODE (FI_LOCAL_MR | FI_MSG_PREFIX)
#define TD_VENDOR_CISCO 0x1137
#define TD_DEVICE_ID 0x12c /* VIC 1340 */

#define TD_MAX_DEVS 8

enum td_strict {
    TD_WARN,
    TD_ERROR,
    TD_ABORT
};

/* What an injected completion error looks like. */
enum td_errkind {
    TD_ERR_CRC,
    TD_ERR_TRUNC,
    TD_ERR_TIMEOUT,
    TD_ERR_INTERNAL
};
enum td_errdir {
    TD_DIR_SEND,
    TD_DIR_RECV,
    TD_DIR_ANY
};

struct td_dev {
    char name[FI_EXT_USNIC_MAX_DEVNAME];
    char ifname[IFNAMSIZ];
    uint32_t ip_be, mask_be, prefixlen, mtu, speed;
    uint8_t mac[6];
    bool link_up;
    bool listed; /* link was up when this process first looked (usd_open) */
    unsigned cqerr_left;
    enum td_errkind cqerr_kind;
    enum td_errdir cqerr_dir;
};

struct td_config {
    int ndev;
    struct td_dev dev[TD_MAX_DEVS];
    unsigned num_vf, qp_per_vf, cq_per_vf;
    enum td_strict strict;
    bool require_prefix;
    bool linkdown_error; /* sends on a downed link complete in error (else: dropped) */
    bool desc_check;
    bool verbose;
    const char *log_path;
    const char *control_path;
};

struct td_counters {
    uint64_t mr_reg, mr_dereg, sends, injects, recvs_posted, send_comps, recv_comps;
    uint64_t bytes_sent, bytes_recv, prefix_ops, violations, eagain, enospc;
    uint64_t drop_linkdown, drop_norecv, trunc, injected_errs, av_inserts;
};

struct td_fabric {
    struct fid_fabric fid;
    struct td_dev *dev;
    int refs;
};

struct td_mr;
struct td_eq;

struct td_domain {
    struct fid_domain fid;
    struct td_fabric *fab;
    struct td_dev *dev;
    struct fi_info *info;
    uint32_t api;
    int refs;
    struct td_eq *eq;
    struct td_mr *mrs;
    struct td_counters c;
    struct td_domain *next; /* td_domains */
};

struct td_mr {
    struct fid_mr fid;
    struct td_domain *dom;
    uintptr_t base;
    size_t len;
    unsigned posted; /* receives posted into it, not yet completed */
    struct td_mr *next;
};

struct td_av_entry {
    struct sockaddr_in sin;
    struct td_av_entry *next;
};

struct td_av {
    struct fid_av fid;
    struct td_domain *dom;
    int refs;
    bool async;
    struct td_eq *eq;
    struct td_av_entry *entries;
};

struct td_ep;

struct td_cq_ent {
    void *ctx;
    uint64_t flags;
    size_t len;
    fi_addr_t src;
    int err, prov_errno;
    struct td_ep *ep; /* whose credits it holds, NULL once that one closed */
    unsigned credits;
    bool is_send;
    const char *why;
};

struct td_cq {
    struct fid_cq fid;
    struct td_domain *dom;
    enum fi_cq_format fmt;
    size_t size, head, count;
    struct td_cq_ent *ring;
    int refs;
    struct td_ep **eps; /* endpoints whose receives complete here */
    size_t neps;
    int last_prov_errno;
    char last_why[160];
};

struct td_rx {
    void *ctx;
    struct iovec iov[TD_MAX_SGE];
    struct td_mr *mr[TD_MAX_SGE];
    size_t cnt;
    unsigned credits;
};

struct td_ep {
    struct fid_ep fid;
    struct td_domain *dom;
    int sock;
    struct sockaddr_in addr;
    struct td_cq *tcq, *rcq;
    struct td_av *av;
    struct td_eq *eq;
    bool enabled, tx_selective;
    size_t prefix, max_msg, tx_iov_limit, rx_iov_limit;
    unsigned tx_max, tx_used, rx_max, rx_used;
    uint64_t tx_op_flags;
    struct td_rx *rxq; /* ring of posted receives */
    size_t rxq_size, rxq_head, rxq_count;
};

struct td_eq_ev {
    uint32_t event;
    bool is_err;
    size_t len;
    union {
        struct fi_eq_entry ent;
        struct fi_eq_err_entry err;
    } u;
};

struct td_eq {
    struct fid_eq fid;
    struct td_fabric *fab;
    pthread_mutex_t lock;
    struct td_eq_ev *ring;
    size_t size, head, count;
    int fd; /* eventfd, FI_WAIT_FD only */
    bool wait_fd;
    int refs;
};

extern struct td_config td;
extern pthread_mutex_t td_lock;
extern struct td_domain *td_domains;
extern struct fi_provider td_prov;

/* usnic_td.c: configuration, violations, control file, EQ, fabric */
void td_config_load(void);
int td_violation(struct td_domain *dom, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void td_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void td_control_poll(bool force);
int td_eq_post(struct td_eq *eq, uint32_t event, const void *entry, size_t len, bool is_err);
int td_eq_open(struct fid_fabric *fabric, struct fi_eq_attr *attr, struct fid_eq **eq,
               void *context);
struct td_dev *td_dev_by_name(const char *name);
bool td_addr_allowed(uint32_t ip_be);
bool td_mr_mode_ok(uint32_t version, const struct fi_info *info);
size_t td_max_msg_size(uint32_t version, const struct td_dev *d, bool prefix);
int td_take_cqerr(struct td_dev *dev, bool is_send, int *prov_errno, const char **why);

/* usnic_td_dom.c: domain, MR, AV, CQ */
int td_domain_open(struct fid_fabric *fabric, struct fi_info *info, struct fid_domain **dom,
                   void *context);
struct td_mr *td_mr_find(struct td_domain *dom, void *desc, const void *buf, size_t len,
                         const char *what, int *ret);
struct td_av_entry *td_av_check(struct td_av *av, fi_addr_t addr);
fi_addr_t td_av_lookup_sin(struct td_av *av, const struct sockaddr_in *sin);
int td_cq_push(struct td_cq *cq, const struct td_cq_ent *ent);
void td_cq_forget_ep(struct td_cq *cq, struct td_ep *ep);

/* usnic_td_ep.c: endpoint and data path */
int td_ep_open(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep, void *context);
void td_ep_progress(struct td_ep *ep);

#endif /* USNIC_TD_H */
