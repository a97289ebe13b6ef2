/*
 * virtiofsd fuzzer: the entry points libFuzzer and the linker call
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef VIRTIOFSD_FUZZ_REQUEST_H
#define VIRTIOFSD_FUZZ_REQUEST_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Linked with -Wl,--wrap=openat,--wrap=openat64: every open the daemon does */
int __real_openat(int dirfd, const char *path, int flags, ...);
int __real_openat64(int dirfd, const char *path, int flags, ...);
int __wrap_openat(int dirfd, const char *path, int flags, ...);
int __wrap_openat64(int dirfd, const char *path, int flags, ...);

#endif /* VIRTIOFSD_FUZZ_REQUEST_H */
