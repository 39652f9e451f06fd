/*
 * Registrations for emulated PUT.
 *
 * The PML registers a buffer before it lets a peer PUT into it.  We keep
 * (base, length) in a table and hand out a 64-bit key: slot index in the low
 * 32 bits, the slot's generation in the high 32 bits, so a key stays invalid
 * after its region is deregistered even when the slot is reused.  Arriving
 * PUTs name (key, offset, length); usnic_reg_resolve() checks the whole
 * range lies inside a live registration before any byte is written.
 */
#ifndef BTL_USNIC_REG_H
#define BTL_USNIC_REG_H

#include <stdint.h>

#include "btl_usnic_proto.h"

struct usnic_reg_entry {
    uint64_t base;
    uint64_t len;
    uint32_t gen;       /* bumped on every release; part of the key */
    uint32_t next_free; /* free-list link (index + 1), 0 = end */
    uint32_t in_use;
};

struct usnic_reg_table {
    struct usnic_reg_entry *entries;
    uint32_t cap;
    uint32_t free_head; /* index + 1 of the first free entry, 0 = none */
    uint32_t count;     /* live registrations */
};

void usnic_reg_table_init(struct usnic_reg_table *t);
void usnic_reg_table_fini(struct usnic_reg_table *t);

/* Returns 0 and the key, or -1 when out of memory. */
int usnic_reg_add(struct usnic_reg_table *t, uint64_t base, uint64_t len, uint64_t *key);
/* Returns 0, or -1 if the key is not live. */
int usnic_reg_remove(struct usnic_reg_table *t, uint64_t key);

/*
 * Where a PUT of msg_len bytes at reg_offset into registration key lands:
 * returns USNIC_PKT_OK and *dest = base + reg_offset, or USNIC_DROP_PUT_RANGE.
 */
enum usnic_drop_reason usnic_reg_resolve(const struct usnic_reg_table *t, uint64_t key,
                                         uint64_t reg_offset, uint64_t msg_len, uint8_t **dest);

#endif /* BTL_USNIC_REG_H */
