/* The node agent: `l7run --watch DIR` builds its policy from a directory instead of a POLICY.o
 * and follows it. DIR is what a kubelet makes of a ConfigMap volume: the visible files are
 * symlinks through `..data`, which the kubelet swaps in one rename(2) to a new timestamped
 * directory, so a reader that resolves `..data` once sees one consistent set of files.
 *
 * What DIR holds is one policy: either one `.l7` file (with the `.l7i` interfaces it imports),
 * or Cilium/Istio `*.yaml` objects, imported together (`l7c import`, as their controllers apply
 * every object of a namespace together) with the arguments of an optional `import.args` (one a
 * line). Dotfiles and anything else are ignored; two `.l7` files, or `.l7` and YAML, are refused
 * (one policy's services and upstreams are one object: put them in one file).
 *
 * A change (inotify, settled for WATCH_SETTLE_MS) asks for a reload; the loader thread copies
 * the files into a build directory of its own (the kubelet may remove the old timestamped
 * directory at any time), runs l7c as a child process (compile; the kernel's verifier is then
 * l7run's load of the object), and loads the object off the loop as a SIGHUP reload does: the
 * loop keeps serving the current version, publishes the new one only when all of it loaded,
 * and a refused one changes nothing (the log, l7_policy_reload_failures_total{stage} and the
 * status file say why). Sources equal to the last built ones (the kubelet's clean-up events)
 * build nothing; SIGHUP builds anyway. */
#define _GNU_SOURCE   /* nftw's FTW_DEPTH and FTW_PHYS */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "hash.h"
#include "l7run.h"

#define WATCH_SETTLE_MS 200      /* a kubelet update is several events (mkdir, symlink, rename, rm) */
#define SOURCE_MAX (4u << 20)    /* bytes per file: a ConfigMap holds at most 1 MiB */
#define L7C_TIMEOUT_MS 300000    /* a compile that hangs must not stop every later update */

extern char **environ;

/* ---- files ------------------------------------------------------------------------------- */

/* snprintf for paths and names: -1 if it did not fit (then a later open fails and says so). */
static int __attribute__((format(printf, 3, 4))) pathf(char *out, size_t n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = vsnprintf(out, n, fmt, ap);
	va_end(ap);
	return r < 0 || (size_t)r >= n ? -1 : 0;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)f;
	return flag == FTW_DP ? rmdir(p) : unlink(p);
}

static void rm_tree(const char *dir)
{
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static const char *suffix(const char *name)
{
	const char *dot = strrchr(name, '.');
	return dot ? dot : "";
}


/* Copy DIR/name into to/name; its bytes go into *h. 0, or -1 with err. */
static int copy_source(const char *from, const char *to, const char *name, uint64_t *h, char *err, size_t errlen)
{
	char a[PATH_MAX], b[PATH_MAX];
	pathf(a, sizeof a, "%s/%s", from, name);
	pathf(b, sizeof b, "%s/%s", to, name);
	FILE *in = fopen(a, "rb"), *out = in ? fopen(b, "wb") : NULL;
	char *buf = malloc(SOURCE_MAX + 1);
	size_t n = in && buf ? fread(buf, 1, SOURCE_MAX + 1, in) : 0;
	int rc = -1;

	if (!in || !out || !buf || ferror(in))
		snprintf(err, errlen, "%s: %s", a, strerror(errno));
	else if (n > SOURCE_MAX)
		snprintf(err, errlen, "%s: larger than %u bytes", a, SOURCE_MAX);
	else if (fwrite(buf, 1, n, out) != n)
		snprintf(err, errlen, "%s: %s", b, strerror(errno));
	else
		rc = 0;
	*h = l7_fnv1a(l7_fnv1a(*h, name, strlen(name) + 1), buf ? buf : "", n);   /* which sources a build saw */
	if (in)
		fclose(in);
	if (out && fclose(out))
		rc = -1;
	free(buf);
	return rc;
}

/* ---- l7c as a child process ------------------------------------------------------------------ */

/* Run argv with its output in log; 0 if it exited 0, else -1 with its output in err. */
static int run(struct l7run *L, char **argv, const char *log, char *err, size_t errlen)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, def;
	pid_t pid;
	int st = 0;

	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	posix_spawnattr_init(&at);
	sigemptyset(&none);   /* l7run's threads block the signals its loop reads from a signalfd */
	sigemptyset(&def);
	sigaddset(&def, SIGPIPE);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &def);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	int e = posix_spawnp(&pid, argv[0], &fa, &at, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	if (e) {
		snprintf(err, errlen, "cannot run %s: %s", argv[0], strerror(e));
		return -1;
	}
	uint64_t t0 = now_ms();
	const char *killed = NULL;
	while (waitpid(pid, &st, WNOHANG) == 0) {
		int stop = __atomic_load_n(&L->stop, __ATOMIC_RELAXED);   /* the loop's */
		if (!killed && (stop || now_ms() - t0 > L7C_TIMEOUT_MS)) {
			killed = stop ? "l7run is stopping" : "timed out";
			kill(pid, SIGKILL);
		}
		usleep(5000);
	}
	if (!killed && WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	int n = snprintf(err, errlen, "%s %s (%s %d):\n", argv[0], argv[1],
			 killed ? killed : WIFEXITED(st) ? "exit" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
	FILE *f = fopen(log, "r");
	if (f && n > 0 && (size_t)n < errlen) {
		size_t r = fread(err + n, 1, errlen - (size_t)n - 1, f);
		err[(size_t)n + r] = 0;
		while (r && err[n + (int)r - 1] == '\n')
			err[n + (int)--r] = 0;
	}
	if (f)
		fclose(f);
	return -1;
}

/* ---- a build (the loader thread) ----------------------------------------------------------- */

/* Snapshot DIR into src, build it into dir/policy.o (W->obj). 0 built, 1 the sources are those
 * of the last build (nothing done), -1 refused: err says why. */
int watch_build(struct l7run *L, char *err, size_t errlen)
{
	struct watch *W = &L->watch;
	char from[PATH_MAX], dir[PATH_MAX], src[PATH_MAX + 8], log[PATH_MAX + 16], p[PATH_MAX];
	char l7[PATH_MAX + 300] = "", *yaml[64];
	int n_l7 = 0, n_yaml = 0, args = 0, rc = -1;
	uint64_t h = L7_FNV_BASIS;

	W->obj[0] = 0;
	W->unchanged = 0;
	pathf(dir, sizeof dir, "%s/%d", W->work, ++W->n);
	pathf(src, sizeof src, "%s/src", dir);
	pathf(log, sizeof log, "%s/l7c.log", dir);
	if (mkdir(dir, 0700) || mkdir(src, 0700)) {
		snprintf(err, errlen, "%s: %s", src, strerror(errno));
		return -1;
	}
	/* the kubelet's current timestamped directory, resolved once; else DIR itself */
	pathf(p, sizeof p, "%s/..data", L->args.watch);
	if (!realpath(p, from) && !realpath(L->args.watch, from)) {
		snprintf(err, errlen, "--watch %s: %s", L->args.watch, strerror(errno));
		goto out;
	}
	struct dirent **ents;
	int n = scandir(from, &ents, NULL, alphasort);
	if (n < 0) {
		snprintf(err, errlen, "%s: %s", from, strerror(errno));
		goto out;
	}
	W->sources[0] = 0;
	err[0] = 0;
	for (int i = 0; i < n; i++) {
		const char *name = ents[i]->d_name, *sfx = suffix(name);
		struct stat st;
		pathf(p, sizeof p, "%s/%s", from, name);
		int is_l7 = !strcmp(sfx, ".l7"), is_yaml = !strcmp(sfx, ".yaml") || !strcmp(sfx, ".yml");
		int take = is_l7 || is_yaml || !strcmp(sfx, ".l7i") || !strcmp(name, "import.args");
		if (name[0] == '.' || !take || stat(p, &st) || !S_ISREG(st.st_mode) || err[0])
			continue;
		if (copy_source(from, src, name, &h, err, errlen))
			continue;
		size_t used = strlen(W->sources);
		pathf(W->sources + used, sizeof W->sources - used, "%s%s", used ? " " : "", name);
		if (is_l7 && !n_l7++)
			pathf(l7, sizeof l7, "%s/%s", src, name);
		if (is_yaml && n_yaml == 60)
			snprintf(err, errlen, "%s: more than 60 YAML files", from);
		else if (is_yaml)
			yaml[n_yaml++] = strdup(name);
		args |= !strcmp(name, "import.args");
	}
	for (int i = 0; i < n; i++)
		free(ents[i]);
	free(ents);
	if (err[0])
		goto out;
	W->digest = h;
	if (!W->forced && h == W->tried) {
		W->unchanged = 1;
		rc = 1;
		goto out;
	}
	W->tried = h;
	if (n_l7 + n_yaml == 0) {
		snprintf(err, errlen, "%s holds no policy: one .l7 file, or Cilium/Istio *.yaml objects", L->args.watch);
		goto out;
	}
	if (n_l7 > 1 || (n_l7 && n_yaml)) {
		snprintf(err, errlen, "%s holds %d .l7 and %d YAML file(s) (%s): one policy a directory, either one .l7 "
			 "file or YAML objects imported together", L->args.watch, n_l7, n_yaml, W->sources);
		goto out;
	}
	if (n_yaml) {   /* l7c import [import.args] A.yaml... -o src/imported.l7 */
		char *argv[64 + 64 + 8], line[512], *owned[64];
		int a = 0, n_owned = 0;
		argv[a++] = W->l7c;
		argv[a++] = "import";
		pathf(p, sizeof p, "%s/import.args", src);
		FILE *f = args ? fopen(p, "r") : NULL;
		while (f && fgets(line, sizeof line, f) && n_owned < 64) {
			line[strcspn(line, "\r\n")] = 0;
			if (!line[0] || line[0] == '#')
				continue;
			if (strncmp(line, "--", 2) || !strncmp(line, "-o", 2)) {
				snprintf(err, errlen, "import.args: `%s`: one --option=value a line (the output is l7run's)", line);
				break;
			}
			argv[a++] = owned[n_owned++] = strdup(line);
		}
		if (f)
			fclose(f);
		char paths[64][PATH_MAX + 64];
		for (int i = 0; i < n_yaml; i++) {
			pathf(paths[i], sizeof paths[i], "%s/%s", src, yaml[i]);
			argv[a++] = paths[i];
		}
		pathf(l7, sizeof l7, "%s/imported.l7", src);
		argv[a++] = "-o";
		argv[a++] = l7;
		argv[a] = NULL;
		int bad = err[0] || run(L, argv, log, err, errlen);
		for (int i = 0; i < n_owned; i++)
			free(owned[i]);
		if (bad)
			goto out;
	}
	pathf(W->obj, sizeof W->obj, "%s/policy.o", dir);
	/* this mode's programs only: the other mode's machinery would double the compile's work */
	char *argv[] = { W->l7c, L->args.mesh ? "--mode=mesh" : "--mode=gateway", l7, "-o", W->obj, NULL };
	if (run(L, argv, log, err, errlen)) {
		W->obj[0] = 0;
		goto out;
	}
	rc = 0;
out:
	for (int i = 0; i < n_yaml; i++)
		free(yaml[i]);
	if (rc)
		rm_tree(dir);
	return rc;
}

/* ---- the loop's side ----------------------------------------------------------------------- */

static void on_change(struct l7run *L, struct io *io, uint32_t events)
{
	struct watch *W = &L->watch;
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));

	(void)io;
	(void)events;
	while (read(W->fd, buf, sizeof buf) > 0)
		;
	if (!W->dirty_at)
		W->dirty_at = now_ms();
}

void watch_tick(struct l7run *L, uint64_t now)
{
	struct watch *W = &L->watch;

	if (W->dirty_at && now - W->dirty_at >= WATCH_SETTLE_MS && !L->reload.busy) {
		W->dirty_at = 0;
		reload_request(L, 0);
	}
}

/* The compiler: --l7c, else l7c beside this l7run, else l7c on PATH. */
static void find_l7c(struct l7run *L)
{
	struct watch *W = &L->watch;
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);

	pathf(W->l7c, sizeof W->l7c, "%s", L->args.l7c ? L->args.l7c : "l7c");
	if (L->args.l7c || n <= 0)
		return;
	self[n] = 0;
	char *slash = strrchr(self, '/');
	if (slash) {
		pathf(slash + 1, sizeof self - (size_t)(slash + 1 - self), "l7c");
		if (!access(self, X_OK))
			pathf(W->l7c, sizeof W->l7c, "%s", self);
	}
}

int watch_init(struct l7run *L)
{
	struct watch *W = &L->watch;
	const char *tmp = getenv("TMPDIR");

	find_l7c(L);
	pathf(W->work, sizeof W->work, "%s/l7run-watch-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
	if (!mkdtemp(W->work)) {
		say(L, "--watch: cannot make a build directory %s: %s", W->work, strerror(errno));
		W->work[0] = 0;
		return -1;
	}
	W->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	/* the kubelet's rename of ..data is IN_MOVED_TO; a plain directory's edits the others */
	if (W->fd < 0 || inotify_add_watch(W->fd, L->args.watch, IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM |
						   IN_CLOSE_WRITE | IN_ATTRIB) < 0) {
		say(L, "--watch %s: %s", L->args.watch, strerror(errno));
		return -1;
	}
	W->io.ready = on_change;
	loop_watch(L, W->fd, &W->io, EPOLLIN);
	say(L, "watching %s (builds in %s, compiler %s)", L->args.watch, W->work, W->l7c);
	return 0;
}

void watch_fini(struct l7run *L)
{
	struct watch *W = &L->watch;

	if (W->fd >= 0)
		loop_close(L, W->fd);
	W->fd = -1;
	if (W->work[0])
		rm_tree(W->work);
	W->work[0] = 0;
}

/* After an update was published or refused: what the status file says; the build directories
 * but the serving version's are removed. */
void watch_outcome(struct l7run *L, int published, const char *stage, const char *err)
{
	struct watch *W = &L->watch;

	if (published) {
		W->ok_at = time(NULL);
		W->ok_version = L->cur ? L->cur->id : 0;
		W->ok_digest = W->serving = W->digest;
		W->serving_build = W->n;
	} else {
		W->err_at = time(NULL);
		W->err_digest = W->digest;
		pathf(W->err_stage, sizeof W->err_stage, "%s", stage);
		pathf(W->err, sizeof W->err, "%s", err);
	}
	DIR *d = W->work[0] ? opendir(W->work) : NULL;
	for (struct dirent *e; d && (e = readdir(d));) {
		char p[PATH_MAX];
		if (e->d_name[0] == '.' || atoi(e->d_name) == W->serving_build)
			continue;
		pathf(p, sizeof p, "%s/%s", W->work, e->d_name);
		rm_tree(p);
	}
	if (d)
		closedir(d);
	status_write(L);
}

/* ---- --status-file ---------------------------------------------------------------------------- */

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c == '\n')
			fputs("\\n", f);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static void json_time(FILE *f, time_t t)
{
	struct tm tm;
	char b[32];
	gmtime_r(&t, &tm);
	strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", &tm);
	fprintf(f, "\"%s\"", b);
}

/* Written whole to FILE.tmp, then renamed over FILE: a reader never sees half of it. */
void status_write(struct l7run *L)
{
	const struct watch *W = &L->watch;
	const struct version *v = L->cur;
	char tmp[PATH_MAX];

	if (!L->args.status_file)
		return;
	pathf(tmp, sizeof tmp, "%s.tmp", L->args.status_file);
	FILE *f = fopen(tmp, "w");
	if (!f) {
		say(L, "--status-file %s: %s", tmp, strerror(errno));
		return;
	}
	fprintf(f, "{\n  \"ready\": %s,\n  \"stopping\": %s,\n  \"version\": %d,\n  \"policy\": ",
		v && L->looping && !L->stopping ? "true" : "false", L->stopping ? "true" : "false", v ? v->id : 0);
	json_str(f, v ? v->cfg.policy : "");
	fputs(",\n  \"object\": ", f);
	json_str(f, v ? v->path : "");
	if (L->args.watch) {
		fputs(",\n  \"watch\": ", f);
		json_str(f, L->args.watch);
		fputs(",\n  \"sources\": ", f);
		json_str(f, W->sources);
		fprintf(f, ",\n  \"digest\": \"%016llx\"", (unsigned long long)W->serving);
	}
	fprintf(f, ",\n  \"reloads\": %llu,\n  \"failures\": {\"compile\": %llu, \"load\": %llu},\n  \"last_success\": ",
		(unsigned long long)L->reload.reloads, (unsigned long long)W->build_failed,
		(unsigned long long)L->reload.failed);
	if (W->ok_at) {
		fputs("{\"time\": ", f);
		json_time(f, W->ok_at);
		fprintf(f, ", \"version\": %d, \"digest\": \"%016llx\"}", W->ok_version, (unsigned long long)W->ok_digest);
	} else {
		fputs("null", f);
	}
	fputs(",\n  \"last_error\": ", f);
	if (W->err_at) {
		fputs("{\"time\": ", f);
		json_time(f, W->err_at);
		fputs(", \"stage\": ", f);
		json_str(f, W->err_stage);
		fprintf(f, ", \"digest\": \"%016llx\", \"message\": ", (unsigned long long)W->err_digest);
		json_str(f, W->err);
		fputc('}', f);
	} else {
		fputs("null", f);
	}
	fputs("\n}\n", f);
	if (fclose(f) || rename(tmp, L->args.status_file))
		say(L, "--status-file %s: %s", L->args.status_file, strerror(errno));
}
