//go:build !unix

package dirlock

import "os"

// tryLock: no flock here; the dirs are not guarded.
func tryLock(*os.File) (bool, error) { return true, nil }
