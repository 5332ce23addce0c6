// Package procfs reads what the system benchmarks report about a process
// and the machine from /proc: CPU seconds, resident and peak memory, steal
// time and the load average. Linux only; the benchmarks run nowhere else.
package procfs

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of /proc times: 100 on every Linux
// architecture Go supports.
const clockTicks = 100

// CPUSeconds is utime+stime of the process (all its threads) from
// /proc/PID/stat: CPU time, robust to other load on the machine in a way
// wall time is not.
func CPUSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces: count from the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, errors.New("procfs: bad stat line")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("procfs: short stat line")
	}
	// f[0] is field 3 (state): utime is field 14, stime 15.
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("procfs: %w", err)
	}
	return float64(ut+st) / clockTicks, nil
}

// StatusBytes reads a kB field of /proc/PID/status (VmRSS, VmHWM) in bytes.
func StatusBytes(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("procfs: no %s", field)
}

// RSSBytes is the resident set size of the process (VmRSS).
func RSSBytes(pid int) (int64, error) { return StatusBytes(pid, "VmRSS") }

// ResetPeak resets the process's peak resident size (VmHWM) to its current
// one (Linux clear_refs 5), so a later VmHWM is the peak of what follows.
func ResetPeak(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// CPUTimes is the machine's aggregate CPU time from the first line of
// /proc/stat, in ticks: everything, and the part stolen by the hypervisor.
type CPUTimes struct{ Total, Steal int64 }

// MachineCPU reads CPUTimes now.
func MachineCPU() (CPUTimes, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return CPUTimes{}, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return CPUTimes{}, errors.New("procfs: bad /proc/stat")
	}
	var t CPUTimes
	for i, s := range f[1:9] { // guest time (fields 10, 11) is already in user
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return CPUTimes{}, fmt.Errorf("procfs: %w", err)
		}
		t.Total += v
		if i == 7 {
			t.Steal = v
		}
	}
	return t, nil
}

// StealShare is the stolen share of all CPU time between a and b.
func StealShare(a, b CPUTimes) float64 {
	if b.Total <= a.Total {
		return 0
	}
	return float64(b.Steal-a.Steal) / float64(b.Total-a.Total)
}

// LoadAverage is the 1-minute load average as /proc/loadavg prints it, or
// "?" when it cannot be read.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return "?"
}

// ListenOverflows is the machine's TcpExt ListenOverflows counter from
// /proc/net/netstat: SYNs dropped because a listening socket's accept
// queue was full (every process of the network namespace counts).
func ListenOverflows() (int64, error) {
	b, err := os.ReadFile("/proc/net/netstat")
	if err != nil {
		return 0, err
	}
	return parseNetstat(string(b), "TcpExt:", "ListenOverflows")
}

// parseNetstat finds field in the header line of prefix and returns the
// value at the same place in the next line of prefix.
func parseNetstat(text, prefix, field string) (int64, error) {
	lines := strings.Split(text, "\n")
	for i := 0; i+1 < len(lines); i++ {
		if !strings.HasPrefix(lines[i], prefix) || !strings.HasPrefix(lines[i+1], prefix) {
			continue
		}
		names, values := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		for j, n := range names {
			if n == field && j < len(values) {
				return strconv.ParseInt(values[j], 10, 64)
			}
		}
	}
	return 0, fmt.Errorf("procfs: no %s %s", prefix, field)
}
