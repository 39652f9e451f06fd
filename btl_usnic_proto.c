/*
 * Validation and decoding of usnic packets (the format is in btl_usnic_proto.h).
 * Nothing here trusts the buffer: every read is bounded by the datagram length.
 */
#include <stdio.h>
#include <string.h>

#include "btl_usnic_proto.h"

static size_t hdr_len_for_type(unsigned type)
{
    switch (type) {
    case USNIC_PKT_ACK:
        return USNIC_HDR_LEN_ACK;
    case USNIC_PKT_FRAG:
        return USNIC_HDR_LEN_FRAG;
    case USNIC_PKT_CHUNK:
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

enum usnic_drop_reason usnic_pkt_parse(const void *buf, size_t len, uint64_t job_key,
                                       uint64_t max_msg_len, struct usnic_pkt_view *view)
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
    hlen = hdr_len_for_type(hdr->type);
    if (0 == hlen || 0 != (hdr->flags & ~USNIC_PKT_FLAGS_KNOWN) ||
        (USNIC_PKT_ACK == hdr->type && 0 != hdr->msg_id)) {
        return USNIC_DROP_TYPE;
    }
    if (USNIC_PKT_ACK == hdr->type && 0 == (hdr->flags & USNIC_PKT_FLAG_ACK)) {
        return USNIC_DROP_TYPE;
    }
    if (USNIC_PKT_ACK != hdr->type && 0 != (hdr->flags & USNIC_PKT_FLAG_SACK)) {
        return USNIC_DROP_TYPE;
    }
    if (hdr->job_key != job_key) {
        return USNIC_DROP_JOB_KEY;
    }
    if (len < hlen || (uint64_t) hdr->payload_len != (uint64_t) (len - hlen)) {
        return USNIC_DROP_LENGTH;
    }
    if (USNIC_PKT_ACK == hdr->type &&
        hdr->payload_len != ((hdr->flags & USNIC_PKT_FLAG_SACK) ? sizeof(struct usnic_sack) : 0u)) {
        return USNIC_DROP_LENGTH;
    }

    view->hdr = hdr;
    view->chunk = NULL;
    view->put = NULL;
    view->sack = (USNIC_PKT_ACK == hdr->type && (hdr->flags & USNIC_PKT_FLAG_SACK))
                     ? (const void *) (bytes + hlen)
                     : NULL;
    view->payload = bytes + hlen;
    view->payload_len = hdr->payload_len;

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
                 "job_key=0x%016llx seq=%u ack_seq=%u payload_len=%u msg_id=%u ts=%u ts_echo=%u",
                 len, hdr.version, usnic_pkt_type_name(hdr.type), hdr.type, hdr.flags, hdr.tag,
                 hdr.src_module, (unsigned long long) hdr.job_key, hdr.seq, hdr.ack_seq,
                 hdr.payload_len, hdr.msg_id, hdr.ts, hdr.ts_echo);
    if (n < 0) {
        out[0] = '\0';
        return 0;
    }
    if ((size_t) n < outlen && USNIC_PKT_ACK == hdr.type && (hdr.flags & USNIC_PKT_FLAG_SACK) &&
        len >= USNIC_HDR_LEN_ACK + sizeof(struct usnic_sack)) {
        struct usnic_sack sk;
        int m;
        memcpy(&sk, bytes + sizeof(hdr), sizeof(sk));
        m = snprintf(out + n, outlen - (size_t) n, " sack=0x%016llx", (unsigned long long) sk.bits);
        if (m > 0) {
            n += m;
        }
    }
    if ((size_t) n < outlen && (USNIC_PKT_CHUNK == hdr.type || USNIC_PKT_PUT == hdr.type) &&
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
