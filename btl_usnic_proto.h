/*
 * The usnic wire format: every byte this component puts on the network is
 * described in this file, and nowhere else.
 *
 * All multi-byte fields are little-endian on the wire (the component only
 * pairs peers of the same byte order: x86_64 and aarch64 hosts all are).
 * Every struct has fixed-width fields, explicit padding and a size check.
 *
 * Every datagram starts with the common header (56 bytes):
 *
 *    0       1       2       3       4       5       6       7
 *   +-------+-------+-------+-------+-------+-------+-------+-------+
 *   |version| type  | flags |  tag  |          payload_len          |
 *   +-------+-------+-------+-------+-------+-------+-------+-------+
 *   |                         sender_key                            |
 *   +-------+-------+-------+-------+-------+-------+-------+-------+
 *   |          src_module           |              seq              |
 *   +-------+-------+-------+-------+-------+-------+-------+-------+
 *   |            ack_seq            |            msg_id             |
 *   +-------+-------+-------+-------+-------+-------+-------+-------+
 *   |              ts               |            ts_echo            |
 *   +-------+-------+-------+-------+-------+-------+-------+-------+
 *   | lane  | rsvd  |     allow     |              crc              |
 *   +-------+-------+-------+-------+-------+-------+-------+-------+
 *   |                             mac                               |
 *   +-------+-------+-------+-------+-------+-------+-------+-------+
 *
 * followed, by packet type, by:
 *
 *   ACK    nothing (payload_len == 0), or with USNIC_PKT_FLAG_SACK a
 *          selective ACK of 1 to USNIC_SACK_WORDS_MAX 8-byte bitmaps
 *          (struct usnic_sack): bit i of word w set means sequence number
 *          ack_seq + 2 + 64 w + i arrived (ack_seq + 1 never did).  With
 *          USNIC_PKT_FLAG_SACK_MORE the receiver holds segments beyond the
 *          last word too (its window is wider than the SACK can describe).
 *   FRAG   payload: one whole PML fragment (PML header + data).
 *   CHUNK  chunk header, then payload: bytes [offset, offset+payload_len)
 *          of PML fragment msg_id, which is msg_len bytes long in total.
 *   PUT    chunk header, put header, then payload: bytes [offset,
 *          offset+payload_len) of an emulated RDMA write of msg_len bytes
 *          that lands at (registration reg_key) + reg_offset + offset.
 *
 *   PART   chunk header, then payload: bytes [offset, offset+payload_len)
 *          of the datagram with sequence number seq, msg_len bytes long,
 *          as it would have gone whole (version 7; btl_usnic_part.h).
 *          flags, tag, msg_id, ack_seq and ts_echo are 0; offset is a
 *          multiple of 64, and so is payload_len unless the part ends the
 *          datagram.
 *
 *   chunk header                         put header
 *   +-------------------------------+    +-------------------------------+
 *   |            msg_len            |    |            reg_key            |
 *   +-------------------------------+    +-------------------------------+
 *   |            offset             |    |           reg_offset          |
 *   +-------------------------------+    +-------------------------------+
 *
 * seq is meaningful for FRAG, CHUNK and PUT (they occupy the sender's send
 * window) and PART (the one of the datagram it is part of); ack_seq is meaningful when flags has
 * USNIC_PKT_FLAG_ACK: it acknowledges every sequence number up to and including ack_seq.
 *
 * ts is the sender's clock (microseconds, truncated to 32 bits, never 0)
 * when it put this copy of a data packet on the wire; ts_echo, with an
 * ACK, returns the ts of the last data packet that arrived in order (0:
 * none yet).  The sender measures round trips from it, also for resent
 * packets (as TCP does with its timestamp option, RFC 7323).
 *
 * msg_id numbers the PML fragments (FRAG and CHUNK) a sender hands to one
 * peer, consecutively in the order the PML gave them to the BTL; the
 * receiver hands them to its PML in that order (btl_usnic_reasm.h says
 * why).  PUTs are numbered in a sequence of their own (the number only
 * names the PUT in logs); ACKs carry 0.
 *
 * sender_key is the sending module's identity: 64 random bits drawn from
 * the kernel (getrandom) when the module is created, published only
 * through the modex.  Receivers find the sender by it (and the datagram's
 * source address must be the one in that sender's modex record);
 * src_module (vpid << 8 | module index) is only a hint naming which
 * process of the receiver's own job to look up when the key is not known
 * yet.  Initial sequence numbers are per connection and unpredictable
 * (btl_usnic_endpoint.c).
 *
 * lane is the sender's channel (0 priority, 1 data) the datagram left on;
 * each channel sends only to the peer's socket of the same channel, so a
 * datagram arriving at another one was redirected, or replayed there, and
 * is dropped (a lane's timestamps order only that lane's packets).
 *
 * mac is the keyed MAC (SipHash-2-4, btl_usnic_auth.h) under a 128-bit key
 * of the connection: a PRF of the sender module's secret (which travels
 * only through the modex) and of both modules' keys, so a packet MACed for
 * one receiver is no good at another.  It covers bytes [0, 44) of the common header (every field
 * before crc), the chunk and PUT headers (and a PART's chunk header), an ACK's SACK bitmap, and
 * with auth "full" the payload too; the header fields go into it in an order of their own, what
 * successive datagrams share first (btl_usnic_proto.c: mac_input; version 5).  crc is the CRC32C of
 * the whole datagram except the crc field itself (the mac included), computed after the mac.
 * Whether they are present is the connection's setting (the stronger of the two peers'
 * btl_usnic_auth and btl_usnic_checksum, known from the modex), never a flag a packet could clear;
 * absent, the field is 0.
 *
 * allow (version 8), meaningful with USNIC_PKT_FLAG_ACK: how many bytes the
 * receiver of this packet may keep in flight towards its sender, in units
 * of 1024 bytes; 0 means no limit is asked.  A receiver's sockets (or an
 * adapter's receive ring) are shared by all its peers: it divides them
 * among the peers that are sending to it (btl_usnic_recv.c: allow_count),
 * so that many senders at once do not overflow them (incast).  PART
 * packets carry 0 (they have no ACK).
 *
 * A FRAG, CHUNK or PUT with USNIC_PKT_FLAG_PAD may go on after its payload
 * (version 6): the sender pads a message's short last datagram to the
 * length of the others when the next message's datagrams follow it in the
 * same UDP_SEGMENT train.  The padding is in neither the MAC nor the CRC,
 * and the receiver never reads it; without the flag a datagram is exactly
 * its headers and payload_len bytes.
 *
 * Receivers validate every field before touching anything (see
 * usnic_pkt_parse()); what fails is dropped and counted by reason.
 */
#ifndef BTL_USNIC_PROTO_H
#define BTL_USNIC_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "btl_usnic_rel.h"
#include "btl_usnic_seq.h"

/* Bump on any change to this file's structs or their meaning, or to the
 * liveness packets' (btl_usnic_live.h; version 9: probes carry a MAC). */
#define USNIC_PROTO_VERSION 9

/* Packet types, from one list: name, value, description. */
#define USNIC_PKT_TYPES(X)                                                                         \
    X(ACK, 1, "cumulative acknowledgement")                                                        \
    X(FRAG, 2, "whole PML fragment")                                                               \
    X(CHUNK, 3, "piece of a PML fragment")                                                         \
    X(PUT, 4, "piece of an emulated RDMA write")                                                   \
    X(PART, 5, "part of a datagram too large for the path (btl_usnic_part.h)")

enum usnic_pkt_type {
#define USNIC_PKT_TYPE_ENUM(name, value, desc) USNIC_PKT_##name = value,
    USNIC_PKT_TYPES(USNIC_PKT_TYPE_ENUM)
#undef USNIC_PKT_TYPE_ENUM
};

/* lanes: a sender's channels, each to the peer's socket of the same channel */
#define USNIC_PKT_LANES 2

/* ack_seq is valid */
#define USNIC_PKT_FLAG_ACK 0x01u
/* the sender asks for an immediate ACK (e.g. it is blocked on a full window) */
#define USNIC_PKT_FLAG_ACK_REQ 0x02u
/* ACK packet only: payload is a struct usnic_sack */
#define USNIC_PKT_FLAG_SACK 0x04u
/* the link of the sending module is down: this datagram of its stream
 * comes through another of the sender's modules (a detour), and the
 * receiver should answer the same way (btl_usnic_chan_ofi.c) */
#define USNIC_PKT_FLAG_LINK_DOWN 0x08u
/* ACK packet only: segments arrived beyond what its SACK (if any) reports */
#define USNIC_PKT_FLAG_SACK_MORE 0x10u
/* FRAG, CHUNK and PUT only: the datagram may go on after its payload with
 * padding, which the receiver ignores (version 6).  A UDP_SEGMENT train
 * needs every datagram but its last at the train's size, so a message's
 * short last datagram is padded to it when the next message's datagrams
 * follow in the same train (btl_usnic_chan_kern.c: kern_train_add). */
#define USNIC_PKT_FLAG_PAD 0x20u
#define USNIC_PKT_FLAGS_KNOWN                                                                      \
    (USNIC_PKT_FLAG_ACK | USNIC_PKT_FLAG_ACK_REQ | USNIC_PKT_FLAG_SACK |                           \
     USNIC_PKT_FLAG_LINK_DOWN | USNIC_PKT_FLAG_SACK_MORE | USNIC_PKT_FLAG_PAD)

struct usnic_pkt_hdr {
    uint8_t version;      /* USNIC_PROTO_VERSION */
    uint8_t type;         /* enum usnic_pkt_type */
    uint8_t flags;        /* USNIC_PKT_FLAG_* */
    uint8_t tag;          /* PML active-message tag (FRAG, CHUNK) */
    uint32_t payload_len; /* bytes after all headers */
    uint64_t sender_key;  /* the sending module's random identity (modex) */
    uint32_t src_module;  /* hint: (sender's vpid << 8) | its module index */
    uint32_t seq;         /* sequence number of this packet (not ACK) */
    uint32_t ack_seq;     /* cumulative ACK when flags & USNIC_PKT_FLAG_ACK */
    uint32_t msg_id;      /* FRAG, CHUNK: fragment number (delivery order); PUT: PUT number */
    uint32_t ts;          /* sender's clock when this copy was sent */
    uint32_t ts_echo;     /* with an ACK: ts of the last data packet that arrived in order */
    uint8_t lane;         /* the channel it was sent on, so the port it must arrive at */
    uint8_t reserved;     /* 0 */
    uint16_t allow;       /* with an ACK: bytes the receiver may have in flight to us (KiB) */
    uint32_t crc;         /* CRC32C of the datagram without this field (0: not used) */
    uint64_t mac;         /* SipHash-2-4 tag (0: not used) */
};
_Static_assert(sizeof(struct usnic_pkt_hdr) == 56, "usnic_pkt_hdr is 56 bytes on the wire");
_Static_assert(offsetof(struct usnic_pkt_hdr, payload_len) == 4, "payload_len at offset 4");
_Static_assert(offsetof(struct usnic_pkt_hdr, sender_key) == 8, "sender_key at offset 8");
_Static_assert(offsetof(struct usnic_pkt_hdr, src_module) == 16, "src_module at offset 16");
_Static_assert(offsetof(struct usnic_pkt_hdr, seq) == 20, "seq at offset 20");
_Static_assert(offsetof(struct usnic_pkt_hdr, msg_id) == 28, "msg_id at offset 28");
_Static_assert(offsetof(struct usnic_pkt_hdr, ts_echo) == 36, "ts_echo at offset 36");
_Static_assert(offsetof(struct usnic_pkt_hdr, allow) == 42, "allow at offset 42");
_Static_assert(offsetof(struct usnic_pkt_hdr, crc) == 44, "crc at offset 44");
_Static_assert(offsetof(struct usnic_pkt_hdr, mac) == 48, "mac at offset 48");

/* The MAC covers the common header up to (not including) crc. */
#define USNIC_MAC_HDR_BYTES 44u
#define USNIC_CRC_OFFSET 44u
#define USNIC_MAC_OFFSET 48u

struct usnic_chunk_hdr {
    uint64_t msg_len; /* total bytes of the fragment or PUT */
    uint64_t offset;  /* where this chunk's payload starts within it */
};
_Static_assert(sizeof(struct usnic_chunk_hdr) == 16, "usnic_chunk_hdr is 16 bytes on the wire");

struct usnic_put_hdr {
    uint64_t reg_key;    /* target's registration key (usnic_reg) */
    uint64_t reg_offset; /* byte offset of the PUT within that registration */
};
_Static_assert(sizeof(struct usnic_put_hdr) == 16, "usnic_put_hdr is 16 bytes on the wire");

struct usnic_sack {
    uint64_t bits; /* word w of a SACK: bit i: ack_seq + 2 + 64 w + i was received */
};
_Static_assert(sizeof(struct usnic_sack) == 8, "usnic_sack is 8 bytes on the wire");
/* Words of one SACK, at most: 1024 sequence numbers after the gap. */
#define USNIC_SACK_WORDS_MAX 16
_Static_assert(USNIC_SACK_WORDS_MAX == USNIC_REL_SACK_WORDS_MAX, "the core reads every word");

/* Header bytes before the payload, by type. */
#define USNIC_HDR_LEN_ACK (sizeof(struct usnic_pkt_hdr))
#define USNIC_HDR_LEN_FRAG (sizeof(struct usnic_pkt_hdr))
#define USNIC_HDR_LEN_CHUNK (sizeof(struct usnic_pkt_hdr) + sizeof(struct usnic_chunk_hdr))
#define USNIC_HDR_LEN_PUT                                                                          \
    (sizeof(struct usnic_pkt_hdr) + sizeof(struct usnic_chunk_hdr) + sizeof(struct usnic_put_hdr))
#define USNIC_HDR_LEN_MAX USNIC_HDR_LEN_PUT

/* Why a received packet was dropped: name, description.  Counted per module. */
#define USNIC_DROP_REASONS(X)                                                                      \
    X(SHORT, "shorter than the common header")                                                     \
    X(VERSION, "unknown protocol version")                                                         \
    X(TYPE, "unknown packet type, flags or lane, reserved field set, or an ACK with a msg_id")     \
    X(LENGTH, "payload length disagrees with datagram length")                                     \
    X(SENDER, "sender key of no known module (and no process of this job to look up)")             \
    X(PENDING, "sender of this job not known yet: held until its modex record arrives")            \
    X(ADDRESS, "source address or port differs from the sender's modex record, or wrong lane")     \
    X(CHECKSUM, "CRC32C mismatch: corrupted on the way")                                           \
    X(AUTH, "MAC mismatch: forged or corrupted")                                                   \
    X(TAG, "PML tag out of range or without a handler")                                            \
    X(CHUNK_RANGE, "chunk offset or length out of bounds")                                         \
    X(PUT_RANGE, "PUT outside any registration")                                                   \
    X(ACK_RANGE, "ACK for a sequence number never sent")                                           \
    X(DUPLICATE, "duplicate sequence number")                                                      \
    X(WINDOW, "sequence number beyond the receive window")                                         \
    X(REASSEMBLY, "fragment ahead of the reassembly table, or no buffer for it")                   \
    X(RX_ERROR, "receive completed with an error (e.g. truncated datagram)")                       \
    X(INJECTED, "dropped by fault injection")

enum usnic_drop_reason {
    USNIC_PKT_OK = 0,
#define USNIC_DROP_ENUM(name, desc) USNIC_DROP_##name,
    USNIC_DROP_REASONS(USNIC_DROP_ENUM)
#undef USNIC_DROP_ENUM
    USNIC_DROP__COUNT
};

/* A validated packet: pointers into the receive buffer. */
struct usnic_pkt_view {
    const struct usnic_pkt_hdr *hdr;
    const struct usnic_chunk_hdr *chunk; /* CHUNK and PUT, else NULL */
    const struct usnic_put_hdr *put;     /* PUT, else NULL */
    const struct usnic_sack *sack;       /* ACK with USNIC_PKT_FLAG_SACK, else NULL */
    uint32_t sack_words;                 /* its words (payload_len / 8), else 0 */
    const uint8_t *payload;
    uint32_t payload_len;
    uint32_t len; /* the datagram's bytes before any padding (headers + payload) */
};

/*
 * Check everything about a datagram that can be checked without knowing the
 * sender: length, version, type, flags, reserved field, header/payload
 * lengths, chunk bounds (offset + payload within msg_len; for CHUNK
 * msg_len <= max_msg_len, a PUT's msg_len is checked against its
 * registration by the caller).  Returns USNIC_PKT_OK and fills *view, or the
 * drop reason.
 */
enum usnic_drop_reason usnic_pkt_parse(const void *buf, size_t len, uint64_t max_msg_len,
                                       struct usnic_pkt_view *view);

/* Bytes of headers before the payload of a packet type (0: unknown type). */
size_t usnic_pkt_hdr_len(unsigned type);
/* Where the headers a header-only MAC covers end: the common header, the
 * chunk and PUT headers, or an ACK's whole payload (its SACK bitmap). */
size_t usnic_pkt_mac_hdr_len(unsigned type, uint32_t payload_len);

struct usnic_sip_key;
struct usnic_sip_memo;

/*
 * Write the mac and crc fields of a datagram about to be sent: its first
 * `len` bytes are contiguous at buf (all headers, and the payload unless it
 * is sent from elsewhere), then `zc_len` more payload bytes at zc.  auth is
 * 0 (none), 1 (header) or 2 (full); key the sender's secret; memo (NULL:
 * none) the connection's memo of the MAC input's first words
 * (usnic_siphash24_memo), which makes the MACs of a train cheaper.
 */
void usnic_pkt_seal(uint8_t *buf, size_t len, const uint8_t *zc, size_t zc_len,
                    const struct usnic_sip_key *key, struct usnic_sip_memo *memo, int auth,
                    bool crc);

/*
 * The header MACs (auth header) of n datagrams under one key, computed
 * together (usnic_siphash24_lanes): tags[i] is what usnic_pkt_seal() with
 * auth header writes into datagram i's mac field, and what
 * usnic_pkt_verify() expects there.  lens[i] is how many bytes of
 * datagram i may be read.  ok[i] is false where the tag was not computed:
 * an ACK (its SACK words vary; sealed and checked one by one), or a buffer
 * too short for its type's headers.  Nothing is checked beyond that: a
 * received datagram still goes through usnic_pkt_parse(), which must
 * accept it before its tag means anything.
 */
void usnic_pkt_macs(const uint8_t *const bufs[], const size_t lens[], unsigned n,
                    const struct usnic_sip_key *key, uint64_t tags[], bool ok[]);

/* Seal n datagrams (auth header, no CRC) to one peer with usnic_pkt_macs():
 * the same mac and crc fields as usnic_pkt_seal() writes, datagram by
 * datagram.  Their headers must be final; lens[i]: the bytes of datagram
 * i at bufs[i] (headers, and for an ACK its SACK words). */
void usnic_pkt_seal_headers(uint8_t *const bufs[], const size_t lens[], unsigned n,
                            const struct usnic_sip_key *key);

/*
 * Check a received, parsed datagram of len bytes at buf against the
 * sender's secret and the connection's settings: USNIC_PKT_OK,
 * USNIC_DROP_CHECKSUM or USNIC_DROP_AUTH.  The buffer is only read; memo
 * (NULL: none) as for usnic_pkt_seal(), the receiving side's own.
 */
enum usnic_drop_reason usnic_pkt_verify(const uint8_t *buf, size_t len,
                                        const struct usnic_sip_key *key,
                                        struct usnic_sip_memo *memo, int auth, bool crc);

/* Printable names for logs and stats. */
const char *usnic_pkt_type_name(unsigned type);
const char *usnic_drop_reason_name(enum usnic_drop_reason reason);
const char *usnic_drop_reason_desc(enum usnic_drop_reason reason);

/*
 * Decode every header field of a datagram by name into out (always
 * NUL-terminated).  Safe on any input.  Returns the length written.
 */
size_t usnic_pkt_dump(const void *buf, size_t len, char *out, size_t outlen);

#endif /* BTL_USNIC_PROTO_H */
