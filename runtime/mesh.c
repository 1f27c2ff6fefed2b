/* l7run --mesh --cgroup PATH [--create-cgroup] [--pool N] [options] prog.o [-- CMD [ARGS]]
 *
 * Loads only the mesh programs of the object, moves itself into the cgroup (its listener and
 * pool sockets must be enrolled like the applications'), attaches sock_ops to the cgroup with a
 * bpf_link and SK_MSG to l7_mesh_socks, fills the pool, and serves the slow path until SIGINT or
 * SIGTERM (or until CMD ends: child.c); SIGHUP loads the object again as a new version
 * (mesh_reload.c). Shutdown: stop
 * enrolling, let in-flight responses finish on the kernel path, detach SK_MSG, relay what is
 * left on pool connections to their clients, close, unpin. */
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
#include <bpf/libbpf.h>
#include "mesh.h"

#define CGROUP2_ROOT "/sys/fs/cgroup/unified"

struct mesh M;
static volatile sig_atomic_t stop;   /* SIGTERM, SIGINT, or the -- CMD ended (child.c) */

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

static int mesh_listen(void)
{
	/* the first version's addresses: a reload that changes them is refused (mesh_reload.c) */
	for (int i = 0; i < M.cur->cfg.n_services; i++) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		if (bind(fd, (struct sockaddr *)&M.cur->cfg.service[i].addr, sizeof(struct sockaddr_in)) || listen(fd, 4096)) {
			fprintf(stderr, "l7run[mesh]: listen on service %s: %s\n", M.cur->cfg.service[i].name, strerror(errno));
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
		reload_poll();
		int n = epoll_wait(M.epfd, evs, 256, 5);
		jwt_tick();
		ident_tick();
		for (int i = 0; i < n; i++) {
			uint64_t d = evs[i].data.u64;
			if (d & MESH_EV_LISTEN) {
				mesh_accept(M.listen_fd[d & 0xffff]);
			} else if (d & MESH_EV_POOL) {
				struct mesh_ver *v = M.vtab[(d >> 16) & 0xff];
				if (v)
					mesh_pool_event(v, (int)(d & 0xffff), evs[i].events);
			} else if (d & MESH_EV_RELOAD) {
				reload_done(mesh_publish);
			} else if (d & MESH_EV_RELAY) {
				mesh_relay_event(d, evs[i].events);
			} else {
				mesh_client_event(evs[i].data.ptr, evs[i].events);
			}
		}
		mesh_clients_tick();
		mesh_relays_tick();
		if (mesh_now_ms() - last_fill >= 50) {
			mesh_clients_check_over();
			for (struct mesh_ver *v = M.cur; v; v = v->older) {
				mesh_pool_reap(v);
				mesh_pool_fill(v, 0);
			}
			mesh_retire_tick();
			last_fill = mesh_now_ms();
		}
	}
}

/* In-flight responses finish on the kernel path while sock_ops no longer enrolls anything;
 * what still arrives on pool connections after SK_MSG is detached goes to the bound client. */
static void drain(void)
{
	uint64_t until = mesh_now_ms() + 1000;

	for (struct mesh_ver *v = M.cur; v; v = v->older) {
		bpf_link__destroy(v->sockops_link);
		v->sockops_link = NULL;
	}
	for (;;) {
		int owed = 0;
		for (struct mesh_ver *v = M.cur; v; v = v->older)
			for (uint32_t k = 0; k < L7_MESH_POOL_SIZE; k++) {
				struct l7_mesh_slot s;
				if (v->slot[k].fd >= 0 && !bpf_map_lookup_elem(v->pool, &k, &s) && s.state == L7_MS_BUSY &&
				    s.req_cnt != s.resp_cnt)
					owed++;
			}
		if (!owed || mesh_now_ms() >= until)
			break;
		usleep(5000);
	}
	char buf[65536];
	for (struct mesh_ver *v = M.cur; v; v = v->older) {
		bpf_prog_detach2(v->msg_prog, v->socks, BPF_SK_MSG_VERDICT);
		v->msg_attached = 0;
		for (uint32_t k = 0; k < L7_MESH_POOL_SIZE; k++) {
			struct l7_mesh_slot s;
			if (v->slot[k].fd < 0 || bpf_map_lookup_elem(v->pool, &k, &s) || s.state != L7_MS_BUSY)
				continue;
			struct mesh_client *c = mesh_client_by_key(v, &s.owner);
			ssize_t r;
			while ((r = recv(v->slot[k].fd, buf, sizeof buf, MSG_DONTWAIT)) > 0)
				if (c)
					(void)!send(c->fd, buf, (size_t)r, MSG_NOSIGNAL);
		}
	}
}

/* --metrics-listen: the serving version's counters (its maps stay open while the lock is held) */
static int mesh_metrics(FILE *out)
{
	pthread_mutex_lock(&rt.lock);
	struct mesh_ver *v = M.cur;
	int rc = v ? write_metrics(out, bpf_object__find_map_fd_by_name(v->obj, "l7_counters"),
				   bpf_object__find_map_fd_by_name(v->obj, "l7_entry_hits"), v->stats, v->upstat,
				   state_map_fd(), &v->cfg)
		   : -1;   /* not loaded yet: 503 */
	pthread_mutex_unlock(&rt.lock);
	return rc;
}

int mesh_main(const struct l7run_args *a)
{
	const char *obj = a->obj;

	memset(&M, 0, sizeof M);
	M.cgfd = -1;
	M.pool_n = a->pool_n ? a->pool_n : 32;
	M.verbose = rt.verbose;
	M.created_cgroup = a->create_cgroup;
	snprintf(M.cgroup, sizeof M.cgroup, "%s", a->cgroup);
	snprintf(M.pin_dir, sizeof M.pin_dir, "%s", rt.pin_dir);
	if (M.pool_n < 1 || M.pool_n > L7_MESH_SLOTS) {
		fprintf(stderr, "l7run: --pool %d: 1 to %d connections per upstream\n", M.pool_n, L7_MESH_SLOTS);
		return 2;
	}
	snprintf(M.obj_path, sizeof M.obj_path, "%s", obj);
	if (!M.pin_dir[0])
		snprintf(M.pin_dir, sizeof M.pin_dir, "/sys/fs/bpf/l7mesh-%d", (int)getpid());

	struct rlimit rl = { RLIM_INFINITY, RLIM_INFINITY };
	setrlimit(RLIMIT_MEMLOCK, &rl);
	struct rlimit nf = { 65536, 65536 };
	setrlimit(RLIMIT_NOFILE, &nf);
	signals_init(&stop);
	M.epfd = epoll_create1(EPOLL_CLOEXEC);

	int rc = 1;
	char err[1024];
	void *first = NULL;
	/* the metrics listener outside the cgroup: its sockets are not the mesh's to enroll */
	if (a->metrics_addr && metrics_http_start(a->metrics_addr, mesh_metrics))
		return 1;
	if (a->bpf_stats)
		rt.stats_fd = bpf_stats_on();
	if (enter_cgroup() == 0) {
		if (mesh_load(obj, err, sizeof err, &first))
			fprintf(stderr, "l7run[mesh]: %s\n", err);
	}
	if (first) {
		int efd = reload_init(obj, mesh_load);
		struct epoll_event ev = { .events = EPOLLIN, .data.u64 = MESH_EV_RELOAD };
		epoll_ctl(M.epfd, EPOLL_CTL_ADD, efd, &ev);
		mkdir(M.pin_dir, 0700);
		state_map_create(M.pin_dir);
		mesh_publish(first, 0);
	}
	if (M.cur && mesh_listen() == 0 && (!a->pidfile || pidfile_write(a->pidfile) == 0)) {
		fprintf(stderr, "l7run[mesh]: policy %s, %d service(s), cgroup %s, pins in %s\n", M.cur->cfg.policy,
			M.cur->cfg.n_services, M.cgroup, M.pin_dir);
		/* in the cgroup, the programs attached and the pool filled: its sockets are enrolled */
		if (!a->cmd || child_start(a->cmd) == 0) {
			run_loop();
			drain();
			rc = 0;
		}
	}
	metrics_http_stop();   /* before the maps it reads go */
	reload_fini(mesh_discard);
	mesh_relays_close_all();
	while (M.n_clients)
		mesh_client_close(M.client[0]);
	for (int i = 0; i < MAX_SERVICES; i++)
		if (M.listen_fd[i] > 0)
			close(M.listen_fd[i]);
	mesh_unload_all();
	mesh_pin(NULL, 0);
	if (a->pidfile)
		unlink(a->pidfile);
	if (rt.stats_fd >= 0)
		close(rt.stats_fd);
	rc = child_finish(rc);   /* reaped: out of the cgroup, which can then go */
	leave_cgroup();
	mlog("stopped");
	return rc;
}
