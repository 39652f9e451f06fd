/* Registration table for emulated PUT (see btl_usnic_reg.h). */
#include <stdlib.h>
#include <string.h>

#include "btl_usnic_reg.h"

void usnic_reg_table_init(struct usnic_reg_table *t)
{
    memset(t, 0, sizeof(*t));
}

void usnic_reg_table_set_key(struct usnic_reg_table *t, const struct usnic_sip_key *secret)
{
    t->secret = *secret;
    t->keyed = true;
    t->last_key = usnic_reg_encipher(secret, 0); /* index 0 generation 0: never live */
    t->last_plain = 0;
}

/* Round function: 32 pseudorandom bits of (round, half) under the secret. */
static inline uint32_t feistel_f(const struct usnic_sip_key *k, uint32_t round, uint32_t half)
{
    const uint64_t in = ((uint64_t) round << 32) | half;
    return (uint32_t) usnic_siphash24(k, &in, sizeof(in));
}

#define USNIC_REG_ROUNDS 4

uint64_t usnic_reg_encipher(const struct usnic_sip_key *k, uint64_t x)
{
    uint32_t l = (uint32_t) (x >> 32), r = (uint32_t) x;

    for (uint32_t i = 0; i < USNIC_REG_ROUNDS; i++) {
        uint32_t n = l ^ feistel_f(k, i, r);
        l = r;
        r = n;
    }
    return ((uint64_t) l << 32) | r;
}

uint64_t usnic_reg_decipher(const struct usnic_sip_key *k, uint64_t y)
{
    uint32_t l = (uint32_t) (y >> 32), r = (uint32_t) y;

    for (uint32_t i = USNIC_REG_ROUNDS; i-- > 0;) {
        uint32_t p = r ^ feistel_f(k, i, l);
        r = l;
        l = p;
    }
    return ((uint64_t) l << 32) | r;
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
    if (t->keyed) {
        *key = usnic_reg_encipher(&t->secret, *key);
    }
    return 0;
}

/* The plain (generation << 32 | index) of a key. */
static uint64_t plain_of(struct usnic_reg_table *t, uint64_t key)
{
    if (!t->keyed) {
        return key;
    }
    if (key != t->last_key) {
        t->last_plain = usnic_reg_decipher(&t->secret, key);
        t->last_key = key;
    }
    return t->last_plain;
}

static struct usnic_reg_entry *lookup(struct usnic_reg_table *t, uint64_t enc)
{
    uint64_t key = plain_of(t, enc);
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

enum usnic_drop_reason usnic_reg_resolve(struct usnic_reg_table *t, uint64_t key,
                                         uint64_t reg_offset, uint64_t msg_len, uint8_t **dest)
{
    const struct usnic_reg_entry *e = lookup(t, key);

    if (NULL == e || reg_offset > e->len || msg_len > e->len - reg_offset) {
        return USNIC_DROP_PUT_RANGE;
    }
    *dest = (uint8_t *) (uintptr_t) (e->base + reg_offset);
    return USNIC_PKT_OK;
}
