/* The core of l7run, for every mode: the event loop (epoll; signals arrive as events through a
 * signalfd, so no handler shares state with the loop), the listening sockets, and serving from
 * start to stop. The loop is one thread and readiness-driven: every turn it dispatches the
 * events, then runs the mode's tick, the versions' lifecycle and the JWT clock and identities
 * file checks; it sleeps as long as the mode allows (poll_ms). */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include "l7run.h"

void say(const struct l7run *L, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", L->mode ? L->mode->tag : "l7run");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void l7run_init(struct l7run *L, const struct mode_ops *mode)
{
	memset(L, 0, sizeof *L);
	L->mode = mode;
	L->stats_fd = L->epfd = L->sigfd = -1;
	L->args.pool_max = 1024;
	L->args.drain_ms = 5000;
	L->reload.efd = L->reload.state_fd = -1;
	L->http.fd = -1;
	pthread_mutex_init(&L->lock, NULL);
	policy_env_init(&L->env);
}

/* ---- the fd table ------------------------------------------------------------------------ */

int loop_watch(struct l7run *L, int fd, struct io *io, uint32_t events)
{
	if (fd < 0 || fd >= MAX_FDS)
		return -1;
	struct loop_slot *s = &L->slot[fd];
	int op = s->io ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
	if (!s->io)
		s->gen++;
	s->io = io;
	struct epoll_event ev = { .events = events, .data.u64 = (uint64_t)s->gen << 32 | (uint32_t)fd };
	return epoll_ctl(L->epfd, op, fd, &ev);
}

void loop_unwatch(struct l7run *L, int fd)
{
	if (fd < 0 || fd >= MAX_FDS || !L->slot[fd].io)
		return;
	epoll_ctl(L->epfd, EPOLL_CTL_DEL, fd, NULL);
	L->slot[fd].io = NULL;
}

void loop_close(struct l7run *L, int fd)
{
	if (fd < 0)
		return;
	if (fd < MAX_FDS)
		L->slot[fd].io = NULL;   /* closing it takes it out of the epoll set */
	close(fd);
}

static void dispatch(struct l7run *L, const struct epoll_event *e)
{
	int fd = (int)(uint32_t)e->data.u64;
	struct loop_slot *s = &L->slot[fd];

	if (s->io && s->gen == (uint32_t)(e->data.u64 >> 32))
		s->io->ready(L, s->io, e->events);
}

/* ---- signals ----------------------------------------------------------------------------- */

/* SIGHUP reloads; SIGTERM and SIGINT stop l7run, or go on to CMD while it runs (it decides;
 * l7run stops when it ends); SIGCHLD: CMD ended. Blocked in every thread (set before any is
 * made), read from the signalfd by the loop. */
static void signals_block(void)
{
	sigset_t s;

	sigemptyset(&s);
	sigaddset(&s, SIGHUP);
	sigaddset(&s, SIGTERM);
	sigaddset(&s, SIGINT);
	sigaddset(&s, SIGCHLD);
	pthread_sigmask(SIG_BLOCK, &s, NULL);
	signal(SIGPIPE, SIG_IGN);
}

static void on_signal(struct l7run *L, struct io *io, uint32_t events)
{
	struct signalfd_siginfo si;

	(void)io;
	(void)events;
	while (read(L->sigfd, &si, sizeof si) == sizeof si) {
		int sig = (int)si.ssi_signo;
		if (sig == SIGHUP)
			reload_request(L);
		else if (sig == SIGCHLD || !child_signal(L, sig))
			L->stop = 1;
	}
}

static int signals_watch(struct l7run *L)
{
	sigset_t s;

	pthread_sigmask(SIG_BLOCK, NULL, &s);
	L->sigfd = signalfd(-1, &s, SFD_NONBLOCK | SFD_CLOEXEC);
	L->sig_io.ready = on_signal;
	return L->sigfd < 0 ? -1 : loop_watch(L, L->sigfd, &L->sig_io, EPOLLIN);
}

/* ---- listening ---------------------------------------------------------------------------- */

static void on_listener(struct l7run *L, struct io *io, uint32_t events)
{
	struct listener *l = (struct listener *)io;

	(void)events;
	L->mode->accept(L, l->fd, l->service);
}

/* The first version's addresses: a reload that changes them is refused (load.c). */
static int listen_services(struct l7run *L)
{
	const struct config *cfg = &L->cur->cfg;

	for (int i = 0; i < cfg->n_services; i++) {
		const struct cfg_endpoint *s = &cfg->service[i];
		if (!s->set)
			continue;
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		if (bind(fd, (const struct sockaddr *)&s->addr, sizeof s->addr) || listen(fd, 4096)) {
			say(L, "listen on service %s: %s", s->name, strerror(errno));
			close(fd);
			return -1;
		}
		struct listener *l = &L->listener[L->n_listeners++];
		*l = (struct listener){ .io.ready = on_listener, .fd = fd, .service = i };
		loop_watch(L, fd, &l->io, EPOLLIN);
		vlog(L, "listening for service %s", s->name);
	}
	return 0;
}

/* ---- the loop ------------------------------------------------------------------------------ */

static int run_loop(struct l7run *L)
{
	struct epoll_event ev[256];

	while (!L->stop) {
		reload_poll(L);
		int n = epoll_wait(L->epfd, ev, 256, L->mode->poll_ms(L));
		if (n < 0 && errno != EINTR)
			return -1;
		for (int i = 0; i < n; i++)
			dispatch(L, &ev[i]);
		uint64_t now = now_ms();
		L->mode->tick(L, now);
		versions_tick(L, now);
		jwt_tick(&L->env.jwt);
		ident_tick(&L->env.ident);
	}
	return 0;
}

/* Load, publish and serve until SIGTERM, SIGINT or the end of CMD; then close everything and
 * unpin. The exit code: CMD's status when there is one, else 0 or 1. */
int l7run_serve(struct l7run *L)
{
	const struct l7run_args *a = &L->args;
	char err[1024];

	if (!L->pin_dir[0])
		snprintf(L->pin_dir, sizeof L->pin_dir, "/sys/fs/bpf/%s-%d", L->mode->pin_prefix, (int)getpid());
	signals_block();   /* before any thread: the loader's and the metrics' inherit it */
	struct rlimit rl = { RLIM_INFINITY, RLIM_INFINITY };
	setrlimit(RLIMIT_MEMLOCK, &rl);
	struct rlimit nf = { MAX_FDS, MAX_FDS };
	setrlimit(RLIMIT_NOFILE, &nf);
	L->slot = calloc(MAX_FDS, sizeof *L->slot);
	L->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (!L->slot || L->epfd < 0 || signals_watch(L)) {
		say(L, "cannot set up the event loop: %s", strerror(errno));
		return 1;
	}
	int rc = 1;
	/* the metrics listener first: in mesh mode l7run is then still outside the cgroup, and its
	 * sockets are not the mesh's to enroll */
	if (a->metrics_addr && metrics_http_start(&L->http, a->metrics_addr, serving_metrics, L))
		goto out;
	if ((rc = L->mode->init(L)) != 0)
		goto out;
	rc = 1;
	if (a->bpf_stats)
		L->stats_fd = bpf_stats_on();
	struct version *first = version_load(L, a->obj, NULL, err, sizeof err);
	if (!first) {
		say(L, "%s", err);
		goto out;
	}
	reload_init(L);
	mkdir(L->pin_dir, 0700);
	state_map_create(L);
	version_publish(L, first, 0);
	if (L->cur && !listen_services(L) && (!a->pidfile || !pidfile_write(a->pidfile))) {
		say(L, "policy %s loaded (%s mode), %d service(s), pins in %s", L->cur->cfg.policy, L->mode->name,
		    L->cur->cfg.n_services, L->pin_dir);
		/* every program attached (in mesh mode the pool filled): CMD's sockets are served */
		if (!a->cmd || !child_start(L, a->cmd)) {
			rc = run_loop(L) ? 1 : 0;
			if (L->mode->stop)
				L->mode->stop(L);
		}
	}
out:
	metrics_http_stop(&L->http);   /* before the maps it reads go */
	reload_fini(L);
	L->mode->close(L);
	for (int i = 0; i < L->n_listeners; i++)
		loop_close(L, L->listener[i].fd);
	versions_unload_all(L);
	versions_unpin(L);
	if (a->pidfile)
		unlink(a->pidfile);
	if (L->stats_fd >= 0)
		close(L->stats_fd);
	rc = child_finish(L, rc);   /* reaped: in mesh mode out of the cgroup, which can then go */
	if (L->mode->fini)
		L->mode->fini(L);
	vlog(L, "stopped");
	return rc;
}
