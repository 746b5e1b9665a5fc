/*
 * nfdelay.c — hold every packet of a netfilter queue for a fixed time: the
 * network-delay fault of tests/faults/ (this kernel has no netem qdisc).
 *
 *   nfdelay QUEUE DELAY_MS [SECONDS]
 *
 * Run it in the network namespace whose packets it delays, beside a rule
 * such as `iptables -A INPUT -j NFQUEUE --queue-num QUEUE --queue-bypass`
 * (with --queue-bypass the packets flow undelayed whenever no nfdelay is
 * bound). Every packet the queue hands over is accepted DELAY_MS after it
 * arrived, in arrival order; nothing is dropped or reordered. It stops
 * after SECONDS (default 60) or on SIGTERM/SIGINT, accepting whatever it
 * still holds, and prints "nfdelay: N packets held D ms (most at once M)".
 * Prints "nfdelay: ready" once bound, so a script can wait for it.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <linux/netlink.h>
#include <libnetfilter_queue/libnetfilter_queue.h>

#define HOLD_MAX 65536          /* packets held at once (ring) */

struct held {
    uint32_t id;
    int64_t due_ms;
};

static struct held ring[HOLD_MAX];
static size_t head, count, most;
static uint64_t total, overflow;
static int64_t delay_ms;
static volatile sig_atomic_t stop;

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

/* A packet arrived: keep its id until it is due. */
static int on_packet(struct nfq_q_handle *qh, struct nfgenmsg *msg,
                     struct nfq_data *nfa, void *data)
{
    struct nfqnl_msg_packet_hdr *ph = nfq_get_msg_packet_hdr(nfa);
    uint32_t id;

    (void)msg;
    (void)data;
    if (!ph)
        return 0;
    id = ntohl(ph->packet_id);
    if (count == HOLD_MAX) {    /* full: let it through now */
        overflow++;
        return nfq_set_verdict(qh, id, NF_ACCEPT, 0, NULL);
    }
    ring[(head + count) % HOLD_MAX] = (struct held){id, now_ms() + delay_ms};
    if (++count > most)
        most = count;
    total++;
    return 0;
}

/* Accept every held packet due by `until`. */
static void release(struct nfq_q_handle *qh, int64_t until)
{
    while (count && ring[head].due_ms <= until) {
        nfq_set_verdict(qh, ring[head].id, NF_ACCEPT, 0, NULL);
        head = (head + 1) % HOLD_MAX;
        count--;
    }
}

int main(int argc, char **argv)
{
    static char buf[1 << 16];
    struct nfq_handle *h;
    struct nfq_q_handle *qh;
    struct sigaction sa;
    int64_t end;
    long queue, seconds = 60;
    int fd, one = 1;

    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: nfdelay QUEUE DELAY_MS [SECONDS]\n");
        return 2;
    }
    queue = strtol(argv[1], NULL, 10);
    delay_ms = strtol(argv[2], NULL, 10);
    if (argc == 4)
        seconds = strtol(argv[3], NULL, 10);
    if (queue < 0 || queue > 65535 || delay_ms < 0 || delay_ms > 60000 ||
        seconds <= 0) {
        fprintf(stderr, "nfdelay: QUEUE must be 0..65535, DELAY_MS 0..60000, "
                "SECONDS > 0\n");
        return 2;
    }
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    h = nfq_open();
    if (!h) {
        fprintf(stderr, "nfdelay: cannot open netfilter queue handle: %s "
                "(needs root and nfnetlink_queue)\n", strerror(errno));
        return 1;
    }
    qh = nfq_create_queue(h, (uint16_t)queue, on_packet, NULL);
    if (!qh) {
        fprintf(stderr, "nfdelay: cannot bind queue %ld: %s (another "
                "program holds it?)\n", queue, strerror(errno));
        nfq_close(h);
        return 1;
    }
    /* Only the verdict matters: copy no payload. */
    if (nfq_set_mode(qh, NFQNL_COPY_META, 0) < 0 ||
        nfq_set_queue_maxlen(qh, HOLD_MAX) < 0) {
        fprintf(stderr, "nfdelay: cannot set up queue %ld: %s\n", queue,
                strerror(errno));
        nfq_destroy_queue(qh);
        nfq_close(h);
        return 1;
    }
    fd = nfq_fd(h);
    nfnl_rcvbufsiz(nfq_nfnlh(h), 8u << 20);
    setsockopt(fd, SOL_NETLINK, NETLINK_NO_ENOBUFS, &one, sizeof one);
    printf("nfdelay: ready (queue %ld, %lld ms)\n", queue, (long long)delay_ms);
    fflush(stdout);

    end = now_ms() + seconds * 1000;
    while (!stop && now_ms() < end) {
        struct pollfd p = {fd, POLLIN, 0};
        int64_t t = now_ms();
        int wait = count ? (int)(ring[head].due_ms > t ? ring[head].due_ms - t : 0)
                         : 100;

        if (poll(&p, 1, wait) > 0) {
            ssize_t n;

            while ((n = recv(fd, buf, sizeof buf, MSG_DONTWAIT)) > 0)
                nfq_handle_packet(h, buf, (int)n);
        }
        release(qh, now_ms());
    }
    release(qh, INT64_MAX);
    printf("nfdelay: %llu packets held %lld ms (most at once %zu%s)\n",
           (unsigned long long)total, (long long)delay_ms, most,
           overflow ? ", some let through early: the queue was full" : "");
    nfq_destroy_queue(qh);
    nfq_close(h);
    return 0;
}
