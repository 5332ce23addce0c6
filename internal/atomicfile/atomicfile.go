// Package atomicfile writes a file so that a reader sees either the old
// content or the new, never a part: a temporary file in the same directory,
// renamed over the target.
package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
)

// Write replaces path with data, mode perm. The temporary file is named
// after pattern (os.CreateTemp) in path's directory and is removed when
// anything fails; errors are returned unwrapped for the caller to name.
func Write(path, pattern string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), pattern)
	if err != nil {
		return err
	}
	name := tmp.Name()
	defer os.Remove(name) // after a successful rename there is nothing left to remove
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr, os.Chmod(name, perm)); err != nil {
		return err
	}
	return os.Rename(name, path)
}
