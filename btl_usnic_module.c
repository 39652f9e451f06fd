/*
 * Module operations: what ob1 calls.  Each takes the component lock (a
 * no-op unless MPI threads are in use) and hands work to the send engine
 * (btl_usnic_send.c).
 */
#include <string.h>
#include <arpa/inet.h>

#include "opal/class/opal_bitmap.h"
#include "opal/datatype/opal_convertor.h"
#include "opal/util/show_help.h"

#include "btl_usnic.h"
#include "btl_usnic_endpoint.h"
#include "btl_usnic_path.h"
#include "btl_usnic_frag.h"
#include "btl_usnic_proc.h"
#include "btl_usnic_send.h"
#include "btl_usnic_util.h"


/* A peer with usnic interfaces that none of ours can pair with
 * (btl_usnic_show_route_failures): say so once per peer process. */
static void route_failure(opal_proc_t *proc, const struct usnic_modex_rec *recs, size_t nrecs)
{
    usnic_component_t *c = &mca_btl_usnic_component;
    char ours[512] = "", theirs[512] = "";
    size_t o = 0, t = 0;

    if (0 == c->params.show_route_failures) {
        return;
    }
    for (int m = 1; m < c->num_modules; m++) {
        if (NULL != usnic_pair(c->modules[m], proc, recs, nrecs)) {
            return; /* another module of ours reaches it */
        }
    }
    for (int m = 0; m < c->num_modules && o < sizeof(ours); m++) {
        char a[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &c->modules[m]->if_addr.sin_addr, a, sizeof(a));
        o += (size_t) snprintf(ours + o, sizeof(ours) - o, "%s%s %s/%u", m ? ", " : "",
                               c->modules[m]->ifname, a, (unsigned) c->modules[m]->if_prefixlen);
    }
    for (size_t r = 0; r < nrecs && t < sizeof(theirs); r++) {
        char a[INET_ADDRSTRLEN], name[USNIC_IFNAME_BUF];
        inet_ntop(AF_INET, &recs[r].ipv4, a, sizeof(a));
        t += (size_t) snprintf(theirs + t, sizeof(theirs) - t, "%s%s %s/%u", r ? ", " : "",
                               usnic_rec_ifname(&recs[r], name), a, (unsigned) recs[r].prefixlen);
    }
    opal_show_help("help-mpi-btl-usnic.txt", "unreachable peer", true, opal_process_info.nodename,
                   ours, (NULL != proc->proc_hostname) ? proc->proc_hostname : "unknown", theirs);
}

static int usnic_add_procs(struct mca_btl_base_module_t *btl, size_t nprocs,
                           struct opal_proc_t **procs, struct mca_btl_base_endpoint_t **peers,
                           opal_bitmap_t *reachable)
{
    usnic_module_t *module = (usnic_module_t *) btl;
    opal_proc_t *me = opal_proc_local_get();
    int added = 0;

    usnic_lock();
    for (size_t i = 0; i < nprocs; i++) {
        struct usnic_modex_rec *recs = NULL;
        const struct usnic_modex_rec *rec;
        size_t nrecs = 0;

        peers[i] = NULL;
        if (procs[i] == me) {
            continue; /* btl/self carries traffic to ourselves */
        }
        if (OPAL_SUCCESS != usnic_modex_recv(procs[i], &recs, &nrecs)) {
            continue; /* peer has no usnic modules: left to other BTLs */
        }
        rec = usnic_pair(module, procs[i], recs, nrecs);
        if (NULL != rec) {
            peers[i] = usnic_endpoint_create(module, procs[i], rec);
        } else if (0 == module->index && nrecs > 0) {
            route_failure(procs[i], recs, nrecs);
        }
        free(recs);
        if (NULL != peers[i]) {
            if (NULL != reachable) {
                opal_bitmap_set_bit(reachable, (int) i);
            }
            added++;
        }
    }
    usnic_path_map_write();
    usnic_unlock();
    USNIC_VERBOSE(20, "%s: %d of %zu peers reachable", module->ifname, added, nprocs);
    return OPAL_SUCCESS;
}

static int usnic_del_procs(struct mca_btl_base_module_t *btl, size_t nprocs,
                           struct opal_proc_t **procs, struct mca_btl_base_endpoint_t **peers)
{
    (void) btl;
    (void) nprocs;
    (void) procs;
    (void) peers;
    /* endpoints live until finalize: late packets from the peer stay recognisable */
    return OPAL_SUCCESS;
}

int usnic_module_finalize(struct mca_btl_base_module_t *btl)
{
    usnic_module_t *module = (usnic_module_t *) btl;

    usnic_lock();
    if (!module->finalized) {
        module->finalized = true;
        usnic_stats_print(module);
        usnic_module_teardown(module);
    }
    usnic_unlock();
    return OPAL_SUCCESS;
}

static mca_btl_base_descriptor_t *usnic_alloc(struct mca_btl_base_module_t *btl,
                                              struct mca_btl_base_endpoint_t *ep, uint8_t order,
                                              size_t size, uint32_t flags)
{
    usnic_module_t *module = (usnic_module_t *) btl;
    usnic_frag_t *frag;
    (void) order;

    usnic_lock();
    if (size <=
        ((NULL != ep) ? ep->frag_max : module->chan[USNIC_CHAN_DATA].mtu - USNIC_HDR_LEN_FRAG)) {
        frag = usnic_frag_alloc_small(module, ep, size, flags);
    } else if (size <= module->max_msg_len) {
        frag = usnic_frag_alloc_large(module, ep, flags);
        if (NULL != frag) {
            frag->big_buf = usnic_buf_get(module, size);
            if (NULL == frag->big_buf) {
                usnic_frag_release(frag);
                frag = NULL;
            } else {
                frag->segs[0].seg_addr.pval = frag->big_buf->ptr;
                frag->segs[0].seg_len = size;
            }
        }
    } else {
        frag = NULL;
    }
    usnic_unlock();
    return (NULL == frag) ? NULL : &frag->base;
}

static int usnic_free(struct mca_btl_base_module_t *btl, mca_btl_base_descriptor_t *des)
{
    (void) btl;
    usnic_lock();
    usnic_frag_release((usnic_frag_t *) des);
    usnic_unlock();
    return OPAL_SUCCESS;
}

static mca_btl_base_descriptor_t *usnic_prepare_src(struct mca_btl_base_module_t *btl,
                                                    struct mca_btl_base_endpoint_t *ep,
                                                    struct opal_convertor_t *convertor,
                                                    uint8_t order, size_t reserve, size_t *size,
                                                    uint32_t flags)
{
    usnic_module_t *module = (usnic_module_t *) btl;
    usnic_frag_t *frag;
    struct iovec iov;
    uint32_t iov_count = 1;
    size_t max_data = *size;
    (void) order;

    usnic_lock();
    if (reserve + max_data <= ep->frag_max) {
        /* SMALL: header and data in one segment (the copy is cheaper than an iov) */
        frag = usnic_frag_alloc_small(module, ep, reserve + max_data, flags);
        if (OPAL_UNLIKELY(NULL == frag)) {
            goto out;
        }
        iov.iov_base = (uint8_t *) frag->segs[0].seg_addr.pval + reserve;
        iov.iov_len = max_data;
        (void) opal_convertor_pack(convertor, &iov, &iov_count, &max_data);
        frag->segs[0].seg_len = reserve + max_data;
        *size = max_data;
        goto out;
    }

    /* LARGE: PML header in the fragment, data referenced in place when contiguous */
    if (reserve > USNIC_PML_HDR_MAX) {
        frag = NULL;
        goto out;
    }
    if (reserve + max_data > module->max_msg_len) {
        max_data = module->max_msg_len - reserve;
    }
    frag = usnic_frag_alloc_large(module, ep, flags);
    if (OPAL_UNLIKELY(NULL == frag)) {
        goto out;
    }
    if (opal_convertor_need_buffers(convertor)) {
        frag->big_buf = usnic_buf_get(module, max_data); /* the header is in hdr_buf */
        if (NULL == frag->big_buf) {
            usnic_frag_release(frag);
            frag = NULL;
            goto out;
        }
        iov.iov_base = frag->big_buf->ptr;
    } else {
        iov.iov_base = NULL; /* the convertor points us at the user's data */
    }
    iov.iov_len = max_data;
    (void) opal_convertor_pack(convertor, &iov, &iov_count, &max_data);
    frag->segs[0].seg_addr.pval = frag->hdr_buf;
    frag->segs[0].seg_len = reserve;
    frag->segs[1].seg_addr.pval = iov.iov_base;
    frag->segs[1].seg_len = max_data;
    frag->base.des_segment_count = 2;
    *size = max_data;
out:
    usnic_unlock();
    return (NULL == frag) ? NULL : &frag->base;
}

/* Fix the byte layout of a LARGE fragment from what the PML left in its segments. */
static void large_layout(usnic_frag_t *frag)
{
    if (2 == frag->base.des_segment_count) {
        frag->hdr_len = (uint32_t) frag->segs[0].seg_len;
        frag->data = frag->segs[1].seg_addr.pval;
        frag->data_len = frag->segs[1].seg_len;
    } else {
        frag->hdr_len = 0;
        frag->data = frag->segs[0].seg_addr.pval;
        frag->data_len = frag->segs[0].seg_len;
    }
    frag->total_len = frag->hdr_len + frag->data_len;
    frag->next_off = 0;
    frag->chunks_unacked = 0;
}

static int usnic_send(struct mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *ep,
                      struct mca_btl_base_descriptor_t *des, mca_btl_base_tag_t tag)
{
    usnic_module_t *module = (usnic_module_t *) btl;
    usnic_frag_t *frag = (usnic_frag_t *) des;
    int rc = OPAL_SUCCESS;

    usnic_lock();
    usnic_path_before_send(ep, (USNIC_FRAG_SMALL == frag->kind)
                                   ? USNIC_HDR_LEN_FRAG + frag->segs[0].seg_len
                                   : SIZE_MAX);
    if (OPAL_UNLIKELY(ep->dead)) {
        usnic_unlock();
        return OPAL_ERR_UNREACH;
    }
    frag->tag = tag;
    frag->ep = ep;
    /* The peer's PML gets our fragments in this order (btl_usnic_reasm.h):
     * the send queue keeps it, and a fragment skips the queue only when
     * the queue is empty. */
    frag->msg_id = ep->next_msg_id++;
    if (USNIC_FRAG_SMALL == frag->kind) {
        if (opal_list_is_empty(&ep->sendq) && OPAL_SUCCESS == usnic_send_small(module, ep, frag)) {
            frag->sent = true;
            if (des->des_flags & MCA_BTL_DES_SEND_ALWAYS_CALLBACK) {
                opal_list_append(&module->done_frags, &frag->base.super.super);
            } else {
                if (des->des_flags & MCA_BTL_DES_FLAGS_BTL_OWNERSHIP) {
                    usnic_frag_release(frag);
                }
                rc = 1; /* done: no callback */
            }
        } else {
            usnic_endpoint_enqueue(ep, frag);
        }
    } else {
        large_layout(frag);
        usnic_send_chunked(module, ep, frag); /* completion comes with the last ACK */
        usnic_send_early(module, ep, frag);   /* or sooner */
    }
    usnic_unlock();
    return rc;
}

static int usnic_sendi(struct mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *ep,
                       struct opal_convertor_t *convertor, void *header, size_t header_size,
                       size_t payload_size, uint8_t order, uint32_t flags, mca_btl_base_tag_t tag,
                       mca_btl_base_descriptor_t **descriptor)
{
    usnic_module_t *module = (usnic_module_t *) btl;
    size_t total = header_size + payload_size;
    usnic_seg_t *seg;

    usnic_lock();
    usnic_path_before_send(ep, USNIC_HDR_LEN_FRAG + total);
    if (OPAL_UNLIKELY(ep->dead)) {
        usnic_unlock();
        if (NULL != descriptor) {
            *descriptor = NULL;
        }
        return OPAL_ERR_UNREACH;
    }
    if (total <= ep->frag_max && opal_list_is_empty(&ep->sendq) &&
        usnic_path_allows(ep, USNIC_HDR_LEN_FRAG + total) && usnic_rel_tx_window_open(&ep->rel) &&
        NULL != (seg = usnic_seg_alloc(module, USNIC_SEG_SEND))) {
        uint8_t *p = seg->buf + USNIC_HDR_LEN_FRAG;
        struct usnic_pkt_hdr *hdr = (struct usnic_pkt_hdr *) seg->buf;

        memcpy(p, header, header_size);
        if (payload_size > 0) {
            struct iovec iov = {.iov_base = p + header_size, .iov_len = payload_size};
            uint32_t iov_count = 1;
            size_t max_data = payload_size;
            (void) opal_convertor_pack(convertor, &iov, &iov_count, &max_data);
        }
        usnic_pkt_hdr_init(module, hdr, USNIC_PKT_FRAG, tag, (uint32_t) total, 0);
        if (OPAL_SUCCESS == usnic_send_inline(module, ep, seg, (uint32_t) total)) {
            usnic_unlock();
            return OPAL_SUCCESS;
        }
        seg->refs = 1;
        usnic_seg_put(seg);
    }
    usnic_unlock();
    if (NULL != descriptor) {
        *descriptor = usnic_alloc(btl, ep, order, total, flags);
    }
    return OPAL_ERR_RESOURCE_BUSY;
}

static int usnic_put(struct mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *ep,
                     void *local_address, uint64_t remote_address,
                     struct mca_btl_base_registration_handle_t *local_handle,
                     struct mca_btl_base_registration_handle_t *remote_handle, size_t size,
                     int flags, int order, mca_btl_base_rdma_completion_fn_t cbfunc,
                     void *cbcontext, void *cbdata)
{
    usnic_module_t *module = (usnic_module_t *) btl;
    usnic_frag_t *frag;
    (void) flags;
    (void) order;

    if (NULL == remote_handle || remote_address < remote_handle->base ||
        size > remote_handle->len ||
        remote_address - remote_handle->base > remote_handle->len - size) {
        return OPAL_ERR_BAD_PARAM;
    }
    usnic_lock();
    usnic_path_before_send(ep, USNIC_HDR_LEN_PUT + size);
    if (OPAL_UNLIKELY(ep->dead)) {
        usnic_unlock();
        return OPAL_ERR_UNREACH;
    }
    frag = usnic_frag_alloc_large(module, ep, MCA_BTL_DES_FLAGS_BTL_OWNERSHIP);
    if (NULL == frag) {
        usnic_unlock();
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    frag->kind = USNIC_FRAG_PUT;
    frag->tag = 0;
    frag->hdr_len = 0;
    frag->data = local_address;
    frag->data_len = size;
    frag->total_len = size;
    frag->msg_id = ep->next_put_id++;
    frag->put_key = remote_handle->key;
    frag->put_offset = remote_address - remote_handle->base;
    frag->put_cb = cbfunc;
    frag->put_cbcontext = cbcontext;
    frag->put_cbdata = cbdata;
    frag->put_local = local_address;
    frag->put_local_handle = local_handle;
    module->stats.puts++;
    if (0 == size) {
        frag->sent = true;
        opal_list_append(&module->done_frags, &frag->base.super.super);
    } else {
        usnic_send_chunked(module, ep, frag);
    }
    usnic_unlock();
    return OPAL_SUCCESS;
}

static struct mca_btl_base_registration_handle_t *
usnic_register_mem(struct mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *ep,
                   void *base, size_t size, uint32_t flags)
{
    struct mca_btl_base_registration_handle_t *h = malloc(sizeof(*h));
    (void) btl;
    (void) ep;
    (void) flags;

    if (NULL == h) {
        return NULL;
    }
    usnic_lock();
    if (0 !=
        usnic_reg_add(&mca_btl_usnic_component.regs, (uint64_t) (uintptr_t) base, size, &h->key)) {
        usnic_unlock();
        free(h);
        return NULL;
    }
    usnic_unlock();
    h->base = (uint64_t) (uintptr_t) base;
    h->len = size;
    return h;
}

static int usnic_deregister_mem(struct mca_btl_base_module_t *btl,
                                struct mca_btl_base_registration_handle_t *handle)
{
    (void) btl;
    usnic_lock();
    (void) usnic_reg_remove(&mca_btl_usnic_component.regs, handle->key);
    usnic_unlock();
    free(handle);
    return OPAL_SUCCESS;
}

static int usnic_register_error(struct mca_btl_base_module_t *btl,
                                mca_btl_base_module_error_cb_fn_t cbfunc)
{
    ((usnic_module_t *) btl)->error_cb = cbfunc;
    return OPAL_SUCCESS;
}

static void usnic_dump(struct mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *ep,
                       int verbose)
{
    char line[1024];
    (void) ep;
    (void) verbose;
    usnic_stats_format((usnic_module_t *) btl, "[usnic dump]", line, sizeof(line));
    opal_output(0, "%s", line);
}

usnic_module_t usnic_module_template = {
    .super =
        {
            .btl_component = &mca_btl_usnic_component.super,
            .btl_add_procs = usnic_add_procs,
            .btl_del_procs = usnic_del_procs,
            .btl_finalize = usnic_module_finalize,
            .btl_alloc = usnic_alloc,
            .btl_free = usnic_free,
            .btl_prepare_src = usnic_prepare_src,
            .btl_send = usnic_send,
            .btl_sendi = usnic_sendi,
            .btl_put = usnic_put,
            .btl_register_mem = usnic_register_mem,
            .btl_deregister_mem = usnic_deregister_mem,
            .btl_register_error = usnic_register_error,
            .btl_dump = usnic_dump,
        },
};
