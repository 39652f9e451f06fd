/*
 * btl/usnic: an Open MPI BTL over libfabric datagram endpoints (FI_EP_DGRAM)
 * with its own reliability layer.  See README.txt for the design notes.
 *
 * This header holds the component and module types and the MCA parameter
 * globals.  Per-peer state is in btl_usnic_endpoint.h, descriptors in
 * btl_usnic_frag.h, the wire format in btl_usnic_proto.h.
 */
#ifndef BTL_USNIC_H
#define BTL_USNIC_H

#include "opal_config.h"

#include <stdint.h>
#include <netinet/in.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include "opal/class/opal_free_list.h"
#include "opal/class/opal_hash_table.h"
#include "opal/class/opal_list.h"
#include "opal/mca/btl/btl.h"
#include "opal/mca/btl/base/base.h"
#include "opal/mca/event/event.h"
#include "opal/threads/mutex.h"
#include "opal/util/output.h"

#include "btl_usnic_auth.h"
#include "btl_usnic_proto.h"
#include "btl_usnic_reg.h"
#include "btl_usnic_rel.h"
#include "btl_usnic_rx.h"
#include "btl_usnic_stats.h"

BEGIN_C_DECLS

/* Memory a module may spend on receive buffers and on send segments. */
#define USNIC_RX_BYTES_MAX (16u * 1024 * 1024)
#define USNIC_TX_BYTES_MAX (64u * 1024 * 1024)
/* Automatic data-channel receive depth over the udp provider: buffers for
 * this many bytes (at least 8, at most 512), few enough to stay cached. */
#define USNIC_UDP_RX_HOT_BYTES (512u * 1024)

/* Large PUTs remembered to tell a reused target (copied through the cache)
 * from fresh memory (copied past it). */
#define USNIC_PUT_RECENT 4

/* Version of the modex record layout (btl_usnic_proc.h). */
#define USNIC_MODEX_VERSION 5

/* Peers with deferred fragments in one receive batch, at most (recv.c). */
#define USNIC_DEFER_TABLES 8

/* Datagrams from a sender of our job whose modex record is being fetched
 * (btl_usnic_proc.c), held per module until it arrives. */
#define USNIC_PARK_MAX 64

/* Channels of a module. */
enum usnic_channel_id {
    USNIC_CHAN_PRIO = 0, /* ACKs and tiny fragments: small MTU, short queues */
    USNIC_CHAN_DATA = 1, /* everything else, and every retransmission */
    USNIC_NUM_CHANNELS = 2
};

struct usnic_module;
struct usnic_seg;
struct mca_btl_base_endpoint_t;

/* Context of a segment free list's item initialiser (one per list, in the module). */
typedef struct usnic_seg_list_ctx {
    struct usnic_module *module;
    int kind; /* enum usnic_seg_kind */
    int chan; /* enum usnic_channel_id */
} usnic_seg_list_ctx_t;

/* Datagrams one train (UDP_SEGMENT send) may hold. */
#define USNIC_TRAIN_MAX 64

/* One datagram socket of a module: a libfabric endpoint with its
 * completion queue, or a UDP socket of ours (btl_usnic_chan.h). */
typedef struct usnic_channel {
    enum usnic_channel_id id;
    struct fid_ep *ep;        /* libfabric */
    struct fid_cq *cq;        /* libfabric */
    uint32_t mtu;             /* largest datagram we send or expect, headers included */
    size_t prefix;            /* FI_MSG_PREFIX bytes before every datagram, else 0 */
    int tx_depth;             /* send queue entries */
    int tx_credits;           /* send queue entries free now; invariant: 0 <= credits <= depth */
    int rx_depth;             /* receives kept posted */
    opal_free_list_t rx_segs; /* receive buffers: prefix + mtu bytes each */
    struct sockaddr_in addr;  /* bound address (port assigned by the provider) */
    int rcvbuf;               /* kernel receive buffer bytes, 0 if unknown */
    int sock_fd;              /* the UDP socket underneath, -1 if unknown: the kernel backend's own,
                               * or the udp provider's (not ours: stats only) */
    int tx_fd;                /* kernel backend: the socket whose port our datagrams come from
                               * (tx_addr; the peers' connected sockets share it), -1: none */
    struct sockaddr_in tx_addr; /* its address (port 0: we send from addr) */
    size_t inject_size;         /* datagrams up to this size go out with fi_inject */
    uint32_t rx_buf;            /* bytes of a receive buffer after the prefix (>= mtu) */
    void *backend_priv;         /* the backend's own state of the channel */
    bool rx_streak;             /* libfabric: the last poll found something */
    /* kernel backend */
    bool gso;   /* UDP_SEGMENT trains allowed (cleared when refused) */
    bool batch; /* sends may wait for the next ones of their burst (btl_usnic_tx_batch) */
    bool gro;   /* UDP_GRO on: a receive may hold several datagrams */
    struct {
        struct usnic_seg *seg[USNIC_TRAIN_MAX];
        const struct mca_btl_base_endpoint_t *ep; /* their destination */
        int n;
        uint16_t pad[USNIC_TRAIN_MAX]; /* padding after each datagram (USNIC_PKT_FLAG_PAD) */
        uint32_t seg_len;              /* every datagram's length but the last's */
        uint32_t bytes;                /* with the padding */
        bool closed;                   /* a shorter datagram ended it */
        int pieces;                    /* its datagrams of PUTs sent uncopied (frag->pieces) */
    } train;
} usnic_channel_t;

/* Where the datagram being processed came from. */
typedef struct usnic_rx_source {
    fi_addr_t fi;  /* USNIC_SRC_FI: the sender's entry in our AV (FI_ADDR_NOTAVAIL: none) */
    uint32_t ip;   /* USNIC_SRC_PREFIX: its IPv4 address, network order */
    uint16_t port; /* USNIC_SRC_PREFIX: its UDP port, network order */
    uint8_t lane;  /* the channel it arrived on */
} usnic_rx_source_t;

/* Fault injection on the receive path (debug parameters). */
typedef struct usnic_fault {
    double drop_rate;
    double dup_rate;
    double reorder_rate;
    uint64_t rng;       /* xorshift state, from btl_usnic_debug_seed */
    uint8_t *held_buf;  /* a packet held back to be processed late (copy) */
    uint8_t *whole_buf; /* a direct receive's datagram put together for injection */
    uint32_t held_len;  /* 0 = nothing held */
    usnic_rx_source_t held_from;
    double corrupt_rate; /* fraction of sent datagrams with one byte flipped after sealing */
} usnic_fault_t;

/* Is anything injected into arriving packets? */
static inline bool usnic_fault_on_rx(const usnic_fault_t *f)
{
    return f->drop_rate > 0.0 || f->dup_rate > 0.0 || f->reorder_rate > 0.0;
}

/* How the source of an arriving datagram is known. */
enum usnic_src_check {
    USNIC_SRC_NONE = 0,   /* not at all: the MAC alone vouches for the sender */
    USNIC_SRC_FI = 1,     /* FI_SOURCE: the completion names the sender's AV entry */
    USNIC_SRC_PREFIX = 2, /* the provider's receive prefix holds the Ethernet/IPv4/UDP headers */
    USNIC_SRC_SOCKET = 3  /* our socket tells the sender's address and port (rx_from.ip/port) */
};

/* A datagram held until its sender's modex record arrives. */
typedef struct usnic_parked {
    uint32_t vpid;          /* the sender process it names */
    uint32_t len;           /* 0: slot free */
    usnic_rx_source_t from; /* as it arrived */
    uint8_t *buf;           /* data MTU bytes, allocated on first use */
} usnic_parked_t;

typedef struct usnic_module {
    mca_btl_base_module_t super;

    int index;          /* position in the component's module array */
    uint32_t module_id; /* (vpid << 8) | index: a hint in packets, unique in the job */
    uint64_t key;       /* our identity on the wire: random, published in the modex */
    uint8_t secret[USNIC_SIP_KEY_BYTES]; /* our MAC secret: random, published in the modex */
    struct usnic_sip_key mac_key;        /* secret, loaded */
    char ifname[64];                     /* interface (libfabric domain) name */
    char prov_name[32];                  /* provider that created it */
    struct sockaddr_in if_addr;          /* interface IPv4 address */
    uint32_t if_prefixlen;               /* netmask length */
    uint32_t link_mbps;                  /* link speed, Mbit/s (0 if unknown) */
    uint32_t if_mtu;                     /* interface MTU (0 if unknown) */
    uint16_t live_port;                  /* liveness socket's UDP port, network order (0: none) */

    const struct usnic_backend *backend; /* moves the datagrams (btl_usnic_chan.h) */
    bool batching;                       /* sends may join a train (send.c) */
    struct fi_info *info;                /* libfabric backend: */
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_av *av;
    struct usnic_ofi_state *ofi; /* libfabric backend's own state (btl_usnic_chan_ofi.c) */
    bool link_down;              /* the provider said the link is down: no new traffic */
    usnic_channel_t chan[USNIC_NUM_CHANNELS];

    uint64_t max_msg_len;    /* largest PML fragment we reassemble */
    bool zero_copy;          /* iov_limit >= 2: send user data without copying it */
    bool is_udp;             /* provider "udp": plain UDP sockets underneath */
    int conn_peers;          /* kernel backend: peers with connected sockets (ep->conn_fd) */
    bool conn_short;         /* kernel backend: ran short of descriptors for them */
    uint32_t advertised_mtu; /* the provider's max_msg_size */
    int seg_max;             /* send segments the module may allocate */
    uint32_t send_window;    /* segments unacknowledged per peer (btl_usnic_send_window) */

    /* free lists (bounded) */
    opal_free_list_t send_segs; /* data-MTU send buffers */
    opal_free_list_t ack_segs;  /* header-only ACK buffers */
    opal_free_list_t frags;     /* descriptors: handed to the PML, or internal for PUTs */
    /* pack / reassembly buffers (usnic_buf_get): mid_bufs of mid_buf_len
     * bytes for what fits, big_bufs of max_msg_len for the rest */
    opal_free_list_t mid_bufs;
    opal_free_list_t big_bufs;
    size_t mid_buf_len;
    usnic_seg_list_ctx_t seg_list_ctx[2 + USNIC_NUM_CHANNELS];

    opal_hash_table_t senders; /* peer module key -> endpoint */
    opal_list_t endpoints;     /* all endpoints of this module */
    opal_list_t sendq_eps;     /* endpoints with queued fragments and an open window */
    opal_list_t ack_eps;       /* endpoints that owe their peer an ACK */
    opal_list_t resendq;       /* segments waiting to be retransmitted, oldest first */
    opal_list_t done_frags;    /* sent fragments whose PML callback is pending */
    opal_list_t timer_eps;     /* endpoints whose retransmit timer may be armed */

    uint64_t next_timer; /* earliest deadline of an endpoint's timer (0: none); may be early */
    struct usnic_rel_timing rel_timing; /* timer settings of its connections (us) */

    mca_btl_base_module_error_cb_fn_t error_cb;
    usnic_fault_t fault;
    usnic_module_stats_t stats;
    uint64_t stream_copy_min;  /* btl_usnic_stream_copy_min (0 = never) */
    uint64_t early_copy_max;   /* btl_usnic_early_copy_max (0 = never) */
    uint32_t train_copy;       /* btl_usnic_train_copy (0 = never) */
    uint64_t put_copy_max;     /* btl_usnic_train_copy_put_max (0: all copied) */
    uint64_t tx_coalesce;      /* btl_usnic_tx_coalesce (0 = off) */
    uint64_t yield_blocked;    /* btl_usnic_yield_blocked (us; 0 = never) */
    uint64_t tx_blocked_since; /* when a send first found a window full, since the last send went
                                  (0: none) */
    bool mac_lanes;            /* header MACs of a train, or of a GRO receive, computed together */
    struct {
        const uint8_t *dest; /* target of one of the last PUTs */
        bool reused;         /* it had been a target before: copy through the cache */
    } put_recent[USNIC_PUT_RECENT];
    unsigned put_recent_next;
    uint32_t data_idle;  /* consecutive progress calls without data completions */
    uint32_t data_skips; /* due polls of the idle data channel skipped in a row */
    uint64_t now_us;     /* usnic_now_us() at the start of the current progress call */
    /* What each peer sending to us may keep in flight to us (incast):
     * the data channel's receive buffer, shared among the peers that sent
     * data in this epoch or the last (btl_usnic_recv.c: allow_count) */
    struct {
        uint64_t max;         /* half the buffer; 0: no limit is advertised */
        uint64_t budget;      /* bytes to share now: max, less after drops */
        uint64_t drops;       /* the data socket's drop count at the last epoch's end */
        uint64_t epoch_start; /* now_us when the current epoch began */
        uint32_t epoch;       /* its number, from 1 */
        uint32_t cur, prev;   /* senders of data in the current and the last epoch */
        uint16_t kib;         /* the share, in KiB, as fill_ack() advertises it */
    } allow;
    uint64_t last_poll_us; /* when module_progress last ran */
    uint64_t back_us;      /* when progress resumed after the process was away (0: never) */
    /* now_us is fresh: inside module_progress, or while one send call
     * hands a fragment's chunks over (send_chunks_batch, btl_usnic_send.c) */
    bool in_progress;
    /* A PUT, or a chunked fragment, arriving in order, whose next chunks
     * the kernel backend may receive straight into the target or the
     * reassembly buffer (btl_usnic_recv.c keeps it, btl_usnic_chan_kern.c
     * uses it): every chunk before offset `next` has arrived, none after. */
    struct usnic_direct {
        struct mca_btl_base_endpoint_t *ep; /* the sender; NULL: no such message */
        uint8_t type;                       /* USNIC_PKT_PUT or USNIC_PKT_CHUNK */
        uint8_t tag;                        /* CHUNK: the fragment's PML tag */
        uint32_t msg_id;                    /* the PUT's or the fragment's number */
        uint32_t plen;                      /* payload bytes of each chunk but the last */
        uint64_t reg_key, reg_offset;       /* PUT: its target */
        uint64_t msg_len;
        uint64_t next;
    } direct;
    uint64_t last_sender_key; /* cache of the last sender lookup (key -> endpoint) */
    struct mca_btl_base_endpoint_t *last_sender;
    enum usnic_src_check src_check; /* how arriving datagrams' sources are checked */
    usnic_rx_source_t rx_from;      /* source of the datagram being processed */
    /* Deferred chunks (btl_usnic_reasm.h): while rx_defer is set, the
     * datagrams being processed stay where they are until
     * usnic_rx_defer_flush(), which copies the deferred fragments of the
     * tables listed here into their buffers (kernel backend: one batch of
     * receives). */
    bool rx_defer;
    /* Header prediction (btl_usnic_rx.h) within one batch of receives:
     * rx_pred_scope > 0 from usnic_rx_batch_begin() to usnic_rx_batch_end(),
     * rx_predict from btl_usnic_rx_predict. */
    bool rx_predict;
    int rx_pred_scope;
    struct usnic_rx_predict rx_pred;
    int n_deferred;
    struct usnic_reasm_table *deferred[USNIC_DEFER_TABLES];
    usnic_parked_t parked[USNIC_PARK_MAX];
    int n_parked;
    bool finalized;
    /* The header MACs of a coalesced receive's datagrams, computed
     * together before they are processed (usnic_rx_macs_ahead): datagram
     * i is at base + i * step; n = 0: none. */
    struct {
        const uint8_t *base;
        size_t step;
        unsigned n;
        const struct usnic_sip_key *key; /* the sender's that they were computed under */
        uint64_t tag[USNIC_TRAIN_MAX];
        bool ok[USNIC_TRAIN_MAX];
    } rx_macs;
} usnic_module_t;

/* Data-channel polls without a completion before it is polled less often. */
#define USNIC_DATA_IDLE_POLLS 64
/* at most this many due polls of an idle data channel skipped in a row */
#define USNIC_DATA_SKIPS_MAX 3

/* What the keyed MAC of every datagram covers (btl_usnic_auth). */
enum usnic_auth_mode {
    USNIC_AUTH_NONE = 0,   /* no MAC */
    USNIC_AUTH_HEADER = 1, /* every header field (the default) */
    USNIC_AUTH_FULL = 2    /* headers and payload */
};

static inline const char *usnic_auth_mode_name(int mode)
{
    return (USNIC_AUTH_NONE == mode) ? "none" : (USNIC_AUTH_HEADER == mode) ? "header" : "full";
}

/* All tunables (registered in btl_usnic_mca.c). */
typedef struct usnic_params {
    char *providers; /* ordered list to try */
    char *if_include;
    char *if_exclude;
    int max_btls;
    int prio_sd_num, prio_rd_num; /* priority channel send/recv queue depths */
    int sd_num, rd_num;           /* data channel send/recv queue depths */
    int cq_num;                   /* completion queue entries per channel */
    int priority_limit;           /* largest PML fragment sent on the priority channel */
    int send_window;              /* segments unacknowledged per peer */
    int recv_window;              /* receive window per peer (>= peer's send window) */
    int retrans_timeout;          /* usec: until a peer's round trip is measured */
    int retrans_timeout_min;      /* usec: floor of the measured timeout */
    int retrans_timeout_max;      /* usec: ceiling, backoff included */
    int tlp;                      /* tail-loss probes on/off */
    int gso;                      /* kernel backend: UDP_SEGMENT trains, UDP_GRO */
    int direct_recv;              /* kernel backend: PUT chunks received into their target */
    int in_place;      /* kernel backend: fragments handed over from the receive buffers */
    int rx_predict;    /* header prediction on the receive path */
    int rx_share;      /* share the receive buffer among the peers sending to us */
    int connect_peers; /* kernel backend: peers given sockets connected to them */
    int max_resends_per_iteration;
    int ack_delay;                      /* usec */
    int fast_retrans_dups;              /* duplicate ACKs that trigger a fast retransmit */
    int peer_timeout;                   /* sec without ACKs or liveness answers: the peer is dead */
    int liveness;                       /* answer and send liveness probes (btl_usnic_live.h) */
    int connectivity_check;             /* btl_usnic_cc.h on/off */
    int connectivity_ack_timeout;       /* ms between ping rounds */
    int connectivity_error_num_retries; /* rounds before a verdict */
    int connectivity_mtu_fallback;      /* black hole: smaller size (1) or error (0) */
    int connectivity_recheck_after;     /* ms data stuck: check again (0: never) */
    int connectivity_raise_after;       /* s on a reduced size: try the full one again (0: never) */
    char *connectivity_map;             /* file prefix, "" = none */
    int show_route_failures;            /* message when a peer is unreachable */
    int routed_peers; /* pair across subnets where the kernel routes (btl_usnic_route.h) */
    int seg_num;      /* send segments per module */
    int reasm_slots;  /* concurrent reassemblies per peer */
    int print_stats;
    int udp_sockbuf;       /* udp provider: kernel socket buffer bytes (0 = default) */
    int max_inflight;      /* unacknowledged bytes per peer at most (0 = half its buffer) */
    int udp_datagram_size; /* udp provider: 0 = interface MTU, -1 = advertised, N = cap */
    int stream_copy_min;   /* PUTs this large are copied past the caches; 0 = never */
    int early_copy_max;    /* sends completed before their ACK, at most (bytes; 0 = never) */
    int train_copy;        /* trains of datagrams this small go as one buffer (0 = never) */
    int put_copy_max;      /* but not a PUT's larger than this (bytes; 0 = all copied) */
    int tx_coalesce;       /* bytes in flight from which short messages wait to share trains */
    int tx_batch;          /* trains and datagrams to one socket per sendmmsg (1 = sendmsg each) */
    int yield_blocked;     /* us a send may wait for a peer's window before progress yields */
    int yield_idle;        /* idle progress yields: -1 more local ranks than CPUs, 0 no, 1 yes */
    int mac_lanes;         /* header MACs of trains 8 at a time with AVX-512 where the CPU has it */
    int auth;              /* enum usnic_auth_mode: what the keyed MAC covers */
    int checksum;          /* 1: CRC32C over header and payload */
    int want_numa;         /* bound processes prefer near devices (btl_usnic_hwloc.c) */
    double debug_drop_rate;
    double debug_dup_rate;
    double debug_reorder_rate;
    double debug_corrupt_rate; /* fraction of sent datagrams corrupted after their checksum */
    int debug_gso_refused;     /* act as if UDP_SEGMENT were refused */
    int debug_seed;
    int debug_isn; /* >= 0: fixed initial sequence number (tests) */
} usnic_params_t;

typedef struct usnic_component {
    mca_btl_base_component_3_0_0_t super;

    usnic_params_t params;
    int num_modules;
    usnic_module_t **modules;
    char *chosen_provider;         /* provider that won discovery */
    struct usnic_sip_key put_key;  /* keys the PUT registration keys (btl_usnic_reg.h) */
    struct usnic_lookups *lookups; /* modex records being fetched (btl_usnic_proc.c) */
    uint32_t job_size;             /* processes in our job (0: unknown) */
    bool param_error;              /* a parameter was refused (and reported) during init */
    opal_recursive_mutex_t lock;   /* taken only when MPI threads are in use */
    struct usnic_reg_table regs;   /* registrations for emulated PUT */
    bool use_threads;
    bool yield_idle; /* progress that found nothing gives the CPU away (btl_usnic_yield_idle) */
    bool mpi_yields; /* Open MPI's mpi_yield_when_idle is on: it yields, we do not */
} usnic_component_t;

OPAL_MODULE_DECLSPEC extern usnic_component_t mca_btl_usnic_component;
extern usnic_module_t usnic_module_template;

#define USNIC_VERBOSE(level, ...)                                                                  \
    opal_output_verbose(level, opal_btl_base_framework.framework_output, "btl:usnic: " __VA_ARGS__)

static inline void usnic_lock(void)
{
    if (mca_btl_usnic_component.use_threads) {
        opal_mutex_lock(&mca_btl_usnic_component.lock);
    }
}

static inline void usnic_unlock(void)
{
    if (mca_btl_usnic_component.use_threads) {
        opal_mutex_unlock(&mca_btl_usnic_component.lock);
    }
}

/* btl_usnic_mca.c */
int usnic_register_params(void);
int usnic_check_params(void);
/* Receive depths against what a provider's endpoints take (rx_attr->size). */
int usnic_check_rx_limits(const char *provider, const char *device, size_t rx_size, int data_rd);

/* btl_usnic_component.c */
int usnic_component_progress(void);

/* A help message (help-mpi-btl-usnic.txt, topic) about an event while the
 * job runs, written to this process's stderr (btl_usnic_component.c). */
void usnic_show_help_running(const char *topic, ...);
void usnic_module_teardown(usnic_module_t *module);

/* btl_usnic_hwloc.c: raise the btl_latency of devices farther from our binding */
void usnic_numa_apply(void);
/* btl_usnic_hwloc.c: the CPUs this host lets the job use (hwloc's allowed set) */
unsigned usnic_host_cpus(void);

/* btl_usnic_module.c */
int usnic_module_finalize(struct mca_btl_base_module_t *btl);

/* btl_usnic_send.c */
int usnic_progress_sends(usnic_module_t *module);
int usnic_progress_resends(usnic_module_t *module);
int usnic_progress_done_frags(usnic_module_t *module);
int usnic_handle_send_completion(usnic_module_t *module, struct usnic_seg *seg);

/* btl_usnic_ack.c */
int usnic_progress_acks(usnic_module_t *module, uint64_t now);
void usnic_ack_schedule(usnic_module_t *module, struct mca_btl_base_endpoint_t *ep);

/* btl_usnic_recv.c */
/* Process a packet held back by reorder injection (when idle, or after the next arrival). */
void usnic_fault_flush(usnic_module_t *module, bool idle);
/* The modex record of process vpid arrived (its endpoint exists if it is a
 * peer): hand the datagrams held for it to the receive path, or drop them. */
void usnic_release_parked(usnic_module_t *module, uint32_t vpid);
/* Free the held datagrams' buffers (module teardown). */
void usnic_parked_fini(usnic_module_t *module);
/* Incast: the receive buffer's share each sending peer is told (on: shared). */
void usnic_allow_init(usnic_module_t *module, bool on);

END_C_DECLS

#endif /* BTL_USNIC_H */
