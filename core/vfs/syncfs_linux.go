package vfs

import (
	"os"
	"syscall"
)

// syncFS writes back every dirty file and directory of the file system
// holding dir, and reports writeback errors (Linux 5.8+).
func syncFS(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, _, errno := syscall.Syscall(sysSyncfs, f.Fd(), 0, 0); errno != 0 {
		return &os.SyscallError{Syscall: "syncfs", Err: errno}
	}
	return nil
}
