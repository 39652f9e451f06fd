/*
 * usnic-td, part 1: the provider entry point, configuration, contract
 * violations and the log, the control file (link events, injected
 * completion errors), fi_getinfo, the fabric with its usnic extension, and
 * event queues.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/stat.h>

#include "usnic_td.h"

struct td_config td;
pthread_mutex_t td_lock = PTHREAD_MUTEX_INITIALIZER;
struct td_domain *td_domains;

static bool td_loaded;

/* ---------------------------------------------------------------- config */

static unsigned env_uint(const char *name, unsigned dflt)
{
    const char *v = getenv(name);
    char *end;
    unsigned long n;

    if (NULL == v || '\0' == *v) {
        return dflt;
    }
    n = strtoul(v, &end, 0);
    return ('\0' == *end) ? (unsigned) n : dflt;
}

/* One device: name=ip/prefix[:ifname[:mtu[:speed_mbps]]] */
static bool parse_dev(char *spec, struct td_dev *d)
{
    char *eq = strchr(spec, '='), *slash, *f;
    struct in_addr in;
    unsigned prefix = 8;

    memset(d, 0, sizeof(*d));
    if (NULL == eq || eq == spec || (size_t) (eq - spec) >= sizeof(d->name)) {
        return false;
    }
    memcpy(d->name, spec, (size_t) (eq - spec));
    spec = eq + 1;
    f = strchr(spec, ':');
    if (NULL != f) {
        *f++ = '\0';
    }
    slash = strchr(spec, '/');
    if (NULL != slash) {
        *slash = '\0';
        prefix = (unsigned) atoi(slash + 1);
    }
    if (1 != inet_pton(AF_INET, spec, &in) || prefix < 1 || prefix > 32) {
        return false;
    }
    d->ip_be = in.s_addr;
    d->prefixlen = prefix;
    d->mask_be = htonl(0xffffffffu << (32 - prefix));
    snprintf(d->ifname, sizeof(d->ifname), "lo");
    d->mtu = 1500;
    d->speed = 40000;
    for (int i = 0; NULL != f && '\0' != *f && i < 3; i++) {
        char *next = strchr(f, ':');
        if (NULL != next) {
            *next++ = '\0';
        }
        if (0 == i) {
            snprintf(d->ifname, sizeof(d->ifname), "%s", f);
        } else if (1 == i) {
            d->mtu = (uint32_t) atoi(f);
        } else {
            d->speed = (uint32_t) atoi(f);
        }
        f = next;
    }
    if (d->mtu < 576 || d->mtu > 9000) {
        return false;
    }
    /* a locally administered MAC derived from the address */
    d->mac[0] = 0x02;
    d->mac[1] = 0x25;
    memcpy(&d->mac[2], &d->ip_be, 4);
    d->link_up = true;
    d->listed = true;
    return true;
}

void td_config_load(void)
{
    const char *vfs = getenv("USNIC_TD_VFS");
    const char *strict = getenv("USNIC_TD_STRICT");
    const char *desc = getenv("USNIC_TD_DESC");
    char *copy, *tok, *save = NULL;

    memset(&td, 0, sizeof(td));
    copy = strdup((NULL != vfs && '\0' != *vfs) ? vfs : "usnic_0=127.0.0.1/8:lo:1500:40000");
    for (tok = strtok_r(copy, ",", &save); NULL != tok && td.ndev < TD_MAX_DEVS;
         tok = strtok_r(NULL, ",", &save)) {
        struct td_dev *d = &td.dev[td.ndev];
        if (!parse_dev(tok, d)) {
            fprintf(stderr, "usnic-td: USNIC_TD_VFS: cannot parse \"%s\", ignored\n", tok);
        } else if (!td_addr_allowed(d->ip_be)) {
            fprintf(stderr, "usnic-td: USNIC_TD_VFS: %s is not in 127.0.0.0/8, ignored\n", d->name);
        } else {
            td.ndev++;
        }
    }
    free(copy);
    td.num_vf = env_uint("USNIC_TD_NUM_VF", 16);
    td.qp_per_vf = env_uint("USNIC_TD_QP_PER_VF", 6);
    td.cq_per_vf = env_uint("USNIC_TD_CQ_PER_VF", 6);
    td.strict = TD_ABORT;
    if (NULL != strict && 0 == strcmp(strict, "error")) {
        td.strict = TD_ERROR;
    } else if (NULL != strict && 0 == strcmp(strict, "warn")) {
        td.strict = TD_WARN;
    }
    td.require_prefix = 0 != env_uint("USNIC_TD_REQUIRE_PREFIX", 1);
    td.desc_check = !(NULL != desc && 0 == strcmp(desc, "any"));
    td.linkdown_error = !(NULL != getenv("USNIC_TD_LINKDOWN_SEND") &&
                          0 == strcmp(getenv("USNIC_TD_LINKDOWN_SEND"), "drop"));
    td.verbose = 0 != env_uint("USNIC_TD_VERBOSE", 0);
    td.log_path = getenv("USNIC_TD_LOG");
    td.control_path = getenv("USNIC_TD_CONTROL");
}

bool td_addr_allowed(uint32_t ip_be)
{
    return 127 == (ntohl(ip_be) >> 24);
}

struct td_dev *td_dev_by_name(const char *name)
{
    for (int i = 0; i < td.ndev; i++) {
        if (0 == strcmp(td.dev[i].name, name)) {
            return &td.dev[i];
        }
    }
    return NULL;
}

/* ------------------------------------------------------- log, violations */

void td_log(const char *fmt, ...)
{
    va_list ap;
    FILE *f;

    if (NULL == td.log_path) {
        return;
    }
    f = fopen(td.log_path, "a");
    if (NULL == f) {
        return;
    }
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fclose(f);
}

int td_violation(struct td_domain *dom, const char *fmt, ...)
{
    static const char *mode[] = {"warn", "error", "abort"};
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (NULL != dom) {
        dom->c.violations++;
    }
    fprintf(stderr, "USNIC-TD VIOLATION: %s [pid %d, %s, USNIC_TD_STRICT=%s]\n", msg,
            (int) getpid(), NULL != dom ? dom->dev->name : "-", mode[td.strict]);
    fflush(stderr);
    td_log("USNIC-TD VIOLATION: %s [pid %d, %s]\n", msg, (int) getpid(),
           NULL != dom ? dom->dev->name : "-");
    if (TD_ABORT == td.strict) {
        /* libpsm2 and libinfinipath, loaded by libfabric's psm providers,
         * catch SIGABRT and exit(1): die by the signal itself. */
        signal(SIGABRT, SIG_DFL);
        fflush(NULL); /* keep what the application has printed */
        abort();
    }
    return TD_ERROR == td.strict ? -FI_EINVAL : 0;
}

/* ---------------------------------------------------------- control file */

static off_t ctl_offset;
static struct timespec ctl_mtime;
static uint64_t ctl_last_ns;
static bool ctl_started;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

static void set_link(struct td_dev *dev, bool up)
{
    if (dev->link_up == up) {
        return;
    }
    dev->link_up = up;
    td_log("usnic-td pid=%d: %s link %s\n", (int) getpid(), dev->name, up ? "up" : "down");
    if (td.verbose) {
        fprintf(stderr, "usnic-td: %s link %s\n", dev->name, up ? "up" : "down");
    }
    for (struct td_domain *d = td_domains; NULL != d; d = d->next) {
        struct fi_eq_entry ent = {0};
        if (d->dev != dev || NULL == d->eq) {
            continue;
        }
        ent.fid = &d->fid.fid;
        ent.context = d->fid.fid.context;
        ent.data = up ? BTL_USNIC_EQ_LINK_UP : BTL_USNIC_EQ_LINK_DOWN;
        td_eq_post(d->eq, BTL_USNIC_EQ_LINKSTATE, &ent, sizeof(ent), false);
    }
}

/* One line of the control file; `replay` is true for the lines that were
 * already there when this process first read the file. */
static void ctl_line(char *line, bool replay)
{
    char *save = NULL, *cmd = strtok_r(line, " \t", &save);
    char *name = strtok_r(NULL, " \t", &save);
    struct td_dev *dev;

    if (NULL == cmd || '#' == cmd[0] || NULL == name) {
        return;
    }
    dev = td_dev_by_name(name);
    if (NULL == dev) {
        return;
    }
    if (0 == strcmp(cmd, "link")) {
        const char *st = strtok_r(NULL, " \t", &save);
        if (NULL != st) {
            set_link(dev, 0 == strcmp(st, "up"));
        }
    } else if (0 == strcmp(cmd, "cqerr") && !replay) {
        const char *n = strtok_r(NULL, " \t", &save);
        const char *w;
        dev->cqerr_left = (NULL != n) ? (unsigned) atoi(n) : 1;
        dev->cqerr_dir = TD_DIR_SEND;
        dev->cqerr_kind = TD_ERR_INTERNAL;
        while (NULL != (w = strtok_r(NULL, " \t", &save))) {
            if (0 == strcmp(w, "recv")) {
                dev->cqerr_dir = TD_DIR_RECV;
            } else if (0 == strcmp(w, "any")) {
                dev->cqerr_dir = TD_DIR_ANY;
            } else if (0 == strcmp(w, "crc")) {
                dev->cqerr_kind = TD_ERR_CRC;
            } else if (0 == strcmp(w, "trunc")) {
                dev->cqerr_kind = TD_ERR_TRUNC;
            } else if (0 == strcmp(w, "timeout")) {
                dev->cqerr_kind = TD_ERR_TIMEOUT;
            }
        }
        td_log("usnic-td pid=%d: %s: next %u %s completions fail\n", (int) getpid(), dev->name,
               dev->cqerr_left, dev->cqerr_dir == TD_DIR_SEND ? "send" : "recv/any");
    }
}

/* Apply the control file's new complete lines.  Called (rate limited) from
 * CQ and EQ reads and posts, and from the watcher thread. */
void td_control_poll(bool force)
{
    struct stat st;
    uint64_t t;
    FILE *f;
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    bool replay;

    if (NULL == td.control_path) {
        return;
    }
    t = now_ns();
    if (!force && t - ctl_last_ns < 2000000u) {
        return;
    }
    if (0 != pthread_mutex_trylock(&td_lock)) {
        if (!force) {
            return;
        }
        pthread_mutex_lock(&td_lock);
    }
    ctl_last_ns = t;
    /* what the file holds at the first look is history: link states apply,
     * error injections were meant for someone else */
    replay = !ctl_started;
    ctl_started = true;
    if (0 != stat(td.control_path, &st) ||
        (st.st_size == ctl_offset && st.st_mtim.tv_sec == ctl_mtime.tv_sec &&
         st.st_mtim.tv_nsec == ctl_mtime.tv_nsec)) {
        pthread_mutex_unlock(&td_lock);
        return;
    }
    if (st.st_size < ctl_offset) {
        ctl_offset = 0; /* rewritten: start over */
    }
    ctl_mtime = st.st_mtim;
    f = fopen(td.control_path, "r");
    if (NULL != f && 0 == fseeko(f, ctl_offset, SEEK_SET)) {
        while ((n = getline(&line, &cap, f)) > 0 && '\n' == line[n - 1]) {
            ctl_offset += n;
            line[n - 1] = '\0';
            ctl_line(line, replay);
        }
    }
    free(line);
    if (NULL != f) {
        fclose(f);
    }
    pthread_mutex_unlock(&td_lock);
}

static const char *errkind_text[] = {"CRC error", "truncation", "timeout", "internal error"};

/* Should this completion fail by injection?  Fills the usnic code. */
int td_take_cqerr(struct td_dev *dev, bool is_send, int *prov_errno, const char **why)
{
    static const int code[] = {FI_ECRC, FI_ETRUNC, FI_ETIMEDOUT, FI_EOTHER};
    int hit = 0;

    pthread_mutex_lock(&td_lock);
    if (dev->cqerr_left > 0 &&
        (TD_DIR_ANY == dev->cqerr_dir || (is_send == (TD_DIR_SEND == dev->cqerr_dir)))) {
        dev->cqerr_left--;
        *prov_errno = code[dev->cqerr_kind];
        *why = errkind_text[dev->cqerr_kind];
        hit = 1;
    }
    pthread_mutex_unlock(&td_lock);
    return hit;
}

/* The watcher thread: applies the control file while the process sleeps
 * on an EQ's file descriptor. */
static pthread_t watch_thread;
static bool watch_running, watch_stop;

static void *watch_main(void *arg)
{
    (void) arg;
    while (!__atomic_load_n(&watch_stop, __ATOMIC_ACQUIRE)) {
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
        td_control_poll(false);
    }
    return NULL;
}

static void watch_forget(void)
{
    watch_running = false; /* a forked child has no watcher thread */
}

static void watch_start(void)
{
    static bool atfork_done;

    if (NULL == td.control_path || watch_running) {
        return;
    }
    if (!atfork_done) {
        pthread_atfork(NULL, NULL, watch_forget);
        atfork_done = true;
    }
    watch_stop = false;
    watch_running = (0 == pthread_create(&watch_thread, NULL, watch_main, NULL));
}

static void td_cleanup(void)
{
    if (watch_running) {
        __atomic_store_n(&watch_stop, true, __ATOMIC_RELEASE);
        pthread_join(watch_thread, NULL);
        watch_running = false;
    }
}

/* ----------------------------------------------------------------- EQs */

int td_eq_post(struct td_eq *eq, uint32_t event, const void *entry, size_t len, bool is_err)
{
    struct td_eq_ev *ev;

    pthread_mutex_lock(&eq->lock);
    if (eq->count == eq->size || len > sizeof(ev->u)) {
        pthread_mutex_unlock(&eq->lock);
        td_log("usnic-td pid=%d: EQ overrun, event %u lost\n", (int) getpid(), event);
        return -FI_EAGAIN;
    }
    ev = &eq->ring[(eq->head + eq->count) % eq->size];
    ev->event = event;
    ev->is_err = is_err;
    ev->len = len;
    memcpy(&ev->u, entry, len);
    eq->count++;
    if (eq->wait_fd) {
        uint64_t one = 1;
        (void) !write(eq->fd, &one, sizeof(one));
    }
    pthread_mutex_unlock(&eq->lock);
    return 0;
}

static void eq_pop(struct td_eq *eq)
{
    eq->head = (eq->head + 1) % eq->size;
    eq->count--;
    if (eq->wait_fd) {
        uint64_t v;
        (void) !read(eq->fd, &v, sizeof(v));
    }
}

static ssize_t eq_read(struct fid_eq *feq, uint32_t *event, void *buf, size_t len, uint64_t flags)
{
    struct td_eq *eq = container_of(feq, struct td_eq, fid);
    struct td_eq_ev *ev;
    ssize_t ret;

    td_control_poll(false);
    pthread_mutex_lock(&eq->lock);
    if (0 == eq->count) {
        ret = -FI_EAGAIN;
    } else if ((ev = &eq->ring[eq->head])->is_err) {
        ret = -FI_EAVAIL;
    } else if (len < ev->len) {
        ret = -FI_ETOOSMALL;
    } else {
        if (NULL != event) {
            *event = ev->event;
        }
        memcpy(buf, &ev->u, ev->len);
        ret = (ssize_t) ev->len;
        if (0 == (flags & FI_PEEK)) {
            eq_pop(eq);
        }
    }
    pthread_mutex_unlock(&eq->lock);
    return ret;
}

static ssize_t eq_readerr(struct fid_eq *feq, struct fi_eq_err_entry *buf, uint64_t flags)
{
    struct td_eq *eq = container_of(feq, struct td_eq, fid);
    ssize_t ret = -FI_EAGAIN;

    pthread_mutex_lock(&eq->lock);
    if (eq->count > 0 && eq->ring[eq->head].is_err) {
        void *data = buf->err_data;
        *buf = eq->ring[eq->head].u.err;
        buf->err_data = data;
        buf->err_data_size = 0;
        ret = sizeof(*buf);
        if (0 == (flags & FI_PEEK)) {
            eq_pop(eq);
        }
    }
    pthread_mutex_unlock(&eq->lock);
    return ret;
}

static ssize_t eq_write(struct fid_eq *feq, uint32_t event, const void *buf, size_t len,
                        uint64_t flags)
{
    struct td_eq *eq = container_of(feq, struct td_eq, fid);
    int ret;

    (void) flags;
    ret = td_eq_post(eq, event, buf, len, false);
    return 0 == ret ? (ssize_t) len : ret;
}

static ssize_t eq_sread(struct fid_eq *feq, uint32_t *event, void *buf, size_t len, int timeout,
                        uint64_t flags)
{
    struct td_eq *eq = container_of(feq, struct td_eq, fid);
    uint64_t deadline = now_ns() + (uint64_t) (timeout < 0 ? 0 : timeout) * 1000000u;

    for (;;) {
        ssize_t ret = eq_read(feq, event, buf, len, flags);
        struct pollfd pfd = {eq->fd, POLLIN, 0};
        if (-FI_EAGAIN != ret) {
            return ret;
        }
        if (timeout >= 0 && now_ns() >= deadline) {
            return -FI_EAGAIN;
        }
        (void) poll(&pfd, 1, 5); /* wakes for events; 5 ms for the control file */
    }
}

static const char *eq_strerror(struct fid_eq *feq, int prov_errno, const void *err_data, char *buf,
                               size_t len)
{
    (void) feq;
    (void) err_data;
    if (NULL != buf && len > 0) {
        snprintf(buf, len, "%s", fi_strerror(prov_errno));
        return buf;
    }
    return fi_strerror(prov_errno);
}

static int eq_close(struct fid *fid)
{
    struct td_eq *eq = container_of(fid, struct td_eq, fid.fid);

    if (eq->refs > 0) {
        return -FI_EBUSY;
    }
    eq->fab->refs--;
    if (eq->wait_fd) {
        close(eq->fd);
    }
    pthread_mutex_destroy(&eq->lock);
    free(eq->ring);
    free(eq);
    return 0;
}

static int eq_control(struct fid *fid, int command, void *arg)
{
    struct td_eq *eq = container_of(fid, struct td_eq, fid.fid);

    if (FI_GETWAIT != command) {
        return -FI_ENOSYS;
    }
    if (!eq->wait_fd) {
        return -FI_ENODATA;
    }
    *(int *) arg = eq->fd;
    return 0;
}

static struct fi_ops eq_fi_ops = {
    .size = sizeof(struct fi_ops),
    .close = eq_close,
    .bind = NULL,
    .control = eq_control,
};

int td_eq_open(struct fid_fabric *fabric, struct fi_eq_attr *attr, struct fid_eq **feq,
               void *context)
{
    struct td_fabric *fab = container_of(fabric, struct td_fabric, fid);
    static struct fi_ops_eq ops_rw, ops_ro;
    struct td_eq *eq;

    switch (attr->wait_obj) {
    case FI_WAIT_NONE:
        break;
    case FI_WAIT_UNSPEC:
        attr->wait_obj = FI_WAIT_FD; /* as the real provider */
        break;
    case FI_WAIT_FD:
        break;
    default:
        return -FI_ENOSYS; /* FI_WAIT_SET and others: not emulated */
    }
    eq = calloc(1, sizeof(*eq));
    if (NULL == eq) {
        return -FI_ENOMEM;
    }
    if (0 == attr->size) {
        attr->size = TD_EQ_DFLT_SIZE;
    }
    eq->size = attr->size;
    eq->ring = calloc(eq->size, sizeof(*eq->ring));
    eq->wait_fd = (FI_WAIT_FD == attr->wait_obj);
    eq->fd = eq->wait_fd ? eventfd(0, EFD_NONBLOCK | EFD_SEMAPHORE) : -1;
    if (NULL == eq->ring || (eq->wait_fd && eq->fd < 0)) {
        free(eq->ring);
        free(eq);
        return -FI_ENOMEM;
    }
    pthread_mutex_init(&eq->lock, NULL);
    ops_rw = (struct fi_ops_eq){.size = sizeof(struct fi_ops_eq),
                                .read = eq_read,
                                .readerr = eq_readerr,
                                .write = eq_write,
                                .sread = eq_sread,
                                .strerror = eq_strerror};
    ops_ro = ops_rw;
    ops_ro.write = NULL;
    eq->fid.fid.fclass = FI_CLASS_EQ;
    eq->fid.fid.context = context;
    eq->fid.fid.ops = &eq_fi_ops;
    /* fi_eq_write only for an EQ opened with FI_WRITE, as the real one */
    eq->fid.ops = (attr->flags & FI_WRITE) ? &ops_rw : &ops_ro;
    eq->fab = fab;
    fab->refs++;
    if (eq->wait_fd) {
        watch_start();
    }
    *feq = &eq->fid;
    return 0;
}

/* ------------------------------------------------------ usnic extension */

static int ext_getinfo(uint32_t version, struct fid_fabric *fabric, struct fi_usnic_info *info)
{
    struct td_fabric *fab = container_of(fabric, struct td_fabric, fid);
    struct td_dev *d = fab->dev;
    static const char *capname[] = {"USD_CAP_CQ_SHARING", "USD_CAP_MAP_PER_RES", "USD_CAP_PIO",
                                    "USD_CAP_CQ_INTR", "USD_CAP_GRP_INTR"};
    const int ncap = (int) (sizeof(capname) / sizeof(capname[0]));

    td_control_poll(true);
    if (1 == version) {
        struct fi_usnic_info_v1 *v1 = &info->ui.v1;
        info->ui_version = 1;
        v1->ui_link_speed = d->speed;
        v1->ui_netmask_be = d->mask_be;
        snprintf(v1->ui_ifname, sizeof(v1->ui_ifname), "%s", d->ifname);
        v1->ui_num_vf = td.num_vf;
        v1->ui_qp_per_vf = td.qp_per_vf;
        v1->ui_cq_per_vf = td.cq_per_vf;
        return 0;
    }
    if (2 == version) {
        struct fi_usnic_info_v2 *v2 = &info->ui.v2;
        struct fi_usnic_cap **caps = calloc((size_t) ncap + 1, sizeof(*caps));
        if (NULL == caps) {
            return -FI_ENOMEM;
        }
        for (int i = 0; i < ncap; i++) {
            caps[i] = calloc(1, sizeof(**caps));
            if (NULL == caps[i]) {
                while (i-- > 0) {
                    free(caps[i]);
                }
                free(caps);
                return -FI_ENOMEM;
            }
            caps[i]->uc_capability = capname[i];
            caps[i]->uc_present = (i < 2); /* no PIO, no interrupts: nothing to map */
        }
        memset(v2, 0, sizeof(*v2));
        info->ui_version = 2;
        v2->ui_link_speed = d->speed;
        v2->ui_netmask_be = d->mask_be;
        snprintf(v2->ui_ifname, sizeof(v2->ui_ifname), "%s", d->ifname);
        v2->ui_num_vf = td.num_vf;
        v2->ui_qp_per_vf = td.qp_per_vf;
        v2->ui_cq_per_vf = td.cq_per_vf;
        snprintf(v2->ui_devname, sizeof(v2->ui_devname), "%s", d->name);
        memcpy(v2->ui_mac_addr, d->mac, sizeof(v2->ui_mac_addr));
        v2->ui_ipaddr_be = d->ip_be;
        v2->ui_prefixlen = d->prefixlen;
        v2->ui_mtu = d->mtu;
        v2->ui_link_up = d->link_up ? 1 : 0;
        v2->ui_vendor_id = TD_VENDOR_CISCO;
        v2->ui_vendor_part_id = 207;
        v2->ui_device_id = TD_DEVICE_ID;
        snprintf(v2->ui_firmware, sizeof(v2->ui_firmware), "usnic-td");
        v2->ui_intr_per_vf = 4;
        v2->ui_max_cq = td.num_vf * td.cq_per_vf;
        v2->ui_max_qp = td.num_vf * td.qp_per_vf;
        v2->ui_max_cqe = TD_MAX_CQE;
        v2->ui_max_send_credits = TD_MAX_CREDITS;
        v2->ui_max_recv_credits = TD_MAX_CREDITS;
        v2->ui_nicname = "VIC 1340";
        v2->ui_pid = "UCSB-MLOM-40G-03";
        v2->ui_caps = caps;
        return 0;
    }
    return -FI_EINVAL;
}

static struct fi_usnic_ops_fabric ext_fabric_ops = {
    .size = sizeof(struct fi_usnic_ops_fabric),
    .getinfo = ext_getinfo,
};

static int fabric_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops,
                           void *context)
{
    (void) fid;
    (void) flags;
    (void) context;
    if (0 != strcmp(name, FI_USNIC_FABRIC_OPS_1)) {
        return -FI_EINVAL;
    }
    *ops = &ext_fabric_ops;
    return 0;
}

/* --------------------------------------------------------------- fabric */

static void fabric_name(uint32_t version, const struct td_dev *d, char *buf, size_t len)
{
    if (FI_VERSION_GE(version, FI_VERSION(1, 4))) {
        struct in_addr net = {d->ip_be & d->mask_be};
        char a[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &net, a, sizeof(a));
        snprintf(buf, len, "%s/%u", a, d->prefixlen);
    } else {
        snprintf(buf, len, "%s", d->name);
    }
}

static struct td_dev *dev_by_fabric_name(const char *name)
{
    char buf[64];

    for (int i = 0; i < td.ndev; i++) {
        fabric_name(strchr(name, '/') ? FI_VERSION(1, 4) : FI_VERSION(1, 3), &td.dev[i], buf,
                    sizeof(buf));
        if (td.dev[i].listed && 0 == strcmp(buf, name)) {
            return &td.dev[i];
        }
    }
    return NULL;
}

static int fabric_close(struct fid *fid)
{
    struct td_fabric *fab = container_of(fid, struct td_fabric, fid.fid);

    if (fab->refs > 0) {
        return -FI_EBUSY;
    }
    free(fab);
    return 0;
}

static struct fi_ops fabric_fi_ops = {
    .size = sizeof(struct fi_ops),
    .close = fabric_close,
    .ops_open = fabric_ops_open,
};

static int no_pep(struct fid_fabric *f, struct fi_info *i, struct fid_pep **p, void *c)
{
    (void) f, (void) i, (void) p, (void) c;
    return -FI_ENOSYS;
}

static int no_wait(struct fid_fabric *f, struct fi_wait_attr *a, struct fid_wait **w)
{
    (void) f, (void) a, (void) w;
    return -FI_ENOSYS;
}

static int no_trywait(struct fid_fabric *f, struct fid **fids, int count)
{
    (void) f, (void) fids, (void) count;
    return -FI_ENOSYS;
}

static struct fi_ops_fabric fabric_ops = {
    .size = sizeof(struct fi_ops_fabric),
    .domain = td_domain_open,
    .passive_ep = no_pep,
    .eq_open = td_eq_open,
    .wait_open = no_wait,
    .trywait = no_trywait,
};

static int td_fabric_open(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context)
{
    struct td_dev *dev = dev_by_fabric_name(attr->name);
    struct td_fabric *fab;

    if (NULL == dev) {
        return -FI_ENODEV;
    }
    fab = calloc(1, sizeof(*fab));
    if (NULL == fab) {
        return -FI_ENOMEM;
    }
    fab->fid.fid.fclass = FI_CLASS_FABRIC;
    fab->fid.fid.context = context;
    fab->fid.fid.ops = &fabric_fi_ops;
    fab->fid.ops = &fabric_ops;
    fab->dev = dev;
    attr->fabric = &fab->fid;
    attr->prov_version = TD_PROV_VERSION;
    *fabric = &fab->fid;
    return 0;
}

/* -------------------------------------------------------------- getinfo */

/* The memory registration check of the real provider (FI_MR_LOCAL needed,
 * FI_MR_ALLOCATED too from API 1.5 when the caller names modes). */
bool td_mr_mode_ok(uint32_t version, const struct fi_info *hints)
{
    int user = hints->domain_attr->mr_mode;

    if (!((hints->mode & FI_LOCAL_MR) || (user & FI_MR_LOCAL))) {
        return false;
    }
    if (FI_VERSION_LT(version, FI_VERSION(1, 5))) {
        return FI_MR_UNSPEC == user || FI_MR_BASIC == user;
    }
    if (user & FI_MR_BASIC) {
        return 0 == (user & ~FI_MR_BASIC);
    }
    if (user & FI_MR_SCALABLE) {
        return false;
    }
    return FI_MR_UNSPEC == user ||
           (FI_MR_LOCAL | FI_MR_ALLOCATED) == (user & (FI_MR_LOCAL | FI_MR_ALLOCATED));
}

/* Sizes of a transmit or receive side: the real provider's credit rule
 * size * iov_limit <= max credits. */
static bool queue_sizes(size_t want_size, size_t want_iov, size_t *size, size_t *iov)
{
    *iov = TD_DFLT_SGE;
    *size = TD_MAX_CREDITS / TD_DFLT_SGE;
    if (want_iov > TD_MAX_SGE) {
        return false;
    }
    if (want_iov && want_size) {
        *size = want_size;
        *iov = want_iov;
    } else if (want_iov) {
        *iov = want_iov;
        *size = TD_MAX_CREDITS / want_iov;
    } else if (want_size) {
        *size = want_size;
        *iov = TD_MAX_CREDITS / want_size;
        if (*iov > TD_MAX_SGE) {
            *iov = TD_MAX_SGE;
        }
    }
    return 0 != *iov && *size * *iov <= TD_MAX_CREDITS;
}

/* ep_attr->max_msg_size as the real provider computes it: the IP MTU less
 * IPv4 and UDP headers, plus the prefix when in prefix mode (API >= 1.3). */
size_t td_max_msg_size(uint32_t version, const struct td_dev *d, bool prefix)
{
    size_t m = d->mtu - TD_UDP_HDR;

    if (FI_VERSION_GE(version, FI_VERSION(1, 3))) {
        m += TD_ETH_HDR;
        if (prefix) {
            m += TD_PREFIX;
        }
    }
    return m;
}

static int fill_info(uint32_t version, const struct fi_info *hints, const struct td_dev *d,
                     const struct sockaddr_in *src, const struct sockaddr_in *dest,
                     struct fi_info **out)
{
    bool prefix;
    struct fi_info *fi;
    struct sockaddr_in *sin;
    char name[64];

    fi = fi_allocinfo();
    if (NULL == fi) {
        return -FI_ENOMEM;
    }
    fi->caps = TD_CAPS;
    fi->mode = (NULL == hints) ? TD_SUPP_MODE : (hints->mode & TD_SUPP_MODE);
    if (FI_VERSION_LT(version, FI_VERSION(1, 1))) {
        fi->mode &= ~FI_MSG_PREFIX;
    }
    prefix = 0 != (fi->mode & FI_MSG_PREFIX);
    fi->addr_format =
        (NULL != hints && FI_SOCKADDR == hints->addr_format) ? FI_SOCKADDR : FI_SOCKADDR_IN;
    sin = calloc(1, sizeof(*sin));
    if (NULL == sin) {
        goto nomem;
    }
    sin->sin_family = AF_INET;
    sin->sin_addr.s_addr = d->ip_be;
    sin->sin_port = (NULL != src) ? src->sin_port : 0;
    fi->src_addr = sin;
    fi->src_addrlen = sizeof(*sin);
    if (NULL != dest) {
        fi->dest_addr = malloc(sizeof(*dest));
        if (NULL == fi->dest_addr) {
            goto nomem;
        }
        memcpy(fi->dest_addr, dest, sizeof(*dest));
        fi->dest_addrlen = sizeof(*dest);
    }
    if (NULL != hints) {
        fi->handle = hints->handle;
    }

    fabric_name(version, d, name, sizeof(name));
    fi->fabric_attr->name = strdup(name);
    fi->fabric_attr->prov_version = TD_PROV_VERSION;

    fi->ep_attr->type = FI_EP_DGRAM;
    fi->ep_attr->protocol = FI_PROTO_UDP;
    fi->ep_attr->max_msg_size = td_max_msg_size(version, d, prefix);
    fi->ep_attr->msg_prefix_size = prefix ? TD_PREFIX : 0;
    fi->ep_attr->tx_ctx_cnt = 1;
    fi->ep_attr->rx_ctx_cnt = 1;

    fi->domain_attr->name = strdup(d->name);
    fi->domain_attr->threading = FI_THREAD_ENDPOINT;
    fi->domain_attr->control_progress = FI_PROGRESS_AUTO;
    fi->domain_attr->data_progress = FI_PROGRESS_MANUAL;
    fi->domain_attr->resource_mgmt = FI_RM_DISABLED;
    fi->domain_attr->mr_iov_limit = 1;
    fi->domain_attr->mr_cnt = TD_MR_CNT;
    if (FI_VERSION_GE(version, FI_VERSION(1, 5))) {
        fi->domain_attr->mr_mode = FI_MR_ALLOCATED | FI_MR_LOCAL;
        fi->domain_attr->caps = FI_REMOTE_COMM;
    } else {
        fi->domain_attr->mr_mode = FI_MR_BASIC;
    }

    fi->tx_attr->caps = fi->rx_attr->caps = TD_CAPS;
    fi->tx_attr->mode = fi->rx_attr->mode = fi->mode;
    fi->tx_attr->msg_order = fi->rx_attr->msg_order = FI_ORDER_NONE;
    fi->tx_attr->comp_order = fi->rx_attr->comp_order = FI_ORDER_NONE;
    fi->tx_attr->inject_size = TD_INJECT_SIZE;
    if (!queue_sizes(NULL != hints && hints->tx_attr ? hints->tx_attr->size : 0,
                     NULL != hints && hints->tx_attr ? hints->tx_attr->iov_limit : 0,
                     &fi->tx_attr->size, &fi->tx_attr->iov_limit) ||
        !queue_sizes(NULL != hints && hints->rx_attr ? hints->rx_attr->size : 0,
                     NULL != hints && hints->rx_attr ? hints->rx_attr->iov_limit : 0,
                     &fi->rx_attr->size, &fi->rx_attr->iov_limit)) {
        fi_freeinfo(fi);
        return -FI_ENODATA;
    }
    if (!prefix) {
        /* without the prefix the header takes one descriptor */
        fi->tx_attr->iov_limit--;
        fi->rx_attr->iov_limit--;
    }
    if (NULL != hints && NULL != hints->domain_attr) {
        enum fi_threading th = hints->domain_attr->threading;
        if (FI_THREAD_FID == th || FI_THREAD_COMPLETION == th || FI_THREAD_DOMAIN == th) {
            fi->domain_attr->threading = th;
        }
        if (FI_PROGRESS_MANUAL == hints->domain_attr->control_progress) {
            fi->domain_attr->control_progress = FI_PROGRESS_MANUAL;
        }
        if (0 != hints->domain_attr->mr_cnt) {
            fi->domain_attr->mr_cnt = hints->domain_attr->mr_cnt;
        }
    }
    if (NULL != hints && NULL != hints->tx_attr) {
        fi->tx_attr->op_flags = hints->tx_attr->op_flags;
    }
    if (NULL != hints && NULL != hints->rx_attr) {
        fi->rx_attr->op_flags = hints->rx_attr->op_flags;
    }
    /* prov_name stays NULL: the core names a core provider's infos */
    if (NULL == fi->fabric_attr->name || NULL == fi->domain_attr->name) {
        goto nomem;
    }
    *out = fi;
    return 0;
nomem:
    fi_freeinfo(fi);
    return -FI_ENOMEM;
}

/* Why would the real provider return nothing for these hints?  NULL: it
 * would return this device. */
static const char *hints_refuse(uint32_t version, const struct fi_info *h, const struct td_dev *d,
                                size_t max_msg)
{
    char name[64];

    if (h->caps & ~TD_CAPS) {
        return "caps beyond FI_MSG|FI_SOURCE|FI_SEND|FI_RECV";
    }
    if (FI_VERSION_LT(version, FI_VERSION(1, 5)) && !(h->mode & FI_LOCAL_MR)) {
        return "API < 1.5 without FI_LOCAL_MR in mode";
    }
    if (td.require_prefix && !(h->mode & FI_MSG_PREFIX)) {
        return "no FI_MSG_PREFIX in hints->mode (USNIC_TD_REQUIRE_PREFIX=1)";
    }
    if (NULL != h->ep_attr) {
        const struct fi_ep_attr *e = h->ep_attr;
        if (FI_EP_UNSPEC != e->type && FI_EP_DGRAM != e->type) {
            return "only FI_EP_DGRAM is emulated";
        }
        if (FI_PROTO_UNSPEC != e->protocol && FI_PROTO_UDP != e->protocol) {
            return "protocol";
        }
        if (e->max_msg_size > max_msg || e->tx_ctx_cnt > 1 || e->rx_ctx_cnt > 1 ||
            e->max_order_raw_size || e->max_order_war_size || e->max_order_waw_size ||
            e->auth_key_size || NULL != e->auth_key) {
            return "endpoint attributes";
        }
    }
    if (NULL != h->fabric_attr) {
        if (0 != h->fabric_attr->prov_version && TD_PROV_VERSION != h->fabric_attr->prov_version) {
            return "prov_version";
        }
        if (NULL != h->fabric_attr->name) {
            fabric_name(strchr(h->fabric_attr->name, '/') ? FI_VERSION(1, 4) : FI_VERSION(1, 3), d,
                        name, sizeof(name));
            if (0 != strcmp(name, h->fabric_attr->name)) {
                return "fabric name";
            }
        }
    }
    if (NULL != h->domain_attr) {
        const struct fi_domain_attr *a = h->domain_attr;
        if (NULL != a->name && 0 != strcmp(a->name, d->name)) {
            return "domain name";
        }
        if (FI_PROGRESS_AUTO == a->data_progress ||
            (FI_RM_UNSPEC != a->resource_mgmt && FI_RM_DISABLED != a->resource_mgmt) ||
            (0 != a->caps && FI_REMOTE_COMM != a->caps) ||
            (FI_AV_UNSPEC != a->av_type && FI_AV_MAP != a->av_type) || a->mr_cnt > TD_MR_CNT) {
            return "domain attributes";
        }
        if (!td_mr_mode_ok(version, h)) {
            return "mr_mode: FI_MR_LOCAL (or mode FI_LOCAL_MR) is required";
        }
    }
    if (NULL != h->tx_attr) {
        const struct fi_tx_attr *t = h->tx_attr;
        if ((t->caps & ~TD_CAPS) || t->msg_order || t->comp_order ||
            t->inject_size > TD_INJECT_SIZE || t->iov_limit > TD_MAX_SGE || t->rma_iov_limit) {
            return "tx attributes";
        }
    }
    if (NULL != h->rx_attr) {
        const struct fi_rx_attr *r = h->rx_attr;
        if ((r->caps & ~TD_CAPS) || r->msg_order || r->comp_order || r->total_buffered_recv ||
            r->iov_limit > TD_MAX_SGE) {
            return "rx attributes";
        }
    }
    return NULL;
}

static int td_getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
                      const struct fi_info *hints, struct fi_info **info)
{
    struct fi_info *first = NULL, *last = NULL;
    struct sockaddr_in nodeaddr, *src = NULL, *dest = NULL;
    static bool first_look = true;
    int ret = 0;

    if (NULL != hints) {
        switch (hints->addr_format) {
        case FI_FORMAT_UNSPEC:
        case FI_SOCKADDR_IN:
        case FI_SOCKADDR:
            break;
        default:
            return -FI_ENODATA; /* FI_ADDR_STR is not emulated */
        }
        if ((NULL != hints->src_addr && hints->src_addrlen < sizeof(struct sockaddr_in)) ||
            (NULL != hints->dest_addr && hints->dest_addrlen < sizeof(struct sockaddr_in))) {
            return -FI_ENODATA;
        }
        src = hints->src_addr;
        dest = hints->dest_addr;
    }
    if (NULL != node || NULL != service) {
        struct addrinfo ah = {0}, *ai = NULL;
        ah.ai_family = AF_INET;
        ah.ai_socktype = SOCK_DGRAM;
        if (0 != getaddrinfo(node, service, &ah, &ai)) {
            return -FI_ENODATA;
        }
        memcpy(&nodeaddr, ai->ai_addr, sizeof(nodeaddr));
        freeaddrinfo(ai);
        if (flags & FI_SOURCE) {
            src = &nodeaddr;
        } else {
            dest = &nodeaddr;
        }
    }
    if (NULL != dest && INADDR_ANY != dest->sin_addr.s_addr &&
        !td_addr_allowed(dest->sin_addr.s_addr)) {
        return -FI_ENODATA; /* the double never leaves 127.0.0.0/8 */
    }

    /* The real provider opens every device once, on its first fi_getinfo,
     * and skips for good those whose link was down then. */
    td_control_poll(true);
    pthread_mutex_lock(&td_lock);
    if (first_look) {
        for (int i = 0; i < td.ndev; i++) {
            td.dev[i].listed = td.dev[i].link_up;
        }
        first_look = false;
    }
    pthread_mutex_unlock(&td_lock);

    for (int i = 0; i < td.ndev && 0 == ret; i++) {
        struct td_dev *d = &td.dev[i];
        struct fi_info *fi = NULL;
        const char *why;
        size_t max_msg =
            td_max_msg_size(version, d, NULL == hints || 0 != (hints->mode & FI_MSG_PREFIX));

        if (!d->listed) {
            continue;
        }
        if (NULL != src && INADDR_ANY != src->sin_addr.s_addr && src->sin_addr.s_addr != d->ip_be) {
            continue;
        }
        if (NULL != hints && NULL != (why = hints_refuse(version, hints, d, max_msg))) {
            if (td.verbose) {
                fprintf(stderr, "usnic-td: fi_getinfo: %s not offered: %s\n", d->name, why);
            }
            continue;
        }
        ret = fill_info(version, hints, d, src, dest, &fi);
        if (-FI_ENODATA == ret) {
            ret = 0;
            continue;
        }
        if (0 == ret) {
            if (NULL == first) {
                first = fi;
            } else {
                last->next = fi;
            }
            last = fi;
        }
    }
    if (0 != ret) {
        fi_freeinfo(first);
        return ret;
    }
    *info = first;
    return NULL != first ? 0 : -FI_ENODATA;
}

/* ------------------------------------------------------------ provider */

struct fi_provider td_prov = {
    .version = TD_PROV_VERSION,
    .fi_version = FI_VERSION(1, 17),
    .name = TD_PROV_NAME,
    .getinfo = td_getinfo,
    .fabric = td_fabric_open,
    .cleanup = td_cleanup,
};

__attribute__((visibility("default"))) struct fi_provider *fi_prov_ini(void)
{
    if (!td_loaded) {
        td_config_load();
        td_loaded = true;
    }
    return &td_prov;
}
