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
	L->args.pool_idle = 8;
	L->args.drain_ms = 5000;
	L->reload.efd = L->reload.state_fd = -1;
	L->watch.fd = -1;
	L->http.fd = -1;
	pthread_mutex_init(&L->lock, NULL);
	checks_init(L);
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

/* SIGHUP reloads; SIGTERM and SIGINT stop l7run (with --grace-period: drain first; a second
 * one stops at once), or go on to CMD while it runs (it decides; l7run stops when it ends);
 * SIGCHLD: CMD ended (or l7c, which --watch waits for itself). Blocked in every thread (set
 * before any is made), read from the signalfd by the loop. */
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

static void listeners_close(struct l7run *L)
{
	for (int i = 0; i < L->n_listeners; i++)
		loop_close(L, L->listener[i].fd);
	L->n_listeners = 0;
}

/* SIGTERM with --grace-period (a pod's termination): accept no more connections and retire
 * every version, so that the mode closes each connection at a request boundary as after a
 * reload (gateway mode; mesh mode waits for its connections to end); the loop ends when none
 * is left or the grace period is over. /readyz answers 503 from here on. */
static void shutdown_begin(struct l7run *L)
{
	uint64_t now = now_ms();
	int n = 0;

	L->stopping = now;
	listeners_close(L);
	for (struct version *v = L->cur; v; v = v->older) {
		n += v->n_conns > 0 ? v->n_conns : 0;
		if (!v->retired) {
			v->retired = 1;
			v->retired_at = now;
		}
	}
	say(L, "stopping: no new connections; draining %d connection(s) for at most %.1f s", n, L->args.grace_ms / 1000.0);
	status_write(L);
}

static void on_signal(struct l7run *L, struct io *io, uint32_t events)
{
	struct signalfd_siginfo si;

	(void)io;
	(void)events;
	while (read(L->sigfd, &si, sizeof si) == sizeof si) {
		int sig = (int)si.ssi_signo;
		if (sig == SIGHUP)
			reload_request(L, 1);
		else if (sig == SIGCHLD)
			L->stop |= child_ended(L);
		else if (child_signal(L, sig))
			;   /* CMD decides */
		else if (L->args.grace_ms && L->looping && !L->stopping)
			shutdown_begin(L);
		else
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

	__atomic_store_n(&L->looping, 1, __ATOMIC_RELAXED);   /* ready: /readyz, the status file */
	status_write(L);
	while (!L->stop) {
		__atomic_store_n(&L->beat, now_ms(), __ATOMIC_RELAXED);
		reload_poll(L);
		int wait = L->mode->poll_ms(L), due = checks_due_ms(L, now_ms());
		int n = epoll_wait(L->epfd, ev, 256, due >= 0 && (wait < 0 || due < wait) ? due : wait);
		if (n < 0 && errno != EINTR)
			return -1;
		for (int i = 0; i < n; i++)
			dispatch(L, &ev[i]);
		uint64_t now = now_ms();
		L->mode->tick(L, now);
		versions_tick(L, now);
		if (L->alog)
			alog_tick(L);
		jwt_tick(&L->env.jwt);
		ident_tick(&L->env.ident);
		checks_tick(L, now);   /* before ep_tick, which applies what they found */
		ep_tick(&L->env.ep, now);
		if (L->args.watch)
			watch_tick(L, now);
		if (L->stopping && (!L->cur || now - L->stopping >= L->args.grace_ms)) {
			if (L->cur)
				say(L, "grace period over: closing the connections left");
			L->stop = 1;
		}
	}
	__atomic_store_n(&L->looping, 0, __ATOMIC_RELAXED);
	return 0;
}

/* The first version: POLICY.o, or with --watch the first build of DIR that loads. Until one
 * does, l7run waits for DIR to change (not ready: /readyz says 503, the status file why); a
 * SIGTERM then ends it (NULL, L->stop set). */
static struct version *first_version(struct l7run *L, char *err, size_t errlen)
{
	struct watch *W = &L->watch;
	struct epoll_event ev[16];

	if (!L->args.watch)
		return version_load(L, L->args.obj, NULL, err, errlen);
	if (watch_init(L)) {
		snprintf(err, errlen, "--watch %s: cannot follow it", L->args.watch);
		return NULL;
	}
	W->dirty_at = 1;   /* build now */
	while (!L->stop) {
		uint64_t now = now_ms();
		if (W->dirty_at && now - W->dirty_at >= 200) {
			W->dirty_at = 0;
			int r = watch_build(L, err, errlen);
			struct version *v = r == 0 ? version_load(L, W->obj, NULL, err, errlen) : NULL;
			if (v)
				return v;
			if (r != 1) {
				reload_refused(L, err);
				say(L, "no policy serves yet: waiting for %s to change", L->args.watch);
			}
		}
		int n = epoll_wait(L->epfd, ev, 16, 100);
		for (int i = 0; i < n; i++)
			dispatch(L, &ev[i]);
	}
	return NULL;
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
	if (a->metrics_addr && metrics_http_start(&L->http, a->metrics_addr, serving_metrics, serving_health, L))
		goto out;
	if ((rc = L->mode->init(L)) != 0)
		goto out;
	rc = 1;
	if (a->bpf_stats)
		L->stats_fd = bpf_stats_on();
	struct version *first = first_version(L, err, sizeof err);
	if (!first) {
		if (a->watch && L->stop)
			rc = 0;   /* stopped while waiting for a policy that loads */
		else
			say(L, "%s", err);
		goto out;
	}
	reload_init(L);
	mkdir(L->pin_dir, 0700);
	state_map_create(L);
	version_publish(L, first, 0);
	if (L->cur)
		watch_outcome(L, 1, NULL, NULL);
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
	checks_fini(L);
	listeners_close(L);
	versions_unload_all(L);
	watch_fini(L);
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
