/* What the operations a User-Mode Linux guest is made of cost on this host: a plain system call,
 * a system call stopped and resumed by a ptrace tracer (UML's kernel intercepts every guest system
 * call this way), and a context switch between two processes (a pipe ping-pong). Prints one line
 * per operation: its name and nanoseconds per operation, the median of 5 rounds. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

static double plain_syscalls(long n)
{
	double start = now_ns();
	for (long i = 0; i < n; i++)
		syscall(SYS_getppid);
	return (now_ns() - start) / n;
}

static double traced_syscalls(long n)
{
	int status;
	pid_t child = fork();
	if (child == 0) {
		ptrace(PTRACE_TRACEME, 0, 0, 0);
		raise(SIGSTOP);
		for (long i = 0; i < n; i++)
			syscall(SYS_getppid);
		_exit(0);
	}
	waitpid(child, &status, 0);
	double start = now_ns();
	/* each system call stops twice: at entry and at exit */
	for (;;) {
		if (ptrace(PTRACE_SYSCALL, child, 0, 0) < 0)
			break;
		if (waitpid(child, &status, 0) < 0 || WIFEXITED(status))
			break;
	}
	return (now_ns() - start) / n;
}

static double context_switches(long n)
{
	int there[2], back[2];
	char byte = 0;
	if (pipe(there) || pipe(back))
		exit(1);
	pid_t child = fork();
	if (child == 0) {
		for (long i = 0; i < n; i++) {
			if (read(there[0], &byte, 1) != 1 || write(back[1], &byte, 1) != 1)
				_exit(1);
		}
		_exit(0);
	}
	double start = now_ns();
	for (long i = 0; i < n; i++) {
		if (write(there[1], &byte, 1) != 1 || read(back[0], &byte, 1) != 1)
			exit(1);
	}
	double per = (now_ns() - start) / (2.0 * n);
	waitpid(child, NULL, 0);
	return per;
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median_of_5(double (*measure)(long), long n)
{
	double rounds[5];
	for (int i = 0; i < 5; i++)
		rounds[i] = measure(n);
	qsort(rounds, 5, sizeof(rounds[0]), by_value);
	return rounds[2];
}

int main(void)
{
	printf("syscall %.0f\n", median_of_5(plain_syscalls, 200000));
	printf("ptrace_syscall %.0f\n", median_of_5(traced_syscalls, 20000));
	printf("context_switch %.0f\n", median_of_5(context_switches, 20000));
	return 0;
}
