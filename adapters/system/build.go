package system

import (
	"runtime/debug"
	"sync"
)

// ModulePath is rushgate's module path, looked up in the build info.
const ModulePath = "github.com/rushgate/rushgate"

// Set at link time to override what the build info says, e.g. for a release built from a
// source tarball:
//
//	go build -ldflags "-X github.com/rushgate/rushgate/adapters/system.version=v1.2.3
//	  -X github.com/rushgate/rushgate/adapters/system.revision=0e2e154" ./cmd/rushgate
var (
	version  string
	revision string
)

// Fallbacks when neither the link-time values nor the build info name a version or revision.
const (
	UnknownVersion  = "dev"
	UnknownRevision = "unknown"
)

// develVersion is what the build info reports for a main module built from a checkout
// without a version of its own.
const develVersion = "(devel)"

// Build names the rushgate build running.
type Build struct {
	// Version is rushgate's module version (v1.2.3, or a pseudo-version such as
	// v0.0.0-20260101120000-0e2e154abcde), UnknownVersion when the build does not say.
	Version string `json:"version"`
	// Revision is the VCS commit the binary was built from, with "+dirty" when the tree had
	// uncommitted changes, UnknownRevision when the build does not say (go install from the
	// module proxy, or a build with -buildvcs=false).
	Revision string `json:"revision"`
}

// ReadBuild returns this binary's build.
func ReadBuild() Build { return readBuild() }

// readBuild reads the build once: it does not change while the process runs.
var readBuild = sync.OnceValue(func() Build {
	info, _ := debug.ReadBuildInfo()
	return resolveBuild(version, revision, info)
})

// resolveBuild returns the build that the link-time values name, completed from info (nil
// when the binary carries none). rushgate's version is the main module's when rushgate is
// the binary, else that of the dependency an embedding program requires.
func resolveBuild(linkedVersion, linkedRevision string, info *debug.BuildInfo) Build {
	b := Build{Version: linkedVersion, Revision: linkedRevision}
	if info != nil && b.Version == "" {
		b.Version = moduleVersion(info)
	}
	if info != nil && b.Revision == "" && info.Main.Path == ModulePath {
		b.Revision = vcsRevision(info.Settings)
	}
	if b.Version == "" || b.Version == develVersion {
		b.Version = UnknownVersion
	}
	if b.Revision == "" {
		b.Revision = UnknownRevision
	}
	return b
}

// moduleVersion returns rushgate's module version in info, "" when it is not there.
func moduleVersion(info *debug.BuildInfo) string {
	if info.Main.Path == ModulePath {
		return info.Main.Version
	}
	for _, dep := range info.Deps {
		if dep.Path != ModulePath {
			continue
		}
		if dep.Replace != nil {
			return dep.Replace.Version
		}
		return dep.Version
	}
	return ""
}

// vcsRevision returns the commit the go command stamped, "" when it stamped none.
func vcsRevision(settings []debug.BuildSetting) string {
	var rev string
	var modified bool
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev != "" && modified {
		rev += "+dirty"
	}
	return rev
}
