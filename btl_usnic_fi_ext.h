/*
 * The usnic provider's libfabric extension (fi_open_ops on a fabric or an
 * address vector), for the BTL and for the test-double provider in
 * test/prov/.
 *
 * Where the system has <rdma/fi_ext_usnic.h> (a libfabric built with the
 * usnic provider installs it), that header is used as it is.  Elsewhere the
 * declarations below stand in for it: the same names, types, sizes, field
 * offsets and constant values, as documented in fi_usnic(7) and as the
 * provider's header lays them out (every structure but the ops tables is
 * packed).  test/prov/abi_check.sh compares the two field by field.
 *
 * Define BTL_USNIC_FI_EXT_OWN before including this header to use our
 * declarations even where the system header exists (the ABI check does).
 */
#ifndef BTL_USNIC_FI_EXT_H
#define BTL_USNIC_FI_EXT_H

#include <stdint.h>
#include <net/if.h>

#include <rdma/fabric.h>

#if !defined(BTL_USNIC_FI_EXT_OWN) && defined(__has_include)
#if __has_include(<rdma/fi_ext_usnic.h>)
#include <rdma/fi_ext_usnic.h>
#define BTL_USNIC_FI_EXT_SYSTEM 1
#endif
#endif

#ifndef BTL_USNIC_FI_EXT_SYSTEM

/* The reliable-UDP protocol number of the usnic provider's RDM endpoints. */
#define FI_PROTO_RUDP (100U | FI_PROV_SPECIFIC)

/* Newest version of struct fi_usnic_info the provider fills in. */
#define FI_EXT_USNIC_INFO_VERSION 2

/* Room for a usNIC device name ("usnic_0") in version 2. */
#define FI_EXT_USNIC_MAX_DEVNAME 16

/* One named capability of the adapter (version 2: ui_caps). */
struct fi_usnic_cap {
    const char *uc_capability;
    int uc_present;
} __attribute__((packed));

/* Version 1: link speed (Mb/s), IPv4 netmask (network order), Linux
 * interface, and the SR-IOV resources of the adapter's VFs. */
struct fi_usnic_info_v1 {
    uint32_t ui_link_speed;
    uint32_t ui_netmask_be;
    char ui_ifname[IFNAMSIZ];

    uint32_t ui_num_vf;
    uint32_t ui_qp_per_vf;
    uint32_t ui_cq_per_vf;
} __attribute__((packed));

/* Version 2 begins with the version 1 fields, in the same places. */
struct fi_usnic_info_v2 {
    uint32_t ui_link_speed;
    uint32_t ui_netmask_be;
    char ui_ifname[IFNAMSIZ];
    unsigned ui_num_vf;
    unsigned ui_qp_per_vf;
    unsigned ui_cq_per_vf;

    char ui_devname[FI_EXT_USNIC_MAX_DEVNAME];
    uint8_t ui_mac_addr[6];
    uint8_t ui_pad0[2]; /* keeps the libfabric 1.3 layout */

    uint32_t ui_ipaddr_be;
    uint32_t ui_prefixlen;
    uint32_t ui_mtu;
    uint8_t ui_link_up; /* 1 up, 0 down */
    uint8_t ui_pad1[3]; /* keeps the libfabric 1.3 layout */

    uint32_t ui_vendor_id;
    uint32_t ui_vendor_part_id;
    uint32_t ui_device_id;
    char ui_firmware[64];

    unsigned ui_intr_per_vf;
    unsigned ui_max_cq;
    unsigned ui_max_qp;

    unsigned ui_max_cqe;
    unsigned ui_max_send_credits;
    unsigned ui_max_recv_credits;

    const char *ui_nicname;
    const char *ui_pid;

    /* NULL-terminated array; the provider allocates it (calloc) and the
     * caller owns it. */
    struct fi_usnic_cap **ui_caps;
} __attribute__((packed));

/* Version-tagged answer of the fabric getinfo extension.  The 4 pad bytes
 * put the union at offset 8 whatever the compiler (libfabric >= 1.4). */
struct fi_usnic_info {
    uint32_t ui_version;
    uint8_t ui_pad0[4];
    union {
        struct fi_usnic_info_v1 v1;
        struct fi_usnic_info_v2 v2;
    } ui;
} __attribute__((packed));

/* fi_open_ops(&fabric->fid, FI_USNIC_FABRIC_OPS_1, 0, &ops, NULL) */
#define FI_USNIC_FABRIC_OPS_1 "fabric_ops 1"
struct fi_usnic_ops_fabric {
    size_t size;
    /* version 1 or 2; returns 0 or a negative fi_errno */
    int (*getinfo)(uint32_t version, struct fid_fabric *fabric, struct fi_usnic_info *info);
};

/* fi_open_ops(&av->fid, FI_USNIC_AV_OPS_1, 0, &ops, NULL) */
#define FI_USNIC_AV_OPS_1 "av_ops 1"
struct fi_usnic_ops_av {
    size_t size;
    /* *metric: -1 unreachable, 0 on a directly attached subnet, 1 routed */
    int (*get_distance)(struct fid_av *av, void *addr, int *metric);
};

#endif /* !BTL_USNIC_FI_EXT_SYSTEM */

/*
 * Link-state events on the EQ bound to a domain (fi_domain_bind).  Not part
 * of libfabric's header: libfabric 1.17's usnic provider never writes such
 * an event, but the usnic BTL of Open MPI 4.1 waits for event 42 carrying
 * the usnic_direct link codes (0 up, 1 down) in fi_eq_entry.data, and the
 * test double (test/prov/) delivers exactly that.
 */
#define BTL_USNIC_EQ_LINKSTATE 42
#define BTL_USNIC_EQ_LINK_UP 0
#define BTL_USNIC_EQ_LINK_DOWN 1

#endif /* BTL_USNIC_FI_EXT_H */
