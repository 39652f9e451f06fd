/* Small helpers: clock, random numbers, interface filters. */
#ifndef BTL_USNIC_UTIL_H
#define BTL_USNIC_UTIL_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include <netinet/in.h>

/* Monotonic microseconds (vDSO: no system call). */
static inline uint64_t usnic_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

/* xorshift64*: small, seeded, good enough for fault injection. */
static inline uint64_t usnic_rand(uint64_t *state)
{
    uint64_t x = *state ? *state : 0x9e3779b97f4a7c15ull;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545f4914f6cdd1dull;
}

/* Uniform in [0, 1). */
static inline double usnic_rand_unit(uint64_t *state)
{
    return (double) (usnic_rand(state) >> 11) * (1.0 / 9007199254740992.0);
}

/* One parsed if_include/if_exclude entry: an interface name or an IPv4 CIDR. */
struct usnic_if_filter {
    char name[64]; /* empty for a CIDR */
    uint32_t net;  /* network order */
    uint32_t prefixlen;
};

/*
 * Parse a comma-separated list of interface names and IPv4 CIDRs.  Returns
 * the number of entries (<= max), or -1 with *bad pointing at the first
 * malformed token (a static buffer).
 */
int usnic_if_filter_parse(const char *list, struct usnic_if_filter *out, int max, const char **bad);

/* Does the interface (name, IPv4 address) match any entry? */
bool usnic_if_filter_match(const struct usnic_if_filter *f, int n, const char *ifname,
                           uint32_t addr);

/* Interface facts from the kernel: up?, prefix length, MTU, link speed (Mbit/s, 0 unknown). */
int usnic_if_facts(const char *ifname, uint32_t addr, bool *up, uint32_t *prefixlen, uint32_t *mtu,
                   uint32_t *link_mbps);

/* 64-bit FNV-1a */
uint64_t usnic_hash64(const void *data, size_t len, uint64_t seed);

/* Same IPv4 subnet under both prefix lengths? */
bool usnic_same_subnet(uint32_t a, uint32_t a_prefix, uint32_t b, uint32_t b_prefix);

/* Ask for bytes of kernel receive and send buffer on socket fd (forced past
 * the system limit where we may; bytes <= 0: leave them), and report what
 * it has. */
void usnic_sock_buffers(int fd, int bytes, int *rcv_eff, int *snd_eff);
/* The same for the UDP socket bound to *bound (the udp provider's); returns
 * its descriptor, or -1. */
int usnic_udp_tune_socket(const struct sockaddr_in *bound, int bytes, int *rcv_eff, int *snd_eff);

/* Datagrams the kernel dropped on this socket (full receive buffer), from
 * SO_MEMINFO; 0 if unknown (fd < 0). */
uint64_t usnic_socket_drops(int fd);

/* n bytes from the kernel's CSPRNG (getrandom); 0, or -1 if it failed. */
int usnic_random_bytes(void *buf, size_t n);

#endif /* BTL_USNIC_UTIL_H */
