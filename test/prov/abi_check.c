/*
 * Prints the layout of the usnic extension ABI: every field's offset and
 * size, every structure's size, the constants.  Built twice by
 * abi_check.sh: with -DABI_REAL against libfabric's own fi_ext_usnic.h,
 * and against btl_usnic_fi_ext.h (our declarations); the outputs must be
 * identical.
 */
#include <stddef.h>
#include <stdio.h>

#include <rdma/fabric.h>

#ifdef ABI_REAL
#include "fi_ext_usnic.h"
#else
#define BTL_USNIC_FI_EXT_OWN 1
#include "btl_usnic_fi_ext.h"
#endif

#define FIELD(type, member)                                                                        \
    printf("%-24s %-22s offset %3zu size %3zu\n", #type, #member, offsetof(struct type, member),   \
           sizeof(((struct type *) 0)->member))
#define SIZE(type)                                                                                 \
    printf("%-24s %-22s             size %3zu\n", #type, "(struct)", sizeof(struct type))

int main(void)
{
    SIZE(fi_usnic_cap);
    FIELD(fi_usnic_cap, uc_capability);
    FIELD(fi_usnic_cap, uc_present);

    SIZE(fi_usnic_info_v1);
    FIELD(fi_usnic_info_v1, ui_link_speed);
    FIELD(fi_usnic_info_v1, ui_netmask_be);
    FIELD(fi_usnic_info_v1, ui_ifname);
    FIELD(fi_usnic_info_v1, ui_num_vf);
    FIELD(fi_usnic_info_v1, ui_qp_per_vf);
    FIELD(fi_usnic_info_v1, ui_cq_per_vf);

    SIZE(fi_usnic_info_v2);
    FIELD(fi_usnic_info_v2, ui_link_speed);
    FIELD(fi_usnic_info_v2, ui_netmask_be);
    FIELD(fi_usnic_info_v2, ui_ifname);
    FIELD(fi_usnic_info_v2, ui_num_vf);
    FIELD(fi_usnic_info_v2, ui_qp_per_vf);
    FIELD(fi_usnic_info_v2, ui_cq_per_vf);
    FIELD(fi_usnic_info_v2, ui_devname);
    FIELD(fi_usnic_info_v2, ui_mac_addr);
    FIELD(fi_usnic_info_v2, ui_pad0);
    FIELD(fi_usnic_info_v2, ui_ipaddr_be);
    FIELD(fi_usnic_info_v2, ui_prefixlen);
    FIELD(fi_usnic_info_v2, ui_mtu);
    FIELD(fi_usnic_info_v2, ui_link_up);
    FIELD(fi_usnic_info_v2, ui_pad1);
    FIELD(fi_usnic_info_v2, ui_vendor_id);
    FIELD(fi_usnic_info_v2, ui_vendor_part_id);
    FIELD(fi_usnic_info_v2, ui_device_id);
    FIELD(fi_usnic_info_v2, ui_firmware);
    FIELD(fi_usnic_info_v2, ui_intr_per_vf);
    FIELD(fi_usnic_info_v2, ui_max_cq);
    FIELD(fi_usnic_info_v2, ui_max_qp);
    FIELD(fi_usnic_info_v2, ui_max_cqe);
    FIELD(fi_usnic_info_v2, ui_max_send_credits);
    FIELD(fi_usnic_info_v2, ui_max_recv_credits);
    FIELD(fi_usnic_info_v2, ui_nicname);
    FIELD(fi_usnic_info_v2, ui_pid);
    FIELD(fi_usnic_info_v2, ui_caps);

    SIZE(fi_usnic_info);
    FIELD(fi_usnic_info, ui_version);
    FIELD(fi_usnic_info, ui_pad0);
    FIELD(fi_usnic_info, ui.v1);
    FIELD(fi_usnic_info, ui.v2);

    SIZE(fi_usnic_ops_fabric);
    FIELD(fi_usnic_ops_fabric, size);
    FIELD(fi_usnic_ops_fabric, getinfo);
    SIZE(fi_usnic_ops_av);
    FIELD(fi_usnic_ops_av, size);
    FIELD(fi_usnic_ops_av, get_distance);

    printf("FI_PROTO_RUDP             0x%x\n", (unsigned) FI_PROTO_RUDP);
    printf("FI_EXT_USNIC_INFO_VERSION %d\n", FI_EXT_USNIC_INFO_VERSION);
    printf("FI_EXT_USNIC_MAX_DEVNAME  %d\n", FI_EXT_USNIC_MAX_DEVNAME);
    printf("FI_USNIC_FABRIC_OPS_1     \"%s\"\n", FI_USNIC_FABRIC_OPS_1);
    printf("FI_USNIC_AV_OPS_1         \"%s\"\n", FI_USNIC_AV_OPS_1);
    return 0;
}
