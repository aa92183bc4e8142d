package sidecarproc

import "syscall"

// ownGroup puts a child in its own process group and has the kernel send it
// SIGTERM should its parent die without stopping it.
func ownGroup() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
