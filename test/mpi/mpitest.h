/*
 * Shared helpers for the usnic BTL MPI integration tests.
 *
 * Every test fills its send buffers with a pseudo-random byte pattern that
 * is a function of a 32-bit "seed" (built from rank, peer, size, iteration,
 * ...) and of the byte offset, so that a fragment delivered at the wrong
 * offset, to the wrong receive or from the wrong sender is detected.
 */
#ifndef USNIC_MPITEST_H
#define USNIC_MPITEST_H

#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Byte written into receive guard areas / gaps: must never be overwritten. */
#define MT_POISON 0xEE

static const char *mt_prog = "mpitest";

static inline int mt_rank(void)
{
    int r = -1, init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (init && !fin) {
        MPI_Comm_rank(MPI_COMM_WORLD, &r);
    }
    return r;
}

/* Print an error (prefixed by program name and rank) and abort the job. */
static inline void mt_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static inline void mt_die(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "ERROR %s rank %d: %s\n", mt_prog, mt_rank(), msg);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

/* Check the return code of an MPI call (MPI_ERRORS_RETURN is installed). */
#define MT_CHECK(call)                                                                             \
    do {                                                                                           \
        int mt_rc_ = (call);                                                                       \
        if (mt_rc_ != MPI_SUCCESS) {                                                               \
            char mt_es_[MPI_MAX_ERROR_STRING];                                                     \
            int mt_el_ = 0;                                                                        \
            MPI_Error_string(mt_rc_, mt_es_, &mt_el_);                                             \
            mt_die("%s:%d: %s failed: %s", __FILE__, __LINE__, #call, mt_es_);                     \
        }                                                                                          \
    } while (0)

/* Call right after MPI_Init*: remember the name, make errors returnable. */
static inline void mt_setup(const char *prog)
{
    mt_prog = prog;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

static inline void *mt_malloc(size_t n)
{
    void *p = calloc(1, n ? n : 1); /* zeroed: no uninitialised reads */
    if (p == NULL) {
        mt_die("out of memory allocating %zu bytes", n);
    }
    return p;
}

/* Mix several small integers into one seed. */
static inline uint32_t mt_seed(uint32_t a, uint32_t b, uint32_t c, uint32_t d)
{
    uint32_t h = 0x811C9DC5u;
    uint32_t v[4] = {a, b, c, d};
    for (int i = 0; i < 4; i++) {
        h ^= v[i];
        h *= 0x01000193u;
        h ^= h >> 15;
        h *= 0x2C1B3C6Du;
    }
    return h;
}

/* 32-bit hash of (seed, index): never periodic over any realistic buffer. */
static inline uint32_t mt_hash(uint32_t seed, uint64_t i)
{
    uint32_t x = (uint32_t) i * 0x9E3779B1u ^ (uint32_t) (i >> 32) ^ seed;
    x ^= x >> 16;
    x *= 0x7FEB352Du;
    x ^= x >> 15;
    x *= 0x846CA68Bu;
    x ^= x >> 16;
    return x;
}

static inline uint8_t mt_byte(uint32_t seed, uint64_t i)
{
    return (uint8_t) mt_hash(seed, i);
}

/* Fill buf[0..n) with the pattern of `seed`, starting at pattern index off. */
static inline void mt_fill_at(void *buf, size_t n, uint32_t seed, size_t off)
{
    uint8_t *p = buf;
    for (size_t i = 0; i < n; i++) {
        p[i] = mt_byte(seed, off + i);
    }
}

static inline void mt_fill(void *buf, size_t n, uint32_t seed)
{
    mt_fill_at(buf, n, seed, 0);
}

/* Verify buf[0..n) against pattern `seed` from index off; abort on error. */
static inline void mt_verify_at(const void *buf, size_t n, uint32_t seed, size_t off,
                                const char *what)
{
    const uint8_t *p = buf;
    for (size_t i = 0; i < n; i++) {
        uint8_t want = mt_byte(seed, off + i);
        if (p[i] != want) {
            size_t bad = 0;
            for (size_t j = i; j < n; j++) {
                bad += (p[j] != mt_byte(seed, off + j));
            }
            mt_die("data mismatch in %s: first bad offset %zu of %zu bytes "
                   "(got 0x%02x, expected 0x%02x; %zu bad bytes in total)",
                   what, i, n, p[i], want, bad);
        }
    }
}

static inline void mt_verify(const void *buf, size_t n, uint32_t seed, const char *what)
{
    mt_verify_at(buf, n, seed, 0, what);
}

/* Verify that buf[0..n) still holds MT_POISON (gaps, guard areas). */
static inline void mt_verify_poison(const void *buf, size_t n, const char *what)
{
    const uint8_t *p = buf;
    for (size_t i = 0; i < n; i++) {
        if (p[i] != MT_POISON) {
            mt_die("%s: byte at offset %zu was overwritten (0x%02x, should "
                   "have stayed 0x%02x)",
                   what, i, p[i], MT_POISON);
        }
    }
}

/* Check that a completed receive carried exactly `bytes` bytes. */
static inline void mt_check_bytes(const MPI_Status *st, size_t bytes, const char *what)
{
    int count = -1;
    MT_CHECK(MPI_Get_count(st, MPI_BYTE, &count));
    if (count < 0 || (size_t) count != bytes) {
        mt_die("%s: received %d bytes, expected %zu", what, count, bytes);
    }
}

/*
 * Report a lower bound of the user payload (bytes) that crossed between
 * distinct ranks; the driver scripts compare it to the BTL's tx_bytes.
 * Collective; rank 0 prints "BYTES <n>".
 */
static inline void mt_report_bytes(uint64_t mine)
{
    unsigned long long in = mine, sum = 0;
    MT_CHECK(MPI_Reduce(&in, &sum, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD));
    if (mt_rank() == 0) {
        printf("BYTES %llu\n", sum);
        fflush(stdout);
    }
}

/* Rank 0 prints the success line the scripts look for. */
static inline void mt_ok(const char *name)
{
    MT_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    if (mt_rank() == 0) {
        printf("OK %s\n", name);
        fflush(stdout);
    }
}

#endif
