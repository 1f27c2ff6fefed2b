/* Signals, and `l7run ... -- CMD [ARGS]` (both modes): CMD is started once the policy serves
 * (in mesh mode l7run is in the cgroup by then, so CMD and its sockets are the mesh's); SIGTERM
 * and SIGINT go on to it instead of stopping l7run; when it ends, l7run stops as on SIGTERM
 * and exits with its status (128 + the signal that killed it, as a shell says). */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>
#include "l7run.h"

static volatile sig_atomic_t *stop_flag;
static volatile pid_t child;   /* > 0 while CMD runs */

static void on_stop(int sig)
{
	if (child > 0)
		kill(child, sig);   /* CMD decides; l7run stops when it has ended */
	else
		*stop_flag = 1;
}

static void on_child(int sig)
{
	(void)sig;
	*stop_flag = 1;
}

void signals_init(volatile sig_atomic_t *stop)
{
	/* SA_RESTART: while CMD runs, SIGTERM/SIGINT only pass through l7run, and a blocking call
	 * they interrupt (a pool connect, a send) must not fail for it; epoll_wait still returns
	 * EINTR (it is never restarted), so the loops see `stop` at once */
	struct sigaction sa = { .sa_handler = on_stop, .sa_flags = SA_RESTART },
			 sc = { .sa_handler = on_child, .sa_flags = SA_NOCLDSTOP | SA_RESTART };

	stop_flag = stop;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGCHLD, &sc, NULL);
	signal(SIGPIPE, SIG_IGN);
}

int child_start(char **argv)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "l7run: cannot start %s: %s\n", argv[0], strerror(errno));
		return -1;
	}
	if (pid == 0) {
		signal(SIGPIPE, SIG_DFL);
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		signal(SIGCHLD, SIG_DFL);
		execvp(argv[0], argv);
		fprintf(stderr, "l7run: %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	child = pid;
	return 0;
}

/* After l7run has cleaned up: CMD's exit status, or rc when there is no CMD. A CMD still
 * running (l7run stopped on an error of its own) is asked to end, then killed after 5 s. */
int child_finish(int rc)
{
	int st = 0;
	pid_t pid = child;

	if (pid <= 0)
		return rc;
	child = 0;
	for (int i = 0; waitpid(pid, &st, WNOHANG) == 0; i++) {
		if (i == 0)
			kill(pid, SIGTERM);
		if (i == 500)
			kill(pid, SIGKILL);
		usleep(10000);
	}
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 1;
}
