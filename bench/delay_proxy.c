// TCP proxy that holds every chunk for DELAY_US microseconds in each direction before passing it on:
// a network between lockguard and Redis, for bench/rtt_bench.py. One thread, epoll and a timerfd;
// it copies bytes and nothing else. Build: gcc -O2 -o delay_proxy delay_proxy.c
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

typedef struct Chunk { long long due; size_t len, off; struct Chunk *next; char data[]; } Chunk;
typedef struct { int from, to; Chunk *head, *tail; } Dir;
#define MAXC 256
static Dir dirs[MAXC * 2];
static int ndirs = 0;
static long long delay_ns;

static long long now_ns(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1000000000LL + t.tv_nsec; }

static int dial(int port) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  if (connect(s, (struct sockaddr *)&a, sizeof a) < 0) { perror("connect"); close(s); return -1; }
  int one = 1; setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return s;
}

static void arm(int tfd) {
  long long earliest = 0;
  for (int i = 0; i < ndirs; i++) if (dirs[i].head && (!earliest || dirs[i].head->due < earliest)) earliest = dirs[i].head->due;
  struct itimerspec its = {0};
  if (earliest) { its.it_value.tv_sec = earliest / 1000000000LL; its.it_value.tv_nsec = earliest % 1000000000LL; }
  timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL);
}

static void flush_due(void) {
  long long t = now_ns();
  for (int i = 0; i < ndirs; i++) {
    Dir *d = &dirs[i];
    while (d->head && d->head->due <= t) {
      Chunk *c = d->head;
      while (c->off < c->len) {
        ssize_t w = write(d->to, c->data + c->off, c->len - c->off);
        if (w < 0) { if (errno == EINTR) continue; c->off = c->len; break; }
        c->off += w;
      }
      d->head = c->next; if (!d->head) d->tail = NULL; free(c);
    }
  }
}

int main(int argc, char **argv) {
  if (argc < 4) { fprintf(stderr, "usage: delay LISTEN TARGET DELAY_US\n"); return 2; }
  int lport = atoi(argv[1]), tport = atoi(argv[2]); delay_ns = atoll(argv[3]) * 1000LL;
  int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(lport)};
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  if (bind(ls, (struct sockaddr *)&a, sizeof a) < 0 || listen(ls, 64) < 0) { perror("listen"); return 1; }
  int ep = epoll_create1(0), tfd = timerfd_create(CLOCK_MONOTONIC, 0);
  struct epoll_event ev = {.events = EPOLLIN};
  ev.data.u64 = (1ULL << 40); epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev);
  ev.data.u64 = (2ULL << 40); epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &ev);
  static char buf[1 << 18];
  for (;;) {
    struct epoll_event evs[64];
    int n = epoll_wait(ep, evs, 64, -1);
    for (int k = 0; k < n; k++) {
      unsigned long long tag = evs[k].data.u64;
      if (tag == (1ULL << 40)) {
        int c = accept(ls, NULL, NULL); if (c < 0) continue;
        setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        int s = dial(tport); if (s < 0) { close(c); continue; }
        if (ndirs + 2 > MAXC * 2) { close(c); close(s); continue; }
        dirs[ndirs] = (Dir){c, s, NULL, NULL}; dirs[ndirs + 1] = (Dir){s, c, NULL, NULL};
        ev.data.u64 = ndirs; epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev);
        ev.data.u64 = ndirs + 1; epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev);
        ndirs += 2;
      } else if (tag == (2ULL << 40)) {
        unsigned long long x; if (read(tfd, &x, sizeof x) < 0) {}
      } else {
        Dir *d = &dirs[tag];
        ssize_t r = read(d->from, buf, sizeof buf);
        if (r <= 0) { epoll_ctl(ep, EPOLL_CTL_DEL, d->from, NULL); shutdown(d->to, SHUT_WR); continue; }
        Chunk *c = malloc(sizeof(Chunk) + r); c->due = now_ns() + delay_ns; c->len = r; c->off = 0; c->next = NULL;
        memcpy(c->data, buf, r);
        if (d->tail) d->tail->next = c; else d->head = c; d->tail = c;
      }
    }
    flush_due(); arm(tfd);
  }
}
