/*
 * Two separately started jobs joined by MPI_Comm_accept / MPI_Comm_connect
 * exchange verified data over the intercommunicator (t_connect.sh starts
 * them under one ompi-server).
 *
 *   connect server PORTFILE [-t seconds]   open a port, write its name to
 *                                          PORTFILE, accept one client
 *   connect client PORTFILE [-t seconds]   wait for PORTFILE, connect
 *
 * Each side (one process each) sends every size of a list crossing the
 * BTL's protocol boundaries to the other and receives the same list from
 * it, both directions at once, the send buffers refilled with a new
 * pattern every round; every received byte is compared.  Prints
 *   connect: <role> pid=P btl=B verdict OK rounds=R
 * and the bytes it received ("BYTES n", the server only), or the first
 * mismatch.  A watchdog (-t, default 50 s) aborts a stuck run, naming its
 * phase.
 */
#include <mpi.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *volatile phase = "start";

static void watchdog(int sig)
{
    char msg[160];
    int n = snprintf(msg, sizeof(msg), "ERROR connect: watchdog: stuck in phase '%s'\n", phase);
    (void) sig;
    if (n > 0) {
        ssize_t w = write(2, msg, (size_t) n);
        (void) w;
    }
    _exit(3);
}

static uint8_t pattern(uint64_t seed, size_t i)
{
    uint64_t x = seed + 0x9E3779B97F4A7C15ull * (i + 1);
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 32;
    return (uint8_t) x;
}

static void fill(uint8_t *b, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) {
        b[i] = pattern(seed, i);
    }
}

int main(int argc, char **argv)
{
    static const size_t sizes[] = {
        0,    1,    7,     8,     63,    64,       1000,           4095,          4096,
        8192, 9000, 65507, 65536, 65537, 1u << 18, (1u << 20) + 1, (4u << 20) + 3};
    enum {
        NSIZES = sizeof(sizes) / sizeof(sizes[0]),
        ROUNDS = 3
    };
    char port[MPI_MAX_PORT_NAME + 1];
    char btl[128] = "?";
    MPI_Comm inter;
    uint8_t *sbuf[NSIZES], *rbuf[NSIZES];
    MPI_Request req[2 * NSIZES];
    int server, timeout = 50, bad = 0;
    unsigned long long bytes = 0;
    const char *portfile;

    if (argc < 3 || (0 != strcmp(argv[1], "server") && 0 != strcmp(argv[1], "client"))) {
        fprintf(stderr, "usage: %s server|client PORTFILE [-t seconds]\n", argv[0]);
        return 2;
    }
    server = (0 == strcmp(argv[1], "server"));
    portfile = argv[2];
    if (argc >= 5 && 0 == strcmp(argv[3], "-t")) {
        timeout = atoi(argv[4]);
    }
    signal(SIGALRM, watchdog);
    alarm((unsigned) timeout);

    phase = "MPI_Init";
    MPI_Init(&argc, &argv);
    {
        const char *e = getenv("OMPI_MCA_btl");
        if (NULL != e) {
            snprintf(btl, sizeof(btl), "%s", e);
        }
    }

    memset(port, 0, sizeof(port));
    if (server) {
        char tmp[4096];
        FILE *fp;

        phase = "MPI_Open_port";
        MPI_Open_port(MPI_INFO_NULL, port);
        snprintf(tmp, sizeof(tmp), "%s.tmp", portfile);
        fp = fopen(tmp, "w");
        if (NULL == fp || fprintf(fp, "%s\n", port) < 0 || 0 != fclose(fp) ||
            0 != rename(tmp, portfile)) {
            fprintf(stderr, "ERROR connect: cannot write %s\n", portfile);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        phase = "MPI_Comm_accept";
        MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter);
    } else {
        FILE *fp = NULL;

        phase = "waiting for the port file";
        while (NULL == (fp = fopen(portfile, "r"))) {
            usleep(20000);
        }
        if (NULL == fgets(port, sizeof(port), fp)) {
            fprintf(stderr, "ERROR connect: cannot read %s\n", portfile);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        fclose(fp);
        port[strcspn(port, "\n")] = '\0';
        phase = "MPI_Comm_connect";
        MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter);
    }

    for (int s = 0; s < NSIZES; s++) {
        sbuf[s] = malloc(sizes[s] + 1);
        rbuf[s] = malloc(sizes[s] + 1);
        if (NULL == sbuf[s] || NULL == rbuf[s]) {
            fprintf(stderr, "ERROR connect: out of memory\n");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    phase = "exchange";
    for (int r = 0; r < ROUNDS && !bad; r++) {
        for (int s = 0; s < NSIZES; s++) {
            /* what this side sends in round r: seeded by round, size, role */
            fill(sbuf[s], sizes[s], ((uint64_t) r << 40) ^ ((uint64_t) s << 8) ^ (uint64_t) server);
            memset(rbuf[s], 0xEE, sizes[s] + 1);
            MPI_Irecv(rbuf[s], (int) sizes[s], MPI_BYTE, 0, s, inter, &req[2 * s]);
            MPI_Isend(sbuf[s], (int) sizes[s], MPI_BYTE, 0, s, inter, &req[2 * s + 1]);
        }
        MPI_Waitall(2 * NSIZES, req, MPI_STATUSES_IGNORE);
        for (int s = 0; s < NSIZES && !bad; s++) {
            uint64_t seed = ((uint64_t) r << 40) ^ ((uint64_t) s << 8) ^ (uint64_t) !server;
            for (size_t i = 0; i < sizes[s]; i++) {
                if (rbuf[s][i] != pattern(seed, i)) {
                    fprintf(
                        stderr,
                        "ERROR connect: %s pid=%d round %d: %zu-byte message: byte %zu is 0x%02x, "
                        "expected 0x%02x\n",
                        argv[1], (int) getpid(), r, sizes[s], i, rbuf[s][i], pattern(seed, i));
                    bad = 1;
                    break;
                }
            }
            if (!bad && 0xEE != rbuf[s][sizes[s]]) {
                fprintf(stderr, "ERROR connect: %zu-byte message written past its end\n", sizes[s]);
                bad = 1;
            }
            bytes += sizes[s];
        }
    }
    phase = "MPI_Comm_disconnect";
    MPI_Comm_disconnect(&inter);
    if (server) {
        MPI_Close_port(port);
    }
    for (int s = 0; s < NSIZES; s++) {
        free(sbuf[s]);
        free(rbuf[s]);
    }
    printf("connect: %s pid=%d btl=%s verdict %s rounds=%d\n", argv[1], (int) getpid(), btl,
           bad ? "FAILED" : "OK", ROUNDS);
    if (server && !bad) {
        printf("BYTES %llu\n", bytes);
    }
    fflush(stdout);
    phase = "MPI_Finalize";
    MPI_Finalize();
    return bad ? 1 : 0;
}
