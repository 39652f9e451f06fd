/*
 * NUMA locality of the devices (btl_usnic_want_numa_device_assignment).
 *
 * A NIC hangs off the PCI root of one socket.  A process running on
 * another socket reaches it across the inter-socket link for every
 * doorbell, descriptor and payload byte, which adds latency to every short
 * message.  So when the process is bound, each module's interface is
 * looked up by name among the OS devices of OPAL's hwloc topology, the
 * NUMA node(s) of the PCI device behind it are compared with the NUMA
 * node(s) of the process's binding, and every module farther than the
 * nearest gets its btl_latency raised by the difference in NUMA distance
 * (hwloc's latency matrix, in ACPI SLIT units where a node's distance to
 * itself is 10; 10 and 20 when the topology has no matrix).
 *
 * What this does to the traffic is the BML's doing: for each peer it puts
 * only the BTL modules of the lowest btl_latency (within the highest
 * exclusivity) into the list it sends short messages and first fragments
 * over, and keeps every module, weighted by btl_bandwidth, for the rest of
 * long messages.  btl_latency is read when peers are added, so this runs
 * at component init, right after the modules are made.
 *
 * Nothing changes, and the verbose output (btl_base_verbose >= 5) says why,
 * when the parameter is off, the topology cannot be had or holds no PCI
 * devices, the binding cannot be read or covers the whole machine, an
 * interface has no PCI device in the topology, or all devices are equally
 * near.
 */
#include <errno.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "opal/mca/hwloc/base/base.h"

#include "btl_usnic.h"
#include "btl_usnic_proc.h" /* USNIC_MAX_MODULES */

/* ACPI SLIT: a node's distance to itself, and the conventional distance to
 * another node when nothing better is known. */
#define USNIC_NUMA_LOCAL 10
#define USNIC_NUMA_REMOTE 20
/* The farthest distance told apart (a matrix in other units than SLIT's
 * is scaled to them, and might be far out). */
#define USNIC_NUMA_FAR 1000

/* What a module's device locality came to. */
typedef struct usnic_numa_dev {
    hwloc_obj_t pci;   /* the PCI device (NULL: none in the topology) */
    hwloc_obj_t home;  /* its first non-I/O ancestor (package, NUMA group, machine) */
    unsigned distance; /* from the process's binding, SLIT units */
    char nodes[64];    /* the device's NUMA node list, for messages */
    char busid[24];    /* its PCI bus id, for messages */
} usnic_numa_dev_t;

/* The network OS device named IFNAME, or NULL. */
static hwloc_obj_t find_osdev(hwloc_topology_t topo, const char *ifname)
{
    hwloc_obj_t obj = NULL;

    while (NULL != (obj = hwloc_get_next_osdev(topo, obj))) {
        if (NULL != obj->name && 0 == strcmp(obj->name, ifname)) {
            return obj;
        }
    }
    return NULL;
}

/* The PCI device an OS device belongs to (its nearest PCI ancestor). */
static hwloc_obj_t pci_of(hwloc_obj_t obj)
{
    for (; NULL != obj; obj = obj->parent) {
        if (HWLOC_OBJ_PCI_DEVICE == obj->type) {
            return obj;
        }
    }
    return NULL;
}

/* Position of NUMA node OS index NODE in the matrix DIST, or -1. */
static int dist_index(const struct hwloc_distances_s *dist, unsigned node)
{
    for (unsigned i = 0; i < dist->nbobjs; i++) {
        if (NULL != dist->objs[i] && dist->objs[i]->os_index == node) {
            return (int) i;
        }
    }
    return -1;
}

/*
 * The NUMA distance between the nodes of MINE and those of THEIRS, in SLIT
 * units: the smallest over all pairs, so sharing a node means local.  From
 * DIST (NULL: none), scaled so that a node's distance to itself reads 10,
 * and at most USNIC_NUMA_FAR.
 */
static unsigned nodeset_distance(const struct hwloc_distances_s *dist, hwloc_const_nodeset_t mine,
                                 hwloc_const_nodeset_t theirs)
{
    uint64_t best = UINT64_MAX;

    if (hwloc_bitmap_intersects(mine, theirs)) {
        return USNIC_NUMA_LOCAL;
    }
    if (NULL == dist) {
        return USNIC_NUMA_REMOTE;
    }
    for (int a = hwloc_bitmap_first(mine); a >= 0; a = hwloc_bitmap_next(mine, a)) {
        int i = dist_index(dist, (unsigned) a);
        uint64_t self;
        if (i < 0) {
            continue;
        }
        self = dist->values[(size_t) i * dist->nbobjs + (size_t) i];
        for (int b = hwloc_bitmap_first(theirs); b >= 0 && self > 0;
             b = hwloc_bitmap_next(theirs, b)) {
            int j = dist_index(dist, (unsigned) b);
            uint64_t d;
            if (j < 0) {
                continue;
            }
            d = dist->values[(size_t) i * dist->nbobjs + (size_t) j];
            d = (d > UINT64_MAX / USNIC_NUMA_LOCAL) ? USNIC_NUMA_FAR : d * USNIC_NUMA_LOCAL / self;
            if (d < best) {
                best = d;
            }
        }
    }
    if (UINT64_MAX == best) {
        return USNIC_NUMA_REMOTE; /* the matrix does not cover these nodes */
    }
    return (best > USNIC_NUMA_FAR) ? USNIC_NUMA_FAR : (unsigned) best;
}

/* The process's binding within the topology, in BOUND.  False (said at
 * verbose level) when it cannot be read or does not restrict the process. */
static bool get_binding(hwloc_topology_t topo, hwloc_bitmap_t bound)
{
    hwloc_const_cpuset_t all = hwloc_topology_get_topology_cpuset(topo);
    char buf[128];

    if (0 != hwloc_get_cpubind(topo, bound, HWLOC_CPUBIND_PROCESS)) {
        USNIC_VERBOSE(5,
                      "NUMA: cannot read this process's CPU binding (%s): device locality not "
                      "used, btl_latency unchanged",
                      strerror(errno));
        return false;
    }
    hwloc_bitmap_and(bound, bound, all);
    hwloc_bitmap_list_snprintf(buf, sizeof(buf), bound);
    if (hwloc_bitmap_iszero(bound)) {
        USNIC_VERBOSE(5, "NUMA: this process's CPUs are not in the topology: device locality not "
                         "used, btl_latency unchanged");
        return false;
    }
    if (hwloc_bitmap_isequal(bound, all)) {
        USNIC_VERBOSE(5,
                      "NUMA: this process is not bound (CPUs %s, the whole machine): device "
                      "locality not used, btl_latency unchanged",
                      buf);
        return false;
    }
    return true;
}

/* The hardware address of interface IFNAME in our network namespace, as
 * hwloc writes it ("02:00:5e:10:00:01"); false if it has none we know
 * (not an interface, or not Ethernet). */
static bool if_hwaddr(const char *ifname, char *buf, size_t len)
{
    struct ifreq ifr;
    const unsigned char *a = (const unsigned char *) ifr.ifr_hwaddr.sa_data;
    int fd, rc;

    if (strlen(ifname) >= sizeof(ifr.ifr_name)) {
        return false;
    }
    memset(&ifr, 0, sizeof(ifr));
    memcpy(ifr.ifr_name, ifname, strlen(ifname));
    fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return false;
    }
    rc = ioctl(fd, SIOCGIFHWADDR, &ifr);
    close(fd);
    if (0 != rc || ARPHRD_ETHER != ifr.ifr_hwaddr.sa_family) {
        return false;
    }
    snprintf(buf, len, "%02x:%02x:%02x:%02x:%02x:%02x", a[0], a[1], a[2], a[3], a[4], a[5]);
    return true;
}

/* Locality of one module's device.  False, said at verbose level, when
 * its name is no OS device of a PCI device in the topology, or names
 * another device: one whose hardware address differs from the interface's
 * (an interface of the same name in another network namespace, say). */
static bool locate(hwloc_topology_t topo, const struct hwloc_distances_s *dist,
                   hwloc_const_nodeset_t mine, const usnic_module_t *module, usnic_numa_dev_t *dev)
{
    hwloc_obj_t osdev = find_osdev(topo, module->ifname);
    const char *theirs = (NULL != osdev) ? hwloc_obj_get_info_by_name(osdev, "Address") : NULL;
    char ours[32];
    const struct hwloc_pcidev_attr_s *pa;

    memset(dev, 0, sizeof(*dev));
    dev->pci = pci_of(osdev);
    if (NULL == dev->pci) {
        USNIC_VERBOSE(5,
                      "NUMA: %s: no PCI device with this name in the topology: locality "
                      "unknown, btl_latency stays %u",
                      module->ifname, (unsigned) module->super.btl_latency);
        return false;
    }
    pa = &dev->pci->attr->pcidev;
    snprintf(dev->busid, sizeof(dev->busid), "%04x:%02x:%02x.%01x", pa->domain, pa->bus, pa->dev,
             pa->func);
    if (NULL != theirs && if_hwaddr(module->ifname, ours, sizeof(ours)) &&
        0 != strcasecmp(theirs, ours)) {
        USNIC_VERBOSE(5,
                      "NUMA: %s: the topology's %s (PCI %s) has address %s, this interface %s: "
                      "another device of the same name (another network namespace?), locality "
                      "unknown, btl_latency stays %u",
                      module->ifname, module->ifname, dev->busid, theirs, ours,
                      (unsigned) module->super.btl_latency);
        return false;
    }
    dev->home = hwloc_get_non_io_ancestor_obj(topo, dev->pci);
    if (NULL == dev->home || NULL == dev->home->nodeset ||
        hwloc_bitmap_iszero(dev->home->nodeset)) {
        /* attached to no node in particular: as near as anything */
        snprintf(dev->nodes, sizeof(dev->nodes), "any");
        dev->distance = USNIC_NUMA_LOCAL;
        return true;
    }
    hwloc_bitmap_list_snprintf(dev->nodes, sizeof(dev->nodes), dev->home->nodeset);
    dev->distance = nodeset_distance(dist, mine, dev->home->nodeset);
    return true;
}

/* Raise the btl_latency of the modules farther than the nearest. */
static void apply(hwloc_topology_t topo, const struct hwloc_distances_s *dist,
                  hwloc_const_cpuset_t bound)
{
    usnic_component_t *c = &mca_btl_usnic_component;
    usnic_numa_dev_t devs[USNIC_MAX_MODULES];
    bool known[USNIC_MAX_MODULES];
    unsigned nearest = UINT32_MAX;
    hwloc_bitmap_t mine = hwloc_bitmap_alloc();
    char cpus[128], nodes[128];
    int nknown = 0;

    if (NULL == mine) {
        return;
    }
    hwloc_cpuset_to_nodeset(topo, bound, mine);
    hwloc_bitmap_list_snprintf(cpus, sizeof(cpus), bound);
    hwloc_bitmap_list_snprintf(nodes, sizeof(nodes), mine);
    USNIC_VERBOSE(5, "NUMA: this process is bound to CPUs %s (NUMA node %s); distances %s", cpus,
                  nodes,
                  (NULL != dist) ? "from the topology's latency matrix" : "10 local, 20 not");
    for (int i = 0; i < c->num_modules; i++) {
        known[i] = locate(topo, dist, mine, c->modules[i], &devs[i]);
        if (!known[i]) {
            continue;
        }
        nknown++;
        if (devs[i].distance < nearest) {
            nearest = devs[i].distance;
        }
    }
    for (int i = 0; i < c->num_modules; i++) {
        usnic_module_t *m = c->modules[i];
        uint32_t before = m->super.btl_latency, extra;

        if (!known[i]) {
            continue;
        }
        extra = devs[i].distance - nearest;
        if (0 == extra) {
            USNIC_VERBOSE(5,
                          "NUMA: %s: PCI %s on NUMA node %s, distance %u: among the nearest, "
                          "btl_latency stays %u",
                          m->ifname, devs[i].busid, devs[i].nodes, devs[i].distance, before);
            continue;
        }
        m->super.btl_latency = (before > UINT32_MAX - extra) ? UINT32_MAX : before + extra;
        USNIC_VERBOSE(5,
                      "NUMA: %s: PCI %s on NUMA node %s, distance %u (nearest %u): "
                      "btl_latency raised from %u to %u",
                      m->ifname, devs[i].busid, devs[i].nodes, devs[i].distance, nearest, before,
                      (unsigned) m->super.btl_latency);
    }
    if (0 == nknown) {
        USNIC_VERBOSE(5, "NUMA: none of the %d devices is in the topology: btl_latency unchanged",
                      c->num_modules);
    }
    hwloc_bitmap_free(mine);
}

unsigned usnic_host_cpus(void)
{
    long n;

    if (OPAL_SUCCESS == opal_hwloc_base_get_topology() && NULL != opal_hwloc_topology) {
        int w = hwloc_bitmap_weight(hwloc_topology_get_allowed_cpuset(opal_hwloc_topology));
        if (w > 0) {
            return (unsigned) w;
        }
    }
    n = sysconf(_SC_NPROCESSORS_ONLN);
    return (n > 0) ? (unsigned) n : 1u;
}

void usnic_numa_apply(void)
{
    usnic_component_t *c = &mca_btl_usnic_component;
    struct hwloc_distances_s *dist = NULL;
    unsigned ndist = 1;
    hwloc_topology_t topo;
    hwloc_bitmap_t bound;

    if (!c->params.want_numa) {
        USNIC_VERBOSE(5, "NUMA: btl_usnic_want_numa_device_assignment is 0: device locality not "
                         "used");
        return;
    }
    if (0 == c->num_modules) {
        return;
    }
    if (OPAL_SUCCESS != opal_hwloc_base_get_topology() || NULL == opal_hwloc_topology) {
        USNIC_VERBOSE(5, "NUMA: no hwloc topology: device locality unknown, btl_latency unchanged");
        return;
    }
    topo = opal_hwloc_topology;
    if (NULL == hwloc_get_next_pcidev(topo, NULL)) {
        USNIC_VERBOSE(5, "NUMA: the hwloc topology has no PCI information (no PCI devices): device "
                         "locality unknown, btl_latency unchanged");
        return;
    }
    bound = hwloc_bitmap_alloc();
    if (NULL == bound) {
        return;
    }
    if (get_binding(topo, bound)) {
        if (0 != hwloc_distances_get_by_type(topo, HWLOC_OBJ_NUMANODE, &ndist, &dist,
                                             HWLOC_DISTANCES_KIND_MEANS_LATENCY, 0) ||
            0 == ndist) {
            dist = NULL;
        }
        apply(topo, dist, bound);
        if (NULL != dist) {
            hwloc_distances_release(topo, dist);
        }
    }
    hwloc_bitmap_free(bound);
}
