/* Hot reload, the mode-independent part: SIGHUP (or `l7run --reload`) asks for the object at
 * the same path to be loaded again; a loader thread opens, verifies and fills the new version
 * while the run loop keeps serving with the current one (the verifier can take seconds), and
 * hands it back through an eventfd; the run loop then publishes it (version.c, with the mode's
 * part). A load that fails leaves nothing loaded and changes nothing.
 * The l7_reload map, pinned next to the other pins, tells `--stats`, `--metrics` and
 * `--reload` which version serves, how many reloads were done or refused, what is draining. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <bpf/bpf.h>
#include "l7run.h"

static void *loader(void *arg)
{
	struct l7run *L = arg;
	struct reloader *R = &L->reload;

	const char *path = L->args.obj;
	if (L->args.watch) {   /* the node agent: build the object from the directory first */
		if (watch_build(L, R->err, sizeof R->err))
			goto done;
		path = L->watch.obj;
	}
	R->result = version_load(L, path, R->serving, R->err, sizeof R->err);
	if (!R->result && !R->err[0])
		snprintf(R->err, sizeof R->err, "unknown error");
done:;
	uint64_t one = 1;
	(void)!write(R->efd, &one, sizeof one);
	return NULL;
}

/* The loader's eventfd fired: publish what it loaded, or report why it could not. */
static void loaded(struct l7run *L, struct io *io, uint32_t events)
{
	struct reloader *R = &L->reload;
	uint64_t n;

	(void)io;
	(void)events;
	if (read(R->efd, &n, sizeof n) != sizeof n || !R->busy)
		return;
	if (!pthread_equal(R->th, pthread_self()))
		pthread_join(R->th, NULL);
	R->busy = 0;
	if (L->stopping) {   /* SIGTERM came while it loaded: nothing new is published */
		if (R->result)
			version_drop(L, R->result);
	} else if (R->result) {
		int before = L->next_id;
		R->reloads++;
		version_publish(L, R->result, R->t_signal);   /* may refuse it (and say why) */
		if (L->next_id != before)
			watch_outcome(L, 1, NULL, NULL);
		else
			watch_outcome(L, 0, "load", "refused when published (see the log)");
	} else if (L->args.watch && L->watch.unchanged) {
		vlog(L, "%s: no change since the last build", L->args.watch);
	} else {
		reload_refused(L, R->err);
	}
	R->result = NULL;
}

/* An update not served: --watch's sources l7c refused (no object built), or an object l7run
 * refused; the serving version is unchanged. */
void reload_refused(struct l7run *L, const char *err)
{
	int compile = L->args.watch && !L->watch.obj[0];

	if (compile)
		L->watch.build_failed++;
	else
		L->reload.failed++;
	state_update(L);   /* --stats and /metrics count it at once */
	say(L, "%s of %s refused, the serving version is unchanged: %s", compile ? "policy update" : "reload",
	    L->args.watch ? L->args.watch : L->args.obj, err);
	watch_outcome(L, 0, compile ? "compile" : "load", err);
}

/* The eventfd the loop watches; SIGHUP arrives through the loop's signalfd (core.c). */
void reload_init(struct l7run *L)
{
	struct reloader *R = &L->reload;

	R->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	R->io.ready = loaded;
	loop_watch(L, R->efd, &R->io, EPOLLIN);
}

void reload_request(struct l7run *L, int force)
{
	L->watch.force |= force;
	if (!L->reload.pending)
		L->reload.pending_at = now_us();
	L->reload.pending = 1;
}

/* From the run loop: a SIGHUP came and no load runs: start one. */
void reload_poll(struct l7run *L)
{
	struct reloader *R = &L->reload;

	if (!R->pending || R->busy || R->efd < 0 || L->stopping)
		return;
	R->t_signal = R->pending_at;
	R->pending = 0;
	R->busy = 1;
	R->err[0] = 0;
	R->serving = L->cur ? &L->cur->cfg : NULL;   /* not unloaded while it serves */
	L->watch.forced = L->watch.force;
	L->watch.force = 0;
	if (pthread_create(&R->th, NULL, loader, L)) {
		R->th = pthread_self();
		loader(L);   /* no thread: load in the run loop instead */
	}
}

/* Stopping: wait for a load in progress and unload what it loaded (never published). */
void reload_fini(struct l7run *L)
{
	struct reloader *R = &L->reload;

	if (R->busy && !pthread_equal(R->th, pthread_self())) {
		pthread_join(R->th, NULL);
		R->busy = 0;
		if (R->result)
			version_drop(L, R->result);
		R->result = NULL;
	}
	if (R->efd >= 0)
		loop_close(L, R->efd);
	R->efd = -1;
	if (R->state_fd >= 0)
		close(R->state_fd);
	R->state_fd = -1;
}

/* ---- the l7_reload map ------------------------------------------------------------------ */

int state_map_create(struct l7run *L)
{
	char p[512];
	int fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "l7_reload", sizeof(uint32_t), sizeof(struct reload_state),
				1 + MAX_VERSIONS, NULL);

	L->reload.state_fd = fd;
	if (fd < 0) {
		say(L, "cannot create the l7_reload map: %s", strerror(errno));
		return -1;
	}
	if (L->pin_dir[0]) {
		snprintf(p, sizeof p, "%s/map_l7_reload", L->pin_dir);
		unlink(p);
		if (bpf_obj_pin(fd, p))
			say(L, "pin %s: %s", p, strerror(errno));
	}
	return 0;
}

/* rows: the loaded versions, the serving one first. */
void state_write(struct l7run *L, const struct reload_version *rows, int n)
{
	const struct reloader *R = &L->reload;
	struct reload_version zero;
	struct reload_state s;

	if (R->state_fd < 0)
		return;
	memset(&zero, 0, sizeof zero);
	memset(&s, 0, sizeof s);
	s.version = n ? rows[0].id : 0;
	s.reloads = R->reloads;
	s.failed = R->failed;
	s.last_us = R->last_us;
	s.live = (uint64_t)n;
	for (int i = 0; i < n; i++)
		s.draining += rows[i].draining;
	s.build_failed = L->watch.build_failed;
	uint32_t k = 0;
	bpf_map_update_elem(R->state_fd, &k, &s, BPF_ANY);
	for (k = 1; k <= MAX_VERSIONS; k++)
		bpf_map_update_elem(R->state_fd, &k, (int)k <= n ? &rows[k - 1] : &zero, BPF_ANY);
}

static int read_state(const char *pin_dir, struct reload_state *s)
{
	char p[512];
	uint32_t k = 0;

	snprintf(p, sizeof p, "%s/map_l7_reload", pin_dir);
	int fd = bpf_obj_get(p);
	if (fd < 0)
		return -1;
	int r = bpf_map_lookup_elem(fd, &k, s);
	close(fd);
	return r;
}

/* ---- l7run --reload PID|PIDFILE [--pin DIR] ---------------------------------------------- */

int pidfile_write(const char *path)
{
	FILE *f = fopen(path, "w");

	if (!f || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f)) {
		fprintf(stderr, "l7run: --pidfile %s: %s\n", path, strerror(errno));
		return -1;
	}
	return 0;
}

/* Send SIGHUP; with the pin directory, wait for the outcome and say it (exit 1: refused). */
int reload_command(const char *target, const char *pin_dir)
{
	char *end;
	long pid = strtol(target, &end, 10);

	if (*end || pid <= 0) {
		FILE *f = fopen(target, "r");
		if (!f || fscanf(f, "%ld", &pid) != 1 || pid <= 0) {
			fprintf(stderr, "l7run: --reload %s: not a pid or a pid file\n", target);
			if (f)
				fclose(f);
			return 2;
		}
		fclose(f);
	}
	struct reload_state before, now;
	int wait = pin_dir && pin_dir[0] && read_state(pin_dir, &before) == 0;
	if (kill((pid_t)pid, SIGHUP)) {
		fprintf(stderr, "l7run: --reload: pid %ld: %s\n", pid, strerror(errno));
		return 1;
	}
	if (!wait)
		return 0;
	for (int i = 0; i < 12000; i++) {   /* 120 s: a large policy verifies in seconds */
		usleep(10000);
		if (read_state(pin_dir, &now))
			break;
		if (now.failed != before.failed) {
			fprintf(stderr, "l7run: reload refused (see the log of pid %ld); version %llu keeps serving\n", pid,
				(unsigned long long)now.version);
			return 1;
		}
		if (now.reloads != before.reloads) {
			printf("version %llu serving (%.1f ms from the signal), %llu draining\n",
			       (unsigned long long)now.version, now.last_us / 1000.0, (unsigned long long)now.draining);
			return 0;
		}
	}
	fprintf(stderr, "l7run: --reload: no outcome seen in %s\n", pin_dir);
	return 1;
}
