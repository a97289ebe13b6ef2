/*
 * migstate DIR [gone]: holds what a live migration must carry (files open
 * for reading and for writing, a POSIX lock, a BSD lock, a directory half
 * read, and with "gone" one more file), signals DIR/.migrate-ready, waits
 * for the harness's DIR/.migrate-done, then uses all of it again and
 * checks.
 * With "gone", DIR/gone.txt must give EIO afterwards when .migrate-done
 * says "completed" (the destination lost it), and read right otherwise.
 * Prints "ok: ..." per check and exits 1 at the first failure.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define NENTRIES 200

static void fail(const char *what)
{
    printf("FAIL: %s: %s\n", what, strerror(errno));
    exit(1);
}

static int lock_state(int fd, short type)
{
    struct flock l = { .l_type = type, .l_whence = SEEK_SET, .l_len = 100 };

    return fcntl(fd, F_SETLK, &l);
}

/* In a child: whether another process sees our lock and cannot take it */
static int lock_seen_by_other(const char *path)
{
    pid_t pid = fork();
    int status;

    if (pid == 0) {
        struct flock l = { .l_type = F_WRLCK, .l_whence = SEEK_SET,
                           .l_len = 100 };
        int fd = open(path, O_RDWR);

        if (fd < 0 || fcntl(fd, F_GETLK, &l) < 0) {
            _exit(2);
        }
        if (l.l_type != F_WRLCK) {
            _exit(1);
        }
        _exit(lock_state(fd, F_WRLCK) < 0 && (errno == EAGAIN ||
                                               errno == EACCES) ? 0 : 3);
    }
    if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status)) {
        fail("fork");
    }
    return WEXITSTATUS(status);
}

/* In a child: whether a new open file cannot take an exclusive flock */
static int flock_seen_by_other(const char *path)
{
    pid_t pid = fork();
    int status;

    if (pid == 0) {
        int fd = open(path, O_RDONLY);

        if (fd < 0) {
            _exit(2);
        }
        _exit(flock(fd, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK ?
              0 : 1);
    }
    if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status)) {
        fail("fork");
    }
    return WEXITSTATUS(status);
}

int main(int argc, char **argv)
{
    char path[4096], buf[4096], result[64] = "";
    const char *dir = argv[1];
    int gone = argc > 2 && !strcmp(argv[2], "gone");
    int fd_r, fd_w, fd_l, fd_f, fd_g = -1, i, n, seen = 0;
    char names[NENTRIES + 2][256];
    struct dirent *de;
    DIR *d;
    FILE *f;

    if (argc < 2) {
        fprintf(stderr, "usage: migstate DIR [gone]\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    snprintf(path, sizeof(path), "%s/read.txt", dir);
    fd_r = open(path, O_RDONLY);
    if (fd_r < 0 || read(fd_r, buf, 4) != 4 || memcmp(buf, "0000", 4)) {
        fail("read.txt, first 4 bytes");
    }
    snprintf(path, sizeof(path), "%s/write.txt", dir);
    fd_w = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd_w < 0 || write(fd_w, "before\n", 7) != 7) {
        fail("write.txt before");
    }
    snprintf(path, sizeof(path), "%s/lock.txt", dir);
    fd_l = open(path, O_RDWR);
    if (fd_l < 0 || lock_state(fd_l, F_WRLCK) < 0) {
        fail("lock.txt: F_SETLK");
    }
    if (lock_seen_by_other(path)) {
        printf("FAIL: another process does not see the lock before\n");
        return 1;
    }
    snprintf(path, sizeof(path), "%s/flock.txt", dir);
    fd_f = open(path, O_RDONLY);
    if (fd_f < 0 || flock(fd_f, LOCK_EX | LOCK_NB) < 0) {
        fail("flock.txt: flock");
    }
    if (flock_seen_by_other(path)) {
        printf("FAIL: another open file can take the flock before\n");
        return 1;
    }
    if (gone) {
        snprintf(path, sizeof(path), "%s/gone.txt", dir);
        fd_g = open(path, O_RDONLY);
        if (fd_g < 0) {
            fail("gone.txt");
        }
    }
    snprintf(path, sizeof(path), "%s/dir", dir);
    d = opendir(path);
    if (!d) {
        fail("opendir");
    }
    /* About half the listing, then the migration */
    while (seen < NENTRIES / 2 && (de = readdir(d))) {
        snprintf(names[seen++], sizeof(names[0]), "%s", de->d_name);
    }
    printf("ok: holding 4 files, a POSIX lock, a BSD lock and a listing "
           "read to %d entries\n", seen);

    snprintf(path, sizeof(path), "%s/.migrate-ready", dir);
    close(open(path, O_CREAT | O_WRONLY, 0644));
    snprintf(path, sizeof(path), "%s/.migrate-done", dir);
    for (i = 0; !(f = fopen(path, "r")); i++) {
        if (i > 6000) {
            printf("FAIL: the harness never said the migration was done\n");
            return 1;
        }
        usleep(100000);
    }
    if (!fgets(result, sizeof(result), f)) {
        fail("reading .migrate-done");
    }
    fclose(f);
    result[strcspn(result, "\n")] = 0;
    printf("ok: migration %s, going on\n", result);

    n = read(fd_r, buf, sizeof(buf));
    if (n != 6 || memcmp(buf, "111111", 6)) {
        fail("read.txt, the rest");
    }
    printf("ok: read on through the file opened before\n");
    if (write(fd_w, "after\n", 6) != 6 || fsync(fd_w) < 0 || close(fd_w)) {
        fail("write.txt after");
    }
    printf("ok: wrote, synced and closed the file opened before\n");

    snprintf(path, sizeof(path), "%s/lock.txt", dir);
    n = lock_seen_by_other(path);
    if (n) {
        printf("FAIL: another process does not see the lock after (%d)\n", n);
        return 1;
    }
    if (lock_state(fd_l, F_UNLCK) < 0) {
        fail("unlock");
    }
    if (lock_seen_by_other(path) != 1) {
        printf("FAIL: the lock is still there after F_UNLCK\n");
        return 1;
    }
    close(fd_l);
    printf("ok: the lock held across, then released\n");

    snprintf(path, sizeof(path), "%s/flock.txt", dir);
    if (flock_seen_by_other(path)) {
        printf("FAIL: another open file can take the flock after\n");
        return 1;
    }
    if (flock(fd_f, LOCK_UN) < 0) {
        fail("flock LOCK_UN");
    }
    if (flock_seen_by_other(path) != 1) {
        printf("FAIL: the flock is still there after LOCK_UN\n");
        return 1;
    }
    close(fd_f);
    printf("ok: the BSD lock held across, then released\n");

    while ((de = readdir(d))) {
        if (seen >= NENTRIES + 2) {
            printf("FAIL: more entries than the directory has\n");
            return 1;
        }
        for (i = 0; i < seen; i++) {
            if (!strcmp(names[i], de->d_name)) {
                printf("FAIL: %s listed twice\n", de->d_name);
                return 1;
            }
        }
        snprintf(names[seen++], sizeof(names[0]), "%s", de->d_name);
    }
    closedir(d);
    if (seen != NENTRIES + 2) {
        printf("FAIL: the listing has %d entries, not %d\n", seen,
               NENTRIES + 2);
        return 1;
    }
    printf("ok: the listing went on where it was, each entry once\n");

    if (gone) {
        n = read(fd_g, buf, sizeof(buf));
        if (!strcmp(result, "completed")) {
            if (n >= 0 || errno != EIO) {
                printf("FAIL: gone.txt read gave %d (%s), not EIO\n", n,
                       n < 0 ? strerror(errno) : "data");
                return 1;
            }
            printf("ok: the file lost on the destination gives EIO\n");
        } else if (n != 5 || memcmp(buf, "gone\n", 5)) {
            fail("gone.txt on the source");
        } else {
            printf("ok: the source still reads the file it kept open\n");
        }
        close(fd_g);
    }
    close(fd_r);
    snprintf(path, sizeof(path), "%s/post.txt", dir);
    fd_w = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd_w < 0 || write(fd_w, result, strlen(result)) < 0 || close(fd_w)) {
        fail("post.txt");
    }
    return 0;
}
