/* Small helpers (see btl_usnic_util.h). */
#include <arpa/inet.h>
#include <dirent.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/sock_diag.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "btl_usnic_util.h"

static uint32_t prefix_mask(uint32_t prefixlen)
{
    return prefixlen ? htonl(0xffffffffu << (32 - (prefixlen > 32 ? 32 : prefixlen))) : 0;
}

int usnic_if_filter_parse(const char *list, struct usnic_if_filter *out, int max, const char **bad)
{
    static char badtok[128];
    char *copy, *tok, *save = NULL;
    int n = 0;

    if (NULL == list || '\0' == list[0]) {
        return 0;
    }
    copy = strdup(list);
    if (NULL == copy) {
        return -1;
    }
    for (tok = strtok_r(copy, ", ", &save); NULL != tok; tok = strtok_r(NULL, ", ", &save)) {
        struct usnic_if_filter *f = &out[n];
        char *slash = strchr(tok, '/');
        if (n >= max) {
            break;
        }
        memset(f, 0, sizeof(*f));
        if (NULL != slash) {
            struct in_addr ia;
            char *end;
            long plen;
            *slash = '\0';
            plen = strtol(slash + 1, &end, 10);
            if (1 != inet_pton(AF_INET, tok, &ia) || '\0' != *end || end == slash + 1 || plen < 0 ||
                plen > 32) {
                *slash = '/';
                snprintf(badtok, sizeof(badtok), "%s", tok);
                *bad = badtok;
                free(copy);
                return -1;
            }
            f->prefixlen = (uint32_t) plen;
            f->net = ia.s_addr & prefix_mask(f->prefixlen);
        } else {
            if (strlen(tok) >= sizeof(f->name)) {
                snprintf(badtok, sizeof(badtok), "%s", tok);
                *bad = badtok;
                free(copy);
                return -1;
            }
            strcpy(f->name, tok);
        }
        n++;
    }
    free(copy);
    return n;
}

bool usnic_if_filter_match(const struct usnic_if_filter *f, int n, const char *ifname,
                           uint32_t addr)
{
    for (int i = 0; i < n; i++) {
        if ('\0' != f[i].name[0]) {
            if (0 == strcmp(f[i].name, ifname)) {
                return true;
            }
        } else if ((addr & prefix_mask(f[i].prefixlen)) == f[i].net) {
            return true;
        }
    }
    return false;
}

static uint32_t read_sysfs_u32(const char *ifname, const char *attr)
{
    char path[256];
    FILE *fp;
    long v = 0;

    snprintf(path, sizeof(path), "/sys/class/net/%s/%s", ifname, attr);
    fp = fopen(path, "r");
    if (NULL == fp) {
        return 0;
    }
    if (1 != fscanf(fp, "%ld", &v) || v < 0) {
        v = 0;
    }
    fclose(fp);
    return (uint32_t) v;
}

int usnic_if_facts(const char *ifname, uint32_t addr, bool *up, uint32_t *prefixlen, uint32_t *mtu,
                   uint32_t *link_mbps)
{
    struct ifaddrs *ifa, *i;
    int found = -1;

    *up = false;
    *prefixlen = 32;
    if (0 != getifaddrs(&ifa)) {
        return -1;
    }
    for (i = ifa; NULL != i; i = i->ifa_next) {
        const struct sockaddr_in *sin = (const struct sockaddr_in *) i->ifa_addr;
        if (NULL == sin || AF_INET != sin->sin_family || 0 != strcmp(i->ifa_name, ifname) ||
            sin->sin_addr.s_addr != addr) {
            continue;
        }
        *up = (i->ifa_flags & IFF_UP) && (i->ifa_flags & IFF_RUNNING);
        if (NULL != i->ifa_netmask) {
            uint32_t m = ntohl(((const struct sockaddr_in *) i->ifa_netmask)->sin_addr.s_addr);
            uint32_t bits = 0;
            while (m & 0x80000000u) {
                bits++;
                m <<= 1;
            }
            *prefixlen = bits;
        }
        found = 0;
        break;
    }
    freeifaddrs(ifa);
    *mtu = read_sysfs_u32(ifname, "mtu");
    *link_mbps = read_sysfs_u32(ifname, "speed");
    return found;
}

uint64_t usnic_hash64(const void *data, size_t len, uint64_t seed)
{
    const uint8_t *p = data;
    uint64_t h = 0xcbf29ce484222325ull ^ seed;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

bool usnic_same_subnet(uint32_t a, uint32_t a_prefix, uint32_t b, uint32_t b_prefix)
{
    uint32_t m = prefix_mask(a_prefix < b_prefix ? a_prefix : b_prefix);
    return (a & m) == (b & m);
}

/*
 * Find this process's UDP socket bound to *bound (the provider does not
 * expose it) and size its kernel buffers.  SO_*BUFFORCE works for root and
 * CAP_NET_ADMIN; otherwise the kernel caps the request at net.core.*mem_max.
 * Returns the socket's descriptor (owned by the provider: never closed
 * here) and the effective receive/send buffer sizes, or -1 if no socket was
 * found.
 */
void usnic_sock_buffers(int fd, int bytes, int *rcv_eff, int *snd_eff)
{
    socklen_t len;

    if (bytes > 0) {
        if (0 != setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof(bytes))) {
            (void) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
        }
        if (0 != setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &bytes, sizeof(bytes))) {
            (void) setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
        }
    }
    len = sizeof(*rcv_eff);
    (void) getsockopt(fd, SOL_SOCKET, SO_RCVBUF, rcv_eff, &len);
    len = sizeof(*snd_eff);
    (void) getsockopt(fd, SOL_SOCKET, SO_SNDBUF, snd_eff, &len);
}

int usnic_udp_tune_socket(const struct sockaddr_in *bound, int bytes, int *rcv_eff, int *snd_eff)
{
    DIR *dir = opendir("/proc/self/fd");
    struct dirent *de;
    int found = -1;

    if (NULL == dir) {
        return -1;
    }
    while (NULL != (de = readdir(dir))) {
        struct sockaddr_in sin;
        socklen_t slen = sizeof(sin);
        struct stat st;
        int fd, type = 0;
        socklen_t tlen = sizeof(type);
        char *end;
        long v = strtol(de->d_name, &end, 10);

        if ('\0' != *end || v < 0 || v == dirfd(dir)) {
            continue;
        }
        fd = (int) v;
        if (0 != fstat(fd, &st) || !S_ISSOCK(st.st_mode) ||
            0 != getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tlen) || SOCK_DGRAM != type ||
            0 != getsockname(fd, (struct sockaddr *) &sin, &slen) || AF_INET != sin.sin_family ||
            sin.sin_port != bound->sin_port ||
            (sin.sin_addr.s_addr != bound->sin_addr.s_addr && INADDR_ANY != sin.sin_addr.s_addr)) {
            continue;
        }
        usnic_sock_buffers(fd, bytes, rcv_eff, snd_eff);
        found = fd;
        break;
    }
    closedir(dir);
    return found;
}

uint64_t usnic_socket_drops(int fd)
{
#ifdef SO_MEMINFO
    uint32_t mem[SK_MEMINFO_VARS];
    socklen_t len = sizeof(mem);

    if (fd >= 0 && 0 == getsockopt(fd, SOL_SOCKET, SO_MEMINFO, mem, &len) &&
        len > SK_MEMINFO_DROPS * sizeof(mem[0])) {
        return mem[SK_MEMINFO_DROPS];
    }
#else
    (void) fd;
#endif
    return 0;
}

int usnic_random_bytes(void *buf, size_t n)
{
    uint8_t *p = buf;

    while (n > 0) {
        ssize_t got = getrandom(p, n, 0);
        if (got < 0) {
            if (EINTR == errno) {
                continue;
            }
            break;
        }
        p += got;
        n -= (size_t) got;
    }
    if (0 != n) {
        /* no getrandom (old kernel, seccomp): the same pool through the device */
        int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            return -1;
        }
        while (n > 0) {
            ssize_t got = read(fd, p, n);
            if (got <= 0) {
                if (got < 0 && EINTR == errno) {
                    continue;
                }
                break;
            }
            p += got;
            n -= (size_t) got;
        }
        close(fd);
    }
    return (0 == n) ? 0 : -1;
}
