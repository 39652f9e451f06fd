/*
 * macbench: what a keyed MAC and a CRC32C cost per usnic datagram, on this
 * machine, for the candidates of btl_usnic_auth (docs/perf-mac.md).  No
 * MPI: one process pinned to one CPU.
 *
 *   bench/build/macbench [-r rounds] [-t ms per run] [-c cpu] [-s sections] [-w s]
 *
 * sections (comma-separated, default all): hdr (header MACs of 48, 64 and
 * 80 bytes, and of the protocol's 44-byte MACed header with its chunk or
 * PUT header in a second piece), full (MACs over a 48-byte header and a
 * 1472, 8972 or 65507 byte payload), crc (CRC32C alone), copy (CRC32C
 * fused with the receive path's copy, against the copy alone).
 *
 * Each case's iteration count is calibrated to about `ms` milliseconds;
 * then `rounds` rounds run every case of a section once, in turn, so that
 * whatever else the machine does falls on all cases alike.  A round starts
 * when the other CPUs have been idle for a second (waiting at most -w
 * seconds, default 600), and is run again if another CPU was busy, or ours
 * stolen by the hypervisor, while it ran (the 2-core machine is shared).
 * Tables give the median over the rounds and, in brackets, the lowest and
 * highest.  -l keeps the other CPU busy with a spinning thread, as the
 * peer rank of a ping-pong does (a loaded CPU may run at a lower clock).
 * Header MACs are timed twice: "lat", each call's input depends
 * on the previous tag (the latency of one call, as on a datagram's critical
 * path), and "thr", independent calls back to back (a busy sender).
 *
 * Candidates: SipHash-2-4 of btl_usnic_auth.c; libsodium's SipHash-2-4,
 * HMAC-SHA-256, keyed BLAKE2b and Poly1305 (with its one-time key made by
 * ChaCha20 for every message, as Poly1305 requires); OpenSSL 3's
 * EVP_MAC HMAC-SHA256, SIPHASH, GMAC (AES-128-GCM, a fresh IV per message)
 * and CMAC (AES-128-CBC); and, for full mode, SipHash-2-4 over the header
 * and a fixed-key Poly1305 digest of the payload.  Every library context
 * is made and keyed once, outside the timed loop; a call re-initialises it
 * the cheapest way the API allows.  Before timing, each candidate is
 * checked against a second way of computing it (our SipHash against
 * libsodium's and OpenSSL's; re-initialised contexts and pre-keyed states
 * against fresh ones).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <inttypes.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <emmintrin.h>

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <sodium.h>

#include "../btl_usnic_auth.h"

/* ============================================================== plumbing */

static int opt_runs = 9;
static double opt_ms = 10.0;
static const char *opt_sections = "hdr,full,crc,copy";
static volatile uint64_t sink;

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec * 1e9 + (double) ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

struct stat3 {
    double med, lo, hi; /* ns per operation */
};

/* One timed case: op(ctx, iters) is run once per round. */
struct bcase {
    void (*op)(void *ctx, long iters);
    void *ctx;
    long iters;
    double t[64]; /* ns per operation, one per round */
    struct stat3 s;
};

static int rounds_redone, rounds_busy;
static long faults_timed;
static double opt_wait = 600.0; /* seconds to wait for a quiet machine per round */

/* -l: a thread that spins on another CPU, as the peer rank of an MPI
 * ping-pong polls on the other core (with every core busy, a CPU may not
 * boost as high as with one). */
static int spin_cpu = -1;
static volatile int spin_tid;
static volatile bool spin_stop;

static void *spinner(void *arg)
{
    cpu_set_t set;
    volatile uint64_t n = 0;
    (void) arg;
    CPU_ZERO(&set);
    CPU_SET(spin_cpu, &set);
    sched_setaffinity(0, sizeof(set), &set);
    spin_tid = (int) syscall(SYS_gettid);
    while (!spin_stop) {
        n++;
    }
    return NULL;
}

/* The spinner's CPU time so far, in clock ticks (0 without one). */
static unsigned long long spinner_ticks(void)
{
    char path[64], buf[1024];
    unsigned long long ut = 0, st = 0;
    FILE *f;
    char *p;

    if (spin_tid <= 0) {
        return 0;
    }
    snprintf(path, sizeof(path), "/proc/self/task/%d/stat", spin_tid);
    f = fopen(path, "r");
    if (NULL == f) {
        return 0;
    }
    if (NULL != fgets(buf, sizeof(buf), f) && NULL != (p = strrchr(buf, ')'))) {
        /* after the name: state ppid pgrp session tty tpgid flags minflt
         * cminflt majflt cmajflt utime stime */
        if (2 != sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st)) {
            ut = st = 0;
        }
    }
    fclose(f);
    return ut + st;
}

/* CPU time counters from /proc/stat: per CPU, busy (for ours: stolen by
 * the hypervisor; for the spinner's: less the spinner's own time) and
 * total. */
struct cpustat {
    unsigned long long busy[64], total[64];
};

static void read_cpustat(struct cpustat *cs)
{
    FILE *f = fopen("/proc/stat", "r");
    char line[512];
    int me = sched_getcpu();

    memset(cs, 0, sizeof(*cs));
    if (NULL == f) {
        return;
    }
    while (fgets(line, sizeof(line), f)) {
        int cpu;
        unsigned long long v[8] = {0};
        if (9 != sscanf(line, "cpu%d %llu %llu %llu %llu %llu %llu %llu %llu", &cpu, &v[0], &v[1],
                        &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) ||
            cpu < 0 || cpu >= 64) {
            continue;
        }
        cs->total[cpu] = v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
        /* other CPUs: all but idle and iowait; ours: steal */
        cs->busy[cpu] = (cpu == me) ? v[7] : cs->total[cpu] - v[3] - v[4];
    }
    fclose(f);
    if (spin_cpu >= 0 && spin_cpu < 64) {
        cs->busy[spin_cpu] -= spinner_ticks();
    }
}

/* The busiest other CPU's busy fraction (or our steal fraction) between two
 * readings. */
static double busy_between(const struct cpustat *a, const struct cpustat *b)
{
    double worst = 0;
    for (int c = 0; c < 64; c++) {
        unsigned long long dt = b->total[c] - a->total[c];
        if (dt > 0) {
            double f = (double) (b->busy[c] - a->busy[c]) / (double) dt;
            worst = f > worst ? f : worst;
        }
    }
    return worst;
}

/* Wait (up to opt_wait seconds) until the other CPUs have been idle for a
 * whole second; false if they never were. */
static bool wait_quiet(void)
{
    for (double waited = 0; waited < opt_wait; waited += 1.0) {
        struct cpustat a, b;
        read_cpustat(&a);
        sleep(1);
        read_cpustat(&b);
        if (busy_between(&a, &b) < 0.03) {
            return true;
        }
    }
    return false;
}

static double now_and_faults(long *faults)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    *faults = ru.ru_minflt + ru.ru_majflt;
    return now_ns();
}

/*
 * Calibrate each case to about opt_ms per run, then run opt_runs rounds,
 * each round one run of every case in turn, so that whatever else the
 * machine does falls on all cases alike; the median over the rounds.
 */
static void run_cases(struct bcase *cs, size_t n)
{
    int runs = opt_runs < 64 ? opt_runs : 64;

    for (size_t c = 0; c < n; c++) {
        long iters = 1;
        cs[c].op(cs[c].ctx, 1); /* warm up, fault in */
        for (;;) {
            double t0 = now_ns();
            cs[c].op(cs[c].ctx, iters);
            double dt = now_ns() - t0;
            if (dt >= opt_ms * 1e6 / 4 || iters >= (1L << 40)) {
                iters = (long) ((double) iters * (opt_ms * 1e6) / (dt > 1 ? dt : 1)) + 1;
                break;
            }
            iters *= 2;
        }
        cs[c].iters = iters;
    }
    for (int r = 0; r < runs; r++) {
        /* a round counts if nothing else ran on the machine meanwhile;
         * else it is run again (at most 20 times) */
        for (int tries = 0;; tries++) {
            struct cpustat a, b;
            bool quiet = wait_quiet();
            read_cpustat(&a);
            for (size_t c = 0; c < n; c++) {
                long f0, f1;
                double t0 = now_and_faults(&f0);
                cs[c].op(cs[c].ctx, cs[c].iters);
                double t1 = now_and_faults(&f1);
                faults_timed += f1 - f0;
                cs[c].t[r] = (t1 - t0) / (double) cs[c].iters;
            }
            read_cpustat(&b);
            if (quiet && busy_between(&a, &b) < 0.03) {
                break;
            }
            if (tries == 20 || !quiet) {
                rounds_busy++;
                break;
            }
            rounds_redone++;
        }
    }
    for (size_t c = 0; c < n; c++) {
        double *t = cs[c].t;
        qsort(t, (size_t) runs, sizeof(t[0]), cmp_double);
        cs[c].s.lo = t[0];
        cs[c].s.hi = t[runs - 1];
        cs[c].s.med = (runs & 1) ? t[runs / 2] : (t[runs / 2 - 1] + t[runs / 2]) / 2;
    }
}

static bool section(const char *name)
{
    const char *p = opt_sections;
    size_t n = strlen(name);
    while (p && *p) {
        if (0 == strncmp(p, name, n) && (',' == p[n] || 0 == p[n])) {
            return true;
        }
        p = strchr(p, ',');
        p = p ? p + 1 : NULL;
    }
    return false;
}

static void die(const char *what)
{
    fprintf(stderr, "macbench: %s\n", what);
    ERR_print_errors_fp(stderr);
    exit(1);
}

static void *region(size_t n)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (MAP_FAILED == p) {
        die("mmap failed");
    }
    memset(p, 0x5A, n); /* fault every page in now */
    /* and keep it in: no page-out (this machine runs DAMON reclaim) */
    if (0 != mlock(p, n)) {
        fprintf(stderr, "macbench: mlock %zu MiB: %s (continuing)\n", n >> 20, strerror(errno));
    }
    return p;
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = (uint8_t) (seed >> 23);
    }
}

static uint64_t first8(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* ============================================================ candidates */

/* Keys, each candidate's own; one per sender in the BTL. */
static uint8_t key16[16], key32[32];
static struct usnic_sip_key sipkey;
static crypto_auth_hmacsha256_state hmac_pre;
static crypto_generichash_state b2_pre;
static uint8_t poly_fixed_key[32];
static uint64_t nonce_ctr;

static EVP_MAC_CTX *ossl_hmac, *ossl_sip, *ossl_gmac, *ossl_cmac;

/* A MAC of a header and (full mode) a payload elsewhere in memory; returns
 * the tag's first 8 bytes. */
typedef uint64_t (*mac_fn)(const uint8_t *h, size_t hl, const uint8_t *p, size_t pl);

static uint64_t m_usnic_sip(const uint8_t *h, size_t hl, const uint8_t *p, size_t pl)
{
    if (0 == pl) {
        return usnic_siphash24(&sipkey, h, hl);
    }
    struct usnic_auth_piece pc[2] = {{h, hl}, {p, pl}};
    return usnic_siphash24_pieces(&sipkey, pc, 2);
}

/* the header in two pieces: the 40-byte base header and the rest */
static uint64_t m_usnic_sip_2p(const uint8_t *h, size_t hl, const uint8_t *p, size_t pl)
{
    (void) p;
    (void) pl;
    struct usnic_auth_piece pc[2] = {{h, 40}, {h + 40, hl - 40}};
    return usnic_siphash24_pieces(&sipkey, pc, 2);
}

/* crypto_shorthash takes one contiguous input: in full mode the datagram
 * as it lies in a receive buffer (header followed by payload) */
static uint64_t m_na_sip(const uint8_t *h, size_t hl, const uint8_t *p, size_t pl)
{
    uint8_t out[8];
    (void) p;
    crypto_shorthash_siphash24(out, h, hl + pl, key16);
    return first8(out);
}

static uint64_t m_na_hmac_oneshot(const uint8_t *h, size_t hl, const uint8_t *p, size_t pl)
{
    uint8_t out[32];
    (void) p;
    crypto_auth_hmacsha256(out, h, hl + pl, key32);
    return first8(out);
}

static uint64_t m_na_hmac_pre(const uint8_t *h, size_t hl, const uint8_t *p, size_t pl)
{
    crypto_auth_hmacsha256_state st = hmac_pre;
    uint8_t out[32];
    crypto_auth_hmacsha256_update(&st, h, hl);
    if (pl) {
        crypto_auth_hmacsha256_update(&st, p, pl);
    }
    crypto_auth_hmacsha256_final(&st, out);
    return first8(out);
}

static uint64_t m_na_b2_oneshot(const uint8_t *h, size_t hl, const uint8_t *p, size_t pl)
{
    uint8_t out[16];
    (void) p;
    crypto_generichash(out, sizeof(out), h, hl + pl, key32, sizeof(key32));
    return first8(out);
}

static uint64_t m_na_b2_pre(const uint8_t *h, size_t hl, const uint8_t *p, size_t pl)
{
    crypto_generichash_state st = b2_pre;
    uint8_t out[16];
    crypto_generichash_update(&st, h, hl);
    if (pl) {
        crypto_generichash_update(&st, p, pl);
    }
    crypto_generichash_final(&st, out, sizeof(out));
    return first8(out);
}

/* Poly1305 is a one-time MAC: a key per message, here ChaCha20(key, n)
 * for a message counter n that the sender would have to carry. */
static uint64_t m_na_poly(const uint8_t *h, size_t hl, const uint8_t *p, size_t pl)
{
    uint8_t otk[32], nonce[8], out[16];
    crypto_onetimeauth_state st;
    uint64_t n = ++nonce_ctr;
    memcpy(nonce, &n, 8);
    crypto_stream_chacha20(otk, sizeof(otk), nonce, key32);
    if (0 == pl) {
        crypto_onetimeauth(out, h, hl, otk);
    } else {
        crypto_onetimeauth_init(&st, otk);
        crypto_onetimeauth_update(&st, h, hl);
        crypto_onetimeauth_update(&st, p, pl);
        crypto_onetimeauth_final(&st, out);
    }
    return first8(out);
}

/* Full mode without a nonce: the payload compressed by Poly1305 under a
 * fixed secret key (used as a universal hash, its output never sent), the
 * header and that 16-byte digest then MACed by SipHash-2-4. */
static uint64_t m_sip_poly_hash(const uint8_t *h, size_t hl, const uint8_t *p, size_t pl)
{
    uint8_t dig[16];
    crypto_onetimeauth(dig, p, pl, poly_fixed_key);
    struct usnic_auth_piece pc[2] = {{h, hl}, {dig, sizeof(dig)}};
    return usnic_siphash24_pieces(&sipkey, pc, 2);
}

static uint64_t ossl_run(EVP_MAC_CTX *ctx, const OSSL_PARAM *params, const uint8_t *h, size_t hl,
                         const uint8_t *p, size_t pl)
{
    uint8_t out[EVP_MAX_MD_SIZE];
    size_t outl = 0;
    if (!EVP_MAC_init(ctx, NULL, 0, params) || !EVP_MAC_update(ctx, h, hl) ||
        (pl && !EVP_MAC_update(ctx, p, pl)) || !EVP_MAC_final(ctx, out, &outl, sizeof(out))) {
        die("EVP_MAC failed");
    }
    return first8(out);
}

static uint64_t m_ossl_hmac(const uint8_t *h, size_t hl, const uint8_t *p, size_t pl)
{
    return ossl_run(ossl_hmac, NULL, h, hl, p, pl);
}

static uint64_t m_ossl_sip(const uint8_t *h, size_t hl, const uint8_t *p, size_t pl)
{
    return ossl_run(ossl_sip, NULL, h, hl, p, pl);
}

static uint64_t m_ossl_gmac(const uint8_t *h, size_t hl, const uint8_t *p, size_t pl)
{
    uint8_t iv[12] = {0};
    uint64_t n = ++nonce_ctr;
    OSSL_PARAM params[2];
    memcpy(iv, &n, 8);
    params[0] = OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_IV, iv, sizeof(iv));
    params[1] = OSSL_PARAM_construct_end();
    return ossl_run(ossl_gmac, params, h, hl, p, pl);
}

static uint64_t m_ossl_cmac(const uint8_t *h, size_t hl, const uint8_t *p, size_t pl)
{
    return ossl_run(ossl_cmac, NULL, h, hl, p, pl);
}

struct cand {
    const char *name;
    const char *notes;
    mac_fn fn;
    bool hdr, full; /* in which tables */
};

static const struct cand cands[] = {
    {"usnic SipHash-2-4", "own code, 8-byte tag", m_usnic_sip, true, true},
    {"usnic SipHash-2-4, 2 pieces", "header as 40 + rest", m_usnic_sip_2p, true, false},
    {"sodium SipHash-2-4", "crypto_shorthash_siphash24, contiguous", m_na_sip, true, true},
    {"sodium HMAC-SHA256", "crypto_auth_hmacsha256, keyed per call", m_na_hmac_oneshot, true,
     false},
    {"sodium HMAC-SHA256 pre", "pre-keyed state copied per call", m_na_hmac_pre, true, true},
    {"sodium BLAKE2b-128", "crypto_generichash keyed per call", m_na_b2_oneshot, true, false},
    {"sodium BLAKE2b-128 pre", "pre-keyed state copied per call", m_na_b2_pre, true, true},
    {"sodium Poly1305+ChaCha20", "onetimeauth + 32-byte key per msg (nonce!)", m_na_poly, true,
     true},
    {"SipHash(hdr|Poly1305(payload))", "fixed-key Poly1305 as a hash, no nonce", m_sip_poly_hash,
     false, true},
    {"OpenSSL HMAC-SHA256", "EVP_MAC, re-init keeping the key", m_ossl_hmac, true, true},
    {"OpenSSL SIPHASH", "EVP_MAC size 8, re-init", m_ossl_sip, true, true},
    {"OpenSSL GMAC AES-128", "EVP_MAC, fresh IV per msg (nonce!)", m_ossl_gmac, true, true},
    {"OpenSSL CMAC AES-128", "EVP_MAC, re-init keeping the key", m_ossl_cmac, true, true},
};
#define NCANDS (sizeof(cands) / sizeof(cands[0]))

static EVP_MAC_CTX *ossl_ctx(const char *alg, const OSSL_PARAM *params, const uint8_t *key,
                             size_t keylen)
{
    EVP_MAC *mac = EVP_MAC_fetch(NULL, alg, NULL);
    EVP_MAC_CTX *ctx;
    if (NULL == mac) {
        die(alg);
    }
    ctx = EVP_MAC_CTX_new(mac);
    EVP_MAC_free(mac); /* the context keeps its own reference */
    if (NULL == ctx || !EVP_MAC_init(ctx, key, keylen, params)) {
        die(alg);
    }
    return ctx;
}

static EVP_MAC_CTX *ctx_hmac(void)
{
    OSSL_PARAM p[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, "SHA256", 0),
                      OSSL_PARAM_construct_end()};
    return ossl_ctx("HMAC", p, key32, 32);
}

static EVP_MAC_CTX *ctx_sip(const uint8_t key[16])
{
    size_t sz = 8;
    OSSL_PARAM p[] = {OSSL_PARAM_construct_size_t(OSSL_MAC_PARAM_SIZE, &sz),
                      OSSL_PARAM_construct_end()};
    return ossl_ctx("SIPHASH", p, key, 16);
}

static EVP_MAC_CTX *ctx_gmac(void)
{
    uint8_t iv[12] = {0};
    OSSL_PARAM p[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_CIPHER, "AES-128-GCM", 0),
                      OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_IV, iv, sizeof(iv)),
                      OSSL_PARAM_construct_end()};
    return ossl_ctx("GMAC", p, key16, 16);
}

static EVP_MAC_CTX *ctx_cmac(void)
{
    OSSL_PARAM p[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_CIPHER, "AES-128-CBC", 0),
                      OSSL_PARAM_construct_end()};
    return ossl_ctx("CMAC", p, key16, 16);
}

/* Cross-checks before anything is timed. */
static void self_check(void)
{
    uint8_t msg[2048], k[16], out[8];
    struct usnic_sip_key rk;
    int bad = 0;

    for (int i = 0; i < 16; i++) {
        k[i] = (uint8_t) i;
    }
    usnic_sip_key_load(&rk, k);
    fill(msg, sizeof(msg), 7);
    for (size_t n = 0; n < sizeof(msg); n += (n < 200) ? 1 : 61) {
        uint8_t mine[8];
        crypto_shorthash_siphash24(out, msg, n, k);
        usnic_sip_tag_store(mine, usnic_siphash24(&rk, msg, n));
        bad += 0 != memcmp(out, mine, 8);
    }
    {
        /* OpenSSL SIPHASH, re-initialised, against ours */
        EVP_MAC_CTX *save = ossl_sip;
        uint8_t mine[8];
        ossl_sip = ctx_sip(k);
        for (size_t n = 0; n < 300; n += 7) {
            uint64_t t = m_ossl_sip(msg, n, NULL, 0);
            usnic_sip_tag_store(mine, usnic_siphash24(&rk, msg, n));
            bad += t != first8(mine);
        }
        EVP_MAC_CTX_free(ossl_sip);
        ossl_sip = save;
    }
    if (bad) {
        die("self-check: SipHash implementations disagree");
    }
    /* re-initialised OpenSSL contexts against fresh ones */
    {
        EVP_MAC_CTX *fresh;
        uint64_t a, b;
        for (int i = 0; i < 3; i++) {
            a = m_ossl_hmac(msg, 100 + (size_t) i, msg + 200, 50);
            fresh = ctx_hmac();
            b = ossl_run(fresh, NULL, msg, 100 + (size_t) i, msg + 200, 50);
            EVP_MAC_CTX_free(fresh);
            bad += a != b;
            a = m_ossl_cmac(msg, 100 + (size_t) i, msg + 200, 50);
            fresh = ctx_cmac();
            b = ossl_run(fresh, NULL, msg, 100 + (size_t) i, msg + 200, 50);
            EVP_MAC_CTX_free(fresh);
            bad += a != b;
        }
        /* GMAC: same IV twice from a reused context gives the same tag */
        nonce_ctr = 41;
        a = m_ossl_gmac(msg, 64, NULL, 0);
        nonce_ctr = 41;
        b = m_ossl_gmac(msg, 64, NULL, 0);
        bad += a != b;
        a = m_ossl_gmac(msg, 64, NULL, 0);
        bad += a == b; /* and another IV a different one */
    }
    {
        /* libsodium pre-keyed states against the one-shot calls */
        bad += m_na_hmac_pre(msg, 80, msg + 80, 900) != m_na_hmac_oneshot(msg, 80, NULL, 900);
        bad += m_na_b2_pre(msg, 80, msg + 80, 900) != m_na_b2_oneshot(msg, 80, NULL, 900);
        bad += m_usnic_sip(msg, 48, msg + 48, 900) != m_na_sip(msg, 48, NULL, 900);
    }
    if (bad) {
        die("self-check: a re-initialised context disagrees with a fresh one");
    }
}

static void setup_keys(void)
{
    if (sodium_init() < 0) {
        die("sodium_init failed");
    }
    randombytes_buf(key16, sizeof(key16));
    randombytes_buf(key32, sizeof(key32));
    randombytes_buf(poly_fixed_key, sizeof(poly_fixed_key));
    usnic_sip_key_load(&sipkey, key16);
    crypto_auth_hmacsha256_init(&hmac_pre, key32, sizeof(key32));
    crypto_generichash_init(&b2_pre, key32, sizeof(key32), 16);
    ossl_hmac = ctx_hmac();
    ossl_sip = ctx_sip(key16);
    ossl_gmac = ctx_gmac();
    ossl_cmac = ctx_cmac();
    self_check();
}

/* ============================================================ MAC timing */

struct mac_job {
    mac_fn fn;
    uint8_t *h;
    size_t hl;
    const uint8_t *p;
    size_t pl;
};

/* each call's input holds the previous tag: one call's latency */
static void op_mac_lat(void *c, long iters)
{
    struct mac_job *j = c;
    uint64_t t = 0;
    for (long i = 0; i < iters; i++) {
        memcpy(j->h + 16, &t, 8);
        t = j->fn(j->h, j->hl, j->p, j->pl);
    }
    sink = t;
}

/* independent calls (a sequence number changes): throughput */
static void op_mac_thr(void *c, long iters)
{
    struct mac_job *j = c;
    uint64_t acc = 0;
    for (long i = 0; i < iters; i++) {
        j->h[16] = (uint8_t) i;
        acc ^= j->fn(j->h, j->hl, j->p, j->pl);
    }
    sink = acc;
}

static void print_stat(const char *fmt, struct stat3 s)
{
    char buf[64];
    snprintf(buf, sizeof(buf), fmt, s.med, s.lo, s.hi);
    printf(" %s |", buf);
}

/* the header in two pieces as the protocol lays it out: the MACed bytes
 * [0, 44) of the 56-byte common header, then the extension header that
 * follows the common header (at 56) */
static uint64_t m_usnic_sip_layout(const uint8_t *h, size_t hl, const uint8_t *p, size_t pl)
{
    (void) p;
    (void) pl;
    if (hl <= 44) {
        return usnic_siphash24(&sipkey, h, hl);
    }
    struct usnic_auth_piece pc[2] = {{h, 44}, {h + 56, hl - 44}};
    return usnic_siphash24_pieces(&sipkey, pc, 2);
}

static void bench_hdr(void)
{
    static const size_t sizes[] = {48, 64, 80};
    static const size_t lsizes[] = {44, 60, 76};
    enum {
        NS = 3
    };
    uint8_t hdr[128] __attribute__((aligned(64)));
    struct mac_job jobs[NCANDS + 1][NS];
    struct bcase cs[(NCANDS + 1) * NS * 2];
    size_t n = 0;

    fill(hdr, sizeof(hdr), 3);
    for (size_t c = 0; c <= NCANDS; c++) {
        for (size_t i = 0; i < NS; i++) {
            if (c < NCANDS && !cands[c].hdr) {
                continue;
            }
            jobs[c][i] = (struct mac_job){c < NCANDS ? cands[c].fn : m_usnic_sip_layout, hdr,
                                          c < NCANDS ? sizes[i] : lsizes[i], NULL, 0};
            cs[n++] = (struct bcase){.op = op_mac_lat, .ctx = &jobs[c][i]};
            cs[n++] = (struct bcase){.op = op_mac_thr, .ctx = &jobs[c][i]};
        }
    }
    run_cases(cs, n);

    printf("\n## Header MAC, ns per datagram (median [min-max] of %d rounds)\n\n", opt_runs);
    printf("lat: each call's input depends on the previous tag; thr: independent calls.\n");
    printf("MAC+verify = the sender's MAC and the receiver's recomputation, 2 x lat.\n\n");
    printf("| candidate | notes |");
    for (size_t i = 0; i < NS; i++) {
        printf(" %zu B lat | %zu B thr |", sizes[i], sizes[i]);
    }
    printf(" MAC+verify 48 B | %% of 2.5 us |\n|---|---|");
    for (size_t i = 0; i < NS; i++) {
        printf("---:|---:|");
    }
    printf("---:|---:|\n");
    n = 0;
    for (size_t c = 0; c <= NCANDS; c++) {
        double lat0 = 0;
        if (c < NCANDS && !cands[c].hdr) {
            continue;
        }
        if (c < NCANDS) {
            printf("| %s | %s |", cands[c].name, cands[c].notes);
        } else {
            printf("| usnic SipHash-2-4, proto layout | 44 / 44+16 / 44+32 B in pieces "
                   "(columns: 44, 60, 76 B) |");
        }
        for (size_t i = 0; i < NS; i++) {
            struct stat3 l = cs[n++].s, t = cs[n++].s;
            if (0 == i) {
                lat0 = l.med;
            }
            print_stat("%.1f [%.1f-%.1f]", l);
            print_stat("%.1f [%.1f-%.1f]", t);
        }
        printf(" %.0f | %.1f%% |\n", 2 * lat0, 100.0 * 2 * lat0 / 2500.0);
    }
    fflush(stdout);
}

static void bench_full(void)
{
    static const size_t sizes[] = {1472, 8972, 65507};
    enum {
        NS = 3
    };
    uint8_t *dg = aligned_alloc(64, 48 + 65536);
    uint8_t hdr[128] __attribute__((aligned(64)));
    struct mac_job jobs[NCANDS][NS];
    struct bcase cs[NCANDS * NS];
    size_t n = 0;

    fill(dg, 48 + 65536, 5);
    fill(hdr, sizeof(hdr), 9);
    for (size_t c = 0; c < NCANDS; c++) {
        for (size_t i = 0; i < NS && cands[c].full; i++) {
            /* header and payload adjacent (a receive buffer) for the
             * contiguous-only API, apart (zero-copy send) for the others */
            jobs[c][i] = (struct mac_job){cands[c].fn, (m_na_sip == cands[c].fn) ? dg : hdr, 48,
                                          dg + 48, sizes[i]};
            cs[n++] = (struct bcase){.op = op_mac_thr, .ctx = &jobs[c][i]};
        }
    }
    run_cases(cs, n);

    printf("\n## Full MAC (48-byte header + payload): GB/s of payload (median [min-max] of %d "
           "rounds)\n\n",
           opt_runs);
    printf("Back-to-back calls, buffers warm in cache.  ms/GB: CPU time per GB of payload on\n");
    printf("each of sender and receiver (65507-byte datagrams).\n\n");
    printf("| candidate | notes |");
    for (size_t i = 0; i < NS; i++) {
        printf(" %zu B GB/s | ns |", sizes[i]);
    }
    printf(" ms/GB |\n|---|---|");
    for (size_t i = 0; i < NS; i++) {
        printf("---:|---:|");
    }
    printf("---:|\n");
    n = 0;
    for (size_t c = 0; c < NCANDS; c++) {
        double ms_gb = 0;
        if (!cands[c].full) {
            continue;
        }
        printf("| %s | %s |", cands[c].name, cands[c].notes);
        for (size_t i = 0; i < NS; i++) {
            struct stat3 t = cs[n++].s;
            struct stat3 g = {sizes[i] / t.med, sizes[i] / t.hi, sizes[i] / t.lo};
            print_stat("%.2f [%.2f-%.2f]", g);
            printf(" %.0f |", t.med);
            ms_gb = 1e3 / g.med;
        }
        printf(" %.0f |\n", ms_gb);
    }
    fflush(stdout);
    free(dg);
}

/* ================================================================ CRC32C */

struct copy_job {
    uint8_t *src, *dst;
    size_t len;
    size_t src_span, dst_span; /* 0: the same buffer every time; else walk */
    size_t src_at, dst_at;
    int kind;
    enum usnic_crc32c_impl impl; /* AUTO: the hardware one where there is one */
};

enum {
    K_CRC,
    K_MEMCPY,
    K_NTCOPY,
    K_CRC_COPY,
    K_CRC_COPY_NT,
    K_CRC_THEN_MEMCPY,
    K_CRC_THEN_NTCOPY
};

static const char *const kind_name[] = {
    "crc32c alone (read only)",         "memcpy",
    "non-temporal copy (copy_stream)",  "usnic_crc32c_copy (fused)",
    "usnic_crc32c_copy_nt (fused, NT)", "crc32c, then memcpy (2 passes)",
    "crc32c, then non-temporal copy",
};

/* The receive path's copy past the caches, as btl_usnic_recv.c does it for
 * large PUT chunks (16-byte SSE2 loads, non-temporal stores). */
static void nt_copy(uint8_t *dst, const uint8_t *src, size_t len)
{
    while (((uintptr_t) dst & 15) && len) {
        *dst++ = *src++;
        len--;
    }
    for (; len >= 64; len -= 64, src += 64, dst += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *) (const void *) src);
        __m128i b = _mm_loadu_si128((const __m128i *) (const void *) (src + 16));
        __m128i c = _mm_loadu_si128((const __m128i *) (const void *) (src + 32));
        __m128i d = _mm_loadu_si128((const __m128i *) (const void *) (src + 48));
        _mm_stream_si128((__m128i *) (void *) dst, a);
        _mm_stream_si128((__m128i *) (void *) (dst + 16), b);
        _mm_stream_si128((__m128i *) (void *) (dst + 32), c);
        _mm_stream_si128((__m128i *) (void *) (dst + 48), d);
    }
    _mm_sfence();
    memcpy(dst, src, len);
}

static void op_copy(void *c, long iters)
{
    struct copy_job *j = c;
    uint32_t acc = 0;
    size_t step = (j->len + 4095) & ~(size_t) 4095;
    usnic_crc32c_select(j->impl);
    for (long i = 0; i < iters; i++) {
        uint8_t *s = j->src + j->src_at, *d = j->dst + j->dst_at;
        switch (j->kind) {
        case K_CRC:
            acc ^= usnic_crc32c(0, s, j->len);
            break;
        case K_MEMCPY:
            memcpy(d, s, j->len);
            break;
        case K_NTCOPY:
            nt_copy(d, s, j->len);
            break;
        case K_CRC_COPY:
            acc ^= usnic_crc32c_copy(0, d, s, j->len);
            break;
        case K_CRC_COPY_NT:
            acc ^= usnic_crc32c_copy_nt(0, d, s, j->len);
            break;
        case K_CRC_THEN_MEMCPY:
            acc ^= usnic_crc32c(0, s, j->len);
            memcpy(d, s, j->len);
            break;
        case K_CRC_THEN_NTCOPY:
            acc ^= usnic_crc32c(0, s, j->len);
            nt_copy(d, s, j->len);
            break;
        }
        if (j->src_span) {
            j->src_at = (j->src_at + step) % (j->src_span - step);
        }
        if (j->dst_span) {
            j->dst_at = (j->dst_at + step) % (j->dst_span - step);
        }
    }
    sink = acc;
}

static void bench_crc(void)
{
    static const size_t sizes[] = {48, 1472, 8972, 65507};
    enum {
        NS = 4
    };
    uint8_t *buf = aligned_alloc(64, 65536 + 64);
    enum usnic_crc32c_impl impls[2] = {USNIC_CRC32C_HW, USNIC_CRC32C_TABLE};
    struct copy_job jobs[2][NS];
    struct bcase cs[2 * NS];
    size_t n = 0;
    int nimpl = usnic_crc32c_hw_available() ? 2 : 1;

    fill(buf, 65536 + 64, 11);
    for (int k = 2 - nimpl; k < 2; k++) {
        for (size_t i = 0; i < NS; i++) {
            jobs[k][i] = (struct copy_job){
                .src = buf, .dst = buf, .len = sizes[i], .kind = K_CRC, .impl = impls[k]};
            cs[n++] = (struct bcase){.op = op_copy, .ctx = &jobs[k][i]};
        }
    }
    run_cases(cs, n);
    usnic_crc32c_select(USNIC_CRC32C_AUTO);

    printf("\n## CRC32C alone, warm buffer: ns per call and GB/s (median [min-max] of %d "
           "rounds)\n\n| implementation |",
           opt_runs);
    for (size_t i = 0; i < NS; i++) {
        printf(" %zu B ns | GB/s |", sizes[i]);
    }
    printf("\n|---|");
    for (size_t i = 0; i < NS; i++) {
        printf("---:|---:|");
    }
    printf("\n");
    n = 0;
    if (1 == nimpl) {
        printf("| %s | not available |\n", usnic_crc32c_impl_name(USNIC_CRC32C_HW));
    }
    for (int k = 2 - nimpl; k < 2; k++) {
        printf("| %s |", usnic_crc32c_impl_name(impls[k]));
        for (size_t i = 0; i < NS; i++) {
            struct stat3 t = cs[n++].s;
            printf(" %.1f [%.1f-%.1f] | %.1f |", t.med, t.lo, t.hi, sizes[i] / t.med);
        }
        printf("\n");
    }
    fflush(stdout);
    free(buf);
}

static void bench_copy(void)
{
    static const size_t span = 256u << 20; /* 8 x the last-level cache */
    static const size_t sizes[] = {1472, 8972, 65507};
    enum {
        NS = 3,
        NK = K_CRC_THEN_NTCOPY + 1,
        NSCEN = 3
    };
    uint8_t *hot_src = aligned_alloc(64, 65536 + 4096);
    uint8_t *hot_dst = aligned_alloc(64, 65536 + 4096);
    uint8_t *big_src = region(span), *big_dst = region(span);
    static const struct {
        const char *name;
        bool src_walks, dst_walks;
    } scen[NSCEN] = {
        {"warm: source and destination in cache", false, false},
        {"receive: source in cache (a receive buffer), destination fresh", false, true},
        {"cold: source and destination not in cache", true, true},
    };
    static struct copy_job jobs[NSCEN][NK][NS];
    static struct bcase cs[NSCEN * NK * NS];
    size_t n = 0;

    fill(hot_src, 65536 + 4096, 13);
    fill(big_src, span, 17);
    for (size_t sc = 0; sc < NSCEN; sc++) {
        for (int k = 0; k < NK; k++) {
            for (size_t i = 0; i < NS; i++) {
                jobs[sc][k][i] = (struct copy_job){
                    .src = scen[sc].src_walks ? big_src : hot_src,
                    .dst = scen[sc].dst_walks ? big_dst : hot_dst,
                    .len = sizes[i],
                    .src_span = scen[sc].src_walks ? span : 0,
                    .dst_span = scen[sc].dst_walks ? span : 0,
                    /* each job walks its own part of the regions */
                    .src_at = scen[sc].src_walks ? (size_t) (k * NS + i) * (4u << 20) : 0,
                    .dst_at = scen[sc].dst_walks ? (size_t) (k * NS + i) * (4u << 20) : 0,
                    .kind = k,
                    .impl = USNIC_CRC32C_AUTO};
                cs[n++] = (struct bcase){.op = op_copy, .ctx = &jobs[sc][k][i]};
            }
        }
    }
    run_cases(cs, n);

    printf("\n## CRC32C fused with the receive copy: GB/s (median [min-max] of %d rounds)\n\n",
           opt_runs);
    printf("CRC32C implementation: %s.  Fresh memory: successive calls walk through %zu MiB.\n",
           usnic_crc32c_impl_name(usnic_crc32c_impl()), span >> 20);
    n = 0;
    for (size_t sc = 0; sc < NSCEN; sc++) {
        printf("\n### %s\n\n| operation |", scen[sc].name);
        for (size_t i = 0; i < NS; i++) {
            printf(" %zu B GB/s | ns |", sizes[i]);
        }
        printf("\n|---|");
        for (size_t i = 0; i < NS; i++) {
            printf("---:|---:|");
        }
        printf("\n");
        for (int k = 0; k < NK; k++) {
            printf("| %s |", kind_name[k]);
            for (size_t i = 0; i < NS; i++) {
                struct stat3 t = cs[n++].s;
                printf(" %.2f [%.2f-%.2f] | %.0f |", sizes[i] / t.med, sizes[i] / t.hi,
                       sizes[i] / t.lo, t.med);
            }
            printf("\n");
        }
    }
    fflush(stdout);
    munmap(big_src, span);
    munmap(big_dst, span);
    free(hot_src);
    free(hot_dst);
}

/* ================================================================== main */

static void usage(void)
{
    fprintf(stderr, "usage: macbench [-r rounds] [-t ms per run] [-c cpu] "
                    "[-s hdr,full,crc,copy] [-w max wait s] [-l]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    int cpu = -1, opt;
    cpu_set_t set;

    while (-1 != (opt = getopt(argc, argv, "r:t:c:s:w:lh"))) {
        switch (opt) {
        case 'r':
            opt_runs = atoi(optarg);
            break;
        case 't':
            opt_ms = atof(optarg);
            break;
        case 'c':
            cpu = atoi(optarg);
            break;
        case 's':
            opt_sections = optarg;
            break;
        case 'w':
            opt_wait = atof(optarg);
            break;
        case 'l':
            spin_cpu = 0; /* chosen below */
            break;
        default:
            usage();
        }
    }
    if (opt_runs < 1 || opt_runs > 64 || opt_ms <= 0) {
        usage();
    }
    if (cpu < 0) {
        cpu = (int) sysconf(_SC_NPROCESSORS_ONLN) - 1;
    }
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (0 != sched_setaffinity(0, sizeof(set), &set)) {
        fprintf(stderr, "macbench: sched_setaffinity(%d): %s\n", cpu, strerror(errno));
        return 1;
    }
    setup_keys();
    if (spin_cpu >= 0) {
        pthread_t th;
        spin_cpu = (0 == cpu) ? 1 : 0;
        if (0 != pthread_create(&th, NULL, spinner, NULL)) {
            die("pthread_create failed");
        }
        while (0 == spin_tid) {
            usleep(1000);
        }
    }
    printf("# macbench: pinned to CPU %d, %d rounds of %.0f ms per case\n", cpu, opt_runs, opt_ms);
    if (spin_cpu >= 0) {
        printf("CPU %d kept busy by a spinning thread (-l)\n", spin_cpu);
    }
    printf("libsodium %s; %s; crc32c: %s\n", sodium_version_string(),
           OpenSSL_version(OPENSSL_VERSION), usnic_crc32c_impl_name(usnic_crc32c_impl()));
    if (section("hdr")) {
        bench_hdr();
    }
    if (section("full")) {
        bench_full();
    }
    if (section("crc")) {
        bench_crc();
    }
    if (section("copy")) {
        bench_copy();
    }
    printf("\nrounds run again because another CPU was busy (or ours stolen) during them: %d; "
           "rounds kept although busy: %d; page faults while timing: %ld\n",
           rounds_redone, rounds_busy, faults_timed);
    spin_stop = true;
    EVP_MAC_CTX_free(ossl_hmac);
    EVP_MAC_CTX_free(ossl_sip);
    EVP_MAC_CTX_free(ossl_gmac);
    EVP_MAC_CTX_free(ossl_cmac);
    return 0;
}
