/* Kernel route lookups for pairing across subnets (see btl_usnic_route.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* getifaddrs, if_indextoname under -std=c11 (unit tests) */
#endif
#include "btl_usnic_route.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

/* ---------------------------------------------------------------------- */
/* the interface holding a local address */

#define LOCAL_NAMES_MAX 64 /* one per module at most */

static struct {
    uint32_t addr;
    char name[IF_NAMESIZE];
} local_names[LOCAL_NAMES_MAX];
static int num_local_names;

static void local_dev(uint32_t addr, char *name)
{
    struct ifaddrs *ifs, *ifa;

    for (int i = 0; i < num_local_names; i++) {
        if (local_names[i].addr == addr) {
            memcpy(name, local_names[i].name, IF_NAMESIZE);
            return;
        }
    }
    name[0] = '\0';
    if (0 != getifaddrs(&ifs)) {
        return; /* not cached: asked again next time */
    }
    for (ifa = ifs; NULL != ifa; ifa = ifa->ifa_next) {
        const struct sockaddr_in *sin = (const struct sockaddr_in *) ifa->ifa_addr;
        if (NULL != sin && AF_INET == sin->sin_family && sin->sin_addr.s_addr == addr) {
            snprintf(name, IF_NAMESIZE, "%s", ifa->ifa_name);
            break;
        }
    }
    freeifaddrs(ifs);
    if ('\0' != name[0] && num_local_names < LOCAL_NAMES_MAX) {
        local_names[num_local_names].addr = addr;
        memcpy(local_names[num_local_names].name, name, IF_NAMESIZE);
        num_local_names++;
    }
}

/* ---------------------------------------------------------------------- */
/* one RTM_GETROUTE question */

struct route_req {
    struct nlmsghdr nh;
    struct rtmsg rt;
    char attrs[2 * RTA_SPACE(sizeof(uint32_t))];
};

static void add_addr_attr(struct route_req *req, unsigned short type, uint32_t addr)
{
    struct rtattr *a = (struct rtattr *) ((char *) req + NLMSG_ALIGN(req->nh.nlmsg_len));

    a->rta_type = type;
    a->rta_len = (unsigned short) RTA_LENGTH(sizeof(addr));
    memcpy(RTA_DATA(a), &addr, sizeof(addr));
    req->nh.nlmsg_len = NLMSG_ALIGN(req->nh.nlmsg_len) + RTA_SPACE(sizeof(addr));
}

static const char *route_type_name(unsigned char type)
{
    switch (type) {
    case RTN_UNREACHABLE:
        return "unreachable route";
    case RTN_BLACKHOLE:
        return "blackhole route";
    case RTN_PROHIBIT:
        return "prohibit route";
    case RTN_THROW:
        return "throw route";
    default:
        return "route of a type that carries no unicast";
    }
}

/* The metrics attribute nests RTAX_* attributes: the route's MTU. */
static uint32_t metrics_mtu(const struct rtattr *m)
{
    int len = (int) RTA_PAYLOAD(m);
    uint32_t mtu = 0;

    for (const struct rtattr *a = RTA_DATA(m); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
        if (RTAX_MTU == a->rta_type && RTA_PAYLOAD(a) >= sizeof(uint32_t)) {
            memcpy(&mtu, RTA_DATA(a), sizeof(mtu));
        }
    }
    return mtu;
}

/* Judge one RTM_NEWROUTE answer. */
static void parse_route(const struct nlmsghdr *nh, struct usnic_route *out)
{
    const struct rtmsg *rt = NLMSG_DATA(nh);
    int len = (int) RTM_PAYLOAD(nh);
    int oif = 0;

    if (nh->nlmsg_len < NLMSG_LENGTH(sizeof(*rt))) {
        out->verdict = USNIC_ROUTE_ERROR;
        out->err = EBADMSG;
        return;
    }
    for (const struct rtattr *a = RTM_RTA(rt); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
        switch (a->rta_type) {
        case RTA_OIF:
            if (RTA_PAYLOAD(a) >= sizeof(oif)) {
                memcpy(&oif, RTA_DATA(a), sizeof(oif));
            }
            break;
        case RTA_GATEWAY:
            if (RTA_PAYLOAD(a) >= sizeof(out->gateway)) {
                memcpy(&out->gateway, RTA_DATA(a), sizeof(out->gateway));
            }
            break;
        case RTA_METRICS:
            out->mtu = metrics_mtu(a);
            break;
        default:
            break;
        }
    }
    if (RTN_UNICAST != rt->rtm_type && RTN_LOCAL != rt->rtm_type) {
        out->verdict = USNIC_ROUTE_NONE;
        out->kind = route_type_name(rt->rtm_type);
        return;
    }
    if (0 == oif || NULL == if_indextoname((unsigned) oif, out->dev)) {
        out->verdict = USNIC_ROUTE_ERROR;
        out->err = (0 == oif) ? ENODEV : errno;
        out->dev[0] = '\0';
        return;
    }
    out->verdict =
        (0 == strcmp(out->dev, out->local)) ? USNIC_ROUTE_VIA_DEV : USNIC_ROUTE_OTHER_DEV;
}

enum usnic_route_verdict usnic_route_query(uint32_t src, uint32_t dst, struct usnic_route *out)
{
    static uint32_t seq;
    struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
    struct timeval tv = {.tv_sec = 2};
    struct route_req req;
    union {
        struct nlmsghdr nh; /* alignment */
        char bytes[8192];
    } buf;
    ssize_t n;
    int fd;

    memset(out, 0, sizeof(*out));
    local_dev(src, out->local);
    out->verdict = USNIC_ROUTE_ERROR;

    fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (fd < 0) {
        out->err = errno;
        return out->verdict;
    }
    (void) setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));

    memset(&req, 0, sizeof(req));
    req.nh.nlmsg_len = NLMSG_LENGTH(sizeof(req.rt));
    req.nh.nlmsg_type = RTM_GETROUTE;
    req.nh.nlmsg_flags = NLM_F_REQUEST;
    req.nh.nlmsg_seq = ++seq;
    req.rt.rtm_family = AF_INET;
    req.rt.rtm_dst_len = 32;
    req.rt.rtm_src_len = 32;
    add_addr_attr(&req, RTA_DST, dst);
    add_addr_attr(&req, RTA_SRC, src);

    if (sendto(fd, &req, req.nh.nlmsg_len, 0, (struct sockaddr *) &kernel, sizeof(kernel)) < 0) {
        out->err = errno;
        close(fd);
        return out->verdict;
    }
    for (;;) {
        n = recv(fd, buf.bytes, sizeof(buf.bytes), 0);
        if (n < 0 && EINTR == errno) {
            continue;
        }
        if (n <= 0) {
            out->err = (n < 0) ? errno : EPIPE;
            break;
        }
        int left = (int) n;
        bool done = false;
        for (const struct nlmsghdr *nh = &buf.nh; NLMSG_OK(nh, left); nh = NLMSG_NEXT(nh, left)) {
            if (nh->nlmsg_seq != req.nh.nlmsg_seq) {
                continue; /* not our question */
            }
            done = true;
            if (NLMSG_ERROR == nh->nlmsg_type) {
                const struct nlmsgerr *e = NLMSG_DATA(nh);
                out->err = (nh->nlmsg_len >= NLMSG_LENGTH(sizeof(*e)) && 0 != e->error) ? -e->error
                                                                                        : EBADMSG;
                /* what an unreachable or prohibit route, or no route at
                 * all, answers to an output lookup */
                if (ENETUNREACH == out->err || EHOSTUNREACH == out->err || EACCES == out->err) {
                    out->verdict = USNIC_ROUTE_NONE;
                }
            } else if (RTM_NEWROUTE == nh->nlmsg_type) {
                parse_route(nh, out);
            } else {
                out->err = EBADMSG;
            }
            break;
        }
        if (done) {
            break;
        }
    }
    close(fd);
    return out->verdict;
}

/* ---------------------------------------------------------------------- */
/* the cache: open addressing on (src, dst), grown at half full */

struct route_slot {
    uint64_t key; /* src << 32 | dst; 0 = empty (0.0.0.0 is never a module address) */
    struct usnic_route *route;
};

static struct route_slot *slots;
static size_t num_slots, used_slots;

static size_t slot_of(const struct route_slot *table, size_t size, uint64_t key)
{
    size_t i = (size_t) ((key * 0x9e3779b97f4a7c15ull) >> 20) & (size - 1);

    while (0 != table[i].key && table[i].key != key) {
        i = (i + 1) & (size - 1);
    }
    return i;
}

static bool cache_grow(void)
{
    size_t size = (0 == num_slots) ? 64 : 2 * num_slots;
    struct route_slot *table = calloc(size, sizeof(*table));

    if (NULL == table) {
        return false;
    }
    for (size_t i = 0; i < num_slots; i++) {
        if (0 != slots[i].key) {
            table[slot_of(table, size, slots[i].key)] = slots[i];
        }
    }
    free(slots);
    slots = table;
    num_slots = size;
    return true;
}

const struct usnic_route *usnic_route_get(uint32_t src, uint32_t dst)
{
    static struct usnic_route unavailable; /* when memory runs out */
    uint64_t key = ((uint64_t) src << 32) | dst;
    struct usnic_route *r;
    size_t i;

    if (0 != num_slots) {
        i = slot_of(slots, num_slots, key);
        if (0 != slots[i].key) {
            return slots[i].route;
        }
    }
    if ((2 * (used_slots + 1) > num_slots && !cache_grow()) || NULL == (r = malloc(sizeof(*r)))) {
        (void) usnic_route_query(src, dst, &unavailable);
        return &unavailable;
    }
    (void) usnic_route_query(src, dst, r);
    i = slot_of(slots, num_slots, key);
    slots[i].key = key;
    slots[i].route = r;
    used_slots++;
    return r;
}

void usnic_route_fini(void)
{
    for (size_t i = 0; i < num_slots; i++) {
        free(slots[i].route);
    }
    free(slots);
    slots = NULL;
    num_slots = used_slots = 0;
    num_local_names = 0;
}

void usnic_route_describe(const struct usnic_route *r, char *buf, size_t len)
{
    char gw[INET_ADDRSTRLEN] = "";
    char mtu[32] = "";

    if (0 != r->mtu) {
        snprintf(mtu, sizeof(mtu), ", route MTU %u", r->mtu);
    }
    switch (r->verdict) {
    case USNIC_ROUTE_VIA_DEV:
    case USNIC_ROUTE_OTHER_DEV:
        if (USNIC_ROUTE_OTHER_DEV == r->verdict) {
            snprintf(buf, len, "route leaves via other interface %s (ours is %s)", r->dev,
                     ('\0' != r->local[0]) ? r->local : "unknown");
        } else if (0 != r->gateway) {
            inet_ntop(AF_INET, &r->gateway, gw, sizeof(gw));
            snprintf(buf, len, "routed via gateway %s dev %s%s", gw, r->dev, mtu);
        } else {
            snprintf(buf, len, "routed directly on dev %s%s", r->dev, mtu);
        }
        break;
    case USNIC_ROUTE_NONE:
        if (0 != r->err) {
            snprintf(buf, len, "no route (%s)", strerror(r->err));
        } else {
            snprintf(buf, len, "no route (%s)", (NULL != r->kind) ? r->kind : "?");
        }
        break;
    default:
        snprintf(buf, len, "route lookup failed (%s)", strerror(r->err));
        break;
    }
}
