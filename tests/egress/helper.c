/* Escape techniques that need C: i386 `int 0x80` from a 64-bit process, and vfork.
   Built by the egress tests at session start; run only inside a test network namespace.
   Prints one JSON object; errno values are printed by name by the Python side's table. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static void fill(struct sockaddr_in *sa, const char *host, int port) {
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    sa->sin_port = htons(port);
    inet_pton(AF_INET, host, &sa->sin_addr);
}

/* Bound a connect nobody answers (an uncontained control run): EINPROGRESS after 1 s. */
static int bounded(int fd) {
    struct timeval tv = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    return fd;
}

static long int80(long nr, long a, long b, long c) {
    long ret;
    __asm__ volatile("int $0x80" : "=a"(ret) : "a"(nr), "b"(a), "c"(b), "d"(c) : "memory");
    return ret;
}

int main(int argc, char **argv) {
    if (argc < 4) return 2;
    const char *host = argv[2];
    int port = atoi(argv[3]);
    if (strcmp(argv[1], "int80") == 0) {
        /* i386 ABI: pointers must be below 4 GiB. */
        struct sockaddr_in *sa = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
        fill(sa, host, port);
        long fd32 = int80(359, AF_INET, SOCK_STREAM, 0); /* i386 socket */
        int fd = bounded(socket(AF_INET, SOCK_STREAM, 0));
        long rc = int80(362, fd, (long)sa, sizeof *sa); /* i386 connect */
        printf("{\"int80_socket\": %ld, \"int80_connect\": %ld}\n", fd32 < 0 ? fd32 : 0, rc);
        return 0;
    }
    if (strcmp(argv[1], "vfork") == 0) {
        static volatile int child_errno = -1;
        struct sockaddr_in sa;
        fill(&sa, host, port);
        pid_t pid = vfork();
        if (pid == 0) {
            int fd = bounded(socket(AF_INET, SOCK_STREAM, 0));
            child_errno = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0 ? 0 : errno;
            _exit(0);
        }
        waitpid(pid, NULL, 0);
        printf("{\"vfork_connect\": %d}\n", child_errno);
        return 0;
    }
    if (strcmp(argv[1], "connect") == 0) {
        struct sockaddr_in sa;
        fill(&sa, host, port);
        int fd = bounded(socket(AF_INET, SOCK_STREAM, 0));
        int rc = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0 ? 0 : errno;
        printf("{\"connect\": %d}\n", rc);
        return 0;
    }
    return 2;
}
