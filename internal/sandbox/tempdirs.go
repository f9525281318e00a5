package sandbox

import (
	"io/fs"
	"os"
	"path/filepath"
)

// termDirPrefix names a terminal's host directory under the temp dir.
const TermDirPrefix = "agentworld-term-"

// chownTree gives root and everything under it to uid (and the same gid),
// never following symlinks.
func ChownTree(root string, uid int) error {
	return filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	})
}

// searchableByOthers reports whether every directory from dir up to / lets
// other users pass through (o+x).
func SearchableByOthers(dir string) bool {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	for {
		fi, err := os.Stat(abs)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		parent := filepath.Dir(abs)
		if parent == abs {
			return true
		}
		abs = parent
	}
}
