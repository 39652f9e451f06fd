/*
 * trainmac: what the header MAC (auth header) costs per datagram when it
 * is sealed the way the BTL seals it, with and without the connection's
 * memo of the MAC input's first words (btl_usnic_proto.c: mac_input,
 * btl_usnic_auth.h: usnic_siphash24_memo).  No MPI, one process.
 *
 *   bench/build/trainmac [-r rounds] [-n iterations]
 *
 * Patterns: "put train": the 42 PUT chunks of one GSO train (64 KiB of
 * 1384-byte payloads at MTU 1500), the memo emptied before each train as a
 * new PUT would; "pingpong": 8-byte FRAGs of a ping-pong, each carrying the
 * ACK of the last one received (seq, ack_seq, ts, ts_echo and msg_id move
 * on every time).  Before timing, every tag sealed with the memo is
 * checked against the tag sealed without it.  The put train also sealed
 * at once, as the BTL seals a train when it leaves
 * (usnic_pkt_seal_headers): in AVX-512 lanes where the CPU has them
 * ("lanes") and one by one without the memo ("at once, 1 by 1"); its tags
 * are checked against usnic_pkt_seal()'s first.  Prints the best (lowest)
 * and the median of the rounds, in ns per datagram.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "btl_usnic_auth.h"
#include "btl_usnic_proto.h"

#define TRAIN 42
#define MAXROUNDS 64

static uint64_t bufs[TRAIN][(USNIC_HDR_LEN_PUT + 7) / 8];

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double) t.tv_sec + 1e-9 * (double) t.tv_nsec;
}

static void put_train(uint32_t seq0)
{
    for (int i = 0; i < TRAIN; i++) {
        struct usnic_pkt_hdr *h = (struct usnic_pkt_hdr *) bufs[i];
        struct usnic_chunk_hdr *c = (struct usnic_chunk_hdr *) (h + 1);
        struct usnic_put_hdr *p = (struct usnic_put_hdr *) (c + 1);

        memset(h, 0, USNIC_HDR_LEN_PUT);
        h->version = USNIC_PROTO_VERSION;
        h->type = USNIC_PKT_PUT;
        h->flags = USNIC_PKT_FLAG_ACK;
        h->payload_len = 1384;
        h->sender_key = 0x1122334455667788ull;
        h->src_module = 0x100;
        h->seq = seq0 + (uint32_t) i;
        h->ack_seq = 77;
        h->msg_id = 5;
        h->ts = 123456;
        h->ts_echo = 123400;
        h->lane = 1;
        c->msg_len = 1u << 20;
        c->offset = (uint64_t) i * 1384;
        p->reg_key = 0x0000000300000001ull;
        p->reg_offset = 4096;
    }
}

static void pingpong_frag(uint64_t *buf, uint32_t i)
{
    struct usnic_pkt_hdr *h = (struct usnic_pkt_hdr *) buf;

    memset(h, 0, USNIC_HDR_LEN_FRAG + 8);
    h->version = USNIC_PROTO_VERSION;
    h->type = USNIC_PKT_FRAG;
    h->flags = USNIC_PKT_FLAG_ACK;
    h->tag = 65;
    h->payload_len = 8;
    h->sender_key = 0x1122334455667788ull;
    h->src_module = 0x100;
    h->seq = 1000 + i;
    h->ack_seq = 5000 + i;
    h->msg_id = i;
    h->ts = 200000 + 7 * i;
    h->ts_echo = 199990 + 7 * i;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    struct usnic_sip_key key = {0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull};
    struct usnic_sip_memo memo;
    int rounds = 9, opt;
    long iters = 20000;
    double t[2][2][MAXROUNDS], tl[2][MAXROUNDS];
    uint8_t *tb[TRAIN];
    size_t tlen[TRAIN];
    static const char *pattern[2] = {"put train", "pingpong"};

    while ((opt = getopt(argc, argv, "r:n:")) != -1) {
        if ('r' == opt) {
            rounds = atoi(optarg);
        } else if ('n' == opt) {
            iters = atol(optarg);
        } else {
            fprintf(stderr, "usage: trainmac [-r rounds (1-%d)] [-n iterations]\n", MAXROUNDS);
            return 2;
        }
    }
    if (rounds < 1 || rounds > MAXROUNDS || iters < 1) {
        fprintf(stderr, "trainmac: bad -r or -n\n");
        return 2;
    }

    /* the memo changes the cost, never the tag */
    memset(&memo, 0, sizeof(memo));
    put_train(1);
    for (int i = 0; i < TRAIN; i++) {
        uint64_t plain, memoed;
        usnic_pkt_seal((uint8_t *) bufs[i], USNIC_HDR_LEN_PUT, NULL, 0, &key, NULL, 1, false);
        plain = ((struct usnic_pkt_hdr *) bufs[i])->mac;
        usnic_pkt_seal((uint8_t *) bufs[i], USNIC_HDR_LEN_PUT, NULL, 0, &key, &memo, 1, false);
        memoed = ((struct usnic_pkt_hdr *) bufs[i])->mac;
        if (plain != memoed) {
            fprintf(stderr, "trainmac: chunk %d: tag %016llx with the memo, %016llx without\n", i,
                    (unsigned long long) memoed, (unsigned long long) plain);
            return 1;
        }
    }
    for (int i = 0; i < TRAIN; i++) {
        tb[i] = (uint8_t *) bufs[i];
        tlen[i] = USNIC_HDR_LEN_PUT;
    }
    for (int l = 0; l < 2; l++) {
        uint64_t want[TRAIN];
        for (int i = 0; i < TRAIN; i++) {
            want[i] = ((struct usnic_pkt_hdr *) bufs[i])->mac;
            ((struct usnic_pkt_hdr *) bufs[i])->mac = 0;
        }
        usnic_sip_lanes_select(0 == l);
        usnic_pkt_seal_headers(tb, tlen, TRAIN, &key);
        for (int i = 0; i < TRAIN; i++) {
            if (want[i] != ((struct usnic_pkt_hdr *) bufs[i])->mac) {
                fprintf(stderr, "trainmac: chunk %d: the train sealed at once differs\n", i);
                return 1;
            }
        }
    }
    if (TRAIN - 1 != memo.hits) {
        fprintf(stderr, "trainmac: the memo resumed %llu times in a train of %d\n",
                (unsigned long long) memo.hits, TRAIN);
        return 1;
    }

    for (int r = 0; r < rounds; r++) {
        for (int p = 0; p < 2; p++) {
            for (int m = 0; m < 2; m++) {
                struct usnic_sip_memo *mp = m ? &memo : NULL;
                double t0;
                long n = 0;

                memset(&memo, 0, sizeof(memo));
                t0 = now_s();
                if (0 == p) {
                    for (long it = 0; it < iters / TRAIN + 1; it++) {
                        memo.nwords = 0; /* a new PUT */
                        for (int i = 0; i < TRAIN; i++, n++) {
                            usnic_pkt_seal((uint8_t *) bufs[i], USNIC_HDR_LEN_PUT, NULL, 0, &key,
                                           mp, 1, false);
                        }
                    }
                } else {
                    for (long it = 0; it < iters; it++, n++) {
                        pingpong_frag(bufs[0], (uint32_t) it);
                        usnic_pkt_seal((uint8_t *) bufs[0], USNIC_HDR_LEN_FRAG + 8, NULL, 0, &key,
                                       mp, 1, false);
                    }
                }
                t[p][m][r] = 1e9 * (now_s() - t0) / (double) n;
            }
        }
        for (int l = 0; l < 2; l++) {
            double t0;
            long n = 0;

            usnic_sip_lanes_select(0 == l);
            t0 = now_s();
            for (long it = 0; it < iters / TRAIN + 1; it++, n += TRAIN) {
                usnic_pkt_seal_headers(tb, tlen, TRAIN, &key);
            }
            tl[l][r] = 1e9 * (now_s() - t0) / (double) n;
        }
    }
    usnic_sip_lanes_select(true);
    printf("# trainmac: header MAC (SipHash-2-4, protocol %d) per datagram, ns; %d rounds of %ld\n",
           USNIC_PROTO_VERSION, rounds, iters);
    printf("%-10s %-8s %8s %8s\n", "pattern", "memo", "best", "median");
    for (int p = 0; p < 2; p++) {
        for (int m = 0; m < 2; m++) {
            qsort(t[p][m], (size_t) rounds, sizeof(double), cmp_double);
            printf("%-10s %-8s %8.1f %8.1f\n", pattern[p], m ? "yes" : "no", t[p][m][0],
                   t[p][m][rounds / 2]);
        }
    }
    for (int l = 0; l < 2; l++) {
        qsort(tl[l], (size_t) rounds, sizeof(double), cmp_double);
        printf("%-10s %-8s %8.1f %8.1f%s\n", "put train", l ? "at once, 1 by 1" : "at once, lanes",
               tl[l][0], tl[l][rounds / 2],
               (0 == l && !usnic_sip_lanes_available()) ? "  (no AVX-512: one by one)" : "");
    }
    return 0;
}
