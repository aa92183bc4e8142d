package demo

import (
	"os"
	"syscall"
	"unsafe"
)

// childAttr puts a child in its own process group (a Ctrl-C in the terminal
// reaches only the demo, which stops its children itself) and has the kernel
// send it SIGTERM should the demo die without doing so.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}

// termWidth returns the width of the terminal f, 0 if unknown.
func termWidth(f *os.File) int {
	var ws struct{ rows, cols, x, y uint16 }
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), syscall.TIOCGWINSZ, uintptr(unsafe.Pointer(&ws)))
	if errno != 0 {
		return 0
	}
	return int(ws.cols)
}
