/*
 * Datagrams too large for the path, sent in parts (packet type PART).
 *
 * Why.  A connection's datagram size is fixed when its first segments
 * are cut, and every segment keeps its size and sequence number until it
 * is acknowledged.  If the path's MTU drops while the job runs (a
 * failover to a link of MTU 1500 where 9000 was, a switch port
 * reconfigured), the segments already cut at the old size can never
 * arrive again, and neither can a whole fragment already handed to us at
 * that size.  New data is simply cut smaller (btl_usnic_path.c), but these
 * must still go through under their own numbers.  So from then on every
 * datagram of the connection that is larger than the path carries is sent
 * as PART packets: each carries bytes [offset, offset + payload_len) of the
 * datagram exactly as it would have gone whole (header, MAC and all), the
 * datagram's length in the chunk header's msg_len, and its sequence number
 * in seq.  The receiver joins the parts and hands the whole datagram to
 * the ordinary receive path, which checks it as if it had arrived in one
 * piece.  This is IP fragmentation done above UDP, for a path that no
 * longer lets IP do it (DF set, no ICMP, or a switch that drops silently).
 *
 * Rules (checked by usnic_pkt_parse() and usnic_parts_add()):
 *   - a part's offset is a multiple of USNIC_PART_UNIT, and so is its
 *     length unless it ends the datagram: duplicates and overlaps are
 *     found by unit, so a datagram is whole only when each of its bytes
 *     was written;
 *   - the datagram is at most USNIC_PART_DGRAM_MAX bytes and at least a
 *     common header;
 *   - a part is taken only from a known sender, with a valid MAC, for a
 *     sequence number inside the receive window that has not arrived
 *     (btl_usnic_rx.h): an attacker can neither fill the table nor reach
 *     it with replays of datagrams already received.
 * Each connection joins up to USNIC_PART_SLOTS datagrams at a time; a
 * part of another one takes the slot begun longest ago (its datagram is
 * sent again, in parts, by the retransmission timer).  A slot's buffer is
 * allocated at its first part: a connection that never sees a PART costs
 * only the table's bitmaps.
 */
#ifndef BTL_USNIC_PART_H
#define BTL_USNIC_PART_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "btl_usnic_proto.h"

#define USNIC_PART_UNIT 64u
#define USNIC_PART_DGRAM_MAX 65536u /* UDP's own limit, rounded up */
#define USNIC_PART_UNITS (USNIC_PART_DGRAM_MAX / USNIC_PART_UNIT)
#define USNIC_PART_SLOTS 4

struct usnic_part_slot {
    bool busy;
    uint32_t seq;   /* the datagram's sequence number */
    uint32_t len;   /* its length */
    uint32_t left;  /* units not received yet */
    uint64_t begun; /* table clock when its first part came */
    uint64_t got[USNIC_PART_UNITS / 64];
    uint8_t *buf; /* USNIC_PART_DGRAM_MAX bytes, NULL until first needed */
};

struct usnic_parts {
    struct usnic_part_slot slot[USNIC_PART_SLOTS];
    uint64_t clock;
    uint64_t joined;  /* datagrams made whole */
    uint64_t evicted; /* incomplete datagrams given up for another one */
};

void usnic_parts_init(struct usnic_parts *t);
void usnic_parts_fini(struct usnic_parts *t);

/*
 * Take a part (already parsed and authenticated; its seq new and inside
 * the receive window): bytes [off, off + n) of datagram seq of len bytes.
 * Returns USNIC_PKT_OK, and in *whole the datagram once every byte of it
 * is in (NULL before): it stays valid until the next call on t.
 * USNIC_DROP_DUPLICATE: every byte of it is in already (the network's
 * copy); USNIC_DROP_CHUNK_RANGE: a part that breaks the rules above;
 * USNIC_DROP_REASSEMBLY: no memory for the slot.
 */
enum usnic_drop_reason usnic_parts_add(struct usnic_parts *t, uint32_t seq, uint64_t len,
                                       uint64_t off, const uint8_t *data, uint32_t n,
                                       const uint8_t **whole);

/* Sender: the payload of each part when no datagram may exceed dgram_max
 * bytes (0: too small to cut anything). */
static inline uint32_t usnic_part_payload(uint32_t dgram_max)
{
    if (dgram_max < USNIC_HDR_LEN_CHUNK + USNIC_PART_UNIT) {
        return 0;
    }
    return (uint32_t) ((dgram_max - USNIC_HDR_LEN_CHUNK) / USNIC_PART_UNIT * USNIC_PART_UNIT);
}

/*
 * Sender: write the PART packet carrying bytes [off, off + n) of a
 * datagram whose first head_len bytes are at head (all its headers among
 * them: seq, the sender's key and module, lane) and whose tail_len more
 * are at tail, to out; ts is this copy's send time.  Returns the packet's
 * length (headers and n bytes); its MAC and CRC are left to
 * usnic_pkt_seal().
 */
size_t usnic_part_build(uint8_t *out, const uint8_t *head, size_t head_len, const uint8_t *tail,
                        size_t tail_len, uint64_t off, uint32_t n, uint32_t ts);

#endif /* BTL_USNIC_PART_H */
