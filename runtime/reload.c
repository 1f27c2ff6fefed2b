/* Hot reload, the mode-independent part: SIGHUP (or `l7run --reload`) asks for the object at
 * the same path to be loaded again; a loader thread opens, verifies and fills the new version
 * while the run loop keeps serving with the current one (the verifier can take seconds), and
 * hands it back through an eventfd; the run loop then publishes it (drain.c in gateway mode,
 * mesh_reload.c in mesh mode). A load that fails leaves nothing loaded and changes nothing.
 * The l7_reload map, pinned next to the other pins, tells `--stats`, `--metrics` and
 * `--reload` which version serves, how many reloads were done or refused, what is draining. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <bpf/bpf.h>
#include "l7run.h"

struct reload_counters RC;

static volatile sig_atomic_t pending;
static volatile uint64_t pending_at;   /* us, CLOCK_MONOTONIC, of the first unserved SIGHUP */

static struct {
	int (*load)(const char *path, char *err, size_t errlen, void **out);
	char path[512];
	pthread_t th;
	int busy;
	int efd;
	char err[1024];
	void *result;
	uint64_t t_signal;
} J = { .efd = -1 };

static int state_fd = -1;

uint64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static void on_hup(int sig)
{
	(void)sig;
	if (!pending)
		pending_at = now_us();   /* clock_gettime is async-signal-safe */
	pending = 1;
}

/* SIGHUP handling and the eventfd the run loop watches (returned). */
int reload_init(const char *path, int (*load)(const char *path, char *err, size_t errlen, void **out))
{
	struct sigaction sa = { .sa_handler = on_hup };

	J.load = load;
	snprintf(J.path, sizeof J.path, "%s", path);
	J.efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	sigaction(SIGHUP, &sa, NULL);
	return J.efd;
}

static void *loader(void *arg)
{
	(void)arg;
	J.result = NULL;
	if (J.load(J.path, J.err, sizeof J.err, &J.result) && !J.err[0])
		snprintf(J.err, sizeof J.err, "unknown error");
	uint64_t one = 1;
	(void)!write(J.efd, &one, sizeof one);
	return NULL;
}

/* From the run loop: a SIGHUP came and no load runs: start one. */
void reload_poll(void)
{
	if (!pending || J.busy)
		return;
	J.t_signal = pending_at;
	pending = 0;
	J.busy = 1;
	J.err[0] = 0;
	/* SIGHUP must reach the run loop (its epoll_wait returns EINTR), not the loader */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	int e = pthread_create(&J.th, NULL, loader, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (e) {
		J.th = pthread_self();
		loader(NULL);   /* no thread: load in the run loop instead */
	}
}

/* The loader's eventfd fired: publish what it loaded, or report why it could not. */
void reload_done(void (*publish)(void *v, uint64_t t_signal))
{
	uint64_t n;

	if (read(J.efd, &n, sizeof n) != sizeof n || !J.busy)
		return;
	if (!pthread_equal(J.th, pthread_self()))
		pthread_join(J.th, NULL);
	J.busy = 0;
	if (J.result) {
		RC.reloads++;
		publish(J.result, J.t_signal);
	} else {
		RC.failed++;
		fprintf(stderr, "l7run: reload of %s refused, the serving version is unchanged: %s\n", J.path, J.err);
	}
}

int reload_busy(void)
{
	return J.busy || pending;
}

/* Stopping: wait for a load in progress and unload what it loaded (never published). */
void reload_fini(void (*discard)(void *v))
{
	if (J.busy && !pthread_equal(J.th, pthread_self())) {
		pthread_join(J.th, NULL);
		J.busy = 0;
		if (J.result)
			discard(J.result);
	}
	if (J.efd >= 0)
		close(J.efd);
	if (state_fd >= 0)
		close(state_fd);
}

/* ---- the l7_reload map ------------------------------------------------------------------ */

int state_map_create(const char *pin_dir)
{
	char p[512];

	state_fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "l7_reload", sizeof(uint32_t), sizeof(struct reload_state),
				  1 + MAX_VERSIONS, NULL);
	if (state_fd < 0) {
		fprintf(stderr, "l7run: cannot create the l7_reload map: %s\n", strerror(errno));
		return -1;
	}
	if (pin_dir[0]) {
		snprintf(p, sizeof p, "%s/map_l7_reload", pin_dir);
		unlink(p);
		if (bpf_obj_pin(state_fd, p))
			fprintf(stderr, "l7run: pin %s: %s\n", p, strerror(errno));
	}
	return 0;
}

int state_map_fd(void)
{
	return state_fd;
}

/* rows: the loaded versions, the serving one first (both modes list theirs the same way). */
void state_write(const struct reload_version *rows, int n)
{
	struct reload_version zero;
	struct reload_state s;

	if (state_fd < 0)
		return;
	memset(&zero, 0, sizeof zero);
	memset(&s, 0, sizeof s);
	s.version = n ? rows[0].id : 0;
	s.reloads = RC.reloads;
	s.failed = RC.failed;
	s.last_us = RC.last_us;
	s.live = (uint64_t)n;
	for (int i = 0; i < n; i++)
		s.draining += rows[i].draining;
	uint32_t k = 0;
	bpf_map_update_elem(state_fd, &k, &s, BPF_ANY);
	for (k = 1; k <= MAX_VERSIONS; k++)
		bpf_map_update_elem(state_fd, &k, (int)k <= n ? &rows[k - 1] : &zero, BPF_ANY);
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
