/*
 * dtstress: randomised, seeded data-integrity stress test for derived
 * datatypes, meant to run under injected packet loss.
 *
 * Ranks are paired (0,1), (2,3), ...  Every iteration both ranks of a pair
 * exchange 1 to -k messages in each direction at once (Irecv + Isend, then
 * Waitall; several messages in flight interleave their fragments).  Every
 * message is a "case": a signature unit (one basic type, or a short mix of
 * basic types), a number of units, and two independently generated
 * layouts, one for the sender and one for the receiver, both made of that
 * unit so that the MPI match is legal.  Layouts are random trees of
 * contiguous, vector, hvector, indexed, hindexed, indexed_block,
 * hindexed_block, struct (gaps, out-of-memory-order blocks, mixed basic
 * types) and resized types, nested up to -d levels over a leaf that is
 * itself a basic type or a struct of basic types with gaps.
 *
 * Message sizes are picked around the transport's boundaries (option -b,
 * e.g. datagram payloads and fragment limits): k*B-1, k*B, k*B+1, the same
 * minus typical PML header sizes, small random offsets, and random sizes up
 * to -M bytes.
 *
 * Checking: the sender fills its whole buffer (gaps included) with a
 * pattern of (seed, iteration, message, sender); the receiver poisons its
 * whole buffer (gaps, extra receive capacity and guard areas before and
 * after) with a per-message poison byte.  After completion the receiver
 * rebuilds the sender's buffer, MPI_Packs it with the sender's type
 * (MPI_COMM_SELF) and MPI_Unpacks that into a poisoned image with its
 * receive type; every byte of the receive allocation must equal that
 * image.  The image is cross-checked against an independent model of the
 * type maps (a walk of the generated type trees), so a test bug or a
 * datatype-engine bug in plain pack/unpack is reported as such.
 *
 * All cases derive from the 64-bit seed and the iteration number only, so
 * one iteration (or one message of it) can be rerun alone: the error
 * report prints the command.
 *
 * Options:
 *   -s SEED    64-bit seed (decimal or 0x...; default: from the clock)
 *   -n N       number of iterations (default 50, unlimited with -t)
 *   -t SECS    time budget: no new iteration starts after SECS seconds
 *   -f FIRST   first iteration number (default 0)
 *   -R REP     run every iteration REP times (default 1)
 *   -o MSG     run only message MSG of each iteration (both directions)
 *   -M BYTES   largest message (default 4194304)
 *   -b LIST    comma-separated boundary sizes in bytes
 *              (default 512,65443,65451,65459,65475,150000,300000,4194304)
 *   -d DEPTH   maximum nesting of constructors above the leaf (default 3)
 *   -k K       at most K messages in flight per direction (default 4)
 *   -W SECS    watchdog: an iteration still incomplete after SECS seconds
 *              is reported (pending requests, cases, command) and the job
 *              aborted (default 60; 0 = never)
 *   -v         print every case (rank 0)
 *
 * A crash (SIGSEGV, SIGBUS, SIGFPE) prints the current iteration's cases and
 * command before Open MPI's backtrace.
 */
#include "mpitest.h"

#include <limits.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

/* ---- options ------------------------------------------------------------ */

#define MAX_BOUNDS 32
#define MAX_MSGS 8

static uint64_t opt_seed;
static long opt_iters = -1;
static double opt_time = -1;
static long opt_first;
static int opt_rep = 1;
static int opt_only = -1;
static size_t opt_max = 4194304;
static size_t bounds[MAX_BOUNDS] = {512, 65443, 65451, 65459, 65475, 150000, 300000, 4194304};
static int nbounds = 8;
static char opt_bounds_str[512] = "512,65443,65451,65459,65475,150000,300000,4194304";
static int opt_depth = 3;
static int opt_k = 4;
static int opt_verbose;
static double opt_watch = 60;

/* ---- random numbers -------------------------------------------------------- */

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

typedef struct {
    uint64_t s;
} rng_t;

static uint64_t rnd(rng_t *r)
{
    r->s += 0x9E3779B97F4A7C15ull;
    return mix64(r->s);
}

/* uniform in [0, n) (n == 0: 0) */
static uint64_t below(rng_t *r, uint64_t n)
{
    return n ? rnd(r) % n : 0;
}

/* uniform in [lo, hi] */
static int64_t range(rng_t *r, int64_t lo, int64_t hi)
{
    return hi <= lo ? lo : lo + (int64_t) below(r, (uint64_t) (hi - lo) + 1);
}

static int chance(rng_t *r, double p)
{
    return (double) (rnd(r) >> 11) * (1.0 / 9007199254740992.0) < p;
}

/* Send-buffer pattern: byte i of the buffer of `seed`. */
static uint64_t pat_word(uint64_t seed, uint64_t w)
{
    return mix64(seed ^ mix64(w + 0x632BE59BD9B4E019ull));
}

static void pat_fill(uint8_t *p, size_t n, uint64_t seed)
{
    size_t w;
    for (w = 0; w + 8 <= n; w += 8) {
        uint64_t v = pat_word(seed, w / 8);
        memcpy(p + w, &v, 8);
    }
    if (w < n) {
        uint64_t v = pat_word(seed, w / 8);
        memcpy(p + w, &v, n - w);
    }
}

/* ---- basic types and signature units --------------------------------------- */

enum {
    B_CHAR,
    B_SHORT,
    B_INT,
    B_FLOAT,
    B_DOUBLE,
    B_LLONG,
    NBASIC
};

static const char *basic_name[NBASIC] = {"char", "short", "int", "float", "double", "long long"};
static const int basic_size[NBASIC] = {1, 2, 4, 4, 8, 8};

static MPI_Datatype basic_type(int b)
{
    switch (b) {
    case B_CHAR:
        return MPI_CHAR;
    case B_SHORT:
        return MPI_SHORT;
    case B_INT:
        return MPI_INT;
    case B_FLOAT:
        return MPI_FLOAT;
    case B_DOUBLE:
        return MPI_DOUBLE;
    default:
        return MPI_LONG_LONG;
    }
}

/* A unit is the signature every layout of a case is made of (repeated). */
#define MAX_UNIT 5
typedef struct {
    int len;
    int b[MAX_UNIT];
} unit_t;

static const unit_t units[] = {
    {1, {B_CHAR}},
    {1, {B_INT}},
    {1, {B_DOUBLE}},
    {1, {B_SHORT}},
    {1, {B_FLOAT}},
    {5, {B_INT, B_DOUBLE, B_CHAR, B_CHAR, B_CHAR}},
    {3, {B_SHORT, B_INT, B_CHAR}},
    {2, {B_DOUBLE, B_LLONG}},
};
#define NUNITS ((int) (sizeof(units) / sizeof(units[0])))

static int unit_size(int u)
{
    int s = 0;
    for (int i = 0; i < units[u].len; i++) {
        s += basic_size[units[u].b[i]];
    }
    return s;
}

static int unit_align(int u)
{
    int a = 1;
    for (int i = 0; i < units[u].len; i++) {
        if (basic_size[units[u].b[i]] > a) {
            a = basic_size[units[u].b[i]];
        }
    }
    return a;
}

static void unit_name(int u, char *out, size_t n)
{
    size_t len = 0;
    out[0] = 0;
    for (int i = 0; i < units[u].len && len < n; i++) {
        len +=
            (size_t) snprintf(out + len, n - len, "%s%s", i ? "," : "", basic_name[units[u].b[i]]);
    }
}

/* ---- type trees ------------------------------------------------------------ */

enum kind {
    K_BASIC,
    K_CONTIG,
    K_VECTOR,
    K_HVECTOR,
    K_INDEXED,
    K_HINDEXED,
    K_IBLOCK,
    K_HIBLOCK,
    K_STRUCT,
    K_RESIZED
};

static const char *kind_name[] = {"basic",   "contiguous", "vector",        "hvector",
                                  "indexed", "hindexed",   "indexed_block", "hindexed_block",
                                  "struct",  "resized"};
#define NKINDS 10

typedef struct node {
    enum kind kind;
    int basic;          /* K_BASIC */
    int count;          /* contiguous/vector/hvector count; number of blocks otherwise */
    int blen;           /* vector, hvector, (h)indexed_block */
    MPI_Aint stride;    /* vector: child extents; hvector: bytes */
    int *blens;         /* (h)indexed, struct */
    MPI_Aint *disp;     /* indexed, indexed_block: child extents; others: bytes */
    struct node **kid;  /* struct: one per block; others: kid[0] */
    MPI_Aint rlb, rext; /* K_RESIZED */
    MPI_Datatype type;
    MPI_Aint lb, ext, tlb, tub; /* MPI lower bound/extent; model true bounds */
    uint64_t units;             /* signature units per instance */
    uint64_t size;              /* bytes per instance */
    int depth;                  /* constructors above the basic types */
} node;

/* Counts of the generated constructors, for the coverage summary. */
static uint64_t kind_used[NKINDS];
static int cur_unit; /* unit of the case being generated */

static void node_free(node *nd)
{
    if (nd == NULL) {
        return;
    }
    int nk = nd->kind == K_STRUCT ? nd->count : (nd->kind == K_BASIC ? 0 : 1);
    for (int i = 0; i < nk; i++) {
        node_free(nd->kid[i]);
    }
    if (nd->kind != K_BASIC && nd->type != MPI_DATATYPE_NULL) {
        MT_CHECK(MPI_Type_free(&nd->type));
    }
    free(nd->kid);
    free(nd->blens);
    free(nd->disp);
    free(nd);
}

static node *node_new(enum kind k)
{
    node *nd = mt_malloc(sizeof(*nd));
    nd->kind = k;
    nd->type = MPI_DATATYPE_NULL;
    kind_used[k]++;
    return nd;
}

/* ---- descriptions ---------------------------------------------------------- */

typedef struct {
    char *s;
    size_t len, cap;
} sbuf_t;

static void sb_printf(sbuf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf_t *b, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        size_t room = b->cap - b->len;
        va_start(ap, fmt);
        int n = b->s ? vsnprintf(b->s + b->len, room, fmt, ap) : -2;
        va_end(ap);
        if (n >= 0 && (size_t) n < room) {
            b->len += (size_t) n;
            return;
        }
        b->cap = b->cap * 2 + (n > 0 ? (size_t) n : 0) + 256;
        b->s = realloc(b->s, b->cap);
        if (b->s == NULL) {
            mt_die("out of memory");
        }
    }
}

#define DESC_MAX_LIST 12

static void describe(const node *nd, sbuf_t *b);

static void desc_ints(sbuf_t *b, const char *name, const int *v, int n)
{
    sb_printf(b, "%s={", name);
    for (int i = 0; i < n && i < DESC_MAX_LIST; i++) {
        sb_printf(b, "%s%d", i ? "," : "", v[i]);
    }
    if (n > DESC_MAX_LIST) {
        sb_printf(b, ",...%d more", n - DESC_MAX_LIST);
    }
    sb_printf(b, "}");
}

static void desc_aints(sbuf_t *b, const char *name, const MPI_Aint *v, int n)
{
    sb_printf(b, "%s={", name);
    for (int i = 0; i < n && i < DESC_MAX_LIST; i++) {
        sb_printf(b, "%s%ld", i ? "," : "", (long) v[i]);
    }
    if (n > DESC_MAX_LIST) {
        sb_printf(b, ",...%d more", n - DESC_MAX_LIST);
    }
    sb_printf(b, "}");
}

static void describe(const node *nd, sbuf_t *b)
{
    switch (nd->kind) {
    case K_BASIC:
        sb_printf(b, "%s", basic_name[nd->basic]);
        return;
    case K_CONTIG:
        sb_printf(b, "contiguous(%d, ", nd->count);
        break;
    case K_VECTOR:
        sb_printf(b, "vector(count=%d, blen=%d, stride=%ld, ", nd->count, nd->blen,
                  (long) nd->stride);
        break;
    case K_HVECTOR:
        sb_printf(b, "hvector(count=%d, blen=%d, stride=%ldB, ", nd->count, nd->blen,
                  (long) nd->stride);
        break;
    case K_INDEXED:
    case K_HINDEXED:
        sb_printf(b, "%s(%d, ", kind_name[nd->kind], nd->count);
        desc_ints(b, "blens", nd->blens, nd->count);
        sb_printf(b, ", ");
        desc_aints(b, nd->kind == K_INDEXED ? "displs" : "displsB", nd->disp, nd->count);
        sb_printf(b, ", ");
        break;
    case K_IBLOCK:
    case K_HIBLOCK:
        sb_printf(b, "%s(%d, blen=%d, ", kind_name[nd->kind], nd->count, nd->blen);
        desc_aints(b, nd->kind == K_IBLOCK ? "displs" : "displsB", nd->disp, nd->count);
        sb_printf(b, ", ");
        break;
    case K_STRUCT:
        sb_printf(b, "struct(%d, ", nd->count);
        desc_ints(b, "blens", nd->blens, nd->count);
        sb_printf(b, ", ");
        desc_aints(b, "displsB", nd->disp, nd->count);
        sb_printf(b, ", types={");
        for (int i = 0; i < nd->count; i++) {
            if (i) {
                sb_printf(b, ", ");
            }
            describe(nd->kid[i], b);
        }
        sb_printf(b, "})");
        return;
    case K_RESIZED:
        sb_printf(b, "resized(lb=%ld, extent=%ld, ", (long) nd->rlb, (long) nd->rext);
        break;
    }
    describe(nd->kid[0], b);
    sb_printf(b, ")");
}

/* ---- building types -------------------------------------------------------- */

static void bounds_add(MPI_Aint *lo, MPI_Aint *hi, int *any, MPI_Aint a, MPI_Aint b)
{
    if (!*any || a < *lo) {
        *lo = a;
    }
    if (!*any || b > *hi) {
        *hi = b;
    }
    *any = 1;
}

/*
 * Create the MPI type of nd (its children exist), query its extents,
 * compute the model's true bounds and compare them with MPI's; free the
 * children's MPI types (the parent keeps what it needs).
 */
static void node_finish(node *nd)
{
    node *k = nd->kind == K_BASIC ? NULL : nd->kid[0];
    MPI_Aint lo = 0, hi = 0;
    int any = 0;
    int *idisp = NULL;

    switch (nd->kind) {
    case K_BASIC:
        nd->type = basic_type(nd->basic);
        nd->units = 0; /* set by the caller */
        nd->size = (uint64_t) basic_size[nd->basic];
        lo = 0;
        hi = basic_size[nd->basic];
        nd->depth = 0;
        break;
    case K_CONTIG:
        MT_CHECK(MPI_Type_contiguous(nd->count, k->type, &nd->type));
        bounds_add(&lo, &hi, &any, k->tlb, k->tub);
        bounds_add(&lo, &hi, &any, (nd->count - 1) * k->ext + k->tlb,
                   (nd->count - 1) * k->ext + k->tub);
        nd->units = k->units * (uint64_t) nd->count;
        break;
    case K_VECTOR:
    case K_HVECTOR: {
        MPI_Aint bstride = nd->kind == K_VECTOR ? nd->stride * k->ext : nd->stride;
        if (nd->kind == K_VECTOR) {
            MT_CHECK(MPI_Type_vector(nd->count, nd->blen, (int) nd->stride, k->type, &nd->type));
        } else {
            MT_CHECK(MPI_Type_create_hvector(nd->count, nd->blen, nd->stride, k->type, &nd->type));
        }
        for (int i = 0; i < nd->count; i += (nd->count > 1 ? nd->count - 1 : 1)) {
            MPI_Aint p = i * bstride;
            bounds_add(&lo, &hi, &any, p + k->tlb, p + (nd->blen - 1) * k->ext + k->tub);
        }
        nd->units = k->units * (uint64_t) nd->count * (uint64_t) nd->blen;
        break;
    }
    case K_INDEXED:
    case K_HINDEXED:
    case K_IBLOCK:
    case K_HIBLOCK:
    case K_STRUCT: {
        int ext_units = nd->kind == K_INDEXED || nd->kind == K_IBLOCK;
        int block = nd->kind == K_IBLOCK || nd->kind == K_HIBLOCK;
        nd->units = 0;
        for (int i = 0; i < nd->count; i++) {
            node *c = nd->kind == K_STRUCT ? nd->kid[i] : k;
            int bl = block ? nd->blen : nd->blens[i];
            MPI_Aint p = ext_units ? nd->disp[i] * c->ext : nd->disp[i];
            bounds_add(&lo, &hi, &any, p + c->tlb, p + (bl - 1) * c->ext + c->tub);
            nd->units += c->units * (uint64_t) bl;
        }
        if (ext_units) {
            idisp = mt_malloc(sizeof(int) * (size_t) nd->count);
            for (int i = 0; i < nd->count; i++) {
                idisp[i] = (int) nd->disp[i];
            }
        }
        if (nd->kind == K_INDEXED) {
            MT_CHECK(MPI_Type_indexed(nd->count, nd->blens, idisp, k->type, &nd->type));
        } else if (nd->kind == K_HINDEXED) {
            MT_CHECK(MPI_Type_create_hindexed(nd->count, nd->blens, nd->disp, k->type, &nd->type));
        } else if (nd->kind == K_IBLOCK) {
            MT_CHECK(MPI_Type_create_indexed_block(nd->count, nd->blen, idisp, k->type, &nd->type));
        } else if (nd->kind == K_HIBLOCK) {
            MT_CHECK(
                MPI_Type_create_hindexed_block(nd->count, nd->blen, nd->disp, k->type, &nd->type));
        } else {
            MPI_Datatype *tys = mt_malloc(sizeof(MPI_Datatype) * (size_t) nd->count);
            for (int i = 0; i < nd->count; i++) {
                tys[i] = nd->kid[i]->type;
            }
            MT_CHECK(MPI_Type_create_struct(nd->count, nd->blens, nd->disp, tys, &nd->type));
            free(tys);
        }
        free(idisp);
        break;
    }
    case K_RESIZED:
        MT_CHECK(MPI_Type_create_resized(k->type, nd->rlb, nd->rext, &nd->type));
        lo = k->tlb;
        hi = k->tub;
        nd->units = k->units;
        break;
    }

    if (nd->kind != K_BASIC) {
        int nk = nd->kind == K_STRUCT ? nd->count : 1;
        int size;
        nd->depth = 0;
        for (int i = 0; i < nk; i++) {
            if (nd->kid[i]->depth + 1 > nd->depth) {
                nd->depth = nd->kid[i]->depth + 1;
            }
        }
        MT_CHECK(MPI_Type_size(nd->type, &size));
        nd->size = (uint64_t) size;
    }
    MPI_Aint tlb, text;
    MT_CHECK(MPI_Type_get_extent(nd->type, &nd->lb, &nd->ext));
    MT_CHECK(MPI_Type_get_true_extent(nd->type, &tlb, &text));
    nd->tlb = lo;
    nd->tub = hi;
    if (tlb != lo || tlb + text != hi) {
        sbuf_t b = {0};
        describe(nd, &b);
        mt_die("test bug or MPI bug: true extent of %s is [%ld, %ld) by MPI, [%ld, %ld) by the "
               "model",
               b.s, (long) tlb, (long) (tlb + text), (long) lo, (long) hi);
    }
    /* the children's handles are no longer needed */
    if (nd->kind != K_BASIC) {
        int nk = nd->kind == K_STRUCT ? nd->count : 1;
        for (int i = 0; i < nk; i++) {
            if (nd->kid[i]->kind != K_BASIC && nd->kid[i]->type != MPI_DATATYPE_NULL) {
                MT_CHECK(MPI_Type_free(&nd->kid[i]->type));
            }
        }
    }
}

static node *mk_basic(int b)
{
    node *nd = node_new(K_BASIC);
    nd->basic = b;
    node_finish(nd);
    nd->units = 0;
    return nd;
}

/* resized type around kid: instances placed at multiples of the new extent
 * never overlap (extent >= true span); the lower bound is anywhere */
static node *mk_resized(rng_t *r, node *kid, int align)
{
    node *nd = node_new(K_RESIZED);
    MPI_Aint span = kid->tub - kid->tlb;
    MPI_Aint pad = chance(r, 0.4) ? 0 : range(r, 1, 4) * align;
    nd->kid = mt_malloc(sizeof(node *));
    nd->kid[0] = kid;
    switch (below(r, 4)) {
    case 0: /* lower bound 0, data starting later (a leading gap) */
        nd->rlb = kid->tlb >= 0 ? 0 : kid->tlb;
        nd->rext = kid->tub - nd->rlb + pad;
        break;
    case 1: /* lower bound below the data */
        nd->rlb = kid->tlb - range(r, 0, 4) * align;
        nd->rext = kid->tub - nd->rlb + pad;
        break;
    case 2: /* lower bound inside/after the data start: true lb < lb */
        nd->rlb = kid->tlb + range(r, 0, span);
        nd->rext = span + pad;
        break;
    default: /* exactly the true extent */
        nd->rlb = kid->tlb;
        nd->rext = span;
        break;
    }
    node_finish(nd);
    return nd;
}

/* nodes placed at multiples of their extent must not overlap */
static node *tileable(rng_t *r, node *kid, int align)
{
    if (kid->ext >= kid->tub - kid->tlb && kid->ext > 0) {
        return kid;
    }
    node *nd = node_new(K_RESIZED);
    nd->kid = mt_malloc(sizeof(node *));
    nd->kid[0] = kid;
    nd->rlb = kid->tlb;
    nd->rext = kid->tub - kid->tlb + (chance(r, 0.5) ? 0 : align);
    node_finish(nd);
    return nd;
}

/* a random divisor of n that is <= lim (1 if none else) */
static uint64_t pick_divisor(rng_t *r, uint64_t n, uint64_t lim)
{
    uint64_t d[2048];
    int nd = 0;
    for (uint64_t i = 1; i * i <= n && nd < 2046; i++) {
        if (n % i == 0) {
            if (i <= lim) {
                d[nd++] = i;
            }
            if (i != n / i && n / i <= lim) {
                d[nd++] = n / i;
            }
        }
    }
    return nd ? d[below(r, (uint64_t) nd)] : 1;
}

/* random composition of k into nb positive parts */
static void compose(rng_t *r, uint64_t k, int nb, int *parts)
{
    uint64_t left = k;
    for (int i = 0; i < nb; i++) {
        uint64_t rest = (uint64_t) (nb - i - 1);
        uint64_t p;
        if (rest == 0) {
            p = left;
        } else if (chance(r, 0.5)) {
            p = 1 + below(r, left - rest); /* uniform */
        } else {
            p = 1 + below(r, (left - rest + 1) / 2 + 1); /* smaller */
            if (p > left - rest) {
                p = left - rest;
            }
        }
        parts[i] = (int) p;
        left -= p;
    }
}

/* listing order of blocks laid out in memory order: identity, reversed,
 * shuffled, or neighbours swapped */
static void permutation(rng_t *r, int n, int *perm)
{
    int mode = (int) below(r, 4);
    for (int i = 0; i < n; i++) {
        perm[i] = mode == 1 ? n - 1 - i : i;
    }
    if (mode == 2) {
        for (int i = n - 1; i > 0; i--) {
            int j = (int) below(r, (uint64_t) i + 1), t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
    } else if (mode == 3) {
        for (int i = 0; i + 1 < n; i += 2) {
            int t = perm[i];
            perm[i] = perm[i + 1];
            perm[i + 1] = t;
        }
    }
}

static MPI_Aint align_up(MPI_Aint v, int a)
{
    MPI_Aint m = ((v % a) + a) % a;
    return m ? v + (a - m) : v;
}

/* gap between blocks, in bytes, for a block of `fp` bytes */
static MPI_Aint gap_bytes(rng_t *r, MPI_Aint fp, int align)
{
    switch (below(r, 3)) {
    case 0:
        return 0;
    case 1:
        return range(r, 1, 4) * align;
    default:
        return align_up(range(r, 1, fp < 65536 ? fp : 65536), align);
    }
}

/* gap in child extents for a block of b instances */
static int gap_units(rng_t *r, int b)
{
    switch (below(r, 3)) {
    case 0:
        return 0;
    case 1:
        return (int) range(r, 1, 3);
    default:
        return (int) range(r, 1, b < 4096 ? b : 4096);
    }
}

/*
 * Place blocks of b[i] instances of kids[i] in memory (in a random memory
 * order, with gaps) and list them in another order.  disp: bytes, or child
 * extents if in_extents (then all kids are the same node).
 */
static void layout_blocks(rng_t *r, int nb, node **kids, const int *b, int in_extents, int align,
                          MPI_Aint *disp, int *order)
{
    int *mem = mt_malloc(sizeof(int) * (size_t) nb);
    MPI_Aint cur;
    permutation(r, nb, mem); /* mem[j] = block that is j-th in memory */
    if (in_extents) {
        cur = range(r, 0, 3);
        for (int j = 0; j < nb; j++) {
            int i = mem[j];
            cur += gap_units(r, b[i]);
            disp[i] = cur;
            cur += b[i];
        }
        if (chance(r, 0.15)) { /* negative displacements */
            MPI_Aint shift = range(r, 1, cur);
            for (int i = 0; i < nb; i++) {
                disp[i] -= shift;
            }
        }
    } else {
        cur = range(r, 0, 3) * align;
        for (int j = 0; j < nb; j++) {
            int i = mem[j];
            node *k = kids[i];
            MPI_Aint fp = (b[i] - 1) * k->ext + k->tub - k->tlb;
            cur += gap_bytes(r, fp, align);
            disp[i] = align_up(cur - k->tlb, align);
            cur = disp[i] + (b[i] - 1) * k->ext + k->tub;
        }
        if (chance(r, 0.15)) {
            MPI_Aint shift = align_up(range(r, 1, cur), align);
            for (int i = 0; i < nb; i++) {
                disp[i] -= shift;
            }
        }
    }
    permutation(r, nb, order); /* listing order */
    free(mem);
}

/* apply a listing order to parallel arrays */
static void reorder(int nb, const int *order, int *b, MPI_Aint *disp, node **kids)
{
    int *tb = mt_malloc(sizeof(int) * (size_t) nb);
    MPI_Aint *td = mt_malloc(sizeof(MPI_Aint) * (size_t) nb);
    node **tk = kids ? mt_malloc(sizeof(node *) * (size_t) nb) : NULL;
    for (int i = 0; i < nb; i++) {
        tb[i] = b ? b[order[i]] : 0;
        td[i] = disp[order[i]];
        if (kids) {
            tk[i] = kids[order[i]];
        }
    }
    for (int i = 0; i < nb; i++) {
        if (b) {
            b[i] = tb[i];
        }
        disp[i] = td[i];
        if (kids) {
            kids[i] = tk[i];
        }
    }
    free(tb);
    free(td);
    free(tk);
}

/* Leaf: a struct of m units of basic elements at scattered offsets. */
static node *mk_unit_struct(rng_t *r, int m)
{
    const unit_t *U = &units[cur_unit];
    int ne = m * U->len, nb = 0;
    int *bt = mt_malloc(sizeof(int) * (size_t) ne), *bl = mt_malloc(sizeof(int) * (size_t) ne);
    int misalign = chance(r, 0.1);
    for (int e = 0; e < ne; e++) {
        int b = U->b[e % U->len];
        if (nb > 0 && bt[nb - 1] == b && chance(r, 0.6)) {
            bl[nb - 1]++;
        } else {
            bt[nb] = b;
            bl[nb] = 1;
            nb++;
        }
    }
    node *nd = node_new(K_STRUCT);
    nd->count = nb;
    nd->blens = bl;
    nd->disp = mt_malloc(sizeof(MPI_Aint) * (size_t) nb);
    nd->kid = mt_malloc(sizeof(node *) * (size_t) nb);
    int *mem = mt_malloc(sizeof(int) * (size_t) nb);
    permutation(r, nb, mem);
    MPI_Aint cur = range(r, 0, 2) * 4;
    for (int j = 0; j < nb; j++) {
        int i = mem[j], es = basic_size[bt[i]];
        if (chance(r, 0.5)) {
            cur += range(r, 1, 3) * (misalign ? 1 : es);
        }
        nd->disp[i] = misalign ? cur : align_up(cur, es);
        cur = nd->disp[i] + (MPI_Aint) bl[i] * es;
    }
    for (int i = 0; i < nb; i++) {
        nd->kid[i] = mk_basic(bt[i]);
    }
    free(mem);
    free(bt);
    node_finish(nd);
    nd->units = (uint64_t) m;
    if (chance(r, 0.75)) {
        nd = mk_resized(r, nd, misalign ? 1 : unit_align(cur_unit));
        nd->units = (uint64_t) m;
    }
    return nd;
}

/* A leaf of m units: the basic type itself or a struct of basic types.
 * Basic types inside a unit struct count 0 units; the leaf counts m. */
static node *mk_leaf(rng_t *r, uint64_t m)
{
    if (units[cur_unit].len == 1 && m == 1 && chance(r, 0.7)) {
        node *nd = mk_basic(units[cur_unit].b[0]);
        nd->units = 1;
        return nd;
    }
    return mk_unit_struct(r, (int) m);
}

static node *make(rng_t *r, uint64_t n, int depth);

/* arrange k instances of kid (kid already built) with constructor kind */
static node *arrange(rng_t *r, int kind, node *kid, uint64_t k)
{
    int align = chance(r, 0.1) ? 1 : unit_align(cur_unit);
    node *nd;
    if (k == 1 && kind != K_CONTIG && kind != K_RESIZED && chance(r, 0.5)) {
        return kid;
    }
    kid = tileable(r, kid, align);
    uint64_t ibl = 0; /* (h)indexed_block: block length, at most 4096 blocks */
    if (kind == K_IBLOCK || kind == K_HIBLOCK) {
        for (int tries = 0; tries < 8 && (ibl == 0 || k / ibl > 4096); tries++) {
            ibl = pick_divisor(r, k, k);
        }
        if (k / ibl > 4096) {
            kind = K_VECTOR;
        }
    }
    nd = node_new((enum kind) kind);
    nd->kid = mt_malloc(sizeof(node *));
    nd->kid[0] = kid;
    switch (kind) {
    case K_CONTIG:
        nd->count = (int) k;
        break;
    case K_VECTOR:
    case K_HVECTOR: {
        uint64_t bl = pick_divisor(r, k, k);
        nd->blen = (int) bl;
        nd->count = (int) (k / bl);
        if (kind == K_VECTOR) {
            nd->stride = (MPI_Aint) bl + gap_units(r, (int) bl);
        } else {
            MPI_Aint fp = (nd->blen - 1) * kid->ext + kid->tub - kid->tlb;
            nd->stride = align_up(fp + gap_bytes(r, fp, align), align);
        }
        /* negative strides, but never with adjacent blocks: Open MPI 4.1.4
         * packs vector(4, 1, -1, MPI_CHAR) as bytes 0,1,2,3 (not 0,-1,-2,-3) */
        if (nd->count > 1 && chance(r, 0.15)) {
            MPI_Aint fp =
                kind == K_VECTOR ? nd->blen : (nd->blen - 1) * kid->ext + kid->tub - kid->tlb;
            nd->stride = -(nd->stride > fp ? nd->stride : nd->stride + align);
        }
        break;
    }
    case K_INDEXED:
    case K_HINDEXED: {
        int nb = (int) range(r, 1, k < 40 ? (int64_t) k : 40);
        int *order = mt_malloc(sizeof(int) * (size_t) nb);
        node **kids = mt_malloc(sizeof(node *) * (size_t) nb);
        for (int i = 0; i < nb; i++) {
            kids[i] = kid;
        }
        nd->count = nb;
        nd->blens = mt_malloc(sizeof(int) * (size_t) nb);
        nd->disp = mt_malloc(sizeof(MPI_Aint) * (size_t) nb);
        compose(r, k, nb, nd->blens);
        layout_blocks(r, nb, kids, nd->blens, kind == K_INDEXED, align, nd->disp, order);
        reorder(nb, order, nd->blens, nd->disp, NULL);
        free(order);
        free(kids);
        break;
    }
    case K_IBLOCK:
    case K_HIBLOCK: {
        uint64_t bl = ibl;
        int nb = (int) (k / bl);
        int *order = mt_malloc(sizeof(int) * (size_t) nb);
        int *b = mt_malloc(sizeof(int) * (size_t) nb);
        node **kids = mt_malloc(sizeof(node *) * (size_t) nb);
        for (int i = 0; i < nb; i++) {
            kids[i] = kid;
            b[i] = (int) bl;
        }
        nd->count = nb;
        nd->blen = (int) bl;
        nd->disp = mt_malloc(sizeof(MPI_Aint) * (size_t) nb);
        layout_blocks(r, nb, kids, b, kind == K_IBLOCK, align, nd->disp, order);
        reorder(nb, order, NULL, nd->disp, NULL);
        free(order);
        free(b);
        free(kids);
        break;
    }
    default:
        mt_die("arrange: bad kind %d", kind);
    }
    node_finish(nd);
    return nd;
}

/* struct of 2..5 parts of the n units, each part built independently */
static node *make_struct(rng_t *r, uint64_t n, int depth)
{
    int nb = (int) range(r, 2, n < 5 ? (int64_t) n : 5);
    int *parts = mt_malloc(sizeof(int) * (size_t) nb),
        *order = mt_malloc(sizeof(int) * (size_t) nb);
    int align = chance(r, 0.1) ? 1 : unit_align(cur_unit);
    node *nd = node_new(K_STRUCT);
    nd->count = nb;
    nd->blens = mt_malloc(sizeof(int) * (size_t) nb);
    nd->disp = mt_malloc(sizeof(MPI_Aint) * (size_t) nb);
    nd->kid = mt_malloc(sizeof(node *) * (size_t) nb);
    compose(r, n, nb, parts);
    for (int i = 0; i < nb; i++) {
        uint64_t m = pick_divisor(r, (uint64_t) parts[i], (uint64_t) parts[i]);
        nd->kid[i] = make(r, m, depth - 1);
        nd->blens[i] = (int) ((uint64_t) parts[i] / m);
        if (nd->blens[i] > 1) {
            nd->kid[i] = tileable(r, nd->kid[i], align);
        }
    }
    layout_blocks(r, nb, nd->kid, nd->blens, 0, align, nd->disp, order);
    reorder(nb, order, nd->blens, nd->disp, nd->kid);
    free(parts);
    free(order);
    node_finish(nd);
    return nd;
}

static const int arrange_kinds[] = {K_CONTIG,   K_VECTOR, K_HVECTOR, K_INDEXED,
                                    K_HINDEXED, K_IBLOCK, K_HIBLOCK};

/* a random type holding exactly n >= 1 units, up to `depth` levels deep */
static node *make(rng_t *r, uint64_t n, int depth)
{
    int kind = arrange_kinds[below(r, sizeof(arrange_kinds) / sizeof(arrange_kinds[0]))];
    if (depth <= 0) {
        /* bottom: a leaf of m units, arranged */
        uint64_t m = 1;
        if (units[cur_unit].len > 1 || chance(r, 0.5)) {
            m = pick_divisor(r, n, units[cur_unit].len > 1 ? 3 : 8);
        }
        node *leaf = mk_leaf(r, m);
        return n / m == 1 ? leaf : arrange(r, kind, leaf, n / m);
    }
    if (chance(r, 0.12)) {
        return mk_resized(r, make(r, n, depth - 1), unit_align(cur_unit));
    }
    if (n >= 2 && chance(r, 0.2)) {
        return make_struct(r, n, depth);
    }
    uint64_t m = pick_divisor(r, n, n > 1 ? n - 1 : 1);
    return arrange(r, kind, make(r, m, depth - 1), n / m);
}

/* ---- cases ------------------------------------------------------------------ */

typedef struct {
    node *root;
    int count;       /* count given to MPI */
    int need;        /* instances the message fills */
    MPI_Aint lo, hi; /* bytes touched by count instances, from the origin */
    size_t guard;    /* allocation bytes before lo */
    size_t alloc;    /* guard + (hi - lo) + tail guard */
    int contig;      /* the whole message is one contiguous byte range */
} layout_t;

typedef struct {
    int unit;
    uint64_t n;
    size_t bytes;
    char how[96]; /* how the size was chosen */
    layout_t snd, rcv;
    uint8_t poison;
} case_t;

typedef struct {
    int nmsg;
    int same_tag;
    int post_mode[2];      /* per side: 0 recvs first, 1 sends first, 2 interleaved */
    case_t c[MAX_MSGS][2]; /* [message][sender side] */
} iter_t;

static void layout_free(layout_t *L)
{
    node_free(L->root);
    L->root = NULL;
}

/* message size in bytes: around the boundaries or random */
static size_t pick_size(rng_t *r, char *how, size_t hn)
{
    uint64_t p = below(r, 100);
    if (p < 1) {
        snprintf(how, hn, "empty");
        return 0;
    }
    if (p < 8) {
        size_t s = (size_t) range(r, 0, 1024);
        snprintf(how, hn, "small random");
        return s;
    }
    if (p < 62 && nbounds > 0) {
        size_t B = bounds[below(r, (uint64_t) nbounds)];
        size_t kmax = (opt_max + 96) / B;
        if (kmax == 0) {
            kmax = 1;
        }
        size_t k = chance(r, 0.7) ? 1 + below(r, kmax < 4 ? kmax : 4) : 1 + below(r, kmax);
        long d;
        uint64_t q = below(r, 10);
        if (q < 6) {
            d = (long) range(r, -1, 1);
        } else if (q < 8) {
            static const int hdr[] = {16, 24, 32, 40, 48, 56, 64, 72, 88};
            d = -hdr[below(r, 9)] + (long) range(r, -1, 1);
        } else {
            d = (long) range(r, -96, 96);
        }
        long s = (long) (k * B) + d;
        if (s < 0) {
            s = 0;
        }
        if ((size_t) s > opt_max + 96) {
            s = (long) (opt_max + 96);
        }
        snprintf(how, hn, "%zu*%zu%+ld", k, B, d);
        return (size_t) s;
    }
    /* log-uniform between 1 KiB and max */
    double lmin = 10, lmax = 0;
    for (size_t v = opt_max; v > 1; v >>= 1) {
        lmax += 1;
    }
    if (lmax < lmin) {
        lmax = lmin;
    }
    double e = lmin + (lmax - lmin) * (double) below(r, 1000001) / 1e6;
    size_t s = (size_t) (1ull << (int) e);
    s += (size_t) below(r, s);
    if (s > opt_max) {
        s = opt_max;
    }
    snprintf(how, hn, "random");
    return s;
}

static int pick_unit(rng_t *r, int boundary)
{
    uint64_t p = below(r, 100);
    if (boundary && p < 45) {
        return 0; /* char: exactly the boundary size */
    }
    p = below(r, 100);
    if (p < 25) {
        return 0;
    }
    if (p < 55) {
        return 1;
    }
    if (p < 63) {
        return 2;
    }
    if (p < 68) {
        return 3;
    }
    if (p < 72) {
        return 4;
    }
    return 5 + (int) below(r, (uint64_t) (NUNITS - 5));
}

/* a contiguous layout of n units: the plain basic type or a dense struct */
static node *make_contig(rng_t *r, uint64_t n, int *count)
{
    node *leaf;
    if (units[cur_unit].len == 1) {
        leaf = mk_basic(units[cur_unit].b[0]);
        leaf->units = 1;
    } else {
        /* the unit's elements back to back, in signature order */
        const unit_t *U = &units[cur_unit];
        node *nd = node_new(K_STRUCT);
        MPI_Aint off = 0;
        nd->count = U->len;
        nd->blens = mt_malloc(sizeof(int) * (size_t) U->len);
        nd->disp = mt_malloc(sizeof(MPI_Aint) * (size_t) U->len);
        nd->kid = mt_malloc(sizeof(node *) * (size_t) U->len);
        for (int i = 0; i < U->len; i++) {
            nd->blens[i] = 1;
            nd->disp[i] = off;
            nd->kid[i] = mk_basic(U->b[i]);
            off += basic_size[U->b[i]];
        }
        node_finish(nd);
        nd->units = 1;
        leaf = tileable(r, nd, 1);
        if (leaf->ext != off) { /* MPI may pad the extent for alignment */
            node *rs = node_new(K_RESIZED);
            rs->kid = mt_malloc(sizeof(node *));
            rs->kid[0] = leaf;
            rs->rlb = 0;
            rs->rext = off;
            node_finish(rs);
            leaf = rs;
        }
        leaf->units = 1;
    }
    if (n == 0) {
        *count = 0;
        return leaf;
    }
    uint64_t c = chance(r, 0.5) ? n : pick_divisor(r, n, n);
    *count = (int) c;
    if (n / c == 1) {
        return leaf;
    }
    node *nd = node_new(K_CONTIG);
    nd->kid = mt_malloc(sizeof(node *));
    nd->kid[0] = leaf;
    nd->count = (int) (n / c);
    node_finish(nd);
    return nd;
}

static void gen_layout(rng_t *r, layout_t *L, uint64_t n, int recv)
{
    size_t bytes = n * (uint64_t) unit_size(cur_unit);
    MPI_Aint limit = (MPI_Aint) (bytes * 4 + 65536);
    int extra;
    if (limit > 64 * 1024 * 1024) {
        limit = 64 * 1024 * 1024;
    }
    for (int tries = 0;; tries++) {
        memset(L, 0, sizeof(*L));
        if (n == 0) {
            L->root = mk_leaf(r, 1);
            L->count = 0;
        } else if (chance(r, 0.15) || tries >= 12) {
            L->root = make_contig(r, n, &L->count);
        } else {
            uint64_t c = 1;
            uint64_t p = below(r, 10);
            if (p >= 5) {
                c = pick_divisor(r, n, p < 8 ? n : 64);
            }
            L->root = make(r, n / c, (int) range(r, 0, opt_depth));
            L->count = (int) c;
        }
        L->need = L->count;
        extra = (recv && n > 0 && chance(r, 0.2)) ? (int) range(r, 1, 3) : 0;
        if (L->count + extra > 1) {
            L->root = tileable(r, L->root, 1);
        }
        L->count += extra;
        if (L->count > 0) {
            MPI_Aint last = (MPI_Aint) (L->count - 1) * L->root->ext;
            L->lo = L->root->tlb + (last < 0 ? last : 0);
            L->hi = L->root->tub + (last > 0 ? last : 0);
        }
        if (L->hi - L->lo <= limit || tries >= 12) {
            break;
        }
        node_free(L->root);
    }
    MT_CHECK(MPI_Type_commit(&L->root->type));
    L->contig = (uint64_t) (L->hi - L->lo) == L->root->size * (uint64_t) L->count;
    L->guard = (size_t) range(r, 8, 72);
    L->alloc = L->guard + (size_t) (L->hi - L->lo) + (size_t) range(r, 8, 72);
}

static void gen_case(rng_t *r, case_t *c)
{
    size_t t = pick_size(r, c->how, sizeof(c->how));
    c->unit = pick_unit(r, strchr(c->how, '*') != NULL);
    cur_unit = c->unit;
    int us = unit_size(c->unit);
    c->n = chance(r, 0.5) ? (t + (size_t) us - 1) / (size_t) us : t / (size_t) us;
    c->bytes = c->n * (size_t) us;
    gen_layout(r, &c->snd, c->n, 0);
    gen_layout(r, &c->rcv, c->n, 1);
    c->poison = (uint8_t) range(r, 1, 255);
}

static uint64_t iter_key(long it)
{
    return mix64(opt_seed ^ mix64((uint64_t) it * 0xD1B54A32D192ED03ull + 1));
}

static void gen_iter(iter_t *I, long it)
{
    rng_t r = {iter_key(it)};
    memset(I, 0, sizeof(*I));
    I->nmsg = (opt_k > 1 && chance(&r, 0.5)) ? (int) range(&r, 2, opt_k) : 1;
    I->same_tag = chance(&r, 0.2);
    I->post_mode[0] = (int) below(&r, 3);
    I->post_mode[1] = (int) below(&r, 3);
    for (int j = 0; j < I->nmsg; j++) {
        for (int d = 0; d < 2; d++) {
            gen_case(&r, &I->c[j][d]);
        }
    }
}

static void free_iter(iter_t *I)
{
    for (int j = 0; j < I->nmsg; j++) {
        for (int d = 0; d < 2; d++) {
            layout_free(&I->c[j][d].snd);
            layout_free(&I->c[j][d].rcv);
        }
    }
}

/* ---- the model: walk a layout's type map ------------------------------------ */

typedef struct walker {
    void (*fn)(struct walker *, MPI_Aint off, size_t len, size_t pos);
    MPI_Aint run_off;
    size_t run_len, run_pos, pos;
    uint8_t *mem, *stream;   /* copy */
    MPI_Aint find;           /* locate: memory offset to find */
    size_t found;            /* stream position of `find`, or SIZE_MAX */
    size_t want_lo, want_hi; /* gather stream range [lo, hi) from mem */
    uint8_t *out;
} walker;

static void w_emit(walker *w, MPI_Aint off, size_t len)
{
    if (w->run_len > 0 && off == w->run_off + (MPI_Aint) w->run_len) {
        w->run_len += len;
    } else {
        if (w->run_len > 0) {
            w->fn(w, w->run_off, w->run_len, w->run_pos);
        }
        w->run_off = off;
        w->run_len = len;
        w->run_pos = w->pos;
    }
    w->pos += len;
}

static void w_node(walker *w, const node *nd, MPI_Aint off)
{
    const node *k = nd->kind == K_BASIC ? NULL : nd->kid[0];
    switch (nd->kind) {
    case K_BASIC:
        w_emit(w, off, (size_t) basic_size[nd->basic]);
        break;
    case K_CONTIG:
        for (int i = 0; i < nd->count; i++) {
            w_node(w, k, off + i * k->ext);
        }
        break;
    case K_VECTOR:
    case K_HVECTOR: {
        MPI_Aint bs = nd->kind == K_VECTOR ? nd->stride * k->ext : nd->stride;
        for (int i = 0; i < nd->count; i++) {
            for (int j = 0; j < nd->blen; j++) {
                w_node(w, k, off + i * bs + j * k->ext);
            }
        }
        break;
    }
    case K_INDEXED:
    case K_HINDEXED:
    case K_IBLOCK:
    case K_HIBLOCK:
    case K_STRUCT: {
        int ext_units = nd->kind == K_INDEXED || nd->kind == K_IBLOCK;
        int block = nd->kind == K_IBLOCK || nd->kind == K_HIBLOCK;
        for (int i = 0; i < nd->count; i++) {
            const node *c = nd->kind == K_STRUCT ? nd->kid[i] : k;
            MPI_Aint p = off + (ext_units ? nd->disp[i] * c->ext : nd->disp[i]);
            int bl = block ? nd->blen : nd->blens[i];
            for (int j = 0; j < bl; j++) {
                w_node(w, c, p + j * c->ext);
            }
        }
        break;
    }
    case K_RESIZED:
        w_node(w, k, off);
        break;
    }
}

/* walk `n` instances of L (from the origin), calling fn on merged runs */
static void w_layout(walker *w, const layout_t *L, int n)
{
    w->pos = 0;
    w->run_len = 0;
    for (int i = 0; i < n; i++) {
        w_node(w, L->root, (MPI_Aint) i * L->root->ext);
    }
    if (w->run_len > 0) {
        w->fn(w, w->run_off, w->run_len, w->run_pos);
    }
}

static void fn_pack(walker *w, MPI_Aint off, size_t len, size_t pos)
{
    memcpy(w->stream + pos, w->mem + off, len);
}

static void fn_unpack(walker *w, MPI_Aint off, size_t len, size_t pos)
{
    memcpy(w->mem + off, w->stream + pos, len);
}

static void fn_mark(walker *w, MPI_Aint off, size_t len, size_t pos)
{
    (void) pos;
    memset(w->mem + off, 1, len);
}

static void fn_locate(walker *w, MPI_Aint off, size_t len, size_t pos)
{
    if (w->find >= off && w->find < off + (MPI_Aint) len) {
        w->found = pos + (size_t) (w->find - off);
    }
}

static void fn_gather(walker *w, MPI_Aint off, size_t len, size_t pos)
{
    for (size_t i = 0; i < len; i++) {
        if (pos + i >= w->want_lo && pos + i < w->want_hi) {
            w->out[pos + i - w->want_lo] = w->mem[off + (MPI_Aint) i];
        }
    }
}

/* ---- running ------------------------------------------------------------------ */

static int rank, wsize, peer, side;
static char exe_path[4096] = "dtstress";
static double t_start;
static long cur_iter, cur_rep;
static uint64_t bytes_recv, n_msgs, n_multifrag_noncontig, n_contig_recv, n_noncontig_both;
static uint64_t n_extra_cap, n_zero, n_bound;
static int max_depth_seen;

static uint64_t pattern_seed(int j, int d)
{
    return mix64(iter_key(cur_iter) ^ mix64(((uint64_t) cur_rep << 32) ^ ((uint64_t) j << 8) ^
                                            (uint64_t) d ^ ((uint64_t) (rank >> 1) << 40)));
}

static void print_layout(FILE *f, const char *what, const layout_t *L)
{
    sbuf_t b = {0};
    describe(L->root, &b);
    fprintf(f,
            "    %s: count %d (%d carry data) of type size %llu, lb %ld, extent %ld, true lb %ld, "
            "true extent %ld; buffer bytes [%ld, %ld) from the origin, %s, guard %zu\n"
            "      %s\n",
            what, L->count, L->need, (unsigned long long) L->root->size, (long) L->root->lb,
            (long) L->root->ext, (long) L->root->tlb, (long) (L->root->tub - L->root->tlb),
            (long) L->lo, (long) L->hi, L->contig ? "contiguous" : "non-contiguous", L->guard, b.s);
    free(b.s);
}

static void print_case(FILE *f, const case_t *c, int j, int d)
{
    char un[64];
    unit_name(c->unit, un, sizeof(un));
    fprintf(f,
            "  message %d, rank-in-pair %d -> %d: unit {%s} (%d bytes) x %llu = %zu bytes "
            "(size %s)\n",
            j, d, 1 - d, un, unit_size(c->unit), (unsigned long long) c->n, c->bytes, c->how);
    print_layout(f, "send", &c->snd);
    print_layout(f, "recv", &c->rcv);
}

extern char **environ;

static void print_repro(FILE *f, int j)
{
    fprintf(f, "  reproduce:");
    for (char **e = environ; *e; e++) {
        if (strncmp(*e, "OMPI_MCA_mca_component_path=", 28) == 0) {
            fprintf(f, " %s", *e);
        }
    }
    fprintf(f, " mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 --mca pml ob1");
    for (char **e = environ; *e; e++) {
        const char *v = *e + 9;
        if (strncmp(*e, "OMPI_MCA_", 9) != 0 ||
            !(strncmp(v, "btl", 3) == 0 || strncmp(v, "pml", 3) == 0 ||
              strncmp(v, "oob_tcp_if_include=", 19) == 0)) {
            continue;
        }
        const char *eq = strchr(v, '=');
        if (eq == NULL || strncmp(v, "pml=", 4) == 0) {
            continue;
        }
        fprintf(f, " --mca %.*s %s", (int) (eq - v), v, eq + 1);
    }
    fprintf(f, " %s -s %llu -M %zu -b %s -d %d -k %d -f %ld -n 1 -R 20", exe_path,
            (unsigned long long) opt_seed, opt_max, opt_bounds_str, opt_depth, opt_k, cur_iter);
    if (j >= 0) {
        fprintf(f, " -o %d", j);
    }
    fprintf(f, "\n");
}

static void print_iter(FILE *f, const iter_t *I)
{
    fprintf(f,
            "  iteration %ld (repeat %ld): %d message(s) per direction, %s tags, post order "
            "%d/%d (0 recvs first, 1 sends first, 2 interleaved)\n",
            cur_iter, cur_rep, I->nmsg, I->same_tag ? "same" : "distinct", I->post_mode[0],
            I->post_mode[1]);
}

/* Describe the first wrong byte of message j (received by this rank). */
static void report_mismatch(const iter_t *I, int j, const uint8_t *got, const uint8_t *want,
                            const uint8_t *packed, const char *what)
{
    const case_t *c = &I->c[j][1 - side];
    const layout_t *L = &c->rcv;
    size_t first = SIZE_MAX, bad_cov = 0, bad_gap = 0;
    walker w = {0};
    uint8_t *orig = (uint8_t *) got + L->guard - L->lo;
    uint8_t *cov = mt_malloc(L->alloc);
    char ranges[512] = "";
    size_t rl = 0;
    int nr = 0;

    w.fn = fn_mark;
    w.mem = cov + L->guard - L->lo;
    w_layout(&w, L, L->need);
    for (size_t i = 0; i < L->alloc; i++) {
        if (got[i] == want[i]) {
            continue;
        }
        if (first == SIZE_MAX) {
            first = i;
        }
        if (nr < 6 && (i == 0 || got[i - 1] == want[i - 1])) {
            size_t e = i;
            while (e < L->alloc && got[e] != want[e]) {
                e++;
            }
            rl += (size_t) snprintf(ranges + rl, sizeof(ranges) - rl, "%s[%ld,%ld)", nr ? " " : "",
                                    (long) ((MPI_Aint) i - (MPI_Aint) L->guard + L->lo),
                                    (long) ((MPI_Aint) e - (MPI_Aint) L->guard + L->lo));
            nr++;
        }
        if (cov[i]) {
            bad_cov++;
        } else {
            bad_gap++;
        }
    }
    free(cov);
    MPI_Aint off = (MPI_Aint) first - (MPI_Aint) L->guard + L->lo;
    w.fn = fn_locate;
    w.find = off;
    w.found = SIZE_MAX;
    w_layout(&w, L, L->need);

    fprintf(stderr, "ERROR dtstress rank %d: %s: seed %llu iteration %ld message %d from rank %d\n",
            rank, what, (unsigned long long) opt_seed, cur_iter, j, peer);
    print_iter(stderr, I);
    print_case(stderr, c, j, 1 - side);
    fprintf(stderr,
            "  first wrong byte at offset %ld from the receive buffer origin: expected "
            "0x%02x, got 0x%02x",
            (long) off, want[first], got[first]);
    if (w.found != SIZE_MAX) {
        fprintf(stderr, " (message byte %zu of %zu, %zu before its end)\n", w.found, c->bytes,
                c->bytes - w.found);
        /* where did the wrong data come from? */
        uint8_t probe[16];
        size_t pl = c->bytes - w.found < 16 ? c->bytes - w.found : 16;
        walker g = {0};
        g.fn = fn_gather;
        g.mem = orig;
        g.want_lo = w.found;
        g.want_hi = w.found + pl;
        g.out = probe;
        w_layout(&g, L, L->need);
        const uint8_t *hit = NULL;
        if (pl >= 8) {
            for (size_t s = 0; s + pl <= c->bytes; s++) {
                if (packed[s] == probe[0] && memcmp(packed + s, probe, pl) == 0) {
                    hit = packed + s;
                    break;
                }
            }
        }
        if (hit != NULL) {
            fprintf(stderr,
                    "  the %zu received bytes there equal message bytes %zu.. (shift %+ld)\n", pl,
                    (size_t) (hit - packed), (long) ((hit - packed) - (long) w.found));
        } else if (pl >= 8) {
            fprintf(stderr, "  the %zu received bytes there are not found in the message\n", pl);
        }
    } else if (off < L->lo || off >= L->hi) {
        fprintf(stderr, " (guard area outside the buffer: should keep poison 0x%02x)\n", c->poison);
    } else {
        fprintf(stderr,
                " (gap or unused capacity of the receive type: should keep poison 0x%02x)\n",
                c->poison);
    }
    fprintf(stderr,
            "  wrong bytes: %zu covered by the receive type, %zu gap/guard; first ranges "
            "(offsets from the origin): %s\n",
            bad_cov, bad_gap, ranges);
    print_repro(stderr, j);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

/* the receiver's expected image of message j: MPI_Pack + MPI_Unpack on
 * MPI_COMM_SELF, cross-checked against the model */
static uint8_t *expected_image(const iter_t *I, int j, uint8_t **packed_out)
{
    const case_t *c = &I->c[j][1 - side];
    const layout_t *S = &c->snd, *L = &c->rcv;
    uint8_t *sb = malloc(S->alloc ? S->alloc : 1);
    uint8_t *packed = malloc(c->bytes ? c->bytes : 1), *mpacked = malloc(c->bytes ? c->bytes : 1);
    uint8_t *img = malloc(L->alloc), *mimg = malloc(L->alloc);
    int pos = 0;
    if (!sb || !packed || !mpacked || !img || !mimg) {
        mt_die("out of memory for the expected image");
    }
    pat_fill(sb, S->alloc, pattern_seed(j, 1 - side));
    uint8_t *so = sb + S->guard - S->lo;
    MT_CHECK(MPI_Pack(so, S->count, S->root->type, packed, (int) c->bytes, &pos, MPI_COMM_SELF));
    if ((size_t) pos != c->bytes) {
        mt_die("MPI_Pack produced %d bytes, expected %zu", pos, c->bytes);
    }
    memset(img, c->poison, L->alloc);
    pos = 0;
    MT_CHECK(MPI_Unpack(packed, (int) c->bytes, &pos, img + L->guard - L->lo, L->need,
                        L->root->type, MPI_COMM_SELF));
    /* the model */
    walker w = {0};
    w.fn = fn_pack;
    w.mem = so;
    w.stream = mpacked;
    w_layout(&w, S, S->count);
    if (w.pos != c->bytes || memcmp(packed, mpacked, c->bytes) != 0) {
        print_case(stderr, c, j, 1 - side);
        mt_die("self-check: MPI_Pack of the sender's buffer differs from the model's type map "
               "(a test bug, or a datatype-engine bug without any network)");
    }
    memset(mimg, c->poison, L->alloc);
    w.fn = fn_unpack;
    w.mem = mimg + L->guard - L->lo;
    w.stream = packed;
    w_layout(&w, L, L->need);
    if (w.pos != c->bytes || memcmp(img, mimg, L->alloc) != 0) {
        print_case(stderr, c, j, 1 - side);
        mt_die("self-check: MPI_Unpack into the receive type differs from the model's type map "
               "(a test bug, or a datatype-engine bug without any network)");
    }
    free(sb);
    free(mpacked);
    free(mimg);
    *packed_out = packed;
    return img;
}

/* the watchdog fired: say what is still pending and abort; request q is
 * the receive (qrecv[q]) or send of message qmsg[q] */
static void report_hang(const iter_t *I, MPI_Request *req, int nreq, const int *qmsg,
                        const int *qrecv, int j0, int j1)
{
    int pend_j = -1, npend = 0, one_msg = 1;
    fprintf(stderr,
            "ERROR dtstress rank %d: HANG: seed %llu iteration %ld not complete after %.0f s; "
            "pending:",
            rank, (unsigned long long) opt_seed, cur_iter, opt_watch);
    for (int q = 0; q < nreq; q++) {
        int flag = 1;
        if (req[q] != MPI_REQUEST_NULL) {
            MT_CHECK(MPI_Request_get_status(req[q], &flag, MPI_STATUS_IGNORE));
        }
        if (!flag) {
            fprintf(stderr, " %s of message %d %s rank %d;", qrecv[q] ? "receive" : "send", qmsg[q],
                    qrecv[q] ? "from" : "to", peer);
            one_msg &= pend_j < 0 || pend_j == qmsg[q];
            pend_j = qmsg[q];
            npend++;
        }
    }
    fprintf(stderr, " (%d requests)\n", npend);
    print_iter(stderr, I);
    for (int j = j0; j < j1; j++) {
        for (int d = 0; d < 2; d++) {
            print_case(stderr, &I->c[j][d], j, d);
        }
    }
    print_repro(stderr, j1 - j0 == 1 ? j0 : (one_msg ? pend_j : -1));
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

/* what a crash handler prints: the current iteration, prepared beforehand */
static char *crash_note;
static size_t crash_len;
static struct sigaction old_segv, old_bus, old_fpe;

static void crash_handler(int sig)
{
    if (crash_note != NULL) {
        ssize_t n = write(2, crash_note, crash_len);
        (void) n;
    }
    /* the previous handler (Open MPI's backtrace) gets the re-raised fault */
    sigaction(SIGSEGV, &old_segv, NULL);
    sigaction(SIGBUS, &old_bus, NULL);
    sigaction(SIGFPE, &old_fpe, NULL);
    (void) sig; /* returning re-executes the faulting instruction */
}

static void install_crash_handler(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = crash_handler;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &old_segv);
    sigaction(SIGBUS, &sa, &old_bus);
    sigaction(SIGFPE, &sa, &old_fpe);
}

static void prepare_crash_note(const iter_t *I)
{
    FILE *f;
    free(crash_note);
    crash_note = NULL;
    f = open_memstream(&crash_note, &crash_len);
    if (f == NULL) {
        return;
    }
    fprintf(f, "ERROR dtstress rank %d: CRASH during seed %llu iteration %ld repeat %ld\n", rank,
            (unsigned long long) opt_seed, cur_iter, cur_rep);
    print_iter(f, I);
    for (int j = 0; j < I->nmsg; j++) {
        if (opt_only < 0 || opt_only == j) {
            for (int d = 0; d < 2; d++) {
                print_case(f, &I->c[j][d], j, d);
            }
        }
    }
    print_repro(f, opt_only >= 0 ? opt_only : (I->nmsg == 1 ? 0 : -1));
    fclose(f);
}

static void run_iter(const iter_t *I)
{
    MPI_Request req[2 * MAX_MSGS];
    MPI_Status st[2 * MAX_MSGS];
    uint8_t *sbuf[MAX_MSGS] = {0}, *rbuf[MAX_MSGS] = {0};
    int nreq = 0, ridx[MAX_MSGS], qmsg[2 * MAX_MSGS], qrecv[2 * MAX_MSGS];
    int j0 = opt_only >= 0 ? opt_only : 0, j1 = opt_only >= 0 ? opt_only + 1 : I->nmsg;

    if (j0 >= I->nmsg) {
        return;
    }
    /* buffers */
    for (int j = j0; j < j1; j++) {
        const case_t *cs = &I->c[j][side], *cr = &I->c[j][1 - side];
        sbuf[j] = malloc(cs->snd.alloc);
        rbuf[j] = malloc(cr->rcv.alloc);
        if (!sbuf[j] || !rbuf[j]) {
            mt_die("out of memory for message buffers");
        }
        pat_fill(sbuf[j], cs->snd.alloc, pattern_seed(j, side));
        memset(rbuf[j], cr->poison, cr->rcv.alloc);
    }
    /* post in this side's order: receives and sends each in message order */
    int mode = I->post_mode[side], nr = j0, ns = j0;
    rng_t r = {iter_key(cur_iter) ^ 0x5bd1e995u ^ (uint64_t) side};
    while (nr < j1 || ns < j1) {
        int do_recv;
        if (nr >= j1) {
            do_recv = 0;
        } else if (ns >= j1) {
            do_recv = 1;
        } else {
            do_recv = mode == 0 ? 1 : mode == 1 ? 0 : chance(&r, 0.5);
        }
        if (do_recv) {
            const layout_t *L = &I->c[nr][1 - side].rcv;
            ridx[nr] = nreq;
            qmsg[nreq] = nr;
            qrecv[nreq] = 1;
            MT_CHECK(MPI_Irecv(rbuf[nr] + L->guard - L->lo, L->count, L->root->type, peer,
                               I->same_tag ? 7 : 100 + nr, MPI_COMM_WORLD, &req[nreq++]));
            nr++;
        } else {
            const layout_t *L = &I->c[ns][side].snd;
            qmsg[nreq] = ns;
            qrecv[nreq] = 0;
            MT_CHECK(MPI_Isend(sbuf[ns] + L->guard - L->lo, L->count, L->root->type, peer,
                               I->same_tag ? 7 : 100 + ns, MPI_COMM_WORLD, &req[nreq++]));
            ns++;
        }
    }
    double t0 = MPI_Wtime();
    for (;;) {
        int flag = 0;
        MT_CHECK(MPI_Testall(nreq, req, &flag, st));
        if (flag) {
            break;
        }
        if (opt_watch > 0 && MPI_Wtime() - t0 > opt_watch) {
            report_hang(I, req, nreq, qmsg, qrecv, j0, j1);
        }
    }

    for (int j = j0; j < j1; j++) {
        const case_t *cr = &I->c[j][1 - side], *cs = &I->c[j][side];
        const MPI_Status *s = &st[ridx[j]];
        int cnt = -1;
        char what[64];
        MT_CHECK(MPI_Get_count(s, MPI_BYTE, &cnt));
        if (s->MPI_SOURCE != peer || (size_t) cnt != cr->bytes) {
            fprintf(stderr,
                    "ERROR dtstress rank %d: seed %llu iteration %ld message %d: status "
                    "says %d bytes from rank %d, expected %zu from %d\n",
                    rank, (unsigned long long) opt_seed, cur_iter, j, cnt, s->MPI_SOURCE, cr->bytes,
                    peer);
            print_iter(stderr, I);
            print_case(stderr, cr, j, 1 - side);
            print_repro(stderr, j);
            fflush(stderr);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        uint8_t *packed;
        uint8_t *img = expected_image(I, j, &packed);
        if (memcmp(rbuf[j], img, cr->rcv.alloc) != 0) {
            snprintf(what, sizeof(what), "DATA MISMATCH");
            report_mismatch(I, j, rbuf[j], img, packed, what);
        }
        free(img);
        free(packed);
        /* the send buffer must be untouched */
        uint8_t *chk = malloc(cs->snd.alloc);
        if (chk == NULL) {
            mt_die("out of memory");
        }
        pat_fill(chk, cs->snd.alloc, pattern_seed(j, side));
        if (memcmp(chk, sbuf[j], cs->snd.alloc) != 0) {
            print_iter(stderr, I);
            print_case(stderr, cs, j, side);
            print_repro(stderr, j);
            mt_die("seed %llu iteration %ld message %d: the send buffer changed during the send",
                   (unsigned long long) opt_seed, cur_iter, j);
        }
        free(chk);
        free(sbuf[j]);
        free(rbuf[j]);

        /* statistics of what was received */
        bytes_recv += cr->bytes;
        n_msgs++;
        n_zero += cr->bytes == 0;
        n_bound += strchr(cr->how, '*') != NULL;
        n_contig_recv += cr->rcv.contig;
        n_noncontig_both += !cr->rcv.contig && !cr->snd.contig;
        n_multifrag_noncontig += !cr->rcv.contig && cr->bytes > 150000;
        n_extra_cap += cr->rcv.count > cr->rcv.need;
        if (cr->rcv.root->depth > max_depth_seen) {
            max_depth_seen = cr->rcv.root->depth;
        }
        if (cr->snd.root->depth > max_depth_seen) {
            max_depth_seen = cr->snd.root->depth;
        }
    }
}

static void usage(void)
{
    mt_die("usage: dtstress [-s SEED] [-n ITERS] [-t SECS] [-f FIRST] [-R REP] [-o MSG] "
           "[-M MAXBYTES] [-b B1,B2,...] [-d DEPTH] [-k K] [-W SECS] [-v]");
}

static void parse_bounds(const char *s)
{
    char *copy = strdup(s), *save = NULL;
    nbounds = 0;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *end;
        unsigned long long v = strtoull(t, &end, 0);
        if (*end || v == 0 || nbounds >= MAX_BOUNDS) {
            usage();
        }
        bounds[nbounds++] = (size_t) v;
    }
    free(copy);
    snprintf(opt_bounds_str, sizeof(opt_bounds_str), "%s", s);
}

int main(int argc, char **argv)
{
    int opt, have_seed = 0;
    char *end;

    MPI_Init(&argc, &argv);
    mt_setup("dtstress");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    {
        ssize_t n = readlink("/proc/self/exe", exe_path, sizeof(exe_path) - 1);
        if (n > 0) {
            exe_path[n] = 0;
        } else {
            snprintf(exe_path, sizeof(exe_path), "%s", argv[0]);
        }
    }
    while ((opt = getopt(argc, argv, "s:n:t:f:R:o:M:b:d:k:W:v")) != -1) {
        switch (opt) {
        case 's':
            opt_seed = strtoull(optarg, &end, 0);
            if (*end) {
                usage();
            }
            have_seed = 1;
            break;
        case 'n':
            opt_iters = strtol(optarg, &end, 0);
            break;
        case 't':
            opt_time = strtod(optarg, &end);
            break;
        case 'f':
            opt_first = strtol(optarg, &end, 0);
            break;
        case 'R':
            opt_rep = atoi(optarg);
            break;
        case 'o':
            opt_only = atoi(optarg);
            break;
        case 'M':
            opt_max = (size_t) strtoull(optarg, &end, 0);
            break;
        case 'b':
            parse_bounds(optarg);
            break;
        case 'd':
            opt_depth = atoi(optarg);
            break;
        case 'k':
            opt_k = atoi(optarg);
            break;
        case 'W':
            opt_watch = strtod(optarg, &end);
            break;
        case 'v':
            opt_verbose = 1;
            break;
        default:
            usage();
        }
    }
    if (opt_k < 1 || opt_k > MAX_MSGS || opt_rep < 1 || opt_depth < 0 || opt_max < 1 ||
        opt_max > 256 * 1024 * 1024) {
        usage();
    }
    if (wsize < 2) {
        mt_die("needs at least 2 ranks");
    }
    if (!have_seed) {
        opt_seed = mix64((uint64_t) time(NULL) ^ ((uint64_t) getpid() << 32));
    }
    MT_CHECK(MPI_Bcast(&opt_seed, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD));
    if (opt_iters < 0) {
        opt_iters = opt_time > 0 ? LONG_MAX : 50;
    }
    peer = rank ^ 1;
    side = rank & 1;
    if (rank == 0) {
        printf("dtstress: seed %llu (-s %llu), iterations from %ld, max %zu bytes, boundaries %s, "
               "depth %d, up to %d messages per direction, time budget %.1f s\n",
               (unsigned long long) opt_seed, (unsigned long long) opt_seed, opt_first, opt_max,
               opt_bounds_str, opt_depth, opt_k, opt_time);
        fflush(stdout);
    }
    install_crash_handler();
    t_start = MPI_Wtime();
    long done = 0;
    for (long it = opt_first;; it++) {
        int go = 1;
        if (rank == 0) {
            go = it - opt_first < opt_iters && (opt_time <= 0 || MPI_Wtime() - t_start < opt_time);
        }
        MT_CHECK(MPI_Bcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD));
        if (!go) {
            break;
        }
        iter_t I;
        cur_iter = it;
        gen_iter(&I, it);
        if (opt_verbose && rank == 0) {
            cur_rep = 0;
            print_iter(stdout, &I);
            for (int j = 0; j < I.nmsg; j++) {
                for (int d = 0; d < 2; d++) {
                    print_case(stdout, &I.c[j][d], j, d);
                }
            }
            fflush(stdout);
        }
        for (cur_rep = 0; cur_rep < opt_rep; cur_rep++) {
            prepare_crash_note(&I);
            if (peer < wsize) {
                run_iter(&I);
            }
        }
        free_iter(&I);
        done++;
    }

    unsigned long long in[8] = {bytes_recv,    n_msgs,           n_multifrag_noncontig,
                                n_contig_recv, n_noncontig_both, n_extra_cap,
                                n_zero,        n_bound};
    unsigned long long sum[8];
    int dmax = max_depth_seen, dm = 0;
    MT_CHECK(MPI_Reduce(in, sum, 8, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD));
    MT_CHECK(MPI_Reduce(&dmax, &dm, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD));
    if (rank == 0) {
        printf("dtstress: seed %llu: %ld iterations x %d in %.1f s, %llu messages received "
               "(%llu sized at a boundary, %llu empty), %llu bytes; receive buffers: %llu "
               "contiguous, %llu non-contiguous > 150000 bytes, %llu with unused capacity; %llu "
               "non-contiguous on both sides; deepest type %d levels\n",
               (unsigned long long) opt_seed, done, opt_rep, MPI_Wtime() - t_start, sum[1], sum[7],
               sum[6], sum[0], sum[3], sum[2], sum[5], sum[4], dm);
        printf("dtstress: constructors generated (rank 0):");
        for (int k = 0; k < NKINDS; k++) {
            printf(" %s=%llu", kind_name[k], (unsigned long long) kind_used[k]);
        }
        printf("\n");
        fflush(stdout);
    }
    mt_report_bytes(bytes_recv);
    mt_ok("dtstress");
    MPI_Finalize();
    return 0;
}
