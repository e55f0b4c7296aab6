package faultfs

import "fmt"

// Op names one kind of call on a vfs.FS or on a file opened through it. The
// wrappers count, trace, fail and crash calls by Op.
type Op uint8

// The calls. Every method of vfs.FS, afero.File, vfs.Locked and the optional
// file abilities maps to exactly one Op (Name is not a call: it does no I/O).
const (
	OpOpen      Op = iota // OpenFile without O_CREATE, Open
	OpCreate              // Create, OpenFile with O_CREATE
	OpRead                // Read, ReadAt
	OpWrite               // Write, WriteAt, WriteString
	OpSeek                // Seek
	OpSync                // File.Sync (fsync)
	OpDatasync            // File.Datasync (fdatasync)
	OpAllocate            // File.Allocate (fallocate)
	OpTruncate            // File.Truncate
	OpClose               // File.Close
	OpStat                // Fs.Stat, File.Stat, Lstat (afero.Lstater)
	OpReaddir             // File.Readdir, File.Readdirnames
	OpRemove              // Fs.Remove
	OpRemoveAll           // Fs.RemoveAll
	OpRename              // Fs.Rename
	OpMkdir               // Fs.Mkdir, Fs.MkdirAll
	OpLink                // Fs.Link
	OpSyncDir             // Fs.SyncDir
	OpLock                // Fs.Lock
	OpUnlock              // Locked.Unlock
	OpChmod               // Fs.Chmod, Fs.Chown, Fs.Chtimes
	OpBootID              // Fs.BootID
	OpSymlink             // Symlink (afero.Linker)
	OpReadlink            // Readlink (afero.LinkReader)
	numOps
)

// OpAny matches every Op in a Rule.
const OpAny Op = 255

var opNames = [numOps]string{
	OpOpen: "open", OpCreate: "create", OpRead: "read", OpWrite: "write",
	OpSeek: "seek", OpSync: "sync", OpDatasync: "datasync", OpAllocate: "allocate",
	OpTruncate: "truncate", OpClose: "close", OpStat: "stat", OpReaddir: "readdir",
	OpRemove: "remove", OpRemoveAll: "removeall", OpRename: "rename", OpMkdir: "mkdir",
	OpLink: "link", OpSyncDir: "syncdir", OpLock: "lock", OpUnlock: "unlock",
	OpChmod: "chmod", OpBootID: "bootid", OpSymlink: "symlink", OpReadlink: "readlink",
}

// String returns the lower-case name used in traces and in the rule DSL.
func (o Op) String() string {
	if o == OpAny {
		return "any"
	}
	if o < numOps {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Ops lists every Op in declaration order.
func Ops() []Op {
	ops := make([]Op, numOps)
	for i := range ops {
		ops[i] = Op(i)
	}
	return ops
}

// ParseOp maps a name produced by String back to its Op ("any" is OpAny).
func ParseOp(s string) (Op, error) {
	if s == "any" || s == "*" {
		return OpAny, nil
	}
	for i, n := range opNames {
		if n == s {
			return Op(i), nil
		}
	}
	return 0, fmt.Errorf("faultfs: unknown op %q", s)
}

// Kind groups Ops by their effect, so that rules and tests can say "every
// sync" or "every directory operation" without listing calls.
type Kind uint8

// The kinds. An Op may belong to more than one (creating a file is both a
// write and a directory operation).
const (
	KindRead   Kind = 1 << iota // observes state, changes nothing
	KindWrite                   // changes file data or metadata in the page cache
	KindSync                    // makes earlier changes durable
	KindDir                     // changes a directory entry (durable only after SyncDir)
	KindLock                    // takes or releases a lock
	KindHandle                  // manages a handle and changes no state (Close, Seek)
)

var opKinds = [numOps]Kind{
	OpOpen:      KindRead,
	OpCreate:    KindWrite | KindDir,
	OpRead:      KindRead,
	OpWrite:     KindWrite,
	OpSeek:      KindHandle,
	OpSync:      KindSync,
	OpDatasync:  KindSync,
	OpAllocate:  KindWrite,
	OpTruncate:  KindWrite,
	OpClose:     KindHandle,
	OpStat:      KindRead,
	OpReaddir:   KindRead,
	OpRemove:    KindWrite | KindDir,
	OpRemoveAll: KindWrite | KindDir,
	OpRename:    KindWrite | KindDir,
	OpMkdir:     KindWrite | KindDir,
	OpLink:      KindWrite | KindDir,
	OpSyncDir:   KindSync,
	OpLock:      KindLock,
	OpUnlock:    KindLock,
	OpChmod:     KindWrite,
	OpBootID:    KindRead,
	OpSymlink:   KindWrite | KindDir,
	OpReadlink:  KindRead,
}

// Kind reports the kinds o belongs to.
func (o Op) Kind() Kind {
	if o < numOps {
		return opKinds[o]
	}
	return 0
}

// Is reports whether o belongs to kind k.
func (o Op) Is(k Kind) bool { return o.Kind()&k != 0 }

// init checks the tables: every Op has a name and at least one kind, a read
// never writes or syncs, and every directory operation is also a write.
func init() {
	for i := Op(0); i < numOps; i++ {
		k := opKinds[i]
		switch {
		case opNames[i] == "":
			panic(fmt.Sprintf("faultfs: op %d has no name", i))
		case k == 0:
			panic(fmt.Sprintf("faultfs: op %s has no kind", i))
		case k&KindRead != 0 && k&(KindWrite|KindSync|KindDir) != 0:
			panic(fmt.Sprintf("faultfs: op %s is both a read and a write", i))
		case k&KindDir != 0 && k&KindWrite == 0:
			panic(fmt.Sprintf("faultfs: directory op %s is not a write", i))
		}
	}
}
