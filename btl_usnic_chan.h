/*
 * The datagram backends under a module's channels.  Everything above this
 * interface (reliability, chunking, the PML interface) is the same whichever
 * backend moves the datagrams:
 *
 *   libfabric  btl_usnic_chan_ofi.c: FI_EP_DGRAM endpoints of a provider
 *              (usnic on Cisco VIC hardware; udp anywhere, one system call
 *              per datagram)
 *   kernel     btl_usnic_chan_kern.c: UDP sockets of our own, recvmmsg
 *              batches, UDP_GRO on receive and UDP_SEGMENT trains on send
 *              (many datagrams to one peer in one system call)
 *
 * A backend finds its devices and creates modules (discover), opens and
 * closes a module's two channels, keeps receive buffers posted, polls a
 * channel (every arrival goes to usnic_rx_datagram()), sends one datagram
 * to a peer's channel, and optionally sends a train: datagrams to one peer,
 * queued by train_add and handed to the kernel together by train_flush.
 */
#ifndef BTL_USNIC_CHAN_H
#define BTL_USNIC_CHAN_H

#include "btl_usnic.h"
#include "btl_usnic_util.h"

struct usnic_filters;
struct usnic_seg;
struct mca_btl_base_endpoint_t;

typedef struct usnic_backend {
    const char *name; /* "libfabric" or "kernel" */
    /* Create modules for the usable devices (at most max, 0: no limit);
     * prov names the libfabric provider (libfabric only).  Returns how many. */
    int (*discover)(const char *prov, const struct usnic_filters *flt, int max);
    /* Open both channels (module->chan[].mtu, depths set) / release everything. */
    int (*open)(usnic_module_t *module, int rd_num);
    void (*release)(usnic_module_t *module);
    /* Post a channel's receive buffers (from chan->rx_segs). */
    int (*post_recvs)(usnic_module_t *module, usnic_channel_t *chan);
    /* Handle what arrived or completed; returns how many events. */
    int (*poll)(usnic_module_t *module, usnic_channel_t *chan);
    /* Send one sealed datagram to ep's channel: OPAL_SUCCESS, or
     * OPAL_ERR_RESOURCE_BUSY (try later), or another error. */
    int (*send)(usnic_module_t *module, usnic_channel_t *chan, struct usnic_seg *seg,
                const struct mca_btl_base_endpoint_t *ep);
    /* Trains (NULL when not supported): queue a sealed datagram behind the
     * channel's train (sending the train first when seg cannot join it);
     * flush hands the train to the kernel.  A datagram of a train that
     * could not be sent is handed to usnic_train_failed(). */
    int (*train_add)(usnic_module_t *module, usnic_channel_t *chan, struct usnic_seg *seg,
                     const struct mca_btl_base_endpoint_t *ep);
    void (*train_flush)(usnic_module_t *module, usnic_channel_t *chan);
    /* Leave the channel's train open for the next sends to join
     * (btl_usnic_tx_coalesce); NULL where trains cannot be held.  The next
     * train_add or train_flush takes it back; if none comes within
     * USNIC_LIVE_FLUSH_US, the liveness thread sends it. */
    void (*train_hold)(usnic_module_t *module, usnic_channel_t *chan);
    /* A new peer: make its channels addressable.  peer_del (NULL: nothing
     * to do) releases what peer_add set up, before the endpoint goes. */
    int (*peer_add)(usnic_module_t *module, struct mca_btl_base_endpoint_t *ep);
    void (*peer_del)(usnic_module_t *module, struct mca_btl_base_endpoint_t *ep);
    /* What a peer gets at our first send to it rather than when it is
     * added (ep->conn_due, set by peer_add; NULL where nothing is put
     * off): called once, before that send. */
    void (*peer_connect)(usnic_module_t *module, struct mca_btl_base_endpoint_t *ep);
    /* Does a datagram of size bytes reach our own data channel whole? */
    bool (*self_test)(usnic_module_t *module, uint32_t size);
    /* Optional (NULL: plain memory).  The memory pool the segment free
     * lists allocate their buffers from (NULL: the default), e.g. one that
     * registers every chunk with the provider; and the descriptor a
     * segment whose buffer starts at buf passes on every post. */
    struct mca_mpool_base_module_t *(*seg_mpool)(usnic_module_t *module);
    void *(*seg_desc)(usnic_module_t *module, const void *buf);
} usnic_backend_t;

extern const usnic_backend_t usnic_backend_ofi;
extern const usnic_backend_t usnic_backend_kern;

/* Interface filters of btl_usnic_if_include / _exclude. */
struct usnic_filters {
    struct usnic_if_filter include[32];
    int n_include;
    struct usnic_if_filter exclude[32];
    int n_exclude;
};

/* Shared by the backends' discovery (btl_usnic_component.c). */
bool usnic_device_usable(const char *dev, uint32_t addr, const struct usnic_filters *flt);
/* The interface filters alone (alias: a second name the filters may use, or NULL). */
bool usnic_device_passes_filters(const char *dev, const char *alias, uint32_t addr,
                                 const struct usnic_filters *flt);
usnic_module_t *usnic_module_new(const char *ifname, const struct sockaddr_in *addr,
                                 const char *prov_name, const usnic_backend_t *backend);
/* Finish a module the backend opened (free lists, receives, self-test) and
 * add it to the component; on failure release and free it.  Returns it or NULL. */
usnic_module_t *usnic_module_commit(usnic_module_t *module);
/* The largest datagram to send on the data channel over plain UDP. */
uint32_t usnic_udp_datagram_size(uint32_t if_mtu);
/* Sizes that follow from the data channel's datagram size. */
void usnic_module_set_sizes(usnic_module_t *module, uint32_t data_mtu);
/* Receive buffers for the data channel (btl_usnic_rd_num, 0 = auto). */
int usnic_module_rd_num(const usnic_module_t *module, bool few);

/* Every arriving datagram (recv.c); buf stays valid until it returns, or
 * while module->rx_defer is set, until usnic_rx_defer_flush(). */
void usnic_rx_datagram(usnic_module_t *module, usnic_channel_t *chan, const uint8_t *buf,
                       size_t len);
/* A coalesced receive of len bytes at buf, datagrams of step bytes but
 * the last, about to go to usnic_rx_datagram() one by one: compute their
 * header MACs together now (recv.c; nothing if they cannot be).  Call
 * usnic_rx_macs_done() after the last. */
void usnic_rx_macs_ahead(usnic_module_t *module, const uint8_t *buf, size_t len, size_t step);
static inline void usnic_rx_macs_done(usnic_module_t *module)
{
    module->rx_macs.n = 0;
}
/* The same for n headers of one sender's datagrams that a receive placed
 * at hdrs, hdrs + stride, ... with their payloads elsewhere (direct
 * receive: btl_usnic_chan_kern.c), computed under ep's key. */
void usnic_rx_macs_headers(usnic_module_t *module, const struct mca_btl_base_endpoint_t *ep,
                           const uint8_t *hdrs, size_t stride, size_t hdr_len, unsigned n);
/* A batch of receives begins, or ends: the receive path may predict a
 * chunk from the one before it within a batch (header prediction,
 * btl_usnic_rx.h), never across batches.  Calls nest. */
void usnic_rx_batch_begin(usnic_module_t *module);
void usnic_rx_batch_end(usnic_module_t *module);
/* Make the PUT chunks this thread copied past the caches since the last
 * call visible to every CPU (recv.c: one fence per progress call, not per
 * chunk); before the PML or the user may look at their targets. */
void usnic_rx_fence(void);
/* Forget every module's prediction (a peer was declared dead). */
void usnic_rx_predict_forget(void);
/* Copy the chunks that datagrams left in the receive buffers while
 * module->rx_defer was set into their fragments' buffers (call before the
 * buffers are received into again; btl_usnic_reasm.h, deferred chunks). */
void usnic_rx_defer_flush(usnic_module_t *module);
/* As usnic_rx_datagram(), for a chunk whose header is at hdr and whose
 * payload the kernel backend received elsewhere, into the PUT's target or
 * the fragment's reassembly buffer (direct receive). */
void usnic_rx_datagram_split(usnic_module_t *module, usnic_channel_t *chan, const uint8_t *hdr,
                             size_t hdr_len, const uint8_t *payload, size_t payload_len);
/* The header MACs left for a train (send.c): before it is sent. */
unsigned usnic_train_seal(const struct mca_btl_base_endpoint_t *ep, struct usnic_seg *const segs[],
                          int n);
/* A datagram queued in a train that the kernel refused (send.c). */
void usnic_train_failed(usnic_module_t *module, struct usnic_seg *seg);
/* Mark a data datagram queued last in a train, shorter than the train's
 * datagrams, as padded (USNIC_PKT_FLAG_PAD, its MAC and checksum made
 * again) so that more can follow it in the train (send.c).  False where it
 * cannot be (an ACK). */
bool usnic_train_pad(usnic_module_t *module, struct usnic_seg *seg,
                     const struct mca_btl_base_endpoint_t *ep);

#endif
