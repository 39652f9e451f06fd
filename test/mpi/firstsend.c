/*
 * firstsend: the first message to a peer.
 *
 * Right after MPI_Init, before any other traffic, rank 0 sends one message
 * of -n BYTES to rank -p PEER (1), which checks every byte.
 *
 * Without -l: the peer computes outside MPI (sleeps) for -a SECONDS (3)
 * before it receives; rank 0 sends with MPI_Send and prints how long the
 * call took: "FIRSTSEND: MPI_Send of N bytes returned after X s, the peer
 * away for S s".  The other ranks only make the job as large as wanted
 * (t_incast case 6 runs it with 4: session 32 tried a share of the peer's
 * buffer before its first ACK that depended on the job's size,
 * docs/perf-incast.md).
 *
 * With -l LOCAL: rank 0 first sends the peer a message of 64 bytes
 * (MPI_Send), then starts one of MID_LEN (4000) bytes and the message with
 * MPI_Isend, then exchanges -k K (200) messages of 1 KiB with rank LOCAL
 * (each way, data checked), then waits for both, and prints "FIRSTSEND: 64
 * bytes to rank P sent after W s; MPI_Isend of N bytes returned after X s;
 * K exchanges with rank L done after Y s; the message done after Z s" (all
 * from before the first send).  t_connectivity_netns puts the peer behind
 * an MTU black hole, whose check takes seconds, and LOCAL on rank 0's
 * host: the check must hold neither the small message, nor the calls, nor
 * the exchanges (the MID_LEN one, cut for the full datagram size before
 * the verdict, then goes in parts).
 */
#include "mpitest.h"

#include <stdbool.h>
#include <unistd.h>

#define EXCH_LEN 1024
#define MID_LEN 4000

/* k exchanges of EXCH_LEN bytes with `other`: `first` sends first */
static void exchange(int other, int k, bool first)
{
    uint8_t out[EXCH_LEN], in[EXCH_LEN];
    int me = mt_rank();

    for (int i = 0; i < k; i++) {
        MPI_Status st;
        mt_fill(out, sizeof(out), mt_seed((uint32_t) me, (uint32_t) i, EXCH_LEN, 9));
        if (first) {
            MT_CHECK(MPI_Send(out, EXCH_LEN, MPI_BYTE, other, 9, MPI_COMM_WORLD));
        }
        memset(in, 0, sizeof(in));
        MT_CHECK(MPI_Recv(in, EXCH_LEN, MPI_BYTE, other, 9, MPI_COMM_WORLD, &st));
        mt_check_bytes(&st, EXCH_LEN, "exchange");
        mt_verify(in, EXCH_LEN, mt_seed((uint32_t) other, (uint32_t) i, EXCH_LEN, 9), "exchange");
        if (!first) {
            MT_CHECK(MPI_Send(out, EXCH_LEN, MPI_BYTE, other, 9, MPI_COMM_WORLD));
        }
    }
}

int main(int argc, char **argv)
{
    int rank, np, c, away = -1, peer = 1, local = -1, k = 200;
    size_t len = 120000;
    uint8_t *buf;

    MPI_Init(&argc, &argv);
    mt_setup("firstsend");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    while ((c = getopt(argc, argv, "a:n:p:l:k:")) != -1) {
        switch (c) {
        case 'a':
            away = atoi(optarg);
            break;
        case 'n':
            len = (size_t) strtoul(optarg, NULL, 0);
            break;
        case 'p':
            peer = atoi(optarg);
            break;
        case 'l':
            local = atoi(optarg);
            break;
        case 'k':
            k = atoi(optarg);
            break;
        default:
            mt_die("usage: firstsend [-a SECONDS] [-n BYTES] [-p PEER] [-l LOCAL [-k K]]");
        }
    }
    if (away < 0) {
        away = (local < 0) ? 3 : 0;
    }
    if (np < 2 || len < 1 || len > (size_t) 1 << 30 || peer < 1 || peer >= np ||
        (local < 0 && away < 1) || (local >= 0 && (local < 1 || local >= np || local == peer)) ||
        k < 1) {
        mt_die("needs 2 or more ranks, -a >= 1 without -l, -n in 1 .. 2^30, -p and -l distinct "
               "ranks other than 0, -k >= 1");
    }
    buf = mt_malloc(len);
    if (0 == rank) {
        double t0, t1, t2, t3;
        mt_fill(buf, len, mt_seed(0, (uint32_t) peer, (uint32_t) len, 7));
        t0 = MPI_Wtime();
        if (local < 0) {
            MT_CHECK(MPI_Send(buf, (int) len, MPI_BYTE, peer, 7, MPI_COMM_WORLD));
            t1 = MPI_Wtime();
            printf("FIRSTSEND: MPI_Send of %zu bytes returned after %.3f s, the peer away for "
                   "%d s\n",
                   len, t1 - t0, away);
        } else {
            MPI_Request req[2];
            uint8_t small[64], mid[MID_LEN];
            double ts;
            mt_fill(small, sizeof(small), mt_seed(0, (uint32_t) peer, 64, 8));
            mt_fill(mid, sizeof(mid), mt_seed(0, (uint32_t) peer, MID_LEN, 10));
            MT_CHECK(MPI_Send(small, 64, MPI_BYTE, peer, 8, MPI_COMM_WORLD));
            ts = MPI_Wtime();
            MT_CHECK(MPI_Isend(mid, MID_LEN, MPI_BYTE, peer, 10, MPI_COMM_WORLD, &req[0]));
            MT_CHECK(MPI_Isend(buf, (int) len, MPI_BYTE, peer, 7, MPI_COMM_WORLD, &req[1]));
            t1 = MPI_Wtime();
            exchange(local, k, true);
            t2 = MPI_Wtime();
            MT_CHECK(MPI_Waitall(2, req, MPI_STATUSES_IGNORE));
            t3 = MPI_Wtime();
            printf("FIRSTSEND: 64 bytes to rank %d sent after %.3f s; MPI_Isend of %zu bytes "
                   "returned after %.3f s; %d exchanges with rank %d done after %.3f s; the "
                   "message done after %.3f s\n",
                   peer, ts - t0, len, t1 - t0, k, local, t2 - t0, t3 - t0);
        }
        fflush(stdout);
    } else if (peer == rank) {
        MPI_Status st;
        if (away > 0) {
            sleep((unsigned) away); /* computing: no progress, no ACKs */
        }
        if (local >= 0) {
            uint8_t small[64] = {0}, mid[MID_LEN] = {0};
            MT_CHECK(MPI_Recv(small, 64, MPI_BYTE, 0, 8, MPI_COMM_WORLD, &st));
            mt_check_bytes(&st, 64, "small message");
            mt_verify(small, 64, mt_seed(0, (uint32_t) peer, 64, 8), "small message");
            MT_CHECK(MPI_Recv(mid, MID_LEN, MPI_BYTE, 0, 10, MPI_COMM_WORLD, &st));
            mt_check_bytes(&st, MID_LEN, "mid-sized message");
            mt_verify(mid, MID_LEN, mt_seed(0, (uint32_t) peer, MID_LEN, 10), "mid-sized message");
        }
        memset(buf, 0, len);
        MT_CHECK(MPI_Recv(buf, (int) len, MPI_BYTE, 0, 7, MPI_COMM_WORLD, &st));
        mt_check_bytes(&st, len, "first message");
        mt_verify(buf, len, mt_seed(0, (uint32_t) peer, (uint32_t) len, 7), "first message");
    } else if (local == rank) {
        exchange(0, k, false);
    }
    free(buf);
    mt_report_bytes(0 == rank ? len : 0);
    mt_ok("firstsend");
    MPI_Finalize();
    return 0;
}
