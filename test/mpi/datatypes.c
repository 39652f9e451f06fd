/*
 * datatypes: exchange non-contiguous data described by MPI derived
 * datatypes (vector, indexed, struct with gaps, hvector of struct) between
 * rank pairs (0,1), (2,3), ... in both directions at once, small and large
 * (> 1 MiB, i.e. rendezvous) messages.  Most cases receive into a layout of
 * a different shape but the same type signature.
 *
 * Each side knows the layout of its own buffer.  The k-th basic element of
 * the type signature gets a value derived from (sender seed, k); the
 * receiver builds the expected image of its whole receive buffer (values in
 * the covered slots, poison in every gap/padding byte) and compares it byte
 * by byte, so writes into gaps are caught as well as wrong values.
 *
 * Option: -s SCALE  multiply the sizes of the large cases (default 1).
 */
#include "mpitest.h"

#include <stddef.h>
#include <unistd.h>

/* Sender struct: natural padding after i and after c. */
typedef struct {
    int i;
    double d;
    char c[3];
} rec_a;

/* Receiver struct: same signature (int, double, 3 chars), other layout. */
typedef struct {
    char c[3];
    char gap1[9];
    double d;
    char gap2[4];
    int i;
    char gap3[8];
} rec_b;

enum kind {
    K_INT,
    K_VECTOR,
    K_INDEXED,
    K_REC_A,
    K_REC_B,
    K_HVEC_A
};

typedef struct {
    enum kind kind;
    int nb, bl, st;      /* vector / hvector parameters */
    int *blens, *displs; /* indexed */
    int nblocks;
    int count;         /* count passed to MPI */
    MPI_Datatype type; /* one instance */
    MPI_Aint extent;
    size_t bufsize;
    size_t nelems; /* basic elements in count instances */
} layout;

static MPI_Datatype rec_a_type, rec_b_type;

static inline int ival(uint32_t seed, size_t k)
{
    return (int) mt_hash(seed, k);
}

static inline double dval(uint32_t seed, size_t k)
{
    /* exactly representable */
    return (double) (int32_t) mt_hash(seed, k) * 0.25;
}

static inline char cval(uint32_t seed, size_t k)
{
    return (char) mt_hash(seed, k);
}

static void make_struct_types(void)
{
    int bl[3] = {1, 1, 3};
    MPI_Datatype ty[3] = {MPI_INT, MPI_DOUBLE, MPI_CHAR};
    MPI_Aint da[3] = {offsetof(rec_a, i), offsetof(rec_a, d), offsetof(rec_a, c)};
    MPI_Aint db[3] = {offsetof(rec_b, i), offsetof(rec_b, d), offsetof(rec_b, c)};
    MPI_Datatype tmp;

    MT_CHECK(MPI_Type_create_struct(3, bl, da, ty, &tmp));
    MT_CHECK(MPI_Type_create_resized(tmp, 0, sizeof(rec_a), &rec_a_type));
    MT_CHECK(MPI_Type_free(&tmp));
    MT_CHECK(MPI_Type_commit(&rec_a_type));
    /* type map lists int, double, char[3] although c comes first in memory */
    MT_CHECK(MPI_Type_create_struct(3, bl, db, ty, &tmp));
    MT_CHECK(MPI_Type_create_resized(tmp, 0, sizeof(rec_b), &rec_b_type));
    MT_CHECK(MPI_Type_free(&tmp));
    MT_CHECK(MPI_Type_commit(&rec_b_type));
}

static layout lay_int(int n)
{
    layout L = {.kind = K_INT, .count = n, .type = MPI_INT};
    return L;
}

static layout lay_vector(int count, int nb, int bl, int st)
{
    layout L = {.kind = K_VECTOR, .nb = nb, .bl = bl, .st = st, .count = count};
    MT_CHECK(MPI_Type_vector(nb, bl, st, MPI_INT, &L.type));
    return L;
}

/*
 * Indexed type holding exactly `total` ints in blocks of 1..5 ints with
 * gaps of 0..3 ints; `variant` changes the shape.
 */
static layout lay_indexed(int count, int total, int variant)
{
    layout L = {.kind = K_INDEXED, .count = count};
    int cap = total > 0 ? total : 1, n = 0, pos = 0, left = total;
    L.blens = mt_malloc(sizeof(int) * cap);
    L.displs = mt_malloc(sizeof(int) * cap);
    while (left > 0) {
        int b = 1 + (n * 7 + variant) % 5;
        if (b > left) {
            b = left;
        }
        pos += (n * 3 + variant) % 4; /* gap */
        L.blens[n] = b;
        L.displs[n] = pos;
        pos += b;
        left -= b;
        n++;
    }
    L.nblocks = n;
    MT_CHECK(MPI_Type_indexed(n, L.blens, L.displs, MPI_INT, &L.type));
    return L;
}

static layout lay_rec(enum kind k, int n)
{
    layout L = {.kind = k, .count = n, .type = (k == K_REC_A) ? rec_a_type : rec_b_type};
    return L;
}

/* count instances of: nb blocks of bl rec_a, block starts st records apart */
static layout lay_hvec_a(int count, int nb, int bl, int st)
{
    layout L = {.kind = K_HVEC_A, .nb = nb, .bl = bl, .st = st, .count = count};
    MT_CHECK(MPI_Type_create_hvector(nb, bl, (MPI_Aint) st * sizeof(rec_a), rec_a_type, &L.type));
    return L;
}

static void lay_commit(layout *L)
{
    MPI_Aint lb;
    int tsize;
    if (L->kind != K_INT && L->kind != K_REC_A && L->kind != K_REC_B) {
        MT_CHECK(MPI_Type_commit(&L->type));
    }
    MT_CHECK(MPI_Type_get_extent(L->type, &lb, &L->extent));
    MT_CHECK(MPI_Type_size(L->type, &tsize));
    if (lb < 0) {
        mt_die("unexpected negative lower bound %ld", (long) lb);
    }
    /* indexed types may start with a gap: lb > 0 */
    L->bufsize = (size_t) lb + (size_t) L->extent * (size_t) L->count;
    /* every element type here has size >= 1; count chars individually */
    switch (L->kind) {
    case K_INT:
    case K_VECTOR:
    case K_INDEXED:
        L->nelems = (size_t) tsize / sizeof(int) * L->count;
        break;
    default:
        L->nelems = (size_t) tsize / (sizeof(int) + sizeof(double) + 3) * 5 * L->count;
        break;
    }
}

static void lay_free(layout *L)
{
    if (L->kind != K_INT && L->kind != K_REC_A && L->kind != K_REC_B) {
        MT_CHECK(MPI_Type_free(&L->type));
    }
    free(L->blens);
    free(L->displs);
}

static void put_rec(uint8_t *p, enum kind k, uint32_t seed, size_t *e)
{
    int iv = ival(seed, (*e)++);
    double dv = dval(seed, (*e)++);
    char c[3];
    for (int j = 0; j < 3; j++) {
        c[j] = cval(seed, (*e)++);
    }
    if (k == K_REC_B) {
        rec_b *r = (rec_b *) p;
        r->i = iv;
        r->d = dv;
        memcpy(r->c, c, 3);
    } else {
        rec_a *r = (rec_a *) p;
        r->i = iv;
        r->d = dv;
        memcpy(r->c, c, 3);
    }
}

/*
 * Write the values of the whole element stream into buf according to the
 * layout; bytes not covered by the datatype are left alone.
 */
static void lay_apply(const layout *L, uint8_t *buf, uint32_t seed)
{
    size_t e = 0;
    for (int r = 0; r < L->count; r++) {
        uint8_t *base = buf + (size_t) r * L->extent;
        int *ib = (int *) base;
        switch (L->kind) {
        case K_INT:
            ib[0] = ival(seed, e++);
            break;
        case K_VECTOR:
            for (int b = 0; b < L->nb; b++) {
                for (int j = 0; j < L->bl; j++) {
                    ib[(size_t) b * L->st + j] = ival(seed, e++);
                }
            }
            break;
        case K_INDEXED:
            for (int b = 0; b < L->nblocks; b++) {
                for (int j = 0; j < L->blens[b]; j++) {
                    ib[L->displs[b] + j] = ival(seed, e++);
                }
            }
            break;
        case K_REC_A:
        case K_REC_B:
            put_rec(base, L->kind, seed, &e);
            break;
        case K_HVEC_A:
            for (int b = 0; b < L->nb; b++) {
                for (int j = 0; j < L->bl; j++) {
                    size_t idx = (size_t) b * L->st + j;
                    put_rec(base + idx * sizeof(rec_a), K_REC_A, seed, &e);
                }
            }
            break;
        }
    }
}

static void compare(const uint8_t *got, const uint8_t *want, size_t n, const char *what)
{
    if (memcmp(got, want, n) == 0) {
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (got[i] != want[i]) {
            mt_die("%s: first mismatch at byte offset %zu of %zu (got 0x%02x,"
                   " expected 0x%02x%s)",
                   what, i, n, got[i], want[i], want[i] == MT_POISON ? ", a gap byte" : "");
        }
    }
}

static uint64_t sent_bytes;

/* Both ranks of a pair send `s` and receive into `r` simultaneously. */
static void run_case(int caseno, const char *name, layout s, layout r, int peer)
{
    int rank;
    char what[160];
    MPI_Request req[2];
    MPI_Status st[2];
    int tsize, elems = -1;

    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    lay_commit(&s);
    lay_commit(&r);
    if (s.nelems != r.nelems) {
        mt_die("case %s: bad test, signatures differ (%zu vs %zu elements)", name, s.nelems,
               r.nelems);
    }

    uint8_t *sbuf = mt_malloc(s.bufsize), *simg = mt_malloc(s.bufsize);
    uint8_t *rbuf = mt_malloc(r.bufsize), *rimg = mt_malloc(r.bufsize);
    uint32_t myseed = mt_seed(rank, caseno, 77, 0);
    uint32_t peerseed = mt_seed(peer, caseno, 77, 0);

    memset(sbuf, MT_POISON, s.bufsize);
    lay_apply(&s, sbuf, myseed);
    memcpy(simg, sbuf, s.bufsize);
    memset(rbuf, MT_POISON, r.bufsize);
    memset(rimg, MT_POISON, r.bufsize);
    lay_apply(&r, rimg, peerseed);

    MT_CHECK(MPI_Irecv(rbuf, r.count, r.type, peer, caseno, MPI_COMM_WORLD, &req[0]));
    MT_CHECK(MPI_Isend(sbuf, s.count, s.type, peer, caseno, MPI_COMM_WORLD, &req[1]));
    MT_CHECK(MPI_Waitall(2, req, st));

    snprintf(what, sizeof(what),
             "case '%s' (%zu elements) received from "
             "rank %d",
             name, r.nelems, peer);
    MT_CHECK(MPI_Get_elements(&st[0], r.type, &elems));
    if (elems < 0 || (size_t) elems != r.nelems) {
        mt_die("%s: MPI_Get_elements says %d, expected %zu", what, elems, r.nelems);
    }
    compare(rbuf, rimg, r.bufsize, what);
    snprintf(what, sizeof(what), "case '%s': send buffer after send", name);
    compare(sbuf, simg, s.bufsize, what);

    MT_CHECK(MPI_Type_size(s.type, &tsize));
    sent_bytes += (uint64_t) tsize * s.count;
    if (rank == 0) {
        printf("  %-28s %9llu bytes each way\n", name, (unsigned long long) tsize * s.count);
        fflush(stdout);
    }
    free(sbuf);
    free(simg);
    free(rbuf);
    free(rimg);
    lay_free(&s);
    lay_free(&r);
}

int main(int argc, char **argv)
{
    int rank, size, opt, scale = 1;

    MPI_Init(&argc, &argv);
    mt_setup("datatypes");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    while ((opt = getopt(argc, argv, "s:")) != -1) {
        if (opt == 's' && atoi(optarg) > 0) {
            scale = atoi(optarg);
        } else {
            mt_die("usage: datatypes [-s scale]");
        }
    }
    if (size < 2) {
        mt_die("needs at least 2 ranks");
    }
    make_struct_types();

    int peer = rank ^ 1;
    if (peer < size) {
        int c = 0;
        int big = 150000 * scale;  /* 450000 ints = 1.8 MB */
        int nrec = 100000 * scale; /* 1.5 MB of struct payload */

        /* small (eager) messages */
        run_case(c++, "vector->contig", lay_vector(1, 7, 3, 5), lay_int(21), peer);
        run_case(c++, "contig->vector", lay_int(21), lay_vector(1, 21, 1, 2), peer);
        run_case(c++, "vector x3->vector", lay_vector(3, 10, 2, 3), lay_vector(2, 30, 1, 4), peer);
        run_case(c++, "indexed->indexed", lay_indexed(1, 50, 0), lay_indexed(1, 50, 2), peer);
        run_case(c++, "struct x1", lay_rec(K_REC_A, 1), lay_rec(K_REC_B, 1), peer);
        run_case(c++, "struct x5", lay_rec(K_REC_A, 5), lay_rec(K_REC_B, 5), peer);
        run_case(c++, "hvector(struct) small", lay_hvec_a(2, 3, 2, 3), lay_rec(K_REC_B, 12), peer);
        /* medium: around typical eager limits */
        run_case(c++, "vector->contig 64K", lay_vector(1, 5461, 3, 4), lay_int(16383), peer);
        run_case(c++, "struct x5000", lay_rec(K_REC_A, 5000), lay_rec(K_REC_B, 5000), peer);
        /* large (> 1 MiB, rendezvous) */
        run_case(c++, "vector->vector large", lay_vector(1, big, 3, 5),
                 lay_vector(1, big * 3 / 2, 2, 3), peer);
        run_case(c++, "vector x4->contig large", lay_vector(4, big / 4, 3, 4),
                 lay_int(big / 4 * 3 * 4), peer);
        run_case(c++, "indexed->contig large", lay_indexed(1, 3 * big, 1), lay_int(3 * big), peer);
        run_case(c++, "contig->indexed large", lay_int(3 * big), lay_indexed(1, 3 * big, 3), peer);
        run_case(c++, "indexed x2->indexed large", lay_indexed(2, 3 * big / 2, 4),
                 lay_indexed(1, 3 * big, 0), peer);
        run_case(c++, "struct large", lay_rec(K_REC_A, nrec), lay_rec(K_REC_B, nrec), peer);
        run_case(c++, "hvector(struct) large", lay_hvec_a(1, nrec / 2, 2, 3),
                 lay_rec(K_REC_B, nrec), peer);
    }

    mt_report_bytes(sent_bytes);
    MT_CHECK(MPI_Type_free(&rec_a_type));
    MT_CHECK(MPI_Type_free(&rec_b_type));
    mt_ok("datatypes");
    MPI_Finalize();
    return 0;
}
