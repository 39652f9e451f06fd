/*
 * SipHash-2-4 and CRC32C for the usnic datagrams (see btl_usnic_auth.h).
 * Written from the specifications (the SipHash paper; RFC 3720 and the
 * Castagnoli polynomial), checked by test/unit/test_auth.c, measured by
 * bench/macbench.c (docs/perf-mac.md).
 */
#include <string.h>

#include "btl_usnic_auth.h"

/* USNIC_AUTH_PORTABLE: build the portable code only (to test it as a
 * platform without the instructions would build it) */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) &&                            \
    !defined(USNIC_AUTH_PORTABLE)
#define USNIC_AUTH_X86 1
#include <cpuid.h>
#include <immintrin.h>
#else
#define USNIC_AUTH_X86 0
#endif

#if defined(__BYTE_ORDER__) && defined(__ORDER_BIG_ENDIAN__) &&                                    \
    __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define USNIC_AUTH_BIG_ENDIAN 1
#else
#define USNIC_AUTH_BIG_ENDIAN 0
#endif

/* Eight bytes as a little-endian number, from any alignment. */
static inline uint64_t load_le64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof(v));
#if USNIC_AUTH_BIG_ENDIAN
    v = __builtin_bswap64(v);
#endif
    return v;
}

static inline void store_le64(uint8_t *p, uint64_t v)
{
#if USNIC_AUTH_BIG_ENDIAN
    v = __builtin_bswap64(v);
#endif
    memcpy(p, &v, sizeof(v));
}

/* ============================================================ SipHash-2-4 */

static inline uint64_t rotl64(uint64_t x, unsigned b)
{
    return (x << b) | (x >> (64 - b));
}

struct sipv {
    uint64_t v0, v1, v2, v3;
};

/* One SipRound (the paper's figure 2.1: the ARX network of four words). */
static inline void sip_round(struct sipv *v)
{
    v->v0 += v->v1;
    v->v1 = rotl64(v->v1, 13);
    v->v1 ^= v->v0;
    v->v0 = rotl64(v->v0, 32);
    v->v2 += v->v3;
    v->v3 = rotl64(v->v3, 16);
    v->v3 ^= v->v2;
    v->v0 += v->v3;
    v->v3 = rotl64(v->v3, 21);
    v->v3 ^= v->v0;
    v->v2 += v->v1;
    v->v1 = rotl64(v->v1, 17);
    v->v1 ^= v->v2;
    v->v2 = rotl64(v->v2, 32);
}

/* Initialisation: the key XORed into "somepseudorandomlygeneratedbytes". */
static inline void sip_start(struct sipv *v, const struct usnic_sip_key *key)
{
    v->v0 = key->k0 ^ 0x736f6d6570736575ull;
    v->v1 = key->k1 ^ 0x646f72616e646f6dull;
    v->v2 = key->k0 ^ 0x6c7967656e657261ull;
    v->v3 = key->k1 ^ 0x7465646279746573ull;
}

/* Compression of one message word: c = 2 SipRounds. */
static inline void sip_word(struct sipv *v, uint64_t m)
{
    v->v3 ^= m;
    sip_round(v);
    sip_round(v);
    v->v0 ^= m;
}

/* Finalisation: d = 4 SipRounds. */
static inline uint64_t sip_finish(struct sipv *v)
{
    v->v2 ^= 0xff;
    sip_round(v);
    sip_round(v);
    sip_round(v);
    sip_round(v);
    return v->v0 ^ v->v1 ^ v->v2 ^ v->v3;
}

void usnic_sip_key_load(struct usnic_sip_key *key, const uint8_t bytes[USNIC_SIP_KEY_BYTES])
{
    key->k0 = load_le64(bytes);
    key->k1 = load_le64(bytes + 8);
}

/* The n < 8 bytes at p as a little-endian number (overlapping loads, no
 * loop): what a message's last, incomplete word holds. */
static inline uint64_t load_le_partial(const uint8_t *p, size_t n)
{
    if (n >= 4) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + n - 4, 4);
#if USNIC_AUTH_BIG_ENDIAN
        lo = __builtin_bswap32(lo);
        hi = __builtin_bswap32(hi);
#endif
        return (uint64_t) lo | ((uint64_t) hi << (8 * (n - 4)));
    }
    if (n) {
        return (uint64_t) p[0] | ((uint64_t) p[n / 2] << (8 * (n / 2))) |
               ((uint64_t) p[n - 1] << (8 * (n - 1)));
    }
    return 0;
}

/*
 * Absorb len bytes into v, continuing a message of which *ntotal bytes
 * came before; the last (ntotal mod 8) of those wait in *tail.  Whole
 * words go straight from memory; only a word that straddles two pieces is
 * put together in *tail.
 */
static inline void sip_absorb(struct sipv *v, uint64_t *tail, uint64_t *ntotal, const uint8_t *p,
                              size_t len)
{
    size_t have = (size_t) (*ntotal & 7);

    *ntotal += len;
    if (have) {
        size_t need = 8 - have;
        if (len < need) {
            *tail |= load_le_partial(p, len) << (8 * have);
            return;
        }
        sip_word(v, *tail | (load_le_partial(p, need) << (8 * have)));
        p += need;
        len -= need;
    }
    for (; len >= 8; p += 8, len -= 8) {
        sip_word(v, load_le64(p));
    }
    *tail = load_le_partial(p, len);
}

/* The rest of a one-shot computation: the n bytes at p, the last of a
 * message of len bytes in all whose first len - n (a multiple of 8) v has
 * absorbed; then the finalisation.  The tag. */
static inline uint64_t sip_rest(struct sipv *v, const uint8_t *p, size_t n, size_t len)
{
    for (; n >= 8; p += 8, n -= 8) {
        sip_word(v, load_le64(p));
    }
    /* the last word: the remaining bytes, and the length's low byte on top */
    sip_word(v, load_le_partial(p, len & 7) | ((uint64_t) len << 56));
    return sip_finish(v);
}

uint64_t usnic_siphash24(const struct usnic_sip_key *key, const void *data, size_t len)
{
    struct sipv v;

    sip_start(&v, key);
    return sip_rest(&v, data, len, len);
}

uint64_t usnic_sip_request_mac(const struct usnic_sip_key *key, const void *hdr, size_t hdr_len,
                               uint32_t from_ip, uint16_t from_port)
{
    const struct usnic_auth_piece pieces[] = {
        {hdr, hdr_len}, {&from_ip, sizeof(from_ip)}, {&from_port, sizeof(from_port)}};

    return usnic_siphash24_pieces(key, pieces, 3);
}

uint64_t usnic_siphash24_memo(struct usnic_sip_memo *memo, const struct usnic_sip_key *key,
                              const void *data, size_t len, size_t prefix_words)
{
    const uint8_t *p = data;
    struct sipv v;
    size_t i;

    if (NULL == memo || 0 == prefix_words || prefix_words > USNIC_SIP_MEMO_WORDS ||
        8 * prefix_words > len) {
        return usnic_siphash24(key, data, len);
    }
    if (memo->nwords == prefix_words && memo->key.k0 == key->k0 && memo->key.k1 == key->k1) {
        uint64_t diff = 0;
        for (i = 0; i < prefix_words; i++) {
            diff |= load_le64(p + 8 * i) ^ memo->words[i];
        }
        if (0 == diff) {
            v.v0 = memo->v0;
            v.v1 = memo->v1;
            v.v2 = memo->v2;
            v.v3 = memo->v3;
            memo->hits++;
            goto rest;
        }
    }
    sip_start(&v, key);
    for (i = 0; i < prefix_words; i++) {
        memo->words[i] = load_le64(p + 8 * i);
        sip_word(&v, memo->words[i]);
    }
    memo->key = *key;
    memo->nwords = (uint32_t) prefix_words;
    memo->v0 = v.v0;
    memo->v1 = v.v1;
    memo->v2 = v.v2;
    memo->v3 = v.v3;
rest:
    return sip_rest(&v, p + 8 * prefix_words, len - 8 * prefix_words, len);
}

void usnic_sip_init(struct usnic_sip_state *s, const struct usnic_sip_key *key)
{
    struct sipv v;

    sip_start(&v, key);
    s->v0 = v.v0;
    s->v1 = v.v1;
    s->v2 = v.v2;
    s->v3 = v.v3;
    s->tail = 0;
    s->ntotal = 0;
}

void usnic_sip_update(struct usnic_sip_state *s, const void *data, size_t len)
{
    struct sipv v = {s->v0, s->v1, s->v2, s->v3};

    sip_absorb(&v, &s->tail, &s->ntotal, data, len);
    s->v0 = v.v0;
    s->v1 = v.v1;
    s->v2 = v.v2;
    s->v3 = v.v3;
}

uint64_t usnic_sip_final(const struct usnic_sip_state *s)
{
    struct sipv v = {s->v0, s->v1, s->v2, s->v3};

    sip_word(&v, s->tail | (s->ntotal << 56));
    return sip_finish(&v);
}

/* ------------------------------------------------ eight messages at once */

#if USNIC_AUTH_X86
#define LANES_TARGET __attribute__((target("avx512f")))

/* One SipRound in every lane (vprolq: a rotation is one instruction). */
#define SIP_ROUND_X8(v0, v1, v2, v3)                                                               \
    do {                                                                                           \
        v0 = _mm512_add_epi64(v0, v1);                                                             \
        v1 = _mm512_rol_epi64(v1, 13);                                                             \
        v1 = _mm512_xor_si512(v1, v0);                                                             \
        v0 = _mm512_rol_epi64(v0, 32);                                                             \
        v2 = _mm512_add_epi64(v2, v3);                                                             \
        v3 = _mm512_rol_epi64(v3, 16);                                                             \
        v3 = _mm512_xor_si512(v3, v2);                                                             \
        v0 = _mm512_add_epi64(v0, v3);                                                             \
        v3 = _mm512_rol_epi64(v3, 21);                                                             \
        v3 = _mm512_xor_si512(v3, v0);                                                             \
        v2 = _mm512_add_epi64(v2, v1);                                                             \
        v1 = _mm512_rol_epi64(v1, 17);                                                             \
        v1 = _mm512_xor_si512(v1, v2);                                                             \
        v2 = _mm512_rol_epi64(v2, 32);                                                             \
    } while (0)

/* n (1..8) messages, whose first w0 words every lane's state *start has
 * absorbed: lane i hashes the rest of message i; lanes beyond n hash
 * message 0 again, and their tags are not stored. */
LANES_TARGET static void sip_x8(const struct sipv *start, size_t w0, const uint8_t *msgs,
                                size_t stride, size_t len, unsigned n, uint64_t *tags)
{
    uint64_t off[USNIC_SIP_LANES], out[USNIC_SIP_LANES];
    __m512i v0 = _mm512_set1_epi64((long long) start->v0);
    __m512i v1 = _mm512_set1_epi64((long long) start->v1);
    __m512i v2 = _mm512_set1_epi64((long long) start->v2);
    __m512i v3 = _mm512_set1_epi64((long long) start->v3);
    __m512i idx, m;
    size_t w, words = len / 8;

    for (unsigned i = 0; i < USNIC_SIP_LANES; i++) {
        off[i] = (i < n) ? i * stride : 0;
    }
    idx = _mm512_loadu_si512((const void *) off);
    for (w = w0; w < words; w++) {
        /* word w of every message, one in each lane */
        m = _mm512_i64gather_epi64(idx, (const void *) (msgs + 8 * w), 1);
        v3 = _mm512_xor_si512(v3, m);
        SIP_ROUND_X8(v0, v1, v2, v3);
        SIP_ROUND_X8(v0, v1, v2, v3);
        v0 = _mm512_xor_si512(v0, m);
    }
    /* the last word: the remaining bytes, and the length's low byte on top */
    m = _mm512_set1_epi64((long long) ((uint64_t) len << 56));
    if (0 != (len & 7)) {
        __m512i tail = _mm512_i64gather_epi64(idx, (const void *) (msgs + 8 * words), 1);
        tail =
            _mm512_and_si512(tail, _mm512_set1_epi64((long long) ((1ull << (8 * (len & 7))) - 1)));
        m = _mm512_or_si512(m, tail);
    }
    v3 = _mm512_xor_si512(v3, m);
    SIP_ROUND_X8(v0, v1, v2, v3);
    SIP_ROUND_X8(v0, v1, v2, v3);
    v0 = _mm512_xor_si512(v0, m);
    v2 = _mm512_xor_si512(v2, _mm512_set1_epi64(0xff));
    SIP_ROUND_X8(v0, v1, v2, v3);
    SIP_ROUND_X8(v0, v1, v2, v3);
    SIP_ROUND_X8(v0, v1, v2, v3);
    SIP_ROUND_X8(v0, v1, v2, v3);
    _mm512_storeu_si512((void *) out,
                        _mm512_xor_si512(_mm512_xor_si512(v0, v1), _mm512_xor_si512(v2, v3)));
    memcpy(tags, out, n * sizeof(*tags));
}

static bool cpu_has_lanes(void)
{
    unsigned eax, ebx, ecx, edx;

    /* AVX-512 F, and an OS that saves the ZMM registers (XCR0 bits 1, 2,
     * 5-7).  Only on CPUs that also have VBMI2 (Intel from Ice Lake, AMD
     * from Zen 4): on Skylake-SP and Cascade Lake, 512-bit instructions
     * lower the core's clock for a while, which would cost the rest of the
     * process more than the lanes save (glibc avoids them there too). */
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || 0 == (ecx & bit_OSXSAVE) ||
        !__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) || 0 == (ebx & bit_AVX512F) ||
        0 == (ecx & bit_AVX512VBMI2)) {
        return false;
    }
    {
        uint32_t lo, hi;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        return 0xe6 == (lo & 0xe6);
    }
}
#endif /* USNIC_AUTH_X86 */

static int lanes_ok = -1; /* the CPU has them (-1: not asked yet) */
static bool lanes_on;

bool usnic_sip_lanes_available(void)
{
    if (lanes_ok < 0) {
#if USNIC_AUTH_X86
        lanes_ok = cpu_has_lanes();
#else
        lanes_ok = 0;
#endif
        lanes_on = lanes_ok;
    }
    return 1 == lanes_ok;
}

bool usnic_sip_lanes_on(void)
{
    return usnic_sip_lanes_available() && lanes_on;
}

bool usnic_sip_lanes_select(bool on)
{
    lanes_on = usnic_sip_lanes_available() && on;
    return lanes_on;
}

void usnic_siphash24_lanes(const struct usnic_sip_key *key, const void *msgs, size_t stride,
                           size_t len, unsigned n, uint64_t *tags)
{
    const uint8_t *p = msgs;
    unsigned i = 0;

#if USNIC_AUTH_X86
    if (n >= USNIC_SIP_LANES_MIN && usnic_sip_lanes_on()) {
        struct sipv start;
        size_t pw, words = len / 8;

        /* the words that every message starts with (a train's headers
         * share their first ones: btl_usnic_proto.c) are absorbed once,
         * and every group of lanes starts from there */
        sip_start(&start, key);
        for (pw = 0; pw < words; pw++) {
            uint64_t w = load_le64(p + 8 * pw);
            unsigned j = 1;
            while (j < n && load_le64(p + j * stride + 8 * pw) == w) {
                j++;
            }
            if (j < n) {
                break;
            }
            sip_word(&start, w);
        }
        /* (a last group of two: about the time of two one by one, and
         * less than theirs without a memo) */
        for (; i + 2 <= n; i += USNIC_SIP_LANES) {
            unsigned k = (n - i < USNIC_SIP_LANES) ? n - i : USNIC_SIP_LANES;
            sip_x8(&start, pw, p + i * stride, stride, len, k, tags + i);
        }
    }
#endif
    for (; i < n; i++) {
        tags[i] = usnic_siphash24(key, p + i * stride, len);
    }
}

uint64_t usnic_siphash24_pieces(const struct usnic_sip_key *key,
                                const struct usnic_auth_piece *pieces, size_t npieces)
{
    struct sipv v;
    uint64_t tail = 0, ntotal = 0;

    sip_start(&v, key);
    for (size_t i = 0; i < npieces; i++) {
        sip_absorb(&v, &tail, &ntotal, pieces[i].base, pieces[i].len);
    }
    sip_word(&v, tail | (ntotal << 56));
    return sip_finish(&v);
}

void usnic_sip_tag_store(uint8_t out[USNIC_SIP_TAG_BYTES], uint64_t tag)
{
    store_le64(out, tag);
}

uint64_t usnic_sip_tag_load(const uint8_t in[USNIC_SIP_TAG_BYTES])
{
    return load_le64(in);
}

bool usnic_auth_equal_ct(const void *a, const void *b, size_t n)
{
    const volatile uint8_t *x = a;
    const volatile uint8_t *y = b;
    uint8_t acc = 0;

    for (size_t i = 0; i < n; i++) {
        acc |= (uint8_t) (x[i] ^ y[i]);
    }
    return 0 == acc;
}

/* ================================================================ CRC32C */

#define CRC32C_POLY 0x82F63B78u /* 0x1EDC6F41 bit-reflected */

/*
 * The table version: crc_table[k][b] is the CRC register after byte b
 * followed by k zero bytes, so eight bytes are folded in with eight
 * independent lookups ("slicing by 8").
 */
static uint32_t crc_table[8][256];

/* The register after the 8 bytes of w (little-endian) with s XORed in. */
static inline uint32_t crc_table_word(uint32_t s, uint64_t w)
{
    w ^= s;
    return crc_table[7][w & 0xff] ^ crc_table[6][(w >> 8) & 0xff] ^ crc_table[5][(w >> 16) & 0xff] ^
           crc_table[4][(w >> 24) & 0xff] ^ crc_table[3][(w >> 32) & 0xff] ^
           crc_table[2][(w >> 40) & 0xff] ^ crc_table[1][(w >> 48) & 0xff] ^ crc_table[0][w >> 56];
}

static inline uint32_t crc_table_byte(uint32_t s, uint8_t b)
{
    return (s >> 8) ^ crc_table[0][(s ^ b) & 0xff];
}

static void crc_setup(void);
static bool crc_ready; /* tables and constants computed */

static uint32_t crc32c_table(uint32_t crc, const void *data, size_t len)
{
    const uint8_t *p = data;
    uint32_t s = ~crc;

    if (!crc_ready) {
        crc_setup(); /* called before the constructor ran */
    }
    for (; len && ((uintptr_t) p & 7); len--) {
        s = crc_table_byte(s, *p++);
    }
    for (; len >= 8; len -= 8, p += 8) {
        s = crc_table_word(s, load_le64(p));
    }
    for (; len; len--) {
        s = crc_table_byte(s, *p++);
    }
    return ~s;
}

static uint32_t crc32c_copy_table(uint32_t crc, void *dst, const void *src, size_t len)
{
    uint8_t *d = dst;
    const uint8_t *p = src;
    uint32_t s = ~crc;

    if (!crc_ready) {
        crc_setup();
    }
    for (; len >= 8; len -= 8, p += 8, d += 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        memcpy(d, &w, 8);
        s = crc_table_word(s, load_le64(p));
    }
    for (; len; len--) {
        *d++ = *p;
        s = crc_table_byte(s, *p++);
    }
    return ~s;
}

#if USNIC_AUTH_X86
/*
 * The hardware version.  The crc32 instruction folds 8 bytes into the
 * register with a latency of about 3 cycles and a throughput of one a
 * cycle, so the input is split in three streams of L bytes each, run
 * side by side, and joined: with A, B, C the registers after each stream
 * (B and C started from 0),
 *     CRC(all) = A * x^(16L) + B * x^(8L) + C   (mod P).
 * The products: a carry-less multiply (PCLMULQDQ) of a 32-bit register by
 * the constant x^(8L-33) mod P gives a 64-bit value that the crc32
 * instruction, from 0, reduces while multiplying by x^33 (x^32 from the
 * instruction, x from the reflected product's one-bit offset).
 */
#define CRC_LMAX 4096    /* bytes per stream at most (a 12 KiB group) */
#define CRC_3WAY_MIN 192 /* shorter inputs run as one stream */
#define CRC_NK (CRC_LMAX / 8)

/* [j][0] = x^(64j-33), [j][1] = x^(128j-33) mod P, reflected: L = 8j */
static uint32_t crc_k[CRC_NK + 1][2];

#define CRC_TARGET __attribute__((target("sse4.2,pclmul")))
#define CRC_LOAD(p) _mm_loadu_si128((const __m128i *) (const void *) (p))
#define CRC_STREAM(d, x) _mm_stream_si128((__m128i *) (void *) (d), (x))

CRC_TARGET static inline uint64_t crc_join(uint64_t a, uint64_t b, const uint32_t k[2])
{
    __m128i pa = _mm_clmulepi64_si128(_mm_cvtsi64_si128((long long) a),
                                      _mm_cvtsi64_si128((long long) k[1]), 0x00);
    __m128i pb = _mm_clmulepi64_si128(_mm_cvtsi64_si128((long long) b),
                                      _mm_cvtsi64_si128((long long) k[0]), 0x00);
    return _mm_crc32_u64(0, (uint64_t) _mm_cvtsi128_si64(_mm_xor_si128(pa, pb)));
}

static inline uint64_t load64(const uint8_t *p)
{
    uint64_t w;
    memcpy(&w, p, 8);
    return w;
}

/* Copy one 64-byte line with 16-byte loads and stores. */
CRC_TARGET static inline void crc_copy_line(uint8_t *d, const uint8_t *p)
{
    __m128i x0 = CRC_LOAD(p), x1 = CRC_LOAD(p + 16), x2 = CRC_LOAD(p + 32), x3 = CRC_LOAD(p + 48);

    _mm_storeu_si128((__m128i *) (void *) d, x0);
    _mm_storeu_si128((__m128i *) (void *) (d + 16), x1);
    _mm_storeu_si128((__m128i *) (void *) (d + 32), x2);
    _mm_storeu_si128((__m128i *) (void *) (d + 48), x3);
}

/* Three streams of l bytes from p (and, if store, copied to d). */
CRC_TARGET static inline uint64_t crc_hw_3way(uint64_t s, const uint8_t *p, uint8_t *d, size_t l,
                                              bool store)
{
    const uint8_t *pb = p + l, *pc = p + 2 * l;
    uint64_t a = s, b = 0, c = 0;
    size_t i = 0;

    if (store) {
        /* a line of each stream at a time: the CRCs from 8-byte loads, the
         * copy with 16-byte loads (from L1 by then) and stores */
        for (; i + 64 <= l; i += 64) {
#pragma GCC unroll 8
            for (size_t k = i; k < i + 64; k += 8) {
                a = _mm_crc32_u64(a, load64(p + k));
                b = _mm_crc32_u64(b, load64(pb + k));
                c = _mm_crc32_u64(c, load64(pc + k));
            }
            crc_copy_line(d + i, p + i);
            crc_copy_line(d + l + i, pb + i);
            crc_copy_line(d + 2 * l + i, pc + i);
        }
    }
    for (; i < l; i += 8) {
        uint64_t wa = load64(p + i), wb = load64(pb + i), wc = load64(pc + i);
        a = _mm_crc32_u64(a, wa);
        b = _mm_crc32_u64(b, wb);
        c = _mm_crc32_u64(c, wc);
        if (store) {
            memcpy(d + i, &wa, 8);
            memcpy(d + l + i, &wb, 8);
            memcpy(d + 2 * l + i, &wc, 8);
        }
    }
    return crc_join(a, b, crc_k[l / 8]) ^ c;
}

/* The CRC of n bytes from p continued from crc; if store, a copy to d. */
__attribute__((always_inline)) CRC_TARGET static inline uint32_t
crc_hw_run(uint32_t crc, uint8_t *d, const uint8_t *p, size_t n, bool store)
{
    uint64_t s = (uint32_t) ~crc;

    for (; n && ((uintptr_t) p & 7); n--) {
        if (store) {
            *d++ = *p;
        }
        s = _mm_crc32_u8((uint32_t) s, *p++);
    }
    for (; n >= 3 * CRC_LMAX; n -= 3 * CRC_LMAX, p += 3 * CRC_LMAX) {
        s = crc_hw_3way(s, p, d, CRC_LMAX, store);
        if (store) {
            d += 3 * CRC_LMAX;
        }
    }
    if (n >= CRC_3WAY_MIN) {
        size_t l = n / 24 * 8;
        s = crc_hw_3way(s, p, d, l, store);
        n -= 3 * l;
        p += 3 * l;
        if (store) {
            d += 3 * l;
        }
    }
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        s = _mm_crc32_u64(s, w);
        if (store) {
            memcpy(d, &w, 8);
            d += 8;
        }
    }
    for (; n; n--) {
        if (store) {
            *d++ = *p;
        }
        s = _mm_crc32_u8((uint32_t) s, *p++);
    }
    return ~(uint32_t) s;
}

CRC_TARGET static uint32_t crc32c_hw(uint32_t crc, const void *data, size_t len)
{
    return crc_hw_run(crc, NULL, data, len, false);
}

CRC_TARGET static uint32_t crc32c_copy_hw(uint32_t crc, void *dst, const void *src, size_t len)
{
    return crc_hw_run(crc, dst, src, len, true);
}

CRC_TARGET static inline uint64_t crc_fold16(uint64_t c, __m128i x)
{
    c = _mm_crc32_u64(c, (uint64_t) _mm_cvtsi128_si64(x));
    return _mm_crc32_u64(c, (uint64_t) _mm_extract_epi64(x, 1));
}

/*
 * The copy with non-temporal stores: 16-byte streaming stores of whole
 * 64-byte lines, each stream's line written at once, so that the
 * write-combining buffers go to memory full (8-byte stores interleaved over
 * three streams leave them partial, and are slower than the copy by far).
 *
 * One 64-byte line of each of the three streams (A at p, B at p + l, C at
 * p + 2l): all twelve loads first, the three CRCs interleaved, then each
 * line's four stores in a row.
 */
CRC_TARGET static inline void crc_nt_lines(uint64_t c[3], uint8_t *d, const uint8_t *p, size_t l)
{
    const uint8_t *pa = p, *pb = p + l, *pc = p + 2 * l;
    uint8_t *da = d, *db = d + l, *dc = d + 2 * l;
    __m128i a0 = CRC_LOAD(pa), a1 = CRC_LOAD(pa + 16), a2 = CRC_LOAD(pa + 32),
            a3 = CRC_LOAD(pa + 48);
    __m128i b0 = CRC_LOAD(pb), b1 = CRC_LOAD(pb + 16), b2 = CRC_LOAD(pb + 32),
            b3 = CRC_LOAD(pb + 48);
    __m128i c0 = CRC_LOAD(pc), c1 = CRC_LOAD(pc + 16), c2 = CRC_LOAD(pc + 32),
            c3 = CRC_LOAD(pc + 48);
    uint64_t ca = c[0], cb = c[1], cc = c[2];

    ca = crc_fold16(ca, a0);
    cb = crc_fold16(cb, b0);
    cc = crc_fold16(cc, c0);
    ca = crc_fold16(ca, a1);
    cb = crc_fold16(cb, b1);
    cc = crc_fold16(cc, c1);
    ca = crc_fold16(ca, a2);
    cb = crc_fold16(cb, b2);
    cc = crc_fold16(cc, c2);
    ca = crc_fold16(ca, a3);
    cb = crc_fold16(cb, b3);
    cc = crc_fold16(cc, c3);
    CRC_STREAM(da, a0);
    CRC_STREAM(da + 16, a1);
    CRC_STREAM(da + 32, a2);
    CRC_STREAM(da + 48, a3);
    CRC_STREAM(db, b0);
    CRC_STREAM(db + 16, b1);
    CRC_STREAM(db + 32, b2);
    CRC_STREAM(db + 48, b3);
    CRC_STREAM(dc, c0);
    CRC_STREAM(dc + 16, c1);
    CRC_STREAM(dc + 32, c2);
    CRC_STREAM(dc + 48, c3);
    c[0] = ca;
    c[1] = cb;
    c[2] = cc;
}

CRC_TARGET static uint32_t crc32c_copy_nt_hw(uint32_t crc, void *dst, const void *src, size_t len)
{
    uint8_t *d = dst;
    const uint8_t *p = src;
    uint64_t s = (uint32_t) ~crc;

    for (; len && ((uintptr_t) d & 15); len--) {
        *d++ = *p;
        s = _mm_crc32_u8((uint32_t) s, *p++);
    }
    while (len >= 3 * 64) {
        /* three streams of l bytes, l a multiple of the line */
        size_t l = (len >= 3 * CRC_LMAX) ? CRC_LMAX : len / (3 * 64) * 64;
        uint64_t c[3] = {s, 0, 0};
        for (size_t i = 0; i < l; i += 64) {
            crc_nt_lines(c, d + i, p + i, l);
        }
        s = crc_join(c[0], c[1], crc_k[l / 8]) ^ c[2];
        p += 3 * l;
        d += 3 * l;
        len -= 3 * l;
    }
    for (; len >= 16; len -= 16, p += 16, d += 16) {
        __m128i x = _mm_loadu_si128((const __m128i *) (const void *) p);
        s = crc_fold16(s, x);
        _mm_stream_si128((__m128i *) (void *) d, x);
    }
    _mm_sfence();
    for (; len; len--) {
        *d++ = *p;
        s = _mm_crc32_u8((uint32_t) s, *p++);
    }
    return ~(uint32_t) s;
}

static bool cpu_has_crc_hw(void)
{
    unsigned eax, ebx, ecx, edx;

    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) {
        return false;
    }
    return (ecx & bit_SSE4_2) && (ecx & bit_PCLMUL);
}
#endif /* USNIC_AUTH_X86 */

static bool crc_hw_ok; /* the CPU has what crc32c_hw needs */
static bool crc_hw_on; /* and it is in use */

__attribute__((constructor)) static void crc_setup(void)
{
    if (crc_ready) {
        return;
    }
    for (unsigned b = 0; b < 256; b++) {
        uint32_t c = b;
        for (int i = 0; i < 8; i++) {
            c = (c >> 1) ^ (CRC32C_POLY & (0u - (c & 1)));
        }
        crc_table[0][b] = c;
    }
    for (unsigned b = 0; b < 256; b++) {
        for (int k = 1; k < 8; k++) {
            uint32_t c = crc_table[k - 1][b];
            crc_table[k][b] = (c >> 8) ^ crc_table[0][c & 0xff];
        }
    }
#if USNIC_AUTH_X86
    {
        /* x^e mod P for every e the joins need, by multiplying by x */
        uint32_t v = 0x80000000u; /* x^0 */
        for (unsigned e = 0; e <= 128u * CRC_NK - 33; e++) {
            if (0 == (e + 33) % 64 && (e + 33) / 64 <= CRC_NK) {
                crc_k[(e + 33) / 64][0] = v;
            }
            if (0 == (e + 33) % 128) {
                crc_k[(e + 33) / 128][1] = v;
            }
            v = (v >> 1) ^ (CRC32C_POLY & (0u - (v & 1)));
        }
    }
    crc_hw_ok = cpu_has_crc_hw();
#endif
    crc_hw_on = crc_hw_ok;
    crc_ready = true;
}

uint32_t usnic_crc32c(uint32_t crc, const void *data, size_t len)
{
#if USNIC_AUTH_X86
    if (crc_hw_on) {
        return crc32c_hw(crc, data, len);
    }
#endif
    return crc32c_table(crc, data, len);
}

uint32_t usnic_crc32c_copy(uint32_t crc, void *dst, const void *src, size_t len)
{
#if USNIC_AUTH_X86
    if (crc_hw_on) {
        return crc32c_copy_hw(crc, dst, src, len);
    }
#endif
    return crc32c_copy_table(crc, dst, src, len);
}

uint32_t usnic_crc32c_copy_nt(uint32_t crc, void *dst, const void *src, size_t len)
{
#if USNIC_AUTH_X86
    if (crc_hw_on) {
        return crc32c_copy_nt_hw(crc, dst, src, len);
    }
#endif
    return crc32c_copy_table(crc, dst, src, len);
}

bool usnic_crc32c_hw_available(void)
{
    crc_setup();
    return crc_hw_ok;
}

enum usnic_crc32c_impl usnic_crc32c_impl(void)
{
    crc_setup();
    return crc_hw_on ? USNIC_CRC32C_HW : USNIC_CRC32C_TABLE;
}

enum usnic_crc32c_impl usnic_crc32c_select(enum usnic_crc32c_impl want)
{
    crc_setup();
    crc_hw_on = crc_hw_ok && USNIC_CRC32C_TABLE != want;
    return usnic_crc32c_impl();
}

const char *usnic_crc32c_impl_name(enum usnic_crc32c_impl impl)
{
    switch (impl) {
    case USNIC_CRC32C_AUTO:
        return "auto";
    case USNIC_CRC32C_TABLE:
        return "table (slicing by 8)";
    case USNIC_CRC32C_HW:
        return "sse4.2 crc32 x3 + pclmulqdq";
    }
    return "?";
}
