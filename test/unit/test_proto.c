/*
 * Unit tests of the usnic wire format and receive-side validation
 * (btl_usnic_proto.[ch]), chunk reassembly (btl_usnic_reasm.[ch]) and the
 * PUT registration table (btl_usnic_reg.[ch]), directly and through the
 * receive path of simlink.c.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btl_usnic_proto.h"
#include "btl_usnic_reasm.h"
#include "btl_usnic_reg.h"
#include "check.h"
#include "simlink.h"

#define KEY 0x0123456789ABCDEFull /* a sender key: any value parses */
#define MAXMSG (1ull << 20)
#define SRC 0x10Au
#define BUFW 512 /* uint64_t words of packet scratch: 4 KiB, 8-byte aligned */

/* ================================================================ helpers */

static size_t mk(uint64_t *buf, unsigned type, unsigned flags, const struct usnic_chunk_hdr *ch,
                 const struct usnic_put_hdr *put, const void *payload, uint32_t plen)
{
    struct usnic_pkt_hdr h;
    sim_hdr_init(&h, type, flags, 9, SRC, KEY, 1234, 1233);
    return sim_pkt_build(buf, BUFW * 8, &h, ch, put, payload, plen);
}

static struct usnic_chunk_hdr chunk_hdr(uint64_t msg_len, uint64_t offset)
{
    struct usnic_chunk_hdr c;
    memset(&c, 0, sizeof(c));
    c.msg_len = msg_len;
    c.offset = offset;
    return c;
}

static struct usnic_put_hdr put_hdr(uint64_t key, uint64_t off)
{
    struct usnic_put_hdr p;
    p.reg_key = key;
    p.reg_offset = off;
    return p;
}

static struct usnic_pkt_hdr *H(uint64_t *buf)
{
    return (struct usnic_pkt_hdr *) (void *) buf;
}
static struct usnic_chunk_hdr *CH(uint64_t *buf)
{
    return (struct usnic_chunk_hdr *) (void *) ((uint8_t *) buf + sizeof(struct usnic_pkt_hdr));
}
static struct usnic_put_hdr *PH(uint64_t *buf)
{
    return (struct usnic_put_hdr *) (void *) ((uint8_t *) buf + USNIC_HDR_LEN_CHUNK);
}

/* Parse a private exact-size copy, so the sanitizers see any read past len. */
static enum usnic_drop_reason parse_copy(const void *buf, size_t len, uint64_t max)
{
    struct usnic_pkt_view v;
    enum usnic_drop_reason r;
    uint8_t *copy = malloc(len ? len : 1);
    if (len) {
        memcpy(copy, buf, len);
    }
    r = usnic_pkt_parse(copy, len, max, &v);
    free(copy);
    return r;
}

static void expect_reason(const char *name, const void *buf, size_t len, uint64_t max,
                          enum usnic_drop_reason want)
{
    enum usnic_drop_reason got = parse_copy(buf, len, max);
    check(got == want, name, "got %s, want %s", usnic_drop_reason_name(got),
          usnic_drop_reason_name(want));
}

/* ================================================================ valid packets */

static void test_parse_valid(void)
{
    uint64_t buf[BUFW];
    uint8_t pay[1400];
    struct usnic_pkt_view v;
    struct usnic_chunk_hdr ch = chunk_hdr(10000, 1400);
    struct usnic_put_hdr ph = put_hdr(0x100000003ull, 64);
    enum usnic_drop_reason r;
    size_t len;

    check_seed = 0;
    sim_msg_fill(42, 0, pay, sizeof(pay));

    len = mk(buf, USNIC_PKT_ACK, USNIC_PKT_FLAG_ACK, NULL, NULL, NULL, 0);
    memset(&v, 0xFF, sizeof(v));
    r = usnic_pkt_parse(buf, len, MAXMSG, &v);
    check(r == USNIC_PKT_OK && v.hdr == H(buf) && !v.chunk && !v.put && v.payload_len == 0 &&
              v.payload == (uint8_t *) buf + sizeof(struct usnic_pkt_hdr),
          "parse/valid_ack", "r=%s", usnic_drop_reason_name(r));

    len = mk(buf, USNIC_PKT_ACK, USNIC_PKT_FLAG_ACK | USNIC_PKT_FLAG_ACK_REQ, NULL, NULL, NULL, 0);
    expect_reason("parse/valid_ack_with_ack_req", buf, len, MAXMSG, USNIC_PKT_OK);

    {
        struct usnic_sack sk = {0x8000000000000005ull};
        len = mk(buf, USNIC_PKT_ACK, USNIC_PKT_FLAG_ACK | USNIC_PKT_FLAG_SACK, NULL, NULL, &sk,
                 sizeof(sk));
        r = usnic_pkt_parse(buf, len, MAXMSG, &v);
        check(r == USNIC_PKT_OK &&
                  v.sack == (const void *) ((uint8_t *) buf + sizeof(struct usnic_pkt_hdr)) &&
                  v.sack->bits == sk.bits && !v.chunk && !v.put && v.payload_len == 8,
              "parse/valid_ack_with_sack", "r=%s", usnic_drop_reason_name(r));
        len = mk(buf, USNIC_PKT_ACK, USNIC_PKT_FLAG_ACK, NULL, NULL, NULL, 0);
        r = usnic_pkt_parse(buf, len, MAXMSG, &v);
        check(r == USNIC_PKT_OK && NULL == v.sack, "parse/ack_without_sack_has_no_sack_view",
              "r=%s", usnic_drop_reason_name(r));
    }

    len = mk(buf, USNIC_PKT_FRAG, 0, NULL, NULL, pay, 777);
    r = usnic_pkt_parse(buf, len, MAXMSG, &v);
    check(r == USNIC_PKT_OK && v.hdr == H(buf) && !v.chunk && !v.put && !v.sack &&
              v.payload_len == 777 && v.payload == (uint8_t *) buf + sizeof(struct usnic_pkt_hdr) &&
              0 == memcmp(v.payload, pay, 777),
          "parse/valid_frag", "r=%s", usnic_drop_reason_name(r));

    len = mk(buf, USNIC_PKT_FRAG, USNIC_PKT_FLAG_ACK, NULL, NULL, NULL, 0);
    expect_reason("parse/valid_empty_frag", buf, len, MAXMSG, USNIC_PKT_OK);

    len = mk(buf, USNIC_PKT_CHUNK, USNIC_PKT_FLAG_ACK, &ch, NULL, pay, 1400);
    r = usnic_pkt_parse(buf, len, MAXMSG, &v);
    check(r == USNIC_PKT_OK && v.chunk == CH(buf) && !v.put && v.payload_len == 1400 &&
              v.payload == (uint8_t *) buf + USNIC_HDR_LEN_CHUNK && v.chunk->msg_len == 10000 &&
              v.chunk->offset == 1400,
          "parse/valid_chunk", "r=%s", usnic_drop_reason_name(r));

    len = mk(buf, USNIC_PKT_PUT, USNIC_PKT_FLAG_ACK, &ch, &ph, pay, 100);
    r = usnic_pkt_parse(buf, len, MAXMSG, &v);
    check(r == USNIC_PKT_OK && v.chunk == CH(buf) && v.put == PH(buf) && v.payload_len == 100 &&
              v.payload == (uint8_t *) buf + USNIC_HDR_LEN_PUT &&
              v.put->reg_key == 0x100000003ull && v.put->reg_offset == 64,
          "parse/valid_put", "r=%s", usnic_drop_reason_name(r));
}

/* ================================================================ malformed packets */

static void test_parse_malformed(void)
{
    uint64_t buf[BUFW];
    uint8_t pay[2000];
    struct usnic_chunk_hdr ch;
    struct usnic_put_hdr ph = put_hdr(7, 0);
    struct usnic_pkt_view v;
    size_t len;

    check_seed = 0;
    memset(pay, 0x77, sizeof(pay));

    /* shorter than the common header */
    len = mk(buf, USNIC_PKT_ACK, USNIC_PKT_FLAG_ACK, NULL, NULL, NULL, 0);
    check(USNIC_DROP_SHORT == usnic_pkt_parse(NULL, 0, MAXMSG, &v) &&
              USNIC_DROP_SHORT == usnic_pkt_parse(NULL, 64, MAXMSG, &v),
          "malformed/short_null_buffer", "NULL buffer not SHORT");
    expect_reason("malformed/short_0", buf, 0, MAXMSG, USNIC_DROP_SHORT);
    expect_reason("malformed/short_1", buf, 1, MAXMSG, USNIC_DROP_SHORT);
    expect_reason("malformed/short_31", buf, 31, MAXMSG, USNIC_DROP_SHORT);

    /* version */
    H(buf)->version = 0;
    expect_reason("malformed/version_0", buf, len, MAXMSG, USNIC_DROP_VERSION);
    H(buf)->version = USNIC_PROTO_VERSION + 1;
    expect_reason("malformed/version_next", buf, len, MAXMSG, USNIC_DROP_VERSION);
    H(buf)->version = 0xFF;
    expect_reason("malformed/version_255", buf, len, MAXMSG, USNIC_DROP_VERSION);

    /* unknown type */
    len = mk(buf, 0, USNIC_PKT_FLAG_ACK, NULL, NULL, NULL, 0);
    expect_reason("malformed/type_0", buf, len, MAXMSG, USNIC_DROP_TYPE);
    len = mk(buf, 6, USNIC_PKT_FLAG_ACK, NULL, NULL, NULL, 0);
    expect_reason("malformed/type_6", buf, len, MAXMSG, USNIC_DROP_TYPE);
    len = mk(buf, 0xFF, USNIC_PKT_FLAG_ACK, NULL, NULL, NULL, 0);
    expect_reason("malformed/type_255", buf, len, MAXMSG, USNIC_DROP_TYPE);

    /* unknown flag bits: the lowest bit not in USNIC_PKT_FLAGS_KNOWN, and the top bit */
    {
        unsigned unknown = 0xFFu & ~(unsigned) USNIC_PKT_FLAGS_KNOWN;
        unknown &= -unknown;
        len = mk(buf, USNIC_PKT_FRAG, unknown, NULL, NULL, pay, 8);
        expect_reason("malformed/flag_lowest_unknown_bit", buf, len, MAXMSG, USNIC_DROP_TYPE);
        len = mk(buf, USNIC_PKT_ACK, USNIC_PKT_FLAG_ACK | unknown, NULL, NULL, NULL, 0);
        expect_reason("malformed/flag_lowest_unknown_bit_on_ack", buf, len, MAXMSG,
                      USNIC_DROP_TYPE);
    }
    len = mk(buf, USNIC_PKT_FRAG, 0x80 | USNIC_PKT_FLAG_ACK, NULL, NULL, pay, 8);
    expect_reason("malformed/flag_0x81", buf, len, MAXMSG, USNIC_DROP_TYPE);
    len = mk(buf, USNIC_PKT_ACK, 0xFF, NULL, NULL, NULL, 0);
    expect_reason("malformed/flag_0xff_on_ack", buf, len, MAXMSG, USNIC_DROP_TYPE);

    /* an ACK numbers no fragment: its msg_id must be zero */
    len = mk(buf, USNIC_PKT_ACK, USNIC_PKT_FLAG_ACK, NULL, NULL, NULL, 0);
    H(buf)->msg_id = 1;
    expect_reason("malformed/ack_with_msg_id", buf, len, MAXMSG, USNIC_DROP_TYPE);
    /* any msg_id is well formed in a data packet (the fragment table judges it) */
    len = mk(buf, USNIC_PKT_FRAG, USNIC_PKT_FLAG_ACK, NULL, NULL, pay, 8);
    H(buf)->msg_id = 0xFFFFFFFFu;
    expect_reason("parse/frag_any_msg_id", buf, len, MAXMSG, USNIC_PKT_OK);

    /* ACK without the ACK flag */
    len = mk(buf, USNIC_PKT_ACK, 0, NULL, NULL, NULL, 0);
    expect_reason("malformed/ack_without_ack_flag", buf, len, MAXMSG, USNIC_DROP_TYPE);
    len = mk(buf, USNIC_PKT_ACK, USNIC_PKT_FLAG_ACK_REQ, NULL, NULL, NULL, 0);
    expect_reason("malformed/ack_with_only_ack_req", buf, len, MAXMSG, USNIC_DROP_TYPE);

    /* selective ACKs: ACK packets only, 1 to USNIC_SACK_WORDS_MAX whole words */
    {
        struct usnic_sack sk = {1};
        uint8_t words[(USNIC_SACK_WORDS_MAX + 1) * 8];
        struct usnic_chunk_hdr c1 = chunk_hdr(100, 0);
        len = mk(buf, USNIC_PKT_FRAG, USNIC_PKT_FLAG_ACK | USNIC_PKT_FLAG_SACK, NULL, NULL, pay, 8);
        expect_reason("malformed/sack_flag_on_frag", buf, len, MAXMSG, USNIC_DROP_TYPE);
        len = mk(buf, USNIC_PKT_CHUNK, USNIC_PKT_FLAG_SACK, &c1, NULL, pay, 8);
        expect_reason("malformed/sack_flag_on_chunk", buf, len, MAXMSG, USNIC_DROP_TYPE);
        len = mk(buf, USNIC_PKT_ACK, USNIC_PKT_FLAG_ACK | USNIC_PKT_FLAG_SACK, NULL, NULL, NULL, 0);
        expect_reason("malformed/sack_flag_without_bitmap", buf, len, MAXMSG, USNIC_DROP_LENGTH);
        memset(words, 0xA5, sizeof(words));
        len = mk(buf, USNIC_PKT_ACK, USNIC_PKT_FLAG_ACK | USNIC_PKT_FLAG_SACK, NULL, NULL, words,
                 USNIC_SACK_WORDS_MAX * 8);
        expect_reason("wellformed/sack_of_max_words", buf, len, MAXMSG, USNIC_PKT_OK);
        len = mk(buf, USNIC_PKT_ACK,
                 USNIC_PKT_FLAG_ACK | USNIC_PKT_FLAG_SACK | USNIC_PKT_FLAG_SACK_MORE, NULL, NULL,
                 words, 16);
        expect_reason("wellformed/sack_of_two_words_and_more", buf, len, MAXMSG, USNIC_PKT_OK);
        len = mk(buf, USNIC_PKT_ACK, USNIC_PKT_FLAG_ACK | USNIC_PKT_FLAG_SACK_MORE, NULL, NULL,
                 NULL, 0);
        expect_reason("wellformed/more_without_sack", buf, len, MAXMSG, USNIC_PKT_OK);
        len = mk(buf, USNIC_PKT_ACK, USNIC_PKT_FLAG_ACK | USNIC_PKT_FLAG_SACK, NULL, NULL, words,
                 (USNIC_SACK_WORDS_MAX + 1) * 8);
        expect_reason("malformed/sack_bitmap_too_long", buf, len, MAXMSG, USNIC_DROP_LENGTH);
        len =
            mk(buf, USNIC_PKT_ACK, USNIC_PKT_FLAG_ACK | USNIC_PKT_FLAG_SACK, NULL, NULL, words, 12);
        expect_reason("malformed/sack_of_a_word_and_a_half", buf, len, MAXMSG, USNIC_DROP_LENGTH);
        len = mk(buf, USNIC_PKT_FRAG, USNIC_PKT_FLAG_ACK | USNIC_PKT_FLAG_SACK_MORE, NULL, NULL,
                 pay, 8);
        expect_reason("malformed/sack_more_on_frag", buf, len, MAXMSG, USNIC_DROP_TYPE);
        len = mk(buf, USNIC_PKT_ACK, USNIC_PKT_FLAG_ACK | USNIC_PKT_FLAG_SACK, NULL, NULL, &sk, 8);
        expect_reason("malformed/sack_bitmap_truncated", buf, len - 1, MAXMSG, USNIC_DROP_LENGTH);
        len = mk(buf, USNIC_PKT_ACK, USNIC_PKT_FLAG_ACK, NULL, NULL, &sk, 8);
        expect_reason("malformed/bitmap_without_sack_flag", buf, len, MAXMSG, USNIC_DROP_LENGTH);
        len = mk(buf, USNIC_PKT_ACK, USNIC_PKT_FLAG_SACK, NULL, NULL, &sk, 8);
        expect_reason("malformed/sack_without_ack_flag", buf, len, MAXMSG, USNIC_DROP_TYPE);
    }

    /* the reserved field must be 0; the sender key is not the parser's business */
    len = mk(buf, USNIC_PKT_FRAG, 0, NULL, NULL, pay, 8);
    H(buf)->reserved = 1;
    expect_reason("malformed/reserved_low_bit", buf, len, MAXMSG, USNIC_DROP_TYPE);
    H(buf)->reserved = 0x80;
    expect_reason("malformed/reserved_high_bit", buf, len, MAXMSG, USNIC_DROP_TYPE);
    H(buf)->reserved = 0;
    /* allow is any number of KiB, 0 included */
    H(buf)->allow = 0xffff;
    expect_reason("valid/allow_max", buf, len, MAXMSG, USNIC_PKT_OK);
    H(buf)->allow = 0;
    H(buf)->lane = USNIC_PKT_LANES;
    expect_reason("malformed/lane_beyond_channels", buf, len, MAXMSG, USNIC_DROP_TYPE);
    H(buf)->lane = 0xff;
    expect_reason("malformed/lane_255", buf, len, MAXMSG, USNIC_DROP_TYPE);
    H(buf)->lane = 0;
    H(buf)->sender_key = 0;
    expect_reason("parse/any_sender_key_parses", buf, len, MAXMSG, USNIC_PKT_OK);

    /* payload_len disagrees with the datagram */
    len = mk(buf, USNIC_PKT_FRAG, 0, NULL, NULL, pay, 100);
    H(buf)->payload_len = 101;
    expect_reason("malformed/payload_len_bigger_than_datagram", buf, len, MAXMSG,
                  USNIC_DROP_LENGTH);
    H(buf)->payload_len = 99;
    expect_reason("malformed/payload_len_smaller_than_datagram", buf, len, MAXMSG,
                  USNIC_DROP_LENGTH);
    H(buf)->payload_len = 0xFFFFFFFFu;
    expect_reason("malformed/payload_len_max", buf, len, MAXMSG, USNIC_DROP_LENGTH);
    H(buf)->payload_len = 0;
    expect_reason("malformed/payload_len_zero_with_payload", buf, len, MAXMSG, USNIC_DROP_LENGTH);
    H(buf)->payload_len = (uint32_t) len; /* counting the header too */
    expect_reason("malformed/payload_len_counts_header", buf, len, MAXMSG, USNIC_DROP_LENGTH);

    ch = chunk_hdr(100, 0);
    len = mk(buf, USNIC_PKT_CHUNK, 0, &ch, NULL, pay, 50);
    expect_reason("malformed/chunk_shorter_than_chunk_header", buf, sizeof(struct usnic_pkt_hdr),
                  MAXMSG, USNIC_DROP_LENGTH);
    len = mk(buf, USNIC_PKT_PUT, 0, &ch, &ph, pay, 50);
    H(buf)->payload_len = 0;
    expect_reason("malformed/put_shorter_than_put_header", buf, USNIC_HDR_LEN_CHUNK + 8, MAXMSG,
                  USNIC_DROP_LENGTH);
    H(buf)->payload_len = 50;
    expect_reason("malformed/put_truncated_payload", buf, len - 1, MAXMSG, USNIC_DROP_LENGTH);

    /* ACK with payload */
    len = mk(buf, USNIC_PKT_ACK, USNIC_PKT_FLAG_ACK, NULL, NULL, pay, 4);
    expect_reason("malformed/ack_with_payload", buf, len, MAXMSG, USNIC_DROP_LENGTH);
    len = mk(buf, USNIC_PKT_ACK, USNIC_PKT_FLAG_ACK, NULL, NULL, NULL, 0);
    expect_reason("malformed/ack_with_trailing_bytes", buf, len + 4, MAXMSG, USNIC_DROP_LENGTH);

    /* chunk bounds */
    ch = chunk_hdr(1000, 901);
    len = mk(buf, USNIC_PKT_CHUNK, 0, &ch, NULL, pay, 100);
    expect_reason("malformed/chunk_end_past_msg_len_by_1", buf, len, MAXMSG,
                  USNIC_DROP_CHUNK_RANGE);
    CH(buf)->offset = 900;
    expect_reason("malformed/chunk_end_at_msg_len_ok", buf, len, MAXMSG, USNIC_PKT_OK);
    CH(buf)->offset = 1000;
    expect_reason("malformed/chunk_offset_at_msg_len", buf, len, MAXMSG, USNIC_DROP_CHUNK_RANGE);
    CH(buf)->offset = UINT64_MAX - 5; /* offset + len wraps to 94 */
    expect_reason("malformed/chunk_offset_overflow", buf, len, MAXMSG, USNIC_DROP_CHUNK_RANGE);
    CH(buf)->offset = UINT64_MAX;
    expect_reason("malformed/chunk_offset_max", buf, len, MAXMSG, USNIC_DROP_CHUNK_RANGE);
    CH(buf)->msg_len = UINT64_MAX; /* with no msg_len limit at all */
    CH(buf)->offset = UINT64_MAX - 50;
    expect_reason("malformed/chunk_overflow_with_max_msg_len", buf, len, UINT64_MAX,
                  USNIC_DROP_CHUNK_RANGE);
    CH(buf)->offset = UINT64_MAX - 100;
    expect_reason("malformed/chunk_ending_at_2^64-1_ok", buf, len, UINT64_MAX, USNIC_PKT_OK);

    /* msg_len 0 and over the limit */
    ch = chunk_hdr(0, 0);
    len = mk(buf, USNIC_PKT_CHUNK, 0, &ch, NULL, pay, 10);
    expect_reason("malformed/chunk_msg_len_0", buf, len, MAXMSG, USNIC_DROP_CHUNK_RANGE);
    len = mk(buf, USNIC_PKT_PUT, 0, &ch, &ph, pay, 10);
    expect_reason("malformed/put_msg_len_0", buf, len, MAXMSG, USNIC_DROP_CHUNK_RANGE);
    ch = chunk_hdr(MAXMSG + 1, 0);
    len = mk(buf, USNIC_PKT_CHUNK, 0, &ch, NULL, pay, 10);
    expect_reason("malformed/chunk_msg_len_over_max", buf, len, MAXMSG, USNIC_DROP_CHUNK_RANGE);
    CH(buf)->msg_len = UINT64_MAX;
    expect_reason("malformed/chunk_msg_len_2^64-1", buf, len, MAXMSG, USNIC_DROP_CHUNK_RANGE);
    CH(buf)->msg_len = MAXMSG;
    expect_reason("malformed/chunk_msg_len_at_max_ok", buf, len, MAXMSG, USNIC_PKT_OK);
    /* documented: a PUT's length is bounded by its registration, not max_msg_len */
    ch = chunk_hdr(MAXMSG + 1, 0);
    len = mk(buf, USNIC_PKT_PUT, 0, &ch, &ph, pay, 10);
    expect_reason("parse/put_msg_len_over_max_left_to_registration", buf, len, MAXMSG,
                  USNIC_PKT_OK);

    /* zero-length chunk payload */
    ch = chunk_hdr(100, 0);
    len = mk(buf, USNIC_PKT_CHUNK, 0, &ch, NULL, NULL, 0);
    expect_reason("malformed/chunk_empty_payload", buf, len, MAXMSG, USNIC_DROP_CHUNK_RANGE);
    len = mk(buf, USNIC_PKT_PUT, 0, &ch, &ph, NULL, 0);
    expect_reason("malformed/put_empty_payload", buf, len, MAXMSG, USNIC_DROP_CHUNK_RANGE);

    /* PUT reg_offset + msg_len overflowing */
    ch = chunk_hdr(1000, 0);
    ph = put_hdr(7, UINT64_MAX - 1000 + 1); /* reg_offset + msg_len == 2^64 */
    len = mk(buf, USNIC_PKT_PUT, 0, &ch, &ph, pay, 100);
    expect_reason("malformed/put_reg_offset_plus_len_is_2^64", buf, len, MAXMSG,
                  USNIC_DROP_PUT_RANGE);
    PH(buf)->reg_offset = UINT64_MAX;
    expect_reason("malformed/put_reg_offset_max", buf, len, MAXMSG, USNIC_DROP_PUT_RANGE);
    PH(buf)->reg_offset = UINT64_MAX - 1000;
    expect_reason("malformed/put_reg_offset_plus_len_is_2^64-1_ok", buf, len, MAXMSG, USNIC_PKT_OK);
}

/* ================================================================ reassembly */

struct talloc {
    int gets, puts, fail;
};

static void *t_get(void *ctx, uint64_t len, bool urgent, void **handle)
{
    struct talloc *a = ctx;
    (void) urgent;
    void *p;
    if (a->fail > 0) {
        a->fail--;
        *handle = NULL;
        return NULL;
    }
    p = malloc(len ? (size_t) len : 1);
    memset(p, 0xA5, len ? (size_t) len : 1);
    *handle = p;
    a->gets++;
    return p;
}

static void t_put(void *ctx, void *buf, void *handle)
{
    struct talloc *a = ctx;
    if (buf == handle) {
        a->puts++;
    }
    free(buf);
}

struct piece {
    uint32_t msg; /* index into the test's message list */
    uint64_t off;
    uint32_t len;
};

/* Cut a message into chunks: fixed size, or random sizes in [1, 2000] when rng. */
static size_t cut(struct piece *pc, uint32_t msg, uint64_t len, uint32_t size, struct sim_rng *rng)
{
    size_t n = 0;
    for (uint64_t off = 0; off < len;) {
        uint32_t l = rng ? (uint32_t) sim_rng_range(rng, 1, 2000) : size;
        if (l > len - off) {
            l = (uint32_t) (len - off);
        }
        pc[n].msg = msg;
        pc[n].off = off;
        pc[n].len = l;
        n++;
        off += l;
    }
    return n;
}

struct rmsg {
    uint32_t msg_id;
    uint64_t len;
    uint8_t tag;
    uint64_t key;
    bool whole;         /* sent as one FRAG, not chunks */
    uint64_t remaining; /* bytes not yet fed */
    int done;           /* deliveries seen */
    int early;          /* delivered before its last chunk was fed */
    int bad;            /* wrong bytes / length / tag on delivery */
};

/* The fragment table's delivery loop, as usnic_rx_drain() runs it: every
 * delivery must be the next message in msg_id order. */
static int drain(struct usnic_reasm_table *t, struct rmsg *m, uint32_t *next_idx, char *why,
                 size_t whylen, int problems)
{
    struct usnic_reasm *r;

    while (NULL != (r = usnic_reasm_pop(t))) {
        struct rmsg *mm = &m[*next_idx];
        if (0 == mm->len || r->msg_id != mm->msg_id) {
            if (!problems++) {
                snprintf(why, whylen, "delivered msg_id %u, expected %u (out of order)", r->msg_id,
                         mm->msg_id);
            }
        } else {
            mm->done++;
            mm->early += (0 != mm->remaining);
            if (r->msg_len != mm->len || r->tag != mm->tag ||
                sim_msg_mismatch(mm->key, 0, r->buf, (size_t) mm->len) >= 0) {
                mm->bad++;
            }
            (*next_idx)++;
        }
        usnic_reasm_release(t, r);
    }
    return problems;
}

/*
 * Feed the pieces, in the given order, as real datagrams (CHUNK, or FRAG
 * for a message marked whole) through usnic_pkt_parse() and the fragment
 * table as usnic_rx_dispatch() uses it.  Messages must come out whole, once
 * each, in msg_id order (m[] is in msg_id order, ended by len 0).  Returns
 * the number of problems; the first is described in why.
 */
static int feed(struct usnic_reasm_table *t, struct rmsg *m, const struct piece *pc,
                const uint32_t *order, size_t n, char *why, size_t whylen)
{
    static uint64_t buf[BUFW];
    uint8_t data[2000];
    uint32_t next_idx = 0;
    int problems = 0;

    for (size_t k = 0; k < n; k++) {
        const struct piece *p = &pc[order[k]];
        struct rmsg *mm = &m[p->msg];
        struct usnic_chunk_hdr ch = chunk_hdr(mm->len, p->off);
        struct usnic_pkt_hdr h;
        struct usnic_pkt_view v;
        enum usnic_drop_reason r;
        size_t len;

        sim_msg_fill(mm->key, p->off, data, p->len);
        sim_hdr_init(&h, mm->whole ? USNIC_PKT_FRAG : USNIC_PKT_CHUNK, USNIC_PKT_FLAG_ACK, mm->tag,
                     SRC, KEY, (uint32_t) k, 0);
        h.msg_id = mm->msg_id;
        len = sim_pkt_build(buf, sizeof(buf), &h, mm->whole ? NULL : &ch, NULL, data, p->len);
        r = usnic_pkt_parse(buf, len, MAXMSG, &v);
        if (USNIC_PKT_OK == r) {
            r = usnic_reasm_check(t, v.hdr->msg_id, mm->whole ? v.payload_len : v.chunk->msg_len,
                                  v.hdr->tag, mm->whole);
        }
        if (USNIC_PKT_OK == r && mm->whole && usnic_reasm_is_next(t, v.hdr->msg_id)) {
            /* straight from the packet */
            usnic_reasm_skip(t);
            mm->remaining = 0;
            mm->done++;
            if (&m[next_idx] != mm || sim_msg_mismatch(mm->key, 0, v.payload, mm->len) >= 0) {
                mm->bad++;
            }
            next_idx++;
            problems = drain(t, m, &next_idx, why, whylen, problems);
            continue;
        }
        if (USNIC_PKT_OK == r) {
            r = mm->whole ? usnic_reasm_hold(t, v.hdr->msg_id, v.payload, v.payload_len, v.hdr->tag)
                          : usnic_reasm_add(t, v.hdr->msg_id, v.chunk->msg_len, v.chunk->offset,
                                            v.payload, v.payload_len, v.hdr->tag);
        }
        if (USNIC_PKT_OK != r) {
            if (!problems++) {
                snprintf(why, whylen, "msg_id %u piece @%" PRIu64 " refused: %s", mm->msg_id,
                         p->off, usnic_drop_reason_name(r));
            }
            continue;
        }
        mm->remaining -= p->len;
        problems = drain(t, m, &next_idx, why, whylen, problems);
    }
    for (uint32_t i = 0; m[i].len; i++) {
        if ((m[i].done != 1 || m[i].early || m[i].bad) && !problems++) {
            snprintf(why, whylen, "msg_id %u: delivered %d times, early %d, bad %d", m[i].msg_id,
                     m[i].done, m[i].early, m[i].bad);
        }
    }
    return problems;
}

static void rmsg_init(struct rmsg *m, uint32_t msg_id, uint64_t len, uint8_t tag)
{
    memset(m, 0, sizeof(*m));
    m->msg_id = msg_id;
    m->len = len;
    m->tag = tag;
    m->key = sim_msg_key(7, msg_id);
    m->remaining = len;
}

static void test_reasm_orders(void)
{
    struct usnic_reasm_table t;
    struct talloc a = {0, 0, 0};
    struct usnic_reasm_alloc alloc = {t_get, t_put, &a};
    static struct piece pc[4096];
    static uint32_t order[4096];
    struct rmsg m[9];
    struct sim_rng rng;
    char why[200] = "";
    uint32_t id = 0xFFFFFFF0u; /* numbers wrap during the test */
    int problems;
    size_t n;

    check_seed = 0xA55E;
    sim_rng_seed(&rng, check_seed);
    usnic_reasm_table_init(&t, 8, &alloc, id);

    /* one message: forward, reverse */
    static const uint64_t lens[] = {1401, 2800, 2801, 10000, 200 * 1024};
    for (int dir = 0; dir < 2; dir++) {
        problems = 0;
        for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
            memset(m, 0, sizeof(m));
            rmsg_init(&m[0], id++, lens[li], 17);
            n = cut(pc, 0, lens[li], 1400, NULL);
            for (size_t k = 0; k < n; k++) {
                order[k] = (uint32_t) (dir ? n - 1 - k : k);
            }
            problems += feed(&t, m, pc, order, n, why, sizeof(why));
        }
        check(0 == problems, dir ? "reasm/reverse_order" : "reasm/forward_order", "%s", why);
    }

    /* random permutations, fixed and random chunk sizes */
    problems = 0;
    for (int it = 0; it < 60; it++) {
        uint64_t len = sim_rng_range(&rng, 2, 64 * 1024);
        memset(m, 0, sizeof(m));
        rmsg_init(&m[0], id++, len, (uint8_t) it);
        n = cut(pc, 0, len, 1400, (it & 1) ? &rng : NULL);
        for (size_t k = 0; k < n; k++) {
            order[k] = (uint32_t) k;
        }
        sim_rng_shuffle32(&rng, order, n);
        problems += feed(&t, m, pc, order, n, why, sizeof(why));
    }
    check(0 == problems, "reasm/random_permutations", "%d problems, first: %s", problems, why);

    /* up to 8 messages (a table's worth), chunked and whole, pieces of all of
     * them shuffled together: they come out in number order */
    problems = 0;
    for (int it = 0; it < 200; it++) {
        size_t total = 0;
        uint32_t nm = 1 + (uint32_t) sim_rng_below(&rng, 8);
        memset(m, 0, sizeof(m));
        for (uint32_t i = 0; i < nm; i++) {
            bool whole = sim_rng_below(&rng, 3) == 0;
            uint64_t len = whole ? sim_rng_range(&rng, 0, 1400) : sim_rng_range(&rng, 1, 30000);
            rmsg_init(&m[i], id++, len ? len : 1, (uint8_t) (i * 3));
            m[i].whole = whole;
            if (whole) {
                pc[total].msg = i;
                pc[total].off = 0;
                pc[total].len = (uint32_t) m[i].len;
                total++;
            } else {
                total += cut(pc + total, i, len, 1400, (i & 1) ? &rng : NULL);
            }
        }
        for (size_t k = 0; k < total; k++) {
            order[k] = (uint32_t) k;
        }
        sim_rng_shuffle32(&rng, order, total);
        problems += feed(&t, m, pc, order, total, why, sizeof(why));
    }
    check(0 == problems, "reasm/interleaved_messages_in_order", "%d problems, first: %s", problems,
          why);
    check(a.gets == a.puts && a.gets > 0, "reasm/buffers_balanced", "gets=%d puts=%d", a.gets,
          a.puts);
    usnic_reasm_table_fini(&t);
}

/* With the chunk size known, chunks must be aligned and whole, and each may
 * arrive once: overlapping or repeated pieces cannot complete a fragment. */
static void test_reasm_chunk_positions(void)
{
    struct usnic_reasm_table t;
    struct talloc a = {0, 0, 0};
    struct usnic_reasm_alloc alloc = {t_get, t_put, &a};
    struct usnic_reasm *done = NULL;
    uint8_t data[1000];
    enum usnic_drop_reason r;

    check_seed = 0;
    memset(data, 7, sizeof(data));
    usnic_reasm_table_init(&t, 4, &alloc, 1);
    t.chunk = 1000;
    /* a 2500-byte fragment: chunks at 0, 1000 (1000 bytes) and 2000 (500) */
    r = usnic_reasm_add(&t, 1, 2500, 500, data, 1000, 9);
    check(USNIC_DROP_CHUNK_RANGE == r && 0 == a.gets, "reasm/chunk_misaligned_rejected",
          "r=%d gets=%d", r, a.gets);
    r = usnic_reasm_add(&t, 1, 2500, 1000, data, 600, 9);
    check(USNIC_DROP_CHUNK_RANGE == r, "reasm/chunk_short_not_tail_rejected", "r=%d", r);
    r = usnic_reasm_add(&t, 1, 2500, 0, data, 1000, 9);
    check(USNIC_PKT_OK == r && NULL == usnic_reasm_pop(&t), "reasm/chunk_first_taken", "r=%d", r);
    r = usnic_reasm_add(&t, 1, 2500, 0, data, 1000, 9);
    check(USNIC_DROP_CHUNK_RANGE == r && NULL == usnic_reasm_pop(&t), "reasm/chunk_repeat_rejected",
          "r=%d", r);
    r = usnic_reasm_add(&t, 1, 2500, 1000, data, 1000, 9);
    check(USNIC_PKT_OK == r && NULL == usnic_reasm_pop(&t), "reasm/chunk_second_taken", "r=%d", r);
    r = usnic_reasm_add(&t, 1, 2500, 2000, data, 500, 9);
    done = usnic_reasm_pop(&t);
    check(USNIC_PKT_OK == r && NULL != done && 2500 == done->received && 2 == t.next,
          "reasm/chunk_tail_completes", "r=%d done=%p", r, (void *) done);
    if (NULL != done) {
        usnic_reasm_release(&t, done);
    }
    usnic_reasm_table_fini(&t);
    check(a.gets == a.puts, "reasm/chunk_positions_no_leak", "gets=%d puts=%d", a.gets, a.puts);
}

/* The chunk checks: a table whose chunk size changes (a path's MTU
 * fallback) checks against the new size, and the duplicate tracking starts
 * and ends at exactly USNIC_REASM_MAX_CHUNKS chunks. */
static void test_reasm_chunk_sizes(void)
{
    struct usnic_reasm_table t;
    struct talloc a = {0, 0, 0};
    struct usnic_reasm_alloc alloc = {t_get, t_put, &a};
    static uint8_t data[1472];
    struct usnic_reasm *r;
    bool ok;

    check_seed = 0;
    memset(data, 5, sizeof(data));
    usnic_reasm_table_init(&t, 8, &alloc, 1);
    t.chunk = 1000;
    ok = USNIC_DROP_CHUNK_RANGE == usnic_reasm_add(&t, 1, 5000, 1412, data, 1000, 9) &&
         USNIC_PKT_OK == usnic_reasm_add(&t, 1, 5000, 3000, data, 1000, 9);
    t.chunk = 1412; /* the sender's chunks change size: offsets are checked against it */
    ok = ok && USNIC_DROP_CHUNK_RANGE == usnic_reasm_add(&t, 2, 5000, 1000, data, 1000, 9) &&
         USNIC_DROP_CHUNK_RANGE == usnic_reasm_add(&t, 2, 5000, 2825, data, 1412, 9) &&
         USNIC_PKT_OK == usnic_reasm_add(&t, 2, 5000, 2824, data, 1412, 9);
    check(ok, "reasm/chunk_size_change_checked", "an offset judged by the old size");
    usnic_reasm_table_fini(&t);

    /* 512 chunks of 1000 bytes (the last one short) are tracked: a
     * repeated chunk is rejected; 513 chunks are not tracked */
    for (int more = 0; more <= 1; more++) {
        uint64_t len = (uint64_t) USNIC_REASM_MAX_CHUNKS * 1000u - 1u + (uint64_t) more * 2u;
        uint64_t last = (len - 1) / 1000u * 1000u;
        enum usnic_drop_reason again;
        usnic_reasm_table_init(&t, 8, &alloc, 1);
        t.chunk = 1000;
        ok = USNIC_PKT_OK == usnic_reasm_add(&t, 1, len, last, data, (uint32_t) (len - last), 9);
        again = usnic_reasm_add(&t, 1, len, last, data, (uint32_t) (len - last), 9);
        ok = ok && (more ? USNIC_PKT_OK == again : USNIC_DROP_CHUNK_RANGE == again);
        check(ok, more ? "reasm/chunk_513_not_tracked" : "reasm/chunk_512_tracked", "again=%d",
              again);
        r = usnic_reasm_pop(&t);
        if (NULL != r) {
            usnic_reasm_release(&t, r);
        }
        usnic_reasm_table_fini(&t);
    }
    check(a.gets == a.puts, "reasm/chunk_sizes_no_leak", "gets=%d puts=%d", a.gets, a.puts);
}

/* Deferred chunks (btl_usnic_reasm.h): chunks in order from offset 0 stay
 * where they arrived as pieces; anything else copies them in first. */
static bool add_d(struct usnic_reasm_table *t, uint32_t id, uint64_t msg_len, uint64_t off,
                  const uint8_t *data, uint32_t len, bool defer, bool *now)
{
    bool dummy;
    return USNIC_PKT_OK ==
           usnic_reasm_add_defer(t, id, msg_len, off, data, len, 9, defer, now ? now : &dummy);
}

/* do the segments the PML would get for the complete deferred fragment r
 * (its pieces, then the buffer's rest) hold exactly want's len bytes, in
 * at most USNIC_REASM_PIECES segments?  *nseg: how many. */
static bool segs_are(const struct usnic_reasm_table *t, const struct usnic_reasm *r,
                     const uint8_t *want, uint64_t len, unsigned *nseg)
{
    struct usnic_reasm_piece seg[USNIC_REASM_PIECES + 1];
    unsigned n = usnic_reasm_pieces(t, r, seg);
    uint64_t off = 0;

    if (NULL != nseg) {
        *nseg = n;
    }
    if (n > USNIC_REASM_PIECES) {
        return false;
    }
    for (unsigned i = 0; i < n; i++) {
        if (off + seg[i].len > len || 0 != memcmp(seg[i].data, want + off, (size_t) seg[i].len)) {
            return false;
        }
        off += seg[i].len;
    }
    return off == len;
}

static void test_reasm_defer(void)
{
    struct usnic_reasm_table t;
    struct talloc a = {0, 0, 0};
    struct usnic_reasm_alloc alloc = {t_get, t_put, &a};
    struct usnic_reasm *r;
    uint8_t msg[20000], rb[30000]; /* a message, and the "receive buffers" its chunks lie in */
    bool now = false, ok;

    check_seed = 0;
    for (size_t i = 0; i < sizeof(msg); i++) {
        msg[i] = (uint8_t) (i * 7 + 3);
    }
    usnic_reasm_table_init(&t, 8, &alloc, 1);
    t.chunk = 1000;

    /* 1: four chunks in order, each behind a 100-byte "header": four pieces,
     * nothing copied, handed over as they are */
    for (int k = 0; k < 4; k++) {
        memcpy(rb + 100 + k * 1100, msg + k * 1000, 1000);
    }
    ok = add_d(&t, 1, 3500, 0, rb + 100, 1000, true, &now) && now && t.defer.active;
    ok = ok && add_d(&t, 1, 3500, 1000, rb + 1200, 1000, true, &now) && !now;
    ok = ok && add_d(&t, 1, 3500, 2000, rb + 2300, 1000, true, NULL);
    ok = ok && NULL == usnic_reasm_dest(&t, 1, 3500); /* not in its buffer yet */
    ok = ok && add_d(&t, 1, 3500, 3000, rb + 3400, 500, true, NULL);
    r = usnic_reasm_pop(&t);
    ok = ok && NULL != r && r->deferred && 4 == t.defer.n && segs_are(&t, r, msg, 3500, NULL) &&
         t.defer.piece[0].data == rb + 100 && 0xA5 == r->buf[0] && 0xA5 == r->buf[3499];
    check(ok, "reasm/defer_in_order_stays_in_place", "n=%u", t.defer.n);
    if (NULL != r) {
        usnic_reasm_release(&t, r);
    }
    check(!t.defer.active && 0 == t.defer.n, "reasm/defer_release_clears", "still active");

    /* 2: a chunk out of order goes to the buffer and the pieces stay; the
     * missing chunk, in order again, is a piece: two pieces and the
     * buffer's tail */
    memcpy(rb, msg, 1000);
    memcpy(rb + 5000, msg + 2000, 1000);
    memcpy(rb + 8000, msg + 1000, 1000);
    ok = add_d(&t, 2, 2500, 0, rb, 1000, true, &now) && now;
    ok = ok && add_d(&t, 2, 2500, 2000, rb + 5000, 500, true, NULL) && t.defer.active &&
         1 == t.defer.n;
    memset(rb + 5000, 0, 500); /* the tail was copied: its receive buffer may change */
    ok = ok && add_d(&t, 2, 2500, 1000, rb + 8000, 1000, true, NULL) && 2 == t.defer.n;
    r = usnic_reasm_pop(&t);
    {
        unsigned nseg = 0;
        ok = ok && NULL != r && r->deferred && segs_are(&t, r, msg, 2500, &nseg) && 3 == nseg;
        check(ok, "reasm/defer_out_of_order_tail_in_buffer", "deferred=%d nseg=%u",
              r ? r->deferred : -1, nseg);
    }
    if (NULL != r) {
        usnic_reasm_release(&t, r);
    }

    /* 2b: the same, and the batch ends before the fragment is complete: the
     * pieces are copied in, the receive buffers reused, and the fragment
     * comes out of its buffer intact */
    memcpy(rb, msg, 1000);
    memcpy(rb + 5000, msg + 2000, 1000);
    memcpy(rb + 8000, msg + 1000, 1000);
    ok = add_d(&t, 3, 2500, 0, rb, 1000, true, &now) && now;
    ok = ok && add_d(&t, 3, 2500, 2000, rb + 5000, 500, true, NULL) && t.defer.active;
    usnic_reasm_materialize(&t);
    memset(rb, 0, 6000);
    ok = ok && !t.defer.active && add_d(&t, 3, 2500, 1000, rb + 8000, 1000, true, &now) && !now;
    r = usnic_reasm_pop(&t);
    ok = ok && NULL != r && !r->deferred && 0 == memcmp(r->buf, msg, 2500);
    check(ok, "reasm/defer_out_of_order_materialized", "deferred=%d", r ? r->deferred : -1);
    if (NULL != r) {
        usnic_reasm_release(&t, r);
    }

    /* 3: the transport's batch ends in the middle: materialized, then the
     * buffers change, and the fragment still comes out right */
    memcpy(rb, msg, 1000);
    memcpy(rb + 2000, msg + 1000, 1000);
    ok = add_d(&t, 4, 3000, 0, rb, 1000, true, &now) && now;
    ok = ok && add_d(&t, 4, 3000, 1000, rb + 2000, 1000, true, NULL);
    usnic_reasm_materialize(&t);
    ok = ok && !t.defer.active && NULL != usnic_reasm_dest(&t, 4, 3000);
    memset(rb, 0x11, 4000);
    memcpy(rb + 10000, msg + 2000, 1000);
    ok = ok && add_d(&t, 4, 3000, 2000, rb + 10000, 1000, true, &now) && !now;
    r = usnic_reasm_pop(&t);
    ok = ok && NULL != r && !r->deferred && 0 == memcmp(r->buf, msg, 3000);
    check(ok, "reasm/defer_materialize_mid_fragment", "bytes differ");
    if (NULL != r) {
        usnic_reasm_release(&t, r);
    }

    /* 4: 18 chunks: the first 15 are pieces, the other 3 go to the buffer,
     * whose tail is the 16th segment */
    for (int k = 0; k < 18; k++) {
        memcpy(rb + 100 + k * 1100, msg + k * 1000, 1000);
    }
    ok = true;
    for (int k = 0; k < 18 && ok; k++) {
        ok = add_d(&t, 5, 18000, (uint64_t) k * 1000, rb + 100 + k * 1100, 1000, true, NULL);
        ok = ok && t.defer.active && t.defer.n == (unsigned) (k < 15 ? k + 1 : 15);
        if (k >= 15) {
            memset(rb + 100 + k * 1100, 0x33, 1000); /* copied: may change */
        }
    }
    r = usnic_reasm_pop(&t);
    {
        unsigned nseg = 0;
        ok = ok && NULL != r && r->deferred && segs_are(&t, r, msg, 18000, &nseg) &&
             USNIC_REASM_PIECES == nseg;
        check(ok, "reasm/defer_15_pieces_and_buffer_tail", "n=%u nseg=%u", t.defer.n, nseg);
    }
    if (NULL != r) {
        usnic_reasm_release(&t, r);
    }

    /* 4b: exactly 16 chunks: the 16th, the last, is the 16th piece (no
     * tail); 17 chunks: the 16th and 17th go to the buffer */
    for (int total = 16; total <= 17; total++) {
        uint32_t id = (uint32_t) (total - 10); /* 6, 7 */
        unsigned nseg = 0;
        ok = true;
        for (int k = 0; k < total; k++) {
            memcpy(rb + 100 + k * 1100, msg + k * 1000, 1000);
        }
        for (int k = 0; k < total && ok; k++) {
            ok = add_d(&t, id, (uint64_t) total * 1000, (uint64_t) k * 1000, rb + 100 + k * 1100,
                       1000, true, NULL);
        }
        r = usnic_reasm_pop(&t);
        ok = ok && NULL != r && r->deferred &&
             segs_are(&t, r, msg, (uint64_t) total * 1000, &nseg) && 16 == nseg &&
             t.defer.n == (16 == total ? 16u : 15u);
        check(ok, 16 == total ? "reasm/defer_16_chunks_16_pieces" : "reasm/defer_17_chunks_tail",
              "n=%u nseg=%u", t.defer.n, nseg);
        if (NULL != r) {
            usnic_reasm_release(&t, r);
        }
    }

    /* 5: chunks that lie one right behind the other are one piece (20 of
     * them: more chunks than pieces) */
    memcpy(rb, msg, 20000);
    ok = true;
    for (int k = 0; k < 20 && ok; k++) {
        ok = add_d(&t, 8, 20000, (uint64_t) k * 1000, rb + k * 1000, 1000, true, NULL);
    }
    r = usnic_reasm_pop(&t);
    ok = ok && NULL != r && r->deferred && 1 == t.defer.n && 20000 == t.defer.piece[0].len &&
         segs_are(&t, r, msg, 20000, NULL);
    check(ok, "reasm/defer_adjacent_chunks_join", "n=%u", t.defer.n);
    if (NULL != r) {
        usnic_reasm_release(&t, r);
    }

    /* 6: a first chunk that may not be deferred: copied, and so is the rest */
    memcpy(rb, msg, 2000);
    ok = add_d(&t, 9, 2000, 0, rb, 1000, false, &now) && !now && !t.defer.active;
    ok = ok && add_d(&t, 9, 2000, 1000, rb + 1000, 1000, true, &now) && !now;
    r = usnic_reasm_pop(&t);
    ok = ok && NULL != r && !r->deferred && 0 == memcmp(r->buf, msg, 2000);
    check(ok, "reasm/defer_not_on_request", "deferred");
    if (NULL != r) {
        usnic_reasm_release(&t, r);
    }

    /* 7: one deferred fragment per table: the next one is copied; a
     * deferred one complete before its turn waits, materialized by the
     * batch's end, and both come out in order and intact */
    memcpy(rb, msg + 5000, 2000);       /* fragment 11: 2000 bytes */
    memcpy(rb + 3000, msg, 1000);       /* fragment 10: first chunk */
    memcpy(rb + 6000, msg + 1000, 500); /* fragment 10: tail */
    ok = add_d(&t, 11, 2000, 0, rb, 1000, true, &now) && now;
    ok = ok && add_d(&t, 11, 2000, 1000, rb + 1000, 1000, true, NULL);
    ok = ok && NULL == usnic_reasm_pop(&t); /* 10 first */
    ok = ok && add_d(&t, 10, 1500, 0, rb + 3000, 1000, true, &now) && !now;
    usnic_reasm_materialize(&t); /* the batch ends */
    memset(rb, 0x22, 3000);
    ok = ok && add_d(&t, 10, 1500, 1000, rb + 6000, 500, true, NULL);
    r = usnic_reasm_pop(&t);
    ok = ok && NULL != r && 10 == r->msg_id && !r->deferred && 0 == memcmp(r->buf, msg, 1500);
    if (NULL != r) {
        usnic_reasm_release(&t, r);
    }
    r = usnic_reasm_pop(&t);
    ok =
        ok && NULL != r && 11 == r->msg_id && !r->deferred && 0 == memcmp(r->buf, msg + 5000, 2000);
    if (NULL != r) {
        usnic_reasm_release(&t, r);
    }
    check(ok, "reasm/defer_waiting_fragment_materialized", "wrong");
    usnic_reasm_table_fini(&t);
    check(a.gets == a.puts, "reasm/defer_no_leak", "gets=%d puts=%d", a.gets, a.puts);
}

/* Random fragments, chunk orders, deferral and batch ends: every chunk
 * lies in a "receive buffer" of its own, scribbled over and freed when
 * its batch ends (AddressSanitizer sees any piece used after that);
 * every fragment must come out intact, in order. */
static void test_reasm_defer_random(void)
{
    struct usnic_reasm_table t;
    struct talloc a = {0, 0, 0};
    struct usnic_reasm_alloc alloc = {t_get, t_put, &a};
    struct sim_rng rng;
    int problems = 0, in_pieces = 0, delivered = 0;
    char why[200] = "";

    check_seed = 0x5eedde7e;
    sim_rng_seed(&rng, check_seed);
    usnic_reasm_table_init(&t, 16, &alloc, 100);
    t.chunk = 700;
    for (int round = 0; round < 300; round++) {
        enum {
            NM = 6
        };
        uint64_t len[NM];
        uint8_t *msg[NM];
        struct piece pc[NM * 40];
        uint32_t order[NM * 40];
        uint8_t *held[NM * 40];
        size_t total = 0, nheld = 0;
        uint32_t first = t.next;

        for (int i = 0; i < NM; i++) {
            len[i] = 1 + sim_rng_next(&rng) % 20000;
            msg[i] = malloc((size_t) len[i]);
            for (uint64_t b = 0; b < len[i]; b++) {
                msg[i][b] = (uint8_t) sim_rng_next(&rng);
            }
            total += cut(pc + total, (uint32_t) i, len[i], 700, NULL);
        }
        for (size_t k = 0; k < total; k++) {
            order[k] = (uint32_t) k;
        }
        if (sim_rng_next(&rng) % 2) {
            sim_rng_shuffle32(&rng, order, total); /* else in order, as a clean stream */
        }
        for (size_t k = 0; k < total; k++) {
            const struct piece *p = &pc[order[k]];
            uint8_t *rbuf = malloc(p->len); /* exactly the chunk: ASan sees any overrun */
            struct usnic_reasm *r;
            memcpy(rbuf, msg[p->msg] + p->off, p->len);
            held[nheld++] = rbuf;
            if (!add_d(&t, first + p->msg, len[p->msg], p->off, rbuf, p->len,
                       0 != sim_rng_next(&rng) % 8, NULL)) {
                problems++;
                snprintf(why, sizeof(why), "chunk refused (round %d)", round);
            }
            while (NULL != (r = usnic_reasm_pop(&t))) {
                uint32_t m = r->msg_id - first;
                bool good;
                if (r->deferred) {
                    good = segs_are(&t, r, msg[m], len[m], NULL);
                    in_pieces++;
                } else {
                    good = r->msg_len == len[m] && 0 == memcmp(r->buf, msg[m], (size_t) len[m]);
                }
                if (!good || m != (uint32_t) delivered % NM) {
                    problems++;
                    snprintf(why, sizeof(why), "fragment %u wrong (round %d)", m, round);
                }
                delivered++;
                usnic_reasm_release(&t, r);
            }
            if (0 == sim_rng_next(&rng) % 5 || k + 1 == total) {
                /* the batch ends: pieces copied in, buffers reused */
                usnic_reasm_materialize(&t);
                for (size_t h = 0; h < nheld; h++) {
                    memset(held[h], 0x5A, 1);
                    free(held[h]);
                }
                nheld = 0;
            }
        }
        for (int i = 0; i < NM; i++) {
            free(msg[i]);
        }
    }
    check(0 == problems && delivered == 300 * 6, "reasm/defer_random_intact",
          "%d problems (%d delivered), first: %s", problems, delivered, why);
    check(in_pieces > 50, "reasm/defer_random_pieces_used", "only %d handed over as pieces",
          in_pieces);
    usnic_reasm_table_fini(&t);
    check(a.gets == a.puts, "reasm/defer_random_no_leak", "gets=%d puts=%d", a.gets, a.puts);
}

static void test_reasm_check(void)
{
    struct usnic_reasm_table t;
    struct talloc a = {0, 0, 0};
    struct usnic_reasm_alloc alloc = {t_get, t_put, &a};
    struct usnic_reasm *done = NULL;
    uint8_t data[1400];
    enum usnic_drop_reason r;
    bool ok;

    check_seed = 0;
    memset(data, 1, sizeof(data));
    usnic_reasm_table_init(&t, 4, &alloc, 10); /* fragments 10..13 may arrive */
    /* no slots until a fragment needs one: every slot reads as free */
    check(NULL == t.slots && NULL == usnic_reasm_pop(&t) &&
              NULL == usnic_reasm_dest(&t, 10, 5000) &&
              USNIC_PKT_OK == usnic_reasm_check(&t, 11, 5000, 7, false) && NULL == t.slots,
          "reasm/slots_allocated_when_first_needed", "slots %p before any fragment",
          (void *) t.slots);
    check(USNIC_PKT_OK == usnic_reasm_check(&t, 10, 5000, 7, false) &&
              USNIC_PKT_OK == usnic_reasm_check(&t, 13, 5000, 7, false) &&
              USNIC_PKT_OK == usnic_reasm_check(&t, 13, 50, 7, true),
          "reasm/check_free_slot_ok", "not OK");
    check(USNIC_DROP_REASSEMBLY == usnic_reasm_check(&t, 14, 5000, 7, false) &&
              USNIC_DROP_REASSEMBLY == usnic_reasm_check(&t, 14, 50, 7, true) &&
              USNIC_DROP_REASSEMBLY == usnic_reasm_check(&t, 10 + 0x7FFFFFFFu, 50, 7, true),
          "reasm/check_beyond_table_is_reassembly", "accepted");
    check(USNIC_DROP_CHUNK_RANGE == usnic_reasm_check(&t, 9, 5000, 7, false) &&
              USNIC_DROP_CHUNK_RANGE == usnic_reasm_check(&t, 9, 50, 7, true) &&
              USNIC_DROP_CHUNK_RANGE == usnic_reasm_check(&t, 10 + 0x80000000u, 50, 7, true),
          "reasm/check_before_next_is_chunk_range", "accepted");
    r = usnic_reasm_add(&t, 10, 5000, 0, data, 1400, 7); /* slot 2 */
    check(NULL != t.slots && USNIC_REASM_PARTIAL == t.slots[2].state,
          "reasm/slots_allocated_at_first_fragment", "slots %p", (void *) t.slots);
    ok = USNIC_PKT_OK == r && NULL == usnic_reasm_pop(&t);
    check(ok && USNIC_PKT_OK == usnic_reasm_check(&t, 10, 5000, 7, false),
          "reasm/check_same_fragment_ok", "r=%s", usnic_drop_reason_name(r));
    check(USNIC_DROP_CHUNK_RANGE == usnic_reasm_check(&t, 10, 5001, 7, false) &&
              USNIC_DROP_CHUNK_RANGE == usnic_reasm_check(&t, 10, 4999, 7, false) &&
              USNIC_DROP_CHUNK_RANGE == usnic_reasm_check(&t, 10, UINT64_MAX, 7, false),
          "reasm/check_other_msg_len_is_chunk_range", "different msg_len accepted");
    check(USNIC_DROP_CHUNK_RANGE == usnic_reasm_check(&t, 10, 5000, 8, false),
          "reasm/check_other_tag_is_chunk_range", "different tag accepted");
    check(USNIC_DROP_CHUNK_RANGE == usnic_reasm_check(&t, 10, 5000, 7, true),
          "reasm/check_whole_on_partial_is_chunk_range", "a FRAG with a chunked one's number");

    /* 11 and 12 arrive whole before 10 is complete: held, then all three in order */
    r = usnic_reasm_hold(&t, 12, data, 100, 3);
    ok = USNIC_PKT_OK == r && USNIC_DROP_CHUNK_RANGE == usnic_reasm_check(&t, 12, 100, 3, true);
    r = usnic_reasm_hold(&t, 11, data, 0, 3);
    ok = ok && USNIC_PKT_OK == r && !usnic_reasm_is_next(&t, 11) && NULL == usnic_reasm_pop(&t);
    check(ok, "reasm/whole_fragments_wait_for_their_turn", "r=%s", usnic_drop_reason_name(r));
    usnic_reasm_add(&t, 10, 5000, 1400, data, 1400, 7);
    usnic_reasm_add(&t, 10, 5000, 2800, data, 1400, 7);
    ok = NULL == usnic_reasm_pop(&t);
    usnic_reasm_add(&t, 10, 5000, 4200, data, 800, 7);
    done = usnic_reasm_pop(&t);
    ok = ok && NULL != done && done->msg_id == 10 && done->msg_len == 5000 &&
         done->received == 5000 && 11 == t.next;
    /* while 10 is being handed over, its slot is busy for 14 */
    ok = ok && USNIC_DROP_REASSEMBLY == usnic_reasm_check(&t, 14, 5000, 7, false);
    if (done) {
        usnic_reasm_release(&t, done);
    }
    done = usnic_reasm_pop(&t);
    ok = ok && NULL != done && 11 == done->msg_id && 0 == done->msg_len;
    if (done) {
        usnic_reasm_release(&t, done);
    }
    done = usnic_reasm_pop(&t);
    ok = ok && NULL != done && 12 == done->msg_id && 100 == done->msg_len && 3 == done->tag;
    if (done) {
        usnic_reasm_release(&t, done);
    }
    check(ok && NULL == usnic_reasm_pop(&t) && 13 == t.next &&
              USNIC_PKT_OK == usnic_reasm_check(&t, 14, 5000, 7, false) &&
              USNIC_DROP_CHUNK_RANGE == usnic_reasm_check(&t, 12, 100, 3, true),
          "reasm/delivered_in_number_order", "order or release wrong");

    /* no buffer: REASSEMBLY, nothing half-set-up left behind */
    a.fail = 1;
    r = usnic_reasm_add(&t, 13, 3000, 0, data, 1400, 2);
    ok = USNIC_DROP_REASSEMBLY == r && USNIC_REASM_FREE == t.slots[1].state &&
         USNIC_PKT_OK == usnic_reasm_check(&t, 13, 10, 1, true);
    a.fail = 1;
    r = usnic_reasm_hold(&t, 14, data, 10, 2);
    ok = ok && USNIC_DROP_REASSEMBLY == r && USNIC_REASM_FREE == t.slots[2].state;
    r = usnic_reasm_add(&t, 13, 3000, 0, data, 1400, 2);
    check(ok && USNIC_PKT_OK == r && USNIC_REASM_PARTIAL == t.slots[1].state &&
              t.slots[1].msg_id == 13,
          "reasm/alloc_failure_is_reassembly_and_retryable", "r=%s", usnic_drop_reason_name(r));

    /* fini returns the buffers of fragments under way or waiting */
    usnic_reasm_table_fini(&t);

    /* 62 slots become 64: consecutive numbers across the 32-bit wrap never
     * share a slot (with msg_id % 62, 0xFFFFFFFC and 0 did) */
    usnic_reasm_table_init(&t, 62, &alloc, 0xFFFFFFF0u);
    ok = 64 == t.nslots;
    for (uint32_t k = 0; k < 64; k++) {
        uint32_t id = 0xFFFFFFF0u + k;
        ok = ok && USNIC_PKT_OK == usnic_reasm_check(&t, id, 10, 1, true) &&
             USNIC_PKT_OK == usnic_reasm_hold(&t, id, data, 10, 1);
    }
    ok = ok && USNIC_DROP_REASSEMBLY == usnic_reasm_check(&t, 0xFFFFFFF0u + 64u, 10, 1, true);
    for (uint32_t k = 0; ok && k < 64; k++) {
        done = usnic_reasm_pop(&t);
        ok = NULL != done && done->msg_id == 0xFFFFFFF0u + k;
        if (done) {
            usnic_reasm_release(&t, done);
        }
    }
    check(ok && 0x30u == t.next, "reasm/table_power_of_two_across_wrap", "nslots=%u next=%#x",
          t.nslots, t.next);
    usnic_reasm_hold(&t, 0x35u, data, 10, 2);
    usnic_reasm_hold(&t, 15, data, 10, 2);
    usnic_reasm_table_fini(&t);
    check(a.gets == a.puts, "reasm/fini_releases_active", "gets=%d puts=%d", a.gets, a.puts);
}

/* ================================================================ registrations */

static void test_reg_direct(void)
{
    struct usnic_reg_table t;
    static uint8_t bufs[3][4096];
    uint64_t k[3], stale, fresh;
    uint8_t *dest = NULL;
    struct sim_rng rng;
    bool ok = true;
    int bad;

    check_seed = 0x5E6;
    sim_rng_seed(&rng, check_seed);
    usnic_reg_table_init(&t);
    for (int i = 0; i < 3; i++) {
        ok = ok && 0 == usnic_reg_add(&t, (uint64_t) (uintptr_t) bufs[i], 4096, &k[i]);
    }
    ok = ok && t.count == 3 && k[0] != k[1] && k[1] != k[2];
    for (int i = 0; i < 3; i++) {
        ok = ok && USNIC_PKT_OK == usnic_reg_resolve(&t, k[i], 0, 4096, &dest) && dest == bufs[i];
        ok = ok && USNIC_PKT_OK == usnic_reg_resolve(&t, k[i], 1000, 24, &dest) &&
             dest == bufs[i] + 1000;
        ok = ok && USNIC_PKT_OK == usnic_reg_resolve(&t, k[i], 4095, 1, &dest) &&
             dest == bufs[i] + 4095;
    }
    check(ok, "reg/put_inside_resolves_to_right_address", "resolve inside a registration wrong");

    {
        struct {
            const char *name;
            uint64_t off, len;
        } out[] = {
            {"offset_past_end", 4097, 1},
            {"offset_at_end", 4096, 1},
            {"offset_far_past_end", 1ull << 40, 1},
            {"length_past_end", 0, 4097},
            {"straddles_end", 4090, 7},
            {"offset_plus_len_overflows", UINT64_MAX - 5, 10},
            {"len_wraps_sum_small", 5, UINT64_MAX - 2},
            {"both_max", UINT64_MAX, UINT64_MAX},
        };
        for (size_t i = 0; i < sizeof(out) / sizeof(out[0]); i++) {
            char name[96];
            enum usnic_drop_reason r;
            dest = NULL;
            r = usnic_reg_resolve(&t, k[1], out[i].off, out[i].len, &dest);
            snprintf(name, sizeof(name), "reg/outside_%s", out[i].name);
            check(USNIC_DROP_PUT_RANGE == r && NULL == dest, name, "r=%s dest=%p",
                  usnic_drop_reason_name(r), (void *) dest);
        }
    }

    /* deregistered */
    stale = k[1];
    ok = 0 == usnic_reg_remove(&t, stale) && t.count == 2;
    check(ok && USNIC_DROP_PUT_RANGE == usnic_reg_resolve(&t, stale, 0, 1, &dest) &&
              -1 == usnic_reg_remove(&t, stale),
          "reg/deregistered_key_rejected", "stale key still resolves or removes twice");

    /* the slot is reused with a new generation: the old key stays dead */
    ok = 0 == usnic_reg_add(&t, (uint64_t) (uintptr_t) bufs[1], 100, &fresh);
    check(ok && (uint32_t) fresh == (uint32_t) stale && fresh != stale &&
              USNIC_DROP_PUT_RANGE == usnic_reg_resolve(&t, stale, 0, 1, &dest) &&
              USNIC_PKT_OK == usnic_reg_resolve(&t, fresh, 0, 100, &dest) && dest == bufs[1] &&
              USNIC_DROP_PUT_RANGE == usnic_reg_resolve(&t, fresh, 0, 101, &dest),
          "reg/stale_generation_after_reuse_rejected", "fresh=%#" PRIx64 " stale=%#" PRIx64, fresh,
          stale);

    /* while a slot is free, the key it will hand out next must not work either */
    {
        uint64_t next_key, k2;
        ok = 0 == usnic_reg_remove(&t, k[2]);
        next_key = k[2] + (1ull << 32);
        ok = ok && USNIC_DROP_PUT_RANGE == usnic_reg_resolve(&t, next_key, 0, 1, &dest) &&
             USNIC_DROP_PUT_RANGE == usnic_reg_resolve(&t, k[2], 0, 1, &dest);
        ok = ok && 0 == usnic_reg_add(&t, (uint64_t) (uintptr_t) bufs[2], 4096, &k2) &&
             k2 == next_key;
        k[2] = k2;
        check(ok, "reg/free_slot_next_generation_key_rejected",
              "a key for a free slot resolved (freed registration still reachable)");
    }

    /* random keys, keys with a live index and a wrong generation, generation 0 */
    bad = 0;
    for (int i = 0; i < 100000; i++) {
        uint64_t key = sim_rng_next(&rng);
        if (i % 3 == 1) {
            key = (key & 0xFFFFFFFF00000000ull) | (uint32_t) k[i % 3];
        } else if (i % 3 == 2) {
            key = (uint32_t) k[0]; /* generation 0 is never handed out */
        }
        if (key == k[0] || key == k[2] || key == fresh) {
            continue;
        }
        if (USNIC_DROP_PUT_RANGE != usnic_reg_resolve(&t, key, 0, 1, &dest)) {
            bad++;
        }
    }
    check(0 == bad, "reg/random_keys_rejected", "%d random keys resolved", bad);

    /* growth past the initial capacity, removal of every other one, reuse */
    {
        enum {
            N = 300
        };
        static uint8_t big[N][16];
        uint64_t keys[N];
        ok = true;
        for (int i = 0; i < N; i++) {
            ok = ok && 0 == usnic_reg_add(&t, (uint64_t) (uintptr_t) big[i], 16, &keys[i]);
        }
        for (int i = 0; i < N; i += 2) {
            ok = ok && 0 == usnic_reg_remove(&t, keys[i]);
        }
        for (int i = 0; i < N; i++) {
            enum usnic_drop_reason r = usnic_reg_resolve(&t, keys[i], 8, 8, &dest);
            ok = ok &&
                 ((i & 1) ? (USNIC_PKT_OK == r && dest == big[i] + 8) : USNIC_DROP_PUT_RANGE == r);
        }
        ok = ok && t.count == 3 + N / 2;
        check(ok, "reg/growth_and_reuse", "count=%u", t.count);
    }
    usnic_reg_table_fini(&t);
}

/* Keys enciphered under a secret: a permutation (deciphering undoes it,
 * distinct inputs stay distinct), they look nothing like (generation,
 * index), and neither the plain form nor a neighbour of a live key names
 * anything. */
static void test_reg_keyed(void)
{
    struct usnic_reg_table t;
    struct usnic_sip_key k, k2;
    static uint8_t bufs[64][64];
    uint64_t keys[64];
    uint8_t secret[16], *dest = NULL;
    struct sim_rng rng;
    int bad_inverse = 0, plainish = 0, guessed = 0, found = 0;

    check_seed = 0x5E7;
    sim_rng_seed(&rng, check_seed);
    for (int i = 0; i < 16; i++) {
        secret[i] = (uint8_t) sim_rng_next(&rng);
    }
    usnic_sip_key_load(&k, secret);
    secret[0] ^= 1;
    usnic_sip_key_load(&k2, secret);
    for (int i = 0; i < 100000; i++) {
        uint64_t x = (i & 1) ? sim_rng_next(&rng) : (uint64_t) i;
        uint64_t y = usnic_reg_encipher(&k, x);
        bad_inverse += usnic_reg_decipher(&k, y) != x || (0 != i && y == x);
    }
    check(0 == bad_inverse && usnic_reg_encipher(&k, 1) != usnic_reg_encipher(&k2, 1),
          "reg/keyed_permutation_inverts_and_depends_on_secret", "%d bad", bad_inverse);

    usnic_reg_table_init(&t);
    usnic_reg_table_set_key(&t, &k);
    for (int i = 0; i < 64; i++) {
        if (0 != usnic_reg_add(&t, (uint64_t) (uintptr_t) bufs[i], sizeof(bufs[i]), &keys[i])) {
            keys[i] = 0;
        }
        /* (generation 1, index i) in the clear would have the high word 1 */
        plainish += (keys[i] >> 32) == 1 || (keys[i] & 0xffffffffu) == (uint64_t) i;
    }
    for (int i = 0; i < 64; i++) {
        found += USNIC_PKT_OK == usnic_reg_resolve(&t, keys[i], 0, 64, &dest) && dest == bufs[i];
        /* the old, plain format and neighbours of live keys */
        guessed += USNIC_PKT_OK == usnic_reg_resolve(&t, (1ull << 32) | (uint64_t) i, 0, 1, &dest);
        guessed += USNIC_PKT_OK == usnic_reg_resolve(&t, (uint64_t) i, 0, 1, &dest);
        guessed += USNIC_PKT_OK == usnic_reg_resolve(&t, keys[i] + 1, 0, 1, &dest);
        guessed += USNIC_PKT_OK == usnic_reg_resolve(&t, keys[i] ^ (1ull << 40), 0, 1, &dest);
    }
    for (int i = 0; i < 100000; i++) {
        guessed += USNIC_PKT_OK == usnic_reg_resolve(&t, sim_rng_next(&rng), 0, 1, &dest);
    }
    check(64 == found && 0 == guessed && plainish <= 2,
          "reg/keyed_keys_resolve_and_resist_guessing",
          "found %d of 64, %d guesses resolved, %d keys look plain", found, guessed, plainish);
    /* a removed key stays dead, also right after it was the last one resolved */
    (void) usnic_reg_resolve(&t, keys[5], 0, 1, &dest);
    (void) usnic_reg_remove(&t, keys[5]);
    check(USNIC_DROP_PUT_RANGE == usnic_reg_resolve(&t, keys[5], 0, 1, &dest) &&
              0 != usnic_reg_remove(&t, keys[5]),
          "reg/keyed_removed_key_dead", "still resolves");
    usnic_reg_table_fini(&t);
}

/* ================================================================ through the receive path */

static void sim_setup(struct sim *s, uint64_t seed)
{
    struct sim_cfg cfg;
    sim_cfg_default(&cfg);
    cfg.seed = seed;
    sim_init(s, &cfg);
}

static size_t frag_from(uint64_t *buf, uint32_t module, uint64_t key, uint32_t seq, uint32_t plen)
{
    struct usnic_pkt_hdr h;
    uint8_t pay[64];
    memset(pay, 0x3C, sizeof(pay));
    sim_hdr_init(&h, USNIC_PKT_FRAG, 0, 1, module, key, seq, 0);
    return sim_pkt_build(buf, BUFW * 8, &h, NULL, NULL, pay, plen);
}

static void test_unknown_sender(void)
{
    struct sim s;
    uint64_t buf[BUFW];
    uint8_t pay[100] = {0};
    struct usnic_pkt_hdr h;
    struct usnic_chunk_hdr ch = chunk_hdr(5000, 0);
    char why[256] = "";
    usnic_seq_t exp;
    uint64_t released;
    size_t len;
    int rc;

    check_seed = 0xB001;
    sim_setup(&s, check_seed);
    exp = s.ep[1].rel.rx.expected;

    len = frag_from(buf, 0xDEAD, 0xDEADull, exp, 32);
    sim_deliver_now(&s, SIM_B, buf, len);
    /* the right module hint, another key */
    sim_hdr_init(&h, USNIC_PKT_CHUNK, 0, 1, s.cfg.module_id[0], s.cfg.key[0] ^ 1, exp, 0);
    len = sim_pkt_build(buf, sizeof(buf), &h, &ch, NULL, pay, sizeof(pay));
    sim_seal(&s, SIM_A, buf, len);
    sim_deliver_now(&s, SIM_B, buf, len);
    check(s.ep[1].drops[USNIC_DROP_SENDER] == 2 && s.ep[1].rx_nlog == 0 &&
              0 == s.ep[1].st.unexpected && s.ep[1].rel.rx.expected == exp &&
              0 == s.ep[1].st.reasm_live && !s.ep[1].rel.rx.ack_owed,
          "sender/unknown_module_dropped_not_delivered", "SENDER=%" PRIu64 " delivered=%zu",
          s.ep[1].drops[USNIC_DROP_SENDER], s.ep[1].rx_nlog);

    /* A's key (an on-path reader knows it), but no MAC, or one made with
     * another secret: AUTH drops; sealed by A and then a bit flipped on
     * the way: a CHECKSUM drop; nothing of them is taken */
    len = frag_from(buf, s.cfg.module_id[0], s.cfg.key[0], exp, 32);
    usnic_pkt_seal((uint8_t *) buf, len, NULL, 0, &s.ep[0].mac_key, NULL, 0,
                   true); /* CRC, no MAC */
    sim_deliver_now(&s, SIM_B, buf, len);
    sim_seal(&s, SIM_B, buf, len); /* B's secret, A's key */
    sim_deliver_now(&s, SIM_B, buf, len);
    check(s.ep[1].drops[USNIC_DROP_AUTH] == 2 && s.ep[1].rel.rx.expected == exp &&
              s.ep[1].rx_nlog == 0,
          "sender/forged_with_known_key_dropped", "AUTH=%" PRIu64, s.ep[1].drops[USNIC_DROP_AUTH]);
    sim_seal(&s, SIM_A, buf, len);
    ((uint8_t *) buf)[len - 1] ^= 0x20;
    sim_deliver_now(&s, SIM_B, buf, len);
    check(s.ep[1].drops[USNIC_DROP_CHECKSUM] == 1 && s.ep[1].rel.rx.expected == exp &&
              s.ep[1].rx_nlog == 0,
          "sender/corrupted_payload_dropped", "CHECKSUM=%" PRIu64,
          s.ep[1].drops[USNIC_DROP_CHECKSUM]);
    ((uint8_t *) buf)[len - 1] ^= 0x20;
    check(USNIC_PKT_OK == usnic_pkt_verify((const uint8_t *) buf, len, &s.ep[0].mac_key, NULL,
                                           s.cfg.auth, s.cfg.crc),
          "sender/same_packet_sealed_by_sender_verifies", "rejected");

    /* an ACK from an unknown module releases nothing */
    for (int k = 0; k < 20; k++) {
        sim_send(&s, SIM_A, 500, 1);
    }
    sim_step(&s);
    released = s.ep[0].st.released;
    sim_hdr_init(&h, USNIC_PKT_ACK, USNIC_PKT_FLAG_ACK, 0, 0xDEAD, 0xDEADull, 0,
                 s.ep[0].rel.tx.next - 1u);
    len = sim_pkt_build(buf, sizeof(buf), &h, NULL, NULL, NULL, 0);
    sim_deliver_now(&s, SIM_A, buf, len);
    check(s.ep[0].drops[USNIC_DROP_SENDER] == 1 && s.ep[0].st.released == released &&
              usnic_rel_tx_inflight(&s.ep[0].rel) == 20,
          "sender/unknown_module_ack_releases_nothing", "released %" PRIu64 " -> %" PRIu64,
          released, s.ep[0].st.released);

    /* a module B stops recognising: everything from it is dropped, nothing delivered */
    sim_forget_sender(&s, SIM_B, s.cfg.key[0]);
    rc = sim_run(&s, 50 * 1000000ull);
    check(0 != rc && s.ep[1].drops[USNIC_DROP_SENDER] > 20 && s.ep[1].rx_nlog == 0 &&
              s.ep[0].msgs[0].delivered == 0,
          "sender/forgotten_module_never_delivered", "rc=%d SENDER=%" PRIu64 " delivered=%zu", rc,
          s.ep[1].drops[USNIC_DROP_SENDER], s.ep[1].rx_nlog);
    sim_fini(&s);

    /* sanity: the same traffic from a known module is delivered */
    sim_setup(&s, check_seed);
    for (int k = 0; k < 20; k++) {
        sim_send(&s, SIM_A, 500, 1);
    }
    rc = sim_run(&s, 1000 * 1000000ull);
    rc = (0 == rc) ? sim_verify(&s, why, sizeof(why)) : -1;
    check(0 == rc && 0 == s.ep[1].drops[USNIC_DROP_SENDER], "sender/known_module_delivered",
          "%s %s", why, s.err);
    sim_fini(&s);
}

#define ZG 64

/* Deliver one PUT datagram with the next sequence number from A: it must be a
 * PUT_RANGE drop that writes nothing into mem (compared with snap, or with the
 * 0x22 fill when snap is NULL). */
static void bad_put(struct sim *s, const char *name, uint64_t key, uint64_t reg_off,
                    uint64_t msg_len, uint64_t off, uint32_t plen, const uint8_t *mem,
                    const uint8_t *snap, size_t memlen)
{
    uint64_t buf[BUFW];
    uint8_t pay[200];
    struct usnic_pkt_hdr h;
    struct usnic_chunk_hdr ch = chunk_hdr(msg_len, off);
    struct usnic_put_hdr ph = put_hdr(key, reg_off);
    usnic_seq_t exp = s->ep[1].rel.rx.expected;
    uint64_t drops = s->ep[1].drops[USNIC_DROP_PUT_RANGE];
    bool same = true;
    size_t len;

    memset(pay, 0x99, sizeof(pay));
    sim_hdr_init(&h, USNIC_PKT_PUT, USNIC_PKT_FLAG_ACK, 0, s->cfg.module_id[0], s->cfg.key[0], exp,
                 s->ep[1].rel.tx.acked);
    len = sim_pkt_build(buf, sizeof(buf), &h, &ch, &ph, pay, plen);
    sim_seal(s, SIM_A, buf, len);
    sim_deliver_now(s, SIM_B, buf, len);
    for (size_t i = 0; i < memlen; i++) {
        same = same && mem[i] == (snap ? snap[i] : 0x22);
    }
    check(same && s->ep[1].drops[USNIC_DROP_PUT_RANGE] == drops + 1 &&
              s->ep[1].rel.rx.expected == exp && 0 == s->ep[1].st.unexpected,
          name, "PUT_RANGE %" PRIu64 " -> %" PRIu64 ", expected %u -> %u, memory %s", drops,
          s->ep[1].drops[USNIC_DROP_PUT_RANGE], exp, s->ep[1].rel.rx.expected,
          same ? "untouched" : "WRITTEN");
}

static void test_put_end_to_end(void)
{
    struct sim s;
    const size_t zlen = 40000;
    uint8_t *zone = malloc(zlen + 2 * ZG), *expect = malloc(zlen + 2 * ZG), *snap;
    uint64_t key, key2, key3;
    uint8_t *other, *other2;
    char why[256] = "", sum[1024];
    bool ok;
    int rc;

    check_seed = 0xC001;
    sim_setup(&s, check_seed);
    s.cfg.max_msg_len = 4096; /* PUTs are bounded by their registration, not this */
    memset(zone, 0xEE, zlen + 2 * ZG);
    usnic_reg_add(&s.ep[1].reg, (uint64_t) (uintptr_t) (zone + ZG), zlen, &key);

    sim_put(&s, SIM_A, key, 0, 5000);
    sim_put(&s, SIM_A, key, 7000, 1);
    sim_put(&s, SIM_A, key, 10000, zlen - 10000); /* up to the last byte */
    sim_send(&s, SIM_A, 3000, 5);
    rc = sim_run(&s, 1000 * 1000000ull);
    sim_summary(&s, sum, sizeof(sum));
    rc = (0 == rc) ? sim_verify(&s, why, sizeof(why)) : -1;

    memset(expect, 0xEE, zlen + 2 * ZG);
    for (uint32_t i = 0; i < 3; i++) {
        const struct sim_msg *m = &s.ep[0].msgs[i];
        sim_msg_fill(m->key, 0, expect + ZG + m->reg_offset, (size_t) m->len);
    }
    check(0 == rc && 0 == memcmp(zone, expect, zlen + 2 * ZG),
          "put/lands_exact_bytes_guards_intact", "%s %s; %s", why, s.err, sum);

    /* bad PUTs, each the next sequence number from A: dropped, nothing written */
    snap = malloc(zlen + 2 * ZG);
    memcpy(snap, zone, zlen + 2 * ZG);
    bad_put(&s, "put/bad_offset_past_end", key, 40001, 10, 0, 10, zone, snap, zlen + 2 * ZG);
    bad_put(&s, "put/bad_length_past_end", key, 39990, 100, 0, 100, zone, snap, zlen + 2 * ZG);
    bad_put(&s, "put/bad_chunk_past_registration_end", key, 30000, 10001, 10000, 1, zone, snap,
            zlen + 2 * ZG);
    bad_put(&s, "put/bad_overflow", key, UINT64_MAX - 50, 100, 0, 100, zone, snap, zlen + 2 * ZG);
    bad_put(&s, "put/bad_random_key", 0x5A5A5A5A00000007ull, 0, 16, 0, 16, zone, snap,
            zlen + 2 * ZG);

    /* deregistered, its memory freed: a wrongly accepted PUT is a use-after-free */
    other = malloc(256);
    usnic_reg_add(&s.ep[1].reg, (uint64_t) (uintptr_t) other, 256, &key2);
    usnic_reg_remove(&s.ep[1].reg, key2);
    free(other);
    bad_put(&s, "put/bad_deregistered_key", key2, 0, 16, 0, 16, zone, snap, zlen + 2 * ZG);

    /* the slot reused by a new registration: the old key must not reach it */
    other2 = malloc(256);
    memset(other2, 0x22, 256);
    usnic_reg_add(&s.ep[1].reg, (uint64_t) (uintptr_t) other2, 256, &key3);
    memcpy(snap, zone, zlen + 2 * ZG);
    bad_put(&s, "put/bad_stale_generation_key", key2, 0, 16, 0, 16, other2, NULL, 256);
    check((uint32_t) key3 == (uint32_t) key2 && key3 != key2, "put/stale_key_slot_was_reused",
          "key2=%#" PRIx64 " key3=%#" PRIx64, key2, key3);
    ok = 0 == memcmp(zone, snap, zlen + 2 * ZG);
    check(ok, "put/zone_untouched_by_bad_puts", "zone modified");

    free(snap);
    free(other2);
    sim_fini(&s);
    free(zone);
    free(expect);
}

/* ================================================================ dump */

static bool has(const char *s, const char *sub)
{
    return NULL != strstr(s, sub);
}

static void test_dump(void)
{
    uint64_t buf[BUFW];
    char out[1024], full[1024];
    struct usnic_pkt_hdr h;
    struct usnic_chunk_hdr ch = chunk_hdr(123456789012ull, 1400);
    struct usnic_put_hdr ph = put_hdr(0xFEDCBA9876543210ull, 98765);
    uint8_t pay[5] = {1, 2, 3, 4, 5};
    size_t len, n;
    bool ok;
    int bad;

    check_seed = 0;
    sim_hdr_init(&h, USNIC_PKT_PUT, 0x03, 0xAB, 0x12345678u, KEY, 4000000000u, 3999999999u);
    h.msg_id = 77;
    len = sim_pkt_build(buf, sizeof(buf), &h, &ch, &ph, pay, sizeof(pay));
    n = usnic_pkt_dump(buf, len, full, sizeof(full));
    {
        char version[32];
        const char *want[] = {version,
                              "type=PUT",
                              "flags=0x03",
                              "tag=171",
                              "src_module=305419896",
                              "sender_key=0x0123456789abcdef",
                              "lane=0 reserved=0x00 allow=0",
                              "crc=0x",
                              "mac=0x",
                              " seq=4000000000",
                              "ack_seq=3999999999",
                              "payload_len=5",
                              "msg_id=77",
                              "msg_len=123456789012",
                              " offset=1400",
                              "reg_key=0xfedcba9876543210",
                              "reg_offset=98765"};
        const char *missing = NULL;
        snprintf(version, sizeof(version), "version=%d", USNIC_PROTO_VERSION);
        for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
            if (!has(full, want[i])) {
                missing = want[i];
                break;
            }
        }
        check(NULL == missing && n == strlen(full), "dump/put_names_every_field",
              "missing \"%s\" in \"%s\"", missing ? missing : "", full);
    }

    sim_hdr_init(&h, USNIC_PKT_CHUNK, 0x01, 3, 9, KEY, 5, 4);
    h.msg_id = 77;
    len = sim_pkt_build(buf, sizeof(buf), &h, &ch, NULL, pay, sizeof(pay));
    n = usnic_pkt_dump(buf, len, out, sizeof(out));
    check(has(out, "type=CHUNK") && has(out, "msg_id=77") && has(out, "msg_len=123456789012") &&
              has(out, " offset=1400") && !has(out, "reg_key") && has(out, " seq=5") &&
              has(out, "ack_seq=4") && has(out, "tag=3") && has(out, "src_module=9") &&
              n == strlen(out),
          "dump/chunk_fields", "\"%s\"", out);

    sim_hdr_init(&h, USNIC_PKT_FRAG, 0, 3, 9, KEY, 5, 4);
    len = sim_pkt_build(buf, sizeof(buf), &h, NULL, NULL, pay, sizeof(pay));
    usnic_pkt_dump(buf, len, out, sizeof(out));
    ok = has(out, "type=FRAG") && has(out, "payload_len=5") && has(out, "msg_id=0") &&
         !has(out, "msg_len");
    sim_hdr_init(&h, USNIC_PKT_ACK, 1, 0, 9, KEY, 0, 4);
    len = sim_pkt_build(buf, sizeof(buf), &h, NULL, NULL, NULL, 0);
    usnic_pkt_dump(buf, len, out, sizeof(out));
    ok = ok && has(out, "type=ACK") && has(out, "ack_seq=4") && !has(out, "msg_len");
    H(buf)->type = 9;
    usnic_pkt_dump(buf, len, out, sizeof(out));
    ok = ok && has(out, "type=UNKNOWN") && has(out, "(9)");
    check(ok, "dump/frag_ack_unknown_types", "\"%s\"", out);

    {
        struct usnic_sack sk = {0x00000000DEADBEEFull};
        int tbad = 0;
        sim_hdr_init(&h, USNIC_PKT_ACK, USNIC_PKT_FLAG_ACK | USNIC_PKT_FLAG_SACK, 0, 9, KEY, 0, 4);
        len = sim_pkt_build(buf, sizeof(buf), &h, NULL, NULL, &sk, sizeof(sk));
        n = usnic_pkt_dump(buf, len, out, sizeof(out));
        ok = has(out, "sack=0x00000000deadbeef") && has(out, "flags=0x05") && n == strlen(out);
        for (size_t l = sizeof(h); l < len; l++) { /* bitmap cut short: not printed, not read */
            uint8_t *copy = malloc(l);
            memcpy(copy, buf, l);
            usnic_pkt_dump(copy, l, out, sizeof(out));
            free(copy);
            tbad += has(out, "sack=");
        }
        check(ok && 0 == tbad, "dump/sack_bitmap", "\"%s\" truncated-bad=%d", out, tbad);
    }

    /* truncated datagrams (exact-size copies): never reads past len */
    sim_hdr_init(&h, USNIC_PKT_PUT, 0x03, 0xAB, 0x12345678u, KEY, 4000000000u, 3999999999u);
    h.msg_id = 77;
    len = sim_pkt_build(buf, sizeof(buf), &h, &ch, &ph, pay, sizeof(pay));
    bad = 0;
    for (size_t l = 0; l <= len; l++) {
        uint8_t *copy = malloc(l ? l : 1);
        memcpy(copy, buf, l);
        n = usnic_pkt_dump(copy, l, out, sizeof(out));
        free(copy);
        ok = n == strlen(out);
        if (l < sizeof(struct usnic_pkt_hdr)) {
            ok = ok && has(out, "short");
        } else if (l < USNIC_HDR_LEN_CHUNK) {
            ok = ok && has(out, "msg_id=77") && !has(out, "msg_len");
        } else if (l < USNIC_HDR_LEN_PUT) {
            ok = ok && has(out, "msg_len=123456789012") && !has(out, "reg_key");
        } else {
            ok = ok && has(out, "reg_offset=98765");
        }
        bad += !ok;
    }
    n = usnic_pkt_dump(NULL, 100, out, sizeof(out));
    check(0 == bad && n == strlen(out) && has(out, "short"), "dump/truncated_packets", "%d bad",
          bad);

    /* every output size, exact-size output buffers: no overrun, NUL-terminated prefix */
    n = usnic_pkt_dump(buf, len, full, sizeof(full));
    bad = 0;
    for (size_t ol = 0; ol <= n + 2; ol++) {
        char *o = malloc(ol ? ol : 1);
        size_t m;
        o[0] = 'X';
        m = usnic_pkt_dump(buf, len, o, ol);
        if (0 == ol) {
            bad += (0 != m || 'X' != o[0]);
        } else {
            bad += (m != strlen(o) || m >= ol || m != (ol - 1 < n ? ol - 1 : n) ||
                    0 != strncmp(o, full, m));
        }
        free(o);
    }
    for (size_t ol = 0; ol < 40; ol++) { /* tiny outputs for short packets too */
        char *o = malloc(ol ? ol : 1);
        size_t m = usnic_pkt_dump(buf, 7, o, ol);
        bad += ol ? (m != strlen(o) || m >= ol) : (0 != m);
        free(o);
    }
    check(0 == bad, "dump/every_outlen_no_overrun", "%d bad sizes", bad);
}

/*
 * The packet MAC (auth header; the input reorders the header fields, see
 * btl_usnic_proto.c): a bit flipped anywhere in what it covers is caught,
 * by parsing or by the MAC, also by a receiver whose memo holds the
 * original's first words; the payload is covered with auth full only.  A
 * train of PUT chunks sealed with a memo gets the tags it gets without
 * one, the memo resuming for every chunk but the first and the shorter
 * last one, and so does the receiver's.
 */
static void test_mac(void)
{
    uint64_t buf[BUFW], orig[BUFW];
    uint8_t kb[16], pay[1400], sack[16];
    struct usnic_sip_key key;
    struct usnic_sip_memo txm, rxm;
    struct usnic_chunk_hdr ch = chunk_hdr(10000, 1400);
    struct usnic_put_hdr ph = put_hdr(0x100000003ull, 64);
    struct usnic_pkt_view v;
    static const unsigned types[] = {USNIC_PKT_FRAG, USNIC_PKT_CHUNK, USNIC_PKT_PUT, USNIC_PKT_ACK};

    check_seed = 0x3ac;
    for (int i = 0; i < 16; i++) {
        kb[i] = (uint8_t) (7 * i + 1);
        sack[i] = (uint8_t) (0x11 * i);
    }
    usnic_sip_key_load(&key, kb);
    sim_msg_fill(7, 0, pay, sizeof(pay));

    for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
        unsigned type = types[t];
        size_t len, mac_hdr;
        long missed = -1, flips = 0;
        bool ok_after, payload_free, payload_full;

        switch (type) {
        case USNIC_PKT_FRAG:
            len = mk(buf, type, USNIC_PKT_FLAG_ACK, NULL, NULL, pay, 100);
            break;
        case USNIC_PKT_CHUNK:
            len = mk(buf, type, USNIC_PKT_FLAG_ACK, &ch, NULL, pay, 1400);
            break;
        case USNIC_PKT_PUT:
            len = mk(buf, type, USNIC_PKT_FLAG_ACK, &ch, &ph, pay, 1400);
            break;
        default:
            len = mk(buf, type, USNIC_PKT_FLAG_ACK | USNIC_PKT_FLAG_SACK, NULL, NULL, sack,
                     sizeof(sack));
            break;
        }
        memset(&txm, 0, sizeof(txm));
        memset(&rxm, 0, sizeof(rxm));
        usnic_pkt_seal((uint8_t *) buf, len, NULL, 0, &key, &txm, 1, false);
        memcpy(orig, buf, len);
        mac_hdr = usnic_pkt_mac_hdr_len(type, H(buf)->payload_len);
        check(USNIC_PKT_OK == usnic_pkt_parse(buf, len, MAXMSG, &v) &&
                  USNIC_PKT_OK == usnic_pkt_verify((uint8_t *) buf, len, &key, &rxm, 1, false),
              "mac/sealed_packet_verifies", "%s", usnic_pkt_type_name(type));
        for (size_t bit = 0; bit < 8 * mac_hdr && missed < 0; bit++) {
            size_t at = bit / 8;
            if (at >= USNIC_CRC_OFFSET && at < sizeof(struct usnic_pkt_hdr)) {
                continue; /* crc and mac themselves */
            }
            memcpy(buf, orig, len);
            ((uint8_t *) buf)[at] ^= (uint8_t) (1u << (bit % 8));
            flips++;
            if (USNIC_PKT_OK == usnic_pkt_parse(buf, len, MAXMSG, &v) &&
                USNIC_DROP_AUTH != usnic_pkt_verify((uint8_t *) buf, len, &key, &rxm, 1, false)) {
                missed = (long) bit;
            }
        }
        memcpy(buf, orig, len);
        ok_after = USNIC_PKT_OK == usnic_pkt_verify((uint8_t *) buf, len, &key, &rxm, 1, false);
        check(missed < 0 && ok_after && flips == 8 * ((long) mac_hdr - 12),
              "mac/every_covered_bit_counts",
              "%s: bit %ld (byte %ld) not caught of %ld; original %s", usnic_pkt_type_name(type),
              missed, missed / 8, flips, ok_after ? "still verifies" : "rejected after");
        if (len > mac_hdr) {
            ((uint8_t *) buf)[len - 1] ^= 1;
            payload_free =
                USNIC_PKT_OK == usnic_pkt_verify((uint8_t *) buf, len, &key, &rxm, 1, false);
            memcpy(buf, orig, len);
            usnic_pkt_seal((uint8_t *) buf, len, NULL, 0, &key, &txm, 2, false);
            ((uint8_t *) buf)[len - 1] ^= 1;
            payload_full =
                USNIC_DROP_AUTH == usnic_pkt_verify((uint8_t *) buf, len, &key, &rxm, 2, false);
            check(payload_free && payload_full, "mac/payload_covered_by_auth_full_only",
                  "%s: header-only %s, full %s", usnic_pkt_type_name(type),
                  payload_free ? "ignores it" : "rejects", payload_full ? "rejects" : "accepts");
        }
    }

    /* a PUT of 10 chunks (the last one shorter), one train */
    {
        uint64_t with[10], without[10];
        bool same = true, verified = true;

        memset(&txm, 0, sizeof(txm));
        memset(&rxm, 0, sizeof(rxm));
        for (int i = 0; i < 10; i++) {
            struct usnic_chunk_hdr c = chunk_hdr(9 * 1400 + 700, (uint64_t) i * 1400);
            struct usnic_pkt_hdr h;
            size_t len;

            sim_hdr_init(&h, USNIC_PKT_PUT, USNIC_PKT_FLAG_ACK, 0, SRC, KEY, 5000u + (uint32_t) i,
                         77);
            h.msg_id = 3;
            h.ts = 1000u + (uint32_t) i / 4;
            len = sim_pkt_build(buf, sizeof(buf), &h, &c, &ph, pay, (9 == i) ? 700 : 1400);
            usnic_pkt_seal((uint8_t *) buf, len, NULL, 0, &key, NULL, 1, false);
            without[i] = H(buf)->mac;
            usnic_pkt_seal((uint8_t *) buf, len, NULL, 0, &key, &txm, 1, false);
            with[i] = H(buf)->mac;
            same = same && with[i] == without[i] && (0 == i || with[i] != with[i - 1]);
            verified = verified && USNIC_PKT_OK == usnic_pkt_parse(buf, len, MAXMSG, &v) &&
                       USNIC_PKT_OK == usnic_pkt_verify((uint8_t *) buf, len, &key, &rxm, 1, false);
        }
        check(same && verified && 8 == txm.hits && 8 == rxm.hits, "mac/train_with_memo",
              "same tags %d, verified %d, memo hits %" PRIu64 " sending, %" PRIu64 " receiving",
              same, verified, txm.hits, rxm.hits);
    }
}

/* ================================================================ padding (version 6) */

/* Parse: bytes after the payload are allowed only with USNIC_PKT_FLAG_PAD,
 * only on data datagrams, and never in place of the payload. */
/*
 * Header MACs of a train at once (usnic_pkt_macs, usnic_pkt_seal_headers):
 * random trains of FRAGs, CHUNKs, PUTs and ACKs, in runs and mixed, with
 * random header fields, with the lanes and without.  Every tag must be
 * usnic_pkt_seal()'s, every ACK and short buffer must be left to the one by
 * one path, and a sealed train must verify; one flipped header bit must
 * fail.
 */
static void test_mac_lanes(void)
{
    enum {
        N = 48,
        W = 40
    };
    static uint64_t bufs[N][W], want[N][W];
    const uint8_t *rb[N];
    uint8_t *wb[N];
    size_t lens[N];
    uint64_t tags[N];
    bool ok[N];
    uint8_t kb[16], pay[64];
    struct usnic_sip_key key;
    long bad = -1, cases = 0, acks = 0, shorts = 0;
    struct sim_rng rng;
    static const unsigned types[] = {USNIC_PKT_FRAG, USNIC_PKT_CHUNK, USNIC_PKT_PUT, USNIC_PKT_ACK};

    check_seed = 0x1a4e5;
    sim_rng_seed(&rng, check_seed);
    for (int pass = 0; pass < 2; pass++) {
        bool on = usnic_sip_lanes_select(0 == pass);
        bad = -1;

        for (long c = 0; c < 400 && bad < 0; c++) {
            unsigned n = (unsigned) (sim_rng_next(&rng) % (N + 1));
            unsigned run_type = types[sim_rng_next(&rng) % 3];

            for (int i = 0; i < 16; i++) {
                kb[i] = (uint8_t) sim_rng_next(&rng);
            }
            usnic_sip_key_load(&key, kb);
            for (unsigned i = 0; i < n; i++) {
                unsigned type =
                    (0 == sim_rng_next(&rng) % 4) ? types[sim_rng_next(&rng) % 4] : run_type;
                struct usnic_chunk_hdr ch = chunk_hdr(100000, 1400 * (sim_rng_next(&rng) % 60));
                struct usnic_put_hdr ph = put_hdr(sim_rng_next(&rng), sim_rng_next(&rng) % 4096);
                uint32_t plen = (USNIC_PKT_ACK == type)
                                    ? 8 * (uint32_t) (sim_rng_next(&rng) % 3)
                                    : (uint32_t) (sim_rng_next(&rng) % sizeof(pay));
                unsigned flags = (USNIC_PKT_ACK == type && 0 != plen)
                                     ? USNIC_PKT_FLAG_ACK | USNIC_PKT_FLAG_SACK
                                     : USNIC_PKT_FLAG_ACK;
                struct usnic_pkt_hdr *h;

                for (size_t k = 0; k < sizeof(pay); k++) {
                    pay[k] = (uint8_t) sim_rng_next(&rng);
                }
                lens[i] = mk(bufs[i], type, flags,
                             (USNIC_PKT_FRAG == type || USNIC_PKT_ACK == type) ? NULL : &ch,
                             (USNIC_PKT_PUT == type) ? &ph : NULL, pay, plen);
                h = H(bufs[i]);
                h->seq = (uint32_t) sim_rng_next(&rng);
                h->ack_seq = (uint32_t) sim_rng_next(&rng);
                h->ts = (uint32_t) sim_rng_next(&rng);
                h->msg_id = (uint32_t) sim_rng_next(&rng);
                if (0 == sim_rng_next(&rng) % 16) {
                    lens[i] = sim_rng_next(&rng) % lens[i]; /* cut short: not for the lanes */
                }
                memcpy(want[i], bufs[i], sizeof(bufs[i]));
                if (lens[i] >= usnic_pkt_mac_hdr_len(type, h->payload_len)) {
                    usnic_pkt_seal((uint8_t *) want[i], lens[i], NULL, 0, &key, NULL, 1, false);
                }
                rb[i] = (const uint8_t *) bufs[i];
                wb[i] = (uint8_t *) bufs[i];
            }
            usnic_pkt_macs(rb, lens, n, &key, tags, ok);
            for (unsigned i = 0; i < n && bad < 0; i++) {
                const struct usnic_pkt_hdr *h = H(bufs[i]);
                size_t need = usnic_pkt_hdr_len(h->type);
                bool want_ok =
                    (lens[i] >= sizeof(*h) && USNIC_PKT_ACK != h->type && lens[i] >= need);

                acks += (USNIC_PKT_ACK == h->type);
                shorts += (lens[i] < need);
                if (ok[i] != want_ok || (ok[i] && tags[i] != H(want[i])->mac)) {
                    bad = c;
                }
            }
            /* sealing in place: the same bytes as one by one (full headers only) */
            for (unsigned i = 0; i < n; i++) {
                if (lens[i] < usnic_pkt_mac_hdr_len(H(bufs[i])->type, H(bufs[i])->payload_len)) {
                    lens[i] = 0; /* (the sender never has these) */
                    memcpy(bufs[i], want[i], sizeof(bufs[i]));
                }
            }
            {
                unsigned m = 0;
                uint8_t *sb[N];
                size_t sl[N];
                for (unsigned i = 0; i < n; i++) {
                    if (0 != lens[i]) {
                        sb[m] = wb[i];
                        sl[m++] = lens[i];
                    }
                }
                usnic_pkt_seal_headers(sb, sl, m, &key);
            }
            for (unsigned i = 0; i < n && bad < 0; i++) {
                if (0 != memcmp(bufs[i], want[i], sizeof(bufs[i])) ||
                    (0 != lens[i] &&
                     USNIC_PKT_OK != usnic_pkt_verify(wb[i], lens[i], &key, NULL, 1, false))) {
                    bad = c;
                }
            }
            if (n > 0 && 0 != lens[0] && bad < 0) {
                wb[0][20 + sim_rng_next(&rng) % 4] ^= 0x10; /* seq */
                if (USNIC_PKT_OK == usnic_pkt_verify(wb[0], lens[0], &key, NULL, 1, false)) {
                    bad = c;
                }
            }
            cases++;
        }
        check(
            bad < 0,
            "header MACs of a train at once: usnic_pkt_seal()'s tags, ACKs and short buffers left out",
            "case %ld (lanes %s)", bad, on ? "on" : "off");
    }
    usnic_sip_lanes_select(true);
    check(acks > 100 && shorts > 20, "header MACs at once: ACKs and short buffers among the cases",
          "%ld ACKs, %ld short", acks, shorts);
}

static void test_pad_parse(void)
{
    uint64_t buf[BUFW];
    uint8_t pay[300];
    struct usnic_chunk_hdr ch = chunk_hdr(1000, 900);
    struct usnic_put_hdr ph = put_hdr(0x100000003ull, 64);
    struct usnic_pkt_view v;
    static const unsigned types[] = {USNIC_PKT_FRAG, USNIC_PKT_CHUNK, USNIC_PKT_PUT};
    size_t len;

    check_seed = 0x9ad;
    memset(pay, 0x5A, sizeof(pay));
    for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
        unsigned type = types[t];
        const size_t hl = (USNIC_PKT_FRAG == type)    ? sizeof(struct usnic_pkt_hdr)
                          : (USNIC_PKT_CHUNK == type) ? USNIC_HDR_LEN_CHUNK
                                                      : USNIC_HDR_LEN_PUT;
        char name[80];
        len = mk(buf, type, USNIC_PKT_FLAG_PAD, (USNIC_PKT_FRAG == type) ? NULL : &ch,
                 (USNIC_PKT_PUT == type) ? &ph : NULL, pay, 100);
        memset((uint8_t *) buf + len, 0xEE, 1000);
        size_t bad_pad = SIZE_MAX;
        for (size_t pad = 0; pad <= 1000 && SIZE_MAX == bad_pad; pad += (pad < 8) ? 1 : 331) {
            memset(&v, 0, sizeof(v));
            if (USNIC_PKT_OK != usnic_pkt_parse(buf, len + pad, MAXMSG, &v) ||
                100 != v.payload_len || hl + 100 != v.len ||
                v.payload != (const uint8_t *) buf + hl) {
                bad_pad = pad;
            }
        }
        snprintf(name, sizeof(name), "pad/%s_with_flag_and_0_to_1000_bytes_parses",
                 usnic_pkt_type_name(type));
        check(SIZE_MAX == bad_pad, name, "with %zu bytes of padding: payload_len %u len %u",
              bad_pad, v.payload_len, v.len);
        /* the flag does not make a short datagram long enough */
        snprintf(name, sizeof(name), "pad/%s_payload_beyond_datagram", usnic_pkt_type_name(type));
        expect_reason(name, buf, len - 1, MAXMSG, USNIC_DROP_LENGTH);
        /* trailing bytes without the flag */
        H(buf)->flags = 0;
        snprintf(name, sizeof(name), "pad/%s_trailing_bytes_without_flag",
                 usnic_pkt_type_name(type));
        expect_reason(name, buf, len + 1, MAXMSG, USNIC_DROP_LENGTH);
    }
    /* an ACK is never padded, with or without bytes after it */
    len = mk(buf, USNIC_PKT_ACK, USNIC_PKT_FLAG_ACK | USNIC_PKT_FLAG_PAD, NULL, NULL, NULL, 0);
    expect_reason("pad/ack_with_pad_flag", buf, len, MAXMSG, USNIC_DROP_TYPE);
    expect_reason("pad/ack_with_pad_flag_and_bytes", buf, len + 8, MAXMSG, USNIC_DROP_TYPE);
}

/* What the pad filter does to every data datagram A sends. */
enum pad_mode {
    PAD_GOOD,          /* flag, sealed again, random bytes after the payload */
    PAD_NO_FLAG,       /* the same bytes without the flag */
    PAD_FLAG_UNSEALED, /* the flag set on the sender's sealed datagram (a forgery) */
};

struct pad_ctx {
    enum pad_mode mode;
    struct sim_rng rng;
    uint64_t padded;
    uint8_t buf[BUFW * 8 + 2048];
};

static int pad_filter(struct sim *s, int from, const uint8_t *pkt, size_t len, void *arg)
{
    struct pad_ctx *c = arg;
    size_t pad = 1 + (size_t) sim_rng_below(&c->rng, 1500);

    if (SIM_A != from || USNIC_PKT_ACK == pkt[1] || len + pad > sizeof(c->buf)) {
        return 0;
    }
    memcpy(c->buf, pkt, len);
    if (PAD_GOOD == c->mode) {
        c->buf[2] |= USNIC_PKT_FLAG_PAD;
        sim_seal(s, SIM_A, c->buf, len); /* over the datagram without its padding */
    } else if (PAD_FLAG_UNSEALED == c->mode) {
        c->buf[2] |= USNIC_PKT_FLAG_PAD;
    }
    for (size_t i = 0; i < pad; i++) {
        c->buf[len + i] = (uint8_t) sim_rng_next(&c->rng); /* never read */
    }
    sim_inject(s, SIM_B, c->buf, len + pad, s->now + s->cfg.latency_ns);
    c->padded++;
    return 1; /* in place of the original */
}

/* Through the receive path: padded datagrams deliver exactly what the
 * unpadded ones would, under every integrity setting; without the flag, or
 * with a flag the MAC did not cover, they deliver nothing. */
static void test_pad_rx_path(void)
{
    static const struct {
        int auth;
        bool crc;
    } settings[] = {{0, false}, {1, false}, {2, false}, {0, true}, {2, true}};
    struct pad_ctx *c = calloc(1, sizeof(*c));
    char why[512], sum[512];
    struct sim_cfg cfg;
    struct sim s;
    int rc;

    for (size_t k = 0; k < sizeof(settings) / sizeof(settings[0]); k++) {
        check_seed = 0x9ad0 + k;
        sim_cfg_default(&cfg);
        cfg.seed = check_seed;
        cfg.auth = settings[k].auth;
        cfg.crc = settings[k].crc;
        sim_init(&s, &cfg);
        memset(c, 0, sizeof(*c));
        sim_rng_seed(&c->rng, check_seed);
        c->mode = PAD_GOOD;
        s.filter = pad_filter;
        s.filter_arg = c;
        for (int m = 0; m < 60; m++) {
            /* one datagram, a chunk boundary either side, many chunks */
            uint64_t len = 1 + sim_rng_below(&s.rng, (m % 3) ? 3000 : 40000);
            sim_send(&s, (m % 4) ? SIM_A : SIM_B, len, (uint8_t) (m & 0x7f));
        }
        rc = sim_run(&s, 20000ull * 1000000ull);
        why[0] = '\0';
        rc = (0 == rc) ? sim_verify(&s, why, sizeof(why)) : -1;
        sim_summary(&s, sum, sizeof(sum));
        check(0 == rc && c->padded > 60 && 0 == s.ep[1].drops[USNIC_DROP_LENGTH] &&
                  0 == s.ep[1].drops[USNIC_DROP_AUTH] && 0 == s.ep[1].drops[USNIC_DROP_CHECKSUM],
              settings[k].crc ? (settings[k].auth ? "pad/rx_path_delivers_auth_full_crc"
                                                  : "pad/rx_path_delivers_crc")
                              : (0 == settings[k].auth   ? "pad/rx_path_delivers_auth_none"
                                 : 1 == settings[k].auth ? "pad/rx_path_delivers_auth_header"
                                                         : "pad/rx_path_delivers_auth_full"),
              "rc=%d padded=%" PRIu64 " LENGTH=%" PRIu64 " AUTH=%" PRIu64 " %s %s", rc, c->padded,
              s.ep[1].drops[USNIC_DROP_LENGTH], s.ep[1].drops[USNIC_DROP_AUTH], why, sum);
        sim_fini(&s);
    }

    for (int bad = 0; bad < 2; bad++) {
        check_seed = 0x9ae0 + (uint64_t) bad;
        sim_cfg_default(&cfg);
        cfg.seed = check_seed;
        cfg.auth = 1;
        cfg.crc = false; /* (the CRC would catch the flag first) */
        sim_init(&s, &cfg);
        memset(c, 0, sizeof(*c));
        sim_rng_seed(&c->rng, check_seed);
        c->mode = bad ? PAD_FLAG_UNSEALED : PAD_NO_FLAG;
        s.filter = pad_filter;
        s.filter_arg = c;
        for (int m = 0; m < 5; m++) {
            sim_send(&s, SIM_A, 1 + sim_rng_below(&s.rng, 5000), 1);
        }
        (void) sim_run(&s, 200ull * 1000000ull); /* nothing can get through */
        check(c->padded > 5 && 0 == s.ep[1].st.delivered &&
                  s.ep[1].drops[bad ? USNIC_DROP_AUTH : USNIC_DROP_LENGTH] == c->padded,
              bad ? "pad/flag_not_covered_by_mac_dropped" : "pad/bytes_without_flag_dropped",
              "padded=%" PRIu64 " delivered=%" PRIu64 " LENGTH=%" PRIu64 " AUTH=%" PRIu64,
              c->padded, s.ep[1].st.delivered, s.ep[1].drops[USNIC_DROP_LENGTH],
              s.ep[1].drops[USNIC_DROP_AUTH]);
        sim_fini(&s);
    }
    free(c);
}

/*
 * The receive dispatch with header MACs computed ahead (a coalesced
 * receive's, usnic_rx_params.mac_key): right tags deliver everything
 * under loss, duplication and reordering; a tag one bit off under the
 * connection's key lets nothing through (drop_AUTH); a tag under another
 * key is not used, the datagram is checked as usual and gets through.
 */
static void test_mac_ahead_rx(void)
{
    char why[512], sum[512];
    struct sim_cfg cfg;
    struct sim s;
    int rc;

    for (int mode = 1; mode <= 3; mode++) {
        check_seed = 0xa4ead0 + (uint64_t) mode;
        sim_cfg_default(&cfg);
        cfg.seed = check_seed;
        cfg.auth = 1;
        cfg.mac_ahead = mode;
        cfg.crc = false; /* (tags computed ahead are for auth header alone) */
        if (2 != mode) {
            cfg.loss = 0.03;
            cfg.dup = 0.02;
            cfg.reorder = 0.05;
            cfg.defer = true;
        }
        sim_init(&s, &cfg);
        for (int m = 0; m < ((2 == mode) ? 5 : 80); m++) {
            uint64_t len = 1 + sim_rng_below(&s.rng, (m % 3) ? 3000 : 40000);
            sim_send(&s, (m % 4) ? SIM_A : SIM_B, len, (uint8_t) (m & 0x7f));
        }
        if (2 == mode) {
            (void) sim_run(&s, 200ull * 1000000ull); /* nothing can get through */
            check(0 == s.ep[1].st.delivered && s.ep[1].st.rx_macs_ahead > 5 &&
                      s.ep[1].drops[USNIC_DROP_AUTH] == s.ep[1].st.rx_macs_ahead,
                  "mac_ahead/wrong_tag_dropped",
                  "delivered=%" PRIu64 " ahead=%" PRIu64 " AUTH=%" PRIu64, s.ep[1].st.delivered,
                  s.ep[1].st.rx_macs_ahead, s.ep[1].drops[USNIC_DROP_AUTH]);
        } else {
            rc = sim_run(&s, 20000ull * 1000000ull);
            why[0] = '\0';
            rc = (0 == rc) ? sim_verify(&s, why, sizeof(why)) : -1;
            sim_summary(&s, sum, sizeof(sum));
            check(0 == rc && s.ep[1].st.rx_macs_ahead > 100 &&
                      0 == s.ep[1].drops[USNIC_DROP_AUTH] && 0 == s.ep[0].drops[USNIC_DROP_AUTH],
                  1 == mode ? "mac_ahead/right_tags_deliver_under_faults"
                            : "mac_ahead/other_key_ignored_checked_as_usual",
                  "rc=%d ahead=%" PRIu64 " AUTH=%" PRIu64 " %s %s", rc, s.ep[1].st.rx_macs_ahead,
                  s.ep[1].drops[USNIC_DROP_AUTH], why, sum);
        }
        sim_fini(&s);
    }
}

/*
 * Header prediction (struct usnic_rx_predict) changes nothing but the
 * work done: the same traffic, with the same seed, run once without and
 * once with it, must leave both endpoints in the same state, message by
 * message and counter by counter (every drop reason, every ACK sent,
 * every retransmission, the reliability core's statistics), under loss,
 * duplication and reordering.  Hostile datagrams are mixed in where a
 * prediction is live: copies of data datagrams with valid MACs from
 * another source, arriving just before the genuine one (each must be
 * dropped by the source check: drop_ADDRESS counts exactly them), copies
 * from the peer's own source with one bit of a MAC'd field or of the MAC
 * flipped (the MAC must stop them, whether its tag came computed ahead,
 * under another key, or not at all), and chunks asking for an immediate
 * ACK in the middle of a fragment (the ACK must go out as the full path
 * sends it).  Settings where nothing may be predicted (CRC, auth full)
 * must predict nothing.
 */
#define PREDICT_PUTS 16
#define PREDICT_PUT_MAX 40000

/* zone[2]: each endpoint's PUT targets (PREDICT_PUTS * PREDICT_PUT_MAX
 * bytes), registered for the run */
static void predict_run(const struct sim_cfg *cfg, bool predict, struct sim *s, uint8_t *zone[2],
                        int *rc, char *why, size_t whylen)
{
    struct sim_cfg c = *cfg;
    struct sim_rng rng;
    uint64_t key[2];
    int puts = 0;

    c.predict = predict;
    sim_init(s, &c);
    for (int i = 0; i < 2; i++) {
        usnic_reg_add(&s->ep[i].reg, (uint64_t) (uintptr_t) zone[i], PREDICT_PUTS * PREDICT_PUT_MAX,
                      &key[i]);
    }
    sim_rng_seed(&rng, cfg->seed ^ 0x5eed);
    for (int m = 0; m < 120; m++) {
        /* mostly fragments of many chunks, some single datagrams, and
         * PUTs, each into a target of its own */
        uint64_t len = 1 + sim_rng_below(&rng, (m % 5) ? 40000 : 3000);
        int from = (m % 8) ? SIM_A : SIM_B;
        if (0 == m % 7 && puts < PREDICT_PUTS) {
            sim_put(s, from, key[1 - from], (uint64_t) puts * PREDICT_PUT_MAX,
                    1 + sim_rng_below(&rng, PREDICT_PUT_MAX));
            puts++;
            continue;
        }
        sim_send(s, from, len, (uint8_t) (m & 0x7f));
    }
    why[0] = '\0';
    *rc = sim_run(s, 20000ull * 1000000ull);
    *rc = (0 == *rc) ? sim_verify(s, why, whylen) : -1;
}

/* The same deliveries in the same order (field by field: the records
 * have padding, which realloc leaves as it finds it). */
static bool same_deliveries(const struct sim_ep *x, const struct sim_ep *y)
{
    if (x->rx_nlog != y->rx_nlog) {
        return false;
    }
    for (size_t i = 0; i < x->rx_nlog; i++) {
        if (x->rx_log[i].id != y->rx_log[i].id || x->rx_log[i].len != y->rx_log[i].len) {
            return false;
        }
    }
    return true;
}

/* The first difference between two runs' endpoints, or "" if none. */
static void predict_diff(const struct sim *a, const struct sim *b, char *out, size_t outlen)
{
    out[0] = '\0';
    if (a->now != b->now || a->steps != b->steps || a->lost != b->lost ||
        a->foreign != b->foreign || a->duplicated != b->duplicated) {
        snprintf(out, outlen, "run: t %" PRIu64 "/%" PRIu64 " steps %" PRIu64 "/%" PRIu64, a->now,
                 b->now, a->steps, b->steps);
        return;
    }
    for (int i = 0; i < 2; i++) {
        const struct sim_ep *x = &a->ep[i], *y = &b->ep[i];
        const char *what = NULL;

        if (0 != memcmp(&x->st, &y->st, sizeof(x->st))) {
            what = "counters";
        } else if (0 != memcmp(x->drops, y->drops, sizeof(x->drops))) {
            what = "drops";
        } else if (0 != memcmp(&x->rel.stats, &y->rel.stats, sizeof(x->rel.stats))) {
            what = "reliability statistics";
        } else if (!same_deliveries(x, y)) {
            what = "deliveries";
        } else if (x->rel.rx.expected != y->rel.rx.expected || x->rel.tx.acked != y->rel.tx.acked) {
            what = "windows";
        }
        if (NULL != what) {
            snprintf(out, outlen,
                     "%c: %s differ (acks %" PRIu64 "/%" PRIu64 ", ADDRESS %" PRIu64 "/%" PRIu64
                     ")",
                     'A' + i, what, x->st.tx_acks, y->st.tx_acks, x->drops[USNIC_DROP_ADDRESS],
                     y->drops[USNIC_DROP_ADDRESS]);
            return;
        }
    }
}

static void test_predict(void)
{
    static const struct {
        const char *name;
        int auth, mac_ahead;
        bool crc, defer, split;
        int faults; /* 0 none, 1 some, 2 many copies and late datagrams */
        bool hits;  /* predictions expected */
    } cases[] = {
        {"predict/auth_header_same_as_full_path", 1, 1, false, false, false, 1, true},
        {"predict/auth_header_batches_same_as_full_path", 1, 1, false, true, false, 1, true},
        {"predict/auth_none_same_as_full_path", 0, 0, false, true, false, 1, true},
        {"predict/many_copies_late_same_as_full_path", 1, 1, false, true, false, 2, true},
        {"predict/no_faults_same_as_full_path", 1, 1, false, true, false, 0, true},
        {"predict/auth_header_macs_one_by_one_same_as_full_path", 1, 0, false, true, false, 1,
         true},
        {"predict/tags_under_other_key_same_as_full_path", 1, 3, false, true, false, 1, true},
        {"predict/payload_apart_same_as_full_path", 1, 1, false, true, true, 1, true},
        {"predict/payload_apart_auth_none_same_as_full_path", 0, 0, false, false, true, 1, true},
        {"predict/crc_never", 1, 1, true, true, false, 1, false},
        {"predict/auth_full_never", 2, 0, false, true, false, 1, false},
    };
    char why[512], sum[512], diff[256];
    struct sim *a = calloc(2, sizeof(*a)), *b = a + 1;
    uint8_t *zone[2][2];

    for (int r = 0; r < 2; r++) {
        for (int i = 0; i < 2; i++) {
            zone[r][i] = calloc(PREDICT_PUTS, PREDICT_PUT_MAX);
        }
    }

    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        struct sim_cfg cfg;
        int rca, rcb;
        uint64_t hits, address, acks_asked, foreign_in_run, ack_req_in_run, forged_in_run;

        check_seed = 0x9ed1c7 + k;
        sim_cfg_default(&cfg);
        cfg.seed = check_seed;
        cfg.auth = cases[k].auth;
        cfg.crc = cases[k].crc;
        cfg.mac_ahead = cases[k].mac_ahead;
        cfg.defer = cases[k].defer;
        cfg.split = cases[k].split;
        if (cases[k].faults) {
            cfg.loss = 0.02;
            cfg.dup = (2 == cases[k].faults) ? 0.15 : 0.02;
            cfg.reorder = (2 == cases[k].faults) ? 0.2 : 0.03;
            cfg.foreign = 0.03;
            cfg.forged = (0 != cfg.auth) ? 0.03 : 0.0;
            cfg.ack_req = 0.03;
        }
        predict_run(&cfg, false, a, zone[0], &rca, why, sizeof(why));
        predict_run(&cfg, true, b, zone[1], &rcb, why, sizeof(why));
        predict_diff(a, b, diff, sizeof(diff));
        sim_summary(b, sum, sizeof(sum));
        hits = b->ep[0].pred.hits + b->ep[1].pred.hits;
        address = b->ep[0].drops[USNIC_DROP_ADDRESS] + b->ep[1].drops[USNIC_DROP_ADDRESS];
        acks_asked = b->ep[0].st.rx_ack_reqs + b->ep[1].st.rx_ack_reqs;
        foreign_in_run = b->ep[0].foreign_in_run + b->ep[1].foreign_in_run;
        ack_req_in_run = b->ep[0].ack_req_in_run + b->ep[1].ack_req_in_run;
        forged_in_run = b->ep[0].forged_in_run + b->ep[1].forged_in_run;
        /* (the hostile ones must have come while a prediction was live) */
        check(0 == rca && 0 == rcb && '\0' == diff[0] &&
                  (cases[k].hits ? hits > (2 == cases[k].faults ? 5u
                                           : cases[k].faults    ? 50u
                                                                : 500u)
                                 : 0 == hits) &&
                  address == b->foreign &&
                  (!cases[k].faults || (b->foreign > 20 && acks_asked > 20)) &&
                  (!cases[k].faults || !cases[k].hits ||
                   (foreign_in_run > 5 && ack_req_in_run > 5 &&
                    (0 == cfg.auth || forged_in_run > 5))),
              cases[k].name,
              "rc=%d/%d %s predicted=%" PRIu64 " foreign=%" PRIu64 " (in a run %" PRIu64
              ") ADDRESS=%" PRIu64 " ack_reqs=%" PRIu64 " (in a run %" PRIu64 ") forged=%" PRIu64
              " (in a run %" PRIu64 ") %s %s",
              rca, rcb, diff, hits, b->foreign, foreign_in_run, address, acks_asked, ack_req_in_run,
              b->forged, forged_in_run, why, sum);
        sim_fini(a);
        sim_fini(b);
    }
    for (int r = 0; r < 2; r++) {
        free(zone[r][0]);
        free(zone[r][1]);
    }
    free(a);
}

/* A datagram of len bytes cut into parts of per bytes (a multiple of
 * USNIC_PART_UNIT), built, parsed and joined; order: the parts' indices
 * in the order they are given (repeats allowed).  Returns the joined
 * datagram or NULL; *why the first drop reason other than DUPLICATE. */
static const uint8_t *parts_join(struct usnic_parts *t, const uint8_t *dgram, size_t len,
                                 size_t head, uint32_t per, const unsigned *order, unsigned n,
                                 enum usnic_drop_reason *why)
{
    static uint64_t buf[(USNIC_PART_DGRAM_MAX + USNIC_HDR_LEN_CHUNK) / 8 + 1];
    const uint8_t *whole = NULL;

    *why = USNIC_PKT_OK;
    for (unsigned i = 0; i < n; i++) {
        uint64_t off = (uint64_t) order[i] * per;
        uint32_t m = (uint32_t) ((len - off < per) ? len - off : per);
        struct usnic_pkt_view v;
        size_t plen =
            usnic_part_build((uint8_t *) buf, dgram, head, dgram + head, len - head, off, m, 77);
        enum usnic_drop_reason r = usnic_pkt_parse(buf, plen, MAXMSG, &v);
        const uint8_t *w = NULL;

        if (USNIC_PKT_OK == r) {
            r = usnic_parts_add(t, v.hdr->seq, v.chunk->msg_len, v.chunk->offset, v.payload,
                                v.payload_len, &w);
        }
        if (USNIC_PKT_OK != r && USNIC_DROP_DUPLICATE != r && USNIC_PKT_OK == *why) {
            *why = r;
        }
        if (NULL != w) {
            whole = w;
        }
    }
    return whole;
}

/* Datagrams in parts (btl_usnic_part.h): random sizes, cuts and orders,
 * with repeats; the rules; five datagrams in the four slots. */
static void test_parts(void)
{
    struct sim_rng r;
    struct usnic_parts t;
    static uint8_t dgram[USNIC_PART_DGRAM_MAX];
    unsigned order[2 * (USNIC_PART_DGRAM_MAX / USNIC_PART_UNIT)];
    enum usnic_drop_reason why;
    const uint8_t *w;
    int bad = 0, early = 0;
    uint64_t joined_want = 0;

    check_seed = 0x9A27;
    sim_rng_seed(&r, check_seed);
    usnic_parts_init(&t);
    for (int it = 0; it < 300 && 0 == bad; it++) {
        size_t len = (size_t) sim_rng_range(&r, 56, USNIC_PART_DGRAM_MAX - 1);
        uint32_t per = (uint32_t) sim_rng_range(&r, 1, 140) * USNIC_PART_UNIT;
        unsigned n = (unsigned) ((len + per - 1) / per), k = 0;
        struct usnic_pkt_hdr *h = (struct usnic_pkt_hdr *) (void *) dgram;

        sim_msg_fill(sim_rng_next(&r), 0, dgram, len);
        h->seq = (uint32_t) it * 7u;
        h->lane = (uint8_t) (it & 1);
        /* every part once in random order, some twice, the last one last */
        for (unsigned i = 0; i + 1 < n; i++) {
            order[k++] = i;
            if (sim_rng_below(&r, 4) == 0) {
                order[k++] = i;
            }
        }
        sim_rng_shuffle32(&r, order, k);
        order[k++] = n - 1;
        w = parts_join(&t, dgram, len, (size_t) sim_rng_range(&r, 56, len), per, order, k, &why);
        joined_want++;
        if (NULL == w || USNIC_PKT_OK != why || 0 != memcmp(w, dgram, len)) {
            bad = it + 1;
        }
    }
    check(0 == bad && t.joined == joined_want, "parts/random_cuts_orders_repeats_joined_intact",
          "failed at datagram %d (why %s), joined %" PRIu64, bad - 1, usnic_drop_reason_name(why),
          t.joined);

    /* a copy cut at another size fills what the first left: still intact */
    {
        size_t len = 9000;
        unsigned first[] = {0, 2}, second[] = {0, 1, 2, 3, 4, 5, 6};
        sim_msg_fill(99, 0, dgram, len);
        ((struct usnic_pkt_hdr *) (void *) dgram)->seq = 4242;
        ((struct usnic_pkt_hdr *) (void *) dgram)->lane = 1;
        w = parts_join(&t, dgram, len, 88, 2048, first, 2, &why);
        early = (NULL != w);
        w = parts_join(&t, dgram, len, 88, 1408, second, 7, &why);
        check(!early && NULL != w && 0 == memcmp(w, dgram, len),
              "parts/two_cuts_of_one_datagram_join_intact", "early %d joined %d", early, NULL != w);
    }

    /* the rules */
    {
        const uint8_t *x;
        check(USNIC_DROP_CHUNK_RANGE == usnic_parts_add(&t, 1, 1000, 32, dgram, 64, &x) &&
                  USNIC_DROP_CHUNK_RANGE == usnic_parts_add(&t, 1, 1000, 0, dgram, 100, &x) &&
                  USNIC_DROP_CHUNK_RANGE == usnic_parts_add(&t, 1, 1000, 960, dgram, 64, &x) &&
                  USNIC_DROP_CHUNK_RANGE ==
                      usnic_parts_add(&t, 1, USNIC_PART_DGRAM_MAX + 1, 0, dgram, 64, &x) &&
                  USNIC_DROP_CHUNK_RANGE == usnic_parts_add(&t, 1, 40, 0, dgram, 40, &x) &&
                  USNIC_DROP_CHUNK_RANGE == usnic_parts_add(&t, 1, 1000, 0, dgram, 0, &x),
              "parts/misaligned_short_long_or_empty_rejected", "a bad part was taken");
        check(USNIC_PKT_OK == usnic_parts_add(&t, 2, 1000, 0, dgram, 512, &x) && NULL == x &&
                  USNIC_DROP_DUPLICATE == usnic_parts_add(&t, 2, 1000, 0, dgram, 512, &x) &&
                  USNIC_DROP_DUPLICATE == usnic_parts_add(&t, 2, 1000, 128, dgram, 64, &x) &&
                  USNIC_PKT_OK == usnic_parts_add(&t, 2, 1000, 512, dgram + 512, 488, &x) &&
                  x != NULL && 0 == memcmp(x, dgram, 1000),
              "parts/repeat_is_duplicate_and_tail_completes", "unexpected verdicts");
    }

    /* four slots: a fifth datagram takes the one begun longest ago */
    {
        const uint8_t *x;
        uint64_t ev = t.evicted;
        bool ok = true;
        for (uint32_t s = 100; s < 105; s++) {
            ok = ok && USNIC_PKT_OK == usnic_parts_add(&t, s, 256, 0, dgram, 128, &x) && NULL == x;
        }
        /* 100 was evicted: its second half begins it anew; 101 completes */
        ok = ok && USNIC_PKT_OK == usnic_parts_add(&t, 100, 256, 128, dgram + 128, 128, &x) &&
             NULL == x;
        ok = ok && USNIC_PKT_OK == usnic_parts_add(&t, 102, 256, 128, dgram + 128, 128, &x) &&
             NULL != x && 0 == memcmp(x, dgram, 256);
        check(ok && t.evicted >= ev + 2, "parts/fifth_datagram_evicts_the_oldest",
              "ok %d evicted %" PRIu64, ok, t.evicted - ev);
    }
    usnic_parts_fini(&t);
}

static void test_names(void)
{
    bool ok = true;

    check_seed = 0;
    for (int i = 0; i < USNIC_DROP__COUNT; i++) {
        const char *n = usnic_drop_reason_name((enum usnic_drop_reason) i);
        const char *d = usnic_drop_reason_desc((enum usnic_drop_reason) i);
        ok = ok && n && d && n[0] && d[0] && strcmp(n, "UNKNOWN");
        for (int j = 0; j < i; j++) {
            ok = ok && strcmp(n, usnic_drop_reason_name((enum usnic_drop_reason) j));
        }
    }
    ok = ok && !strcmp(usnic_drop_reason_name(USNIC_DROP__COUNT), "UNKNOWN") &&
         !strcmp(usnic_drop_reason_name((enum usnic_drop_reason) - 1), "UNKNOWN") &&
         !strcmp(usnic_drop_reason_name(USNIC_DROP_PUT_RANGE), "PUT_RANGE");
    ok = ok && !strcmp(usnic_pkt_type_name(USNIC_PKT_ACK), "ACK") &&
         !strcmp(usnic_pkt_type_name(USNIC_PKT_FRAG), "FRAG") &&
         !strcmp(usnic_pkt_type_name(USNIC_PKT_CHUNK), "CHUNK") &&
         !strcmp(usnic_pkt_type_name(USNIC_PKT_PUT), "PUT") &&
         !strcmp(usnic_pkt_type_name(USNIC_PKT_PART), "PART") &&
         !strcmp(usnic_pkt_type_name(0), "UNKNOWN") && !strcmp(usnic_pkt_type_name(6), "UNKNOWN");
    check(ok, "names/drop_reasons_and_types", "a name is missing, duplicated or wrong");
}

/* ================================================================ fuzz */

static size_t hdr_len_of(unsigned type)
{
    switch (type) {
    case USNIC_PKT_ACK:
    case USNIC_PKT_FRAG:
        return 56; /* the common header */
    case USNIC_PKT_CHUNK:
    case USNIC_PKT_PART:
        return 56 + 16;
    case USNIC_PKT_PUT:
        return 56 + 16 + 16;
    default:
        return 0;
    }
}

/* The specification, written independently: is this datagram acceptable? */
static bool spec_ok(const uint8_t *b, size_t len, uint64_t max)
{
    struct usnic_pkt_hdr h;
    struct usnic_chunk_hdr c;
    struct usnic_put_hdr p;
    size_t hl;

    if (len < sizeof(h)) {
        return false;
    }
    memcpy(&h, b, sizeof(h));
    hl = hdr_len_of(h.type);
    if (h.version != USNIC_PROTO_VERSION || 0 == hl ||
        (h.flags & ~(unsigned) USNIC_PKT_FLAGS_KNOWN) ||
        (USNIC_PKT_ACK == h.type && 0 != h.msg_id) || h.lane >= USNIC_PKT_LANES ||
        0 != h.reserved || len < hl || (uint64_t) h.payload_len + hl > len) {
        return false;
    }
    /* bytes after the payload: only padding, flagged, and never on an ACK */
    if ((uint64_t) h.payload_len + hl != len &&
        (USNIC_PKT_ACK == h.type || !(h.flags & USNIC_PKT_FLAG_PAD))) {
        return false;
    }
    if (USNIC_PKT_ACK == h.type && (h.flags & USNIC_PKT_FLAG_PAD)) {
        return false;
    }
    /* a selective ACK (1 to USNIC_SACK_WORDS_MAX words), only on ACK
     * packets, is their whole payload; "more" is for ACK packets too */
    if (USNIC_PKT_ACK != h.type && (h.flags & (USNIC_PKT_FLAG_SACK | USNIC_PKT_FLAG_SACK_MORE))) {
        return false;
    }
    if (USNIC_PKT_ACK == h.type) {
        if (!(h.flags & USNIC_PKT_FLAG_SACK)) {
            return (h.flags & USNIC_PKT_FLAG_ACK) && 0 == h.payload_len;
        }
        return (h.flags & USNIC_PKT_FLAG_ACK) && 0 != h.payload_len && 0 == h.payload_len % 8 &&
               h.payload_len <= USNIC_SACK_WORDS_MAX * 8;
    }
    if (USNIC_PKT_FRAG == h.type) {
        return true;
    }
    memcpy(&c, b + sizeof(h), sizeof(c));
    if (USNIC_PKT_PART == h.type) {
        /* a part of a whole datagram of 56 B to 64 KiB, cut at multiples
         * of 64 bytes, with nothing of its own but the sender and seq */
        return 0 == h.flags && 0 == h.tag && 0 == h.msg_id && 0 == h.ack_seq && 0 == h.ts_echo &&
               c.msg_len >= 56 && c.msg_len <= 65536 && 0 != h.payload_len &&
               c.offset <= c.msg_len && h.payload_len <= c.msg_len - c.offset &&
               0 == c.offset % 64 &&
               (0 == h.payload_len % 64 || c.offset + h.payload_len == c.msg_len);
    }
    if (0 == c.msg_len || 0 == h.payload_len || (USNIC_PKT_CHUNK == h.type && c.msg_len > max) ||
        c.offset > c.msg_len || h.payload_len > c.msg_len - c.offset) {
        return false;
    }
    if (USNIC_PKT_PUT == h.type) {
        memcpy(&p, b + 56 + 16, sizeof(p));
        return p.reg_offset <= UINT64_MAX - c.msg_len;
    }
    return true;
}

static uint64_t interesting(struct sim_rng *r, size_t len)
{
    switch (sim_rng_below(r, 12)) {
    case 0:
        return 0;
    case 1:
        return 1;
    case 2:
        return UINT64_MAX;
    case 3:
        return UINT64_MAX - sim_rng_below(r, 4096);
    case 4:
        return 0xFFFFFFFFu;
    case 5:
        return 0x80000000u;
    case 6:
        return len;
    case 7:
        return len - sizeof(struct usnic_pkt_hdr);
    case 8:
        return len - USNIC_HDR_LEN_CHUNK;
    case 9:
        return len - USNIC_HDR_LEN_PUT;
    case 10:
        return sim_rng_below(r, 3000);
    default:
        return sim_rng_next(r);
    }
}

/* Build a random valid datagram into b (8-aligned, 4 KiB); returns its length. */
static size_t random_valid(struct sim_rng *r, uint8_t *b, uint64_t max)
{
    struct usnic_pkt_hdr h;
    struct usnic_chunk_hdr c;
    struct usnic_put_hdr p;
    uint8_t pay[1500];
    unsigned type = 1 + (unsigned) sim_rng_below(r, 5);
    uint32_t plen = (USNIC_PKT_ACK == type) ? 0 : (uint32_t) sim_rng_range(r, 1, 1400);
    unsigned flags = (USNIC_PKT_ACK == type ? USNIC_PKT_FLAG_ACK : 0) |
                     (unsigned) sim_rng_below(r, 2) * USNIC_PKT_FLAG_ACK |
                     (unsigned) sim_rng_below(r, 2) * USNIC_PKT_FLAG_ACK_REQ;
    uint64_t msg_len;

    if (USNIC_PKT_ACK == type && sim_rng_below(r, 2)) {
        flags |= USNIC_PKT_FLAG_SACK;
        plen = (uint32_t) (sizeof(struct usnic_sack) * sim_rng_range(r, 1, USNIC_SACK_WORDS_MAX));
    }
    if (USNIC_PKT_ACK == type && sim_rng_below(r, 2)) {
        flags |= USNIC_PKT_FLAG_SACK_MORE;
    }
    sim_msg_fill(sim_rng_next(r), 0, pay, plen);
    sim_hdr_init(&h, type, flags, (unsigned) sim_rng_below(r, 256), (uint32_t) sim_rng_next(r), KEY,
                 (uint32_t) sim_rng_next(r), (uint32_t) sim_rng_next(r));
    msg_len = sim_rng_range(r, plen, (max < 1000000 ? max : 1000000));
    if (msg_len < plen) {
        msg_len = plen;
    }
    if (USNIC_PKT_ACK != type) {
        h.msg_id = (uint32_t) sim_rng_next(r);
    }
    memset(&c, 0, sizeof(c));
    c.msg_len = msg_len;
    c.offset = sim_rng_range(r, 0, msg_len - plen);
    if (USNIC_PKT_PART == type) {
        /* a part: 64-byte units of a datagram of at most 64 KiB */
        plen = (uint32_t) sim_rng_range(r, 1, 21) * 64u;
        c.msg_len = sim_rng_range(r, plen / 64, 65536 / 64) * 64;
        c.offset = sim_rng_range(r, 0, (c.msg_len - plen) / 64) * 64;
        if (sim_rng_below(r, 2) && c.offset + plen == c.msg_len && c.msg_len < 65536) {
            c.msg_len += sim_rng_range(r, 0, 63); /* a tail of any length */
            plen = (uint32_t) (c.msg_len - c.offset);
        }
        sim_msg_fill(sim_rng_next(r), 0, pay, plen);
        sim_hdr_init(&h, type, 0, 0, (uint32_t) sim_rng_next(r), KEY, (uint32_t) sim_rng_next(r),
                     0);
    }
    p.reg_key = sim_rng_next(r);
    p.reg_offset = sim_rng_below(r, 1ull << 40);
    return sim_pkt_build(b, 4096, &h, (type >= USNIC_PKT_CHUNK) ? &c : NULL,
                         (USNIC_PKT_PUT == type) ? &p : NULL, pay, plen);
}

static void mutate(struct sim_rng *r, uint8_t *b, size_t *len)
{
    static const struct {
        size_t off, size;
    } fields[] = {{0, 1},  {1, 1},  {2, 1},  {3, 1},  {4, 4},  {8, 8},  {16, 4},
                  {20, 4}, {24, 4}, {28, 4}, {32, 4}, {36, 4}, {40, 4}, {44, 4},
                  {48, 8}, {56, 8}, {64, 8}, {72, 8}, {80, 8}};
    int n = 1 + (int) sim_rng_below(r, 3);

    for (int i = 0; i < n; i++) {
        switch (sim_rng_below(r, 5)) {
        case 0: /* flip a bit */
            if (*len) {
                b[sim_rng_below(r, *len)] ^= (uint8_t) (1u << sim_rng_below(r, 8));
            }
            break;
        case 1: /* random byte */
            if (*len) {
                b[sim_rng_below(r, *len)] = (uint8_t) sim_rng_next(r);
            }
            break;
        case 2: { /* a header field set to an interesting value */
            size_t f = (size_t) sim_rng_below(r, sizeof(fields) / sizeof(fields[0]));
            uint64_t v = interesting(r, *len);
            if (fields[f].off + fields[f].size <= *len) {
                memcpy(b + fields[f].off, &v, fields[f].size);
            }
            break;
        }
        case 3: /* truncate */
            *len = (size_t) sim_rng_below(r, *len + 1);
            break;
        default: { /* extend, keeping payload_len consistent half of the time */
            size_t add = (size_t) sim_rng_range(r, 1, 64);
            if (*len + add <= 4096) {
                memset(b + *len, 0x5C, add);
                *len += add;
                if (*len >= 8 && sim_rng_below(r, 2)) {
                    uint32_t pl;
                    memcpy(&pl, b + 4, 4);
                    pl += (uint32_t) add;
                    memcpy(b + 4, &pl, 4);
                }
            }
            break;
        }
        }
    }
}

static void test_fuzz(void)
{
    enum {
        ITER = 200000
    };
    static uint64_t work[512];
    uint8_t *w = (uint8_t *) work;
    struct sim_rng r;
    uint64_t counts[USNIC_DROP__COUNT] = {0};
    uint64_t mismatch = 0, view_bad = 0, dump_bad = 0, odd_reason = 0;
    char why[256] = "";

    check_seed = 0xF022;
    sim_rng_seed(&r, check_seed);
    for (int it = 0; it < ITER; it++) {
        static const uint64_t maxes[] = {MAXMSG, UINT64_MAX, 0, 1, 4096};
        uint64_t max = maxes[sim_rng_below(&r, 5)];
        size_t len;
        uint8_t *copy;
        struct usnic_pkt_view v;
        enum usnic_drop_reason got;
        bool want;

        if (sim_rng_below(&r, 8) == 0) { /* raw noise, often with a plausible first bytes */
            len = (size_t) sim_rng_below(&r, 160);
            for (size_t i = 0; i < len; i++) {
                w[i] = (uint8_t) sim_rng_next(&r);
            }
            if (len >= 2 && sim_rng_below(&r, 2)) {
                w[0] = USNIC_PROTO_VERSION;
                w[1] = (uint8_t) sim_rng_range(&r, 0, 5);
            }
        } else {
            len = random_valid(&r, w, max ? max : 1);
            if (sim_rng_below(&r, 10) != 0) {
                mutate(&r, w, &len);
            }
        }
        copy = malloc(len ? len : 1); /* exact size: any over-read is an ASan error */
        memcpy(copy, w, len);
        memset(&v, 0, sizeof(v));
        got = usnic_pkt_parse(copy, len, max, &v);
        want = spec_ok(copy, len, max);
        if ((unsigned) got >= USNIC_DROP__COUNT) {
            odd_reason++;
        } else {
            counts[got]++;
        }
        if ((USNIC_PKT_OK == got) != want) {
            if (!mismatch++) {
                char d[400];
                usnic_pkt_dump(copy, len, d, sizeof(d));
                snprintf(why, sizeof(why), "parse=%s spec=%s max=%" PRIu64 ": %.170s",
                         usnic_drop_reason_name(got), want ? "ok" : "reject", max, d);
            }
        }
        if (USNIC_PKT_OK == got) {
            size_t hl = hdr_len_of(copy[1]);
            bool chunked =
                copy[1] == USNIC_PKT_CHUNK || copy[1] == USNIC_PKT_PUT || copy[1] == USNIC_PKT_PART;
            uint32_t plen;
            memcpy(&plen, copy + 4, sizeof(plen));
            if ((const void *) v.hdr != copy || v.payload != copy + hl || v.payload_len != plen ||
                (size_t) v.len != hl + plen || v.len > len ||
                (v.len != len && !(copy[2] & USNIC_PKT_FLAG_PAD)) ||
                (chunked ? (const void *) v.chunk != copy + sizeof(struct usnic_pkt_hdr)
                         : NULL != v.chunk) ||
                (copy[1] == USNIC_PKT_PUT ? (const void *) v.put != copy + USNIC_HDR_LEN_CHUNK
                                          : NULL != v.put)) {
                view_bad++;
            }
        } else if (got != USNIC_DROP_SHORT && got != USNIC_DROP_VERSION && got != USNIC_DROP_TYPE &&
                   got != USNIC_DROP_LENGTH && got != USNIC_DROP_CHUNK_RANGE &&
                   got != USNIC_DROP_PUT_RANGE) {
            odd_reason++;
        }
        if (0 == it % 4) { /* dump the same input into a random small output */
            size_t ol = (size_t) sim_rng_below(&r, 300);
            char *o = malloc(ol ? ol : 1);
            size_t m = usnic_pkt_dump(copy, len, o, ol);
            if (ol ? (m >= ol || m != strlen(o)) : m != 0) {
                dump_bad++;
            }
            free(o);
        }
        free(copy);
    }
    check(0 == mismatch, "fuzz/parse_accepts_exactly_the_self_consistent",
          "%" PRIu64 " mismatches of %d, first: %s", mismatch, ITER, why);
    check(0 == view_bad && 0 == odd_reason, "fuzz/view_and_reasons_consistent",
          "view_bad=%" PRIu64 " odd_reason=%" PRIu64, view_bad, odd_reason);
    check(0 == dump_bad, "fuzz/dump_bounded", "%" PRIu64 " bad dumps", dump_bad);
    {
        static const enum usnic_drop_reason need[] = {
            USNIC_PKT_OK,      USNIC_DROP_SHORT,       USNIC_DROP_VERSION,  USNIC_DROP_TYPE,
            USNIC_DROP_LENGTH, USNIC_DROP_CHUNK_RANGE, USNIC_DROP_PUT_RANGE};
        const char *missing = NULL;
        for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++) {
            if (counts[need[i]] < 50) {
                missing = usnic_drop_reason_name(need[i]);
            }
        }
        check(NULL == missing && counts[USNIC_PKT_OK] > ITER / 20, "fuzz/covers_every_verdict",
              "rare verdict %s (OK=%" PRIu64 ")", missing ? missing : "-", counts[USNIC_PKT_OK]);
    }
}

int main(void)
{
    test_parse_valid();
    test_parse_malformed();
    test_reasm_orders();
    test_reasm_check();
    test_reasm_chunk_positions();
    test_reasm_chunk_sizes();
    test_reasm_defer();
    test_reasm_defer_random();
    test_reg_direct();
    test_reg_keyed();
    test_unknown_sender();
    test_put_end_to_end();
    test_dump();
    test_names();
    test_parts();
    test_mac();
    test_mac_lanes();
    test_mac_ahead_rx();
    test_predict();
    test_pad_parse();
    test_pad_rx_path();
    test_fuzz();
    return check_summary("test_proto");
}
