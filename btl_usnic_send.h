/* The send engine's entry points (btl_usnic_send.c). */
#ifndef BTL_USNIC_SEND_H
#define BTL_USNIC_SEND_H

#include "btl_usnic.h"
#include "btl_usnic_endpoint.h"
#include "btl_usnic_frag.h"

/* Fill the common header of a packet this module sends (no ACK, seq 0). */
static inline void usnic_pkt_hdr_init(const usnic_module_t *module, struct usnic_pkt_hdr *hdr,
                                      uint8_t type, uint8_t tag, uint32_t payload_len,
                                      uint32_t msg_id)
{
    hdr->version = USNIC_PROTO_VERSION;
    hdr->type = type;
    hdr->flags = 0;
    hdr->tag = tag;
    hdr->payload_len = payload_len;
    hdr->sender_key = module->key;
    hdr->src_module = module->module_id;
    hdr->seq = 0;
    hdr->ack_seq = 0;
    hdr->msg_id = msg_id;
    hdr->ts = 0;
    hdr->ts_echo = 0;
    hdr->lane = 0; /* post() sets it */
    hdr->reserved = 0;
    hdr->allow = 0; /* fill_ack() sets it */
    hdr->crc = 0;
    hdr->mac = 0;
}

/* Send a SMALL fragment now: OPAL_SUCCESS, or OPAL_ERR_RESOURCE_BUSY (window, credits). */
int usnic_send_small(usnic_module_t *module, mca_btl_base_endpoint_t *ep, usnic_frag_t *frag);
/* Hand as many chunks of a LARGE/PUT fragment to the wire as allowed; SUCCESS when all are out. */
int usnic_send_chunks(usnic_module_t *module, mca_btl_base_endpoint_t *ep, usnic_frag_t *frag);
/* Send a segment whose FRAG header and payload_len bytes of payload are already filled in. */
int usnic_send_inline(usnic_module_t *module, mca_btl_base_endpoint_t *ep, usnic_seg_t *seg,
                      uint32_t payload_len);
/* A new LARGE/PUT fragment: chunks go out now if nothing waits ahead of it;
 * whatever cannot go yet is queued. */
void usnic_send_chunked(usnic_module_t *module, mca_btl_base_endpoint_t *ep, usnic_frag_t *frag);
/* After usnic_send_chunked: complete a fragment that went out whole before
 * its ACKs, where that helps (from the user's memory: with a copy). */
void usnic_send_early(usnic_module_t *module, mca_btl_base_endpoint_t *ep, usnic_frag_t *frag);
/* Queue a fragment behind the endpoint's others. */
void usnic_endpoint_enqueue(mca_btl_base_endpoint_t *ep, usnic_frag_t *frag);
/* Send an explicit ACK (with SACK when there is a gap). */
int usnic_send_ack(usnic_module_t *module, mca_btl_base_endpoint_t *ep);
/* Send the ping the reliability core asked for (ep->ping_ts on channel
 * ep->ping_lane); it also carries our ACK.  BUSY: try again later. */
int usnic_send_ping(usnic_module_t *module, mca_btl_base_endpoint_t *ep);

#endif /* BTL_USNIC_SEND_H */
