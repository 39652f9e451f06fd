/*
 * pvars: the usnic counters as MPI_T performance variables.
 *
 * Finds btl_usnic_tx_bytes, rx_bytes, tx_pkts, drop_AUTH and srtt_max_us
 * among the performance variables, checks what MPI_T says of them (class,
 * type, binding, read-only, continuous), reads them through a session
 * handle before and after a checked exchange of ROUNDS x SIZE bytes each
 * way, and checks that the counters moved by what went over the wire:
 * at least the payload, and not absurdly more.  Prints "PVARS n" (how many
 * btl_usnic_ variables there are) and one "PVAR name delta" line each.
 */
#include "mpitest.h"

#define ROUNDS 8
#define SIZE (1 << 20)

enum {
    TX_BYTES,
    RX_BYTES,
    TX_PKTS,
    DROP_AUTH,
    SRTT_MAX,
    NVARS
};
static const char *const names[NVARS] = {"btl_usnic_tx_bytes", "btl_usnic_rx_bytes",
                                         "btl_usnic_tx_pkts", "btl_usnic_drop_AUTH",
                                         "btl_usnic_srtt_max_us"};

static void read_all(MPI_T_pvar_session s, MPI_T_pvar_handle *h, unsigned long *v)
{
    for (int i = 0; i < NVARS; i++) {
        MT_CHECK(MPI_T_pvar_read(s, h[i], &v[i]));
    }
}

int main(int argc, char **argv)
{
    int rank, size, provided, num, found[NVARS], nusnic = 0;
    MPI_T_pvar_session session;
    MPI_T_pvar_handle handle[NVARS];
    unsigned long before[NVARS], after[NVARS];
    unsigned char *buf;
    long long bytes = 0;

    MPI_Init(&argc, &argv);
    mt_setup("pvars");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (2 != size) {
        mt_die("needs 2 ranks");
    }
    MT_CHECK(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
    MT_CHECK(MPI_T_pvar_get_num(&num));
    for (int i = 0; i < NVARS; i++) {
        found[i] = -1;
    }
    for (int idx = 0; idx < num; idx++) {
        char name[256], desc[1024];
        int nlen = sizeof(name), dlen = sizeof(desc), verb, vclass, bind, ro, cont, atomic;
        MPI_Datatype dt;
        MPI_T_enum en;

        if (MPI_SUCCESS != MPI_T_pvar_get_info(idx, name, &nlen, &verb, &vclass, &dt, &en, desc,
                                               &dlen, &bind, &ro, &cont, &atomic)) {
            continue; /* (a variable of a component that is gone) */
        }
        if (0 != strncmp(name, "btl_usnic_", 10)) {
            continue;
        }
        nusnic++;
        for (int i = 0; i < NVARS; i++) {
            if (0 != strcmp(name, names[i])) {
                continue;
            }
            found[i] = idx;
            if (dt != MPI_UNSIGNED_LONG || bind != MPI_T_BIND_NO_OBJECT || !ro || !cont ||
                vclass != (SRTT_MAX == i ? MPI_T_PVAR_CLASS_LEVEL : MPI_T_PVAR_CLASS_COUNTER) ||
                0 == dlen || '\0' == desc[0]) {
                mt_die("%s: class %d, bind %d, readonly %d, continuous %d, type %s, "
                       "description '%s'",
                       name, vclass, bind, ro, cont,
                       dt == MPI_UNSIGNED_LONG ? "unsigned long" : "other", desc);
            }
        }
    }
    for (int i = 0; i < NVARS; i++) {
        if (found[i] < 0) {
            mt_die("no performance variable %s (%d btl_usnic_ variables)", names[i], nusnic);
        }
    }
    MT_CHECK(MPI_T_pvar_session_create(&session));
    for (int i = 0; i < NVARS; i++) {
        int count = 0;
        MT_CHECK(MPI_T_pvar_handle_alloc(session, found[i], NULL, &handle[i], &count));
        if (1 != count) {
            mt_die("%s: %d values, expected 1 (the process's total)", names[i], count);
        }
    }
    read_all(session, handle, before);

    buf = mt_malloc(SIZE);
    for (int dir = 0; dir < 2; dir++) {
        for (int r = 0; r < ROUNDS; r++) {
            uint32_t seed = mt_seed(dir, (uint32_t) r, 77, 0);
            if (rank == dir) {
                mt_fill(buf, SIZE, seed);
                MT_CHECK(MPI_Send(buf, SIZE, MPI_BYTE, 1 - rank, r, MPI_COMM_WORLD));
                bytes += SIZE;
            } else {
                memset(buf, 0, SIZE);
                MT_CHECK(
                    MPI_Recv(buf, SIZE, MPI_BYTE, 1 - rank, r, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
                mt_verify(buf, SIZE, seed, "pvars exchange");
            }
        }
    }
    MT_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    read_all(session, handle, after);

    for (int i = 0; i < NVARS; i++) {
        printf("PVAR rank %d %s before %lu after %lu\n", rank, names[i], before[i], after[i]);
    }
    printf("PVARS %d\n", nusnic);
    {
        const unsigned long payload = (unsigned long) ROUNDS * SIZE;
        unsigned long tx = after[TX_BYTES] - before[TX_BYTES];
        unsigned long rx = after[RX_BYTES] - before[RX_BYTES];
        unsigned long pkts = after[TX_PKTS] - before[TX_PKTS];
        /* sent: our payload and the PML's headers and control messages
         * (a few KiB); received: the same of the peer's */
        if (tx < payload || tx > payload + payload / 4 || rx < payload ||
            rx > payload + payload / 4) {
            mt_die("tx_bytes moved by %lu, rx_bytes by %lu for %lu bytes each way", tx, rx,
                   payload);
        }
        if (pkts < payload / 65536 || after[DROP_AUTH] != before[DROP_AUTH] ||
            0 == after[SRTT_MAX]) {
            mt_die("tx_pkts moved by %lu, drop_AUTH by %lu, srtt_max_us %lu", pkts,
                   after[DROP_AUTH] - before[DROP_AUTH], after[SRTT_MAX]);
        }
    }
    for (int i = 0; i < NVARS; i++) {
        MT_CHECK(MPI_T_pvar_handle_free(session, &handle[i]));
    }
    MT_CHECK(MPI_T_pvar_session_free(&session));
    MT_CHECK(MPI_T_finalize());
    free(buf);
    mt_report_bytes(bytes);
    mt_ok("pvars");
    MPI_Finalize();
    return 0;
}
