/*
 * Routed peers: may a local interface reach a peer interface on another
 * subnet?  The kernel decides, through its routing table: one RTM_GETROUTE
 * question over rtnetlink per (local address, remote address), the same
 * question `ip route get REMOTE from LOCAL` asks.  The answer is
 *
 *   USNIC_ROUTE_VIA_DEV    the route leaves through the local interface
 *                          (directly or through a gateway): pair them;
 *   USNIC_ROUTE_OTHER_DEV  it leaves through another interface: the pair
 *                          belongs to the module of that interface, not here;
 *   USNIC_ROUTE_NONE       no route (none matches, or unreachable, prohibit,
 *                          blackhole): not reachable from this host;
 *   USNIC_ROUTE_ERROR      the question itself failed (no rtnetlink, ...):
 *                          not paired either.
 *
 * Answers are cached for the life of the component: pairing runs once per
 * peer and module, and a job has far fewer interfaces than processes.  No
 * locking here: callers hold the component lock.  Nothing here depends on
 * Open MPI, so the unit tests use it directly.
 */
#ifndef BTL_USNIC_ROUTE_H
#define BTL_USNIC_ROUTE_H

#include <net/if.h>
#include <stddef.h>
#include <stdint.h>

enum usnic_route_verdict {
    USNIC_ROUTE_VIA_DEV = 0,
    USNIC_ROUTE_OTHER_DEV,
    USNIC_ROUTE_NONE,
    USNIC_ROUTE_ERROR
};

struct usnic_route {
    enum usnic_route_verdict verdict;
    uint32_t gateway;        /* next hop, network order; 0: directly connected */
    uint32_t mtu;            /* MTU the route carries (route metric or learned), 0: none */
    int err;                 /* NONE/ERROR: errno of the answer, 0 if there was none */
    char dev[IF_NAMESIZE];   /* interface the route leaves through ("" if none) */
    char local[IF_NAMESIZE]; /* interface holding the local address ("" if none) */
    const char *kind;        /* NONE without errno: "unreachable", "blackhole", ... */
};

/*
 * The kernel's route from local address src to dst (both network order),
 * judged against the interface that holds src.  Cached; returns a pointer
 * to the cached answer (valid until usnic_route_fini), never NULL.
 */
const struct usnic_route *usnic_route_get(uint32_t src, uint32_t dst);

/* The uncached question (tests): fills *out, returns out->verdict. */
enum usnic_route_verdict usnic_route_query(uint32_t src, uint32_t dst, struct usnic_route *out);

/* One line for verbose output: "routed via gateway 10.0.0.1 dev eth0", "no
 * route (Network is unreachable)", "route leaves via other interface eth1". */
void usnic_route_describe(const struct usnic_route *r, char *buf, size_t len);

/* Forget every cached answer (component close). */
void usnic_route_fini(void);

#endif /* BTL_USNIC_ROUTE_H */
