//go:build !linux

package sockio

import "syscall"

// Raw says the functions make raw system calls on this platform; where
// false they are not available and callers use net.Conn.
const Raw = false

// Read is not available: callers check Raw and read with net.Conn.
func Read(fd uintptr, p []byte) (int, syscall.Errno) { return 0, syscall.ENOSYS }

// Write2 is not available: callers check Raw and write with net.Conn.
func Write2(fd uintptr, a, b []byte) (int, syscall.Errno) { return 0, syscall.ENOSYS }
