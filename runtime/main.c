/* l7run: run a compiled policy in gateway mode.
 *   l7run [options] POLICY.o
 *   l7run --stats PIN_DIR */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <bpf/bpf.h>
#include "l7run.h"

struct runtime rt = { .stats_fd = -1, .pool_max = 1024, .drain_ms = 5000,
		      .ov = { .fallback = -2 }, .lock = PTHREAD_MUTEX_INITIALIZER };
static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: l7run [options] POLICY.o\n"
		"       l7run --stats PIN_DIR\n"
		"       l7run --metrics PIN_DIR POLICY.o    the policy's counters in Prometheus text format\n"
		"       l7run --reload PID|PIDFILE [--pin DIR]   reload (SIGHUP); with DIR, wait and say the outcome\n"
		"       l7run --probe              what this kernel supports of what l7run needs, one line each\n"
		"  --listen [IDX=]ADDR:PORT   listen address of service IDX (default 0)\n"
		"  --upstream IDX=ADDR:PORT   address of upstream IDX\n"
		"  --fallback IDX             upstream that takes L7_FALLBACK requests\n"
		"  --pool-max N               pool sockets per upstream (default 1024)\n"
		"  --pin DIR                  pin programs and maps here (default /sys/fs/bpf/l7run-PID)\n"
		"  --pidfile PATH             write the pid here (for --reload)\n"
		"  --drain-timeout SECONDS    after a reload, close connections the old version still\n"
		"                             serves after this long (default 5; idle ones close at once)\n"
		"  --bpf-stats                enable run-time statistics of the programs\n"
		"  --verbose                  log pool events\n"
		"  --jwt-key IDX=PATH         key file of JWT configuration IDX (raw bytes, one trailing\n"
		"                             newline stripped); overrides the policy's key_file\n"
		"  --metrics-listen ADDR:PORT serve the metrics (Prometheus text) at http://ADDR:PORT/metrics\n"
		"  --identities FILE          caller identities by address (lines `NAME PREFIX...`, names\n"
		"                             from the policy), re-read when the file changes\n"
		"SIGHUP reloads POLICY.o from the same path (replace the file with rename(2)): the new\n"
		"version takes new connections once it is fully loaded; a refused one changes nothing.\n");
}

/* --metrics-listen: the serving version's counters (its maps stay open while the lock is held) */
static int gateway_metrics(FILE *out)
{
	pthread_mutex_lock(&rt.lock);
	struct version *v = rt.cur;
	int rc = v ? write_metrics(out, v->map_counters, bpf_object__find_map_fd_by_name(v->obj, "l7_entry_hits"), v->map_stats, v->map_upstat, state_map_fd(), v->config, &v->cfg)
		   : -1;
	pthread_mutex_unlock(&rt.lock);
	return rc;
}

int main(int argc, char **argv)
{
	const char *obj = NULL, *pidfile = NULL, *reload = NULL, *metrics_addr = NULL;
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--probe"))   /* what this kernel supports, for both modes */
			return probe_print(stdout, &rt.probe, PM_GW | PM_MESH);
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--mesh"))
			return mesh_main(argc, argv);   /* runtime/mesh.c */
	int bpf_stats = 0;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--stats") && v)
			return print_stats(v);
		if (!strcmp(a, "--metrics") && v && i + 2 < argc)
			return print_metrics(v, argv[i + 2]);
		else if (!strcmp(a, "--reload") && v)
			reload = v, i++;
		else if (!strcmp(a, "--listen") && v && rt.ov.n_listen < MAX_SERVICES)
			rt.ov.listen[rt.ov.n_listen++] = v, i++;
		else if (!strcmp(a, "--upstream") && v && rt.ov.n_up < L7_MAX_UPSTREAMS)
			rt.ov.up[rt.ov.n_up++] = v, i++;
		else if (!strcmp(a, "--fallback") && v)
			rt.ov.fallback = atoi(v), i++;
		else if (!strcmp(a, "--pool-max") && v)
			rt.pool_max = atoi(v), i++;
		else if (!strcmp(a, "--pin") && v)
			snprintf(rt.pin_dir, sizeof rt.pin_dir, "%s", v), i++;
		else if (!strcmp(a, "--pidfile") && v)
			pidfile = v, i++;
		else if (!strcmp(a, "--drain-timeout") && v && atof(v) >= 0)
			rt.drain_ms = (uint64_t)(atof(v) * 1000), i++;
		else if (!strcmp(a, "--bpf-stats"))
			bpf_stats = 1;
		else if (!strcmp(a, "--verbose") || !strcmp(a, "-v"))
			rt.verbose = 1;
		else if (!strcmp(a, "--jwt-key") && v && !jwt_key_arg(v))
			i++;
		else if (!strcmp(a, "--identities") && v && !ident_file_arg(v))
			i++;
		else if (!strcmp(a, "--metrics-listen") && v)
			metrics_addr = v, i++;
		else if (a[0] != '-' && !obj)
			obj = a;
		else {
			usage();
			return 2;
		}
	}
	if (reload)
		return reload_command(reload, rt.pin_dir);
	if (!obj) {
		usage();
		return 2;
	}
	snprintf(rt.obj_path, sizeof rt.obj_path, "%s", obj);
	if (!rt.pin_dir[0])
		snprintf(rt.pin_dir, sizeof rt.pin_dir, "/sys/fs/bpf/l7run-%d", (int)getpid());

	struct rlimit rl = { RLIM_INFINITY, RLIM_INFINITY };
	setrlimit(RLIMIT_MEMLOCK, &rl);
	struct rlimit nf = { MAX_FDS, MAX_FDS };
	setrlimit(RLIMIT_NOFILE, &nf);
	fds = calloc(MAX_FDS, sizeof *fds);
	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	char err[1024];
	struct version *first = version_load(obj, err, sizeof err);
	if (!first) {
		fprintf(stderr, "l7run: %s\n", err);
		return 1;
	}
	if (bpf_stats) {
		rt.stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
		if (rt.stats_fd < 0)
			fprintf(stderr, "l7run: cannot enable BPF run-time stats: %s\n", strerror(errno));
	}
	rt.epfd = epoll_create1(EPOLL_CLOEXEC);
	int efd = reload_init(obj, gateway_load);
	fds[efd].kind = FD_RELOAD;
	struct epoll_event rev = { .events = EPOLLIN, .data.fd = efd };
	epoll_ctl(rt.epfd, EPOLL_CTL_ADD, efd, &rev);
	mkdir(rt.pin_dir, 0700);
	state_map_create(rt.pin_dir);
	gateway_publish(first, 0);
	int rc = listen_services();
	if (!rc && pidfile)
		rc = pidfile_write(pidfile);
	if (!rc && metrics_addr)
		rc = metrics_http_start(metrics_addr, gateway_metrics);
	if (!rc) {
		fprintf(stderr, "l7run: policy %s loaded, %d service(s), pins in %s\n", rt.cur->cfg.policy,
			rt.cur->cfg.n_services, rt.pin_dir);
		rc = gateway_run_loop(&stop);
	}
	metrics_http_stop();   /* before the maps it reads go */
	reload_fini(gateway_discard);
	client_close_all();
	pool_close_all();
	gateway_unload_all();
	version_unpin();
	if (pidfile)
		unlink(pidfile);
	if (rt.stats_fd >= 0)
		close(rt.stats_fd);
	vlog("stopped");
	return rc ? 1 : 0;
}

/* One thread, readiness-driven; the 1 ms tick runs only while something waits or drains. */
int gateway_run_loop(volatile sig_atomic_t *stopping)
{
	struct epoll_event ev[256];

	while (!*stopping) {
		reload_poll();
		int timeout = clients_waiting() || gateway_draining() ? 1 : 200;
		int n = epoll_wait(rt.epfd, ev, 256, timeout);
		if (n < 0 && errno != EINTR)
			return -1;
		for (int i = 0; i < n; i++) {
			int fd = ev[i].data.fd;
			struct fd_ent *e = &fds[fd];
			if (e->kind == FD_LISTENER)
				accept_clients(fd, e->service);
			else if (e->kind == FD_CLIENT)
				client_event(e->p, ev[i].events);
			else if (e->kind == FD_POOL)
				pool_event(e->p, ev[i].events);
			else if (e->kind == FD_RELOAD)
				reload_done(gateway_publish);
		}
		client_tick();
		client_watch();
		gateway_retire_tick();
		jwt_tick();
		ident_tick();
	}
	return 0;
}
