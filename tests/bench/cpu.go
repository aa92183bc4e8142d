package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// The host's CPU time from /proc/stat: what every process of the machine
// used, the benchmark's own, PostgreSQL's, the sidecar's, Redis's and, on a
// shared machine, other people's too. The figures are per 1,000 orders over a
// measured window, so read them next to the load average of the report.

// clockTicks is USER_HZ, the unit of /proc/stat: 100 on Linux.
const clockTicks = 100

// cpuTimes is the first line of /proc/stat, in seconds.
type cpuTimes struct {
	busy float64 // user + nice + system + irq + softirq (guest is inside user)
	all  float64 // busy + idle + iowait + steal
}

// readCPU reads the host's CPU times.
func readCPU() (cpuTimes, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}, fmt.Errorf("read /proc/stat: %w", err)
	}
	return parseCPU(string(b))
}

// parseCPU reads the aggregate "cpu" line of a /proc/stat text.
func parseCPU(stat string) (cpuTimes, error) {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return cpuTimes{}, errors.New("/proc/stat: no aggregate cpu line")
	}
	var v [8]float64
	for i := range v {
		n, err := strconv.ParseFloat(f[i+1], 64)
		if err != nil {
			return cpuTimes{}, fmt.Errorf("/proc/stat: field %d: %w", i+1, err)
		}
		v[i] = n / clockTicks
	}
	// user nice system idle iowait irq softirq steal
	busy := v[0] + v[1] + v[2] + v[5] + v[6]
	return cpuTimes{busy: busy, all: busy + v[3] + v[4] + v[7]}, nil
}

// cpuWindow measures the host CPU between its start and stop, and the CPU
// of this run's own processes: the PostgreSQL server (postmaster, its live
// children and the children it reaped), this benchmark process (producer,
// payments, ZSet scanners: the application side), the sidecar and
// redis-server. The first includes whatever else runs on the machine; the
// second does not, so it is the one to read on a shared machine.
type cpuWindow struct {
	start, end       cpuTimes
	began            time.Time
	wall             time.Duration // the window's length, once stopped
	ok               bool
	pids             []int
	ownStart, ownEnd float64
	ownOK            bool
}

// startCPU starts a window; pids are the processes besides PostgreSQL's and
// this one to count as the run's own (the sidecar, redis-server).
func (b *bench) startCPU(pids ...int) *cpuWindow {
	t, err := readCPU()
	w := &cpuWindow{start: t, began: time.Now(), ok: err == nil, pids: pids}
	w.ownStart, w.ownOK = b.ownCPU(pids)
	return w
}

// stop ends the window and returns the busy CPU seconds of the host in it.
func (w *cpuWindow) stop(b *bench) float64 {
	w.wall = time.Since(w.began)
	own, ok := b.ownCPU(w.pids)
	w.ownEnd, w.ownOK = own, ok && w.ownOK
	t, err := readCPU()
	if err != nil || !w.ok {
		w.ok = false
		return 0
	}
	w.end = t
	return w.end.busy - w.start.busy
}

// own returns the CPU seconds of the run's own processes in the window, 0
// when they could not be read (a server on another host).
func (w *cpuWindow) own() float64 {
	if !w.ownOK {
		return 0
	}
	return w.ownEnd - w.ownStart
}

// ownCPU sums the CPU seconds so far of PostgreSQL's processes (when the
// server runs on this host), this process and pids.
func (b *bench) ownCPU(pids []int) (float64, bool) {
	if b.postmaster == 0 {
		return 0, false
	}
	total := 0.0
	pm, ok := procCPU(b.postmaster, true)
	if !ok {
		return 0, false
	}
	total += pm
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, false
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid(pid) == b.postmaster {
			c, _ := procCPU(pid, false)
			total += c
		}
	}
	self, _ := procCPU(os.Getpid(), false)
	total += self
	for _, pid := range pids {
		if pid > 0 {
			c, _ := procCPU(pid, false)
			total += c
		}
	}
	return total, true
}

// procStat returns the fields of /proc/pid/stat after the command name.
func procStat(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(s[i+1:])
}

// procCPU returns utime + stime of pid in seconds, plus cutime + cstime (its
// reaped children) when children is set.
func procCPU(pid int, children bool) (float64, bool) {
	f := procStat(pid)
	// After the name: state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14).
	if len(f) < 15 {
		return 0, false
	}
	sum := 0.0
	idx := []int{11, 12}
	if children {
		idx = append(idx, 13, 14)
	}
	for _, i := range idx {
		v, _ := strconv.ParseFloat(f[i], 64)
		sum += v
	}
	return sum / clockTicks, true
}

// ppid returns the parent of pid, 0 when unknown.
func ppid(pid int) int {
	f := procStat(pid)
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// perThousand is CPU seconds per 1,000 orders (0 when undefined).
func perThousand(cpuS float64, orders int64) float64 {
	if orders <= 0 {
		return 0
	}
	return round3(cpuS / float64(orders) * 1000)
}

func round3(v float64) float64 {
	return float64(int64(v*1000+0.5)) / 1000
}
