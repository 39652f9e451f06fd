/* Datagrams too large for the path, in parts (see btl_usnic_part.h). */
#include <stdlib.h>
#include <string.h>

#include "btl_usnic_part.h"

void usnic_parts_init(struct usnic_parts *t)
{
    memset(t, 0, sizeof(*t));
}

void usnic_parts_fini(struct usnic_parts *t)
{
    for (int i = 0; i < USNIC_PART_SLOTS; i++) {
        free(t->slot[i].buf);
        t->slot[i].buf = NULL;
        t->slot[i].busy = false;
    }
}

/* The slot for datagram seq of len bytes: its own, a free one, or the one
 * begun longest ago.  A slot of the same seq but another length holds an
 * older copy of it cut differently: begun again. */
static struct usnic_part_slot *slot_for(struct usnic_parts *t, uint32_t seq, uint32_t len)
{
    struct usnic_part_slot *s = NULL;

    for (int i = 0; i < USNIC_PART_SLOTS; i++) {
        if (t->slot[i].busy && t->slot[i].seq == seq) {
            if (t->slot[i].len == len) {
                return &t->slot[i];
            }
            s = &t->slot[i];
            break;
        }
    }
    if (NULL == s) {
        for (int i = 0; i < USNIC_PART_SLOTS; i++) {
            if (!t->slot[i].busy) {
                s = &t->slot[i];
                break;
            }
            if (NULL == s || t->slot[i].begun < s->begun) {
                s = &t->slot[i];
            }
        }
        if (s->busy) {
            t->evicted++;
        }
    }
    if (NULL == s->buf) {
        s->buf = malloc(USNIC_PART_DGRAM_MAX);
        if (NULL == s->buf) {
            return NULL;
        }
    }
    s->busy = true;
    s->seq = seq;
    s->len = len;
    s->left = (len + USNIC_PART_UNIT - 1) / USNIC_PART_UNIT;
    s->begun = ++t->clock;
    memset(s->got, 0, sizeof(s->got));
    return s;
}

enum usnic_drop_reason usnic_parts_add(struct usnic_parts *t, uint32_t seq, uint64_t len,
                                       uint64_t off, const uint8_t *data, uint32_t n,
                                       const uint8_t **whole)
{
    struct usnic_part_slot *s;
    uint64_t first, last;
    uint32_t fresh = 0;

    *whole = NULL;
    /* (usnic_pkt_parse() checked all of this for the wire; the table does
     * not rely on it) */
    if (len < sizeof(struct usnic_pkt_hdr) || len > USNIC_PART_DGRAM_MAX || 0 == n || off > len ||
        n > len - off || 0 != off % USNIC_PART_UNIT ||
        (0 != n % USNIC_PART_UNIT && off + n != len)) {
        return USNIC_DROP_CHUNK_RANGE;
    }
    first = off / USNIC_PART_UNIT;
    last = (off + n - 1) / USNIC_PART_UNIT;
    s = slot_for(t, seq, (uint32_t) len);
    if (NULL == s) {
        return USNIC_DROP_REASSEMBLY;
    }
    for (uint64_t u = first; u <= last; u++) {
        uint64_t bit = (uint64_t) 1 << (u % 64);
        fresh += !(s->got[u / 64] & bit);
        s->got[u / 64] |= bit;
    }
    if (0 == fresh) {
        return USNIC_DROP_DUPLICATE; /* the network's copy of a part */
    }
    /* (a part that only overlaps: a copy of the datagram cut at another
     * size; its bytes are the same but for the headers, which come whole
     * from the first part of one copy, and the MAC checks that) */
    s->left -= fresh;
    memcpy(s->buf + off, data, n);
    if (0 == s->left) {
        s->busy = false; /* the buffer stays as it is until the next part */
        t->joined++;
        *whole = s->buf;
    }
    return USNIC_PKT_OK;
}

size_t usnic_part_build(uint8_t *out, const uint8_t *head, size_t head_len, const uint8_t *tail,
                        size_t tail_len, uint64_t off, uint32_t n, uint32_t ts)
{
    const struct usnic_pkt_hdr *in = (const struct usnic_pkt_hdr *) head;
    struct usnic_pkt_hdr *h = (struct usnic_pkt_hdr *) out;
    struct usnic_chunk_hdr *ch = (struct usnic_chunk_hdr *) (out + sizeof(*h));
    uint8_t *dst = out + USNIC_HDR_LEN_CHUNK;
    uint64_t end = off + n;

    memset(h, 0, sizeof(*h));
    h->version = USNIC_PROTO_VERSION;
    h->type = USNIC_PKT_PART;
    h->payload_len = n;
    h->sender_key = in->sender_key;
    h->src_module = in->src_module;
    h->seq = in->seq;
    h->ts = ts;
    h->lane = in->lane;
    ch->msg_len = head_len + tail_len;
    ch->offset = off;
    if (off < head_len) {
        size_t k = (end < head_len ? end : head_len) - off;
        memcpy(dst, head + off, k);
        dst += k;
        off += k;
    }
    if (off < end) {
        memcpy(dst, tail + (off - head_len), end - off);
    }
    return USNIC_HDR_LEN_CHUNK + n;
}
