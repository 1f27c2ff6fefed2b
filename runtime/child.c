/* `l7run ... -- CMD [ARGS]` (both modes): CMD is started once the policy serves (in mesh mode
 * l7run is in the cgroup by then, so CMD and its sockets are the mesh's); SIGTERM and SIGINT go
 * on to it instead of stopping l7run (core.c); when it ends (SIGCHLD), l7run stops as on
 * SIGTERM and exits with its status (128 + the signal that killed it, as a shell says). */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>
#include "l7run.h"

int child_start(struct l7run *L, char **argv)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		say(L, "cannot start %s: %s", argv[0], strerror(errno));
		return -1;
	}
	if (pid == 0) {
		sigset_t none;   /* l7run's loop reads its signals from a signalfd: CMD gets them again */
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGPIPE, SIG_DFL);
		execvp(argv[0], argv);
		fprintf(stderr, "l7run: %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	L->child = pid;
	return 0;
}

int child_signal(struct l7run *L, int sig)
{
	if (L->child <= 0)
		return 0;
	kill(L->child, sig);   /* CMD decides; l7run stops when it has ended */
	return 1;
}

/* SIGCHLD: has CMD ended? (It is reaped by child_finish; l7c's exit, under --watch, is not.) */
int child_ended(struct l7run *L)
{
	siginfo_t si;

	memset(&si, 0, sizeof si);
	return L->child > 0 && !waitid(P_PID, (id_t)L->child, &si, WEXITED | WNOHANG | WNOWAIT) && si.si_pid == L->child;
}

/* After l7run has cleaned up: CMD's exit status, or rc when there is no CMD. A CMD still
 * running (l7run stopped on an error of its own) is asked to end, then killed after 5 s. */
int child_finish(struct l7run *L, int rc)
{
	int st = 0;
	pid_t pid = L->child;

	if (pid <= 0)
		return rc;
	L->child = 0;
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
