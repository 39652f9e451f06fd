/*
 * The libfabric backend's own state of a module (module->ofi), shared by
 * btl_usnic_chan_ofi.c (endpoints, registrations, data path) and
 * btl_usnic_ofi_ext.c (the usnic provider's extension: device facts, the
 * resource check, link events).
 */
#ifndef BTL_USNIC_OFI_H
#define BTL_USNIC_OFI_H

#include <net/if.h>

#include <rdma/fi_eq.h>

#include "opal/mca/mpool/mpool.h"

#include "btl_usnic.h"
#include "btl_usnic_fi_ext.h"
#include "btl_usnic_ofi_dl.h" /* last: names the loaded libfabric functions */

struct usnic_filters;

/* A chunk of segment memory, registered with the module's domain when the
 * provider wants local registrations (FI_MR_LOCAL). */
struct usnic_ofi_chunk {
    uint8_t *base;
    size_t len;
    struct fid_mr *mr; /* NULL: not registered (any more) */
    void *desc;        /* fi_mr_desc(mr) */
};

/* What the usnic extension (fi_usnic_ops_fabric getinfo) says about a VF. */
struct usnic_vf_facts {
    bool known;  /* the extension answered */
    int version; /* 1 or 2 */
    char ifname[IFNAMSIZ];
    uint32_t link_mbps;
    uint32_t mtu; /* 0: unknown (version 1) */
    uint32_t prefixlen;
    bool link_up; /* version 1: assumed up */
    unsigned num_vf, qp_per_vf, cq_per_vf;
};

struct usnic_ofi_state {
    /* First member: the segment lists' memory pool is this state.  Every
     * chunk it hands out is registered (mr_local); chunks outlive the
     * domain (the lists are destroyed after it), so the pool frees the
     * state when the last chunk goes after the release. */
    mca_mpool_base_module_t mpool;
    usnic_module_t *module;
    bool mr_local; /* FI_MR_LOCAL: every posted buffer registered, its desc passed */
    bool released; /* the domain is closed */
    struct usnic_ofi_chunk *chunks;
    int n_chunks, cap_chunks;
    int live_chunks; /* allocated and not yet freed by the free lists */
    bool cq_err_reported;

    struct usnic_vf_facts vf; /* usnic provider only */
    struct fid_eq *eq;        /* link events (bound to the domain), or NULL */
    uint64_t next_eq_poll;    /* usnic_now_us() of the next look at the EQ */
    uint64_t down_since;      /* usnic_now_us() when the link went down */
};

/* btl_usnic_ofi_ext.c */
/* Ask the usnic extension of fi's fabric about the VF (fills *vf; vf->known
 * false when the provider has no extension). */
void usnic_ofi_vf_query(const struct fi_info *fi, struct usnic_vf_facts *vf);
/* Is this VF one to use: if_include/if_exclude against the usnic device
 * name, its Linux interface and its address; link up.  Says why not. */
bool usnic_ofi_vf_usable(const char *dev, const struct usnic_vf_facts *vf, uint32_t addr,
                         const struct usnic_filters *flt);
/* Enough VFs, QPs and CQs for the processes of this host?  Reports (once)
 * what to raise and returns false otherwise. */
bool usnic_ofi_vf_resources_ok(const char *dev, const char *fabric_name,
                               const struct usnic_vf_facts *vf);
/* Open an EQ on the module's fabric and bind it to its domain (link events). */
void usnic_ofi_events_open(usnic_module_t *module);
/* Read the EQ (at most every millisecond): link down/up. */
void usnic_ofi_events_poll(usnic_module_t *module);

#endif /* BTL_USNIC_OFI_H */
