//go:build unix && !linux

package sidecarproc

import "syscall"

// ownGroup puts a child in its own process group.
func ownGroup() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
