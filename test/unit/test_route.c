/*
 * Route lookups for routed peers (btl_usnic_route.c): real rtnetlink
 * questions about loopback (present everywhere, in any network namespace),
 * the cache (same answer object for the same pair, growth past its first
 * size, everything freed at fini: ASan/valgrind report leaks), and the
 * verbose descriptions of every verdict.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "btl_usnic_route.h"
#include "check.h"

static uint32_t ip(const char *text)
{
    struct in_addr a;
    inet_pton(AF_INET, text, &a);
    return a.s_addr;
}

static void test_loopback(void)
{
    struct usnic_route r;
    enum usnic_route_verdict v = usnic_route_query(ip("127.0.0.1"), ip("127.0.0.1"), &r);

    check(USNIC_ROUTE_VIA_DEV == v && 0 == strcmp(r.dev, "lo") && 0 == strcmp(r.local, "lo"),
          "route 127.0.0.1 -> 127.0.0.1 leaves via lo, our interface",
          "verdict %d dev '%s' local '%s' err %d", (int) v, r.dev, r.local, r.err);
    check(0 == r.gateway, "loopback route has no gateway", "gateway 0x%x", r.gateway);

    v = usnic_route_query(ip("127.0.0.1"), ip("127.3.2.1"), &r);
    check(USNIC_ROUTE_VIA_DEV == v && 0 == strcmp(r.dev, "lo"),
          "route 127.0.0.1 -> 127.3.2.1 (local 127/8) via lo", "verdict %d dev '%s' err %d",
          (int) v, r.dev, r.err);
}

static void test_foreign_source(void)
{
    struct usnic_route r;
    /* TEST-NET-1 is never a local address: the kernel refuses the question */
    enum usnic_route_verdict v = usnic_route_query(ip("192.0.2.77"), ip("127.0.0.1"), &r);

    check(USNIC_ROUTE_VIA_DEV != v && '\0' == r.local[0],
          "a source address that is not ours never pairs", "verdict %d local '%s' err %d", (int) v,
          r.local, r.err);
}

static void test_cache(void)
{
    const struct usnic_route *a = usnic_route_get(ip("127.0.0.1"), ip("127.0.0.1"));
    const struct usnic_route *b;
    bool same = true;
    char dst[32];

    check(a == usnic_route_get(ip("127.0.0.1"), ip("127.0.0.1")),
          "the same pair is answered from the cache", "%p", (const void *) a);
    /* past the first table size (64 slots, grown at half full) */
    for (int i = 1; i <= 200; i++) {
        snprintf(dst, sizeof(dst), "127.1.%d.%d", i / 100, i % 100 + 1);
        b = usnic_route_get(ip("127.0.0.1"), ip(dst));
        same = same && USNIC_ROUTE_VIA_DEV == b->verdict;
    }
    check(same, "200 loopback destinations all via lo", "-");
    check(a == usnic_route_get(ip("127.0.0.1"), ip("127.0.0.1")),
          "a cached answer stays where it was after the cache grew", "-");
    usnic_route_fini();
    b = usnic_route_get(ip("127.0.0.1"), ip("127.0.0.1"));
    check(USNIC_ROUTE_VIA_DEV == b->verdict, "asked again after fini", "verdict %d",
          (int) b->verdict);
    usnic_route_fini();
}

static void expect_text(const struct usnic_route *r, const char *want, const char *name)
{
    char buf[160];
    usnic_route_describe(r, buf, sizeof(buf));
    check(0 == strcmp(buf, want), name, "got '%s', want '%s'", buf, want);
}

static void test_describe(void)
{
    struct usnic_route r;

    memset(&r, 0, sizeof(r));
    r.verdict = USNIC_ROUTE_VIA_DEV;
    strcpy(r.dev, "eth0");
    strcpy(r.local, "eth0");
    r.gateway = ip("10.212.1.1");
    expect_text(&r, "routed via gateway 10.212.1.1 dev eth0", "describe: via gateway");
    r.mtu = 1400;
    expect_text(&r, "routed via gateway 10.212.1.1 dev eth0, route MTU 1400",
                "describe: via gateway with a route MTU");
    r.mtu = 0;
    r.gateway = 0;
    expect_text(&r, "routed directly on dev eth0", "describe: directly");
    r.verdict = USNIC_ROUTE_OTHER_DEV;
    strcpy(r.local, "eth1");
    expect_text(&r, "route leaves via other interface eth0 (ours is eth1)",
                "describe: other interface");
    memset(&r, 0, sizeof(r));
    r.verdict = USNIC_ROUTE_NONE;
    r.err = ENETUNREACH;
    expect_text(&r, "no route (Network is unreachable)", "describe: no route");
    r.err = 0;
    r.kind = "blackhole route";
    expect_text(&r, "no route (blackhole route)", "describe: blackhole");
    r.verdict = USNIC_ROUTE_ERROR;
    r.err = EPROTONOSUPPORT;
    expect_text(&r, "route lookup failed (Protocol not supported)", "describe: lookup failed");
}

int main(void)
{
    test_loopback();
    test_foreign_source();
    test_cache();
    test_describe();
    return check_summary("test_route");
}
