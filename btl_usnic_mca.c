/*
 * Every tunable of the component, registered and validated in one place:
 * the table below gives each parameter's name, field, default, accepted
 * range and description.  Defaults are chosen for the udp provider on
 * commodity Ethernet; the base BTL parameters (exclusivity, latency,
 * bandwidth, flags, eager/rndv limits, max_send_size, put limits) come
 * from the module template and are registered by
 * mca_btl_base_param_register().
 *
 * Validation (usnic_check_params, at component init) works on the text the
 * user gave, not only on the stored value: Open MPI turns an integer it
 * cannot parse ("abc") into 0, keeps the default of a value that does not
 * fit, and reads "12abc" as 12.  The text is found through the variable's
 * source (the environment, which mpirun --mca sets, or a parameter file),
 * parsed strictly and range-checked in 64 bits.  Every bad value is listed
 * in one help message (mpirun shows only the first message of each help
 * topic, and counts later ones as duplicates whatever their text), and the
 * component then disables itself.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opal/mca/base/mca_base_var.h"
#include "opal/mca/base/mca_base_var_enum.h"
/* mca_base_var_file_value_t: the text of a value read from a parameter file */
#include "opal/mca/base/mca_base_vari.h"
#include "opal/util/show_help.h"

#include "btl_usnic.h"
#include "btl_usnic_frag.h"
#include "btl_usnic_proc.h"
#include "btl_usnic_util.h"

/* Send or receive queue entries of one channel: far beyond what a provider
 * takes (udp: 1024 receives), small enough that sums and products of queue
 * depths stay far from overflowing an int. */
#define USNIC_QUEUE_MAX 65536
/* Completion queue entries: a channel's send plus receive queue at most. */
#define USNIC_CQ_MAX (2 * USNIC_QUEUE_MAX)
/* Windows, segments, fragment table slots: counts of per-peer or
 * per-module objects; products with a datagram size (<= 65535) fit in 64
 * bits with room to spare, and the counts themselves in an int. */
#define USNIC_COUNT_MAX (1 << 20)
/* The largest UDP payload over IPv4. */
#define USNIC_UDP_PAYLOAD_MAX 65507
/* Kernel socket buffers: the kernel doubles what is asked. */
#define USNIC_SOCKBUF_MAX (1 << 30)
/* Microseconds: a minute. */
#define USNIC_USEC_MAX 60000000
/* PML fragment limits (eager, rendezvous eager, max send size): each
 * module keeps 8 buffers of that size (plus the PML header) from the start,
 * up to 1024. */
#define USNIC_PML_LIMIT_MAX (16 * 1024 * 1024)
/* Entries of btl_usnic_if_include / if_exclude (the component's arrays). */
#define USNIC_IF_FILTERS_MAX 32
/* The priority channel's datagrams must hold an ACK with its selective-ACK
 * bitmap: a datagram of priority_limit bytes plus a FRAG header. */
#define USNIC_PRIO_LIMIT_MIN                                                                       \
    ((int64_t) (USNIC_HDR_LEN_ACK + sizeof(struct usnic_sack)) - (int64_t) USNIC_HDR_LEN_FRAG)

/* ---------------------------------------------------------------------- */
/* what went wrong, collected into one message */

typedef struct usnic_report {
    char *text; /* blocks of "Parameter / Value / Set in / Problem" lines */
    size_t len;
    int count;
} usnic_report_t;

static void report_append(usnic_report_t *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void report_append(usnic_report_t *r, const char *fmt, ...)
{
    va_list ap;
    int n;
    char *grown;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        return;
    }
    grown = realloc(r->text, r->len + (size_t) n + 1);
    if (NULL == grown) {
        return;
    }
    r->text = grown;
    va_start(ap, fmt);
    (void) vsnprintf(r->text + r->len, (size_t) n + 1, fmt, ap);
    va_end(ap);
    r->len += (size_t) n;
}

/* The value a user gave, and where. */
typedef struct usnic_given {
    const char *text; /* as written; NULL when the default is in force */
    char where[320];  /* "environment variable ...", "file ..., line ..." */
} usnic_given_t;

static void given_from_env(const mca_base_var_t *var, usnic_given_t *g, const char *note)
{
    const char *names[2] = {var->mbv_long_name, var->mbv_full_name};

    for (int i = 0; i < 2; i++) {
        char env[256];
        if (NULL == names[i]) {
            continue;
        }
        snprintf(env, sizeof(env), "%s%s", OPAL_MCA_PREFIX, names[i]);
        g->text = getenv(env);
        if (NULL != g->text) {
            snprintf(g->where, sizeof(g->where), "environment variable %s%s", env, note);
            return;
        }
    }
}

/* Find the text behind the current value of the variable FULL_NAME. */
static void given_find(const char *full_name, usnic_given_t *g)
{
    const mca_base_var_t *var = NULL;
    int idx = -1;

    g->text = NULL;
    g->where[0] = '\0';
    if (OPAL_SUCCESS != mca_base_var_find_by_name(full_name, &idx) ||
        OPAL_SUCCESS != mca_base_var_get(idx, &var) || NULL == var) {
        return;
    }
    switch (var->mbv_source) {
    case MCA_BASE_VAR_SOURCE_FILE:
    case MCA_BASE_VAR_SOURCE_OVERRIDE:
        if (NULL != var->mbv_file_value) {
            const mca_base_var_file_value_t *fv = var->mbv_file_value;
            g->text = (NULL != fv->mbvfv_value) ? fv->mbvfv_value : "";
            snprintf(g->where, sizeof(g->where), "file %s, line %d",
                     (NULL != fv->mbvfv_file) ? fv->mbvfv_file : "?", fv->mbvfv_lineno);
        } else {
            /* a file read by mpirun, whose values reach us in the environment */
            char note[200];
            snprintf(note, sizeof(note), " (from file %s)",
                     (NULL != var->mbv_source_file) ? var->mbv_source_file : "?");
            given_from_env(var, g, note);
        }
        break;
    case MCA_BASE_VAR_SOURCE_ENV:
        given_from_env(var, g, " (set by mpirun --mca or in the environment)");
        break;
    case MCA_BASE_VAR_SOURCE_COMMAND_LINE:
        given_from_env(var, g, " (from the command line)");
        break;
    default: /* the default, or set by the program */
        break;
    }
}

/* Add one bad value to the report.  VALUE is the stored value, shown when
 * the user's text is not known. */
static void report_bad(usnic_report_t *r, const char *name, const usnic_given_t *g,
                       const char *value, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static void report_bad(usnic_report_t *r, const char *name, const usnic_given_t *g,
                       const char *value, const char *fmt, ...)
{
    char problem[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(problem, sizeof(problem), fmt, ap);
    va_end(ap);
    for (char *c = problem; '\0' != *c; c++) {
        if (!isprint((unsigned char) *c)) {
            *c = '?';
        }
    }
    report_append(r, "%s  Parameter: %s\n", (r->count > 0) ? "\n" : "", name);
    if (NULL != g && NULL != g->text) {
        /* quoted, so that blanks show; control characters as '?' */
        char shown[132];
        size_t n = 0;
        for (const char *s = g->text; '\0' != *s && n < 120; s++) {
            shown[n++] = isprint((unsigned char) *s) ? *s : '?';
        }
        shown[n] = '\0';
        report_append(r, "  Value:     \"%s\"%s\n", shown, (strlen(g->text) > n) ? "..." : "");
        if ('\0' != g->where[0]) {
            report_append(r, "  Set in:    %s\n", g->where);
        }
    } else {
        report_append(r, "  Value:     %s\n", value);
    }
    report_append(r, "  Problem:   %s\n", problem);
    r->count++;
}

/* Show the report, if anything is in it; returns OPAL_SUCCESS if not. */
static int report_show(usnic_report_t *r)
{
    int rc = OPAL_SUCCESS;

    if (r->count > 0) {
        /* r->text is NULL only if memory ran out: still refuse the values */
        opal_show_help("help-mpi-btl-usnic.txt", "bad parameter", true,
                       (r->count > 1) ? "invalid MCA parameter values"
                                      : "an invalid MCA parameter value",
                       opal_process_info.nodename,
                       (NULL != r->text) ? r->text : "  (out of memory describing them)\n");
        rc = OPAL_ERR_BAD_PARAM;
    }
    free(r->text);
    r->text = NULL;
    r->len = 0;
    r->count = 0;
    return rc;
}

/* ---------------------------------------------------------------------- */
/* strict parsing of what the user wrote */

static const char *skip_blanks(const char *s)
{
    while (isspace((unsigned char) *s)) {
        s++;
    }
    return s;
}

static bool is_blank(const char *s)
{
    return '\0' == *skip_blanks(s);
}

/*
 * An integer as Open MPI reads it (decimal, 0x hexadecimal or 0 octal,
 * optionally followed by k, m or g for 2^10, 2^20, 2^30), surrounded by
 * nothing but blanks.  False if it is not one or does not fit in 64 bits.
 */
static bool parse_int(const char *text, int64_t *out)
{
    const char *s = skip_blanks(text);
    char *end;
    long long v;
    int shift = 0;

    if ('\0' == *s) {
        return false;
    }
    errno = 0;
    v = strtoll(s, &end, 0);
    if (end == s || ERANGE == errno) {
        return false;
    }
    switch (*end) {
    case 'k':
    case 'K':
        shift = 10;
        break;
    case 'm':
    case 'M':
        shift = 20;
        break;
    case 'g':
    case 'G':
        shift = 30;
        break;
    default:
        break;
    }
    if (0 != shift) {
        if (v > (LLONG_MAX >> shift) || v < -(LLONG_MAX >> shift)) {
            return false;
        }
        v *= (long long) 1 << shift;
        end++;
    }
    if ('\0' != *skip_blanks(end)) {
        return false;
    }
    *out = (int64_t) v;
    return true;
}

/* A finite floating-point number surrounded by nothing but blanks. */
static bool parse_double(const char *text, double *out)
{
    const char *s = skip_blanks(text);
    char *end;
    double v;

    if ('\0' == *s) {
        return false;
    }
    errno = 0;
    v = strtod(s, &end);
    if (end == s || ERANGE == errno || !isfinite(v) || '\0' != *skip_blanks(end)) {
        return false;
    }
    *out = v;
    return true;
}

/* ---------------------------------------------------------------------- */
/* the table */

typedef enum {
    TUNE_INT,    /* int field */
    TUNE_DOUBLE, /* double field */
    TUNE_STRING, /* char * field */
    TUNE_AUTH    /* int field, enum usnic_auth_mode, registered with an enumerator */
} usnic_tune_kind_t;

typedef struct usnic_tunable usnic_tunable_t;

struct usnic_tunable {
    const char *name; /* after "btl_usnic_" */
    usnic_tune_kind_t kind;
    size_t offset;    /* of the field in usnic_params_t */
    int level;        /* OPAL_INFO_LVL_* */
    int64_t idef;     /* TUNE_INT, TUNE_AUTH */
    double ddef;      /* TUNE_DOUBLE */
    const char *sdef; /* TUNE_STRING */
    /* TUNE_INT, TUNE_DOUBLE: accepted range, plus [also_lo, also_hi] with
     * the special meaning also_text (e.g. "0 (automatic)") */
    int64_t min, max;
    const char *also_text;
    int64_t also_lo, also_hi;
    const char *accepts; /* replaces the phrase made from the range */
    /* TUNE_STRING: checks the value */
    void (*check)(usnic_report_t *r, const char *name, const char *value, const usnic_given_t *g);
    const char *desc;
};

static void check_providers(usnic_report_t *r, const char *name, const char *value,
                            const usnic_given_t *g);
static void check_if_list(usnic_report_t *r, const char *name, const char *value,
                          const usnic_given_t *g);

#define FIELD(f) offsetof(usnic_params_t, f)

#define TUNE_STR(nm, f, lvl, def, chk, dsc)                                                        \
    {                                                                                              \
        .name = nm, .kind = TUNE_STRING, .offset = FIELD(f), .level = lvl, .sdef = def,            \
        .check = chk, .desc = dsc                                                                  \
    }
/* an integer in [lo, hi] */
#define TUNE_RANGE(nm, f, lvl, def, lo, hi, dsc)                                                   \
    {                                                                                              \
        .name = nm, .kind = TUNE_INT, .offset = FIELD(f), .level = lvl, .idef = def, .min = lo,    \
        .max = hi, .desc = dsc                                                                     \
    }
/* an integer in [lo, hi], or one in [alo, ahi] meaning atext */
#define TUNE_RANGE_OR(nm, f, lvl, def, atext, alo, ahi, lo, hi, dsc)                               \
    {                                                                                              \
        .name = nm, .kind = TUNE_INT, .offset = FIELD(f), .level = lvl, .idef = def, .min = lo,    \
        .max = hi, .also_text = atext, .also_lo = alo, .also_hi = ahi, .desc = dsc                 \
    }
/* 1 (on) or 0 (off) */
#define TUNE_ONOFF(nm, f, lvl, def, dsc)                                                           \
    {                                                                                              \
        .name = nm, .kind = TUNE_INT, .offset = FIELD(f), .level = lvl, .idef = def, .min = 0,     \
        .max = 1, .accepts = "1 (on) or 0 (off)", .desc = dsc                                      \
    }
/* a fraction */
#define TUNE_RATE(nm, f, dsc)                                                                      \
    {                                                                                              \
        .name = nm, .kind = TUNE_DOUBLE, .offset = FIELD(f), .level = OPAL_INFO_LVL_9,             \
        .ddef = 0.0, .min = 0, .max = 1, .accepts = "a number between 0 and 1", .desc = dsc        \
    }

static const usnic_tunable_t usnic_tunables[] = {
    TUNE_STR("providers", providers, OPAL_INFO_LVL_4, "usnic,kernel,udp", check_providers,
             "Comma-separated datagram backends to try, in order; the first that yields a "
             "usable device is used for the whole job: \"kernel\" is this component's own "
             "UDP sockets (batched receives, UDP_GRO, UDP_SEGMENT trains), any other name a "
             "libfabric provider (usnic: Cisco VIC hardware, looked for in sysfs before "
             "libfabric is asked; udp: libfabric over plain sockets)"),
    TUNE_STR("if_include", if_include, OPAL_INFO_LVL_1, "", check_if_list,
             "Comma-separated interface names or IPv4 CIDRs (e.g. eth0,10.1.0.0/16) to use; "
             "loopback is used only when named here. Mutually exclusive with "
             "btl_usnic_if_exclude"),
    TUNE_STR("if_exclude", if_exclude, OPAL_INFO_LVL_1, "", check_if_list,
             "Comma-separated interface names or IPv4 CIDRs not to use. Mutually exclusive "
             "with btl_usnic_if_include"),
    TUNE_RANGE_OR("max_btls", max_btls, OPAL_INFO_LVL_2, 0, "0 (all usable devices)", 0, 0, 1,
                  USNIC_MAX_MODULES,
                  "Maximum number of devices (modules) to use; 0 = all usable devices"),

    TUNE_RANGE("prio_sd_num", prio_sd_num, OPAL_INFO_LVL_5, 256, 1, USNIC_QUEUE_MAX,
               "Send queue entries of the priority channel"),
    TUNE_RANGE("prio_rd_num", prio_rd_num, OPAL_INFO_LVL_5, 256, 1, USNIC_QUEUE_MAX,
               "Receive buffers posted on the priority channel (at most what the provider's "
               "endpoints take: 1024 with udp)"),
    TUNE_RANGE("sd_num", sd_num, OPAL_INFO_LVL_5, 512, 1, USNIC_QUEUE_MAX,
               "Send queue entries of the data channel"),
    TUNE_RANGE_OR("rd_num", rd_num, OPAL_INFO_LVL_5, 0, "0 (automatic)", 0, 0, 1, USNIC_QUEUE_MAX,
                  "Receive buffers posted on the data channel; 0 = automatic: with the udp "
                  "provider the kernel socket buffer queues arriving datagrams, so only enough "
                  "buffers for 512 KiB are posted (8 to 512; a small set stays in the CPU cache, "
                  "which made 1 MiB transfers 9% faster here), with other providers 512 (the NIC "
                  "drops what finds no posted buffer)"),
    TUNE_RANGE_OR("cq_num", cq_num, OPAL_INFO_LVL_5, 0, "0 (automatic)", 0, 0, 1, USNIC_CQ_MAX,
                  "Completion queue entries per channel (0 = send + receive queue sizes; "
                  "otherwise at least the send plus receive queue entries of each channel)"),
    TUNE_RANGE("priority_limit", priority_limit, OPAL_INFO_LVL_5, 512, USNIC_PRIO_LIMIT_MIN,
               USNIC_UDP_PAYLOAD_MAX,
               "Largest PML fragment (bytes) sent on the low-latency priority channel (its "
               "datagrams must also hold an ACK with its selective-ACK bitmap)"),
    TUNE_RANGE_OR("send_window", send_window, OPAL_INFO_LVL_5, 0, "0 (automatic)", 0, 0, 1,
                  USNIC_REL_SACK_REACH,
                  "Segments that may be unacknowledged per peer before the sender waits (rounded "
                  "up to a power of two); 0 = automatic: enough data-channel datagrams for "
                  "btl_usnic_max_inflight bytes (1 MiB: 64 datagrams of 64 KiB on loopback, "
                  "1024 of 1472 bytes at MTU 1500), at least 64, at most btl_usnic_recv_window. "
                  "At most 1024, automatic or not: one selective ACK describes 1024 segments "
                  "beyond the first missing one, and a sender whose peer holds more than that "
                  "cannot learn what arrived (8 senders into one at MTU 1500 with windows of "
                  "2048 or 4096 resent 7-8 times more datagrams than with 1024, and their "
                  "slowest jobs took 3-11 times longer)"),
    TUNE_RANGE("recv_window", recv_window, OPAL_INFO_LVL_6, 4096, 1, USNIC_COUNT_MAX,
               "Receive window per peer in segments (rounded up to a power of two; must be at "
               "least the peers' send window)"),
    TUNE_RANGE("retrans_timeout", retrans_timeout, OPAL_INFO_LVL_5, 1000, 1, USNIC_USEC_MAX,
               "Retransmission timeout (microseconds) toward a peer whose round trip is not "
               "measured yet; afterwards the timeout follows the measured round trips (RFC "
               "6298: smoothed round trip + 4 x its variation), between "
               "btl_usnic_retrans_timeout_min and btl_usnic_retrans_timeout_max"),
    TUNE_RANGE("retrans_timeout_min", retrans_timeout_min, OPAL_INFO_LVL_5, 200, 1, USNIC_USEC_MAX,
               "Smallest retransmission timeout (microseconds), whatever the measured round "
               "trips"),
    TUNE_RANGE("retrans_timeout_max", retrans_timeout_max, OPAL_INFO_LVL_5, 100000, 1,
               USNIC_USEC_MAX,
               "Largest retransmission timeout (microseconds): the timeout doubles after each "
               "expiry without an ACK (a peer busy outside MPI gets a few probes, not a storm) "
               "up to this"),
    TUNE_ONOFF("gso", gso, OPAL_INFO_LVL_5, 1,
               "kernel backend: send the chunks of a fragment as UDP_SEGMENT trains (one system "
               "call for up to 64 datagrams) and receive with UDP_GRO (1 = on, 0 = one system "
               "call per datagram); where the kernel refuses UDP_SEGMENT the trains are sent "
               "datagram by datagram"),
    TUNE_RANGE("connect_peers", connect_peers, OPAL_INFO_LVL_5, 256, 0, 65536,
               "kernel backend: give up to this many peers a socket of their own per channel, "
               "connected to them at our first send to each, so that the kernel looks up their "
               "route once instead of at every send (0 = all sends from one socket per channel; "
               "each peer costs two file descriptors; fewer are used when the process runs short "
               "of them)"),
    TUNE_ONOFF("in_place", in_place, OPAL_INFO_LVL_5, 1,
               "kernel backend: a fragment whose chunks (up to 16) all arrive in order within one "
               "batch of receives is handed to the PML as pieces of the receive buffers, without "
               "being copied together first (1 = on, 0 = always reassembled)"),
    TUNE_ONOFF("rx_predict", rx_predict, OPAL_INFO_LVL_5, 1,
               "Header prediction on the receive path (1 = on, 0 = off): within one batch of "
               "receives, a chunk that is the next one of the fragment or PUT before it, from the "
               "same sender and source, is taken without parsing it, looking up its sender and "
               "checking its window, tag and fragment again (its MAC and ACK are still "
               "processed)"),
    TUNE_ONOFF("rx_share", rx_share, OPAL_INFO_LVL_5, 1,
               "Share the data channel's receive buffer among the peers sending to us (1 = on, "
               "0 = off): every ACK tells its peer how many bytes it may keep in flight to us, "
               "half the buffer (halved after the kernel dropped datagrams for a full buffer, "
               "grown back while it does not) divided by the number of peers that sent data in "
               "the last 50-100 ms, so that many senders at once (incast: a gather, an "
               "all-to-all) do not overflow it.  Off: each peer keeps up to its own limit "
               "(btl_usnic_max_inflight) in flight, whatever the others do"),
    TUNE_ONOFF("direct_recv", direct_recv, OPAL_INFO_LVL_5, 1,
               "kernel backend: while a large message (a PUT, or a fragment sent in chunks) "
               "arrives in order, receive its next datagrams' payloads straight into the target "
               "or reassembly buffer, so the receiving host copies the data once less (1 = on, "
               "0 = every datagram into a receive buffer first); only for datagrams that carry "
               "at least 4 KiB (MTU 9000, loopback: with smaller ones the scattered receive costs "
               "more than the copy); needs btl_usnic_gso, and is not used where "
               "btl_usnic_checksum or btl_usnic_auth full covers the payload"),
    TUNE_ONOFF("tlp", tlp, OPAL_INFO_LVL_5, 1,
               "Tail-loss probes (1 = on, 0 = off): when no ACK came two round trips after the "
               "last segment sent to a peer, resend that segment and ask for an immediate ACK, "
               "so a lost last datagram is recovered in about two round trips rather than after "
               "the retransmission timeout (in the manner of RACK-TLP, RFC 8985)"),
    TUNE_RANGE("max_resends_per_iteration", max_resends_per_iteration, OPAL_INFO_LVL_5, 16, 1,
               USNIC_COUNT_MAX, "Most segments retransmitted in one call of the progress engine"),
    TUNE_RANGE("ack_delay", ack_delay, OPAL_INFO_LVL_5, 50, 0, USNIC_USEC_MAX,
               "Microseconds an ACK may wait for data to ride on before it is sent on its own"),
    TUNE_RANGE_OR("fast_retrans_dups", fast_retrans_dups, OPAL_INFO_LVL_6, 0, "0 (never)", 0, 0, 1,
                  USNIC_COUNT_MAX,
                  "Duplicate ACKs without a selective-ACK bitmap that trigger an immediate "
                  "retransmission of the oldest segment (0 = never).  Off by default: receivers "
                  "send a bitmap with every gap, and the time-based loss detection (RACK) reads "
                  "it per channel; counting duplicates resent segments that were merely "
                  "overtaken by the other channel (measured: every resend without loss was one)"),
    TUNE_RANGE_OR("peer_timeout", peer_timeout, OPAL_INFO_LVL_4, 10, "0 (never)", 0, 0, 1, INT_MAX,
                  "Seconds a peer that has our data outstanding may go without acknowledging "
                  "anything and without answering liveness probes before it is declared "
                  "unreachable and the job is told (0 = never).  A peer that computes outside MPI "
                  "still answers the probes (btl_usnic_liveness), so this only has to cover a "
                  "dead host or a cut link"),
    TUNE_ONOFF("liveness", liveness, OPAL_INFO_LVL_5, 1,
               "Answer liveness probes from a thread of our own and probe peers that hold our "
               "data unacknowledged for a while (1 = on, 0 = off: a peer busy outside MPI for "
               "longer than btl_usnic_peer_timeout is then declared dead)"),
    TUNE_ONOFF("connectivity_check", connectivity_check, OPAL_INFO_LVL_3, 1,
               "Prove the path to every peer interface before the first traffic over it, with "
               "a small and a full-size datagram that may not be fragmented, once per host "
               "(the agent runs in local rank 0) (1 = on, 0 = off).  A path that carries only "
               "smaller datagrams gets the largest size that passes "
               "(btl_usnic_connectivity_mtu_fallback); a path that carries nothing is an error "
               "within seconds"),
    TUNE_RANGE("connectivity_ack_timeout", connectivity_ack_timeout, OPAL_INFO_LVL_5, 250, 1, 60000,
               "Milliseconds between rounds of connectivity pings"),
    TUNE_RANGE("connectivity_error_num_retries", connectivity_error_num_retries, OPAL_INFO_LVL_5,
               12, 1, 10000,
               "Rounds of connectivity pings without an answer before a path is declared "
               "broken (with btl_usnic_connectivity_ack_timeout: 12 x 250 ms = 3 s)"),
    TUNE_ONOFF("connectivity_mtu_fallback", connectivity_mtu_fallback, OPAL_INFO_LVL_4, 1,
               "When the connectivity check finds that a path drops datagrams of the pair's "
               "full size but carries smaller ones (an MTU black hole), use the largest size "
               "that passed and warn once (1), or abort the job with an error (0)"),
    TUNE_RANGE_OR("connectivity_recheck_after", connectivity_recheck_after, OPAL_INFO_LVL_5, 1000,
                  "0 (never)", 0, 0, 10, 3600000,
                  "Milliseconds a datagram of data may stay unacknowledged through retransmission "
                  "timeouts, while the peer still answers, before its path is checked again as "
                  "at start-up (an MTU black hole that opened while the job runs: "
                  "btl_usnic_connectivity_mtu_fallback decides what follows; a check that finds "
                  "the path fine waits 10 s before the next).  0 = never (a black hole opening "
                  "mid-job then hangs the job)"),
    TUNE_RANGE_OR("connectivity_raise_after", connectivity_raise_after, OPAL_INFO_LVL_5, 600,
                  "0 (never)", 0, 0, 1, 86400,
                  "Seconds a pair of interfaces uses a smaller datagram size than their MTU "
                  "allows (the connectivity check found a black hole, at start-up or while the "
                  "job ran) before the path is checked again for the full size, as RFC 8899's "
                  "raise timer does; if it passes (the link failed back, the switch was fixed), "
                  "the pair uses it again, otherwise the next try is as long after.  Data "
                  "traffic to the peer starts the check; nothing is resent.  0 = never (the "
                  "smaller size stays until the job ends)"),
    TUNE_STR("connectivity_map", connectivity_map, OPAL_INFO_LVL_3, "", NULL,
             "Write a file per process named <this value>-<host>-pid<pid>-rank<rank>.txt saying "
             "which local interface talks to which peer interface, with the checked datagram "
             "size (empty = no files)"),
    TUNE_ONOFF("show_route_failures", show_route_failures, OPAL_INFO_LVL_3, 1,
               "Show a message when a peer process cannot be reached from any usnic interface "
               "of this process (1 = yes, 0 = no)"),
    TUNE_ONOFF("routed_peers", routed_peers, OPAL_INFO_LVL_4, 1,
               "Pair an interface with a peer's interface on another subnet when the kernel's "
               "route to the peer's address leaves through our interface (1 = on, 0 = same "
               "subnet only).  A peer interface on our own subnet is always preferred; run with "
               "btl_base_verbose 20 to see why each pair was or was not made"),
    TUNE_RANGE("seg_num", seg_num, OPAL_INFO_LVL_6, 8192, 1, USNIC_COUNT_MAX,
               "Send segments per module (bounds the data in flight on a module; at most 64 MiB "
               "of segments are used whatever this says)"),
    TUNE_RANGE("reasm_slots", reasm_slots, OPAL_INFO_LVL_6, 256, 1, USNIC_COUNT_MAX,
               "Fragments that may be under reassembly or waiting for their turn at once from "
               "one peer (at least the peer's send window is always used; rounded up to a "
               "power of two)"),
    TUNE_ONOFF("print_stats", print_stats, OPAL_INFO_LVL_4, 0,
               "Print one line of counters per module at finalize (0 = no, 1 = yes)"),
    TUNE_RANGE_OR("max_inflight", max_inflight, OPAL_INFO_LVL_5, 1024 * 1024, "0 (no limit)", 0, 0,
                  1, INT_MAX,
                  "At most this many bytes sent to one peer and not yet acknowledged (besides "
                  "half the peer's socket buffer, which always applies); 0 = no limit but that.  "
                  "Less data in flight keeps the receiver's queue in its CPU cache: 1 MiB made 1 "
                  "MiB transfers over loopback 12% faster than 2 MiB"),
    TUNE_RANGE_OR(
        "udp_sockbuf", udp_sockbuf, OPAL_INFO_LVL_5, 16 * 1024 * 1024, "0 (the system default)", 0,
        0, 1, USNIC_SOCKBUF_MAX,
        "udp provider and kernel backend: bytes of kernel send and receive buffer to request for each "
        "socket (larger buffers absorb bursts without loss; 0 = keep the system "
        "default)"),
    TUNE_RANGE_OR("udp_datagram_size", udp_datagram_size, OPAL_INFO_LVL_4, 0,
                  "-1 (the provider's size), 0 (the interface MTU)", -1, 0, 512,
                  USNIC_UDP_PAYLOAD_MAX,
                  "udp provider only: datagram size. 0 = follow the interface MTU (minus IP and "
                  "UDP headers), proven by a self-test at startup; -1 = the provider's advertised "
                  "size (1472); N > 0 = follow the interface MTU but at most N bytes (never below "
                  "the provider's advertised size)"),
    TUNE_RANGE_OR("stream_copy_min", stream_copy_min, OPAL_INFO_LVL_5, 512 * 1024, "0 (never)", 0,
                  0, 1, INT_MAX,
                  "Emulated PUTs of at least this many bytes are copied into the target buffer "
                  "with non-temporal stores, past the CPU caches (faster for large transfers the "
                  "receiver does not read at once), unless the same buffer was the target of one "
                  "of the last 4 such PUTs (likely cached, e.g. a ping-pong's); one store fence "
                  "per progress call makes the copies visible before the PML learns of them; "
                  "0 = never"),
    TUNE_RANGE_OR("yield_blocked", yield_blocked, OPAL_INFO_LVL_5, 200, "0 (never)", 0, 0, 1,
                  USNIC_USEC_MAX,
                  "Microseconds a send may wait for a peer's window or allowance (its ACKs) before "
                  "every progress call that finds nothing to do gives the CPU away (sched_yield) "
                  "until a send goes again: where ranks share CPUs, the receivers they wait for "
                  "get to run (8 senders into one rank, 9 ranks on 2 CPUs: several times the "
                  "bandwidth); on a CPU of its own the call returns at once; 0 = never"),
    TUNE_RANGE("yield_idle", yield_idle, OPAL_INFO_LVL_5, -1, -1, 1,
               "Progress calls that find nothing to do give the CPU away (sched_yield): -1 = "
               "where this host runs more of the job's ranks than the CPUs it lets the job use "
               "(hwloc's allowed set, whatever the hostfile's slots say), 1 = always, 0 = never.  "
               "Senders that spin while they wait for a receiver sharing their CPUs take its "
               "time (8 senders into one rank, 9 ranks on 2 CPUs: 5-6 times the bandwidth "
               "yielding).  Not where Open MPI yields anyway (mpi_yield_when_idle)"),
    TUNE_RANGE_OR("early_copy_max", early_copy_max, OPAL_INFO_LVL_5, 128 * 1024, "0 (never)", 0, 0,
                  1, INT_MAX,
                  "kernel backend: a message sent from the user's memory (no copy) completes "
                  "when its peer acknowledges it.  When nothing else to that peer is in flight "
                  "(a ping-pong, a blocking send), a message of at most this many bytes is "
                  "copied for resending once it is on the wire and completes at once, so that "
                  "the application can post its next receive before the answer comes (one the "
                  "PML packed into our buffer completes so without a copy); 0 = always wait for "
                  "the acknowledgement"),
    TUNE_RANGE_OR("train_copy", train_copy, OPAL_INFO_LVL_5, 2048, "0 (never)", 0, 0, 1, INT_MAX,
                  "kernel backend: a train of datagrams of at most this many bytes is copied "
                  "into one buffer (headers, payloads) for its UDP_SEGMENT send instead of "
                  "being handed to the kernel as two or three pieces per datagram: at MTU 1500 "
                  "the kernel takes the pieces more slowly than the copy costs, with 9000-byte "
                  "datagrams it does not; 0 = never"),
    TUNE_RANGE_OR("train_copy_put_max", put_copy_max, OPAL_INFO_LVL_5, 786432,
                  "0 (every train copied)", 0, 0, 1, INT_MAX,
                  "kernel backend: the trains of a PUT larger than this many bytes are not "
                  "copied (btl_usnic_train_copy) but handed to the kernel in pieces: their "
                  "payloads come from a buffer too large to stay in the cache, which the copy "
                  "would read and write once more (MTU 1500: ping-pongs of 1-4 MiB 5-10% faster, "
                  "streams 1-3% more bandwidth; a stream of 512 KiB messages from one buffer, "
                  "which stays cached, 10% less in pieces).  So are those of a smaller PUT that "
                  "starts with nothing else in flight to its peer (a ping-pong, a blocking send: "
                  "it is waited for; 512 KiB ping-pongs 8% faster); 0 = every train copied"),
    TUNE_RANGE_OR("tx_coalesce", tx_coalesce, OPAL_INFO_LVL_5, 65536, "0 (off)", 0, 0, 1, INT_MAX,
                  "kernel backend: while at least this many bytes to a peer are unacknowledged, "
                  "a message of at most 24 KiB leaves its train open for the next messages to "
                  "join instead of going as a short train of its own (one system call and one "
                  "trip through the network stack per 64 KiB instead of per message): streams "
                  "of 2-16 KiB messages at MTU 1500 1.5-1.75x as fast.  An open train goes when "
                  "it is full, at the next progress call, or, when the application computes "
                  "after its sends, from the liveness thread within about a millisecond "
                  "(counters tx_held, tx_late; without the liveness thread, btl_usnic_liveness "
                  "0, never held); 0 = off, every message leaves when sent"),
    TUNE_RANGE_OR("tx_batch", tx_batch, OPAL_INFO_LVL_5, 4, "1 (off)", 1, 1, 2, 16,
                  "kernel backend: when a message takes several trains (or several datagrams "
                  "too large for trains, as on loopback), up to this many go to the kernel in "
                  "one sendmmsg instead of a sendmsg each, once the peer has at least 64 KiB "
                  "in flight (before that each goes at once, so that the receiver can start): "
                  "windows of 64 KiB-1 MiB messages 1.12-1.26x as fast, 1 MiB ping-pongs 6-19% "
                  "faster (MTU 1500, MTU 9000, loopback); 1 = a sendmsg each"),
    TUNE_ONOFF("mac_lanes", mac_lanes, OPAL_INFO_LVL_5, 1,
               "kernel backend, auth header: compute the header MACs of a train's datagrams, and "
               "of a coalesced (UDP_GRO) or direct receive, eight at a time in the lanes of "
               "AVX-512 registers where the CPU has them (Intel from Ice Lake, AMD from Zen 4: the "
               "same SipHash-2-4 tags at about half the cost per datagram); 0 = one by one.  "
               "Elsewhere it changes nothing"),
    {.name = "auth",
     .kind = TUNE_AUTH,
     .offset = FIELD(auth),
     .level = OPAL_INFO_LVL_3,
     .idef = USNIC_AUTH_HEADER,
     .accepts = "one of none, header or full",
     .desc = "Every datagram carries a keyed message authentication code computed with a "
             "per-process secret that travels only through the job's modex. \"header\" (the "
             "default) covers every header field (type, flags, tag, sender, sequence and ACK "
             "numbers, chunk and PUT fields, payload length); \"full\" covers the payload too; "
             "\"none\" turns it off (then anyone who can send UDP to the job's ports and read "
             "its traffic can inject packets)"},
    TUNE_ONOFF("checksum", checksum, OPAL_INFO_LVL_4, 0,
               "CRC32C over the header and payload of every datagram (1 = on, 0 = off), for "
               "networks and NICs that do not already catch corruption (the UDP checksum covers "
               "only the network path, and is optional)"),
    TUNE_ONOFF("want_numa_device_assignment", want_numa, OPAL_INFO_LVL_5, 1,
               "When the process is bound to CPUs, raise the btl_latency of each device whose PCI "
               "bus is on a NUMA node farther from them than the nearest device's, by the "
               "difference in NUMA distance, so that short messages go over the nearest devices "
               "(and, with ob1, the bulk of long ones too unless pml_ob1_use_all_rdma is 1); 1 = "
               "on, 0 = off.  Devices hwloc shows no PCI information for keep their latency"),
    TUNE_RATE("debug_drop_rate", debug_drop_rate,
              "Debug: fraction (0..1) of arriving packets the receive path drops"),
    TUNE_RATE("debug_dup_rate", debug_dup_rate,
              "Debug: fraction (0..1) of arriving packets the receive path processes twice"),
    TUNE_RATE("debug_reorder_rate", debug_reorder_rate,
              "Debug: fraction (0..1) of arriving packets held back and processed after the "
              "next one"),
    TUNE_RATE("debug_corrupt_rate", debug_corrupt_rate,
              "Debug: fraction of sent datagrams whose bytes are altered after the checksum and "
              "MAC were computed (tests the receiver's checks)"),
    TUNE_ONOFF("debug_gso_refused", debug_gso_refused, OPAL_INFO_LVL_9, 0,
               "Debug: act as if the kernel refused UDP_SEGMENT (EIO) at the first train, "
               "to exercise the fall back to datagram-by-datagram sends"),
    TUNE_RANGE("debug_seed", debug_seed, OPAL_INFO_LVL_9, 1, INT_MIN, INT_MAX,
               "Debug: seed of the fault-injection random generator"),
    /* stored in an int: 0 .. 2^31-1 can be given, so the 2^31 boundary of
     * the signed sequence comparisons can be exercised, not the 2^32 wrap */
    TUNE_RANGE_OR("debug_isn", debug_isn, OPAL_INFO_LVL_9, -1, "-1 (random)", -1, -1, 0, INT_MAX,
                  "Debug: first sequence number of every module (-1 = random); values near "
                  "2147483647 exercise the wrap-around of the signed sequence comparisons"),
};

#define USNIC_NUM_TUNABLES (sizeof(usnic_tunables) / sizeof(usnic_tunables[0]))

/* Base BTL parameters of this component (registered by Open MPI from the
 * module template) whose text is checked too. */
typedef struct usnic_base_tunable {
    const char *name;
    int64_t min, max;
    const char *why; /* NULL, or why the range */
} usnic_base_tunable_t;

static const usnic_base_tunable_t usnic_base_tunables[] = {
    {"eager_limit", USNIC_PML_HDR_MAX, USNIC_PML_LIMIT_MAX,
     "room for the PML's headers, and each module keeps buffers of the largest PML limit"},
    {"rndv_eager_limit", USNIC_PML_HDR_MAX, USNIC_PML_LIMIT_MAX,
     "room for the PML's headers, and each module keeps buffers of the largest PML limit"},
    {"max_send_size", USNIC_PML_HDR_MAX, USNIC_PML_LIMIT_MAX,
     "room for the PML's headers, and each module keeps buffers of the largest PML limit"},
    {"exclusivity", 0, UINT32_MAX, NULL},
    {"latency", 0, UINT32_MAX, NULL},
    {"bandwidth", 0, UINT32_MAX, NULL},
    {"rdma_pipeline_send_length", 0, INT64_MAX, NULL},
    {"rdma_pipeline_frag_size", 0, INT64_MAX, NULL},
    {"min_rdma_pipeline_size", 0, INT64_MAX, NULL},
    {"put_limit", 0, INT64_MAX, NULL},
};

static const mca_base_var_enum_value_t usnic_auth_values[] = {
    {USNIC_AUTH_NONE, "none"},
    {USNIC_AUTH_HEADER, "header"},
    {USNIC_AUTH_FULL, "full"},
    {0, NULL},
};

static void *field_of(const usnic_tunable_t *t)
{
    return (char *) &mca_btl_usnic_component.params + t->offset;
}

/* What a numeric tunable accepts, as a phrase: "a positive integer up to 64". */
static void accepted_phrase(const usnic_tunable_t *t, char *buf, size_t len)
{
    char range[96];

    if (NULL != t->accepts) {
        snprintf(buf, len, "%s", t->accepts);
        return;
    }
    if (1 == t->min) {
        snprintf(range, sizeof(range), "a positive integer up to %" PRId64, t->max);
    } else {
        snprintf(range, sizeof(range), "an integer from %" PRId64 " to %" PRId64, t->min, t->max);
    }
    if (NULL != t->also_text) {
        snprintf(buf, len, "%s or %s", t->also_text, range);
    } else {
        snprintf(buf, len, "%s", range);
    }
}

static bool int_accepted(const usnic_tunable_t *t, int64_t v)
{
    return (v >= t->min && v <= t->max) ||
           (NULL != t->also_text && v >= t->also_lo && v <= t->also_hi);
}

/* ---------------------------------------------------------------------- */
/* registration */

int usnic_register_params(void)
{
    mca_base_component_t *comp = &mca_btl_usnic_component.super.btl_version;
    mca_btl_base_module_t *t = &usnic_module_template.super;

    for (size_t i = 0; i < USNIC_NUM_TUNABLES; i++) {
        const usnic_tunable_t *tu = &usnic_tunables[i];
        mca_base_var_enum_t *enumerator = NULL;
        mca_base_var_type_t type = MCA_BASE_VAR_TYPE_INT;
        void *storage = field_of(tu);
        char desc[1536];
        char accepts[256] = "";

        switch (tu->kind) {
        case TUNE_INT:
            *(int *) storage = (int) tu->idef;
            accepted_phrase(tu, accepts, sizeof(accepts));
            break;
        case TUNE_DOUBLE:
            *(double *) storage = tu->ddef;
            type = MCA_BASE_VAR_TYPE_DOUBLE;
            accepted_phrase(tu, accepts, sizeof(accepts));
            break;
        case TUNE_STRING:
            *(char **) storage = (char *) tu->sdef;
            type = MCA_BASE_VAR_TYPE_STRING;
            break;
        case TUNE_AUTH:
            *(int *) storage = (int) tu->idef;
            /* a bad string is refused by Open MPI too (ompi_info lists the values) */
            if (OPAL_SUCCESS !=
                mca_base_var_enum_create("btl_usnic_auth", usnic_auth_values, &enumerator)) {
                enumerator = NULL;
            }
            break;
        }
        if ('\0' != accepts[0]) {
            snprintf(desc, sizeof(desc), "%s. Accepted: %s", tu->desc, accepts);
        } else {
            snprintf(desc, sizeof(desc), "%s", tu->desc);
        }
        /* an unparsable value fails here and leaves the default in place;
         * usnic_check_params reports it from the text */
        (void) mca_base_component_var_register(comp, tu->name, desc, type, enumerator, 0, 0,
                                               tu->level, MCA_BASE_VAR_SCOPE_READONLY, storage);
        if (NULL != enumerator) {
            OBJ_RELEASE(enumerator);
        }
    }

    /* base BTL parameters, from the template's defaults */
    t->btl_exclusivity = MCA_BTL_EXCLUSIVITY_DEFAULT - 24;
    t->btl_latency = 10;
    t->btl_bandwidth = 10000;
    t->btl_flags = MCA_BTL_FLAGS_SEND | MCA_BTL_FLAGS_PUT | MCA_BTL_FLAGS_SEND_INPLACE;
    /* eager up to 300000 bytes: a 256 KiB message goes without the
     * rendezvous round trip (its ping-pong 35-45% faster on the namespace
     * bed, docs/perf-kernel-backend.md).  A rendezvous sends only 16 KiB
     * before the receiver answers: the rest then goes by PUT, received in
     * place, instead of 150000 bytes through reassembly and ob1's copy
     * before the PUT can start (512 KiB ping-pong at MTU 1500 10-30%
     * faster) */
    t->btl_eager_limit = 300000;
    t->btl_rndv_eager_limit = 16384;
    t->btl_max_send_size = 300000;
    t->btl_rdma_pipeline_send_length = 150000;
    t->btl_rdma_pipeline_frag_size = 4 * 1024 * 1024;
    t->btl_min_rdma_pipeline_size = 0;
    t->btl_put_limit = 4 * 1024 * 1024;
    t->btl_put_alignment = 0;
    t->btl_put_local_registration_threshold = SIZE_MAX;
    t->btl_registration_handle_size = 24;
    return mca_btl_base_param_register(comp, t);
}

/* ---------------------------------------------------------------------- */
/* validation */

/* Comma-separated libfabric provider names: no empty entries, no blanks
 * (the component splits the list at commas only). */
static void check_providers(usnic_report_t *r, const char *name, const char *value,
                            const usnic_given_t *g)
{
    const char *s = (NULL != value) ? value : "";
    int entry = 1;

    if (is_blank(s)) {
        report_bad(r, name, g, "(empty)",
                   "no backend named; give at least one, e.g. usnic,kernel,udp");
        return;
    }
    for (const char *c = s;; c++) {
        if (',' == *c || '\0' == *c) {
            if (c == s || ',' == c[-1]) {
                report_bad(r, name, g, s,
                           "entry %d is empty; give comma-separated backend names, "
                           "e.g. usnic,kernel,udp",
                           entry);
                return;
            }
            if ('\0' == *c) {
                break;
            }
            entry++;
        } else if (isspace((unsigned char) *c)) {
            report_bad(r, name, g, s,
                       "backend names contain no blanks; give comma-separated backend "
                       "names without blanks, e.g. usnic,kernel,udp");
            return;
        }
    }
}

/* Interface names and IPv4 CIDRs, comma-separated.  Unset or "" means no
 * filter; blank entries, or a list of nothing but blanks, are mistakes. */
static void check_if_list(usnic_report_t *r, const char *name, const char *value,
                          const usnic_given_t *g)
{
    struct usnic_if_filter f[USNIC_IF_FILTERS_MAX];
    const char *bad = NULL;
    const char *s = value;
    int entry = 0;

    if (NULL == value || '\0' == value[0]) {
        return;
    }
    if (strspn(value, " \t\n\r\f\v,") == strlen(value)) {
        report_bad(r, name, g, value,
                   "the list is empty once blanks are removed; name interfaces or IPv4 CIDRs "
                   "(e.g. eth0,10.1.0.0/16), or leave it unset (\"\") for no filter");
        return;
    }
    for (;;) {
        const char *comma = strchr(s, ',');
        const char *b = s, *e = (NULL != comma) ? comma : s + strlen(s);
        entry++;
        while (b < e && isspace((unsigned char) *b)) {
            b++;
        }
        while (e > b && isspace((unsigned char) e[-1])) {
            e--;
        }
        if (b == e) {
            report_bad(r, name, g, value,
                       "entry %d is blank; each comma-separated entry must be an interface name "
                       "or an IPv4 CIDR like 10.0.0.0/8",
                       entry);
            return;
        }
        for (const char *c = b; c < e; c++) {
            if (isspace((unsigned char) *c)) {
                report_bad(r, name, g, value,
                           "entry %d (\"%.*s\") contains a blank; separate interface names and "
                           "IPv4 CIDRs with commas",
                           entry, (int) (e - b), b);
                return;
            }
        }
        if (NULL == comma) {
            break;
        }
        s = comma + 1;
    }
    if (entry > USNIC_IF_FILTERS_MAX) {
        report_bad(r, name, g, value, "%d entries; at most %d interface names or IPv4 CIDRs", entry,
                   USNIC_IF_FILTERS_MAX);
        return;
    }
    if (usnic_if_filter_parse(value, f, USNIC_IF_FILTERS_MAX, &bad) < 0) {
        report_bad(r, name, g, value,
                   "entry \"%s\" is not valid; each entry must be an interface name (at most 63 "
                   "characters) or an IPv4 CIDR like 10.0.0.0/8",
                   (NULL != bad) ? bad : "?");
    }
}

/* Check one tunable; what is wrong goes into the report. */
static void check_tunable(usnic_report_t *r, const usnic_tunable_t *t)
{
    void *field = field_of(t);
    char name[96], phrase[256], stored[64];
    usnic_given_t g;

    snprintf(name, sizeof(name), "btl_usnic_%s", t->name);
    given_find(name, &g);
    switch (t->kind) {
    case TUNE_STRING:
        if (NULL != t->check) {
            t->check(r, name, *(char **) field, &g);
        }
        break;
    case TUNE_INT: {
        int64_t v = *(int *) field;
        accepted_phrase(t, phrase, sizeof(phrase));
        snprintf(stored, sizeof(stored), "%d", *(int *) field);
        if (NULL != g.text && !parse_int(g.text, &v)) {
            report_bad(r, name, &g, stored, "not an integer; it must be %s", phrase);
        } else if (!int_accepted(t, v)) {
            report_bad(r, name, &g, stored, "out of range; it must be %s", phrase);
        }
        break;
    }
    case TUNE_DOUBLE: {
        double v = *(double *) field;
        accepted_phrase(t, phrase, sizeof(phrase));
        snprintf(stored, sizeof(stored), "%g", v);
        if (NULL != g.text && !parse_double(g.text, &v)) {
            report_bad(r, name, &g, stored, "not a number; it must be %s", phrase);
        } else if (!(v >= (double) t->min && v <= (double) t->max)) {
            report_bad(r, name, &g, stored, "out of range; it must be %s", phrase);
        }
        break;
    }
    case TUNE_AUTH: {
        const mca_base_var_t *var = NULL;
        int idx, v = *(int *) field;
        snprintf(stored, sizeof(stored), "%d", v);
        if (NULL != g.text) {
            /* Open MPI's own reading of the text, except that it takes
             * "" (and blanks) for 0, which is "none" */
            if (is_blank(g.text) || OPAL_SUCCESS != mca_base_var_find_by_name(name, &idx) ||
                OPAL_SUCCESS != mca_base_var_get(idx, &var) || NULL == var->mbv_enumerator ||
                OPAL_SUCCESS !=
                    var->mbv_enumerator->value_from_string(var->mbv_enumerator, g.text, &v)) {
                report_bad(r, name, &g, stored, "unknown mode; it must be %s", t->accepts);
                break;
            }
        }
        if (USNIC_AUTH_NONE != v && USNIC_AUTH_HEADER != v && USNIC_AUTH_FULL != v) {
            report_bad(r, name, &g, stored, "unknown mode; it must be %s", t->accepts);
        }
        break;
    }
    }
}

/* The text of a base BTL parameter, if the user gave one, must be a number
 * in range (Open MPI would read "abc" as 0, and "-1" as 2^64-1). */
static void check_base_tunable(usnic_report_t *r, const usnic_base_tunable_t *t)
{
    char name[96], phrase[256];
    usnic_given_t g;
    int64_t v;

    snprintf(name, sizeof(name), "btl_usnic_%s", t->name);
    given_find(name, &g);
    if (NULL == g.text) {
        return;
    }
    snprintf(phrase, sizeof(phrase), "an integer from %" PRId64 " to %" PRId64 "%s%s%s", t->min,
             t->max, (NULL != t->why) ? " (" : "", (NULL != t->why) ? t->why : "",
             (NULL != t->why) ? ")" : "");
    if (!parse_int(g.text, &v)) {
        report_bad(r, name, &g, "?", "not an integer; it must be %s", phrase);
    } else if (v < t->min || v > t->max) {
        report_bad(r, name, &g, "?", "out of range; it must be %s", phrase);
    }
}

/* Report NAME (btl_usnic_NAME) as bad for a reason that involves others. */
static void report_relation(usnic_report_t *r, const char *short_name, int value, const char *fmt,
                            ...) __attribute__((format(printf, 4, 5)));

static void report_relation(usnic_report_t *r, const char *short_name, int value, const char *fmt,
                            ...)
{
    char name[96], stored[32], problem[512];
    usnic_given_t g;
    va_list ap;

    snprintf(name, sizeof(name), "btl_usnic_%s", short_name);
    snprintf(stored, sizeof(stored), "%d", value);
    given_find(name, &g);
    va_start(ap, fmt);
    vsnprintf(problem, sizeof(problem), fmt, ap);
    va_end(ap);
    report_bad(r, name, &g, stored, "%s", problem);
}

static bool given_by_user(const char *short_name)
{
    char name[96];
    usnic_given_t g;

    snprintf(name, sizeof(name), "btl_usnic_%s", short_name);
    given_find(name, &g);
    return NULL != g.text;
}

int usnic_check_params(void)
{
    usnic_params_t *p = &mca_btl_usnic_component.params;
    usnic_report_t r = {NULL, 0, 0};
    int rc = OPAL_SUCCESS;

    for (size_t i = 0; i < USNIC_NUM_TUNABLES; i++) {
        check_tunable(&r, &usnic_tunables[i]);
    }
    for (size_t i = 0; i < sizeof(usnic_base_tunables) / sizeof(usnic_base_tunables[0]); i++) {
        check_base_tunable(&r, &usnic_base_tunables[i]);
    }

    /* relations between parameters, once each is valid on its own */
    if (0 == r.count) {
        if (p->retrans_timeout_max < p->retrans_timeout_min) {
            report_relation(&r, "retrans_timeout_max", p->retrans_timeout_max,
                            "it must be at least btl_usnic_retrans_timeout_min (%d)",
                            p->retrans_timeout_min);
        }
        if (p->send_window > 0 && p->recv_window < p->send_window) {
            if (given_by_user("recv_window") || !given_by_user("send_window")) {
                report_relation(&r, "recv_window", p->recv_window,
                                "the receive window must be at least the send window "
                                "(btl_usnic_send_window is %d)",
                                p->send_window);
            } else {
                report_relation(&r, "send_window", p->send_window,
                                "the send window must not exceed the receive window "
                                "(btl_usnic_recv_window is %d; raise it too)",
                                p->recv_window);
            }
        }
        if (p->cq_num > 0) {
            /* the automatic data-channel depth is at most 512 */
            int data = p->sd_num + ((p->rd_num > 0) ? p->rd_num : 512);
            int prio = p->prio_sd_num + p->prio_rd_num;
            int need = (data > prio) ? data : prio;
            if (p->cq_num < need) {
                report_relation(&r, "cq_num", p->cq_num,
                                "it must be 0 (automatic) or at least the send plus receive "
                                "queue entries of each channel: %d here (data channel %d, "
                                "priority channel %d)",
                                need, data, prio);
            }
        }
    }

    if (0 == r.count && NULL != p->if_include && '\0' != p->if_include[0] &&
        NULL != p->if_exclude && '\0' != p->if_exclude[0]) {
        opal_show_help("help-mpi-btl-usnic.txt", "include and exclude", true,
                       opal_process_info.nodename, p->if_include, p->if_exclude);
        rc = OPAL_ERR_BAD_PARAM;
    }
    if (OPAL_SUCCESS != report_show(&r)) {
        rc = OPAL_ERR_BAD_PARAM;
    }
    return rc;
}

/*
 * Limits only a device knows, for module creation once the provider's
 * fi_info is at hand: more receives posted than its endpoints take
 * (rx_attr->size; 1024 with udp) make posting fail.  DATA_RD is the data
 * channel's depth after the component's own bounds.  Returns
 * OPAL_ERR_BAD_PARAM after a help message naming the parameter.
 */
int usnic_check_rx_limits(const char *provider, const char *device, size_t rx_size, int data_rd)
{
    const usnic_params_t *p = &mca_btl_usnic_component.params;
    usnic_report_t r = {NULL, 0, 0};

    if (0 == rx_size) {
        return OPAL_SUCCESS;
    }
    if ((size_t) p->prio_rd_num > rx_size) {
        report_relation(&r, "prio_rd_num", p->prio_rd_num,
                        "out of range; it must be a positive integer up to %zu: device %s of "
                        "provider %s takes no more posted receives per endpoint",
                        rx_size, device, provider);
    }
    if (data_rd > 0 && (size_t) data_rd > rx_size) {
        report_relation(&r, "rd_num", p->rd_num,
                        "out of range; %d receives would be posted, and device %s of provider %s "
                        "takes at most %zu per endpoint",
                        data_rd, device, provider, rx_size);
    }
    return report_show(&r);
}
