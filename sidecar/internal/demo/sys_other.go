//go:build unix && !linux

package demo

import (
	"os"
	"syscall"
)

// childAttr puts a child in its own process group: a Ctrl-C in the terminal
// reaches only the demo, which stops its children itself.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// termWidth returns the width of the terminal f, 0 if unknown.
func termWidth(*os.File) int { return 0 }
