/*
 * The connectivity checker (btl_usnic_cc.h) without MPI: an agent, its
 * clients and a peer's ping responder as processes of this test, over
 * 127.0.0.1 and a Unix socket in a temporary directory.
 *
 * The races the design must survive: clients that connect before the
 * agent listens, an agent that leaves with a check under way, several
 * threads of one process asking at once, an agent of another version, a
 * client that talks nonsense.  And the verdicts: OK (one check for the
 * whole host), REDUCED (a responder that drops large pings), NOPATH.
 *
 * Children print detail lines only; each returns its number of failed
 * expectations as exit status, and the parent turns that into PASS/FAIL.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "btl_usnic_cagent.h"
#include "btl_usnic_cc.h"
#include "btl_usnic_util.h"
#include "check.h"

#define KEY 0x1122334455667788ull

struct shared {
    volatile int pings; /* valid pings seen */
    volatile int nsrc;  /* distinct source ports */
    volatile int src[32];
    volatile int max_echo; /* echo only pings up to this size (0: all) */
    volatile int closed;   /* 1: echo nothing */
    /* 1: an attacker who reads the pings answers those above max_echo
     * from the responder's address, with a MAC under a secret it guessed */
    volatile int forge;
    volatile int forged;  /* pongs it sent */
    volatile int counted; /* forged pongs the clients' verdicts reported, summed */
    /* a lossy path: each ping dropped with this probability (percent), by
     * a generator seeded with seed whenever gen changes */
    volatile int drop_pct;
    volatile uint64_t seed;
    volatile int gen;
    volatile uint32_t client_tries; /* t_client_retries_soon: the client's tries so far */
};

static struct shared *sh;
static char sock_path[108];
static uint16_t resp_port;
static int resp_fd = -1;

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000u + (uint64_t) ts.tv_nsec / 1000000u;
}

/* The secret of the peer process with that key (in a job: its modex
 * record). */
static struct usnic_sip_key secret_of(uint64_t key, uint8_t bytes[USNIC_SIP_KEY_BYTES])
{
    struct usnic_sip_key k;
    uint8_t b[USNIC_SIP_KEY_BYTES];

    for (int i = 0; i < USNIC_SIP_KEY_BYTES; i++) {
        b[i] = (uint8_t) ((key >> (8 * (i % 8))) ^ (uint64_t) (0x5a + 17 * i));
    }
    if (NULL != bytes) {
        memcpy(bytes, b, sizeof(b));
    }
    usnic_sip_key_load(&k, b);
    return k;
}

static void responder(void)
{
    static _Alignas(struct usnic_cc_ping) uint8_t buf[65536];
    const struct usnic_sip_key s0 = secret_of(KEY, NULL), s1 = secret_of(KEY + 1, NULL);
    const struct usnic_sip_key guess = secret_of(~KEY, NULL);
    uint64_t rng = 1;
    int gen = -1;

    for (;;) {
        struct sockaddr_in from;
        socklen_t fl = sizeof(from);
        ssize_t r = recvfrom(resp_fd, buf, sizeof(buf), 0, (struct sockaddr *) &from, &fl);
        bool forged;
        int port, i;

        /* two "processes" of the peer host: keys KEY and KEY + 1 */
        if (r < 0 || (!usnic_cc_make_pong(buf, (size_t) r, KEY, &s0, from.sin_addr.s_addr,
                                          from.sin_port, &forged) &&
                      !usnic_cc_make_pong(buf, (size_t) r, KEY + 1, &s1, from.sin_addr.s_addr,
                                          from.sin_port, &forged))) {
            continue;
        }
        sh->pings++;
        port = ntohs(from.sin_port);
        for (i = 0; i < sh->nsrc && sh->src[i] != port; i++) {
        }
        if (i == sh->nsrc && i < 32) {
            sh->src[sh->nsrc++] = port;
        }
        if (gen != sh->gen) {
            gen = sh->gen;
            rng = sh->seed;
        }
        if (sh->drop_pct > 0 && (int) (usnic_rand(&rng) % 100) < sh->drop_pct) {
            continue;
        }
        if (sh->forge && sh->max_echo > 0 && r > sh->max_echo) {
            struct usnic_cc_ping *p = (struct usnic_cc_ping *) buf;
            usnic_sip_tag_store(p->mac, usnic_cc_pong_mac(&guess, p));
            (void) sendto(resp_fd, buf, (size_t) r, 0, (struct sockaddr *) &from, fl);
            sh->forged++;
            continue;
        }
        if (sh->closed || (sh->max_echo > 0 && r > sh->max_echo)) {
            continue;
        }
        (void) sendto(resp_fd, buf, (size_t) r, 0, (struct sockaddr *) &from, fl);
    }
}

static uint64_t req_key = KEY;

static struct usnic_cc_req req_of(uint32_t full)
{
    struct usnic_cc_req r;
    memset(&r, 0, sizeof(r));
    r.local_ip = htonl(INADDR_LOOPBACK);
    r.remote_ip = htonl(INADDR_LOOPBACK);
    r.remote_port = htons(resp_port);
    r.full = full;
    r.remote_key = req_key;
    (void) secret_of(req_key, r.remote_secret);
    return r;
}

static void start(bool agent, const char *path, int delay_ms, int ack_ms, int retries)
{
    struct usnic_cc_config cfg = {0};
    int rc;

    cfg.sock_path = path;
    cfg.agent = agent;
    cfg.ack_timeout_ms = ack_ms;
    cfg.num_retries = retries;
    cfg.connect_timeout_ms = 3000;
    cfg.agent_delay_ms = delay_ms;
    rc = usnic_cc_init(&cfg);
    if (0 != rc) {
        printf("    usnic_cc_init: %s\n", strerror(-rc));
        exit(100);
    }
}

static uint32_t last_rounds; /* the rounds of the last verdict expect_epoch got */
static uint32_t last_forged; /* and the pongs it dropped for a wrong MAC */

/* One expectation on the verdict of a check with that epoch (0: the one
 * before the first traffic); returns 1 if it failed. */
static int expect_epoch(const char *who, uint32_t full, uint16_t epoch, uint32_t status,
                        uint32_t size, int by_agent)
{
    struct usnic_cc_req r = req_of(full);
    struct usnic_cc_result res;
    uint32_t h;

    r.epoch = epoch;
    h = usnic_cc_request(&r);

    if (0 == h || !usnic_cc_wait(h, &res, 10000)) {
        printf("    %s: no verdict for %u (handle %u)\n", who, full, h);
        return 1;
    }
    last_rounds = res.rounds;
    last_forged = res.forged;
    if (res.status != status || res.size != size ||
        (by_agent >= 0 && (int) res.by_agent != by_agent)) {
        printf("    %s: full %u: status %u size %u by_agent %u; wanted %u %u %d\n", who, full,
               res.status, res.size, res.by_agent, status, size, by_agent);
        return 1;
    }
    return 0;
}

static int expect(const char *who, uint32_t full, uint32_t status, uint32_t size, int by_agent)
{
    return expect_epoch(who, full, 0, status, size, by_agent);
}

static pid_t spawn_agent(int delay_ms, int life_ms, int ack_ms, int retries)
{
    pid_t pid = fork();
    if (0 == pid) {
        start(true, sock_path, delay_ms, ack_ms, retries);
        usleep((useconds_t) life_ms * 1000u);
        usnic_cc_fini();
        _exit(0);
    }
    return pid;
}

static int wait_status(pid_t pid)
{
    int st;
    if (waitpid(pid, &st, 0) != pid) {
        return 99;
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void reset_responder(void)
{
    sh->pings = 0;
    sh->nsrc = 0;
    sh->max_echo = 0;
    sh->closed = 0;
    sh->forge = 0;
    sh->forged = 0;
    sh->counted = 0;
    sh->drop_pct = 0;
}

/* ---- scenarios ---- */

static void t_host_shares_one_check(void)
{
    pid_t agent, cl[3];
    int bad = 0;

    reset_responder();
    agent = spawn_agent(0, 1500, 100, 20);
    for (int i = 0; i < 3; i++) {
        cl[i] = fork();
        if (0 == cl[i]) {
            /* the third asks for another process of the same peer interface */
            req_key = KEY + (2 == i);
            start(false, sock_path, 0, 100, 20);
            int f = expect("client", 1472, USNIC_CC_OK, 1472, 1);
            usnic_cc_fini();
            _exit(f);
        }
    }
    for (int i = 0; i < 3; i++) {
        bad += wait_status(cl[i]);
    }
    bad += wait_status(agent);
    check(0 == bad, "three clients get OK from the host's agent", "%d failures", bad);
    check(1 == sh->nsrc && 2 == sh->pings, "the agent checked the path once for all of them",
          "%d sources sent %d pings (wanted 1 source, 2 pings)", sh->nsrc, sh->pings);
}

static void t_clients_before_agent(void)
{
    pid_t agent, cl[2];
    int bad = 0;

    reset_responder();
    for (int i = 0; i < 2; i++) {
        cl[i] = fork();
        if (0 == cl[i]) {
            start(false, sock_path, 0, 100, 20);
            int f = expect("early client", 1472, USNIC_CC_OK, 1472, 1);
            usnic_cc_fini();
            _exit(f);
        }
    }
    usleep(200000);
    agent = spawn_agent(500, 2000, 100, 20); /* listens 0.7 s after the clients came */
    for (int i = 0; i < 2; i++) {
        bad += wait_status(cl[i]);
    }
    bad += wait_status(agent);
    check(0 == bad, "clients that came before the agent listened are served by it", "%d failures",
          bad);
}

/* A client that looks for the agent a little before it listens tries
 * again soon, not a whole 20 ms later: its process's first send waits for
 * the verdict, and its peers' first messages meanwhile go unacknowledged
 * (2-rank jobs on loopback took 20 ms longer to their first message in
 * half the runs).  The agent comes 100 ms after the client's first try
 * (counted from there, whatever the machine's load did to the start of
 * either): tries 1, 2, 4, 8, 16, 20, 20... ms apart make 9 in that time,
 * every 20 ms 5 or 6. */
static void t_client_retries_soon(void)
{
    pid_t agent, cl;
    uint64_t t0 = now_ms();
    uint32_t tries;
    int st;

    reset_responder();
    sh->client_tries = 0;
    cl = fork();
    if (0 == cl) {
        struct usnic_cc_result res;
        struct usnic_cc_req r = req_of(1472);
        uint32_t h;
        int f = 0;

        start(false, sock_path, 0, 100, 20);
        h = usnic_cc_request(&r);
        while (0 != h && !usnic_cc_result(h, &res) && now_ms() - t0 < 10000) {
            sh->client_tries = usnic_cc_connect_tries();
            usleep(200);
        }
        sh->client_tries = usnic_cc_connect_tries();
        if (0 == h || USNIC_CC_OK != res.status || 1 != res.by_agent) {
            printf("    client: no OK from the agent (handle %u)\n", h);
            f = 1;
        }
        usnic_cc_fini();
        _exit(f);
    }
    while (0 == sh->client_tries && now_ms() - t0 < 10000) {
        usleep(100);
    }
    usleep(100000);
    tries = sh->client_tries;
    agent = spawn_agent(0, 3000, 100, 20);
    st = wait_status(cl);
    st += wait_status(agent);
    check(0 == st, "a client that came before the agent listened is served by it", "%d failures",
          st);
    check(tries >= 7, "it tried again within milliseconds, then less often",
          "%u tries in the 100 ms before the agent came (wanted at least 7)", tries);
}

static void t_agent_leaves_mid_check(void)
{
    pid_t agent, cl;
    int bad;
    uint64_t t0;

    reset_responder();
    sh->closed = 1; /* nothing comes back while the agent lives */
    agent = spawn_agent(0, 400, 100, 40);
    cl = fork();
    if (0 == cl) {
        start(false, sock_path, 0, 100, 40);
        int f = expect("orphaned client", 1472, USNIC_CC_OK, 1472, 0);
        usnic_cc_fini();
        _exit(f);
    }
    bad = wait_status(agent);
    t0 = now_ms();
    sh->closed = 0; /* the path heals after the agent left */
    bad += wait_status(cl);
    check(0 == bad, "a check the agent left unfinished is finished by the client itself",
          "%d failures (client took %llu ms after the agent left)", bad,
          (unsigned long long) (now_ms() - t0));
}

struct thr {
    uint32_t full;
    int fail;
};

static void *thr_main(void *arg)
{
    struct thr *t = arg;
    t->fail = expect("thread", t->full, USNIC_CC_OK, t->full, 1);
    return NULL;
}

static void t_threads_at_once(void)
{
    pid_t agent, cl;
    int bad;

    reset_responder();
    agent = spawn_agent(0, 2500, 100, 20);
    cl = fork();
    if (0 == cl) {
        static const uint32_t fulls[8] = {1472, 1472, 1472, 1472, 1000, 2000, 3000, 8972};
        pthread_t th[8];
        struct thr t[8];
        int f = 0;
        start(false, sock_path, 0, 100, 20);
        for (int i = 0; i < 8; i++) {
            t[i].full = fulls[i];
            pthread_create(&th[i], NULL, thr_main, &t[i]);
        }
        for (int i = 0; i < 8; i++) {
            pthread_join(th[i], NULL);
            f += t[i].fail;
        }
        usnic_cc_fini();
        _exit(f);
    }
    bad = wait_status(cl);
    bad += wait_status(agent);
    check(0 == bad, "eight threads of one client ask at once (same and different pairs)",
          "%d failures", bad);
}

static void t_black_hole(void)
{
    pid_t cl;
    int bad;

    reset_responder();
    sh->max_echo = 1472; /* nothing above a 1500-byte IP packet comes back */
    cl = fork();
    if (0 == cl) {
        start(false, "", 0, 50, 6); /* no agent: the process checks itself */
        int f = expect("black hole", 8972, USNIC_CC_REDUCED, 1472, 0);
        f += expect("black hole, small full size", 1400, USNIC_CC_OK, 1400, 0);
        usnic_cc_fini();
        _exit(f);
    }
    bad = wait_status(cl);
    check(0 == bad, "a path that drops datagrams above 1472 bytes is REDUCED to 1472",
          "%d failures", bad);
}

/* Paths whose MTU lies between two of the ladder's rungs (8000 bytes on a
 * 9000-byte network, a 1450-byte VXLAN overlay, 1492 under PPPoE, 4500):
 * the start-up check finds their largest datagram within a few bytes, not
 * the rung below it, and a check again while running (4 rounds) within
 * 64 bytes. */
static void t_search_between_rungs(void)
{
    static const struct {
        int echo;      /* the largest datagram the path carries */
        uint32_t full; /* the pair's full size */
    } paths[] = {{7972, 8972}, {1422, 8972}, {1464, 1472}, {4472, 8972}, {1000, 1472}};
    int bad = 0;

    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        pid_t cl;
        int echo = paths[i].echo;

        reset_responder();
        sh->max_echo = echo;
        cl = fork();
        if (0 == cl) {
            struct usnic_cc_req r;
            struct usnic_cc_result res;
            uint32_t h;
            int f = 0;

            start(false, "", 0, 30, 12);
            for (uint16_t epoch = 0; epoch < 2; epoch++) {
                uint32_t slack = 0 == epoch ? 8 : 64;
                r = req_of(paths[i].full);
                r.epoch = epoch;
                h = usnic_cc_request(&r);
                if (0 == h || !usnic_cc_wait(h, &res, 10000) || USNIC_CC_REDUCED != res.status ||
                    res.size > (uint32_t) echo || res.size + slack < (uint32_t) echo) {
                    printf("    path of %d bytes, full %u, epoch %u: status %u size %u (wanted "
                           "REDUCED, %u-%d)\n",
                           echo, paths[i].full, epoch, res.status, res.size, echo - slack, echo);
                    f++;
                } else {
                    printf("    path of %d bytes, full %u, epoch %u: %u after %u rounds\n", echo,
                           paths[i].full, epoch, res.size, res.rounds);
                }
            }
            usnic_cc_fini();
            _exit(f);
        }
        bad += wait_status(cl);
    }
    check(0 == bad,
          "a path between two rungs gets its own largest size (8 bytes at start-up, 64 when "
          "checked again), not the rung below",
          "%d failures", bad);
}

/* The largest of the checker's usual sizes at most n (0: none). */
static uint32_t rung_at_most(uint32_t n)
{
    static const uint32_t rungs[] = {8972, 4068, 1472, 1372, 1252, 548};
    for (size_t i = 0; i < sizeof(rungs) / sizeof(rungs[0]); i++) {
        if (rungs[i] <= n) {
            return rungs[i];
        }
    }
    return 0;
}

/* Random paths (largest datagram 548-8971 bytes, full size 8972) with and
 * without random loss of pings (0-25%): the verdict never claims more than
 * the path carries; without loss it is within 8 bytes of it, with loss at
 * least the usual size below it.  Seed: CC_TEST_SEED, else the clock. */
static void t_search_random(void)
{
    const char *env = getenv("CC_TEST_SEED");
    uint64_t seed = (NULL != env) ? strtoull(env, NULL, 0) : (uint64_t) time(NULL);
    uint64_t st = seed;
    int bad = 0, paths = 12;

    check_seed = seed;
    for (int i = 0; i < paths; i++) {
        int echo, loss;
        pid_t cl;

        uint64_t draw = usnic_rand(&st);

        echo = 548 + (int) (draw % (8972 - 548));
        loss = (0 == i % 2) ? 0 : 1 + (int) ((draw >> 20) % 25);
        reset_responder();
        sh->max_echo = echo;
        sh->drop_pct = loss;
        sh->seed = draw;
        sh->gen++;
        cl = fork();
        if (0 == cl) {
            struct usnic_cc_result res;
            struct usnic_cc_req r = req_of(8972);
            uint32_t h, low = (0 == loss) ? (uint32_t) echo - 8 : rung_at_most((uint32_t) echo);
            int f = 0;

            /* 30 ms rounds, 16 of them: under valgrind a pong can come
             * back a round late, and the search then takes a round more */
            start(false, "", 0, 30, 16);
            h = usnic_cc_request(&r);
            if (0 == h || !usnic_cc_wait(h, &res, 10000) || USNIC_CC_REDUCED != res.status ||
                res.size > (uint32_t) echo || res.size < low) {
                printf("    path of %d bytes, %d%% loss: status %u size %u (wanted REDUCED, "
                       "%u-%d)\n",
                       echo, loss, res.status, res.size, low, echo);
                f++;
            }
            usnic_cc_fini();
            _exit(f);
        }
        bad += wait_status(cl);
    }
    check(0 == bad,
          "12 random paths, half of them losing pings: never more than the path carries, "
          "within 8 bytes without loss",
          "%d failures (reproduce: CC_TEST_SEED=%llu)", bad, (unsigned long long) seed);
    check_seed = 0;
}

/* The black hole again, with an attacker who reads every ping (its nonce
 * included) and answers the sizes the path drops from the responder's own
 * address and port: without the pinged process's secret its pongs carry
 * a wrong MAC, are dropped and counted, and the verdict is what the path
 * carries.  (Before pongs had a MAC this was OK at 8972: the path grew
 * into the hole.)  Start-up check and check again alike. */
static void t_forged_pongs(void)
{
    pid_t cl;
    int bad;

    reset_responder();
    sh->max_echo = 1472;
    sh->forge = 1;
    cl = fork();
    if (0 == cl) {
        start(false, "", 0, 50, 6);
        int f = expect("forged pongs", 8972, USNIC_CC_REDUCED, 1472, 0);
        if (0 == last_forged) {
            printf("    start-up check: no forged pong counted\n");
            f++;
        }
        f += expect_epoch("forged pongs, check again", 8972, 1, USNIC_CC_REDUCED, 1472, 0);
        if (0 == last_forged) {
            printf("    check again: no forged pong counted\n");
            f++;
        }
        usnic_cc_fini();
        _exit(f);
    }
    bad = wait_status(cl);
    check(0 == bad && sh->forged > 0,
          "pongs with a wrong MAC do not prove a size (REDUCED to 1472, forgeries counted)",
          "%d failures, %d pongs forged", bad, sh->forged);
}

/* The same attacker while three processes of the host wait for one check
 * by the agent, and a fourth asks once the verdict is kept: every one gets
 * the verdict, but the forged pongs dropped are counted once (cc_forged is
 * summed over the job): before, each waiter counted them all. */
static void t_forged_counted_once(void)
{
    pid_t agent, cl[4];
    int bad = 0;

    reset_responder();
    sh->max_echo = 1472;
    sh->forge = 1;
    agent = spawn_agent(0, 3000, 50, 6);
    for (int i = 0; i < 4; i++) {
        if (3 == i) {
            for (int k = 0; k < 3; k++) {
                bad += wait_status(cl[k]); /* the fourth comes after the verdict */
            }
        }
        cl[i] = fork();
        if (0 == cl[i]) {
            req_key = KEY + (2 == i);
            start(false, sock_path, 0, 50, 6);
            int f = expect("client", 8972, USNIC_CC_REDUCED, 1472, 1);
            __atomic_add_fetch(&sh->counted, (int) last_forged, __ATOMIC_SEQ_CST);
            usnic_cc_fini();
            _exit(f);
        }
    }
    bad += wait_status(cl[3]);
    bad += wait_status(agent);
    check(0 == bad && sh->forged > 0 && sh->counted > 0 && sh->counted <= sh->forged,
          "forged pongs of a check shared by a host's processes are counted once",
          "%d failures, %d pongs forged, %d counted by the 4 clients' verdicts", bad, sh->forged,
          sh->counted);
}

/* A path fine at start-up that turns into a black hole while the job
 * runs: the start-up verdict stays what it was (the agent keeps it for
 * every process of the host), a check again (epoch > 0) runs anew and
 * finds the black hole, and a later one finds the path healed. */
static void t_recheck_while_running(void)
{
    pid_t agent, cl;
    int bad;

    reset_responder();
    agent = spawn_agent(0, 4000, 50, 6);
    cl = fork();
    if (0 == cl) {
        start(false, sock_path, 0, 50, 6);
        int f = expect_epoch("start-up", 8972, 0, USNIC_CC_OK, 8972, 1);
        sh->max_echo = 1472; /* the path changes under the job */
        f += expect_epoch("start-up again", 8972, 0, USNIC_CC_OK, 8972, 1);
        f += expect_epoch("checked again", 8972, 1, USNIC_CC_REDUCED, 1472, 1);
        sh->max_echo = 0; /* and heals */
        f += expect_epoch("checked again later", 8972, 2, USNIC_CC_OK, 8972, 1);
        usnic_cc_fini();
        _exit(f);
    }
    bad = wait_status(cl);
    (void) wait_status(agent);
    check(0 == bad,
          "a check again while running (epoch > 0) runs anew: black hole found, then healed; "
          "the start-up verdict is kept",
          "%d failures", bad);
}

/* A check again while running (data stuck, or the raise timer) is REDUCED
 * after 4 rounds when the small ping and a smaller size came back and the
 * full size did not; the start-up check waits for all num_retries rounds,
 * and a NOPATH or OK verdict is as before. */
static void t_recheck_ends_early(void)
{
    pid_t cl;
    int bad;

    reset_responder();
    sh->max_echo = 1472;
    cl = fork();
    if (0 == cl) {
        int f = 0;
        start(false, "", 0, 40, 12);
        f += expect_epoch("start-up", 8972, 0, USNIC_CC_REDUCED, 1472, 0);
        if (12 != last_rounds) {
            printf("    start-up check: %u rounds, wanted 12\n", last_rounds);
            f++;
        }
        f += expect_epoch("checked again", 8972, 1, USNIC_CC_REDUCED, 1472, 0);
        if (4 != last_rounds) {
            printf("    check again: %u rounds, wanted 4\n", last_rounds);
            f++;
        }
        sh->max_echo = 0; /* healed: the raise timer's check finds the full size */
        f += expect_epoch("raise", 8972, 2, USNIC_CC_OK, 8972, 0);
        if (last_rounds > 2) {
            printf("    raise check: %u rounds, wanted 1 or 2\n", last_rounds);
            f++;
        }
        sh->max_echo = USNIC_CC_SMALL; /* only the small ping comes back */
        f += expect_epoch("nothing smaller", 8972, 3, USNIC_CC_REDUCED, 0, 0);
        if (12 != last_rounds) {
            printf("    check again, only the small ping answered: %u rounds, wanted 12\n",
                   last_rounds);
            f++;
        }
        usnic_cc_fini();
        _exit(f);
    }
    bad = wait_status(cl);
    check(0 == bad,
          "a check again while running ends after 4 rounds once a smaller size passed and the "
          "full size did not (start-up: all 12)",
          "%d failures", bad);
}

/* Checks again all job long (the raise timer on a path that stays
 * reduced) take over the record of the last answered one toward the same
 * peer instead of adding one each: the same handle comes back, with the
 * new verdict; the start-up check and other peers keep their own. */
static void t_recheck_reuses_record(void)
{
    pid_t cl;
    int bad;

    reset_responder();
    cl = fork();
    if (0 == cl) {
        struct usnic_cc_req r = req_of(8972), other = req_of(8972);
        struct usnic_cc_result res;
        uint32_t h0, h1 = 0, h, ho;
        int f = 0;

        start(false, "", 0, 20, 4);
        h0 = usnic_cc_request(&r);
        f += !usnic_cc_wait(h0, &res, 5000);
        for (uint16_t e = 1; e <= 50; e++) {
            r.epoch = e;
            sh->max_echo = (e % 2) ? 1472 : 0; /* the path shrinks and heals in turn */
            h = usnic_cc_request(&r);
            if (1 == e) {
                h1 = h;
            }
            if (0 == h || h == h0 || h != h1 || !usnic_cc_wait(h, &res, 5000) ||
                res.status != ((e % 2) ? USNIC_CC_REDUCED : USNIC_CC_OK) ||
                res.size != ((e % 2) ? 1472u : 8972u)) {
                printf("    re-check %u: handle %u (start-up %u, first re-check %u), status %u "
                       "size %u\n",
                       e, h, h0, h1, res.status, res.size);
                f++;
                break;
            }
        }
        other.remote_key = KEY + 1; /* another process of the peer host */
        other.epoch = 1;
        ho = usnic_cc_request(&other);
        if (0 == ho || ho == h0 || ho == h1) {
            printf("    another peer's re-check got handle %u (ours: %u, %u)\n", ho, h0, h1);
            f++;
        }
        f += !usnic_cc_wait(ho, &res, 5000);
        usnic_cc_fini();
        _exit(f);
    }
    bad = wait_status(cl);
    check(0 == bad,
          "50 checks again toward one peer reuse one record (handle), each with its own "
          "verdict; the start-up check and another peer keep theirs",
          "%d failures", bad);
}

static void t_no_path(void)
{
    pid_t cl;
    int bad;
    uint64_t t0 = now_ms(), dt;

    reset_responder();
    sh->closed = 1;
    cl = fork();
    if (0 == cl) {
        start(false, "", 0, 50, 6);
        int f = expect("no path", 1472, USNIC_CC_NOPATH, 0, 0);
        usnic_cc_fini();
        _exit(f);
    }
    bad = wait_status(cl);
    dt = now_ms() - t0;
    check(0 == bad, "a path that answers nothing is NOPATH", "%d failures", bad);
    check(dt < 3000, "NOPATH comes after the retries (6 x 50 ms), not later", "took %llu ms",
          (unsigned long long) dt);
}

static void t_agent_of_other_version(void)
{
    int lfd = cc_agent_listen(sock_path), bad;
    pid_t fake, cl;

    reset_responder();
    if (lfd < 0) {
        check(false, "fake agent listens", "%s", strerror(errno));
        return;
    }
    fake = fork();
    if (0 == fake) {
        struct usnic_cc_msg m;
        int fd;
        while ((fd = accept(lfd, NULL, NULL)) < 0) {
        }
        if (recv(fd, &m, sizeof(m), 0) == (ssize_t) sizeof(m)) {
            m.version = 99;
            (void) send(fd, &m, sizeof(m), MSG_NOSIGNAL);
        }
        usleep(1500000);
        _exit(0);
    }
    close(lfd);
    cl = fork();
    if (0 == cl) {
        start(false, sock_path, 0, 100, 20);
        int f = expect("client of a v99 agent", 1472, USNIC_CC_OK, 1472, 0);
        usnic_cc_fini();
        _exit(f);
    }
    bad = wait_status(cl);
    kill(fake, SIGKILL);
    (void) wait_status(fake);
    unlink(sock_path);
    check(0 == bad, "an agent of another version is left alone; the client checks itself",
          "%d failures", bad);
}

static void t_nonsense_client(void)
{
    pid_t agent, cl;
    int bad = 0;

    reset_responder();
    agent = spawn_agent(0, 2000, 100, 20);
    usleep(200000);
    {
        struct sockaddr_un sun = {.sun_family = AF_UNIX};
        int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
        strcpy(sun.sun_path, sock_path);
        if (0 == connect(fd, (struct sockaddr *) &sun, sizeof(sun))) {
            char junk[37];
            memset(junk, 0x5a, sizeof(junk));
            (void) send(fd, junk, sizeof(junk), MSG_NOSIGNAL);
            (void) send(fd, junk, 7, MSG_NOSIGNAL);
        } else {
            bad++;
        }
        close(fd);
    }
    cl = fork();
    if (0 == cl) {
        start(false, sock_path, 0, 100, 20);
        int f = expect("client after nonsense", 1472, USNIC_CC_OK, 1472, 1);
        usnic_cc_fini();
        _exit(f);
    }
    bad += wait_status(cl);
    bad += wait_status(agent);
    check(0 == bad, "the agent drops a client that sends nonsense and serves the next",
          "%d failures", bad);
}

/* A ping as the agent sends it from ip:port to the module KEY (secret sec). */
static void ping_fill(uint8_t *buf, size_t len, const struct usnic_sip_key *sec, uint32_t ip,
                      uint16_t port)
{
    struct usnic_cc_ping *p = (struct usnic_cc_ping *) buf;

    memset(buf, 0, len);
    p->magic = USNIC_CC_MAGIC;
    p->version = USNIC_CC_VERSION;
    p->type = USNIC_CC_PING;
    p->size = (uint32_t) len;
    p->to_key = KEY;
    usnic_sip_tag_store(p->mac, usnic_cc_ping_mac(sec, p, ip, port));
}

static void t_pong_validation(void)
{
    _Alignas(struct usnic_cc_ping) uint8_t buf[1472];
    struct usnic_cc_ping *p = (struct usnic_cc_ping *) buf;
    const struct usnic_sip_key sec = secret_of(KEY, NULL), other = secret_of(KEY + 1, NULL);
    const uint32_t ip = htonl(0x0a000101u), ip2 = htonl(0x0a000102u);
    const uint16_t port = htons(40000);
    uint64_t tag;
    bool all = true, forged, named = true;

    ping_fill(buf, sizeof(buf), &sec, ip, port);
    all = all && !usnic_cc_make_pong(buf, sizeof(buf), KEY + 1, &sec, ip, port, &forged) &&
          !forged; /* another module */
    all = all && !usnic_cc_make_pong(buf, sizeof(buf) - 1, KEY, &sec, ip, port, &forged);
    all = all && !usnic_cc_make_pong(buf, 39, KEY, &sec, ip, port, &forged); /* < a header */
    p->version = USNIC_CC_VERSION + 1;
    all = all && !usnic_cc_make_pong(buf, sizeof(buf), KEY, &sec, ip, port, &forged);
    p->version = USNIC_CC_VERSION;
    p->zero2 = 1;
    all = all && !usnic_cc_make_pong(buf, sizeof(buf), KEY, &sec, ip, port, &forged);
    p->zero2 = 0;
    check(all, "pings with a wrong key, size, version or type are not echoed", "accepted one");

    /* the MAC: a ping is echoed only with the MAC under the responder's
     * secret that names the address and port it came from */
    memset(p->mac, 0, sizeof(p->mac)); /* version 3's pings: no MAC */
    named = named && !usnic_cc_make_pong(buf, sizeof(buf), KEY, &sec, ip, port, &forged) && forged;
    ping_fill(buf, sizeof(buf), &other, ip, port); /* another process's secret */
    named = named && !usnic_cc_make_pong(buf, sizeof(buf), KEY, &sec, ip, port, &forged) && forged;
    ping_fill(buf, sizeof(buf), &sec, ip, port); /* replayed from elsewhere: */
    named = named && !usnic_cc_make_pong(buf, sizeof(buf), KEY, &sec, ip2, port, &forged) && forged;
    named = named && !usnic_cc_make_pong(buf, sizeof(buf), KEY, &sec, ip, htons(40001), &forged) &&
            forged;
    p->nonce ^= 1; /* the nonce is covered */
    named = named && !usnic_cc_make_pong(buf, sizeof(buf), KEY, &sec, ip, port, &forged) && forged;
    p->nonce ^= 1;
    named = named && usnic_cc_make_pong(buf, sizeof(buf), KEY, &sec, ip, port, &forged) &&
            !forged && USNIC_CC_PONG == p->type;
    named = named && !usnic_cc_make_pong(buf, sizeof(buf), KEY, &sec, ip, port, &forged) &&
            !forged; /* a pong is not echoed */
    check(named,
          "a ping is echoed only with a MAC under the responder's secret naming its source "
          "(none, another secret, another address or port, a changed nonce: refused as forged)",
          "named=%d", (int) named);

    /* the ping's MAC: SipHash-2-4 of its 32-byte header, then the source
     * address and port; any bit of those 38 bytes changes it */
    ping_fill(buf, sizeof(buf), &sec, ip, port);
    tag = usnic_sip_tag_load(p->mac);
    {
        _Alignas(8) uint8_t in[40];
        memcpy(in, buf, 32);
        memcpy(in + 32, &ip, 4);
        memcpy(in + 36, &port, 2);
        all = tag == usnic_siphash24(&sec, in, 38);
        for (int bit = 0; bit < 38 * 8 && all; bit++) {
            uint32_t aip;
            uint16_t aport;
            in[bit / 8] ^= (uint8_t) (1u << (bit % 8));
            memcpy(&aip, in + 32, 4);
            memcpy(&aport, in + 36, 2);
            all = usnic_cc_ping_mac(&sec, (const struct usnic_cc_ping *) in, aip, aport) != tag;
            in[bit / 8] ^= (uint8_t) (1u << (bit % 8));
        }
    }
    check(all, "a ping's MAC covers its 32-byte header and its source address and port",
          "tag %016llx", (unsigned long long) tag);

    /* the pong's MAC: SipHash-2-4 under the responder's secret of the
     * header before it, little-endian; any bit of those 32 bytes changes it */
    all = usnic_cc_make_pong(buf, sizeof(buf), KEY, &sec, ip, port, &forged);
    tag = usnic_sip_tag_load(p->mac);
    all = all && tag == usnic_siphash24(&sec, buf, 32) && tag == usnic_cc_pong_mac(&sec, p) &&
          tag != usnic_cc_pong_mac(&other, p);
    for (int bit = 0; bit < 32 * 8 && all; bit++) {
        buf[bit / 8] ^= (uint8_t) (1u << (bit % 8));
        all = usnic_cc_pong_mac(&sec, p) != tag;
        buf[bit / 8] ^= (uint8_t) (1u << (bit % 8));
    }
    check(all, "a pong's MAC covers its 32-byte header under the responder's secret", "tag %016llx",
          (unsigned long long) tag);
}

int main(void)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sin);
    char dir[] = "/tmp/usnic-cc-XXXXXX";
    pid_t resp;
    int rc;

    signal(SIGPIPE, SIG_IGN);
    /* children print their detail lines and leave with _exit(), which
     * flushes nothing: line by line, or a log file loses them */
    setvbuf(stdout, NULL, _IOLBF, 0);
    sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (MAP_FAILED == sh || NULL == mkdtemp(dir)) {
        perror("set-up");
        return 2;
    }
    snprintf(sock_path, sizeof(sock_path), "%s/agent.sock", dir);
    resp_fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (resp_fd < 0 || 0 != bind(resp_fd, (struct sockaddr *) &sin, sizeof(sin)) ||
        0 != getsockname(resp_fd, (struct sockaddr *) &sin, &sl)) {
        perror("responder socket");
        return 2;
    }
    resp_port = ntohs(sin.sin_port);
    resp = fork();
    if (0 == resp) {
        responder();
        _exit(0);
    }

    t_pong_validation();
    t_host_shares_one_check();
    t_clients_before_agent();
    t_client_retries_soon();
    t_agent_leaves_mid_check();
    t_threads_at_once();
    t_black_hole();
    t_forged_pongs();
    t_forged_counted_once();
    t_search_between_rungs();
    t_search_random();
    t_recheck_while_running();
    t_recheck_ends_early();
    t_recheck_reuses_record();
    t_no_path();
    t_agent_of_other_version();
    t_nonsense_client();

    kill(resp, SIGKILL);
    (void) wait_status(resp);
    unlink(sock_path);
    rmdir(dir);
    rc = check_summary("test_cc");
    return rc;
}
