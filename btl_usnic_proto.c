/*
 * Validation and decoding of usnic packets (the format is in btl_usnic_proto.h).
 * Nothing here trusts the buffer: every read is bounded by the datagram length.
 */
#include <stdio.h>
#include <string.h>

#include "btl_usnic_auth.h"
#include "btl_usnic_part.h"
#include "btl_usnic_proto.h"

size_t usnic_pkt_hdr_len(unsigned type)
{
    switch (type) {
    case USNIC_PKT_ACK:
        return USNIC_HDR_LEN_ACK;
    case USNIC_PKT_FRAG:
        return USNIC_HDR_LEN_FRAG;
    case USNIC_PKT_CHUNK:
    case USNIC_PKT_PART:
        return USNIC_HDR_LEN_CHUNK;
    case USNIC_PKT_PUT:
        return USNIC_HDR_LEN_PUT;
    default:
        return 0;
    }
}

/* offset + count <= total, without overflow */
static inline int range_fits(uint64_t offset, uint64_t count, uint64_t total)
{
    return offset <= total && count <= total - offset;
}

enum usnic_drop_reason usnic_pkt_parse(const void *buf, size_t len, uint64_t max_msg_len,
                                       struct usnic_pkt_view *view)
{
    const uint8_t *bytes = buf;
    const struct usnic_pkt_hdr *hdr = buf;
    size_t hlen;

    if (NULL == buf || len < sizeof(*hdr)) {
        return USNIC_DROP_SHORT;
    }
    if (USNIC_PROTO_VERSION != hdr->version) {
        return USNIC_DROP_VERSION;
    }
    hlen = usnic_pkt_hdr_len(hdr->type);
    if (0 == hlen || 0 != (hdr->flags & ~USNIC_PKT_FLAGS_KNOWN) || hdr->lane >= USNIC_PKT_LANES ||
        0 != hdr->reserved || (USNIC_PKT_ACK == hdr->type && 0 != hdr->msg_id)) {
        return USNIC_DROP_TYPE;
    }
    if (USNIC_PKT_ACK == hdr->type && 0 == (hdr->flags & USNIC_PKT_FLAG_ACK)) {
        return USNIC_DROP_TYPE;
    }
    if (USNIC_PKT_ACK != hdr->type &&
        0 != (hdr->flags & (USNIC_PKT_FLAG_SACK | USNIC_PKT_FLAG_SACK_MORE))) {
        return USNIC_DROP_TYPE;
    }
    if (USNIC_PKT_ACK == hdr->type && 0 != (hdr->flags & USNIC_PKT_FLAG_PAD)) {
        return USNIC_DROP_TYPE;
    }
    /* exactly the payload, or with USNIC_PKT_FLAG_PAD at least the payload */
    if (len < hlen || (uint64_t) hdr->payload_len > (uint64_t) (len - hlen) ||
        (0 == (hdr->flags & USNIC_PKT_FLAG_PAD) &&
         (uint64_t) hdr->payload_len != (uint64_t) (len - hlen))) {
        return USNIC_DROP_LENGTH;
    }
    if (USNIC_PKT_ACK == hdr->type &&
        ((hdr->flags & USNIC_PKT_FLAG_SACK)
             ? (0 == hdr->payload_len || 0 != hdr->payload_len % sizeof(struct usnic_sack) ||
                hdr->payload_len > USNIC_SACK_WORDS_MAX * sizeof(struct usnic_sack))
             : 0 != hdr->payload_len)) {
        return USNIC_DROP_LENGTH;
    }

    view->hdr = hdr;
    view->chunk = NULL;
    view->put = NULL;
    view->sack = (USNIC_PKT_ACK == hdr->type && (hdr->flags & USNIC_PKT_FLAG_SACK))
                     ? (const void *) (bytes + hlen)
                     : NULL;
    view->sack_words =
        (NULL != view->sack) ? hdr->payload_len / (uint32_t) sizeof(struct usnic_sack) : 0u;
    view->payload = bytes + hlen;
    view->payload_len = hdr->payload_len;
    view->len = (uint32_t) hlen + hdr->payload_len;

    if (USNIC_PKT_PART == hdr->type) {
        const struct usnic_chunk_hdr *ch = (const void *) (bytes + sizeof(*hdr));
        if (0 != hdr->flags || 0 != hdr->tag || 0 != hdr->msg_id || 0 != hdr->ack_seq ||
            0 != hdr->ts_echo) {
            return USNIC_DROP_TYPE;
        }
        if (ch->msg_len < sizeof(*hdr) || ch->msg_len > USNIC_PART_DGRAM_MAX ||
            0 == hdr->payload_len || !range_fits(ch->offset, hdr->payload_len, ch->msg_len) ||
            0 != ch->offset % USNIC_PART_UNIT ||
            (0 != hdr->payload_len % USNIC_PART_UNIT &&
             ch->offset + hdr->payload_len != ch->msg_len)) {
            return USNIC_DROP_CHUNK_RANGE;
        }
        view->chunk = ch;
    }
    if (USNIC_PKT_CHUNK == hdr->type || USNIC_PKT_PUT == hdr->type) {
        const struct usnic_chunk_hdr *ch = (const void *) (bytes + sizeof(*hdr));
        /* a PUT's length is bounded by its registration, checked on arrival */
        if (0 == ch->msg_len || 0 == hdr->payload_len ||
            (USNIC_PKT_CHUNK == hdr->type && ch->msg_len > max_msg_len) ||
            !range_fits(ch->offset, hdr->payload_len, ch->msg_len)) {
            return USNIC_DROP_CHUNK_RANGE;
        }
        view->chunk = ch;
        if (USNIC_PKT_PUT == hdr->type) {
            view->put = (const void *) (bytes + sizeof(*hdr) + sizeof(*ch));
            if (!range_fits(view->put->reg_offset, ch->msg_len, UINT64_MAX)) {
                return USNIC_DROP_PUT_RANGE;
            }
        }
    }
    return USNIC_PKT_OK;
}

size_t usnic_pkt_mac_hdr_len(unsigned type, uint32_t payload_len)
{
    size_t h = usnic_pkt_hdr_len(type);

    if (0 == h) {
        return USNIC_HDR_LEN_FRAG;
    }
    /* an ACK's payload is its SACK bitmap */
    return (USNIC_PKT_ACK == type) ? h + payload_len : h;
}

/*
 * The MAC's input: the header fields before crc (bytes [0, 44) of the
 * common header) and the chunk and PUT headers, reordered so that what
 * successive datagrams to a peer share comes first and what changes from
 * one to the next comes last:
 *
 *   [0, 20)   version, type, flags, tag, payload_len, sender_key, src_module
 *   [40, 44)  lane, reserved, allow              (24 bytes: 3 words)
 *   chunk msg_len                                (CHUNK, PUT: 4 words)
 *   put reg_key, reg_offset                      (PUT: 6 words)
 *   [28, 32)  msg_id, [20, 24) seq, [32, 36) ts, [24, 28) ack_seq,
 *   [36, 40)  ts_echo
 *   chunk offset                                 (CHUNK, PUT)
 *
 * then an ACK's SACK words, and with auth full everything after the
 * headers.  Every field is at a fixed place for its type (and the type is
 * the input's second byte), so two different headers never give the same
 * input.  The leading words are the same for every datagram of a train
 * (one fragment's chunks or one PUT's: same peer, type, flags, PML tag,
 * message and registration; only the last chunk's payload_len differs) and
 * for a run of equal-sized small messages (a ping-pong), so with a memo
 * (usnic_siphash24_memo) the MAC costs the last three or four words and
 * the finalisation.
 */
#define MAC_FIXED_BYTES 24u /* the first part above */
#define MAC_TAIL_BYTES 20u  /* msg_id, seq, ts, ack_seq, ts_echo */
/* the crc and mac fields: every header but these is in the input */
#define MAC_SKIPPED_BYTES (sizeof(struct usnic_pkt_hdr) - USNIC_MAC_HDR_BYTES)

/* Write the reordered headers of the packet at buf, of type `type`, to in;
 * returns their length (44, 60 or 76) and *prefix_words the words that
 * successive datagrams share. */
/* (inline in both callers: one datagram's seal and verify is the hot path) */
__attribute__((always_inline)) static inline size_t mac_input(const uint8_t *buf, unsigned type,
                                                              uint8_t *in, size_t *prefix_words)
{
    const uint8_t *ext = buf + sizeof(struct usnic_pkt_hdr);
    size_t n = MAC_FIXED_BYTES;

    _Static_assert(offsetof(struct usnic_pkt_hdr, seq) == 20 &&
                       offsetof(struct usnic_pkt_hdr, ack_seq) == 24 &&
                       offsetof(struct usnic_pkt_hdr, msg_id) == 28 &&
                       offsetof(struct usnic_pkt_hdr, ts) == 32 &&
                       offsetof(struct usnic_pkt_hdr, ts_echo) == 36 &&
                       offsetof(struct usnic_pkt_hdr, lane) == 40 &&
                       offsetof(struct usnic_pkt_hdr, crc) == USNIC_MAC_HDR_BYTES,
                   "mac_input() knows the common header's layout");
    memcpy(in, buf, 20);
    memcpy(in + 20, buf + 40, 4);
    if (USNIC_PKT_CHUNK == type || USNIC_PKT_PUT == type || USNIC_PKT_PART == type) {
        memcpy(in + n, ext + offsetof(struct usnic_chunk_hdr, msg_len), 8);
        n += 8;
        if (USNIC_PKT_PUT == type) {
            memcpy(in + n, ext + sizeof(struct usnic_chunk_hdr), sizeof(struct usnic_put_hdr));
            n += sizeof(struct usnic_put_hdr);
        }
    }
    *prefix_words = n / 8;
    memcpy(in + n, buf + 28, 4);      /* msg_id */
    memcpy(in + n + 4, buf + 20, 4);  /* seq */
    memcpy(in + n + 8, buf + 32, 4);  /* ts */
    memcpy(in + n + 12, buf + 24, 4); /* ack_seq */
    memcpy(in + n + 16, buf + 36, 4); /* ts_echo */
    n += MAC_TAIL_BYTES;
    if (USNIC_PKT_CHUNK == type || USNIC_PKT_PUT == type || USNIC_PKT_PART == type) {
        memcpy(in + n, ext + offsetof(struct usnic_chunk_hdr, offset), 8);
        n += 8;
    }
    return n;
}

/*
 * The MAC of the datagram of `len` contiguous bytes at buf then zc_len
 * bytes at zc, whose headers (usnic_pkt_mac_hdr_len()) are within the
 * contiguous part.  memo (may be NULL) speeds up runs of datagrams that
 * share the input's first words.
 */
static uint64_t pkt_mac(const uint8_t *buf, size_t len, const uint8_t *zc, size_t zc_len,
                        const struct usnic_sip_key *key, struct usnic_sip_memo *memo, bool full)
{
    const struct usnic_pkt_hdr *hdr = (const struct usnic_pkt_hdr *) buf;
    unsigned type = hdr->type;
    /* the headers, and where what the header MAC covers ends (after an
     * ACK's SACK words) */
    size_t hdrs = usnic_pkt_mac_hdr_len(type, 0);
    size_t mac_hdr = usnic_pkt_mac_hdr_len(type, hdr->payload_len);
    struct usnic_auth_piece pieces[4];
    uint64_t in[(USNIC_HDR_LEN_PUT - MAC_SKIPPED_BYTES + sizeof(struct usnic_sack) * 4 + 7) / 8];
    size_t n = 0, prefix_words, m;

    if (USNIC_PKT_ACK == type) {
        memo = NULL; /* ACKs seldom share their first words: leave it to the data */
    }
    m = mac_input(buf, type, (uint8_t *) in, &prefix_words);
    if (!full && mac_hdr - hdrs <= sizeof(struct usnic_sack) * 4) {
        /* the common case (auth header): at most 76 bytes, or 44 and an
         * ACK's SACK of up to 4 words, hashed from one buffer */
        memcpy((uint8_t *) in + m, buf + hdrs, mac_hdr - hdrs);
        return usnic_siphash24_memo(memo, key, in, m + mac_hdr - hdrs, prefix_words);
    }

    pieces[n].base = in;
    pieces[n++].len = m;
    pieces[n].base = buf + hdrs;
    pieces[n++].len = mac_hdr - hdrs;
    if (full) {
        pieces[n].base = buf + mac_hdr;
        pieces[n++].len = len - mac_hdr;
        pieces[n].base = zc;
        pieces[n++].len = zc_len;
    }
    return usnic_siphash24_pieces(key, pieces, n);
}

/* The most words a header MAC's input has outside an ACK (PUT: 76 bytes). */
#define MAC_INPUT_WORDS ((USNIC_HDR_LEN_PUT - MAC_SKIPPED_BYTES + 7) / 8)

void usnic_pkt_macs(const uint8_t *const bufs[], const size_t lens[], unsigned n,
                    const struct usnic_sip_key *key, uint64_t tags[], bool ok[])
{
    /* a run: up to RUN inputs of one length, side by side (hashed
     * together: their shared first words once) */
    enum {
        RUN = 64
    };
    uint64_t in[RUN][MAC_INPUT_WORDS];
    uint64_t out[RUN];
    unsigned where[RUN];
    unsigned k = 0;
    size_t m = 0;

    for (unsigned i = 0; i <= n; i++) {
        unsigned type = USNIC_PKT_ACK;
        size_t need = 0, mi = 0, prefix_words;

        if (i < n) {
            ok[i] = false;
            if (lens[i] >= sizeof(struct usnic_pkt_hdr)) {
                type = ((const struct usnic_pkt_hdr *) bufs[i])->type;
                need = usnic_pkt_hdr_len(type);
            }
            if (USNIC_PKT_ACK == type || 0 == need || lens[i] < need) {
                continue;
            }
            mi = need - MAC_SKIPPED_BYTES; /* what mac_input() will write */
        }
        if (0 != k && (i == n || RUN == k || mi != m)) {
            usnic_siphash24_lanes(key, in, sizeof(in[0]), m, k, out);
            for (unsigned j = 0; j < k; j++) {
                tags[where[j]] = out[j];
            }
            k = 0;
        }
        if (i < n) {
            m = mac_input(bufs[i], type, (uint8_t *) in[k], &prefix_words);
            where[k++] = i;
            ok[i] = true;
        }
    }
}

void usnic_pkt_seal_headers(uint8_t *const bufs[], const size_t lens[], unsigned n,
                            const struct usnic_sip_key *key)
{
    enum {
        GROUP = 64
    };
    uint64_t tags[GROUP];
    bool ok[GROUP];

    for (unsigned b = 0; b < n; b += GROUP) {
        unsigned k = (n - b < GROUP) ? n - b : GROUP;

        usnic_pkt_macs((const uint8_t *const *) (bufs + b), lens + b, k, key, tags, ok);
        for (unsigned j = 0; j < k; j++) {
            struct usnic_pkt_hdr *hdr = (struct usnic_pkt_hdr *) bufs[b + j];

            if (ok[j]) {
                hdr->mac = tags[j];
                hdr->crc = 0;
            } else {
                usnic_pkt_seal(bufs[b + j], lens[b + j], NULL, 0, key, NULL, 1, false);
            }
        }
    }
}

/* CRC32C of everything but the crc field. */
static uint32_t pkt_crc(const uint8_t *buf, size_t len, const uint8_t *zc, size_t zc_len)
{
    uint32_t crc = usnic_crc32c(0, buf, USNIC_CRC_OFFSET);

    crc = usnic_crc32c(crc, buf + USNIC_MAC_OFFSET, len - USNIC_MAC_OFFSET);
    return (0 != zc_len) ? usnic_crc32c(crc, zc, zc_len) : crc;
}

void usnic_pkt_seal(uint8_t *buf, size_t len, const uint8_t *zc, size_t zc_len,
                    const struct usnic_sip_key *key, struct usnic_sip_memo *memo, int auth,
                    bool crc)
{
    struct usnic_pkt_hdr *hdr = (struct usnic_pkt_hdr *) buf;

    hdr->mac = (0 != auth) ? pkt_mac(buf, len, zc, zc_len, key, memo, 2 == auth) : 0;
    hdr->crc = crc ? pkt_crc(buf, len, zc, zc_len) : 0;
}

enum usnic_drop_reason usnic_pkt_verify(const uint8_t *buf, size_t len,
                                        const struct usnic_sip_key *key,
                                        struct usnic_sip_memo *memo, int auth, bool crc)
{
    const struct usnic_pkt_hdr *hdr = (const struct usnic_pkt_hdr *) buf;

    /* usnic_pkt_parse() checked the lengths: mac_hdr <= len */
    if (crc && hdr->crc != pkt_crc(buf, len, NULL, 0)) {
        return USNIC_DROP_CHECKSUM;
    }
    if (0 != auth &&
        !usnic_sip_tag_equal(hdr->mac, pkt_mac(buf, len, NULL, 0, key, memo, 2 == auth))) {
        return USNIC_DROP_AUTH;
    }
    return USNIC_PKT_OK;
}

const char *usnic_pkt_type_name(unsigned type)
{
    switch (type) {
#define USNIC_PKT_TYPE_NAME(name, value, desc)                                                     \
    case value:                                                                                    \
        return #name;
        USNIC_PKT_TYPES(USNIC_PKT_TYPE_NAME)
#undef USNIC_PKT_TYPE_NAME
    default:
        return "UNKNOWN";
    }
}

static const char *const drop_names[USNIC_DROP__COUNT] = {[USNIC_PKT_OK] = "ok",
#define USNIC_DROP_NAME(name, desc) [USNIC_DROP_##name] = #name,
                                                          USNIC_DROP_REASONS(USNIC_DROP_NAME)
#undef USNIC_DROP_NAME
};

static const char *const drop_descs[USNIC_DROP__COUNT] = {[USNIC_PKT_OK] = "accepted",
#define USNIC_DROP_DESC(name, desc) [USNIC_DROP_##name] = desc,
                                                          USNIC_DROP_REASONS(USNIC_DROP_DESC)
#undef USNIC_DROP_DESC
};

const char *usnic_drop_reason_name(enum usnic_drop_reason reason)
{
    return ((unsigned) reason < USNIC_DROP__COUNT) ? drop_names[reason] : "UNKNOWN";
}

const char *usnic_drop_reason_desc(enum usnic_drop_reason reason)
{
    return ((unsigned) reason < USNIC_DROP__COUNT) ? drop_descs[reason] : "unknown";
}

size_t usnic_pkt_dump(const void *buf, size_t len, char *out, size_t outlen)
{
    const uint8_t *bytes = buf;
    struct usnic_pkt_hdr hdr;
    struct usnic_chunk_hdr ch;
    struct usnic_put_hdr put;
    int n;

    if (0 == outlen) {
        return 0;
    }
    if (NULL == buf || len < sizeof(hdr)) {
        n = snprintf(out, outlen, "short packet: %zu bytes", len);
        return (n < 0) ? 0 : ((size_t) n >= outlen ? outlen - 1 : (size_t) n);
    }
    memcpy(&hdr, bytes, sizeof(hdr));
    n = snprintf(out, outlen,
                 "len=%zu version=%u type=%s(%u) flags=0x%02x tag=%u src_module=%u "
                 "sender_key=0x%016llx seq=%u ack_seq=%u payload_len=%u msg_id=%u ts=%u "
                 "ts_echo=%u lane=%u reserved=0x%02x allow=%u crc=0x%08x mac=0x%016llx",
                 len, hdr.version, usnic_pkt_type_name(hdr.type), hdr.type, hdr.flags, hdr.tag,
                 hdr.src_module, (unsigned long long) hdr.sender_key, hdr.seq, hdr.ack_seq,
                 hdr.payload_len, hdr.msg_id, hdr.ts, hdr.ts_echo, hdr.lane, hdr.reserved,
                 hdr.allow, hdr.crc, (unsigned long long) hdr.mac);
    if (n < 0) {
        out[0] = '\0';
        return 0;
    }
    if ((size_t) n < outlen && USNIC_PKT_ACK == hdr.type && (hdr.flags & USNIC_PKT_FLAG_SACK) &&
        len >= USNIC_HDR_LEN_ACK + sizeof(struct usnic_sack)) {
        struct usnic_sack sk;
        int m;
        memcpy(&sk, bytes + sizeof(hdr), sizeof(sk));
        m = snprintf(out + n, outlen - (size_t) n, " sack=0x%016llx%s",
                     (unsigned long long) sk.bits, hdr.payload_len > sizeof(sk) ? "..." : "");
        if (m > 0) {
            n += m;
        }
    }
    if ((size_t) n < outlen &&
        (USNIC_PKT_CHUNK == hdr.type || USNIC_PKT_PUT == hdr.type || USNIC_PKT_PART == hdr.type) &&
        len >= USNIC_HDR_LEN_CHUNK) {
        int m;
        memcpy(&ch, bytes + sizeof(hdr), sizeof(ch));
        m = snprintf(out + n, outlen - (size_t) n, " msg_len=%llu offset=%llu",
                     (unsigned long long) ch.msg_len, (unsigned long long) ch.offset);
        if (m > 0) {
            n += m;
        }
        if ((size_t) n < outlen && USNIC_PKT_PUT == hdr.type && len >= USNIC_HDR_LEN_PUT) {
            memcpy(&put, bytes + sizeof(hdr) + sizeof(ch), sizeof(put));
            m = snprintf(out + n, outlen - (size_t) n, " reg_key=0x%016llx reg_offset=%llu",
                         (unsigned long long) put.reg_key, (unsigned long long) put.reg_offset);
            if (m > 0) {
                n += m;
            }
        }
    }
    return ((size_t) n >= outlen) ? outlen - 1 : (size_t) n;
}
