/*
 * ACK policy.  A receiver owes its peer an ACK once it accepted data.  The
 * ACK rides on the next data packet to that peer if there is one; otherwise
 * it goes out on its own (on the priority channel) when the first of these
 * happens: btl_usnic_ack_delay microseconds passed, a quarter of the peer's
 * send window arrived unacknowledged, or a duplicate arrived (our earlier
 * ACK was lost, or the sender asked).
 */
#include "btl_usnic_send.h"

void usnic_ack_schedule(usnic_module_t *module, mca_btl_base_endpoint_t *ep)
{
    if (!ep->on_ack_list) {
        ep->on_ack_list = true;
        opal_list_append(&module->ack_eps, &ep->ack_item);
    }
}

int usnic_progress_acks(usnic_module_t *module, uint64_t now)
{
    uint64_t delay = (uint64_t) mca_btl_usnic_component.params.ack_delay;
    opal_list_item_t *item, *next;
    int sent = 0;

    for (item = opal_list_get_first(&module->ack_eps); item != opal_list_get_end(&module->ack_eps);
         item = next) {
        mca_btl_base_endpoint_t *ep = usnic_ep_of_ack_item(item);
        next = opal_list_get_next(item);

        if (0 != ep->ping_ts) {
            /* a ping the reliability core wants (it carries our ACK too) */
            if (OPAL_SUCCESS != usnic_send_ping(module, ep)) {
                break;
            }
            sent++;
        }
        if (!ep->rel.rx.ack_owed && !ep->rel.rx.ack_now) {
            /* already piggy-backed */
            opal_list_remove_item(&module->ack_eps, item);
            ep->on_ack_list = false;
            continue;
        }
        if (!usnic_rel_ack_due(&ep->rel, now, delay)) {
            continue;
        }
        if (OPAL_SUCCESS != usnic_send_ack(module, ep)) {
            break;
        }
        sent++;
        opal_list_remove_item(&module->ack_eps, item);
        ep->on_ack_list = false;
    }
    return sent;
}
