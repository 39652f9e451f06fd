/*
 * The connectivity checker (ARCHITECTURE.md, decision 8): before the first
 * traffic between a local interface and a peer interface, prove the path
 * with datagrams that may not be fragmented, once per host, and find the
 * largest datagram the path really carries.
 *
 *   agent   (btl_usnic_cagent.c) one per host, in the process of local
 *           rank 0: a thread that listens on a Unix-domain socket in the
 *           job's session directory, pings peer interfaces over UDP (one
 *           socket per local interface address) and keeps every verdict
 *           for all the host's processes.
 *   client  (btl_usnic_cclient.c) in every process: a thread that talks
 *           to the agent (handshake with version check, requests, results)
 *           and hands the verdicts to the BTL.  In local rank 0 it feeds
 *           the agent's engine directly.  When no agent can be reached
 *           (it never came, or left before its clients were done), the
 *           client runs the same engine itself, so no check is ever lost.
 *
 * A check of a pair (local address, peer address, full size) sends, every
 * ack_timeout, a small ping and one ping of every candidate size not yet
 * answered: the pair's full datagram size, then the common smaller ones
 * (9000, 4096, 1500, 1400, 1280 and 576-byte IP packets) below it.  The
 * peer's liveness responder (btl_usnic_live.c) echoes each ping at the
 * same size, so an answer proves both directions.  Every datagram leaves
 * with DF set and without the kernel's path-MTU cache (IP_PMTUDISC_PROBE).
 * Once one of those came back and the size above it did not, each round
 * also probes 8 sizes spread evenly between the two, and the next round
 * the gap that is left: a path between two common sizes (8000 bytes, a
 * 1450-byte overlay) is found to within 4 bytes at start-up, and to
 * within about 60 by a check while running.
 * The check ends as soon as the full size is answered (OK), or after
 * num_retries rounds: no answer to the small ping is NOPATH; otherwise the
 * largest size answered is the path's datagram size (REDUCED), in the
 * spirit of RFC 8899's datagram PLPMTUD with the search done in parallel.
 * A check again while the job runs (epoch > 0: data stuck, or the raise
 * timer) is REDUCED after 4 rounds already when the small ping and a
 * smaller size were answered and the full size was not.
 *
 * This file and the two that implement it use no OPAL: the unit test
 * test/unit/t_cc.c drives agent and clients in one process.
 *
 * Ping wire format (40 bytes, then padding up to size; host byte order):
 *
 *    0        4       5      6       8        12       16         24      32     40
 *    +--------+-------+------+-------+--------+--------+----------+-------+------+
 *    | magic  |version| type | zero  |  size  | zero   |  to_key  | nonce | mac  |
 *    +--------+-------+------+-------+--------+--------+----------+-------+------+
 *
 * size is the whole datagram's length (checked against what arrived);
 * to_key the peer module's modex key; nonce random per check, echoed.  A
 * ping's mac is SipHash-2-4 of bytes 0-31 followed by the address and
 * port the ping is sent from (usnic_sip_request_mac) under the pinged
 * module's secret (the key of its packets' MACs, which peers learn from
 * the modex and the network never carries).  The responder echoes only a
 * ping with that MAC for the address it came from, so it answers nobody
 * but a process of the job, at the address that process named: a reader
 * who replays a ping from another source, or anyone who knows only the
 * module key, gets no echo aimed at a third party (version 4; before, the
 * responder reflected any well-formed ping at its sender's size).  The
 * responder turns a ping into its pong by setting type and mac:
 * SipHash-2-4 of bytes 0-31 under the same secret, stored little-endian.  The checker
 * takes a pong only with that MAC, under the secret of the process it
 * pinged: someone who reads the pings (and their nonces) and can send
 * from the peer's address still cannot answer a size the path does not
 * carry (before version 3 they could, and a path cut to a smaller size
 * grew back into the hole at each raise check).  The padding is not
 * covered: only its length counts, and that is size.
 */
#ifndef BTL_USNIC_CC_H
#define BTL_USNIC_CC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "btl_usnic_auth.h"

#define USNIC_CC_MAGIC 0x47504355u /* "UCPG" on little-endian hosts */
/* ping format and agent protocol (2: epoch; 3: pong MAC, secret; 4: ping MAC) */
#define USNIC_CC_VERSION 4
#define USNIC_CC_PING 1
#define USNIC_CC_PONG 2
#define USNIC_CC_SMALL 64         /* the small ping */
#define USNIC_CC_MIN_USEFUL 548   /* a smaller largest size is no usable path */
#define USNIC_CC_MAX_DGRAM 65507u /* the largest UDP payload over IPv4 */

struct usnic_cc_ping {
    uint32_t magic;
    uint8_t version;
    uint8_t type; /* USNIC_CC_PING or USNIC_CC_PONG */
    uint16_t zero;
    uint32_t size;
    uint32_t zero2;
    uint64_t to_key;
    uint64_t nonce;
    uint8_t mac[USNIC_SIP_TAG_BYTES]; /* SipHash-2-4 of the bytes before it (a ping's: and its
                                         source) */
};
_Static_assert(sizeof(struct usnic_cc_ping) == 40, "connectivity ping layout");
_Static_assert(offsetof(struct usnic_cc_ping, mac) == 32, "connectivity ping MAC input");

/* What to check.  Addresses and port in network byte order. */
struct usnic_cc_req {
    uint32_t local_ip;    /* our interface */
    uint32_t remote_ip;   /* the peer's interface */
    uint16_t remote_port; /* its liveness responder */
    /* 0: the check before the first traffic, whose verdict is kept and
     * shared; n > 0: a check again while the job runs (usnic_path_stuck),
     * which never takes a verdict already given (the path may have changed
     * since) but joins one still under way */
    uint16_t epoch;
    uint32_t full;       /* the pair's datagram size (UDP payload) */
    uint64_t remote_key; /* the peer module's modex key (to_key of the pings) */
    /* the peer module's secret (its modex record): the key of its pongs' MAC */
    uint8_t remote_secret[USNIC_SIP_KEY_BYTES];
};

enum usnic_cc_status {
    USNIC_CC_PENDING = 0,
    USNIC_CC_OK = 1,       /* the full size is proven */
    USNIC_CC_REDUCED = 2,  /* small passes, full does not: size is the largest that did */
    USNIC_CC_NOPATH = 3,   /* not even the small ping was answered */
    USNIC_CC_UNCHECKED = 4 /* the checker could not run (reason in the log) */
};

struct usnic_cc_result {
    uint32_t status;   /* enum usnic_cc_status */
    uint32_t size;     /* largest size proven (OK: full; REDUCED: less; else 0) */
    uint32_t rounds;   /* rounds of pings it took */
    uint32_t by_agent; /* 1: the host's agent decided it, 0: this process */
    uint32_t forged;   /* pongs for this check dropped for a wrong MAC */
    uint32_t zero;
};

struct usnic_cc_config {
    const char *sock_path;                   /* the agent's Unix socket */
    bool agent;                              /* this process hosts the agent */
    int ack_timeout_ms;                      /* between rounds of pings */
    int num_retries;                         /* rounds before a verdict without the full size */
    int connect_timeout_ms;                  /* how long a client tries to reach the agent */
    int agent_delay_ms;                      /* tests: the agent starts listening this late */
    void (*log)(int level, const char *msg); /* verbose output, may be NULL */
};

/* Start the checker in this process (the agent too, with cfg->agent).
 * 0 or -errno.  Idempotent. */
int usnic_cc_init(const struct usnic_cc_config *cfg);

/* Ask for a pair to be checked; returns a handle (> 0) that identical
 * requests share, or 0 on failure.  Never blocks.  A check again (epoch
 * > 0) reuses the handle of the last answered one toward the same peer
 * (same addresses, port and key): its verdict must have been read. */
uint32_t usnic_cc_request(const struct usnic_cc_req *req);

/* The verdict of a handle: false while pending.  Never blocks. */
bool usnic_cc_result(uint32_t handle, struct usnic_cc_result *res);

/* Wait up to timeout_ms for the verdict: true if it came (the BTL waits
 * one round of pings at most, once per peer: btl_usnic_path.h). */
bool usnic_cc_wait(uint32_t handle, struct usnic_cc_result *res, int timeout_ms);

/* Bumped every time a verdict arrives (cheap to poll from a progress loop). */
uint32_t usnic_cc_generation(void);

/* Stop: the agent stops listening (its clients carry on by themselves). */
void usnic_cc_fini(void);

/* A client's tries to connect to the host's agent so far, the one that
 * succeeded included (tests: the retries come soon after a miss). */
uint32_t usnic_cc_connect_tries(void);

/* ---- the engine (btl_usnic_cagent.c), used by the client's thread ---- */

struct cc_engine;
typedef void (*cc_done_fn)(void *ctx, uint64_t waiter, const struct usnic_cc_req *req,
                           const struct usnic_cc_result *res);

struct cc_engine *cc_engine_new(int ack_timeout_ms, int num_retries, cc_done_fn done, void *ctx,
                                void (*log)(int, const char *));
void cc_engine_free(struct cc_engine *e);
/* Add a check (or wait on an identical one); waiter is returned to done(). */
void cc_engine_add(struct cc_engine *e, const struct usnic_cc_req *req, uint64_t waiter,
                   uint64_t now_us);
/* Drop every waiter whose value has (waiter >> 32) == tag (a client gone). */
void cc_engine_forget(struct cc_engine *e, uint32_t tag);
/* Its sockets to poll: fills fds (at most max), returns how many. */
int cc_engine_fds(const struct cc_engine *e, int *fds, int max);
/* Read what arrived on ready_fd (-1: nothing to read), send what is due;
 * returns ms until the next round is due (-1: none). */
int cc_engine_run(struct cc_engine *e, int ready_fd, uint64_t now_us);

/* Echo a ping that arrived (liveness responder) from from_ip:from_port
 * (network byte order): true if buf holds a valid ping for key whose MAC
 * under secret (the module's own) names that address; it is then turned
 * into the pong to send back there, with its MAC under the same secret.
 * *forged is set when only the MAC was wrong. */
bool usnic_cc_make_pong(uint8_t *buf, size_t len, uint64_t key, const struct usnic_sip_key *secret,
                        uint32_t from_ip, uint16_t from_port, bool *forged);

/* The MAC a ping must carry when sent from from_ip:from_port to the module
 * whose secret is secret. */
uint64_t usnic_cc_ping_mac(const struct usnic_sip_key *secret, const struct usnic_cc_ping *ping,
                           uint32_t from_ip, uint16_t from_port);

/* The MAC a pong in buf must carry when the module answering has secret. */
uint64_t usnic_cc_pong_mac(const struct usnic_sip_key *secret, const struct usnic_cc_ping *pong);

#endif /* BTL_USNIC_CC_H */
