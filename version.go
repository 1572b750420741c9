package clouddb

import (
	"runtime/debug"
	"sync"
)

// version is set at link time by release builds (-ldflags "-X clouddb.version=v1.2.3");
// otherwise Version reads it from the build information Go records.
var version string

var readVersion = sync.OnceValue(func() string {
	if version != "" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "-dirty"
			}
		}
	}
	if rev == "" {
		return "devel"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	return "devel-" + rev + modified
})

// Version is clouddb's version: a release's tag, or "devel-<commit>" for a build from a
// checkout ("-dirty" when it had uncommitted changes), or "devel" when Go recorded neither.
func Version() string { return readVersion() }
