/*
 * Registrations for emulated PUT.
 *
 * The PML registers a buffer before it lets a peer PUT into it.  We keep
 * (base, length) in a table and hand out a 64-bit key: the slot's index
 * (low 32 bits) and generation (high 32 bits), so a key stays invalid after
 * its region is deregistered even when the slot is reused, and then,
 * once the table has a secret (usnic_reg_table_set_key()), enciphered with
 * a keyed permutation of 64-bit numbers (a four-round Feistel network whose
 * round function is SipHash-2-4 under that secret): keys look random, and
 * nobody without the secret can name a live registration but by chance
 * (live registrations / 2^64).  Arriving PUTs name (key, offset, length);
 * usnic_reg_resolve() deciphers the key and checks the whole range lies
 * inside a live registration before any byte is written.
 */
#ifndef BTL_USNIC_REG_H
#define BTL_USNIC_REG_H

#include <stdbool.h>
#include <stdint.h>

#include "btl_usnic_auth.h"
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
    bool keyed;         /* keys are enciphered under `secret` */
    struct usnic_sip_key secret;
    uint64_t last_key;   /* the last key deciphered (the chunks of one PUT share it), */
    uint64_t last_plain; /* and what it deciphered to */
};

void usnic_reg_table_init(struct usnic_reg_table *t);
void usnic_reg_table_fini(struct usnic_reg_table *t);
/* From now on, hand out enciphered keys (call before the first usnic_reg_add()). */
void usnic_reg_table_set_key(struct usnic_reg_table *t, const struct usnic_sip_key *secret);

/* The keyed permutation itself (exposed for its unit test). */
uint64_t usnic_reg_encipher(const struct usnic_sip_key *k, uint64_t x);
uint64_t usnic_reg_decipher(const struct usnic_sip_key *k, uint64_t y);

/* Returns 0 and the key, or -1 when out of memory. */
int usnic_reg_add(struct usnic_reg_table *t, uint64_t base, uint64_t len, uint64_t *key);
/* Returns 0, or -1 if the key is not live. */
int usnic_reg_remove(struct usnic_reg_table *t, uint64_t key);

/*
 * Where a PUT of msg_len bytes at reg_offset into registration key lands:
 * returns USNIC_PKT_OK and *dest = base + reg_offset, or USNIC_DROP_PUT_RANGE.
 */
enum usnic_drop_reason usnic_reg_resolve(struct usnic_reg_table *t, uint64_t key,
                                         uint64_t reg_offset, uint64_t msg_len, uint8_t **dest);

#endif /* BTL_USNIC_REG_H */
