/*
 * Integrity of the usnic datagrams: a keyed MAC (SipHash-2-4) and a
 * checksum (CRC32C), both written here from their specifications and
 * checked against the published test vectors (test/unit/test_auth.c).
 * Plain C11 (plus <immintrin.h>/<cpuid.h> on x86-64); no Open MPI header.
 *
 * SipHash-2-4 (Aumasson and Bernstein, "SipHash: a fast short-input PRF",
 * 2012): a pseudorandom function of a 128-bit key and a message of any
 * length, 64-bit output.  As a MAC it needs no nonce (a datagram resent
 * with the same sequence number and other fields changed is just another
 * message), no state between messages, no allocation and no library
 * initialisation; it is fastest on the short inputs the header MAC has
 * (docs/perf-mac.md).  The key is the sender's secret, known to every
 * receiver of the job.  The tag is the 64-bit output; on the wire it is
 * stored little-endian (usnic_sip_tag_store), which is the byte order of
 * the reference test vectors.
 *
 * A datagram's MAC covers memory in several places (the header in the
 * segment buffer, the payload in the user's buffer when sent zero-copy):
 * usnic_siphash24_pieces() takes a list of pieces, and the streaming
 * interface (init/update/final) any split at all; the result is that of
 * the one-shot function over the concatenation.
 *
 * CRC32C: the CRC-32 of the Castagnoli polynomial 0x1EDC6F41 (reflected
 * 0x82F63B78), with the iSCSI conventions of RFC 3720 (initial value and
 * final XOR all ones, bits reflected): usnic_crc32c(0, "123456789", 9) is
 * 0xE3069283.  The running value chains: usnic_crc32c(usnic_crc32c(0, a,
 * na), b, nb) is the CRC of a followed by b.  On x86-64 CPUs with SSE4.2
 * and PCLMULQDQ it runs the crc32 instruction on three interleaved streams
 * (8 bytes a cycle); elsewhere a table-driven version (slicing by 8).  The
 * choice is made once, when the library is loaded (a constructor), so the
 * hot path does not test for it.
 *
 * usnic_crc32c_copy() copies and checksums in one pass over the source
 * (the receive path's copy from its receive buffer into the user's buffer
 * then costs little more than the copy); usnic_crc32c_copy_nt() does the
 * same with non-temporal stores, for the large PUT chunks that the
 * receive path already copies past the caches (btl_usnic_stream_copy_min).
 */
#ifndef BTL_USNIC_AUTH_H
#define BTL_USNIC_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ============================================================ SipHash-2-4 */

#define USNIC_SIP_KEY_BYTES 16
#define USNIC_SIP_TAG_BYTES 8

/* The key as two 64-bit words (bytes 0..7 and 8..15, little-endian). */
struct usnic_sip_key {
    uint64_t k0, k1;
};

/* A streaming computation: init, any number of updates, final. */
struct usnic_sip_state {
    uint64_t v0, v1, v2, v3;
    uint64_t tail;   /* bytes of an incomplete word, little-endian */
    uint64_t ntotal; /* bytes fed so far */
};

/* One piece of a message that lies in several places. */
struct usnic_auth_piece {
    const void *base;
    size_t len;
};

void usnic_sip_key_load(struct usnic_sip_key *key, const uint8_t bytes[USNIC_SIP_KEY_BYTES]);

uint64_t usnic_siphash24(const struct usnic_sip_key *key, const void *data, size_t len);
uint64_t usnic_siphash24_pieces(const struct usnic_sip_key *key,
                                const struct usnic_auth_piece *pieces, size_t npieces);

/* The MAC of a request that asks for an answer (a liveness probe, a
 * connectivity ping): SipHash-2-4 of its first hdr_len bytes, then the
 * IPv4 address and UDP port it was sent from (network byte order, 4 + 2
 * bytes), under the secret of the process asked.  The answer goes only to
 * the address a holder of that secret named. */
uint64_t usnic_sip_request_mac(const struct usnic_sip_key *key, const void *hdr, size_t hdr_len,
                               uint32_t from_ip, uint16_t from_port);

/*
 * A memo of a message's first words: the state after absorbing nwords
 * 8-byte words under key.  usnic_siphash24_memo() returns exactly
 * usnic_siphash24(key, data, len); when data starts with the memo's words
 * under the memo's key it resumes from the memo's state instead of
 * absorbing them again, and otherwise it absorbs them and keeps them as
 * the new memo.  It pays off for runs of messages that share a prefix: the
 * datagrams of one train differ only in the fields the packet MAC's input
 * puts last (btl_usnic_proto.c), so their MACs cost the last words and the
 * finalisation.  A memo holds key-derived state: keep it where the key is
 * kept.  A zeroed memo is empty.
 */
#define USNIC_SIP_MEMO_WORDS 8

struct usnic_sip_memo {
    struct usnic_sip_key key;
    uint64_t v0, v1, v2, v3;
    uint64_t words[USNIC_SIP_MEMO_WORDS];
    uint32_t nwords; /* 0: empty */
    uint32_t pad;
    uint64_t hits; /* computations that resumed from the memo */
};

/* prefix_words <= USNIC_SIP_MEMO_WORDS and prefix_words * 8 <= len; a
 * prefix_words of 0 or a NULL memo computes usnic_siphash24(). */
uint64_t usnic_siphash24_memo(struct usnic_sip_memo *memo, const struct usnic_sip_key *key,
                              const void *data, size_t len, size_t prefix_words);

void usnic_sip_init(struct usnic_sip_state *s, const struct usnic_sip_key *key);
void usnic_sip_update(struct usnic_sip_state *s, const void *data, size_t len);
uint64_t usnic_sip_final(const struct usnic_sip_state *s);

/* The tag's 8 bytes on the wire (little-endian), and back. */
void usnic_sip_tag_store(uint8_t out[USNIC_SIP_TAG_BYTES], uint64_t tag);
uint64_t usnic_sip_tag_load(const uint8_t in[USNIC_SIP_TAG_BYTES]);

/*
 * The tags of n messages of len bytes each under one key, all at once:
 * message i at (const uint8_t *) msgs + i * stride, its tag into tags[i];
 * exactly what n calls of usnic_siphash24() return.  Every message must be
 * readable up to len rounded up to 8 bytes (the bytes beyond len are not
 * hashed), and stride a multiple of 8.  Where the CPU has AVX-512, eight
 * messages go through the rounds together, one in each 64-bit lane of a
 * register (on CPUs from Ice Lake or Zen 4 on, where 512-bit instructions
 * do not lower the clock): a train's headers cost about half of hashing
 * them one by one with the memo (docs/perf-kernel-backend.md, session
 * 14).  Elsewhere, and for fewer than USNIC_SIP_LANES_MIN messages, one
 * by one.
 */
#define USNIC_SIP_LANES 8
#define USNIC_SIP_LANES_MIN 3
void usnic_siphash24_lanes(const struct usnic_sip_key *key, const void *msgs, size_t stride,
                           size_t len, unsigned n, uint64_t *tags);
/* Whether the CPU has the lanes; whether they are in use; and a way to
 * turn them off and on (tests, benchmarks, btl_usnic_mac_lanes): returns
 * whether they are in use afterwards.  Not thread-safe. */
bool usnic_sip_lanes_available(void);
bool usnic_sip_lanes_on(void);
bool usnic_sip_lanes_select(bool on);

/* Whether a received tag is the expected one, in time independent of where
 * they differ (one 64-bit comparison, no early exit over bytes). */
static inline bool usnic_sip_tag_equal(uint64_t a, uint64_t b)
{
    return 0 == (a ^ b);
}

/* Whether n bytes at a and b are equal, in time independent of their values. */
bool usnic_auth_equal_ct(const void *a, const void *b, size_t n);

/* ================================================================ CRC32C */

enum usnic_crc32c_impl {
    USNIC_CRC32C_AUTO = 0, /* hardware when the CPU has it, else table */
    USNIC_CRC32C_TABLE,    /* portable table-driven code */
    USNIC_CRC32C_HW        /* SSE4.2 crc32 + PCLMULQDQ */
};

uint32_t usnic_crc32c(uint32_t crc, const void *data, size_t len);
/* memcpy(dst, src, len) (the areas must not overlap), and return the CRC
 * of those bytes continued from crc. */
uint32_t usnic_crc32c_copy(uint32_t crc, void *dst, const void *src, size_t len);
/* The same with non-temporal stores (on x86-64; a plain copy elsewhere):
 * dst is not left in the caches, and the stores are ordered (sfence)
 * before the function returns. */
uint32_t usnic_crc32c_copy_nt(uint32_t crc, void *dst, const void *src, size_t len);

/* The implementation in use; and a way to choose one (tests, benchmarks):
 * returns the one now in use (HW falls back to TABLE if the CPU lacks it).
 * Not thread-safe: call it before other threads checksum. */
enum usnic_crc32c_impl usnic_crc32c_impl(void);
enum usnic_crc32c_impl usnic_crc32c_select(enum usnic_crc32c_impl want);
bool usnic_crc32c_hw_available(void);
const char *usnic_crc32c_impl_name(enum usnic_crc32c_impl impl);

#endif /* BTL_USNIC_AUTH_H */
