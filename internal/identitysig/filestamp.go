package identitysig

import (
	"fmt"
	"io"
	"io/fs"
	"os"
)

// fileStamp is what a stat tells of the keys file a read saw: which file
// (device and inode, links followed: a Secret or ConfigMap volume swaps
// its ..data link, extauthz renames a new file over the old), its size and
// its modification time. The zero stamp is no file: never read, or the
// open failed.
type fileStamp struct {
	info fs.FileInfo
}

// matches reports whether fi, a stat of the path now, is the file the
// stamp was taken of, unchanged. A rewrite in place that keeps the inode,
// the size and the modification time (two writes within one tick of the
// kernel's file clock) is invisible here; the next re-read that needs no
// stat sees it.
func (s fileStamp) matches(fi fs.FileInfo) bool {
	return s.info != nil && os.SameFile(s.info, fi) &&
		s.info.Size() == fi.Size() && s.info.ModTime().Equal(fi.ModTime())
}

// readStamped reads at most limit bytes of path (a longer file is an error)
// and stamps what it read: the stamp is taken of the open file, so it
// names the content read even when path is replaced meanwhile. open is
// os.Open outside tests.
func readStamped(open func(string) (*os.File, error), path string, limit int64) ([]byte, fileStamp, error) {
	f, err := open(path)
	if err != nil {
		return nil, fileStamp{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fileStamp{}, err
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fileStamp{info: fi}, err
	}
	if int64(len(b)) > limit {
		return nil, fileStamp{info: fi}, fmt.Errorf("%w: %s is over %d bytes", ErrKeys, path, limit)
	}
	return b, fileStamp{info: fi}, nil
}
