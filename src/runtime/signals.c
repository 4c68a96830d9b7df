/* signals.c — SIGUSR1, SIGTERM and SIGINT during training become a flag the training loop reads
 * at each step boundary (and shares with the other ranks inside the step's loss sum). The
 * handler only stores the signal number, which is async-signal-safe; a second SIGINT writes one
 * line and exits 130 at once, for a user who does not want to wait for the checkpoint. */
#include "ptrain/signals.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t pending;
static const int watched[3] = {SIGUSR1, SIGTERM, SIGINT};

static void on_signal(int sig)
{
    if (sig == SIGINT && pending == SIGINT) {
        static const char msg[] = "\nptrain: second interrupt: stopping now without a checkpoint\n";
        ssize_t rc = write(STDERR_FILENO, msg, sizeof msg - 1);
        (void)rc;
        _exit(130);
    }
    if (!pending) pending = sig;
    else if (sig == SIGINT) pending = SIGINT; /* so that the next Ctrl-C aborts */
}

void signals_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    for (int i = 0; i < 3; i++) sigaction(watched[i], &sa, NULL);
}

int signals_pending(void) { return pending; }

const char *signals_name(int sig)
{
    return sig == SIGUSR1 ? "SIGUSR1" : sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : "a signal";
}
