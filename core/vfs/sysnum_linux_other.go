//go:build linux && !amd64 && !386

package vfs

import "syscall"

const sysSyncfs = syscall.SYS_SYNCFS
