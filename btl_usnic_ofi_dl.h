/*
 * libfabric, loaded on demand.  The component is not linked against
 * libfabric: libfabric.so.1 is opened with dlopen the first time the
 * libfabric backend looks for devices (ofi_discover), so jobs on the kernel
 * backend never load it.  On Debian 12, libfabric's own dependencies
 * (libinfinipath, libpsm2) spend about 0.1 s each in their load-time
 * initialisers, which made every rank's MPI_Init 0.2 s slower than
 * btl/tcp's (docs/perf-init.md).
 *
 * Only the five functions below are real library symbols; the rest of the
 * libfabric API the component uses goes through the objects' operation
 * tables (static inline functions in the headers).  Including this header
 * after the libfabric headers makes those names refer to the loaded ones.
 */
#ifndef BTL_USNIC_OFI_DL_H
#define BTL_USNIC_OFI_DL_H

#include <stdbool.h>
#include <stdint.h>

#include <rdma/fabric.h>

struct usnic_ofi_dl {
    int (*getinfo)(uint32_t, const char *, const char *, uint64_t, const struct fi_info *,
                   struct fi_info **);
    void (*freeinfo)(struct fi_info *);
    struct fi_info *(*dupinfo)(const struct fi_info *);
    int (*fabric)(struct fi_fabric_attr *, struct fid_fabric **, void *);
    const char *(*strerror)(int);
};

extern struct usnic_ofi_dl usnic_ofi_dl;

/* Load libfabric and resolve the functions (once; later calls return the
 * first result).  False: not available, the reason logged at verbosity 5. */
bool usnic_ofi_dl_load(void);

#define fi_getinfo (*usnic_ofi_dl.getinfo)
#define fi_freeinfo (*usnic_ofi_dl.freeinfo)
#define fi_dupinfo (*usnic_ofi_dl.dupinfo)
#define fi_fabric (*usnic_ofi_dl.fabric)
#define fi_strerror (*usnic_ofi_dl.strerror)
/* the header's inline fi_allocinfo would call the library's fi_dupinfo */
#define fi_allocinfo() fi_dupinfo(NULL)

#endif /* BTL_USNIC_OFI_DL_H */
