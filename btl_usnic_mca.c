/*
 * Every tunable of the component, registered in one place.  Defaults are
 * chosen for the udp provider on commodity Ethernet; the base BTL
 * parameters (exclusivity, latency, bandwidth, flags, eager/rndv limits,
 * max_send_size, put limits) come from the module template below and are
 * registered by mca_btl_base_param_register().
 */
#include <string.h>

#include "opal/mca/base/mca_base_var.h"
#include "opal/util/show_help.h"

#include "btl_usnic.h"
#include "btl_usnic_util.h"

static void reg(const char *name, const char *desc, mca_base_var_type_t type, int level,
                void *storage)
{
    (void) mca_base_component_var_register(&mca_btl_usnic_component.super.btl_version, name, desc,
                                           type, NULL, 0, 0, level, MCA_BASE_VAR_SCOPE_READONLY,
                                           storage);
}

static void reg_string(const char *name, const char *desc, const char *def, int level,
                       char **storage)
{
    *storage = (char *) def;
    reg(name, desc, MCA_BASE_VAR_TYPE_STRING, level, storage);
}

static void reg_int(const char *name, const char *desc, int def, int level, int *storage)
{
    *storage = def;
    reg(name, desc, MCA_BASE_VAR_TYPE_INT, level, storage);
}

static void reg_double(const char *name, const char *desc, double def, int level, double *storage)
{
    *storage = def;
    reg(name, desc, MCA_BASE_VAR_TYPE_DOUBLE, level, storage);
}

int usnic_register_params(void)
{
    usnic_params_t *p = &mca_btl_usnic_component.params;
    mca_btl_base_module_t *t = &usnic_module_template.super;

    reg_string("providers",
               "Comma-separated libfabric providers to try, in order; the first that yields a "
               "usable device is used for the whole job",
               "usnic,udp", OPAL_INFO_LVL_4, &p->providers);
    reg_string("if_include",
               "Comma-separated interface names or IPv4 CIDRs (e.g. eth0,10.1.0.0/16) to use; "
               "loopback is used only when named here. Mutually exclusive with "
               "btl_usnic_if_exclude",
               "", OPAL_INFO_LVL_1, &p->if_include);
    reg_string("if_exclude",
               "Comma-separated interface names or IPv4 CIDRs not to use. Mutually exclusive "
               "with btl_usnic_if_include",
               "", OPAL_INFO_LVL_1, &p->if_exclude);
    reg_int("max_btls", "Maximum number of devices (modules) to use; 0 = all usable devices", 0,
            OPAL_INFO_LVL_2, &p->max_btls);

    reg_int("prio_sd_num", "Send queue entries of the priority channel", 256, OPAL_INFO_LVL_5,
            &p->prio_sd_num);
    reg_int("prio_rd_num", "Receive buffers posted on the priority channel", 256, OPAL_INFO_LVL_5,
            &p->prio_rd_num);
    reg_int("sd_num", "Send queue entries of the data channel", 512, OPAL_INFO_LVL_5, &p->sd_num);
    reg_int("rd_num",
            "Receive buffers posted on the data channel; 0 = automatic: with the udp provider "
            "the kernel socket buffer queues arriving datagrams, so only enough buffers for "
            "512 KiB are posted (8 to 512; a small set stays in the CPU cache, which made "
            "1 MiB transfers 9% faster here), with other providers 512 (the NIC drops what "
            "finds no posted buffer)",
            0, OPAL_INFO_LVL_5, &p->rd_num);
    reg_int("cq_num", "Completion queue entries per channel (0 = send + receive queue sizes)", 0,
            OPAL_INFO_LVL_5, &p->cq_num);
    reg_int("priority_limit",
            "Largest PML fragment (bytes) sent on the low-latency priority channel", 512,
            OPAL_INFO_LVL_5, &p->priority_limit);
    reg_int("send_window",
            "Segments that may be unacknowledged per peer before the sender waits (rounded up "
            "to a power of two)",
            64, OPAL_INFO_LVL_5, &p->send_window);
    reg_int("recv_window",
            "Receive window per peer in segments (rounded up to a power of two; must be at least "
            "the peers' send window)",
            4096, OPAL_INFO_LVL_6, &p->recv_window);
    reg_int("retrans_timeout",
            "Retransmission timeout (microseconds) toward a peer whose round trip is not "
            "measured yet; afterwards the timeout follows the measured round trips (RFC 6298: "
            "smoothed round trip + 4 x its variation), between btl_usnic_retrans_timeout_min "
            "and btl_usnic_retrans_timeout_max",
            1000, OPAL_INFO_LVL_5, &p->retrans_timeout);
    reg_int("retrans_timeout_min",
            "Smallest retransmission timeout (microseconds), whatever the measured round trips",
            200, OPAL_INFO_LVL_5, &p->retrans_timeout_min);
    reg_int("retrans_timeout_max",
            "Largest retransmission timeout (microseconds): the timeout doubles after each "
            "expiry without an ACK (a peer busy outside MPI gets a few probes, not a storm) up "
            "to this",
            100000, OPAL_INFO_LVL_5, &p->retrans_timeout_max);
    reg_int("tlp",
            "Tail-loss probes (1 = on, 0 = off): when no ACK came two round trips after the last "
            "segment sent to a peer, resend that segment and ask for an immediate ACK, so a "
            "lost last datagram is recovered in about two round trips rather than after the "
            "retransmission timeout (in the manner of RACK-TLP, RFC 8985)",
            1, OPAL_INFO_LVL_5, &p->tlp);
    reg_int("max_resends_per_iteration",
            "Most segments retransmitted in one call of the progress engine", 16, OPAL_INFO_LVL_5,
            &p->max_resends_per_iteration);
    reg_int("ack_delay",
            "Microseconds an ACK may wait for data to ride on before it is sent on its own", 50,
            OPAL_INFO_LVL_5, &p->ack_delay);
    reg_int("fast_retrans_dups",
            "Duplicate ACKs without a selective-ACK bitmap that trigger an immediate "
            "retransmission of the oldest segment (0 = never).  Off by default: receivers send "
            "a bitmap with every gap, and the time-based loss detection (RACK) reads it per "
            "channel; counting duplicates resent segments that were merely overtaken by the "
            "other channel (measured: every resend without loss was one)",
            0, OPAL_INFO_LVL_6, &p->fast_retrans_dups);
    reg_int("peer_timeout",
            "Seconds without any acknowledgement from a peer that has data outstanding before "
            "the peer is declared unreachable and the job is told (0 = never)",
            120, OPAL_INFO_LVL_4, &p->peer_timeout);
    reg_int("seg_num", "Send segments per module (bounds the data in flight on a module)", 8192,
            OPAL_INFO_LVL_6, &p->seg_num);
    reg_int("reasm_slots",
            "Fragments that may be under reassembly or waiting for their turn at once from one "
            "peer (at least the peer's send window is always used; rounded up to a power of two)",
            256, OPAL_INFO_LVL_6, &p->reasm_slots);
    reg_int("print_stats", "Print one line of counters per module at finalize (0 = no, 1 = yes)", 0,
            OPAL_INFO_LVL_4, &p->print_stats);
    reg_int("max_inflight",
            "At most this many bytes sent to one peer and not yet acknowledged (besides half "
            "the peer's socket buffer, which always applies); 0 = no limit but that.  Less "
            "data in flight keeps the receiver's queue in its CPU cache: 1 MiB made 1 MiB "
            "transfers over loopback 12% faster than 2 MiB",
            1024 * 1024, OPAL_INFO_LVL_5, &p->max_inflight);
    reg_int("udp_sockbuf",
            "udp provider only: bytes of kernel send and receive buffer to request for each "
            "socket (larger buffers absorb bursts without loss; 0 = keep the system default)",
            4 * 1024 * 1024, OPAL_INFO_LVL_5, &p->udp_sockbuf);
    reg_int("udp_datagram_size",
            "udp provider only: datagram size. 0 = follow the interface MTU (minus IP and UDP "
            "headers), proven by a self-test at startup; -1 = the provider's advertised size "
            "(1472); N > 0 = follow the interface MTU but at most N bytes (never below the "
            "provider's advertised size)",
            0, OPAL_INFO_LVL_4, &p->udp_datagram_size);
    reg_int("stream_copy_min",
            "Emulated PUTs of at least this many bytes are copied into the target buffer with "
            "non-temporal stores, past the CPU caches (faster for large transfers the "
            "receiver does not read at once), unless the same buffer was the target of one of "
            "the last 4 such PUTs (likely cached, e.g. a ping-pong's); 0 = never",
            512 * 1024, OPAL_INFO_LVL_5, &p->stream_copy_min);
    reg_double("debug_drop_rate",
               "Debug: fraction (0..1) of arriving packets the receive path drops", 0.0,
               OPAL_INFO_LVL_9, &p->debug_drop_rate);
    reg_double("debug_dup_rate",
               "Debug: fraction (0..1) of arriving packets the receive path processes twice", 0.0,
               OPAL_INFO_LVL_9, &p->debug_dup_rate);
    reg_double("debug_reorder_rate",
               "Debug: fraction (0..1) of arriving packets held back and processed after the "
               "next one",
               0.0, OPAL_INFO_LVL_9, &p->debug_reorder_rate);
    reg_int("debug_seed", "Debug: seed of the fault-injection random generator", 1, OPAL_INFO_LVL_9,
            &p->debug_seed);
    reg_int("debug_isn",
            "Debug: first sequence number of every module (-1 = random); values near 4294967295 "
            "exercise wrap-around",
            -1, OPAL_INFO_LVL_9, &p->debug_isn);

    /* base BTL parameters, from the template's defaults */
    t->btl_exclusivity = MCA_BTL_EXCLUSIVITY_DEFAULT - 24;
    t->btl_latency = 10;
    t->btl_bandwidth = 10000;
    t->btl_flags = MCA_BTL_FLAGS_SEND | MCA_BTL_FLAGS_PUT | MCA_BTL_FLAGS_SEND_INPLACE;
    t->btl_eager_limit = 150000;
    t->btl_rndv_eager_limit = 150000;
    t->btl_max_send_size = 150000;
    t->btl_rdma_pipeline_send_length = 150000;
    t->btl_rdma_pipeline_frag_size = 4 * 1024 * 1024;
    t->btl_min_rdma_pipeline_size = 0;
    t->btl_put_limit = 4 * 1024 * 1024;
    t->btl_put_alignment = 0;
    t->btl_put_local_registration_threshold = SIZE_MAX;
    t->btl_registration_handle_size = 24;
    return mca_btl_base_param_register(&mca_btl_usnic_component.super.btl_version, t);
}

static int bad_param(const char *name, const char *value, const char *why)
{
    opal_show_help("help-mpi-btl-usnic.txt", "bad parameter", true, opal_process_info.nodename,
                   name, value, why);
    return OPAL_ERR_BAD_PARAM;
}

static int check_positive(const char *name, int v)
{
    char buf[32];
    if (v > 0) {
        return OPAL_SUCCESS;
    }
    snprintf(buf, sizeof(buf), "%d", v);
    return bad_param(name, buf, "it must be a positive integer");
}

static int check_rate(const char *name, double v)
{
    char buf[32];
    if (v >= 0.0 && v <= 1.0) {
        return OPAL_SUCCESS;
    }
    snprintf(buf, sizeof(buf), "%g", v);
    return bad_param(name, buf, "it must be a fraction between 0 and 1");
}

int usnic_check_params(void)
{
    usnic_params_t *p = &mca_btl_usnic_component.params;
    struct usnic_if_filter f[32];
    const char *bad = NULL;
    int rc = OPAL_SUCCESS;

    if (NULL != p->if_include && '\0' != p->if_include[0] && NULL != p->if_exclude &&
        '\0' != p->if_exclude[0]) {
        opal_show_help("help-mpi-btl-usnic.txt", "include and exclude", true,
                       opal_process_info.nodename, p->if_include, p->if_exclude);
        return OPAL_ERR_BAD_PARAM;
    }
    if (usnic_if_filter_parse(p->if_include, f, 32, &bad) < 0) {
        return bad_param("btl_usnic_if_include", p->if_include,
                         "each entry must be an interface name or an IPv4 CIDR like 10.0.0.0/8");
    }
    if (usnic_if_filter_parse(p->if_exclude, f, 32, &bad) < 0) {
        return bad_param("btl_usnic_if_exclude", p->if_exclude,
                         "each entry must be an interface name or an IPv4 CIDR like 10.0.0.0/8");
    }
    if (NULL == p->providers || '\0' == p->providers[0]) {
        return bad_param("btl_usnic_providers", "", "name at least one libfabric provider");
    }
    if (p->max_btls < 0) {
        return bad_param("btl_usnic_max_btls", "negative", "use 0 (all) or a positive count");
    }
    if (OPAL_SUCCESS != (rc = check_positive("btl_usnic_prio_sd_num", p->prio_sd_num)) ||
        OPAL_SUCCESS != (rc = check_positive("btl_usnic_prio_rd_num", p->prio_rd_num)) ||
        OPAL_SUCCESS != (rc = check_positive("btl_usnic_sd_num", p->sd_num)) ||
        OPAL_SUCCESS != (rc = check_positive("btl_usnic_send_window", p->send_window)) ||
        OPAL_SUCCESS != (rc = check_positive("btl_usnic_recv_window", p->recv_window)) ||
        OPAL_SUCCESS != (rc = check_positive("btl_usnic_retrans_timeout", p->retrans_timeout)) ||
        OPAL_SUCCESS !=
            (rc = check_positive("btl_usnic_retrans_timeout_min", p->retrans_timeout_min)) ||
        OPAL_SUCCESS !=
            (rc = check_positive("btl_usnic_retrans_timeout_max", p->retrans_timeout_max)) ||
        OPAL_SUCCESS != (rc = check_positive("btl_usnic_max_resends_per_iteration",
                                             p->max_resends_per_iteration)) ||
        OPAL_SUCCESS != (rc = check_positive("btl_usnic_seg_num", p->seg_num)) ||
        OPAL_SUCCESS != (rc = check_positive("btl_usnic_reasm_slots", p->reasm_slots)) ||
        OPAL_SUCCESS != (rc = check_rate("btl_usnic_debug_drop_rate", p->debug_drop_rate)) ||
        OPAL_SUCCESS != (rc = check_rate("btl_usnic_debug_dup_rate", p->debug_dup_rate)) ||
        OPAL_SUCCESS != (rc = check_rate("btl_usnic_debug_reorder_rate", p->debug_reorder_rate))) {
        return rc;
    }
    if (p->retrans_timeout_max < p->retrans_timeout_min) {
        char buf[64];
        snprintf(buf, sizeof(buf), "%d (btl_usnic_retrans_timeout_min is %d)",
                 p->retrans_timeout_max, p->retrans_timeout_min);
        return bad_param("btl_usnic_retrans_timeout_max", buf,
                         "it must be at least btl_usnic_retrans_timeout_min");
    }
    if (0 != p->tlp && 1 != p->tlp) {
        char buf[32];
        snprintf(buf, sizeof(buf), "%d", p->tlp);
        return bad_param("btl_usnic_tlp", buf, "use 1 (on) or 0 (off)");
    }
    if (p->max_inflight < 0) {
        return bad_param("btl_usnic_max_inflight", "negative", "use 0 (no limit) or bytes");
    }
    if (p->rd_num < 0) {
        return bad_param("btl_usnic_rd_num", "negative", "use 0 (automatic) or a positive count");
    }
    if (p->send_window > (1 << 20) || p->recv_window > (1 << 20)) {
        return bad_param("btl_usnic_send_window/recv_window", "too large",
                         "windows are limited to 1048576 segments");
    }
    if (p->recv_window < p->send_window) {
        return bad_param("btl_usnic_recv_window", "smaller than btl_usnic_send_window",
                         "the receive window must be at least the send window");
    }
    if (p->stream_copy_min < 0) {
        return bad_param("btl_usnic_stream_copy_min", "negative", "use 0 (never) or a size");
    }
    if (p->udp_sockbuf < 0 || p->udp_datagram_size < -1 ||
        (p->udp_datagram_size > 0 && p->udp_datagram_size < 512)) {
        return bad_param("btl_usnic_udp_sockbuf/udp_datagram_size", "out of range",
                         "udp_sockbuf must be >= 0; udp_datagram_size must be -1, 0 or >= 512");
    }
    if (p->ack_delay < 0 || p->peer_timeout < 0 || p->fast_retrans_dups < 0 ||
        p->priority_limit < 0) {
        return bad_param("btl_usnic_ack_delay/peer_timeout/fast_retrans_dups/priority_limit",
                         "negative", "these parameters must be zero or positive");
    }
    return OPAL_SUCCESS;
}
