/*
 * Writes the seed corpus of test/fuzz/fuzz_rx.c (its input format is
 * described there) into a directory, deterministically:
 *
 *   cc -std=c11 -I. -o /tmp/make_corpus test/fuzz/make_corpus.c
 *   /tmp/make_corpus test/fuzz/corpus
 *
 * Each seed is one small scenario: valid ACKs (plain, with SACK, answering
 * a ping, duplicates), FRAGs in and out of order, first/middle/last CHUNKs,
 * PUTs to live, removed and too small registrations, duplicates, window and
 * reassembly limits, every auth mode, sealed and raw, tampered datagrams,
 * unknown and pending senders, malformed headers, datagrams in PART
 * packets.  Most rely on the harness's mutations (sender key, sequence
 * number relative to the window, ACK relative to the send window, fragment
 * number relative to the next one, lengths, fresh stamps), so they need no
 * knowledge of its keys; the whole datagrams inside PARTs, which the
 * harness does not mutate (it only seals one that a PART carries whole),
 * name its peer 0 (PEER0_*).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btl_usnic_proto.h"

/* ---- the input format of fuzz_rx.c (keep in step with it) ---- */
#define CFG_AUTH(n) ((uint8_t) (n))
#define CFG_CRC 0x04u
#define CFG_SEALED 0x08u
#define CFG_PEER1 0x10u
#define CFG_TAG_OK 0x20u
#define CFG_CHUNK 0x40u
#define CFG_SMALL 0x80u

#define MUT_KEY 0x01u
#define MUT_SEQ 0x02u
#define MUT_ACK 0x04u
#define MUT_PUT 0x08u
#define MUT_MSGID 0x10u
#define MUT_LEN 0x20u
#define MUT_TS 0x40u
#define MUT_OTHER 0x80u

#define AUX_TAMPER 0x04u
#define AUX_BADSRC 0x08u
#define AUX_AT(sixteenths) ((uint8_t) ((sixteenths) << 4))
#define AUX_DEFER 0x10u /* without AUX_TAMPER: chunks may be deferred */

enum {
    STEP_1US = 0,
    STEP_100US = 1,
    STEP_10MS = 2,
    STEP_HORIZON = 3
};

/* the harness's registrations, by number: lengths 1, 64, 1000, 4096, then the removed one */
enum {
    REG_1 = 0,
    REG_64 = 1,
    REG_1000 = 2,
    REG_4096 = 3,
    REG_STALE = 4
};

/* mutations of a typical data packet and of an ACK */
#define M_DATA (MUT_KEY | MUT_SEQ | MUT_MSGID | MUT_LEN | MUT_TS)
#define M_PUT (MUT_KEY | MUT_SEQ | MUT_PUT | MUT_LEN | MUT_TS)
#define M_ACKP (MUT_KEY | MUT_ACK | MUT_LEN | MUT_TS)

#define SEALED_DEFAULT (CFG_AUTH(1) | CFG_CRC | CFG_SEALED | CFG_TAG_OK)

struct input {
    uint8_t b[32768];
    size_t n;
};

static const char *outdir;
static unsigned nwritten;

static void in_start(struct input *in, uint8_t cfg)
{
    in->n = 0;
    in->b[in->n++] = cfg;
}

static void in_dgram(struct input *in, unsigned step, uint8_t mut, uint8_t aux, const void *d,
                     size_t len)
{
    unsigned lf = (unsigned) len | (step << 14);

    if (len > 0x3FFF || in->n + 4 + len > sizeof(in->b)) {
        fprintf(stderr, "make_corpus: seed too large\n");
        exit(1);
    }
    in->b[in->n++] = (uint8_t) lf;
    in->b[in->n++] = (uint8_t) (lf >> 8);
    in->b[in->n++] = mut;
    in->b[in->n++] = aux;
    memcpy(in->b + in->n, d, len);
    in->n += len;
}

static void in_write(const struct input *in, const char *name)
{
    char path[4096];
    FILE *fp;

    snprintf(path, sizeof(path), "%s/%s", outdir, name);
    fp = fopen(path, "wb");
    if (NULL == fp || 1 != fwrite(in->b, in->n, 1, fp) || 0 != fclose(fp)) {
        perror(path);
        exit(1);
    }
    nwritten++;
}

/* A datagram: header, chunk and PUT headers when given, payload bytes
 * (a pattern from `fill`).  seq, ack_seq and msg_id are the offsets the
 * harness's mutations take (relative to its state) when those are set. */
struct pkt {
    uint8_t type, flags, tag;
    uint32_t seq, ack_seq, msg_id;
    uint32_t src_module;
    uint64_t sender_key;
    uint32_t ts, ts_echo;
    const struct usnic_chunk_hdr *ch;
    const struct usnic_put_hdr *put;
    uint32_t plen;
    uint8_t fill;
    const void *payload; /* instead of the pattern */
    uint32_t pad;        /* bytes of padding after the payload (USNIC_PKT_FLAG_PAD) */
    uint16_t allow;      /* what the sender lets us keep in flight to it (KiB) */
};

static size_t build(uint8_t *out, const struct pkt *p)
{
    struct usnic_pkt_hdr h;
    size_t n;

    memset(&h, 0, sizeof(h));
    h.version = USNIC_PROTO_VERSION;
    h.type = p->type;
    h.flags = (uint8_t) (p->flags | (p->pad ? USNIC_PKT_FLAG_PAD : 0));
    h.tag = p->tag;
    h.payload_len = p->plen;
    h.sender_key = p->sender_key;
    h.src_module = p->src_module;
    h.seq = p->seq;
    h.ack_seq = p->ack_seq;
    h.msg_id = p->msg_id;
    h.ts = p->ts ? p->ts : 1;
    h.ts_echo = p->ts_echo;
    h.allow = p->allow;
    memcpy(out, &h, sizeof(h));
    n = sizeof(h);
    if (p->ch) {
        memcpy(out + n, p->ch, sizeof(*p->ch));
        n += sizeof(*p->ch);
    }
    if (p->put) {
        memcpy(out + n, p->put, sizeof(*p->put));
        n += sizeof(*p->put);
    }
    for (uint32_t i = 0; i < p->plen; i++) {
        out[n + i] = p->payload ? ((const uint8_t *) p->payload)[i] : (uint8_t) (p->fill + 7 * i);
    }
    memset(out + n + p->plen, 0xEE, p->pad);
    return n + p->plen + p->pad;
}

static uint8_t dg[16384];

static void add(struct input *in, unsigned step, uint8_t mut, uint8_t aux, const struct pkt *p)
{
    size_t n = build(dg, p);
    /* the lane it arrives on is the one its sender named */
    dg[offsetof(struct usnic_pkt_hdr, lane)] = (uint8_t) ((aux & 3u) % USNIC_PKT_LANES);
    in_dgram(in, step, mut, aux, dg, n);
}

static void add_ack(struct input *in, unsigned step, uint8_t mut, uint8_t aux, uint32_t ack,
                    uint8_t flags, uint64_t sack)
{
    struct pkt p = {
        .type = USNIC_PKT_ACK, .flags = (uint8_t) (USNIC_PKT_FLAG_ACK | flags), .ack_seq = ack};
    if (flags & USNIC_PKT_FLAG_SACK) {
        p.plen = sizeof(sack);
        p.payload = &sack;
    }
    add(in, step, mut, aux, &p);
}

/* an ACK with a SACK of n words (flag SACK added) */
static void add_ack_words(struct input *in, unsigned step, uint8_t mut, uint8_t aux, uint32_t ack,
                          uint8_t flags, const uint64_t *words, uint32_t n)
{
    struct pkt p = {.type = USNIC_PKT_ACK,
                    .flags = (uint8_t) (USNIC_PKT_FLAG_ACK | USNIC_PKT_FLAG_SACK | flags),
                    .ack_seq = ack,
                    .plen = n * (uint32_t) sizeof(*words),
                    .payload = words};
    add(in, step, mut, aux, &p);
}

static void add_frag(struct input *in, unsigned step, uint8_t mut, uint8_t aux, uint32_t seq,
                     uint32_t msg_id, uint8_t tag, uint32_t plen)
{
    struct pkt p = {.type = USNIC_PKT_FRAG,
                    .tag = tag,
                    .seq = seq,
                    .msg_id = msg_id,
                    .plen = plen,
                    .fill = (uint8_t) (msg_id * 13 + 1)};
    add(in, step, mut, aux, &p);
}

/* A chunk; with pad, the last chunk of a message padded to the chunk size
 * (a train went on with the next message: version 6). */
static void add_chunk_padded(struct input *in, unsigned step, uint8_t mut, uint8_t aux,
                             uint32_t seq, uint32_t msg_id, uint64_t msg_len, uint64_t off,
                             uint32_t plen, uint32_t pad)
{
    struct usnic_chunk_hdr ch = {.msg_len = msg_len, .offset = off};
    struct pkt p = {.type = USNIC_PKT_CHUNK,
                    .tag = 65,
                    .seq = seq,
                    .msg_id = msg_id,
                    .ch = &ch,
                    .plen = plen,
                    .fill = (uint8_t) (off * 3 + msg_id),
                    .pad = pad};
    add(in, step, mut, aux, &p);
}

static void add_chunk(struct input *in, unsigned step, uint8_t mut, uint8_t aux, uint32_t seq,
                      uint32_t msg_id, uint64_t msg_len, uint64_t off, uint32_t plen)
{
    add_chunk_padded(in, step, mut, aux, seq, msg_id, msg_len, off, plen, 0);
}

static void add_put(struct input *in, unsigned step, uint8_t mut, uint8_t aux, uint32_t seq,
                    unsigned reg, uint64_t reg_off, uint64_t msg_len, uint64_t off, uint32_t plen)
{
    struct usnic_chunk_hdr ch = {.msg_len = msg_len, .offset = off};
    struct usnic_put_hdr put = {.reg_key = reg, .reg_offset = reg_off};
    struct pkt p = {.type = USNIC_PKT_PUT,
                    .seq = seq,
                    .msg_id = 77,
                    .ch = &ch,
                    .put = &put,
                    .plen = plen,
                    .fill = (uint8_t) (off + 5)};
    add(in, step, mut, aux, &p);
}

/* ---- PART packets (btl_usnic_part.h): the whole datagram inside is not
 * mutated by the harness, so it names peer 0 of fuzz_rx.c itself (keep in
 * step with fz_init): key, module, the sequence number its window expects
 * first and its first fragment number ---- */
#define PEER0_KEY 0x6A09E667F3BCC908ull
#define PEER0_MODULE 1u
#define PEER0_RX_ISN 0xFFFFFFF0u
#define PEER0_FIRST_MSG 0xFFFFFFFEu

static uint8_t whole[4096];

/* A whole datagram of peer 0 into `whole`: a FRAG, or a CHUNK of a
 * msg_len-byte fragment at off; k-th of its sequence. */
static size_t whole_data(uint8_t type, uint32_t k, uint32_t plen, uint64_t msg_len, uint64_t off)
{
    struct usnic_chunk_hdr ch = {.msg_len = msg_len, .offset = off};
    struct pkt p = {.type = type,
                    .tag = 65,
                    .seq = PEER0_RX_ISN + k,
                    .msg_id = PEER0_FIRST_MSG,
                    .src_module = PEER0_MODULE,
                    .sender_key = PEER0_KEY,
                    .ts = 1,
                    .ch = (USNIC_PKT_CHUNK == type) ? &ch : NULL,
                    .plen = plen,
                    .fill = (uint8_t) (off + 11 * k + 3)};
    return build(whole, &p);
}

/* Bytes [off, off + n) of the len-byte datagram w as a PART whose
 * sequence number is k relative to the harness's window. */
static void add_part(struct input *in, unsigned step, uint8_t aux, int8_t k, const uint8_t *w,
                     size_t len, uint64_t off, uint32_t n)
{
    struct usnic_chunk_hdr ch = {.msg_len = len, .offset = off};
    struct pkt p = {
        .type = USNIC_PKT_PART, .seq = (uint8_t) k, .ch = &ch, .plen = n, .payload = w + off};
    add(in, step, MUT_KEY | MUT_SEQ | MUT_LEN | MUT_TS, aux, &p);
}

/* Datagram w in parts of `unit` bytes, in the order `order` gives (part
 * numbers, repeats allowed; -1 ends it). */
static void add_parts(struct input *in, int8_t k, const uint8_t *w, size_t len, uint32_t unit,
                      const int *order)
{
    for (int i = 0; order[i] >= 0; i++) {
        uint64_t off = (uint64_t) order[i] * unit;
        if (off < len) {
            uint32_t n = (len - off < unit) ? (uint32_t) (len - off) : unit;
            add_part(in, STEP_1US, 0, k, w, len, off, n);
        }
    }
}

int main(int argc, char **argv)
{
    static struct input in;

    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    outdir = argv[1];

    /* ---- ACKs ---- */
    in_start(&in, SEALED_DEFAULT);
    add_ack(&in, STEP_100US, M_ACKP, 0, 3, 0, 0);
    in_write(&in, "ack-cumulative");

    in_start(&in, SEALED_DEFAULT);
    add_ack(&in, STEP_100US, M_ACKP, 1, 1, USNIC_PKT_FLAG_SACK, 0x2Dull);
    add_ack(&in, STEP_1US, M_ACKP, 1, 1, USNIC_PKT_FLAG_SACK, 0x2Full);
    add_ack(&in, STEP_10MS, M_ACKP, 1, 1, USNIC_PKT_FLAG_SACK, 0x7Full);
    in_write(&in, "ack-sack");

    in_start(&in, SEALED_DEFAULT);
    add_ack(&in, STEP_100US, M_ACKP, 0, 0, 0, 0);
    add_ack(&in, STEP_1US, M_ACKP, 0, 0, 0, 0);
    add_ack(&in, STEP_1US, M_ACKP, 0, 0, 0, 0);
    add_ack(&in, STEP_1US, M_ACKP, 0, 0, 0, 0);
    add_ack(&in, STEP_100US, M_ACKP, 0, 4, 0, 0);
    in_write(&in, "ack-dup-fast-retransmit");

    /* the timer fires (probe), then an ACK that answers the ping */
    in_start(&in, SEALED_DEFAULT);
    add_ack(&in, STEP_100US, M_ACKP, 0, 2, 0, 0);
    add_ack(&in, STEP_10MS, M_ACKP, 0, 0x100u | 0, 0, 0);
    add_ack(&in, STEP_10MS, M_ACKP, 1, 0x100u | 1, USNIC_PKT_FLAG_SACK, 0x3ull);
    add_ack(&in, STEP_10MS, M_ACKP, 0, 0x100u | 9, 0, 0);
    in_write(&in, "ack-ping-answer");

    in_start(&in, SEALED_DEFAULT);
    add_ack(&in, STEP_100US, M_ACKP, 0, 100, 0, 0);
    add_ack(&in, STEP_100US, M_ACKP, 0, 0xFF, 0, 0);
    in_write(&in, "ack-range");

    /* what the peer lets us keep in flight (allow): an ACK that says
     * 512 KiB, one that says 3, a copy of an older ACK saying 0 (its stamp
     * is old: not taken), a tampered one saying 1 (not taken: MAC) */
    in_start(&in, SEALED_DEFAULT);
    {
        struct pkt a = {.type = USNIC_PKT_ACK, .flags = USNIC_PKT_FLAG_ACK, .allow = 512};
        add(&in, STEP_100US, M_ACKP, 0, &a);
        a.allow = 3;
        add(&in, STEP_100US, M_ACKP, 0, &a);
        a.allow = 0;
        add(&in, STEP_1US, (uint8_t) (M_ACKP & ~MUT_TS), 0, &a);
        a.allow = 1;
        add(&in, STEP_1US, M_ACKP, AUX_TAMPER | (12u << 4), &a); /* (byte 42: allow) */
    }
    in_write(&in, "ack-allow");

    in_start(&in, SEALED_DEFAULT);
    add_ack(&in, STEP_100US, M_ACKP, 0, 1, USNIC_PKT_FLAG_ACK_REQ, 0);
    add_ack(&in, STEP_1US, M_ACKP & ~MUT_TS, 0, 1, USNIC_PKT_FLAG_ACK_REQ, 0);
    in_write(&in, "ack-request-and-copy");

    /* an ACK after the timestamps' horizon, then an old one on another lane */
    in_start(&in, SEALED_DEFAULT);
    add_ack(&in, STEP_100US, M_ACKP, 0, 1, 0, 0);
    add_ack(&in, STEP_HORIZON, M_ACKP & ~MUT_TS, 0, 2, 0, 0);
    add_ack(&in, STEP_1US, M_ACKP & ~MUT_TS, 1, 3, 0, 0);
    in_write(&in, "ack-horizon-lanes");

    /* SACKs, RACK loss detection, resends, then the cumulative ACK */
    in_start(&in, SEALED_DEFAULT | CFG_PEER1);
    add_ack(&in, STEP_100US, M_ACKP, 0, 0, USNIC_PKT_FLAG_SACK, 0xF0ull);
    add_ack(&in, STEP_10MS, M_ACKP, 1, 0, USNIC_PKT_FLAG_SACK, 0xFFull);
    add_ack(&in, STEP_100US, M_ACKP, 0, 12, 0, 0);
    add_ack(&in, STEP_10MS, M_ACKP, 0, 5, USNIC_PKT_FLAG_SACK, 0x1ull);
    in_write(&in, "ack-sack-rack");

    /* SACKs of several words, with SACK_MORE, one answering a ping; an
     * answer with SACK_MORE and no words */
    {
        static const uint64_t w3[3] = {0x0Full, 0x0ull, 0xF000000000000001ull};
        static uint64_t w16[USNIC_SACK_WORDS_MAX];
        for (unsigned i = 0; i < USNIC_SACK_WORDS_MAX; i++) {
            w16[i] = 0x5555555555555555ull >> i;
        }
        in_start(&in, SEALED_DEFAULT | CFG_PEER1);
        add_ack_words(&in, STEP_100US, M_ACKP, 0, 0, 0, w3, 3);
        add_ack_words(&in, STEP_10MS, M_ACKP, 1, 0x100u | 0, USNIC_PKT_FLAG_SACK_MORE, w16,
                      USNIC_SACK_WORDS_MAX);
        add_ack(&in, STEP_10MS, M_ACKP, 0, 0x100u | 2, USNIC_PKT_FLAG_SACK_MORE, 0);
        add_ack_words(&in, STEP_100US, M_ACKP, 0, 40, USNIC_PKT_FLAG_SACK_MORE, w3, 2);
        in_write(&in, "ack-sack-words-more");
    }

    /* ---- FRAGs ---- */
    in_start(&in, SEALED_DEFAULT);
    add_frag(&in, STEP_1US, M_DATA, 0, 0, 0, 65, 100);
    in_write(&in, "frag-next");

    in_start(&in, SEALED_DEFAULT);
    add_frag(&in, STEP_1US, M_DATA, 0, 1, 1, 65, 40);
    add_frag(&in, STEP_1US, M_DATA, 0, 2, 2, 66, 0);
    add_frag(&in, STEP_1US, M_DATA, 0, 0, 0, 67, 30);
    in_write(&in, "frag-out-of-order");

    /* a FRAG whose header names lane 0 arriving on another lane (2): dropped
     * (ADDRESS); then the same on its own lane: taken */
    in_start(&in, SEALED_DEFAULT);
    add_frag(&in, STEP_1US, M_DATA, 2, 0, 0, 65, 100);
    add_frag(&in, STEP_1US, M_DATA, 0, 0, 0, 65, 100);
    in_write(&in, "frag-wrong-lane");

    /* the same FRAG sent again (fresh stamp: our ACK was lost), and a copy */
    in_start(&in, SEALED_DEFAULT);
    add_frag(&in, STEP_1US, M_DATA, 0, 0, 0, 65, 20);
    add_frag(&in, STEP_1US, M_DATA, 0, 0xFF, 0xFF, 65, 20);
    add_frag(&in, STEP_1US, M_DATA & ~MUT_TS, 0, 0xFF, 0xFF, 65, 20);
    in_write(&in, "frag-duplicate");

    /* piggy-backed ACK on data */
    in_start(&in, SEALED_DEFAULT | CFG_PEER1);
    {
        struct pkt p = {.type = USNIC_PKT_FRAG,
                        .flags = USNIC_PKT_FLAG_ACK,
                        .tag = 1,
                        .ack_seq = 4,
                        .plen = 16};
        add(&in, STEP_100US, M_DATA | MUT_ACK, 0, &p);
        p.seq = 1;
        p.msg_id = 1;
        p.ack_seq = 40;
        add(&in, STEP_100US, M_DATA | MUT_ACK, 0, &p);
        p.flags |= USNIC_PKT_FLAG_ACK_REQ;
        p.ack_seq = 6;
        add(&in, STEP_100US, M_DATA | MUT_ACK, 0, &p);
    }
    in_write(&in, "frag-piggyback-ack");

    in_start(&in, SEALED_DEFAULT);
    add_frag(&in, STEP_1US, M_DATA, 0, 40, 0, 65, 8);
    add_frag(&in, STEP_1US, M_DATA, 0, 31, 31, 65, 8);
    add_frag(&in, STEP_1US, M_DATA, 0, 0, 40, 65, 8);
    add_frag(&in, STEP_1US, M_DATA, 0, 1, 0x80, 65, 8);
    in_write(&in, "frag-window-limits");

    in_start(&in, CFG_AUTH(1) | CFG_CRC | CFG_SEALED);
    add_frag(&in, STEP_1US, M_DATA, 0, 0, 0, 65, 8);
    add_frag(&in, STEP_1US, M_DATA, 0, 0, 0, 255, 8);
    in_write(&in, "frag-no-tag-handler");

    in_start(&in, SEALED_DEFAULT);
    add_frag(&in, STEP_1US, M_DATA, 0, 0, 0, 255, 8);
    in_write(&in, "frag-tag-255");

    /* 24 FRAGs across the 32-bit wrap of sequence and fragment numbers */
    in_start(&in, SEALED_DEFAULT);
    for (uint32_t i = 0; i < 24; i++) {
        add_frag(&in, STEP_1US, M_DATA, (uint8_t) (i & 3), 0, 0, (uint8_t) (64 + i), 12 + i);
    }
    in_write(&in, "frag-wrap");

    /* small max_msg_len: a FRAG bigger than it, in turn and ahead of its turn */
    in_start(&in, SEALED_DEFAULT | CFG_SMALL);
    add_frag(&in, STEP_1US, M_DATA, 0, 1, 1, 65, 1500);
    add_frag(&in, STEP_1US, M_DATA, 0, 0, 0, 65, 1500);
    in_write(&in, "frag-beyond-max-msg-len");

    /* more fragments ahead of their turn than the buffer pool holds */
    in_start(&in, SEALED_DEFAULT | CFG_PEER1);
    for (uint32_t i = 1; i <= 9; i++) {
        add_frag(&in, STEP_1US, M_DATA, 0, i, i, 65, 10);
    }
    add_frag(&in, STEP_1US, M_DATA, 0, 0, 0, 65, 10);
    in_write(&in, "frag-pool-exhausted");

    /* the pool held by fragments ahead of their turn: the one they wait
     * for still gets a buffer (urgent), then all are handed over */
    in_start(&in, SEALED_DEFAULT | CFG_CHUNK);
    for (uint32_t i = 1; i <= 7; i++) {
        add_frag(&in, STEP_1US, M_DATA, 0, i + 1, i, 65, 10);
    }
    add_chunk(&in, STEP_1US, M_DATA, 0, 1, 0, 300, 200, 100);
    add_chunk(&in, STEP_1US, M_DATA, 0, 0, 0, 300, 0, 200);
    add_chunk(&in, STEP_1US, M_DATA, 0, 0, 7, 300, 0, 200);
    in_write(&in, "frag-pool-urgent");

    /* ---- CHUNKs ---- */
    in_start(&in, SEALED_DEFAULT | CFG_CHUNK);
    add_chunk(&in, STEP_1US, M_DATA, 0, 0, 0, 500, 0, 200);
    add_chunk(&in, STEP_1US, M_DATA, 0, 0, 0, 500, 200, 200);
    add_chunk(&in, STEP_1US, M_DATA, 0, 0, 0, 500, 400, 100);
    in_write(&in, "chunk-in-order");

    /* the same, each chunk allowed to stay in its datagram (deferred
     * chunks), then one out of order after a deferred first chunk */
    in_start(&in, SEALED_DEFAULT | CFG_CHUNK);
    add_chunk(&in, STEP_1US, M_DATA, AUX_DEFER, 0, 0, 500, 0, 200);
    add_chunk(&in, STEP_1US, M_DATA, AUX_DEFER, 0, 0, 500, 200, 200);
    add_chunk(&in, STEP_1US, M_DATA, AUX_DEFER, 0, 0, 500, 400, 100);
    add_chunk(&in, STEP_1US, M_DATA, AUX_DEFER, 0, 0, 300, 0, 200);
    add_chunk(&in, STEP_1US, M_DATA, AUX_DEFER, 1, 1, 400, 200, 200);
    add_chunk(&in, STEP_1US, M_DATA, AUX_DEFER, 0, 1, 400, 0, 200);
    add_chunk(&in, STEP_1US, M_DATA, AUX_DEFER, 0, 0, 300, 200, 100);
    in_write(&in, "chunk-deferred");

    in_start(&in, SEALED_DEFAULT | CFG_CHUNK);
    add_chunk(&in, STEP_1US, M_DATA, 1, 2, 0, 500, 400, 100);
    add_chunk(&in, STEP_1US, M_DATA, 0, 0, 0, 500, 0, 200);
    add_chunk(&in, STEP_1US, M_DATA, 1, 0, 0, 500, 200, 200);
    in_write(&in, "chunk-out-of-order");

    /* a message's padded last chunk, then the next message in the same
     * train; the padding left as it is (no MUT_LEN) */
    in_start(&in, SEALED_DEFAULT | CFG_CHUNK);
    add_chunk(&in, STEP_1US, M_DATA, 0, 0, 0, 500, 0, 200);
    add_chunk(&in, STEP_1US, M_DATA, 0, 0, 0, 500, 200, 200);
    add_chunk_padded(&in, STEP_1US, M_DATA & ~MUT_LEN, 0, 0, 0, 500, 400, 100, 100);
    add_chunk(&in, STEP_1US, M_DATA, 0, 0, 1, 300, 0, 200);
    add_chunk_padded(&in, STEP_1US, M_DATA & ~MUT_LEN, 0, 0, 1, 300, 200, 100, 1);
    in_write(&in, "chunk-padded");

    in_start(&in, SEALED_DEFAULT | CFG_CHUNK);
    add_chunk(&in, STEP_1US, M_DATA, 0, 0, 0, 1000, 0, 200);
    in_write(&in, "chunk-first");

    in_start(&in, SEALED_DEFAULT | CFG_CHUNK);
    add_chunk(&in, STEP_1US, M_DATA, 0, 3, 0, 1000, 400, 200);
    in_write(&in, "chunk-middle");

    in_start(&in, SEALED_DEFAULT | CFG_CHUNK);
    add_chunk(&in, STEP_1US, M_DATA, 0, 4, 0, 1000, 800, 200);
    in_write(&in, "chunk-last");

    /* chunk size known: a misaligned, a short and a repeated chunk */
    in_start(&in, SEALED_DEFAULT | CFG_CHUNK);
    add_chunk(&in, STEP_1US, M_DATA, 0, 0, 0, 1000, 100, 200);
    add_chunk(&in, STEP_1US, M_DATA, 0, 0, 0, 1000, 200, 50);
    add_chunk(&in, STEP_1US, M_DATA, 0, 0, 0, 1000, 200, 200);
    add_chunk(&in, STEP_1US, M_DATA, 0, 0, 0, 1000, 200, 200);
    add_chunk(&in, STEP_1US, M_DATA, 0, 0, 0, 999, 0, 200);
    in_write(&in, "chunk-size-rules");

    /* chunk size unknown: overlapping chunks */
    in_start(&in, SEALED_DEFAULT);
    add_chunk(&in, STEP_1US, M_DATA, 0, 0, 0, 300, 0, 200);
    add_chunk(&in, STEP_1US, M_DATA, 0, 0, 0, 300, 100, 200);
    in_write(&in, "chunk-overlap");

    /* a fragment of more chunks than are tracked one by one */
    in_start(&in, SEALED_DEFAULT | CFG_CHUNK);
    add_chunk(&in, STEP_1US, M_DATA, 0, 0, 0, 120000, 0, 200);
    add_chunk(&in, STEP_1US, M_DATA, 0, 0, 0, 120000, 119800, 200);
    add_chunk(&in, STEP_1US, M_DATA, 0, 0, 0, 120000, 119800, 200);
    in_write(&in, "chunk-untracked");

    in_start(&in, SEALED_DEFAULT | CFG_SMALL);
    add_chunk(&in, STEP_1US, M_DATA, 0, 0, 0, 2000, 0, 200);
    add_chunk(&in, STEP_1US, M_DATA, 0, 0, 0, 1024, 1000, 24);
    add_chunk(&in, STEP_1US, M_DATA, 0, 0, 0, 1024, 1000, 25);
    in_write(&in, "chunk-range");

    /* a chunk, then a FRAG with the same number */
    in_start(&in, SEALED_DEFAULT);
    add_chunk(&in, STEP_1US, M_DATA, 0, 0, 1, 300, 0, 100);
    add_frag(&in, STEP_1US, M_DATA, 0, 0, 1, 65, 10);
    add_chunk(&in, STEP_1US, M_DATA, 0, 0, 1, 301, 100, 100);
    in_write(&in, "chunk-then-frag");

    /* ---- PUTs ---- */
    in_start(&in, SEALED_DEFAULT);
    add_put(&in, STEP_1US, M_PUT, 0, 0, REG_1000, 10, 300, 0, 300);
    in_write(&in, "put-live");

    in_start(&in, SEALED_DEFAULT);
    add_put(&in, STEP_1US, M_PUT, 0, 1, REG_4096, 96, 4000, 2000, 2000);
    add_put(&in, STEP_1US, M_PUT, 0, 0, REG_4096, 96, 4000, 0, 2000);
    in_write(&in, "put-chunks");

    in_start(&in, SEALED_DEFAULT);
    add_put(&in, STEP_1US, M_PUT, 0, 0, REG_STALE, 0, 16, 0, 16);
    in_write(&in, "put-removed-key");

    in_start(&in, SEALED_DEFAULT);
    add_put(&in, STEP_1US, M_PUT, 0, 0, REG_1, 0, 2, 0, 2);
    add_put(&in, STEP_1US, M_PUT, 0, 0, REG_64, 60, 5, 0, 5);
    add_put(&in, STEP_1US, M_PUT, 0, 0, REG_64, 65, 1, 0, 1);
    add_put(&in, STEP_1US, M_PUT, 0, 0, REG_64, 63, 1, 0, 1);
    in_write(&in, "put-range");

    in_start(&in, SEALED_DEFAULT);
    add_put(&in, STEP_1US, M_PUT & ~MUT_PUT, 0, 0, REG_64, 0, 8, 0, 8);
    in_write(&in, "put-unknown-key");

    in_start(&in, SEALED_DEFAULT);
    add_put(&in, STEP_1US, M_PUT, 0, 0, REG_64, 0, 8, 0, 8);
    add_put(&in, STEP_1US, M_PUT, 0, 0xFF, REG_64, 0, 8, 0, 8);
    in_write(&in, "put-duplicate");

    /* ---- auth modes, sealed and raw, tampering ---- */
    for (unsigned a = 0; a < 4; a++) {
        char name[64];
        for (unsigned crc = 0; crc < 2; crc++) {
            in_start(&in, (uint8_t) (CFG_AUTH(a) | (crc ? CFG_CRC : 0) | CFG_SEALED | CFG_TAG_OK |
                                     ((a & 1) ? CFG_PEER1 : 0)));
            add_frag(&in, STEP_1US, M_DATA, 0, 0, 0, 65, 64);
            add_frag(&in, STEP_1US, M_DATA | MUT_OTHER, 0, 0, 0, 65, 64);
            add_ack(&in, STEP_1US, M_ACKP | MUT_OTHER, 0, 2, USNIC_PKT_FLAG_SACK, 0x5ull);
            add_put(&in, STEP_1US, M_PUT, 0, 1, REG_64, 0, 8, 0, 8);
            /* tampered in the header, and in the payload */
            add_frag(&in, STEP_1US, M_DATA, AUX_TAMPER | AUX_AT(3), 1, 1, 65, 64);
            add_frag(&in, STEP_1US, M_DATA, AUX_TAMPER | AUX_AT(12), 2, 1, 65, 64);
            snprintf(name, sizeof(name), "sealed-auth%u-crc%u", a, crc);
            in_write(&in, name);

            in_start(&in, (uint8_t) (CFG_AUTH(a) | (crc ? CFG_CRC : 0) | CFG_TAG_OK));
            add_frag(&in, STEP_1US, M_DATA, 0, 0, 0, 65, 64);
            add_ack(&in, STEP_1US, M_ACKP, 0, 2, 0, 0);
            add_put(&in, STEP_1US, M_PUT, 0, 1, REG_64, 0, 8, 0, 8);
            snprintf(name, sizeof(name), "raw-auth%u-crc%u", a, crc);
            in_write(&in, name);
        }
    }

    /* ---- senders ---- */
    in_start(&in, SEALED_DEFAULT);
    add_frag(&in, STEP_1US, M_DATA, AUX_BADSRC, 0, 0, 65, 8);
    {
        struct pkt p = {.type = USNIC_PKT_FRAG,
                        .tag = 65,
                        .plen = 8,
                        .src_module = (1u << 8) | 1u,
                        .sender_key = 0x1122334455667788ull};
        add(&in, STEP_1US, MUT_LEN, 0, &p);
        p.src_module = (9u << 8);
        add(&in, STEP_1US, MUT_LEN, 0, &p);
        p.src_module = (2u << 8);
        add(&in, STEP_1US, MUT_LEN, 0, &p);
    }
    in_write(&in, "senders");

    /* ---- malformed ---- */
    in_start(&in, SEALED_DEFAULT);
    {
        struct pkt p = {.type = USNIC_PKT_FRAG, .tag = 65, .plen = 8};
        size_t n = build(dg, &p);
        in_dgram(&in, STEP_1US, 0, 0, dg, 10);          /* short */
        in_dgram(&in, STEP_1US, 0, 0, dg, 0);           /* empty */
        in_dgram(&in, STEP_1US, MUT_KEY, 0, dg, n - 1); /* length */
        dg[0] = 2;                                      /* version */
        in_dgram(&in, STEP_1US, MUT_KEY, 0, dg, n);
        dg[0] = USNIC_PROTO_VERSION;
        dg[1] = 9; /* type */
        in_dgram(&in, STEP_1US, MUT_KEY, 0, dg, n);
        dg[1] = USNIC_PKT_FRAG;
        dg[2] = 0x80; /* flags */
        in_dgram(&in, STEP_1US, MUT_KEY, 0, dg, n);
        dg[2] = USNIC_PKT_FLAG_SACK; /* SACK on data */
        in_dgram(&in, STEP_1US, MUT_KEY, 0, dg, n);
        dg[2] = 0;
        dg[offsetof(struct usnic_pkt_hdr, reserved)] = 1; /* reserved */
        in_dgram(&in, STEP_1US, MUT_KEY, 0, dg, n);
    }
    {
        /* ACK without the ACK flag, with a msg_id, SACK of the wrong length */
        struct pkt p = {.type = USNIC_PKT_ACK};
        add(&in, STEP_1US, MUT_KEY, 0, &p);
        p.flags = USNIC_PKT_FLAG_ACK;
        p.msg_id = 5;
        add(&in, STEP_1US, MUT_KEY, 0, &p);
        p.msg_id = 0;
        p.flags = USNIC_PKT_FLAG_ACK | USNIC_PKT_FLAG_SACK;
        p.plen = 4;
        add(&in, STEP_1US, MUT_KEY, 0, &p);
    }
    {
        /* chunk and PUT headers that do not add up */
        struct usnic_chunk_hdr ch = {.msg_len = 0, .offset = 0};
        struct usnic_put_hdr put = {.reg_key = 0, .reg_offset = UINT64_MAX - 3};
        struct pkt p = {.type = USNIC_PKT_CHUNK, .tag = 65, .ch = &ch, .plen = 4};
        add(&in, STEP_1US, MUT_KEY | MUT_SEQ | MUT_MSGID, 0, &p);
        ch.msg_len = 4;
        ch.offset = UINT64_MAX;
        add(&in, STEP_1US, MUT_KEY | MUT_SEQ | MUT_MSGID, 0, &p);
        ch.offset = 0;
        p.type = USNIC_PKT_PUT;
        p.put = &put;
        ch.msg_len = 8;
        add(&in, STEP_1US, MUT_KEY | MUT_SEQ, 0, &p);
    }
    in_write(&in, "malformed");

    /* ---- a longer mixed conversation ---- */
    in_start(&in, SEALED_DEFAULT | CFG_CHUNK | CFG_PEER1);
    for (uint32_t i = 0; i < 6; i++) {
        add_chunk(&in, STEP_1US, M_DATA, (uint8_t) (i & 3), (i + 1) % 3, 0, 450,
                  ((i + 1) % 3) * 200, ((i + 1) % 3 == 2) ? 50 : 200);
        add_ack(&in, STEP_100US, M_ACKP | MUT_OTHER, (uint8_t) (i & 3), 1, USNIC_PKT_FLAG_SACK,
                0x3ull << i);
        add_put(&in, STEP_1US, M_PUT, 1, 0, REG_1000, 100 * i, 100, 0, 100);
        add_frag(&in, STEP_100US, M_DATA | MUT_OTHER, 0, 0, 0, 65, 33);
    }
    add_ack(&in, STEP_10MS, M_ACKP, 0, 0x100u | 3, 0, 0);
    in_write(&in, "conversation");

    /* ---- header prediction: runs of chunks, each the next of the one
     * before (no CRC: a prediction needs auth header or none) ---- */
    for (uint8_t auth = 0; auth <= 1; auth++) {
        const uint8_t cfg = (uint8_t) (CFG_AUTH(auth) | CFG_SEALED | CFG_TAG_OK | CFG_CHUNK);
        char name[64];

        in_start(&in, cfg);
        for (uint32_t i = 0; i < 6; i++) {
            add_chunk(&in, STEP_1US, M_DATA, (i & 1) ? AUX_DEFER : 0, 0, 0, 1200, 200 * i, 200);
        }
        snprintf(name, sizeof(name), "predict-chunks-auth%u", auth);
        in_write(&in, name);

        /* inside the run: one from another source, one tampered, one
         * beyond the window's edge, then the run goes on */
        in_start(&in, cfg);
        add_chunk(&in, STEP_1US, M_DATA, 0, 0, 0, 1400, 0, 200);
        add_chunk(&in, STEP_1US, M_DATA, 0, 0, 0, 1400, 200, 200);
        add_chunk(&in, STEP_1US, M_DATA, AUX_BADSRC, 0, 0, 1400, 400, 200);
        add_chunk(&in, STEP_1US, M_DATA, 0, 0, 0, 1400, 400, 200);
        add_chunk(&in, STEP_1US, M_DATA, AUX_TAMPER | AUX_AT(2), 0, 0, 1400, 600, 200);
        add_chunk(&in, STEP_1US, M_DATA, 0, 0, 0, 1400, 600, 200);
        add_chunk(&in, STEP_1US, M_DATA, 0, 1, 0, 1400, 1000, 200);
        add_chunk(&in, STEP_1US, M_DATA, 0, 0, 0, 1400, 800, 200);
        add_chunk(&in, STEP_1US, M_DATA, 0, 0, 0, 1400, 1200, 200);
        snprintf(name, sizeof(name), "predict-chunks-hostile-auth%u", auth);
        in_write(&in, name);

        in_start(&in, cfg);
        for (uint32_t i = 0; i < 5; i++) {
            add_put(&in, STEP_1US, M_PUT, 0, 0, REG_4096, 96, 2000, 400 * i, 400);
        }
        snprintf(name, sizeof(name), "predict-puts-auth%u", auth);
        in_write(&in, name);
    }

    /* ---- datagrams in PART packets (auth none: the whole datagram needs
     * no MAC of its own to be taken; auth header: it is refused) ---- */
    {
        const uint8_t none = (uint8_t) (CFG_AUTH(0) | CFG_SEALED | CFG_TAG_OK);
        static const int in_order[] = {0, 1, 2, 3, -1};
        static const int shuffled[] = {3, 0, 0, 2, 1, 1, -1};
        static const int first_only[] = {0, -1};
        uint8_t inner[4096];
        size_t n, m;

        in_start(&in, none);
        n = whole_data(USNIC_PKT_FRAG, 0, 300, 0, 0);
        add_parts(&in, 0, whole, n, 128, in_order);
        add(&in, STEP_1US, M_DATA & ~MUT_TS, 0, &(struct pkt){.type = USNIC_PKT_FRAG, .plen = 8});
        in_write(&in, "part-frag-in-order");

        in_start(&in, none);
        n = whole_data(USNIC_PKT_FRAG, 0, 300, 0, 0);
        add_parts(&in, 0, whole, n, 128, shuffled);
        add_parts(&in, 0, whole, n, 128, first_only); /* after it was taken */
        in_write(&in, "part-frag-shuffled-dup");

        /* two chunks of one fragment, their parts interleaved; the second
         * is whole first (the sequence numbers are relative to the window,
         * which moves once the first is taken) */
        in_start(&in, none);
        n = whole_data(USNIC_PKT_CHUNK, 0, 300, 600, 0);
        memcpy(inner, whole, n);
        m = whole_data(USNIC_PKT_CHUNK, 1, 300, 600, 300);
        for (int i = 0; i < 3; i++) {
            const int one[] = {i, -1};
            if (i < 2) {
                add_parts(&in, 0, inner, n, 128, one);
            }
            add_parts(&in, 1, whole, m, 128, one);
        }
        add_parts(&in, 0, inner, n, 128, (const int[]){2, -1});
        in_write(&in, "part-chunks-interleaved");

        /* parts of parts; five datagrams begun at once (one slot evicted);
         * a part beyond the window and one behind it */
        in_start(&in, none);
        n = whole_data(USNIC_PKT_FRAG, 0, 200, 0, 0);
        memcpy(inner, whole, n);
        {
            struct usnic_chunk_hdr ch = {.msg_len = n, .offset = 0};
            struct pkt p = {.type = USNIC_PKT_PART,
                            .seq = PEER0_RX_ISN,
                            .src_module = PEER0_MODULE,
                            .sender_key = PEER0_KEY,
                            .ts = 1,
                            .ch = &ch,
                            .plen = (uint32_t) n,
                            .payload = inner};
            m = build(whole, &p);
        }
        add_parts(&in, 0, whole, m, 192, in_order);
        for (int8_t k = 1; k <= 5; k++) {
            n = whole_data(USNIC_PKT_FRAG, (uint32_t) k, 400, 0, 0);
            add_parts(&in, k, whole, n, 128, first_only);
        }
        n = whole_data(USNIC_PKT_FRAG, 1, 400, 0, 0);
        add_parts(&in, 1, whole, n, 128, in_order);
        add_part(&in, STEP_1US, 0, 100, whole, n, 0, 128);
        add_part(&in, STEP_1US, 0, -3, whole, n, 0, 128);
        in_write(&in, "part-of-part-evict-window");

        /* auth header and a checksum: the parts pass (sealed), the whole
         * datagram inside carries no MAC of its own */
        in_start(&in, SEALED_DEFAULT);
        n = whole_data(USNIC_PKT_FRAG, 0, 300, 0, 0);
        add_parts(&in, 0, whole, n, 128, in_order);
        in_write(&in, "part-frag-auth");

        /* the same, each datagram in one part: the harness seals the
         * datagram inside too, so it passes its own MAC and is taken (a
         * FRAG, then both chunks of the next fragment); then one tampered
         * after sealing (refused) */
        in_start(&in, SEALED_DEFAULT);
        n = whole_data(USNIC_PKT_FRAG, 0, 300, 0, 0);
        add_part(&in, STEP_1US, 0, 0, whole, n, 0, (uint32_t) n);
        for (uint32_t k = 1; k <= 3; k++) {
            const uint32_t next = PEER0_FIRST_MSG + 1u;
            n = whole_data(USNIC_PKT_CHUNK, k, 300, 600, (k - 1) % 2 * 300);
            memcpy(whole + offsetof(struct usnic_pkt_hdr, msg_id), &next, sizeof(next));
            add_part(&in, STEP_1US, (3 == k) ? AUX_TAMPER | (15u << 4) : 0, 0, whole, n, 0,
                     (uint32_t) n);
        }
        in_write(&in, "part-whole-sealed-auth");
    }

    printf("%u seeds written to %s\n", nwritten, outdir);
    return 0;
}
