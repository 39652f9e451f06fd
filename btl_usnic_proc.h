/*
 * Modex records: what each process publishes about each of its modules, and
 * how a local module is paired with a peer's module.
 *
 * The record is versioned (USNIC_MODEX_VERSION) and fixed-size; a process
 * publishes an array of them, one per module.  The modex is the only way
 * the key and the secret travel: the network never carries the secret,
 * and a process outside the job never sees either.  Addresses and ports are in
 * network byte order, everything else in host order (peers must share byte
 * order: checked through the `little_endian` byte).
 */
#ifndef BTL_USNIC_PROC_H
#define BTL_USNIC_PROC_H

#include "btl_usnic.h"

#include <stdbool.h>

#include "opal/util/proc.h"

BEGIN_C_DECLS

struct usnic_modex_rec {
    uint8_t version;                     /* USNIC_MODEX_VERSION */
    uint8_t proto_version;               /* USNIC_PROTO_VERSION */
    uint8_t prefixlen;                   /* IPv4 netmask length */
    uint8_t little_endian;               /* 1 on little-endian hosts */
    uint32_t module_id;                  /* src_module hint in its packets: (vpid << 8) | index */
    uint64_t key;                        /* sender_key in every packet it sends: random */
    uint8_t secret[USNIC_SIP_KEY_BYTES]; /* key of the MAC of its packets: random */
    uint32_t ipv4;                       /* interface address, network order */
    uint16_t port[USNIC_NUM_CHANNELS];   /* UDP port per channel, network order */
    uint32_t mtu[USNIC_NUM_CHANNELS];    /* largest datagram per channel */
    uint32_t link_mbps;                  /* link speed, 0 if unknown */
    uint8_t auth;                        /* its btl_usnic_auth (enum usnic_auth_mode) */
    uint8_t checksum;                    /* its btl_usnic_checksum */
    uint16_t live_port;                  /* its liveness socket (btl_usnic_live.h), 0: none */
    uint64_t max_msg_len;                /* largest fragment it sends as chunks */
    uint32_t send_window;                /* its per-peer send window */
    uint32_t rcvbuf;   /* kernel receive buffer of its data channel, 0 = unknown */
    char provider[16]; /* libfabric provider name, NUL-padded */
    char ifname[16];   /* its interface (for messages only), NUL-padded */
    uint16_t tx_port[USNIC_NUM_CHANNELS]; /* the UDP port its datagrams on each channel come
                                             from, network order; 0: port[] */
    uint32_t reserved;                    /* 0 */
};
_Static_assert(sizeof(struct usnic_modex_rec) == 112, "modex record layout");

#define USNIC_MAX_MODULES 64

/* Verbose level of the pairing report (one line per local module, peer
 * module). */
#define USNIC_PAIR_VERBOSE 20

/* The interface name of a peer's record, printable (it came from the
 * network's side of the job: never trusted), "unknown" if empty; returns out. */
#define USNIC_IFNAME_BUF 20
const char *usnic_rec_ifname(const struct usnic_modex_rec *rec, char out[USNIC_IFNAME_BUF]);

/* Publish the records of every module (component init). */
int usnic_modex_publish(void);

/* Fill this module's own record. */
void usnic_modex_fill(usnic_module_t *module, struct usnic_modex_rec *rec);

/*
 * Find the peer module this module should talk to: same provider, same
 * protocol version, and on our subnet; if none is, one the kernel routes to
 * through our interface (btl_usnic_routed_peers, btl_usnic_route.h).
 * Returns the record (pointing into recs) or NULL.  A version/provider
 * mismatch is reported once per job; each decision and its reason at
 * verbose level USNIC_PAIR_VERBOSE.
 */
const struct usnic_modex_rec *usnic_pair(usnic_module_t *module, const opal_proc_t *proc,
                                         const struct usnic_modex_rec *recs, size_t nrecs);

/* Receive a proc's records (caller frees *recs). */
int usnic_modex_recv(const opal_proc_t *proc, struct usnic_modex_rec **recs, size_t *nrecs);

/* Check a received records blob: USNIC_MAX_MODULES records at most. */
bool usnic_modex_valid(const void *data, size_t size);

/*
 * Lazy peers.  The PML adds peers on first send, so a datagram may come
 * from a process of our job that has no endpoint yet.  Its modex record is
 * then fetched without blocking (at most once per process, and only for
 * ranks of our own job: anything else is dropped at once); the module
 * holds the datagram meanwhile, and the progress engine builds the
 * endpoint and hands the held datagrams to the receive path when the
 * record arrives.
 */
/* Start fetching vpid's record (if never asked before): USNIC_DROP_PENDING
 * while it is on its way, USNIC_DROP_SENDER if vpid is not a peer to fetch
 * or was fetched already. */
enum usnic_drop_reason usnic_lookup_start(uint32_t vpid);
/* Anything arrived?  (One load: called on every progress.) */
bool usnic_lookup_ready(void);
/* Build endpoints from the records that arrived and release held datagrams. */
void usnic_lookup_progress(void);
/* Component close: wait (bounded) for fetches still in flight, free it all. */
void usnic_lookup_fini(void);

END_C_DECLS

#endif /* BTL_USNIC_PROC_H */
