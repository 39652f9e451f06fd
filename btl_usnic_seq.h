/*
 * Sequence numbers of the usnic reliability layer.
 *
 * A sequence number is 32 bits and wraps.  Two numbers are compared by the
 * sign of their 32-bit difference, which is correct as long as the numbers
 * being compared are less than 2^31 apart; every window in this component is
 * far smaller than that.  Never compare sequence numbers with a bare '<'.
 */
#ifndef BTL_USNIC_SEQ_H
#define BTL_USNIC_SEQ_H

#include <stdbool.h>
#include <stdint.h>

typedef uint32_t usnic_seq_t;

/* Signed distance from b to a: positive when a is after b. */
static inline int32_t usnic_seq_diff(usnic_seq_t a, usnic_seq_t b)
{
    return (int32_t) (a - b);
}

static inline bool usnic_seq_lt(usnic_seq_t a, usnic_seq_t b)
{
    return usnic_seq_diff(a, b) < 0;
}

static inline bool usnic_seq_le(usnic_seq_t a, usnic_seq_t b)
{
    return usnic_seq_diff(a, b) <= 0;
}

static inline bool usnic_seq_gt(usnic_seq_t a, usnic_seq_t b)
{
    return usnic_seq_diff(a, b) > 0;
}

static inline bool usnic_seq_ge(usnic_seq_t a, usnic_seq_t b)
{
    return usnic_seq_diff(a, b) >= 0;
}

#endif /* BTL_USNIC_SEQ_H */
