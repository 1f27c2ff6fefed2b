/* l7run --mesh --cgroup PATH [--create-cgroup] [--pool N] [--pin DIR] [-v] prog.o
 *
 * Loads only the mesh programs of the object, moves itself into the cgroup (its listener and
 * pool sockets must be enrolled like the applications'), attaches sock_ops to the cgroup with a
 * bpf_link and SK_MSG to l7_mesh_socks, fills the pool, and serves the slow path until SIGINT or
 * SIGTERM. Shutdown: stop enrolling, let in-flight responses finish on the kernel path, detach
 * SK_MSG, relay what is left on pool connections to their clients, close, unpin. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <bpf/bpf.h>
#include "mesh.h"

#define CGROUP2_ROOT "/sys/fs/cgroup/unified"

struct mesh M;
static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static int usage(void)
{
	fprintf(stderr, "usage: l7run --mesh --cgroup PATH [--create-cgroup] [--pool N] [--pin DIR] [-v] prog.o\n"
		"  --cgroup PATH     cgroup2 directory of the clients and backends (never the root)\n"
		"  --create-cgroup   create it (and remove it on exit)\n"
		"  --pool N          pre-opened connections per upstream (default 32, at most %d)\n"
		"  --pin DIR         pin l7_mesh_socks/conns/pool here (default /sys/fs/bpf/l7mesh-PID)\n"
		"  --identities FILE caller identities by address, re-read when the file changes\n"
		"  --metrics-listen ADDR:PORT  serve the metrics at http://ADDR:PORT/metrics\n",
		L7_MESH_SLOTS);
	return 2;
}

static int write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = write(fd, text, strlen(text));
	close(fd);
	return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* Only a child of the cgroup2 mount: attaching to the root would cover the whole machine. */
static int enter_cgroup(void)
{
	char real[PATH_MAX], procs[PATH_MAX + 16], pid[32];

	if (M.created_cgroup && mkdir(M.cgroup, 0755) && errno != EEXIST) {
		fprintf(stderr, "l7run[mesh]: mkdir %s: %s\n", M.cgroup, strerror(errno));
		return -1;
	}
	if (!realpath(M.cgroup, real) || strncmp(real, CGROUP2_ROOT "/", strlen(CGROUP2_ROOT) + 1) ||
	    !real[strlen(CGROUP2_ROOT) + 1]) {
		fprintf(stderr, "l7run[mesh]: %s is not a child cgroup under %s\n", M.cgroup, CGROUP2_ROOT);
		return -1;
	}
	snprintf(M.cgroup, sizeof M.cgroup, "%s", real);
	M.cgfd = open(real, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	snprintf(procs, sizeof procs, "%s/cgroup.procs", real);
	snprintf(pid, sizeof pid, "%d\n", (int)getpid());
	if (M.cgfd < 0 || write_file(procs, pid)) {
		fprintf(stderr, "l7run[mesh]: cannot enter %s: %s\n", real, strerror(errno));
		return -1;
	}
	return 0;
}

static void leave_cgroup(void)
{
	char pid[32];

	if (M.cgfd >= 0)
		close(M.cgfd);
	if (!M.created_cgroup)
		return;
	/* leave it so that it can be removed (moving ourselves back attaches nothing) */
	snprintf(pid, sizeof pid, "%d\n", (int)getpid());
	write_file(CGROUP2_ROOT "/cgroup.procs", pid);
	if (rmdir(M.cgroup))
		fprintf(stderr, "l7run[mesh]: rmdir %s: %s (processes still in it?)\n", M.cgroup, strerror(errno));
}

static int map(const char *name)
{
	int fd = bpf_object__find_map_fd_by_name(M.obj, name);
	if (fd < 0)
		fprintf(stderr, "l7run[mesh]: object has no map %s\n", name);
	return fd;
}

static void pin_maps(int on)
{
	static const char *names[] = { "l7_mesh_socks", "l7_mesh_conns", "l7_mesh_pool" };
	int fds[] = { M.socks, M.conns, M.pool };
	char p[512];

	if (on)
		mkdir(M.pin_dir, 0700);
	for (int i = 0; i < 3; i++) {
		snprintf(p, sizeof p, "%s/%s", M.pin_dir, names[i]);
		unlink(p);
		if (on && bpf_obj_pin(fds[i], p))
			fprintf(stderr, "l7run[mesh]: pin %s: %s\n", p, strerror(errno));
	}
	if (!on)
		rmdir(M.pin_dir);
}

static int load(const char *path)
{
	M.obj = bpf_object__open_file(path, NULL);
	if (!M.obj) {
		fprintf(stderr, "l7run[mesh]: cannot open %s: %s\n", path, strerror(errno));
		return -1;
	}
	/* only the mesh programs: gateway ones are neither needed nor attached here */
	struct bpf_program *p;
	bpf_object__for_each_program(p, M.obj) {
		const char *n = bpf_program__name(p);
		bpf_program__set_autoload(p, !strcmp(n, L7_MESH_PROG_SOCKOPS) || !strcmp(n, L7_MESH_PROG_MSG));
	}
	int err = bpf_object__load(M.obj);
	if (err) {
		fprintf(stderr, "l7run[mesh]: the kernel refused %s (%s); verifier log above\n", path, strerror(-err));
		return -1;
	}
	if (jwt_setup(M.obj) || ident_setup(M.obj))   /* keys and callers before any request */
		return -1;
	if (fill_rule_tables(M.obj, path))   /* before anything is attached */
		return -1;
	M.socks = map("l7_mesh_socks");
	M.conns = map("l7_mesh_conns");
	M.addrs = map("l7_mesh_addrs");
	M.pool = map("l7_mesh_pool");
	M.pass = map("l7_mesh_pass");
	M.ctl = map("l7_mesh_ctl");
	M.stats = map("l7_stats");
	if (M.socks < 0 || M.conns < 0 || M.addrs < 0 || M.pool < 0 || M.pass < 0 || M.ctl < 0)
		return -1;

	/* which endpoints matter, before anything can be enrolled */
	for (int i = 0; i < M.cfg.n_services; i++) {
		struct l7_mesh_addr_key k = { M.cfg.service[i].addr.sin_addr.s_addr, ntohs(M.cfg.service[i].addr.sin_port) };
		struct l7_mesh_addr v = { L7_MA_SERVICE, (uint32_t)i };
		bpf_map_update_elem(M.addrs, &k, &v, BPF_ANY);
	}
	for (int i = 0; i < L7_MESH_UPSTREAMS; i++) {
		if (!M.cfg.upstream[i].set)
			continue;
		struct l7_mesh_addr_key k = { M.cfg.upstream[i].addr.sin_addr.s_addr, ntohs(M.cfg.upstream[i].addr.sin_port) };
		struct l7_mesh_addr v = { L7_MA_UPSTREAM, (uint32_t)i };
		bpf_map_update_elem(M.addrs, &k, &v, BPF_ANY);
	}
	if (M.cfg.fallback >= 0) {
		struct l7_mesh_addr_key k = { 0, 0 };   /* the fallback proxy's upstream index */
		struct l7_mesh_addr v = { L7_MA_UPSTREAM, (uint32_t)M.cfg.fallback };
		bpf_map_update_elem(M.addrs, &k, &v, BPF_ANY);
	}

	struct bpf_program *msg = bpf_object__find_program_by_name(M.obj, L7_MESH_PROG_MSG);
	struct bpf_program *ops = bpf_object__find_program_by_name(M.obj, L7_MESH_PROG_SOCKOPS);
	if (!msg || !ops) {
		fprintf(stderr, "l7run[mesh]: %s has no mesh programs (built by an older l7c?)\n", path);
		return -1;
	}
	M.msg_prog = bpf_program__fd(msg);
	if (bpf_prog_attach(M.msg_prog, M.socks, BPF_SK_MSG_VERDICT, 0)) {
		fprintf(stderr, "l7run[mesh]: attach sk_msg: %s\n", strerror(errno));
		return -1;
	}
	M.msg_attached = 1;
	M.sockops_link = bpf_program__attach_cgroup(ops, M.cgfd);
	if (!M.sockops_link) {
		fprintf(stderr, "l7run[mesh]: attach sock_ops to %s: %s\n", M.cgroup, strerror(errno));
		return -1;
	}
	pin_maps(1);
	return 0;
}

static int mesh_listen(void)
{
	for (int i = 0; i < M.cfg.n_services; i++) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		if (bind(fd, (struct sockaddr *)&M.cfg.service[i].addr, sizeof(struct sockaddr_in)) || listen(fd, 4096)) {
			fprintf(stderr, "l7run[mesh]: listen on service %s: %s\n", M.cfg.service[i].name, strerror(errno));
			close(fd);
			return -1;
		}
		M.listen_fd[i] = fd;
		struct epoll_event ev = { .events = EPOLLIN, .data.u64 = MESH_EV_LISTEN | (uint64_t)i };
		epoll_ctl(M.epfd, EPOLL_CTL_ADD, fd, &ev);
	}
	return 0;
}

static void run_loop(void)
{
	struct epoll_event evs[256];
	uint64_t last_fill = 0;

	while (!stop) {
		int n = epoll_wait(M.epfd, evs, 256, 5);
		jwt_tick();
		ident_tick();
		for (int i = 0; i < n; i++) {
			uint64_t d = evs[i].data.u64;
			if (d & MESH_EV_LISTEN)
				mesh_accept(M.listen_fd[d & 0xffff]);
			else if (d & MESH_EV_POOL)
				mesh_pool_event((int)(d & 0xffff), evs[i].events);
			else
				mesh_client_event(evs[i].data.ptr, evs[i].events);
		}
		mesh_clients_tick();
		if (mesh_now_ms() - last_fill >= 50) {
			mesh_clients_check_over();
			mesh_pool_reap();
			mesh_pool_fill(0);
			last_fill = mesh_now_ms();
		}
	}
}

/* In-flight responses finish on the kernel path while sock_ops no longer enrolls anything;
 * what still arrives on pool connections after SK_MSG is detached goes to the bound client. */
static void drain(void)
{
	uint64_t until = mesh_now_ms() + 1000;

	bpf_link__destroy(M.sockops_link);
	M.sockops_link = NULL;
	for (;;) {
		int owed = 0;
		for (uint32_t k = 0; k < L7_MESH_POOL_SIZE; k++) {
			struct l7_mesh_slot s;
			if (M.slot[k].fd >= 0 && !bpf_map_lookup_elem(M.pool, &k, &s) && s.state == L7_MS_BUSY &&
			    s.req_cnt != s.resp_cnt)
				owed++;
		}
		if (!owed || mesh_now_ms() >= until)
			break;
		usleep(5000);
	}
	bpf_prog_detach2(M.msg_prog, M.socks, BPF_SK_MSG_VERDICT);
	M.msg_attached = 0;
	char buf[65536];
	for (uint32_t k = 0; k < L7_MESH_POOL_SIZE; k++) {
		struct l7_mesh_slot s;
		if (M.slot[k].fd < 0 || bpf_map_lookup_elem(M.pool, &k, &s) || s.state != L7_MS_BUSY)
			continue;
		struct mesh_client *c = mesh_client_by_key(&s.owner);
		ssize_t r;
		while ((r = recv(M.slot[k].fd, buf, sizeof buf, MSG_DONTWAIT)) > 0)
			if (c)
				(void)!send(c->fd, buf, (size_t)r, MSG_NOSIGNAL);
	}
}

static char *metrics_config;   /* the object's l7.config, for --metrics-listen */

static int mesh_metrics(FILE *out)
{
	struct bpf_object *o = __atomic_load_n(&M.obj, __ATOMIC_ACQUIRE);
	if (!o || !M.stats)
		return -1;   /* not loaded yet: 503 */
	return write_metrics(out, bpf_object__find_map_fd_by_name(o, "l7_counters"), M.stats, metrics_config);
}

int mesh_main(int argc, char **argv)
{
	const char *obj = NULL, *metrics_addr = NULL;

	memset(&M, 0, sizeof M);
	M.cgfd = -1;
	M.pool_n = 32;
	for (int i = 0; i < L7_MESH_POOL_SIZE; i++)
		M.slot[i].fd = -1;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--mesh"))
			continue;
		if (!strcmp(a, "--cgroup") && v)
			snprintf(M.cgroup, sizeof M.cgroup, "%s", v), i++;
		else if (!strcmp(a, "--create-cgroup"))
			M.created_cgroup = 1;
		else if (!strcmp(a, "--pool") && v)
			M.pool_n = atoi(v), i++;
		else if (!strcmp(a, "--pin") && v)
			snprintf(M.pin_dir, sizeof M.pin_dir, "%s", v), i++;
		else if (!strcmp(a, "--jwt-key") && v && !jwt_key_arg(v))
			i++;
		else if (!strcmp(a, "--identities") && v && !ident_file_arg(v))
			i++;
		else if (!strcmp(a, "--metrics-listen") && v)
			metrics_addr = v, i++;
		else if (!strcmp(a, "-v") || !strcmp(a, "--verbose"))
			M.verbose = 1;
		else if (a[0] != '-' && !obj)
			obj = a;
		else
			return usage();
	}
	if (!obj || !M.cgroup[0] || M.pool_n < 1 || M.pool_n > L7_MESH_SLOTS)
		return usage();
	if (!M.pin_dir[0])
		snprintf(M.pin_dir, sizeof M.pin_dir, "/sys/fs/bpf/l7mesh-%d", (int)getpid());
	if (read_config(obj, &M.cfg))
		return 1;

	struct rlimit rl = { RLIM_INFINITY, RLIM_INFINITY };
	setrlimit(RLIMIT_MEMLOCK, &rl);
	struct rlimit nf = { 65536, 65536 };
	setrlimit(RLIMIT_NOFILE, &nf);
	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	M.epfd = epoll_create1(EPOLL_CLOEXEC);

	int rc = 1;
	/* the metrics listener outside the cgroup: its sockets are not the mesh's to enroll */
	metrics_config = config_text(obj);
	if (metrics_addr && metrics_http_start(metrics_addr, mesh_metrics))
		return 1;
	if (enter_cgroup() == 0 && load(obj) == 0 && mesh_listen() == 0) {
		mesh_pool_fill(1);
		fprintf(stderr, "l7run[mesh]: policy %s, %d service(s), cgroup %s, pins in %s\n", M.cfg.policy,
			M.cfg.n_services, M.cgroup, M.pin_dir);
		run_loop();
		drain();
		rc = 0;
	}
	metrics_http_stop();   /* before the maps it reads go */
	free(metrics_config);
	while (M.n_clients)
		mesh_client_close(M.client[0]);
	mesh_pool_close_all();
	for (int i = 0; i < M.cfg.n_services; i++)
		if (M.listen_fd[i] > 0)
			close(M.listen_fd[i]);
	if (M.sockops_link)
		bpf_link__destroy(M.sockops_link);
	if (M.msg_attached)
		bpf_prog_detach2(M.msg_prog, M.socks, BPF_SK_MSG_VERDICT);
	if (M.obj) {
		pin_maps(0);
		bpf_object__close(M.obj);
	}
	leave_cgroup();
	mlog("stopped");
	return rc;
}
