/*
 * Unit tests of SipHash-2-4 and CRC32C (btl_usnic_auth.[ch]) against their
 * published test vectors, in one piece, in several pieces split at every
 * point, fused with a copy, and on both CRC32C implementations (the
 * table-driven fallback and, where the CPU has it, the hardware one).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btl_usnic_auth.h"
#include "check.h"

/* ================================================================ helpers */

static uint64_t rng_state;

static uint64_t rnd(void)
{
    /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

static void fill_random(uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        p[i] = (uint8_t) (rnd() >> 56);
    }
}

static unsigned hexval(char c)
{
    return (c >= 'a') ? (unsigned) (c - 'a' + 10) : (unsigned) (c - '0');
}

/* 16 hex digits, the tag's bytes in wire order. */
static void hex8(const char *hex, uint8_t out[8])
{
    for (int i = 0; i < 8; i++) {
        out[i] = (uint8_t) (hexval(hex[2 * i]) << 4 | hexval(hex[2 * i + 1]));
    }
}

static void tag_hex(uint64_t tag, char out[17])
{
    uint8_t b[8];
    usnic_sip_tag_store(b, tag);
    for (int i = 0; i < 8; i++) {
        snprintf(out + 2 * i, 3, "%02x", b[i]);
    }
}

/* A bit-at-a-time CRC32C straight from the polynomial: shares no table or
 * instruction with the code under test. */
static uint32_t crc_bitwise(uint32_t crc, const uint8_t *p, size_t n)
{
    crc = ~crc;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int b = 0; b < 8; b++) {
            crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1)));
        }
    }
    return ~crc;
}

/* ============================================================ SipHash-2-4 */

/*
 * The 64 SipHash-2-4 vectors of the reference implementation: key
 * 00 01 .. 0f, message 00 01 .. (i-1) for i = 0..63; each output's 8 bytes
 * in wire (little-endian) order.
 */
static const char *const sip_vectors[64] = {
    "310e0edd47db6f72", "fd67dc93c539f874", "5a4fa9d909806c0d", "2d7efbd796666785",
    "b7877127e09427cf", "8da699cd64557618", "cee3fe586e46c9cb", "37d1018bf50002ab",
    "6224939a79f5f593", "b0e4a90bdf82009e", "f3b9dd94c5bb5d7a", "a7ad6b22462fb3f4",
    "fbe50e86bc8f1e75", "903d84c02756ea14", "eef27a8e90ca23f7", "e545be4961ca29a1",
    "db9bc2577fcc2a3f", "9447be2cf5e99a69", "9cd38d96f0b3c14b", "bd6179a71dc96dbb",
    "98eea21af25cd6be", "c7673b2eb0cbf2d0", "883ea3e395675393", "c8ce5ccd8c030ca8",
    "94af49f6c650adb8", "eab8858ade92e1bc", "f315bb5bb835d817", "adcf6b0763612e2f",
    "a5c91da7acaa4dde", "716595876650a2a6", "28ef495c53a387ad", "42c341d8fa92d832",
    "ce7cf2722f512771", "e37859f94623f3a7", "381205bb1ab0e012", "ae97a10fd434e015",
    "b4a31508beff4d31", "81396229f0907902", "4d0cf49ee5d4dcca", "5c73336a76d8bf9a",
    "d0a704536ba93e0e", "925958fcd6420cad", "a915c29bc8067318", "952b79f3bc0aa6d4",
    "f21df2e41d4535f9", "87577519048f53a9", "10a56cf5dfcd9adb", "eb75095ccd986cd0",
    "51a9cb9ecba312e6", "96afadfc2ce666c7", "72fe52975a4364ee", "5a1645b276d592a1",
    "b274cb8ebf87870a", "6f9bb4203de7b381", "eaecb2a30b22a87f", "9924a43cc1315724",
    "bd838d3aafbf8db7", "0b1a2a3265d51aea", "135079a3231ce660", "932b2846e4d70666",
    "e1915f5cb1eca46c", "f325965ca16d629f", "575ff28e60381be5", "724506eb4c328a95",
};

static struct usnic_sip_key ref_key(void)
{
    uint8_t kb[16];
    struct usnic_sip_key key;

    for (int i = 0; i < 16; i++) {
        kb[i] = (uint8_t) i;
    }
    usnic_sip_key_load(&key, kb);
    return key;
}

static uint64_t sip_expected(int i)
{
    uint8_t b[8];
    hex8(sip_vectors[i], b);
    return usnic_sip_tag_load(b);
}

static void test_sip_vectors(void)
{
    struct usnic_sip_key key = ref_key();
    uint8_t msg[64];
    int bad = -1;
    char got[17] = "";

    for (int i = 0; i < 64; i++) {
        msg[i] = (uint8_t) i;
    }
    for (int i = 0; i < 64 && bad < 0; i++) {
        uint64_t t = usnic_siphash24(&key, msg, (size_t) i);
        if (t != sip_expected(i)) {
            bad = i;
            tag_hex(t, got);
        }
    }
    check(bad < 0, "siphash24: the 64 reference vectors", "length %d: got %s, want %s", bad, got,
          bad >= 0 ? sip_vectors[bad] : "");

    /* the same from a misaligned copy of the message */
    {
        uint8_t buf[64 + 7];
        bad = -1;
        for (int off = 1; off < 8 && bad < 0; off++) {
            memcpy(buf + off, msg, 64);
            for (int i = 0; i < 64 && bad < 0; i++) {
                if (usnic_siphash24(&key, buf + off, (size_t) i) != sip_expected(i)) {
                    bad = off * 100 + i;
                }
            }
        }
        check(bad < 0, "siphash24: vectors at every alignment", "offset*100+length %d", bad);
    }

    /* the paper's appendix example: 15 bytes, a129ca6149be45e5 */
    {
        char want[17] = "";
        tag_hex(usnic_siphash24(&key, msg, 15), got);
        tag_hex(0xa129ca6149be45e5ull, want);
        check(0 == strcmp(got, want), "siphash24: the paper's 15-byte example", "got %s, want %s",
              got, want);
    }
}

static void test_sip_pieces(void)
{
    struct usnic_sip_key key = ref_key();
    uint8_t msg[64];
    int bad = -1;
    long count = 0;

    for (int i = 0; i < 64; i++) {
        msg[i] = (uint8_t) i;
    }
    /* two pieces, split at every point */
    for (int n = 0; n < 64 && bad < 0; n++) {
        for (int a = 0; a <= n && bad < 0; a++) {
            struct usnic_auth_piece pc[2] = {{msg, (size_t) a}, {msg + a, (size_t) (n - a)}};
            count++;
            if (usnic_siphash24_pieces(&key, pc, 2) != sip_expected(n)) {
                bad = n * 100 + a;
            }
        }
    }
    check(bad < 0, "siphash24: vectors in 2 pieces, every split", "length*100+split %d", bad);

    /* three pieces, every pair of split points (empty pieces included) */
    for (int n = 0; n < 64 && bad < 0; n++) {
        for (int a = 0; a <= n && bad < 0; a++) {
            for (int b = a; b <= n && bad < 0; b++) {
                struct usnic_auth_piece pc[3] = {
                    {msg, (size_t) a}, {msg + a, (size_t) (b - a)}, {msg + b, (size_t) (n - b)}};
                count++;
                if (usnic_siphash24_pieces(&key, pc, 3) != sip_expected(n)) {
                    bad = n * 10000 + a * 100 + b;
                }
            }
        }
    }
    check(bad < 0, "siphash24: vectors in 3 pieces, every pair of splits",
          "length*10000+split1*100+split2 %d", bad);

    /* the streaming interface a byte at a time, and with no update at all */
    for (int n = 0; n < 64 && bad < 0; n++) {
        struct usnic_sip_state s;
        usnic_sip_init(&s, &key);
        for (int i = 0; i < n; i++) {
            usnic_sip_update(&s, msg + i, 1);
            usnic_sip_update(&s, msg, 0);
        }
        if (usnic_sip_final(&s) != sip_expected(n)) {
            bad = n;
        }
    }
    check(bad < 0, "siphash24: streaming a byte at a time", "length %d", bad);

    /* final() leaves the state usable: more input, another final */
    {
        struct usnic_sip_state s;
        bool ok;
        usnic_sip_init(&s, &key);
        usnic_sip_update(&s, msg, 13);
        ok = usnic_sip_final(&s) == sip_expected(13);
        usnic_sip_update(&s, msg + 13, 50);
        ok = ok && usnic_sip_final(&s) == sip_expected(63);
        check(ok, "siphash24: final() does not disturb the state", "mismatch");
    }

    /* long random messages, random keys, random splits into 1..5 pieces */
    {
        enum {
            LONG = 70000
        };
        uint8_t *big = malloc(LONG);
        uint8_t kb[16];
        bad = -1;
        fill_random(big, LONG);
        for (int iter = 0; iter < 200 && bad < 0; iter++) {
            struct usnic_sip_key k;
            struct usnic_auth_piece pc[5];
            size_t n = (iter < 100) ? (size_t) (rnd() % 200) : (size_t) (rnd() % LONG);
            size_t cut[6];
            size_t np = 1 + (size_t) (rnd() % 5);
            uint64_t whole;
            fill_random(kb, 16);
            usnic_sip_key_load(&k, kb);
            whole = usnic_siphash24(&k, big, n);
            cut[0] = 0;
            cut[np] = n;
            for (size_t j = 1; j < np; j++) {
                cut[j] = cut[j - 1] + (size_t) (rnd() % (n - cut[j - 1] + 1));
            }
            for (size_t j = 0; j < np; j++) {
                pc[j].base = big + cut[j];
                pc[j].len = cut[j + 1] - cut[j];
            }
            if (usnic_siphash24_pieces(&k, pc, np) != whole) {
                bad = iter;
            }
            /* one flipped bit changes the tag */
            if (n > 0) {
                size_t at = (size_t) (rnd() % n);
                uint8_t bit = (uint8_t) (1u << (rnd() % 8));
                big[at] ^= bit;
                if (usnic_siphash24(&k, big, n) == whole) {
                    bad = 1000 + iter;
                }
                big[at] ^= bit;
            }
        }
        free(big);
        check(bad < 0, "siphash24: random pieces of long messages equal one piece", "iteration %d",
              bad);
    }
    printf("  (%ld piece splits checked)\n", count);
}

/*
 * The prefix memo: whatever sequence of messages, keys and prefix lengths
 * it sees, usnic_siphash24_memo() gives usnic_siphash24()'s tag; it resumes
 * from the memo exactly when the key, the prefix length and every prefix
 * word are the memo's.  Successive messages share a random number of first
 * words (as a train's datagrams do), sometimes differ in one bit of the
 * prefix, sometimes switch keys.
 */
static void test_sip_memo(void)
{
    struct usnic_sip_key keys[2];
    struct usnic_sip_memo memo;
    uint8_t kb[16], msg[160], last[160];
    size_t last_pw = 0;
    int last_k = -1;
    uint64_t want_hits = 0;
    long bad = -1, hit_cases = 0, miss_cases = 0;

    fill_random(kb, sizeof(kb));
    usnic_sip_key_load(&keys[0], kb);
    kb[15] ^= 0x40; /* the second key differs in its last bit only */
    usnic_sip_key_load(&keys[1], kb);
    memset(&memo, 0, sizeof(memo));
    memset(last, 0, sizeof(last));
    fill_random(msg, sizeof(msg));
    for (long i = 0; i < 200000 && bad < 0; i++) {
        size_t pw = 1 + (size_t) (rnd() % USNIC_SIP_MEMO_WORDS);
        size_t len = 8 * pw + (size_t) (rnd() % (sizeof(msg) - 8 * USNIC_SIP_MEMO_WORDS));
        int k = (0 == rnd() % 16) ? 1 - (last_k < 0 ? 0 : last_k) : (last_k < 0 ? 0 : last_k);
        size_t keep = (size_t) (rnd() % 10); /* words kept from the last message */
        bool expect_hit;
        uint64_t got, want;

        if (0 == rnd() % 8) {
            pw = last_pw ? last_pw : pw; /* mostly the same prefix length */
        }
        if (len < 8 * pw) {
            len = 8 * pw;
        }
        fill_random(msg + 8 * keep, sizeof(msg) - 8 * keep);
        if (0 == rnd() % 16 && keep > 0) {
            size_t bit = (size_t) (rnd() % (64 * keep)); /* one bit of a kept word */
            msg[bit / 8] ^= (uint8_t) (1u << (bit % 8));
        }
        expect_hit = (pw == last_pw && k == last_k && 0 == memcmp(msg, last, 8 * pw));
        want = usnic_siphash24(&keys[k], msg, len);
        got = usnic_siphash24_memo(&memo, &keys[k], msg, len, pw);
        want_hits += expect_hit;
        expect_hit ? hit_cases++ : miss_cases++;
        if (got != want || memo.hits != want_hits) {
            bad = i;
        }
        memcpy(last, msg, sizeof(msg));
        last_pw = pw;
        last_k = k;
    }
    check(bad < 0, "siphash24 memo: same tag as without, resumes exactly when the prefix matches",
          "message %ld (hits %" PRIu64 ", expected %" PRIu64 ")", bad, memo.hits, want_hits);
    check(hit_cases > 10000 && miss_cases > 10000, "siphash24 memo: both paths taken",
          "%ld hits, %ld misses", hit_cases, miss_cases);

    /* no memo, no prefix, a prefix longer than the message or the memo */
    fill_random(msg, sizeof(msg));
    check(usnic_siphash24_memo(NULL, &keys[0], msg, 40, 3) == usnic_siphash24(&keys[0], msg, 40) &&
              usnic_siphash24_memo(&memo, &keys[0], msg, 40, 0) ==
                  usnic_siphash24(&keys[0], msg, 40) &&
              usnic_siphash24_memo(&memo, &keys[0], msg, 20, 3) ==
                  usnic_siphash24(&keys[0], msg, 20) &&
              usnic_siphash24_memo(&memo, &keys[0], msg, 120, USNIC_SIP_MEMO_WORDS + 1) ==
                  usnic_siphash24(&keys[0], msg, 120) &&
              usnic_siphash24_memo(&memo, &keys[0], msg, 24, 3) ==
                  usnic_siphash24(&keys[0], msg, 24),
          "siphash24 memo: edge cases are plain SipHash", "different tag");
}

/* n messages at once: exactly the tags of one by one, with the lanes and
 * without, for every count of messages and every length up to 96 bytes;
 * the bytes beyond each message's length (read, not hashed) are random. */
static void test_sip_lanes(void)
{
    enum {
        MAXN = 21,
        STRIDE = 104
    };
    static uint8_t msgs[MAXN * STRIDE];
    struct usnic_sip_key key;
    uint8_t kb[16];
    uint64_t tags[MAXN + 1];
    long bad = -1, cases = 0, prefixed = 0;
    bool have = usnic_sip_lanes_available();

    for (int pass = 0; pass < 2; pass++) {
        bool on = usnic_sip_lanes_select(0 == pass);
        bad = -1;

        check(on == (0 == pass && have),
              "siphash24 lanes: selected as asked where the CPU has them",
              "on %d, pass %d, available %d", (int) on, pass, (int) have);
        for (long i = 0; i < 3000 && bad < 0; i++) {
            unsigned n = (unsigned) (rnd() % (MAXN + 1));
            size_t len = (size_t) (rnd() % 97);

            fill_random(kb, sizeof(kb));
            usnic_sip_key_load(&key, kb);
            fill_random(msgs, sizeof(msgs));
            if (0 == rnd() % 2) {
                /* a shared start (absorbed once), up to the whole message */
                size_t shared = (size_t) (rnd() % (len + 1));
                for (unsigned j = 1; j < n; j++) {
                    memcpy(msgs + j * STRIDE, msgs, shared);
                }
                prefixed++;
            }
            tags[n] = 0x5a5a5a5a5a5a5a5aull; /* not written past n */
            usnic_siphash24_lanes(&key, msgs, STRIDE, len, n, tags);
            for (unsigned j = 0; j < n && bad < 0; j++) {
                if (tags[j] != usnic_siphash24(&key, msgs + j * STRIDE, len)) {
                    bad = i;
                }
            }
            if (tags[n] != 0x5a5a5a5a5a5a5a5aull) {
                bad = i;
            }
            cases++;
        }
        check(bad < 0 && prefixed > 1000,
              "siphash24 lanes: the tags of one by one, for 0-21 messages of 0-96 bytes, half of "
              "them starting alike",
              "case %ld (lanes %s)", bad, on ? "on" : "off");
    }
    usnic_sip_lanes_select(true);
    printf("# siphash24 lanes: %s on this CPU (%ld cases)\n",
           have ? "AVX-512, tested with and without" : "absent, one by one tested", cases);
}

static void test_sip_misc(void)
{
    uint8_t b[8], c[8];
    struct usnic_sip_key k1, k2;
    uint8_t kb[16] = {0};
    uint8_t msg[48] = {0};
    uint64_t t = 0x0123456789abcdefull;

    usnic_sip_tag_store(b, t);
    check(0xef == b[0] && 0x01 == b[7] && usnic_sip_tag_load(b) == t,
          "siphash24: tag stored little-endian, loads back", "bytes %02x..%02x", b[0], b[7]);
    check(usnic_sip_tag_equal(t, t) && !usnic_sip_tag_equal(t, t ^ (1ull << 63)) &&
              !usnic_sip_tag_equal(t, t ^ 1),
          "siphash24: tag comparison", "wrong answer");
    memcpy(c, b, 8);
    check(usnic_auth_equal_ct(b, c, 8) && usnic_auth_equal_ct(b, c, 0), "auth: equal_ct equal",
          "unequal");
    c[7] ^= 0x80;
    check(!usnic_auth_equal_ct(b, c, 8) && usnic_auth_equal_ct(b, c, 7),
          "auth: equal_ct finds the last byte", "wrong answer");

    /* key bytes are used in order: one bit of the key changes the tag */
    usnic_sip_key_load(&k1, kb);
    kb[15] = 0x80;
    usnic_sip_key_load(&k2, kb);
    check(usnic_siphash24(&k1, msg, 48) != usnic_siphash24(&k2, msg, 48),
          "siphash24: the key's last bit matters", "same tag");
    check(0 == k1.k0 && 0 == k1.k1 && 0x8000000000000000ull == k2.k1,
          "siphash24: key bytes load little-endian", "k2.k1 = %016" PRIx64, k2.k1);
}

/* ================================================================ CRC32C */

struct crc_vec {
    const char *name;
    uint8_t data[48];
    size_t len;
    uint32_t crc;
};

static struct crc_vec crc_vecs[7];
static int ncrc_vecs;

static void crc_vectors_init(void)
{
    struct crc_vec *v;
    static const uint8_t pdu[48] = {0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                                    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00,
                                    0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00,
                                    0x00, 0x18, 0x28, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                                    0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};

    ncrc_vecs = 0;
    v = &crc_vecs[ncrc_vecs++];
    *v = (struct crc_vec){.name = "\"123456789\"", .len = 9, .crc = 0xE3069283u};
    memcpy(v->data, "123456789", 9);
    v = &crc_vecs[ncrc_vecs++];
    *v = (struct crc_vec){.name = "32 zero bytes", .len = 32, .crc = 0x8A9136AAu};
    v = &crc_vecs[ncrc_vecs++];
    *v = (struct crc_vec){.name = "32 bytes 0xff", .len = 32, .crc = 0x62A8AB43u};
    memset(v->data, 0xff, 32);
    v = &crc_vecs[ncrc_vecs++];
    *v = (struct crc_vec){.name = "0..31 ascending", .len = 32, .crc = 0x46DD794Eu};
    for (int i = 0; i < 32; i++) {
        v->data[i] = (uint8_t) i;
    }
    v = &crc_vecs[ncrc_vecs++];
    *v = (struct crc_vec){.name = "31..0 descending", .len = 32, .crc = 0x113FDB5Cu};
    for (int i = 0; i < 32; i++) {
        v->data[i] = (uint8_t) (31 - i);
    }
    v = &crc_vecs[ncrc_vecs++];
    *v = (struct crc_vec){.name = "iSCSI read PDU", .len = 48, .crc = 0xD9963A56u};
    memcpy(v->data, pdu, 48);
    v = &crc_vecs[ncrc_vecs++];
    *v = (struct crc_vec){.name = "empty", .len = 0, .crc = 0};
}

/* The published vectors through one implementation: whole, chained at
 * every split point, fused with a copy (plain and non-temporal) at every
 * split point, at every alignment. */
static void test_crc_vectors(const char *impl)
{
    char name[128];

    for (int vi = 0; vi < ncrc_vecs; vi++) {
        const struct crc_vec *v = &crc_vecs[vi];
        uint8_t src[48 + 8], dst[48 + 16];
        uint32_t got = usnic_crc32c(0, v->data, v->len);
        int bad = -1;

        snprintf(name, sizeof(name), "crc32c %s: %s", impl, v->name);
        check(got == v->crc && crc_bitwise(0, v->data, v->len) == v->crc, name,
              "got 0x%08" PRIX32 ", bitwise 0x%08" PRIX32 ", want 0x%08" PRIX32, got,
              crc_bitwise(0, v->data, v->len), v->crc);

        for (size_t off = 0; off < 8 && bad < 0; off++) {
            memcpy(src + off, v->data, v->len);
            for (size_t a = 0; a <= v->len && bad < 0; a++) {
                uint32_t c = usnic_crc32c(usnic_crc32c(0, src + off, a), src + off + a, v->len - a);
                if (c != v->crc) {
                    bad = (int) (off * 100 + a);
                }
            }
        }
        snprintf(name, sizeof(name), "crc32c %s: %s in 2 pieces, every split and alignment", impl,
                 v->name);
        check(bad < 0, name, "offset*100+split %d", bad);

        for (int nt = 0; nt < 2; nt++) {
            bad = -1;
            for (size_t off = 0; off < 8 && bad < 0; off++) {
                for (size_t doff = 0; doff < 8 && bad < 0; doff++) {
                    memcpy(src + off, v->data, v->len);
                    for (size_t a = 0; a <= v->len && bad < 0; a++) {
                        uint32_t c;
                        memset(dst, 0xA5, sizeof(dst));
                        if (nt) {
                            c = usnic_crc32c_copy_nt(0, dst + doff, src + off, a);
                            c = usnic_crc32c_copy_nt(c, dst + doff + a, src + off + a, v->len - a);
                        } else {
                            c = usnic_crc32c_copy(0, dst + doff, src + off, a);
                            c = usnic_crc32c_copy(c, dst + doff + a, src + off + a, v->len - a);
                        }
                        if (c != v->crc || 0 != memcmp(dst + doff, v->data, v->len)) {
                            bad = (int) (off * 10000 + doff * 100 + a);
                        }
                        for (size_t i = 0; i < sizeof(dst) && bad < 0; i++) {
                            if ((i < doff || i >= doff + v->len) && 0xA5 != dst[i]) {
                                bad = (int) (1000000 + i);
                            }
                        }
                    }
                }
            }
            snprintf(name, sizeof(name), "crc32c %s: %s fused with a%s copy, every split", impl,
                     v->name, nt ? " non-temporal" : "");
            check(bad < 0, name, "src offset*10000+dst offset*100+split %d", bad);
        }
    }
}

/* Every length up to 1100 at every alignment, and lengths around the
 * three-stream group sizes, against the bitwise reference: plain, copy
 * and non-temporal copy. */
static void test_crc_lengths(const char *impl)
{
    enum {
        MAXLEN = 3 * 3 * 4096 + 4096
    };
    static const size_t extra[] = {1472,  1504,  8972,  9004,  12287, 12288, 12289,
                                   12295, 12296, 12480, 24575, 24576, 24577, 24600,
                                   36863, 36864, 36865, 40959, 40960, 65507, 65539};
    uint8_t *src = malloc(MAXLEN + 80);
    uint8_t *dst = malloc(MAXLEN + 80);
    char name[128];
    int bad = -1;
    long count = 0;

    if (NULL == src || NULL == dst) {
        check(false, "crc32c: allocation", "malloc failed");
        free(src);
        free(dst);
        return;
    }
    fill_random(src, MAXLEN + 80);
    for (size_t n = 0; n <= 1100 && bad < 0; n++) {
        for (size_t off = 0; off < 8 && bad < 0; off++) {
            uint32_t seed = (uint32_t) rnd();
            uint32_t want = crc_bitwise(seed, src + off, n);
            uint32_t c0 = usnic_crc32c(seed, src + off, n);
            size_t doff = (off * 3) & 7;
            uint32_t c1 = usnic_crc32c_copy(seed, dst + doff, src + off, n);
            bool copied = 0 == memcmp(dst + doff, src + off, n);
            uint32_t c2 = usnic_crc32c_copy_nt(seed, dst + 8 + doff, src + off, n);
            copied = copied && 0 == memcmp(dst + 8 + doff, src + off, n);
            count++;
            if (c0 != want || c1 != want || c2 != want || !copied) {
                bad = (int) (n * 10 + off);
            }
        }
    }
    snprintf(name, sizeof(name), "crc32c %s: lengths 0..1100 at every alignment, plain and fused",
             impl);
    check(bad < 0, name, "length*10+offset %d", bad);

    for (size_t i = 0; i < sizeof(extra) / sizeof(extra[0]) && bad < 0; i++) {
        for (size_t off = 0; off < 8 && bad < 0; off += 3) {
            size_t n = extra[i] <= MAXLEN ? extra[i] : MAXLEN;
            uint32_t want = crc_bitwise(0, src + off, n);
            uint32_t c0 = usnic_crc32c(0, src + off, n);
            uint32_t c1 = usnic_crc32c_copy(0, dst + off + 1, src + off, n);
            bool copied = 0 == memcmp(dst + off + 1, src + off, n);
            uint32_t c2 = usnic_crc32c_copy_nt(0, dst + 8 - off, src + off, n);
            copied = copied && 0 == memcmp(dst + 8 - off, src + off, n);
            count++;
            if (c0 != want || c1 != want || c2 != want || !copied) {
                bad = (int) (n * 10 + off);
            }
        }
    }
    snprintf(name, sizeof(name), "crc32c %s: datagram and group-boundary lengths", impl);
    check(bad < 0, name, "length*10+offset %d", bad);

    /* long input chained in random pieces */
    for (int iter = 0; iter < 40 && bad < 0; iter++) {
        size_t n = (size_t) (rnd() % (MAXLEN + 1));
        uint32_t want = crc_bitwise(0, src, n);
        uint32_t c = 0, cc = 0;
        size_t at = 0;
        while (at < n) {
            size_t k = (size_t) (rnd() % (n - at + 1));
            if (rnd() & 1) {
                k = k % 300;
            }
            c = usnic_crc32c(c, src + at, k);
            cc = usnic_crc32c_copy(cc, dst + at, src + at, k);
            at += k;
        }
        count++;
        if (c != want || cc != want || 0 != memcmp(dst, src, n)) {
            bad = iter;
        }
    }
    snprintf(name, sizeof(name), "crc32c %s: long inputs chained in random pieces", impl);
    check(bad < 0, name, "iteration %d", bad);
    printf("  (%ld crc32c inputs checked)\n", count);
    free(src);
    free(dst);
}

static void test_crc(void)
{
    bool hw = usnic_crc32c_hw_available();
    enum usnic_crc32c_impl first = usnic_crc32c_impl();

    crc_vectors_init();
    check(first == (hw ? USNIC_CRC32C_HW : USNIC_CRC32C_TABLE),
          "crc32c: the hardware version is chosen when the CPU has it", "in use: %s (hw %d)",
          usnic_crc32c_impl_name(first), (int) hw);
    printf("  crc32c: hardware %s; in use: %s\n", hw ? "available" : "not available",
           usnic_crc32c_impl_name(first));

    check(USNIC_CRC32C_TABLE == usnic_crc32c_select(USNIC_CRC32C_TABLE),
          "crc32c: the table version can be selected", "not selected");
    test_crc_vectors("table");
    test_crc_lengths("table");

    if (hw) {
        check(USNIC_CRC32C_HW == usnic_crc32c_select(USNIC_CRC32C_HW),
              "crc32c: the hardware version can be selected", "not selected");
        test_crc_vectors("hw");
        test_crc_lengths("hw");
    } else {
        check(USNIC_CRC32C_TABLE == usnic_crc32c_select(USNIC_CRC32C_HW),
              "crc32c: asking for hardware without it gives the table version", "wrong");
        printf("  (no SSE4.2 + PCLMULQDQ here: the hardware version was not tested)\n");
    }
    usnic_crc32c_select(USNIC_CRC32C_AUTO);
    check(first == usnic_crc32c_impl(), "crc32c: auto selects the first choice again", "%s",
          usnic_crc32c_impl_name(usnic_crc32c_impl()));
    check(0 == strcmp("auto", usnic_crc32c_impl_name(USNIC_CRC32C_AUTO)),
          "crc32c: implementation names", "wrong");
}

int main(void)
{
    check_seed = 0x5eed0a17c5a5eedull;
    rng_state = check_seed;
    test_sip_vectors();
    test_sip_pieces();
    test_sip_memo();
    test_sip_lanes();
    test_sip_misc();
    test_crc();
    return check_summary("test_auth");
}
