/*
 * Modex records: what each process publishes about each of its modules, and
 * how a local module is paired with a peer's module.
 *
 * The record is versioned (USNIC_MODEX_VERSION) and fixed-size; a process
 * publishes an array of them, one per module.  Addresses and ports are in
 * network byte order, everything else in host order (peers must share byte
 * order: checked through the `little_endian` byte).
 */
#ifndef BTL_USNIC_PROC_H
#define BTL_USNIC_PROC_H

#include "btl_usnic.h"

#include "opal/util/proc.h"

BEGIN_C_DECLS

struct usnic_modex_rec {
    uint8_t version;                   /* USNIC_MODEX_VERSION */
    uint8_t proto_version;             /* USNIC_PROTO_VERSION */
    uint8_t prefixlen;                 /* IPv4 netmask length */
    uint8_t little_endian;             /* 1 on little-endian hosts */
    uint32_t module_id;                /* src_module in every packet this module sends */
    uint64_t job_key;                  /* job_key in every packet */
    uint32_t ipv4;                     /* interface address, network order */
    uint16_t port[USNIC_NUM_CHANNELS]; /* UDP port per channel, network order */
    uint32_t mtu[USNIC_NUM_CHANNELS];  /* largest datagram per channel */
    uint32_t link_mbps;                /* link speed, 0 if unknown */
    uint32_t isn;                      /* first sequence number this module sends to anyone */
    uint64_t max_msg_len;              /* largest fragment it sends as chunks */
    uint32_t send_window;              /* its per-peer send window */
    uint32_t rcvbuf;                   /* kernel receive buffer of its data channel, 0 = unknown */
    char provider[16];                 /* libfabric provider name, NUL-padded */
};
_Static_assert(sizeof(struct usnic_modex_rec) == 72, "modex record layout");

#define USNIC_MAX_MODULES 64

/* Publish the records of every module (component init). */
int usnic_modex_publish(void);

/* Fill this module's own record. */
void usnic_modex_fill(usnic_module_t *module, struct usnic_modex_rec *rec);

/*
 * Find the peer module this module should talk to: same provider, same
 * protocol version, same subnet.  Returns the record (pointing into recs) or
 * NULL.  A version/provider mismatch is reported once per job.
 */
const struct usnic_modex_rec *usnic_pair(usnic_module_t *module, const opal_proc_t *proc,
                                         const struct usnic_modex_rec *recs, size_t nrecs);

/* Receive a proc's records (caller frees *recs). */
int usnic_modex_recv(const opal_proc_t *proc, struct usnic_modex_rec **recs, size_t *nrecs);

END_C_DECLS

#endif /* BTL_USNIC_PROC_H */
