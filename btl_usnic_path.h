/*
 * Paths to peers as the BTL sees them: the connectivity checker
 * (btl_usnic_cc.h) applied to endpoints.
 *
 * An endpoint asks for its path to be checked when it is created and
 * starts PENDING.  Nothing is sent to it until the verdict is in: the
 * first send waits for it (usually one round trip to the host's agent; the
 * agent already knows most paths), and the progress engine applies
 * verdicts that arrive meanwhile without waiting (a peer we only receive
 * from must learn a smaller size the same way its sender did).
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

/* Wait for ep's verdict and apply it (the BTL lock is held on entry and
 * on return; it is released while waiting). */
void usnic_path_settle(mca_btl_base_endpoint_t *ep);

static inline void usnic_path_ready(mca_btl_base_endpoint_t *ep)
{
    if (OPAL_UNLIKELY(USNIC_PATH_PENDING == ep->path_state)) {
        usnic_path_settle(ep);
    }
}

/* Progress: apply verdicts that arrived (cheap when none did). */
void usnic_path_progress(void);

/* The connectivity map file (btl_usnic_connectivity_map), if asked for. */
void usnic_path_map_write(void);

END_C_DECLS

#endif /* BTL_USNIC_PATH_H */
