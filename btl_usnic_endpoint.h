/*
 * Per-peer state: one endpoint per (local module, peer process) pair.
 */
#ifndef BTL_USNIC_ENDPOINT_H
#define BTL_USNIC_ENDPOINT_H

#include "btl_usnic.h"
#include "btl_usnic_part.h"
#include "btl_usnic_proc.h"
#include "btl_usnic_reasm.h"
#include "btl_usnic_rel.h"

BEGIN_C_DECLS

struct mca_btl_base_endpoint_t {
    opal_list_item_t super;      /* on module->endpoints */
    opal_list_item_t sendq_item; /* on module->sendq_eps while sendq is not empty */
    opal_list_item_t ack_item;   /* on module->ack_eps while an ACK may be owed */
    opal_list_item_t timer_item; /* on module->timer_eps while its timer may be armed */
    bool on_sendq_list;
    bool on_ack_list;
    bool on_timer_list;
    uint64_t timer_deadline; /* usnic_rel_tx_timer() is due then (0: no timer) */
    uint32_t ping_ts;        /* a ping the core asked for and not sent yet (0: none) */
    uint8_t ping_lane;       /* its channel */

    usnic_module_t *module;
    opal_proc_t *proc;
    struct usnic_modex_rec remote;              /* the peer module's record */
    fi_addr_t addr[USNIC_NUM_CHANNELS];         /* libfabric: the peer's channels in our AV */
    struct sockaddr_in sin[USNIC_NUM_CHANNELS]; /* the peer's channels */
    int conn_fd[USNIC_NUM_CHANNELS];   /* kernel backend: our socket connected to each, -1: none */
    bool conn_due;                     /* backend->peer_connect still to run (first send) */
    struct usnic_sip_key tx_mac_key;   /* MACs of our packets to the peer */
    struct usnic_sip_key rx_mac_key;   /* MACs of the peer's packets to us */
    struct usnic_sip_memo tx_mac_memo; /* the MAC input's first words, sending */
    struct usnic_sip_memo rx_mac_memo; /* and receiving (usnic_siphash24_memo) */
    uint8_t auth;         /* MAC both ways: the stronger of both sides' btl_usnic_auth */
    bool crc;             /* CRC32C both ways: either side's btl_usnic_checksum */
    uint32_t ack_ts_last; /* ts of our last ACK packet to it: each is newer */

    /* payload limits toward this peer: both sides' datagram sizes respected */
    uint32_t frag_max;       /* FRAG payload on the data channel */
    uint32_t prio_frag_max;  /* FRAG payload on the priority channel */
    uint32_t chunk_max;      /* CHUNK payload */
    uint32_t put_max;        /* PUT payload */
    uint64_t inflight_bytes; /* bytes sent and not yet acknowledged */
    uint64_t inflight_limit; /* at most this many: half the peer's socket buffer */
    uint64_t allow_floor;    /* the peer's allowance (rel.tx.allow) never goes below this */
    uint32_t allow_epoch;    /* the last module->allow.epoch in which the peer sent us data */

    struct usnic_rel rel;                 /* windows, ACK state (btl_usnic_rel.h) */
    struct usnic_reasm_table reasm;       /* fragments being reassembled from this peer */
    struct usnic_reasm_alloc reasm_alloc; /* its buffers: module->big_bufs */

    opal_list_t sendq;    /* fragments not yet fully handed to the wire, in order */
    uint32_t next_msg_id; /* msg_id of our next PML fragment (FRAG or CHUNK) */
    uint32_t next_put_id; /* msg_id of our next PUT */

    uint64_t last_progress_us; /* last time the peer acknowledged something new, or
                                  our window went from empty to busy */
    bool dead;                 /* reported failed; nothing more is sent */
    uint8_t path_state;        /* USNIC_PATH_*: the connectivity check (btl_usnic_path.h) */
    uint32_t path_handle;      /* its handle (btl_usnic_cc.h), 0: none */
    bool path_held;            /* a send waited for that check (counted in path_held) */
    bool path_waited;          /* a sending call waited for it (usnic_path_before_send) */
    uint64_t path_asked;       /* usnic_now_us() when it was asked for */
    uint32_t path_full;        /* the pair's datagram size from both modex records */
    uint32_t path_size;        /* what the check proved (0: not checked) */
    int live_slot;             /* its entry in the liveness table (btl_usnic_live.h), -1: none */
    bool live_watched;         /* its peer is being probed */
    uint64_t detour_until;     /* usnic_now_us() until which the peer's datagrams come (and ours
                                  go) through another module: its link or ours is down */
    /* the path while the job runs (usnic_path_stuck): */
    uint32_t stuck_seq;      /* the oldest segment at the last retransmission timeout */
    uint64_t stuck_since;    /* that segment's first timeout (0: none yet) */
    uint32_t recheck_handle; /* a check of the path again, under way (0: none) */
    uint16_t recheck_epoch;  /* its number (btl_usnic_cc.h: epoch) */
    uint64_t recheck_after;  /* no new one before this time */
    uint32_t recheck_full;   /* the size it asks about */
    /* the path carries less than path_full: when to try the full size
     * again (btl_usnic_connectivity_raise_after; 0: not now) */
    uint64_t raise_at;
    /* the path shrank while the job ran: datagrams larger than this (cut
     * before) go as PART packets (btl_usnic_part.h); 0: none */
    uint32_t tx_dgram_max;
    struct usnic_parts rx_parts; /* the peer's PART packets, joined */
};
typedef struct mca_btl_base_endpoint_t mca_btl_base_endpoint_t;
OBJ_CLASS_DECLARATION(mca_btl_base_endpoint_t);

/* Create (or return the existing) endpoint to the peer module described by rec. */
mca_btl_base_endpoint_t *usnic_endpoint_create(usnic_module_t *module, opal_proc_t *proc,
                                               const struct usnic_modex_rec *rec);
void usnic_endpoint_destroy(mca_btl_base_endpoint_t *ep);

/* The largest datagram both ends take on channel chan (from the modex
 * records: ours and ep->remote). */
uint32_t usnic_endpoint_pair_mtu(const mca_btl_base_endpoint_t *ep, int chan);
/* The payload limits of FRAG, CHUNK and PUT datagrams of `data` bytes to
 * ep's peer, and of the priority channel's (at most as large). */
void usnic_endpoint_set_dgram(mca_btl_base_endpoint_t *ep, uint32_t data);

/* The endpoint of the sending module with this key, or NULL.  Never blocks. */
mca_btl_base_endpoint_t *usnic_endpoint_for_key(usnic_module_t *module, uint64_t key);
/* A datagram of key's stream arrived on module, whose own endpoints do not
 * know it: the endpoint of another module whose stream it is (its sender
 * detours around a link that is down), and in *via module's endpoint to the
 * same process (the address it must come from).  NULL: none. */
mca_btl_base_endpoint_t *usnic_endpoint_detoured(usnic_module_t *module, uint64_t key,
                                                 mca_btl_base_endpoint_t **via);
/* module's endpoint to the process of ep (another module's), or NULL. */
mca_btl_base_endpoint_t *usnic_endpoint_sibling(usnic_module_t *module,
                                                const mca_btl_base_endpoint_t *ep);

/* Does another module of ours whose link is up reach ep's process? */
bool usnic_endpoint_detour_exists(const mca_btl_base_endpoint_t *ep);
/* The path of ep's stream broke (our link or the peer's went down): when a
 * detour exists, queue everything in flight for resend now, around it
 * (counted in link_resends). */
void usnic_endpoint_resend_around(mca_btl_base_endpoint_t *ep);

/* Declare the peer failed: report once, through the PML's error callback. */
void usnic_endpoint_fail(mca_btl_base_endpoint_t *ep, const char *why);

static inline void usnic_endpoint_sendq_arm(mca_btl_base_endpoint_t *ep)
{
    if (!ep->on_sendq_list) {
        ep->on_sendq_list = true;
        opal_list_append(&ep->module->sendq_eps, &ep->sendq_item);
    }
}

static inline mca_btl_base_endpoint_t *usnic_ep_of_sendq_item(opal_list_item_t *item)
{
    return (mca_btl_base_endpoint_t *) ((char *) item -
                                        offsetof(mca_btl_base_endpoint_t, sendq_item));
}

static inline mca_btl_base_endpoint_t *usnic_ep_of_timer_item(opal_list_item_t *item)
{
    return (mca_btl_base_endpoint_t *) ((char *) item -
                                        offsetof(mca_btl_base_endpoint_t, timer_item));
}

/* Run the retransmit timers that are due (the caller checks module->next_timer). */
void usnic_progress_timers(usnic_module_t *module, uint64_t now);

static inline mca_btl_base_endpoint_t *usnic_ep_of_ack_item(opal_list_item_t *item)
{
    return (mca_btl_base_endpoint_t *) ((char *) item -
                                        offsetof(mca_btl_base_endpoint_t, ack_item));
}

END_C_DECLS

#endif /* BTL_USNIC_ENDPOINT_H */
