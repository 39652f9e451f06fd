/*
 * Counters kept per module, printed at finalize with btl_usnic_print_stats
 * (one line per module, key=value pairs that scripts can parse).
 */
#ifndef BTL_USNIC_STATS_H
#define BTL_USNIC_STATS_H

#include <stdint.h>

#include "btl_usnic_proto.h"

/* name, description: the order here is the order printed */
#define USNIC_STATS_FIELDS(X)                                                                      \
    X(tx_pkts, "datagrams sent (data, ACK, retransmissions)")                                      \
    X(tx_bytes, "payload bytes sent, retransmissions included")                                    \
    X(rx_pkts, "datagrams received")                                                               \
    X(rx_bytes, "payload bytes received and accepted")                                             \
    X(retrans, "segments actually sent again")                                                     \
    X(fast_retrans, "resends queued by duplicate ACKs")                                            \
    X(timeout_retrans, "retransmission timeouts (each sends a ping behind the oldest segment)")    \
    X(tlp_probes, "probe timeouts (no ACK ~2 round trips after the tail: a ping behind it)")       \
    X(dup_rx, "duplicate data packets received and dropped")                                       \
    X(rx_copies, "of those, copies (the network's, or replays): not sent again, never ACKed")      \
    X(acks_tx, "explicit ACK packets sent")                                                        \
    X(pings_tx, "pings sent (probes: ACK packets asking for an immediate ACK)")                    \
    X(acks_rx, "explicit ACK packets received")                                                    \
    X(ack_copies, "ACK packets not newer than the last of their lane (copies, replays): ignored")  \
    X(piggy_acks, "ACKs piggy-backed on data")                                                     \
    X(sacks_tx, "explicit ACKs that carried a selective-ACK bitmap")                               \
    X(sack_retrans, "resends queued because ACKs or ping answers showed a loss (RACK)")            \
    X(bad_pkts, "packets dropped for failing validation (drop_* says why)")                        \
    X(kernel_drops, "datagrams the kernel dropped for this module's sockets (full buffer)")        \
    X(parked, "datagrams held while their sender's modex record was fetched")                      \
    X(unparked, "held datagrams handed to the receive path once the record came")                  \
    X(inj_drop, "arriving packets dropped by fault injection")                                     \
    X(inj_dup, "arriving packets duplicated by fault injection")                                   \
    X(inj_reorder, "arriving packets reordered by fault injection")                                \
    X(tx_eagain, "sends the provider refused for lack of resources")                               \
    X(tx_errors, "sends that completed with an error")                                             \
    X(inj_corrupt, "sent datagrams corrupted by fault injection (after their checksum)")           \
    X(gso_trains, "kernel backend: trains of datagrams sent with one UDP_SEGMENT sendmsg")         \
    X(gso_pads, "kernel backend: short datagrams padded so that a train could go on after them")   \
    X(gro_batches, "kernel backend: receives that held several datagrams (UDP_GRO)")               \
    X(rx_direct, "kernel backend: chunks received straight into their target (no copy)")           \
    X(rx_direct_miss, "kernel backend: direct receives holding other datagrams than expected")     \
    X(rx_direct_pad, "kernel backend: padded last chunks of a message received in place")          \
    X(rx_put_streamed, "PUT chunks copied into their target past the caches (stream_copy_min)")    \
    X(rx_predicted, "chunks taken on the predicted path (the next chunk of the fragment "          \
                    "before, from the same sender: btl_usnic_rx_predict)")                         \
    X(rx_in_place, "kernel backend: chunked fragments handed to the PML from the receive buffers " \
                   "(no reassembly copy)")                                                         \
    X(window_full, "times a peer's send window was full")                                          \
    X(allow_full, "times a peer's allowance kept a datagram back: it shares its receive buffer "   \
                  "among everyone sending to it, and gave us less than our own limit "             \
                  "(btl_usnic_rx_share)")                                                          \
    X(tx_yields, "progress calls that gave the CPU away (sched_yield) while sends waited for a "   \
                 "peer's window or allowance longer than btl_usnic_yield_blocked")                 \
    X(idle_yields,                                                                                 \
      "progress calls that found nothing and gave the CPU away (btl_usnic_yield_idle: "            \
      "more of the job's ranks on this host than CPUs)")                                           \
    X(allow_cuts, "epochs after which the receive buffer's shared budget was halved: the kernel "  \
                  "had dropped datagrams for a full buffer (btl_usnic_rx_share)")                  \
    X(rx_senders_max, "the most peers that sent us data within one epoch (50-100 ms), among "      \
                      "whom the receive buffer was shared (btl_usnic_rx_share)")                   \
    X(puts, "emulated PUT operations")                                                             \
    X(frags_waited, "fragments that arrived complete before an earlier one and waited for it")     \
    X(reasm_overflow, "buffers allocated beyond the pool for the fragment others waited for")      \
    X(live_probes, "liveness probes sent to peers quiet with data outstanding")                    \
    X(live_replies, "authenticated answers to our liveness probes")                                \
    X(live_answered, "liveness probes of peers answered (by the liveness thread)")                 \
    X(live_drops, "liveness datagrams dropped for failing validation or the rate limit")           \
    X(live_forged, "liveness probes and pings dropped: their MAC does not name their source")      \
    X(mr_regs, "libfabric memory registrations of segment buffers (FI_MR_LOCAL)")                  \
    X(cq_errors, "libfabric completions that reported an error")                                   \
    X(link_events, "link down/up events of the provider")                                          \
    X(detours, "datagrams sent through another module while a link was down")                      \
    X(link_resends, "segments in flight resent at once around a link that went down")              \
    X(tx_connected, "kernel backend: sends on a socket connected to the peer (no route lookup)")   \
    X(peers_connected, "kernel backend: peers given connected sockets, at our first send to each") \
    X(trains_copied, "kernel backend: trains copied into one buffer (btl_usnic_train_copy)")       \
    X(tx_batched,                                                                                  \
      "kernel backend: trains and datagrams sent several at once (btl_usnic_tx_batch)")            \
    X(early_copies, "chunked sends completed before their ACK, their data copied from user "       \
                    "memory or already packed (btl_usnic_early_copy_max)")                         \
    X(macs_tx_lanes, "header MACs of sent trains computed 8 at a time (btl_usnic_mac_lanes)")      \
    X(macs_rx_lanes, "header MACs of received GRO batches and direct receives checked against "    \
                     "tags computed 8 at a time (btl_usnic_mac_lanes)")                            \
    X(tx_held, "messages whose train was left open for the next ones (btl_usnic_tx_coalesce)")     \
    X(tx_late, "held trains sent by the liveness thread: nothing joined them within 500 us")       \
    X(path_shrunk, "peers whose path carried smaller datagrams than before while the job ran "     \
                   "(datagrams cut smaller from then on)")                                         \
    X(path_grown, "peers whose path carried larger datagrams again after it had shrunk "           \
                  "(btl_usnic_connectivity_raise_after)")                                          \
    X(tx_parted, "datagrams too large for a path that shrank, sent as PART packets")               \
    X(rx_joined, "datagrams joined from the PART packets of a peer whose path shrank")             \
    X(cc_forged, "connectivity pongs dropped for a wrong MAC during the checks of this module's "  \
                 "paths (answers forged by someone who read the pings; a check that several "      \
                 "processes of the host waited for counts them in one of them)")                   \
    X(path_held, "peers whose first sends were queued while the connectivity check of their "      \
                 "path was under way (the sending call returned; the queue went at the verdict)")  \
    X(srtt_max_us, "the largest smoothed round trip (us) of this module's peers when printed")

typedef struct usnic_module_stats {
#define USNIC_STATS_DECL(name, desc) uint64_t name;
    USNIC_STATS_FIELDS(USNIC_STATS_DECL)
#undef USNIC_STATS_DECL
    uint64_t drops[USNIC_DROP__COUNT]; /* by reason */
} usnic_module_stats_t;

/* The fields that are a level (the largest over the modules), not a count. */
static inline bool usnic_stats_is_level(size_t at)
{
    return offsetof(usnic_module_stats_t, srtt_max_us) == at ||
           offsetof(usnic_module_stats_t, rx_senders_max) == at;
}

struct usnic_module;

/* Format the one-line summary of a module into buf. */
void usnic_stats_format(const struct usnic_module *module, const char *prefix, char *buf,
                        size_t len);
/* The counters as MPI_T performance variables (btl_usnic_<name>). */
struct mca_base_component_2_1_0_t;
void usnic_stats_register_pvars(const struct mca_base_component_2_1_0_t *comp);
/* Print it through opal_output when btl_usnic_print_stats is set. */
void usnic_stats_print(struct usnic_module *module);

#endif /* BTL_USNIC_STATS_H */
