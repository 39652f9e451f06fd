/*
 * Liveness independent of MPI progress (ARCHITECTURE.md, decision 7).
 *
 * A peer that holds our data unacknowledged may simply be computing outside
 * MPI for minutes: its progress engine does not run, so nothing it owes us
 * is acknowledged.  To tell such a peer from a dead host or a cut link,
 * every process runs a small responder thread with one kernel UDP socket
 * per module (on the module's interface address; its port travels in the
 * modex record).  The thread answers liveness probes at once, whatever the
 * process's main thread is doing, and sends the probes this process wants.
 *
 * The progress engine asks for probes (usnic_live_watch) toward a peer that
 * has acknowledged nothing for a while although data is outstanding; a
 * peer is declared dead only when neither ACKs nor probe replies came for
 * btl_usnic_peer_timeout seconds.
 *
 * Wire format (40 bytes, host byte order like the rest of the protocol):
 *
 *    0      2       3      4               8
 *    +------+-------+------+---------------+
 *    |magic |version| type |  zero         |
 *    +------+-------+------+---------------+
 *    | to_key: the module it is for        |  8
 *    | from_key: the module that sent it   | 16
 *    | nonce: random per probe, echoed     | 24
 *    | mac: SipHash-2-4 (below)            | 32
 *    +-------------------------------------+ 40
 *
 * Both MACs are computed with the secret of the module probed (known to
 * the job only, through the modex).  A reply's covers bytes 0..31, the
 * probe's nonce included, so a reply can be neither forged nor replayed by
 * someone who reads the traffic.  A probe's covers bytes 0..31 and the
 * address and port it was sent from (usnic_sip_request_mac, protocol
 * version 9): the responder answers only a process that knows its secret,
 * at the address that process sent from, so nobody can aim replies at a
 * third party, not even with a replayed genuine probe.  Replies are
 * rate-limited, and forgeries are refused before they count against that
 * limit.  Everything that fails a check is dropped and counted (forgeries
 * also as live_forged).
 */
#ifndef BTL_USNIC_LIVE_H
#define BTL_USNIC_LIVE_H

#include <stdint.h>

#include "btl_usnic.h"

BEGIN_C_DECLS

#define USNIC_LIVE_MAGIC 0x4c55u /* "UL" on little-endian hosts */
#define USNIC_LIVE_PROBE 1
#define USNIC_LIVE_REPLY 2

struct usnic_live_pkt {
    uint16_t magic;
    uint8_t version; /* USNIC_PROTO_VERSION */
    uint8_t type;    /* USNIC_LIVE_PROBE or USNIC_LIVE_REPLY */
    uint32_t zero;
    uint64_t to_key;
    uint64_t from_key;
    uint64_t nonce;
    uint8_t mac[8];
};
_Static_assert(sizeof(struct usnic_live_pkt) == 40, "liveness packet layout");

struct mca_btl_base_endpoint_t;

/* Open the liveness socket of every module (component init, before the
 * modex is published: module->live_port).  A module whose socket cannot be
 * opened publishes port 0: its peers then rely on ACKs alone. */
void usnic_live_open(void);

/* Is the thread running (it also sends trains held too long)? */
bool usnic_live_flusher(void);

/* A held train (btl_usnic_tx_coalesce) left open longer than this is sent
 * by the thread; it looks every millisecond while one may be held. */
#define USNIC_LIVE_FLUSH_US 500u

/* The module's held trains are the thread's to send when stale (kernel
 * backend open), or no longer (release: after its last train is sent). */
void usnic_live_flush_register(usnic_module_t *module);
void usnic_live_flush_unregister(usnic_module_t *module);

/* A train was just held: make the thread look within a millisecond. */
void usnic_live_flush_arm(void);

/* The kernel backend's side (btl_usnic_chan_kern.c), called by the thread
 * under its mutex: send module's held train if it was held since before
 * now - after_us and nobody took it over.  Returns 1 if a train is still
 * held (too fresh), else 0. */
int usnic_kern_flush_held(usnic_module_t *module, uint64_t now, uint64_t after_us);

/* Start the responder thread (after usnic_live_open). */
int usnic_live_start(void);

/* Stop the thread and close the sockets (component close). */
void usnic_live_stop(void);

/* Does the peer of ep answer probes (it published a liveness port)? */
bool usnic_live_possible(const struct mca_btl_base_endpoint_t *ep);

/* Probe ep's peer from now on (until usnic_live_quiet); idempotent. */
void usnic_live_watch(struct mca_btl_base_endpoint_t *ep);

/* Stop probing ep's peer (it acknowledges again). */
void usnic_live_quiet(struct mca_btl_base_endpoint_t *ep);

/* When the peer of ep last answered a probe (usnic_now_us(); 0: never). */
uint64_t usnic_live_heard(const struct mca_btl_base_endpoint_t *ep);

/* Forget ep (endpoint destroyed). */
void usnic_live_forget(struct mca_btl_base_endpoint_t *ep);

/* Counters of module index for its stats line. */
void usnic_live_counts(int index, uint64_t *probes_tx, uint64_t *replies_rx, uint64_t *replies_tx,
                       uint64_t *drops, uint64_t *forged);

END_C_DECLS

#endif /* BTL_USNIC_LIVE_H */
