//go:build unix && !linux

package demo

import (
	"os"
)

// termWidth returns the width of the terminal f, 0 if unknown.
func termWidth(*os.File) int { return 0 }
