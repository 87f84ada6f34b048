//go:build linux && !amd64 && !386

package logmgr

import "syscall"

const sysSyncfs = syscall.SYS_SYNCFS
