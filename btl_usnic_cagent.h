/*
 * Between the connectivity checker's client and its host agent
 * (btl_usnic_cagent.c, btl_usnic_cclient.c): the messages on the agent's
 * Unix-domain socket (SOCK_SEQPACKET, one struct per message, host byte
 * order: both ends are on one host).
 */
#ifndef BTL_USNIC_CAGENT_H
#define BTL_USNIC_CAGENT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "btl_usnic_cc.h"

enum {
    CC_MSG_HELLO = 1, /* client -> agent, then agent -> client: version */
    CC_MSG_REQ = 2,   /* client -> agent: check req, answer with id */
    CC_MSG_RES = 3    /* agent -> client: the verdict of id */
};

struct usnic_cc_msg {
    uint32_t magic;   /* USNIC_CC_MAGIC */
    uint16_t type;    /* CC_MSG_* */
    uint16_t version; /* USNIC_CC_VERSION (HELLO) */
    uint32_t id;      /* the client's handle (REQ, RES); the pid (HELLO) */
    uint32_t zero;
    struct usnic_cc_req req;
    struct usnic_cc_result res;
};

int cc_agent_listen(const char *path);
/* A client connecting; -1 if none (or not of our user). */
int cc_agent_accept(int lfd);
bool cc_msg_valid(const struct usnic_cc_msg *m, ssize_t len);

#endif /* BTL_USNIC_CAGENT_H */
