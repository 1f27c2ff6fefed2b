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
#include <bpf/bpf.h>
#include "l7run.h"

struct runtime rt = { .stats_fd = -1, .pool_max = 1024 };
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
		"  --listen [IDX=]ADDR:PORT   listen address of service IDX (default 0)\n"
		"  --upstream IDX=ADDR:PORT   address of upstream IDX\n"
		"  --fallback IDX             upstream that takes L7_FALLBACK requests\n"
		"  --pool-max N               pool sockets per upstream (default 1024)\n"
		"  --pin DIR                  pin programs and maps here (default /sys/fs/bpf/l7run-PID)\n"
		"  --bpf-stats                enable run-time statistics of the programs\n"
		"  --verbose                  log pool events\n"
		"  --jwt-key IDX=PATH         key file of JWT configuration IDX (raw bytes, one trailing\n"
		"                             newline stripped); overrides the policy's key_file\n"
		"  --metrics-listen ADDR:PORT serve the metrics (Prometheus text) at http://ADDR:PORT/metrics\n"
		"  --identities FILE          caller identities by address (lines `NAME PREFIX...`, names\n"
		"                             from the policy), re-read when the file changes\n");
}

static int override(const char *arg, struct cfg_endpoint *tab, int n, int *count)
{
	int idx = 0;
	const char *eq = strchr(arg, '=');
	if (eq) {
		idx = atoi(arg);
		arg = eq + 1;
	}
	if (idx < 0 || idx >= n || parse_addr(arg, &tab[idx].addr))
		return -1;
	tab[idx].set = 1;
	if (!tab[idx].name[0])
		snprintf(tab[idx].name, sizeof tab[idx].name, "#%d", idx);
	if (count && *count <= idx)
		*count = idx + 1;
	return 0;
}

static char *metrics_config;   /* the object's l7.config, for --metrics-listen */

static int gateway_metrics(FILE *out)
{
	return write_metrics(out, bpf_object__find_map_fd_by_name(rt.obj, "l7_counters"), rt.map_stats, metrics_config);
}

int main(int argc, char **argv)
{
	const char *obj = NULL;
	const char *listen_args[MAX_SERVICES], *up_args[L7_MAX_UPSTREAMS];
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--mesh"))
			return mesh_main(argc, argv);   /* runtime/mesh.c */
	int n_listen = 0, n_up = 0, fallback = -2, bpf_stats = 0;
	const char *metrics_addr = NULL;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--stats") && v)
			return print_stats(v);
		if (!strcmp(a, "--metrics") && v && i + 2 < argc)
			return print_metrics(v, argv[i + 2]);
		else if (!strcmp(a, "--listen") && v && n_listen < MAX_SERVICES)
			listen_args[n_listen++] = v, i++;
		else if (!strcmp(a, "--upstream") && v && n_up < L7_MAX_UPSTREAMS)
			up_args[n_up++] = v, i++;
		else if (!strcmp(a, "--fallback") && v)
			fallback = atoi(v), i++;
		else if (!strcmp(a, "--pool-max") && v)
			rt.pool_max = atoi(v), i++;
		else if (!strcmp(a, "--pin") && v)
			snprintf(rt.pin_dir, sizeof rt.pin_dir, "%s", v), i++;
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
	if (!obj) {
		usage();
		return 2;
	}
	if (read_config(obj, &rt.cfg))
		return 1;
	for (int i = 0; i < n_listen; i++)
		if (override(listen_args[i], rt.cfg.service, MAX_SERVICES, &rt.cfg.n_services)) {
			fprintf(stderr, "l7run: bad --listen %s\n", listen_args[i]);
			return 2;
		}
	for (int i = 0; i < n_up; i++)
		if (override(up_args[i], rt.cfg.upstream, L7_MAX_UPSTREAMS, NULL)) {
			fprintf(stderr, "l7run: bad --upstream %s\n", up_args[i]);
			return 2;
		}
	if (fallback != -2)
		rt.cfg.fallback = fallback;
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

	if (load_object(obj)) {
		if (rt.obj)
			unload_object();
		return 1;
	}
	if (bpf_stats) {
		rt.stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
		if (rt.stats_fd < 0)
			fprintf(stderr, "l7run: cannot enable BPF run-time stats: %s\n", strerror(errno));
	}
	rt.epfd = epoll_create1(EPOLL_CLOEXEC);
	int rc = listen_services();
	metrics_config = config_text(obj);
	if (!rc && metrics_addr)
		rc = metrics_http_start(metrics_addr, gateway_metrics);
	if (!rc) {
		fprintf(stderr, "l7run: policy %s loaded, %d service(s), pins in %s\n", rt.cfg.policy,
			rt.cfg.n_services, rt.pin_dir);
		rc = gateway_run_loop(&stop);
	}
	metrics_http_stop();   /* before the maps it reads go */
	free(metrics_config);
	client_close_all();
	pool_close_all();
	unload_object();
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
		int timeout = clients_waiting() ? 1 : 200;
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
		}
		client_tick();
		jwt_tick();
		ident_tick();
	}
	return 0;
}
