/*
 * libfabric, loaded on demand (btl_usnic_ofi_dl.h).
 *
 * The library file and the symbol versions come from configure, which
 * links a test program against libfabric and records what the linker
 * chose (USNIC_FI_LIBNAME, e.g. "libfabric.so.1", and USNIC_FI_SYMVERS,
 * e.g. "fi_getinfo@FABRIC_1.3,fi_fabric@FABRIC_1.1,...").  A versioned
 * lookup binds the same ABI a normal link would, even when a newer
 * libfabric later adds versions of these functions; a name without a
 * recorded version is looked up unversioned.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>

#include "btl_usnic.h"
#include "btl_usnic_ofi_dl.h"

#ifndef USNIC_FI_LIBNAME
#define USNIC_FI_LIBNAME "libfabric.so.1"
#endif
#ifndef USNIC_FI_SYMVERS
#define USNIC_FI_SYMVERS ""
#endif

struct usnic_ofi_dl usnic_ofi_dl;

/* the version configure recorded for NAME, into VER (empty: none) */
static void symver(const char *name, char *ver, size_t len)
{
    const char *p = USNIC_FI_SYMVERS, *end;
    size_t n = strlen(name);

    ver[0] = '\0';
    while (NULL != p && '\0' != *p) {
        end = strchr(p, ',');
        if (0 == strncmp(p, name, n) && '@' == p[n]) {
            size_t vlen = (NULL != end ? (size_t) (end - p) : strlen(p)) - n - 1;
            if (vlen < len) {
                memcpy(ver, p + n + 1, vlen);
                ver[vlen] = '\0';
            }
            return;
        }
        p = (NULL != end) ? end + 1 : NULL;
    }
}

static void *resolve(void *lib, const char *name)
{
    char ver[64];
    void *f = NULL;

    symver(name, ver, sizeof(ver));
    if ('\0' != ver[0]) {
        f = dlvsym(lib, name, ver);
    }
    if (NULL == f) {
        f = dlsym(lib, name);
    }
    if (NULL == f) {
        USNIC_VERBOSE(5, "%s: no symbol %s%s%s", USNIC_FI_LIBNAME, name, ver[0] ? "@" : "", ver);
    }
    return f;
}

bool usnic_ofi_dl_load(void)
{
    static int state; /* 0 not tried, 1 loaded, -1 not available */
    struct usnic_ofi_dl d;
    void *lib;

    if (0 != state) {
        return state > 0;
    }
    state = -1;
    /* never closed: providers and libfabric's own state stay until exit */
    lib = dlopen(USNIC_FI_LIBNAME, RTLD_NOW | RTLD_LOCAL);
    if (NULL == lib) {
        USNIC_VERBOSE(5, "cannot load %s: %s", USNIC_FI_LIBNAME, dlerror());
        return false;
    }
    d.getinfo = (int (*)(uint32_t, const char *, const char *, uint64_t, const struct fi_info *,
                         struct fi_info **)) resolve(lib, "fi_getinfo");
    d.freeinfo = (void (*)(struct fi_info *)) resolve(lib, "fi_freeinfo");
    d.dupinfo = (struct fi_info * (*) (const struct fi_info *) ) resolve(lib, "fi_dupinfo");
    d.fabric =
        (int (*)(struct fi_fabric_attr *, struct fid_fabric **, void *)) resolve(lib, "fi_fabric");
    d.strerror = (const char *(*) (int) ) resolve(lib, "fi_strerror");
    if (NULL == d.getinfo || NULL == d.freeinfo || NULL == d.dupinfo || NULL == d.fabric ||
        NULL == d.strerror) {
        return false;
    }
    usnic_ofi_dl = d;
    state = 1;
    USNIC_VERBOSE(20, "loaded %s (%s)", USNIC_FI_LIBNAME,
                  '\0' != USNIC_FI_SYMVERS[0] ? USNIC_FI_SYMVERS : "unversioned lookups");
    return true;
}
