/*
 * Paths to peers as the BTL sees them: the connectivity checker
 * (btl_usnic_cc.h) applied to endpoints.
 *
 * An endpoint asks for its path to be checked when it is created and
 * starts PENDING.  No datagram larger than every usable path carries (548
 * bytes) goes to it until the verdict is in.  A send that needs one is
 * queued on the endpoint (as behind a full window, and what is sent after
 * it queues behind it; counted once per peer in path_held) and the call
 * returns, so the process goes on progressing its other peers (their
 * ACKs, their data) while the check runs: usually one round trip to the
 * host's agent, which knows most paths, but seconds behind an MTU black
 * hole.  Only the first such send to a peer waits in the call, and only
 * for a verdict that is due (usnic_path_before_send).  The progress
 * engine applies each verdict when it arrives (also for a peer we only
 * receive from: it must learn a smaller size the same way its sender did)
 * and the queue then drains at the verdict's size (a fragment allocated at
 * the full size meanwhile goes as PART packets if the verdict is smaller:
 * btl_usnic_part.h).  A check that gives no verdict in time (the agent
 * gone) counts as UNCHECKED.
 *
 *   OK        the pair's full datagram size is proven
 *   REDUCED   an MTU black hole: datagrams of the largest size that passed
 *             (btl_usnic_connectivity_mtu_fallback 1, warned once per
 *             pair) or an error (0)
 *   NOPATH    nothing passes: an error naming both hosts, addresses and
 *             interfaces
 *   UNCHECKED the check could not run (verbose note): the full size
 */
#ifndef BTL_USNIC_PATH_H
#define BTL_USNIC_PATH_H

#include "btl_usnic.h"
#include "btl_usnic_cc.h"
#include "btl_usnic_endpoint.h"

BEGIN_C_DECLS

enum {
    USNIC_PATH_READY = 0, /* sizes final (checked, unchecked or reduced) */
    USNIC_PATH_PENDING = 1
};

/* Start the checker (component init, after the liveness responder). */
void usnic_path_init(void);
void usnic_path_fini(void);

/* A new endpoint, its payload limits set: ask for its path (sets ep->path_state). */
void usnic_path_endpoint(mca_btl_base_endpoint_t *ep);

/* May a datagram of `wire` bytes carry data to ep's peer now?  While its
 * path is checked, only one that every usable path carries
 * (USNIC_CC_MIN_USEFUL: a path that carries less is no path at all), so
 * that small messages and the rendezvous's control messages never wait. */
static inline bool usnic_path_allows(const mca_btl_base_endpoint_t *ep, size_t wire)
{
    return OPAL_LIKELY(USNIC_PATH_PENDING != ep->path_state) || wire <= USNIC_CC_MIN_USEFUL;
}

/*
 * A send of datagrams up to `wire` bytes to ep's peer is about to start.
 * If they must wait for its verdict, wait for it in the call, but only
 * until one round of the check (btl_usnic_connectivity_ack_timeout) after
 * it was asked for, and once per peer: a path that loses nothing has its
 * verdict by then (one round trip to the host's agent, or one of pings),
 * and the data then leaves before the call returns, also for a rank that
 * computes outside MPI right after it (the queue would wait for its next
 * MPI call: nothing else sends for it).  Behind a black hole the call
 * returns after that round and the data waits in the queue; the checks of
 * peers asked for together end their waits together.  The BTL lock is
 * held on entry and on return, released while waiting.
 */
void usnic_path_first_wait(mca_btl_base_endpoint_t *ep);

static inline void usnic_path_before_send(mca_btl_base_endpoint_t *ep, size_t wire)
{
    if (!usnic_path_allows(ep, wire) && !ep->path_waited) {
        usnic_path_first_wait(ep);
    }
}

/*
 * A retransmission timeout toward ep's peer, with `seq` (a datagram of
 * `bytes`) the oldest segment unacknowledged.  An MTU black hole can open
 * while the job runs (a link fails over to a path with a smaller MTU, a
 * switch port is reconfigured): the peer still answers our pings and
 * ACKs, so it is not declared dead, but the datagrams that carry data
 * never arrive, and the job would hang.  When one large segment has gone
 * unacknowledged through timeouts for btl_usnic_connectivity_recheck_after
 * milliseconds (1 s by default; 0: never), the path is checked again (as
 * before the first traffic: small and full-size datagrams with DF).  If
 * full-size datagrams vanish while smaller ones pass, the pair goes on
 * with the smaller size (datagrams cut before go in parts:
 * btl_usnic_part.h), or with btl_usnic_connectivity_mtu_fallback 0 the job
 * ends with an error that says so; otherwise the segment was only unlucky
 * and the job goes on.
 */
/* a check again no sooner than this after one found the path fine */
#define USNIC_PATH_RECHECK_GAP_US 10000000u
void usnic_path_stuck(mca_btl_base_endpoint_t *ep, uint32_t seq, uint32_t bytes, uint64_t now);

/*
 * A path that carries less than the pair's full size (a black hole found
 * at start-up or while the job ran) may carry it again later: a link
 * failed back, a switch port was fixed.  btl_usnic_connectivity_raise_after
 * seconds after the size was reduced (RFC 8899's raise timer), the next
 * datagram of data to the peer asks the checker about the full size
 * again.  A verdict that the full size passes (or a larger one than in
 * use) grows the sizes back: new data is cut larger; what was cut smaller
 * goes as it is.  Otherwise the next try comes as long after.
 */
void usnic_path_raise(mca_btl_base_endpoint_t *ep, uint64_t now);

static inline void usnic_path_raise_due(mca_btl_base_endpoint_t *ep, uint64_t now)
{
    if (OPAL_UNLIKELY(0 != ep->raise_at) && now >= ep->raise_at) {
        usnic_path_raise(ep, now);
    }
}

/* Progress: apply verdicts that arrived, and UNCHECKED to checks past
 * their time (cheap when none did and none is pending). */
void usnic_path_progress(void);

/* The connectivity map file (btl_usnic_connectivity_map), if asked for. */
void usnic_path_map_write(void);

END_C_DECLS

#endif /* BTL_USNIC_PATH_H */
