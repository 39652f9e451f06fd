/* Registration table for emulated PUT (see btl_usnic_reg.h). */
#include <stdlib.h>
#include <string.h>

#include "btl_usnic_reg.h"

void usnic_reg_table_init(struct usnic_reg_table *t)
{
    memset(t, 0, sizeof(*t));
}

void usnic_reg_table_fini(struct usnic_reg_table *t)
{
    free(t->entries);
    memset(t, 0, sizeof(*t));
}

static int grow(struct usnic_reg_table *t)
{
    uint32_t ncap = t->cap ? t->cap * 2 : 64;
    struct usnic_reg_entry *n;

    if (ncap <= t->cap) {
        return -1;
    }
    n = realloc(t->entries, (size_t) ncap * sizeof(*n));
    if (NULL == n) {
        return -1;
    }
    memset(n + t->cap, 0, (size_t) (ncap - t->cap) * sizeof(*n));
    /* chain the new entries onto the free list, lowest index first */
    for (uint32_t i = ncap; i > t->cap; i--) {
        n[i - 1].next_free = t->free_head;
        n[i - 1].gen = 1;
        t->free_head = i;
    }
    t->entries = n;
    t->cap = ncap;
    return 0;
}

int usnic_reg_add(struct usnic_reg_table *t, uint64_t base, uint64_t len, uint64_t *key)
{
    struct usnic_reg_entry *e;
    uint32_t idx;

    if (0 == t->free_head && 0 != grow(t)) {
        return -1;
    }
    idx = t->free_head - 1;
    e = &t->entries[idx];
    t->free_head = e->next_free;
    e->next_free = 0;
    e->base = base;
    e->len = len;
    e->in_use = 1;
    t->count++;
    *key = ((uint64_t) e->gen << 32) | idx;
    return 0;
}

static struct usnic_reg_entry *lookup(const struct usnic_reg_table *t, uint64_t key)
{
    uint32_t idx = (uint32_t) (key & 0xffffffffu);
    uint32_t gen = (uint32_t) (key >> 32);

    if (idx >= t->cap || !t->entries[idx].in_use || t->entries[idx].gen != gen) {
        return NULL;
    }
    return &t->entries[idx];
}

int usnic_reg_remove(struct usnic_reg_table *t, uint64_t key)
{
    struct usnic_reg_entry *e = lookup(t, key);

    if (NULL == e) {
        return -1;
    }
    e->in_use = 0;
    e->gen = (e->gen + 1u) ? e->gen + 1u : 1u;
    e->next_free = t->free_head;
    t->free_head = (uint32_t) (e - t->entries) + 1u;
    t->count--;
    return 0;
}

enum usnic_drop_reason usnic_reg_resolve(const struct usnic_reg_table *t, uint64_t key,
                                         uint64_t reg_offset, uint64_t msg_len, uint8_t **dest)
{
    const struct usnic_reg_entry *e = lookup(t, key);

    if (NULL == e || reg_offset > e->len || msg_len > e->len - reg_offset) {
        return USNIC_DROP_PUT_RANGE;
    }
    *dest = (uint8_t *) (uintptr_t) (e->base + reg_offset);
    return USNIC_PKT_OK;
}
